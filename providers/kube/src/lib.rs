//! The Kubernetes side of a pool: the CAPZ/CAPI objects that make its machines, built from the
//! graph's `k8s_*` nodes (with every value known), per the CRDs of CAPZ v1.26 and CAPI v1.13
//! (served version v1beta1, which OpenShift's Cluster API uses). They live in a namespace of the
//! pool's own (`openshift-cluster-api` admits one Cluster, OpenShift's); MachineSets are
//! bootstrapped from the pool's own machine-config pool ([`machine_config`]), and CAPI reaches the
//! cluster through a service account of the pool's.
//!
//! [`object`] builds one object as JSON; [`render`] writes them as YAML documents for `oc apply`
//! or GitOps; [`KubeProvider`] applies them to the cluster with server-side apply.

pub mod components;
mod connect;
pub mod control_plane;
pub mod failure;
pub mod health_check;
mod kubeconfig;
pub mod machine_config;
pub mod nodes;
pub mod pool;
mod provider;
pub mod state;
pub mod survey;

pub use kubeconfig::server;
/// A client error as text with its innermost cause (kube's own text stops at "client error
/// (Connect)"), and, in the FIPS build, why a handshake found nothing approved in common.
pub fn why(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    let cause = inner.to_string();
    if !text.contains(&cause) {
        text = format!("{text}: {cause}");
    }
    match xcsp_crypto::explain(e) {
        Some(fips) => format!("{text} ({fips})"),
        None => text,
    }
}

pub use connect::{KubeConfig, checked_client, resource};
pub use provider::{FIELD_MANAGER, KubeProvider, MANAGED_BY};
pub use survey::{Survey, survey};

use base64::Engine;
use serde_json::{Value as Json, json};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::Attributes;
use xcsp_core::{ADDRESS_TAG, Address, ResourceType as T, STACK_TAG, tags};

/// The version of `cluster.x-k8s.io` and `infrastructure.cluster.x-k8s.io` the objects are written in.
pub const RENDERED_VERSION: &str = "v1beta1";
const CAPZ: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const CAPI: &str = "cluster.x-k8s.io/v1beta1";
const RBAC: &str = "rbac.authorization.k8s.io/v1";
const MACHINECONFIGURATION: &str = "machineconfiguration.openshift.io/v1";

/// What CAPI's controllers do in a workload cluster, as rules (openshift/cluster-api @ 303d978):
/// ClusterCache connects with `GET /` and probes it every 10 s (`controllers/clustercache/
/// cluster_accessor.go`, a 403 counts as a failure), gets its own controller pod
/// (`cluster_accessor_client.go` `runningOnWorkloadCluster`) and lists and watches Nodes (the
/// provider-ID index); the Machine controller patches Nodes (labels, annotations, taints) and
/// deletes a deleted Machine's Node; drain cordons, lists pods on the node across namespaces,
/// reads namespaces (cached: list, watch) and DaemonSets, and evicts (`internal/controllers/
/// machine/drain`); the volume-detach wait lists VolumeAttachments and PersistentVolumes.
fn capi_workload_rules() -> Json {
    json!([
        { "nonResourceURLs": ["/"], "verbs": ["get"] },
        { "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "delete"] },
        { "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] },
        { "apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"] },
        { "apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"] },
        { "apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"] },
        { "apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": ["list"] },
        { "apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["list"] },
    ])
}

/// Kubernetes objects whose content xcsp reads from the cluster at apply (a copy of what an
/// operator or controller wrote), with what they hold; `render` cannot write them.
pub fn copied_at_apply(rtype: T) -> Option<&'static str> {
    match rtype {
        T::K8sUserDataSecret => Some("the machine-config operator's pointer ignition for the pool"),
        T::K8sKubeconfigSecret => Some("a kubeconfig with the pool's service-account token"),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ObjectError {
    #[error("{address}: `{attribute}` is not known yet; run `xcsp apply` first (it comes from {what})")]
    Unknown { address: String, attribute: String, what: &'static str },
    #[error("{0} is not a Kubernetes object")]
    NotKubernetes(String),
}

/// An attribute that must be known, as JSON (`what` says where it comes from).
fn known(a: &Reader, key: &str, what: &'static str) -> Result<Json, ObjectError> {
    a.known(key).ok_or_else(|| ObjectError::Unknown { address: a.address.to_string(), attribute: key.into(), what })
}

fn metadata(a: &Reader, stack: &str) -> Json {
    json!({
        "name": a.str_or_empty("name"),
        "namespace": a.str_or_empty("namespace"),
        "labels": { STACK_TAG: stack },
        "annotations": { ADDRESS_TAG: a.address.to_string() },
    })
}

/// `https://HOST:PORT` as CAPI's `APIEndpoint` (`host`, `port`; 6443 when the URL names none).
fn endpoint(url: &str) -> Json {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().unwrap_or(6443)),
        None => (authority, 6443),
    };
    json!({ "host": host, "port": port })
}

