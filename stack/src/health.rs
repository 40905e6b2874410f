//! `xcsp status`: each IPsec tunnel as both clouds report it, read out of refreshed state, and per
//! link the seed's conditions. The exit code is for CI: 0 when every tunnel the spec's links
//! have is up on both sides, 2 when one is not (1 stays "the command failed").

use serde::Serialize;
use xcsp_core::{Address, ResourceType, Value};
use xcsp_plans::spec::Driver;
use xcsp_plans::topology;
use xcsp_plans::validate::Model;
use xcsp_state::State;

/// One IPsec tunnel as both clouds see it.
#[derive(Debug, Serialize)]
pub struct Tunnel {
    /// e.g. `aws_vpn_connection.link[0] tunnel 1`.
    pub tunnel: String,
    /// The link (network block) it belongs to.
    pub link: String,
    pub outside_ip: String,
    /// From the AWS VGW telemetry: UP or DOWN.
    pub aws_status: String,
    pub aws_detail: String,
    /// The routes AWS accepted over the tunnel's BGP session (telemetry `acceptedRouteCount`).
    pub aws_accepted_routes: Option<i64>,
    /// When the AWS side last changed state (telemetry `lastStatusChange`).
    pub aws_since: Option<String>,
    pub azure_connection: Option<Address>,
    /// Azure's connectionStatus: Connected, Connecting, NotConnected, Unknown.
    pub azure_status: String,
    /// Bytes through the Azure connection since it was made.
    pub azure_ingress_bytes: Option<i64>,
    pub azure_egress_bytes: Option<i64>,
    /// UP on AWS and Connected on Azure.
    pub up: bool,
}

/// A condition of a link, in the seed's (and Kubernetes') shape.
#[derive(Debug, Serialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// "True", "False" or "Unknown".
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

/// A link, or a workload identity, and its conditions.
#[derive(Debug, Serialize)]
pub struct Named {
    pub name: String,
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Serialize)]
pub struct Health {
    pub tunnels: Vec<Tunnel>,
    /// The pool's Machines and their Nodes, when the cluster could be read.
    pub machines: Vec<xcsp_kube::pool::Machine>,
    /// How many machines the MachineSets state records ask for (as the spec sets their replicas).
    pub machines_wanted: usize,
    pub links: Vec<Named>,
    /// Per workload identity, whether Entra would take CAPZ's token (when the cluster was read).
    pub identities: Vec<Named>,
    /// Per worker pool, its subnet's network security group against the spec.
    pub pools: Vec<Named>,
    /// What the pool does to the cluster's own components (when the cluster was read).
    pub cluster: Vec<Named>,
    /// Each Cluster API provider xcsp installed, and whether its manager is available.
    pub providers: Vec<Named>,
    /// The pool's Nodes that no Machine carries (when the cluster was read).
    pub leftover: Vec<xcsp_kube::pool::Leftover>,
    /// Tunnels up on both sides, of those the spec's IPsec links have.
    pub up: usize,
    pub expected: usize,
}

impl Health {
    pub fn healthy(&self) -> bool {
        self.up >= self.expected
    }

    /// A link's or an identity's condition of `kind` that is False, if one is.
    fn failing(&self, kind: &str) -> Option<&Condition> {
        self.links
            .iter()
            .chain(&self.identities)
            .chain(&self.pools)
            .flat_map(|l| &l.conditions)
            .find(|c| c.kind == kind && c.status == "False")
    }

    /// Every machine the MachineSets ask for exists and is a Node that is Ready (machines that
    /// could not be read are not).
    pub fn pool_ready(&self) -> bool {
        self.machines.len() >= self.machines_wanted
            && self.leftover.is_empty()
            && self.machines.iter().all(|m| m.node.as_ref().is_some_and(|n| n.ready == "True" && !n.uninitialized))
    }
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(Value::Sensitive(_)) => "(sensitive)".into(),
        Some(other) => other.to_json().to_string(),
    }
}

