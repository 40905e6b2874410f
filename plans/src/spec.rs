//! The typed, spanned spec: what the user wrote, with defaults applied, before semantic checks.

use std::sync::Arc;

use indexmap::IndexMap;
use ipnet::Ipv4Net;
use xcsp_core::{SourceFile, Span, Value};

/// A value with the span it came from (the block's head when a default was used).
#[derive(Debug, Clone, PartialEq)]
pub struct Sp<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Sp<T> {
    pub fn new(value: T, span: Span) -> Self {
        Sp { value, span }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AzureCloud {
    Public,
    UsGovernment,
    Custom,
}

impl AzureCloud {
    pub fn as_str(self) -> &'static str {
        match self {
            AzureCloud::Public => "public",
            AzureCloud::UsGovernment => "usgovernment",
            AzureCloud::Custom => "custom",
        }
    }
}

/// Who presents the token Entra exchanges: OpenShift runs CAPZ as Deployment
/// `capz-controller-manager` with `serviceAccountName: capz-manager` in `openshift-cluster-api`,
/// and projects its service-account token with `audience: api://AzureADTokenExchange` at
/// `/var/run/secrets/azure/tokens/azure-identity-token` (openshift/cluster-api-provider-azure,
/// `openshift/capi-operator-manifests/default/manifests.yaml`; one audience whatever the Azure
/// cloud). CAPZ's `WorkloadIdentity` reads that file (`azure/scope/workload_identity.go`,
/// `GetProjectedTokenPath`). A federated credential must name this token's subject
/// (`system:serviceaccount:<namespace>:<name>`) and audience, or Entra refuses the exchange
/// (AADSTS70021). Microsoft's recommended Government audience, `api://AzureADTokenExchangeUSGov`,
/// is not what this token carries.
pub const CAPZ_NAMESPACE: &str = "openshift-cluster-api";
pub const CAPZ_SERVICE_ACCOUNT: &str = "capz-manager";
/// Where xcsp runs Cluster API's core manager and CAPZ's when it installs them
/// (`cluster_api`; the release manifests' service account names are kept: `capz-manager`).
pub const XCSP_CAPI_NAMESPACE: &str = "xcsp-capi-system";
pub const XCSP_CAPZ_NAMESPACE: &str = "xcsp-capz-system";
/// OpenShift's machine approver of Machine API Machines, on every cluster: the image an approver
/// for Cluster API Machines runs too (openshift/cluster-machine-approver `manifests/04-deployment.yaml`).
pub const MACHINE_APPROVER_DEPLOYMENT: &str = "openshift-cluster-machine-approver/machine-approver";
pub const CAPZ_TOKEN_AUDIENCE: &str = "api://AzureADTokenExchange";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    Ipsec,
    External,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    Bgp,
    Static,
}

#[derive(Debug, Clone)]
pub struct Cluster {
    pub infrastructure_name: Sp<String>,
    pub api_url: Sp<String>,
    pub oidc_issuer_url: Sp<String>,
    pub machine_network: Sp<Ipv4Net>,
    pub cluster_network: Sp<Ipv4Net>,
    pub service_network: Sp<Ipv4Net>,
    pub overlay_mtu: Sp<i64>,
    /// The cluster runs in FIPS mode (install-config `fips`): the pool's MachineConfig turns FIPS
    /// on, and the link's IPsec must keep to algorithms FIPS allows.
    pub fips: Sp<bool>,
    /// OVN-Kubernetes encrypts traffic between nodes with IPsec (the network operator's
    /// `ipsecConfig.mode: Full`): the link then lets IKE and ESP through, as the installer lets
    /// them between the cluster's own nodes.
    pub ovn_ipsec: Sp<bool>,
    /// The kubeconfig file of this cluster, as written (the cli expands `~` and looks it up).
    pub kubeconfig: Option<Sp<String>>,
    /// The kubeconfig context to use instead of its current one.
    pub kube_context: Option<Sp<String>>,
    pub kubernetes_objects: Sp<KubernetesObjects>,
    /// The namespace of the pool's CAPZ/CAPI objects, when the spec names one (else
    /// [`pool_namespace`] derives it from the stack).
    pub namespace: Option<Sp<String>>,
    /// The SSH public key the pool's VMs are made with (`ssh-rsa ...`, as install-config's
    /// `sshKey`): Azure refuses a Linux VM without one, and outside `openshift-cluster-api` no
    /// CAPZ webhook generates it.
    pub ssh_public_key: Option<Sp<String>>,
    /// Which Cluster API managers make the pool's machines (the `cluster_api` block).
    pub cluster_api: ClusterApi,
    pub span: Span,
}

