//! CAPI's MachineHealthCheck as a pool's machines meet it (cluster-api
//! `internal/controllers/machinehealthcheck`, `machinehealthcheck_targets.go` `needsRemediation`,
//! read at the v1beta1 API the sim serves): a Machine the check selects (its label selector, its
//! `clusterName`) is unhealthy when its Node has held one of `unhealthyConditions` (type and
//! status) for longer than the condition's `timeout`, or when it has no Node
//! `nodeStartupTimeout` (10 minutes unless set; `0` turns it off) after the latest of its
//! creation and its `InfrastructureReady`. Nothing is judged before the Cluster's control plane
//! is initialized and its infrastructure ready. An unhealthy Machine gets `HealthCheckSucceeded`
//! False and `OwnerRemediated` False, and its MachineSet deletes it (`machineset_controller.go`,
//! owner remediation), so a new one is made. `maxUnhealthy` (100% unless set) is not checked.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::selector::Selector;
use super::store::{Key, Store};
use crate::world::World;

const CAPI: &str = "cluster.x-k8s.io";
const CAPZ: &str = "infrastructure.cluster.x-k8s.io";

/// A Go duration (`300s`, `10m`, `1h30m`, `1.5s`) in seconds.
pub fn go_duration(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut number = String::new();
    let mut chars = text.trim().chars().peekable();
    if text.trim() == "0" {
        return Some(0.0);
    }
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let value: f64 = number.parse().ok()?;
        number.clear();
        total += value
            * match c {
                'h' => 3600.0,
                'm' if chars.peek() == Some(&'s') => {
                    chars.next();
                    0.001
                }
                'm' => 60.0,
                's' => 1.0,
                _ => return None,
            };
    }
    number.is_empty().then_some(total)
}

fn at(v: &Value) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(v.as_str()?, &Rfc3339).ok()
}

/// The condition `kind` in `conditions`.
fn condition<'a>(conditions: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == kind)
}

/// Why the check finds `machine` unhealthy at `now` (reason, message), if it does.
fn unhealthy(s: &Store, check: &Value, machine: &Value, now: OffsetDateTime) -> Option<(&'static str, String)> {
    let spec = &check["spec"];
    if let Some(node) = machine["status"]["nodeRef"]["name"].as_str() {
        let Some(node) = s.value("", "nodes", "", node) else {
            return Some(("NodeNotFound", String::new()));
        };
        for c in spec["unhealthyConditions"].as_array().into_iter().flatten() {
            let Some(found) = condition(&node["status"]["conditions"], c["type"].as_str().unwrap_or_default()) else {
                continue;
            };
            let timeout = c["timeout"].as_str().and_then(go_duration).unwrap_or(0.0);
            if found["status"] == c["status"]
                && at(&found["lastTransitionTime"]).is_some_and(|t| t + time::Duration::seconds_f64(timeout) < now)
            {
                return Some((
                    "UnhealthyNode",
                    format!(
                        "Condition {} on Node is reporting status {} for more than {}",
                        c["type"].as_str().unwrap_or_default(),
                        c["status"].as_str().unwrap_or_default(),
                        c["timeout"].as_str().unwrap_or_default()
                    ),
                ));
            }
        }
        return None;
    }
    let startup = spec["nodeStartupTimeout"].as_str().unwrap_or("10m");
    let timeout = go_duration(startup).unwrap_or(600.0);
    if timeout == 0.0 {
        return None;
    }
    let mut since = at(&machine["metadata"]["creationTimestamp"])?;
    if let Some(c) =
        condition(&machine["status"]["conditions"], "InfrastructureReady").filter(|c| c["status"] == "True")
        && let Some(t) = at(&c["lastTransitionTime"])
    {
        since = since.max(t);
    }
    (since + time::Duration::seconds_f64(timeout) < now)
        .then(|| ("NodeStartupTimeout", format!("Node failed to report startup in {startup}")))
}

