//! The pool's machines as Cluster API and the cluster report them, for `xcsp status`: each
//! Machine of the pool's MachineSets (phase, provider ID, the conditions that are not true), and
//! the Node whose provider ID is the Machine's (CAPI's machine controller matches them the same
//! way before it sets `status.nodeRef`), Ready or not and since when.

use kube::api::{Api, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::Value as Json;

use crate::connect::KubeConfig;
use crate::survey::resource;

/// One Machine and its Node, if one registered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub namespace: String,
    pub name: String,
    pub machine_set: String,
    /// `status.phase` (Pending, Provisioning, Provisioned, Running, Deleting, Failed).
    pub phase: String,
    pub provider_id: Option<String>,
    pub created: Option<String>,
    /// Conditions that are not `True`: type, reason and message.
    pub not_true: Vec<(String, String, String)>,
    pub node: Option<Node>,
    /// Its kubelet's client certificate signing request: the newest one while it has no Node; a
    /// Pending bootstrap request made after its Node registered, once it has one (its kubelet
    /// bootstrapping again: [`Csr::rebootstrap`]).
    pub csr: Option<Csr>,
    /// Why Azure will never make its VM, when it will not (read from its AzureMachine:
    /// [`crate::failure`]).
    pub failure: Option<crate::failure::Terminal>,
}

/// A kubelet's certificate signing request, found by the node name in its subject.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Csr {
    pub name: String,
    /// `Pending`, `Approved` or `Denied` (or `Failed`), from its conditions.
    pub state: String,
    pub created: Option<String>,
    /// Asked by the node bootstrapper for a Node that exists: the kubelet's client certificate
    /// expired (a VM stopped past its lifetime) and it bootstraps again
    /// (kubernetes `pkg/kubelet/certificate/bootstrap/bootstrap.go` `LoadClientConfig`), which
    /// OpenShift's machine approver never approves (openshift/cluster-machine-approver
    /// `pkg/controller/csr_check.go` `authorizeNodeClientCSR`: "node ... already exists, cannot
    /// approve"; and its Machine has a node reference).
    pub rebootstrap: bool,
}

/// Who asks for a kubelet's first client certificate on OpenShift (the bootstrap kubeconfig's
/// account; openshift/cluster-machine-approver `csr_check.go` `nodeBootstrapperUsername`).
const NODE_BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";

/// The signer of kubelets' client certificates (k8s.io/api `certificates/v1`).
const KUBELET_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The node a kubelet's CSR is for: its PKCS#10 subject's `CN=system:node:<name>`, as the node
/// authorizer and OpenShift's machine approver read it (openshift/cluster-machine-approver
/// `pkg/controller/csr_check.go`).
fn csr_node(csr: &DynamicObject) -> Option<String> {
    use base64::Engine as _;
    let pem = base64::engine::general_purpose::STANDARD.decode(csr.data["spec"]["request"].as_str()?).ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let (_, req) =
        <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<_>>::from_der(
            &pem.contents,
        )
        .ok()?;
    let cn = req.certification_request_info.subject.iter_common_name().next()?.as_str().ok()?;
    cn.strip_prefix("system:node:").map(String::from)
}

fn csr_state(csr: &DynamicObject) -> String {
    let conditions = csr.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
    ["Denied", "Failed", "Approved"]
        .into_iter()
        .find(|t| conditions.iter().any(|c| c["type"] == *t && c["status"] != "False"))
        .unwrap_or("Pending")
        .to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    pub name: String,
    /// The `Ready` condition's status ("True", "False", "Unknown") and when it last changed.
    pub ready: String,
    pub since: Option<String>,
    /// The `Ready` condition's message (the kubelet's reason for not being ready).
    pub message: Option<String>,
    /// It still carries the cloud provider's uninitialized taint ([`crate::nodes`]): nothing
    /// without a toleration for it schedules there.
    pub uninitialized: bool,
}

fn text(v: &Json) -> Option<String> {
    v.as_str().map(String::from)
}

/// A Node's `Ready` condition, if it has one.
fn ready_condition(n: &DynamicObject) -> Option<&Json> {
    n.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")
}

