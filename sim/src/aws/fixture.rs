//! What an OpenShift IPI install on AWS leaves behind, made in moto so the examples run against
//! something realistic: a VPC tagged `kubernetes.io/cluster/<infra>=owned`, a private and a
//! public subnet per availability zone (with CAPA's role tags) and their route tables, all
//! carrying the cluster tag, and CAPA's four security groups with their rules
//! ([`security_groups`]).

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
    /// The group of the internal API load balancer (`<infra>-int`, which `api-int.<domain>` names).
    pub api_lb_security_group: String,
    /// The group every worker node of the cluster carries (CAPA's `node` role).
    pub node_security_group: String,
    /// The private subnets (where the internal API load balancer has a node in each zone) and
    /// their route tables: (subnet, CIDR, route table).
    pub private_subnets: Vec<(String, String, String)>,
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
        let auth = authorization(self.region);
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

/// The install's machine network (`networking.machineNetwork[0]`), which the fixture's VPC is.
pub const MACHINE_NETWORK: &str = "10.0.0.0/16";

/// Where an inbound rule admits traffic from.
pub enum Source {
    Cidr(&'static str),
    /// The groups of these CAPA roles.
    Roles(&'static [&'static str]),
}

/// One inbound rule of a cluster group.
pub struct Rule {
    pub protocol: &'static str,
    pub from: i32,
    pub to: i32,
    pub source: Source,
    pub what: &'static str,
}

const fn rule(protocol: &'static str, from: i32, to: i32, source: Source, what: &'static str) -> Rule {
    Rule { protocol, from, to, source, what }
}

/// The security groups an OpenShift install on AWS (4.16 and later, through CAPA) leaves, by
/// role, with the inbound rules that matter to a machine joining from elsewhere. Groups are
/// named `<infra>-<role>` and tagged `sigs.k8s.io/cluster-api-provider-aws/cluster/<infra>` and
/// `sigs.k8s.io/cluster-api-provider-aws/role`; only the `lb` group (which every machine carries)
/// keeps the cloud provider's tag `kubernetes.io/cluster/<infra>` (CAPA
/// `pkg/cloud/services/securitygroup/securitygroups.go` `getSecurityGroupTagParams`, `getName`;
/// `GetCoreSecurityGroups` in `pkg/cloud/services/ec2/instances.go` for which machine carries
/// which). Rules (`securitygroups.go` `getSecurityGroupIngressRules`, and openshift/installer
/// `pkg/asset/manifests/aws/cluster.go` for the control plane's extra rules and the load
/// balancers): the internal API load balancer `<infra>-int` carries `apiserver-lb`, which admits
/// 6443 from the VPC and from anywhere (the external or private API's rule), and the
/// machine-config server's 22623 only from the machine network; behind it, the control plane
/// admits both from the load balancer's, its own and the nodes' groups, and `lb` both from the
/// VPC (the load balancer's own addresses, client addresses not preserved). Between the nodes
/// (the `controlplane` and `node` groups, from each other), the CNI's rules the installer gives
/// CAPA (`CNIIngressRules`): ICMP, Geneve, VXLAN, IKE and its NAT traversal, ESP (protocol 50),
/// OVN's databases and the host-service and NodePort ranges; none admits the VNet.
pub fn security_groups(machine_network: &'static str) -> [(&'static str, Vec<Rule>); 4] {
    use Source::{Cidr, Roles};
    let nodes: &'static [&'static str] = &["controlplane", "node"];
    let cni = || {
        vec![
            rule("icmp", -1, -1, Roles(nodes), "ICMP"),
            rule("tcp", 22, 22, Roles(nodes), "Port 22 (TCP)"),
            rule("udp", 4789, 4789, Roles(nodes), "Port 4789 (UDP) for VXLAN"),
            rule("udp", 6081, 6081, Roles(nodes), "Port 6081 (UDP) for geneve"),
            rule("udp", 500, 500, Roles(nodes), "Port 500 (UDP) for IKE"),
            rule("udp", 4500, 4500, Roles(nodes), "Port 4500 (UDP) for IKE NAT"),
            rule("50", -1, -1, Roles(nodes), "ESP"),
            rule("tcp", 6441, 6442, Roles(nodes), "Port 6441-6442 (TCP) for ovndb"),
            rule("tcp", 9000, 9999, Roles(nodes), "Port 9000-9999 for node ports (TCP)"),
            rule("udp", 9000, 9999, Roles(nodes), "Port 9000-9999 for node ports (UDP)"),
            rule("tcp", 30000, 32767, Roles(nodes), "Service node ports (TCP)"),
            rule("udp", 30000, 32767, Roles(nodes), "Service node ports (UDP)"),
        ]
    };
    [
        (
            "apiserver-lb",
            vec![
                rule("tcp", 6443, 6443, Cidr(machine_network), "Kubernetes API"),
                rule("tcp", 6443, 6443, Cidr("0.0.0.0/0"), "Kubernetes API Server traffic"),
                rule("tcp", 22623, 22623, Cidr(machine_network), "Machine Config Server internal traffic from cluster"),
            ],
        ),
        (
            "lb",
            vec![
                rule("tcp", 6443, 6443, Cidr(machine_network), "Allow NLB traffic to the control plane instances."),
                rule("tcp", 22623, 22623, Cidr(machine_network), "Allow NLB traffic to the control plane instances."),
            ],
        ),
        (
            "controlplane",
            vec![
                rule("tcp", 6443, 6443, Roles(&["apiserver-lb", "controlplane", "node"]), "Kubernetes API"),
                rule(
                    "tcp",
                    22623,
                    22623,
                    Roles(&["node", "controlplane", "apiserver-lb"]),
                    "MCS traffic from cluster network",
                ),
                rule("tcp", 2379, 2380, Roles(&["controlplane"]), "etcd"),
            ]
            .into_iter()
            .chain(cni())
            .collect(),
        ),
        (
            "node",
            vec![
                rule("tcp", 30000, 32767, Cidr("0.0.0.0/0"), "Node Port Services"),
                rule("tcp", 10250, 10250, Roles(&["controlplane", "node"]), "Kubelet API"),
            ]
            .into_iter()
            .chain(cni())
            .collect(),
        ),
    ]
}

