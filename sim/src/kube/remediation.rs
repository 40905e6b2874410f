//! CAPI's MachineHealthCheck as a pool's machines meet it (cluster-api
//! `internal/controllers/machinehealthcheck`, `machinehealthcheck_targets.go` `needsRemediation`,
//! read at the v1beta1 API the sim serves): a Machine the check selects (its label selector, its
//! `clusterName`) is unhealthy when its Node has held one of `unhealthyConditions` (type and
//! status) for longer than the condition's `timeout`, or when it has no Node
//! `nodeStartupTimeout` (10 minutes unless set; `0` turns it off) after the latest of its
//! creation and its `InfrastructureReady`. Nothing is judged before the Cluster's control plane
//! is initialized and its infrastructure ready. An unhealthy Machine gets `HealthCheckSucceeded`
//! False and `OwnerRemediated` False, and its MachineSet deletes it (`machineset_controller.go`,
//! owner remediation), so a new one is made. Remediation is short-circuited, as CAPI's
//! `machinehealthcheck_controller.go` (`reconcile`, `isAllowedRemediation`, `getMaxUnhealthy`,
//! `getUnhealthyRange`) does, when more Machines are unhealthy than `maxUnhealthy` allows (an
//! integer or a percentage of the targets, rounded down; 100% unless set) or their number falls
//! outside `unhealthyRange` (`[min-max]`): the check's `RemediationAllowed` is False
//! (`TooManyUnhealthy`) and nothing is deleted. The check's status counts its targets
//! (`expectedMachines`, `currentHealthy`, `remediationsAllowed`).

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
            let verdicts: Vec<(Key, (&'static str, String))> = targets
                .iter()
                .filter_map(|(k, machine)| Some((k.clone(), unhealthy(self, &check, machine, now)?)))
                .collect();
            let allowance = allowance(&check["spec"], targets.len(), verdicts.len());
            self.write_check_status(&check, targets.len(), verdicts.len(), &allowance, world);
            if allowance.is_err() {
                continue;
            }
            for (k, (reason, message)) in verdicts {
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

    /// The check's status as CAPI writes it: its counts and `RemediationAllowed` (True, or False
    /// with `TooManyUnhealthy` and CAPI's message). Written only when it changes.
    fn write_check_status(
        &mut self,
        check: &Value,
        expected: usize,
        unhealthy: usize,
        allowance: &Result<usize, String>,
        world: &World,
    ) {
        let ns = check["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = check["metadata"]["name"].as_str().unwrap_or_default();
        let Some(kind) = super::kinds::Kind::served(CAPI, "machinehealthchecks") else { return };
        let key = super::store::key(kind, ns, name);
        let Some(mut obj) = self.objects.get(&key).cloned() else { return };
        let (ok, reason, message) = match allowance {
            Ok(_) => (true, "", ""),
            Err(message) => (false, "TooManyUnhealthy", message.as_str()),
        };
        let stamp = super::store::timestamp(world);
        let condition = super::condition(
            &obj.value["status"]["conditions"],
            "RemediationAllowed",
            ok,
            reason,
            "Warning",
            message,
            &stamp,
        );
        let status = &mut obj.value["status"];
        let before = status.clone();
        status["expectedMachines"] = json!(expected);
        status["currentHealthy"] = json!(expected - unhealthy);
        status["remediationsAllowed"] = json!(allowance.as_ref().copied().unwrap_or(0));
        status["conditions"] = json!([condition]);
        if *status != before {
            self.store(obj);
        }
    }
}

/// How many more Machines the check may remediate with `unhealthy` of `expected` targets
/// unhealthy, or CAPI's message for why it may remediate none (`machinehealthcheck_controller.go`:
/// `unhealthyRange` first, else `maxUnhealthy`, an int-or-percent scaled to the targets and
/// rounded down, `intstr.GetScaledValueFromIntOrPercent`; 100% by default).
fn allowance(spec: &Value, expected: usize, unhealthy: usize) -> Result<usize, String> {
    if let Some(range) = spec["unhealthyRange"].as_str() {
        let bounds = range
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|r| r.split_once('-'))
            .and_then(|(a, b)| Some((a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?)));
        return match bounds {
            Some((min, max)) if min <= unhealthy && unhealthy <= max => Ok(max - unhealthy),
            _ => Err(format!(
                "Remediation is not allowed, the number of not started or unhealthy machines does not fall within the range (total: {expected}, unhealthy: {unhealthy}, unhealthyRange: {range})"
            )),
        };
    }
    let shown = match &spec["maxUnhealthy"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => "100%".to_string(),
    };
    let max = match shown.strip_suffix('%') {
        Some(p) => p.parse::<usize>().ok().map(|p| p * expected / 100),
        None => shown.parse::<usize>().ok(),
    };
    match max {
        Some(max) if unhealthy <= max => Ok(max - unhealthy),
        _ => Err(format!(
            "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: {expected}, unhealthy: {unhealthy}, maxUnhealthy: {shown})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{allowance, go_duration};
    use serde_json::json;

    #[test]
    fn remediation_is_short_circuited_beyond_max_unhealthy_or_outside_the_range() {
        assert_eq!(allowance(&json!({}), 2, 2), Ok(0), "100% by default");
        assert_eq!(allowance(&json!({"maxUnhealthy": "40%"}), 5, 2), Ok(0), "40% of 5 is 2");
        assert_eq!(
            allowance(&json!({"maxUnhealthy": "40%"}), 4, 2),
            Err("Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: 4, unhealthy: 2, maxUnhealthy: 40%)".into()),
            "40% of 4 rounds down to 1"
        );
        assert_eq!(allowance(&json!({"maxUnhealthy": 3}), 10, 1), Ok(2));
        assert_eq!(allowance(&json!({"unhealthyRange": "[1-3]"}), 10, 2), Ok(1));
        assert_eq!(
            allowance(&json!({"unhealthyRange": "[1-3]", "maxUnhealthy": "100%"}), 10, 4),
            Err("Remediation is not allowed, the number of not started or unhealthy machines does not fall within the range (total: 10, unhealthy: 4, unhealthyRange: [1-3])".into())
        );
        assert!(allowance(&json!({"maxUnhealthy": "x"}), 2, 0).is_err(), "an unreadable value allows nothing");
    }

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
