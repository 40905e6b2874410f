//! Tunnels that negotiate: the world sees both clouds, so it decides each AWS tunnel's status
//! from both sides' configuration. A tunnel is UP only when the Azure side points back at it and
//! everything IKE and BGP need agrees, and a negotiation time (30 s, scaled) has passed since both
//! ends existed; otherwise it is DOWN with the first reason found.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::arm::store::Store;
use crate::aws::vpn::{Cgw, Conn, Telemetry, Tunnel, Vgw, host};

use super::clouds::Clouds;

/// One tunnel's verdict, as `GET /_sim/tunnels` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub vpn_connection: String,
    pub outside_ip: String,
    pub up: bool,
    pub reason: String,
    /// The Azure connection facing this tunnel, if one does.
    pub azure_connection: Option<String>,
}

fn of_type<'a>(store: &'a Store, arm_type: &'a str) -> impl Iterator<Item = &'a crate::arm::store::Resource> + 'a {
    store.resources.values().filter(move |r| r.kind.arm_type().eq_ignore_ascii_case(arm_type))
}

fn by_id<'a>(store: &'a Store, id: &str) -> Option<&'a crate::arm::store::Resource> {
    store
        .resources
        .get(&id.to_ascii_lowercase())
        .or_else(|| store.resources.values().find(|r| r.id.eq_ignore_ascii_case(id)))
}

/// Azure's IKE names -> AWS's, for the proposals both must share.
fn aws_name(azure: &str) -> &str {
    match azure {
        "GCMAES256" => "AES256-GCM-16",
        "GCMAES128" => "AES128-GCM-16",
        "AES256" => "AES256",
        "AES128" => "AES128",
        "SHA384" => "SHA2-384",
        "SHA256" => "SHA2-256",
        "SHA1" => "SHA1",
        "ECP384" => "20",
        "ECP256" => "19",
        // IKE DH groups and IPsec PFS groups (Azure spells them differently, AWS numbers both).
        "DHGroup14" | "DHGroup2048" | "PFS14" | "PFS2048" => "14",
        "DHGroup24" | "PFS24" => "24",
        "DHGroup2" | "PFS2" => "2",
        "DHGroup1" | "PFS1" => "1",
        other => other,
    }
}

/// Does AWS's offered list (the tunnel's effective options: an unset list is AWS's default set,
/// never "anything") accept Azure's choice?
fn offers(list: &[String], azure: &str) -> bool {
    list.iter().any(|v| v.eq_ignore_ascii_case(aws_name(azure)))
}

/// Azure's IPsec integrity against AWS's phase 2 offer. A GCM integrity (`GCMAES128/192/256`)
/// is the GCM cipher's own authentication, which Azure requires to match the encryption
/// (Microsoft Learn, "IPsec/IKE policy for S2S VPN": "GCM ... must be used for both IPsec
/// encryption and integrity"); AWS then negotiates no separate integrity algorithm.
fn offers_integrity(p2_int: &[String], p2_enc: &[String], azure: &str) -> bool {
    if azure.starts_with("GCMAES") {
        return offers(p2_enc, azure);
    }
    offers(p2_int, azure)
}

/// The one resource `found` holds, or why not: `none`, or "N `twins`: [names]".
fn only<'a>(
    found: impl Iterator<Item = &'a crate::arm::store::Resource>,
    none: String,
    twins: &str,
) -> Result<&'a crate::arm::store::Resource, String> {
    let found: Vec<_> = found.collect();
    match found.as_slice() {
        [] => Err(none),
        [one] => Ok(*one),
        many => {
            let names: Vec<&str> = many.iter().map(|r| r.name.as_str()).collect();
            Err(format!("{} {twins}: {names:?}", many.len()))
        }
    }
}