/// The Machines of `machine_sets` (namespace, name) and their Nodes, and the Nodes carrying the
/// pool label ([`xcsp_core::tags::POOL_LABEL`]) with one of `pool_labels` that none of those
/// Machines carries ([`Leftover`]), from one listing of the Nodes.
pub async fn machines(
    config: &KubeConfig,
    machine_sets: &[(String, String)],
    pool_labels: &[String],
) -> Result<(Vec<Machine>, Vec<Leftover>), String> {
    let client = crate::connect::client(config).await?;
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &resource("", "v1", "Node", "nodes"));
    let nodes = nodes.list(&ListParams::default()).await.map_err(|e| format!("cannot list the Nodes: {e}"))?.items;
    let version = crate::connect::capi_version(&client).await;
    // Kubelets' client certificate requests, newest last (none readable: none shown).
    let csrs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests"),
    );
    let mut csrs: Vec<DynamicObject> = csrs
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.data["spec"]["signerName"] == KUBELET_SIGNER)
        .collect();
    csrs.sort_by_key(|c| c.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let mut out = Vec::new();
    let mut azure_machines: std::collections::BTreeMap<String, Vec<DynamicObject>> = Default::default();
    for (ns, set) in machine_sets {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &crate::connect::machines(version));
        let list = api
            .list(&crate::connect::of_set(set))
            .await
            .map_err(|e| format!("cannot list the Machines of {ns}/{set}: {e}"))?;
        // A namespace's AzureMachines, listed once for all its MachineSets.
        if !azure_machines.contains_key(ns) {
            azure_machines.insert(ns.clone(), crate::failure::azure_machines_in(&client, ns).await);
        }
        let infra = &azure_machines[ns];
        for m in list.items {
            let failure = crate::failure::of_machine(&m, infra);
            let provider_id = text(&m.data["spec"]["providerID"]);
            let node = provider_id.as_ref().and_then(|id| {
                let n = nodes.iter().find(|n| n.data["spec"]["providerID"].as_str() == Some(id.as_str()))?;
                let ready = ready_condition(n);
                Some((
                    Node {
                        name: n.metadata.name.clone().unwrap_or_default(),
                        ready: ready.and_then(|c| text(&c["status"])).unwrap_or_else(|| "Unknown".into()),
                        since: ready.and_then(|c| text(&c["lastTransitionTime"])),
                        message: ready.and_then(|c| text(&c["message"])).filter(|m| !m.is_empty()),
                        uninitialized: crate::nodes::uninitialized(&n.data),
                    },
                    n.metadata.creation_timestamp.as_ref().map(|t| t.0),
                ))
            });
            // Through v1beta2 the Machine's own conditions are v1beta2's; a cluster that sets
            // only the v1beta1 ones shows them under `deprecated.v1beta1`.
            let status = &m.data["status"];
            let conditions = [&status["conditions"], &status["deprecated"]["v1beta1"]["conditions"]]
                .into_iter()
                .find(|c| c.as_array().is_some_and(|c| !c.is_empty()))
                .unwrap_or(&Json::Null);
            // What holds the Machine back: a condition not True, except those whose normal state
            // is False (CAPI v1beta2: Paused, and Deleting and Updating, which its Ready summary
            // reads with negative polarity, `internal/controllers/machine/machine_controller_status.go`
            // `setReadyCondition`), True there; the summaries (Ready, Available) after the
            // conditions they summarise, so the first one named is the cause.
            let negative = |t: &Json| matches!(t.as_str(), Some("Paused" | "Deleting" | "Updating"));
            let mut not_true: Vec<(String, String, String)> = conditions
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| if negative(&c["type"]) { c["status"] == "True" } else { c["status"] != "True" })
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                    (s("type"), s("reason"), s("message"))
                })
                .collect();
            not_true.sort_by_key(|(t, _, _)| matches!(t.as_str(), "Ready" | "Available"));
            // The node name OpenShift's approver matches: the Machine's `InternalDNS` address
            // (CAPZ's, the VM's name), else the Machine's name.
            let node_name = status["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["type"] == "InternalDNS")
                .and_then(|a| a["address"].as_str())
                .map(String::from)
                .or_else(|| m.metadata.name.clone())
                .unwrap_or_default();
            // Without a Node, the newest request for its name; with one, only a Pending bootstrap
            // request newer than the Node.
            let (node, node_created) = node.unzip();
            let wanted = node.as_ref().map_or(node_name.as_str(), |n| n.name.as_str());
            let csr = csrs
                .iter()
                .rev()
                .find(|c| csr_node(c).as_deref() == Some(wanted))
                .filter(|c| {
                    let Some(node_created) = node_created else { return true };
                    let created = c.metadata.creation_timestamp.as_ref().map(|t| t.0);
                    c.data["spec"]["username"] == NODE_BOOTSTRAPPER
                        && created.is_some_and(|t| node_created.is_some_and(|n| t > n))
                        && csr_state(c) == "Pending"
                })
                .map(|c| Csr {
                    name: c.metadata.name.clone().unwrap_or_default(),
                    state: csr_state(c),
                    created: c.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
                    rebootstrap: node.is_some(),
                });
            out.push(Machine {
                namespace: ns.clone(),
                name: m.metadata.name.clone().unwrap_or_default(),
                machine_set: set.clone(),
                phase: text(&m.data["status"]["phase"]).unwrap_or_else(|| "Pending".into()),
                provider_id,
                created: m.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
                not_true,
                node,
                csr,
                failure,
            });
        }
    }
    let leftover = nodes
        .iter()
        .filter(|n| {
            let label = n.metadata.labels.as_ref().and_then(|l| l.get(xcsp_core::tags::POOL_LABEL));
            let id = n.data["spec"]["providerID"].as_str();
            label.is_some_and(|l| pool_labels.contains(l))
                && id.is_none_or(|id| !out.iter().any(|m: &Machine| m.provider_id.as_deref() == Some(id)))
        })
        .map(|n| Leftover {
            name: n.metadata.name.clone().unwrap_or_default(),
            provider_id: text(&n.data["spec"]["providerID"]),
            ready: ready_condition(n).and_then(|c| text(&c["status"])).unwrap_or_else(|| "Unknown".into()),
        })
        .collect();
    Ok((out, leftover))
}

