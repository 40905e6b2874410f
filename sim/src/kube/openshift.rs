//! OpenShift's side of the Kubernetes API, when the world plays an OpenShift cluster on AWS
//! (`SimConfig::openshift`): what the cluster holds before anyone adds a pool, and the admission
//! of openshift/cluster-capi-operator that a pool's objects meet, as a ValidatingAdmissionPolicy
//! the upstream API server enforces. Sources: `sim/README.md`, "The cluster".

use serde_json::{Value, json};

use super::kinds::Kind;
use super::store::Store;
use crate::world::OpenShift;

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

/// The cluster's control-plane Nodes on AWS, with `--control-plane-nodes`: one per zone of the
/// region, as the installer places them, labelled and tainted as OpenShift's masters
/// (`node-role.kubernetes.io/master:NoSchedule`), each with its zone (what AWS's cloud controller
/// sets), which the node lifecycle controller groups Nodes by when it decides a disruption.
pub fn control_plane_nodes(o: &OpenShift) -> Vec<String> {
    if !o.control_plane_nodes {
        return vec![];
    }
    (0..3).map(|i| format!("{}-master-{i}", o.infrastructure_name)).collect()
}

fn control_plane_node(o: &OpenShift, i: usize, name: &str, now: &str) -> Value {
    let zone = format!("{}{}", o.region, ["a", "b", "c"][i % 3]);
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "",
            "topology.kubernetes.io/region": o.region, "topology.kubernetes.io/zone": zone}},
        "spec": {"providerID": format!("aws:///{zone}/i-0{i}c0ffee{i}0000000"),
            "taints": [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "250"},
            "allocatable": {"cpu": "7500m", "memory": "30Gi", "pods": "250"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
}

/// What an OpenShift cluster on AWS holds from install: the `Infrastructure` named `cluster`
/// (openshift/api `config/v1` `InfrastructureStatus`), the cluster's own `Cluster` in
/// `openshift-cluster-api`, named after the infrastructure and pointing at its `AWSCluster` (made
/// by cluster-capi-operator's cluster controller), and, when CAPZ is installed as the seed
/// proposes, OpenShift's CAPZ Deployment and its service account
/// (openshift/cluster-api-provider-azure `openshift/capi-operator-manifests/default/manifests.yaml`:
/// `capz-controller-manager`, `serviceAccountName: capz-manager`, a projected service-account token
/// with audience `api://AzureADTokenExchange` at `/var/run/secrets/azure/tokens`).
pub fn seed(store: &mut Store, o: &OpenShift, now: &str) {
    for (i, name) in control_plane_nodes(o).iter().enumerate() {
        store.insert(kind("", "nodes"), control_plane_node(o, i, name, now));
    }
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
        // openshift/api `config/v1/types_feature.go`: the cluster's feature set.
        (
            kind("config.openshift.io", "featuregates"),
            json!({
                "apiVersion": "config.openshift.io/v1", "kind": "FeatureGate", "metadata": {"name": "cluster"},
                "spec": {"featureSet": o.feature_set.spec_value()},
            }),
        ),
    ];
    for (k, v) in objects {
        store.insert(k, v);
    }
    if o.feature_set.runs_capi() {
        // cluster-capi-operator's ClusterOperator (`manifests/0000_30_cluster-api_12_clusteroperator.yaml`,
        // TechPreviewNoUpgrade only) and the cluster's own `Cluster`, which its cluster controller makes.
        store.insert(
            kind("config.openshift.io", "clusteroperators"),
            json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": "cluster-api"},
                "spec": {},
                "status": {"conditions": [
                    {"type": "Available", "status": "True", "lastTransitionTime": now, "reason": "AsExpected"},
                    {"type": "Degraded", "status": "False", "lastTransitionTime": now, "reason": "AsExpected"},
                ], "versions": [{"name": "operator", "version": "4.22.0"}]}}),
        );
        store.insert(
            kind("cluster.x-k8s.io", "clusters"),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                "metadata": {"name": infra, "namespace": CAPI_NAMESPACE},
                "spec": {"infrastructureRef": {
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
                    "name": infra, "namespace": CAPI_NAMESPACE,
                }},
            }),
        );
    }
    // openshift/api `config/v1/types_network.go`: what the network operator reports, the overlay
    // MTU among it (an installer's default networks, OVN-Kubernetes).
    let cluster_network = json!([{"cidr": "10.128.0.0/14", "hostPrefix": 23}]);
    let network = json!({"apiVersion": "config.openshift.io/v1", "kind": "Network", "metadata": {"name": "cluster"},
        "spec": {"clusterNetwork": cluster_network, "serviceNetwork": ["172.30.0.0/16"], "networkType": "OVNKubernetes"},
        "status": {"clusterNetwork": cluster_network, "serviceNetwork": ["172.30.0.0/16"], "networkType": "OVNKubernetes",
            "clusterNetworkMTU": o.cluster_network_mtu}});
    store.insert(kind("config.openshift.io", "networks"), network);
    // openshift/api `operator/v1/types_network.go`: the network operator's configuration, where
    // IPsec between nodes is turned on (`ipsecConfig.mode`: `Disabled`, `External` or `Full`).
    let mode = if o.ovn_ipsec { "Full" } else { "Disabled" };
    let operator = json!({"apiVersion": "operator.openshift.io/v1", "kind": "Network", "metadata": {"name": "cluster"},
        "spec": {"clusterNetwork": cluster_network, "serviceNetwork": ["172.30.0.0/16"],
            "defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig": {"ipsecConfig": {"mode": mode}}}}});
    store.insert(kind("operator.openshift.io", "networks"), operator);
    // openshift/api `config/v1/types_authentication.go`: `spec.serviceAccountIssuer`, empty for
    // the default internal issuer.
    let auth = json!({"apiVersion": "config.openshift.io/v1", "kind": "Authentication", "metadata": {"name": "cluster"},
        "spec": {"serviceAccountIssuer": o.service_account_issuer.clone().unwrap_or_default()}});
    store.insert(kind("config.openshift.io", "authentications"), auth);
    // openshift/api `config/v1/types_proxy.go`: the cluster-wide proxy; its status holds what the
    // network operator computes from the spec, the noProxy with the cluster's own networks and
    // names added (cluster-network-operator `pkg/util/proxyconfig/no_proxy.go`).
    let (spec, status) = match &o.proxy {
        Some(p) => {
            let mut no = vec![
                ".cluster.local".to_string(),
                ".svc".into(),
                "10.128.0.0/14".into(),
                "127.0.0.1".into(),
                "169.254.169.254".into(),
                "172.30.0.0/16".into(),
                format!("api-int.{infra}.sim.internal"),
                "localhost".into(),
            ];
            no.extend(p.no_proxy.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from));
            no.sort();
            no.dedup();
            (
                json!({"httpsProxy": p.https_proxy, "httpProxy": p.https_proxy, "noProxy": p.no_proxy}),
                json!({"httpsProxy": p.https_proxy, "httpProxy": p.https_proxy, "noProxy": no.join(",")}),
            )
        }
        None => (json!({}), json!({})),
    };
    let proxy = json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
        "spec": spec, "status": status});
    store.insert(kind("config.openshift.io", "proxies"), proxy);
    // The install-config the installer leaves (openshift/installer `pkg/asset/manifests/openshift.go`:
    // ConfigMap `kube-system/cluster-config-v1`, key `install-config`; `pkg/types/installconfig.go`),
    // as much of it as the world knows.
    let install_config = format!(
        "apiVersion: v1\nbaseDomain: sim.internal\nmetadata:\n  name: {infra}\nplatform:\n  aws:\n    region: {region}\nfips: {fips}\n",
        region = o.region,
        fips = o.fips
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-config-v1", "namespace": "kube-system"},
        "data": {"install-config": install_config}});
    store.insert(kind("", "configmaps"), cm);
    if !o.mirrors.is_empty() {
        // openshift/api `config/v1/types_image_digest_mirror_set.go`.
        let entries: Vec<Value> = o
            .mirrors
            .iter()
            .map(|m| {
                let policy = if m.never_contact_source { "NeverContactSource" } else { "AllowContactingSource" };
                json!({"source": m.source, "mirrors": m.mirrors, "mirrorSourcePolicy": policy})
            })
            .collect();
        let idms = json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet",
            "metadata": {"name": "image-mirrors"}, "spec": {"imageDigestMirrors": entries}});
        store.insert(kind("config.openshift.io", "imagedigestmirrorsets"), idms);
    }
    if o.ebs_csi {
        seed_ebs_csi(store, now);
    }
    // The machine approver of Machine API Machines, on every cluster whatever its feature set
    // (openshift/cluster-machine-approver `manifests/04-deployment.yaml`): its image is the
    // release's `cluster-machine-approver`, which an approver for Cluster API Machines also runs.
    let mapi_approver = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "machine-approver", "namespace": MACHINE_APPROVER_NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "machine-approver"}},
            "template": {
                "metadata": {"labels": {"app": "machine-approver"}},
                "spec": {"serviceAccountName": "machine-approver-sa", "containers": [{
                    "name": "machine-approver-controller",
                    "image": MACHINE_APPROVER_IMAGE,
                    "command": ["/usr/bin/machine-approver"],
                    "args": ["--api-group-version=machine.openshift.io/v1beta1", "--max-concurrent-reconciles=10"],
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }], "nodeSelector": approver_placement()["nodeSelector"], "tolerations": approver_placement()["tolerations"]},
            },
        },
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1},
    });
    store.add_namespace(MACHINE_APPROVER_NAMESPACE);
    store.insert(
        kind("", "serviceaccounts"),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "machine-approver-sa", "namespace": MACHINE_APPROVER_NAMESPACE}}),
    );
    store.insert(kind("apps", "deployments"), mapi_approver);
    // Where OpenShift publishes the CSR signer's CA to the approver (its Role there,
    // `manifests/01-rbac.yaml`).
    store.add_namespace("openshift-config-managed");
    if !o.capz {
        return;
    }
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "capz-manager", "namespace": CAPI_NAMESPACE}});
    store.insert(kind("", "serviceaccounts"), sa);
    // What the cluster's owner set in CAPZ's environment, if anything (OpenShift's manifests set
    // no AZURE_AUTHORITY_HOST).
    let env: Vec<Value> = o
        .capz_authority_host
        .iter()
        .filter(|v| !v.is_empty())
        .map(|v| json!({"name": "AZURE_AUTHORITY_HOST", "value": v}))
        .collect();
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
                    "containers": [{"name": "manager", "env": env,
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
    store.insert(kind("apps", "deployments"), deployment);
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
                    "image": MACHINE_APPROVER_IMAGE,
                    "args": ["--api-group-version=cluster.x-k8s.io/v1beta1", "--disable-status-controller=true"],
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }], "nodeSelector": approver_placement()["nodeSelector"], "tolerations": approver_placement()["tolerations"]},
            },
        },
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1},
    });
    store.add_namespace(MACHINE_APPROVER_NAMESPACE);
    store.insert(kind("apps", "deployments"), approver);
}

