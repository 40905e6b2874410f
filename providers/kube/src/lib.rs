//! The Kubernetes side of a pool: the CAPZ/CAPI objects that make its machines, built from the
//! graph's `k8s_*` nodes (with every value known), per the CRDs of CAPZ v1.26 and CAPI v1.13
//! (served version v1beta1, which OpenShift's Cluster API uses) and OpenShift's conventions:
//! namespace `openshift-cluster-api`, MachineSets bootstrapped from `worker-user-data`.
//!
//! [`object`] builds one object as JSON; [`render`] writes them as YAML documents for `oc apply`
//! or GitOps; [`KubeProvider`] applies them to the cluster with server-side apply.

mod kubeconfig;
mod provider;

pub use kubeconfig::server;
pub use provider::{FIELD_MANAGER, KubeConfig, KubeProvider, resource};

use serde_json::{Value as Json, json};
use xcsp_core::provider::Attributes;
use xcsp_core::{ADDRESS_TAG, Address, ResourceType as T, STACK_TAG, Value, tags};

const CAPZ: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const CAPI: &str = "cluster.x-k8s.io/v1beta1";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ObjectError {
    #[error("{address}: `{attribute}` is not known yet; run `xcsp apply` first (it comes from {what})")]
    Unknown { address: String, attribute: String, what: &'static str },
    #[error("{0} is not a Kubernetes object")]
    NotKubernetes(String),
}

struct Attrs<'a> {
    address: &'a Address,
    attrs: &'a Attributes,
}

impl Attrs<'_> {
    fn get(&self, key: &str, what: &'static str) -> Result<Json, ObjectError> {
        match self.attrs.get(key) {
            Some(v) if !v.has_unknown() => Ok(v.unmarked().to_json()),
            _ => Err(ObjectError::Unknown { address: self.address.to_string(), attribute: key.into(), what }),
        }
    }

    fn str(&self, key: &str) -> String {
        self.attrs.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
    }
}

fn metadata(a: &Attrs, stack: &str) -> Json {
    json!({
        "name": a.str("name"),
        "namespace": a.str("namespace"),
        "labels": { STACK_TAG: stack },
        "annotations": { ADDRESS_TAG: a.address.to_string() },
    })
}

