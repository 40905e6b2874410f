//! A VPN connection's tunnel options, one table for what xcsp writes and what it reads back.
//!
//! The spec's IPsec policy applies to both tunnels; the inside CIDR and the pre-shared key are
//! per tunnel. Create sends every option ([`create_spec`]); an update sends, per tunnel, exactly
//! the options that differ ([`modify_spec`] of [`Tunnel::changed`]), one tunnel at a time: EC2
//! accepts one tunnel per `ModifyVpnTunnelOptions` ("you can only modify one tunnel at a time",
//! EC2 API reference) and moves the connection to `modifying` until it is done
//! (terraform-provider-aws waits for `available` after each call, `waitVPNConnectionUpdated`).

use aws_sdk_ec2::types::{
    IkeVersionsRequestListValue, ModifyVpnTunnelOptionsSpecification, Phase1DhGroupNumbersRequestListValue,
    Phase1EncryptionAlgorithmsRequestListValue, Phase1IntegrityAlgorithmsRequestListValue,
    Phase2DhGroupNumbersRequestListValue, Phase2EncryptionAlgorithmsRequestListValue,
    Phase2IntegrityAlgorithmsRequestListValue, TunnelOption, VpnTunnelOptionsSpecification,
};
use xcsp_core::Value;
use xcsp_core::attrs::Reader;
use xcsp_core::provider::Attributes;

/// One tunnel's options as xcsp manages them. An empty list or `None` is an option the spec
/// leaves to AWS.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tunnel {
    pub inside_cidr: Option<String>,
    pub psk: Option<String>,
    pub ike_versions: Vec<String>,
    pub phase1_encryption: Vec<String>,
    pub phase1_integrity: Vec<String>,
    pub phase1_dh_group: Vec<i32>,
    pub phase2_encryption: Vec<String>,
    pub phase2_integrity: Vec<String>,
    pub phase2_dh_group: Vec<i32>,
    pub phase1_lifetime_seconds: Option<i32>,
    pub phase2_lifetime_seconds: Option<i32>,
    pub dpd_timeout_seconds: Option<i32>,
    pub rekey_margin_seconds: Option<i32>,
}

/// The connection-wide policy attributes, in the order the plan shows them.
pub const POLICY: [&str; 11] = [
    "ike_versions",
    "phase1_encryption",
    "phase1_integrity",
    "phase1_dh_group",
    "phase2_encryption",
    "phase2_integrity",
    "phase2_dh_group",
    "phase1_lifetime_seconds",
    "phase2_lifetime_seconds",
    "dpd_timeout_seconds",
    "rekey_margin_seconds",
];

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

impl Tunnel {
    /// Tunnel `n` (1 or 2) as the plan's attributes want it.
    pub fn wanted(attrs: &Reader, n: u8) -> Tunnel {
        let s = |k: &str| attrs.opt_str(k);
        let int = |k: &str| attrs.opt_int(k).map(|v| v as i32);
        let groups = |k: &str| attrs.strings(k).iter().filter_map(|g| g.parse().ok()).collect();
        Tunnel {
            inside_cidr: s(&format!("tunnel{n}_inside_cidr")),
            psk: s(&format!("tunnel{n}_psk")),
            ike_versions: attrs.strings("ike_versions"),
            phase1_encryption: attrs.strings("phase1_encryption"),
            phase1_integrity: attrs.strings("phase1_integrity"),
            phase1_dh_group: groups("phase1_dh_group"),
            phase2_encryption: attrs.strings("phase2_encryption"),
            phase2_integrity: attrs.strings("phase2_integrity"),
            phase2_dh_group: groups("phase2_dh_group"),
            phase1_lifetime_seconds: int("phase1_lifetime_seconds"),
            phase2_lifetime_seconds: int("phase2_lifetime_seconds"),
            dpd_timeout_seconds: int("dpd_timeout_seconds"),
            rekey_margin_seconds: int("rekey_margin_seconds"),
        }
    }

    /// What EC2 reports of a tunnel.
    pub fn read(t: &TunnelOption) -> Tunnel {
        let names = |v: Vec<Option<&str>>| v.into_iter().flatten().map(String::from).collect();
        Tunnel {
            inside_cidr: t.tunnel_inside_cidr().map(String::from),
            psk: t.pre_shared_key().map(String::from),
            ike_versions: names(t.ike_versions().iter().map(|v| v.value()).collect()),
            phase1_encryption: names(t.phase1_encryption_algorithms().iter().map(|v| v.value()).collect()),
            phase1_integrity: names(t.phase1_integrity_algorithms().iter().map(|v| v.value()).collect()),
            phase1_dh_group: t.phase1_dh_group_numbers().iter().filter_map(|v| v.value()).collect(),
            phase2_encryption: names(t.phase2_encryption_algorithms().iter().map(|v| v.value()).collect()),
            phase2_integrity: names(t.phase2_integrity_algorithms().iter().map(|v| v.value()).collect()),
            phase2_dh_group: t.phase2_dh_group_numbers().iter().filter_map(|v| v.value()).collect(),
            phase1_lifetime_seconds: t.phase1_lifetime_seconds(),
            phase2_lifetime_seconds: t.phase2_lifetime_seconds(),
            dpd_timeout_seconds: t.dpd_timeout_seconds(),
            rekey_margin_seconds: t.rekey_margin_time_seconds(),
        }
    }

