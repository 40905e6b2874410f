//! Hand-written request-body checks, transcribed from the 2024-03-01 / 2023-01-31 / 2022-04-01
//! specs for the fields the emulator reads: JSON types, required fields and enums. A violation is
//! answered 400 `InvalidRequestContent`, as ARM does. (The conformance suite in `tests/` checks the
//! same bodies against the real Swagger files independently.)

use super::error::ArmError;
use super::kinds::{self, Kind};
use serde_json::Value;

#[derive(Clone, Copy, PartialEq)]
enum Ty {
    Object,
    Array,
    String,
    Integer,
    Boolean,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Integer => "integer",
            Ty::Boolean => "boolean",
        }
    }
    fn matches(self, v: &Value) -> bool {
        match self {
            Ty::Object => v.is_object(),
            Ty::Array => v.is_array(),
            Ty::String => v.is_string(),
            Ty::Integer => v.is_i64() || v.is_u64(),
            Ty::Boolean => v.is_boolean(),
        }
    }
}

/// Collects violations at JSON paths.
struct Check<'a> {
    errors: Vec<String>,
    root: &'a Value,
}

impl<'a> Check<'a> {
    fn at<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
        let mut cur = v;
        for seg in path.split('.').filter(|s| !s.is_empty()) {
            cur = cur.get(seg)?;
        }
        if cur.is_null() { None } else { Some(cur) }
    }

    /// Checks the type of `path` under `v` (absent or null is fine unless `required`).
    fn ty_in(&mut self, v: &Value, base: &str, path: &str, ty: Ty, required: bool) -> bool {
        match Self::at(v, path) {
            None => {
                if required {
                    self.errors.push(format!("Required property '{base}{path}' is missing."));
                }
                false
            }
            Some(x) if ty.matches(x) => true,
            Some(x) => {
                self.errors
                    .push(format!("Error converting value {x} to type '{}' for property '{base}{path}'.", ty.name()));
                false
            }
        }
    }

    fn ty(&mut self, path: &str, ty: Ty, required: bool) -> bool {
        let root = self.root;
        self.ty_in(root, "", path, ty, required)
    }

    fn enum_in(&mut self, v: &Value, base: &str, path: &str, allowed: &[&str], required: bool) {
        if self.ty_in(v, base, path, Ty::String, required) {
            let s = Self::at(v, path).and_then(Value::as_str).unwrap_or_default();
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(s)) {
                self.errors.push(format!(
                    "Requested value '{s}' for property '{base}{path}' is not one of: {}.",
                    allowed.join(", ")
                ));
            }
        }
    }

    fn strings_in(&mut self, v: &Value, base: &str, path: &str, required: bool) {
        if self.ty_in(v, base, path, Ty::Array, required) {
            for (i, x) in Self::at(v, path).and_then(Value::as_array).into_iter().flatten().enumerate() {
                if !x.is_string() {
                    self.errors
                        .push(format!("Error converting value {x} to type 'string' for property '{base}{path}[{i}]'."));
                }
            }
        }
    }

    /// Runs `f` on every element of the array at `path`.
    fn each(&mut self, path: &str, mut f: impl FnMut(&mut Self, &Value, &str)) {
        let root = self.root;
        if self.ty(path, Ty::Array, false) {
            for (i, item) in Self::at(root, path).and_then(Value::as_array).into_iter().flatten().enumerate() {
                let base = format!("{path}[{i}].");
                if !item.is_object() {
                    self.errors
                        .push(format!("Error converting value {item} to type 'object' for property '{path}[{i}]'."));
                    continue;
                }
                f(self, item, &base);
            }
        }
    }

    fn tags(&mut self) {
        if self.ty("tags", Ty::Object, false) {
            for (k, v) in self.root["tags"].as_object().into_iter().flatten() {
                if !v.is_string() {
                    self.errors.push(format!("Error converting value {v} to type 'string' for property 'tags.{k}'."));
                }
            }
        }
    }
}