/// Whether CAPI judges the Machines of `cluster` (namespace, name) at all: its control plane
/// initialized (the v1beta2 condition, as the sim serves it) and its infrastructure (the
/// AzureCluster the Cluster names) ready.
fn judged(s: &Store, ns: &str, cluster: &str) -> bool {
    let Some(c) = s.value(CAPI, "clusters", ns, cluster) else { return false };
    let initialized = condition(&c["status"]["v1beta2"]["conditions"], "ControlPlaneInitialized")
        .is_some_and(|c| c["status"] == "True");
    let infra = c["spec"]["infrastructureRef"]["name"].as_str().unwrap_or_default();
    let ready = s.value(CAPZ, "azureclusters", ns, infra).is_some_and(|a| a["status"]["ready"] == json!(true));
    initialized && ready
}

impl Store {
    /// Runs every MachineHealthCheck once at the world's time: marks the unhealthy Machines and
    /// has their MachineSets delete them (after a VM's deletion time). Answers the Machines it
    /// sent away.
    pub fn remediate(&mut self, world: &World) -> Vec<Key> {
        let Ok(now) = OffsetDateTime::parse(&super::store::timestamp(world), &Rfc3339) else { return Vec::new() };
        let checks: Vec<Value> = self
            .objects
            .iter()
            .filter(|(k, _)| k.0 == CAPI && k.1 == "machinehealthchecks")
            .map(|(_, o)| o.value.clone())
            .collect();
        let mut sent = Vec::new();
        for check in checks {
            let ns = check["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
            let cluster = check["spec"]["clusterName"].as_str().unwrap_or_default().to_string();
            if !judged(self, &ns, &cluster) {
                continue;
            }
            let Ok(Some(selector)) = Selector::from_label_selector(&check["spec"]["selector"]) else { continue };
            let targets: Vec<(Key, Value)> = self
                .objects
                .iter()
                .filter(|(k, _)| k.0 == CAPI && k.1 == "machines" && k.2 == ns && !self.deleting.contains_key(*k))
                .filter(|(_, o)| o.value["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == cluster.as_str())
                .filter(|(_, o)| selector.matches(&o.value["metadata"]["labels"]))
                .map(|(k, o)| (k.clone(), o.value.clone()))
                .collect();
            for (k, machine) in targets {
                let Some((reason, message)) = unhealthy(self, &check, &machine, now) else { continue };
                let Some(mut obj) = self.objects.get(&k).cloned() else { continue };
                let stamp = super::store::timestamp(world);
                let mut conditions: Vec<Value> =
                    obj.value["status"]["conditions"].as_array().cloned().unwrap_or_default();
                conditions.retain(|c| c["type"] != "HealthCheckSucceeded" && c["type"] != "OwnerRemediated");
                conditions.push(json!({"type": "HealthCheckSucceeded", "status": "False", "reason": reason,
                    "message": message, "severity": "Warning", "lastTransitionTime": stamp}));
                conditions
                    .push(json!({"type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation",
                    "severity": "Warning", "lastTransitionTime": stamp}));
                obj.value["status"]["conditions"] = json!(conditions);
                self.store(obj);
                world.journal("kubernetes", "machinehealthcheck-controller", &format!("{}/{}: {message}", k.2, k.3));
                let due = world.clock.now()
                    + world.lro_duration(super::machines::DELETE_SECS.0, super::machines::DELETE_SECS.1);
                self.mark_deleting(k.clone(), due, world);
                sent.push(k);
            }
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::go_duration;

    #[test]
    fn go_durations_read_as_go_writes_them() {
        assert_eq!(go_duration("300s"), Some(300.0));
        assert_eq!(go_duration("10m"), Some(600.0));
        assert_eq!(go_duration("1h30m"), Some(5400.0));
        assert_eq!(go_duration("1.5s"), Some(1.5));
        assert_eq!(go_duration("500ms"), Some(0.5));
        assert_eq!(go_duration("0"), Some(0.0));
        assert_eq!(go_duration("5x"), None);
        assert_eq!(go_duration("5"), None);
    }
}
