//! The shared "sim world": configuration (latency profile, faults, throttling), clock and counters
//! that every emulated cloud API (ARM, AWS, Kubernetes) consults, and a journal of deletions.

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long long-running operations take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Every long-running operation is finished when its first response is sent.
    Instant,
    /// Realistic durations multiplied by `time_scale` (default 1/600: a 45 min gateway takes 4.5 s).
    #[default]
    Fast,
    /// Durations as ARM takes them (virtual network gateway 30-45 min).
    Realistic,
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "instant" => Ok(Profile::Instant),
            "fast" => Ok(Profile::Fast),
            "realistic" => Ok(Profile::Realistic),
            other => Err(format!("unknown latency profile '{other}' (instant, fast, realistic)")),
        }
    }
}

/// Latency settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Latency {
    pub profile: Profile,
    /// Multiplier applied to realistic durations in the `fast` profile.
    pub time_scale: f64,
    /// Extra delay added to every request, in milliseconds (0 unless set).
    pub request_latency_ms: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { profile: Profile::Fast, time_scale: 1.0 / 600.0, request_latency_ms: 0 }
    }
}

/// An instruction to make the next `count` long-running operations on a resource type end `Failed`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LroFailure {
    /// Case-insensitive substring of the resource type, e.g. `virtualNetworkGateways`; empty matches all.
    pub resource_type: String,
    pub count: u32,
    pub code: String,
    pub message: String,
}

impl Default for LroFailure {
    fn default() -> Self {
        LroFailure {
            resource_type: String::new(),
            count: 1,
            code: "InternalServerError".into(),
            message: "An error occurred while provisioning the resource (injected by xcsp-sim).".into(),
        }
    }
}

/// Injected faults.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// Fraction (0..1) of ARM requests answered with `error_status` before being applied.
    pub error_rate: f64,
    pub error_status: u16,
    /// Fraction (0..1) of ARM requests whose connection is dropped without a complete response.
    pub drop_rate: f64,
    /// If true (default) a dropped request was applied first (the response is lost, not the request).
    pub drop_after_apply: bool,
    /// Pending LRO failures, consumed in order.
    pub fail_lros: Vec<LroFailure>,
    /// Fraction (0..1) of EC2 requests answered `RequestLimitExceeded` (HTTP 503) before being applied.
    pub aws_throttle_rate: f64,
    /// Fraction (0..1) of EC2 requests answered `InternalError` (HTTP 500) before being applied.
    pub aws_error_rate: f64,
    /// Fraction (0..1) of EC2 requests whose connection is dropped without a complete response;
    /// with `drop_after_apply` the request was applied first (the answer is lost, not the call).
    pub aws_drop_rate: f64,
    /// EC2 actions that start failing part-way: a test's way to stop a multi-call resource in
    /// the middle (a 5xx after some of its calls, or a kill while the client retries).
    pub aws_fail_actions: Vec<AwsActionFault>,
    /// The outside IPs of AWS tunnels whose path is cut: IKE and dead-peer detection get no
    /// answer, so the tunnel is DOWN on both sides; once restored it negotiates again.
    pub cut_tunnels: Vec<String>,
    /// VMs (by name) that hang: their kubelet stops posting its status, so the node lifecycle
    /// controller turns the Node `Unknown`, while the link and the other machines are fine.
    #[serde(default)]
    pub hung_vms: Vec<String>,
    /// VMs (by name) whose kubelet's client certificate expired (a VM stopped past the
    /// certificate's lifetime): the API refuses it, so the kubelet bootstraps again with a new
    /// certificate signing request, and posts again once that one is approved and signed.
    #[serde(default)]
    pub expired_client_certs: Vec<String>,
}

/// The calls of one EC2 action after the first `after` (counted from when the fault was set, in
/// `passed`) fail: answered `InternalError` (HTTP 500) before being applied, or, with `lost`,
/// applied and then their connection dropped (the answer is lost, so the SDK retries a call EC2
/// already carried out). `times` calls fail, then the fault is spent; without it, until removed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AwsActionFault {
    pub action: String,
    pub after: u64,
    pub passed: u64,
    pub times: Option<u64>,
    pub lost: bool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            error_rate: 0.0,
            error_status: 500,
            drop_rate: 0.0,
            drop_after_apply: true,
            fail_lros: Vec::new(),
            aws_throttle_rate: 0.0,
            aws_error_rate: 0.0,
            aws_drop_rate: 0.0,
            aws_fail_actions: Vec::new(),
            cut_tunnels: Vec::new(),
            hung_vms: Vec::new(),
            expired_client_certs: Vec::new(),
        }
    }
}

