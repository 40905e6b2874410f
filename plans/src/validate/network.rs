//! Rules on the networks: address space, ASNs, each link's gateway, tunnels and IPsec policy,
//! and AWS's limits per VPC and per security group.

use ipnet::Ipv4Net;
use xcsp_core::{Problem, Problems, Span};

use super::err;
use crate::net::{overlapping_pairs, overlaps};
use crate::spec::*;
use crate::topology::{self, AZURE_APIPA, TUNNELS};

/// AWS Site-to-Site VPN supports at most 1446 bytes.
const AWS_VPN_MAX_MTU: i64 = 1446;

/// Cluster networks and VNets must not overlap; subnets sit inside their VNet and apart.
pub(super) fn check_address_space(spec: &Spec, problems: &mut Problems) {
    let mut global: Vec<(Ipv4Net, Span, String)> = Vec::new();
    if let Some(c) = &spec.cluster {
        global.push((c.machine_network.value, c.machine_network.span.clone(), "the machine network".into()));
        global.push((c.cluster_network.value, c.cluster_network.span.clone(), "the cluster (pod) network".into()));
        global.push((c.service_network.value, c.service_network.span.clone(), "the service network".into()));
    }
    for n in &spec.networks {
        global.push((n.vnet_cidr.value, n.vnet_cidr.span.clone(), format!("the VNet of network `{}`", n.name.value)));
    }
    report_overlaps(&global, problems);

    for n in &spec.networks {
        let mut subnets: Vec<(Ipv4Net, Span, String)> = Vec::new();
        if let Some(g) = &n.gateway_subnet {
            subnets.push((g.value, g.span.clone(), "GatewaySubnet".into()));
            if g.value.prefix_len() > 27 {
                problems.push(
                    err(
                        "xcsp::cidr::gateway_subnet_size",
                        format!("GatewaySubnet {} is too small", g.value),
                        &g.span,
                        "",
                    )
                    .with_help("an active-active VPN gateway needs a GatewaySubnet of /27 or larger"),
                );
            }
        }
        for p in spec.pools.iter().filter(|p| p.network.value == n.name.value) {
            subnets.push((
                p.subnet_cidr.value,
                p.subnet_cidr.span.clone(),
                format!("the subnet of pool `{}`", p.name.value),
            ));
        }
        for (net, span, what) in &subnets {
            if !n.vnet_cidr.value.contains(net) {
                problems.push(
                    err(
                        "xcsp::cidr::outside_vnet",
                        format!("{what} {net} is not inside VNet {}", n.vnet_cidr.value),
                        span,
                        "",
                    )
                    .label(&n.vnet_cidr.span, "the VNet"),
                );
            }
        }
        report_overlaps(&subnets, problems);
    }
}

/// Overlap errors shown at most; the rest are counted in one last problem.
const MAX_OVERLAPS_SHOWN: usize = 20;

/// One error per range that overlaps an earlier one (in source order), naming the first range it
/// overlaps: N copies of one range are N-1 errors, not N^2.
fn report_overlaps(nets: &[(Ipv4Net, Span, String)], problems: &mut Problems) {
    let plain: Vec<Ipv4Net> = nets.iter().map(|n| n.0).collect();
    let at = |i: usize| (nets[i].1.file.name.as_str(), nets[i].1.start);
    // For each later range, the earliest range it overlaps.
    let mut first_of: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    for (i, j) in overlapping_pairs(&plain) {
        let (first, second) = if at(i) <= at(j) { (i, j) } else { (j, i) };
        let e = first_of.entry(second).or_insert(first);
        if at(first) < at(*e) {
            *e = first;
        }
    }
    let mut pairs: Vec<(usize, usize)> = first_of.into_iter().map(|(second, first)| (first, second)).collect();
    pairs.sort_by_key(|(_, second)| at(*second));
    for (first, second) in pairs.iter().take(MAX_OVERLAPS_SHOWN) {
        let (first, second) = (&nets[*first], &nets[*second]);
        problems.push(
            Problem::error(
                "xcsp::cidr::overlap",
                format!("{} ({}) overlaps {} ({})", second.2, second.0, first.2, first.0),
            )
            .label(&second.1, "overlaps")
            .label(&first.1, "this")
            .with_help("routes across the link would be ambiguous; pick address ranges that do not overlap"),
        );
    }
    if pairs.len() > MAX_OVERLAPS_SHOWN {
        problems.push(
            Problem::error(
                "xcsp::cidr::overlap",
                format!("{} more ranges overlap earlier ones (not shown)", pairs.len() - MAX_OVERLAPS_SHOWN),
            )
            .with_help("fix the ones above and validate again"),
        );
    }
}

