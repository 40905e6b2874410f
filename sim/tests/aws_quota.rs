//! The account's security-group rule quota: moto enforces AWS's default of 60 inbound rules per
//! group, and a sim started for an account with a raised quota takes more (the benchmark of a
//! ten-link stack needs 80 on the cluster's groups).

use aws_sdk_ec2::types::{IpPermission, IpRange};
use xcsp_sim::aws::Moto;

async fn authorize_until_refused(moto: &Moto, rules: u16) -> Result<u16, String> {
    let ec2 = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .http_client(xcsp_crypto::aws_http_client())
            .region(aws_sdk_ec2::config::Region::new("us-gov-west-1"))
            .endpoint_url(&moto.url)
            .credentials_provider(aws_sdk_ec2::config::Credentials::new("AKID", "s", None, None, "test"))
            .build(),
    );
    let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.unwrap();
    let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
    let sg = ec2.create_security_group().group_name("nodes").description("nodes").vpc_id(vpc).send().await.unwrap();
    let sg = sg.group_id().unwrap().to_string();
    for port in 0..rules {
        let rule = IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(i32::from(1000 + port))
            .to_port(i32::from(1000 + port))
            .ip_ranges(IpRange::builder().cidr_ip("10.200.0.0/16").build())
            .build();
        if let Err(e) = ec2.authorize_security_group_ingress().group_id(&sg).ip_permissions(rule).send().await {
            let e = e.into_service_error();
            return Err(format!(
                "rule {}: {}",
                port + 1,
                aws_sdk_ec2::error::ProvideErrorMetadata::code(&e).unwrap_or("?")
            ));
        }
    }
    Ok(rules)
}

#[tokio::test]
async fn sixty_rules_per_group_by_default_more_with_a_raised_quota() {
    let default = Moto::start().unwrap_or_else(|e| panic!("needs moto (scripts/moto-setup): {e}"));
    assert_eq!(
        authorize_until_refused(&default, 80).await,
        Err("rule 61: RulesPerSecurityGroupLimitExceeded".to_string())
    );
    let raised = Moto::start_with(100).unwrap_or_else(|e| panic!("needs moto (scripts/moto-setup): {e}"));
    assert_eq!(authorize_until_refused(&raised, 80).await, Ok(80));
    assert_eq!(
        authorize_until_refused(&raised, 101).await,
        Err("rule 101: RulesPerSecurityGroupLimitExceeded".to_string())
    );
}
