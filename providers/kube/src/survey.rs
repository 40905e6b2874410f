//! What xcsp reads from the cluster before it changes anything (`xcsp preflight`; plan and apply
//! when a kubeconfig is in reach): is it OpenShift and which infrastructure, which Cluster API
//! versions it serves, and whether OpenShift's CAPZ runs there and as whom.
//!
//! Sources of what is looked for:
//! - `Infrastructure` `cluster` (openshift/api `config/v1/types_infrastructure.go`:
//!   `status.infrastructureName`, `status.platformStatus.type`, `status.apiServerInternalURI`).
//! - OpenShift's CAPZ: Deployment `capz-controller-manager` in `openshift-cluster-api`, its
//!   `serviceAccountName` and the audience of its projected service-account token
//!   (openshift/cluster-api-provider-azure `openshift/capi-operator-manifests/default/manifests.yaml`).
//! - The Clusters of `openshift-cluster-api`: cluster-capi-operator admits one there, named after
//!   the infrastructure (`pkg/webhook/cluster.go`).
//! - `Authentication` `cluster` (openshift/api `config/v1/types_authentication.go`:
//!   `spec.serviceAccountIssuer`, the issuer of the cluster's service-account tokens; empty means
//!   the default internal issuer `https://kubernetes.default.svc`).
//! - `Network` `cluster` (openshift/api `config/v1/types_network.go`: `status.clusterNetworkMTU`,
//!   the overlay MTU every node's OVN-Kubernetes runs at) and the network operator's `Network`
//!   `cluster` (`operator/v1/types_network.go`: `spec.defaultNetwork.ovnKubernetesConfig.ipsecConfig.mode`,
//!   `Full` when pod traffic between nodes is IPsec-encrypted).
//! - The install-config the installer leaves in ConfigMap `kube-system/cluster-config-v1` (key
//!   `install-config`; openshift/installer `pkg/asset/manifests/openshift.go`), whose `fips` says
//!   the cluster runs in FIPS mode (`pkg/types/installconfig.go`); the installer then writes
//!   `99-master-fips` and `99-worker-fips` MachineConfigs with `spec.fips`.
//! - The cluster-wide proxy: `Proxy` `cluster` (openshift/api `config/v1/types_proxy.go`:
//!   `status.httpsProxy`, `status.noProxy`, comma-separated hostnames, CIDRs and IPs).
//! - The boot images the cluster's release publishes: ConfigMap
//!   `openshift-machine-config-operator/coreos-bootimages`, keys `releaseVersion` and `stream`
//!   (CoreOS stream metadata; the Azure Marketplace images without a purchase plan under
//!   `architectures.x86_64.rhel-coreos-extensions.marketplace.azure.no-purchase-plan`,
//!   `hyperVGen1` and `hyperVGen2`: openshift/enhancements `enhancements/rhcos/marketplace-images.md`;
//!   machine-config-operator `pkg/operator/bootimages.go`).

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde::Serialize;
use serde_json::Value as Json;

use crate::connect::KubeConfig;

/// The namespace OpenShift runs Cluster API and its providers in.
pub const OPENSHIFT_CAPI_NAMESPACE: &str = "openshift-cluster-api";
/// The name of OpenShift's CAPZ Deployment.
pub const CAPZ_DEPLOYMENT: &str = "capz-controller-manager";

/// OpenShift's view of itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Infrastructure {
    pub name: String,
    pub platform: String,
    pub api_internal_url: String,
}

/// Where CAPZ runs and the token it presents to Entra.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capz {
    pub namespace: String,
    pub deployment: String,
    pub service_account: String,
    /// The audiences of the projected service-account tokens mounted in its pod.
    pub audiences: Vec<String>,
    /// `AZURE_AUTHORITY_HOST` in its manager container's environment: where its workload-identity
    /// credential asks Entra for tokens (`None`: the public cloud's authority).
    pub authority_host: Option<String>,
}