fn subnet_props(c: &mut Check, v: &Value, base: &str) {
    c.ty_in(v, base, "properties", Ty::Object, false);
    c.ty_in(v, base, "properties.addressPrefix", Ty::String, false);
    c.strings_in(v, base, "properties.addressPrefixes", false);
    c.ty_in(v, base, "properties.networkSecurityGroup", Ty::Object, false);
    c.ty_in(v, base, "properties.networkSecurityGroup.id", Ty::String, false);
    c.ty_in(v, base, "properties.routeTable", Ty::Object, false);
    c.ty_in(v, base, "properties.routeTable.id", Ty::String, false);
    c.enum_in(
        v,
        base,
        "properties.privateEndpointNetworkPolicies",
        &["Enabled", "Disabled", "NetworkSecurityGroupEnabled", "RouteTableEnabled"],
        false,
    );
    c.enum_in(v, base, "properties.privateLinkServiceNetworkPolicies", &["Enabled", "Disabled"], false);
    c.ty_in(v, base, "properties.defaultOutboundAccess", Ty::Boolean, false);
}

const PROTOCOLS: &[&str] = &["Tcp", "Udp", "Icmp", "Esp", "*", "Ah"];

fn rule_props(c: &mut Check, v: &Value, base: &str) {
    c.ty_in(v, base, "properties", Ty::Object, false);
    c.enum_in(v, base, "properties.protocol", PROTOCOLS, true);
    c.enum_in(v, base, "properties.access", &["Allow", "Deny"], true);
    c.enum_in(v, base, "properties.direction", &["Inbound", "Outbound"], true);
    c.ty_in(v, base, "properties.priority", Ty::Integer, true);
    for f in
        ["sourcePortRange", "destinationPortRange", "sourceAddressPrefix", "destinationAddressPrefix", "description"]
    {
        c.ty_in(v, base, &format!("properties.{f}"), Ty::String, false);
    }
    for f in ["sourcePortRanges", "destinationPortRanges", "sourceAddressPrefixes", "destinationAddressPrefixes"] {
        c.strings_in(v, base, &format!("properties.{f}"), false);
    }
}

const NEXT_HOPS: &[&str] = &["VirtualNetworkGateway", "VnetLocal", "Internet", "VirtualAppliance", "None"];

fn route_props(c: &mut Check, v: &Value, base: &str) {
    c.ty_in(v, base, "properties", Ty::Object, false);
    c.ty_in(v, base, "properties.addressPrefix", Ty::String, false);
    c.enum_in(v, base, "properties.nextHopType", NEXT_HOPS, true);
    c.ty_in(v, base, "properties.nextHopIpAddress", Ty::String, false);
}

fn bgp_settings(c: &mut Check, v: &Value, base: &str) {
    c.ty_in(v, base, "asn", Ty::Integer, false);
    c.ty_in(v, base, "bgpPeeringAddress", Ty::String, false);
    c.ty_in(v, base, "peerWeight", Ty::Integer, false);
    if let Some(addrs) = Check::at(v, "bgpPeeringAddresses") {
        if !addrs.is_array() {
            c.errors.push(format!(
                "Error converting value {addrs} to type 'array' for property '{base}bgpPeeringAddresses'."
            ));
        }
        for (i, a) in addrs.as_array().into_iter().flatten().enumerate() {
            let b = format!("{base}bgpPeeringAddresses[{i}].");
            c.ty_in(a, &b, "ipconfigurationId", Ty::String, false);
            c.strings_in(a, &b, "customBgpIpAddresses", false);
        }
    }
}

pub const VPN_SKUS: &[&str] = &[
    "Basic",
    "HighPerformance",
    "Standard",
    "UltraPerformance",
    "VpnGw1",
    "VpnGw2",
    "VpnGw3",
    "VpnGw4",
    "VpnGw5",
    "VpnGw1AZ",
    "VpnGw2AZ",
    "VpnGw3AZ",
    "VpnGw4AZ",
    "VpnGw5AZ",
    "ErGw1AZ",
    "ErGw2AZ",
    "ErGw3AZ",
    "ErGwScale",
];

