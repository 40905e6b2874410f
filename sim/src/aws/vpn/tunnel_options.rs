//! One tunnel's options: what CreateVpnConnection (`Options.TunnelOptions.N`) and
//! ModifyVpnTunnelOptions (`TunnelOptions`) set, the ranges and values the EC2 API reference
//! allows, AWS's defaults for the rest, and the checks on a tunnel's inside CIDR and pre-shared key.

use std::time::Instant;

use crate::aws::query::{Ec2Error, Params};

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

/// The parameters under `prefix` (`Options.TunnelOptions.1.` or `TunnelOptions.`), prefix removed.
pub(super) fn under(p: &Params, prefix: &str) -> Params {
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

    /// Sets the options present in `t` (one tunnel's `VpnTunnelOptionsSpecification` or
    /// `ModifyVpnTunnelOptionsSpecification` parameters); absent ones keep their value.
    pub(super) fn apply(&mut self, t: &Params) -> Result<(), Ec2Error> {
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
    pub(super) fn check(&self) -> Result<(), Ec2Error> {
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

pub(super) fn tunnel_options(p: &Params) -> Result<[Tunnel; 2], Ec2Error> {
    let mut out: [Tunnel; 2] = Default::default();
    for (i, t) in out.iter_mut().enumerate() {
        t.apply(&under(p, &format!("Options.TunnelOptions.{}.", i + 1)))?;
        t.check()?;
    }
    Ok(out)
}

/// A /30 as a network, so that `169.254.21.1/30` and `169.254.21.0/30` are one.
pub(super) fn network(cidr: &str) -> Option<ipnet::Ipv4Net> {
    cidr.parse::<ipnet::Ipv4Net>().ok().map(|n| n.trunc())
}

/// Host `n` of the network `cidr` is in: in a tunnel's /30, 1 is AWS's end and 2 the customer's.
pub(crate) fn host(cidr: &str, n: u32) -> Option<String> {
    network(cidr).map(|net| std::net::Ipv4Addr::from(u32::from(net.network()) + n).to_string())
}

/// AWS tunnel inside CIDRs: a /30 in 169.254.0.0/16, none of the reserved ones
/// (https://docs.aws.amazon.com/vpn/latest/s2svpn/VPNTunnels.html).
pub(super) fn check_inside_cidr(cidr: &str) -> Result<(), Ec2Error> {
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
pub(super) fn check_psk(psk: &str) -> Result<(), Ec2Error> {
    let ok = (8..=64).contains(&psk.len())
        && !psk.starts_with('0')
        && psk.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    if ok { Ok(()) } else { Err(Ec2Error::bad("InvalidParameterValue", "The pre-shared key is not valid")) }
}