/// What one read of the cluster found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Survey {
    /// `None`: not OpenShift (no `config.openshift.io` Infrastructure).
    pub openshift: Option<Infrastructure>,
    /// The served versions of `cluster.x-k8s.io`, preferred first (empty: not served).
    pub capi_versions: Vec<String>,
    /// The served versions of `infrastructure.cluster.x-k8s.io`, preferred first.
    pub capz_versions: Vec<String>,
    pub capz: Option<Capz>,
    /// The Clusters in `openshift-cluster-api`: name and infrastructure kind.
    pub clusters: Vec<(String, String)>,
    /// The issuer of the cluster's service-account tokens, when OpenShift's `Authentication`
    /// says (`None`: no such object; the internal issuer when its field is empty).
    pub service_account_issuer: Option<String>,
    /// Whether OpenShift's machine approver for Cluster API Machines runs
    /// ([`MACHINE_APPROVER_NAMESPACE`]/[`MACHINE_APPROVER_CAPI`]): without it a new node's
    /// certificate signing requests stay Pending.
    pub machine_approver: bool,
    /// The cluster's overlay MTU (`Network` `cluster` `status.clusterNetworkMTU`), when OpenShift
    /// says.
    pub cluster_network_mtu: Option<i64>,
    /// OVN-Kubernetes encrypts pod traffic between nodes with IPsec (`ipsecConfig.mode: Full`), which
    /// adds 46 bytes to Geneve's 100 per packet.
    pub ovn_ipsec: bool,
    /// The cluster's FIPS mode, as its install-config says (`None`: no install-config readable).
    pub fips: Option<bool>,
    /// What the worker configs (MachineConfigs of role `worker`, which every worker pool
    /// inherits) do that an Azure node cannot: AWS's own units, and the time servers of a chrony
    /// config.
    pub worker_configs: WorkerConfigs,
    /// The boot images the cluster's release publishes, when it does.
    pub boot_images: Option<BootImages>,
    /// The cluster-wide proxy, when one is set: its HTTPS proxy and the `noProxy` in effect
    /// (`Proxy` `cluster`, `status`, which adds the cluster's own networks to the spec's).
    pub proxy: Option<(String, Vec<String>)>,
    /// The cluster's image mirrors: ImageDigestMirrorSets and ImageTagMirrorSets
    /// (`config.openshift.io/v1`) and the older ImageContentSourcePolicies
    /// (`operator.openshift.io/v1alpha1`), each source with its mirrors.
    pub mirrors: Vec<Mirror>,
    /// Whether the AWS EBS CSI driver's node DaemonSet ([`EBS_CSI_NAMESPACE`]/[`EBS_CSI_NODE`]) runs.
    pub ebs_csi_node: bool,
    /// The cluster's feature set (`FeatureGate` `cluster` `spec.featureSet`, `Default` when
    /// empty); `None`: no FeatureGate object (not OpenShift).
    pub feature_set: Option<String>,
    /// Whether cluster-capi-operator's ClusterOperator `cluster-api` exists: OpenShift runs
    /// Cluster API here (docs/src/concepts/cluster-api-on-openshift.md).
    pub capi_operator: bool,
    /// The Cluster API CRDs the cluster has (`*.cluster.x-k8s.io`), each with who installed it.
    pub capi_crds: Vec<CrdOwner>,
}

/// One Cluster API CRD and what the cluster says of its owner.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrdOwner {
    pub name: String,
    /// The xcsp stack that installed it, when one did.
    pub xcsp_stack: Option<String>,
    /// Who installed it, as its labels, annotations and field managers say ([`crd_owner`]).
    pub owner: String,
    /// Its served versions, the storage version first.
    pub versions: Vec<String>,
}