/// Whose Cluster API managers the pool uses (docs/src/concepts/cluster-api-on-openshift.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvidersMode {
    /// Per provider, the cluster's where it has one (its CRDs are installed and not xcsp's), else
    /// xcsp's, decided against the cluster at plan and apply.
    Auto,
    /// The cluster's own (OpenShift's, or what its owners installed); xcsp installs none.
    Cluster,
    /// xcsp's, installed from the components files the block names.
    Xcsp,
}

/// The `cluster_api` block of `cluster`.
#[derive(Debug, Clone)]
pub struct ClusterApi {
    pub providers: Sp<ProvidersMode>,
    /// Cluster API's core provider (`core-components.yaml` of a Cluster API release).
    pub core: Option<ProviderSource>,
    /// CAPZ (`infrastructure-components.yaml` of a CAPZ release).
    pub azure: Option<ProviderSource>,
}

/// Where one provider's release manifests are, and the image to run instead of theirs.
#[derive(Debug, Clone)]
pub struct ProviderSource {
    /// The file as written (relative to the spec file's directory).
    pub components: Sp<String>,
    pub image: Option<Sp<String>>,
    /// What the file holds, read when the spec is loaded.
    pub read: Option<crate::components::Components>,
}

/// The namespace the pool's CAPZ/CAPI objects live in: the spec's `cluster.namespace`, else
/// `xcsp-<stack>` (lower case, `_` and `.` as `-`, at most 63 characters). Never
/// `openshift-cluster-api`: OpenShift admits one Cluster there, its own (validate refuses it).
pub fn pool_namespace(stack: &str, cluster: &Cluster) -> String {
    namespace_for(stack, cluster.namespace.as_ref().map(|n| n.value.as_str()))
}

/// A pool's role (`<namespace>-<pool>`): the name of its MachineConfigPool, of its RuntimeClass,
/// and of the `node-role.kubernetes.io/<role>` label its Nodes carry.
/// The value of the pool label ([`xcsp_core::tags::POOL_LABEL`]) the pool's Nodes register with.
pub fn pool_label(cluster: &Cluster, pool: &str) -> String {
    format!("{}-{pool}", cluster.infrastructure_name.value)
}

pub fn pool_role(stack: &str, cluster: &Cluster, pool: &str) -> String {
    format!("{}-{pool}", pool_namespace(stack, cluster))
}

fn namespace_for(stack: &str, explicit: Option<&str>) -> String {
    if let Some(ns) = explicit {
        return ns.to_string();
    }
    let derived: String = format!("xcsp-{stack}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(63)
        .collect();
    derived.trim_end_matches('-').to_string()
}

/// What xcsp does with the pool's CAPZ/CAPI objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubernetesObjects {
    /// Applied to the cluster with server-side apply, refreshed and destroyed with the rest.
    Apply,
    /// Left out of plan, apply and destroy; written by `xcsp render DIR` for oc apply or GitOps.
    Render,
}

#[derive(Debug, Clone)]
pub struct Aws {
    pub region: Sp<String>,
    pub vpc_id: Option<Sp<String>>,
    pub route_table_ids: Option<Sp<Vec<String>>>,
    pub security_group_ids: Option<Sp<Vec<String>>>,
    pub asn: Sp<i64>,
    pub fips: bool,
    /// Put on every AWS resource, beside xcsp's own stack and address tags.
    pub tags: Sp<IndexMap<String, Value>>,
    pub span: Span,
}

impl Aws {
    /// `aws-us-gov` for GovCloud regions, `aws` otherwise.
    pub fn partition(&self) -> &'static str {
        if self.region.value.starts_with("us-gov-") { "aws-us-gov" } else { "aws" }
    }
}

#[derive(Debug, Clone)]
pub struct Endpoints {
    pub resource_manager: Sp<String>,
    pub authority: Sp<String>,
}