/// ASNs that no BGP speaker may use (IANA), or that Azure reserves.
fn asn_reserved(asn: i64) -> Option<&'static str> {
    match asn {
        23456 | 64496..=64511 | 65535..=65551 => Some("reserved by IANA"),
        8074 | 8075 | 12076 | 65517..=65520 => Some("reserved by Azure"),
        _ => None,
    }
}

pub(super) fn check_asns(spec: &Spec, problems: &mut Problems) {
    if let Some(aws) = &spec.aws {
        let asn = aws.asn.value;
        let private = (64512..=65534).contains(&asn) || (4_200_000_000..=4_294_967_294).contains(&asn);
        if !private {
            problems.push(
                err("xcsp::asn::range", format!("Amazon-side ASN {asn} is not a private ASN"), &aws.asn.span, "")
                    .with_help("a VPN gateway's Amazon-side ASN must be in 64512-65534 or 4200000000-4294967294"),
            );
        } else if asn == 65515 {
            problems.push(
                err("xcsp::asn::reserved", "ASN 65515 is reserved by Azure for its own gateways", &aws.asn.span, "")
                    .with_help(
                        "Azure refuses a local network gateway with ASN 65515; choose another AWS ASN (default 64512)",
                    ),
            );
        } else if let Some(why) = asn_reserved(asn) {
            problems.push(err("xcsp::asn::reserved", format!("ASN {asn} is {why}"), &aws.asn.span, ""));
        }
    }
    for n in spec.networks.iter().filter(|n| n.driver.value == Driver::Ipsec && n.routing.value == Routing::Bgp) {
        let asn = n.azure_asn.value;
        let region = spec.aws.as_ref().map(|a| a.region.value.as_str()).unwrap_or("");
        let refused_by_aws = match asn {
            7224 => Some("AWS refuses customer gateway ASN 7224 in every region"),
            9059 if region == "eu-west-1" => Some("AWS refuses customer gateway ASN 9059 in eu-west-1"),
            10124 if region == "ap-northeast-1" => Some("AWS refuses customer gateway ASN 10124 in ap-northeast-1"),
            17943 if region == "ap-southeast-1" => Some("AWS refuses customer gateway ASN 17943 in ap-southeast-1"),
            _ => None,
        };
        if !(1..=4_294_967_295).contains(&asn) {
            problems.push(
                err("xcsp::asn::range", format!("ASN {asn} is out of range"), &n.azure_asn.span, "")
                    .with_help("ASNs are 1-4294967295"),
            );
        } else if let Some(why) = asn_reserved(asn) {
            problems.push(err("xcsp::asn::reserved", format!("ASN {asn} is {why}"), &n.azure_asn.span, ""));
        } else if let Some(why) = refused_by_aws {
            problems.push(err(
                "xcsp::asn::reserved",
                why,
                &n.azure_asn.span,
                "the Azure gateway becomes an AWS customer gateway",
            ));
        }
        if let Some(aws) = &spec.aws
            && aws.asn.value == asn
        {
            problems.push(
                err(
                    "xcsp::asn::same",
                    format!("both sides of network `{}` use ASN {asn}", n.name.value),
                    &n.azure_asn.span,
                    "Azure side",
                )
                .label(&aws.asn.span, "AWS side")
                .with_help("the two BGP peers must use different ASNs"),
            );
        }
    }
}
/// The AWS-refused tunnel inside CIDRs (VpnTunnelOptionsSpecification).
const AWS_REFUSED_INSIDE: &[&str] = &[
    "169.254.0.0/30",
    "169.254.1.0/30",
    "169.254.2.0/30",
    "169.254.3.0/30",
    "169.254.4.0/30",
    "169.254.5.0/30",
    "169.254.169.252/30",
];

