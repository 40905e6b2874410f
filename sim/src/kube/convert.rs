//! Cluster API's `v1beta2`, served beside the `v1beta1` the store holds, as CAPI 1.13 serves
//! both (v1beta2 stored and preferred; reference set `crds/capi-v1.13.3`). A request at
//! `v1beta2` is converted down to `v1beta1` before anything else sees it, and every object in its
//! answer converted up, as the API server calls CAPI's conversion webhook for a version other than
//! the stored one. What moves, for the kinds served (Cluster, MachineSet, Machine,
//! MachineHealthCheck), follows kubernetes-sigs/cluster-api `api/core/v1beta1/conversion.go`
//! (`Convert_v1beta1_*_To_v1beta2_*` and back) and `core/webhooks/conversion/common.go`
//! (references):
//! - a reference to another object is `{apiGroup, kind, name}` in v1beta2; going down it gets the
//!   `apiVersion` its kind is served at and the referrer's namespace (`convertToObjectReference`);
//!   a Machine's `nodeRef` is `{name}` up, and `{apiVersion: v1, kind: Node, name}` down;
//! - durations are whole seconds (`...Seconds`) in v1beta2 and Go durations in v1beta1
//!   (`ConvertToSeconds`, `ConvertFromSeconds`: `300` is `5m0s`);
//! - a MachineHealthCheck's node conditions and startup timeout are under `checks`, its
//!   `maxUnhealthy` and `unhealthyRange` under `remediation.triggerIf`;
//! - status: v1beta1's conditions and counters go under `deprecated.v1beta1`; what v1beta1
//!   carries under `status.v1beta2` (the new conditions and counters) is v1beta2's own status;
//!   the readiness booleans are `initialization` (`infrastructureProvisioned`, ...).
//!
//! Fields the product and the sim do not use (ClusterClass topology, MachineSet `deletePolicy`,
//! machine deletion timeouts, ...) are not converted: a request carrying them at `v1beta2` loses
//! them to the `v1beta1` schema's pruning (sim/README.md, "Not emulated on the Kubernetes side").

use serde_json::{Map, Value, json};

use super::kinds::{CAPI, KINDS};

/// The version served beside the stored one.
pub const V1BETA2: &str = "v1beta2";

/// v1beta2 status fields that v1beta1 carries under `status.v1beta2`.
const V1BETA2_ONLY: &[&str] =
    &["conditions", "readyReplicas", "availableReplicas", "upToDateReplicas", "controlPlane", "workers"];

/// Fields of a kind's v1beta1 status that v1beta2 keeps under `status.deprecated.v1beta1`.
fn deprecated(kind: &str) -> &'static [&'static str] {
    match kind {
        "MachineSet" => &[
            "conditions",
            "readyReplicas",
            "availableReplicas",
            "fullyLabeledReplicas",
            "failureReason",
            "failureMessage",
        ],
        "Cluster" | "Machine" => &["conditions", "failureReason", "failureMessage"],
        _ => &["conditions"],
    }
}

/// v1beta1 readiness booleans and the `status.initialization` field each becomes.
fn initialization(kind: &str) -> &'static [(&'static str, &'static str)] {
    match kind {
        "Cluster" => {
            &[("infrastructureReady", "infrastructureProvisioned"), ("controlPlaneReady", "controlPlaneInitialized")]
        }
        "Machine" => {
            &[("bootstrapReady", "bootstrapDataSecretCreated"), ("infrastructureReady", "infrastructureProvisioned")]
        }
        _ => &[],
    }
}

/// Where a kind's references sit (`spec` paths), and its machine spec if it has one.
fn references(kind: &str) -> &'static [&'static [&'static str]] {
    match kind {
        "Cluster" => &[&["infrastructureRef"], &["controlPlaneRef"]],
        "MachineSet" => &[&["template", "spec", "infrastructureRef"], &["template", "spec", "bootstrap", "configRef"]],
        "Machine" => &[&["infrastructureRef"], &["bootstrap", "configRef"]],
        _ => &[],
    }
}