#[derive(Debug, Clone)]
pub struct Azure {
    pub cloud: Sp<AzureCloud>,
    pub endpoints: Option<Endpoints>,
    pub subscription_id: Sp<String>,
    pub tenant_id: Sp<String>,
    pub location: Sp<String>,
    pub resource_group: Sp<String>,
    /// Put on every taggable Azure resource, beside xcsp's own stack and address tags.
    pub tags: Sp<IndexMap<String, Value>>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct IpsecPolicy {
    pub ike_version: Sp<String>,
    pub encryption: Sp<String>,
    pub integrity: Sp<String>,
    pub dh_group: Sp<i64>,
    pub pfs_group: Sp<i64>,
    pub ike_lifetime_seconds: Sp<i64>,
    pub sa_lifetime_seconds: Sp<i64>,
    /// Dead peer detection timeout, on both clouds' side of every tunnel (unset: each cloud's default).
    pub dpd_timeout_seconds: Option<Sp<i64>>,
    /// How long before phase 2 expires AWS starts a rekey (unset: AWS's default).
    pub rekey_margin_seconds: Option<Sp<i64>>,
}

#[derive(Debug, Clone)]
pub struct Network {
    pub name: Sp<String>,
    pub driver: Sp<Driver>,
    pub vnet_cidr: Sp<Ipv4Net>,
    /// Required for the `ipsec` driver.
    pub gateway_subnet: Option<Sp<Ipv4Net>>,
    pub gateway_sku: Sp<String>,
    pub routing: Sp<Routing>,
    pub azure_asn: Sp<i64>,
    pub vpc_id: Option<Sp<String>>,
    /// Four /30 blocks, one per tunnel, when the user chose them.
    pub tunnel_inside_cidrs: Option<Vec<Sp<Ipv4Net>>>,
    /// Four keys, one per tunnel, when the user chose them (else xcsp generates them at apply).
    pub preshared_keys: Option<Vec<Sp<Value>>>,
    /// Generated keys older than this many days are rotated by apply, one per link and run.
    pub psk_rotation_days: Option<Sp<i64>>,
    pub tunnel_mtu: Sp<i64>,
    pub ipsec: IpsecPolicy,
    /// Destroy refuses the resources made for this block.
    pub prevent_destroy: bool,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Identity {
    pub name: Sp<String>,
    pub issuer: Sp<String>,
    pub audience: Sp<String>,
    pub namespace: Sp<String>,
    pub service_account: Sp<String>,
    pub role: Sp<String>,
    pub prevent_destroy: bool,
    pub span: Span,
}

impl Identity {
    pub fn subject(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace.value, self.service_account.value)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Image {
    Marketplace {
        publisher: String,
        offer: String,
        sku: String,
        version: String,
    },
    Id(String),
    /// The release's RHCOS VHD (`image { vhd = URL }`), imported into the subscription: copied
    /// into a storage account of the stack, then made a Compute Gallery image version.
    Vhd(RhcosVhd),
}

/// An RHCOS VHD as the release's CoreOS stream names it
/// (`https://…/rhcos-<build>-azure.<arch>.vhd`, the `azure-disk` artifact).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RhcosVhd {
    pub url: String,
    /// The RHCOS build, e.g. `422.94.202511041021-0`.
    pub build: String,
    /// `x86_64` or `aarch64`, as the file names it.
    pub arch: String,
}

impl RhcosVhd {
    /// Reads the build and architecture from an RHCOS VHD URL; `None` for another file name.
    pub fn parse(url: &str) -> Option<RhcosVhd> {
        let file = url.split(['?', '#']).next()?.rsplit('/').next()?;
        let rest = file.strip_prefix("rhcos-")?.strip_suffix(".vhd")?;
        let (build, arch) = rest.rsplit_once("-azure.")?;
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let (dotted, _respin) = build.split_once('-').unwrap_or((build, "0"));
        let parts: Vec<&str> = dotted.split('.').collect();
        if parts.len() != 3 || !parts.iter().all(|p| numeric(p)) || !matches!(arch, "x86_64" | "aarch64") {
            return None;
        }
        Some(RhcosVhd { url: url.to_string(), build: build.to_string(), arch: arch.to_string() })
    }

    /// The gallery's architecture name (`x64`, `Arm64`).
    pub fn gallery_architecture(&self) -> &'static str {
        if self.arch == "aarch64" { "Arm64" } else { "x64" }
    }

