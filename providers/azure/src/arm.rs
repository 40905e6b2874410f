//! Between xcsp attributes and Resource Manager JSON: the request body for each resource type,
//! and the attributes read back from what ARM returns (same names and shapes as the plan's, so
//! that a refreshed resource diffs cleanly against the spec).

use serde_json::{Value as Json, json};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, ProviderError};
use xcsp_core::{Value, tags};

/// The resource's tags: the plan's, or at least the stack and address.
pub fn resource_tags(d: &Reader, stack: &str) -> Json {
    let mut tags = match d.attrs.get("tags").map(Value::to_json) {
        Some(Json::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    tags.insert(tags::AZURE.stack.into(), json!(stack));
    tags.insert(tags::AZURE.address.into(), json!(d.address.to_string()));
    Json::Object(tags)
}

/// The last segment of an ARM id (`.../virtualNetworks/link` -> `link`).
pub fn leaf(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// The resource group segment of an ARM id.
pub fn resource_group_of(id: &str) -> Option<&str> {
    let mut segments = id.split('/');
    segments.find(|s| s.eq_ignore_ascii_case("resourceGroups"))?;
    segments.next().filter(|s| !s.is_empty())
}

fn s(v: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        other => Value::from_json(other),
    }
}

/// Sets `key` if Azure returned it.
fn put(out: &mut Attributes, key: &str, v: &Json) {
    if !v.is_null() {
        out.insert(key.to_string(), s(v));
    }
}

/// Sets `key`, null when Azure has none: a setting removed behind xcsp's back must read as
/// absent (drift), not be left out (which keeps the recorded value).
fn put_or_null(out: &mut Attributes, key: &str, v: &Json) {
    out.insert(key.to_string(), s(v));
}

/// Name, resource group, location, tags and id: what every top-level resource reads back.
fn common(body: &Json, in_group: bool) -> Attributes {
    let mut out = Attributes::new();
    put(&mut out, "name", &body["name"]);
    if in_group && let Some(rg) = body["id"].as_str().and_then(resource_group_of) {
        out.insert("resource_group".into(), Value::string(rg));
    }
    put(&mut out, "location", &body["location"]);
    put(&mut out, "tags", &body["tags"]);
    put(&mut out, "id", &body["id"]);
    out
}

/// [`common`] of a resource in the stack's resource group.
pub fn read_common(body: &Json) -> Attributes {
    common(body, true)
}

/// Whether ARM finished the resource: `Failed` (or `Canceled`) as it is; `Updating` while an
/// operation still runs on it (the Network provider's `Updating`, `Creating` or `Deleting`: one an
/// interrupted run started, say); `Succeeded` otherwise. The plan wants `Succeeded`, so a resource
/// whose create or update failed is drift the plan shows, and apply sends its PUT again (ARM's
/// answer to a failed resource: a gateway in `Failed` is put back by updating it, Microsoft Learn
/// "Reset a VPN gateway" / troubleshooting); one still `Updating` is an update that waits for the
/// running operation and sends nothing more when it ends as the spec asks
/// (`AzureProvider::adopt_in_flight`).
fn provisioning(out: &mut Attributes, body: &Json) {
    let state = match body["properties"]["provisioningState"].as_str() {
        Some("Failed" | "Canceled") => "Failed",
        Some("Updating" | "Creating" | "Deleting" | "Provisioning" | "Accepted") => "Updating",
        _ => "Succeeded",
    };
    out.insert("provisioning_state".into(), Value::string(state));
}

/// NSG rules as the plan writes them: protocol, ports, source, description.
pub fn nsg_rules(rules: &Json) -> Json {
    let rules = rules.as_array().cloned().unwrap_or_default();
    Json::Array(
        rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let protocol = match r["protocol"].as_str().unwrap_or("*") {
                    "tcp" => "Tcp",
                    "udp" => "Udp",
                    "icmp" => "Icmp",
                    "esp" => "Esp",
                    _ => "*",
                };
                json!({
                    "name": format!("xcsp-{i:03}"),
                    "properties": {
                        "protocol": protocol,
                        "sourceAddressPrefix": r["source"],
                        "sourcePortRange": "*",
                        "destinationAddressPrefix": "*",
                        "destinationPortRange": r["ports"],
                        "access": "Allow",
                        "priority": 200 + i,
                        "direction": "Inbound",
                        "description": r["description"],
                    }
                })
            })
            .collect(),
    )
}

