//! Virtual private gateways (create, describe, delete, attach, detach, route propagation) and
//! customer gateways (create, describe, delete).

use std::time::{Duration, Instant};

use super::{Cgw, Life, Timing, Vgw, VpnStore, matches_filters, not_found, tag_field};
use crate::aws::query::{Ec2Error, Params, Xml};

impl VpnStore {
    pub fn create_vgw(&mut self, p: &Params, t: &Timing) -> Result<String, Ec2Error> {
        // EC2 API reference `CreateVpnGateway.AmazonSideAsn`: a private ASN, 64512-65534 (16-bit)
        // or 4200000000-4294967294 (32-bit); default 64512.
        let asn = match p.get("AmazonSideAsn") {
            None => 64512,
            Some(text) => match text.parse::<i64>() {
                Ok(a) if (64_512..=65_534).contains(&a) || (4_200_000_000..=4_294_967_294).contains(&a) => a,
                _ => {
                    return Err(Ec2Error::bad(
                        "InvalidParameterValue",
                        format!(
                            "The value '{text}' for AmazonSideAsn is not valid: a private ASN in 64512-65534 or 4200000000-4294967294."
                        ),
                    ));
                }
            },
        };
        let id = self.id("vgw");
        let vgw = Vgw {
            id: id.clone(),
            asn,
            life: Life::new(t.now, (t.scaled)(60.0, 120.0)),
            attachment: None,
            tags: p.tag_specs(),
        };
        let mut x = Xml::default();
        self.vgws.insert(id.clone(), vgw);
        self.vgw_xml(&mut x, &id, t.now);
        Ok(format!("<vpnGateway>{}</vpnGateway>", x.0))
    }

    fn vgw_xml(&self, x: &mut Xml, id: &str, now: Instant) {
        let g = &self.vgws[id];
        x.leaf("vpnGatewayId", &g.id)
            .leaf("state", g.life.state(now))
            .leaf("type", "ipsec.1")
            .leaf("amazonSideAsn", g.asn);
        x.open("attachments");
        if let Some((vpc, at, attached)) = &g.attachment {
            let state = if !attached {
                if now >= *at { "detached" } else { "detaching" }
            } else if now >= *at {
                "attached"
            } else {
                "attaching"
            };
            x.open("item").leaf("vpcId", vpc).leaf("state", state).close("item");
        }
        x.close("attachments");
        x.tags(&g.tags);
    }

    pub fn describe_vgws(&self, p: &Params, now: Instant) -> Result<String, Ec2Error> {
        let ids = p.list("VpnGatewayId");
        for id in &ids {
            if !self.vgws.contains_key(id) {
                return Err(not_found("VpnGateway", id));
            }
        }
        let filters = p.filters();
        let mut x = Xml::default();
        x.open("vpnGatewaySet");
        for g in self.vgws.values() {
            if !ids.is_empty() && !ids.contains(&g.id) {
                continue;
            }
            let ok = matches_filters(&filters, |name| {
                tag_field(&g.tags, name).unwrap_or_else(|| match name {
                    "state" => vec![g.life.state(now).to_string()],
                    "vpn-gateway-id" => vec![g.id.clone()],
                    "amazon-side-asn" => vec![g.asn.to_string()],
                    "attachment.vpc-id" => g.attachment.iter().filter(|a| a.2).map(|a| a.0.clone()).collect(),
                    "attachment.state" => g.attachment.iter().filter(|a| a.2).map(|_| "attached".to_string()).collect(),
                    _ => vec![],
                })
            });
            if ok {
                x.open("item");
                self.vgw_xml(&mut x, &g.id, now);
                x.close("item");
            }
        }
        x.close("vpnGatewaySet");
        Ok(x.0)
    }

    /// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteVpnGateway.html: "You must
    /// first detach the virtual private gateway from the VPC" and delete its VPN connections.
    pub fn delete_vgw(&mut self, p: &Params, t: &Timing) -> Result<String, Ec2Error> {
        let id = p.get("VpnGatewayId").unwrap_or_default().to_string();
        let now = t.now;
        let Some(g) = self.vgws.get(&id) else { return Err(not_found("VpnGateway", &id)) };
        if g.life.state(now) == "deleted" {
            return Err(not_found("VpnGateway", &id));
        }
        if g.attachment.as_ref().is_some_and(|a| a.2) {
            return Err(Ec2Error::bad(
                "IncorrectState",
                format!("The vpn gateway {id} is attached to a VPC; detach it first."),
            ));
        }
        if g.attachment.as_ref().is_some_and(|a| !a.2 && now < a.1) {
            return Err(Ec2Error::bad("IncorrectState", format!("The vpn gateway {id} is still detaching.")));
        }
        // A connection still `deleting` holds the gateway too.
        if self.conns.values().any(|c| c.vgw == id && c.life.state(now) != "deleted") {
            return Err(Ec2Error::bad(
                "IncorrectState",
                format!("The vpn gateway {id} has VPN connections; delete them first."),
            ));
        }
        let g = self.vgws.get_mut(&id).expect("checked");
        if g.life.gone.is_none() {
            g.life.gone = Some(now + (t.scaled)(30.0, 60.0));
        }
        Ok("<return>true</return>".into())
    }

