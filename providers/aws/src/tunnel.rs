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

/// How an option travels. [`Tunnel::changed`] names the options that differ in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A string per tunnel: attribute `tunnel<n>_<option>`.
    Text,
    /// A list of names, the same for both tunnels: attribute `<option>`.
    Names,
    /// A list of numbers (Diffie-Hellman groups), likewise.
    Numbers,
    /// A number of seconds, likewise.
    Seconds,
}

/// What a value of each kind is to the comparison and to the plan.
trait Setting {
    /// Whether the spec sets it (an empty list or `None` is left to AWS).
    fn is_set(&self) -> bool;
    /// Whether `self` (wanted) differs from what the tunnel carries (lists compared as sets:
    /// EC2 does not promise an order).
    fn differs(&self, have: &Self) -> bool;
    /// As a plan value (lists as the spec writes them).
    fn value(&self) -> Option<Value>;
}

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// One item of an option: a name or a number.
trait Item: Ord + Clone {
    fn to_value(&self) -> Value;
}

impl Item for String {
    fn to_value(&self) -> Value {
        Value::string(self)
    }
}

impl Item for i32 {
    fn to_value(&self) -> Value {
        Value::int(i64::from(*self))
    }
}

impl<T: Item> Setting for Option<T> {
    fn is_set(&self) -> bool {
        self.is_some()
    }
    fn differs(&self, have: &Self) -> bool {
        self != have
    }
    fn value(&self) -> Option<Value> {
        self.as_ref().map(Item::to_value)
    }
}

impl<T: Item> Setting for Vec<T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
    fn differs(&self, have: &Self) -> bool {
        sorted(self) != sorted(have)
    }
    fn value(&self) -> Option<Value> {
        Some(Value::List(self.iter().map(Item::to_value).collect()))
    }
}