pub(super) fn check_network(n: &Network, problems: &mut Problems) {
    if n.driver.value == Driver::External {
        return;
    }
    if n.gateway_subnet.is_none() {
        problems.push(
            err(
                "xcsp::spec::missing_attribute",
                format!("network `{}` needs `gateway_subnet`", n.name.value),
                &n.span,
                "",
            )
            .with_help(
                "the ipsec driver deploys a VPN gateway into a subnet named GatewaySubnet; give it a /27 or larger",
            ),
        );
    }
    if n.routing.value == Routing::Static {
        // The link xcsp builds is four tunnels to an active-active gateway whose failover and
        // load sharing come from BGP. A static variant would need its own topology (one local
        // network gateway per AWS tunnel all claiming the cluster's prefixes, static routes on
        // both AWS connections, a gateway body without BGP settings) that xcsp neither builds nor
        // tests end to end, so it is refused here rather than failing halfway through an apply.
        problems.push(
            err(
                "xcsp::network::routing",
                format!("network `{}`: static routing is not supported", n.name.value),
                &n.routing.span,
                "",
            )
            .with_help(
                "use `routing = \"bgp\"` (the default): the four tunnels fail over and share load only with BGP",
            ),
        );
    }
    check_sku(&n.gateway_sku, n.routing.value, problems);
    let mtu = &n.tunnel_mtu;
    if mtu.value > AWS_VPN_MAX_MTU || mtu.value < 576 {
        problems.push(
            err(
                "xcsp::mtu::tunnel",
                format!("tunnel MTU {} is outside 576-{AWS_VPN_MAX_MTU}", mtu.value),
                &mtu.span,
                "",
            )
            .with_help("AWS Site-to-Site VPN carries at most 1446 bytes; Azure recommends 1400"),
        );
    }
    if let Some(cidrs) = &n.tunnel_inside_cidrs {
        check_inside_cidrs(n, cidrs, problems);
    }
    if let Some(keys) = &n.preshared_keys {
        check_psks(n, keys, problems);
    }
    if let Some(days) = &n.psk_rotation_days {
        if !(1..=3650).contains(&days.value) {
            problems.push(err(
                "xcsp::psk::rotation_days",
                format!("psk_rotation_days {} is outside 1-3650", days.value),
                &days.span,
                "",
            ));
        } else if n.preshared_keys.is_some() {
            problems.push(
                err(
                    "xcsp::psk::rotation_days",
                    "psk_rotation_days rotates the keys xcsp generates, and this network sets its own".to_string(),
                    &days.span,
                    "",
                )
                .with_help("rotate keys you set by changing `preshared_keys`, or remove them to let xcsp generate and rotate keys"),
            );
        }
    }
    check_ipsec(&n.ipsec, problems);
}

fn check_sku(sku: &Sp<String>, routing: Routing, problems: &mut Problems) {
    let s = sku.value.as_str();
    let az = ["VpnGw1AZ", "VpnGw2AZ", "VpnGw3AZ", "VpnGw4AZ", "VpnGw5AZ"];
    if az.contains(&s) {
        return;
    }
    let problem = match s {
        "VpnGw1" | "VpnGw2" | "VpnGw3" | "VpnGw4" | "VpnGw5" => {
            err("xcsp::gateway::sku", format!("new gateways cannot use the non-AZ SKU {s}"), &sku.span, "")
                .with_help(format!("Azure blocks new non-AZ VpnGw1-5 gateways since 2025-01-01; use {s}AZ"))
        }
        "Basic" => err("xcsp::gateway::sku", "the Basic SKU supports neither BGP nor active-active", &sku.span, "")
            .with_help(if routing == Routing::Bgp {
                "use VpnGw1AZ or larger"
            } else {
                "use VpnGw1AZ or larger (active-active needs it)"
            }),
        _ => err("xcsp::gateway::sku", format!("unknown VPN gateway SKU `{s}`"), &sku.span, "")
            .with_help(crate::schema::suggest(s, az).unwrap_or_else(|| format!("one of: {}", az.join(", ")))),
    };
    problems.push(problem);
}

