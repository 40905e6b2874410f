//! The pool's Cluster as CAPI sees a cluster whose control plane runs elsewhere: an
//! `XcspControlPlane` object the Cluster's `controlPlaneRef` names, reporting itself externally
//! managed and initialized.
//!
//! Why: CAPI drains and deletes a deleted Machine's Node only when `isDeleteNodeAllowed` lets it
//! (cluster-api v1.13 `internal/controllers/machine/machine_controller.go`). In a Cluster with no
//! control-plane Machines and no `controlPlaneRef` it returns `errNoControlPlaneNodes`, and
//! `reconcileDelete` skips the drain and the Node's deletion: every scale-down or remediation
//! left a NotReady Node behind, and the GPU pods on it were never evicted. An object whose
//! `status.externalManagedControlPlane` is true (`util.IsExternalManagedControlPlane`) lets it,
//! as EKS's and AKS's providers do; CAPI then cordons, drains (PodDisruptionBudgets respected)
//! and deletes the Node after the VM. The choice over deleting leftover Nodes from xcsp's
//! controller: CAPI does it itself, drain included, with no xcsp process running.
//!
//! What CAPI needs of the kind (cluster-api v1.13): its CRD named by `flect` (`xcspcontrolplanes`),
//! labelled with the contract version it follows (`cluster.x-k8s.io/v1beta2: v1alpha1`,
//! `internal/contract/version.go`), namespaced; the object's `status.initialization.
//! controlPlaneInitialized` (`cluster_controller_phases.go` `reconcileControlPlane`); no
//! `spec.version`, so the MachineSet preflight checks have nothing to compare. The manager reads
//! it through a ClusterRole aggregated into its own (`cluster.x-k8s.io/aggregate-to-manager`,
//! kept by OpenShift's manifests as `capi-aggregated-manager-role`).

use serde_json::{Value as Json, json};

/// The kind's group, version, kind and plural.
pub const GROUP: &str = "controlplane.xcsp.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "XcspControlPlane";
pub const PLURAL: &str = "xcspcontrolplanes";
/// The CRD's name: `<plural>.<group>`.
pub const CRD: &str = "xcspcontrolplanes.controlplane.xcsp.io";
/// The ClusterRole that lets CAPI's manager read and own the kind.
pub const CAPI_ROLE: &str = "xcsp-capi-control-planes";
/// The label xcsp marks what it installed for every stack with (never removed if absent).
pub const INSTALLED_BY: &str = "xcsp.io/installed-by";

/// The CRD: namespaced, a status subresource, the Cluster API contract label.
pub fn crd() -> Json {
    let schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": { "type": "object" },
            "spec": { "type": "object", "description": "Empty: the control plane is the OpenShift cluster the pool joins." },
            "status": {
                "type": "object",
                "properties": {
                    "externalManagedControlPlane": { "type": "boolean" },
                    "initialization": {
                        "type": "object",
                        "properties": { "controlPlaneInitialized": { "type": "boolean" } },
                    },
                    "conditions": {
                        "type": "array",
                        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    },
                },
            },
        },
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD,
            "labels": { "cluster.x-k8s.io/v1beta2": VERSION, INSTALLED_BY: "xcsp" },
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": { "kind": KIND, "listKind": format!("{KIND}List"), "plural": PLURAL, "singular": "xcspcontrolplane" },
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": schema },
            }],
        },
    })
}

/// The ClusterRole aggregated into CAPI's manager's: the Cluster controller owns, watches and,
/// when the Cluster goes, deletes the object.
pub fn capi_role() -> Json {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": CAPI_ROLE,
            "labels": { "cluster.x-k8s.io/aggregate-to-manager": "true", INSTALLED_BY: "xcsp" },
        },
        // No more than CAPI uses, and than xcsp's controller holds (RBAC lets a subject grant
        // only what it holds itself): the status is CAPI's to read, not to list or delete.
        "rules": [
            { "apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch", "patch", "update", "delete"] },
            { "apiGroups": [GROUP], "resources": [format!("{PLURAL}/status")], "verbs": ["get", "patch", "update"] },
        ],
    })
}

/// The object of the Cluster `name` in `ns`, labelled like the stack's other objects.
pub fn object(ns: &str, name: &str, labels: &Json) -> Json {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": { "name": name, "namespace": ns, "labels": labels },
        "spec": {},
    })
}

/// Its status: externally managed, initialized, available.
pub fn status(at: &str) -> Json {
    json!({ "status": {
        "externalManagedControlPlane": true,
        "initialization": { "controlPlaneInitialized": true },
        "conditions": [{
            "type": "Available", "status": "True", "reason": "ExternallyManaged",
            "message": "the OpenShift cluster the pool joins", "lastTransitionTime": at,
        }],
    }})
}

/// The Cluster's `controlPlaneRef` to it, in CAPI v1beta1's shape (`in_capi_version` converts).
pub fn reference(ns: &str, name: &str) -> Json {
    json!({ "apiVersion": format!("{GROUP}/{VERSION}"), "kind": KIND, "name": name, "namespace": ns })
}

/// What a rendered Cluster (`xcsp render`, for `oc apply`) needs beside it: the kind, CAPI's
/// ClusterRole for it, and the object its `controlPlaneRef` names; nothing for any other object.
/// The object's status is a status write, which `oc apply` does not make: whoever applies the
/// rendered files sets it (`oc patch --subresource=status`).
pub fn rendered_with(cluster: &Json) -> Vec<Json> {
    let r = &cluster["spec"]["controlPlaneRef"];
    if cluster["kind"] != "Cluster" || r["kind"] != KIND {
        return Vec::new();
    }
    let ns = cluster["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = r["name"].as_str().unwrap_or_default();
    vec![crd(), capi_role(), object(ns, name, &cluster["metadata"]["labels"])]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_what_capi_resolves_a_reference_by() {
        let crd = crd();
        // `contract.CalculateCRDName`: the lower-cased kind pluralized, then the group.
        assert_eq!(crd["metadata"]["name"], format!("{}s.{GROUP}", KIND.to_ascii_lowercase()));
        assert_eq!(crd["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"], VERSION);
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let role = capi_role();
        assert_eq!(role["metadata"]["labels"]["cluster.x-k8s.io/aggregate-to-manager"], "true");
        let s = status("2026-12-02T00:00:00Z");
        assert_eq!(s["status"]["externalManagedControlPlane"], true);
        assert_eq!(s["status"]["initialization"]["controlPlaneInitialized"], true);
    }

    #[test]
    fn a_rendered_cluster_comes_with_its_control_plane_and_nothing_else_does() {
        let cluster = json!({"kind": "Cluster", "metadata": {"namespace": "pool", "name": "c", "labels": {"xcsp.io/stack": "s"}},
            "spec": {"controlPlaneRef": reference("pool", "c")}});
        let with = rendered_with(&cluster);
        let kinds: Vec<&str> = with.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(kinds, ["CustomResourceDefinition", "ClusterRole", KIND]);
        assert_eq!(with[2]["metadata"]["namespace"], "pool");
        assert!(rendered_with(&json!({"kind": "MachineSet"})).is_empty());
    }
}
