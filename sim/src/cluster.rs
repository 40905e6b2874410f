//! The cluster side of the world run by upstream programs, not by code of ours: etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler (Kubernetes 1.35) and Cluster API's
//! manager (1.13),
//! built from the Go module proxy by `scripts/upstream-setup` (pins in `upstream/*/go.mod`).
//!
//! [`UpstreamCluster::start`] makes a PKI (a CA, the API server's serving certificate, client
//! certificates for the controller manager, the scheduler and CAPI, a service-account signing key), starts each
//! program on loopback with the flags a cluster runs them with (see ARCHITECTURE.md, "The local
//! cluster"), then installs from the module cache, never from copies kept here: Cluster API's and
//! CAPZ's CRDs (CAPI's with `conversion: Webhook` pointing at its manager, CAPZ's with the
//! contract labels CAPZ's own kustomize patches add), CAPI's webhooks scoped to
//! `openshift-cluster-api` as OpenShift scopes provider webhooks, CAPI's RBAC for the identity its
//! manager runs as, and OpenShift's API types (`Infrastructure`, `Network`, `Authentication`,
//! `Proxy`, `MachineConfig`, `MachineConfigPool`) from `github.com/openshift/api`.
//!
//! Every program dies with the thread that started it (`PR_SET_PDEATHSIG`) and with the value
//! (`Drop`); its output goes to a log file in the cluster's directory, whose tail an error names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use serde_json::{Value, json};

/// Where the upstream binaries are: `XCSP_UPSTREAM_BIN`, which `scripts/upstream-setup` prints.
pub const BIN_ENV: &str = "XCSP_UPSTREAM_BIN";

/// How the API server's readiness, a CRD's establishment and CAPI's webhooks are waited for.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Errors starting the upstream cluster; each says what to run or where to look.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "the upstream cluster's binaries are not built: set {BIN_ENV} to the directory `scripts/upstream-setup` prints (it builds them from the Go module proxy)"
    )]
    NotBuilt,
    #[error("{0} is missing from {BIN_ENV}: run scripts/upstream-setup again")]
    Missing(PathBuf),
    #[error("cannot make the cluster's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{program} did not become ready within {secs} s; the end of its log ({log}):\n{tail}")]
    NotReady { program: String, secs: u64, log: String, tail: String },
    #[error("{program} exited ({status}); the end of its log ({log}):\n{tail}")]
    Exited { program: String, status: String, log: String, tail: String },
    #[error("cannot read {path}: {message}")]
    Manifest { path: String, message: String },
    #[error("the API server refused {what}: {message}")]
    Api { what: String, message: String },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Io { what, source }
}

/// Timing flags of the upstream controllers, set for tests (their defaults are for real clusters).
#[derive(Debug, Clone)]
pub struct Timing {
    /// kube-controller-manager `--node-monitor-grace-period` (default 50 s upstream): how long a
    /// Node's Lease may go unrenewed before the node lifecycle controller sets Ready `Unknown`.
    pub node_monitor_grace: Duration,
    /// kube-controller-manager `--node-monitor-period` (default 5 s).
    pub node_monitor_period: Duration,
    /// CAPI manager `--sync-period` (default 10 min); CAPZ's manager is given the same.
    pub capi_sync: Duration,
    /// CAPZ manager `--debouncing-timer` (default 10 s): how soon an AzureMachine is reconciled
    /// again after a success.
    pub capz_debounce: Duration,
    /// CAPZ manager `--reconciler-requeue` (default 15 s): how soon it is reconciled again after a
    /// transient error, among them a long-running Azure operation not done yet.
    pub capz_requeue: Duration,
}

impl Timing {
    /// kube-apiserver `--default-unreachable-toleration-seconds` and
    /// `--default-not-ready-toleration-seconds` (300 upstream, which OpenShift keeps): what the
    /// `DefaultTolerationSeconds` admission plugin gives every Pod that names no toleration of its
    /// own for those taints. Scaled with the node monitor's grace, the ratio of upstream's
    /// defaults kept (300 s to 50 s), so an outage that outlasts it here outlasts it there.
    pub fn default_toleration(&self) -> Duration {
        self.node_monitor_grace * 6
    }

    /// The flags as the world gave them, in seconds, for `GET /_sim/timing`: what a test derives
    /// its deadlines from instead of guessing them.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "kube_apiserver": {
                "default_unreachable_toleration_seconds": self.default_toleration().as_secs().max(1),
                "default_not_ready_toleration_seconds": self.default_toleration().as_secs().max(1),
            },
            "kube_controller_manager": {
                "node_monitor_grace_period": self.node_monitor_grace.as_secs().max(1),
                "node_monitor_period": self.node_monitor_period.as_secs().max(1),
            },
            "capi": { "sync_period": self.capi_sync.as_secs().max(1) },
            "capz": {
                "sync_period": self.capi_sync.as_secs().max(1),
                "debouncing_timer": self.capz_debounce.as_secs().max(1),
                "reconciler_requeue": self.capz_requeue.as_secs().max(1),
            },
        })
    }
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            node_monitor_grace: Duration::from_secs(8),
            node_monitor_period: Duration::from_secs(1),
            capi_sync: Duration::from_secs(60),
            capz_debounce: Duration::from_secs(1),
            capz_requeue: Duration::from_secs(2),
        }
    }
}

/// The cluster's identity and timing.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    /// The binaries; `None`: [`BIN_ENV`].
    pub bin_dir: Option<PathBuf>,
    /// `--service-account-issuer` (`https://kubernetes.default.svc` when `None`, the in-cluster
    /// issuer an install without a public OIDC issuer has).
    pub service_account_issuer: Option<String>,
    /// Host names the API server is also known by in the world (`api-int.<cluster domain>`, what
    /// a kubeconfig Secret names): in its certificate, and routed to it on port 6443 by the
    /// world's proxy ([`crate::proxy`]), which CAPI's manager is given as `HTTPS_PROXY`.
    pub api_hosts: Vec<String>,
    pub timing: Timing,
    /// Run CAPZ's manager as OpenShift deploys it ([`Capz`]); `None`: CAPZ's CRDs only.
    pub capz: Option<Capz>,
    /// No Cluster API: the cluster of an OpenShift `Default` feature set on AWS, where no release
    /// installs Cluster API's core or provider CRDs or runs a manager (docs/src/concepts/cluster-api-on-openshift.md);
    /// only the IPAM CRDs the cluster-version operator installs there. `capz` must be `None`.
    pub no_capi: bool,
}

