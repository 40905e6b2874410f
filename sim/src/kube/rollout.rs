//! How a MachineConfig change reaches the machines (openshift/machine-config-operator,
//! release-4.22): the operator's node controller and, on each machine, its daemon.
//!
//! - **The daemon's first run** (`pkg/daemon/node.go` `loadNodeAnnotations`): a Node without
//!   `currentConfig` takes the annotations the machine-config server wrote into the machine's
//!   Ignition (`pkg/server/server.go` `getNodeAnnotation`): current and desired config the
//!   rendered config the machine booted with, state `Done`.
//! - **The node controller** (`pkg/controller/node/node_controller.go`): a Node belongs to the
//!   pool whose `nodeSelector` selects it, a custom pool before `worker`, and to none when two
//!   custom pools do (`GetPoolsForNode`). Each pass it points at most `maxUnavailable` (default 1,
//!   a percentage rounded down, never 0: `maxUnavailable`) Nodes at the pool's rendered config,
//!   counting against that budget every Node that is unavailable (`getAllCandidateMachines`,
//!   `getUnavailableMachines`, `common/layered_node_state.go` `IsUnavailableForUpdate`): not
//!   Ready, disk pressure, network unavailable or cordoned (`CheckNodeReady`), or not done with an
//!   update its daemon has not failed. A Node that never comes back (a deleted machine's, say)
//!   holds a `maxUnavailable: 1` pool for good. Its status (`status.go` `calculateStatus`): the
//!   counts, and `Updated` only when every Node is updated, Ready and available.
//! - **The daemon's update** (`pkg/daemon/update.go`, the drain controller): on a Node whose
//!   desired config differs from its current one, state `Working`, cordoned, the new files
//!   written and a reboot; then current = desired, state `Done`, uncordoned. Only a machine whose
//!   daemon reaches the API does it (the world's own VMs); the reboot's short NotReady is not
//!   played (the Node is cordoned, unavailable, all along).

use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::kinds::MACHINECONFIGURATION;
use super::mco::COUNTS;
use super::store::{Obj, Store};
use crate::world::World;

pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
pub const STATE: &str = "machineconfiguration.openshift.io/state";
const FIRST_PIVOT: &str = "machineconfiguration.openshift.io/firstPivotConfig";
/// What a daemon's update takes: drain, write, reboot (seconds, before the world's scale).
pub const UPDATE_SECS: (f64, f64) = (90.0, 180.0);

fn annotation<'a>(node: &'a Value, key: &str) -> &'a str {
    node["metadata"]["annotations"][key].as_str().unwrap_or_default()
}

fn condition<'a>(node: &'a Value, kind: &str) -> Option<&'a str> {
    node["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)?["status"].as_str()
}

/// `CheckNodeReady`: Ready, no disk pressure, network available, not cordoned.
pub fn node_ready(node: &Value) -> bool {
    condition(node, "Ready") == Some("True")
        && condition(node, "DiskPressure").is_none_or(|s| s == "False")
        && condition(node, "NetworkUnavailable").is_none_or(|s| s == "False")
        && node["spec"]["unschedulable"] != true
}

fn done(node: &Value) -> bool {
    let current = annotation(node, CURRENT_CONFIG);
    !current.is_empty() && current == annotation(node, DESIRED_CONFIG) && annotation(node, STATE) == "Done"
}

fn failing(node: &Value) -> bool {
    annotation(node, CURRENT_CONFIG) != annotation(node, DESIRED_CONFIG)
        && matches!(annotation(node, STATE), "Degraded" | "Unreconcilable")
}

/// `IsUnavailableForUpdate`.
fn unavailable(node: &Value) -> bool {
    !node_ready(node) || (!done(node) && !failing(node))
}

/// `maxUnavailable`: an int or a percentage of `nodes` rounded down; 1 when unset or 0.
fn max_unavailable(pool: &Value, nodes: usize) -> usize {
    let n = match &pool["spec"]["maxUnavailable"] {
        Value::Number(n) => n.as_u64().unwrap_or(1) as usize,
        Value::String(p) => p.strip_suffix('%').and_then(|p| p.parse::<usize>().ok()).map_or(1, |p| p * nodes / 100),
        _ => 1,
    };
    n.max(1)
}

/// The pool each Node belongs to (`GetPoolsForNode`).
fn pools_of_nodes(pools: &[Value], nodes: &[Value]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for node in nodes {
        let mut of: Vec<&str> = pools
            .iter()
            .filter(|p| {
                let sel = &p["spec"]["nodeSelector"];
                !sel.is_null() && super::mco::selects(sel, &node["metadata"]["labels"])
            })
            .filter_map(|p| p["metadata"]["name"].as_str())
            .collect();
        if of.len() > 1 {
            of.retain(|p| *p != "worker" && *p != "master");
        }
        if let ([pool], Some(name)) = (of.as_slice(), node["metadata"]["name"].as_str()) {
            out.insert(name.to_string(), (*pool).to_string());
        }
    }
    out
}

