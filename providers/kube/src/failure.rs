//! A machine Azure will never make, read from its AzureMachine: what `apply` stops waiting on at
//! once (naming the machine, the cloud's code and the fix) instead of waiting `machine_timeout`
//! for a Node that cannot come, and what `xcsp status` names as its cause.
//!
//! CAPZ (v1.26) reports a VM it could not make in two ways, read here from the AzureMachine:
//! - **It gave up for good**: `status.failureReason` and `status.failureMessage` are set and the
//!   AzureMachine is no longer reconciled (`controllers/azuremachine_controller.go`
//!   `reconcileNormal`: "Error state detected, skipping reconciliation"; set for its terminal
//!   `ReconcileError`s, such as a VM size missing from the location's SKUs, `InvalidConfiguration`,
//!   or a terminal create error, `CreateError`). `UpdateError` (its VM deleted out of band) is
//!   left to the pool's MachineHealthCheck, which replaces the machine.
//! - **ARM refused the VM's PUT**: CAPZ retries it with back-off for ever, the error never
//!   terminal to it, and marks `VMRunning` False with reason `Failed`, severity `Error`, and the
//!   SDK's error text as the message (`azure/scope/machine.go` `UpdatePutStatus`;
//!   `azure/services/async/async.go` `CreateOrUpdateResource`), which carries the ARM code on a
//!   line `ERROR CODE: <code>` and the response body after it (azure-sdk-for-go `azcore`
//!   `ResponseError.Error`). Only the codes of [`TERMINAL`] count: a request Azure refuses for
//!   what it asks (an image that is not there, a size or zone not offered, a quota, a bad value),
//!   which the same request meets again. A code that passes (throttling, a conflict with another
//!   operation, an image version still replicating, a role assignment not yet propagated) is
//!   waited out as before.

use serde::Serialize;
use serde_json::Value as Json;

/// The ARM codes of a VM's PUT that the same request meets again, each with what to do.
/// Microsoft Learn: "Troubleshoot ... PlatformImageNotFound" and Compute Gallery image errors
/// (`GalleryImageNotFound`), "Resolve errors for SKU not available" (`SkuNotAvailable`), "Resolve
/// quota errors" (`OperationNotAllowed` for a quota, `QuotaExceeded`), "Common Azure deployment
/// errors" (`InvalidParameter`, `BadRequest`).
pub const TERMINAL: &[(&str, &str)] = &[
    (
        "GalleryImageNotFound",
        "the pool's `image_id` names a gallery image the subscription does not have in this location: set it to an image version that exists (`az sig image-version list`), or boot the release's RHCOS VHD, imported by xcsp: `image { vhd = \"<url>\" }` with the URL `xcsp preflight` shows",
    ),
    (
        "ImageNotFound",
        "the pool's `image_id` names an image that does not exist: set it to one that does, or use `image { vhd = \"<url>\" }` (the URL `xcsp preflight` shows)",
    ),
    (
        "PlatformImageNotFound",
        "the pool's Marketplace image is not in this location: `az vm image list --location <location> --all` lists what there is; or use `image { vhd = \"<url>\" }` (the URL `xcsp preflight` shows)",
    ),
    (
        "SkuNotAvailable",
        "the pool's `vm_size` is not offered to the subscription in this location or zone: choose another size, zone or location (`az vm list-skus --location <location>`), or ask Azure support for access",
    ),
    (
        "OperationNotAllowed",
        "Azure refuses the VM, most often for a vCPU quota it would exceed: raise the family's and the regional quota (Azure portal, Quotas: Compute) or lower `replicas`",
    ),
    (
        "QuotaExceeded",
        "a quota of the subscription would be exceeded: raise it (Azure portal, Quotas) or lower `replicas`",
    ),
    (
        "InvalidParameter",
        "Azure refuses a value of the VM CAPZ asked for (its message names it): correct the pool's spec",
    ),
    ("BadRequest", "Azure refuses the VM as asked (its message says why): correct the pool's spec"),
];

