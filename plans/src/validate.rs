//! Semantic checks on a decoded spec, before any cloud call. Each rule is a function that adds
//! problems; all of them run, so the user sees every mistake at once. DOMAIN.md cites the
//! cloud documentation behind each limit.

use ipnet::Ipv4Net;
use xcsp_core::{Problem, Problems, Span};

use crate::net::{overlapping_pairs, overlaps};
use crate::spec::*;

/// A spec that passed every check: all singleton blocks present, all rules satisfied.
#[derive(Debug, Clone)]
pub struct Model {
    pub stack: String,
    pub cluster: Cluster,
    pub aws: Aws,
    pub azure: Azure,
    pub networks: Vec<Network>,
    pub identities: Vec<Identity>,
    pub pools: Vec<Pool>,
    pub outputs: Vec<Output>,
    pub references: Vec<(String, String)>,
    pub digest: String,
    pub backend: Option<crate::spec::Backend>,
}

/// Runs every rule. Returns the model if no rule found an error (warnings are allowed).
pub fn validate(spec: Spec, problems: &mut Problems) -> Option<Model> {
    check_stack(&spec, problems);
    check_cluster(&spec, problems);
    check_address_space(&spec, problems);
    check_asns(&spec, problems);
    check_regions(&spec, problems);
    for n in &spec.networks {
        check_network(n, problems);
    }
    check_pool_identities(&spec, problems);
    check_shared_vpcs(&spec, problems);
    check_rule_quota(&spec, problems);
    check_tags(&spec, problems);
    for id in &spec.identities {
        check_https(&id.issuer, "the OIDC issuer", problems);
    }
    for p in &spec.pools {
        check_pool(p, problems);
    }
    check_zones(&spec, problems);
    if problems.has_errors() {
        return None;
    }
    Some(Model {
        stack: spec.stack,
        cluster: spec.cluster?,
        aws: spec.aws?,
        azure: spec.azure?,
        networks: spec.networks,
        identities: spec.identities,
        pools: spec.pools,
        outputs: spec.outputs,
        references: spec.references,
        digest: spec.digest,
        backend: spec.backend,
    })
}

fn err(code: &'static str, message: impl Into<String>, span: &Span, label: &str) -> Problem {
    Problem::error(code, message).label(span, label)
}

fn check_https(url: &Sp<String>, what: &str, problems: &mut Problems) {
    let ok = url.value.strip_prefix("https://").is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'));
    if !ok {
        problems.push(
            err("xcsp::url::https", format!("{what} must be an https:// URL"), &url.span, "")
                .with_help("Azure fetches the issuer's discovery document over public HTTPS"),
        );
    } else if url.value.ends_with('/') && what.contains("issuer") {
        problems.push(
            Problem::warning("xcsp::url::trailing_slash", "the issuer ends with `/`")
                .label(&url.span, "")
                .with_help("the federated credential's issuer must equal the cluster's serviceAccountIssuer exactly (AADSTS70021 otherwise)"),
        );
    }
}

fn check_cluster(spec: &Spec, problems: &mut Problems) {
    let Some(c) = &spec.cluster else { return };
    let name = &c.infrastructure_name;
    let valid = !name.value.is_empty()
        && name.value.len() <= 63
        && name.value.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
        && !name.value.starts_with('-')
        && !name.value.ends_with('-');
    if !valid {
        problems.push(
            err("xcsp::cluster::infrastructure_name", "not a valid infrastructure name", &name.span, "")
                .with_help("use the cluster's `oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`: lowercase letters, digits and `-`"),
        );
    }
    check_https(&c.api_url, "the API URL", problems);
    check_https(&c.oidc_issuer_url, "the OIDC issuer", problems);
    // An IPsec tunnel lowers the path MTU, and Geneve adds 100 bytes on top of the overlay MTU.
    for n in spec.networks.iter().filter(|n| n.driver.value == Driver::Ipsec) {
        let need = c.overlay_mtu.value + GENEVE_OVERHEAD;
        if need > n.tunnel_mtu.value {
            problems.push(
                err(
                    "xcsp::mtu::overlay",
                    format!(
                        "overlay MTU {} plus Geneve's {GENEVE_OVERHEAD} bytes does not fit the tunnel path MTU {} of network `{}`",
                        c.overlay_mtu.value, n.tunnel_mtu.value, n.name.value
                    ),
                    &c.overlay_mtu.span,
                    "cross-cloud pod traffic would be dropped silently",
                )
                .label(&n.tunnel_mtu.span, "tunnel path MTU")
                .with_help(format!(
                    "migrate the cluster network MTU to at most {} before adding cross-cloud workers",
                    n.tunnel_mtu.value - GENEVE_OVERHEAD
                )),
            );
        }
    }
}

