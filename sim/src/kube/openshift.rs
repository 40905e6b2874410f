//! OpenShift's side of the Kubernetes API, when the world plays an OpenShift cluster on AWS
//! (`SimConfig::openshift`): what the cluster holds before anyone adds a pool, and the admission
//! of openshift/cluster-capi-operator that a pool's objects meet. Rule rows and sources:
//! `sim/README.md`, "Rule table (Kubernetes)".

use serde_json::{Value, json};

use super::kinds::Kind;
use super::status::KubeError;
use super::store::Store;
use crate::world::{OpenShift, World};

/// Where OpenShift runs Cluster API (cluster-capi-operator's `openshiftCAPINamespace`).
pub const CAPI_NAMESPACE: &str = "openshift-cluster-api";

/// The kinds cluster-capi-operator's Cluster webhook admits in `spec.infrastructureRef`
/// (`pkg/webhook/cluster.go`, the `case` of ValidateCreate and ValidateUpdate, as of commit 409c6b4).
const INFRA_KINDS: &[&str] = &[
    "AWSCluster",
    "AzureCluster",
    "GCPCluster",
    "IBMPowerVSCluster",
    "OpenStackCluster",
    "VSphereCluster",
    "Metal3Cluster",
];

fn kind(group: &str, plural: &str) -> &'static Kind {
    Kind::served(group, plural).expect("a served kind")
}