/// Joins each AWS tunnel to the Azure connection whose local network gateway points at its
/// outside address.
fn tunnels(state: &State) -> Vec<Tunnel> {
    let of = |t: ResourceType| state.resources.iter().filter(move |(a, r)| a.rtype == t && r.id.is_some());
    let mut out = Vec::new();
    for (addr, conn) in of(ResourceType::AwsVpnConnection) {
        for t in 1..=topology::TUNNELS_PER_CONNECTION {
            let attr = |what: &str| conn.attributes.get(&format!("tunnel{t}_{what}"));
            let ip = text(attr("address"));
            let lng = of(ResourceType::AzureLocalNetworkGateway)
                .find(|(_, l)| l.attributes.get("gateway_ip_address").and_then(Value::as_str) == Some(ip.as_str()));
            let azure = lng.and_then(|(_, l)| {
                of(ResourceType::AzureVpnConnection)
                    .find(|(_, c)| c.attributes.get("local_network_gateway").and_then(Value::as_str) == l.id.as_deref())
            });
            let azure_attr = |k: &str| azure.and_then(|(_, c)| c.attributes.get(k));
            let (aws_status, azure_status) =
                (text(attr("status")), azure.map_or("-".into(), |_| text(azure_attr("connection_status"))));
            out.push(Tunnel {
                tunnel: format!("{addr} tunnel {t}"),
                link: addr.name.clone(),
                outside_ip: ip,
                up: aws_status == "UP" && azure_status == "Connected",
                aws_status,
                aws_detail: text(attr("status_message")),
                aws_accepted_routes: attr("accepted_routes").and_then(Value::as_i64),
                aws_since: attr("last_status_change").and_then(Value::as_str).map(String::from),
                azure_connection: azure.map(|(a, _)| a.clone()),
                azure_status,
                azure_ingress_bytes: azure_attr("ingress_bytes").and_then(Value::as_i64),
                azure_egress_bytes: azure_attr("egress_bytes").and_then(Value::as_i64),
            });
        }
    }
    out
}

/// The links' tunnels and conditions, from refreshed state.
pub fn health(model: &Model, state: &State) -> Health {
    let tunnels = tunnels(state);
    let ipsec: Vec<&str> =
        model.networks.iter().filter(|n| n.driver.value == Driver::Ipsec).map(|n| n.name.value.as_str()).collect();
    let links = ipsec
        .iter()
        .map(|name| {
            let mine: Vec<&Tunnel> = tunnels.iter().filter(|t| t.link == *name).collect();
            let up = mine.iter().filter(|t| t.up).count();
            let established = match (mine.len(), up) {
                (0, _) => Condition {
                    kind: "TunnelEstablished",
                    status: "False",
                    reason: "NotCreated".into(),
                    message: "no VPN connection is recorded: run `xcsp apply`".into(),
                },
                (n, up) if up == n && n == topology::TUNNELS => Condition {
                    kind: "TunnelEstablished",
                    status: "True",
                    reason: "AllTunnelsUp".into(),
                    message: format!("{up} of {n} tunnels up on both sides"),
                },
                (n, up) => {
                    let down: Vec<&str> = mine.iter().filter(|t| !t.up).map(|t| t.tunnel.as_str()).collect();
                    Condition {
                        kind: "TunnelEstablished",
                        status: "False",
                        reason: if up == 0 { "AllTunnelsDown".into() } else { "TunnelsDown".into() },
                        message: format!(
                            "{up} of {} tunnels up on both sides; down: {}",
                            n.max(topology::TUNNELS),
                            down.join(", ")
                        ),
                    }
                }
            };
            // Round trip and loss are measured inside the tunnels, which neither cloud's API
            // reports: a deployment measures them from a node on each side (ICMP or TCP probes
            // over the link, as the seed's network controller does).
            let latency = Condition {
                kind: "LatencyAcceptable",
                status: "Unknown",
                reason: "NotMeasured".into(),
                message: "neither cloud's API reports round trip or loss inside the tunnels; xcsp does not probe yet"
                    .into(),
            };
            Named {
                name: name.to_string(),
                conditions: vec![established, latency, dns(state, name), rules(model, state, name)],
            }
        })
        .collect();
    let expected = ipsec.len() * topology::TUNNELS;
    let up = tunnels.iter().filter(|t| t.up && ipsec.contains(&t.link.as_str())).count();
    Health {
        tunnels,
        links,
        identities: Vec::new(),
        pools: Vec::new(),
        cluster: Vec::new(),
        providers: providers(state),
        up,
        expected,
        machines: Vec::new(),
        machines_wanted: 0,
        leftover: Vec::new(),
    }
}

/// `TokenExchangeAccepted`, per federated credential refresh read from Azure: would Entra take
/// the token CAPZ presents, as the cluster says it (CAPZ's Deployment: its service account and
/// projected token's audience; `Authentication`: the issuer)? CAPZ itself reports a refused
/// exchange only in its log: the error of `InitMachineCache` is returned to its controller
/// without a condition or an event (cluster-api-provider-azure
/// `controllers/azuremachine_controller.go` `reconcileNormal`), so the Machine just waits.
pub fn identities(state: &State, survey: &xcsp_kube::Survey) -> Vec<Named> {
    state
        .resources
        .iter()
        .filter(|(a, r)| a.rtype == ResourceType::AzureFederatedCredential && r.id.is_some())
        .map(|(a, r)| {
            let read = xcsp_core::attrs::Reader::new(a, &r.attributes);
            let (issuer, subject) = (text(r.attributes.get("issuer")), text(r.attributes.get("subject")));
            let refusals = survey.exchange_refusals(&issuer, &subject, &read.strings("audiences"));
            let condition = if survey.capz.is_none() {
                Condition {
                    kind: "TokenExchangeAccepted",
                    status: "Unknown",
                    reason: "NoCapz".into(),
                    message: format!(
                        "OpenShift's CAPZ does not run in the cluster (no Deployment {}/{}): nothing presents a token",
                        xcsp_kube::survey::OPENSHIFT_CAPI_NAMESPACE,
                        xcsp_kube::survey::CAPZ_DEPLOYMENT
                    ),
                }
            } else if let Some(first) = refusals.first() {
                let mut reason = first.field.to_string();
                reason[..1].make_ascii_uppercase();
                Condition {
                    kind: "TokenExchangeAccepted",
                    status: "False",
                    reason: format!("{reason}Mismatch"),
                    message: format!(
                        "its federated credential {}",
                        refusals.iter().map(|r| r.describe(survey)).collect::<Vec<_>>().join("; it ")
                    ),
                }
            } else {
                Condition {
                    kind: "TokenExchangeAccepted",
                    status: "True",
                    reason: "CredentialMatchesToken".into(),
                    message: format!(
                        "the federated credential trusts `{subject}` from `{issuer}`, as CAPZ's token says"
                    ),
                }
            };
            Named { name: a.name.clone(), conditions: vec![condition] }
        })
        .collect()
}