/// `status.failureReason` values CAPZ sets for a machine it will not make; `UpdateError` (the VM
/// deleted out of band) is remediation's, not a reason to stop.
const GAVE_UP: &[&str] = &["CreateError", "InvalidConfiguration", "UnsupportedChange"];

/// A machine Azure will not make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Terminal {
    /// The AzureMachine.
    pub azure_machine: String,
    /// The ARM code (`GalleryImageNotFound`), or CAPZ's failure reason when it gave none.
    pub code: String,
    /// Azure's message (the response's `error.message`), else CAPZ's first line.
    pub message: String,
    /// What to do.
    pub fix: String,
}

impl Terminal {
    /// One line: the code, Azure's message and the fix.
    pub fn describe(&self) -> String {
        format!("Azure will not make its VM: {}: {}; {}", self.code, self.message.trim_end_matches('.'), self.fix)
    }
}

/// The ARM code and message in the text of an azure-sdk-for-go error: the `ERROR CODE: ` line and
/// the response body's `error.message` after it.
pub fn arm_error(text: &str) -> Option<(String, String)> {
    let at = text.find("ERROR CODE: ")?;
    let rest = &text[at + "ERROR CODE: ".len()..];
    let code = rest.lines().next()?.trim().to_string();
    if code.is_empty() {
        return None;
    }
    // The body, between the separator lines after the code.
    let message = rest
        .find('{')
        .and_then(|start| {
            let body = &rest[start..];
            let end = body.find("\n---").unwrap_or(body.len());
            serde_json::from_str::<Json>(&body[..end]).ok()
        })
        .and_then(|b| b["error"]["message"].as_str().or(b["message"].as_str()).map(str::to_string))
        .unwrap_or_default();
    Some((code, message))
}

fn fix_of(code: &str) -> Option<&'static str> {
    TERMINAL.iter().find(|(c, _)| c.eq_ignore_ascii_case(code)).map(|(_, f)| *f)
}

/// What makes AzureMachine `name` of `status` terminal, if anything ([module docs](self)).
pub fn of(name: &str, status: &Json) -> Option<Terminal> {
    let name = name.to_string();
    if let Some(reason) = status["failureReason"].as_str().filter(|r| GAVE_UP.contains(r)) {
        let text = status["failureMessage"].as_str().unwrap_or_default();
        let (code, message) = arm_error(text)
            .unwrap_or_else(|| (reason.to_string(), text.lines().next().unwrap_or_default().trim().to_string()));
        let fix = fix_of(&code).map(str::to_string).unwrap_or_else(|| {
            format!("CAPZ gave up on this machine ({reason}) and will not retry it: correct the pool's spec, then `xcsp apply` rolls the pool to a new template")
        });
        return Some(Terminal { azure_machine: name, code, message, fix });
    }
    status["conditions"].as_array().into_iter().flatten().find_map(|c| {
        if c["status"] != "False" || c["reason"] != "Failed" {
            return None;
        }
        let (code, message) = arm_error(c["message"].as_str()?)?;
        let fix = fix_of(&code)?;
        Some(Terminal { azure_machine: name.clone(), code, message, fix: fix.to_string() })
    })
}

/// CAPZ's AzureMachines (infrastructure.cluster.x-k8s.io/v1beta1, the version CAPZ v1.26 serves
/// and stores).
pub(crate) fn azure_machines() -> kube::api::ApiResource {
    crate::survey::resource("infrastructure.cluster.x-k8s.io", "v1beta1", "AzureMachine", "azuremachines")
}

/// The terminal failure of a Machine without a Node (`status.nodeRef` unset), read from the
/// AzureMachine its `spec.infrastructureRef` names among `azure_machines`.
pub fn of_machine(machine: &kube::api::DynamicObject, azure_machines: &[kube::api::DynamicObject]) -> Option<Terminal> {
    if machine.data["status"]["nodeRef"].is_object() {
        return None;
    }
    let name = machine.data["spec"]["infrastructureRef"]["name"].as_str()?;
    let infra = azure_machines.iter().find(|a| a.metadata.name.as_deref() == Some(name))?;
    of(name, &infra.data["status"])
}

