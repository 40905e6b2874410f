//! The kubelet and the workload controllers for the one kind of pod the world can run for real:
//! a pod of an upstream Cluster API manager the world builds (`scripts/upstream-setup`). A
//! Deployment someone applies whose container image is Cluster API's or CAPZ's release image
//! ([`MANAGERS`]) runs as that binary, started with the pod's own arguments and environment, as
//! its service account (a token the API server minted), with its volumes: Secrets and projected
//! service-account tokens written where its mounts say. Any other Deployment is left alone (the
//! kube-controller-manager of the world runs no deployment or replica-set controller).
//!
//! Each pod is a Pod object too, made as the replica-set controller makes one (named after the
//! Deployment and its template's hash, owned by the Deployment: the world makes no ReplicaSet).
//! The API server admits it, the world's kube-scheduler binds it, and only a bound Pod runs (its
//! Node's kubelet starts it): a Pod no Node takes stays `Pending`. (A world without the
//! cluster's control-plane Nodes, `--control-plane-nodes`, has no Node for the cluster's own pods,
//! OpenShift's machine approvers among them: there pods run unbound and their Pods stay
//! `Pending`, as no real cluster's would.) A bound Pod's status is the kubelet's: `restartCount`, `state` (`CrashLoopBackOff`
//! between crashes) and `lastState.terminated`, whose message is the log's tail only under
//! `FallbackToLogsOnError`. A Pod deleted or evicted stops its container and is made again.
//!
//! What a cluster would refuse is refused here, with the message it would give:
//! - **Admission** (OpenShift's `restricted-v2` SecurityContextConstraints, which every service
//!   account of a namespace without another grant gets; openshift/cluster-kube-apiserver-operator
//!   `bindata/assets/kube-apiserver/restricted-v2-scc.yaml`): a fixed `runAsUser`/`runAsGroup`
//!   outside the namespace's range (`openshift.io/sa.scc.uid-range`, which the cluster's
//!   namespace-security-allocation controller writes on every namespace), a privileged container,
//!   privilege escalation, a capability other than `NET_BIND_SERVICE`, host namespaces, ports or
//!   paths. The Deployment gets `ReplicaFailure` with `FailedCreate`, as the replica-set controller
//!   reports a pod the API server refused (kubernetes `pkg/controller/replicaset`).
//! - **Volumes**: a Secret or ConfigMap a volume or an env var names and that does not exist keeps
//!   the pod from starting (the kubelet's `FailedMount` / `CreateContainerConfigError`); the
//!   Deployment stays unavailable with that message.
//! - **A crash** is restarted after the kubelet's back-off (10 s doubling to 5 min,
//!   `pkg/kubelet/kubelet.go` `backOffPeriod`/`MaxContainerBackOff`), and counted.
//!
//! What the world changes, because pods here share one network namespace and one file system:
//! leader election is off (it reads the pod's namespace from its service-account mount; one
//! replica runs), the controllers' periods are the world's test timing (as its own managers'),
//! and the manager's ports
//! (`--webhook-port`, `--health-addr`, `--diagnostics-address`) are free loopback ports, and a
//! Service that selects the pod is reachable by its name (`<svc>.<ns>.svc:<port>`) through the
//! world's proxy ([`crate::proxy`]), which the API server is given as `HTTPS_PROXY` (client-go
//! sends every request but loopback ones through it: `transport/cache.go`, `ProxyFromEnvironment`;
//! an admission or conversion webhook named by Service is dialled by that name,
//! k8s.io/apiserver `pkg/util/webhook/client.go`). Paths under a mount are the pod's own
//! directory (`TMPDIR` for `/tmp`, where controller-runtime's webhook server looks for its
//! certificate by default). The pod also gets the world's proxy and CA to reach the clouds'
//! names, as a pod's network would route them.
//!
//! OpenShift's service CA (openshift/service-ca-operator, whose annotations OpenShift's own
//! provider manifests use in place of cert-manager) runs here too ([`service_ca`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use kube::Api;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::kinds::{APPS, Kind};

/// Release images the world runs, by the repository's last path segment, and the binary of
/// `scripts/upstream-setup` each is (Cluster API's `Makefile` `CORE_IMAGE_NAME`, CAPZ's
/// `IMAGE_NAME`, both published under `registry.k8s.io`).
pub const MANAGERS: &[(&str, &str)] =
    &[("cluster-api-controller", "capi-manager"), ("cluster-api-azure-controller", "capz-manager")];

/// The namespace annotation OpenShift's namespace-security-allocation controller writes
/// (openshift/cluster-policy-controller `pkg/security/controller/namespace_scc_allocation_controller.go`).
pub const UID_RANGE: &str = "openshift.io/sa.scc.uid-range";
/// Each namespace's block of user ids: 10000, from 1000000000 (the controller's defaults).
const UID_BLOCK: u64 = 10_000;
const UID_BASE: u64 = 1_000_000_000;

/// The stand-in for a machine approver's container: admitted and given its volumes and token as
/// any pod, then ready without a process (the approvals are `kube::boot`'s).
const APPROVER: &str = "machine-approver (the world's stand-in)";

/// Where controller-runtime's webhook server looks for its certificate by default, and where the
/// managers' Deployments mount it.
const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// How often the runner looks.
const PASS: Duration = Duration::from_millis(500);
/// The kubelet's crash back-off: the first, and the cap.
const BACKOFF: Duration = Duration::from_secs(10);
const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// OpenShift's machine approver's image (openshift/cluster-machine-approver, payload name
/// `cluster-machine-approver`), which the world does not build: its pods are the world's stand-in
/// approver ([`approves_capi_machines`], `kube::boot`), admitted and checked as any pod here.
pub fn is_approver(image: &str) -> bool {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split(':').next().unwrap_or(last).ends_with("cluster-machine-approver")
}

/// Whether Deployment `d` is an available machine approver for Cluster API Machines of
/// `namespace` (its `--api-group-version=cluster.x-k8s.io/...`; `--machine-namespace`, when given,
/// restricts it to that namespace: openshift/cluster-machine-approver `main.go`).
pub fn approves_capi_machines(d: &Value, namespace: Option<&str>) -> bool {
    let available = d["status"]["availableReplicas"].as_i64().unwrap_or(0) > 0;
    available
        && d["spec"]["template"]["spec"]["containers"].as_array().into_iter().flatten().any(|c| {
            let args: Vec<&str> = c["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let capi = args.iter().any(|a| a.starts_with("--api-group-version=cluster.x-k8s.io"));
            let within = args
                .iter()
                .find_map(|a| a.strip_prefix("--machine-namespace="))
                .is_none_or(|ns| namespace.is_some_and(|m| m == ns));
            is_approver(c["image"].as_str().unwrap_or_default()) && capi && within
        })
}

/// The binary that runs `image`, when it is a release image the world builds.
pub fn manager_of(image: &str) -> Option<&'static str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let repo = last.split(':').next().unwrap_or(last);
    MANAGERS.iter().find(|(name, _)| *name == repo).map(|(_, bin)| *bin)
}