/// CAPZ's manager as OpenShift's manifests deploy it (openshift/cluster-api-provider-azure
/// `openshift/capi-operator-manifests/default/manifests.yaml`, Deployment
/// `capz-controller-manager`): service account `capz-manager` in `openshift-cluster-api`, the
/// projected token of audience `api://AzureADTokenExchange` at CAPZ's default path, the feature
/// gates `MachinePool=false,AKSResourceHealth=false,EdgeZone=false,ASOAPI=false` (no Azure Service
/// Operator runs: its API is switched off, as OpenShift's `turn-off-aso-api.yaml` does), CAPZ's
/// ClusterRole bound to the service account, its webhooks scoped to `openshift-cluster-api`.
/// It reaches Azure by its real host names through the world's proxy, trusting the world's CA.
#[derive(Debug, Clone, Default)]
pub struct Capz {
    /// More of the manager container's environment, as the cluster's Deployment sets it
    /// (`AZURE_AUTHORITY_HOST`, which OpenShift's manifests do not set).
    pub env: Vec<(String, String)>,
}

/// The label that aggregates a ClusterRole into CAPI's manager's (upstream `config/rbac`).
pub const CAPI_AGGREGATE_LABEL: &str = "cluster.x-k8s.io/aggregate-to-manager";

/// The namespace CAPZ runs in on OpenShift, and its service account.
pub const CAPZ_NAMESPACE: &str = "openshift-cluster-api";
pub const CAPZ_SERVICE_ACCOUNT: &str = "capz-manager";
/// What a started program takes of the world's own environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inherit {
    /// The world's environment, beside its own (the cluster's programs, as a test's shell runs them).
    Parent,
    /// Its own only, as a pod of a Deployment gets it.
    Nothing,
}

/// Where a pod of CAPZ's Deployment finds its projected token (CAPZ `azure/scope/workload_identity.go`).
const CAPZ_TOKEN_PATH: &str = "azure-identity-token";

/// A certificate and its key, PEM.
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// A certificate authority of the world's (the cluster's, or OpenShift's service CA).
pub struct Pki {
    ca: Pem,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    /// The CA's certificate, PEM.
    pub fn ca_cert(&self) -> &str {
        &self.ca.cert
    }

    pub fn new() -> Result<Pki, rcgen::Error> {
        let mut ca = CertificateParams::new(Vec::new())?;
        ca.distinguished_name.push(DnType::CommonName, "xcsp-world-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        validity(&mut ca);
        let key = KeyPair::generate()?;
        let cert = ca.self_signed(&key)?;
        let pem = Pem { cert: cert.pem(), key: key.serialize_pem() };
        Ok(Pki { ca: pem, issuer: Issuer::new(ca, key) })
    }

    /// A serving certificate for `sans`.
    pub fn server(&self, cn: &str, sans: &[&str]) -> Result<Pem, rcgen::Error> {
        let mut p = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(p)
    }

    /// A client certificate: the API server's x509 authenticator takes the user from the common
    /// name and a group from the organization.
    fn client(&self, user: &str, group: Option<&str>) -> Result<Pem, rcgen::Error> {
        let mut p = CertificateParams::new(Vec::new())?;
        p.distinguished_name.push(DnType::CommonName, user);
        if let Some(g) = group {
            p.distinguished_name.push(DnType::OrganizationName, g);
        }
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(p)
    }

    fn sign(&self, mut p: CertificateParams) -> Result<Pem, rcgen::Error> {
        validity(&mut p);
        p.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = p.signed_by(&key, &self.issuer)?;
        Ok(Pem { cert: cert.pem(), key: key.serialize_pem() })
    }
}

fn validity(p: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    (p.not_before, p.not_after) = (now - time::Duration::hours(1), now + time::Duration::days(365));
}

fn free_port() -> Result<u16, ClusterError> {
    crate::ports::free_port().map_err(io("cannot find a free port on 127.0.0.1"))
}

/// One upstream program and its log.
struct Program {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Program {
    fn tail(&self) -> String {
        tail(&self.log)
    }
}

/// The last lines of a program's log.
pub fn log_tail(log: &Path) -> String {
    tail(log)
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(25)..].join("\n")
}

/// The running cluster. Dropping it stops every program and removes its directory.
pub struct UpstreamCluster {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The CA the API server's certificate chains to, which also signs client certificates and
    /// the CSRs kube-controller-manager approves.
    pub ca_pem: String,
    /// A bearer token in `system:masters` (the API server's static token file).
    pub admin_token: String,
    /// The upstream versions running, read from the programs themselves.
    pub versions: BTreeMap<&'static str, String>,
    /// Where the module cache holds the modules whose manifests were installed.
    pub modules: BTreeMap<String, PathBuf>,
    /// The world's names for programs that dial them ([`crate::proxy`]).
    pub proxy: crate::proxy::Proxy,
    /// The API server's audit log (JSON lines, one event per delete at level `Metadata`): who
    /// deleted what, and when, as the server saw it.
    pub audit_log: PathBuf,
    /// A serving certificate (PEM, with its key) the world's CA signed for Azure's host names
    /// ([`crate::arm::clouds::host_names`]), which the world's TLS front ([`crate::front`]) presents.
    pub clouds_tls: (String, String),
    /// The upstream binaries (a pod of a manager the world builds runs one: [`crate::kube::pods`]).
    pub bin: PathBuf,
    /// The CA's certificate as a file.
    pub ca_file: PathBuf,
    programs: Vec<Program>,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for UpstreamCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamCluster").field("url", &self.url).field("versions", &self.versions).finish()
    }
}

