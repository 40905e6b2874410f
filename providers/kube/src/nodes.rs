//! Making the pool's Nodes schedulable, with the pool's taints, without a cloud controller for them.
//!
//! OpenShift's worker kubelet on AWS runs with `--cloud-provider=external`
//! (machine-config-operator `templates/worker/01-worker-kubelet/_base/units/kubelet.service.yaml`),
//! so every kubelet registers its Node with the taint
//! `node.cloudprovider.kubernetes.io/uninitialized:NoSchedule` (kubernetes
//! `pkg/kubelet/kubelet_node_status.go` `initialNode`), which only a cloud controller manager's
//! node controller removes once it has initialized the Node (k8s.io/cloud-provider
//! `controllers/node/node_controller.go` `syncNode`). The cluster's cloud controller is AWS's, and
//! it cannot initialize an `azure://` Node; the pool has no Azure one (the seed's CCM-less mode).
//!
//! Where the taint could go instead, and why not:
//! - the kubelet: the flag is written into the worker kubelet unit MCO renders for the cluster's
//!   release; replacing that unit for the pool would pin a copy of it across upgrades;
//! - the node itself: the NodeRestriction admission plugin refuses a kubelet that changes its own
//!   Node's taints ("is not allowed to modify taints", kubernetes
//!   `plugin/pkg/admission/noderestriction/admission.go`).
//!
//! The pool's own taints (`nvidia.com/gpu`) do not reach the Node either: Cluster API 1.13 copies
//! a Machine's `spec.taints` to its Node only behind the alpha feature gate
//! `MachineTaintPropagation`, off by default (cluster-api `feature/feature.go`;
//! `internal/controllers/machine/machine_controller_noderef.go`); a GPU Node without them takes
//! any workload.
//!
//! So xcsp does the one step of the node controller the pool needs, in one write: it removes that
//! taint and puts on the Machine's taints, on the Nodes of the pool's Machines and no other Node
//! (only a Node whose provider ID is an `azure://` one that a Machine of the pool's MachineSets
//! carries). Until then the uninitialized taint keeps every Pod off, so no Pod lands in between. `apply` does it while it waits
//! for a MachineSet's Nodes, `watch` on every cycle (for the machines CAPI makes later: a scale-up,
//! a remediation). The write carries the resource version it read, so a Node another writer
//! changed meanwhile is read again, never overwritten.

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::survey::resource;

/// The taint a kubelet with an external cloud provider registers with (k8s.io/cloud-provider
/// `api/well_known_taints.go` `TaintExternalCloudProvider`).
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Whether a Node carries [`UNINITIALIZED`].
pub fn uninitialized(node: &Value) -> bool {
    node["spec"]["taints"].as_array().is_some_and(|t| t.iter().any(|t| t["key"] == UNINITIALIZED))
}

/// The Machines of `machine_sets` (namespace, name).
async fn set_machines(client: &kube::Client, machine_sets: &[(String, String)]) -> Result<Vec<DynamicObject>, String> {
    let version = crate::connect::capi_version(client).await;
    let mut out = Vec::new();
    for (ns, set) in machine_sets {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &crate::connect::machines(version));
        let list = api
            .list(&crate::connect::of_set(set))
            .await
            .map_err(|e| format!("cannot list the Machines of {ns}/{set}: {e}"))?;
        out.extend(list.items);
    }
    Ok(out)
}

/// Of `machines`, those CAPZ gave an `azure://` provider ID: that ID and the taints the
/// Machine's spec asks for (CAPI v1beta2 `MachineSpec.taints`).
fn provider_taints(machines: &[DynamicObject]) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    for m in machines {
        let Some(id) = m.data["spec"]["providerID"].as_str().filter(|id| id.starts_with("azure://")) else {
            continue;
        };
        let taints = m.data["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let mut core = json!({"key": t["key"], "effect": t["effect"]});
                if let Some(v) = t["value"].as_str().filter(|v| !v.is_empty()) {
                    core["value"] = json!(v);
                }
                core
            })
            .collect();
        out.push((id.to_string(), taints));
    }
    out
}

/// A Node's taints once initialized: the uninitialized taint gone, the Machine's taints there
/// (a taint is one per key and effect, as the API server keeps them).
fn initialized_taints(node: &Value, machine_taints: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["key"] != UNINITIALIZED)
        .cloned()
        .collect();
    for t in machine_taints {
        if !out.iter().any(|o| o["key"] == t["key"] && o["effect"] == t["effect"]) {
            out.push(t.clone());
        }
    }
    out
}

/// What [`initialize`] did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Initialized {
    /// The Nodes the taint was removed from.
    pub lifted: Vec<String>,
    /// The Nodes that still carry it (changed between the read and the write: the next call).
    pub left: Vec<String>,
}

/// [`initialize`] with a client for the cluster `config` names.
pub async fn initialize_in(
    config: &crate::connect::KubeConfig,
    machine_sets: &[(String, String)],
) -> Result<Initialized, String> {
    initialize(&crate::connect::client(config).await?, machine_sets).await
}

/// Initializes the Nodes of the pool's Machines: in one write, removes [`UNINITIALIZED`] and
/// puts on the Machine's taints.
pub async fn initialize(client: &kube::Client, machine_sets: &[(String, String)]) -> Result<Initialized, String> {
    initialize_machines(client, &set_machines(client, machine_sets).await?).await
}

/// [`initialize`] for Machines the caller has listed.
pub async fn initialize_machines(client: &kube::Client, machines: &[DynamicObject]) -> Result<Initialized, String> {
    let machines = provider_taints(machines);
    let mut out = Initialized::default();
    if machines.is_empty() {
        return Ok(out);
    }
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &resource("", "v1", "Node", "nodes"));
    let list = nodes.list(&ListParams::default()).await.map_err(|e| format!("cannot list the Nodes: {e}"))?;
    for n in list.items.iter().filter(|n| uninitialized(&n.data)) {
        let Some((_, machine_taints)) =
            machines.iter().find(|(id, _)| n.data["spec"]["providerID"].as_str() == Some(id.as_str()))
        else {
            continue;
        };
        let name = n.metadata.name.clone().unwrap_or_default();
        let kept = initialized_taints(&n.data, machine_taints);
        // The resource version read makes the write conditional (409 if the Node changed).
        let patch = json!({"metadata": {"resourceVersion": n.metadata.resource_version}, "spec": {"taints": kept}});
        match nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => out.lifted.push(name),
            // Changed since the list: the next call reads it again.
            Err(kube::Error::Api(e)) if e.code == 409 => out.left.push(name),
            Err(e) => return Err(format!("cannot remove {UNINITIALIZED} from Node {name}: {e}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initializing_swaps_the_cloud_providers_taint_for_the_machines_once() {
        let gpu = json!({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"});
        let node = json!({"spec": {"taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]}});
        assert_eq!(initialized_taints(&node, std::slice::from_ref(&gpu)), vec![gpu.clone()]);
        let both = json!({"spec": {"taints": [{"key": UNINITIALIZED, "effect": "NoSchedule"}, gpu.clone()]}});
        assert_eq!(initialized_taints(&both, std::slice::from_ref(&gpu)), vec![gpu.clone()], "no twin");
        assert_eq!(initialized_taints(&node, &[]), Vec::<Value>::new());
    }

    #[test]
    fn only_the_cloud_providers_taint_counts() {
        assert!(uninitialized(&json!({"spec": {"taints": [{"key": UNINITIALIZED, "effect": "NoSchedule"}]}})));
        assert!(!uninitialized(&json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}})));
        assert!(!uninitialized(&json!({"spec": {}})));
    }
}