/// Where OpenShift runs its machine approvers: on the masters, tolerating their taint, evicted
/// two minutes after their Node becomes unreachable or not ready
/// (openshift/cluster-machine-approver `manifests/04-deployment.yaml`).
fn approver_placement() -> Value {
    json!({"nodeSelector": {"node-role.kubernetes.io/master": ""}, "tolerations": [
        {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120}]})
}

/// The release's machine approver image, as the world names it.
pub const MACHINE_APPROVER_IMAGE: &str = "quay.io/openshift/origin-cluster-machine-approver:4.22";

/// The namespace and name of the AWS EBS CSI driver's node DaemonSet.
pub const EBS_CSI_NAMESPACE: &str = "openshift-cluster-csi-drivers";
pub const EBS_CSI_NODE: &str = "aws-ebs-csi-driver-node";

/// The AWS EBS CSI driver as OpenShift installs it on AWS: its node DaemonSet on every Linux node,
/// tolerating every taint (openshift/csi-operator `assets/overlays/aws-ebs/generated/standalone/node.yaml`),
/// and the `storage` ClusterOperator, Available and done until the DaemonSet's rollout says
/// otherwise ([`storage_operator`]).
fn seed_ebs_csi(store: &mut Store, now: &str) {
    store.add_namespace(EBS_CSI_NAMESPACE);
    let labels = json!({"app": EBS_CSI_NODE});
    let ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": EBS_CSI_NODE, "namespace": EBS_CSI_NAMESPACE},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "csi-driver", "image": "quay.io/openshift/origin-aws-ebs-csi-driver:4.22",
                        "args": ["node", "--endpoint=$(CSI_ENDPOINT)"]}],
                },
            },
        },
    });
    store.insert(kind("apps", "daemonsets"), ds);
    store.insert(kind("config.openshift.io", "clusteroperators"), storage_operator(None, now));
}

