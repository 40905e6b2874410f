//! The resource types the stand-ins read from the cluster each pass ([`super::bridge`]): group,
//! the version they read it at, kind, plural, scope and whether it has a `status` subresource.

/// One resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// API group; empty for core (`/api/v1`).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Has a `status` subresource: a create drops `status`, which is written after.
    pub status: bool,
}

pub const CAPZ: &str = "infrastructure.cluster.x-k8s.io";
pub const CAPI: &str = "cluster.x-k8s.io";
pub const APPS: &str = "apps";
pub const OPENSHIFT_CONFIG: &str = "config.openshift.io";
pub const MACHINECONFIGURATION: &str = "machineconfiguration.openshift.io";
pub const RBAC: &str = "rbac.authorization.k8s.io";
pub const CERTIFICATES: &str = "certificates.k8s.io";

const fn kind(group: &'static str, version: &'static str, kind: &'static str, plural: &'static str) -> Kind {
    Kind { group, version, kind, plural, namespaced: true, status: true }
}

const fn cluster_wide(k: Kind) -> Kind {
    Kind { namespaced: false, ..k }
}

const fn no_status(k: Kind) -> Kind {
    Kind { status: false, ..k }
}

/// Every type the stand-ins read; the CAPI kinds at v1beta1, which the API server serves
/// through CAPI's conversion webhook.
pub const KINDS: &[Kind] = &[
    cluster_wide(kind("", "v1", "Namespace", "namespaces")),
    no_status(kind("", "v1", "Secret", "secrets")),
    no_status(kind("", "v1", "ConfigMap", "configmaps")),
    kind(CAPZ, "v1beta1", "AzureClusterIdentity", "azureclusteridentities"),
    kind(CAPZ, "v1beta1", "AzureCluster", "azureclusters"),
    kind(CAPZ, "v1beta1", "AzureMachineTemplate", "azuremachinetemplates"),
    kind(CAPZ, "v1beta1", "AzureMachine", "azuremachines"),
    kind(CAPI, "v1beta1", "Cluster", "clusters"),
    kind(CAPI, "v1beta1", "MachineSet", "machinesets"),
    kind(CAPI, "v1beta1", "MachineHealthCheck", "machinehealthchecks"),
    kind(CAPI, "v1beta1", "Machine", "machines"),
    no_status(kind("", "v1", "ServiceAccount", "serviceaccounts")),
    cluster_wide(kind("", "v1", "Node", "nodes")),
    kind(APPS, "v1", "Deployment", "deployments"),
    cluster_wide(kind(OPENSHIFT_CONFIG, "v1", "Infrastructure", "infrastructures")),
    cluster_wide(kind(OPENSHIFT_CONFIG, "v1", "Authentication", "authentications")),
    cluster_wide(kind(OPENSHIFT_CONFIG, "v1", "Proxy", "proxies")),
    cluster_wide(kind(OPENSHIFT_CONFIG, "v1", "ImageDigestMirrorSet", "imagedigestmirrorsets")),
    cluster_wide(kind(OPENSHIFT_CONFIG, "v1", "ClusterOperator", "clusteroperators")),
    cluster_wide(kind(OPENSHIFT_CONFIG, "v1", "FeatureGate", "featuregates")),
    kind(APPS, "v1", "DaemonSet", "daemonsets"),
    // No status subresource in its CRD: the status is written with the object.
    cluster_wide(no_status(kind(OPENSHIFT_CONFIG, "v1", "Network", "networks"))),
    // The network operator's configuration; the world writes no status of it.
    cluster_wide(no_status(kind("operator.openshift.io", "v1", "Network", "networks"))),
    cluster_wide(kind(MACHINECONFIGURATION, "v1", "MachineConfigPool", "machineconfigpools")),
    cluster_wide(no_status(kind(MACHINECONFIGURATION, "v1", "MachineConfig", "machineconfigs"))),
    cluster_wide(kind(CERTIFICATES, "v1", "CertificateSigningRequest", "certificatesigningrequests")),
    cluster_wide(no_status(kind(RBAC, "v1", "ClusterRole", "clusterroles"))),
    cluster_wide(no_status(kind(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings"))),
];

impl Kind {
    /// `group/version`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `plural.group` (`secrets` for core), as error messages name a resource.
    pub fn resource(&self) -> String {
        if self.group.is_empty() { self.plural.to_string() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// The type served at `group`/`version`/`plural`.
    pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.group == group && k.version == version && k.plural == plural)
    }

    /// The type of `group` and `plural` (each is read at one version).
    pub fn served(group: &str, plural: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.group == group && k.plural == plural)
    }
}

/// The API server's resource of a kind the stand-ins read and write.
fn resource(kind: &Kind) -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(kind.group, kind.version, kind.kind),
        kind.plural,
    )
}

/// A dynamic client for `kind` (in `ns` when it is namespaced).
pub fn api(client: &kube::Client, kind: &Kind, ns: &str) -> kube::Api<kube::api::DynamicObject> {
    if kind.namespaced {
        kube::Api::namespaced_with(client.clone(), ns, &resource(kind))
    } else {
        kube::Api::all_with(client.clone(), &resource(kind))
    }
}