impl Store {
    /// The daemons' first run and updates, then the node controller, for every pool.
    pub fn settle_nodes(&mut self, world: &World) {
        self.daemons(world);
        let pools: Vec<Value> = self.list(MACHINECONFIGURATION, "machineconfigpools");
        let nodes: Vec<Value> = self.list("", "nodes");
        let membership = pools_of_nodes(&pools, &nodes);
        for pool in &pools {
            let name = pool["metadata"]["name"].as_str().unwrap_or_default();
            let target = pool["spec"]["configuration"]["name"].as_str().unwrap_or_default().to_string();
            // Nodes no daemon ever ran on are left out: every machine of a real cluster runs one,
            // here only the world's VMs do.
            let mine: Vec<&Value> = nodes
                .iter()
                .filter(|n| n["metadata"]["name"].as_str().and_then(|x| membership.get(x)).is_some_and(|p| p == name))
                .filter(|n| !annotation(n, CURRENT_CONFIG).is_empty())
                .collect();
            if !target.is_empty() && pool["spec"]["paused"] != true {
                let busy = mine.iter().filter(|n| unavailable(n)).count();
                let budget = max_unavailable(pool, mine.len());
                let failing_target =
                    mine.iter().filter(|n| annotation(n, DESIRED_CONFIG) != target && failing(n)).count();
                let capacity = budget.saturating_sub(busy).saturating_sub(failing_target);
                let mut candidates: Vec<String> = mine
                    .iter()
                    .filter(|n| annotation(n, DESIRED_CONFIG) != target && node_ready(n))
                    .filter_map(|n| n["metadata"]["name"].as_str().map(String::from))
                    .collect();
                candidates.sort();
                for node in candidates.into_iter().take(capacity) {
                    self.annotate(&node, &[(DESIRED_CONFIG, &target)]);
                    world.journal("kubernetes", "machine-config-controller", &format!("node/{node} -> {target}"));
                }
            }
            self.pool_status(
                pool,
                &target,
                &mine.iter().filter_map(|n| n["metadata"]["name"].as_str()).collect::<Vec<_>>(),
            );
        }
    }