/// Who installed a CRD: cluster-capi-operator's label (`capi-operator.openshift.io/managed-by`,
/// release-4.22 on), the cluster-version operator's release annotations
/// (`release.openshift.io/*`, `include.release.openshift.io/*`, which only its manifests carry),
/// a provider's label (`cluster.x-k8s.io/provider`, which clusterctl and the providers' release
/// manifests set), xcsp's own label, else the first field manager that wrote it.
pub fn crd_owner(crd: &Json) -> String {
    let meta = &crd["metadata"];
    if let Some(component) = meta["labels"]["capi-operator.openshift.io/managed-by"].as_str() {
        return format!("cluster-capi-operator (component {component})");
    }
    if let Some(stack) = meta["labels"][xcsp_core::STACK_TAG].as_str() {
        return format!("xcsp (stack `{stack}`)");
    }
    let release = meta["annotations"].as_object().is_some_and(|a| {
        a.keys().any(|k| k.starts_with("release.openshift.io/") || k.starts_with("include.release.openshift.io/"))
    });
    if release {
        return "the cluster-version operator (a release manifest)".into();
    }
    if let Some(p) = meta["labels"]["cluster.x-k8s.io/provider"].as_str() {
        return format!("provider `{p}` (clusterctl or its release manifests)");
    }
    match meta["managedFields"].as_array().and_then(|m| m.first()).and_then(|m| m["manager"].as_str()) {
        Some(m) => format!("field manager `{m}`"),
        None => "unknown".into(),
    }
}

/// A CRD's served versions, its storage version first.
fn crd_versions(crd: &Json) -> Vec<String> {
    let mut v: Vec<(bool, String)> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|v| (v["storage"].as_bool() != Some(true), v["name"].as_str().unwrap_or_default().to_string()))
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

/// The namespace and name of OpenShift's AWS EBS CSI node DaemonSet.
pub const EBS_CSI_NAMESPACE: &str = "openshift-cluster-csi-drivers";
pub const EBS_CSI_NODE: &str = "aws-ebs-csi-driver-node";

/// One mirrored source of the cluster's image mirror objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mirror {
    /// The object that says it, e.g. `ImageDigestMirrorSet/release`.
    pub object: String,
    pub source: String,
    pub mirrors: Vec<String>,
    /// `mirrorSourcePolicy: NeverContactSource`: a pull never falls back to the source.
    pub never_contact_source: bool,
}

impl Mirror {
    /// The host of each mirror (`registry.example:5000/ns/repo` gives `registry.example:5000`).
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.mirrors.iter().map(|m| m.split('/').next().unwrap_or(m))
    }
}

/// An Amazon ECR registry host (`<account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]`), which the
/// kubelet reaches only with credentials from its EC2 instance role.
pub fn is_ecr(host: &str) -> bool {
    let host = host.split(':').next().unwrap_or(host);
    (host.contains(".dkr.ecr.") || host.contains(".dkr.ecr-fips."))
        && (host.ends_with(".amazonaws.com") || host.ends_with(".amazonaws.com.cn"))
}

/// The mirrors of one listed mirror object (`spec.<field>[]`, each `source`, `mirrors`,
/// `mirrorSourcePolicy`).
fn mirrors_of(kind: &str, o: &DynamicObject, field: &str) -> Vec<Mirror> {
    let name = o.metadata.name.clone().unwrap_or_default();
    o.data["spec"][field]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| Mirror {
            object: format!("{kind}/{name}"),
            source: m["source"].as_str().unwrap_or_default().to_string(),
            mirrors: m["mirrors"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(String::from))
                .collect(),
            never_contact_source: m["mirrorSourcePolicy"].as_str() == Some("NeverContactSource"),
        })
        .collect()
}

/// An Azure Marketplace image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MarketplaceImage {
    pub publisher: String,
    pub offer: String,
    pub sku: String,
    pub version: String,
}

/// The cluster's boot images for Azure on x86_64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootImages {
    /// The OpenShift release that publishes them (`releaseVersion`).
    pub release: String,
    pub gen1: Option<MarketplaceImage>,
    pub gen2: Option<MarketplaceImage>,
    /// The release's RHCOS VHD (`azure-disk`'s `url`), which an install imports into a gallery.
    pub vhd: Option<String>,
}