    /// One policy attribute as a plan value (lists as the spec writes them).
    fn policy_value(&self, attribute: &str) -> Option<Value> {
        let list = |v: &[String]| Some(Value::List(v.iter().map(Value::string).collect()));
        let ints = |v: &[i32]| Some(Value::List(v.iter().map(|n| Value::int(i64::from(*n))).collect()));
        match attribute {
            "ike_versions" => list(&self.ike_versions),
            "phase1_encryption" => list(&self.phase1_encryption),
            "phase1_integrity" => list(&self.phase1_integrity),
            "phase1_dh_group" => ints(&self.phase1_dh_group),
            "phase2_encryption" => list(&self.phase2_encryption),
            "phase2_integrity" => list(&self.phase2_integrity),
            "phase2_dh_group" => ints(&self.phase2_dh_group),
            "phase1_lifetime_seconds" => self.phase1_lifetime_seconds.map(|v| Value::int(i64::from(v))),
            "phase2_lifetime_seconds" => self.phase2_lifetime_seconds.map(|v| Value::int(i64::from(v))),
            "dpd_timeout_seconds" => self.dpd_timeout_seconds.map(|v| Value::int(i64::from(v))),
            "rekey_margin_seconds" => self.rekey_margin_seconds.map(|v| Value::int(i64::from(v))),
            _ => None,
        }
    }

    /// The options `self` (wanted) sets that `have` does not carry, by attribute name (lists
    /// compared as sets: EC2 does not promise an order).
    pub fn changed(&self, have: &Tunnel) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut check = |name: &'static str, set: bool, differs: bool| {
            if set && differs {
                out.push(name);
            }
        };
        check("inside_cidr", self.inside_cidr.is_some(), self.inside_cidr != have.inside_cidr);
        check("psk", self.psk.is_some(), self.psk != have.psk);
        check("ike_versions", !self.ike_versions.is_empty(), sorted(&self.ike_versions) != sorted(&have.ike_versions));
        for (name, want, got) in [
            ("phase1_encryption", &self.phase1_encryption, &have.phase1_encryption),
            ("phase1_integrity", &self.phase1_integrity, &have.phase1_integrity),
            ("phase2_encryption", &self.phase2_encryption, &have.phase2_encryption),
            ("phase2_integrity", &self.phase2_integrity, &have.phase2_integrity),
        ] {
            check(name, !want.is_empty(), sorted(want) != sorted(got));
        }
        for (name, want, got) in [
            ("phase1_dh_group", &self.phase1_dh_group, &have.phase1_dh_group),
            ("phase2_dh_group", &self.phase2_dh_group, &have.phase2_dh_group),
        ] {
            check(name, !want.is_empty(), sorted(want) != sorted(got));
        }
        for (name, want, got) in [
            ("phase1_lifetime_seconds", self.phase1_lifetime_seconds, have.phase1_lifetime_seconds),
            ("phase2_lifetime_seconds", self.phase2_lifetime_seconds, have.phase2_lifetime_seconds),
            ("dpd_timeout_seconds", self.dpd_timeout_seconds, have.dpd_timeout_seconds),
            ("rekey_margin_seconds", self.rekey_margin_seconds, have.rekey_margin_seconds),
        ] {
            check(name, want.is_some(), want != got);
        }
        out
    }
}

