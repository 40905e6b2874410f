//! Reaching the cluster: the kubeconfig and the client made from it (TLS from the module
//! xcsp-crypto installs), the API resource of each `k8s_*` type, and the version of
//! `cluster.x-k8s.io` the cluster serves. A leaf the provider, the survey and the Node
//! initialization all read.

use std::path::Path;
use std::time::Duration;

use kube::api::{ApiResource, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use xcsp_core::ResourceType as T;

/// The kind of a `k8s_*` resource type, as the API serves it; `cluster.x-k8s.io` kinds in
/// `capi_version`.
pub fn resource(rtype: T, capi_version: &str) -> Option<ApiResource> {
    let (group, version, kind, plural) = match rtype {
        T::K8sNamespace => ("", "v1", "Namespace", "namespaces"),
        T::K8sServiceAccount => ("", "v1", "ServiceAccount", "serviceaccounts"),
        T::K8sServiceAccountToken | T::K8sKubeconfigSecret | T::K8sUserDataSecret => ("", "v1", "Secret", "secrets"),
        T::K8sClusterRole => ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles"),
        T::K8sClusterRoleBinding => ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings"),
        T::K8sMachineConfig => ("machineconfiguration.openshift.io", "v1", "MachineConfig", "machineconfigs"),
        T::K8sRuntimeClass => ("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses"),
        T::K8sMachineConfigPool => {
            ("machineconfiguration.openshift.io", "v1", "MachineConfigPool", "machineconfigpools")
        }
        T::K8sAzureClusterIdentity => (
            "infrastructure.cluster.x-k8s.io",
            crate::RENDERED_VERSION,
            "AzureClusterIdentity",
            "azureclusteridentities",
        ),
        T::K8sAzureCluster => {
            ("infrastructure.cluster.x-k8s.io", crate::RENDERED_VERSION, "AzureCluster", "azureclusters")
        }
        T::K8sAzureMachineTemplate => (
            "infrastructure.cluster.x-k8s.io",
            crate::RENDERED_VERSION,
            "AzureMachineTemplate",
            "azuremachinetemplates",
        ),
        T::K8sCluster => ("cluster.x-k8s.io", capi_version, "Cluster", "clusters"),
        T::K8sMachineSet => ("cluster.x-k8s.io", capi_version, "MachineSet", "machinesets"),
        T::K8sMachineHealthCheck => ("cluster.x-k8s.io", capi_version, "MachineHealthCheck", "machinehealthchecks"),
        _ => return None,
    };
    Some(ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural))
}

/// CAPI's Machines, in `capi_version`.
pub(crate) fn machines(capi_version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("cluster.x-k8s.io", capi_version, "Machine"), "machines")
}

/// The Machines of MachineSet `set`: CAPI labels each with its set's name.
pub(crate) fn of_set(set: &str) -> ListParams {
    ListParams::default().labels(&format!("cluster.x-k8s.io/set-name={set}"))
}

/// The version of `cluster.x-k8s.io` xcsp writes and reads the pool's objects in: the first of
/// those the cluster serves, in its order of preference, that xcsp can write
/// ([`crate::CAPI_VERSIONS`]); [`crate::RENDERED_VERSION`] when the cluster serves none of them
/// or cannot be asked (the write then fails with the cluster's own answer). CAPI 1.13 serves
/// `v1beta2` and `v1beta1` and prefers `v1beta2` (its CRDs: `v1beta2` is the storage version).
pub async fn capi_version(client: &kube::Client) -> &'static str {
    let Ok(groups) = client.list_api_groups().await else { return crate::RENDERED_VERSION };
    let Some(group) = groups.groups.iter().find(|g| g.name == "cluster.x-k8s.io") else {
        return crate::RENDERED_VERSION;
    };
    let preferred = group.preferred_version.as_ref().map(|v| v.version.as_str());
    let mut served: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
    served.sort_by_key(|v| Some(*v) != preferred);
    served
        .into_iter()
        .find_map(|v| crate::CAPI_VERSIONS.iter().copied().find(|k| *k == v))
        .unwrap_or(crate::RENDERED_VERSION)
}

/// Where the cluster is and how long to wait for it.
#[derive(Debug, Clone)]
pub struct KubeConfig {
    /// The kubeconfig file; its current context unless `context` names another.
    pub kubeconfig: std::path::PathBuf,
    pub context: Option<String>,
    /// How long deleting a MachineSet may wait for its machines (VMs take minutes to go), and
    /// writing one for their Nodes.
    pub machine_timeout: Duration,
    /// Whether a MachineSet's write waits for its `readyReplicas` to reach its replicas.
    pub wait_for_nodes: bool,
    /// Any other operation, retries included.
    pub timeout: Duration,
    pub poll_interval: Duration,
}

impl KubeConfig {
    pub fn new(kubeconfig: &Path) -> KubeConfig {
        KubeConfig {
            kubeconfig: kubeconfig.to_path_buf(),
            context: None,
            machine_timeout: Duration::from_secs(30 * 60),
            wait_for_nodes: false,
            timeout: Duration::from_secs(5 * 60),
            poll_interval: Duration::from_secs(5),
        }
    }
}

/// A client for the cluster and context `config` names; the errors name the file, never a credential.
pub(crate) async fn client(config: &KubeConfig) -> Result<kube::Client, String> {
    let kc = Kubeconfig::read_from(&config.kubeconfig)
        .map_err(|e| format!("cannot read the kubeconfig {}: {e}", config.kubeconfig.display()))?;
    let options = KubeConfigOptions { context: config.context.clone(), ..Default::default() };
    let client_config = kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(|e| format!("the kubeconfig {} is not usable: {e}", config.kubeconfig.display()))?;
    checked_client(client_config)
}

/// The client for `config`. kube builds its TLS from the process-wide provider, so that is
/// installed first and checked ([`xcsp_crypto::install`]: the module's, FIPS in the FIPS build);
/// `crypto/tests/tls.rs` asserts `fips()` on the configuration kube makes from it.
pub fn checked_client(config: kube::Config) -> Result<kube::Client, String> {
    xcsp_crypto::install().map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| format!("no Kubernetes client: {e}"))
}