/// The `Authorization` the fixture signs its calls with in `region` (moto reads the region from
/// the credential scope and checks no signature).
pub fn authorization(region: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential=xcsp-fixture/20260101/{region}/ec2/aws4_request, SignedHeaders=host, Signature=0"
    )
}

/// EC2's form parameters that create a resource of `rtype` with `tags` (`TagSpecification.1`).
fn tag_spec(rtype: &str, tags: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = vec![("TagSpecification.1.ResourceType".to_string(), rtype.to_string())];
    for (i, (k, v)) in tags.iter().enumerate() {
        out.push((format!("TagSpecification.1.Tag.{}.Key", i + 1), k.clone()));
        out.push((format!("TagSpecification.1.Tag.{}.Value", i + 1), v.clone()));
    }
    out
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
    let tagged =
        |rtype: &str, name: String| tag_spec(rtype, &[(cluster_tag.clone(), "owned".into()), ("Name".into(), name)]);
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
        api_lb_security_group: String::new(),
        node_security_group: String::new(),
        private_subnets: vec![],
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
                    ("CidrBlock".into(), cidr.clone()),
                    ("AvailabilityZone".into(), az.clone()),
                ],
                {
                    // CAPA's subnet roles (openshift/installer, vendored cluster-api-provider-aws
                    // `pkg/cloud/services/network/subnets.go`): internal load balancers go in the
                    // private subnets, public ones in the public subnets.
                    let role = if kind == "private" { "internal-elb" } else { "elb" };
                    tag_spec(
                        "subnet",
                        &[
                            (cluster_tag.clone(), "owned".into()),
                            ("Name".into(), name.clone()),
                            (format!("kubernetes.io/role/{role}"), "1".into()),
                        ],
                    )
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
                    vec![("RouteTableId".into(), rt_id.clone()), ("SubnetId".into(), subnet_id.clone())],
                    vec![],
                )
                .await?;
                if kind == "private" {
                    out.private_subnets.push((subnet_id, cidr, rt_id.clone()));
                }
                out.route_table_ids.push(rt_id);
            }
        }
    }
    // The security groups CAPA makes for the cluster, then their rules (which name each other).
    let mut ids: Vec<(&str, String)> = Vec::new();
    for (role, _) in security_groups(MACHINE_NETWORK) {
        let mut tags: Vec<(String, String)> = vec![
            ("Name".into(), format!("{infra}-{role}")),
            (format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{infra}"), "owned".into()),
            ("sigs.k8s.io/cluster-api-provider-aws/role".into(), role.into()),
        ];
        if role == "lb" {
            tags.push((cluster_tag.clone(), "owned".into()));
        }
        let sg = call(
            "CreateSecurityGroup",
            vec![
                ("GroupName".into(), format!("{infra}-{role}")),
                ("GroupDescription".into(), format!("Kubernetes cluster {infra}: {role}")),
                ("VpcId".into(), vpc_id.clone()),
            ],
            tag_spec("security-group", &tags),
        )
        .await?;
        ids.push((role, first(&sg, "groupId")?));
    }
    let id_of = |role: &str| ids.iter().find(|(r, _)| *r == role).map(|(_, id)| id.clone()).unwrap_or_default();
    for (role, rules) in security_groups(MACHINE_NETWORK) {
        for rule in rules {
            let mut form = vec![
                ("GroupId".to_string(), id_of(role)),
                ("IpPermissions.1.IpProtocol".to_string(), rule.protocol.to_string()),
                ("IpPermissions.1.FromPort".to_string(), rule.from.to_string()),
                ("IpPermissions.1.ToPort".to_string(), rule.to.to_string()),
            ];
            match rule.source {
                Source::Cidr(cidr) => {
                    form.push(("IpPermissions.1.IpRanges.1.CidrIp".into(), cidr.into()));
                    form.push(("IpPermissions.1.IpRanges.1.Description".into(), rule.what.into()));
                }
                Source::Roles(roles) => {
                    for (j, r) in roles.iter().enumerate() {
                        form.push((format!("IpPermissions.1.Groups.{}.GroupId", j + 1), id_of(r)));
                        form.push((format!("IpPermissions.1.Groups.{}.Description", j + 1), rule.what.into()));
                    }
                }
            }
            call("AuthorizeSecurityGroupIngress", form, vec![]).await?;
        }
    }
    out.api_lb_security_group = id_of("apiserver-lb");
    out.node_security_group = id_of("node");
    out.security_group_ids = ids.into_iter().map(|(_, id)| id).collect();
    Ok(out)
}