/// Sets on an EC2 tunnel-options builder each option of `$t` that `$only` names (the create and
/// modify builders have the same setters and list-value types).
macro_rules! set_options {
    ($b:expr, $t:expr, $only:expr) => {{
        let (mut b, t, only): (_, &Tunnel, &dyn Fn(&str) -> bool) = ($b, $t, $only);
        if only("inside_cidr")
            && let Some(c) = &t.inside_cidr
        {
            b = b.tunnel_inside_cidr(c);
        }
        if only("psk")
            && let Some(k) = &t.psk
        {
            b = b.pre_shared_key(k);
        }
        if only("ike_versions") {
            for v in &t.ike_versions {
                b = b.ike_versions(IkeVersionsRequestListValue::builder().value(v).build());
            }
        }
        if only("phase1_encryption") {
            for v in &t.phase1_encryption {
                b = b.phase1_encryption_algorithms(
                    Phase1EncryptionAlgorithmsRequestListValue::builder().value(v).build(),
                );
            }
        }
        if only("phase1_integrity") {
            for v in &t.phase1_integrity {
                b = b
                    .phase1_integrity_algorithms(Phase1IntegrityAlgorithmsRequestListValue::builder().value(v).build());
            }
        }
        if only("phase1_dh_group") {
            for v in &t.phase1_dh_group {
                b = b.phase1_dh_group_numbers(Phase1DhGroupNumbersRequestListValue::builder().value(*v).build());
            }
        }
        if only("phase2_encryption") {
            for v in &t.phase2_encryption {
                b = b.phase2_encryption_algorithms(
                    Phase2EncryptionAlgorithmsRequestListValue::builder().value(v).build(),
                );
            }
        }
        if only("phase2_integrity") {
            for v in &t.phase2_integrity {
                b = b
                    .phase2_integrity_algorithms(Phase2IntegrityAlgorithmsRequestListValue::builder().value(v).build());
            }
        }
        if only("phase2_dh_group") {
            for v in &t.phase2_dh_group {
                b = b.phase2_dh_group_numbers(Phase2DhGroupNumbersRequestListValue::builder().value(*v).build());
            }
        }
        if only("phase1_lifetime_seconds")
            && let Some(l) = t.phase1_lifetime_seconds
        {
            b = b.phase1_lifetime_seconds(l);
        }
        if only("phase2_lifetime_seconds")
            && let Some(l) = t.phase2_lifetime_seconds
        {
            b = b.phase2_lifetime_seconds(l);
        }
        if only("dpd_timeout_seconds")
            && let Some(d) = t.dpd_timeout_seconds
        {
            b = b.dpd_timeout_seconds(d);
        }
        if only("rekey_margin_seconds")
            && let Some(m) = t.rekey_margin_seconds
        {
            b = b.rekey_margin_time_seconds(m);
        }
        b.build()
    }};
}

/// Every option of `t`, for CreateVpnConnection.
/// Which of a connection's tunnels is tunnel 1, and which tunnel 2. EC2 lists them in no promised
/// order, and an inside range can be changed by hand, so: the tunnel at the outside address
/// recorded as tunnel 1 (fixed for the connection's life); else the one with tunnel 1's inside
/// range; else the one without tunnel 2's; else the lower inside range.
pub fn order(tunnels: &mut Vec<&aws_sdk_ec2::types::TunnelOption>, first_ip: Option<&str>, cidrs: [Option<&str>; 2]) {
    let at = |want: Option<&str>, of: fn(&aws_sdk_ec2::types::TunnelOption) -> Option<&str>| {
        want.and_then(|w| tunnels.iter().position(|t| of(t) == Some(w)))
    };
    let first = at(first_ip, |t| t.outside_ip_address())
        .or_else(|| at(cidrs[0], |t| t.tunnel_inside_cidr()))
        .or_else(|| at(cidrs[1], |t| t.tunnel_inside_cidr()).filter(|_| tunnels.len() == 2).map(|i| 1 - i));
    match first {
        Some(i) => {
            let t = tunnels.remove(i);
            tunnels.insert(0, t);
        }
        None => tunnels.sort_by_key(|t| t.tunnel_inside_cidr().map(String::from)),
    }
}

pub fn create_spec(t: &Tunnel) -> VpnTunnelOptionsSpecification {
    set_options!(VpnTunnelOptionsSpecification::builder(), t, &|_| true)
}

/// The options of `t` named in `changed`, for ModifyVpnTunnelOptions.
pub fn modify_spec(t: &Tunnel, changed: &[&str]) -> ModifyVpnTunnelOptionsSpecification {
    set_options!(ModifyVpnTunnelOptionsSpecification::builder(), t, &|name| changed.contains(&name))
}