/// A Node of the pool that no Machine carries: its provider ID is none of `machines`' (or it has
/// none). Cluster API deletes the Node of a Machine it deletes (`status.nodeRef`), and nothing
/// else does on an AWS cluster: AWS's cloud controller cannot read an `azure://` provider ID. Such
/// a Node, NotReady for good, counts against its MachineConfigPool's `maxUnavailable` and holds
/// every later rollout (machine-config-operator `pkg/controller/node/node_controller.go`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Leftover {
    pub name: String,
    pub provider_id: Option<String>,
    /// Its `Ready` condition's status.
    pub ready: String,
}

/// What the AWS EBS CSI driver does on the pool's Nodes, for `xcsp status`: its node DaemonSet's
/// Pods there, and the `storage` ClusterOperator that reports the DaemonSet's rollout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EbsCsi {
    /// The DaemonSet's Pods on the pool's Nodes, and how many of them are not Ready.
    pub on_pool: usize,
    pub on_pool_not_ready: usize,
    /// The `storage` ClusterOperator's Progressing condition: status, reason, message.
    pub storage_progressing: Option<(String, String, String)>,
}

/// The EBS CSI driver against the Nodes `pool_nodes`; `None` where its DaemonSet does not run.
pub async fn ebs_csi(config: &KubeConfig, pool_nodes: &[String]) -> Result<Option<EbsCsi>, String> {
    use crate::survey::{EBS_CSI_NAMESPACE, EBS_CSI_NODE};
    let client = crate::connect::client(config).await?;
    let sets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), EBS_CSI_NAMESPACE, &resource("apps", "v1", "DaemonSet", "daemonsets"));
    let Some(ds) =
        sets.get_opt(EBS_CSI_NODE).await.map_err(|e| format!("cannot read the DaemonSet {EBS_CSI_NODE}: {e}"))?
    else {
        return Ok(None);
    };
    let selector = ds.data["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect::<Vec<_>>().join(","))
        .unwrap_or_default();
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), EBS_CSI_NAMESPACE, &resource("", "v1", "Pod", "pods"));
    let pods = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("cannot list the Pods of {EBS_CSI_NODE}: {e}"))?
        .items;
    let ready = |p: &DynamicObject| {
        p.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    let on: Vec<&DynamicObject> = pods
        .iter()
        .filter(|p| p.data["spec"]["nodeName"].as_str().is_some_and(|n| pool_nodes.iter().any(|x| x == n)))
        .collect();
    let operators: Api<DynamicObject> =
        Api::all_with(client, &resource("config.openshift.io", "v1", "ClusterOperator", "clusteroperators"));
    let storage = operators.get_opt("storage").await.ok().flatten();
    let storage_progressing = storage.and_then(|co| {
        let c = co.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Progressing")?.clone();
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        Some((s("status"), s("reason"), s("message")))
    });
    Ok(Some(EbsCsi {
        on_pool: on.len(),
        on_pool_not_ready: on.iter().filter(|p| !ready(p)).count(),
        storage_progressing,
    }))
}

