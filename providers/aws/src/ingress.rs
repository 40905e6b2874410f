//! The security-group rules of a link: the permissions xcsp authorizes, and what it reads back,
//! member by member. No IO here: the calls are in `security_groups.rs`.
//!
//! xcsp puts each link's rules (one per port range, from the Azure VNet) into every cluster
//! security group, marking each rule's description with `[xcsp <stack> <address>]`. One
//! resource stands for all of them, so refresh must see a partial set: an apply killed in the
//! middle of its `AuthorizeSecurityGroupIngress` calls, or a rule revoked by hand. The groups a
//! link's rules belong in are those that carry any of its marked rules, and every group of the
//! same cluster (by `kubernetes.io/cluster/<infra>` or CAPA's
//! `sigs.k8s.io/cluster-api-provider-aws/cluster/<infra>`, the tags xcsp finds the groups by,
//! [`CLUSTER_TAG_PREFIXES`]); the
//! `rules` refresh reports are those present in every one of them, so a missing member is drift
//! the plan shows and apply repairs.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{IpPermission, IpRange, SecurityGroup};
use indexmap::IndexMap;
use xcsp_core::provider::Attributes;
use xcsp_core::{Address, Value};

/// The tag prefixes that name a group's cluster: the cloud provider's, and CAPA's own, which
/// CAPA puts on every group it makes while it keeps the cloud provider's on the `lb` group only
/// (cluster-api-provider-aws `pkg/cloud/services/securitygroup/securitygroups.go`
/// `getSecurityGroupTagParams`; `api/v1beta2/tags.go` `ClusterTagKey`). An OpenShift cluster
/// installed through CAPA (4.16 and later) has its API load balancer's group (`apiserver-lb`,
/// which admits the machine-config server's port only from the machine network) among the
/// latter only.
pub const CLUSTER_TAG_PREFIXES: [&str; 2] = ["kubernetes.io/cluster/", "sigs.k8s.io/cluster-api-provider-aws/cluster/"];

/// The cluster a tag key names, under either prefix.
pub fn cluster_of(key: &str) -> Option<&str> {
    CLUSTER_TAG_PREFIXES.iter().find_map(|p| key.strip_prefix(p))
}

/// The tag keys that name the cluster `tag` (a `kubernetes.io/cluster/<infra>` key) names.
pub fn cluster_tag_keys(tag: &str) -> Vec<String> {
    match cluster_of(tag) {
        Some(infra) => CLUSTER_TAG_PREFIXES.iter().map(|p| format!("{p}{infra}")).collect(),
        None => vec![tag.to_string()],
    }
}

/// The marker in a rule's description that says whose it is.
pub fn marker(stack: &str, address: &Address) -> String {
    format!("[xcsp {stack} {address}]")
}

/// The plan's `rules`, each as the permission to authorize: one IP range, the description
/// ending in the [`marker`] of `address`.
pub fn permissions(stack: &str, address: &Address, attrs: &Attributes) -> Vec<IpPermission> {
    let rules = match attrs.get("rules") {
        Some(Value::List(l)) => l.clone(),
        _ => vec![],
    };
    rules
        .iter()
        .filter_map(Value::as_map)
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let n = |k: &str| r.get(k).and_then(Value::as_i64).unwrap_or_default() as i32;
            let description = format!("{} {}", s("description"), marker(stack, address));
            // A whole-protocol rule (ESP) goes with -1 for both ports, which EC2 ignores.
            let protocol = s("protocol");
            let (from, to) = if has_ports(&protocol) { (n("from_port"), n("to_port")) } else { (-1, -1) };
            IpPermission::builder()
                .ip_protocol(&protocol)
                .from_port(from)
                .to_port(to)
                .ip_ranges(IpRange::builder().cidr_ip(s("cidr")).description(description).build())
                .build()
        })
        .collect()
}

/// Whether EC2 takes ports (or an ICMP type and code) for `protocol`: for any other protocol
/// (ESP, 50) a rule allows the whole protocol, "regardless of any ports you specify", and may be
/// read back without them (EC2 API Reference, `IpPermission`: `FromPort`, `IpProtocol`); the plan
/// and the call say -1 for both (moto, behind the local world, fails a call that names none).
fn has_ports(protocol: &str) -> bool {
    matches!(protocol, "tcp" | "udp" | "icmp" | "icmpv6" | "6" | "17" | "1" | "58")
}