const GENEVE_OVERHEAD: i64 = 100;
/// AWS Site-to-Site VPN supports at most 1446 bytes.
const AWS_VPN_MAX_MTU: i64 = 1446;

/// Cluster networks and VNets must not overlap; subnets sit inside their VNet and apart.
fn check_address_space(spec: &Spec, problems: &mut Problems) {
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

fn check_asns(spec: &Spec, problems: &mut Problems) {
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

fn check_regions(spec: &Spec, problems: &mut Problems) {
    if let Some(aws) = &spec.aws {
        let r = &aws.region.value;
        let parts: Vec<&str> = r.split('-').collect();
        let shaped = parts.len() >= 3
            && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
            && parts.last().is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()));
        if !shaped {
            problems.push(
                err("xcsp::cloud::region", format!("`{r}` is not an AWS region"), &aws.region.span, "")
                    .with_help("e.g. us-gov-west-1, us-east-1"),
            );
        }
    }
    let Some(az) = &spec.azure else { return };
    let loc = &az.location.value;
    let gov_location = loc.starts_with("usgov") || loc.starts_with("usdod");
    match az.cloud.value {
        AzureCloud::Public if gov_location => problems.push(
            err(
                "xcsp::cloud::mismatch",
                format!("location `{loc}` is in Azure Government, but the cloud is public"),
                &az.location.span,
                "",
            )
            .label(&az.cloud.span, "cloud")
            .with_help("set `cloud = \"usgovernment\"`"),
        ),
        AzureCloud::UsGovernment if !gov_location => problems.push(
            err(
                "xcsp::cloud::mismatch",
                format!("location `{loc}` is not an Azure Government region"),
                &az.location.span,
                "",
            )
            .label(&az.cloud.span, "cloud")
            .with_help("Azure Government regions: usgovvirginia, usgovarizona, usgovtexas"),
        ),
        _ => {}
    }
    match (az.cloud.value, &az.endpoints) {
        (AzureCloud::Custom, None) => problems.push(
            err("xcsp::cloud::endpoints", "a custom cloud needs an `endpoints` block", &az.cloud.span, "")
                .with_help("add endpoints { resource_manager = \"https://...\", authority = \"https://...\" }"),
        ),
        (AzureCloud::Public | AzureCloud::UsGovernment, Some(e)) => problems.push(
            err("xcsp::cloud::endpoints", "`endpoints` is only for `cloud = \"custom\"`", &e.resource_manager.span, "")
                .with_help("public and US Government endpoints are built in"),
        ),
        _ => {}
    }
    for (v, what) in [(&az.subscription_id, "subscription id"), (&az.tenant_id, "tenant id")] {
        if !is_guid(&v.value) {
            problems.push(
                err("xcsp::azure::guid", format!("the {what} is not a GUID"), &v.span, "")
                    .with_help("e.g. 00000000-0000-0000-0000-000000000000"),
            );
        }
    }
    let rg = &az.resource_group.value;
    let rg_ok = !rg.is_empty()
        && rg.len() <= 90
        && !rg.ends_with('.')
        && rg.chars().all(|c| c.is_alphanumeric() || "-_.()".contains(c));
    if !rg_ok {
        problems.push(
            err(
                "xcsp::azure::resource_group",
                format!("`{rg}` is not a valid resource group name"),
                &az.resource_group.span,
                "",
            )
            .with_help("1-90 letters, digits, `-`, `_`, `.`, `(`, `)`; not ending in `.`"),
        );
    }
    if let Some(aws) = &spec.aws
        && aws.partition() == "aws-us-gov"
        && az.cloud.value == AzureCloud::Public
    {
        problems.push(
            Problem::warning("xcsp::cloud::boundary", "a GovCloud cluster is linked to public Azure")
                .label(&az.cloud.span, "")
                .with_help("IL5 workloads usually require Azure Government (`cloud = \"usgovernment\"`)"),
        );
    }
}