/// The Pods on the pool's Nodes that a link outage would evict: each one not run by a DaemonSet
/// (whose Pods tolerate an unreachable Node without end, kubernetes
/// `pkg/controller/daemon/util/daemonset_util.go` `AddOrUpdateDaemonPodTolerations`), not being
/// deleted, whose toleration of `node.kubernetes.io/unreachable:NoExecute` ends within
/// `within_secs` (the API server's 300 s default, or none at all): `namespace/name` and its seconds.
pub async fn outage_exposed(
    config: &KubeConfig,
    pool_nodes: &[String],
    within_secs: i64,
) -> Result<Vec<(String, i64)>, String> {
    if pool_nodes.is_empty() {
        return Ok(vec![]);
    }
    let client = crate::connect::client(config).await?;
    let api: Api<DynamicObject> = Api::all_with(client, &resource("", "v1", "Pod", "pods"));
    let mut out = Vec::new();
    // The pool's Nodes' Pods only, by the API server's `spec.nodeName` field selector: status and
    // the controller read this each cycle, and a cluster holds far more Pods than the pool.
    for node in pool_nodes {
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let pods = api.list(&params).await.map_err(|e| format!("cannot list the Pods on {node}: {e}"))?.items;
        for p in &pods {
            let daemon = p.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet");
            if daemon || p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let secs = tolerated_secs(&p.data["spec"]["tolerations"]);
            if secs.is_some_and(|s| s > within_secs) {
                continue;
            }
            let name = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            );
            out.push((name, secs.unwrap_or(0)));
        }
    }
    out.sort();
    Ok(out)
}

/// How long `tolerations` keep a Pod on an unreachable Node: the longest toleration that covers
/// `node.kubernetes.io/unreachable:NoExecute`, `i64::MAX` for one without seconds, `None` for none.
pub fn tolerated_secs(tolerations: &serde_json::Value) -> Option<i64> {
    tolerations
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            let key = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            (key == "node.kubernetes.io/unreachable" || (key.is_empty() && t["operator"] == "Exists"))
                && (effect.is_empty() || effect == "NoExecute")
        })
        .map(|t| t["tolerationSeconds"].as_i64().unwrap_or(i64::MAX))
        .max()
}

#[cfg(test)]
mod outage_tests {
    use super::tolerated_secs;
    use serde_json::json;

    #[test]
    fn the_longest_toleration_of_an_unreachable_node_counts() {
        let default = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
        assert_eq!(tolerated_secs(&json!([default])), Some(300));
        let long = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3600});
        assert_eq!(tolerated_secs(&json!([default, long])), Some(3600));
        assert_eq!(tolerated_secs(&json!([{"operator": "Exists"}])), Some(i64::MAX), "tolerates every taint");
        assert_eq!(tolerated_secs(&json!([{"key": "nvidia.com/gpu", "operator": "Exists"}])), None);
    }
}