/// The connection's attributes from its tunnels: each policy attribute is the tunnels' common
/// value, or, where they differ, a text naming both (so that a tunnel changed out of band is
/// drift the plan shows); inside CIDRs and keys per tunnel.
pub fn outputs(out: &mut Attributes, tunnels: &[Tunnel]) {
    for attribute in POLICY {
        let values: Vec<Option<Value>> = tunnels.iter().map(|t| t.policy_value(attribute)).collect();
        let value = match values.as_slice() {
            [Some(a), Some(b)] if a != b => {
                Some(Value::string(format!("tunnel 1: {}; tunnel 2: {}", a.to_json(), b.to_json())))
            }
            [Some(a), ..] => Some(a.clone()),
            _ => None,
        };
        if let Some(v) = value {
            out.insert(attribute.into(), v);
        }
    }
    for (i, t) in tunnels.iter().enumerate().take(2) {
        let n = i + 1;
        if let Some(c) = &t.inside_cidr {
            out.insert(format!("tunnel{n}_inside_cidr"), Value::string(c));
        }
        if let Some(k) = &t.psk {
            out.insert(format!("tunnel{n}_psk"), Value::sensitive(Value::string(k)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_one_is_found_by_its_recorded_address_then_by_the_ranges() {
        let t = |ip: &str, cidr: &str| {
            aws_sdk_ec2::types::TunnelOption::builder().outside_ip_address(ip).tunnel_inside_cidr(cidr).build()
        };
        // EC2 lists the tunnel whose range was changed by hand (to .30.0) second.
        let (a, b) = (t("203.0.113.9", "169.254.22.0/30"), t("203.0.113.8", "169.254.30.0/30"));
        let ips = |v: Vec<&aws_sdk_ec2::types::TunnelOption>| {
            v.iter().map(|t| t.outside_ip_address().unwrap().to_string()).collect::<Vec<_>>()
        };
        let wanted = [Some("169.254.21.0/30"), Some("169.254.22.0/30")];
        let mut v = vec![&a, &b];
        order(&mut v, Some("203.0.113.8"), wanted);
        assert_eq!(ips(v), ["203.0.113.8", "203.0.113.9"], "the recorded address wins");
        let mut v = vec![&a, &b];
        order(&mut v, None, wanted);
        assert_eq!(ips(v), ["203.0.113.8", "203.0.113.9"], "not tunnel 2's range: tunnel 1");
        let mut v = vec![&a, &b];
        order(&mut v, None, [None, None]);
        assert_eq!(ips(v), ["203.0.113.9", "203.0.113.8"], "unknown to state: the lower range first");
        let mut v = vec![&b, &a];
        order(&mut v, Some("198.51.100.1"), [Some("169.254.22.0/30"), None]);
        assert_eq!(ips(v), ["203.0.113.9", "203.0.113.8"], "an address gone: tunnel 1's range");
    }

    fn policy() -> Tunnel {
        Tunnel {
            inside_cidr: Some("169.254.21.0/30".into()),
            psk: Some("k1".into()),
            ike_versions: vec!["ikev2".into()],
            phase1_encryption: vec!["AES256-GCM-16".into()],
            phase1_integrity: vec!["SHA2-384".into()],
            phase1_dh_group: vec![20],
            phase2_encryption: vec!["AES256-GCM-16".into()],
            phase2_integrity: vec!["SHA2-384".into()],
            phase2_dh_group: vec![20],
            phase1_lifetime_seconds: Some(28800),
            phase2_lifetime_seconds: Some(3600),
            dpd_timeout_seconds: None,
            rekey_margin_seconds: None,
        }
    }

    #[test]
    fn only_what_differs_is_sent() {
        let want = policy();
        let mut have = policy();
        assert!(want.changed(&have).is_empty());
        have.ike_versions = vec!["ikev1".into()];
        have.phase2_lifetime_seconds = Some(1800);
        have.phase1_dh_group = vec![20];
        assert_eq!(want.changed(&have), vec!["ike_versions", "phase2_lifetime_seconds"]);
        let spec = modify_spec(&want, &want.changed(&have));
        assert_eq!(spec.phase2_lifetime_seconds(), Some(3600));
        assert_eq!(spec.ike_versions().len(), 1);
        assert_eq!(spec.pre_shared_key(), None);
        assert!(spec.phase1_encryption_algorithms().is_empty());
    }

    #[test]
    fn dpd_and_rekey_margin_travel_like_the_rest() {
        let mut want = policy();
        want.dpd_timeout_seconds = Some(40);
        want.rekey_margin_seconds = Some(300);
        let changed = want.changed(&policy());
        assert_eq!(changed, vec!["dpd_timeout_seconds", "rekey_margin_seconds"]);
        let spec = modify_spec(&want, &changed);
        assert_eq!((spec.dpd_timeout_seconds(), spec.rekey_margin_time_seconds()), (Some(40), Some(300)));
        assert_eq!(create_spec(&want).dpd_timeout_seconds(), Some(40));
    }

    #[test]
    fn lists_compare_as_sets_and_unset_options_are_left_to_aws() {
        let mut want = policy();
        let mut have = policy();
        have.phase1_dh_group = vec![20, 2];
        want.phase1_dh_group = vec![2, 20];
        want.phase2_lifetime_seconds = None;
        have.phase2_lifetime_seconds = Some(3600);
        assert!(want.changed(&have).is_empty());
    }

    #[test]
    fn tunnels_that_disagree_show_both() {
        let one = policy();
        let mut two = policy();
        two.phase1_lifetime_seconds = Some(14400);
        let mut out = Attributes::new();
        outputs(&mut out, &[one, two]);
        assert_eq!(out["phase1_lifetime_seconds"], Value::string("tunnel 1: 28800; tunnel 2: 14400"));
        assert_eq!(out["phase2_lifetime_seconds"], Value::int(3600));
        assert!(out["tunnel1_psk"].is_sensitive());
    }
}