/// Checks a PUT body for `kind` (top-level shape included).
pub fn put_body(kind: &'static Kind, body: &Value) -> Result<(), ArmError> {
    if !body.is_object() {
        return Err(ArmError::invalid_content(
            "The request content was invalid and could not be deserialized: the body must be a JSON object.",
        ));
    }
    let mut c = Check { errors: Vec::new(), root: body };
    c.ty("properties", Ty::Object, false);
    if kind.tracked {
        c.ty("location", Ty::String, false);
        c.tags();
    }
    if std::ptr::eq(kind, &kinds::VNET) {
        c.ty("properties.addressSpace", Ty::Object, false);
        c.strings_in(body, "", "properties.addressSpace.addressPrefixes", false);
        c.each("properties.subnets", |c, v, b| {
            c.ty_in(v, b, "name", Ty::String, false);
            subnet_props(c, v, b)
        });
        c.ty("properties.enableDdosProtection", Ty::Boolean, false);
    } else if std::ptr::eq(kind, &kinds::SUBNET) {
        subnet_props(&mut c, body, "");
    } else if std::ptr::eq(kind, &kinds::NSG) {
        c.each("properties.securityRules", |c, v, b| {
            c.ty_in(v, b, "name", Ty::String, false);
            rule_props(c, v, b)
        });
    } else if std::ptr::eq(kind, &kinds::SECURITY_RULE) {
        rule_props(&mut c, body, "");
    } else if std::ptr::eq(kind, &kinds::ROUTE_TABLE) {
        c.each("properties.routes", |c, v, b| {
            c.ty_in(v, b, "name", Ty::String, false);
            route_props(c, v, b)
        });
        c.ty("properties.disableBgpRoutePropagation", Ty::Boolean, false);
    } else if std::ptr::eq(kind, &kinds::ROUTE) {
        route_props(&mut c, body, "");
    } else if std::ptr::eq(kind, &kinds::PUBLIC_IP) {
        c.ty("sku", Ty::Object, false);
        c.enum_in(body, "", "sku.name", &["Basic", "Standard"], false);
        c.enum_in(body, "", "sku.tier", &["Regional", "Global"], false);
        c.enum_in(body, "", "properties.publicIPAllocationMethod", &["Static", "Dynamic"], false);
        c.enum_in(body, "", "properties.publicIPAddressVersion", &["IPv4", "IPv6"], false);
        c.ty("properties.idleTimeoutInMinutes", Ty::Integer, false);
        c.strings_in(body, "", "zones", false);
    } else if std::ptr::eq(kind, &kinds::VNG) {
        c.ty("properties", Ty::Object, true);
        c.each("properties.ipConfigurations", |c, v, b| {
            c.ty_in(v, b, "name", Ty::String, false);
            c.enum_in(v, b, "properties.privateIPAllocationMethod", &["Static", "Dynamic"], false);
            c.ty_in(v, b, "properties.subnet.id", Ty::String, false);
            c.ty_in(v, b, "properties.publicIPAddress.id", Ty::String, false);
        });
        c.enum_in(body, "", "properties.gatewayType", &["Vpn", "ExpressRoute", "LocalGateway"], false);
        c.enum_in(body, "", "properties.vpnType", &["PolicyBased", "RouteBased"], false);
        c.enum_in(body, "", "properties.vpnGatewayGeneration", &["None", "Generation1", "Generation2"], false);
        c.ty("properties.enableBgp", Ty::Boolean, false);
        c.ty("properties.activeActive", Ty::Boolean, false);
        c.ty("properties.sku", Ty::Object, false);
        c.enum_in(body, "", "properties.sku.name", VPN_SKUS, false);
        c.enum_in(body, "", "properties.sku.tier", VPN_SKUS, false);
        if c.ty("properties.bgpSettings", Ty::Object, false) {
            bgp_settings(&mut c, &body["properties"]["bgpSettings"], "properties.bgpSettings.");
        }
    } else if std::ptr::eq(kind, &kinds::LNG) {
        c.ty("properties", Ty::Object, true);
        c.ty("properties.gatewayIpAddress", Ty::String, false);
        c.ty("properties.fqdn", Ty::String, false);
        c.strings_in(body, "", "properties.localNetworkAddressSpace.addressPrefixes", false);
        if c.ty("properties.bgpSettings", Ty::Object, false) {
            bgp_settings(&mut c, &body["properties"]["bgpSettings"], "properties.bgpSettings.");
        }
    } else if std::ptr::eq(kind, &kinds::CONNECTION) {
        c.ty("properties", Ty::Object, true);
        c.ty("properties.virtualNetworkGateway1", Ty::Object, true);
        c.ty("properties.virtualNetworkGateway1.id", Ty::String, false);
        c.ty("properties.localNetworkGateway2.id", Ty::String, false);
        c.ty("properties.virtualNetworkGateway2.id", Ty::String, false);
        c.enum_in(body, "", "properties.connectionType", &["IPsec", "Vnet2Vnet", "ExpressRoute", "VPNClient"], true);
        c.enum_in(body, "", "properties.connectionProtocol", &["IKEv2", "IKEv1"], false);
        c.enum_in(body, "", "properties.connectionMode", &["Default", "ResponderOnly", "InitiatorOnly"], false);
        c.ty("properties.sharedKey", Ty::String, false);
        c.ty("properties.enableBgp", Ty::Boolean, false);
        c.ty("properties.routingWeight", Ty::Integer, false);
        c.ty("properties.dpdTimeoutSeconds", Ty::Integer, false);
        c.ty("properties.usePolicyBasedTrafficSelectors", Ty::Boolean, false);
        c.each("properties.gatewayCustomBgpIpAddresses", |c, v, b| {
            c.ty_in(v, b, "ipConfigurationId", Ty::String, true);
            c.ty_in(v, b, "customBgpIpAddress", Ty::String, true);
        });
        c.each("properties.ipsecPolicies", |c, v, b| {
            for f in ["saLifeTimeSeconds", "saDataSizeKilobytes"] {
                c.ty_in(v, b, f, Ty::Integer, true);
            }
            c.enum_in(
                v,
                b,
                "ipsecEncryption",
                &["None", "DES", "DES3", "AES128", "AES192", "AES256", "GCMAES128", "GCMAES192", "GCMAES256"],
                true,
            );
            c.enum_in(v, b, "ipsecIntegrity", &["MD5", "SHA1", "SHA256", "GCMAES128", "GCMAES192", "GCMAES256"], true);
            c.enum_in(
                v,
                b,
                "ikeEncryption",
                &["DES", "DES3", "AES128", "AES192", "AES256", "GCMAES256", "GCMAES128"],
                true,
            );
            c.enum_in(v, b, "ikeIntegrity", &["MD5", "SHA1", "SHA256", "SHA384", "GCMAES256", "GCMAES128"], true);
            c.enum_in(
                v,
                b,
                "dhGroup",
                &["None", "DHGroup1", "DHGroup2", "DHGroup14", "DHGroup2048", "ECP256", "ECP384", "DHGroup24"],
                true,
            );
            c.enum_in(
                v,
                b,
                "pfsGroup",
                &["None", "PFS1", "PFS2", "PFS2048", "ECP256", "ECP384", "PFS24", "PFS14", "PFSMM"],
                true,
            );
        });
    } else if std::ptr::eq(kind, &kinds::IDENTITY) {
        c.enum_in(body, "", "properties.isolationScope", &["None", "Regional"], false);
    } else if std::ptr::eq(kind, &kinds::FEDERATED_CREDENTIAL) {
        c.ty("properties", Ty::Object, true);
        c.ty("properties.issuer", Ty::String, true);
        c.ty("properties.subject", Ty::String, true);
        c.strings_in(body, "", "properties.audiences", true);
    }
    finish(c)
}

