//! The stored body of a typed resource once its PUT has passed the rules: composed from the
//! request (ARM's read-only properties such as `provisioningState`, `resourceGuid` and `etag` set
//! by the emulator, `null`s dropped), completed with the defaults and computed fields ARM adds
//! per type, and its write-only secret (a connection's shared key) kept apart from it.

use super::Ctx;
use super::kinds::{self, Kind};
use super::refs::is;
use super::store::{self, Resource, Store};
use serde_json::{Map, Value, json};
use std::net::Ipv4Addr;

/// Builds the stored body of a typed resource from a request body.
pub fn compose(
    kind: &'static Kind,
    id: &str,
    name: &str,
    body: &Value,
    existing: Option<&Resource>,
    location: &str,
) -> Value {
    let mut props: Map<String, Value> = body["properties"].as_object().cloned().unwrap_or_default();
    props.remove("provisioningState");
    props.remove("resourceGuid");
    for ck in kinds::embedded_children(kind) {
        props.remove(ck.embed_as.expect("embedded"));
    }
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    out.insert("id".into(), json!(id));
    if kind.etag {
        out.insert("etag".into(), json!(store::new_etag()));
    }
    out.insert("type".into(), json!(kind.arm_type));
    if kind.tracked {
        out.insert("location".into(), json!(location));
        if let Some(t) = body.get("tags").filter(|t| !t.is_null()) {
            out.insert("tags".into(), t.clone());
        }
    }
    if let Some(o) = body.as_object() {
        for (k, v) in o {
            if !["id", "name", "type", "etag", "properties", "location", "tags"].contains(&k.as_str()) && !v.is_null() {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if kind.provisioning_state {
        props.insert("provisioningState".into(), json!("Succeeded"));
    }
    if kind.namespace == "Microsoft.Network" && kind.parent.is_none() {
        let guid = existing
            .and_then(|e| e.body["properties"]["resourceGuid"].as_str().map(str::to_string))
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        props.insert("resourceGuid".into(), json!(guid));
    }
    out.insert("properties".into(), Value::Object(props));
    let mut out = Value::Object(out);
    strip_nulls(&mut out);
    out
}

/// ARM treats `null` in a request as absent; it is not stored.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|_, x| !x.is_null());
            o.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Adds computed fields and defaults to a stored body.
pub fn complete(
    store: &mut Store,
    ctx: &Ctx,
    kind: &'static Kind,
    id: &str,
    body: &Value,
    stored: &mut Value,
    existing: Option<&Resource>,
) {
    super::compute::complete(store, kind, id, stored, existing, &super::now_rfc3339());
    let props = stored["properties"].as_object_mut().expect("properties object");
    if is(kind, &kinds::STORAGE_ACCOUNT) {
        // The account's endpoints: its blob service here, path-style ([`super::blob`]).
        let name = id.rsplit('/').next().unwrap_or_default();
        props.insert("primaryEndpoints".into(), json!({"blob": super::blob::endpoint(&ctx.base, name)}));
        props.insert("statusOfPrimary".into(), json!("available"));
        return;
    }
    if is(kind, &kinds::PUBLIC_IP) {
        if stored.get("sku").is_none() {
            stored["sku"] = json!({"name": "Basic", "tier": "Regional"});
        } else if stored["sku"].get("tier").is_none() {
            stored["sku"]["tier"] = json!("Regional");
        }
        let props = stored["properties"].as_object_mut().expect("properties object");
        let standard = body["sku"]["name"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("Standard"));
        props.entry("publicIPAllocationMethod").or_insert(json!(if standard { "Static" } else { "Dynamic" }));
        props.entry("publicIPAddressVersion").or_insert(json!("IPv4"));
        props.entry("idleTimeoutInMinutes").or_insert(json!(4));
        props.entry("ipTags").or_insert(json!([]));
        let static_ = props["publicIPAllocationMethod"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("Static"));
        let prior = existing.and_then(|e| e.body["properties"].get("ipAddress").cloned());
        match prior {
            Some(ip) => {
                props.insert("ipAddress".into(), ip);
            }
            None if static_ => {
                props.insert("ipAddress".into(), json!(store.next_public_ip()));
            }
            None => {}
        }
    } else if is(kind, &kinds::VNG) {
        props.entry("gatewayType").or_insert(json!("Vpn"));
        props.entry("vpnType").or_insert(json!("RouteBased"));
        props.entry("enableBgp").or_insert(json!(false));
        props.entry("activeActive").or_insert(json!(false));
        props.entry("vpnGatewayGeneration").or_insert(json!("Generation2"));
        props.entry("enablePrivateIpAddress").or_insert(json!(false));
        props.entry("disableIPSecReplayProtection").or_insert(json!(false));
        let mut configs = props["ipConfigurations"].as_array().cloned().unwrap_or_default();
        let mut defaults: Vec<String> = Vec::new();
        for (i, c) in configs.iter_mut().enumerate() {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            c["id"] = json!(format!("{id}/ipConfigurations/{name}"));
            c["etag"] = json!(store::new_etag());
            if !c["properties"].is_object() {
                c["properties"] = json!({});
            }
            c["properties"]["provisioningState"] = json!("Succeeded");
            if c["properties"].get("privateIPAllocationMethod").is_none() {
                c["properties"]["privateIPAllocationMethod"] = json!("Dynamic");
            }
            let subnet = c["properties"]["subnet"]["id"].as_str().and_then(|s| store.get(s));
            let prefix = subnet
                .and_then(|s| s.body["properties"]["addressPrefix"].as_str())
                .and_then(|p| p.parse::<ipnet::Ipv4Net>().ok());
            if let Some(p) = prefix {
                defaults.push(Ipv4Addr::from(u32::from(p.network()) + 4 + i as u32).to_string());
            }
        }
        let mut bgp = body["properties"]["bgpSettings"].clone();
        if !bgp.is_object() {
            bgp = json!({});
        }
        if bgp.get("asn").is_none_or(Value::is_null) {
            bgp["asn"] = json!(65515);
        }
        bgp["bgpPeeringAddress"] = json!(defaults.join(","));
        bgp["peerWeight"] = json!(bgp["peerWeight"].as_i64().unwrap_or(0));
        let requested = bgp["bgpPeeringAddresses"].as_array().cloned().unwrap_or_default();
        let peering: Vec<Value> = configs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let cfg_id = c["id"].as_str().unwrap_or_default();
                let custom = requested
                    .iter()
                    .find(|r| r["ipconfigurationId"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(cfg_id)))
                    .map(|r| r["customBgpIpAddresses"].clone())
                    .unwrap_or(json!([]));
                json!({
                    "ipconfigurationId": cfg_id,
                    "defaultBgpIpAddresses": defaults.get(i).map(|d| vec![d.clone()]).unwrap_or_default(),
                    "customBgpIpAddresses": custom,
                    "tunnelIpAddresses": [],
                })
            })
            .collect();
        bgp["bgpPeeringAddresses"] = Value::Array(peering);
        props.insert("bgpSettings".into(), bgp);
        props.insert("ipConfigurations".into(), Value::Array(configs));
    } else if is(kind, &kinds::CONNECTION) {
        props.remove("sharedKey");
        for f in ["virtualNetworkGateway1", "virtualNetworkGateway2", "localNetworkGateway2"] {
            if let Some(r) = props.get(f).and_then(|v| v["id"].as_str()).map(String::from) {
                props.insert(f.into(), json!({"id": r, "properties": {}}));
            }
        }
        props.entry("connectionProtocol").or_insert(json!("IKEv2"));
        props.entry("routingWeight").or_insert(json!(0));
        props.entry("enableBgp").or_insert(json!(false));
        props.entry("usePolicyBasedTrafficSelectors").or_insert(json!(false));
        props.entry("ipsecPolicies").or_insert(json!([]));
        props.entry("trafficSelectorPolicies").or_insert(json!([]));
        props.entry("connectionMode").or_insert(json!("Default"));
        props.insert("connectionStatus".into(), json!("Unknown"));
        props.insert("ingressBytesTransferred".into(), json!(0));
        props.insert("egressBytesTransferred".into(), json!(0));
    } else if is(kind, &kinds::IDENTITY) {
        let prior = existing.map(|e| e.body["properties"].clone()).unwrap_or(Value::Null);
        let tenant = prior["tenantId"].as_str().map(String::from).unwrap_or_else(|| tenant_guid(&ctx.caller.tenant));
        let principal =
            prior["principalId"].as_str().map(String::from).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let client = prior["clientId"].as_str().map(String::from).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        props.insert("tenantId".into(), json!(tenant));
        props.insert("principalId".into(), json!(principal));
        props.insert("clientId".into(), json!(client));
    }
}

/// The write-only secret carried by a body (a connection's shared key).
pub fn secret_of(kind: &'static Kind, body: &Value) -> Option<String> {
    if is(kind, &kinds::CONNECTION) {
        body["properties"]["sharedKey"].as_str().map(String::from)
    } else {
        super::compute::secret_of(kind, body)
    }
}

/// The tenant as a GUID (the spec types tenantId as uuid); non-GUID tenant names map to a stable GUID.
pub fn tenant_guid(tenant: &str) -> String {
    match uuid::Uuid::parse_str(tenant) {
        Ok(u) => u.to_string(),
        Err(_) => {
            // FNV-1a, twice with different seeds: stable across runs and platforms.
            let fnv = |seed: u64| tenant.bytes().fold(seed, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
            let (hi, lo) = (fnv(0xcbf29ce484222325), fnv(0x84222325cbf29ce4));
            uuid::Builder::from_random_bytes(((hi as u128) << 64 | lo as u128).to_be_bytes()).into_uuid().to_string()
        }
    }
}