/// What the runner needs of the cluster.
pub struct Runner {
    pub client: kube::Client,
    pub bin: PathBuf,
    /// Where each pod's directory goes.
    pub dir: PathBuf,
    pub api_url: String,
    pub ca_pem: String,
    /// The world's CA file, for the pods' TLS to the clouds' names.
    pub ca_file: PathBuf,
    pub proxy: crate::proxy::Proxy,
    pub service_ca: crate::cluster::Pki,
    /// The controllers' timing for tests, given to the managers as their flags
    /// ([`crate::cluster::Timing`]), as the world gives its own managers.
    pub timing: crate::cluster::Timing,
    /// Told whether a CAPZ manager runs (the world's holds read it: a Machine is held at `vm`
    /// while nothing reconciles its AzureMachine).
    pub on_capz: Box<dyn Fn(bool) + Send + Sync>,
    /// The world has the cluster's control-plane Nodes (`--control-plane-nodes`): a pod runs
    /// only once the scheduler binds its Pod. Without them the world has no Node a pod of the
    /// cluster's own could run on (OpenShift's machine approvers among them, which every world
    /// needs), so its pods run unbound, and their Pods stay `Pending`.
    pub binds: bool,
    pods: Mutex<BTreeMap<(String, String), Pod>>,
}

/// One running (or waiting) pod of a Deployment.
struct Pod {
    /// The template it runs, as JSON text: a change is a new pod.
    template: String,
    /// The binary it runs.
    bin: &'static str,
    child: Option<Child>,
    started: Instant,
    restarts: u32,
    /// When a crashed container may start again.
    retry_at: Option<Instant>,
    health: u16,
    webhook: u16,
    dir: PathBuf,
    /// Files of projected service-account tokens: (service account, audience, seconds, path).
    tokens: Vec<(String, String, i64, PathBuf)>,
    renew_at: Instant,
    ready: bool,
    last_error: String,
    /// The values of env vars taken from a Secret's or ConfigMap's key, read when the pod was made.
    env_values: BTreeMap<String, String>,
    /// Its Pod object (the replica-set controller's part), and the Node the scheduler bound it to.
    object: String,
    node: Option<String>,
    /// The kubelet's `restartCount`: every restart, while `restarts` above is the back-off's step
    /// (reset after a long run, as the kubelet's back-off is, while the count never is).
    restart_count: u32,
    /// The container's last termination, as the kubelet reports it (`lastState.terminated`).
    last_exit: Option<Value>,
    /// When its container last started (RFC 3339).
    started_at: String,
    /// The Pod status last written, to write only a change.
    written: Value,
}

impl Drop for Pod {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Why a pod does not run: the Deployment's condition and the message a cluster would give.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

fn free_port() -> u16 {
    crate::ports::free_port().unwrap_or(0)
}

/// `restricted-v2` against a pod template, as OpenShift's SCC admission checks it; `range` is the
/// namespace's uid range (first, size). `None`: admitted.
pub fn scc_refusal(name: &str, template: &Value, range: (u64, u64)) -> Option<Refusal> {
    let spec = &template["spec"];
    let mut errors = Vec::new();
    let (first, size) = range;
    let in_range = |v: &Value| v.as_u64().is_none_or(|u| u >= first && u < first + size);
    for (path, ctx) in std::iter::once(("spec.securityContext".to_string(), &spec["securityContext"])).chain(
        spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(spec["initContainers"].as_array().into_iter().flatten())
            .enumerate()
            .map(|(i, c)| (format!("spec.containers[{i}].securityContext"), &c["securityContext"])),
    ) {
        for field in ["runAsUser", "runAsGroup"] {
            if !in_range(&ctx[field]) {
                errors.push(format!(
                    "{path}.{field}: Invalid value: {}: must be in the ranges: [{first}, {}]",
                    ctx[field],
                    first + size - 1
                ));
            }
        }
        if ctx["privileged"].as_bool() == Some(true) {
            errors.push(format!("{path}.privileged: Invalid value: true: Privileged containers are not allowed"));
        }
        if ctx["allowPrivilegeEscalation"].as_bool() == Some(true) {
            errors.push(format!(
                "{path}.allowPrivilegeEscalation: Invalid value: true: Allowing privilege escalation for containers is not allowed"
            ));
        }
        for cap in ctx["capabilities"]["add"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if cap != "NET_BIND_SERVICE" {
                errors.push(format!("{path}.capabilities.add: Invalid value: \"{cap}\": capability may not be added"));
            }
        }
    }
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec[host].as_bool() == Some(true) {
            errors.push(format!("spec.{host}: Invalid value: true: Host namespaces are not allowed to be used"));
        }
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        if v.get("hostPath").is_some() {
            errors.push(format!(
                "spec.volumes[{}]: Invalid value: \"hostPath\": hostPath volumes are not allowed to be used",
                v["name"].as_str().unwrap_or_default()
            ));
        }
    }
    if errors.is_empty() {
        return None;
    }
    Some(Refusal {
        reason: "FailedCreate",
        message: format!(
            "pods \"{name}-\" is forbidden: unable to validate against any security context constraint: [provider \"restricted-v2\": {}]",
            errors.join(", ")
        ),
    })
}

/// A namespace's uid range as its annotation says (`1000690000/10000`).
pub fn uid_range(annotation: &str) -> Option<(u64, u64)> {
    let (first, size) = annotation.split_once('/')?;
    Some((first.trim().parse().ok()?, size.trim().parse().ok()?))
}

impl Runner {
    pub fn new(
        cluster: &crate::cluster::UpstreamCluster,
        client: kube::Client,
        timing: crate::cluster::Timing,
        on_capz: Box<dyn Fn(bool) + Send + Sync>,
        binds: bool,
    ) -> Result<Runner, String> {
        let service_ca = crate::cluster::Pki::new().map_err(|e| format!("cannot make the service CA: {e}"))?;
        Ok(Runner {
            client,
            bin: cluster.bin.clone(),
            dir: cluster.dir().join("pods"),
            api_url: cluster.url.clone(),
            ca_pem: cluster.ca_pem.clone(),
            ca_file: cluster.ca_file.clone(),
            proxy: cluster.proxy.clone(),
            service_ca,
            timing,
            on_capz,
            binds,
            pods: Mutex::new(BTreeMap::new()),
        })
    }