/// What an OpenShift cluster on AWS holds from install: the `Infrastructure` named `cluster`
/// (openshift/api `config/v1` `InfrastructureStatus`), the cluster's own `Cluster` in
/// `openshift-cluster-api`, named after the infrastructure and pointing at its `AWSCluster` (made
/// by cluster-capi-operator's cluster controller), and, when CAPZ is installed as the seed
/// proposes, OpenShift's CAPZ Deployment and its service account
/// (openshift/cluster-api-provider-azure `openshift/capi-operator-manifests/default/manifests.yaml`:
/// `capz-controller-manager`, `serviceAccountName: capz-manager`, a projected service-account token
/// with audience `api://AzureADTokenExchange` at `/var/run/secrets/azure/tokens`).
pub fn seed(store: &mut Store, o: &OpenShift, world: &World) {
    let infra = &o.infrastructure_name;
    let host = o.api_internal_url.trim_start_matches("https://").split(':').next().unwrap_or_default();
    let domain = host.strip_prefix("api-int.").unwrap_or(host);
    let objects = [
        (
            kind("config.openshift.io", "infrastructures"),
            json!({
                "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
                "spec": {"platformSpec": {"type": "AWS", "aws": {}}},
                "status": {
                    "infrastructureName": infra,
                    "platform": "AWS",
                    "platformStatus": {"type": "AWS", "aws": {"region": o.region}},
                    "apiServerURL": format!("https://api.{domain}:6443"),
                    "apiServerInternalURI": o.api_internal_url,
                    "etcdDiscoveryDomain": "",
                    "controlPlaneTopology": "HighlyAvailable",
                    "infrastructureTopology": "HighlyAvailable",
                },
            }),
        ),
        (
            kind("cluster.x-k8s.io", "clusters"),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                "metadata": {"name": infra, "namespace": CAPI_NAMESPACE},
                "spec": {"infrastructureRef": {
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
                    "name": infra, "namespace": CAPI_NAMESPACE,
                }},
            }),
        ),
    ];
    for (k, v) in objects {
        store.insert_new(k, v, Vec::new(), world);
    }
    // openshift/api `config/v1/types_authentication.go`: `spec.serviceAccountIssuer`, empty for
    // the default internal issuer.
    let auth = json!({"apiVersion": "config.openshift.io/v1", "kind": "Authentication", "metadata": {"name": "cluster"},
        "spec": {"serviceAccountIssuer": o.service_account_issuer.clone().unwrap_or_default()}});
    store.insert_new(kind("config.openshift.io", "authentications"), auth, Vec::new(), world);
    if !o.capz {
        return;
    }
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "capz-manager", "namespace": CAPI_NAMESPACE}});
    store.insert_new(kind("", "serviceaccounts"), sa, Vec::new(), world);
    let token = json!({"serviceAccountToken": {
        "audience": "api://AzureADTokenExchange", "expirationSeconds": 3600, "path": "azure-identity-token"}});
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "capz-controller-manager", "namespace": CAPI_NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"cluster.x-k8s.io/provider": "infrastructure-azure"}},
            "template": {
                "metadata": {"labels": {"cluster.x-k8s.io/provider": "infrastructure-azure", "azure.workload.identity/use": "true"}},
                "spec": {
                    "serviceAccountName": "capz-manager",
                    "containers": [{"name": "manager",
                        // The API server requires an image; the release payload names it.
                        "image": "quay.io/openshift/origin-azure-cluster-api-controllers:4.22",
                        "volumeMounts": [
                        {"name": "azure-identity-token", "mountPath": "/var/run/secrets/azure/tokens", "readOnly": true}]}],
                    "volumes": [{"name": "azure-identity-token", "projected": {"sources": [token]}}],
                },
            },
        },
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1},
    });
    store.insert_new(kind("apps", "deployments"), deployment, Vec::new(), world);
    // The machine approver for Cluster API Machines, which OpenShift deploys only with the
    // TechPreviewNoUpgrade or CustomNoUpgrade feature set, the one CAPI itself needs there
    // (openshift/cluster-machine-approver `manifests/04-deployment-capi.yaml`: no
    // `--machine-namespace`, so Machines of every namespace count).
    let approver = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": MACHINE_APPROVER_CAPI, "namespace": MACHINE_APPROVER_NAMESPACE,
            "annotations": {"release.openshift.io/feature-set": "TechPreviewNoUpgrade,CustomNoUpgrade"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": MACHINE_APPROVER_CAPI}},
            "template": {
                "metadata": {"labels": {"app": MACHINE_APPROVER_CAPI}},
                "spec": {"serviceAccountName": "machine-approver-sa", "containers": [{
                    "name": "machine-approver-controller",
                    "image": "quay.io/openshift/origin-cluster-machine-approver:4.22",
                    "args": ["--api-group-version=cluster.x-k8s.io/v1beta1", "--disable-status-controller=true"],
                }]},
            },
        },
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1},
    });
    store.add_namespace(MACHINE_APPROVER_NAMESPACE, world);
    store.insert_new(kind("apps", "deployments"), approver, Vec::new(), world);
}

/// Where OpenShift runs its machine approvers.
pub const MACHINE_APPROVER_NAMESPACE: &str = "openshift-cluster-machine-approver";
/// The approver of node certificates for Cluster API Machines.
pub const MACHINE_APPROVER_CAPI: &str = "machine-approver-capi";

/// The infrastructure name, when the store holds OpenShift's `Infrastructure` (else the world is
/// plain Kubernetes and OpenShift's admission does not run).
fn infrastructure_name(store: &Store) -> Option<String> {
    let infra = store.value("config.openshift.io", "infrastructures", "", "cluster")?;
    infra["status"]["infrastructureName"].as_str().map(String::from)
}

/// A denial as the API server relays one from a controller-runtime validator that returned a plain
/// error (`admission.Denied`: 403 Forbidden). The webhook's registered name in OpenShift's
/// manifests was not verified; this is CAPI's name for its Cluster validator.
fn denied(message: String) -> KubeError {
    KubeError::forbidden(&format!(
        "admission webhook \"validation.cluster.cluster.x-k8s.io\" denied the request: {message}"
    ))
}