/// Makes, from the table of options below, [`Tunnel`], what the plan wants of a tunnel and what
/// EC2 reports of one, their comparison, and the create and modify specifications. A row is
/// `option = ec2: Kind`: `ec2` is both the getter on EC2's `TunnelOption` and the setter on its
/// two specification builders (they have the same setters and list-value types), and a list's
/// kind names the type EC2 takes each item as.
macro_rules! tunnel_options {
    (@type Text) => { Option<String> };
    (@type Names) => { Vec<String> };
    (@type Numbers) => { Vec<i32> };
    (@type Seconds) => { Option<i32> };
    (@want Text, $attrs:ident, $n:ident, $name:expr) => { $attrs.opt_str(&format!("tunnel{}_{}", $n, $name)) };
    (@want Names, $attrs:ident, $n:ident, $name:expr) => { $attrs.strings($name) };
    (@want Numbers, $attrs:ident, $n:ident, $name:expr) => {
        $attrs.strings($name).iter().filter_map(|g| g.parse().ok()).collect()
    };
    (@want Seconds, $attrs:ident, $n:ident, $name:expr) => { $attrs.opt_int($name).map(|v| v as i32) };
    (@read Text, $v:expr) => { $v.map(String::from) };
    (@read Names, $v:expr) => { $v.iter().filter_map(|x| x.value()).map(String::from).collect() };
    (@read Numbers, $v:expr) => { $v.iter().filter_map(|x| x.value()).collect() };
    (@read Seconds, $v:expr) => { $v };
    (@write Text, $b:ident, $ec2:ident, $v:expr) => {
        match $v {
            Some(x) => $b.$ec2(x),
            None => $b,
        }
    };
    (@write Names($item:ident), $b:ident, $ec2:ident, $v:expr) => {
        $v.iter().fold($b, |b, x| b.$ec2($item::builder().value(x).build()))
    };
    (@write Numbers($item:ident), $b:ident, $ec2:ident, $v:expr) => {
        $v.iter().fold($b, |b, x| b.$ec2($item::builder().value(*x).build()))
    };
    (@write Seconds, $b:ident, $ec2:ident, $v:expr) => {
        match $v {
            Some(x) => $b.$ec2(*x),
            None => $b,
        }
    };
    ($($option:ident = $ec2:ident: $kind:ident $(($item:ident))?,)*) => {
        /// One tunnel's options as xcsp manages them. An empty list or `None` is an option the spec
        /// leaves to AWS.
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct Tunnel {
            $(pub $option: tunnel_options!(@type $kind),)*
        }

        /// Every option, by attribute name, with its kind, in the table's order.
        const OPTIONS: &[(&str, Kind)] = &[$((stringify!($option), Kind::$kind)),*];

        impl Tunnel {
            /// Tunnel `n` (1 or 2) as the plan's attributes want it.
            pub fn wanted(attrs: &Reader, n: u8) -> Tunnel {
                Tunnel { $($option: tunnel_options!(@want $kind, attrs, n, stringify!($option)),)* }
            }

            /// What EC2 reports of a tunnel.
            pub fn read(t: &TunnelOption) -> Tunnel {
                Tunnel { $($option: tunnel_options!(@read $kind, t.$ec2()),)* }
            }

            /// One option as a plan value (lists as the spec writes them).
            fn value(&self, option: &str) -> Option<Value> {
                $(if option == stringify!($option) {
                    return self.$option.value();
                })*
                None
            }

            /// The options `self` (wanted) sets that `have` does not carry, by attribute name
            /// (lists compared as sets: EC2 does not promise an order), in [`Kind`] order.
            pub fn changed(&self, have: &Tunnel) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$option.is_set() && self.$option.differs(&have.$option) {
                    out.push((Kind::$kind, stringify!($option)));
                })*
                out.sort_by_key(|(kind, _)| *kind);
                out.into_iter().map(|(_, name)| name).collect()
            }
        }

        /// Every option of `t`, for CreateVpnConnection.
        pub fn create_spec(t: &Tunnel) -> VpnTunnelOptionsSpecification {
            let b = VpnTunnelOptionsSpecification::builder();
            $(let b = tunnel_options!(@write $kind $(($item))?, b, $ec2, &t.$option);)*
            b.build()
        }

        /// The options of `t` named in `changed`, for ModifyVpnTunnelOptions.
        pub fn modify_spec(t: &Tunnel, changed: &[&str]) -> ModifyVpnTunnelOptionsSpecification {
            let b = ModifyVpnTunnelOptionsSpecification::builder();
            $(let b = if changed.contains(&stringify!($option)) {
                tunnel_options!(@write $kind $(($item))?, b, $ec2, &t.$option)
            } else {
                b
            };)*
            b.build()
        }
    };
}

// The table: each option the spec can set, how it travels, and its name in EC2's API.
tunnel_options! {
    inside_cidr = tunnel_inside_cidr: Text,
    psk = pre_shared_key: Text,
    ike_versions = ike_versions: Names(IkeVersionsRequestListValue),
    phase1_encryption = phase1_encryption_algorithms: Names(Phase1EncryptionAlgorithmsRequestListValue),
    phase1_integrity = phase1_integrity_algorithms: Names(Phase1IntegrityAlgorithmsRequestListValue),
    phase1_dh_group = phase1_dh_group_numbers: Numbers(Phase1DhGroupNumbersRequestListValue),
    phase2_encryption = phase2_encryption_algorithms: Names(Phase2EncryptionAlgorithmsRequestListValue),
    phase2_integrity = phase2_integrity_algorithms: Names(Phase2IntegrityAlgorithmsRequestListValue),
    phase2_dh_group = phase2_dh_group_numbers: Numbers(Phase2DhGroupNumbersRequestListValue),
    phase1_lifetime_seconds = phase1_lifetime_seconds: Seconds,
    phase2_lifetime_seconds = phase2_lifetime_seconds: Seconds,
    dpd_timeout_seconds = dpd_timeout_seconds: Seconds,
    rekey_margin_seconds = rekey_margin_time_seconds: Seconds,
}

/// The connection-wide policy attributes, in the order the plan shows them.
fn policy() -> impl Iterator<Item = &'static str> {
    OPTIONS.iter().filter(|(_, kind)| *kind != Kind::Text).map(|(name, _)| *name)
}

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