/// `ManagerAvailable`, per Cluster API provider xcsp installed (`k8s_cluster_api_provider`): its
/// manager's Deployment is available, as refresh read it; else the Deployment's own reason (the
/// replica-set controller's `FailedCreate` with an admission refusal, the availability condition's
/// message), which `xcsp apply` does not cure by itself when the cluster refuses the pod. Either
/// way the message says how many times the manager's containers restarted and its last error, as
/// its Pods say (refresh's `restarts` and `last_error`): a manager that crashes now and then is
/// available between crashes.
pub fn providers(state: &State) -> Vec<Named> {
    state
        .resources
        .iter()
        .filter(|(a, r)| a.rtype == ResourceType::K8sClusterApiProvider && r.id.is_some())
        .map(|(a, r)| {
            let id = r.id.clone().unwrap_or_default();
            let available = r.attributes.get("available") == Some(&Value::Bool(true));
            let restarts = r.attributes.get("restarts").and_then(Value::as_i64).unwrap_or(0);
            let pods = match (restarts, r.attributes.get("last_error").and_then(Value::as_str)) {
                (0, None) => String::new(),
                (n, None) => format!("; its containers restarted {n} times"),
                (n, Some(e)) => format!("; its containers restarted {n} times, last error: {e}"),
            };
            let condition = if available {
                Condition {
                    kind: "ManagerAvailable",
                    status: "True",
                    reason: "MinimumReplicasAvailable".into(),
                    message: format!("Deployment {id} is available ({}){pods}", text(r.attributes.get("version"))),
                }
            } else {
                let why = r.attributes.get("condition").and_then(Value::as_str).unwrap_or("not found");
                Condition {
                    kind: "ManagerAvailable",
                    status: "False",
                    reason: "ManagerUnavailable".into(),
                    message: format!(
                        "Deployment {id} is not available: {why}{pods}; `xcsp plan` shows it, `xcsp apply` applies it again"
                    ),
                }
            };
            Named { name: a.name.clone(), conditions: vec![condition] }
        })
        .collect()
}

/// `NetworkSecurityGroupInPlace`, per pool: the rules of the network security group on its
/// subnet, as refresh read them, are the spec's. The VMs' traffic to the cluster leaves through
/// it, and a rule added by hand (an outbound Deny) keeps machines from reaching the
/// machine-config server and the API; plan shows the difference and apply restores the rules.
pub fn pools(graph: &xcsp_plans::ResourceGraph, state: &State) -> Vec<Named> {
    graph
        .nodes()
        .filter(|n| n.address.rtype == ResourceType::AzureNetworkSecurityGroup)
        .map(|n| {
            let wanted = n.attributes.get("rules");
            let condition = match state.resources.get(&n.address).filter(|r| r.id.is_some()) {
                None => Condition {
                    kind: "NetworkSecurityGroupInPlace",
                    status: "False",
                    reason: "NotCreated".into(),
                    message: format!("{} is not recorded: run `xcsp apply`", n.address),
                },
                Some(r) if r.attributes.get("rules") == wanted => Condition {
                    kind: "NetworkSecurityGroupInPlace",
                    status: "True",
                    reason: "RulesAsSpecified".into(),
                    message: format!("{} has the spec's rules", n.address),
                },
                Some(r) => {
                    let count = |v: Option<&Value>| match v {
                        Some(Value::List(l)) => l.len(),
                        _ => 0,
                    };
                    Condition {
                        kind: "NetworkSecurityGroupInPlace",
                        status: "False",
                        reason: "RulesDiffer".into(),
                        message: format!(
                            "{} has {} rules, the spec {}: `xcsp plan` shows how they differ, `xcsp apply` restores them",
                            n.address,
                            count(r.attributes.get("rules")),
                            count(wanted)
                        ),
                    }
                }
            };
            Named { name: n.address.name.clone(), conditions: vec![condition] }
        })
        .collect()
}