fn infra_kind(v: &Value) -> Result<(), KubeError> {
    let Some(k) = v["spec"]["infrastructureRef"]["kind"].as_str() else { return Ok(()) };
    if INFRA_KINDS.contains(&k) {
        return Ok(());
    }
    let supported: Vec<String> = INFRA_KINDS.iter().map(|k| format!("\"{k}\"")).collect();
    Err(denied(format!(
        "spec.infrastructureRef.kind: Unsupported value: \"{k}\": supported values: {}",
        supported.join(", ")
    )))
}

/// cluster-capi-operator's Cluster webhook on a create: the infrastructure kind is one it knows,
/// and in `openshift-cluster-api` the name is the infrastructure name (`validateClusterName`:
/// only the cluster's own Cluster lives there).
pub fn validate_create(store: &Store, k: &Kind, ns: &str, v: &Value) -> Result<(), KubeError> {
    let Some(infra) = infrastructure_name(store) else { return Ok(()) };
    if k.kind != "Cluster" {
        return Ok(());
    }
    infra_kind(v)?;
    if ns == CAPI_NAMESPACE && v["metadata"]["name"].as_str() != Some(infra.as_str()) {
        return Err(denied(format!("cluster name must be {infra} in {CAPI_NAMESPACE} namespace")));
    }
    Ok(())
}

/// The same webhook on an update: only the infrastructure kind (no name check).
pub fn validate_update(store: &Store, k: &Kind, v: &Value) -> Result<(), KubeError> {
    if k.kind != "Cluster" || infrastructure_name(store).is_none() {
        return Ok(());
    }
    infra_kind(v)
}

/// The same webhook on a delete: the Clusters of `openshift-cluster-api` are never deleted (the
/// text is the one of the release that refused every Cluster deletion; the newer release refuses
/// only these, with a message not verified here).
pub fn validate_delete(store: &Store, k: &Kind, ns: &str) -> Result<(), KubeError> {
    if k.kind == "Cluster" && ns == CAPI_NAMESPACE && infrastructure_name(store).is_some() {
        return Err(denied("deletion of cluster is not allowed".into()));
    }
    Ok(())
}

/// cluster-capi-operator's Cluster admission as the upstream API server runs it: a
/// ValidatingAdmissionPolicy (CEL, admissionregistration.k8s.io/v1) and its binding, holding the
/// three rules of [`validate_create`], [`validate_update`] and [`validate_delete`] with their
/// messages; the webhook itself is not built here (its module is not served by the Go proxy this
/// project builds from). The API server prefixes each message with the policy's name.
pub fn admission_policies(infra: &str) -> Vec<Value> {
    let kinds: Vec<String> = INFRA_KINDS.iter().map(|k| format!("'{k}'")).collect();
    let supported: Vec<String> = INFRA_KINDS.iter().map(|k| format!("\\\"{k}\\\"")).collect();
    let name = "openshift-cluster-capi-operator-cluster";
    vec![
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["cluster.x-k8s.io"], "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["clusters"],
                }]},
                "validations": [
                    {
                        "expression": format!(
                            "request.operation == 'DELETE' || !has(object.spec.infrastructureRef) || !has(object.spec.infrastructureRef.kind) || object.spec.infrastructureRef.kind in [{}]",
                            kinds.join(", ")
                        ),
                        "messageExpression": format!(
                            "'spec.infrastructureRef.kind: Unsupported value: \"' + object.spec.infrastructureRef.kind + '\": supported values: {}'",
                            supported.join(", ")
                        ),
                    },
                    {
                        "expression": format!(
                            "request.operation != 'CREATE' || request.namespace != '{CAPI_NAMESPACE}' || object.metadata.name == '{infra}'"
                        ),
                        "message": format!("cluster name must be {infra} in {CAPI_NAMESPACE} namespace"),
                    },
                    {
                        "expression": format!("request.operation != 'DELETE' || request.namespace != '{CAPI_NAMESPACE}'"),
                        "message": "deletion of cluster is not allowed",
                    },
                ],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        }),
    ]
}
