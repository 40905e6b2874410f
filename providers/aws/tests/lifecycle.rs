//! Each AWS resource type through its whole life against moto behind the fidelity layer, with
//! the real aws-sdk-ec2: created with tags, read back by a bulk refresh, updated in place (tags
//! added, changed and removed; a tunnel's pre-shared key rotated; a rule added), replaced (a
//! customer gateway whose address changed: AWS refuses to delete it while a connection uses it,
//! so the connection goes first), and deleted to nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value as Json, json};
use xcsp_aws::{AwsConfig, AwsProvider};
use xcsp_core::provider::{Attributes, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{Address, ResourceType as T, Value};
use xcsp_sim::aws::Moto;
use xcsp_sim::{SimConfig, SimServer};

const REGION: &str = "us-gov-west-1";
const STACK: &str = "life";

struct Quiet;
impl Progress for Quiet {
    fn waiting(&self, _: &Address, _: &str) {}
}

fn attrs(j: Json) -> Attributes {
    match Value::from_json(&j) {
        Value::Map(m) => m,
        other => panic!("attributes must be a map, not {other:?}"),
    }
}

fn tags(address: &str, extra: Json) -> Json {
    let mut t = json!({ "xcsp.io/stack": STACK, "xcsp.io/address": address });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        t[k] = v;
    }
    t
}

struct Cloud {
    aws: AwsProvider,
    _sim: SimServer,
    _moto: Moto,
    vpc: String,
    route_tables: Vec<String>,
    groups: Vec<String>,
}

impl Cloud {
    async fn start() -> Cloud {
        let moto = Moto::start().unwrap_or_else(|e| panic!("the local AWS cloud needs moto: {e}"));
        let mut config = SimConfig::default();
        config.latency.profile = xcsp_sim::Profile::Instant;
        let sim = SimServer::start(config, 0).expect("the sim starts");
        sim.sim.aws.set_moto(&moto.url);
        let cluster = xcsp_sim::aws::fixture::cluster(&moto.url, "life-x1", REGION).await.expect("the IPI fixture");
        let mut config = AwsConfig::new(REGION);
        config.endpoint_url = Some(sim.base_url.clone());
        config.static_credentials = Some(("AKID".into(), "s".into()));
        config.poll_interval = Duration::from_millis(50);
        Cloud {
            aws: AwsProvider::new(config).await,
            vpc: cluster.vpc_id,
            route_tables: cluster.route_table_ids,
            groups: cluster.security_group_ids,
            _sim: sim,
            _moto: moto,
        }
    }

    async fn write(&self, address: &str, id: Option<&str>, a: Json) -> Result<Observed, ProviderError> {
        let address: Address = address.parse().unwrap();
        let a = attrs(a);
        let r = Request { stack: STACK, address: &address, id, attributes: &a };
        self.aws.write(r, &Quiet).await
    }

    async fn delete(&self, o: &Observed) -> Result<(), ProviderError> {
        let a = Attributes::new();
        self.aws.delete(Request { stack: STACK, address: &o.address, id: Some(&o.id), attributes: &a }, &Quiet).await
    }

    /// The port ranges of the rules from the Azure side in `group`, as EC2 holds them.
    async fn rules(&self, group: &str) -> Vec<(i64, i64)> {
        let ec2 = aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::Config::builder()
                .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
                .http_client(xcsp_crypto::aws_http_client())
                .region(aws_sdk_ec2::config::Region::new(REGION))
                .endpoint_url(&self._sim.base_url)
                .credentials_provider(aws_sdk_ec2::config::Credentials::new("AKID", "s", None, None, "test"))
                .build(),
        );
        let r = ec2.describe_security_groups().group_ids(group).send().await.expect("DescribeSecurityGroups");
        let mut out: Vec<(i64, i64)> = r.security_groups()[0]
            .ip_permissions()
            .iter()
            .filter(|p| p.ip_ranges().iter().any(|r| r.cidr_ip() == Some("10.200.0.0/16")))
            .map(|p| (p.from_port().unwrap_or_default() as i64, p.to_port().unwrap_or_default() as i64))
            .collect();
        out.sort();
        out
    }

    async fn refresh(&self, rtype: T) -> BTreeMap<String, Observed> {
        let found = self.aws.refresh(STACK, rtype).await.unwrap_or_else(|e| panic!("refresh {rtype}: {e}"));
        found.into_iter().map(|o| (o.address.to_string(), o)).collect()
    }
}

