//! EC2 Site-to-Site VPN rules from the README's AWS rule table, driven through the real
//! aws-sdk-ec2 client against the sim's fidelity layer: tunnel option ranges and values, inside
//! CIDRs compared as networks, customer gateway ASNs and idempotent creates, and the `modifying`
//! state of a connection after ModifyVpnTunnelOptions. (The layer answers all of these itself;
//! no moto is needed.)

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    IkeVersionsRequestListValue, ModifyVpnTunnelOptionsSpecification, Phase1DhGroupNumbersRequestListValue,
    Phase1EncryptionAlgorithmsRequestListValue, Phase1IntegrityAlgorithmsRequestListValue,
    Phase2DhGroupNumbersRequestListValue, VpnConnectionOptionsSpecification, VpnTunnelOptionsSpecification,
};
use serde_json::json;
use xcsp_sim::{Profile, SimConfig, SimServer};

fn sim(profile: Profile) -> SimServer {
    let mut config = SimConfig::default();
    config.latency.profile = profile;
    config.throttle.enabled = false;
    SimServer::start(config, 0).unwrap()
}

fn ec2(base: &str) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .http_client(xcsp_crypto::aws_http_client())
            .region(aws_sdk_ec2::config::Region::new("us-gov-west-1"))
            .endpoint_url(base)
            .credentials_provider(aws_sdk_ec2::config::Credentials::new("AKID", "s", None, None, "test"))
            .build(),
    )
}

/// The error code and message of a failed call.
fn failure<T, E: ProvideErrorMetadata + std::fmt::Debug>(
    r: Result<T, aws_sdk_ec2::error::SdkError<E>>,
) -> (String, String) {
    let e = r.err().expect("the call must fail");
    (e.code().unwrap_or_default().to_string(), e.message().unwrap_or_default().to_string())
}

/// A customer gateway and a virtual private gateway (both available at once in `instant`).
async fn gateways(ec2: &aws_sdk_ec2::Client) -> (String, String) {
    let cgw = ec2.create_customer_gateway().ip_address("198.51.100.7").bgp_asn(65010).r#type("ipsec.1".into());
    let cgw = cgw.send().await.unwrap().customer_gateway.unwrap().customer_gateway_id.unwrap();
    let vgw = ec2.create_vpn_gateway().r#type("ipsec.1".into()).amazon_side_asn(64512).send().await.unwrap();
    (cgw, vgw.vpn_gateway.unwrap().vpn_gateway_id.unwrap())
}

async fn create(
    ec2: &aws_sdk_ec2::Client,
    cgw: &str,
    vgw: &str,
    tunnels: Vec<VpnTunnelOptionsSpecification>,
) -> Result<
    aws_sdk_ec2::operation::create_vpn_connection::CreateVpnConnectionOutput,
    aws_sdk_ec2::error::SdkError<aws_sdk_ec2::operation::create_vpn_connection::CreateVpnConnectionError>,
> {
    let options = VpnConnectionOptionsSpecification::builder().set_tunnel_options(Some(tunnels)).build();
    ec2.create_vpn_connection()
        .customer_gateway_id(cgw)
        .vpn_gateway_id(vgw)
        .r#type("ipsec.1")
        .options(options)
        .send()
        .await
}

/// Moves the world clock forward (`POST /_sim/clock/advance`).
async fn advance(base: &str, seconds: u64) {
    let url = format!("{base}/_sim/clock/advance");
    let r = reqwest::Client::new().post(url).json(&json!({ "seconds": seconds })).send().await.unwrap();
    assert!(r.status().is_success(), "clock advance: {}", r.status());
}