/// `RoleAssignmentsInPlace`, per workload identity: the role assignments xcsp makes for it (its
/// role on the resource group, and the VM-SKU list at the subscription, which CAPZ calls for every
/// machine) are there, as refresh read them by id. Without one, CAPZ's calls at that scope are
/// refused (`AuthorizationFailed`), which CAPZ reports only in its log, and no VM is made.
pub fn roles(model: &Model, state: &State) -> Vec<Named> {
    model
        .identities
        .iter()
        .map(|id| {
            let name = &id.name.value;
            let missing: Vec<String> = [name.clone(), format!("{name}-skus")]
                .into_iter()
                .map(|n| Address::new(ResourceType::AzureRoleAssignment, &n))
                .filter(|a| state.resources.get(a).is_none_or(|r| r.id.is_none()))
                .map(|a| a.to_string())
                .collect();
            let condition = if missing.is_empty() {
                Condition {
                    kind: "RoleAssignmentsInPlace",
                    status: "True",
                    reason: "Assigned".into(),
                    message: "its role on the resource group and the VM-SKU list at the subscription are assigned".into(),
                }
            } else {
                Condition {
                    kind: "RoleAssignmentsInPlace",
                    status: "False",
                    reason: "AssignmentMissing".into(),
                    message: format!(
                        "{} not there: CAPZ's Azure calls at its scope are refused (AuthorizationFailed); `xcsp apply` assigns it again",
                        missing.join(", ")
                    ),
                }
            };
            Named { name: name.clone(), conditions: vec![condition] }
        })
        .collect()
}

/// The link's resource of `rtype` that state records as made.
fn recorded<'a>(
    state: &'a State,
    rtype: ResourceType,
    link: &str,
) -> Option<(&'a Address, &'a xcsp_state::ResourceState)> {
    state.resources.iter().find(|(a, r)| a.rtype == rtype && a.name == link && r.id.is_some())
}

/// `DnsOverLink`: the VNet's DNS servers are the addresses of the link's Route 53 Resolver inbound
/// endpoint and the endpoint is `OPERATIONAL`, as refresh read them (whether the tunnels carry
/// the queries is `TunnelEstablished`; the endpoint's security group is drift plan shows).
fn dns(state: &State, link: &str) -> Condition {
    let strings = |(a, r): (&Address, &xcsp_state::ResourceState), k: &str| -> Vec<String> {
        let mut v = xcsp_core::attrs::Reader::new(a, &r.attributes).strings(k);
        v.sort();
        v
    };
    let no = |reason: &str, message: String| Condition {
        kind: "DnsOverLink",
        status: "False",
        reason: reason.into(),
        message,
    };
    let Some(endpoint) = recorded(state, ResourceType::AwsResolverEndpoint, link) else {
        return no("NotCreated", "no Route 53 Resolver endpoint is recorded: run `xcsp apply`".into());
    };
    let status = text(endpoint.1.attributes.get("status"));
    if status != "OPERATIONAL" {
        let id = endpoint.1.id.as_deref().unwrap_or_default();
        return no("EndpointNotOperational", format!("the Route 53 Resolver endpoint {id} is {status}"));
    }
    let ips = strings(endpoint, "ip_addresses");
    let servers =
        recorded(state, ResourceType::AzureVnetDnsServers, link).map(|r| strings(r, "dns_servers")).unwrap_or_default();
    if servers != ips {
        return no(
            "ServersNotSet",
            format!(
                "the VNet's DNS servers are [{}], the endpoint's addresses [{}]: the VMs cannot resolve the cluster's names",
                servers.join(", "),
                ips.join(", ")
            ),
        );
    }
    Condition {
        kind: "DnsOverLink",
        status: "True",
        reason: "ServersAreTheEndpoint".into(),
        message: format!("the VNet's DNS servers are the OPERATIONAL endpoint's addresses ({})", ips.join(", ")),
    }
}

