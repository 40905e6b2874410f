//! The resource types the Kubernetes API emulator serves: names, scope, subresources, and which
//! CRD (if any) holds their schema.

/// One served resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// API group; empty for core (`/api/v1`).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Has a `status` subresource: writes to the object ignore `status`, generation ignores it.
    pub status: bool,
    /// Has a `scale` subresource (listed in discovery).
    pub scale: bool,
    /// A custom resource (its schema comes from a CRD); built-in types are not.
    pub custom: bool,
}

pub const CAPZ: &str = "infrastructure.cluster.x-k8s.io";
pub const CAPI: &str = "cluster.x-k8s.io";

const fn custom(group: &'static str, kind: &'static str, plural: &'static str, singular: &'static str) -> Kind {
    Kind {
        group,
        version: "v1beta1",
        kind,
        plural,
        singular,
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        custom: true,
    }
}

const fn core(
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short: &'static [&'static str],
) -> Kind {
    Kind {
        group: "",
        version: "v1",
        kind,
        plural,
        singular,
        namespaced: true,
        short_names: short,
        status: false,
        scale: false,
        custom: false,
    }
}

/// Every served type, grouped by API group in discovery order.
pub const KINDS: &[Kind] = &[
    Kind { namespaced: false, status: true, ..core("Namespace", "namespaces", "namespace", &["ns"]) },
    core("Secret", "secrets", "secret", &[]),
    core("ConfigMap", "configmaps", "configmap", &["cm"]),
    custom(CAPZ, "AzureClusterIdentity", "azureclusteridentities", "azureclusteridentity"),
    custom(CAPZ, "AzureCluster", "azureclusters", "azurecluster"),
    custom(CAPZ, "AzureMachineTemplate", "azuremachinetemplates", "azuremachinetemplate"),
    custom(CAPZ, "AzureMachine", "azuremachines", "azuremachine"),
    custom(CAPI, "Cluster", "clusters", "cluster"),
    Kind { scale: true, short_names: &["ms"], ..custom(CAPI, "MachineSet", "machinesets", "machineset") },
    Kind { short_names: &["mhc"], ..custom(CAPI, "MachineHealthCheck", "machinehealthchecks", "machinehealthcheck") },
    Kind { short_names: &["ma"], ..custom(CAPI, "Machine", "machines", "machine") },
    core("ServiceAccount", "serviceaccounts", "serviceaccount", &["sa"]),
    // Nodes register themselves from a booted VM; the sim boots none yet, so the list is empty
    // (sim/README.md, "Not held yet").
    Kind { namespaced: false, status: true, ..core("Node", "nodes", "node", &["no"]) },
    Kind {
        group: APPS,
        status: true,
        short_names: &["deploy"],
        ..core("Deployment", "deployments", "deployment", &[])
    },
    // OpenShift's cluster-scoped configuration (openshift/api `config/v1`); no CRD of it is in the
    // reference set, so it is served unvalidated (sim/README.md, "Not held yet").
    Kind {
        group: OPENSHIFT_CONFIG,
        namespaced: false,
        status: true,
        ..core("Infrastructure", "infrastructures", "infrastructure", &[])
    },
    Kind {
        group: OPENSHIFT_CONFIG,
        namespaced: false,
        status: true,
        ..core("Authentication", "authentications", "authentication", &[])
    },
    // The machine-config operator's types (openshift/api `machineconfiguration/v1`), cluster-wide;
    // served unvalidated for the same reason.
    Kind {
        group: MACHINECONFIGURATION,
        namespaced: false,
        status: true,
        short_names: &["mcp"],
        ..core("MachineConfigPool", "machineconfigpools", "machineconfigpool", &[])
    },
    Kind {
        group: MACHINECONFIGURATION,
        namespaced: false,
        short_names: &["mc"],
        ..core("MachineConfig", "machineconfigs", "machineconfig", &[])
    },
    // A kubelet's certificate signing requests (Kubernetes `certificates.k8s.io/v1`), which the
    // booting VMs make ([`super::boot`]); `approval` is written like `status`.
    Kind {
        group: CERTIFICATES,
        namespaced: false,
        status: true,
        short_names: &["csr"],
        ..core("CertificateSigningRequest", "certificatesigningrequests", "certificatesigningrequest", &[])
    },
    // RBAC (Kubernetes `rbac.authorization.k8s.io/v1`): stored and served; the API authorizes
    // nothing by them (sim/README.md, "Not held yet").
    Kind { group: RBAC, namespaced: false, ..core("ClusterRole", "clusterroles", "clusterrole", &[]) },
    Kind {
        group: RBAC,
        namespaced: false,
        ..core("ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", &[])
    },
];

pub const APPS: &str = "apps";
pub const OPENSHIFT_CONFIG: &str = "config.openshift.io";
pub const MACHINECONFIGURATION: &str = "machineconfiguration.openshift.io";
pub const RBAC: &str = "rbac.authorization.k8s.io";
pub const CERTIFICATES: &str = "certificates.k8s.io";

/// The served API groups (other than core) with their one version.
pub const GROUPS: &[(&str, &str)] = &[
    (CAPZ, "v1beta1"),
    (CAPI, "v1beta1"),
    (APPS, "v1"),
    (OPENSHIFT_CONFIG, "v1"),
    (MACHINECONFIGURATION, "v1"),
    (RBAC, "v1"),
    (CERTIFICATES, "v1"),
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

    /// The served type of `group` and `plural` (each is served in one version).
    pub fn served(group: &str, plural: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.group == group && k.plural == plural)
    }

    /// The type whose objects have `apiVersion` and `kind`.
    pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.kind == kind && k.api_version() == api_version)
    }

    /// The URL path of an object (`namespace` ignored for cluster-scoped types).
    pub fn path(&self, namespace: &str, name: &str) -> String {
        let prefix = if self.group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{prefix}/namespaces/{namespace}/{}/{name}", self.plural)
        } else {
            format!("{prefix}/{}/{name}", self.plural)
        }
    }
}
