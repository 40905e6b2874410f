//! Tunnels that negotiate: the world sees both clouds, so it decides each AWS tunnel's status
//! from both sides' configuration. A tunnel is UP only when the Azure side points back at it and
//! everything IKE and BGP need agrees, and a negotiation time (30 s, scaled) has passed since both
//! ends existed; otherwise it is DOWN with the first reason found.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::arm::store::Store;
use crate::server::Sim;

use super::vpn::{Cgw, Conn, Telemetry, Tunnel, Vgw};

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

fn host(cidr: &str, n: u32) -> Option<String> {
    let net: ipnet::Ipv4Net = cidr.parse().ok()?;
    Some(Ipv4Addr::from(u32::from(net.network()) + n).to_string())
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

/// Does AWS's offered list accept Azure's choice? An empty list is AWS's defaults (all of them).
fn offers(list: &[String], azure: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v.eq_ignore_ascii_case(aws_name(azure)))
}

fn judge(
    store: &Store,
    conn: &Conn,
    t: &Tunnel,
    cgw: Option<&Cgw>,
    vgw: Option<&Vgw>,
) -> (Result<(), String>, Option<String>) {
    let Some(lng) = of_type(store, "Microsoft.Network/localNetworkGateways")
        .find(|l| l.body["properties"]["gatewayIpAddress"].as_str() == Some(t.outside_ip.as_str()))
    else {
        return (Err(format!("no Azure local network gateway points at {}", t.outside_ip)), None);
    };
    let Some(az) = of_type(store, "Microsoft.Network/connections").find(|c| {
        c.body["properties"]["localNetworkGateway2"]["id"].as_str().is_some_and(|id| id.eq_ignore_ascii_case(&lng.id))
    }) else {
        return (Err(format!("no Azure connection uses local network gateway {}", lng.name)), None);
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
        let custom: Vec<&str> = p["gatewayCustomBgpIpAddresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["customBgpIpAddress"].as_str())
            .collect();
        if !custom.contains(&azure_inside.as_str()) {
            return (
                Err(format!("Azure's BGP address is not {azure_inside}, the tunnel's customer-side inside address")),
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
    let _ = conn;
    (Ok(()), named)
}

/// Every AWS tunnel's verdict.
pub fn verdicts(sim: &Sim) -> Vec<Verdict> {
    let now = sim.world.clock.now();
    let negotiation = Duration::from_secs_f64(30.0 * sim.world.config().duration_scale());
    let vpn = sim.aws.vpn.lock().expect("vpn lock");
    let store = sim.arm.store.lock().expect("store lock");
    let mut out = Vec::new();
    for conn in vpn.conns.values().filter(|c| c.life.state(now) == "available") {
        for t in &conn.tunnels {
            let (result, azure) = judge(&store, conn, t, vpn.cgws.get(&conn.cgw), vpn.vgws.get(&conn.vgw));
            let (up, reason) = match result {
                Ok(()) => {
                    let since = azure
                        .as_deref()
                        .and_then(|id| by_id(&store, id))
                        .map(|a| a.created_at.max(conn.life.ready))
                        .unwrap_or(conn.life.ready);
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

/// The verdicts as AWS telemetry.
pub fn telemetry(sim: &Sim) -> Telemetry {
    verdicts(sim).into_iter().map(|v| ((v.vpn_connection, v.outside_ip), (v.up, v.reason))).collect()
}

/// Azure's `connectionStatus` per connection id (lowercase): Connected when its tunnel is up.
pub fn azure_status(sim: &Sim) -> BTreeMap<String, &'static str> {
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