fn read_nsg_rules(rules: &Json) -> Value {
    let mut rules: Vec<&Json> = rules.as_array().into_iter().flatten().collect();
    rules.sort_by_key(|r| r["properties"]["priority"].as_i64().unwrap_or_default());
    Value::List(
        rules
            .into_iter()
            .map(|r| {
                let p = &r["properties"];
                let fields = [
                    ("protocol", json!(p["protocol"].as_str().unwrap_or("*").to_ascii_lowercase())),
                    ("ports", p["destinationPortRange"].clone()),
                    ("source", p["sourceAddressPrefix"].clone()),
                    ("description", p["description"].clone()),
                ];
                Value::Map(fields.into_iter().map(|(k, v)| (k.to_string(), s(&v))).collect())
            })
            .collect(),
    )
}

/// The ipsec policy as the plan writes it (snake case) -> ARM's (camel case), and back.
const IPSEC_FIELDS: &[(&str, &str)] = &[
    ("ike_encryption", "ikeEncryption"),
    ("ike_integrity", "ikeIntegrity"),
    ("dh_group", "dhGroup"),
    ("ipsec_encryption", "ipsecEncryption"),
    ("ipsec_integrity", "ipsecIntegrity"),
    ("pfs_group", "pfsGroup"),
    ("sa_lifetime_seconds", "saLifeTimeSeconds"),
    ("sa_data_size_kilobytes", "saDataSizeKilobytes"),
];

fn ipsec_policy(policy: &Json) -> Json {
    let mut out = serde_json::Map::new();
    for (ours, arm) in IPSEC_FIELDS {
        if let Some(v) = policy.get(*ours) {
            out.insert((*arm).to_string(), v.clone());
        }
    }
    Json::Object(out)
}

fn read_ipsec_policy(policy: &Json) -> Value {
    let mut out = indexmap::IndexMap::new();
    for (ours, arm) in IPSEC_FIELDS {
        if !policy[*arm].is_null() {
            out.insert((*ours).to_string(), s(&policy[*arm]));
        }
    }
    Value::Map(out)
}

pub fn resource_group_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    Ok(json!({ "location": d.str("location")?, "tags": resource_tags(d, stack) }))
}

pub fn read_resource_group(body: &Json) -> Attributes {
    common(body, false)
}

/// A VNet body; `subnets` are the ones it has now (a PUT without them would remove them).
/// A VNet's body. A PUT replaces what it leaves out, so the subnets and the DHCP options (the DNS
/// servers `azure_virtual_network_dns_servers` sets) are sent as the VNet has them now (`current`,
/// its GET, or null for a new one).
pub fn vnet_body(d: &Reader, stack: &str, current: &Json) -> Result<Json, ProviderError> {
    let mut props = json!({ "addressSpace": { "addressPrefixes": d.json("address_space")? } });
    let subnets = &current["properties"]["subnets"];
    if subnets.as_array().is_some_and(|s| !s.is_empty()) {
        props["subnets"] = subnets.clone();
    }
    if !current["properties"]["dhcpOptions"].is_null() {
        props["dhcpOptions"] = current["properties"]["dhcpOptions"].clone();
    }
    Ok(json!({ "location": d.str("location")?, "tags": resource_tags(d, stack), "properties": props }))
}

/// The VNet `current` (its GET) with the DNS servers `servers` (none: Azure's own resolver), as
/// its PUT: ARM has no call of its own for a VNet's DNS servers (`dhcpOptions.dnsServers` is a
/// VNet property, network.json `DhcpOptions`).
pub fn vnet_with_dns(current: &Json, servers: Json) -> Json {
    let mut body = json!({
        "location": current["location"],
        "tags": current["tags"],
        "properties": current["properties"].clone(),
    });
    body["properties"]["dhcpOptions"] = json!({ "dnsServers": servers });
    body
}