/// One token bucket's parameters.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct BucketConfig {
    pub capacity: u32,
    pub refill_per_sec: f64,
}

/// ARM throttling: per subscription and principal, reads/writes/deletes (docs/src/reference/cloud-facts.md rates).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Throttle {
    pub enabled: bool,
    pub reads: BucketConfig,
    pub writes: BucketConfig,
    pub deletes: BucketConfig,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            enabled: true,
            reads: BucketConfig { capacity: 250, refill_per_sec: 25.0 },
            writes: BucketConfig { capacity: 200, refill_per_sec: 10.0 },
            deletes: BucketConfig { capacity: 200, refill_per_sec: 10.0 },
        }
    }
}

/// Everything an admin can change at run time (`GET`/`PATCH /_sim/config`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConfig {
    pub latency: Latency,
    pub faults: Faults,
    pub throttle: Throttle,
    /// Window after a user-assigned identity's creation during which role assignments naming its
    /// principal fail with `PrincipalNotFound`. `None`: 20 s realistic, 1 s fast, 0 instant.
    pub principal_replication_lag_ms: Option<u64>,
    /// If true, a role assignment that sets `principalType` skips the replication lag (the
    /// behaviour Microsoft documents as a mitigation). Off by default: callers must retry.
    pub principal_type_bypasses_lag: bool,
    /// If set, bearer tokens whose audience differs are refused with 401.
    pub expected_audience: Option<String>,
    /// The cloud the world's Entra tenants are homed in (`public`, `usgovernment`): another
    /// cloud's authority refuses them ([`crate::arm::auth`]). `None`: every authority serves them.
    pub azure_cloud: Option<String>,
    /// Refuse new non-AZ VpnGw1-5 gateways (blocked by Azure since 2025-01-01).
    pub block_non_az_vpn_skus: bool,
    /// Lifetime of issued tokens, seconds.
    pub token_lifetime_secs: u64,
    /// client_id -> client_secret; empty accepts any non-empty secret.
    pub client_secrets: BTreeMap<String, String>,
    /// Seed for the fault-injection random generator (applied on reset and config change).
    pub seed: Option<u64>,
    /// Custom role definitions (GUID -> role name) accepted besides the built-in roles.
    pub custom_roles: BTreeMap<String, String>,
    /// The cluster the world's API server plays, when it runs one: `None`, a plain cluster with
    /// the CAPI/CAPZ CRDs; else an OpenShift cluster on AWS ([`crate::kube::openshift`]),
    /// installed when the cluster starts.
    pub openshift: Option<OpenShift>,
    /// What the subscription may run: VM sizes by location and zone, vCPU quotas
    /// ([`crate::arm::skus`]).
    pub compute: Compute,
}

/// The subscription's compute offer: where each size of the catalog ([`crate::arm::skus::SIZES`])
/// runs, and its vCPU quotas. Unset, every size runs in every location of
/// [`crate::arm::skus::LOCATIONS`] in all three zones, and every family has
/// [`crate::arm::skus::DEFAULT_FAMILY_VCPUS`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Compute {
    /// `"<location>/<size>"` -> the zones it runs in for this subscription (an empty list: not in
    /// that location at all). Sizes and locations are compared without regard to case.
    pub zones: BTreeMap<String, Vec<String>>,
    /// Quota family (`standardNDASv4_A100Family`) -> vCPU limit, in every location.
    pub family_vcpus: BTreeMap<String, u32>,
    /// The regional total (`cores`); unset: [`crate::arm::skus::DEFAULT_REGIONAL_VCPUS`].
    pub regional_vcpus: Option<u32>,
    /// Locations whose Marketplace carries none of the world's images (whether Azure
    /// Government publishes `azureopenshift/aro4` is not established): a VM asking for one is
    /// `PlatformImageNotFound`, and the image list is 404.
    pub without_marketplace: Vec<String>,
}

