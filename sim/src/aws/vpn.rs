//! The Site-to-Site VPN resources the fidelity layer owns instead of moto: virtual private
//! gateways, customer gateways, VPN connections with per-tunnel options, static routes and route
//! propagation. moto 5.2.5 drops tunnel options, answers 500 to propagation, static routes and
//! tunnel modification, lets an attached gateway or a used customer gateway be deleted, and makes
//! every state final at once; here each behaves as the EC2 API reference documents.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::query::{Ec2Error, Params, Xml};

/// A lifecycle timed by the latency profile: pending until `ready`, deleting until `gone`.
#[derive(Debug, Clone)]
pub struct Life {
    pub ready: Instant,
    pub gone: Option<Instant>,
}

impl Life {
    pub fn new(now: Instant, takes: Duration) -> Life {
        Life { ready: now + takes, gone: None }
    }

    /// `pending`, `available`, `deleting` or `deleted`.
    pub fn state(&self, now: Instant) -> &'static str {
        match self.gone {
            Some(g) if now >= g => "deleted",
            Some(_) => "deleting",
            None if now >= self.ready => "available",
            None => "pending",
        }
    }

    pub fn live(&self, now: Instant) -> bool {
        matches!(self.state(now), "pending" | "available")
    }
}

#[derive(Debug, Clone)]
pub struct Vgw {
    pub id: String,
    pub asn: i64,
    pub life: Life,
    /// VPC id, and when the attachment completes (`attaching` before, `attached` after) while
    /// attached, or when the detachment does (`detaching` before, `detached` after) once removed.
    pub attachment: Option<(String, Instant, bool)>,
    pub tags: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct Cgw {
    pub id: String,
    pub ip: String,
    pub asn: i64,
    /// The ASN came as `BgpAsnExtended` (and is reported as `bgpAsnExtended`).
    pub extended: bool,
    pub device_name: Option<String>,
    pub life: Life,
    pub tags: Vec<(String, String)>,
}

/// One tunnel's options, as CreateVpnConnection takes them and DescribeVpnConnections shows them.
#[derive(Debug, Clone, Default)]
pub struct Tunnel {
    pub outside_ip: String,
    pub inside_cidr: String,
    pub psk: String,
    pub ike_versions: Vec<String>,
    pub p1_enc: Vec<String>,
    pub p1_int: Vec<String>,
    pub p1_dh: Vec<String>,
    pub p2_enc: Vec<String>,
    pub p2_int: Vec<String>,
    pub p2_dh: Vec<String>,
    pub p1_lifetime: Option<i64>,
    pub p2_lifetime: Option<i64>,
    pub rekey_margin: Option<i64>,
    pub rekey_fuzz: Option<i64>,
    pub replay_window: Option<i64>,
    pub dpd_timeout: Option<i64>,
    pub dpd_action: Option<String>,
    pub startup_action: Option<String>,
    /// When the last ModifyVpnTunnelOptions took effect: the tunnel renegotiates from there.
    pub changed_at: Option<Instant>,
}

/// The algorithm values `VpnTunnelOptionsSpecification` accepts. An option left unset permits
/// all of them: they are AWS's defaults (Site-to-Site VPN User Guide, "Tunnel options for your
/// Site-to-Site VPN connection"), and DescribeVpnConnections lists them.
pub const ENCRYPTION: &[&str] = &["AES128", "AES256", "AES128-GCM-16", "AES256-GCM-16"];
pub const INTEGRITY: &[&str] = &["SHA1", "SHA2-256", "SHA2-384", "SHA2-512"];
pub const P1_DH: &[&str] = &["2", "14", "15", "16", "17", "18", "19", "20", "21", "22", "23", "24"];
pub const P2_DH: &[&str] = &["2", "5", "14", "15", "16", "17", "18", "19", "20", "21", "22", "23", "24"];
pub const IKE: &[&str] = &["ikev1", "ikev2"];

#[derive(Debug, Clone)]
pub struct Conn {
    pub id: String,
    pub cgw: String,
    pub vgw: String,
    pub static_only: bool,
    pub tunnels: [Tunnel; 2],
    pub routes: BTreeSet<String>,
    pub life: Life,
    /// A tunnel modification in progress: `modifying` until then.
    pub modifying_until: Option<Instant>,
    pub tags: Vec<(String, String)>,
}

impl Conn {
    /// The lifecycle state, with `modifying` while a ModifyVpnTunnelOptions is applied.
    pub fn state(&self, now: Instant) -> &'static str {
        match self.life.state(now) {
            "available" if self.modifying_until.is_some_and(|u| now < u) => "modifying",
            s => s,
        }
    }
}

