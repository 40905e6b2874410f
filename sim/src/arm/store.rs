//! The in-memory ARM store: resources keyed by lower-cased id, and the long-running operations
//! (their records and their settling are in [`super::lro`]).

use super::kinds::{self, Kind};
use super::operation::Operation;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// What a stored entry is.
#[derive(Debug, Clone, Copy)]
pub enum ResKind {
    ResourceGroup,
    Typed(&'static Kind),
    RoleAssignment,
    /// A custom role definition made through the API.
    RoleDefinition,
}

impl ResKind {
    pub fn arm_type(&self) -> &'static str {
        match self {
            ResKind::ResourceGroup => "Microsoft.Resources/resourceGroups",
            ResKind::Typed(k) => k.arm_type,
            ResKind::RoleAssignment => "Microsoft.Authorization/roleAssignments",
            ResKind::RoleDefinition => "Microsoft.Authorization/roleDefinitions",
        }
    }
}

/// One stored resource.
#[derive(Debug, Clone)]
pub struct Resource {
    /// The id with the casing of its creation.
    pub id: String,
    pub kind: ResKind,
    pub name: String,
    /// The body as GET returns it, except embedded children and computed back-references.
    pub body: Value,
    pub created_at: Instant,
    /// The last write to it (a PUT, a shared key): a tunnel renegotiates from here.
    pub changed_at: Instant,
    pub seq: u64,
    /// The operation in flight on this resource, if any.
    pub op: Option<String>,
    /// Write-only secret (a connection's shared key).
    pub secret: Option<String>,
}

/// The store.
#[derive(Debug, Default)]
pub struct Store {
    pub resources: BTreeMap<String, Resource>,
    pub ops: HashMap<String, Operation>,
    seq: u64,
    ip_counter: u32,
    /// The storage accounts' blob service ([`super::blob`]), keyed by [`Store::blob_account`].
    pub blobs: super::blob::Blobs,
}

impl Store {
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A fresh public address from a documentation-looking but routable-shaped range.
    pub fn next_public_ip(&mut self) -> String {
        self.ip_counter += 1;
        let n = self.ip_counter;
        format!("20.{}.{}.{}", 40 + (n >> 16) % 200, (n >> 8) & 0xff, (n & 0xff).max(1))
    }

    /// The blob service's name for the storage account `id` as it exists now (its id and creation
    /// sequence: an account deleted and made again under the same name starts empty, as Azure's
    /// does). `None` when there is no such account.
    pub fn blob_account(&self, id: &str) -> Option<String> {
        let r =
            self.get(id).filter(|r| matches!(r.kind, ResKind::Typed(k) if std::ptr::eq(k, &kinds::STORAGE_ACCOUNT)))?;
        Some(format!("{}#{}", r.id.to_ascii_lowercase(), r.seq))
    }

    /// The storage account named `name` (names are unique across Azure), by id.
    pub fn storage_account_named(&self, name: &str) -> Option<&Resource> {
        self.of_kind(&kinds::STORAGE_ACCOUNT).find(|r| r.name.eq_ignore_ascii_case(name))
    }

    pub fn get(&self, id: &str) -> Option<&Resource> {
        self.resources.get(&id.to_ascii_lowercase())
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Resource> {
        self.resources.get_mut(&id.to_ascii_lowercase())
    }

    pub fn insert(&mut self, r: Resource) {
        self.resources.insert(r.id.to_ascii_lowercase(), r);
    }

    /// Removes a resource and everything under it (children, or a resource group's content).
    pub fn remove_tree(&mut self, key: &str) -> Vec<Resource> {
        let key = key.to_ascii_lowercase();
        let prefix = format!("{key}/");
        let doomed: Vec<String> = self
            .resources
            .range(key.clone()..)
            .take_while(|(k, _)| **k == key || k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        doomed.into_iter().filter_map(|k| self.resources.remove(&k)).collect()
    }

    /// Resources strictly under `key`.
    pub fn descendants(&self, key: &str) -> impl Iterator<Item = (&String, &Resource)> {
        let prefix = format!("{}/", key.to_ascii_lowercase());
        self.resources.range(prefix.clone()..).take_while(move |(k, _)| k.starts_with(&prefix))
    }

    /// Direct children of `parent_key` of the given kind, in creation order.
    pub fn children(&self, parent_key: &str, kind: &'static Kind) -> Vec<&Resource> {
        let prefix = format!("{}/{}/", parent_key.to_ascii_lowercase(), kind.segment.to_ascii_lowercase());
        let mut v: Vec<&Resource> = self
            .resources
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, _)| !k[prefix.len()..].contains('/'))
            .map(|(_, r)| r)
            .collect();
        v.sort_by_key(|r| r.seq);
        v
    }