/// The Azure Marketplace boot images of a `coreos-bootimages` ConfigMap's data.
pub fn boot_images(data: &Json) -> Option<BootImages> {
    let stream: Json = serde_json::from_str(data["stream"].as_str()?).ok()?;
    let extensions = &stream["architectures"]["x86_64"]["rhel-coreos-extensions"];
    let plan = &extensions["marketplace"]["azure"]["no-purchase-plan"];
    let image = |generation: &str| {
        let i = &plan[generation];
        Some(MarketplaceImage {
            publisher: i["publisher"].as_str()?.into(),
            offer: i["offer"].as_str()?.into(),
            sku: i["sku"].as_str()?.into(),
            version: i["version"].as_str()?.into(),
        })
    };
    Some(BootImages {
        release: data["releaseVersion"].as_str().unwrap_or_default().to_string(),
        gen1: image("hyperVGen1"),
        gen2: image("hyperVGen2"),
        vhd: extensions["azure-disk"]["url"].as_str().map(str::to_string),
    })
}

/// One reason Entra would refuse the token CAPZ presents for a federated credential: the
/// credential's value against the cluster's, and where the cluster says it. Entra accepts an
/// assertion only from a credential with the same issuer and subject and one of its audiences
/// (Microsoft Learn, "Workload identity federation": issuer, subject and audience must match;
/// Entra answers AADSTS70021 otherwise).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    /// `issuer`, `subject` or `audience`.
    pub field: &'static str,
    pub trusted: String,
    pub presented: String,
}

impl Refusal {
    /// What is wrong, after the identity's name ("workload identity `capz` ...").
    pub fn describe(&self, s: &Survey) -> String {
        let deployment =
            s.capz.as_ref().map(|c| format!("Deployment {}/{}", c.namespace, c.deployment)).unwrap_or_default();
        let clause = match self.field {
            "subject" => format!("trusts `{}`, but CAPZ runs as `{}` ({deployment})", self.trusted, self.presented),
            "issuer" => format!(
                "trusts tokens issued by `{}`, but the cluster's service-account tokens are issued by `{}` (Authentication cluster, spec.serviceAccountIssuer)",
                self.trusted, self.presented
            ),
            _ => format!(
                "expects a token for `{}`, but CAPZ's projected token is for `{}` ({deployment})",
                self.trusted, self.presented
            ),
        };
        format!("{clause}; Entra would refuse the exchange (AADSTS70021)")
    }
}

impl Survey {
    /// Why Entra would refuse CAPZ's token for a credential trusting `issuer`, `subject` and
    /// `audiences` (empty: it would not, as far as the cluster says). Without CAPZ only the
    /// issuer can be compared; without an `Authentication` object, not the issuer.
    pub fn exchange_refusals(&self, issuer: &str, subject: &str, audiences: &[String]) -> Vec<Refusal> {
        let mut out = Vec::new();
        if let Some(capz) = &self.capz {
            let presented = format!("system:serviceaccount:{}:{}", capz.namespace, capz.service_account);
            if subject != presented {
                out.push(Refusal { field: "subject", trusted: subject.to_string(), presented });
            }
        }
        // Entra compares the token's `iss` with the credential's issuer byte for byte: a
        // trailing `/` on one side is a refusal, not a detail.
        if let Some(cluster) = &self.service_account_issuer
            && issuer != cluster
        {
            out.push(Refusal { field: "issuer", trusted: issuer.to_string(), presented: cluster.clone() });
        }
        if let Some(capz) = &self.capz
            && !audiences.iter().any(|a| capz.audiences.contains(a))
        {
            out.push(Refusal {
                field: "audience",
                trusted: audiences.join("`, `"),
                presented: capz.audiences.join("`, `"),
            });
        }
        out
    }
}

/// Where OpenShift runs its machine approvers.
pub const MACHINE_APPROVER_NAMESPACE: &str = "openshift-cluster-machine-approver";
/// The approver of node certificates for Cluster API Machines, deployed only with the
/// TechPreviewNoUpgrade or CustomNoUpgrade feature set (openshift/cluster-machine-approver
/// `manifests/04-deployment-capi.yaml`); it approves a node's first certificate only for a node
/// named as some Machine's `InternalDNS` address (`pkg/machinehandler/machinehandler.go`).
pub const MACHINE_APPROVER_CAPI: &str = "machine-approver-capi";