/// What the layer holds.
#[derive(Debug, Default)]
pub struct VpnStore {
    pub vgws: BTreeMap<String, Vgw>,
    pub cgws: BTreeMap<String, Cgw>,
    pub conns: BTreeMap<String, Conn>,
    /// Route table id -> gateways propagating into it.
    pub propagation: BTreeMap<String, BTreeSet<String>>,
    next: u64,
}

/// Tunnel status decided by the world: (UP/DOWN, message) per (connection id, outside ip).
pub type Telemetry = BTreeMap<(String, String), (bool, String)>;

impl VpnStore {
    fn id(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}-{:017x}", 0x0a1b2c3d4e5f6000u64 + self.next)
    }

    /// AWS picks tunnel outside addresses from its public ranges; these come from 203.0.113.0/24
    /// (TEST-NET-3), two per connection, never reused within a run.
    fn outside_ip(&mut self) -> String {
        self.next += 1;
        format!("203.0.113.{}", 10 + (self.next % 240))
    }
}

fn matches_filters(filters: &[(String, Vec<String>)], field: impl Fn(&str) -> Vec<String>) -> bool {
    filters.iter().all(|(name, values)| {
        let have = field(name);
        values.iter().any(|v| have.iter().any(|h| h == v))
    })
}

fn tag_field(tags: &[(String, String)], name: &str) -> Option<Vec<String>> {
    if let Some(k) = name.strip_prefix("tag:") {
        return Some(tags.iter().filter(|(tk, _)| tk == k).map(|(_, v)| v.clone()).collect());
    }
    if name == "tag-key" {
        return Some(tags.iter().map(|(k, _)| k.clone()).collect());
    }
    None
}

fn not_found(kind: &str, id: &str) -> Ec2Error {
    Ec2Error::bad(&format!("Invalid{kind}ID.NotFound"), format!("The {kind} ID '{id}' does not exist"))
}

/// The parameters under `prefix` (`Options.TunnelOptions.1.` or `TunnelOptions.`), prefix removed.
fn under(p: &Params, prefix: &str) -> Params {
    Params(p.0.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|r| (r.to_string(), v.clone()))).collect())
}

/// An integer option (`InvalidParameterValue` naming it when it is not one).
fn int_option(t: &Params, name: &str) -> Result<Option<i64>, Ec2Error> {
    match t.get(name) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| invalid_option(name, v, "an integer")),
    }
}

fn invalid_option(name: &str, value: impl std::fmt::Display, want: &str) -> Ec2Error {
    Ec2Error::bad(
        "InvalidParameterValue",
        format!("The value '{value}' for tunnel option {name} is not valid: {want}."),
    )
}

impl Tunnel {
    /// Sets the options present in `t` (one tunnel's `VpnTunnelOptionsSpecification` or
    /// `ModifyVpnTunnelOptionsSpecification` parameters); absent ones keep their value.
    /// The tunnel as AWS runs it and DescribeVpnConnections reports it: every option the request
    /// left unset at AWS's default (EC2 API reference, `VpnTunnelOptionsSpecification`: phase 1
    /// 28800 s, phase 2 3600 s, rekey margin 270 s, rekey fuzz 100 %, replay window 1024, DPD
    /// timeout 30 s, DPD action `clear`, startup action `add`; the algorithm lists above).
    pub fn effective(&self) -> Tunnel {
        let list = |v: &Vec<String>, all: &[&str]| {
            if v.is_empty() { all.iter().map(|s| s.to_string()).collect() } else { v.clone() }
        };
        Tunnel {
            ike_versions: list(&self.ike_versions, IKE),
            p1_enc: list(&self.p1_enc, ENCRYPTION),
            p1_int: list(&self.p1_int, INTEGRITY),
            p1_dh: list(&self.p1_dh, P1_DH),
            p2_enc: list(&self.p2_enc, ENCRYPTION),
            p2_int: list(&self.p2_int, INTEGRITY),
            p2_dh: list(&self.p2_dh, P2_DH),
            p1_lifetime: self.p1_lifetime.or(Some(28_800)),
            p2_lifetime: self.p2_lifetime.or(Some(3_600)),
            rekey_margin: self.rekey_margin.or(Some(270)),
            rekey_fuzz: self.rekey_fuzz.or(Some(100)),
            replay_window: self.replay_window.or(Some(1_024)),
            dpd_timeout: self.dpd_timeout.or(Some(30)),
            dpd_action: self.dpd_action.clone().or(Some("clear".into())),
            startup_action: self.startup_action.clone().or(Some("add".into())),
            ..self.clone()
        }
    }

