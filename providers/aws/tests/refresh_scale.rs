//! Refresh cost does not grow with the number of VPN connections: one DescribeVpnConnections
//! for 4, 40 or 400 of them (counted by the fidelity layer), and a connection deleted out of
//! band disappears from the next refresh (the engine turns that into drift).
//! Prints the counts for BENCHMARKS.md (`cargo test -p xcsp-aws --test refresh_scale -- --nocapture`).

use std::time::Duration;

use aws_sdk_ec2::types::{GatewayType, ResourceType, Tag, TagSpecification};
use xcsp_aws::{AwsConfig, AwsProvider};
use xcsp_core::provider::Provider;
use xcsp_core::{ADDRESS_TAG, ResourceType as T, STACK_TAG};
use xcsp_sim::aws::Moto;
use xcsp_sim::{SimConfig, SimServer};

const REGION: &str = "us-gov-west-1";

fn tags(kind: ResourceType, stack: &str, address: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .tags(Tag::builder().key(STACK_TAG).value(stack).build())
        .tags(Tag::builder().key(ADDRESS_TAG).value(address).build())
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refreshing_many_vpn_connections_costs_one_describe() {
    let moto = Moto::start().unwrap_or_else(|e| panic!("the local AWS cloud needs moto: {e}"));
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Instant;
    let sim = SimServer::start(config, 0).expect("the sim starts");
    sim.sim.aws.set_moto(&moto.url);
    let ec2 = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .http_client(xcsp_crypto::aws_http_client())
            .region(aws_sdk_ec2::config::Region::new(REGION))
            .endpoint_url(&sim.base_url)
            .credentials_provider(aws_sdk_ec2::config::Credentials::new("AKID", "s", None, None, "test"))
            .build(),
    );
    let mut config = AwsConfig::new(REGION);
    config.endpoint_url = Some(sim.base_url.clone());
    config.static_credentials = Some(("AKID".into(), "s".into()));
    config.poll_interval = Duration::from_millis(50);
    let aws = AwsProvider::new(config).await;

    let mut made = 0usize;
    let mut first_id = String::new();
    for n in [4usize, 40, 400] {
        let stack = "scale";
        // One gateway and customer gateway per 4 connections' worth of tunnels is enough here.
        while made < n {
            let vgw = ec2
                .create_vpn_gateway()
                .r#type(GatewayType::Ipsec1)
                .tag_specifications(tags(ResourceType::VpnGateway, stack, &format!("aws_vpn_gateway.g{made}")))
                .send()
                .await
                .unwrap();
            let vgw = vgw.vpn_gateway().unwrap().vpn_gateway_id().unwrap().to_string();
            let cgw = ec2
                .create_customer_gateway()
                .r#type(GatewayType::Ipsec1)
                .ip_address(format!("198.51.{}.{}", made / 200, made % 200 + 1))
                .bgp_asn(65010)
                .send()
                .await
                .unwrap();
            let cgw = cgw.customer_gateway().unwrap().customer_gateway_id().unwrap().to_string();
            let c = ec2
                .create_vpn_connection()
                .r#type("ipsec.1")
                .customer_gateway_id(&cgw)
                .vpn_gateway_id(&vgw)
                .tag_specifications(tags(
                    ResourceType::VpnConnection,
                    stack,
                    &format!("aws_vpn_connection.link[{made}]"),
                ))
                .send()
                .await
                .unwrap();
            if made == 0 {
                first_id = c.vpn_connection().unwrap().vpn_connection_id().unwrap().to_string();
            }
            made += 1;
        }
        sim.sim.aws.reset_counts();
        let seen = aws.refresh(stack, T::AwsVpnConnection).await.unwrap();
        let calls = sim.sim.aws.counts();
        assert_eq!(seen.len(), n);
        assert_eq!(calls.get("DescribeVpnConnections"), Some(&1), "{calls:?}");
        assert_eq!(calls.values().sum::<u64>(), 1, "{calls:?}");
        eprintln!("refresh of {n} VPN connections: {} EC2 call(s) {calls:?}", calls.values().sum::<u64>());
    }

    // Deleted behind xcsp's back: gone from the next refresh.
    ec2.delete_vpn_connection().vpn_connection_id(&first_id).send().await.unwrap();
    let seen = aws.refresh("scale", T::AwsVpnConnection).await.unwrap();
    assert_eq!(seen.len(), 399);
    assert!(!seen.iter().any(|o| o.id == first_id));
    drop(moto);
}
