//! `xcsp status`'s table.

use xcsp_stack::health::{Health, cause};

/// The table `xcsp status` prints.
pub fn render(h: &Health) -> String {
    let mut out = String::new();
    if h.tunnels.is_empty() {
        out += "No tunnels: the stack has no VPN connections yet.\n";
    } else {
        out += &format!(
            "{:<36} {:<16} {:<6} {:<7} {:<50} {:<13} {}\n",
            "TUNNEL", "AWS OUTSIDE IP", "AWS", "ROUTES", "AZURE CONNECTION", "AZURE", "IN/OUT BYTES"
        );
        for t in &h.tunnels {
            let routes = t.aws_accepted_routes.map_or("-".into(), |r| r.to_string());
            let bytes = match (t.azure_ingress_bytes, t.azure_egress_bytes) {
                (Some(i), Some(e)) => format!("{i}/{e}"),
                _ => "-".into(),
            };
            out += &format!(
                "{:<36} {:<16} {:<6} {:<7} {:<50} {:<13} {}\n",
                t.tunnel,
                t.outside_ip,
                t.aws_status,
                routes,
                t.azure_connection.as_ref().map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
                t.azure_status,
                bytes
            );
            if t.aws_status != "UP" && t.aws_detail != "-" {
                out += &format!("    {}\n", t.aws_detail);
            }
            if let Some(since) = &t.aws_since {
                out += &format!("    AWS side {} since {since}\n", t.aws_status);
            }
        }
    }
    if h.machines.len() < h.machines_wanted {
        out += &format!("\nThe MachineSets ask for {} machines; {} are seen.\n", h.machines_wanted, h.machines.len());
    }
    if !h.machines.is_empty() {
        out += &format!("\n{:<44} {:<13} {:<30} READY\n", "MACHINE", "PHASE", "NODE");
        for m in &h.machines {
            let (node, ready) = match &m.node {
                Some(n) => (
                    n.name.clone(),
                    format!("{}{}", n.ready, n.since.as_ref().map(|s| format!(" since {s}")).unwrap_or_default()),
                ),
                None => ("-".into(), "-".into()),
            };
            out += &format!("{:<44} {:<13} {:<30} {ready}\n", format!("{}/{}", m.namespace, m.name), m.phase, node);
            if let Some(why) = cause(h, m) {
                out += &format!("    {why}\n");
            }
        }
    }
    for (what, list) in [
        ("link", &h.links),
        ("identity", &h.identities),
        ("pool", &h.pools),
        ("cluster", &h.cluster),
        ("provider", &h.providers),
    ] {
        for l in list {
            for c in &l.conditions {
                out += &format!("{what} {}: {}={} ({}): {}\n", l.name, c.kind, c.status, c.reason, c.message);
            }
        }
    }
    out += &format!("\n{} of {} tunnels up on both sides.\n", h.up, h.expected);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use xcsp_stack::health::{Condition, Named, Tunnel};

    fn tunnel(n: usize, up: bool) -> Tunnel {
        Tunnel {
            tunnel: format!("aws_vpn_connection.link[0] tunnel {n}"),
            link: "link".into(),
            outside_ip: format!("203.0.113.{n}"),
            aws_status: if up { "UP" } else { "DOWN" }.into(),
            aws_detail: if up { "-" } else { "IPSEC IS DOWN" }.into(),
            aws_accepted_routes: up.then_some(1),
            aws_since: None,
            azure_connection: None,
            azure_status: if up { "Connected" } else { "NotConnected" }.into(),
            azure_ingress_bytes: Some(10),
            azure_egress_bytes: Some(20),
            up,
        }
    }

    #[test]
    fn the_table_names_each_tunnel_each_condition_and_the_count() {
        let h = Health {
            tunnels: vec![tunnel(1, true), tunnel(2, false)],
            machines: vec![],
            machines_wanted: 2,
            links: vec![],
            identities: vec![],
            pools: vec![],
            cluster: vec![],
            providers: vec![Named {
                name: "core".into(),
                conditions: vec![Condition {
                    kind: "ManagerAvailable",
                    status: "True",
                    reason: "MinimumReplicasAvailable".into(),
                    message: "Deployment xcsp-capi-system/capi-controller-manager is available (v1.13.6)".into(),
                }],
            }],
            leftover: vec![],
            up: 1,
            expected: 2,
        };
        let shown = render(&h);
        assert!(shown.starts_with("TUNNEL"), "{shown}");
        let row = shown.lines().find(|l| l.starts_with("aws_vpn_connection.link[0] tunnel 2")).expect("its row");
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(columns[3..], ["203.0.113.2", "DOWN", "-", "-", "NotConnected", "10/20"], "{row}");
        assert!(shown.contains("\n    IPSEC IS DOWN\n"), "the AWS side's detail under a tunnel that is down: {shown}");
        assert!(shown.contains("The MachineSets ask for 2 machines; 0 are seen."), "{shown}");
        assert!(shown.contains("provider core: ManagerAvailable=True (MinimumReplicasAvailable): Deployment xcsp-capi-system/capi-controller-manager is available (v1.13.6)"), "{shown}");
        assert!(shown.ends_with("\n1 of 2 tunnels up on both sides.\n"), "{shown}");
        let none = Health { tunnels: vec![], machines_wanted: 0, up: 0, expected: 0, providers: vec![], ..h };
        assert!(render(&none).starts_with("No tunnels: the stack has no VPN connections yet."));
    }
}