/// `SecurityGroupRulesInPlace`: every port range the link opens is in every security group of
/// the cluster, as refresh read them member by member (`rules` holds those present in all). The
/// ranges are the spec's (with OVN IPsec, IKE and ESP too); a missing one is named, since a rule
/// gone leaves the Nodes Ready while what it carried is dropped (ESP: every pod packet between a
/// pool node and a cluster node).
fn rules(model: &Model, state: &State, link: &str) -> Condition {
    let wanted = topology::aws_ingress_ports(model.cluster.ovn_ipsec.value);
    let Some((_, r)) = recorded(state, ResourceType::AwsSecurityGroupIngress, link) else {
        return Condition {
            kind: "SecurityGroupRulesInPlace",
            status: "False",
            reason: "NotCreated".into(),
            message: "no security-group rules are recorded for the link: run `xcsp apply`".into(),
        };
    };
    let found: Vec<(String, i64, i64)> = match r.attributes.get("rules") {
        Some(Value::List(l)) => l
            .iter()
            .filter_map(Value::as_map)
            .map(|m| {
                let n = |k: &str| m.get(k).and_then(Value::as_i64).unwrap_or_default();
                (
                    m.get("protocol").and_then(Value::as_str).unwrap_or_default().to_string(),
                    n("from_port"),
                    n("to_port"),
                )
            })
            .collect(),
        _ => vec![],
    };
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(proto, from, to, _)| {
            !found
                .iter()
                .any(|f| f.0 == topology::aws_protocol(proto) && f.1 == i64::from(*from) && f.2 == i64::from(*to))
        })
        .map(|(proto, from, to, what)| match *proto {
            "esp" => format!("{what}: protocol 50"),
            "icmp" => format!("{what}: ICMP type {from} code {to}"),
            _ if from == to => format!("{what}: {} {from}", proto.to_uppercase()),
            _ => format!("{what}: {} {from}-{to}", proto.to_uppercase()),
        })
        .collect();
    if missing.is_empty() {
        return Condition {
            kind: "SecurityGroupRulesInPlace",
            status: "True",
            reason: "AllRules".into(),
            message: format!("the link's {} port ranges are open in every security group of the cluster", wanted.len()),
        };
    }
    Condition {
        kind: "SecurityGroupRulesInPlace",
        status: "False",
        reason: "RulesMissing".into(),
        message: format!(
            "not open in every security group of the cluster: {}; `xcsp plan` shows them, `xcsp apply` adds them",
            missing.join(", ")
        ),
    }
}

/// `RideOutLinkOutage`: whether the Pods on the pool's Nodes stay there through a link outage of
/// the pool's `outage_tolerance_seconds`. A Pod that tolerates an unreachable Node only for the API
/// server's default 300 s is evicted after a five-minute outage while its VM runs on; the pool's
/// RuntimeClass gives it the pool's tolerance.
pub fn outage(model: &Model, exposed: &[(String, i64)]) -> Named {
    let classes: Vec<String> = model
        .pools
        .iter()
        .map(|p| {
            format!(
                "{} ({} s)",
                xcsp_plans::spec::pool_role(&model.stack, &model.cluster, &p.name.value),
                p.outage_tolerance_seconds.value
            )
        })
        .collect();
    let condition = if exposed.is_empty() {
        Condition {
            kind: "RideOutLinkOutage",
            status: "True",
            reason: "PoolTolerations".into(),
            message:
                "every Pod on the pool's Nodes tolerates an unreachable Node as long as the pool's RuntimeClass does"
                    .into(),
        }
    } else {
        let shown: Vec<String> = exposed
            .iter()
            .take(5)
            .map(|(p, s)| if *s == 0 { format!("{p} (none)") } else { format!("{p} ({s} s)") })
            .collect();
        Condition {
            kind: "RideOutLinkOutage",
            status: "False",
            reason: "ShortTolerations".into(),
            message: format!(
                "{} Pods on the pool's Nodes are evicted by a link outage longer than their toleration of an unreachable Node: {}{}; set runtimeClassName to the pool's RuntimeClass, {}",
                exposed.len(),
                shown.join(", "),
                if exposed.len() > 5 { ", ..." } else { "" },
                classes.join(", ")
            ),
        }
    };
    Named { name: "Pods on the pool's Nodes".into(), conditions: vec![condition] }
}

/// Each Node of the pool that no Machine carries, with its remedy: nothing on an AWS cluster
/// deletes it (Cluster API deletes only the Node of a Machine it deletes), and it holds the
/// pool's MachineConfigPool while it is not Ready.
pub fn leftover(nodes: &[xcsp_kube::pool::Leftover]) -> Vec<Named> {
    nodes
        .iter()
        .map(|n| Named {
            name: format!("Node {}", n.name),
            conditions: vec![Condition {
                kind: "MachineOwned",
                status: "False",
                reason: "NoMachine".into(),
                message: format!(
                    "it carries the pool's label, but no Machine of the pool's MachineSets has its provider ID ({}); Ready is {}. Nothing on an AWS cluster deletes it (Cluster API deletes the Node of a Machine it deletes, AWS's cloud controller cannot read an azure:// ID){}. If its VM is gone, `oc delete node {}`",
                    n.provider_id.as_deref().unwrap_or("none"),
                    n.ready,
                    if n.ready == "True" {
                        ""
                    } else {
                        ", and while it is not Ready the machine-config operator counts it against the pool's maxUnavailable, so no MachineConfig reaches the pool's other Nodes"
                    },
                    n.name
                ),
            }],
        })
        .collect()
}