fn tag_json(o: &Observed) -> Json {
    o.attributes.get("tags").map(Value::to_json).unwrap_or_default()
}

fn connection(cgw: &str, vgw: &str, psk1: &str, extra_tags: Json) -> Json {
    json!({
        "customer_gateway": cgw, "vpn_gateway_id": vgw,
        "tunnel1_inside_cidr": "169.254.21.0/30", "tunnel2_inside_cidr": "169.254.22.0/30",
        "tunnel1_psk": { "$sensitive": psk1 }, "tunnel2_psk": { "$sensitive": "Second_key_0002" },
        "ike_versions": ["ikev2"], "phase1_encryption": ["AES256-GCM-16"], "phase1_integrity": ["SHA2-384"],
        "phase1_dh_group": [20], "phase2_encryption": ["AES256-GCM-16"], "phase2_integrity": ["SHA2-384"],
        "phase2_dh_group": [20], "phase1_lifetime_seconds": 28800, "phase2_lifetime_seconds": 3600,
        "tags": tags("aws_vpn_connection.link[0]", extra_tags),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_aws_type_is_created_read_updated_replaced_and_deleted() {
    let c = Cloud::start().await;

    // Create, with a user tag on each taggable type.
    let vgw = c
        .write(
            "aws_vpn_gateway.link",
            None,
            json!({ "amazon_side_asn": 64512, "tags": tags("aws_vpn_gateway.link", json!({"owner": "gpu-team"})) }),
        )
        .await
        .unwrap();
    assert!(vgw.id.starts_with("vgw-"));
    assert_eq!(tag_json(&vgw)["owner"], json!("gpu-team"));
    let att = c
        .write("aws_vpn_gateway_attachment.link", None, json!({ "vpn_gateway_id": vgw.id, "vpc_id": c.vpc }))
        .await
        .unwrap();
    let prop = c
        .write(
            "aws_vpn_gateway_route_propagation.link",
            None,
            json!({ "vpn_gateway_id": vgw.id, "route_table_ids": c.route_tables }),
        )
        .await
        .unwrap();
    let cgw_attrs = |ip: &str| json!({ "ip_address": ip, "bgp_asn": 65010, "tags": tags("aws_customer_gateway.link[0]", json!({"owner": "gpu-team"})) });
    let cgw = c.write("aws_customer_gateway.link[0]", None, cgw_attrs("203.0.113.10")).await.unwrap();
    let conn = c
        .write("aws_vpn_connection.link[0]", None, connection(&cgw.id, &vgw.id, "First_key_0001", json!({})))
        .await
        .unwrap();
    let rule = |ports: &[(i64, i64)]| {
        let rules: Vec<Json> = ports
            .iter()
            .map(|(from, to)| json!({ "protocol": "tcp", "from_port": from, "to_port": to, "cidr": "10.200.0.0/16", "description": "from Azure" }))
            .collect();
        json!({ "security_group_ids": c.groups, "rules": rules })
    };
    let ingress = c.write("aws_security_group_ingress.link", None, rule(&[(6443, 6443)])).await.unwrap();

    // Read back in bulk: one refresh per type finds each, with its tags.
    assert_eq!(tag_json(&c.refresh(T::AwsVpnGateway).await["aws_vpn_gateway.link"])["owner"], json!("gpu-team"));
    assert_eq!(c.refresh(T::AwsVpnGatewayAttachment).await["aws_vpn_gateway_attachment.link"].id, att.id);
    let propagating = &c.refresh(T::AwsRoutePropagation).await["aws_vpn_gateway_route_propagation.link"];
    assert_eq!(
        propagating.attributes["route_table_ids"].to_json().as_array().map(Vec::len),
        Some(c.route_tables.len())
    );
    assert_eq!(prop.id, propagating.id);
    assert_eq!(
        c.refresh(T::AwsCustomerGateway).await["aws_customer_gateway.link[0]"].attributes["ip_address"],
        Value::string("203.0.113.10")
    );
    assert!(c.refresh(T::AwsVpnConnection).await.contains_key("aws_vpn_connection.link[0]"));
    assert!(c.refresh(T::AwsSecurityGroupIngress).await.contains_key("aws_security_group_ingress.link"));

    // Update in place: tags changed, added and removed; the key of tunnel 1 rotated; a rule added.
    let vgw2 = c
        .write("aws_vpn_gateway.link", Some(&vgw.id), json!({ "amazon_side_asn": 64512, "tags": tags("aws_vpn_gateway.link", json!({"owner": "ml-platform", "cost-center": "4711"})) }))
        .await
        .unwrap();
    assert_eq!(vgw2.id, vgw.id);
    let read = tag_json(&c.refresh(T::AwsVpnGateway).await["aws_vpn_gateway.link"]);
    assert_eq!((read["owner"].clone(), read["cost-center"].clone()), (json!("ml-platform"), json!("4711")));
    c.write(
        "aws_vpn_gateway.link",
        Some(&vgw.id),
        json!({ "amazon_side_asn": 64512, "tags": tags("aws_vpn_gateway.link", json!({})) }),
    )
    .await
    .unwrap();
    let read = tag_json(&c.refresh(T::AwsVpnGateway).await["aws_vpn_gateway.link"]);
    assert_eq!(read, tags("aws_vpn_gateway.link", json!({})), "user tags removed, xcsp's kept");

    let rotated = c
        .write(
            "aws_vpn_connection.link[0]",
            Some(&conn.id),
            connection(&cgw.id, &vgw.id, "Rotated_key_0003", json!({"owner": "gpu-team"})),
        )
        .await
        .unwrap();
    assert_eq!(rotated.id, conn.id);
    assert_eq!(rotated.attributes["tunnel1_psk"].unmarked().as_str(), Some("Rotated_key_0003"));
    assert_eq!(rotated.attributes["tunnel2_psk"].unmarked().as_str(), Some("Second_key_0002"));
    assert_eq!(
        tag_json(&c.refresh(T::AwsVpnConnection).await["aws_vpn_connection.link[0]"])["owner"],
        json!("gpu-team")
    );
    c.write("aws_security_group_ingress.link", Some(&ingress.id), rule(&[(6443, 6443), (22623, 22623)])).await.unwrap();
    assert_eq!(c.rules(&c.groups[0]).await, vec![(6443, 6443), (22623, 22623)]);
    c.write("aws_security_group_ingress.link", Some(&ingress.id), rule(&[(22623, 22623)])).await.unwrap();
    assert_eq!(c.rules(&c.groups[0]).await, vec![(22623, 22623)], "a rule dropped from the spec is revoked");

    // Replace the customer gateway (its address is immutable): AWS refuses while the connection
    // uses it; connection first, then the gateway, then both anew.
    match c.delete(&cgw).await {
        Err(ProviderError::InUse { detail, .. }) => assert!(detail.contains("IncorrectState"), "{detail}"),
        other => panic!("deleting a customer gateway in use: {other:?}"),
    }
    c.delete(&rotated).await.unwrap();
    c.delete(&cgw).await.unwrap();
    let cgw2 = c.write("aws_customer_gateway.link[0]", None, cgw_attrs("203.0.113.77")).await.unwrap();
    assert_ne!(cgw2.id, cgw.id);
    let conn2 = c
        .write("aws_vpn_connection.link[0]", None, connection(&cgw2.id, &vgw.id, "Rotated_key_0003", json!({})))
        .await
        .unwrap();
    let cgws = c.refresh(T::AwsCustomerGateway).await;
    assert_eq!(cgws.len(), 1, "the old customer gateway is gone: {cgws:?}");
    assert_eq!(cgws["aws_customer_gateway.link[0]"].attributes["ip_address"], Value::string("203.0.113.77"));

    // Delete, dependents first (the gateway refuses while attached), to nothing.
    match c.delete(&vgw).await {
        Err(ProviderError::InUse { .. }) => {}
        other => panic!("deleting an attached gateway: {other:?}"),
    }
    for o in [&ingress, &conn2, &cgw2, &prop, &att, &vgw] {
        c.delete(o).await.unwrap_or_else(|e| panic!("delete {}: {e}", o.address));
    }
    for t in [
        T::AwsVpnGateway,
        T::AwsVpnGatewayAttachment,
        T::AwsRoutePropagation,
        T::AwsCustomerGateway,
        T::AwsVpnConnection,
        T::AwsSecurityGroupIngress,
    ] {
        assert!(c.refresh(t).await.is_empty(), "{t} left");
    }
}