    pub fn attach(&mut self, p: &Params, t: &Timing, vpc_exists: bool) -> Result<String, Ec2Error> {
        let id = p.get("VpnGatewayId").unwrap_or_default().to_string();
        let vpc = p.get("VpcId").unwrap_or_default().to_string();
        if !vpc_exists {
            return Err(Ec2Error::bad("InvalidVpcID.NotFound", format!("The vpc ID '{vpc}' does not exist")));
        }
        let now = t.now;
        let Some(g) = self.vgws.get(&id) else { return Err(not_found("VpnGateway", &id)) };
        if g.life.state(now) != "available" {
            return Err(Ec2Error::bad("IncorrectState", format!("The vpn gateway {id} is {}", g.life.state(now))));
        }
        // One virtual private gateway per VPC.
        if self.vgws.values().any(|o| o.id != id && o.attachment.as_ref().is_some_and(|a| a.2 && a.0 == vpc)) {
            return Err(Ec2Error::bad(
                "VpnGatewayAttachmentLimitExceeded",
                format!("The VPC {vpc} already has a virtual private gateway attached"),
            ));
        }
        let g = self.vgws.get_mut(&id).expect("checked");
        if let Some((v, until, false)) = &g.attachment
            && now < *until
        {
            return Err(Ec2Error::bad("IncorrectState", format!("{id} is still detaching from {v}")));
        }
        if let Some((v, _, true)) = &g.attachment {
            if *v == vpc {
                return Err(Ec2Error::bad("VpnGatewayAlreadyAttached", format!("{id} is already attached to {vpc}")));
            }
            return Err(Ec2Error::bad("IncorrectState", format!("{id} is attached to {v}")));
        }
        g.attachment = Some((vpc.clone(), now + (t.scaled)(20.0, 60.0), true));
        let mut x = Xml::default();
        x.open("attachment").leaf("vpcId", &vpc).leaf("state", "attaching").close("attachment");
        Ok(x.0)
    }

    /// The attachment is `detaching` for a while (10-30 s realistic: the sim's assumption; AWS
    /// documents the state, `VpcAttachment.State`, not its duration), then `detached`.
    pub fn detach(&mut self, p: &Params, t: &Timing) -> Result<String, Ec2Error> {
        let id = p.get("VpnGatewayId").unwrap_or_default().to_string();
        let Some(g) = self.vgws.get_mut(&id) else { return Err(not_found("VpnGateway", &id)) };
        match &mut g.attachment {
            Some((_, until, attached)) if *attached => {
                *attached = false;
                *until = t.now + (t.scaled)(10.0, 30.0);
            }
            _ => return Err(Ec2Error::bad("InvalidVpnGatewayAttachment.NotFound", format!("{id} is not attached"))),
        }
        for set in self.propagation.values_mut() {
            set.remove(&id);
        }
        Ok("<return>true</return>".into())
    }

    /// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateCustomerGateway.html:
    /// `BgpAsn` 1-2,147,483,647 (default 65000), `BgpAsnExtended` 2,147,483,648-4,294,967,295;
    /// "An identical request returns information about the existing customer gateway".
    pub fn create_cgw(&mut self, p: &Params, t: &Timing) -> Result<String, Ec2Error> {
        let ip = p.get("IpAddress").or(p.get("PublicIp")).unwrap_or_default().to_string();
        if ip.parse::<std::net::Ipv4Addr>().is_err() {
            return Err(Ec2Error::bad("InvalidParameterValue", format!("invalid customer gateway IP '{ip}'")));
        }
        let number = |name: &str, range: std::ops::RangeInclusive<i64>| -> Result<Option<i64>, Ec2Error> {
            let Some(v) = p.get(name) else { return Ok(None) };
            match v.parse::<i64>() {
                Ok(n) if range.contains(&n) => Ok(Some(n)),
                _ => Err(Ec2Error::bad(
                    "InvalidParameterValue",
                    format!(
                        "The value '{v}' for parameter {name} is not valid: valid values are {} to {}.",
                        range.start(),
                        range.end()
                    ),
                )),
            }
        };
        let asn = number("BgpAsn", 1..=2_147_483_647)?;
        let extended = number("BgpAsnExtended", 2_147_483_648..=4_294_967_295)?;
        if asn.is_some() && extended.is_some() {
            return Err(Ec2Error::bad(
                "InvalidParameterCombination",
                "Specify either BgpAsn or BgpAsnExtended, not both.",
            ));
        }
        let (asn, is_extended) = match (asn, extended) {
            (_, Some(e)) => (e, true),
            (a, None) => (a.unwrap_or(65000), false),
        };
        let device_name = p.get("DeviceName").map(String::from);
        let kind = p.get("Type").unwrap_or("ipsec.1");
        if kind != "ipsec.1" {
            return Err(Ec2Error::bad(
                "InvalidParameterValue",
                format!("The customer gateway type '{kind}' is not valid: ipsec.1."),
            ));
        }
        let same = self
            .cgws
            .values()
            .find(|c| {
                c.ip == ip
                    && c.asn == asn
                    && c.device_name == device_name
                    && c.life.state(t.now) != "deleted"
                    && c.life.gone.is_none()
            })
            .map(|c| c.id.clone());
        let id = match same {
            Some(id) => id,
            None => {
                let id = self.id("cgw");
                let cgw = Cgw {
                    id: id.clone(),
                    ip,
                    asn,
                    extended: is_extended,
                    device_name,
                    life: Life::new(t.now, Duration::ZERO),
                    tags: p.tag_specs(),
                };
                self.cgws.insert(id.clone(), cgw);
                id
            }
        };
        let mut x = Xml::default();
        self.cgw_xml(&mut x, &id, t.now);
        Ok(format!("<customerGateway>{}</customerGateway>", x.0))
    }

