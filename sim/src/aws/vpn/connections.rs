//! VPN connections: create (with both tunnels' options), describe (the options as AWS runs them,
//! the configuration document, the tunnels' telemetry), delete, ModifyVpnTunnelOptions, and static
//! routes.

use std::collections::BTreeSet;
use std::time::Instant;

use super::tunnel_options::{check_inside_cidr, check_psk, network, tunnel_options, under};
use super::{Conn, Life, Telemetry, Timing, Tunnel, VpnStore, matches_filters, not_found, tag_field};
use crate::aws::query::{Ec2Error, Params, Xml};

impl VpnStore {
    pub fn create_conn(&mut self, p: &Params, t: &Timing) -> Result<String, Ec2Error> {
        let now = t.now;
        let cgw = p.get("CustomerGatewayId").unwrap_or_default().to_string();
        let vgw = p.get("VpnGatewayId").unwrap_or_default().to_string();
        match self.cgws.get(&cgw) {
            Some(c) if c.life.state(now) == "available" => {}
            Some(c) => {
                return Err(Ec2Error::bad(
                    "IncorrectState",
                    format!("The customer gateway {cgw} is {}", c.life.state(now)),
                ));
            }
            None => return Err(not_found("CustomerGateway", &cgw)),
        }
        match self.vgws.get(&vgw) {
            Some(g) if g.life.state(now) == "available" => {}
            Some(g) => {
                return Err(Ec2Error::bad("IncorrectState", format!("The vpn gateway {vgw} is {}", g.life.state(now))));
            }
            None => return Err(not_found("VpnGateway", &vgw)),
        }
        let mut tunnels = tunnel_options(p)?;
        let mut seen = BTreeSet::new();
        for tunnel in tunnels.iter_mut() {
            if tunnel.inside_cidr.is_empty() {
                tunnel.inside_cidr = format!("169.254.{}.{}/30", 100 + (self.next % 100), (self.next % 60) * 4);
            }
            check_inside_cidr(&tunnel.inside_cidr)?;
            if !seen.insert(network(&tunnel.inside_cidr)) {
                return Err(Ec2Error::bad("InvalidParameterValue", "The two tunnels need different inside CIDRs"));
            }
            if tunnel.psk.is_empty() {
                tunnel.psk = format!("aws_generated_{}", self.next + 1000);
            }
            check_psk(&tunnel.psk)?;
            tunnel.outside_ip = self.outside_ip();
        }
        // Inside CIDRs must be unique per virtual private gateway.
        for other in self.conns.values().filter(|c| c.vgw == vgw && c.life.live(now)) {
            for t2 in &other.tunnels {
                if seen.contains(&network(&t2.inside_cidr)) {
                    return Err(Ec2Error::bad(
                        "InvalidParameterValue",
                        format!("The tunnel inside CIDR {} is already used on {vgw}", t2.inside_cidr),
                    ));
                }
            }
        }
        let id = self.id("vpn");
        let conn = Conn {
            id: id.clone(),
            cgw,
            vgw,
            static_only: p.get("Options.StaticRoutesOnly") == Some("true"),
            tunnels,
            routes: BTreeSet::new(),
            life: Life::new(now, (t.scaled)(240.0, 420.0)),
            modifying_until: None,
            tags: p.tag_specs(),
        };
        self.conns.insert(id.clone(), conn);
        let mut x = Xml::default();
        self.conn_xml(&mut x, &id, now, &Telemetry::new());
        Ok(format!("<vpnConnection>{}</vpnConnection>", x.0))
    }

    fn conn_xml(&self, x: &mut Xml, id: &str, now: Instant, telemetry: &Telemetry) {
        let c = &self.conns[id];
        let state = c.state(now);
        // As AWS runs them (defaults filled): the options and the configuration document both show these.
        let tunnels: Vec<Tunnel> = c.tunnels.iter().map(Tunnel::effective).collect();
        x.leaf("vpnConnectionId", &c.id)
            .leaf("state", state)
            .leaf("type", "ipsec.1")
            .leaf("category", "VPN")
            .leaf("customerGatewayId", &c.cgw)
            .leaf("vpnGatewayId", &c.vgw)
            .leaf("customerGatewayConfiguration", self.config_document(c, &tunnels));
        x.open("options").leaf("staticRoutesOnly", c.static_only).open("tunnelOptionSet");
        for t in &tunnels {
            x.open("item")
                .leaf("outsideIpAddress", &t.outside_ip)
                .leaf("tunnelInsideCidr", &t.inside_cidr)
                .leaf("preSharedKey", &t.psk);
            let ints = [
                ("phase1LifetimeSeconds", t.p1_lifetime),
                ("phase2LifetimeSeconds", t.p2_lifetime),
                ("rekeyMarginTimeSeconds", t.rekey_margin),
                ("rekeyFuzzPercentage", t.rekey_fuzz),
                ("replayWindowSize", t.replay_window),
                ("dpdTimeoutSeconds", t.dpd_timeout),
            ];
            for (name, value) in ints {
                if let Some(v) = value {
                    x.leaf(name, v);
                }
            }
            for (name, value) in [("dpdTimeoutAction", &t.dpd_action), ("startupAction", &t.startup_action)] {
                if let Some(v) = value {
                    x.leaf(name, v);
                }
            }
            x.values("phase1EncryptionAlgorithmSet", &t.p1_enc)
                .values("phase2EncryptionAlgorithmSet", &t.p2_enc)
                .values("phase1IntegrityAlgorithmSet", &t.p1_int)
                .values("phase2IntegrityAlgorithmSet", &t.p2_int)
                .values("phase1DHGroupNumberSet", &t.p1_dh)
                .values("phase2DHGroupNumberSet", &t.p2_dh)
                .values("ikeVersionSet", &t.ike_versions)
                .close("item");
        }
        x.close("tunnelOptionSet").close("options");
        x.open("routes");
        for r in &c.routes {
            x.open("item")
                .leaf("destinationCidrBlock", r)
                .leaf("source", "Static")
                .leaf("state", "available")
                .close("item");
        }
        x.close("routes");
        x.open("vgwTelemetry");
        for t in &c.tunnels {
            let (up, why) = if state == "available" || state == "modifying" {
                telemetry
                    .get(&(c.id.clone(), t.outside_ip.clone()))
                    .cloned()
                    .unwrap_or((false, "no peer configured".into()))
            } else {
                (false, format!("the VPN connection is {state}"))
            };
            x.open("item")
                .leaf("outsideIpAddress", &t.outside_ip)
                .leaf("status", if up { "UP" } else { "DOWN" })
                .leaf("statusMessage", why)
                .leaf("acceptedRouteCount", if up { 1 } else { 0 })
                .close("item");
        }
        x.close("vgwTelemetry");
        x.tags(&c.tags);
    }