/// One rule as the plan writes it: (from port, to port, protocol, CIDR, description).
type Rule = (i64, i64, String, String, String);

fn rule_value(r: &Rule) -> Value {
    let mut m = IndexMap::new();
    m.insert("protocol".to_string(), Value::string(&r.2));
    m.insert("from_port".to_string(), Value::int(r.0));
    m.insert("to_port".to_string(), Value::int(r.1));
    m.insert("cidr".to_string(), Value::string(&r.3));
    m.insert("description".to_string(), Value::string(&r.4));
    Value::Map(m)
}

/// Every address of `stack` with marked rules among `groups`: its `security_group_ids` (groups
/// carrying any of its rules) and its `rules` (those in every group it belongs in, in the
/// plan's canonical order: ports, then protocol).
pub fn observe(stack: &str, groups: &[SecurityGroup]) -> Vec<(Address, Attributes)> {
    let mark = format!("[xcsp {stack} ");
    // address -> group id -> rules
    let mut found: BTreeMap<Address, BTreeMap<String, Vec<Rule>>> = BTreeMap::new();
    for g in groups {
        let gid = g.group_id().unwrap_or_default().to_string();
        for p in g.ip_permissions() {
            for r in p.ip_ranges() {
                let d = r.description().unwrap_or_default();
                let Some(start) = d.find(&mark) else { continue };
                let inner = d[start + 1..].trim_end_matches(']');
                let Some(addr) = inner.split(' ').nth(2).and_then(|x| x.parse::<Address>().ok()) else { continue };
                let protocol = p.ip_protocol().unwrap_or_default();
                let port = |v: Option<i32>| if has_ports(protocol) { i64::from(v.unwrap_or_default()) } else { -1 };
                let rule = (
                    port(p.from_port()),
                    port(p.to_port()),
                    protocol.to_string(),
                    r.cidr_ip().unwrap_or_default().to_string(),
                    d[..start].trim_end().to_string(),
                );
                found.entry(addr).or_default().entry(gid.clone()).or_default().push(rule);
            }
        }
    }
    let cluster_keys = |g: &SecurityGroup| -> Vec<String> {
        g.tags().iter().filter_map(|t| t.key()).filter_map(cluster_of).map(String::from).collect()
    };
    let mut out = Vec::new();
    for (addr, by_group) in found {
        let marked: Vec<&SecurityGroup> =
            groups.iter().filter(|g| by_group.contains_key(g.group_id().unwrap_or_default())).collect();
        let keys: Vec<String> = marked.iter().flat_map(|g| cluster_keys(g)).collect();
        let belongs: Vec<String> = groups
            .iter()
            .filter(|g| {
                by_group.contains_key(g.group_id().unwrap_or_default())
                    || cluster_keys(g).iter().any(|k| keys.contains(k))
            })
            .filter_map(|g| g.group_id().map(String::from))
            .collect();
        let mut common: Vec<Rule> = by_group.values().flatten().cloned().collect();
        common.sort();
        common.dedup();
        common.retain(|r| belongs.iter().all(|g| by_group.get(g).is_some_and(|rules| rules.contains(r))));
        let mut attrs = Attributes::new();
        attrs.insert("security_group_ids".into(), Value::strings(by_group.keys()));
        attrs.insert("rules".into(), Value::List(common.iter().map(rule_value).collect()));
        out.push((addr, attrs));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::Tag;

    fn group(id: &str, rules: &[(i32, &str)]) -> SecurityGroup {
        let mut g = SecurityGroup::builder()
            .group_id(id)
            .tags(Tag::builder().key("kubernetes.io/cluster/infra-1").value("owned").build());
        for (port, what) in rules {
            g = g.ip_permissions(
                IpPermission::builder()
                    .ip_protocol("tcp")
                    .from_port(*port)
                    .to_port(*port)
                    .ip_ranges(
                        IpRange::builder()
                            .cidr_ip("10.200.0.0/16")
                            .description(format!("{what} [xcsp il5 aws_security_group_ingress.link]"))
                            .build(),
                    )
                    .build(),
            );
        }
        g.build()
    }

    #[test]
    fn a_rule_missing_from_one_group_is_not_reported() {
        let both = [(6443, "api"), (22623, "mcs")];
        let groups = [group("sg-1", &both), group("sg-2", &both[..1])];
        let found = observe("il5", &groups);
        assert_eq!(found.len(), 1);
        let rules = found[0].1["rules"].as_list().unwrap();
        assert_eq!(rules.len(), 1, "{rules:?}");
        assert_eq!(rules[0].as_map().unwrap()["from_port"], Value::int(6443));
        assert_eq!(rules[0].as_map().unwrap()["description"], Value::string("api"));
    }

    #[test]
    fn a_cluster_group_without_any_rule_empties_the_set() {
        let groups = [group("sg-1", &[(6443, "api")]), group("sg-2", &[])];
        let found = observe("il5", &groups);
        assert_eq!(found[0].1["rules"], Value::List(vec![]));
        assert_eq!(found[0].1["security_group_ids"], Value::strings(["sg-1"]));
    }

    #[test]
    fn the_rules_written_read_back_as_the_plan_wrote_them() {
        let address: Address = "aws_security_group_ingress.link".parse().unwrap();
        let mut attrs = Attributes::new();
        attrs.insert(
            "rules".into(),
            Value::List(vec![rule_value(&(6443, 6443, "tcp".into(), "10.200.0.0/16".into(), "api".into()))]),
        );
        let written = permissions("il5", &address, &attrs);
        assert_eq!(written[0].ip_ranges()[0].description(), Some("api [xcsp il5 aws_security_group_ingress.link]"));
        let g = SecurityGroup::builder().group_id("sg-1").set_ip_permissions(Some(written)).build();
        let found = observe("il5", &[g]);
        assert_eq!(found[0].0, address);
        assert_eq!(found[0].1["rules"], attrs["rules"]);
    }

    #[test]
    fn esp_is_written_without_ports_and_read_back_as_the_plan_wrote_it() {
        let address: Address = "aws_security_group_ingress.link".parse().unwrap();
        let rules = vec![
            rule_value(&(-1, -1, "50".into(), "10.200.0.0/16".into(), "ESP (OVN IPsec)".into())),
            rule_value(&(3, 4, "icmp".into(), "10.200.0.0/16".into(), "path MTU".into())),
        ];
        let mut attrs = Attributes::new();
        attrs.insert("rules".into(), Value::List(rules));
        let written = permissions("il5", &address, &attrs);
        assert_eq!((written[0].from_port(), written[0].to_port()), (Some(-1), Some(-1)), "ESP: -1, ignored");
        assert_eq!((written[1].from_port(), written[1].to_port()), (Some(3), Some(4)), "ICMP type and code");
        // EC2 may answer a whole-protocol rule without ports, or with 0.
        let mut esp = written[0].clone();
        esp.from_port = None;
        esp.to_port = Some(0);
        let g =
            SecurityGroup::builder().group_id("sg-1").set_ip_permissions(Some(vec![esp, written[1].clone()])).build();
        assert_eq!(observe("il5", &[g])[0].1["rules"], attrs["rules"]);
    }

    #[test]
    fn capas_groups_and_the_cloud_providers_tag_name_one_cluster() {
        let capa = SecurityGroup::builder()
            .group_id("sg-2")
            .tags(Tag::builder().key("sigs.k8s.io/cluster-api-provider-aws/cluster/infra-1").value("owned").build())
            .build();
        let found = observe("il5", &[group("sg-1", &[(6443, "api")]), capa]);
        assert_eq!(found[0].1["rules"], Value::List(vec![]), "the CAPA group lacks the rule: {found:?}");
        assert_eq!(
            cluster_tag_keys("kubernetes.io/cluster/infra-1"),
            ["kubernetes.io/cluster/infra-1", "sigs.k8s.io/cluster-api-provider-aws/cluster/infra-1"]
        );
    }

    #[test]
    fn another_stacks_rules_are_not_ours() {
        let groups = [group("sg-1", &[(6443, "api")])];
        assert!(observe("other", &groups).is_empty());
    }
}