fn judge(
    store: &Store,
    conn: &Conn,
    t: &Tunnel,
    cgw: Option<&Cgw>,
    vgw: Option<&Vgw>,
) -> (Result<(), String>, Option<String>) {
    let t = &t.effective();
    // Twins are a reason, never hidden: two Azure ends for one AWS tunnel address is a broken
    // link whichever of them IKE happens to reach.
    let lng = match only(
        of_type(store, "Microsoft.Network/localNetworkGateways")
            .filter(|l| l.body["properties"]["gatewayIpAddress"].as_str() == Some(t.outside_ip.as_str())),
        format!("no Azure local network gateway points at {}", t.outside_ip),
        &format!("Azure local network gateways point at {}", t.outside_ip),
    ) {
        Ok(l) => l,
        Err(why) => return (Err(why), None),
    };
    let az = match only(
        of_type(store, "Microsoft.Network/connections").filter(|c| {
            c.body["properties"]["localNetworkGateway2"]["id"]
                .as_str()
                .is_some_and(|id| id.eq_ignore_ascii_case(&lng.id))
        }),
        format!("no Azure connection uses local network gateway {}", lng.name),
        &format!("Azure connections use local network gateway {}", lng.name),
    ) {
        Ok(c) => c,
        Err(why) => return (Err(why), None),
    };
    let named = Some(az.id.clone());
    let p = &az.body["properties"];
    if p["provisioningState"].as_str() != Some("Succeeded") {
        return (Err(format!("Azure connection {} is not provisioned yet", az.name)), named);
    }
    let Some(gw) = p["virtualNetworkGateway1"]["id"].as_str().and_then(|id| by_id(store, id)) else {
        return (Err(format!("Azure connection {} has no gateway", az.name)), named);
    };
    let gp = &gw.body["properties"];
    // A gateway being updated or left Failed carries no tunnel.
    if gp["provisioningState"].as_str() != Some("Succeeded") {
        return (
            Err(format!(
                "Azure gateway {} is {}",
                gw.name,
                gp["provisioningState"].as_str().unwrap_or("not provisioned")
            )),
            named,
        );
    }
    // Routing agrees on both sides: BGP on the AWS connection (not StaticRoutesOnly) needs BGP on
    // the Azure connection, and the other way round.
    let azure_bgp = p["enableBgp"].as_bool().unwrap_or(false);
    if azure_bgp == conn.static_only {
        return (
            Err(format!(
                "routing differs: the AWS connection is {}, Azure connection {} has BGP {}",
                if conn.static_only { "static" } else { "dynamic (BGP)" },
                az.name,
                if azure_bgp { "on" } else { "off" }
            )),
            named,
        );
    }
    let gateway_ips: Vec<String> = gp["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["properties"]["publicIPAddress"]["id"].as_str())
        .filter_map(|id| by_id(store, id))
        .filter_map(|pip| pip.body["properties"]["ipAddress"].as_str().map(String::from))
        .collect();
    let Some(cgw) = cgw else { return (Err("the customer gateway is gone".into()), named) };
    if !gateway_ips.contains(&cgw.ip) {
        return (
            Err(format!("customer gateway address {} is not an address of Azure gateway {}", cgw.ip, gw.name)),
            named,
        );
    }
    if az.secret.as_deref() != Some(t.psk.as_str()) {
        return (Err("pre-shared keys differ".into()), named);
    }
    let protocol = p["connectionProtocol"].as_str().unwrap_or("IKEv2").to_ascii_lowercase();
    if !t.ike_versions.is_empty() && !t.ike_versions.iter().any(|v| v.eq_ignore_ascii_case(&protocol)) {
        return (Err(format!("Azure speaks {protocol}, the AWS tunnel allows {:?}", t.ike_versions)), named);
    }
    if let Some(policy) = p["ipsecPolicies"].as_array().and_then(|a| a.first()) {
        let checks = [
            (&t.p1_enc, "ikeEncryption", "phase 1 encryption"),
            (&t.p1_int, "ikeIntegrity", "phase 1 integrity"),
            (&t.p1_dh, "dhGroup", "phase 1 DH group"),
            (&t.p2_enc, "ipsecEncryption", "phase 2 encryption"),
            (&t.p2_dh, "pfsGroup", "phase 2 DH group"),
        ];
        if let Some(choice) = policy["ipsecIntegrity"].as_str()
            && !offers_integrity(&t.p2_int, &t.p2_enc, choice)
        {
            return (
                Err(format!("no common phase 2 integrity: Azure wants {choice}, AWS offers {:?}", t.p2_int)),
                named,
            );
        }
        for (list, field, what) in checks {
            if let Some(choice) = policy[field].as_str()
                && !offers(list, choice)
            {
                return (Err(format!("no common {what}: Azure wants {choice}, AWS offers {list:?}")), named);
            }
        }
    }
    if let Some(bgp) = lng.body["properties"]["bgpSettings"].as_object() {
        let aws_inside = host(&t.inside_cidr, 1).unwrap_or_default();
        let azure_inside = host(&t.inside_cidr, 2).unwrap_or_default();
        if bgp.get("bgpPeeringAddress").and_then(Value::as_str) != Some(aws_inside.as_str()) {
            return (
                Err(format!(
                    "Azure expects the AWS BGP peer at {}, the tunnel's is {aws_inside}",
                    bgp["bgpPeeringAddress"]
                )),
                named,
            );
        }
        // The APIPA address Azure peers from is the one given for the gateway instance (IP
        // configuration) whose public address the customer gateway names: that instance is
        // the end of this tunnel.
        let instance = gp["ipConfigurations"].as_array().into_iter().flatten().find(|c| {
            c["properties"]["publicIPAddress"]["id"]
                .as_str()
                .and_then(|id| by_id(store, id))
                .and_then(|pip| pip.body["properties"]["ipAddress"].as_str())
                == Some(cgw.ip.as_str())
        });
        let custom = p["gatewayCustomBgpIpAddresses"].as_array().into_iter().flatten().find(|c| {
            let config = c["ipConfigurationId"].as_str().unwrap_or_default();
            instance.and_then(|i| i["id"].as_str()).is_some_and(|id| id.eq_ignore_ascii_case(config))
        });
        let custom = custom.and_then(|c| c["customBgpIpAddress"].as_str());
        if custom != Some(azure_inside.as_str()) {
            return (
                Err(format!(
                    "Azure's BGP address on the instance at {} is {}, not {azure_inside}, the tunnel's customer-side inside address",
                    cgw.ip,
                    custom.unwrap_or("unset")
                )),
                named,
            );
        }
        if let Some(v) = vgw
            && bgp.get("asn").and_then(Value::as_i64) != Some(v.asn)
        {
            return (Err(format!("Azure expects AWS ASN {}, the gateway has {}", bgp["asn"], v.asn)), named);
        }
        if gp["bgpSettings"]["asn"].as_i64() != Some(cgw.asn) {
            return (
                Err(format!(
                    "the customer gateway says ASN {}, Azure's gateway has {}",
                    cgw.asn, gp["bgpSettings"]["asn"]
                )),
                named,
            );
        }
    }
    (Ok(()), named)
}

/// Every AWS tunnel's verdict.
pub fn verdicts(sim: &Clouds<'_>) -> Vec<Verdict> {
    let now = sim.world.clock.now();
    let config = sim.world.config();
    let negotiation = Duration::from_secs_f64(30.0 * config.duration_scale());
    let vpn = sim.aws.vpn.lock().expect("vpn lock");
    let store = sim.arm.store.lock().expect("store lock");
    let mut out = Vec::new();
    for conn in vpn.conns.values().filter(|c| c.life.state(now) == "available") {
        for t in &conn.tunnels {
            let (mut result, azure) = judge(&store, conn, t, vpn.cgws.get(&conn.cgw), vpn.vgws.get(&conn.vgw));
            if config.faults.cut_tunnels.contains(&t.outside_ip) {
                result = Err(format!("the path to {} is cut (faults.cut_tunnels): IKE gets no answer", t.outside_ip));
            }
            let restored = sim.world.cut_changed(&t.outside_ip);
            let (up, reason) = match result {
                Ok(()) => {
                    // Negotiation starts over from the last change on either end.
                    let since = azure
                        .as_deref()
                        .and_then(|id| by_id(&store, id))
                        .map(|a| a.changed_at.max(conn.life.ready))
                        .unwrap_or(conn.life.ready)
                        .max(t.changed_at.unwrap_or(conn.life.ready))
                        .max(restored.unwrap_or(conn.life.ready));
                    if now >= since + negotiation {
                        (true, "IPsec and BGP established".to_string())
                    } else {
                        (false, "negotiating".to_string())
                    }
                }
                Err(why) => (false, why),
            };
            out.push(Verdict {
                vpn_connection: conn.id.clone(),
                outside_ip: t.outside_ip.clone(),
                up,
                reason,
                azure_connection: azure,
            });
        }
    }
    out
}

/// The verdicts as AWS telemetry: the EC2 layer reads its tunnels' status through it.
impl crate::aws::TunnelTelemetry for Clouds<'_> {
    fn telemetry(&self) -> Telemetry {
        verdicts(self).into_iter().map(|v| ((v.vpn_connection, v.outside_ip), (v.up, v.reason))).collect()
    }
}