    fn cgw_xml(&self, x: &mut Xml, id: &str, now: Instant) {
        let c = &self.cgws[id];
        x.leaf("customerGatewayId", &c.id)
            .leaf("state", c.life.state(now))
            .leaf("type", "ipsec.1")
            .leaf("ipAddress", &c.ip);
        if c.extended {
            x.leaf("bgpAsnExtended", c.asn);
        } else {
            x.leaf("bgpAsn", c.asn);
        }
        if let Some(d) = &c.device_name {
            x.leaf("deviceName", d);
        }
        x.tags(&c.tags);
    }

    pub fn describe_cgws(&self, p: &Params, now: Instant) -> Result<String, Ec2Error> {
        let ids = p.list("CustomerGatewayId");
        for id in &ids {
            if !self.cgws.contains_key(id) {
                return Err(not_found("CustomerGateway", id));
            }
        }
        let filters = p.filters();
        let mut x = Xml::default();
        x.open("customerGatewaySet");
        for c in self.cgws.values() {
            if !ids.is_empty() && !ids.contains(&c.id) {
                continue;
            }
            let ok = matches_filters(&filters, |name| {
                tag_field(&c.tags, name).unwrap_or_else(|| match name {
                    "state" => vec![c.life.state(now).to_string()],
                    "ip-address" => vec![c.ip.clone()],
                    "customer-gateway-id" => vec![c.id.clone()],
                    "bgp-asn" => vec![c.asn.to_string()],
                    _ => vec![],
                })
            });
            if ok {
                x.open("item");
                self.cgw_xml(&mut x, &c.id, now);
                x.close("item");
            }
        }
        x.close("customerGatewaySet");
        Ok(x.0)
    }

    /// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteCustomerGateway.html:
    /// "You must delete the VPN connection before you can delete the customer gateway."
    pub fn delete_cgw(&mut self, p: &Params, t: &Timing) -> Result<String, Ec2Error> {
        let id = p.get("CustomerGatewayId").unwrap_or_default().to_string();
        let now = t.now;
        let Some(c) = self.cgws.get(&id) else { return Err(not_found("CustomerGateway", &id)) };
        if c.life.state(now) == "deleted" {
            return Err(not_found("CustomerGateway", &id));
        }
        // A connection still `deleting` holds the customer gateway too.
        if self.conns.values().any(|v| v.cgw == id && v.life.state(now) != "deleted") {
            return Err(Ec2Error::bad(
                "IncorrectState",
                format!("The customer gateway {id} is in use by a VPN connection."),
            ));
        }
        self.cgws.get_mut(&id).expect("checked").life.gone = Some(now + (t.scaled)(5.0, 15.0));
        Ok("<return>true</return>".into())
    }

    /// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_EnableVgwRoutePropagation.html
    pub fn propagate(
        &mut self,
        p: &Params,
        enable: bool,
        now: Instant,
        table_exists: bool,
    ) -> Result<String, Ec2Error> {
        let rt = p.get("RouteTableId").unwrap_or_default().to_string();
        let gw = p.get("GatewayId").unwrap_or_default().to_string();
        if !table_exists {
            return Err(Ec2Error::bad(
                "InvalidRouteTableID.NotFound",
                format!("The routeTable ID '{rt}' does not exist"),
            ));
        }
        let Some(g) = self.vgws.get(&gw) else { return Err(not_found("VpnGateway", &gw)) };
        if enable && !(g.attachment.as_ref().is_some_and(|a| a.2 && now >= a.1)) {
            return Err(Ec2Error::bad(
                "Gateway.NotAttached",
                format!("The gateway {gw} is not attached to the route table's VPC"),
            ));
        }
        let set = self.propagation.entry(rt).or_default();
        if enable {
            set.insert(gw);
        } else {
            set.remove(&gw);
        }
        Ok("<return>true</return>".into())
    }
}