impl Drop for UpstreamCluster {
    fn drop(&mut self) {
        // The last started first: CAPI and the controller manager before the API server, etcd last.
        for p in self.programs.iter_mut().rev() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

impl UpstreamCluster {
    /// The directory of the binaries: `XCSP_UPSTREAM_BIN`; an error naming the setup script
    /// when it is unset (a test that needs the cluster fails, never skips).
    pub fn bin_dir() -> Result<PathBuf, ClusterError> {
        std::env::var_os(BIN_ENV).filter(|v| !v.is_empty()).map(PathBuf::from).ok_or(ClusterError::NotBuilt)
    }

    /// Where this cluster keeps its files (certificates, etcd's data, the programs' logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kubeconfig for the admin token (context `xcsp-world`).
    pub fn kubeconfig(&self) -> String {
        kubeconfig(&self.url, &self.ca_pem, Auth::Token(&self.admin_token))
    }

    /// A kube client as the admin.
    pub async fn client(&self) -> Result<kube::Client, ClusterError> {
        client_for(&self.url, &self.ca_pem, &self.admin_token).await
    }

    /// A kube client that acts as `user` in `groups` (the admin impersonating them, as
    /// `kubectl --as` does), so the API server records and authorizes that user.
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> Result<kube::Client, ClusterError> {
        let mut config = config_for(&self.url, &self.ca_pem, &self.admin_token).await?;
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        kube::Client::try_from(config)
            .map_err(|e| ClusterError::Api { what: "a client".into(), message: e.to_string() })
    }

    /// Is each program still running? An error with the log of the first that is not.
    pub fn check_running(&mut self) -> Result<(), ClusterError> {
        for p in &mut self.programs {
            if let Ok(Some(status)) = p.child.try_wait() {
                return Err(ClusterError::Exited {
                    program: p.name.to_string(),
                    status: status.to_string(),
                    log: p.log.display().to_string(),
                    tail: p.tail(),
                });
            }
        }
        Ok(())
    }

    /// Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and CAPI's manager, and installs the
    /// CRDs, webhooks and RBAC described in the module documentation. Must be called from a
    /// thread that outlives the cluster (the programs die with it), not a blocking-pool thread.
    pub async fn start(config: ClusterConfig) -> Result<UpstreamCluster, ClusterError> {
        let bin = match config.bin_dir.clone() {
            Some(b) => b,
            None => UpstreamCluster::bin_dir()?,
        };
        for name in ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "capi-manager"] {
            if !bin.join(name).exists() {
                return Err(ClusterError::Missing(bin.join(name)));
            }
        }
        let modules = read_modules(&bin)?;
        sweep_stale_dirs();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(io("cannot make a directory"))?;
        let d = dir.path().to_path_buf();
        let write = |name: &str, text: &str| -> Result<PathBuf, ClusterError> {
            let p = d.join(name);
            std::fs::write(&p, text).map_err(io(format!("cannot write {}", p.display())))?;
            Ok(p)
        };

        let pki = Pki::new()?;
        let ca = write("ca.crt", &pki.ca.cert)?;
        let ca_key = write("ca.key", &pki.ca.key)?;
        let mut sans = vec!["127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc", "10.96.0.1"];
        sans.extend(config.api_hosts.iter().map(String::as_str));
        let serving = pki.server("kube-apiserver", &sans)?;
        let (apiserver_crt, apiserver_key) =
            (write("apiserver.crt", &serving.cert)?, write("apiserver.key", &serving.key)?);
        // The service-account signing key: ECDSA P-256 (ES256), which the API server accepts
        // beside RSA; its public half verifies the tokens.
        let sa = KeyPair::generate()?;
        let sa_key = write("sa.key", &sa.serialize_pem())?;
        let sa_pub = write("sa.pub", &sa.public_key_pem())?;
        let admin_token = format!("xcsp-admin-{}", uuid::Uuid::new_v4().simple());
        let tokens = write("tokens.csv", &format!("{admin_token},xcsp-admin,xcsp-admin,system:masters\n"))?;
        // The deletions, with who made them and when (audit.k8s.io/v1 Policy).
        let audit_policy = write(
            "audit-policy.yaml",
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n  verbs: [\"delete\", \"deletecollection\"]\n- level: None\n",
        )?;
        let audit_log = d.join("audit.log");

        let proxy = crate::proxy::Proxy::start().await.map_err(io("cannot start the world's proxy"))?;
        let clouds = pki.server("azure", &crate::arm::clouds::host_names())?;
        let mut cluster = UpstreamCluster {
            proxy,
            audit_log: audit_log.clone(),
            clouds_tls: (clouds.cert, clouds.key),
            bin: bin.clone(),
            ca_file: ca.clone(),
            url: String::new(),
            ca_pem: pki.ca.cert.clone(),
            admin_token,
            versions: BTreeMap::new(),
            modules,
            programs: Vec::new(),
            dir,
        };

        // etcd on loopback, one member; fsync off (a test's data need not survive a power cut).
        let (etcd_client, etcd_peer) = (free_port()?, free_port()?);
        let client_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        cluster.spawn(
            "etcd",
            &bin,
            &[
                "--name=world".into(),
                format!("--data-dir={}", d.join("etcd").display()),
                format!("--listen-client-urls={client_url}"),
                format!("--advertise-client-urls={client_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=world={peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
        )?;

        let port = free_port()?;
        cluster.url = format!("https://127.0.0.1:{port}");
        for host in &config.api_hosts {
            cluster.proxy.routes.add(host, 6443, std::net::SocketAddr::from(([127, 0, 0, 1], port)));
        }
        let issuer = config.service_account_issuer.clone().unwrap_or_else(|| "https://kubernetes.default.svc".into());
        // The world's proxy, as a cluster behind one gives its API server: a webhook named by Service
        // (`<svc>.<ns>.svc`) is dialled through it (client-go `transport/cache.go`), and the proxy
        // routes that name to the pod that serves it ([`crate::kube::pods`]); loopback goes direct.
        let apiserver_proxy = cluster.proxy.url();
        cluster.spawn_env(
            "kube-apiserver",
            &bin,
            &[
                format!("--etcd-servers={client_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
                format!("--cert-dir={}", d.display()),
                format!("--tls-cert-file={}", apiserver_crt.display()),
                format!("--tls-private-key-file={}", apiserver_key.display()),
                format!("--client-ca-file={}", ca.display()),
                format!("--token-auth-file={}", tokens.display()),
                "--authorization-mode=Node,RBAC".into(),
                // The default admission chain plus what a cluster's installer adds.
                "--enable-admission-plugins=NodeRestriction".into(),
                format!(
                    "--default-unreachable-toleration-seconds={}",
                    config.timing.default_toleration().as_secs().max(1)
                ),
                format!(
                    "--default-not-ready-toleration-seconds={}",
                    config.timing.default_toleration().as_secs().max(1)
                ),
                format!("--service-account-issuer={issuer}"),
                format!("--service-account-key-file={}", sa_pub.display()),
                format!("--service-account-signing-key-file={}", sa_key.display()),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                "--allow-privileged=true".into(),
                "--profiling=false".into(),
                format!("--audit-policy-file={}", audit_policy.display()),
                format!("--audit-log-path={}", audit_log.display()),
                "--audit-log-format=json".into(),
            ],
            &[("HTTPS_PROXY", apiserver_proxy.as_str()), ("NO_PROXY", "127.0.0.1,localhost")],
            Inherit::Parent,
        )?;
        let admin = cluster.client().await?;
        cluster.wait_ready(&admin).await?;

        // kube-controller-manager as a cluster runs it: its own client certificate, a service
        // account per controller, the CA to sign CSRs with, the node lifecycle's timing for tests.
        let kcm_cert = pki.client("system:kube-controller-manager", None)?;
        let kcm_kubeconfig = write(
            "kcm.kubeconfig",
            &kubeconfig(&cluster.url, &cluster.ca_pem, Auth::Cert(&kcm_cert.cert, &kcm_cert.key)),
        )?;
        let t = &config.timing;
        cluster.spawn(
            "kube-controller-manager",
            &bin,
            &[
                format!("--kubeconfig={}", kcm_kubeconfig.display()),
                format!("--authentication-kubeconfig={}", kcm_kubeconfig.display()),
                format!("--authorization-kubeconfig={}", kcm_kubeconfig.display()),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()?),
                "--leader-elect=false".into(),
                "--use-service-account-credentials=true".into(),
                format!("--service-account-private-key-file={}", sa_key.display()),
                format!("--root-ca-file={}", ca.display()),
                format!("--cluster-signing-cert-file={}", ca.display()),
                format!("--cluster-signing-key-file={}", ca_key.display()),
                // No pods run in this world (no kubelet runs them): the Deployments that stand
                // for OpenShift's operators keep the status their seed gives them.
                "--controllers=*,-deployment-controller,-replicaset-controller".into(),
                format!("--node-monitor-grace-period={}s", t.node_monitor_grace.as_secs().max(1)),
                format!("--node-monitor-period={}s", t.node_monitor_period.as_secs().max(1)),
                "--profiling=false".into(),
            ],
        )?;

        // kube-scheduler as a cluster runs it, as the user its bootstrap ClusterRoles are bound to
        // (`system:kube-scheduler`, `system:volume-scheduler`): it binds the Pods a test makes,
        // and says why one does not fit (the Pod's `PodScheduled` condition); no kubelet runs them.
        let sched_cert = pki.client("system:kube-scheduler", None)?;
        let sched_kubeconfig = write(
            "scheduler.kubeconfig",
            &kubeconfig(&cluster.url, &cluster.ca_pem, Auth::Cert(&sched_cert.cert, &sched_cert.key)),
        )?;
        cluster.spawn(
            "kube-scheduler",
            &bin,
            &[
                format!("--kubeconfig={}", sched_kubeconfig.display()),
                format!("--authentication-kubeconfig={}", sched_kubeconfig.display()),
                format!("--authorization-kubeconfig={}", sched_kubeconfig.display()),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()?),
                "--leader-elect=false".into(),
                "--profiling=false".into(),
            ],
        )?;

        // Cluster API: CRDs from its module, conversion through its manager's webhook server.
        let webhook_port = free_port()?;
        let webhook_url = format!("https://127.0.0.1:{webhook_port}");
        let certs = d.join("capi-webhook");
        std::fs::create_dir_all(&certs).map_err(io("cannot make the webhook's certificate directory"))?;
        let wh = pki.server("capi-webhook", &["127.0.0.1", "localhost"])?;
        std::fs::write(certs.join("tls.crt"), &wh.cert).map_err(io("cannot write the webhook certificate"))?;
        std::fs::write(certs.join("tls.key"), &wh.key).map_err(io("cannot write the webhook key"))?;
        let ca_bundle = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &cluster.ca_pem);

        let capi = cluster.module("sigs.k8s.io/cluster-api")?;
        let capz = cluster.module("sigs.k8s.io/cluster-api-provider-azure")?;
        let openshift = cluster.module("github.com/openshift/api")?;
        let mut crds = Vec::new();
        for rel in OPENSHIFT_CRDS {
            crds.extend(yaml_file(&openshift.join(rel))?);
        }
        if config.no_capi {
            if config.capz.is_some() {
                return Err(ClusterError::Manifest {
                    path: "ClusterConfig".into(),
                    message: "CAPZ cannot run on a cluster with no Cluster API".into(),
                });
            }
            // The cluster-version operator's IPAM CRDs, the only ones of Cluster API a Default
            // cluster has (openshift/cluster-api `openshift/manifests`, gated
            // `-ClusterAPIMachineManagement` from release-4.22), as the CVO applies a manifest:
            // its annotations kept, no conversion webhook.
            for name in IPAM_CRDS {
                for mut doc in
                    yaml_file(&capi.join("config/crd/bases").join(format!("ipam.cluster.x-k8s.io_{name}.yaml")))?
                {
                    doc["metadata"]["annotations"]["include.release.openshift.io/self-managed-high-availability"] =
                        json!("true");
                    doc["metadata"]["annotations"]["release.openshift.io/feature-gate"] =
                        json!("-ClusterAPIMachineManagement");
                    crds.push(doc);
                }
            }
            cluster.install_crds(&admin, crds).await?;
            cluster.versions = versions(&admin, &bin, &cluster.modules).await;
            return Ok(cluster);
        }
        for doc in yaml_dir(&capi.join("config/crd/bases"))? {
            crds.push(with_conversion_webhook(doc, &webhook_url, &ca_bundle));
        }
        let contract = capz_contract_labels(&capz.join("config/crd/patches"))?;
        for doc in yaml_dir(&capz.join("config/crd/bases"))? {
            crds.push(with_labels(doc, &contract));
        }
        // CAPA's AWSCluster, with the labels CAPA's kustomization gives every CRD of it.
        let capa = cluster.module("sigs.k8s.io/cluster-api-provider-aws/v2")?;
        let common = yaml_file(&capa.join("config/crd/kustomization.yaml"))?
            .first()
            .map(|k| k["commonLabels"].clone())
            .unwrap_or(Value::Null);
        for doc in yaml_file(&capa.join("config/crd/bases/infrastructure.cluster.x-k8s.io_awsclusters.yaml"))? {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
            crds.push(with_labels(doc, &BTreeMap::from([(name, common.clone())])));
        }
        cluster.install_crds(&admin, crds).await?;

        // CAPI's manager runs as its service account's user with CAPI's own ClusterRole, bound
        // through the aggregated role as upstream's kustomization does
        // (`config/rbac/aggregated_role.yaml`, `config/default/manager_role_aggregation_patch.yaml`)
        // and OpenShift's manifests keep (`capi-aggregated-manager-role`): a provider's own kinds
        // reach the manager by a ClusterRole labelled `cluster.x-k8s.io/aggregate-to-manager`.
        let capi_user = "system:serviceaccount:capi-system:capi-manager";
        for mut doc in yaml_file(&capi.join("config/rbac/role.yaml"))? {
            doc["metadata"]["labels"][CAPI_AGGREGATE_LABEL] = json!("true");
            apply(&admin, doc, "the CAPI manager's ClusterRole").await?;
        }
        for doc in yaml_file(&capi.join("config/rbac/aggregated_role.yaml"))? {
            apply(&admin, doc, "the CAPI manager's aggregated ClusterRole").await?;
        }
        let role = "aggregated-manager-role";
        apply(
            &admin,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "capi-manager"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": capi_user}]}),
            "the CAPI manager's ClusterRoleBinding",
        )
        .await?;
        let capi_cert = pki.client(capi_user, None)?;
        let capi_kubeconfig = write(
            "capi.kubeconfig",
            &kubeconfig(&cluster.url, &cluster.ca_pem, Auth::Cert(&capi_cert.cert, &capi_cert.key)),
        )?;
        let health_port = free_port()?;
        let proxy_url = cluster.proxy.url();
        cluster.spawn_env(
            "capi-manager",
            &bin,
            &[
                format!("--kubeconfig={}", capi_kubeconfig.display()),
                "--leader-elect=false".into(),
                format!("--webhook-port={webhook_port}"),
                format!("--webhook-cert-dir={}", certs.display()),
                format!("--health-addr=127.0.0.1:{health_port}"),
                "--diagnostics-address=0".into(),
                format!("--sync-period={}s", t.capi_sync.as_secs().max(1)),
            ],
            &[
                ("POD_NAMESPACE", "capi-system"),
                ("HTTPS_PROXY", proxy_url.as_str()),
                ("NO_PROXY", "127.0.0.1,localhost"),
            ],
            Inherit::Parent,
        )?;
        cluster.wait_http("capi-manager", &format!("http://127.0.0.1:{health_port}/readyz")).await?;

        // Its admission webhooks, scoped as OpenShift scopes a provider's: only objects in
        // openshift-cluster-api (cluster-capi-operator's manifests-gen).
        for doc in yaml_file(&capi.join("config/webhook/manifests.yaml"))? {
            let doc = webhook_by_url(doc, &webhook_url, &ca_bundle, Some("openshift-cluster-api"));
            apply(&admin, doc, "CAPI's webhook configuration").await?;
        }
        if let Some(capz_config) = &config.capz {
            cluster.start_capz(&admin, &bin, &pki, capz_config, &ca, &ca_bundle, t).await?;
        }
        cluster.versions = versions(&admin, &bin, &cluster.modules).await;
        Ok(cluster)
    }

    /// Starts CAPZ's manager as described at [`Capz`], and waits for it to be ready.
    #[allow(clippy::too_many_arguments)]
    async fn start_capz(
        &mut self,
        admin: &kube::Client,
        bin: &Path,
        pki: &Pki,
        capz_config: &Capz,
        ca: &Path,
        ca_bundle: &str,
        t: &Timing,
    ) -> Result<(), ClusterError> {
        if !bin.join("capz-manager").exists() {
            return Err(ClusterError::Missing(bin.join("capz-manager")));
        }
        let capz = self.module("sigs.k8s.io/cluster-api-provider-azure")?;
        let user = format!("system:serviceaccount:{CAPZ_NAMESPACE}:{CAPZ_SERVICE_ACCOUNT}");
        apply(
            admin,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CAPZ_NAMESPACE}}),
            "CAPZ's namespace",
        )
        .await?;
        apply(
            admin,
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": CAPZ_SERVICE_ACCOUNT, "namespace": CAPZ_NAMESPACE}}),
            "CAPZ's service account",
        )
        .await?;
        // CAPZ's own ClusterRole (kustomize gives it the `capz-` prefix), bound to its account.
        for mut doc in yaml_file(&capz.join("config/rbac/role.yaml"))? {
            doc["metadata"]["name"] = json!("capz-manager-role");
            apply(admin, doc, "CAPZ's ClusterRole").await?;
        }
        apply(
            admin,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "capz-manager-rolebinding"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "capz-manager-role"},
                "subjects": [{"kind": "ServiceAccount", "name": CAPZ_SERVICE_ACCOUNT, "namespace": CAPZ_NAMESPACE}]}),
            "CAPZ's ClusterRoleBinding",
        )
        .await?;
        // The projected token, minted by the API server for the service account and written
        // where the pod would see it; renewed as the kubelet renews it (at 80% of its life).
        let tokens = self.dir.path().join("capz-tokens");
        std::fs::create_dir_all(&tokens).map_err(io("cannot make CAPZ's token directory"))?;
        let token_file = tokens.join(CAPZ_TOKEN_PATH);
        let life = write_projected_token(admin, &token_file).await?;
        {
            let (admin, token_file) = (admin.clone(), token_file.clone());
            tokio::spawn(async move {
                let mut life = life;
                loop {
                    tokio::time::sleep(life.mul_f64(0.8)).await;
                    match write_projected_token(&admin, &token_file).await {
                        Ok(l) => life = l,
                        Err(e) => {
                            eprintln!("xcsp-sim: renewing CAPZ's projected token: {e}");
                            life = Duration::from_secs(10);
                        }
                    }
                }
            });
        }
        let cert = pki.client(&user, None)?;
        let kubeconfig_path = self.dir.path().join("capz.kubeconfig");
        std::fs::write(&kubeconfig_path, kubeconfig(&self.url, &self.ca_pem, Auth::Cert(&cert.cert, &cert.key)))
            .map_err(io("cannot write CAPZ's kubeconfig"))?;
        let certs = self.dir.path().join("capz-webhook");
        std::fs::create_dir_all(&certs).map_err(io("cannot make CAPZ's webhook certificate directory"))?;
        let wh = pki.server("capz-webhook", &["127.0.0.1", "localhost"])?;
        std::fs::write(certs.join("tls.crt"), &wh.cert).map_err(io("cannot write CAPZ's webhook certificate"))?;
        std::fs::write(certs.join("tls.key"), &wh.key).map_err(io("cannot write CAPZ's webhook key"))?;
        let (webhook_port, health_port) = (free_port()?, free_port()?);
        let proxy_url = self.proxy.url();
        let mut env: Vec<(String, String)> = vec![
            ("POD_NAMESPACE".into(), CAPZ_NAMESPACE.into()),
            ("AZURE_FEDERATED_TOKEN_FILE".into(), token_file.display().to_string()),
            ("HTTPS_PROXY".into(), proxy_url.clone()),
            ("NO_PROXY".into(), "127.0.0.1,localhost".into()),
            ("SSL_CERT_FILE".into(), ca.display().to_string()),
        ];
        env.extend(capz_config.env.iter().cloned());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.spawn_env(
            "capz-manager",
            bin,
            &[
                format!("--kubeconfig={}", kubeconfig_path.display()),
                "--leader-elect=false".into(),
                "--diagnostics-address=0".into(),
                "--feature-gates=MachinePool=false,AKSResourceHealth=false,EdgeZone=false,ASOAPI=false".into(),
                format!("--webhook-port={webhook_port}"),
                format!("--webhook-cert-dir={}", certs.display()),
                format!("--health-addr=127.0.0.1:{health_port}"),
                format!("--sync-period={}s", t.capi_sync.as_secs().max(1)),
                // Timing for tests ([`Timing`]): how soon an AzureMachine is reconciled again
                // after a success, and after a transient error.
                format!("--debouncing-timer={}s", t.capz_debounce.as_secs().max(1)),
                format!("--reconciler-requeue={}s", t.capz_requeue.as_secs().max(1)),
                "--v=2".into(),
            ],
            &env,
            // A pod's environment is its Deployment's alone: nothing of the process that runs the
            // world (whose own AZURE_AUTHORITY_HOST, say, names the sim's plain address for xcsp).
            Inherit::Nothing,
        )?;
        self.wait_http("capz-manager", &format!("http://127.0.0.1:{health_port}/readyz")).await?;
        let webhook_url = format!("https://127.0.0.1:{webhook_port}");
        for doc in yaml_file(&capz.join("config/webhook/manifests.yaml"))? {
            let mut doc = webhook_by_url(doc, &webhook_url, ca_bundle, Some(CAPZ_NAMESPACE));
            // Named as kustomize names them (`capz-` prefix), beside CAPI's of the same base name.
            let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
            doc["metadata"]["name"] = json!(format!("capz-{name}"));
            apply(admin, doc, "CAPZ's webhook configuration").await?;
        }
        Ok(())
    }

    fn module(&self, path: &str) -> Result<PathBuf, ClusterError> {
        self.modules.get(path).cloned().ok_or_else(|| ClusterError::Manifest {
            path: format!("{path} (modules.json)"),
            message: "not among the modules scripts/upstream-setup downloaded".into(),
        })
    }

    fn spawn(&mut self, name: &'static str, bin: &Path, args: &[String]) -> Result<(), ClusterError> {
        self.spawn_env(name, bin, args, &[], Inherit::Parent)
    }

    fn spawn_env(
        &mut self,
        name: &'static str,
        bin: &Path,
        args: &[String],
        env: &[(&str, &str)],
        inherit: Inherit,
    ) -> Result<(), ClusterError> {
        let log = self.dir.path().join(format!("{name}.log"));
        let out = std::fs::File::create(&log).map_err(io(format!("cannot create {}", log.display())))?;
        let err = out.try_clone().map_err(io("cannot share a log file"))?;
        let mut command = Command::new(bin.join(name));
        if inherit == Inherit::Nothing {
            command.env_clear();
        }
        command.args(args).envs(env.iter().copied()).stdin(Stdio::null()).stdout(out).stderr(err);
        crate::child::die_with_parent(&mut command, libc::SIGKILL);
        let child = command.spawn().map_err(io(format!("cannot start {}", bin.join(name).display())))?;
        self.programs.push(Program { name, child, log });
        Ok(())
    }

    /// Waits for `/readyz` of the API server, failing early when a program exits.
    async fn wait_ready(&mut self, admin: &kube::Client) -> Result<(), ClusterError> {
        let start = Instant::now();
        loop {
            self.check_running()?;
            let req = http::Request::get("/readyz").body(Vec::new()).expect("a request");
            if let Ok(text) = admin.request_text(req).await
                && text.trim() == "ok"
            {
                return Ok(());
            }
            if start.elapsed() > START_TIMEOUT {
                let p = self.programs.iter().find(|p| p.name == "kube-apiserver").expect("started");
                return Err(ClusterError::NotReady {
                    program: p.name.into(),
                    secs: START_TIMEOUT.as_secs(),
                    log: p.log.display().to_string(),
                    tail: p.tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn wait_http(&mut self, program: &str, url: &str) -> Result<(), ClusterError> {
        let start = Instant::now();
        let http = reqwest::Client::new();
        loop {
            self.check_running()?;
            if http.get(url).send().await.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if start.elapsed() > START_TIMEOUT {
                let p = self.programs.iter().find(|p| p.name == program).expect("started");
                return Err(ClusterError::NotReady {
                    program: program.into(),
                    secs: START_TIMEOUT.as_secs(),
                    log: p.log.display().to_string(),
                    tail: p.tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Applies the CRDs and waits until each is `Established`.
    async fn install_crds(&mut self, admin: &kube::Client, crds: Vec<Value>) -> Result<(), ClusterError> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let mut names = Vec::new();
        for crd in crds {
            names.push(crd["metadata"]["name"].as_str().unwrap_or_default().to_string());
            apply(admin, crd, "a CRD").await?;
        }
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(admin.clone());
        let start = Instant::now();
        for name in names {
            loop {
                let established = api.get_opt(&name).await.ok().flatten().is_some_and(|c| {
                    c.status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
                if established {
                    break;
                }
                if start.elapsed() > START_TIMEOUT {
                    return Err(ClusterError::Api {
                        what: format!("CRD {name}"),
                        message: format!("not Established within {} s", START_TIMEOUT.as_secs()),
                    });
                }
                self.check_running()?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }
}

/// OpenShift's API types the world serves, as `github.com/openshift/api` generates them for the
/// Default feature set of a self-managed cluster.
/// The IPAM kinds of Cluster API that the cluster-version operator installs on every cluster.
const IPAM_CRDS: &[&str] = &["ipaddresses", "ipaddressclaims"];

const OPENSHIFT_CRDS: &[&str] = &[
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_featuregates.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_infrastructures-Default.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_networks-Default.crd.yaml",
    "operator/v1/zz_generated.crd-manifests/0000_70_network_01_networks-Default.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_authentications-Default.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_03_config-operator_01_proxies.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_imagedigestmirrorsets.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_imagetagmirrorsets.crd.yaml",
    "operator/v1alpha1/zz_generated.crd-manifests/0000_10_config-operator_01_imagecontentsourcepolicies.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
    "machineconfiguration/v1/zz_generated.crd-manifests/0000_80_machine-config_01_machineconfigs.crd.yaml",
    "machineconfiguration/v1/zz_generated.crd-manifests/0000_80_machine-config_01_machineconfigpools-SelfManagedHA.crd.yaml",
];

/// `modules.json` beside the binaries: module path -> its directory in the module cache.
fn read_modules(bin: &Path) -> Result<BTreeMap<String, PathBuf>, ClusterError> {
    let path = bin.join("modules.json");
    let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::Manifest {
        path: path.display().to_string(),
        message: format!("{e} (run scripts/upstream-setup again)"),
    })?;
    serde_json::from_str(&text)
        .map_err(|e| ClusterError::Manifest { path: path.display().to_string(), message: e.to_string() })
}

fn yaml_file(path: &Path) -> Result<Vec<Value>, ClusterError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ClusterError::Manifest { path: path.display().to_string(), message: e.to_string() })?;
    let mut docs = Vec::new();
    for de in serde_norway::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(de)
            .map_err(|e| ClusterError::Manifest { path: path.display().to_string(), message: e.to_string() })?;
        if v.is_object() {
            docs.push(v);
        }
    }
    Ok(docs)
}

fn yaml_dir(dir: &Path) -> Result<Vec<Value>, ClusterError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ClusterError::Manifest { path: dir.display().to_string(), message: e.to_string() })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for f in files {
        docs.extend(yaml_file(&f)?);
    }
    Ok(docs)
}

/// What CAPI's kustomize patch `webhook_in_<plural>.yaml` does, with the manager reached by URL
/// (it runs beside the API server, not behind a Service).
fn with_conversion_webhook(mut crd: Value, url: &str, ca_bundle: &str) -> Value {
    crd["spec"]["conversion"] = json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("{url}/convert"), "caBundle": ca_bundle},
        },
    });
    crd
}

/// CAPZ's `capicontract_in_<plural>.yaml` patches: CRD name -> the labels they add (the
/// `cluster.x-k8s.io/<contract>` labels CAPI reads to learn which API version serves a contract).
fn capz_contract_labels(dir: &Path) -> Result<BTreeMap<String, Value>, ClusterError> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| ClusterError::Manifest { path: dir.display().to_string(), message: e.to_string() })?;
    for e in entries.flatten() {
        let p = e.path();
        if !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("capicontract_in_")) {
            continue;
        }
        for doc in yaml_file(&p)? {
            if let (Some(name), Some(labels)) = (doc["metadata"]["name"].as_str(), doc["metadata"].get("labels")) {
                out.insert(name.to_string(), labels.clone());
            }
        }
    }
    Ok(out)
}