fn is_guid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
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

fn check_network(n: &Network, problems: &mut Problems) {
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

fn check_inside_cidrs(n: &Network, cidrs: &[Sp<Ipv4Net>], problems: &mut Problems) {
    let link_local: Ipv4Net = "169.254.0.0/16".parse().expect("valid");
    let azure_apipa = (u32::from_be_bytes([169, 254, 21, 0]), u32::from_be_bytes([169, 254, 22, 255]));
    if cidrs.len() != 4 {
        problems.push(
            err(
                "xcsp::tunnel::count",
                format!("{} tunnel inside CIDRs given; the link has 4 tunnels", cidrs.len()),
                &n.span,
                "",
            )
            .with_help("give one /30 per tunnel, or leave `tunnel_inside_cidrs` out to let xcsp allocate them"),
        );
    }
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
            && !(u32::from(net.network()) >= azure_apipa.0 && u32::from(net.broadcast()) <= azure_apipa.1)
        {
            Some((
                "xcsp::tunnel::apipa",
                format!("{net} is outside Azure's APIPA range for BGP"),
                "Azure's custom BGP addresses must lie in 169.254.21.0-169.254.22.255, e.g. 169.254.21.0/30".into(),
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
    if keys.len() != 4 {
        problems.push(
            err(
                "xcsp::psk::count",
                format!("{} pre-shared keys given; the link has 4 tunnels", keys.len()),
                &n.span,
                "",
            )
            .with_help("give one key per tunnel, or leave `preshared_keys` out to let xcsp generate them"),
        );
    }
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
fn check_shared_vpcs(spec: &Spec, problems: &mut Problems) {
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

/// Characters Azure refuses in tag names (Microsoft Learn, "Use tags to organize your Azure
/// resources", Limitations: `InvalidTagNameCharacters`).
const AZURE_TAG_NAME_REFUSED: &str = "<>%&\\?/";
/// Tags per resource: Azure allows 50 tag name/value pairs; AWS 50 user tags (Microsoft Learn,
/// tag limitations; AWS "Tag your Amazon EC2 resources", tag restrictions). xcsp's own two count.
const TAGS_PER_RESOURCE: usize = 50;

/// User tags may not take xcsp's own keys (adoption and sweeps find resources by them) nor what
/// the clouds refuse: AWS keys 1-128 characters, values 256, the `aws:` prefix reserved; Azure
/// names 1-512 characters without `< > % & \ ? /`, values 256, the prefixes `microsoft`, `azure`
/// and `windows` reserved (Az.Resources `Tags_CreateOrUpdate`); 50 tags a resource on both.
fn check_tags(spec: &Spec, problems: &mut Problems) {
    let blocks = [
        spec.aws.as_ref().map(|a| (&a.tags, "AWS", &["aws:"][..], 128usize, "")),
        spec.azure
            .as_ref()
            .map(|a| (&a.tags, "Azure", &["microsoft", "azure", "windows"][..], 512usize, AZURE_TAG_NAME_REFUSED)),
    ];
    for (tags, cloud, reserved, key_max, refused_chars) in blocks.into_iter().flatten() {
        for (k, v) in &tags.value {
            let value_len = v.as_str().map_or(0, |s| s.chars().count());
            let lower = k.to_ascii_lowercase();
            let why = if xcsp_core::tags::is_reserved(k) {
                Some(format!("`{k}`: the `xcsp.io/` and `xcsp.io_` keys are xcsp's own"))
            } else if let Some(prefix) = reserved.iter().find(|p| lower.starts_with(*p)) {
                Some(format!("`{k}`: {cloud} reserves names beginning with `{prefix}`"))
            } else if let Some(c) = k.chars().find(|c| refused_chars.contains(*c)) {
                Some(format!(
                    "`{k}`: {cloud} refuses `{c}` in tag names (any of {})",
                    refused_chars.chars().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" ")
                ))
            } else if k.is_empty() || k.chars().count() > key_max || value_len > 256 {
                Some(format!("`{k}`: {cloud} tag names take 1-{key_max} characters and values at most 256"))
            } else {
                None
            };
            if let Some(why) = why {
                problems.push(
                    err("xcsp::tags::invalid", format!("tag {why}"), &tags.span, "in these tags")
                        .with_help("rename the tag; xcsp adds its stack and address tags by itself"),
                );
            }
        }
        if tags.value.len() + 2 > TAGS_PER_RESOURCE {
            problems.push(
                err(
                    "xcsp::tags::count",
                    format!(
                        "{} {cloud} tags, and xcsp adds 2: a resource takes at most {TAGS_PER_RESOURCE}",
                        tags.value.len()
                    ),
                    &tags.span,
                    "",
                )
                .with_help(format!("keep at most {} tags", TAGS_PER_RESOURCE - 2)),
            );
        }
    }
}

/// The stack's name goes into the state path (`.xcsp/<stack>/`), every Kubernetes object's
/// `xcsp.io/stack` label value and every list by label selector, the start of every Azure
/// resource name, and AWS tags. Refused here is what any of them would refuse:
/// - a Kubernetes label value: at most 63 characters, `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
///   (apimachinery `validation.IsValidLabelValue`);
/// - Azure names: a user-assigned identity's name takes letters, digits, `-` and `_` only (no `.`);
///   virtual networks at most 64 characters, the network resources xcsp names at most 80
///   (Microsoft Learn, "Naming rules and restrictions for Azure resources");
/// - a path: no separators, no `..`, no control characters (the label rule excludes them all).
fn check_stack(spec: &Spec, problems: &mut Problems) {
    let stack = &spec.stack;
    let Some(span) = &spec.stack_span else { return };
    let label_ok = |s: &str| {
        let b = s.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
    };
    let shown: String = stack.chars().take(64).map(|c| if c.is_control() { '?' } else { c }).collect();
    let why = if !label_ok(stack) {
        Some((
            "a Kubernetes label value (every object's `xcsp.io/stack` label) takes 1-63 letters, digits, `-`, `_` and `.`, beginning and ending with a letter or digit",
            "the first object xcsp applies would be refused by the API server",
        ))
    } else if stack.contains('.') {
        Some((
            "an Azure user-assigned identity's name (`<stack>-<identity>`) takes letters, digits, `-` and `_` only",
            "Azure would refuse the identity after the network was made",
        ))
    } else {
        None
    };
    if let Some((rule, fails)) = why {
        problems.push(
            err("xcsp::stack::name", format!("the stack name `{shown}` cannot be used"), span, rule)
                .with_help(format!("{fails}; use letters, digits, `-` and `_`, e.g. `il5-gpu`")),
        );
        return;
    }
    // The Azure names xcsp composes from the stack (plans::expand::Builder::azure_name).
    let mut names: Vec<(String, usize, &Span)> = Vec::new();
    for n in &spec.networks {
        names.push((format!("{stack}-{}", n.name.value), 64, &n.name.span));
        names.push((format!("{stack}-{}-vpngw", n.name.value), 80, &n.name.span));
        names.push((format!("{stack}-{}-aws3", n.name.value), 80, &n.name.span));
    }
    for p in &spec.pools {
        names.push((format!("{stack}-{}-nsg", p.name.value), 80, &p.name.span));
    }
    for id in &spec.identities {
        names.push((format!("{stack}-{}", id.name.value), 128, &id.name.span));
    }
    for (name, max, at) in names {
        if name.len() > max {
            problems.push(
                err(
                    "xcsp::stack::name",
                    format!("the Azure name `{name}` is {} characters long; Azure allows {max}", name.len()),
                    at,
                    "named from the stack and this block",
                )
                .label(span, "stack")
                .with_help("shorten the stack name or the block's label"),
            );
        }
    }
}

/// AWS's default quota of inbound rules per security group (adjustable in Service Quotas).
pub const AWS_RULES_PER_GROUP: usize = 60;

/// Every IPsec link adds its rules to the same cluster security groups; past AWS's default
/// quota the apply would fail halfway (`RulesPerSecurityGroupLimitExceeded`), so say it now.
fn check_rule_quota(spec: &Spec, problems: &mut Problems) {
    let per_link = crate::expand::CONTROL_PLANE_PORTS.len() + crate::expand::WORKER_PORTS.len();
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

/// One AzureCluster per network carries one identity reference, so its pools must agree.
fn check_pool_identities(spec: &Spec, problems: &mut Problems) {
    for n in &spec.networks {
        let mut pools = spec.pools.iter().filter(|p| p.network.value == n.name.value);
        let Some(first) = pools.next() else { continue };
        for p in pools.filter(|p| p.identity.value != first.identity.value) {
            problems.push(
                err(
                    "xcsp::pool::identity",
                    format!("pools `{}` and `{}` share network `{}` but use different identities", first.name.value, p.name.value, n.name.value),
                    &p.identity.span,
                    "",
                )
                .label(&first.identity.span, "first pool's identity")
                .with_help("the network's AzureCluster references one AzureClusterIdentity; use the same workload_identity for its pools"),
            );
        }
    }
}

fn check_pool(p: &Pool, problems: &mut Problems) {
    if p.replicas.value < 0 {
        problems.push(err("xcsp::pool::replicas", "replicas cannot be negative", &p.replicas.span, ""));
    }
    if !p.vm_size.value.starts_with("Standard_") {
        problems.push(
            err("xcsp::pool::vm_size", format!("`{}` is not an Azure VM size", p.vm_size.value), &p.vm_size.span, "")
                .with_help("e.g. Standard_ND96asr_v4"),
        );
    }
    for z in &p.zones.value {
        if !["1", "2", "3"].contains(&z.as_str()) {
            problems.push(
                err("xcsp::pool::zones", format!("zone `{z}` does not exist"), &p.zones.span, "")
                    .with_help("Azure zones are \"1\", \"2\" and \"3\""),
            );
        }
    }
    check_generation(p, problems);
    for t in &p.taints.value {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str()) {
            problems.push(
                err("xcsp::pool::taint", format!("taint effect `{}` is not valid", t.effect), &p.taints.span, "")
                    .with_help("NoSchedule, PreferNoSchedule or NoExecute"),
            );
        }
    }
    if !(30..=4095).contains(&p.os_disk_size_gb.value) {
        problems.push(err(
            "xcsp::pool::os_disk",
            format!("OS disk of {} GB is outside 30-4095", p.os_disk_size_gb.value),
            &p.os_disk_size_gb.span,
            "",
        ));
    }
    for key in p.labels.value.keys() {
        let name = key.rsplit('/').next().unwrap_or("");
        let ok = !name.is_empty()
            && name.len() <= 63
            && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok {
            problems.push(err(
                "xcsp::pool::label",
                format!("`{key}` is not a valid Kubernetes label key"),
                &p.labels.span,
                "",
            ));
        }
    }
}

/// VM size series that run Generation 2 images only (Microsoft Learn, the series' pages under
/// virtual-machines/sizes/gpu-accelerated, "Feature support": Generation 1 VMs "Not supported").
/// Matched as prefixes of the size name, case-insensitively.
const GEN2_ONLY_SIZES: &[(&str, &str)] = &[
    ("standard_nd96asr_v4", "ND A100 v4"),
    ("standard_nd96amsr_a100_v4", "NDm A100 v4"),
    ("standard_nd96isr_h100_v5", "ND H100 v5"),
    ("standard_nc24ads_a100_v4", "NC A100 v4"),
    ("standard_nc48ads_a100_v4", "NC A100 v4"),
    ("standard_nc96ads_a100_v4", "NC A100 v4"),
    ("standard_nd40rs_v2", "NDv2"),
];

/// The Hyper-V generation of a marketplace image, where its SKU's naming says so: RHCOS in
/// `azureopenshift/aro4` is `aro_<XY>` for Generation 1 and `<XY>-v2` (or `<XY>-arm`) for
/// Generation 2 (openshift/enhancements `enhancements/rhcos/marketplace-images.md`); the paid
/// `redhat/rh-ocp-worker` offer has `rh-ocp-worker-gen1` and `rh-ocp-worker`. None when unknown.
fn image_generation(image: &Image) -> Option<u8> {
    let Image::Marketplace { publisher, offer, sku, .. } = image else { return None };
    match (publisher.to_ascii_lowercase().as_str(), offer.to_ascii_lowercase().as_str()) {
        ("azureopenshift", "aro4") if sku.starts_with("aro_") && !sku.ends_with("-v2") => Some(1),
        ("azureopenshift", "aro4") if sku.ends_with("-v2") || sku.ends_with("-arm") => Some(2),
        ("redhat", "rh-ocp-worker") if sku == "rh-ocp-worker-gen1" => Some(1),
        ("redhat", "rh-ocp-worker") if sku == "rh-ocp-worker" => Some(2),
        _ => None,
    }
}

/// A Generation 1 image on a size that runs Generation 2 only never boots (Azure refuses the
/// VM); refused when both are known.
fn check_generation(p: &Pool, problems: &mut Problems) {
    let size = p.vm_size.value.to_ascii_lowercase();
    let Some((_, series)) = GEN2_ONLY_SIZES.iter().find(|(prefix, _)| size.starts_with(prefix)) else { return };
    if image_generation(&p.image.value) != Some(1) {
        return;
    }
    let hint = match &p.image.value {
        Image::Marketplace { sku, .. } if sku.starts_with("aro_") => {
            format!("use the Generation 2 SKU `{}-v2`", sku.trim_start_matches("aro_"))
        }
        _ => "use the Generation 2 image of the same release".to_string(),
    };
    problems.push(
        err(
            "xcsp::pool::generation",
            format!("`{}` ({series}) runs Generation 2 images only, and this image is Generation 1", p.vm_size.value),
            &p.image.span,
            "a Generation 1 image",
        )
        .label(&p.vm_size.span, "Generation 2 only")
        .with_help(hint),
    );
}

/// A pool's zones place its machines (one MachineSet per zone, `plans::expand::machine_sets`):
/// a region without zones refuses zonal VMs (`LocationNotSupportAvailabilityZones`), and each
/// MachineSet's name, `<infra>-<pool>-<location><zone>`, is also the `cluster.x-k8s.io/set-name`
/// label value of its machines, so at most 63 characters.
fn check_zones(spec: &Spec, problems: &mut Problems) {
    let (Some(az), Some(cluster)) = (&spec.azure, &spec.cluster) else { return };
    let location = &az.location.value;
    for p in spec.pools.iter().filter(|p| !p.zones.value.is_empty()) {
        match crate::regions::has_zones(location) {
            Some(false) => problems.push(
                err("xcsp::pool::zones", format!("`{location}` has no availability zones"), &p.zones.span, "")
                    .label(&az.location.span, "location")
                    .with_help("leave `zones` out for a regional pool, or choose a region with zones (e.g. usgovvirginia, eastus)"),
            ),
            None => problems.push(
                Problem::warning("xcsp::pool::zones_unknown", format!("xcsp does not know whether `{location}` has availability zones"))
                    .label(&p.zones.span, "")
                    .with_help("Azure refuses zonal VMs in a region without zones; the link's public IPs are made regional there"),
            ),
            Some(true) => {}
        }
        let longest = p.zones.value.iter().map(String::len).max().unwrap_or(0);
        let name_len = cluster.infrastructure_name.value.len() + p.name.value.len() + location.len() + longest + 2;
        if name_len > 63 {
            problems.push(
                err(
                    "xcsp::pool::name",
                    format!("the MachineSet names of pool `{}` would be {name_len} characters long; 63 at most", p.name.value),
                    &p.name.span,
                    "",
                )
                .with_help("the name `<infra>-<pool>-<location><zone>` is also its machines' `cluster.x-k8s.io/set-name` label value; shorten the pool's label"),
            );
        }
    }
}