    pub fn describe_conns(&self, p: &Params, now: Instant, telemetry: &Telemetry) -> Result<String, Ec2Error> {
        let ids = p.list("VpnConnectionId");
        for id in &ids {
            if !self.conns.contains_key(id) {
                return Err(not_found("VpnConnection", id));
            }
        }
        let filters = p.filters();
        let mut x = Xml::default();
        x.open("vpnConnectionSet");
        for c in self.conns.values() {
            if !ids.is_empty() && !ids.contains(&c.id) {
                continue;
            }
            let ok = matches_filters(&filters, |name| {
                tag_field(&c.tags, name).unwrap_or_else(|| match name {
                    "state" => vec![c.state(now).to_string()],
                    "vpn-connection-id" => vec![c.id.clone()],
                    "vpn-gateway-id" => vec![c.vgw.clone()],
                    "customer-gateway-id" => vec![c.cgw.clone()],
                    _ => vec![],
                })
            });
            if ok {
                x.open("item");
                self.conn_xml(&mut x, &c.id, now, telemetry);
                x.close("item");
            }
        }
        x.close("vpnConnectionSet");
        Ok(x.0)
    }

    pub fn delete_conn(&mut self, p: &Params, t: &Timing) -> Result<String, Ec2Error> {
        let id = p.get("VpnConnectionId").unwrap_or_default().to_string();
        let Some(c) = self.conns.get_mut(&id) else { return Err(not_found("VpnConnection", &id)) };
        if c.life.state(t.now) == "deleted" {
            return Err(not_found("VpnConnection", &id));
        }
        if c.life.gone.is_none() {
            c.life.gone = Some(t.now + (t.scaled)(60.0, 180.0));
        }
        Ok("<return>true</return>".into())
    }

    /// PSK rotation and option changes on one tunnel, found by its outside address.
    /// The connection is `modifying` for a while after each change and refuses another one
    /// meanwhile (terraform-provider-aws waits for `available` after every ModifyVpnTunnelOptions).
    pub fn modify_tunnel(&mut self, p: &Params, t: &Timing, telemetry: &Telemetry) -> Result<String, Ec2Error> {
        let now = t.now;
        let id = p.get("VpnConnectionId").unwrap_or_default().to_string();
        let ip = p.get("VpnTunnelOutsideIpAddress").unwrap_or_default().to_string();
        let Some(c) = self.conns.get_mut(&id) else { return Err(not_found("VpnConnection", &id)) };
        if c.state(now) != "available" {
            return Err(Ec2Error::bad(
                "IncorrectState",
                format!(
                    "The VPN connection {id} is {}; it must be available to modify its tunnel options.",
                    c.state(now)
                ),
            ));
        }
        let modifying = now + (t.scaled)(60.0, 180.0);
        let Some(tunnel) = c.tunnels.iter_mut().find(|x| x.outside_ip == ip) else {
            return Err(Ec2Error::bad(
                "InvalidParameterValue",
                format!("{id} has no tunnel with outside address {ip}"),
            ));
        };
        let mut changed = tunnel.clone();
        changed.apply(&under(p, "TunnelOptions."))?;
        changed.check()?;
        if changed.psk != tunnel.psk {
            check_psk(&changed.psk)?;
        }
        if changed.inside_cidr != tunnel.inside_cidr {
            check_inside_cidr(&changed.inside_cidr)?;
        }
        changed.changed_at = Some(modifying);
        *tunnel = changed;
        c.modifying_until = Some(modifying);
        let mut x = Xml::default();
        x.open("vpnConnection");
        self.conn_xml(&mut x, &id, now, telemetry);
        x.close("vpnConnection");
        Ok(x.0)
    }

    pub fn route(&mut self, p: &Params, add: bool, now: Instant) -> Result<String, Ec2Error> {
        let id = p.get("VpnConnectionId").unwrap_or_default().to_string();
        let cidr = p.get("DestinationCidrBlock").unwrap_or_default().to_string();
        let Some(c) = self.conns.get_mut(&id) else { return Err(not_found("VpnConnection", &id)) };
        if !c.life.live(now) {
            return Err(Ec2Error::bad("IncorrectState", format!("The VPN connection {id} is {}", c.life.state(now))));
        }
        if !c.static_only {
            return Err(Ec2Error::bad(
                "InvalidParameterValue",
                format!("{id} uses BGP; static routes need StaticRoutesOnly"),
            ));
        }
        if add {
            c.routes.insert(cidr);
        } else if !c.routes.remove(&cidr) {
            return Err(Ec2Error::bad("InvalidRoute.NotFound", format!("no route to {cidr} on {id}")));
        }
        Ok("<return>true</return>".into())
    }
}