/// Checks a resource group PUT/PATCH body.
pub fn resource_group(body: &Value, patch: bool) -> Result<(), ArmError> {
    if !body.is_object() {
        return Err(ArmError::invalid_content(
            "The request content was invalid and could not be deserialized: the body must be a JSON object.",
        ));
    }
    let mut c = Check { errors: Vec::new(), root: body };
    c.ty("location", Ty::String, !patch);
    c.ty("managedBy", Ty::String, false);
    c.ty("properties", Ty::Object, false);
    c.tags();
    finish(c)
}

/// Checks a `TagsObject` body (network UpdateTags) or an identity PATCH.
pub fn tags_body(body: &Value) -> Result<(), ArmError> {
    if !body.is_object() {
        return Err(ArmError::invalid_content(
            "The request content was invalid and could not be deserialized: the body must be a JSON object.",
        ));
    }
    let mut c = Check { errors: Vec::new(), root: body };
    c.tags();
    finish(c)
}

/// Checks a role assignment PUT body.
pub fn role_assignment(body: &Value) -> Result<(), ArmError> {
    if !body.is_object() {
        return Err(ArmError::invalid_content(
            "The request content was invalid and could not be deserialized: the body must be a JSON object.",
        ));
    }
    let mut c = Check { errors: Vec::new(), root: body };
    c.ty("properties", Ty::Object, true);
    c.ty("properties.roleDefinitionId", Ty::String, true);
    c.ty("properties.principalId", Ty::String, true);
    c.enum_in(
        body,
        "",
        "properties.principalType",
        &["User", "Group", "ServicePrincipal", "ForeignGroup", "Device"],
        false,
    );
    c.ty("properties.description", Ty::String, false);
    c.ty("properties.condition", Ty::String, false);
    c.ty("properties.conditionVersion", Ty::String, false);
    finish(c)
}