/// The annotation where the CSI driver node service controller records the DaemonSet generation
/// whose rollout finished.
pub const STABLE_GENERATION: &str = "storage.openshift.io/stable-generation";

/// The `storage` ClusterOperator with Progressing as `progressing` says (the controller's message
/// while the node service rolls out; `None`: not progressing), as cluster-storage-operator copies
/// the driver operator's `AWSEBSDriverNodeServiceControllerProgressing` under its
/// `AWSEBSCSIDriverOperatorCR` prefix (its `crcontroller.go`; the composed names are read from the
/// code, not seen on a cluster).
pub fn storage_operator(progressing: Option<&str>, now: &str) -> Value {
    let (status, reason, message) = match progressing {
        Some(m) => (
            "True",
            "AWSEBSCSIDriverOperatorCR_AWSEBSDriverNodeServiceController_Deploying",
            format!("AWSEBSCSIDriverOperatorCRProgressing: AWSEBSDriverNodeServiceControllerProgressing: {m}"),
        ),
        None => ("False", "AsExpected", "AWSEBSCSIDriverOperatorCRProgressing: All is well".to_string()),
    };
    // A condition without a message omits it, as the operator writes it.
    let cond = |t: &str, status: &str, reason: &str, message: &str| {
        let mut c = json!({"type": t, "status": status, "reason": reason, "lastTransitionTime": now});
        if !message.is_empty() {
            c["message"] = json!(message);
        }
        c
    };
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": "storage"},
    "spec": {},
    "status": {"conditions": [
        cond("Available", "True", "AsExpected", "DefaultStorageClassControllerAvailable: StorageClass provided by supplied CSI Driver instead of the cluster-storage-operator"),
        cond("Progressing", status, reason, &message),
        cond("Degraded", "False", "AsExpected", ""),
        cond("Upgradeable", "True", "AsExpected", "All is well"),
    ]}})
}