/// An OpenShift cluster on AWS, as far as the Kubernetes API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenShift {
    /// `Infrastructure.status.infrastructureName`, also the name of the cluster's own `Cluster`.
    pub infrastructure_name: String,
    /// `Infrastructure.status.apiServerInternalURI`.
    pub api_internal_url: String,
    pub region: String,
    /// OpenShift's CAPZ installed as a secondary provider (the seed's proposal). Today's OpenShift
    /// installs only the platform's provider, so on AWS this is false.
    pub capz: bool,
    /// `Authentication.spec.serviceAccountIssuer`: the public OIDC issuer of the cluster's
    /// service-account tokens (an STS-mode install sets it); `None` leaves it empty, when tokens
    /// carry the internal issuer `https://kubernetes.default.svc`, which Entra cannot reach.
    #[serde(default)]
    pub service_account_issuer: Option<String>,
    /// `Network.status.clusterNetworkMTU`: the overlay MTU every node runs OVN-Kubernetes at.
    /// OpenShift's network operator gives an AWS cluster the EC2 uplink's 9001 less Geneve's 100
    /// ([`AWS_CLUSTER_NETWORK_MTU`]); a cluster whose MTU was migrated has another.
    #[serde(default = "aws_cluster_network_mtu")]
    pub cluster_network_mtu: u32,
    /// `AZURE_AUTHORITY_HOST` on CAPZ's manager container, as a cluster's owner would set it
    /// (OpenShift's manifests set none).
    #[serde(default)]
    pub capz_authority_host: Option<String>,
    /// The cluster-wide proxy (`Proxy.spec.httpsProxy`) and its `noProxy` as the install gave
    /// them; `None`: no proxy.
    #[serde(default)]
    pub proxy: Option<ClusterProxy>,
    /// Installed in FIPS mode (install-config `fips: true`): the installer's `99-master-fips` and
    /// `99-worker-fips` MachineConfigs ask for it.
    #[serde(default)]
    pub fips: bool,
    /// OVN-Kubernetes encrypts traffic between nodes with IPsec (the network operator's
    /// `ipsecConfig.mode: Full`): between two nodes, the overlay is IKE and ESP.
    #[serde(default)]
    pub ovn_ipsec: bool,
    /// The time servers of the cluster's worker chrony MachineConfig (`99-worker-chrony`, as
    /// OpenShift documents configuring chrony), which every worker pool inherits; empty: none, the
    /// OS keeps its platform's clock.
    #[serde(default)]
    pub worker_time_servers: Vec<String>,
    /// The cluster hosts its own DNS for the load balancers (`Infrastructure`
    /// `status.platformStatus.aws.cloudLoadBalancerConfig.dnsType: ClusterHosted`): the machine-config
    /// operator enables `aws-update-dns.service` on every node.
    #[serde(default)]
    pub cluster_hosted_dns: bool,
    /// The cluster's own control-plane Nodes on AWS (three, one per zone, tainted as OpenShift
    /// taints its masters), whose kubelets keep posting through any cut of the link. Without them
    /// every Node of the world is the pool's, and a link outage makes the node lifecycle
    /// controller assume its own disconnection and evict nothing ("master disruption mode"),
    /// which no real cluster with healthy AWS nodes does.
    #[serde(default)]
    pub control_plane_nodes: bool,
    /// The cluster's image mirrors, as one ImageDigestMirrorSet (`image-mirrors`) holds them.
    #[serde(default)]
    pub mirrors: Vec<ImageMirror>,
    /// The AWS EBS CSI driver is installed (the default on AWS): its node DaemonSet runs on every
    /// Linux node, and the `storage` ClusterOperator reports its rollout.
    #[serde(default)]
    pub ebs_csi: bool,
    /// The cluster's feature set (`FeatureGate.spec.featureSet`): which Cluster API it runs
    /// (docs/src/concepts/cluster-api-on-openshift.md).
    #[serde(default)]
    pub feature_set: FeatureSet,
}

