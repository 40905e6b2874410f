//! The `XcspStack` custom resource: one xcsp stack, its spec held in the resource, and how far the
//! controller may go on its own (the policy). Its CRD is generated from these types
//! (`XcspStack::crd()`), and the API server serves and validates the schema.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The stack an `XcspStack` asks for, and the controller's latitude.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "xcsp.io",
    version = "v1alpha1",
    kind = "XcspStack",
    namespaced,
    status = "XcspStackStatus",
    shortname = "xstack",
    printcolumn = r#"{"name":"Policy","type":"string","jsonPath":".spec.policy"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Tunnels","type":"string","jsonPath":".status.tunnels"}"#,
    printcolumn = r#"{"name":"Plan","type":"string","jsonPath":".status.lastPlan.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct XcspStackSpec {
    /// The xcsp spec (HCL), as a `*.xcsp.hcl` file holds it.
    pub source: String,
    /// Values of the spec's variables (`--var NAME=VALUE`). Secrets do not belong here: the
    /// controller's environment (`XCSP_VAR_<NAME>`) carries those.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
    /// What the controller does on its own: `Plan` (plan, and apply only the plan whose digest
    /// `approvedPlan` names), `Repair` (apply while the spec is the one last applied, so only
    /// drift is repaired; a changed spec waits for `approvedPlan`), `Apply` (apply every plan).
    #[serde(default)]
    pub policy: Policy,
    /// The digest of a plan (`status.lastPlan.digest`) someone read and approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_plan: Option<String>,
    /// How often the stack is refreshed and reconciled: `30s`, `5m`, `1h`.
    #[serde(default = "default_interval")]
    #[schemars(regex(pattern = r"^[0-9]+[smh]?$"))]
    pub interval: String,
    /// What deleting the resource does to the stack: `Orphan` (the default: its resources stay,
    /// and so does its state) or `Destroy` (everything the stack made is deleted first).
    #[serde(default)]
    pub on_delete: OnDelete,
}

fn default_interval() -> String {
    "5m".into()
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Policy {
    #[default]
    Plan,
    Repair,
    Apply,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnDelete {
    #[default]
    Orphan,
    Destroy,
}

/// What the controller found and did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct XcspStackStatus {
    /// The resource's generation this status is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (every tunnel up and every machine a Ready Node), `Reconciled` (the last
    /// reconcile applied what it planned, or why not), then the conditions `xcsp status` gives
    /// each link, identity, pool, machine and cluster component, as `Kind.name.Type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Tunnels up on both sides, of those expected: `4/4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnels: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_plan: Option<PlanSummary>,
    /// The last plan that changed something, and how its apply ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied: Option<PlanSummary>,
    /// The spec digest last applied in full (what `Repair` keeps the clouds at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_spec: Option<String>,
    /// What `xcsp status --json` says of the stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub health: Option<serde_json::Value>,
}

/// A condition in Kubernetes' shape (`metav1.Condition`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The last plan: its digest (what `approvedPlan` names), in words, and its changes.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub digest: String,
    /// `2 to add, 1 to change, 0 to replace, 0 to destroy`.
    pub summary: String,
    /// `create azure_vpn_connection.link[0]`, one per change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// Whether it was carried out, or why not.
    pub outcome: String,
    pub planned_at: String,
}

/// Any JSON object, kept as written (`x-kubernetes-preserve-unknown-fields`).
fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;

    #[test]
    fn the_crd_is_namespaced_with_a_status_subresource_and_the_policies_as_an_enum() {
        let crd = serde_json::to_value(XcspStack::crd()).unwrap();
        assert_eq!(crd["metadata"]["name"], "xcspstacks.xcsp.io");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert!(version["subresources"]["status"].is_object(), "{version}");
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["source"]), "{spec}");
        let policy = &spec["properties"]["policy"];
        assert_eq!(policy["enum"], serde_json::json!(["Plan", "Repair", "Apply"]), "{policy}");
        let health = &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["health"];
        assert_eq!(health["x-kubernetes-preserve-unknown-fields"], true, "{health}");
    }
}