/// The issuer of service-account tokens when `Authentication.spec.serviceAccountIssuer` is empty.
pub const INTERNAL_ISSUER: &str = "https://kubernetes.default.svc";

/// A served type by group, version, kind and plural.
pub(crate) fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// A 404 is an answer (the thing is not there); anything else is a failure to read.
fn absent<T>(r: Result<T, kube::Error>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(crate::why(&e)),
    }
}

fn capz_of(d: &DynamicObject) -> Capz {
    let pod = &d.data["spec"]["template"]["spec"];
    let audiences = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| v["projected"]["sources"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["serviceAccountToken"]["audience"].as_str().map(String::from))
        .collect();
    // CAPZ v1.26.0 builds its workload-identity credential without the cloud's authority
    // (`azure/scope/identity.go`, the `WorkloadIdentity` case); the Azure SDK for Go then takes
    // `AZURE_AUTHORITY_HOST`, else the public cloud's (azidentity `setAuthorityHost`).
    let authority_host = pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == "manager")
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .find(|e| e["name"] == "AZURE_AUTHORITY_HOST")
        .and_then(|e| e["value"].as_str().map(String::from))
        .filter(|v| !v.is_empty());
    Capz {
        namespace: d.metadata.namespace.clone().unwrap_or_default(),
        deployment: d.metadata.name.clone().unwrap_or_default(),
        service_account: pod["serviceAccountName"].as_str().unwrap_or("default").to_string(),
        audiences,
        authority_host,
    }
}

fn str_at(v: &Json, path: &[&str]) -> String {
    path.iter().fold(v, |v, k| &v[*k]).as_str().unwrap_or_default().to_string()
}