/// An OpenShift feature set, as far as Cluster API on AWS goes (openshift/api `features/features.go`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FeatureSet {
    /// What every production cluster runs: no Cluster API on AWS, no `cluster-api` ClusterOperator,
    /// only the IPAM CRDs of the cluster-version operator.
    Default,
    /// cluster-capi-operator runs Cluster API's core manager and the platform's provider (CAPA) in
    /// `openshift-cluster-api`; the cluster can never be upgraded again.
    #[default]
    TechPreviewNoUpgrade,
}

impl FeatureSet {
    /// As `FeatureGate.spec.featureSet` writes it (the empty string for `Default`).
    pub fn spec_value(self) -> &'static str {
        match self {
            FeatureSet::Default => "",
            FeatureSet::TechPreviewNoUpgrade => "TechPreviewNoUpgrade",
        }
    }

    /// Whether OpenShift runs Cluster API here.
    pub fn runs_capi(self) -> bool {
        self == FeatureSet::TechPreviewNoUpgrade
    }
}

/// One `imageDigestMirrors` entry (openshift/api `config/v1/types_image_digest_mirror_set.go`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageMirror {
    pub source: String,
    pub mirrors: Vec<String>,
    /// `mirrorSourcePolicy: NeverContactSource` (else the API's default, `AllowContactingSource`).
    #[serde(default)]
    pub never_contact_source: bool,
}

/// A cluster-wide proxy (openshift/api `config/v1/types_proxy.go`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterProxy {
    pub https_proxy: String,
    /// `spec.noProxy`, comma-separated as written.
    pub no_proxy: String,
}

/// The overlay MTU of an OpenShift cluster on AWS as installed: the uplink's 9001 less Geneve's
/// 100 bytes (cluster-network-operator `pkg/network/ovn_kubernetes.go` `getOVNEncapOverhead`, the
/// uplink's MTU read by `pkg/controller/operconfig/mtu_probe.go`).
pub const AWS_CLUSTER_NETWORK_MTU: u32 = 9001 - 100;

fn aws_cluster_network_mtu() -> u32 {
    AWS_CLUSTER_NETWORK_MTU
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            latency: Latency::default(),
            faults: Faults::default(),
            throttle: Throttle::default(),
            principal_replication_lag_ms: None,
            principal_type_bypasses_lag: false,
            expected_audience: None,
            azure_cloud: None,
            block_non_az_vpn_skus: true,
            token_lifetime_secs: 3599,
            client_secrets: BTreeMap::new(),
            seed: None,
            custom_roles: BTreeMap::new(),
            openshift: None,
            compute: Compute::default(),
        }
    }
}

impl SimConfig {
    /// Scale applied to realistic durations.
    pub fn duration_scale(&self) -> f64 {
        match self.latency.profile {
            Profile::Instant => 0.0,
            Profile::Fast => self.latency.time_scale.max(0.0),
            Profile::Realistic => 1.0,
        }
    }

    /// The effective principal replication lag.
    pub fn principal_lag(&self) -> Duration {
        let ms = self.principal_replication_lag_ms.unwrap_or(match self.latency.profile {
            Profile::Instant => 0,
            Profile::Fast => 1000,
            Profile::Realistic => 20_000,
        });
        Duration::from_millis(ms)
    }
}

/// Errors of the world's admin operations.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
}

/// Request and error counters, readable through `/_sim/counters`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    /// Requests per operation, e.g. `PUT Microsoft.Network/virtualNetworkGateways`.
    pub requests: BTreeMap<String, u64>,
    /// Error responses per ARM error code, e.g. `AnotherOperationInProgress`.
    pub errors: BTreeMap<String, u64>,
    /// Responses per HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    pub dropped_connections: u64,
    pub injected_errors: u64,
    /// The Azure requests (ARM and Entra), oldest first, the last [`REQUEST_LOG_LEN`] kept:
    /// `GET /_sim/requests`. Not in `/_sim/counters`.
    #[serde(skip)]
    pub log: std::collections::VecDeque<RequestRecord>,
}

/// How many Azure requests [`Counters::log`] keeps.
pub const REQUEST_LOG_LEN: usize = 20_000;