    /// Passes until the runtime stops.
    pub async fn run(self: std::sync::Arc<Self>) {
        loop {
            if let Err(e) = self.service_ca_pass().await {
                eprintln!("xcsp-sim: a pass of the service CA failed (tried again): {e}");
            }
            if let Err(e) = self.pass().await {
                eprintln!("xcsp-sim: a pass of the pod runner failed (tried again): {e}");
            }
            tokio::time::sleep(PASS).await;
        }
    }

    fn api(&self, kind: &'static Kind, ns: &str) -> Api<DynamicObject> {
        super::kinds::api(&self.client, kind, ns)
    }

    async fn list(&self, group: &str, version: &str, kind: &str, plural: &str) -> Result<Vec<Value>, String> {
        let ar = kube::api::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        match api.list(&ListParams::default()).await {
            Ok(l) => l.items.iter().map(|o| serde_json::to_value(o).map_err(|e| e.to_string())).collect(),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
            Err(e) => Err(format!("listing {plural}: {e}")),
        }
    }

    /// One pass over the Deployments the world can run.
    async fn pass(&self) -> Result<(), String> {
        let deployments = self.list("apps", "v1", "Deployment", "deployments").await?;
        let namespaces = self.list("", "v1", "Namespace", "namespaces").await?;
        let ranges = self.allocate_uid_ranges(&namespaces).await?;
        let services = self.list("", "v1", "Service", "services").await?;
        let mut seen = BTreeSet::new();
        for d in &deployments {
            let Some((index, bin)) =
                d["spec"]["template"]["spec"]["containers"].as_array().into_iter().flatten().enumerate().find_map(
                    |(i, c)| {
                        let image = c["image"].as_str().unwrap_or_default();
                        manager_of(image).or(is_approver(image).then_some(APPROVER)).map(|b| (i, b))
                    },
                )
            else {
                continue;
            };
            let ns = d["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
            let name = d["metadata"]["name"].as_str().unwrap_or_default().to_string();
            seen.insert((ns.clone(), name.clone()));
            if d["metadata"].get("deletionTimestamp").is_some() {
                self.stop(&ns, &name).await;
                continue;
            }
            if d["spec"]["replicas"].as_i64() == Some(0) {
                self.stop(&ns, &name).await;
                self.write_scaled_down(d).await?;
                continue;
            }
            // A namespace made since the list is allocated at the next pass.
            let Some(range) = ranges.get(&ns).copied() else { continue };
            let outcome = self.reconcile(d, &ns, &name, index, bin, range).await;
            let routes = self.route(&ns, &name, d, &services);
            let ready = self.pods.lock().expect("pods lock").get(&(ns.clone(), name.clone())).is_some_and(|p| p.ready);
            self.write_status(d, outcome.err(), if ready { 1 } else { 0 }, &routes).await?;
        }
        let gone: Vec<(String, String)> =
            self.pods.lock().expect("pods lock").keys().filter(|k| !seen.contains(*k)).cloned().collect();
        for (ns, name) in gone {
            self.stop(&ns, &name).await;
        }
        let capz = self.pods.lock().expect("pods lock").values().any(|p| p.bin == "capz-manager" && p.child.is_some());
        (self.on_capz)(capz);
        Ok(())
    }

    /// Gives each namespace without one a uid range, as OpenShift's namespace-security-allocation
    /// controller does at creation (the next free block).
    /// Answers each namespace's range.
    async fn allocate_uid_ranges(&self, namespaces: &[Value]) -> Result<BTreeMap<String, (u64, u64)>, String> {
        let mut ranges: BTreeMap<String, (u64, u64)> = namespaces
            .iter()
            .filter_map(|n| {
                let range = n["metadata"]["annotations"][UID_RANGE].as_str().and_then(uid_range)?;
                Some((n["metadata"]["name"].as_str()?.to_string(), range))
            })
            .collect();
        let taken: BTreeSet<u64> = ranges.values().map(|(first, _)| *first).collect();
        let mut next = (0u64..).map(|i| UID_BASE + i * UID_BLOCK).filter(|f| !taken.contains(f));
        let kind = Kind::find("", "v1", "namespaces").expect("namespaces served");
        for n in namespaces.iter().filter(|n| n["metadata"]["annotations"][UID_RANGE].is_null()) {
            let first = next.next().unwrap_or(UID_BASE);
            let name = n["metadata"]["name"].as_str().unwrap_or_default();
            let patch = json!({"metadata": {"annotations": {UID_RANGE: format!("{first}/{UID_BLOCK}")}}});
            self.api(kind, "")
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| format!("annotating Namespace {name}: {e}"))?;
            ranges.insert(name.to_string(), (first, UID_BLOCK));
        }
        Ok(ranges)
    }

    /// Stops the pod of Deployment `ns/name` and deletes its Pod object, as the kubelet kills a
    /// deleted pod's containers and then removes it (a Pod already gone is fine: the garbage
    /// collector deletes the Pods of a deleted Deployment by their owner reference).
    async fn stop(&self, ns: &str, name: &str) {
        let pod = self.pods.lock().expect("pods lock").remove(&(ns.to_string(), name.to_string()));
        let Some(pod) = pod else { return };
        self.proxy.routes.remove_to(std::net::SocketAddr::from(([127, 0, 0, 1], pod.webhook)));
        let object = pod.object.clone();
        drop(pod);
        // With no grace period: what the kubelet sends once the containers are stopped (a bound
        // Pod deleted by anyone else stays `Terminating` until its kubelet does).
        if !object.is_empty() {
            let _ = self.api(pod_kind(), ns).delete(&object, &kube::api::DeleteParams::default().grace_period(0)).await;
        }
    }