    fn apply(&mut self, t: &Params) -> Result<(), Ec2Error> {
        let values = |name: &str| -> Option<Vec<String>> {
            let v: Vec<String> = t.members(name).iter().filter_map(|m| m.get("Value").map(String::from)).collect();
            (!v.is_empty()).then_some(v)
        };
        if let Some(c) = t.get("TunnelInsideCidr") {
            self.inside_cidr = c.to_string();
        }
        if let Some(k) = t.get("PreSharedKey") {
            self.psk = k.to_string();
        }
        let lists = [
            ("IKEVersion", &mut self.ike_versions),
            ("Phase1EncryptionAlgorithm", &mut self.p1_enc),
            ("Phase1IntegrityAlgorithm", &mut self.p1_int),
            ("Phase1DHGroupNumber", &mut self.p1_dh),
            ("Phase2EncryptionAlgorithm", &mut self.p2_enc),
            ("Phase2IntegrityAlgorithm", &mut self.p2_int),
            ("Phase2DHGroupNumber", &mut self.p2_dh),
        ];
        for (name, field) in lists {
            if let Some(v) = values(name) {
                *field = v;
            }
        }
        let ints = [
            ("Phase1LifetimeSeconds", &mut self.p1_lifetime),
            ("Phase2LifetimeSeconds", &mut self.p2_lifetime),
            ("RekeyMarginTimeSeconds", &mut self.rekey_margin),
            ("RekeyFuzzPercentage", &mut self.rekey_fuzz),
            ("ReplayWindowSize", &mut self.replay_window),
            ("DPDTimeoutSeconds", &mut self.dpd_timeout),
        ];
        for (name, field) in ints {
            if let Some(v) = int_option(t, name)? {
                *field = Some(v);
            }
        }
        if let Some(a) = t.get("DPDTimeoutAction") {
            self.dpd_action = Some(a.to_string());
        }
        if let Some(a) = t.get("StartupAction") {
            self.startup_action = Some(a.to_string());
        }
        Ok(())
    }