/// The object for one `k8s_*` node, from its attributes with every input filled in.
pub fn object(stack: &str, address: &Address, attrs: &Attributes) -> Result<Json, ObjectError> {
    let a = Attrs { address, attrs };
    let mut meta = metadata(&a, stack);
    let ns = a.str("namespace");
    Ok(match address.rtype {
        T::K8sAzureClusterIdentity => json!({
            "apiVersion": CAPZ, "kind": "AzureClusterIdentity", "metadata": meta,
            "spec": {
                "type": a.str("type"),
                "tenantID": a.str("tenant_id"),
                "clientID": a.get("client_id", "the user-assigned identity")?,
                "allowedNamespaces": { "list": a.get("allowed_namespaces", "the spec")? },
            }
        }),
        T::K8sAzureCluster => {
            if a.attrs.get("externally_managed") == Some(&Value::Bool(true)) {
                // CAPZ leaves externally managed infrastructure alone: xcsp made the network.
                meta["annotations"]["cluster.x-k8s.io/managed-by"] = json!("xcsp");
            }
            if a.attrs.get("network_managed_externally") == Some(&Value::Bool(true)) {
                meta["annotations"]["cross-csp.openshift.io/network-managed-externally"] = json!("true");
            }
            json!({
                "apiVersion": CAPZ, "kind": "AzureCluster", "metadata": meta,
                "spec": {
                    "location": a.str("location"),
                    "resourceGroup": a.str("resource_group"),
                    "subscriptionID": a.str("subscription_id"),
                    "azureEnvironment": a.str("azure_environment"),
                    "identityRef": { "apiVersion": CAPZ, "kind": "AzureClusterIdentity", "name": a.str("identity"), "namespace": ns },
                    "networkSpec": { "vnet": { "name": a.get("vnet", "the virtual network")?, "resourceGroup": a.str("resource_group") } },
                }
            })
        }
        T::K8sCluster => json!({
            "apiVersion": CAPI, "kind": "Cluster", "metadata": meta,
            "spec": {
                "infrastructureRef": { "apiVersion": CAPZ, "kind": "AzureCluster", "name": a.str("infrastructure_ref"), "namespace": ns },
            }
        }),
        T::K8sAzureMachineTemplate => {
            let image = a.get("image", "the spec")?;
            json!({
                "apiVersion": CAPZ, "kind": "AzureMachineTemplate", "metadata": meta,
                "spec": { "template": { "spec": {
                    "vmSize": a.str("vm_size"),
                    "image": match image.get("id") {
                        // A managed image or gallery version by its ARM id.
                        Some(id) => json!({ "id": id }),
                        None => json!({ "marketplace": {
                            "publisher": image["publisher"], "offer": image["offer"], "sku": image["sku"], "version": image["version"],
                        }}),
                    },
                    "osDisk": {
                        "osType": "Linux",
                        "diskSizeGB": a.attrs.get("os_disk_size_gb").and_then(Value::as_i64).unwrap_or(128),
                        "managedDisk": { "storageAccountType": a.str("os_disk_type") },
                    },
                    "networkInterfaces": [{
                        "subnetName": a.str("subnet"),
                        "acceleratedNetworking": a.attrs.get("accelerated_networking") == Some(&Value::Bool(true)),
                    }],
                    "disableExtensionOperations": true,
                    // CAPZ copies these onto the VM, its NIC and disks: Azure tag keys (no `/`).
                    "additionalTags": { tags::AZURE.stack: stack, tags::AZURE.address: address.to_string() },
                }}}
            })
        }
        T::K8sMachineSet => {
            let name = a.str("name");
            let selector = json!({ "cluster.x-k8s.io/set-name": name });
            let mut labels = a.get("labels", "the spec").unwrap_or(json!({}));
            labels["cluster.x-k8s.io/set-name"] = json!(name);
            let taints: Vec<Json> = a
                .get("taints", "the spec")
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
                    "clusterName": a.str("cluster_name"),
                    "replicas": a.attrs.get("replicas").and_then(Value::as_i64).unwrap_or(0),
                    "selector": { "matchLabels": selector },
                    "template": {
                        "metadata": { "labels": labels },
                        "spec": {
                            "clusterName": a.str("cluster_name"),
                            "bootstrap": { "dataSecretName": a.str("bootstrap_secret") },
                            "infrastructureRef": { "apiVersion": CAPZ, "kind": "AzureMachineTemplate", "name": a.str("infrastructure_template"), "namespace": ns },
                        }
                    }
                }
            });
            // The zone CAPZ puts the VM in (`azure/scope/machine.go`: Machine.spec.failureDomain).
            if let Some(zone) = a.attrs.get("failure_domain").and_then(Value::as_str) {
                ms["spec"]["template"]["spec"]["failureDomain"] = json!(zone);
            }
            // The CRD wants at least one taint when the list is there at all.
            if !taints.is_empty() {
                ms["spec"]["template"]["spec"]["taints"] = json!(taints);
            }
            ms
        }
        T::K8sMachineHealthCheck => json!({
            "apiVersion": CAPI, "kind": "MachineHealthCheck", "metadata": meta,
            "spec": {
                "clusterName": a.str("cluster_name"),
                "selector": { "matchLabels": { tags::POOL_LABEL: a.str("selector") } },
                "unhealthyConditions": [
                    { "type": "Ready", "status": "Unknown", "timeout": "300s" },
                    { "type": "Ready", "status": "False", "timeout": "300s" },
                ],
            }
        }),
        _ => return Err(ObjectError::NotKubernetes(address.to_string())),
    })
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