    /// The gallery image version this build becomes: a version is `Major.Minor.Patch` of 32-bit
    /// integers (Microsoft Learn, "Store and share images in an Azure Compute Gallery": image
    /// versions), so the build's date stamp `YYYYMMDDhhmm` keeps its date only:
    /// `422.94.202511041021-0` is `422.94.20251104`.
    pub fn gallery_version(&self) -> String {
        let dotted = self.build.split('-').next().unwrap_or(&self.build);
        let mut parts = dotted.split('.');
        let (major, minor, stamp) =
            (parts.next().unwrap_or("0"), parts.next().unwrap_or("0"), parts.next().unwrap_or("0"));
        let date = &stamp[..stamp.len().min(8)];
        let n = |s: &str| s.parse::<u64>().unwrap_or(0).min(i32::MAX as u64);
        format!("{}.{}.{}", n(major), n(minor), n(date))
    }

    /// The blob's file name: the VHD's own.
    pub fn file_name(&self) -> String {
        format!("rhcos-{}-azure.{}.vhd", self.build, self.arch)
    }
}

/// How a pool's VMs reach the registries they pull images from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Egress {
    /// A NAT gateway xcsp makes (with its public IP) on the pool's subnet, which is private: the
    /// explicit outbound path Microsoft recommends, and the default.
    NatGateway,
    /// Only over the link: the cluster's image mirrors inside the AWS VPC, the subnet private.
    /// AWS forwards nothing from a VPN connection to the internet (Amazon VPC, "edge to edge
    /// routing" is not supported), so every image must come from a mirror the link reaches.
    Link,
    /// Azure's default outbound access (an implicit public address Microsoft owns), kept on the
    /// subnet explicitly; retired for new VNets from network api-version 2025-07-01.
    DefaultOutbound,
}