/// Whether the node service is rolling out, and the controller's message: openshift/library-go
/// `pkg/operator/csi/csidrivernodeservicecontroller` `isProgressing` at 93ac920 (release 4.21 on):
/// not once the generation is recorded stable, however many Pods are missing after that; else
/// waiting for the DaemonSet controller, for updated Pods, for available Pods.
fn node_service_progressing(ds: &Value) -> Option<String> {
    let generation = ds["metadata"]["generation"].as_i64().unwrap_or(0);
    if ds["metadata"]["annotations"][STABLE_GENERATION].as_str() == Some(generation.to_string().as_str()) {
        return None;
    }
    let status = &ds["status"];
    let n = |k: &str| status[k].as_i64().unwrap_or(0);
    if generation != n("observedGeneration") {
        Some("Waiting for DaemonSet to act on changes".into())
    } else if n("updatedNumberScheduled") < n("desiredNumberScheduled") {
        Some(format!("Waiting for DaemonSet to update {} node pods", n("desiredNumberScheduled")))
    } else if n("numberUnavailable") > 0 {
        Some("Waiting for DaemonSet to deploy node pods".into())
    } else {
        None
    }
}

/// The `storage` operator's pass over the EBS CSI node DaemonSet (whose status upstream's
/// DaemonSet controller writes): a generation whose rollout finished is recorded in
/// [`STABLE_GENERATION`] on the DaemonSet (library-go `updateLastStableGeneration`), and the
/// ClusterOperator's Progressing follows [`node_service_progressing`]; written only when it
/// changes, so a condition keeps its transition time.
pub fn settle_storage_operator(store: &mut Store, now: &str) {
    let Some(mut ds) = store.value("apps", "daemonsets", EBS_CSI_NAMESPACE, EBS_CSI_NODE).cloned() else { return };
    let Some(co) = store.value("config.openshift.io", "clusteroperators", "", "storage").cloned() else { return };
    let progressing = node_service_progressing(&ds);
    let generation = ds["metadata"]["generation"].as_i64().unwrap_or(0).to_string();
    if progressing.is_none() && ds["metadata"]["annotations"][STABLE_GENERATION].as_str() != Some(generation.as_str()) {
        ds["metadata"]["annotations"][STABLE_GENERATION] = json!(generation);
        store.insert(kind("apps", "daemonsets"), ds);
    }
    let mut next = storage_operator(progressing.as_deref(), now);
    let old = co["status"]["conditions"].as_array().cloned().unwrap_or_default();
    // A condition of the same status keeps its transition time.
    if let Some(conds) = next["status"]["conditions"].as_array_mut() {
        for c in conds.iter_mut() {
            if let Some(o) = old.iter().find(|o| o["type"] == c["type"] && o["status"] == c["status"]) {
                c["lastTransitionTime"] = o["lastTransitionTime"].clone();
            }
        }
    }
    if next["status"]["conditions"] == co["status"]["conditions"] {
        return;
    }
    next["metadata"] = co["metadata"].clone();
    store.insert(kind("config.openshift.io", "clusteroperators"), next);
}