/// A VNet's DNS servers as `azure_virtual_network_dns_servers` records them.
pub fn read_dns_servers(body: &Json) -> Attributes {
    let mut out = Attributes::new();
    if let Some(rg) = body["id"].as_str().and_then(resource_group_of) {
        out.insert("resource_group".into(), Value::string(rg));
    }
    put(&mut out, "virtual_network", &body["name"]);
    let servers = &body["properties"]["dhcpOptions"]["dnsServers"];
    out.insert("dns_servers".into(), Value::strings(servers.as_array().into_iter().flatten().filter_map(Json::as_str)));
    out
}

/// The id xcsp records for a VNet's DNS servers: the VNet's, with `/dnsServers`.
pub fn dns_servers_id(vnet_id: &str) -> String {
    format!("{vnet_id}/dnsServers")
}

pub fn read_vnet(body: &Json) -> Attributes {
    let mut out = common(body, true);
    provisioning(&mut out, body);
    put(&mut out, "address_space", &body["properties"]["addressSpace"]["addressPrefixes"]);
    out
}

pub fn subnet_body(d: &Reader) -> Result<Json, ProviderError> {
    let mut props = json!({ "addressPrefix": d.str("address_prefix")? });
    if d.attrs.contains_key("network_security_group") {
        props["networkSecurityGroup"] = json!({ "id": d.str("network_security_group")? });
    }
    if let Some(nat) = d.opt_str("nat_gateway") {
        props["natGateway"] = json!({ "id": nat });
    }
    if let Some(Value::Bool(b)) = d.attrs.get("default_outbound_access") {
        props["defaultOutboundAccess"] = json!(b);
    }
    Ok(json!({ "properties": props }))
}

pub fn read_subnet(body: &Json) -> Attributes {
    // `.../virtualNetworks/<vnet>/subnets/<name>`
    let vnet = body["id"].as_str().and_then(|id| id.rsplit('/').nth(2)).unwrap_or_default();
    let mut out = Attributes::new();
    put(&mut out, "name", &body["name"]);
    out.insert("virtual_network".into(), Value::string(vnet));
    put(&mut out, "address_prefix", &body["properties"]["addressPrefix"]);
    put_or_null(&mut out, "network_security_group", &body["properties"]["networkSecurityGroup"]["id"]);
    put_or_null(&mut out, "nat_gateway", &body["properties"]["natGateway"]["id"]);
    // Unset, Azure gives a subnet default outbound access (the property's description in
    // `virtualNetwork.json` 2024-03-01; private subnets are opt-in at that api-version).
    let doa = body["properties"]["defaultOutboundAccess"].as_bool().unwrap_or(true);
    out.insert("default_outbound_access".into(), Value::Bool(doa));
    put(&mut out, "id", &body["id"]);
    out
}

pub fn nsg_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    let rules = d.attrs.get("rules").map(|v| v.to_json()).unwrap_or(Json::Null);
    Ok(json!({
        "location": d.str("location")?,
        "tags": resource_tags(d, stack),
        "properties": { "securityRules": nsg_rules(&rules) }
    }))
}

pub fn read_nsg(body: &Json) -> Attributes {
    let mut out = common(body, true);
    provisioning(&mut out, body);
    out.insert("rules".into(), read_nsg_rules(&body["properties"]["securityRules"]));
    out
}

pub fn public_ip_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    let mut body = json!({
        "location": d.str("location")?,
        "tags": resource_tags(d, stack),
        "sku": { "name": d.str("sku")?, "tier": "Regional" },
        "properties": { "publicIPAllocationMethod": d.str("allocation")? }
    });
    if let Some(z) = d.attrs.get("zones") {
        body["zones"] = z.to_json();
    }
    Ok(body)
}

pub fn read_public_ip(body: &Json) -> Attributes {
    let mut out = common(body, true);
    provisioning(&mut out, body);
    put(&mut out, "sku", &body["sku"]["name"]);
    put(&mut out, "allocation", &body["properties"]["publicIPAllocationMethod"]);
    put_or_null(&mut out, "zones", &body["zones"]);
    put(&mut out, "ip_address", &body["properties"]["ipAddress"]);
    out
}