/// The object for one `k8s_*` node, from its attributes with every input filled in.
pub fn object(stack: &str, address: &Address, attrs: &Attributes) -> Result<Json, ObjectError> {
    let a = Reader::new(address, attrs);
    let mut meta = metadata(&a, stack);
    if address.rtype.cluster_scoped() {
        if let Some(m) = meta.as_object_mut() {
            m.remove("namespace");
        }
    }
    let ns = a.str_or_empty("namespace");
    Ok(match address.rtype {
        T::K8sNamespace => json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": meta }),
        T::K8sServiceAccount => json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta }),
        T::K8sServiceAccountToken => {
            // A long-lived token the tokens controller fills in (`token`, `ca.crt`).
            meta["annotations"]["kubernetes.io/service-account.name"] = json!(a.str_or_empty("service_account"));
            json!({ "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token", "metadata": meta })
        }
        T::K8sClusterRole => json!({
            "apiVersion": RBAC, "kind": "ClusterRole", "metadata": meta, "rules": capi_workload_rules(),
        }),
        T::K8sClusterRoleBinding => json!({
            "apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": meta,
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": a.str_or_empty("role") },
            "subjects": [{ "kind": "ServiceAccount", "name": a.str_or_empty("service_account"), "namespace": a.str_or_empty("service_account_namespace") }],
        }),
        T::K8sKubeconfigSecret => {
            // CAPI caches only Secrets labelled with their cluster (`internal/setup/setup.go`);
            // `value` is written at apply from the token ([`kubeconfig::for_token`]).
            meta["labels"]["cluster.x-k8s.io/cluster-name"] = json!(a.str_or_empty("cluster_name"));
            meta["annotations"][provider::TOKEN_ANNOTATION] = json!(a.str_or_empty("token_secret"));
            json!({ "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret", "metadata": meta })
        }
        T::K8sUserDataSecret => {
            // `value` and `format` are written at apply, from what the operator wrote.
            meta["annotations"][provider::SOURCE_ANNOTATION] = json!(a.str_or_empty("source"));
            json!({ "apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta })
        }
        T::K8sMachineConfig => {
            let role = a.str_or_empty("role");
            meta["labels"][machine_config::ROLE_LABEL] = json!(role);
            let mut mc = json!({
                "apiVersion": MACHINECONFIGURATION, "kind": "MachineConfig", "metadata": meta,
                "spec": { "config": machine_config::azure_node(&a.strings("kubelet_labels")) },
            });
            if a.bool("fips") {
                mc["spec"]["fips"] = json!(true);
            }
            mc
        }
        T::K8sMachineConfigPool => {
            let role = a.str_or_empty("name");
            json!({
                "apiVersion": MACHINECONFIGURATION, "kind": "MachineConfigPool", "metadata": meta,
                "spec": {
                    // A custom pool inherits the worker's configs (MCO `docs/custom-pools.md`).
                    "machineConfigSelector": { "matchExpressions": [{
                        "key": machine_config::ROLE_LABEL, "operator": "In", "values": ["worker", role],
                    }] },
                    // The label the pool's kubelet registers its Node with (plans' `pool_label`):
                    // the Node is this pool's from its first registration, never the worker's.
                    "nodeSelector": { "matchLabels": { tags::POOL_LABEL: a.str_or_empty("pool_label") } },
                },
            })
        }
        T::K8sRuntimeClass => {
            let tolerations: Vec<Json> = a
                .known("tolerations")
                .unwrap_or(json!([]))
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|t| {
                    let mut out = json!({ "key": t["key"], "effect": t["effect"] });
                    match t["operator"].as_str() {
                        Some(op) => out["operator"] = json!(op),
                        None => {
                            out["operator"] = json!("Equal");
                            out["value"] = t["value"].clone();
                        }
                    }
                    if let Some(n) = t["toleration_seconds"].as_i64() {
                        out["tolerationSeconds"] = json!(n);
                    }
                    out
                })
                .collect();
            json!({
                "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": meta,
                "handler": a.str_or_empty("handler"),
                "scheduling": {
                    "nodeSelector": { tags::POOL_LABEL: a.str_or_empty("pool_label") },
                    "tolerations": tolerations,
                },
            })
        }
        T::K8sAzureClusterIdentity => json!({
            "apiVersion": CAPZ, "kind": "AzureClusterIdentity", "metadata": meta,
            "spec": {
                "type": a.str_or_empty("type"),
                "tenantID": a.str_or_empty("tenant_id"),
                "clientID": known(&a, "client_id", "the user-assigned identity")?,
                "allowedNamespaces": { "list": known(&a, "allowed_namespaces", "the spec")? },
            }
        }),
        T::K8sAzureCluster => {
            if a.bool("externally_managed") {
                // CAPZ leaves externally managed infrastructure alone: xcsp made the network.
                meta["annotations"][MANAGED_BY] = json!("xcsp");
            }
            if a.bool("network_managed_externally") {
                meta["annotations"]["cross-csp.openshift.io/network-managed-externally"] = json!("true");
            }
            json!({
                "apiVersion": CAPZ, "kind": "AzureCluster", "metadata": meta,
                "spec": {
                    "location": a.str_or_empty("location"),
                    "resourceGroup": a.str_or_empty("resource_group"),
                    "subscriptionID": a.str_or_empty("subscription_id"),
                    "azureEnvironment": a.str_or_empty("azure_environment"),
                    "controlPlaneEndpoint": endpoint(&a.str_or_empty("control_plane_endpoint")),
                    "identityRef": { "apiVersion": CAPZ, "kind": "AzureClusterIdentity", "name": a.str_or_empty("identity"), "namespace": ns },
                    "networkSpec": { "vnet": { "name": known(&a, "vnet", "the virtual network")?, "resourceGroup": a.str_or_empty("resource_group") } },
                }
            })
        }
        T::K8sCluster => {
            let mut spec = json!({
                "infrastructureRef": { "apiVersion": CAPZ, "kind": "AzureCluster", "name": a.str_or_empty("infrastructure_ref"), "namespace": ns },
            });
            // Its control plane, the OpenShift cluster, as an externally managed one
            // ([`control_plane`]): CAPI then drains and deletes a removed machine's Node.
            if let Some(cp) = a.opt_str("control_plane") {
                let name = cp.strip_prefix(&format!("{}/", control_plane::KIND)).unwrap_or(&cp).to_string();
                spec["controlPlaneRef"] = control_plane::reference(&ns, &name);
            }
            json!({ "apiVersion": CAPI, "kind": "Cluster", "metadata": meta, "spec": spec })
        }
        T::K8sAzureMachineTemplate => {
            let image = known(&a, "image", "the spec")?;
            json!({
                "apiVersion": CAPZ, "kind": "AzureMachineTemplate", "metadata": meta,
                "spec": { "template": { "spec": {
                    "vmSize": a.str_or_empty("vm_size"),
                    "image": match image.get("id") {
                        // A managed image or gallery version by its ARM id.
                        Some(id) => json!({ "id": id }),
                        None => json!({ "marketplace": {
                            "publisher": image["publisher"], "offer": image["offer"], "sku": image["sku"], "version": image["version"],
                        }}),
                    },
                    "osDisk": {
                        "osType": "Linux",
                        "diskSizeGB": a.opt_int("os_disk_size_gb").unwrap_or(128),
                        "managedDisk": { "storageAccountType": a.str_or_empty("os_disk_type") },
                    },
                    // What CAPZ's AzureMachine webhook would default, which runs only in
                    // openshift-cluster-api there (cluster-capi-operator's manifests-gen scopes
                    // every provider webhook to it): CAPZ `azuremachine_default.go`,
                    // `SetDefaultsAzureMachine`. The SSH key is base64 of the key line, as the
                    // webhook writes it and `virtualmachines/spec.go` decodes it for Azure.
                    "sshPublicKey": base64::engine::general_purpose::STANDARD.encode(a.str_or_empty("ssh_public_key").trim()),
                    "networkInterfaces": [{
                        "subnetName": a.str_or_empty("subnet"),
                        "acceleratedNetworking": a.bool("accelerated_networking"),
                        "privateIPConfigs": 1,
                    }],
                    "diagnostics": { "boot": { "storageAccountType": "Managed" } },
                    "disableExtensionOperations": true,
                    // CAPZ copies these onto the VM, its NIC and disks: Azure tag keys (no `/`).
                    "additionalTags": { tags::AZURE.stack: stack, tags::AZURE.address: address.to_string() },
                }}}
            })
        }
        T::K8sMachineSet => {
            let name = a.str_or_empty("name");
            // CAPI's MachineSet controller puts the cluster-name label in the selector and the
            // template's labels (cluster-api `internal/controllers/machineset/machineset_controller.go`
            // `reconcileMachineSetOwnerAndLabels`), and owns `spec.selector` from then on, which is
            // atomic: xcsp sends the same value, or its next apply conflicts with `capi-manager`.
            let cluster = a.str_or_empty("cluster_name");
            let selector = json!({ "cluster.x-k8s.io/set-name": name, "cluster.x-k8s.io/cluster-name": cluster });
            let mut labels = a.known("labels").unwrap_or(json!({}));
            labels["cluster.x-k8s.io/set-name"] = json!(name);
            labels["cluster.x-k8s.io/cluster-name"] = json!(cluster);
            let taints: Vec<Json> = a
                .known("taints")
                .unwrap_or(json!([]))
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|mut t| {
                    t["propagation"] = json!("Always");
                    t
                })
                .collect();
            let mut ms = json!({
                "apiVersion": CAPI, "kind": "MachineSet", "metadata": meta,
                "spec": {
                    "clusterName": a.str_or_empty("cluster_name"),
                    "replicas": a.opt_int("replicas").unwrap_or(0),
                    "selector": { "matchLabels": selector },
                    "template": {
                        "metadata": { "labels": labels },
                        "spec": {
                            "clusterName": a.str_or_empty("cluster_name"),
                            "bootstrap": { "dataSecretName": a.str_or_empty("bootstrap_secret") },
                            "infrastructureRef": { "apiVersion": CAPZ, "kind": "AzureMachineTemplate", "name": a.str_or_empty("infrastructure_template"), "namespace": ns },
                        }
                    }
                }
            });
            // The zone CAPZ puts the VM in (`azure/scope/machine.go`: Machine.spec.failureDomain).
            if let Some(zone) = a.opt_str("failure_domain") {
                ms["spec"]["template"]["spec"]["failureDomain"] = json!(zone);
            }
            // The CRD wants at least one taint when the list is there at all.
            if !taints.is_empty() {
                ms["spec"]["template"]["spec"]["taints"] = json!(taints);
            }
            ms
        }
        T::K8sMachineHealthCheck => {
            // cluster-api v1beta1 `MachineHealthCheckSpec`: `maxUnhealthy` (remediation only while
            // at most that many targets are unhealthy), `nodeStartupTimeout`, and the Ready
            // conditions' timeouts (xcsp_plans::spec, the defaults and why).
            let unhealthy = format!("{}s", a.opt_int("unhealthy_timeout_seconds").unwrap_or(300));
            let mut spec = json!({
                "clusterName": a.str_or_empty("cluster_name"),
                "selector": { "matchLabels": { tags::POOL_LABEL: a.str_or_empty("selector") } },
                "unhealthyConditions": [
                    { "type": "Ready", "status": "Unknown", "timeout": unhealthy },
                    { "type": "Ready", "status": "False", "timeout": unhealthy },
                ],
            });
            if let Some(m) = a.opt_int("max_unhealthy") {
                spec["maxUnhealthy"] = json!(m);
            }
            if let Some(s) = a.opt_int("node_startup_timeout_seconds") {
                spec["nodeStartupTimeout"] = json!(format!("{s}s"));
            }
            json!({ "apiVersion": CAPI, "kind": "MachineHealthCheck", "metadata": meta, "spec": spec })
        }
        _ => return Err(ObjectError::NotKubernetes(address.to_string())),
    })
}