fn with_labels(mut crd: Value, labels: &BTreeMap<String, Value>) -> Value {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    if let Some(Value::Object(add)) = labels.get(&name) {
        let meta = &mut crd["metadata"];
        if !meta["labels"].is_object() {
            meta["labels"] = json!({});
        }
        for (k, v) in add {
            meta["labels"][k] = v.clone();
        }
    }
    crd
}

/// A webhook configuration whose `service` references become the manager's URL, with the CA,
/// scoped to one namespace when `namespace` is given.
fn webhook_by_url(mut doc: Value, url: &str, ca_bundle: &str, namespace: Option<&str>) -> Value {
    if let Some(hooks) = doc["webhooks"].as_array_mut() {
        for h in hooks {
            let path = h["clientConfig"]["service"]["path"].as_str().unwrap_or("/").to_string();
            h["clientConfig"] = json!({"url": format!("{url}{path}"), "caBundle": ca_bundle});
            if let Some(ns) = namespace {
                h["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
            }
        }
    }
    doc
}

/// Server-side apply of one object (any kind), forced, as `manager`; the stand-ins of
/// [`crate::kube::bridge`] apply theirs with it too. The error names the kind and the object.
pub(crate) async fn apply_as(client: &kube::Client, doc: &Value, manager: &str) -> Result<(), String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let what = |e: kube::Error| format!("{kind} {name}: {e}");
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.map_err(what)?;
    let api: kube::Api<kube::api::DynamicObject> = match (caps.scope, doc["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => kube::Api::namespaced_with(client.clone(), ns, &ar),
        _ => kube::Api::all_with(client.clone(), &ar),
    };
    let pp = kube::api::PatchParams::apply(manager).force();
    api.patch(name, &pp, &kube::api::Patch::Apply(doc)).await.map(|_| ()).map_err(what)
}

/// Mints a token for CAPZ's service account with the audience Entra's workload identity expects,
/// as a projected volume of its Deployment asks (`expirationSeconds: 3600`), writes it to `path`
/// (through a rename, as the kubelet swaps a projected volume's files), and answers its life.
async fn write_projected_token(admin: &kube::Client, path: &Path) -> Result<Duration, ClusterError> {
    let api: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(admin.clone(), CAPZ_NAMESPACE);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["api://AzureADTokenExchange"], "expirationSeconds": 3600}});
    let answer: Value = api
        .create_subresource("token", CAPZ_SERVICE_ACCOUNT, &kube::api::PostParams::default(), &request)
        .await
        .map_err(|e| ClusterError::Api { what: "a token for CAPZ's service account".into(), message: e.to_string() })?;
    let token = answer["status"]["token"].as_str().unwrap_or_default();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, token).map_err(io("cannot write CAPZ's token"))?;
    std::fs::rename(&tmp, path).map_err(io("cannot write CAPZ's token"))?;
    Ok(Duration::from_secs(3600))
}