fn at<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, k| v.get_mut(*k))
}

fn is_capi(object: &Value) -> bool {
    object["apiVersion"].as_str().is_some_and(|v| v.starts_with("cluster.x-k8s.io/"))
}

/// A stored (v1beta1) object, list, or anything else in an answer, as v1beta2 shows it.
pub fn up(answer: &mut Value) {
    if let Some(items) = answer.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            up_object(item);
        }
        if answer["apiVersion"] == format!("{CAPI}/v1beta1") {
            answer["apiVersion"] = json!(format!("{CAPI}/{V1BETA2}"));
        }
        return;
    }
    if is_capi(answer) {
        up_object(answer);
    }
}

fn up_object(o: &mut Value) {
    o["apiVersion"] = json!(format!("{CAPI}/{V1BETA2}"));
    let kind = o["kind"].as_str().unwrap_or_default().to_string();
    if let Some(spec) = o.get_mut("spec") {
        for path in references(&kind) {
            if let Some(r) = at(spec, path).filter(|r| r.is_object()) {
                let group =
                    r["apiVersion"].as_str().and_then(|v| v.rsplit_once('/')).map(|(g, _)| g).unwrap_or_default();
                *r = json!({"apiGroup": group, "kind": r["kind"], "name": r["name"]});
            }
        }
        if kind == "MachineHealthCheck" {
            mhc_up(spec);
        }
    }
    let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) else { return };
    let mut old = Map::new();
    for k in deprecated(&kind) {
        if let Some(v) = status.remove(*k) {
            old.insert(k.to_string(), v);
        }
    }
    if let Some(Value::Object(new)) = status.remove("v1beta2") {
        status.extend(new);
    }
    if !old.is_empty() {
        status.insert("deprecated".into(), json!({"v1beta1": old}));
    }
    let mut init = Map::new();
    for (from, to) in initialization(&kind) {
        if status.remove(*from) == Some(json!(true)) {
            init.insert(to.to_string(), json!(true));
        }
    }
    if !init.is_empty() {
        status.insert("initialization".into(), Value::Object(init));
    }
    if let Some(node) = status.get_mut("nodeRef") {
        *node = json!({"name": node["name"]});
    }
    if let Some(Value::Object(domains)) = status.get("failureDomains").cloned() {
        let list: Vec<Value> = domains
            .into_iter()
            .map(|(name, d)| json!({"name": name, "controlPlane": d["controlPlane"].as_bool().unwrap_or(false), "attributes": d["attributes"]}))
            .collect();
        status.insert("failureDomains".into(), json!(list));
    }
}

fn mhc_up(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else { return };
    let mut checks = Map::new();
    if let Some(Value::Array(conds)) = spec.remove("unhealthyConditions") {
        let conds: Vec<Value> = conds
            .into_iter()
            .map(|c| json!({"type": c["type"], "status": c["status"], "timeoutSeconds": seconds(&c["timeout"])}))
            .collect();
        checks.insert("unhealthyNodeConditions".into(), json!(conds));
    }
    if let Some(t) = spec.remove("nodeStartupTimeout") {
        checks.insert("nodeStartupTimeoutSeconds".into(), json!(seconds(&t)));
    }
    if !checks.is_empty() {
        spec.insert("checks".into(), Value::Object(checks));
    }
    let mut trigger = Map::new();
    if let Some(m) = spec.remove("maxUnhealthy") {
        trigger.insert("unhealthyLessThanOrEqualTo".into(), m);
    }
    if let Some(r) = spec.remove("unhealthyRange") {
        trigger.insert("unhealthyInRange".into(), r);
    }
    if !trigger.is_empty() {
        spec.insert("remediation".into(), json!({"triggerIf": trigger}));
    }
}