/// The versions of `cluster.x-k8s.io` xcsp can write a pool's objects in: the one it applies
/// ([`RENDERED_VERSION`]), and `v1beta2`, which CAPI 1.13 stores and prefers.
pub const CAPI_VERSIONS: [&str; 2] = ["v1beta1", "v1beta2"];

/// `object` in the `cluster.x-k8s.io` version `version` (others are left as they are). For
/// `v1beta2` (cluster-api 1.13 `api/core/v1beta2`; the shapes checked against its CRDs in the
/// reference set): references to other objects are `{apiGroup, kind, name}` (a
/// `ContractVersionedObjectReference`, the namespace being the referrer's), and a
/// MachineHealthCheck's node conditions move under `spec.checks.unhealthyNodeConditions` with
/// their timeouts in whole seconds (`timeoutSeconds`), as CAPI's own conversion does
/// (kubernetes-sigs/cluster-api `api/core/v1beta1/conversion.go`:
/// `Convert_v1beta1_MachineHealthCheckSpec_To_v1beta2_MachineHealthCheckSpec`; the references in
/// each kind's `ConvertTo`).
pub fn in_capi_version(mut object: Json, version: &str) -> Json {
    let capi = object["apiVersion"].as_str().is_some_and(|v| v.starts_with("cluster.x-k8s.io/"));
    if !capi || version == RENDERED_VERSION {
        return object;
    }
    object["apiVersion"] = json!(format!("cluster.x-k8s.io/{version}"));
    let reference = |r: &Json| -> Json {
        let group = r["apiVersion"].as_str().and_then(|v| v.split_once('/')).map(|(g, _)| g).unwrap_or_default();
        json!({ "apiGroup": group, "kind": r["kind"], "name": r["name"] })
    };
    match object["kind"].as_str().unwrap_or_default() {
        "Cluster" => {
            let r = reference(&object["spec"]["infrastructureRef"]);
            object["spec"]["infrastructureRef"] = r;
            if !object["spec"]["controlPlaneRef"].is_null() {
                let r = reference(&object["spec"]["controlPlaneRef"]);
                object["spec"]["controlPlaneRef"] = r;
            }
        }
        "MachineSet" => {
            let r = reference(&object["spec"]["template"]["spec"]["infrastructureRef"]);
            object["spec"]["template"]["spec"]["infrastructureRef"] = r;
        }
        "MachineHealthCheck" => {
            let spec = object["spec"].as_object_mut().expect("a spec");
            let conditions: Vec<Json> = spec
                .remove("unhealthyConditions")
                .and_then(|c| c.as_array().cloned())
                .unwrap_or_default()
                .into_iter()
                .map(|c| {
                    let seconds =
                        c["timeout"].as_str().and_then(|t| t.strip_suffix('s')?.parse::<i64>().ok()).unwrap_or(0);
                    json!({ "type": c["type"], "status": c["status"], "timeoutSeconds": seconds })
                })
                .collect();
            let mut checks = json!({ "unhealthyNodeConditions": conditions });
            // `Convert_v1beta1_MachineHealthCheckSpec_To_v1beta2_MachineHealthCheckSpec`:
            // `nodeStartupTimeout` -> `checks.nodeStartupTimeoutSeconds`, `maxUnhealthy` ->
            // `remediation.triggerIf.unhealthyLessThanOrEqualTo`.
            if let Some(t) = spec.remove("nodeStartupTimeout") {
                let seconds = t.as_str().and_then(|t| t.strip_suffix('s')?.parse::<i64>().ok()).unwrap_or(0);
                checks["nodeStartupTimeoutSeconds"] = json!(seconds);
            }
            spec.insert("checks".into(), checks);
            if let Some(m) = spec.remove("maxUnhealthy") {
                spec.insert("remediation".into(), json!({ "triggerIf": { "unhealthyLessThanOrEqualTo": m } }));
            }
        }
        _ => {}
    }
    object
}

/// One YAML file per object, named `NN-kind-name.yaml` in apply order.
pub fn render(objects: &[Json]) -> Vec<(String, String)> {
    objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let kind = o["kind"].as_str().unwrap_or("object").to_ascii_lowercase();
            let name = o["metadata"]["name"].as_str().unwrap_or("unnamed");
            let text = serde_norway::to_string(o).unwrap_or_default();
            (format!("{:02}-{kind}-{name}.yaml", i + 1), text)
        })
        .collect()
}