/// Where OpenShift runs its machine approvers.
pub const MACHINE_APPROVER_NAMESPACE: &str = "openshift-cluster-machine-approver";
/// The approver of node certificates for Cluster API Machines.
pub const MACHINE_APPROVER_CAPI: &str = "machine-approver-capi";

/// cluster-capi-operator's Cluster admission as the upstream API server runs it: a
/// ValidatingAdmissionPolicy (CEL, admissionregistration.k8s.io/v1) and its binding, holding the
/// three rules of its Cluster webhook (`pkg/webhook/cluster.go`): on create and update, the
/// infrastructure kind is one it knows; on create in `openshift-cluster-api`, the name is the
/// infrastructure name (`validateClusterName`: only the cluster's own Cluster lives there); the
/// Clusters of `openshift-cluster-api` are never deleted. The webhook itself is not built here (its module is not served by the Go proxy this
/// project builds from). Each refusal is 403 Forbidden, as a controller-runtime webhook's denial
/// is (`admission.Denied`), where a policy's default is 422 Invalid; the API server prefixes
/// each message with the policy's name.
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
                            "request.operation == 'DELETE' || !has(object.spec) || !has(object.spec.infrastructureRef) || !has(object.spec.infrastructureRef.kind) || object.spec.infrastructureRef.kind in [{}]",
                            kinds.join(", ")
                        ),
                        "messageExpression": format!(
                            "'spec.infrastructureRef.kind: Unsupported value: \"' + object.spec.infrastructureRef.kind + '\": supported values: {}'",
                            supported.join(", ")
                        ),
                        "reason": "Forbidden",
                    },
                    {
                        "expression": format!(
                            "request.operation != 'CREATE' || request.namespace != '{CAPI_NAMESPACE}' || object.metadata.name == '{infra}'"
                        ),
                        "message": format!("cluster name must be {infra} in {CAPI_NAMESPACE} namespace"),
                        "reason": "Forbidden",
                    },
                    {
                        "expression": format!("request.operation != 'DELETE' || request.namespace != '{CAPI_NAMESPACE}'"),
                        "message": "deletion of cluster is not allowed",
                        "reason": "Forbidden",
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