/// A request's body at v1beta2 (an object, an apply configuration or a merge patch: partial
/// objects are converted field by field) as the store's v1beta1 holds it. `namespace` is the
/// request's, for the references.
pub fn down(body: &mut Value, namespace: &str) {
    if !body.is_object() {
        return;
    }
    let kind = body["kind"].as_str().unwrap_or_default().to_string();
    if body.get("apiVersion").is_some() {
        body["apiVersion"] = json!(format!("{CAPI}/v1beta1"));
    }
    let ns = body["metadata"]["namespace"].as_str().unwrap_or(namespace).to_string();
    if let Some(spec) = body.get_mut("spec") {
        for path in references(&kind) {
            if let Some(r) = at(spec, path).filter(|r| r.get("apiGroup").is_some()) {
                let group = r["apiGroup"].as_str().unwrap_or_default();
                let kind_name = r["kind"].as_str().unwrap_or_default();
                let api_version = KINDS
                    .iter()
                    .find(|k| k.group == group && k.kind == kind_name)
                    .map(|k| k.api_version())
                    .unwrap_or_else(|| format!("{group}/v1beta1"));
                *r = json!({"apiVersion": api_version, "kind": kind_name, "namespace": ns, "name": r["name"]});
            }
        }
        if kind == "MachineHealthCheck" {
            mhc_down(spec);
        }
    }
    let Some(status) = body.get_mut("status").and_then(Value::as_object_mut) else { return };
    let mut new = Map::new();
    for k in V1BETA2_ONLY {
        if let Some(v) = status.remove(*k) {
            new.insert(k.to_string(), v);
        }
    }
    if let Some(Value::Object(mut dep)) = status.remove("deprecated") {
        if let Some(Value::Object(old)) = dep.remove("v1beta1") {
            status.extend(old);
        }
    }
    if !new.is_empty() {
        status.insert("v1beta2".into(), Value::Object(new));
    }
    if let Some(Value::Object(init)) = status.remove("initialization") {
        for (from, to) in initialization(&kind) {
            if let Some(v) = init.get(*to) {
                status.insert(from.to_string(), v.clone());
            }
        }
    }
    if let Some(node) = status.get_mut("nodeRef") {
        *node = json!({"apiVersion": "v1", "kind": "Node", "name": node["name"]});
    }
    if let Some(Value::Array(domains)) = status.get("failureDomains").cloned() {
        let map: Map<String, Value> = domains
            .into_iter()
            .map(|d| {
                let name = d["name"].as_str().unwrap_or_default().to_string();
                (name, json!({"controlPlane": d["controlPlane"].as_bool().unwrap_or(false), "attributes": d["attributes"]}))
            })
            .collect();
        status.insert("failureDomains".into(), Value::Object(map));
    }
}

fn mhc_down(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else { return };
    if let Some(Value::Object(mut checks)) = spec.remove("checks") {
        if let Some(Value::Array(conds)) = checks.remove("unhealthyNodeConditions") {
            let conds: Vec<Value> = conds
                .into_iter()
                .map(|c| json!({"type": c["type"], "status": c["status"], "timeout": go_duration(c["timeoutSeconds"].as_i64().unwrap_or(0))}))
                .collect();
            spec.insert("unhealthyConditions".into(), json!(conds));
        }
        if let Some(s) = checks.remove("nodeStartupTimeoutSeconds").and_then(|s| s.as_i64()) {
            spec.insert("nodeStartupTimeout".into(), json!(go_duration(s)));
        }
    }
    if let Some(Value::Object(mut remediation)) = spec.remove("remediation")
        && let Some(Value::Object(mut trigger)) = remediation.remove("triggerIf")
    {
        if let Some(m) = trigger.remove("unhealthyLessThanOrEqualTo") {
            spec.insert("maxUnhealthy".into(), m);
        }
        if let Some(r) = trigger.remove("unhealthyInRange").filter(|r| r != "") {
            spec.insert("unhealthyRange".into(), r);
        }
    }
}