/// A list the spec gives per tunnel must have one item per tunnel of the link.
fn per_tunnel(n: &Network, given: usize, (code, what): (&'static str, &str), help: &str, problems: &mut Problems) {
    if given != TUNNELS {
        let message = format!("{given} {what} given; the link has {TUNNELS} tunnels");
        problems.push(err(code, message, &n.span, "").with_help(help));
    }
}

fn check_inside_cidrs(n: &Network, cidrs: &[Sp<Ipv4Net>], problems: &mut Problems) {
    let link_local: Ipv4Net = "169.254.0.0/16".parse().expect("valid");
    per_tunnel(
        n,
        cidrs.len(),
        ("xcsp::tunnel::count", "tunnel inside CIDRs"),
        "give one /30 per tunnel, or leave `tunnel_inside_cidrs` out to let xcsp allocate them",
        problems,
    );
    for (i, c) in cidrs.iter().enumerate() {
        let net = c.value;
        let problem = if net.prefix_len() != 30 {
            Some((
                "xcsp::tunnel::inside_cidr",
                format!("{net} is not a /30"),
                "each tunnel takes a /30 from 169.254.0.0/16".to_string(),
            ))
        } else if !link_local.contains(&net) {
            Some((
                "xcsp::tunnel::inside_cidr",
                format!("{net} is not in 169.254.0.0/16"),
                "tunnel inside addresses are link-local".into(),
            ))
        } else if AWS_REFUSED_INSIDE.iter().any(|r| r.parse::<Ipv4Net>().ok() == Some(net)) {
            Some((
                "xcsp::tunnel::inside_cidr",
                format!("AWS refuses {net} as a tunnel inside CIDR"),
                format!("AWS reserves {}", AWS_REFUSED_INSIDE.join(", ")),
            ))
        } else if n.routing.value == Routing::Bgp
            && !(net.network() >= AZURE_APIPA.0 && net.broadcast() <= AZURE_APIPA.1)
        {
            Some((
                "xcsp::tunnel::apipa",
                format!("{net} is outside Azure's APIPA range for BGP"),
                format!(
                    "Azure's custom BGP addresses must lie in {}-{}, e.g. {}",
                    AZURE_APIPA.0,
                    AZURE_APIPA.1,
                    topology::DEFAULT_INSIDE_CIDRS[0]
                ),
            ))
        } else {
            None
        };
        if let Some((code, msg, help)) = problem {
            problems.push(err(code, msg, &c.span, "").with_help(help));
        }
        if let Some(prev) = cidrs[..i].iter().find(|p| overlaps(&p.value, &net)) {
            problems.push(
                err("xcsp::tunnel::duplicate", format!("{net} is used by two tunnels"), &c.span, "again")
                    .label(&prev.span, "first"),
            );
        }
    }
}

/// PSK problems carry no source label: the snippet would print the secret.
fn check_psks(n: &Network, keys: &[Sp<xcsp_core::Value>], problems: &mut Problems) {
    per_tunnel(
        n,
        keys.len(),
        ("xcsp::psk::count", "pre-shared keys"),
        "give one key per tunnel, or leave `preshared_keys` out to let xcsp generate them",
        problems,
    );
    for (i, k) in keys.iter().enumerate() {
        let text = k.value.as_str().unwrap_or_default();
        let reason = if !(8..=64).contains(&text.len()) {
            Some(format!("is {} characters long; AWS needs 8-64", text.len()))
        } else if text.starts_with('0') {
            Some("starts with `0`, which AWS refuses".into())
        } else if !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_') {
            Some("holds characters other than letters, digits, `.` and `_`".into())
        } else {
            None
        };
        if let Some(reason) = reason {
            problems.push(
                Problem::error("xcsp::psk::format", format!("pre-shared key {} of network `{}` {reason}", i + 1, n.name.value))
                    .with_help(format!("(at {}; the key itself is not shown) a key of 8-64 letters, digits, `.` and `_`, not starting with `0`, suits both clouds", k.span.location())),
            );
        }
    }
}