/// [`apply_as`] by the world's installer (field manager `xcsp-world`).
async fn apply(client: &kube::Client, doc: Value, what: &str) -> Result<(), ClusterError> {
    apply_as(client, &doc, "xcsp-world").await.map_err(|message| ClusterError::Api { what: what.into(), message })
}

/// The prefix of a cluster's directory in the temporary directory, before the owning process's id.
const DIR_PREFIX: &str = "xcsp-cluster-";

/// Removes the directories of clusters whose process is gone. A cluster's directory (etcd's data,
/// 130 MB of preallocated log) goes with the value, but a test binary keeps its cluster in a static
/// and exits without dropping it; without this every run would leave one behind.
fn sweep_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix(DIR_PREFIX) else { continue };
        let stale = match rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) {
            Some(pid) => pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists(),
            // Named before the process id was in the name: left by a run a day or more ago.
            None => e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > Duration::from_secs(24 * 3600))),
        };
        if stale {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The versions the programs report: the API server's `/version`, the others' `--version`.
async fn versions(
    admin: &kube::Client,
    bin: &Path,
    modules: &BTreeMap<String, PathBuf>,
) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    if let Ok(v) = admin.apiserver_version().await {
        out.insert("kube-apiserver", v.git_version);
    }
    for name in ["etcd", "kube-controller-manager", "kube-scheduler"] {
        if let Ok(o) = Command::new(bin.join(name)).arg("--version").output() {
            let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
            out.insert(name, text.lines().next().unwrap_or_default().trim().to_string());
        }
    }
    // CAPI's manager has no --version; the module it was built from names it.
    if let Some(dir) = modules.get("sigs.k8s.io/cluster-api").and_then(|d| d.file_name()) {
        out.insert("capi-manager", dir.to_string_lossy().replace('@', " "));
    }
    out
}