    /// `calculateStatus` from the pool's Nodes as they are now.
    fn pool_status(&mut self, pool: &Value, target: &str, names: &[&str]) {
        let nodes: Vec<Value> = names.iter().filter_map(|n| self.value("", "nodes", "", n).cloned()).collect();
        let total = nodes.len();
        let updated = |n: &&Value| done(n) && annotation(n, CURRENT_CONFIG) == target;
        let updated_count = nodes.iter().filter(updated).count();
        let ready = nodes.iter().filter(updated).filter(|n| node_ready(n)).count();
        let unavail = nodes.iter().filter(|n| unavailable(n)).count();
        let degraded = nodes.iter().filter(|n| failing(n)).count();
        let mut status = pool["status"].clone();
        for (k, v) in COUNTS.iter().zip([total, updated_count, ready, unavail, degraded]) {
            status[*k] = json!(v);
        }
        let all = updated_count == total && ready == total && unavail == 0 && degraded == 0 && !target.is_empty();
        let message = if all { format!("All nodes are updated with MachineConfig {target}") } else { String::new() };
        super::mco::set_condition(&mut status, "Updated", if all { "True" } else { "False" }, &message);
        super::mco::set_condition(&mut status, "Updating", if all || target.is_empty() { "False" } else { "True" }, "");
        let name = pool["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(mut obj) = self.object(MACHINECONFIGURATION, "machineconfigpools", name)
            && obj.value["status"] != status
        {
            obj.value["status"] = status;
            self.put(obj);
        }
    }

    /// The daemon on each of the world's machines whose kubelet registered.
    fn daemons(&mut self, world: &World) {
        let now = world.clock.now();
        let booted: Vec<(String, String)> = self.booted.iter().map(|(n, c)| (n.clone(), c.clone())).collect();
        for (node_name, booted_with) in booted {
            let Some(node) = self.value("", "nodes", "", &node_name).cloned() else { continue };
            if annotation(&node, CURRENT_CONFIG).is_empty() {
                self.annotate(
                    &node_name,
                    &[
                        (CURRENT_CONFIG, &booted_with),
                        (DESIRED_CONFIG, &booted_with),
                        (FIRST_PIVOT, &booted_with),
                        (STATE, "Done"),
                    ],
                );
                continue;
            }
            let desired = annotation(&node, DESIRED_CONFIG).to_string();
            // The daemon talks to the API through the link, as the kubelet does.
            if desired == annotation(&node, CURRENT_CONFIG) || condition(&node, "Ready") != Some("True") {
                continue;
            }
            if self.value(MACHINECONFIGURATION, "machineconfigs", "", &desired).is_none() {
                self.annotate(&node_name, &[(STATE, "Degraded")]);
                continue;
            }
            match self.updates.get(&node_name).cloned() {
                None => {
                    let due = now + world.lro_duration(UPDATE_SECS.0, UPDATE_SECS.1);
                    self.updates.insert(node_name.clone(), (desired.clone(), due));
                    self.annotate(&node_name, &[(STATE, "Working")]);
                    self.cordon(&node_name, true);
                }
                Some((config, due)) if config == desired && now >= due => {
                    self.updates.remove(&node_name);
                    self.annotate(&node_name, &[(CURRENT_CONFIG, &desired), (STATE, "Done")]);
                    self.cordon(&node_name, false);
                    world.journal("kubernetes", "machine-config-daemon", &format!("node/{node_name} = {desired}"));
                }
                Some((config, _)) if config != desired => {
                    self.updates.remove(&node_name);
                }
                Some(_) => {}
            }
        }
    }

    fn list(&self, group: &str, plural: &str) -> Vec<Value> {
        self.objects.iter().filter(|(k, _)| k.0 == group && k.1 == plural).map(|(_, o)| o.value.clone()).collect()
    }

    fn object(&self, group: &str, plural: &str, name: &str) -> Option<Obj> {
        let kind = super::kinds::Kind::served(group, plural)?;
        self.objects.get(&super::store::key(kind, "", name)).cloned()
    }

    fn annotate(&mut self, node: &str, pairs: &[(&str, &str)]) {
        if let Some(mut obj) = self.object("", "nodes", node) {
            for (k, v) in pairs {
                obj.value["metadata"]["annotations"][*k] = json!(v);
            }
            self.put(obj);
        }
    }

    fn cordon(&mut self, node: &str, on: bool) {
        if let Some(mut obj) = self.object("", "nodes", node) {
            if on {
                obj.value["spec"]["unschedulable"] = json!(true);
            } else if let Some(spec) = obj.value["spec"].as_object_mut() {
                spec.remove("unschedulable");
            }
            self.put(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: &str, current: &str, desired: &str) -> Value {
        json!({"metadata": {"name": name, "labels": {"xcsp.io/pool": "gpu"},
                "annotations": {CURRENT_CONFIG: current, DESIRED_CONFIG: desired, STATE: "Done"}},
               "spec": {}, "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    }

    #[test]
    fn a_node_that_never_comes_back_holds_the_pool_and_counts_unavailable() {
        let gone = node("a", "Unknown", "rendered-1", "rendered-1");
        assert!(unavailable(&gone));
        assert!(!unavailable(&node("b", "True", "rendered-1", "rendered-1")));
        // Pointed at a new config and not yet done: unavailable while its daemon works.
        assert!(unavailable(&node("b", "True", "rendered-1", "rendered-2")));
        let pool = json!({"spec": {}});
        assert_eq!(max_unavailable(&pool, 2), 1);
        assert_eq!(max_unavailable(&json!({"spec": {"maxUnavailable": "10%"}}), 3), 1);
        assert_eq!(max_unavailable(&json!({"spec": {"maxUnavailable": "50%"}}), 4), 2);
        assert_eq!(max_unavailable(&json!({"spec": {"maxUnavailable": 3}}), 4), 3);
    }

    #[test]
    fn a_node_of_a_custom_pool_and_the_workers_is_the_custom_pools() {
        let pools = vec![
            json!({"metadata": {"name": "worker"}, "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}}),
            json!({"metadata": {"name": "gpu"}, "spec": {"nodeSelector": {"matchLabels": {"xcsp.io/pool": "gpu"}}}}),
            json!({"metadata": {"name": "other"}, "spec": {"nodeSelector": {"matchLabels": {"other": "x"}}}}),
        ];
        let both = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": "", "xcsp.io/pool": "gpu"}}});
        let two_custom = json!({"metadata": {"name": "n2", "labels": {"other": "x", "xcsp.io/pool": "gpu"}}});
        let worker = json!({"metadata": {"name": "n3", "labels": {"node-role.kubernetes.io/worker": ""}}});
        let m = pools_of_nodes(&pools, &[both, two_custom, worker]);
        assert_eq!(m.get("n1").map(String::as_str), Some("gpu"));
        assert_eq!(m.get("n2"), None, "two custom pools: in none");
        assert_eq!(m.get("n3").map(String::as_str), Some("worker"));
    }
}