/// Reads the cluster `config` names. The error says what could not be read.
pub async fn survey(config: &KubeConfig) -> Result<Survey, String> {
    let client = crate::connect::client(config).await?;
    let infra_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Infrastructure", "infrastructures"));
    let openshift = absent(infra_api.get("cluster").await)
        .map_err(|e| format!("cannot read the Infrastructure object: {e}"))?
        .map(|o| Infrastructure {
            name: str_at(&o.data, &["status", "infrastructureName"]),
            platform: str_at(&o.data, &["status", "platformStatus", "type"]),
            api_internal_url: str_at(&o.data, &["status", "apiServerInternalURI"]),
        });
    let groups =
        client.list_api_groups().await.map_err(|e| format!("cannot read the served API groups: {}", crate::why(&e)))?;
    let versions = |name: &str| -> Vec<String> {
        let Some(g) = groups.groups.iter().find(|g| g.name == name) else { return Vec::new() };
        let preferred = g.preferred_version.as_ref().map(|v| v.version.clone());
        let mut all: Vec<String> = g.versions.iter().map(|v| v.version.clone()).collect();
        all.sort_by_key(|v| Some(v) != preferred.as_ref());
        all
    };
    let (capi_versions, capz_versions) = (versions("cluster.x-k8s.io"), versions("infrastructure.cluster.x-k8s.io"));
    // A Deployment, or None where there is none.
    let deployment = |ns: &'static str, name: &'static str| {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &resource("apps", "v1", "Deployment", "deployments"));
        async move { absent(api.get(name).await).map_err(|e| format!("cannot read the Deployment {ns}/{name}: {e}")) }
    };
    let capz = deployment(OPENSHIFT_CAPI_NAMESPACE, CAPZ_DEPLOYMENT).await?.map(|d| capz_of(&d));
    let mut clusters = Vec::new();
    if let Some(version) = capi_versions.first() {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            OPENSHIFT_CAPI_NAMESPACE,
            &resource("cluster.x-k8s.io", version, "Cluster", "clusters"),
        );
        let list = absent(api.list(&ListParams::default()).await)
            .map_err(|e| format!("cannot list the Clusters of {OPENSHIFT_CAPI_NAMESPACE}: {e}"))?;
        for c in list.into_iter().flat_map(|l| l.items) {
            let kind = str_at(&c.data, &["spec", "infrastructureRef", "kind"]);
            clusters.push((c.metadata.name.clone().unwrap_or_default(), kind));
        }
    }
    let auth_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Authentication", "authentications"));
    let service_account_issuer = absent(auth_api.get("cluster").await)
        .map_err(|e| format!("cannot read the Authentication object: {e}"))?
        .map(|a| {
            let issuer = str_at(&a.data, &["spec", "serviceAccountIssuer"]);
            if issuer.is_empty() { INTERNAL_ISSUER.to_string() } else { issuer }
        });
    let machine_approver = deployment(MACHINE_APPROVER_NAMESPACE, MACHINE_APPROVER_CAPI).await?.is_some();
    let network_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Network", "networks"));
    let cluster_network_mtu = absent(network_api.get("cluster").await)
        .map_err(|e| format!("cannot read the Network object: {e}"))?
        .and_then(|n| n.data["status"]["clusterNetworkMTU"].as_i64());
    let operator_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("operator.openshift.io", "v1", "Network", "networks"));
    let ovn_ipsec = absent(operator_api.get("cluster").await)
        .map_err(|e| format!("cannot read the network operator's Network object: {e}"))?
        .is_some_and(|n| {
            str_at(&n.data, &["spec", "defaultNetwork", "ovnKubernetesConfig", "ipsecConfig", "mode"]) == "Full"
        });
    let config_maps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "kube-system", &resource("", "v1", "ConfigMap", "configmaps"));
    let fips = absent(config_maps.get("cluster-config-v1").await)
        .map_err(|e| format!("cannot read the ConfigMap kube-system/cluster-config-v1: {e}"))?
        .and_then(|c| install_config_fips(c.data["data"]["install-config"].as_str()?));
    let mco_config_maps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "openshift-machine-config-operator",
        &resource("", "v1", "ConfigMap", "configmaps"),
    );
    let boot_images = absent(mco_config_maps.get("coreos-bootimages").await)
        .map_err(|e| format!("cannot read the ConfigMap openshift-machine-config-operator/coreos-bootimages: {e}"))?
        .and_then(|c| boot_images(&c.data["data"]));
    let proxy_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Proxy", "proxies"));
    let proxy = absent(proxy_api.get("cluster").await)
        .map_err(|e| format!("cannot read the Proxy object: {e}"))?
        .and_then(|p| {
            let status = &p.data["status"];
            let https = status["httpsProxy"].as_str().filter(|s| !s.is_empty())?.to_string();
            let no = status["noProxy"].as_str().unwrap_or_default();
            Some((https, no.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()))
        });
    let mut mirrors = Vec::new();
    for (group, version, kind, plural, field) in [
        ("config.openshift.io", "v1", "ImageDigestMirrorSet", "imagedigestmirrorsets", "imageDigestMirrors"),
        ("config.openshift.io", "v1", "ImageTagMirrorSet", "imagetagmirrorsets", "imageTagMirrors"),
        (
            "operator.openshift.io",
            "v1alpha1",
            "ImageContentSourcePolicy",
            "imagecontentsourcepolicies",
            "repositoryDigestMirrors",
        ),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(group, version, kind, plural));
        let list = absent(api.list(&ListParams::default()).await)
            .map_err(|e| format!("cannot list the cluster's {kind}s: {e}"))?;
        for o in list.into_iter().flat_map(|l| l.items) {
            mirrors.extend(mirrors_of(kind, &o, field));
        }
    }
    let worker_configs = worker_configs(&client).await?;
    let daemon_sets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), EBS_CSI_NAMESPACE, &resource("apps", "v1", "DaemonSet", "daemonsets"));
    let ebs_csi_node = absent(daemon_sets.get(EBS_CSI_NODE).await)
        .map_err(|e| format!("cannot read the DaemonSet {EBS_CSI_NAMESPACE}/{EBS_CSI_NODE}: {e}"))?
        .is_some();
    let gates: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "FeatureGate", "featuregates"));
    let feature_set =
        absent(gates.get("cluster").await).map_err(|e| format!("cannot read the FeatureGate object: {e}"))?.map(|g| {
            let set = str_at(&g.data, &["spec", "featureSet"]);
            if set.is_empty() { "Default".to_string() } else { set }
        });
    let operators: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "ClusterOperator", "clusteroperators"));
    let capi_operator = absent(operators.get("cluster-api").await)
        .map_err(|e| format!("cannot read the ClusterOperator cluster-api: {e}"))?
        .is_some();
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"),
    );
    let mut capi_crds = Vec::new();
    for crd in crds
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("cannot list the cluster's CRDs: {}", crate::why(&e)))?
    {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if !name.ends_with("cluster.x-k8s.io") {
            continue;
        }
        let json = serde_json::to_value(&crd).map_err(|e| e.to_string())?;
        let xcsp_stack = json["metadata"]["labels"][xcsp_core::STACK_TAG].as_str().map(String::from);
        capi_crds.push(CrdOwner { owner: crd_owner(&json), versions: crd_versions(&json), name, xcsp_stack });
    }
    Ok(Survey {
        feature_set,
        capi_operator,
        capi_crds,
        openshift,
        capi_versions,
        capz_versions,
        capz,
        clusters,
        service_account_issuer,
        machine_approver,
        cluster_network_mtu,
        ovn_ipsec,
        fips,
        worker_configs,
        boot_images,
        proxy,
        mirrors,
        ebs_csi_node,
    })
}