enum Auth<'a> {
    Token(&'a str),
    /// A token file, re-read as it changes (client-go's `tokenFile`).
    TokenFile(&'a Path),
    Cert(&'a str, &'a str),
}

fn kubeconfig(url: &str, ca_pem: &str, auth: Auth<'_>) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user = match auth {
        Auth::Token(t) => format!("    token: {t}\n"),
        Auth::TokenFile(p) => format!("    tokenFile: {}\n", p.display()),
        Auth::Cert(c, k) => format!("    client-certificate-data: {}\n    client-key-data: {}\n", b64(c), b64(k)),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: xcsp-world\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: xcsp-world\n  user:\n{user}contexts:\n- name: xcsp-world\n  context:\n    cluster: xcsp-world\n    user: xcsp-world\ncurrent-context: xcsp-world\npreferences: {{}}\n",
        ca = b64(ca_pem)
    )
}

/// A kubeconfig for `url` trusting `ca_pem`, its bearer token read from `token` (a pod's
/// service-account token, renewed in place).
pub fn token_file_kubeconfig(url: &str, ca_pem: &str, token: &Path) -> String {
    kubeconfig(url, ca_pem, Auth::TokenFile(token))
}

/// A kube client for `url` trusting `ca_pem`, with a bearer token.
pub async fn client_for(url: &str, ca_pem: &str, token: &str) -> Result<kube::Client, ClusterError> {
    let config = config_for(url, ca_pem, token).await?;
    kube::Client::try_from(config).map_err(|e| ClusterError::Api { what: "a client".into(), message: e.to_string() })
}

/// The client configuration of a kubeconfig for `url` trusting `ca_pem`, with a bearer token.
async fn config_for(url: &str, ca_pem: &str, token: &str) -> Result<kube::Config, ClusterError> {
    let text = kubeconfig(url, ca_pem, Auth::Token(token));
    let kc: kube::config::Kubeconfig = serde_norway::from_str(&text)
        .map_err(|e| ClusterError::Api { what: "the kubeconfig".into(), message: e.to_string() })?;
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| ClusterError::Api { what: "the kubeconfig".into(), message: e.to_string() })
}