/// Checks a shared key body.
pub fn shared_key(body: &Value) -> Result<(), ArmError> {
    let mut c = Check { errors: Vec::new(), root: body };
    if !body.is_object() {
        return Err(ArmError::invalid_content(
            "The request content was invalid and could not be deserialized: the body must be a JSON object.",
        ));
    }
    c.ty("value", Ty::String, true);
    finish(c)
}

fn finish(c: Check) -> Result<(), ArmError> {
    if c.errors.is_empty() {
        Ok(())
    } else {
        Err(ArmError::invalid_content(format!(
            "The request content was invalid and could not be deserialized: {}",
            c.errors.join(" ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn enums_types_and_required_fields_are_checked() {
        let ok = json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}});
        assert!(put_body(&kinds::PUBLIC_IP, &ok).is_ok());
        let bad_enum = json!({"location": "eastus", "properties": {"publicIPAllocationMethod": "Sometimes"}});
        let e = put_body(&kinds::PUBLIC_IP, &bad_enum).unwrap_err();
        assert_eq!(e.code, "InvalidRequestContent");
        assert!(e.message.contains("publicIPAllocationMethod"), "{}", e.message);
        let bad_type = json!({"location": "eastus", "properties": {"subnets": [{"name": 3}]}});
        assert!(put_body(&kinds::VNET, &bad_type).is_err());
        let missing = json!({"properties": {"issuer": "https://x", "subject": "s"}});
        assert!(put_body(&kinds::FEDERATED_CREDENTIAL, &missing).unwrap_err().message.contains("audiences"));
        assert!(put_body(&kinds::VNET, &json!([1])).is_err());
        assert!(put_body(&kinds::VNET, &json!({"tags": {"a": 1}})).is_err());
    }
}