/// The connection's attributes from its tunnels: each policy attribute is the tunnels' common
/// value, or, where they differ, a text naming both (so that a tunnel changed out of band is
/// drift the plan shows); inside CIDRs and keys per tunnel.
pub fn outputs(out: &mut Attributes, tunnels: &[Tunnel]) {
    for attribute in policy() {
        let values: Vec<Option<Value>> = tunnels.iter().map(|t| t.value(attribute)).collect();
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
    fn what_differs_is_named_texts_first_then_names_numbers_and_seconds() {
        let want = policy();
        let have = Tunnel {
            psk: Some("k2".into()),
            phase1_dh_group: vec![14],
            phase2_encryption: vec!["AES128".into()],
            phase1_lifetime_seconds: Some(14400),
            ..policy()
        };
        assert_eq!(want.changed(&have), vec!["psk", "phase2_encryption", "phase1_dh_group", "phase1_lifetime_seconds"]);
    }

    #[test]
    fn create_sends_every_option_the_spec_sets_and_ec2_reads_back_the_same() {
        let want = Tunnel { dpd_timeout_seconds: Some(40), ..policy() };
        let spec = create_spec(&want);
        assert_eq!(spec.tunnel_inside_cidr(), Some("169.254.21.0/30"));
        assert_eq!(spec.pre_shared_key(), Some("k1"));
        assert_eq!(spec.phase1_dh_group_numbers()[0].value(), Some(20));
        assert_eq!(spec.phase2_integrity_algorithms()[0].value(), Some("SHA2-384"));
        assert_eq!(spec.rekey_margin_time_seconds(), None);
        let reported = TunnelOption::builder()
            .tunnel_inside_cidr("169.254.21.0/30")
            .pre_shared_key("k1")
            .ike_versions(aws_sdk_ec2::types::IkeVersionsListValue::builder().value("ikev2").build())
            .phase1_encryption_algorithms(
                aws_sdk_ec2::types::Phase1EncryptionAlgorithmsListValue::builder().value("AES256-GCM-16").build(),
            )
            .phase1_integrity_algorithms(
                aws_sdk_ec2::types::Phase1IntegrityAlgorithmsListValue::builder().value("SHA2-384").build(),
            )
            .phase1_dh_group_numbers(aws_sdk_ec2::types::Phase1DhGroupNumbersListValue::builder().value(20).build())
            .phase2_encryption_algorithms(
                aws_sdk_ec2::types::Phase2EncryptionAlgorithmsListValue::builder().value("AES256-GCM-16").build(),
            )
            .phase2_integrity_algorithms(
                aws_sdk_ec2::types::Phase2IntegrityAlgorithmsListValue::builder().value("SHA2-384").build(),
            )
            .phase2_dh_group_numbers(aws_sdk_ec2::types::Phase2DhGroupNumbersListValue::builder().value(20).build())
            .phase1_lifetime_seconds(28800)
            .phase2_lifetime_seconds(3600)
            .dpd_timeout_seconds(40)
            .build();
        assert_eq!(Tunnel::read(&reported), want);
    }

    #[test]
    fn the_plan_names_each_option_as_the_table_does() {
        let address: xcsp_core::Address = "aws_vpn_connection.link".parse().unwrap();
        let mut attrs = Attributes::new();
        attrs.insert("tunnel2_inside_cidr".into(), Value::string("169.254.22.0/30"));
        attrs.insert("tunnel2_psk".into(), Value::sensitive(Value::string("k2")));
        attrs.insert("phase1_dh_group".into(), Value::List(vec![Value::int(20), Value::string("14")]));
        attrs.insert("rekey_margin_seconds".into(), Value::int(300));
        let two = Tunnel::wanted(&Reader::new(&address, &attrs), 2);
        assert_eq!(two.inside_cidr.as_deref(), Some("169.254.22.0/30"));
        assert_eq!(two.psk.as_deref(), Some("k2"));
        assert_eq!(two.phase1_dh_group, [20, 14]);
        assert_eq!(two.rekey_margin_seconds, Some(300));
        assert_eq!(Tunnel::wanted(&Reader::new(&address, &attrs), 1).inside_cidr, None);
        assert_eq!(super::policy().next(), Some("ike_versions"));
        assert_eq!(super::policy().count(), 11);
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