pub fn nat_gateway_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    let ips: Vec<Json> = d.json("public_ips")?.as_array().into_iter().flatten().map(|id| json!({ "id": id })).collect();
    let mut body = json!({
        "location": d.str("location")?,
        "tags": resource_tags(d, stack),
        "sku": { "name": d.str("sku")? },
        "properties": {
            "idleTimeoutInMinutes": d.int("idle_timeout_minutes")?,
            "publicIpAddresses": ips
        }
    });
    if let Some(z) = d.attrs.get("zones") {
        body["zones"] = z.to_json();
    }
    Ok(body)
}

pub fn read_nat_gateway(body: &Json) -> Attributes {
    let mut out = common(body, true);
    provisioning(&mut out, body);
    put(&mut out, "sku", &body["sku"]["name"]);
    put(&mut out, "idle_timeout_minutes", &body["properties"]["idleTimeoutInMinutes"]);
    let ips: Vec<Value> = body["properties"]["publicIpAddresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(Value::string))
        .collect();
    out.insert("public_ips".into(), Value::List(ips));
    put_or_null(&mut out, "zones", &body["zones"]);
    out
}

/// The active-active gateway: one IP configuration per public IP, each with its custom APIPA
/// BGP addresses.
pub fn gateway_body(d: &Reader, stack: &str, id: &str) -> Result<Json, ProviderError> {
    let pips = d.json("public_ips")?;
    let custom = d.json("custom_bgp_addresses").unwrap_or(Json::Array(vec![]));
    let subnet = d.str("subnet")?;
    let pips = pips.as_array().cloned().unwrap_or_default();
    let configs: Vec<Json> = pips
        .iter()
        .enumerate()
        .map(|(i, pip)| {
            json!({
                "name": format!("ip{}", i + 1),
                "properties": { "subnet": { "id": subnet }, "publicIPAddress": { "id": pip } }
            })
        })
        .collect();
    let peering: Vec<Json> = custom
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, addrs)| {
            json!({ "ipconfigurationId": format!("{id}/ipConfigurations/ip{}", i + 1), "customBgpIpAddresses": addrs })
        })
        .collect();
    let sku = d.str("sku")?;
    Ok(json!({
        "location": d.str("location")?,
        "tags": resource_tags(d, stack),
        "properties": {
            "gatewayType": "Vpn",
            "vpnType": d.str("vpn_type")?,
            "enableBgp": d.bool("enable_bgp"),
            "activeActive": d.bool("active_active"),
            "sku": { "name": sku, "tier": sku },
            "bgpSettings": { "asn": d.int("asn")?, "bgpPeeringAddresses": peering },
            "ipConfigurations": configs,
        }
    }))
}

pub fn read_gateway(body: &Json) -> Attributes {
    let p = &body["properties"];
    let mut out = common(body, true);
    provisioning(&mut out, body);
    put(&mut out, "sku", &p["sku"]["name"]);
    put(&mut out, "vpn_type", &p["vpnType"]);
    put(&mut out, "active_active", &p["activeActive"]);
    put(&mut out, "enable_bgp", &p["enableBgp"]);
    let configs: Vec<&Json> = p["ipConfigurations"].as_array().into_iter().flatten().collect();
    out.insert(
        "public_ips".into(),
        Value::List(configs.iter().map(|c| s(&c["properties"]["publicIPAddress"]["id"])).collect()),
    );
    if let Some(c) = configs.first() {
        put(&mut out, "subnet", &c["properties"]["subnet"]["id"]);
    }
    put(&mut out, "asn", &p["bgpSettings"]["asn"]);
    // The custom APIPA addresses of each IP configuration, in the order of the configurations.
    let peering: Vec<&Json> = p["bgpSettings"]["bgpPeeringAddresses"].as_array().into_iter().flatten().collect();
    let custom: Vec<Value> = configs
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            peering
                .iter()
                .find(|b| b["ipconfigurationId"].as_str().is_some_and(|id| leaf(id).eq_ignore_ascii_case(name)))
                .map(|b| s(&b["customBgpIpAddresses"]))
                .unwrap_or(Value::List(vec![]))
        })
        .collect();
    out.insert("custom_bgp_addresses".into(), Value::List(custom));
    out
}

