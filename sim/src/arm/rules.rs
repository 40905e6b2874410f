//! Semantic rules of the network and identity providers that a lenient emulator would miss:
//! address spaces, references between resources, gateway subnet/SKU/public-IP rules, APIPA and
//! ASN ranges, resources in use. The computed fields ARM adds to stored bodies are in
//! [`super::complete`].

use super::Ctx;
use super::error::ArmError;
use super::kinds::{self, Kind};
use super::refs::{is, resolve};
use super::store::{Resource, Store};
use ipnet::IpNet;
use serde_json::Value;
use std::net::Ipv4Addr;

/// ARM resource-name rules (length, characters).
pub fn check_name(name: &str, min: usize, max: usize, what: &str) -> Result<(), ArmError> {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || "._-()".contains(c));
    let first_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '(');
    let last_ok = !name.ends_with('.');
    if name.len() < min || name.len() > max || !ok_chars || !first_ok || !last_ok {
        return Err(ArmError::bad_request(
            "InvalidResourceName",
            format!(
                "Resource name {name} is invalid for a {what}. The name can be up to {max} characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'."
            ),
        ));
    }
    Ok(())
}

fn parse_prefix(p: &str, field: &str) -> Result<IpNet, ArmError> {
    p.parse::<IpNet>().map_err(|_| {
        ArmError::bad_request(
            "InvalidAddressPrefixFormat",
            format!("Address prefix {p} of {field} is not in a valid format (CIDR notation expected)."),
        )
    })
}

fn prefixes_of(props: &Value, single: &str, many: &str) -> Vec<String> {
    let mut v: Vec<String> =
        props[many].as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect();
    if let Some(s) = props[single].as_str() {
        v.push(s.to_string());
    }
    v
}