    pub fn of_kind(&self, kind: &'static Kind) -> impl Iterator<Item = &Resource> {
        self.resources.values().filter(move |r| matches!(r.kind, ResKind::Typed(k) if std::ptr::eq(k, kind)))
    }

    /// VNG ip configurations: (ipconfig id, subnet key, public ip key) for every gateway.
    pub fn gateway_ip_configs(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for r in self.of_kind(&kinds::VNG) {
            for c in r.body["properties"]["ipConfigurations"].as_array().into_iter().flatten() {
                let id = c["id"].as_str().unwrap_or_default().to_string();
                let subnet = c["properties"]["subnet"]["id"].as_str().unwrap_or_default().to_ascii_lowercase();
                let pip = c["properties"]["publicIPAddress"]["id"].as_str().unwrap_or_default().to_ascii_lowercase();
                out.push((id, subnet, pip));
            }
        }
        out
    }

    /// The NAT gateway whose `publicIpAddresses` holds the public IP `pip_key`.
    pub fn nat_gateway_of_ip(&self, pip_key: &str) -> Option<String> {
        self.of_kind(&kinds::NAT_GATEWAY)
            .find(|n| {
                n.body["properties"]["publicIpAddresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|r| r["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(pip_key)))
            })
            .map(|n| n.id.clone())
    }

    /// Subnets referencing `target_key` through `properties.<field>.id`.
    pub fn subnets_referencing(&self, field: &str, target_key: &str) -> Vec<String> {
        self.of_kind(&kinds::SUBNET)
            .filter(|s| s.body["properties"][field]["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(target_key)))
            .map(|s| s.id.clone())
            .collect()
    }

    /// What a GET of a NIC or an availability set shows of the VMs that use it.
    pub fn render_users(&self, kind: &'static Kind, id: &str, body: &mut Value) {
        if std::ptr::eq(kind, &kinds::NIC) {
            if let Some(vm) = self.vm_using_nic(id) {
                body["properties"]["virtualMachine"] = json!({"id": vm});
            }
        } else if std::ptr::eq(kind, &kinds::AVAILABILITY_SET) {
            let vms: Vec<Value> = self
                .of_kind(&kinds::VM)
                .filter(|vm| {
                    vm.body["properties"]["availabilitySet"]["id"].as_str().is_some_and(|a| a.eq_ignore_ascii_case(id))
                })
                .map(|vm| json!({"id": vm.id}))
                .collect();
            body["properties"]["virtualMachines"] = Value::Array(vms);
        }
    }

    /// The VM whose network profile names `nic_id`, if any.
    pub fn vm_using_nic(&self, nic_id: &str) -> Option<String> {
        self.of_kind(&kinds::VM)
            .find(|vm| {
                vm.body["properties"]["networkProfile"]["networkInterfaces"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|n| n["id"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(nic_id)))
            })
            .map(|vm| vm.id.clone())
    }

    /// The body as GET returns it: embedded children and computed back-references added.
    pub fn render(&self, key: &str) -> Value {
        let key = key.to_ascii_lowercase();
        let Some(r) = self.resources.get(&key) else { return Value::Null };
        let mut body = r.body.clone();
        let ResKind::Typed(kind) = r.kind else { return body };
        for ck in kinds::embedded_children(kind) {
            let items: Vec<Value> = self.children(&key, ck).iter().map(|c| self.render(&c.id)).collect();
            body["properties"][ck.embed_as.expect("embedded")] = Value::Array(items);
        }
        if std::ptr::eq(kind, &kinds::SUBNET) {
            let cfgs: Vec<Value> = self
                .gateway_ip_configs()
                .into_iter()
                .filter(|(_, s, _)| *s == key)
                .map(|(id, _, _)| json!({"id": id}))
                .collect();
            if !cfgs.is_empty() {
                body["properties"]["ipConfigurations"] = Value::Array(cfgs);
            }
        } else if std::ptr::eq(kind, &kinds::VNG) {
            let cfgs = body["properties"]["ipConfigurations"].clone();
            let peers = body["properties"]["bgpSettings"]["bgpPeeringAddresses"].as_array_mut();
            for (i, peer) in peers.into_iter().flatten().enumerate() {
                let pip = cfgs[i]["properties"]["publicIPAddress"]["id"].as_str().and_then(|p| self.get(p));
                let ips: Vec<Value> =
                    pip.and_then(|p| p.body["properties"].get("ipAddress").cloned()).into_iter().collect();
                peer["tunnelIpAddresses"] = Value::Array(ips);
            }
        } else if std::ptr::eq(kind, &kinds::PUBLIC_IP) {
            if let Some((id, _, _)) = self.gateway_ip_configs().into_iter().find(|(_, _, p)| *p == key) {
                body["properties"]["ipConfiguration"] = json!({"id": id});
            }
            if let Some(nat) = self.nat_gateway_of_ip(&key) {
                body["properties"]["natGateway"] = json!({"id": nat});
            }
        }
        self.render_users(kind, &r.id, &mut body);
        if std::ptr::eq(kind, &kinds::NSG) {
            body["properties"]["defaultSecurityRules"] = default_security_rules(&r.id);
        }
        if let Some(reference) = kinds::subnet_reference(kind) {
            let subnets: Vec<Value> =
                self.subnets_referencing(reference.field, &key).into_iter().map(|id| json!({"id": id})).collect();
            if !subnets.is_empty() {
                body["properties"]["subnets"] = Value::Array(subnets);
            }
        }
        body
    }
}

/// The six rules every NSG carries.
fn default_security_rules(nsg_id: &str) -> Value {
    let rules = [
        (
            "AllowVnetInBound",
            "Allow inbound traffic from all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Inbound",
        ),
        (
            "AllowAzureLoadBalancerInBound",
            "Allow inbound traffic from azure load balancer",
            "AzureLoadBalancer",
            "*",
            "Allow",
            65001,
            "Inbound",
        ),
        ("DenyAllInBound", "Deny all inbound traffic", "*", "*", "Deny", 65500, "Inbound"),
        (
            "AllowVnetOutBound",
            "Allow outbound traffic from all VMs to all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Outbound",
        ),
        (
            "AllowInternetOutBound",
            "Allow outbound traffic from all VMs to Internet",
            "*",
            "Internet",
            "Allow",
            65001,
            "Outbound",
        ),
        ("DenyAllOutBound", "Deny all outbound traffic", "*", "*", "Deny", 65500, "Outbound"),
    ];
    Value::Array(
        rules
            .iter()
            .map(|(name, desc, src, dst, access, prio, dir)| {
                json!({
                    "name": name,
                    "id": format!("{nsg_id}/defaultSecurityRules/{name}"),
                    "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
                    "properties": {
                        "description": desc, "protocol": "*", "sourcePortRange": "*", "destinationPortRange": "*",
                        "sourceAddressPrefix": src, "destinationAddressPrefix": dst, "access": access,
                        "priority": prio, "direction": dir, "provisioningState": "Succeeded",
                    }
                })
            })
            .collect(),
    )
}

/// A weak etag as the network provider writes them.
pub fn new_etag() -> String {
    format!("W/\"{}\"", uuid::Uuid::new_v4())
}
