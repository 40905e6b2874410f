//! Values the spec can reference that exist only once resources do (`network.link.tunnels`,
//! `workload_identity.capz.client_id`, ...), read back from what apply recorded. With them the
//! spec is loaded again after apply, and outputs that depended on them become known.

use std::collections::BTreeMap;

use xcsp_core::provider::Attributes;
use xcsp_core::{Address, ResourceType as T, Value};

use crate::validate::Model;

/// Key of one computed export: `kind.name.attribute` (`kind.attribute` for unlabelled blocks).
pub fn key(kind: &str, name: Option<&str>, attribute: &str) -> String {
    match name {
        Some(n) => format!("{kind}.{n}.{attribute}"),
        None => format!("{kind}.{attribute}"),
    }
}

/// Every computed export that `recorded` (cloud id and attributes by address) makes known.
pub fn computed<'a>(
    model: &Model,
    recorded: impl Fn(&Address) -> Option<(&'a str, &'a Attributes)>,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let id = |t: T, name: &str, index: Option<u32>| {
        let mut a = Address::new(t, name);
        a.index = index;
        recorded(&a).map(|(id, _)| Value::string(id))
    };
    let attr = |t: T, name: &str, index: Option<u32>, attribute: &str| {
        let mut a = Address::new(t, name);
        a.index = index;
        recorded(&a).and_then(|(_, attrs)| attrs.get(attribute).cloned())
    };
    let mut put = |k: String, v: Option<Value>| {
        if let Some(v) = v {
            out.insert(k, v);
        }
    };
    put(key("azure", None, "resource_group_id"), id(T::AzureResourceGroup, "main", None));
    for n in &model.networks {
        let name = n.name.value.as_str();
        put(key("network", Some(name), "vnet_id"), id(T::AzureVirtualNetwork, name, None));
        put(key("network", Some(name), "vpn_gateway_id"), id(T::AzureVpnGateway, name, None));
        let ips: Option<Vec<Value>> = (0..2).map(|i| attr(T::AzurePublicIp, name, Some(i), "ip_address")).collect();
        put(key("network", Some(name), "gateway_public_ips"), ips.map(Value::List));
        let tunnels: Option<Vec<Value>> = (0..2u32)
            .flat_map(|c| (1..=2).map(move |k| (c, k)))
            .map(|(c, k)| {
                let outside = attr(T::AwsVpnConnection, name, Some(c), &format!("tunnel{k}_address"))?;
                let inside = attr(T::AwsVpnConnection, name, Some(c), &format!("tunnel{k}_inside_cidr"))?;
                let conn = id(T::AwsVpnConnection, name, Some(c))?;
                let fields = [("vpn_connection_id", conn), ("aws_outside_ip", outside), ("inside_cidr", inside)];
                Some(Value::Map(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
            })
            .collect();
        put(key("network", Some(name), "tunnels"), tunnels.map(Value::List));
    }
    for i in &model.identities {
        let name = i.name.value.as_str();
        for a in ["client_id", "principal_id"] {
            put(key("workload_identity", Some(name), a), attr(T::AzureUserAssignedIdentity, name, None, a));
        }
    }
    for p in &model.pools {
        let name = p.name.value.as_str();
        put(key("worker_pool", Some(name), "subnet_id"), id(T::AzureSubnet, &format!("pool-{name}"), None));
    }
    out
}