/// Whole seconds of a Go duration string (`300s`, `5m0s`, `1h`), rounded down as
/// `ConvertToSeconds` does.
fn seconds(d: &Value) -> i64 {
    super::remediation::go_duration(d.as_str().unwrap_or_default()).map_or(0, |d| d as i64)
}

/// Seconds as Go's `time.Duration.String()` writes them (`metav1.Duration` in JSON): `45s`,
/// `5m0s`, `1h0m0s`.
fn go_duration(s: i64) -> String {
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{sec}s"),
        (0, _) => format!("{m}m{sec}s"),
        _ => format!("{h}h{m}m{sec}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_go_writes_them_and_read_back() {
        assert_eq!(go_duration(45), "45s");
        assert_eq!(go_duration(300), "5m0s");
        assert_eq!(go_duration(3600), "1h0m0s");
        assert_eq!(go_duration(0), "0s");
        for s in [45, 300, 3600, 5400] {
            assert_eq!(seconds(&json!(go_duration(s))), s);
        }
    }

    #[test]
    fn a_machine_set_and_its_status_go_up_and_come_back_down() {
        let stored = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
            "metadata": {"name": "ms", "namespace": "ns"},
            "spec": {"replicas": 1, "template": {"spec": {
                "clusterName": "c", "bootstrap": {"dataSecretName": "user-data"},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "namespace": "ns", "name": "t"}}}},
            "status": {"replicas": 1, "readyReplicas": 1, "v1beta2": {"readyReplicas": 1, "conditions": []}, "conditions": [{"type": "Ready", "status": "True"}]},
        });
        let mut served = stored.clone();
        up(&mut served);
        assert_eq!(served["apiVersion"], "cluster.x-k8s.io/v1beta2");
        assert_eq!(
            served["spec"]["template"]["spec"]["infrastructureRef"],
            json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureMachineTemplate", "name": "t"})
        );
        assert_eq!(served["status"]["readyReplicas"], 1);
        assert_eq!(served["status"]["deprecated"]["v1beta1"]["readyReplicas"], 1);
        assert_eq!(served["status"]["deprecated"]["v1beta1"]["conditions"][0]["type"], "Ready");
        assert!(served["status"].get("v1beta2").is_none());
        down(&mut served, "ns");
        assert_eq!(served, stored);
    }

    #[test]
    fn a_health_check_moves_its_conditions_and_timeouts_into_checks() {
        let mut v2 = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
            "spec": {"clusterName": "c", "checks": {"nodeStartupTimeoutSeconds": 600,
                "unhealthyNodeConditions": [{"type": "Ready", "status": "Unknown", "timeoutSeconds": 300}]},
                "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "40%"}}},
        });
        down(&mut v2, "ns");
        assert_eq!(
            v2["spec"],
            json!({"clusterName": "c", "nodeStartupTimeout": "10m0s", "maxUnhealthy": "40%",
                "unhealthyConditions": [{"type": "Ready", "status": "Unknown", "timeout": "5m0s"}]})
        );
        up(&mut v2);
        assert_eq!(v2["spec"]["checks"]["unhealthyNodeConditions"][0]["timeoutSeconds"], 300);
        assert_eq!(v2["spec"]["checks"]["nodeStartupTimeoutSeconds"], 600);
        assert_eq!(v2["spec"]["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"], "40%");
    }

    #[test]
    fn a_machine_shows_its_node_by_name_and_its_readiness_as_initialization() {
        let mut m = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "status": {"bootstrapReady": true, "infrastructureReady": false, "phase": "Provisioned",
                "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}},
        });
        up(&mut m);
        assert_eq!(m["status"]["nodeRef"], json!({"name": "n"}));
        assert_eq!(m["status"]["initialization"], json!({"bootstrapDataSecretCreated": true}));
        assert!(m["status"].get("infrastructureReady").is_none());
    }
}