/// What the cluster's worker configs hold that the pool must not inherit as is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkerConfigs {
    /// AWS's own units among them, enabled or not (the pool masks them all).
    pub aws_units: Vec<String>,
    /// Each config that writes `/etc/chrony.conf`, with the time sources it names.
    pub chrony: Vec<(String, Vec<String>)>,
}

/// Reads the MachineConfigs of role `worker` (none served: not OpenShift, nothing).
async fn worker_configs(client: &kube::Client) -> Result<WorkerConfigs, String> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("machineconfiguration.openshift.io", "v1", "MachineConfig", "machineconfigs"),
    );
    let params = ListParams::default().labels(&format!("{}=worker", crate::machine_config::ROLE_LABEL));
    let list = match api.list(&params).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(WorkerConfigs::default()),
        Err(e) => return Err(format!("cannot list the worker MachineConfigs: {e}")),
    };
    Ok(read_worker_configs(&list))
}

/// What the worker MachineConfigs `list` hold that the pool must not inherit as is.
pub(crate) fn read_worker_configs(list: &[DynamicObject]) -> WorkerConfigs {
    let mut out = WorkerConfigs::default();
    for mc in list {
        let config = &mc.data["spec"]["config"];
        for u in config["systemd"]["units"].as_array().into_iter().flatten() {
            if let Some(n) = u["name"].as_str().filter(|n| crate::machine_config::aws_only(n)) {
                out.aws_units.push(n.to_string());
            }
        }
        for f in config["storage"]["files"].as_array().into_iter().flatten() {
            if f["path"] != crate::machine_config::CHRONY_CONF {
                continue;
            }
            let text = f["contents"]["source"].as_str().map(crate::machine_config::data_url_text).unwrap_or_default();
            let sources = text
                .lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    match (w.next(), w.next()) {
                        (Some("server" | "pool" | "peer"), Some(a)) => Some(a.to_string()),
                        (Some("refclock"), Some(kind)) => Some(format!("refclock {kind}")),
                        _ => None,
                    }
                })
                .collect();
            out.chrony.push((mc.metadata.name.clone().unwrap_or_default(), sources));
        }
    }
    out.aws_units.sort();
    out.aws_units.dedup();
    out.chrony.sort();
    out
}