/// One Azure request as the world saw it: who sent it (its `User-Agent`), under which host name,
/// what it asked and how it was answered.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    pub method: String,
    /// The `Host` the client named (a cloud's name through the TLS front, else loopback).
    pub host: String,
    pub path: String,
    pub api_version: Option<String>,
    pub user_agent: String,
    pub status: u16,
    /// The operation as `/_sim/counters` names it.
    pub operation: String,
}

/// The world clock: real monotonic time plus an offset that admins can advance.
#[derive(Debug)]
pub struct Clock {
    offset: Mutex<Duration>,
}

impl Clock {
    pub fn now(&self) -> Instant {
        Instant::now() + *self.offset.lock().expect("clock lock")
    }
    pub fn advance(&self, by: Duration) {
        *self.offset.lock().expect("clock lock") += by;
    }
}

/// One deletion, in the order the world saw it (`GET /_sim/journal`).
#[derive(Debug, Clone, Serialize)]
pub struct JournalEntry {
    pub seq: u64,
    /// Wall-clock time on the world clock, RFC 3339 with fractional seconds.
    pub time: String,
    /// `azure` or `kubernetes`.
    pub cloud: String,
    /// `DELETE` when a delete request was accepted; `removed` when a Kubernetes object that was
    /// being deleted (a Machine, or one garbage-collected) is finally gone.
    pub verb: String,
    /// The ARM resource id or the Kubernetes object's API path.
    pub id: String,
}

/// The shared world.
#[derive(Debug)]
pub struct World {
    config: Mutex<SimConfig>,
    counters: Mutex<Counters>,
    rng: Mutex<StdRng>,
    journal: Mutex<Vec<JournalEntry>>,
    /// When each tunnel's path was last cut or restored (`faults.cut_tunnels`), by outside IP.
    cuts: Mutex<std::collections::BTreeMap<String, Instant>>,
    pub clock: Clock,
}

impl World {
    pub fn new(config: SimConfig) -> World {
        let rng = make_rng(config.seed);
        World {
            config: Mutex::new(config),
            counters: Mutex::new(Counters::default()),
            rng: Mutex::new(rng),
            journal: Mutex::new(Vec::new()),
            cuts: Mutex::new(Default::default()),
            clock: Clock { offset: Mutex::new(Duration::ZERO) },
        }
    }

    pub fn config(&self) -> SimConfig {
        self.config.lock().expect("config lock").clone()
    }

    /// Runs `f` on the live configuration (used to consume one-shot faults).
    pub fn with_config<R>(&self, f: impl FnOnce(&mut SimConfig) -> R) -> R {
        f(&mut self.config.lock().expect("config lock"))
    }

    pub fn set_config(&self, config: SimConfig) {
        *self.rng.lock().expect("rng lock") = make_rng(config.seed);
        let mut current = self.config.lock().expect("config lock");
        // A tunnel cut or restored now negotiates from now.
        let (before, after) = (&current.faults.cut_tunnels, &config.faults.cut_tunnels);
        let changed: Vec<String> = before
            .iter()
            .filter(|ip| !after.contains(ip))
            .chain(after.iter().filter(|ip| !before.contains(ip)))
            .cloned()
            .collect();
        let now = self.clock.now();
        let mut cuts = self.cuts.lock().expect("cuts lock");
        for ip in changed {
            cuts.insert(ip, now);
        }
        *current = config;
    }

    /// When the path of the tunnel at `outside_ip` was last cut or restored.
    pub fn cut_changed(&self, outside_ip: &str) -> Option<Instant> {
        self.cuts.lock().expect("cuts lock").get(outside_ip).copied()
    }

    /// Applies a JSON merge patch (RFC 7396) to the configuration.
    pub fn patch_config(&self, patch: &serde_json::Value) -> Result<SimConfig, WorldError> {
        let mut current = serde_json::to_value(self.config()).expect("config serializes");
        merge_patch(&mut current, patch);
        let next: SimConfig = serde_json::from_value(current).map_err(|e| WorldError::InvalidConfig(e.to_string()))?;
        self.set_config(next.clone());
        Ok(next)
    }

    pub fn counters(&self) -> Counters {
        let c = self.counters.lock().expect("counters lock");
        Counters {
            requests: c.requests.clone(),
            errors: c.errors.clone(),
            statuses: c.statuses.clone(),
            dropped_connections: c.dropped_connections,
            injected_errors: c.injected_errors,
            log: Default::default(),
        }
    }