pub fn local_gateway_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    let mut props = json!({ "gatewayIpAddress": d.str("gateway_ip_address")? });
    if d.attrs.contains_key("bgp_peering_address") {
        props["bgpSettings"] = json!({ "asn": d.int("asn")?, "bgpPeeringAddress": d.str("bgp_peering_address")? });
    }
    if d.attrs.contains_key("address_space") {
        props["localNetworkAddressSpace"] = json!({ "addressPrefixes": d.json("address_space")? });
    }
    Ok(json!({ "location": d.str("location")?, "tags": resource_tags(d, stack), "properties": props }))
}

pub fn read_local_gateway(body: &Json) -> Attributes {
    let p = &body["properties"];
    let mut out = common(body, true);
    provisioning(&mut out, body);
    put(&mut out, "gateway_ip_address", &p["gatewayIpAddress"]);
    put_or_null(&mut out, "bgp_peering_address", &p["bgpSettings"]["bgpPeeringAddress"]);
    put_or_null(&mut out, "asn", &p["bgpSettings"]["asn"]);
    put_or_null(&mut out, "address_space", &p["localNetworkAddressSpace"]["addressPrefixes"]);
    out
}

pub fn connection_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    let gateway = d.str("virtual_network_gateway")?;
    let mut props = json!({
        "connectionType": "IPsec",
        // The SDK models these references as whole resources with required `properties`.
        "virtualNetworkGateway1": { "id": gateway, "properties": {} },
        "localNetworkGateway2": { "id": d.str("local_network_gateway")?, "properties": {} },
        "connectionProtocol": d.str("connection_protocol")?,
        "enableBgp": d.bool("enable_bgp"),
        "sharedKey": d.str("shared_key")?,
    });
    if let Ok(policy) = d.json("ipsec_policy") {
        props["ipsecPolicies"] = json!([ipsec_policy(&policy)]);
    }
    if let Some(dpd) = d.int("dpd_timeout_seconds").ok() {
        props["dpdTimeoutSeconds"] = json!(dpd);
    }
    // One custom APIPA address per gateway instance, `ip<i + 1>` (see gateway_body).
    if let Ok(Json::Array(custom)) = d.json("custom_bgp_addresses") {
        let entries: Vec<Json> = custom
            .iter()
            .enumerate()
            .map(|(i, ip)| json!({ "ipConfigurationId": format!("{gateway}/ipConfigurations/ip{}", i + 1), "customBgpIpAddress": ip }))
            .collect();
        props["gatewayCustomBgpIpAddresses"] = Json::Array(entries);
    }
    Ok(json!({ "location": d.str("location")?, "tags": resource_tags(d, stack), "properties": props }))
}

pub fn read_connection(body: &Json) -> Attributes {
    let p = &body["properties"];
    let mut out = common(body, true);
    provisioning(&mut out, body);
    put(&mut out, "virtual_network_gateway", &p["virtualNetworkGateway1"]["id"]);
    put(&mut out, "local_network_gateway", &p["localNetworkGateway2"]["id"]);
    put(&mut out, "connection_protocol", &p["connectionProtocol"]);
    put(&mut out, "enable_bgp", &p["enableBgp"]);
    let policy = p["ipsecPolicies"].as_array().and_then(|a| a.first());
    out.insert("ipsec_policy".into(), policy.map(read_ipsec_policy).unwrap_or(Value::Null));
    // The custom APIPA address on each IP configuration `ip<i + 1>`, in instance order.
    let custom: Vec<(usize, Value)> = p["gatewayCustomBgpIpAddresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let n = leaf(c["ipConfigurationId"].as_str()?).strip_prefix("ip")?.parse::<usize>().ok()?;
            Some((n.checked_sub(1)?, s(&c["customBgpIpAddress"])))
        })
        .collect();
    let instances = custom.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
    let by_instance: Vec<Value> =
        (0..instances).map(|i| custom.iter().find(|(n, _)| *n == i).map_or(Value::Null, |(_, v)| v.clone())).collect();
    out.insert("custom_bgp_addresses".into(), if custom.is_empty() { Value::Null } else { Value::List(by_instance) });
    if p["dpdTimeoutSeconds"].is_i64() {
        put(&mut out, "dpd_timeout_seconds", &p["dpdTimeoutSeconds"]);
    }
    put(&mut out, "connection_status", &p["connectionStatus"]);
    // Traffic through the connection since it was made (read-only; `xcsp status` shows it).
    for (key, field) in [("ingress_bytes", "ingressBytesTransferred"), ("egress_bytes", "egressBytesTransferred")] {
        if let Some(n) = p[field].as_i64() {
            out.insert(key.into(), Value::int(n));
        }
    }
    out
}