impl Egress {
    pub const NAMES: [&'static str; 3] = ["nat_gateway", "link", "default_outbound"];

    pub fn parse(s: &str) -> Option<Egress> {
        match s {
            "nat_gateway" => Some(Egress::NatGateway),
            "link" => Some(Egress::Link),
            "default_outbound" => Some(Egress::DefaultOutbound),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        Egress::NAMES[self as usize]
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

#[derive(Debug, Clone)]
pub struct Pool {
    pub name: Sp<String>,
    pub network: Sp<String>,
    pub identity: Sp<String>,
    pub vm_size: Sp<String>,
    pub replicas: Sp<i64>,
    pub subnet_cidr: Sp<Ipv4Net>,
    pub image: Sp<Image>,
    pub os_disk_size_gb: Sp<i64>,
    pub os_disk_type: Sp<String>,
    pub zones: Sp<Vec<String>>,
    pub labels: Sp<IndexMap<String, Value>>,
    pub taints: Sp<Vec<Taint>>,
    pub accelerated_networking: bool,
    /// How the pool's VMs reach images (`egress`, default a NAT gateway).
    pub egress: Sp<Egress>,
    pub machine_health_check: bool,
    /// The health check remediates only while at most this many of the pool's machines are
    /// unhealthy (unset: [`default_max_unhealthy`] of the replicas).
    pub max_unhealthy: Option<Sp<i64>>,
    /// How long a machine may take from its VM to a Node before it counts as unhealthy.
    pub node_startup_timeout_seconds: Sp<i64>,
    /// How long a Node may be `Ready` `Unknown` or `False` before its machine counts as unhealthy.
    pub unhealthy_timeout_seconds: Sp<i64>,
    /// How long the pool's workloads that use its RuntimeClass stay on a Node the control plane
    /// cannot reach (a link outage) before they are evicted; others go after the cluster's 300 s.
    pub outage_tolerance_seconds: Sp<i64>,
    pub prevent_destroy: bool,
    pub span: Span,
}

/// A first boot over the link: the VM's creation, Ignition fetched over the tunnel, the pivot to
/// the cluster's OS image and the reboot of a large GPU VM, the kubelet's certificate approved (by
/// hand where OpenShift's approver for Cluster API machines does not run). CAPI's own default, 10
/// minutes (cluster-api `api/core/v1beta2/machinehealthcheck_types.go`
/// `DefaultNodeStartupTimeoutSeconds`), deletes such machines before they join.
pub const DEFAULT_NODE_STARTUP_TIMEOUT_SECONDS: i64 = 45 * 60;
/// Long enough to ride out an IPsec rekey, a machine-config reboot of a 96-core VM and a short
/// link outage; xcsp's earlier 300 s did not.
pub const DEFAULT_UNHEALTHY_TIMEOUT_SECONDS: i64 = 15 * 60;
/// How long a pool's workloads ride out an unreachable Node when the spec says nothing: an hour,
/// twelve times the 300 s every Pod gets from the API server's `DefaultTolerationSeconds`
/// admission plugin (`--default-unreachable-toleration-seconds`).
pub const DEFAULT_OUTAGE_TOLERANCE_SECONDS: i64 = 60 * 60;

/// The health check's `maxUnhealthy` when the spec sets none: 40% of the pool's machines, at least
/// one. CAPI's default is 100% (cluster-api `internal/controllers/machinehealthcheck`
/// `defaultMaxUnhealthy`), which lets it delete every GPU VM at once when a link outage turns every
/// Node `Unknown`; past this count it short-circuits and remediates none.
pub fn default_max_unhealthy(replicas: i64) -> i64 {
    (replicas * 40 / 100).max(1)
}

#[derive(Debug, Clone)]
pub struct Output {
    pub name: String,
    pub value: Value,
    pub sensitive: bool,
    pub description: Option<String>,
}

/// A decoded spec. Singleton blocks are optional here: a missing one is a problem already
/// reported, and the checks that need it are skipped.
#[derive(Debug, Clone)]
pub struct Spec {
    pub stack: String,
    /// Where the stack's name was written (`stack = ...`, or the infrastructure name it defaults to).
    pub stack_span: Option<Span>,
    pub files: Vec<Arc<SourceFile>>,
    pub cluster: Option<Cluster>,
    pub aws: Option<Aws>,
    pub azure: Option<Azure>,
    pub networks: Vec<Network>,
    pub identities: Vec<Identity>,
    pub pools: Vec<Pool>,
    pub outputs: Vec<Output>,
    /// Which block refers to which (`worker_pool.gpu` -> `network.link`), for graph edges.
    pub references: Vec<(String, String)>,
    /// sha256 of every source file and variable value: a saved plan is stale if it changes.
    pub digest: String,
    /// Secret strings (pre-shared keys, sensitive variables), hidden wherever sources are shown.
    pub secrets: Vec<String>,
    pub backend: Option<Backend>,
}

/// Where the stack's state lives (the `backend` block; the environment may override it).
#[derive(Debug, Clone)]
pub struct Backend {
    /// `local`, `s3` or `kubernetes`.
    pub kind: String,
    pub path: Option<String>,
    pub bucket: Option<String>,
    pub key: Option<String>,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub server_side_encryption: Option<String>,
    /// Client-side encryption: `enforced` refuses to read or write plaintext state and plans.
    pub encryption: Option<String>,
    /// `kubernetes`: the namespace of the state's Secret and the lock's Lease.
    pub namespace: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_namespace_is_a_dns_label_made_from_the_stack() {
        assert_eq!(namespace_for("il5-gpu", None), "xcsp-il5-gpu");
        assert_eq!(namespace_for("IL5_GPU.a", None), "xcsp-il5-gpu-a");
        let ns = namespace_for(&"a".repeat(63), None);
        assert_eq!((ns.len(), ns.starts_with("xcsp-a")), (63, true));
        // Cut at 63, a trailing `-` goes too.
        assert_eq!(namespace_for(&format!("{}_x", "b".repeat(57)), None), format!("xcsp-{}", "b".repeat(57)));
        assert_eq!(namespace_for("il5-gpu", Some("gpu-pools")), "gpu-pools");
    }

    #[test]
    fn an_rhcos_vhd_url_names_its_build_architecture_and_gallery_version() {
        let v = RhcosVhd::parse(
            "https://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd",
        )
        .expect("an RHCOS azure-disk URL");
        assert_eq!((v.build.as_str(), v.arch.as_str()), ("422.94.202511041021-0", "x86_64"));
        // The installer's version name: the build less its time of day (each part a 32-bit int).
        assert_eq!(v.gallery_version(), "422.94.20251104");
        assert_eq!(v.gallery_architecture(), "x64");
        assert_eq!(v.file_name(), "rhcos-422.94.202511041021-0-azure.x86_64.vhd");
        let arm = RhcosVhd::parse("https://h/b/rhcos-9.6.20250701-1-azure.aarch64.vhd").expect("aarch64");
        assert_eq!((arm.gallery_architecture(), arm.gallery_version().as_str()), ("Arm64", "9.6.20250701"));
        for bad in [
            "https://h/ubuntu.vhd",
            "https://h/rhcos-422.94.202511041021-0-aws.x86_64.vmdk",
            "https://h/rhcos-422.94-azure.x86_64.vhd",
            "https://h/rhcos-422.94.2025-0-azure.s390x.vhd",
        ] {
            assert_eq!(RhcosVhd::parse(bad), None, "{bad}");
        }
    }
}