/// The EBS CSI driver's node Pods on the pool's Nodes and the `storage` ClusterOperator: a side
/// effect preflight named, shown with what it is doing now. It does not make the pool unhealthy.
pub fn ebs_csi(e: &xcsp_kube::pool::EbsCsi) -> Vec<Named> {
    let mut out = Vec::new();
    if e.on_pool > 0 {
        let failing = e.on_pool_not_ready > 0;
        out.push(Named {
            name: format!("{}/{}", xcsp_kube::survey::EBS_CSI_NAMESPACE, xcsp_kube::survey::EBS_CSI_NODE),
            conditions: vec![Condition {
                kind: "OnPoolNodes",
                status: if failing { "False" } else { "True" },
                reason: if failing { "NoEc2Metadata".into() } else { "Ready".into() },
                message: format!(
                    "{} of its {} Pods on the pool's Nodes not Ready{}",
                    e.on_pool_not_ready,
                    e.on_pool,
                    if failing {
                        ": on an Azure VM the EBS CSI driver finds no EC2 instance metadata and exits; while they are unavailable a rollout of the driver (an upgrade) replaces no Pod on the cluster's AWS nodes either (its maxUnavailable is 10%; preflight names it)"
                    } else {
                        ""
                    }
                ),
            }],
        });
    }
    if let Some((status, reason, message)) = &e.storage_progressing {
        out.push(Named {
            name: "ClusterOperator storage".into(),
            conditions: vec![Condition {
                kind: "Progressing",
                status: match status.as_str() {
                    "True" => "True",
                    "False" => "False",
                    _ => "Unknown",
                },
                reason: reason.clone(),
                message: message.clone(),
            }],
        });
    }
    out
}

/// What keeps a Machine from being a Ready node, as far as xcsp can tell.
pub fn cause(h: &Health, m: &xcsp_kube::pool::Machine) -> Option<String> {
    let dns = h.failing("DnsOverLink");
    if let Some(n) = &m.node {
        if n.ready == "True" && n.uninitialized {
            return Some(format!(
                "its Node {} is Ready but not schedulable: it carries {}, which no cloud controller removes from an azure:// Node; `xcsp apply` (waiting for the Nodes) and `xcsp watch` remove it",
                n.name,
                xcsp_kube::nodes::UNINITIALIZED
            ));
        }
        if n.ready == "True" {
            return None;
        }
        if let Some(csr) = m.csr.as_ref().filter(|c| c.rebootstrap) {
            return Some(format!(
                "its Node {} is not Ready ({}): its kubelet's client certificate expired (a VM stopped past the certificate's lifetime) and it asks for a new one: certificate signing request {} is {}{}, and OpenShift's machine approver approves no bootstrap request for a Node that exists. It asks for system:node:{} through the node bootstrapper, as this Machine's kubelet does: `oc adm certificate approve {}` lets it post again",
                n.name,
                n.ready,
                csr.name,
                csr.state,
                csr.created.as_ref().map(|t| format!(" since {t}")).unwrap_or_default(),
                n.name,
                csr.name
            ));
        }
        let link = match dns {
            _ if !h.healthy() => format!(
                ": the link is down ({} of {} tunnels up), so its kubelet cannot reach the API",
                h.up, h.expected
            ),
            Some(dns) => format!(": DNS over the link fails ({}), so its kubelet cannot find the API", dns.message),
            None => String::new(),
        };
        // The kubelet says why (Ready False); a network that does not come up on an Azure node is
        // most often the cluster's overlay MTU, which preflight checks against the pool's path.
        let why = match n.message.as_deref() {
            Some(m) if n.ready == "False" && m.to_ascii_lowercase().contains("network") => format!(
                ": {m}; the node's network plugin did not start, which the cluster's overlay MTU too large for the pool's path causes (`xcsp preflight` compares them)"
            ),
            Some(m) if n.ready == "False" => format!(": {m}"),
            _ => String::new(),
        };
        return Some(format!("its Node {} is not Ready ({}){why}{link}", n.name, n.ready));
    }
    if let Some(f) = &m.failure {
        // Azure refused its VM for what it asks: nothing else matters until the spec changes.
        return Some(format!("no Node: {} (AzureMachine {})", f.describe(), f.azure_machine));
    }
    let condition = m.not_true.first().map(|(t, r, msg)| format!("; CAPI/CAPZ say {t}: {r} {msg}")).unwrap_or_default();
    let rules = h.failing("SecurityGroupRulesInPlace");
    let token = h.failing("TokenExchangeAccepted");
    let pending = m.csr.as_ref().filter(|c| c.state != "Approved");
    Some(if let Some(token) = token.filter(|_| m.provider_id.is_none()) {
        format!("no Node: CAPZ gets no Azure token, so it makes no VM: {}{condition}", token.message)
    } else if let Some(roles) = h.failing("RoleAssignmentsInPlace").filter(|_| m.provider_id.is_none()) {
        format!("no Node: CAPZ's Azure calls are refused, so it makes no VM: {}{condition}", roles.message)
    } else if let Some(csr) = pending {
        // The kubelet reached the API (it asked for its certificate): what holds it is the request.
        format!(
            "no Node: its kubelet's certificate signing request {} is {}{}: OpenShift approves the nodes of Cluster API Machines only with its machine-approver-capi (TechPreviewNoUpgrade); `oc adm certificate approve {}` lets it register",
            csr.name,
            csr.state,
            csr.created.as_ref().map(|t| format!(" since {t}")).unwrap_or_default(),
            csr.name
        )
    } else if let Some(nsg) = h.failing("NetworkSecurityGroupInPlace").filter(|_| m.provider_id.is_some()) {
        format!(
            "no Node: the network security group of its subnet differs from the spec ({}), and its VM's traffic to the cluster passes it{condition}",
            nsg.message
        )
    } else if !h.healthy() {
        format!(
            "no Node: the link is down ({} of {} tunnels up), so its VM cannot reach the cluster{condition}",
            h.up, h.expected
        )
    } else if let Some(dns) = dns.filter(|_| m.provider_id.is_some()) {
        format!(
            "no Node: DNS over the link fails ({}), so its VM cannot find the cluster's API{condition}",
            dns.message
        )
    } else if let Some(rules) = rules.filter(|_| m.provider_id.is_some()) {
        format!(
            "no Node: the cluster's security groups may refuse its VM ({}), and the machine-config server and the API are behind them{condition}",
            rules.message
        )
    } else if m.provider_id.is_none() {
        format!("no Node: its infrastructure provider has not reported a VM (no provider ID){condition}")
    } else {
        format!(
            "no Node has registered with provider ID {}: the VM has not joined (its bootstrap, DNS or the API over the link){condition}",
            m.provider_id.as_deref().unwrap_or_default()
        )
    })
}

