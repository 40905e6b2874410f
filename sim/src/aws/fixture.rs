//! What an OpenShift IPI install on AWS leaves behind, made in moto so the examples run against
//! something realistic: a VPC tagged `kubernetes.io/cluster/<infra>=owned`, a private and a
//! public subnet per availability zone (with CAPA's role tags), their route tables, and the node and control-plane
//! security groups, all carrying the cluster tag.

use serde::Serialize;

/// The ids the fixture made.
#[derive(Debug, Clone, Serialize)]
pub struct Cluster {
    pub infra: String,
    pub region: String,
    pub vpc_id: String,
    pub subnet_ids: Vec<String>,
    pub route_table_ids: Vec<String>,
    pub security_group_ids: Vec<String>,
}

struct Ec2<'a> {
    http: reqwest::Client,
    url: &'a str,
    region: &'a str,
}

impl Ec2<'_> {
    /// One call, signed only as far as moto reads it (the region comes from the credential scope).
    async fn call(&self, params: &[(&str, &str)]) -> Result<String, String> {
        let mut form: Vec<(&str, &str)> = params.to_vec();
        form.push(("Version", "2016-11-15"));
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=xcsp-fixture/20260101/{}/ec2/aws4_request, SignedHeaders=host, Signature=0",
            self.region
        );
        let r = self
            .http
            .post(format!("{}/", self.url))
            .header("Authorization", auth)
            .header("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
            .body(serde_urlencoded::to_string(&form).map_err(|e| e.to_string())?)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status();
        let text = r.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{}: HTTP {status}: {text}", params[0].1));
        }
        Ok(text)
    }
}

fn first(text: &str, tag: &str) -> Result<String, String> {
    let open = format!("<{tag}>");
    let start = text.find(&open).ok_or_else(|| format!("no <{tag}> in {text}"))? + open.len();
    let end = text[start..].find('<').ok_or("unterminated")? + start;
    Ok(text[start..end].to_string())
}

/// Makes the cluster's network in moto (at `moto_url`) in `region`.
pub async fn cluster(moto_url: &str, infra: &str, region: &str) -> Result<Cluster, String> {
    let ec2 = Ec2 { http: reqwest::Client::new(), url: moto_url, region };
    let cluster_tag = format!("kubernetes.io/cluster/{infra}");
    let tagged = |rtype: &'static str, name: String| -> Vec<(String, String)> {
        vec![
            ("TagSpecification.1.ResourceType".into(), rtype.to_string()),
            ("TagSpecification.1.Tag.1.Key".into(), cluster_tag.clone()),
            ("TagSpecification.1.Tag.1.Value".into(), "owned".into()),
            ("TagSpecification.1.Tag.2.Key".into(), "Name".into()),
            ("TagSpecification.1.Tag.2.Value".into(), name),
        ]
    };
    let call = |action: &'static str, mut extra: Vec<(String, String)>, tags: Vec<(String, String)>| {
        extra.extend(tags);
        let ec2 = &ec2;
        async move {
            let mut params: Vec<(&str, &str)> = vec![("Action", action)];
            params.extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            ec2.call(&params).await
        }
    };
    let vpc =
        call("CreateVpc", vec![("CidrBlock".into(), "10.0.0.0/16".into())], tagged("vpc", format!("{infra}-vpc")))
            .await?;
    let vpc_id = first(&vpc, "vpcId")?;
    let mut out = Cluster {
        infra: infra.into(),
        region: region.into(),
        vpc_id: vpc_id.clone(),
        subnet_ids: vec![],
        route_table_ids: vec![],
        security_group_ids: vec![],
    };
    for (i, zone) in ["a", "b", "c"].iter().enumerate() {
        let az = format!("{region}{zone}");
        for (kind, cidr) in
            [("private", format!("10.0.{}.0/19", i * 32)), ("public", format!("10.0.{}.0/20", 96 + i * 16))]
        {
            let name = format!("{infra}-subnet-{kind}-{az}");
            let subnet = call(
                "CreateSubnet",
                vec![
                    ("VpcId".into(), vpc_id.clone()),
                    ("CidrBlock".into(), cidr),
                    ("AvailabilityZone".into(), az.clone()),
                ],
                {
                    // CAPA's subnet roles (openshift/installer, vendored cluster-api-provider-aws
                    // `pkg/cloud/services/network/subnets.go`): internal load balancers go in the
                    // private subnets, public ones in the public subnets.
                    let role = if kind == "private" { "internal-elb" } else { "elb" };
                    let mut tags = tagged("subnet", name.clone());
                    tags.push(("TagSpecification.1.Tag.3.Key".into(), format!("kubernetes.io/role/{role}")));
                    tags.push(("TagSpecification.1.Tag.3.Value".into(), "1".into()));
                    tags
                },
            )
            .await?;
            let subnet_id = first(&subnet, "subnetId")?;
            out.subnet_ids.push(subnet_id.clone());
            // One route table per private subnet, one shared by the public ones (IPI's layout).
            if kind == "private" || i == 0 {
                let rt = call(
                    "CreateRouteTable",
                    vec![("VpcId".into(), vpc_id.clone())],
                    tagged("route-table", format!("{infra}-{kind}-{az}")),
                )
                .await?;
                let rt_id = first(&rt, "routeTableId")?;
                call(
                    "AssociateRouteTable",
                    vec![("RouteTableId".into(), rt_id.clone()), ("SubnetId".into(), subnet_id)],
                    vec![],
                )
                .await?;
                out.route_table_ids.push(rt_id);
            }
        }
    }
    for (role, description) in [("node", "Cluster nodes"), ("controlplane", "Control plane")] {
        let sg = call(
            "CreateSecurityGroup",
            vec![
                ("GroupName".into(), format!("{infra}-{role}")),
                ("GroupDescription".into(), description.into()),
                ("VpcId".into(), vpc_id.clone()),
            ],
            tagged("security-group", format!("{infra}-{role}")),
        )
        .await?;
        out.security_group_ids.push(first(&sg, "groupId")?);
    }
    Ok(out)
}