/// The key ids the cluster signs its service-account tokens with: the API server's own JWKS
/// (`GET /openid/v1/jwks`, kubernetes `pkg/serviceaccount/openidmetadata.go`), which the issuer's
/// public `jwks_uri` must carry for Entra to verify a token.
pub async fn signing_keys(config: &KubeConfig) -> Result<Vec<String>, String> {
    let client = crate::connect::client(config).await?;
    signing_keys_of(&client).await
}

/// [`signing_keys`] with a client.
pub async fn signing_keys_of(client: &kube::Client) -> Result<Vec<String>, String> {
    let request = http::Request::get("/openid/v1/jwks").body(Vec::new()).map_err(|e| e.to_string())?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| format!("cannot read the cluster's /openid/v1/jwks: {}", crate::why(&e)))?;
    let jwks: Json =
        serde_json::from_str(&text).map_err(|e| format!("the cluster's /openid/v1/jwks is not JSON: {e}"))?;
    Ok(key_ids(&jwks))
}

/// The `kid`s of a JSON Web Key Set.
pub fn key_ids(jwks: &Json) -> Vec<String> {
    jwks["keys"].as_array().into_iter().flatten().filter_map(|k| k["kid"].as_str().map(String::from)).collect()
}

/// `fips` of an install-config (absent: false, the installer's default); `None` when the text is
/// not YAML of a mapping.
fn install_config_fips(text: &str) -> Option<bool> {
    let v: Json = serde_norway::from_str(text).ok()?;
    v.is_object().then(|| v["fips"].as_bool().unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_images_are_read_from_the_stream() {
        let stream = serde_json::json!({"architectures": {"x86_64": {"rhel-coreos-extensions": {"marketplace": {"azure": {
            "no-purchase-plan": {
                "hyperVGen1": {"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_422", "version": "422.94.1"},
                "hyperVGen2": {"publisher": "azureopenshift", "offer": "aro4", "sku": "422-v2", "version": "422.94.1"}}}}}}}});
        let data = serde_json::json!({"releaseVersion": "4.22.3", "stream": stream.to_string()});
        let b = boot_images(&data).unwrap();
        assert_eq!(b.release, "4.22.3");
        assert_eq!(b.gen2.unwrap().sku, "422-v2");
        assert_eq!(b.gen1.unwrap().sku, "aro_422");
        assert_eq!(boot_images(&serde_json::json!({"stream": "{}"})).unwrap().gen2, None);
    }

    #[test]
    fn a_crds_owner_is_read_from_its_labels_annotations_and_managers() {
        use serde_json::json;
        let owner = |meta: Json| crd_owner(&json!({"metadata": meta}));
        assert_eq!(
            owner(json!({"labels": {"capi-operator.openshift.io/managed-by": "cluster-api"}})),
            "cluster-capi-operator (component cluster-api)"
        );
        assert_eq!(
            owner(json!({"annotations": {"release.openshift.io/feature-gate": "-ClusterAPIMachineManagement"}})),
            "the cluster-version operator (a release manifest)"
        );
        assert_eq!(
            owner(json!({"labels": {"cluster.x-k8s.io/provider": "infrastructure-azure"}})),
            "provider `infrastructure-azure` (clusterctl or its release manifests)"
        );
        assert_eq!(owner(json!({"managedFields": [{"manager": "kubectl"}]})), "field manager `kubectl`");
        assert_eq!(owner(json!({})), "unknown");
        let crd = json!({"spec": {"versions": [
            {"name": "v1beta1", "served": true, "storage": false},
            {"name": "v1alpha1", "served": false, "storage": false},
            {"name": "v1beta2", "served": true, "storage": true}]}});
        assert_eq!(crd_versions(&crd), vec!["v1beta2", "v1beta1"]);
    }

    #[test]
    fn the_install_config_says_the_fips_mode() {
        assert_eq!(install_config_fips("apiVersion: v1\nfips: true\nmetadata:\n  name: il5\n"), Some(true));
        assert_eq!(install_config_fips("apiVersion: v1\nmetadata:\n  name: il5\n"), Some(false));
        assert_eq!(install_config_fips("not: [yaml"), None);
    }
}