    /// Creates the Pod object of a new pod of Deployment `d`, as the replica-set controller does:
    /// named after the Deployment and its template's hash, labelled with the template's labels and
    /// that hash, owned by the Deployment (the world stands in for both controllers and makes no
    /// ReplicaSet), its spec the template's. The API server admits it or refuses it (a service
    /// account that does not exist, among others), and the scheduler binds it.
    async fn create_pod_object(&self, d: &Value, ns: &str, name: &str, template: &Value) -> Result<String, Refusal> {
        let hash = format!("{:x}", md5ish(&template.to_string()))[..10].to_string();
        let suffix = format!("{:x}", md5ish(&format!("{name}{}", jiff_now_nanos())))[..5].to_string();
        let object = format!("{name}-{hash}-{suffix}");
        let mut labels = template["metadata"]["labels"].clone();
        if !labels.is_object() {
            labels = json!({});
        }
        labels["pod-template-hash"] = json!(hash);
        let body = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": object, "namespace": ns, "labels": labels,
                "annotations": template["metadata"]["annotations"].clone(),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                    "uid": d["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
            "spec": template["spec"].clone()});
        let body: DynamicObject = serde_json::from_value(body).map_err(|e| Refusal {
            reason: "FailedCreate",
            message: format!("the template of Deployment {ns}/{name} is not a pod: {e}"),
        })?;
        match self.api(pod_kind(), ns).create(&PostParams::default(), &body).await {
            Ok(_) => Ok(object),
            Err(kube::Error::Api(e)) => Err(Refusal { reason: "FailedCreate", message: e.message }),
            Err(e) => Err(Refusal { reason: "FailedCreate", message: e.to_string() }),
        }
    }

    /// The Node the scheduler bound Pod `ns/object` to; `Err` when the Pod is gone (deleted by
    /// someone, or evicted: a new one is made, as the replica-set controller would).
    async fn bound_node(&self, ns: &str, object: &str) -> Result<Option<String>, ()> {
        match self.api(pod_kind(), ns).get(object).await {
            Ok(p) => {
                let v = serde_json::to_value(&p).unwrap_or_default();
                if v["metadata"].get("deletionTimestamp").is_some() {
                    return Err(());
                }
                Ok(v["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()).map(String::from))
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Err(()),
            // Read again at the next pass.
            Err(_) => Ok(None),
        }
    }

    /// Writes the Pod's status as the kubelet reports it: its phase, readiness, and its
    /// container's `restartCount`, `state` and `lastState` (with the log's tail as the termination
    /// message only under `FallbackToLogsOnError`: kubernetes v1.35 `pkg/kubelet/container/runtime.go`
    /// `MaxContainerTerminationMessageLogLines`, `...LogLength`: 80 lines, 2,048 bytes), through a
    /// strategic merge, which keeps the scheduler's `PodScheduled` condition.
    async fn write_pod_status(&self, key: &(String, String), container: &Value) {
        let (object, status) = {
            let pods = self.pods.lock().expect("pods lock");
            let Some(p) = pods.get(key) else { return };
            if p.object.is_empty() || p.node.is_none() {
                return;
            }
            let cname = container["name"].as_str().unwrap_or("manager");
            let running = p.child.is_some();
            let state = if running {
                json!({"running": {"startedAt": p.started_at}, "waiting": null, "terminated": null})
            } else {
                let delay = backoff(p.restarts).as_secs();
                let (reason, message) = if p.last_exit.is_some() {
                    (
                        "CrashLoopBackOff",
                        format!("back-off {delay}s restarting failed container={cname} pod={}", p.object),
                    )
                } else {
                    ("ContainerCreating", String::new())
                };
                json!({"running": null, "terminated": null, "waiting": {"reason": reason, "message": message}})
            };
            let ready = if p.ready { "True" } else { "False" };
            let now = jiff_now();
            let status = json!({
                "phase": if p.started_at.is_empty() { "Pending" } else { "Running" },
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": ready, "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": ready, "lastTransitionTime": now}],
                "containerStatuses": [{
                    "name": cname, "image": container["image"], "imageID": "", "ready": p.ready,
                    "started": running, "restartCount": p.restart_count, "state": state,
                    "lastState": p.last_exit.as_ref().map_or(json!({}), |t| json!({"terminated": t})),
                }],
            });
            // Only a change is written (not the timestamps of the conditions).
            let mut compared = status.clone();
            compared["conditions"] = json!([ready]);
            if compared == p.written {
                return;
            }
            (p.object.clone(), (status, compared))
        };
        let patch = json!({"status": status.0});
        if self
            .api(pod_kind(), &key.0)
            .patch_status(&object, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .is_ok()
            && let Some(p) = self.pods.lock().expect("pods lock").get_mut(key)
        {
            p.written = status.1;
        }
    }

    /// Starts, restarts or checks the pod of `d`; an error says why it does not run.
    async fn reconcile(
        &self,
        d: &Value,
        ns: &str,
        name: &str,
        index: usize,
        bin: &'static str,
        range: (u64, u64),
    ) -> Result<(), Refusal> {
        let template = d["spec"]["template"].clone();
        let text = template.to_string();
        let key = (ns.to_string(), name.to_string());
        let current = self.pods.lock().expect("pods lock").get(&key).map(|p| p.template.clone());
        if current.as_deref() != Some(text.as_str()) {
            // A new template is a new pod: the old one stops first (the Deployment's rolling
            // update of one replica), then the new one is admitted.
            self.stop(ns, name).await;
            if let Some(r) = scc_refusal(name, &template, range) {
                return Err(r);
            }
            let mut pod = self.prepare(ns, name, &template, text, bin).await?;
            pod.object = self.create_pod_object(d, ns, name, &template).await?;
            self.pods.lock().expect("pods lock").insert(key.clone(), pod);
        }
        let container = template["spec"]["containers"][index].clone();
        // Only a Pod the scheduler bound to a Node runs (its kubelet starts it); a Pod deleted or
        // evicted is made again at the next pass.
        let object = self.pods.lock().expect("pods lock").get(&key).map(|p| (p.object.clone(), p.node.clone()));
        match object {
            Some((object, None)) => match self.bound_node(ns, &object).await {
                Err(()) => {
                    self.stop(ns, name).await;
                    return Ok(());
                }
                Ok(None) if self.binds => return Ok(()),
                Ok(None) => {}
                Ok(Some(node)) => {
                    if let Some(p) = self.pods.lock().expect("pods lock").get_mut(&key) {
                        p.node = Some(node);
                    }
                }
            },
            Some((object, Some(_))) => {
                if self.bound_node(ns, &object).await.is_err() {
                    self.stop(ns, name).await;
                    return Ok(());
                }
            }
            None => return Ok(()),
        }
        self.renew_tokens(&key).await;
        let outcome = self.run_container(&key, ns, &template, &container, bin).await;
        self.write_pod_status(&key, &container).await;
        outcome
    }

    /// Starts, restarts or checks the container of a bound pod.
    async fn run_container(
        &self,
        key: &(String, String),
        ns: &str,
        template: &Value,
        container: &Value,
        bin: &'static str,
    ) -> Result<(), Refusal> {
        let key = key.clone();
        let now = Instant::now();
        if bin == APPROVER {
            let mut pods = self.pods.lock().expect("pods lock");
            let pod = pods.get_mut(&key).expect("the pod just made");
            pod.ready = pod.dir.join("sa-token").exists();
            return Ok(());
        }
        let health = {
            let mut pods = self.pods.lock().expect("pods lock");
            let pod = pods.get_mut(&key).expect("the pod just made");
            if let Some(c) = &mut pod.child
                && let Ok(Some(status)) = c.try_wait()
            {
                pod.child = None;
                pod.ready = false;
                // The kubelet forgets the back-off of a container that ran long enough (twice its cap).
                if now.duration_since(pod.started) > BACKOFF_CAP * 2 {
                    pod.restarts = 0;
                }
                pod.restarts += 1;
                pod.retry_at = Some(now + backoff(pod.restarts));
                pod.last_error = format!("container exited with {status}: {}", last_errors(&pod.dir.join("log")));
                pod.last_exit = Some(terminated(&status, &pod.started_at, container, &pod.dir.join("log")));
            }
            if pod.child.is_none() && pod.retry_at.is_none_or(|t| now >= t) {
                match self.spawn(pod, ns, template, container, bin) {
                    Ok(c) => {
                        // The kubelet counts a restart when it starts the container again.
                        if pod.last_exit.is_some() {
                            pod.restart_count += 1;
                        }
                        pod.child = Some(c);
                        pod.started = now;
                        pod.started_at = jiff_now();
                        pod.retry_at = None;
                    }
                    Err(e) => pod.last_error = e,
                }
            }
            if pod.child.is_none() {
                return Err(Refusal {
                    reason: "CrashLoopBackOff",
                    message: format!("back-off restarting failed container manager: {}", pod.last_error),
                });
            }
            pod.health
        };
        let ready = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{health}/readyz"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if let Some(p) = self.pods.lock().expect("pods lock").get_mut(&key) {
            p.ready = ready;
        }
        Ok(())
    }

    /// The pod's directory, volumes and tokens, before its container starts: a missing Secret or
    /// ConfigMap is the kubelet's refusal.
    async fn prepare(
        &self,
        ns: &str,
        name: &str,
        template: &Value,
        text: String,
        bin: &'static str,
    ) -> Result<Pod, Refusal> {
        let dir = self.dir.join(format!("{ns}-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        let mount_failed = |volume: &str, what: String| Refusal {
            reason: "FailedMount",
            message: format!("MountVolume.SetUp failed for volume \"{volume}\" : {what}"),
        };
        std::fs::create_dir_all(dir.join("tmp")).map_err(|e| mount_failed("-", e.to_string()))?;
        let spec = &template["spec"];
        let account = spec["serviceAccountName"].as_str().unwrap_or("default").to_string();
        let mut tokens = Vec::new();
        for v in spec["volumes"].as_array().into_iter().flatten() {
            let vname = v["name"].as_str().unwrap_or_default();
            let target = dir.join("volumes").join(vname);
            std::fs::create_dir_all(&target).map_err(|e| mount_failed(vname, e.to_string()))?;
            if let Some(secret) = v["secret"]["secretName"].as_str() {
                let data = self.read_data("secrets", ns, secret).await.map_err(|e| mount_failed(vname, e))?;
                let Some(data) = data else {
                    return Err(mount_failed(vname, format!("secret \"{secret}\" not found")));
                };
                for (k, b64) in data.as_object().into_iter().flatten() {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(b64.as_str().unwrap_or_default())
                        .unwrap_or_default();
                    std::fs::write(target.join(k), bytes).map_err(|e| mount_failed(vname, e.to_string()))?;
                }
            } else if let Some(sources) = v["projected"]["sources"].as_array() {
                for s in sources {
                    if let Some(t) = s.get("serviceAccountToken") {
                        let audience = t["audience"].as_str().unwrap_or_default().to_string();
                        let seconds = t["expirationSeconds"].as_i64().unwrap_or(3600);
                        let path = target.join(t["path"].as_str().unwrap_or("token"));
                        tokens.push((account.clone(), audience, seconds, path));
                    }
                }
            } else if let Some(cm) = v["configMap"]["name"].as_str() {
                let data = self.read_data("configmaps", ns, cm).await.map_err(|e| mount_failed(vname, e))?;
                match data {
                    Some(data) => {
                        for (k, b64) in data.as_object().into_iter().flatten() {
                            let bytes = base64::engine::general_purpose::STANDARD
                                .decode(b64.as_str().unwrap_or_default())
                                .unwrap_or_default();
                            std::fs::write(target.join(k), bytes).map_err(|e| mount_failed(vname, e.to_string()))?;
                        }
                    }
                    None if v["configMap"]["optional"].as_bool() == Some(true) => {}
                    None => return Err(mount_failed(vname, format!("configmap \"{cm}\" not found"))),
                }
            } else if v.get("emptyDir").is_none() {
                return Err(mount_failed(vname, "a volume of a kind the world does not mount".into()));
            }
        }
        // The service account's own token, as the pod's in-cluster credentials.
        tokens.push((account, String::new(), 3600, dir.join("sa-token")));
        let mut env_values = BTreeMap::new();
        for c in spec["containers"].as_array().into_iter().flatten() {
            for e in c["env"].as_array().into_iter().flatten() {
                let from = &e["valueFrom"];
                for (plural, key) in [("secrets", "secretKeyRef"), ("configmaps", "configMapKeyRef")] {
                    if let Some(r) = from.get(key) {
                        let obj = r["name"].as_str().unwrap_or_default();
                        let optional = r["optional"].as_bool() == Some(true);
                        let data = self
                            .read_data(plural, ns, obj)
                            .await
                            .map_err(|m| Refusal { reason: "CreateContainerConfigError", message: m })?;
                        let value = data.as_ref().and_then(|d| d.get(r["key"].as_str().unwrap_or_default())).cloned();
                        let has = value.is_some();
                        if let Some(v) = value.and_then(|v| v.as_str().map(String::from)) {
                            let bytes = base64::engine::general_purpose::STANDARD.decode(v).unwrap_or_default();
                            env_values.insert(
                                e["name"].as_str().unwrap_or_default().to_string(),
                                String::from_utf8_lossy(&bytes).into_owned(),
                            );
                        }
                        if !has && !optional {
                            return Err(Refusal {
                                reason: "CreateContainerConfigError",
                                message: format!(
                                    "couldn't find key {} in {} {ns}/{obj}",
                                    r["key"].as_str().unwrap_or_default(),
                                    if plural == "secrets" { "Secret" } else { "ConfigMap" }
                                ),
                            });
                        }
                    }
                }
            }
        }
        let mut pod = Pod {
            template: text,
            bin,
            child: None,
            started: Instant::now(),
            restarts: 0,
            retry_at: None,
            health: free_port(),
            webhook: free_port(),
            dir,
            tokens,
            renew_at: Instant::now(),
            ready: false,
            last_error: String::new(),
            env_values,
            object: String::new(),
            node: None,
            restart_count: 0,
            last_exit: None,
            started_at: String::new(),
            written: Value::Null,
        };
        pod.renew_at = Instant::now();
        Ok(pod)
    }

    /// A Secret's or ConfigMap's `data` (ConfigMap values base64'd, as a Secret's are), `None`
    /// when it does not exist.
    async fn read_data(&self, plural: &str, ns: &str, name: &str) -> Result<Option<Value>, String> {
        let kind = Kind::find("", "v1", plural).ok_or_else(|| format!("{plural} not served"))?;
        match self.api(kind, ns).get(name).await {
            Ok(o) => {
                let v = serde_json::to_value(&o).map_err(|e| e.to_string())?;
                if plural == "configmaps" {
                    let mut out = serde_json::Map::new();
                    for (k, s) in v["data"].as_object().into_iter().flatten() {
                        out.insert(
                            k.clone(),
                            json!(base64::engine::general_purpose::STANDARD.encode(s.as_str().unwrap_or_default())),
                        );
                    }
                    Ok(Some(Value::Object(out)))
                } else {
                    Ok(Some(v["data"].clone()))
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Mints the pod's tokens again at 80% of their life, as the kubelet renews a projected token.
    async fn renew_tokens(&self, key: &(String, String)) {
        let (tokens, due) = {
            let pods = self.pods.lock().expect("pods lock");
            let Some(p) = pods.get(key) else { return };
            (p.tokens.clone(), p.renew_at <= Instant::now())
        };
        if !due {
            return;
        }
        let mut shortest = 3600;
        for (account, audience, seconds, path) in &tokens {
            let audiences: Vec<&str> = if audience.is_empty() { vec![] } else { vec![audience.as_str()] };
            let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": audiences, "expirationSeconds": seconds}});
            let api: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(self.client.clone(), &key.0);
            let answer: Result<Value, kube::Error> =
                api.create_subresource("token", account, &PostParams::default(), &request).await;
            match answer {
                Ok(answer) => {
                    let token = answer["status"]["token"].as_str().unwrap_or_default();
                    let tmp = path.with_extension("tmp");
                    let _ = std::fs::write(&tmp, token).and_then(|_| std::fs::rename(&tmp, path));
                    shortest = shortest.min(*seconds);
                }
                // The service account is not there (yet): the pod cannot start without its token.
                Err(e) => {
                    if let Some(p) = self.pods.lock().expect("pods lock").get_mut(key) {
                        p.last_error = format!("cannot mint a token for service account {}/{account}: {e}", key.0);
                    }
                    return;
                }
            }
        }
        if let Some(p) = self.pods.lock().expect("pods lock").get_mut(key) {
            p.renew_at = Instant::now() + Duration::from_secs((shortest as u64) * 8 / 10);
        }
    }

    /// Starts the container: its command's binary with its arguments and environment, paths under
    /// its mounts moved into the pod's directory, its ports moved to free ones.
    fn spawn(&self, pod: &Pod, ns: &str, template: &Value, container: &Value, bin: &str) -> Result<Child, String> {
        if !pod.dir.join("sa-token").exists() {
            return Err(format!("no token for the pod's service account yet ({})", pod.last_error));
        }
        let mounts: Vec<(String, PathBuf)> = container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let path = m["mountPath"].as_str().unwrap_or_default().trim_end_matches('/').to_string();
                (path, pod.dir.join("volumes").join(m["name"].as_str().unwrap_or_default()))
            })
            .collect();
        // Mounts under /tmp are reached through TMPDIR; link them there.
        for (path, host) in &mounts {
            if let Some(rest) = path.strip_prefix("/tmp/") {
                let link = pod.dir.join("tmp").join(rest);
                if let Some(parent) = link.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                let _ = std::os::unix::fs::symlink(host, &link);
            }
        }
        let moved = |s: &str| -> String {
            let mut out = s.to_string();
            for (path, host) in &mounts {
                if out.contains(path.as_str()) {
                    out = out.replace(path.as_str(), &host.display().to_string());
                }
            }
            out
        };
        let mut env: Vec<(String, String)> = Vec::new();
        let field = |path: &str| match path {
            "metadata.namespace" => ns.to_string(),
            "metadata.name" => pod.object.clone(),
            "metadata.uid" => format!("{:x}", md5ish(&(ns.to_string() + &pod.object))),
            "spec.nodeName" => pod.node.clone().unwrap_or_default(),
            "spec.serviceAccountName" => template["spec"]["serviceAccountName"].as_str().unwrap_or("default").into(),
            _ => String::new(),
        };
        for e in container["env"].as_array().into_iter().flatten() {
            let key = e["name"].as_str().unwrap_or_default().to_string();
            let value = if let Some(v) = e["value"].as_str() {
                moved(v)
            } else if let Some(p) = e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                field(p)
            } else {
                // A Secret's or ConfigMap's key, read when the pod was made.
                pod.env_values.get(&key).cloned().unwrap_or_default()
            };
            env.push((key, value));
        }
        // `$(VAR)` in arguments expands from the container's environment (kubernetes
        // `third_party/forked/golang/expansion`).
        let expand = |s: &str| -> String {
            let mut out = s.to_string();
            for (k, v) in &env {
                out = out.replace(&format!("$({k})"), v);
            }
            out
        };
        let owned = |flag: &str| format!("--{flag}=");
        let mut args: Vec<String> = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|a| moved(&expand(a)))
            .filter(|a| {
                // Leader election finds the pod's namespace in its service-account mount
                // (`/var/run/secrets/kubernetes.io/serviceaccount/namespace`, controller-runtime
                // `pkg/leaderelection`), which a process here has no place for; one replica
                // runs, so it runs without.
                a != "--leader-elect"
                    && !a.starts_with(&owned("leader-elect"))
                    && !a.starts_with(&owned("webhook-port"))
                    && !a.starts_with(&owned("health-addr"))
                    && !a.starts_with(&owned("diagnostics-address"))
                    && !a.starts_with(&owned("metrics-bind-addr"))
            })
            .collect();
        // The managers' own default for their certificate directory is the absolute
        // `/tmp/k8s-webhook-server/serving-certs/` (Cluster API's and CAPZ's `main.go`), where the
        // Deployment mounts the Secret: the pod's directory stands for it.
        if !args.iter().any(|a| a.starts_with(&owned("webhook-cert-dir"))) {
            let dir = mounts
                .iter()
                .find(|(path, _)| path == WEBHOOK_CERT_DIR)
                .map_or_else(|| pod.dir.join("tmp/k8s-webhook-server/serving-certs"), |(_, host)| host.clone());
            args.push(format!("--webhook-cert-dir={}", dir.display()));
        }
        args.push("--leader-elect=false".into());
        // The world's fast clock, as the world's own managers get it.
        let t = &self.timing;
        args.retain(|a| {
            !a.starts_with(&owned("sync-period"))
                && !a.starts_with(&owned("debouncing-timer"))
                && !a.starts_with(&owned("reconciler-requeue"))
        });
        args.push(format!("--sync-period={}s", t.capi_sync.as_secs().max(1)));
        if bin == "capz-manager" {
            args.push(format!("--debouncing-timer={}s", t.capz_debounce.as_secs().max(1)));
            args.push(format!("--reconciler-requeue={}s", t.capz_requeue.as_secs().max(1)));
        }
        args.push(format!("--webhook-port={}", pod.webhook));
        args.push(format!("--health-addr=127.0.0.1:{}", pod.health));
        args.push(format!("--diagnostics-address=127.0.0.1:{}", free_port()));
        let kubeconfig = pod.dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            crate::cluster::token_file_kubeconfig(&self.api_url, &self.ca_pem, &pod.dir.join("sa-token")),
        )
        .map_err(|e| e.to_string())?;
        let log = std::fs::File::create(pod.dir.join("log")).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new(self.bin.join(bin));
        command
            .env_clear()
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("KUBECONFIG", &kubeconfig)
            .env("TMPDIR", pod.dir.join("tmp"))
            .env("HOME", &pod.dir)
            // The pod network's route to the clouds' names and the world's CA.
            .env("HTTPS_PROXY", self.proxy.url())
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("SSL_CERT_FILE", &self.ca_file)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        crate::child::die_with_parent(&mut command, libc::SIGKILL);
        command.spawn().map_err(|e| format!("cannot start {bin}: {e}"))
    }

    /// Routes each Service of `ns` that selects the pod to its webhook port; answers the names.
    fn route(&self, ns: &str, name: &str, d: &Value, services: &[Value]) -> Vec<String> {
        let Some(webhook) = self
            .pods
            .lock()
            .expect("pods lock")
            .get(&(ns.to_string(), name.to_string()))
            .and_then(|p| p.ready.then_some(p.webhook))
        else {
            return Vec::new();
        };
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        let container_ports: Vec<&Value> = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["ports"].as_array().into_iter().flatten())
            .collect();
        let mut names = Vec::new();
        for s in services.iter().filter(|s| s["metadata"]["namespace"] == ns) {
            let selector = s["spec"]["selector"].as_object();
            let selects =
                selector.is_some_and(|sel| !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
            if !selects {
                continue;
            }
            for p in s["spec"]["ports"].as_array().into_iter().flatten() {
                let target = &p["targetPort"];
                let to_webhook = container_ports.iter().any(|cp| {
                    cp["containerPort"].as_i64() == Some(9443)
                        && (target == &cp["name"] || target == &cp["containerPort"] || target.is_null())
                });
                if !to_webhook {
                    continue;
                }
                let host = format!("{}.{ns}.svc", s["metadata"]["name"].as_str().unwrap_or_default());
                let port = p["port"].as_u64().unwrap_or(443) as u16;
                self.proxy.routes.add(&host, port, std::net::SocketAddr::from(([127, 0, 0, 1], webhook)));
                names.push(format!("{host}:{port}"));
            }
        }
        names
    }

    /// Writes Deployment `ns/name`'s status, as its controller does.
    async fn patch_status(&self, ns: &str, name: &str, status: Value) -> Result<(), String> {
        let kind = Kind::find(APPS, "v1", "deployments").expect("deployments served");
        self.api(kind, ns)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
            .await
            .map(|_| ())
            .map_err(|e| format!("writing the status of Deployment {ns}/{name}: {e}"))
    }

    /// The status of a Deployment scaled to zero: available (no replica is wanted), as its
    /// controller writes it.
    async fn write_scaled_down(&self, d: &Value) -> Result<(), String> {
        let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        let status = json!({"observedGeneration": d["metadata"]["generation"], "replicas": 0, "updatedReplicas": 0,
            "readyReplicas": 0, "availableReplicas": 0,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.", "lastTransitionTime": jiff_now(), "lastUpdateTime": jiff_now()}]});
        if d["status"]["replicas"] == 0 && d["status"]["observedGeneration"] == d["metadata"]["generation"] {
            return Ok(());
        }
        self.patch_status(ns, name, status).await
    }

    /// The Deployment's status as its controller would write it for one replica.
    async fn write_status(
        &self,
        d: &Value,
        refusal: Option<Refusal>,
        ready: i64,
        _routes: &[String],
    ) -> Result<(), String> {
        let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        let now = jiff_now();
        let available = if ready > 0 {
            json!({"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.", "lastTransitionTime": now, "lastUpdateTime": now})
        } else {
            let message = refusal
                .as_ref()
                .map_or("Deployment does not have minimum availability.".to_string(), |r| r.message.clone());
            json!({"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                "message": message, "lastTransitionTime": now, "lastUpdateTime": now})
        };
        let mut conditions = vec![available];
        if let Some(r) = refusal.as_ref().filter(|r| r.reason == "FailedCreate") {
            conditions.push(json!({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                "message": r.message, "lastTransitionTime": now, "lastUpdateTime": now}));
        }
        let replicas = if refusal.as_ref().is_some_and(|r| r.reason == "FailedCreate") { 0 } else { 1 };
        let status = json!({
            "observedGeneration": d["metadata"]["generation"],
            "replicas": replicas, "updatedReplicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
            "unavailableReplicas": 1 - ready,
            "conditions": conditions,
        });
        // Written only when something but the timestamps changed.
        let strip = |v: &Value| {
            let mut v = v.clone();
            for c in v["conditions"].as_array_mut().into_iter().flatten() {
                if let Some(o) = c.as_object_mut() {
                    o.remove("lastTransitionTime");
                    o.remove("lastUpdateTime");
                }
            }
            v
        };
        if strip(&d["status"]) == strip(&status) {
            return Ok(());
        }
        self.patch_status(ns, name, status).await
    }

    /// OpenShift's service CA: a serving certificate for each Service that asks for one
    /// (`service.beta.openshift.io/serving-cert-secret-name`), and its CA injected into each
    /// webhook configuration and CRD that asks (`service.beta.openshift.io/inject-cabundle:
    /// "true"`), as openshift/service-ca-operator's `servingcert` and `cabundleinjector`
    /// controllers do.
    async fn service_ca_pass(&self) -> Result<(), String> {
        service_ca::pass(self).await
    }
}

/// The kubelet's back-off before restart `step` of a crashing container.
fn backoff(step: u32) -> Duration {
    BACKOFF.saturating_mul(1 << step.min(6).saturating_sub(1)).min(BACKOFF_CAP)
}

/// Pods, as the replica-set controller makes them (not among the kinds the bridge reads each
/// pass: only this runner reads its own Pods).
static POD: Kind = Kind { group: "", version: "v1", kind: "Pod", plural: "pods", namespaced: true, status: true };

fn pod_kind() -> &'static Kind {
    &POD
}

/// A container's termination as the kubelet reports it (`lastState.terminated`): its exit code
/// (128 + the signal for a killed one), `Error` for a non-zero exit, and its message: the tail of
/// its log (the last 80 lines, at most 2,048 bytes) only when its `terminationMessagePolicy` is
/// `FallbackToLogsOnError` and it failed, since the managers write no termination-message file.
fn terminated(status: &std::process::ExitStatus, started_at: &str, container: &Value, log: &std::path::Path) -> Value {
    use std::os::unix::process::ExitStatusExt;
    let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(9));
    let message = if code != 0 && container["terminationMessagePolicy"] == "FallbackToLogsOnError" {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let mut tail = lines[lines.len().saturating_sub(80)..].join("\n");
        if tail.len() > 2048 {
            let mut cut = tail.len() - 2048;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail = tail[cut..].to_string();
        }
        tail
    } else {
        String::new()
    };
    json!({"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }, "message": message,
        "startedAt": started_at, "finishedAt": jiff_now()})
}

/// The last error lines of a container's log (klog's `E`, or a Go panic), else its last lines.
fn last_errors(log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let errors: Vec<&str> =
        text.lines().filter(|l| l.starts_with('E') || l.contains("panic") || l.contains("error")).collect();
    if errors.is_empty() { crate::cluster::log_tail(log) } else { errors[errors.len().saturating_sub(5)..].join("\n") }
}

/// A stable hex number for a pod's uid.
fn md5ish(s: &str) -> u128 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(s.as_bytes());
    u128::from_be_bytes(d[..16].try_into().unwrap_or_default())
}

/// Nanoseconds of the clock, to tell apart Pods made in one second.
fn jiff_now_nanos() -> i128 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos()
}

fn jiff_now() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

pub mod service_ca {
    //! openshift/service-ca-operator, as far as a provider's webhooks need it.
    use super::*;

    /// The Service annotation naming the Secret of its serving certificate.
    pub const SERVING_CERT: &str = "service.beta.openshift.io/serving-cert-secret-name";
    /// The annotation that asks for the service CA's bundle.
    pub const INJECT: &str = "service.beta.openshift.io/inject-cabundle";

    pub(super) async fn pass(r: &Runner) -> Result<(), String> {
        let bundle = base64::engine::general_purpose::STANDARD.encode(r.service_ca.ca_cert());
        let secrets = Kind::find("", "v1", "secrets").expect("secrets served");
        for s in r.list("", "v1", "Service", "services").await? {
            let Some(secret) = s["metadata"]["annotations"][SERVING_CERT].as_str() else { continue };
            let ns = s["metadata"]["namespace"].as_str().unwrap_or_default();
            let svc = s["metadata"]["name"].as_str().unwrap_or_default();
            if r.read_data("secrets", ns, secret).await?.is_some() {
                continue;
            }
            let dns = [format!("{svc}.{ns}.svc"), format!("{svc}.{ns}.svc.cluster.local")];
            let pem = r
                .service_ca
                .server(&dns[0], &[dns[0].as_str(), dns[1].as_str()])
                .map_err(|e| format!("signing a serving certificate for {ns}/{svc}: {e}"))?;
            let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
            let body: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": secret, "namespace": ns,
                    "annotations": {"service.beta.openshift.io/originating-service-name": svc}},
                "data": {"tls.crt": b64(&(pem.cert.clone() + r.service_ca.ca_cert())), "tls.key": b64(&pem.key)},
            }))
            .map_err(|e| e.to_string())?;
            match r.api(secrets, ns).create(&PostParams::default(), &body).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(format!("creating the serving certificate {ns}/{secret}: {e}")),
            }
        }
        for (group, version, kind, plural) in [
            ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
            ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"),
        ] {
            for o in r.list(group, version, kind, plural).await? {
                if o["metadata"]["annotations"][INJECT].as_str() != Some("true") {
                    continue;
                }
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                let patch = if kind == "CustomResourceDefinition" {
                    if o["spec"]["conversion"]["webhook"].is_null()
                        || o["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == bundle.as_str()
                    {
                        continue;
                    }
                    json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}}})
                } else {
                    let webhooks = o["webhooks"].as_array().cloned().unwrap_or_default();
                    if webhooks.iter().all(|w| w["clientConfig"]["caBundle"] == bundle.as_str()) {
                        continue;
                    }
                    let patched: Vec<Value> = webhooks
                        .into_iter()
                        .map(|mut w| {
                            w["clientConfig"]["caBundle"] = json!(bundle);
                            w
                        })
                        .collect();
                    json!({"webhooks": patched})
                };
                let ar = kube::api::ApiResource {
                    group: group.into(),
                    version: version.into(),
                    api_version: format!("{group}/{version}"),
                    kind: kind.into(),
                    plural: plural.into(),
                };
                let api: Api<DynamicObject> = Api::all_with(r.client.clone(), &ar);
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| format!("injecting the service CA into {kind} {name}: {e}"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_images_name_the_binaries() {
        assert_eq!(manager_of("registry.k8s.io/cluster-api/cluster-api-controller:v1.13.6"), Some("capi-manager"));
        assert_eq!(
            manager_of("mirror.example.mil/cluster-api-azure/cluster-api-azure-controller@sha256:ab"),
            Some("capz-manager")
        );
        assert_eq!(manager_of("quay.io/openshift/origin-azure-cluster-api-controllers:4.22"), None);
    }

    #[test]
    fn restricted_v2_refuses_a_fixed_user_and_privilege() {
        let template = json!({"spec": {"securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "manager", "securityContext": {"runAsUser": 65532, "allowPrivilegeEscalation": false}}]}});
        let r = scc_refusal("capi-controller-manager", &template, (1_000_690_000, 10_000)).expect("refused");
        assert_eq!(r.reason, "FailedCreate");
        assert!(
            r.message.contains("runAsUser: Invalid value: 65532: must be in the ranges: [1000690000, 1000699999]"),
            "{}",
            r.message
        );
        let fine = json!({"spec": {"containers": [{"securityContext": {"allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]}}}]}});
        assert_eq!(scc_refusal("x", &fine, (1_000_690_000, 10_000)), None);
        let host = json!({"spec": {"hostNetwork": true, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
            "containers": [{"securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}}}]}});
        let r = scc_refusal("x", &host, (1_000_690_000, 10_000)).expect("refused");
        for needle in ["privileged", "SYS_ADMIN", "hostNetwork", "hostPath"] {
            assert!(r.message.contains(needle), "{needle}: {}", r.message);
        }
        assert_eq!(uid_range("1000690000/10000"), Some((1_000_690_000, 10_000)));
    }
}