fn check_ipsec(p: &IpsecPolicy, problems: &mut Problems) {
    let one_of = |v: &Sp<String>, allowed: &[&str], what: &str, problems: &mut Problems| {
        if !allowed.contains(&v.value.as_str()) {
            problems.push(
                err("xcsp::ipsec::policy", format!("{what} `{}` is not accepted by both clouds", v.value), &v.span, "")
                    .with_help(format!("choose one of: {}", allowed.join(", "))),
            );
        }
    };
    one_of(&p.ike_version, &["ikev1", "ikev2"], "IKE version", problems);
    one_of(&p.encryption, &["aes128", "aes256", "gcm-aes128", "gcm-aes256"], "encryption", problems);
    one_of(&p.integrity, &["sha1", "sha256", "sha384"], "integrity", problems);
    for (g, what) in [(&p.dh_group, "DH group"), (&p.pfs_group, "PFS group")] {
        if ![2, 14, 19, 20, 24].contains(&g.value) {
            problems.push(
                err("xcsp::ipsec::policy", format!("{what} {} is not accepted by both clouds", g.value), &g.span, "")
                    .with_help(
                        "choose one of 2, 14, 19, 20, 24 (Azure: DHGroup2, DHGroup14, ECP256, ECP384, DHGroup24)",
                    ),
            );
        }
    }
    // Azure's IPsec (phase 2) integrity has no SHA384 (`network.json` `IpsecIntegrity`: MD5, SHA1,
    // SHA256, GCMAES128/192/256). With GCM encryption the phase 2 integrity is the GCM algorithm
    // itself and `sha384` applies to IKE only, which both clouds offer; with CBC encryption both
    // phases would need SHA384, and Azure would answer with SHA256 that AWS was not offered.
    if p.integrity.value == "sha384" && !p.encryption.value.starts_with("gcm-") {
        problems.push(
            err(
                "xcsp::ipsec::policy",
                format!("integrity `sha384` with encryption `{}`: Azure's IPsec integrity has no SHA384", p.encryption.value),
                &p.integrity.span,
                "",
            )
            .label(&p.encryption.span, "a CBC cipher")
            .with_help("use `sha256`, or a GCM cipher (`gcm-aes256`), with which `sha384` is the IKE integrity and GCM protects phase 2"),
        );
    }
    // AWS: Phase2LifetimeSeconds "must be less than the value for Phase1LifetimeSeconds"
    // (EC2 API, VpnTunnelOptionsSpecification).
    if p.sa_lifetime_seconds.value >= p.ike_lifetime_seconds.value {
        problems.push(
            err(
                "xcsp::ipsec::lifetime",
                format!(
                    "the IPsec SA (phase 2) lifetime {}s is not below the IKE (phase 1) lifetime {}s",
                    p.sa_lifetime_seconds.value, p.ike_lifetime_seconds.value
                ),
                &p.sa_lifetime_seconds.span,
                "",
            )
            .label(&p.ike_lifetime_seconds.span, "phase 1")
            .with_help("AWS requires phase 2 to be shorter than phase 1 (e.g. 3600 and 28800)"),
        );
    }
    // AWS: DPDTimeoutSeconds "30 or higher"; Azure: a connection's dpdTimeoutSeconds 9-3600
    // (Microsoft Learn, IPsec/IKE policy FAQ). Both sides get the spec's value.
    if let Some(d) = &p.dpd_timeout_seconds
        && !(30..=3600).contains(&d.value)
    {
        problems.push(
            err("xcsp::ipsec::dpd", format!("DPD timeout {}s is outside 30-3600s", d.value), &d.span, "")
                .with_help("AWS needs at least 30 s and Azure at most 3600 s"),
        );
    }
    // AWS: RekeyMarginTimeSeconds "between 60 and half of Phase2LifetimeSeconds".
    if let Some(m) = &p.rekey_margin_seconds {
        let half = p.sa_lifetime_seconds.value / 2;
        if !(60..=half).contains(&m.value) {
            problems.push(
                err("xcsp::ipsec::rekey", format!("rekey margin {}s is outside 60-{half}s", m.value), &m.span, "")
                    .label(&p.sa_lifetime_seconds.span, "half of this phase 2 lifetime is the most AWS takes")
                    .with_help("AWS accepts a rekey margin from 60 s to half the phase 2 lifetime"),
            );
        }
    }
    for (v, lo, hi, what) in [
        (&p.ike_lifetime_seconds, 900, 28800, "IKE (phase 1) lifetime"),
        (&p.sa_lifetime_seconds, 900, 3600, "IPsec SA (phase 2) lifetime"),
    ] {
        if !(lo..=hi).contains(&v.value) {
            problems.push(
                err("xcsp::ipsec::lifetime", format!("{what} {}s is outside {lo}-{hi}s", v.value), &v.span, "")
                    .with_help("AWS accepts phase 1 900-28800 s and phase 2 900-3600 s; Azure at least 300 s"),
            );
        }
    }
}