/// The health as `xcsp status --json` prints it, and as the controller's resource carries it:
/// each machine with what keeps it from being a Ready Node (`cause`, null when nothing does).
pub fn to_json(h: &Health) -> serde_json::Value {
    let mut shown = serde_json::to_value(h).expect("health serializes");
    if let Some(list) = shown["machines"].as_array_mut() {
        for (shown, m) in list.iter_mut().zip(&h.machines) {
            shown["cause"] = serde_json::json!(cause(h, m));
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use xcsp_core::provider::Attributes;
    use xcsp_state::ResourceState;

    fn model() -> Model {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/public");
        xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads")).model
    }

    fn record(state: &mut State, address: &str, id: &str, attrs: &[(&str, Value)]) {
        let attributes: Attributes = attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        state
            .resources
            .insert(address.parse().unwrap(), ResourceState { id: Some(id.into()), attributes, dependencies: vec![] });
    }

    /// Two connections of two tunnels, joined to Azure connections; `down` is not UP on AWS.
    fn link(down: Option<(usize, usize)>) -> State {
        let mut state = State::new("demo-k8x2q");
        for c in 0..2 {
            let mut attrs = Vec::new();
            for t in 1..=2 {
                let ip = format!("203.0.113.{}", c * 2 + t);
                let up = down != Some((c, t));
                attrs.push((format!("tunnel{t}_address"), Value::string(&ip)));
                attrs.push((format!("tunnel{t}_status"), Value::string(if up { "UP" } else { "DOWN" })));
                let (lng, conn) = (format!("lng-{c}{t}"), (c * 2 + t - 1));
                record(
                    &mut state,
                    &format!("azure_local_network_gateway.link[{conn}]"),
                    &lng,
                    &[("gateway_ip_address", Value::string(&ip))],
                );
                let azure =
                    [("local_network_gateway", Value::string(&lng)), ("connection_status", Value::string("Connected"))];
                record(
                    &mut state,
                    &format!("azure_virtual_network_gateway_connection.link[{conn}]"),
                    &format!("conn-{conn}"),
                    &azure,
                );
            }
            let attrs: Vec<(&str, Value)> = attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            record(&mut state, &format!("aws_vpn_connection.link[{c}]"), &format!("vpn-{c}"), &attrs);
        }
        state
    }

    #[test]
    fn a_ready_node_with_the_cloud_providers_taint_is_not_a_ready_pool_and_says_why() {
        let mut h = health(&model(), &link(None));
        let node = |uninitialized| xcsp_kube::pool::Node {
            name: "gpu-0".into(),
            ready: "True".into(),
            since: None,
            message: None,
            uninitialized,
        };
        h.machines.push(xcsp_kube::pool::Machine {
            namespace: "ns".into(),
            name: "gpu-0".into(),
            machine_set: "gpu".into(),
            phase: "Running".into(),
            provider_id: Some(
                "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/gpu-0".into(),
            ),
            created: None,
            not_true: vec![],
            node: Some(node(true)),
            csr: None,
            failure: None,
        });
        assert!(!h.pool_ready());
        let why = cause(&h, &h.machines[0]).expect("a cause");
        assert!(why.contains("Ready but not schedulable") && why.contains(xcsp_kube::nodes::UNINITIALIZED), "{why}");
        h.machines[0].node = Some(node(false));
        assert!(h.pool_ready());
        assert_eq!(cause(&h, &h.machines[0]), None);
        // A Node whose network plugin does not start names it, and the MTU check.
        let mut down = node(false);
        down.ready = "False".into();
        down.message = Some("container runtime network not ready: NetworkReady=false".into());
        h.machines[0].node = Some(down);
        let why = cause(&h, &h.machines[0]).unwrap();
        assert!(why.contains("NetworkReady=false") && why.contains("overlay MTU"), "{why}");
        // A Node of the pool no Machine carries keeps the pool from being ready, named with its remedy.
        h.machines[0].node = Some(node(false));
        h.leftover.push(xcsp_kube::pool::Leftover { name: "gpu-9".into(), provider_id: None, ready: "Unknown".into() });
        assert!(!h.pool_ready());
        let named = leftover(&h.leftover);
        let c = &named[0].conditions[0];
        assert_eq!((named[0].name.as_str(), c.kind, c.reason.as_str()), ("Node gpu-9", "MachineOwned", "NoMachine"));
        assert!(c.message.contains("oc delete node gpu-9") && c.message.contains("maxUnavailable"), "{}", c.message);
    }

    #[test]
    fn all_tunnels_up_is_healthy_and_established() {
        let h = health(&model(), &link(None));
        assert_eq!((h.up, h.expected), (4, 4));
        assert!(h.healthy());
        let c = &h.links[0].conditions[0];
        assert_eq!((c.kind, c.status, c.reason.as_str()), ("TunnelEstablished", "True", "AllTunnelsUp"));
        assert_eq!(h.links[0].conditions[1].status, "Unknown");
    }

    #[test]
    fn one_tunnel_down_is_unhealthy_and_named() {
        let h = health(&model(), &link(Some((1, 2))));
        assert_eq!((h.up, h.expected), (3, 4));
        assert!(!h.healthy());
        let c = &h.links[0].conditions[0];
        assert_eq!((c.status, c.reason.as_str()), ("False", "TunnelsDown"));
        assert!(c.message.contains("aws_vpn_connection.link[1] tunnel 2"), "{}", c.message);
    }

    #[test]
    fn nothing_applied_is_unhealthy_and_says_so() {
        let h = health(&model(), &State::new("demo-k8x2q"));
        assert!(!h.healthy());
        assert_eq!(h.links[0].conditions[0].reason, "NotCreated");
    }

    #[test]
    fn an_unavailable_manager_is_named_with_its_deployments_reason() {
        let mut state = link(None);
        record(
            &mut state,
            "k8s_cluster_api_provider.core",
            "xcsp-capi-system/capi-controller-manager",
            &[("available", Value::Bool(true)), ("version", Value::string("v1.13.6"))],
        );
        record(
            &mut state,
            "k8s_cluster_api_provider.azure",
            "xcsp-capz-system/capz-controller-manager",
            &[
                ("available", Value::Bool(false)),
                (
                    "condition",
                    Value::string(
                        "pods \"capz-controller-manager-\" is forbidden: unable to validate against any security context constraint",
                    ),
                ),
            ],
        );
        let h = health(&model(), &state);
        let said = |name: &str| {
            let c = &h.providers.iter().find(|p| p.name == name).expect("the provider").conditions[0];
            (c.kind, c.status, c.reason.clone(), c.message.clone())
        };
        assert_eq!(
            said("core"),
            (
                "ManagerAvailable",
                "True",
                "MinimumReplicasAvailable".into(),
                "Deployment xcsp-capi-system/capi-controller-manager is available (v1.13.6)".into()
            )
        );
        let (kind, status, reason, message) = said("azure");
        assert_eq!((kind, status, reason.as_str()), ("ManagerAvailable", "False", "ManagerUnavailable"));
        assert!(
            message.starts_with("Deployment xcsp-capz-system/capz-controller-manager is not available: pods"),
            "{message}"
        );
        assert!(message.contains("security context constraint"), "{message}");
    }

    #[test]
    fn a_manager_that_restarts_says_how_often_and_its_last_error() {
        let mut state = link(None);
        record(
            &mut state,
            "k8s_cluster_api_provider.azure",
            "xcsp-capz-system/capz-controller-manager",
            &[
                ("available", Value::Bool(true)),
                ("version", Value::string("v1.26.1")),
                ("restarts", Value::int(3)),
                ("last_error", Value::string("container manager of Pod capz-x exited with code 1 (Error)")),
            ],
        );
        let h = health(&model(), &state);
        let c = &h.providers.iter().find(|p| p.name == "azure").expect("the provider").conditions[0];
        assert_eq!((c.status, c.reason.as_str()), ("True", "MinimumReplicasAvailable"));
        assert!(
            c.message.ends_with(
                "(v1.26.1); its containers restarted 3 times, last error: container manager of Pod capz-x exited with code 1 (Error)"
            ),
            "{}",
            c.message
        );
    }
}