fn tunnel() -> aws_sdk_ec2::types::builders::VpnTunnelOptionsSpecificationBuilder {
    VpnTunnelOptionsSpecification::builder()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_options_outside_aws_ranges_are_refused_naming_the_option() {
    let server = sim(Profile::Instant);
    let ec2 = ec2(&server.base_url);
    let (cgw, vgw) = gateways(&ec2).await;
    let refused: Vec<(VpnTunnelOptionsSpecification, &str)> = vec![
        (tunnel().phase1_lifetime_seconds(899).build(), "Phase1LifetimeSeconds"),
        (tunnel().phase1_lifetime_seconds(28801).build(), "Phase1LifetimeSeconds"),
        (tunnel().phase2_lifetime_seconds(899).build(), "Phase2LifetimeSeconds"),
        (tunnel().phase2_lifetime_seconds(3601).build(), "Phase2LifetimeSeconds"),
        // Phase 2 must be strictly less than phase 1, with phase 1 at its effective value.
        (tunnel().phase1_lifetime_seconds(1800).phase2_lifetime_seconds(1800).build(), "Phase2LifetimeSeconds"),
        (tunnel().phase1_lifetime_seconds(900).build(), "Phase2LifetimeSeconds"),
        (tunnel().dpd_timeout_seconds(29).build(), "DPDTimeoutSeconds"),
        (tunnel().rekey_margin_time_seconds(59).build(), "RekeyMarginTimeSeconds"),
        // Half of the effective phase 2 lifetime: 1800 by default, 500 here.
        (tunnel().rekey_margin_time_seconds(1801).build(), "RekeyMarginTimeSeconds"),
        (tunnel().phase2_lifetime_seconds(1000).rekey_margin_time_seconds(501).build(), "RekeyMarginTimeSeconds"),
        (tunnel().rekey_fuzz_percentage(101).build(), "RekeyFuzzPercentage"),
        (tunnel().rekey_fuzz_percentage(-1).build(), "RekeyFuzzPercentage"),
        (tunnel().replay_window_size(63).build(), "ReplayWindowSize"),
        (tunnel().replay_window_size(2049).build(), "ReplayWindowSize"),
        (tunnel().dpd_timeout_action("reset").build(), "DPDTimeoutAction"),
        (tunnel().startup_action("begin").build(), "StartupAction"),
        (
            tunnel()
                .phase1_encryption_algorithms(
                    Phase1EncryptionAlgorithmsRequestListValue::builder().value("AES192").build(),
                )
                .build(),
            "Phase1EncryptionAlgorithms",
        ),
        (
            tunnel()
                .phase1_integrity_algorithms(
                    Phase1IntegrityAlgorithmsRequestListValue::builder().value("SHA384").build(),
                )
                .build(),
            "Phase1IntegrityAlgorithms",
        ),
        (
            tunnel().phase1_dh_group_numbers(Phase1DhGroupNumbersRequestListValue::builder().value(5).build()).build(),
            "Phase1DHGroupNumbers",
        ),
        (
            tunnel().phase2_dh_group_numbers(Phase2DhGroupNumbersRequestListValue::builder().value(1).build()).build(),
            "Phase2DHGroupNumbers",
        ),
        (tunnel().ike_versions(IkeVersionsRequestListValue::builder().value("ikev3").build()).build(), "IKEVersions"),
    ];
    for (spec, option) in refused {
        let (code, message) = failure(create(&ec2, &cgw, &vgw, vec![spec.clone()]).await);
        assert_eq!(code, "InvalidParameterValue", "{spec:?}: {message}");
        assert!(message.contains(option), "{spec:?}: the message names {option}: {message}");
    }
    // The edges of every range are accepted.
    let edges = tunnel()
        .phase1_lifetime_seconds(28800)
        .phase2_lifetime_seconds(3600)
        .rekey_margin_time_seconds(1800)
        .rekey_fuzz_percentage(0)
        .replay_window_size(2048)
        .dpd_timeout_seconds(30)
        .dpd_timeout_action("restart")
        .startup_action("start")
        .phase1_encryption_algorithms(
            Phase1EncryptionAlgorithmsRequestListValue::builder().value("AES256-GCM-16").build(),
        )
        .phase1_integrity_algorithms(Phase1IntegrityAlgorithmsRequestListValue::builder().value("SHA2-512").build())
        .phase1_dh_group_numbers(Phase1DhGroupNumbersRequestListValue::builder().value(24).build())
        .phase2_dh_group_numbers(Phase2DhGroupNumbersRequestListValue::builder().value(5).build())
        .ike_versions(IkeVersionsRequestListValue::builder().value("ikev2").build())
        .build();
    let low = tunnel().phase1_lifetime_seconds(901).phase2_lifetime_seconds(900).rekey_margin_time_seconds(60).build();
    let conn = create(&ec2, &cgw, &vgw, vec![edges, low]).await.unwrap().vpn_connection.unwrap();
    let options = conn.options.unwrap().tunnel_options.unwrap();
    assert_eq!(options[0].dpd_timeout_action.as_deref(), Some("restart"));
    assert_eq!(options[0].replay_window_size, Some(2048));
    assert_eq!(options[1].phase2_lifetime_seconds, Some(900));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_cidrs_are_compared_as_networks() {
    let server = sim(Profile::Instant);
    let ec2 = ec2(&server.base_url);
    let (cgw, vgw) = gateways(&ec2).await;
    let cidr = |c: &str| tunnel().tunnel_inside_cidr(c).build();
    // Two tunnels of one connection in one /30, written differently.
    let (code, message) =
        failure(create(&ec2, &cgw, &vgw, vec![cidr("169.254.21.1/30"), cidr("169.254.21.0/30")]).await);
    assert_eq!(code, "InvalidParameterValue", "{message}");
    // A reserved block written with a host address.
    let (code, message) = failure(create(&ec2, &cgw, &vgw, vec![cidr("169.254.169.253/30")]).await);
    assert_eq!(code, "InvalidParameterValue", "{message}");
    // Unique per virtual private gateway, across connections.
    create(&ec2, &cgw, &vgw, vec![cidr("169.254.21.0/30"), cidr("169.254.22.0/30")]).await.unwrap();
    let (code, message) =
        failure(create(&ec2, &cgw, &vgw, vec![cidr("169.254.21.2/30"), cidr("169.254.23.0/30")]).await);
    assert_eq!(code, "InvalidParameterValue", "{message}");
    assert!(message.contains("already used"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customer_gateway_asns_and_identical_creates() {
    let server = sim(Profile::Instant);
    let ec2 = ec2(&server.base_url);
    let cg = || ec2.create_customer_gateway().ip_address("198.51.100.9").r#type("ipsec.1".into());

    for (asn, ok) in [(0, false), (-5, false), (1, true), (2_147_483_647, true)] {
        let r = cg().bgp_asn(asn).send().await;
        assert_eq!(r.is_ok(), ok, "BgpAsn {asn}");
        if !ok {
            assert_eq!(failure(r).0, "InvalidParameterValue");
        }
    }
    for (asn, ok) in [(2_147_483_647i64, false), (4_294_967_296, false), (4_200_000_000, true)] {
        let r = cg().bgp_asn_extended(asn).send().await;
        assert_eq!(r.is_ok(), ok, "BgpAsnExtended {asn}");
    }
    let (code, _) = failure(cg().bgp_asn(65000).bgp_asn_extended(4_200_000_000).send().await);
    assert_eq!(code, "InvalidParameterCombination");

    // The same type, IP and ASN return the existing gateway; another ASN is a new one.
    let a = cg().bgp_asn(65010).send().await.unwrap().customer_gateway.unwrap();
    let b = cg().bgp_asn(65010).send().await.unwrap().customer_gateway.unwrap();
    assert_eq!(a.customer_gateway_id, b.customer_gateway_id);
    let c = cg().bgp_asn(65011).send().await.unwrap().customer_gateway.unwrap();
    assert_ne!(a.customer_gateway_id, c.customer_gateway_id);
    // Not once it is deleted.
    ec2.delete_customer_gateway().customer_gateway_id(a.customer_gateway_id.clone().unwrap()).send().await.unwrap();
    let d = cg().bgp_asn(65010).send().await.unwrap().customer_gateway.unwrap();
    assert_ne!(a.customer_gateway_id, d.customer_gateway_id);

    // DescribeCustomerGateways reports bgpAsnExtended for an extended ASN, bgpAsn otherwise.
    let e = cg().bgp_asn_extended(4_200_000_000).send().await.unwrap().customer_gateway.unwrap();
    assert_eq!(e.bgp_asn_extended.as_deref(), Some("4200000000"));
    assert_eq!(e.bgp_asn, None);
    let all = ec2.describe_customer_gateways().send().await.unwrap().customer_gateways.unwrap();
    let got = all.iter().find(|g| g.customer_gateway_id == e.customer_gateway_id).unwrap();
    assert_eq!((got.bgp_asn.as_deref(), got.bgp_asn_extended.as_deref()), (None, Some("4200000000")));
    let got = all.iter().find(|g| g.customer_gateway_id == c.customer_gateway_id).unwrap();
    assert_eq!((got.bgp_asn.as_deref(), got.bgp_asn_extended.as_deref()), (Some("65011"), None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modify_vpn_tunnel_options_holds_the_connection_in_modifying() {
    // Realistic durations on the world clock: the connection takes minutes, moved by /_sim/clock.
    let server = sim(Profile::Realistic);
    let ec2 = ec2(&server.base_url);
    let advance = |seconds: u64| advance(&server.base_url, seconds);
    let (cgw, vgw) = gateways(&ec2).await;
    advance(180).await;
    let conn = create(&ec2, &cgw, &vgw, vec![]).await.unwrap().vpn_connection.unwrap();
    let id = conn.vpn_connection_id.unwrap();
    let state = || async {
        let d = ec2.describe_vpn_connections().vpn_connection_ids(&id).send().await.unwrap();
        d.vpn_connections.unwrap()[0].state.clone().unwrap().as_str().to_string()
    };
    let psk = |k: &str| ModifyVpnTunnelOptionsSpecification::builder().pre_shared_key(k).build();
    // Pending: no modification yet.
    assert_eq!(state().await, "pending");
    advance(600).await;
    assert_eq!(state().await, "available");
    let d = ec2.describe_vpn_connections().vpn_connection_ids(&id).send().await.unwrap();
    let outside = d.vpn_connections.unwrap()[0].options.clone().unwrap().tunnel_options.unwrap();
    let (ip1, ip2) = (outside[0].outside_ip_address.clone().unwrap(), outside[1].outside_ip_address.clone().unwrap());

    let modify = |ip: &str, spec: ModifyVpnTunnelOptionsSpecification| {
        ec2.modify_vpn_tunnel_options().vpn_connection_id(&id).vpn_tunnel_outside_ip_address(ip).tunnel_options(spec)
    };
    let r = modify(&ip1, psk("rotated_key_1")).send().await.unwrap();
    assert_eq!(r.vpn_connection.unwrap().state.unwrap().as_str(), "modifying");
    assert_eq!(state().await, "modifying");
    // A second modification meanwhile, even of the other tunnel, is refused.
    let (code, message) = failure(modify(&ip2, psk("rotated_key_2")).send().await);
    assert_eq!(code, "IncorrectState", "{message}");
    assert!(message.contains("modifying"), "{message}");
    // Option ranges apply to the merged options: a phase 1 below the default phase 2 (3600) is
    // refused, a phase 2 against the tunnel's own phase 1 too.
    advance(200).await;
    assert_eq!(state().await, "available");
    let p1 = ModifyVpnTunnelOptionsSpecification::builder().phase1_lifetime_seconds(3000).build();
    let (code, message) = failure(modify(&ip2, p1).send().await);
    assert_eq!(code, "InvalidParameterValue", "{message}");
    assert!(message.contains("Phase2LifetimeSeconds"), "{message}");
    let both =
        ModifyVpnTunnelOptionsSpecification::builder().phase1_lifetime_seconds(3000).phase2_lifetime_seconds(1800);
    modify(&ip2, both.build()).send().await.unwrap();
    advance(200).await;
    let p2 = ModifyVpnTunnelOptionsSpecification::builder().phase2_lifetime_seconds(3000).build();
    let (code, message) = failure(modify(&ip2, p2).send().await);
    assert_eq!(code, "InvalidParameterValue", "{message}");
    assert!(message.contains("Phase2LifetimeSeconds"), "{message}");
    assert_eq!(state().await, "available", "a refused modification changes nothing");
    modify(&ip2, psk("rotated_key_2")).send().await.unwrap();
    advance(200).await;
    let d = ec2.describe_vpn_connections().vpn_connection_ids(&id).send().await.unwrap();
    let c = &d.vpn_connections.unwrap()[0];
    assert_eq!(c.state.clone().unwrap().as_str(), "available");
    let t = c.options.clone().unwrap().tunnel_options.unwrap();
    assert_eq!(
        (t[0].pre_shared_key.as_deref(), t[1].pre_shared_key.as_deref()),
        (Some("rotated_key_1"), Some("rotated_key_2"))
    );
    assert_eq!(t[1].phase1_lifetime_seconds, Some(3000));
}

/// Options a request leaves unset come back as AWS runs them (its documented defaults), what
/// ModifyVpnTunnelOptions sets is what Describe returns, and the customer gateway configuration
/// document has the shape its readers parse (inside addresses of both ends, the prefix length in
/// `network_cidr`, BGP ASN and hold time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_options_read_back_as_aws_defaults_and_the_configuration_document_has_its_real_shape() {
    let server = sim(Profile::Instant);
    let ec2 = ec2(&server.base_url);
    let (cgw, vgw) = gateways(&ec2).await;
    let tunnels = vec![
        tunnel().tunnel_inside_cidr("169.254.21.0/30").phase2_lifetime_seconds(1800).build(),
        tunnel().tunnel_inside_cidr("169.254.22.0/30").build(),
    ];
    let conn = create(&ec2, &cgw, &vgw, tunnels).await.unwrap().vpn_connection.unwrap();
    let id = conn.vpn_connection_id.unwrap();
    let read = || async {
        let d = ec2.describe_vpn_connections().vpn_connection_ids(&id).send().await.unwrap();
        d.vpn_connections.unwrap()[0].clone()
    };
    let c = read().await;
    let t = c.options.clone().unwrap().tunnel_options.unwrap();
    let first = t.iter().find(|t| t.tunnel_inside_cidr() == Some("169.254.21.0/30")).unwrap();
    assert_eq!(first.phase1_lifetime_seconds(), Some(28800));
    assert_eq!(first.phase2_lifetime_seconds(), Some(1800), "what was set");
    assert_eq!(first.rekey_margin_time_seconds(), Some(270));
    assert_eq!(first.rekey_fuzz_percentage(), Some(100));
    assert_eq!(first.replay_window_size(), Some(1024));
    assert_eq!(first.dpd_timeout_seconds(), Some(30));
    assert_eq!(first.dpd_timeout_action(), Some("clear"));
    assert_eq!(first.startup_action(), Some("add"));
    let values = |v: Vec<Option<&str>>| v.into_iter().flatten().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        values(first.phase1_encryption_algorithms().iter().map(|a| a.value()).collect()),
        ["AES128", "AES256", "AES128-GCM-16", "AES256-GCM-16"]
    );
    assert_eq!(values(first.ike_versions().iter().map(|a| a.value()).collect()), ["ikev1", "ikev2"]);
    assert_eq!(first.phase2_dh_group_numbers().len(), 13, "2, 5 and 14-24");

    let ip = first.outside_ip_address().unwrap().to_string();
    let spec = ModifyVpnTunnelOptionsSpecification::builder()
        .dpd_timeout_action("restart")
        .startup_action("start")
        .dpd_timeout_seconds(45)
        .build();
    ec2.modify_vpn_tunnel_options()
        .vpn_connection_id(&id)
        .vpn_tunnel_outside_ip_address(&ip)
        .tunnel_options(spec)
        .send()
        .await
        .unwrap();
    let t = read().await.options.unwrap().tunnel_options.unwrap();
    let first = t.iter().find(|t| t.outside_ip_address() == Some(ip.as_str())).unwrap();
    assert_eq!(
        (first.dpd_timeout_action(), first.startup_action(), first.dpd_timeout_seconds()),
        (Some("restart"), Some("start"), Some(45))
    );
    assert_eq!(first.phase2_lifetime_seconds(), Some(1800), "untouched options stay");

    let doc = c.customer_gateway_configuration.unwrap();
    let tunnel_doc =
        doc.split("<ipsec_tunnel>").find(|s| s.contains(&format!("<ip_address>{ip}</ip_address>"))).unwrap();
    let end = |side: &str| {
        tunnel_doc.split(&format!("<{side}>")).nth(1).unwrap().split(&format!("</{side}>")).next().unwrap().to_string()
    };
    let (customer, aws) = (end("customer_gateway"), end("vpn_gateway"));
    assert!(customer.contains("<tunnel_outside_address><ip_address>198.51.100.7</ip_address>"), "{customer}");
    assert!(customer.contains("<tunnel_inside_address><ip_address>169.254.21.2</ip_address><network_mask>255.255.255.252</network_mask><network_cidr>30</network_cidr>"), "{customer}");
    assert!(customer.contains("<bgp><asn>65010</asn><hold_time>30</hold_time></bgp>"), "{customer}");
    assert!(aws.contains("<tunnel_inside_address><ip_address>169.254.21.1</ip_address>"), "{aws}");
    assert!(aws.contains("<bgp><asn>64512</asn><hold_time>30</hold_time></bgp>"), "{aws}");
    assert!(tunnel_doc.contains("<pre_shared_key>"), "{tunnel_doc}");
}

/// A gateway detached from its VPC is `detaching` before `detached`, and neither it nor its
/// customer gateway can be deleted while a VPN connection of theirs is still `deleting` (the
/// realistic profile on the world clock; moto holds the VPC).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detaching_and_deleting_connections_hold_their_gateways() {
    let moto = xcsp_sim::aws::Moto::start().unwrap_or_else(|e| panic!("this test needs moto: {e}"));
    let server = sim(Profile::Realistic);
    server.sim.aws.set_moto(&moto.url);
    let ec2 = ec2(&server.base_url);
    let advance = |seconds: u64| advance(&server.base_url, seconds);
    let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    let (cgw, vgw) = gateways(&ec2).await;
    advance(180).await;
    ec2.attach_vpn_gateway().vpn_gateway_id(&vgw).vpc_id(&vpc).send().await.unwrap();
    advance(90).await;
    let conn = create(&ec2, &cgw, &vgw, vec![]).await.unwrap().vpn_connection.unwrap().vpn_connection_id.unwrap();
    advance(600).await;
    let attachment = || async {
        let g = ec2.describe_vpn_gateways().vpn_gateway_ids(&vgw).send().await.unwrap();
        let g = g.vpn_gateways.unwrap()[0].clone();
        g.vpc_attachments.unwrap_or_default().first().and_then(|a| a.state.clone()).map(|s| s.as_str().to_string())
    };
    assert_eq!(attachment().await.as_deref(), Some("attached"));

    ec2.delete_vpn_connection().vpn_connection_id(&conn).send().await.unwrap();
    ec2.detach_vpn_gateway().vpn_gateway_id(&vgw).vpc_id(&vpc).send().await.unwrap();
    assert_eq!(attachment().await.as_deref(), Some("detaching"));
    let (code, message) = failure(ec2.delete_vpn_gateway().vpn_gateway_id(&vgw).send().await);
    assert_eq!(code, "IncorrectState", "{message}");
    assert!(message.contains("detaching"), "{message}");
    advance(40).await;
    assert_eq!(attachment().await.as_deref(), Some("detached"));
    // The connection is still `deleting` (60-180 s): it holds both gateways.
    let (code, message) = failure(ec2.delete_vpn_gateway().vpn_gateway_id(&vgw).send().await);
    assert_eq!(code, "IncorrectState", "{message}");
    let (code, message) = failure(ec2.delete_customer_gateway().customer_gateway_id(&cgw).send().await);
    assert_eq!(code, "IncorrectState", "{message}");
    advance(200).await;
    ec2.delete_customer_gateway().customer_gateway_id(&cgw).send().await.unwrap();
    ec2.delete_vpn_gateway().vpn_gateway_id(&vgw).send().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_amazon_side_asn_is_a_private_asn() {
    let server = sim(Profile::Instant);
    let ec2 = ec2(&server.base_url);
    for ok in [64512, 65534, 4_200_000_000, 4_294_967_294] {
        let g = ec2.create_vpn_gateway().r#type("ipsec.1".into()).amazon_side_asn(ok).send().await.unwrap();
        assert_eq!(g.vpn_gateway.unwrap().amazon_side_asn, Some(ok));
    }
    for bad in [7224, 64511, 65535, 4_199_999_999, 4_294_967_295] {
        let (code, message) =
            failure(ec2.create_vpn_gateway().r#type("ipsec.1".into()).amazon_side_asn(bad).send().await);
        assert_eq!(code, "InvalidParameterValue", "{bad}: {message}");
        assert!(message.contains("AmazonSideAsn"), "{message}");
    }
}