/// Azure's `connectionStatus` per connection id (lowercase): Connected when its tunnel is up.
pub fn azure_status(sim: &Clouds<'_>) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    for v in verdicts(sim) {
        if let Some(id) = v.azure_connection {
            let e = out.entry(id.to_ascii_lowercase()).or_insert("NotConnected");
            if v.up {
                *e = "Connected";
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::arm::kinds::{self, Kind};
    use crate::arm::store::{ResKind, Resource};
    use crate::aws::vpn::Life;

    const RG: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network";

    fn put(store: &mut Store, kind: &'static Kind, segment: &str, name: &str, properties: Value) -> String {
        let id = format!("{RG}/{segment}/{name}");
        let now = Instant::now();
        let secret = (segment == "connections").then(|| "Key_shared_by_both_1".to_string());
        store.insert(Resource {
            id: id.clone(),
            kind: ResKind::Typed(kind),
            name: name.into(),
            body: json!({ "id": id, "name": name, "properties": properties }),
            created_at: now,
            changed_at: now,
            seq: 0,
            op: None,
            secret,
        });
        id
    }

    /// A link that negotiates: an active-active Azure gateway (instances at 192.0.2.1 and
    /// 192.0.2.2), the AWS tunnel at 203.0.113.10 facing the first instance, a local network
    /// gateway and a BGP connection with the APIPA address on that instance.
    fn world() -> (Store, Conn, Cgw, Vgw) {
        let mut store = Store::default();
        let pip = |store: &mut Store, name: &str, ip: &str| {
            put(
                store,
                &kinds::PUBLIC_IP,
                "publicIPAddresses",
                name,
                json!({ "ipAddress": ip, "provisioningState": "Succeeded" }),
            )
        };
        let (a, b) = (pip(&mut store, "a", "192.0.2.1"), pip(&mut store, "b", "192.0.2.2"));
        let gw = format!("{RG}/virtualNetworkGateways/gw");
        put(
            &mut store,
            &kinds::VNG,
            "virtualNetworkGateways",
            "gw",
            json!({
                "provisioningState": "Succeeded",
                "bgpSettings": { "asn": 65010 },
                "ipConfigurations": [
                    { "id": format!("{gw}/ipConfigurations/one"), "properties": { "publicIPAddress": { "id": a } } },
                    { "id": format!("{gw}/ipConfigurations/two"), "properties": { "publicIPAddress": { "id": b } } }
                ]
            }),
        );
        let lng = put(
            &mut store,
            &kinds::LNG,
            "localNetworkGateways",
            "lng",
            json!({ "gatewayIpAddress": "203.0.113.10", "bgpSettings": { "asn": 64512, "bgpPeeringAddress": "169.254.21.1" } }),
        );
        put(
            &mut store,
            &kinds::CONNECTION,
            "connections",
            "conn",
            json!({
                "provisioningState": "Succeeded",
                "enableBgp": true,
                "connectionProtocol": "IKEv2",
                "virtualNetworkGateway1": { "id": gw },
                "localNetworkGateway2": { "id": lng },
                "ipsecPolicies": [{
                    "ikeEncryption": "GCMAES256", "ikeIntegrity": "SHA384", "dhGroup": "ECP384",
                    "ipsecEncryption": "GCMAES256", "ipsecIntegrity": "GCMAES256", "pfsGroup": "ECP384",
                    "saLifeTimeSeconds": 3600
                }],
                "gatewayCustomBgpIpAddresses": [
                    { "ipConfigurationId": format!("{gw}/ipConfigurations/one"), "customBgpIpAddress": "169.254.21.2" },
                    { "ipConfigurationId": format!("{gw}/ipConfigurations/two"), "customBgpIpAddress": "169.254.22.2" }
                ]
            }),
        );
        let now = Instant::now();
        let tunnel = Tunnel {
            outside_ip: "203.0.113.10".into(),
            inside_cidr: "169.254.21.0/30".into(),
            psk: "Key_shared_by_both_1".into(),
            ..Default::default()
        };
        let conn = Conn {
            id: "vpn-1".into(),
            cgw: "cgw-1".into(),
            vgw: "vgw-1".into(),
            static_only: false,
            tunnels: [tunnel.clone(), Tunnel { outside_ip: "203.0.113.11".into(), ..tunnel }],
            routes: Default::default(),
            life: Life::new(now, Duration::ZERO),
            modifying_until: None,
            tags: vec![],
        };
        let cgw = Cgw {
            id: "cgw-1".into(),
            ip: "192.0.2.1".into(),
            asn: 65010,
            extended: false,
            device_name: None,
            life: Life::new(now, Duration::ZERO),
            tags: vec![],
        };
        let vgw = Vgw {
            id: "vgw-1".into(),
            asn: 64512,
            life: Life::new(now, Duration::ZERO),
            attachment: None,
            tags: vec![],
        };
        (store, conn, cgw, vgw)
    }

    fn verdict(store: &Store, conn: &Conn, cgw: &Cgw, vgw: &Vgw) -> Result<(), String> {
        judge(store, conn, &conn.tunnels[0], Some(cgw), Some(vgw)).0
    }

    fn edit(store: &mut Store, name: &str, f: impl FnOnce(&mut Value)) {
        let r = store.resources.values_mut().find(|r| r.name == name).expect("a resource of that name");
        f(&mut r.body["properties"]);
    }

    #[test]
    fn a_link_whose_ends_agree_negotiates_and_gcm_integrity_needs_no_aws_integrity() {
        let (store, mut conn, cgw, vgw) = world();
        assert_eq!(verdict(&store, &conn, &cgw, &vgw), Ok(()));
        // AWS offers only SHA2-256 for phase 2 integrity: GCM's own integrity still agrees.
        conn.tunnels[0].p2_int = vec!["SHA2-256".into()];
        assert_eq!(verdict(&store, &conn, &cgw, &vgw), Ok(()));
    }

    #[test]
    fn each_disagreement_keeps_the_tunnel_down_with_its_reason() {
        let cases: Vec<(&str, Box<dyn Fn(&mut Store, &mut Conn)>)> = vec![
            (
                "2 Azure local network gateways point at 203.0.113.10",
                Box::new(|s, _| {
                    put(s, &kinds::LNG, "localNetworkGateways", "twin", json!({ "gatewayIpAddress": "203.0.113.10" }));
                }),
            ),
            (
                "Azure gateway gw is Updating",
                Box::new(|s, _| edit(s, "gw", |p| p["provisioningState"] = json!("Updating"))),
            ),
            (
                "Azure gateway gw is Failed",
                Box::new(|s, _| edit(s, "gw", |p| p["provisioningState"] = json!("Failed"))),
            ),
            ("routing differs", Box::new(|s, _| edit(s, "conn", |p| p["enableBgp"] = json!(false)))),
            ("routing differs", Box::new(|_, c| c.static_only = true)),
            (
                "Azure's BGP address on the instance at 192.0.2.1 is 169.254.22.2",
                Box::new(|s, _| {
                    edit(s, "conn", |p| {
                        p["gatewayCustomBgpIpAddresses"][0]["customBgpIpAddress"] = json!("169.254.22.2");
                        p["gatewayCustomBgpIpAddresses"][1]["customBgpIpAddress"] = json!("169.254.21.2");
                    })
                }),
            ),
            (
                "no common phase 2 integrity: Azure wants SHA256",
                Box::new(|s, c| {
                    edit(s, "conn", |p| {
                        p["ipsecPolicies"][0]["ipsecEncryption"] = json!("AES256");
                        p["ipsecPolicies"][0]["ipsecIntegrity"] = json!("SHA256");
                    });
                    c.tunnels[0].p2_int = vec!["SHA2-384".into()];
                }),
            ),
            // An AWS list left unset is AWS's default set, which has no DH group 1.
            (
                "no common phase 1 DH group: Azure wants DHGroup1",
                Box::new(|s, _| edit(s, "conn", |p| p["ipsecPolicies"][0]["dhGroup"] = json!("DHGroup1"))),
            ),
            ("pre-shared keys differ", Box::new(|_, c| c.tunnels[0].psk = "Another_key_1".into())),
        ];
        for (reason, change) in cases {
            let (mut store, mut conn, cgw, vgw) = world();
            change(&mut store, &mut conn);
            let got = verdict(&store, &conn, &cgw, &vgw);
            assert!(got.as_ref().is_err_and(|e| e.contains(reason)), "{reason}: {got:?}");
        }
    }
}
