//! The stand-ins for what cannot run in the local cluster, as clients of its upstream API server
//! ([`crate::cluster`]): OpenShift's install ([`openshift`], [`mco`]), CAPZ's making of VMs in
//! the ARM emulator ([`capz`]), each VM's boot and kubelet ([`boot`]) and where a Machine's join
//! is held ([`joins`]), run each pass by the [`bridge`] over a snapshot of the cluster's objects
//! ([`store`]). See `sim/README.md` ("The cluster").

pub mod boot;
pub mod bridge;
pub mod capz;
pub mod joins;
pub mod kinds;
pub mod mco;
pub mod openshift;
pub mod store;

use serde_json::{Value, json};

/// A v1beta1 condition: `type` and `status`, and when false its `reason` and `severity`; a
/// `message` when there is one; the `lastTransitionTime` of the condition of the same type, status
/// and reason in `old` (a list of conditions), else `now`.
fn condition(old: &Value, kind: &str, ok: bool, reason: &str, severity: &str, message: &str, now: &str) -> Value {
    let status = if ok { "True" } else { "False" };
    let since = old
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind && c["status"] == status && c["reason"].as_str().unwrap_or("") == reason)
        .map(|c| c["lastTransitionTime"].clone())
        .unwrap_or_else(|| json!(now));
    let mut c = json!({"type": kind, "status": status, "lastTransitionTime": since});
    if !ok {
        c["reason"] = json!(reason);
        c["severity"] = json!(severity);
    }
    if !message.is_empty() {
        c["message"] = json!(message);
    }
    c
}

/// The conditions CAPI and CAPZ write from `(type, ok, reason, message)`: severity `Info` for a
/// wait, `Error` for a failure with a message ([`condition`]).
pub(super) fn conditions_json(
    wanted: &[(&'static str, bool, &'static str, String)],
    old: &Value,
    now: &str,
) -> Vec<Value> {
    wanted
        .iter()
        .map(|(kind, ok, reason, message)| {
            let severity = if message.is_empty() { "Info" } else { "Error" };
            condition(old, kind, *ok, reason, severity, message, now)
        })
        .collect()
}