    /// The ranges and values of the EC2 API reference's `VpnTunnelOptionsSpecification`, on the
    /// effective options (AWS's defaults where unset: phase 1 28800 s, phase 2 3600 s).
    fn check(&self) -> Result<(), Ec2Error> {
        let p1 = self.p1_lifetime.unwrap_or(28_800);
        let p2 = self.p2_lifetime.unwrap_or(3_600);
        if !(900..=28_800).contains(&p1) {
            return Err(invalid_option("Phase1LifetimeSeconds", p1, "a value between 900 and 28800"));
        }
        if !(900..=3_600).contains(&p2) {
            return Err(invalid_option("Phase2LifetimeSeconds", p2, "a value between 900 and 3600"));
        }
        if p2 >= p1 {
            return Err(invalid_option(
                "Phase2LifetimeSeconds",
                p2,
                &format!("it must be less than Phase1LifetimeSeconds ({p1})"),
            ));
        }
        if let Some(m) = self.rekey_margin
            && !(60..=p2 / 2).contains(&m)
        {
            return Err(invalid_option(
                "RekeyMarginTimeSeconds",
                m,
                &format!("a value between 60 and half of Phase2LifetimeSeconds ({})", p2 / 2),
            ));
        }
        if let Some(f) = self.rekey_fuzz
            && !(0..=100).contains(&f)
        {
            return Err(invalid_option("RekeyFuzzPercentage", f, "a value between 0 and 100"));
        }
        if let Some(w) = self.replay_window
            && !(64..=2048).contains(&w)
        {
            return Err(invalid_option("ReplayWindowSize", w, "a value between 64 and 2048"));
        }
        if let Some(d) = self.dpd_timeout
            && d < 30
        {
            return Err(invalid_option("DPDTimeoutSeconds", d, "a value greater than or equal to 30"));
        }
        let one_of = |name: &str, value: &str, allowed: &[&str]| {
            if allowed.contains(&value) {
                Ok(())
            } else {
                Err(invalid_option(name, value, &format!("valid values are {}", allowed.join(" | "))))
            }
        };
        if let Some(a) = &self.dpd_action {
            one_of("DPDTimeoutAction", a, &["clear", "none", "restart"])?;
        }
        if let Some(a) = &self.startup_action {
            one_of("StartupAction", a, &["add", "start"])?;
        }
        let lists: [(&str, &Vec<String>, &[&str]); 7] = [
            ("IKEVersions", &self.ike_versions, IKE),
            ("Phase1EncryptionAlgorithms", &self.p1_enc, ENCRYPTION),
            ("Phase2EncryptionAlgorithms", &self.p2_enc, ENCRYPTION),
            ("Phase1IntegrityAlgorithms", &self.p1_int, INTEGRITY),
            ("Phase2IntegrityAlgorithms", &self.p2_int, INTEGRITY),
            ("Phase1DHGroupNumbers", &self.p1_dh, P1_DH),
            ("Phase2DHGroupNumbers", &self.p2_dh, P2_DH),
        ];
        for (name, values, allowed) in lists {
            for v in values {
                one_of(name, v, allowed)?;
            }
        }
        Ok(())
    }
}

fn tunnel_options(p: &Params) -> Result<[Tunnel; 2], Ec2Error> {
    let mut out: [Tunnel; 2] = Default::default();
    for (i, t) in out.iter_mut().enumerate() {
        t.apply(&under(p, &format!("Options.TunnelOptions.{}.", i + 1)))?;
        t.check()?;
    }
    Ok(out)
}

/// A /30 as a network, so that `169.254.21.1/30` and `169.254.21.0/30` are one.
fn network(cidr: &str) -> Option<ipnet::Ipv4Net> {
    cidr.parse::<ipnet::Ipv4Net>().ok().map(|n| n.trunc())
}

/// Host `n` of the network `cidr` is in: in a tunnel's /30, 1 is AWS's end and 2 the customer's.
pub(crate) fn host(cidr: &str, n: u32) -> Option<String> {
    network(cidr).map(|net| std::net::Ipv4Addr::from(u32::from(net.network()) + n).to_string())
}

/// AWS tunnel inside CIDRs: a /30 in 169.254.0.0/16, none of the reserved ones
/// (https://docs.aws.amazon.com/vpn/latest/s2svpn/VPNTunnels.html).
fn check_inside_cidr(cidr: &str) -> Result<(), Ec2Error> {
    const RESERVED: &[&str] = &[
        "169.254.0.0/30",
        "169.254.1.0/30",
        "169.254.2.0/30",
        "169.254.3.0/30",
        "169.254.4.0/30",
        "169.254.5.0/30",
        "169.254.169.252/30",
    ];
    let net: ipnet::Ipv4Net = cidr
        .parse()
        .map_err(|_| Ec2Error::bad("InvalidParameterValue", format!("invalid tunnel inside CIDR {cidr}")))?;
    let link_local: ipnet::Ipv4Net = "169.254.0.0/16".parse().expect("constant");
    if net.prefix_len() != 30 || !link_local.contains(&net) || RESERVED.iter().any(|r| network(r) == Some(net.trunc()))
    {
        return Err(Ec2Error::bad(
            "InvalidParameterValue",
            format!("The tunnel inside CIDR {cidr} is not a /30 in 169.254.0.0/16 outside the reserved blocks"),
        ));
    }
    Ok(())
}

