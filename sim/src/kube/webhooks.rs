//! The provider admission webhooks the sim stands in for: today only CAPZ's validating webhook on
//! AzureMachineTemplate updates (`spec.template.spec` is immutable), answered as the API server
//! relays a webhook denial. Rule rows: `sim/README.md`, "Rule table (Kubernetes)".

use super::kinds::Kind;
use super::schema::{Cause, CauseReason};
use super::status::KubeError;
use serde_json::Value;

/// The name CAPZ registers its AzureMachineTemplate validating webhook under; the API server
/// quotes it when it relays a denial.
const AMT_WEBHOOK: &str = "validation.azuremachinetemplate.infrastructure.cluster.x-k8s.io";

/// CAPZ's message for a changed `spec.template.spec`.
const AMT_IMMUTABLE: &str = "AzureMachineTemplate spec.template.spec field is immutable. Please create new resource \
                             instead. ref doc: https://cluster-api.sigs.k8s.io/tasks/updating-machine-templates.html";

/// The annotation that lets a dry-run update through CAPI's immutability checks (the topology
/// controller's dry runs).
const TOPOLOGY_DRY_RUN: &str = "topology.cluster.x-k8s.io/dry-run";

/// Validating webhooks on an update of `old` (stored) to `new` (admitted: pruned, defaulted,
/// schema-valid). `rendered` is `new` as it would be answered (what the webhook is sent).
pub fn validate_update(
    kind: &Kind,
    old: &Value,
    new: &Value,
    rendered: &Value,
    dry_run: bool,
) -> Result<(), KubeError> {
    if kind.kind != "AzureMachineTemplate" {
        return Ok(());
    }
    let skip = dry_run && new["metadata"]["annotations"].get(TOPOLOGY_DRY_RUN).is_some();
    let (was, is) = (&old["spec"]["template"]["spec"], &new["spec"]["template"]["spec"]);
    if skip || was == is {
        return Ok(());
    }
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    let cause = Cause {
        reason: CauseReason::FieldValueInvalid,
        field: "AzureMachineTemplate.spec.template.spec".into(),
        // The webhook passes the whole object as the bad value; apimachinery prints it as JSON.
        message: format!("Invalid value: {rendered}: {AMT_IMMUTABLE}"),
    };
    Err(denied(AMT_WEBHOOK, KubeError::invalid(kind.kind, kind.group, name, &[cause])))
}

/// A webhook's refusal as the API server relays it: the webhook's own `Status` (code, reason,
/// details) with `admission webhook "NAME" denied the request: ` before its message.
fn denied(webhook: &str, mut e: KubeError) -> KubeError {
    e.message = format!("admission webhook \"{webhook}\" denied the request: {}", e.message);
    e
}