/// AWS lets one virtual private gateway attach to a VPC.
/// On a FIPS cluster the link keeps to key agreement FIPS allows: Diffie-Hellman group 2 (MODP
/// 1024) gives 80 bits of security, and NIST SP 800-131A Rev. 2 disallows finite-field key
/// agreement with a modulus below 2048 bits. Every other choice both clouds take is allowed
/// there: AES (CBC and GCM), HMAC with SHA-1, SHA-256 or SHA-384 ("acceptable"), MODP 2048
/// (groups 14 and 24) and the P-256 and P-384 curves (19, 20).
pub(super) fn check_fips(spec: &Spec, problems: &mut Problems) {
    let Some(cluster) = spec.cluster.as_ref().filter(|c| c.fips.value) else { return };
    for n in spec.networks.iter().filter(|n| n.driver.value == Driver::Ipsec) {
        for (g, what) in [(&n.ipsec.dh_group, "DH group"), (&n.ipsec.pfs_group, "PFS group")] {
            if g.value == 2 {
                problems.push(
                    err(
                        "xcsp::ipsec::fips",
                        format!(
                            "network `{}`: {what} 2 (MODP 1024, 80-bit security) is not allowed on a FIPS cluster (NIST SP 800-131A Rev. 2: finite-field key agreement below 2048 bits is disallowed)",
                            n.name.value
                        ),
                        &g.span,
                        "",
                    )
                    .label(&cluster.fips.span, "the cluster runs in FIPS mode")
                    .with_help("use group 20 (ECP384) or 19 (ECP256), or 14 (MODP 2048): both clouds take them"),
                );
            }
        }
    }
}

pub(super) fn check_shared_vpcs(spec: &Spec, problems: &mut Problems) {
    let default_vpc = spec.aws.as_ref().map(|a| a.vpc_id.as_ref().map(|v| v.value.clone()));
    let mut seen: Vec<(Option<String>, &Network)> = Vec::new();
    for n in spec.networks.iter().filter(|n| n.driver.value == Driver::Ipsec) {
        let vpc = n.vpc_id.as_ref().map(|v| v.value.clone()).or_else(|| default_vpc.clone().flatten());
        if let Some((_, prev)) = seen.iter().find(|(v, _)| *v == vpc) {
            problems.push(
                err(
                    "xcsp::aws::one_vgw_per_vpc",
                    format!(
                        "networks `{}` and `{}` would attach two VPN gateways to one VPC",
                        prev.name.value, n.name.value
                    ),
                    &n.name.span,
                    "",
                )
                .label(&prev.name.span, "first")
                .with_help("a VPC takes one virtual private gateway; give each link its own `vpc_id`, or use one link"),
            );
        }
        seen.push((vpc, n));
    }
}
/// AWS's default quota of inbound rules per security group (adjustable in Service Quotas).
pub const AWS_RULES_PER_GROUP: usize = 60;

/// Every IPsec link adds its rules to the same cluster security groups; past AWS's default
/// quota the apply would fail halfway (`RulesPerSecurityGroupLimitExceeded`), so say it now.
pub(super) fn check_rule_quota(spec: &Spec, problems: &mut Problems) {
    let ipsec = spec.cluster.as_ref().is_some_and(|c| c.ovn_ipsec.value);
    let per_link = topology::aws_ingress_ports(ipsec).len();
    let links: Vec<&Network> = spec.networks.iter().filter(|n| n.driver.value == Driver::Ipsec).collect();
    let total = links.len() * per_link;
    if total <= AWS_RULES_PER_GROUP {
        return;
    }
    let over = &links[AWS_RULES_PER_GROUP / per_link];
    problems.push(
        Problem::warning(
            "xcsp::aws::security_group_quota",
            format!(
                "{} IPsec links add {total} inbound rules to each of the cluster's security groups ({per_link} per link); AWS allows {AWS_RULES_PER_GROUP} per group by default",
                links.len()
            ),
        )
        .label(&over.name.span, "the rules of this link would pass the default quota")
        .with_help(
            "raise the \"Inbound or outbound rules per security group\" quota (Service Quotas, Amazon VPC) in the cluster's region before applying; the rules the installer made count too",
        ),
    );
}