/// The AzureMachines of namespace `ns`; none where they cannot be read (no CAPZ served, or a
/// client not allowed to list them): then no failure is known, and the wait goes on as before.
pub async fn azure_machines_in(client: &kube::Client, ns: &str) -> Vec<kube::api::DynamicObject> {
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(client.clone(), ns, &azure_machines());
    match api.list(&Default::default()).await {
        Ok(l) => l.items,
        Err(e) => {
            tracing::debug!("cannot list the AzureMachines of {ns}: {e}");
            vec![]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// CAPZ's `VMRunning` condition message for a refused PUT, in the SDK's format.
    fn refused(code: &str, status: u16) -> String {
        format!(
            "virtualmachine failed to create or update. err: failed to create or update resource rg/t4-abc (service: virtualmachine): PUT https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/t4-abc\n--------------------------------------------------------------------------------\nRESPONSE {status}: {status} Not Found\nERROR CODE: {code}\n--------------------------------------------------------------------------------\n{{\n  \"error\": {{\n    \"code\": \"{code}\",\n    \"message\": \"The gallery image /x is not available in this region or does not exist.\"\n  }}\n}}\n--------------------------------------------------------------------------------\n"
        )
    }

    fn machine(conditions: Json, status: Json) -> Json {
        let mut m = json!({ "metadata": { "name": "t4-abc" }, "status": status });
        m["status"]["conditions"] = conditions;
        m
    }

    #[test]
    fn a_refused_put_of_a_terminal_code_is_terminal_with_azures_message() {
        let m = machine(
            json!([{ "type": "VMRunning", "status": "False", "reason": "Failed", "severity": "Error", "message": refused("GalleryImageNotFound", 404) }]),
            json!({}),
        );
        let t = of("t4-abc", &m["status"]).expect("terminal");
        assert_eq!(t.code, "GalleryImageNotFound");
        assert_eq!(t.azure_machine, "t4-abc");
        assert!(t.message.starts_with("The gallery image /x is not available"), "{}", t.message);
        assert!(t.fix.contains("image_id") && t.fix.contains("vhd"), "{}", t.fix);
    }

    #[test]
    fn a_code_that_passes_and_a_vm_being_made_are_not_terminal() {
        for code in ["TooManyRequests", "ImageVersionNotReady", "AuthorizationFailed", "AnotherOperationInProgress"] {
            let m = machine(
                json!([{ "type": "VMRunning", "status": "False", "reason": "Failed", "message": refused(code, 409) }]),
                json!({}),
            );
            assert_eq!(of("t4-abc", &m["status"]), None, "{code}");
        }
        let creating = machine(
            json!([{ "type": "VMRunning", "status": "False", "reason": "Creating", "message": "" }]),
            json!({}),
        );
        assert_eq!(of("t4-abc", &creating["status"]), None);
    }

    #[test]
    fn capz_giving_up_is_terminal_and_a_vm_deleted_out_of_band_is_not() {
        let sku = machine(
            json!([]),
            json!({ "failureReason": "InvalidConfiguration", "failureMessage": "reconcile error that cannot be recovered occurred: resource sku with name 'Standard_X' and category 'virtualMachines' not found in location 'eastus'" }),
        );
        let t = of("t4-abc", &sku["status"]).expect("terminal");
        assert_eq!(t.code, "InvalidConfiguration");
        assert!(t.message.contains("resource sku with name 'Standard_X'"), "{}", t.message);
        let deleted = machine(json!([]), json!({ "failureReason": "UpdateError", "failureMessage": "VM deleted" }));
        assert_eq!(of("t4-abc", &deleted["status"]), None);
    }
}