pub fn identity_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    Ok(json!({ "location": d.str("location")?, "tags": resource_tags(d, stack) }))
}

pub fn read_identity(body: &Json) -> Attributes {
    let mut out = common(body, true);
    put(&mut out, "principal_id", &body["properties"]["principalId"]);
    put(&mut out, "client_id", &body["properties"]["clientId"]);
    put(&mut out, "tenant_id", &body["properties"]["tenantId"]);
    out
}

pub fn federated_body(d: &Reader) -> Result<Json, ProviderError> {
    Ok(json!({ "properties": {
        "issuer": d.str("issuer")?,
        "subject": d.str("subject")?,
        "audiences": d.json("audiences")?,
    }}))
}

pub fn read_federated(body: &Json) -> Attributes {
    let mut out = Attributes::new();
    put(&mut out, "name", &body["name"]);
    // `.../userAssignedIdentities/<identity>/federatedIdentityCredentials/<name>`
    if let Some(identity) = body["id"].as_str().and_then(|id| id.rsplit('/').nth(2)) {
        out.insert("identity".into(), Value::string(identity));
    }
    put(&mut out, "issuer", &body["properties"]["issuer"]);
    put(&mut out, "subject", &body["properties"]["subject"]);
    put(&mut out, "audiences", &body["properties"]["audiences"]);
    put(&mut out, "id", &body["id"]);
    out
}

pub fn read_role_definition(body: &Json) -> Attributes {
    let p = &body["properties"];
    let mut out = Attributes::new();
    put(&mut out, "name", &p["roleName"]);
    put(&mut out, "scope", &p["assignableScopes"][0]);
    put(&mut out, "actions", &p["permissions"][0]["actions"]);
    put(&mut out, "id", &body["id"]);
    out
}

pub fn read_role_assignment(body: &Json) -> Attributes {
    let p = &body["properties"];
    let mut out = Attributes::new();
    put(&mut out, "name", &body["name"]);
    put(&mut out, "scope", &p["scope"]);
    put(&mut out, "principal", &p["principalId"]);
    put(&mut out, "principal_type", &p["principalType"]);
    put(&mut out, "role_definition_id", &p["roleDefinitionId"]);
    put(&mut out, "id", &body["id"]);
    out
}

/// What a failed delete means when the thing (or its parent) is already gone.
pub(crate) fn gone(e: &ProviderError) -> bool {
    match e {
        ProviderError::NotFound { .. } => true,
        ProviderError::Failed { code, .. } => {
            matches!(code.as_str(), "ParentResourceNotFound" | "ResourceGroupNotFound")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nsg_rules_read_back_as_written() {
        let rules = json!([
            {"protocol": "tcp", "ports": "10250", "source": "10.0.0.0/16", "description": "kubelet"},
            {"protocol": "udp", "ports": "6081", "source": "10.128.0.0/14", "description": "geneve"}
        ]);
        let arm = nsg_rules(&rules);
        assert_eq!(arm[1]["properties"]["protocol"], "Udp");
        assert_eq!(read_nsg_rules(&arm).to_json(), rules);
    }
}