    /// The Azure requests the world saw, oldest first ([`Counters::log`]).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.counters.lock().expect("counters lock").log.iter().cloned().collect()
    }

    pub fn reset_counters(&self) {
        *self.counters.lock().expect("counters lock") = Counters::default();
    }

    pub fn count(&self, f: impl FnOnce(&mut Counters)) {
        f(&mut self.counters.lock().expect("counters lock"));
    }

    /// True with probability `p`.
    pub fn chance(&self, p: f64) -> bool {
        p > 0.0 && self.rng.lock().expect("rng lock").random::<f64>() < p
    }

    /// A uniformly random duration between `lo` and `hi` seconds, scaled by the latency profile.
    pub fn lro_duration(&self, lo: f64, hi: f64) -> Duration {
        let scale = self.config().duration_scale();
        if scale == 0.0 {
            return Duration::ZERO;
        }
        let secs = if hi > lo { self.rng.lock().expect("rng lock").random_range(lo..hi) } else { lo };
        Duration::from_secs_f64(secs * scale)
    }

    /// Records a deletion in the journal.
    pub fn journal(&self, cloud: &str, verb: &str, id: &str) {
        let ahead = self.clock.now().saturating_duration_since(Instant::now());
        let time = (time::OffsetDateTime::now_utc() + ahead)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut j = self.journal.lock().expect("journal lock");
        let seq = j.len() as u64 + 1;
        j.push(JournalEntry { seq, time, cloud: cloud.into(), verb: verb.into(), id: id.into() });
    }

    /// The journal of deletions, oldest first.
    pub fn journal_entries(&self) -> Vec<JournalEntry> {
        self.journal.lock().expect("journal lock").clone()
    }

    /// Resets configuration, counters, journal and clock to their initial values.
    pub fn reset(&self, config: SimConfig) {
        self.set_config(config);
        self.reset_counters();
        self.journal.lock().expect("journal lock").clear();
        self.cuts.lock().expect("cuts lock").clear();
        *self.clock.offset.lock().expect("clock lock") = Duration::ZERO;
    }
}

fn make_rng(seed: Option<u64>) -> StdRng {
    match seed {
        Some(s) => StdRng::seed_from_u64(s),
        None => StdRng::from_os_rng(),
    }
}

/// A response whose body fails: the client sees the connection drop mid-response.
pub fn dropped(world: &World) -> axum::response::Response {
    world.count(|c| c.dropped_connections += 1);
    let stream = futures_util::stream::once(async {
        Err::<axum::body::Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "xcsp-sim: injected dropped connection",
        ))
    });
    let mut resp = axum::response::Response::new(axum::body::Body::from_stream(stream));
    resp.headers_mut().insert(axum::http::header::CONTENT_LENGTH, axum::http::HeaderValue::from_static("64"));
    resp
}

/// RFC 7396 JSON merge patch.
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_profile_scales_a_gateway_to_seconds() {
        let w = World::new(SimConfig::default());
        let d = w.lro_duration(1800.0, 2700.0);
        assert!(d >= Duration::from_secs(3) && d <= Duration::from_secs_f64(4.5), "{d:?}");
        w.patch_config(&serde_json::json!({"latency": {"profile": "instant"}})).unwrap();
        assert_eq!(w.lro_duration(1800.0, 2700.0), Duration::ZERO);
        w.patch_config(&serde_json::json!({"latency": {"profile": "realistic"}})).unwrap();
        assert!(w.lro_duration(1800.0, 2700.0) >= Duration::from_secs(1800));
    }

    #[test]
    fn config_patch_rejects_bad_values_and_keeps_the_old_config() {
        let w = World::new(SimConfig::default());
        assert!(w.patch_config(&serde_json::json!({"latency": {"profile": "sluggish"}})).is_err());
        assert_eq!(w.config().latency.profile, Profile::Fast);
    }

    #[test]
    fn clock_advances() {
        let w = World::new(SimConfig::default());
        let a = w.clock.now();
        w.clock.advance(Duration::from_secs(3600));
        assert!(w.clock.now() - a >= Duration::from_secs(3600));
    }
}