/// AWS pre-shared keys: 8-64 characters of letters, digits, `.` and `_`, not starting with 0.
fn check_psk(psk: &str) -> Result<(), Ec2Error> {
    let ok = (8..=64).contains(&psk.len())
        && !psk.starts_with('0')
        && psk.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    if ok { Ok(()) } else { Err(Ec2Error::bad("InvalidParameterValue", "The pre-shared key is not valid")) }
}

/// Durations of the real service, in seconds (low, high), scaled by the profile.
pub struct Timing<'a> {
    pub scaled: &'a (dyn Fn(f64, f64) -> Duration + Sync),
    pub now: Instant,
}

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

    /// The configuration document a customer downloads (`CustomerGatewayConfiguration`), generated
    /// from this connection (moto returns one fixed template for every connection). It has the
    /// shape its readers parse (terraform-provider-aws reads, per `ipsec_tunnel`, `vpn_gateway` and
    /// `customer_gateway` `tunnel_outside_address/ip_address` and `tunnel_inside_address/ip_address`,
    /// `vpn_gateway/bgp/asn` and `hold_time`, and `ike/pre_shared_key`): the inside addresses are
    /// the /30's first two hosts (AWS's end first), `network_cidr` is the prefix length and
    /// `network_mask` the dotted mask, and BGP (hold time 30 s) appears only on dynamic
    /// connections. The generic document's algorithm names and device hints are not emulated.
    fn config_document(&self, c: &Conn, tunnels: &[Tunnel]) -> String {
        let cgw = self.cgws.get(&c.cgw);
        let vgw_asn = self.vgws.get(&c.vgw).map(|g| g.asn).unwrap_or_default();
        let end = |outside: &str, cidr: &str, n: u32, asn: i64| {
            let net = network(cidr).unwrap_or_else(|| "169.254.0.0/30".parse().expect("a network"));
            let address = host(&net.to_string(), n).unwrap_or_default();
            let (mask, prefix) = (net.netmask(), net.prefix_len());
            let bgp = if c.static_only {
                String::new()
            } else {
                format!("<bgp><asn>{asn}</asn><hold_time>30</hold_time></bgp>")
            };
            format!(
                "<tunnel_outside_address><ip_address>{outside}</ip_address></tunnel_outside_address><tunnel_inside_address><ip_address>{address}</ip_address><network_mask>{mask}</network_mask><network_cidr>{prefix}</network_cidr></tunnel_inside_address>{bgp}"
            )
        };
        let mut doc = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<vpn_connection id=\"{}\"><customer_gateway_id>{}</customer_gateway_id><vpn_gateway_id>{}</vpn_gateway_id><vpn_connection_type>ipsec.1</vpn_connection_type>",
            c.id, c.cgw, c.vgw
        );
        for t in tunnels {
            doc.push_str(&format!(
                "<ipsec_tunnel><customer_gateway>{}</customer_gateway><vpn_gateway>{}</vpn_gateway><ike><lifetime>{}</lifetime><pre_shared_key>{}</pre_shared_key></ike><ipsec><protocol>esp</protocol><lifetime>{}</lifetime><mode>tunnel</mode></ipsec></ipsec_tunnel>",
                end(cgw.map(|g| g.ip.as_str()).unwrap_or_default(), &t.inside_cidr, 2, cgw.map(|g| g.asn).unwrap_or_default()),
                end(&t.outside_ip, &t.inside_cidr, 1, vgw_asn),
                t.p1_lifetime.unwrap_or_default(),
                t.psk,
                t.p2_lifetime.unwrap_or_default(),
            ));
        }
        doc.push_str("</vpn_connection>");
        doc
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

    /// Tags on the layer's own resources; returns the ids it does not own.
    pub fn tag(&mut self, ids: &[String], tags: &[(String, String)], add: bool) -> Vec<String> {
        let mut others = Vec::new();
        for id in ids {
            let set = if let Some(g) = self.vgws.get_mut(id) {
                &mut g.tags
            } else if let Some(c) = self.cgws.get_mut(id) {
                &mut c.tags
            } else if let Some(c) = self.conns.get_mut(id) {
                &mut c.tags
            } else {
                others.push(id.clone());
                continue;
            };
            for (k, v) in tags {
                set.retain(|(sk, _)| sk != k);
                if add {
                    set.push((k.clone(), v.clone()));
                }
            }
        }
        others
    }
}