/// Subnets (lower-case keys) used by gateways, with the ip configuration using them.
/// The IP configurations in a subnet: a gateway's, and a network interface's (CAPZ's NICs).
fn subnet_users(store: &Store, subnet_key: &str) -> Vec<String> {
    let mut users: Vec<String> =
        store.gateway_ip_configs().into_iter().filter(|(_, s, _)| s == subnet_key).map(|(id, _, _)| id).collect();
    for nic in store.of_kind(&kinds::NIC) {
        for cfg in nic.body["properties"]["ipConfigurations"].as_array().into_iter().flatten() {
            let subnet = cfg["properties"]["subnet"]["id"].as_str().unwrap_or_default().to_ascii_lowercase();
            if subnet == subnet_key {
                users.push(cfg["id"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    users
}

fn in_use_subnet(id: &str, users: &[String]) -> ArmError {
    let name = id.rsplit('/').next().unwrap_or(id);
    ArmError::bad_request(
        "InUseSubnetCannotBeDeleted",
        format!(
            "Subnet {name} is in use by {} and cannot be deleted. In order to delete the subnet, delete all the resources within the subnet. See aka.ms/deletesubnet.",
            users.join(", ")
        ),
    )
}

/// Checks subnets of a virtual network against its address space and each other.
fn check_subnets(store: &Store, vnet_id: &str, space: &[IpNet], subnets: &[(String, Value)]) -> Result<(), ArmError> {
    let mut seen: Vec<(String, IpNet)> = Vec::new();
    for (name, props) in subnets {
        let prefixes = prefixes_of(props, "addressPrefix", "addressPrefixes");
        if prefixes.is_empty() {
            return Err(ArmError::bad_request(
                "NoAddressPrefixOrPoolProvided",
                format!("Subnet {name} has no address prefix."),
            ));
        }
        for p in prefixes {
            let net = parse_prefix(&p, &format!("subnet {name}"))?;
            if net.trunc() != net {
                return Err(ArmError::bad_request(
                    "InvalidCIDRNotation",
                    format!(
                        "The address prefix {p} in resource {vnet_id}/subnets/{name} has an invalid CIDR notation. For the given prefix length, the address prefix should be {}.",
                        net.trunc()
                    ),
                ));
            }
            if !space.iter().any(|s| s.contains(&net)) {
                return Err(ArmError::bad_request(
                    "NetcfgSubnetRangeOutsideVnet",
                    format!(
                        "Subnet '{name}' is not valid because its IP address range is outside the IP address range of virtual network '{}'.",
                        vnet_id.rsplit('/').next().unwrap_or(vnet_id)
                    ),
                ));
            }
            if let Some((other, _)) = seen.iter().find(|(o, n)| o != name && (n.contains(&net) || net.contains(n))) {
                return Err(ArmError::bad_request(
                    "NetcfgSubnetRangesOverlap",
                    format!(
                        "Subnet '{name}' is not valid because its IP address range overlaps with that of an existing subnet '{other}' in virtual network."
                    ),
                ));
            }
            seen.push((name.clone(), net));
        }
        for reference in kinds::SUBNET_REFERENCES {
            if let Some(r) = props[reference.field]["id"].as_str() {
                resolve(store, r, &format!("{vnet_id}/subnets/{name}"), reference.kind)?;
            }
        }
    }
    Ok(())
}

fn vnet_space(props: &Value) -> Result<Vec<IpNet>, ArmError> {
    prefixes_of(&props["addressSpace"], "", "addressPrefixes")
        .iter()
        .map(|p| parse_prefix(p, "the virtual network"))
        .collect()
}

fn apipa(ip: &str) -> bool {
    ip.parse::<Ipv4Addr>().is_ok_and(|a| {
        let o = a.octets();
        o[0] == 169 && o[1] == 254 && (o[2] == 21 || o[2] == 22)
    })
}

fn check_apipa(ip: &str, what: &str) -> Result<(), ArmError> {
    if !apipa(ip) {
        return Err(ArmError::bad_request(
            "InvalidCustomBgpIpAddress",
            format!(
                "The custom BGP IP address {ip} of {what} is invalid. Custom (APIPA) BGP addresses must be in the range 169.254.21.0 to 169.254.22.255."
            ),
        ));
    }
    Ok(())
}

fn reserved_asn(asn: i64, azure_side: bool) -> bool {
    matches!(asn, 8074 | 8075 | 12076 | 65517..=65520 | 23456 | 64496..=64511 | 65535..=65551)
        || (!azure_side && asn == 65515)
        || asn <= 0
        || asn > 4_294_967_295
}

/// Checks a PUT body's semantics (the body's JSON shape is already checked).
pub fn check_put(
    store: &Store,
    ctx: &Ctx,
    kind: &'static Kind,
    id: &str,
    body: &Value,
    existing: Option<&Resource>,
    location: &str,
) -> Result<(), ArmError> {
    let props = &body["properties"];
    super::compute::check_put(store, ctx, kind, id, body, location)?;
    super::gallery::check_put(store, kind, id, body, ctx.now)?;
    if is(kind, &kinds::VNET) {
        let space = vnet_space(props)?;
        if space.is_empty() {
            return Err(ArmError::bad_request(
                "InvalidAddressSpace",
                "A virtual network must have at least one address prefix in properties.addressSpace.addressPrefixes.",
            ));
        }
        let subnets: Vec<(String, Value)> = props["subnets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| (s["name"].as_str().unwrap_or_default().to_string(), s["properties"].clone()))
            .collect();
        if let Some((_, _)) = subnets.iter().find(|(n, _)| n.is_empty()) {
            return Err(ArmError::invalid_content("Every subnet in properties.subnets needs a name."));
        }
        check_unique_children(id, props["subnets"].as_array())?;
        check_subnets(store, id, &space, &subnets)?;
        if existing.is_some() {
            for child in store.children(id, &kinds::SUBNET) {
                if !subnets.iter().any(|(n, _)| n.eq_ignore_ascii_case(&child.name)) {
                    let users = subnet_users(store, &child.id.to_ascii_lowercase());
                    if !users.is_empty() {
                        return Err(in_use_subnet(&child.id, &users));
                    }
                }
            }
        }
    } else if is(kind, &kinds::SUBNET) {
        let vnet_id = &id[..id.to_ascii_lowercase().rfind("/subnets/").expect("subnet id")];
        let vnet = store.get(vnet_id).expect("parent checked");
        let space = vnet_space(&vnet.body["properties"])?;
        let name = id.rsplit('/').next().unwrap_or_default().to_string();
        let mut all: Vec<(String, Value)> = store
            .children(vnet_id, &kinds::SUBNET)
            .iter()
            .filter(|s| !s.name.eq_ignore_ascii_case(&name))
            .map(|s| (s.name.clone(), s.body["properties"].clone()))
            .collect();
        all.insert(0, (name, props.clone()));
        check_subnets(store, vnet_id, &space, &all)?;
    } else if is(kind, &kinds::NSG) {
        check_unique_children(id, props["securityRules"].as_array())?;
        for r in props["securityRules"].as_array().into_iter().flatten() {
            check_rule_priority(&r["properties"])?;
        }
    } else if is(kind, &kinds::SECURITY_RULE) {
        check_rule_priority(props)?;
    } else if is(kind, &kinds::PUBLIC_IP) {
        let standard = body["sku"]["name"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("Standard"));
        let dynamic = props["publicIPAllocationMethod"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("Dynamic"));
        if standard && dynamic {
            return Err(ArmError::bad_request(
                "StandardSkuPublicIPAddressesMustBeStatic",
                format!("Standard sku publicIp {id} must be Static allocation method."),
            ));
        }
        if let Some(e) = existing {
            let was = e.body["sku"]["name"].as_str().unwrap_or("Basic");
            let now = body["sku"]["name"].as_str().unwrap_or("Basic");
            if !was.eq_ignore_ascii_case(now)
                && !store.gateway_ip_configs().iter().all(|(_, _, p)| *p != e.id.to_ascii_lowercase())
            {
                return Err(ArmError::bad_request(
                    "PublicIPAddressInUse",
                    format!("Public IP address {id} is in use and its SKU cannot be changed."),
                ));
            }
        }
    } else if is(kind, &kinds::NAT_GATEWAY) {
        check_nat_gateway(store, id, body)?;
    } else if is(kind, &kinds::VNG) {
        check_gateway(store, ctx, id, body, location)?;
    } else if is(kind, &kinds::LNG) {
        if props["gatewayIpAddress"].as_str().is_none() && props["fqdn"].as_str().is_none() {
            return Err(ArmError::bad_request(
                "LocalNetworkGatewayMustHaveIpAddressOrFqdn",
                "A local network gateway needs properties.gatewayIpAddress or properties.fqdn.",
            ));
        }
        if let Some(ip) = props["gatewayIpAddress"].as_str()
            && ip.parse::<std::net::IpAddr>().is_err()
        {
            return Err(ArmError::bad_request(
                "InvalidGatewayIpAddress",
                format!("Gateway IP address {ip} is not a valid IP address."),
            ));
        }
        for p in prefixes_of(&props["localNetworkAddressSpace"], "", "addressPrefixes") {
            parse_prefix(&p, "the local network gateway")?;
        }
        if let Some(asn) = props["bgpSettings"]["asn"].as_i64()
            && reserved_asn(asn, false)
        {
            return Err(ArmError::bad_request(
                "InvalidAsn",
                format!("ASN {asn} is reserved by Azure or IANA and cannot be used for a local network gateway."),
            ));
        }
        if let Some(addr) = props["bgpSettings"]["bgpPeeringAddress"].as_str()
            && addr.starts_with("169.254.")
        {
            check_apipa(addr, "the local network gateway's BGP peering address")?;
        }
    } else if is(kind, &kinds::CONNECTION) {
        check_connection(store, id, body, location)?;
    } else if is(kind, &kinds::FEDERATED_CREDENTIAL) {
        let issuer = props["issuer"].as_str().unwrap_or_default();
        if !issuer.starts_with("https://") {
            return Err(ArmError::bad_request(
                "InvalidIssuer",
                format!("The issuer '{issuer}' is not a valid https URL."),
            ));
        }
        if props["subject"].as_str().unwrap_or_default().is_empty() {
            return Err(ArmError::bad_request("InvalidSubject", "The subject must not be empty."));
        }
        if props["audiences"].as_array().map(Vec::len) != Some(1) {
            return Err(ArmError::bad_request("InvalidAudience", "Exactly one audience is allowed."));
        }
        let identity = &id[..id.to_ascii_lowercase().rfind("/federatedidentitycredentials/").expect("fic id")];
        if existing.is_none() && store.children(identity, &kinds::FEDERATED_CREDENTIAL).len() >= 20 {
            return Err(ArmError::bad_request(
                "FederatedIdentityCredentialsLimitExceeded",
                "A user-assigned identity can have at most 20 federated identity credentials.",
            ));
        }
    }
    Ok(())
}

/// A NAT gateway's public IPs: each must exist (a reference ARM cannot resolve is refused as for
/// a subnet's) and not be allocated to another resource already (`PublicIPAddressInUse`, with
/// ARM's message as gardener/gardener-extension-provider-azure#757 quotes it). NAT gateway takes
/// Standard public IPs only (Microsoft Learn, "What is Azure NAT Gateway?"), but no source gives
/// ARM's code for a Basic one, so the sim does not refuse it (a gap in `sim/README.md`).
fn check_nat_gateway(store: &Store, id: &str, body: &Value) -> Result<(), ArmError> {
    for r in body["properties"]["publicIpAddresses"].as_array().into_iter().flatten() {
        let Some(pip_id) = r["id"].as_str() else { continue };
        let pip = resolve(store, pip_id, id, &kinds::PUBLIC_IP)?;
        let key = pip.id.to_ascii_lowercase();
        let other = store
            .gateway_ip_configs()
            .into_iter()
            .find(|(_, _, p)| *p == key)
            .map(|(cfg, _, _)| cfg)
            .or_else(|| store.nat_gateway_of_ip(&key).filter(|n| !n.eq_ignore_ascii_case(id)));
        if let Some(other) = other {
            return Err(ArmError::bad_request(
                "PublicIPAddressInUse",
                format!(
                    "Resource {id} is referencing public IP address {} that is already allocated to resource {other}.",
                    pip.id
                ),
            ));
        }
    }
    Ok(())
}

/// Two embedded children (subnets, security rules) with one name (names compare
/// case-insensitively): ARM's network provider answers `InvalidRequestFormat` with a
/// `DuplicateResourceName` detail.
fn check_unique_children(id: &str, items: Option<&Vec<Value>>) -> Result<(), ArmError> {
    let mut seen: Vec<String> = Vec::new();
    for name in items.into_iter().flatten().filter_map(|c| c["name"].as_str()) {
        if seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
            return Err(ArmError::bad_request("InvalidRequestFormat", "Cannot parse the request.").with_detail(
                "DuplicateResourceName",
                format!("Resource {id} has two child resources with the same name ({name})."),
            ));
        }
        seen.push(name.to_string());
    }
    Ok(())
}

fn check_rule_priority(props: &Value) -> Result<(), ArmError> {
    let p = props["priority"].as_i64().unwrap_or(0);
    if !(100..=4096).contains(&p) {
        return Err(ArmError::bad_request(
            "SecurityRuleInvalidPriority",
            format!("Security rule has invalid Priority {p}. Value provided: {p} Allowed range 100-4096."),
        ));
    }
    Ok(())
}

fn check_gateway(store: &Store, ctx: &Ctx, id: &str, body: &Value, location: &str) -> Result<(), ArmError> {
    let props = &body["properties"];
    let gw_type = props["gatewayType"].as_str().unwrap_or("Vpn");
    let sku = props["sku"]["name"].as_str().unwrap_or("Basic").to_string();
    let configs = props["ipConfigurations"].as_array().cloned().unwrap_or_default();
    if configs.is_empty() {
        return Err(ArmError::bad_request(
            "VirtualNetworkGatewayMustHaveIpConfiguration",
            format!("Virtual network gateway {id} must have at least one IP configuration."),
        ));
    }
    let active_active = props["activeActive"].as_bool().unwrap_or(false);
    if gw_type.eq_ignore_ascii_case("Vpn") {
        if active_active && configs.len() != 2 && configs.len() != 3 {
            return Err(ArmError::bad_request(
                "ActiveActiveGatewayRequiresTwoIpConfigurations",
                format!(
                    "Active-active virtual network gateway {id} requires two IP configurations; {} given.",
                    configs.len()
                ),
            ));
        }
        if !active_active && configs.len() > 1 {
            return Err(ArmError::bad_request(
                "MoreThanOneIpConfigurationNotAllowedForNonActiveActiveGateway",
                format!("Virtual network gateway {id} is not active-active and can have only one IP configuration."),
            ));
        }
        if sku.eq_ignore_ascii_case("Basic") && (active_active || props["enableBgp"].as_bool().unwrap_or(false)) {
            return Err(ArmError::bad_request(
                "BasicSkuGatewayDoesNotSupportBgpOrActiveActive",
                "The Basic gateway SKU supports neither BGP nor active-active.",
            ));
        }
    }
    let az = sku.to_ascii_uppercase().ends_with("AZ");
    let existing = store.get(id);
    let non_az_vpn = ["VpnGw1", "VpnGw2", "VpnGw3", "VpnGw4", "VpnGw5"].iter().any(|s| s.eq_ignore_ascii_case(&sku));
    if existing.is_none() && non_az_vpn && ctx.config.block_non_az_vpn_skus {
        return Err(ArmError::bad_request(
            "NonAzSkusNotAllowedForVPNGateway",
            format!(
                "VPN gateway SKU {sku} without availability zones can no longer be created (since 2025-01-01). Use {sku}AZ."
            ),
        ));
    }
    let mut subnet_vnet: Option<String> = None;
    for (i, c) in configs.iter().enumerate() {
        let cname = c["name"].as_str().unwrap_or_default();
        if cname.is_empty() {
            return Err(ArmError::invalid_content(format!("properties.ipConfigurations[{i}].name is required.")));
        }
        let Some(subnet_id) = c["properties"]["subnet"]["id"].as_str() else {
            return Err(ArmError::bad_request(
                "InvalidRequestContent",
                format!("IP configuration {cname} of gateway {id} needs properties.subnet.id."),
            ));
        };
        let subnet = resolve(store, subnet_id, id, &kinds::SUBNET)?;
        if !subnet.name.eq_ignore_ascii_case("GatewaySubnet") {
            return Err(ArmError::bad_request(
                "InvalidGatewaySubnet",
                format!(
                    "Subnet {subnet_id} referenced by virtual network gateway {id} is not named GatewaySubnet. A gateway can only be deployed in the subnet named 'GatewaySubnet'."
                ),
            ));
        }
        let vnet_key = subnet_id.to_ascii_lowercase()
            [..subnet_id.to_ascii_lowercase().rfind("/subnets/").expect("subnet")]
            .to_string();
        match &subnet_vnet {
            None => subnet_vnet = Some(vnet_key.clone()),
            Some(v) if *v != vnet_key => {
                return Err(ArmError::bad_request(
                    "GatewayIpConfigurationsMustUseSameSubnet",
                    "All IP configurations of a gateway must use the same GatewaySubnet.",
                ));
            }
            _ => {}
        }
        let vnet_loc = store.get(&vnet_key).and_then(|v| v.body["location"].as_str()).unwrap_or_default();
        if vnet_loc != location {
            return Err(ArmError::bad_request(
                "InvalidResourceReference",
                format!(
                    "Resource {subnet_id} referenced by resource {id} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
                ),
            ));
        }
        let Some(pip_id) = c["properties"]["publicIPAddress"]["id"].as_str() else {
            if gw_type.eq_ignore_ascii_case("Vpn") {
                return Err(ArmError::bad_request(
                    "VpnGatewayRequiresPublicIp",
                    format!("IP configuration {cname} of VPN gateway {id} needs a public IP address."),
                ));
            }
            continue;
        };
        let pip = resolve(store, pip_id, id, &kinds::PUBLIC_IP)?;
        if pip.body["location"].as_str().unwrap_or_default() != location {
            return Err(ArmError::bad_request(
                "InvalidResourceReference",
                format!(
                    "Resource {pip_id} referenced by resource {id} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
                ),
            ));
        }
        let my_cfg = format!("{id}/ipConfigurations/{cname}").to_ascii_lowercase();
        if let Some((user, _, _)) = store.gateway_ip_configs().into_iter().find(|(cfg, _, p)| {
            *p == pip.id.to_ascii_lowercase()
                && !cfg.to_ascii_lowercase().starts_with(&format!("{}/", id.to_ascii_lowercase()))
        }) {
            return Err(ArmError::bad_request(
                "PublicIPAddressInUse",
                format!("Resource {my_cfg} cannot use public IP {pip_id} since it is already in use by {user}."),
            ));
        }
        if configs
            .iter()
            .filter(|o| {
                o["properties"]["publicIPAddress"]["id"].as_str().is_some_and(|p| p.eq_ignore_ascii_case(pip_id))
            })
            .count()
            > 1
        {
            return Err(ArmError::bad_request(
                "PublicIPAddressInUse",
                format!("Public IP {pip_id} is used by more than one IP configuration of gateway {id}."),
            ));
        }
        let pip_sku = pip.body["sku"]["name"].as_str().unwrap_or("Basic");
        if az && !pip_sku.eq_ignore_ascii_case("Standard") {
            return Err(ArmError::bad_request(
                "AzSkuGatewayRequiresStandardSkuPublicIp",
                format!(
                    "Virtual network gateway {id} with availability-zone SKU {sku} requires Standard SKU public IP addresses; {pip_id} is {pip_sku}."
                ),
            ));
        }
        if sku.eq_ignore_ascii_case("Basic") && !pip_sku.eq_ignore_ascii_case("Basic") {
            return Err(ArmError::bad_request(
                "BasicSkuGatewayRequiresBasicSkuPublicIp",
                format!("Basic SKU gateway {id} requires a Basic SKU public IP; {pip_id} is {pip_sku}."),
            ));
        }
    }
    let bgp = &props["bgpSettings"];
    if let Some(asn) = bgp["asn"].as_i64()
        && reserved_asn(asn, true)
    {
        return Err(ArmError::bad_request(
            "InvalidAsn",
            format!("ASN {asn} is reserved by Azure or IANA and cannot be used for a virtual network gateway."),
        ));
    }
    for (i, a) in bgp["bgpPeeringAddresses"].as_array().into_iter().flatten().enumerate() {
        for ip in a["customBgpIpAddresses"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            check_apipa(ip, &format!("properties.bgpSettings.bgpPeeringAddresses[{i}]"))?;
        }
    }
    Ok(())
}

fn check_connection(store: &Store, id: &str, body: &Value, location: &str) -> Result<(), ArmError> {
    let props = &body["properties"];
    let Some(gw1) = props["virtualNetworkGateway1"]["id"].as_str() else {
        return Err(ArmError::invalid_content("properties.virtualNetworkGateway1.id is required."));
    };
    let gw = resolve(store, gw1, id, &kinds::VNG)?;
    if gw.body["location"].as_str().unwrap_or_default() != location {
        return Err(ArmError::bad_request(
            "InvalidResourceReference",
            format!(
                "Resource {gw1} referenced by resource {id} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
            ),
        ));
    }
    let ctype = props["connectionType"].as_str().unwrap_or_default();
    if ctype.eq_ignore_ascii_case("IPsec") {
        let Some(lng) = props["localNetworkGateway2"]["id"].as_str() else {
            return Err(ArmError::bad_request(
                "LocalNetworkGatewayRequired",
                "An IPsec connection needs properties.localNetworkGateway2.",
            ));
        };
        resolve(store, lng, id, &kinds::LNG)?;
    } else if ctype.eq_ignore_ascii_case("Vnet2Vnet") {
        let Some(gw2) = props["virtualNetworkGateway2"]["id"].as_str() else {
            return Err(ArmError::bad_request(
                "VirtualNetworkGateway2Required",
                "A Vnet2Vnet connection needs properties.virtualNetworkGateway2.",
            ));
        };
        resolve(store, gw2, id, &kinds::VNG)?;
    }
    if let Some(k) = props["sharedKey"].as_str() {
        check_shared_key(k)?;
    }
    for (i, policy) in props["ipsecPolicies"].as_array().into_iter().flatten().enumerate() {
        check_ipsec_policy(policy, i)?;
    }
    let gw_configs: Vec<String> = gw.body["properties"]["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["id"].as_str().map(str::to_ascii_lowercase))
        .collect();
    for c in props["gatewayCustomBgpIpAddresses"].as_array().into_iter().flatten() {
        let ip = c["customBgpIpAddress"].as_str().unwrap_or_default();
        check_apipa(ip, &format!("connection {id}"))?;
        let cfg = c["ipConfigurationId"].as_str().unwrap_or_default();
        if !gw_configs.contains(&cfg.to_ascii_lowercase()) {
            return Err(ArmError::bad_request(
                "InvalidResourceReference",
                format!(
                    "Resource {cfg} referenced by resource {id} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
                ),
            ));
        }
    }
    if props["enableBgp"].as_bool() == Some(true) && gw.body["properties"]["enableBgp"].as_bool() != Some(true) {
        return Err(ArmError::bad_request(
            "BgpNotEnabledOnVirtualNetworkGateway",
            format!("Connection {id} enables BGP but gateway {gw1} does not."),
        ));
    }
    Ok(())
}

/// The limits Microsoft Learn documents for a custom IPsec/IKE policy (the enums are checked in
/// `validate`): a quick-mode SA lifetime of at least 300 s, and GCM encryption and integrity for
/// IPsec chosen together, with the same algorithm and key length.
fn check_ipsec_policy(policy: &Value, i: usize) -> Result<(), ArmError> {
    let field = |f: &str| format!("properties.ipsecPolicies[{i}].{f}");
    if let Some(secs) = policy["saLifeTimeSeconds"].as_i64()
        && secs < 300
    {
        return Err(ArmError::invalid_content(format!(
            "{} is {secs}; the IPsec SA lifetime must be at least 300 seconds.",
            field("saLifeTimeSeconds")
        )));
    }
    let enc = policy["ipsecEncryption"].as_str().unwrap_or_default();
    let int = policy["ipsecIntegrity"].as_str().unwrap_or_default();
    let gcm = |a: &str| a.to_ascii_uppercase().starts_with("GCMAES");
    if (gcm(enc) || gcm(int)) && !enc.eq_ignore_ascii_case(int) {
        return Err(ArmError::invalid_content(format!(
            "{} is {enc} and {} is {int}; a GCMAES IPsec encryption needs the same GCMAES algorithm and key length as IPsec integrity, and the other way round.",
            field("ipsecEncryption"),
            field("ipsecIntegrity")
        )));
    }
    Ok(())
}

/// Azure pre-shared keys: 1-128 printable ASCII characters.
pub fn check_shared_key(k: &str) -> Result<(), ArmError> {
    if k.is_empty() || k.len() > 128 || !k.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ArmError::bad_request(
            "InvalidSharedKey",
            "The shared key must be 1 to 128 printable ASCII characters.",
        ));
    }
    Ok(())
}

/// Gateways (lower-case keys) a write to this resource holds.
pub fn gateways_of(kind: &'static Kind, id: &str, body: &Value) -> Vec<String> {
    if is(kind, &kinds::VNG) {
        return vec![id.to_ascii_lowercase()];
    }
    if is(kind, &kinds::CONNECTION) {
        return ["virtualNetworkGateway1", "virtualNetworkGateway2"]
            .iter()
            .filter_map(|f| body["properties"][f]["id"].as_str().map(str::to_ascii_lowercase))
            .collect();
    }
    Vec::new()
}

/// Checks that nothing depends on a resource about to be deleted.
pub fn check_delete(store: &Store, kind: &'static Kind, r: &Resource) -> Result<(), ArmError> {
    super::compute::check_delete(store, kind, r)?;
    super::gallery::check_delete(store, kind, r)?;
    let key = r.id.to_ascii_lowercase();
    if is(kind, &kinds::SUBNET) {
        let users = subnet_users(store, &key);
        if !users.is_empty() {
            return Err(in_use_subnet(&r.id, &users));
        }
    } else if is(kind, &kinds::VNET) {
        for s in store.children(&key, &kinds::SUBNET) {
            let users = subnet_users(store, &s.id.to_ascii_lowercase());
            if !users.is_empty() {
                return Err(in_use_subnet(&s.id, &users));
            }
        }
    } else if is(kind, &kinds::PUBLIC_IP) {
        let user = store
            .gateway_ip_configs()
            .into_iter()
            .find(|(_, _, p)| *p == key)
            .map(|(cfg, _, _)| cfg)
            .or_else(|| store.nat_gateway_of_ip(&key));
        if let Some(cfg) = user {
            return Err(ArmError::bad_request(
                "PublicIPAddressCannotBeDeleted",
                format!(
                    "Public IP address {} can not be deleted since it is still allocated to resource {cfg}. In order to delete the public IP, disassociate/detach the Public IP address from the resource. To learn how to do this, see aka.ms/deletepublicip.",
                    r.id
                ),
            ));
        }
    } else if is(kind, &kinds::VNG) || is(kind, &kinds::LNG) {
        let fields: &[&str] = if is(kind, &kinds::VNG) {
            &["virtualNetworkGateway1", "virtualNetworkGateway2"]
        } else {
            &["localNetworkGateway2"]
        };
        let users: Vec<String> = store
            .of_kind(&kinds::CONNECTION)
            .filter(|c| {
                fields
                    .iter()
                    .any(|f| c.body["properties"][f]["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(&key)))
            })
            .map(|c| c.id.clone())
            .collect();
        if !users.is_empty() {
            let what = if is(kind, &kinds::VNG) { "Virtual network gateway" } else { "Local network gateway" };
            return Err(ArmError::bad_request(
                "VirtualNetworkGatewayCannotBeDeleted",
                format!(
                    "{what} {} cannot be deleted because the following connections still reference it: {}. Delete the connections first.",
                    r.id,
                    users.join(", ")
                ),
            ));
        }
    } else if let Some(reference) = kinds::subnet_reference(kind) {
        let users = store.subnets_referencing(reference.field, &key);
        if !users.is_empty() {
            return Err(ArmError::bad_request(
                reference.in_use_code,
                format!(
                    "{} {} cannot be deleted because it is in use by the following resources: {}.",
                    reference.what,
                    r.id,
                    users.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apipa_range_is_169_254_21_0_to_22_255() {
        assert!(apipa("169.254.21.2"));
        assert!(apipa("169.254.22.255"));
        assert!(!apipa("169.254.20.255"));
        assert!(!apipa("169.254.23.0"));
        assert!(!apipa("10.0.0.1"));
    }

    #[test]
    fn reserved_asns() {
        assert!(!reserved_asn(65515, true));
        assert!(reserved_asn(65515, false));
        assert!(reserved_asn(12076, true));
        assert!(!reserved_asn(64512, false));
    }

    #[test]
    fn names() {
        assert!(check_name("vnet-1_a", 1, 80, "x").is_ok());
        assert!(check_name("bad/name", 1, 80, "x").is_err());
        assert!(check_name("ends.", 1, 80, "x").is_err());
        assert!(check_name("", 1, 80, "x").is_err());
    }
}
