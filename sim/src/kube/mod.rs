//! The Kubernetes API subset: discovery, the CAPZ/CAPI custom resources and core Namespaces,
//! Secrets and ConfigMaps, with get/list/create/replace/merge patch/server-side apply/delete,
//! bearer-token auth, CRD-schema admission, and a MachineSet controller. Served over TLS on a port
//! of its own (`crate::tls`) under `/api`, `/apis` and `/version`; see `sim/README.md` ("Kubernetes API").

pub mod boot;
pub mod bridge;
pub mod capz;
pub mod convert;
pub mod fields;
pub mod joins;
pub mod kinds;
pub mod machines;
pub mod mco;
pub mod meta;
pub mod openshift;
pub mod remediation;
pub mod schema;
pub mod selector;
pub mod status;
pub mod store;
pub mod tokens;
pub mod webhooks;

use crate::server::Sim;
use crate::world::World;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use kinds::{GROUPS, KINDS, Kind};
use selector::Selector;
use serde_json::{Value, json};
use status::KubeError;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Registry, Store, WriteCtx};

/// Where the Kubernetes API is served: its `https://` URL and the PEM of the CA its server
/// certificate chains to.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub ca_pem: String,
}

/// The Kubernetes side of the world: the token, the objects and the CRD schemas.
#[derive(Debug)]
pub struct Kube {
    /// The one bearer token the API accepts (kept across resets).
    pub token: String,
    /// Where the API is served (what the kubeconfig names).
    pub endpoint: Endpoint,
    pub store: Mutex<Store>,
    registry: Mutex<Option<Arc<Registry>>>,
    crds_dir: PathBuf,
}

impl Kube {
    /// `token`: the bearer token to accept (generated when `None`). `crds_dir`: where the CRDs are
    /// (default [`schema::crds_dir`]); they are read at the first Kubernetes request.
    pub fn new(world: &World, token: Option<String>, crds_dir: Option<PathBuf>, endpoint: Endpoint) -> Kube {
        let store = Mutex::new(Store::new(world, &endpoint.ca_pem));
        Kube {
            token: token.unwrap_or_else(|| format!("xcsp-sim-{}", uuid::Uuid::new_v4().simple())),
            endpoint,
            store,
            registry: Mutex::new(None),
            crds_dir: crds_dir.unwrap_or_else(schema::crds_dir),
        }
    }

    /// The CRD schemas, read on first use (and again after a reset). When they cannot be read the
    /// custom resources are served unvalidated and the reason is printed once to stderr.
    pub fn registry(&self) -> Arc<Registry> {
        let mut r = self.registry.lock().expect("registry lock");
        r.get_or_insert_with(|| {
            let reg = Registry::load(&self.crds_dir);
            if let Some(e) = &reg.error {
                eprintln!("xcsp-sim: Kubernetes custom resources are NOT validated: {e}");
            }
            Arc::new(reg)
        })
        .clone()
    }

    /// Forgets every object (the default namespaces are back) and re-reads the CRDs at next use.
    pub fn reset(&self, world: &World) {
        *self.store.lock().expect("store lock") = Store::new(world, &self.endpoint.ca_pem);
        *self.registry.lock().expect("registry lock") = None;
    }

    /// A kubeconfig for the API's TLS endpoint, trusting its CA (`certificate-authority-data`:
    /// the PEM, base64), with this world's token; cluster, user and context `xcsp-sim`.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine as _;
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: xcsp-sim\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: xcsp-sim\n  user:\n    token: {token}\ncontexts:\n- name: xcsp-sim\n  context:\n    cluster: xcsp-sim\n    user: xcsp-sim\n    namespace: default\ncurrent-context: xcsp-sim\npreferences: {{}}\n",
            server = self.endpoint.url,
            ca = base64::engine::general_purpose::STANDARD.encode(&self.endpoint.ca_pem),
            token = self.token
        )
    }

    /// Brings the MachineSet controller up to the world clock.
    pub fn settle(&self, world: &World) {
        self.store.lock().expect("store lock").settle(world, world.clock.now());
    }

    /// Each Machine with where CAPZ holds it and what CAPI still needs to match a Node
    /// ([`joins`]), after [`Kube::reflect_machines`] brought them up to date.
    pub fn machines(&self, world: &World, arm: &mut crate::arm::store::Store, link: &joins::Link) -> Vec<Value> {
        let held = self.reflect_machines(world, arm, link);
        let s = self.store.lock().expect("store lock");
        held.into_iter()
            .filter_map(|(k, held)| {
                let o = s.objects.get(&k)?;
                Some(json!({
                    "namespace": k.2, "name": k.3,
                    "machine_set": o.value["metadata"]["labels"]["cluster.x-k8s.io/set-name"],
                    "held_at": held.step, "message": held.message, "source": held.source,
                    "node_ref_needs": joins::node_ref_needs(&s, &o.value),
                }))
            })
            .collect()
    }

    /// Writes on each Machine the conditions and phase CAPI would give it where CAPZ holds it
    /// ([`joins::machine_conditions`]): cluster-api `api/core/v1beta1/condition_consts.go`
    /// (`BootstrapReady`, `InfrastructureReady`, their fallback reasons), cluster-api-provider-azure
    /// `api/v1beta1/consts.go` (`WaitingForClusterInfrastructure`, `WaitingForBootstrapData`).
    /// A condition keeps its `lastTransitionTime` while its status and reason stay. Settles the
    /// store first; answers where each Machine is held (a Machine being deleted is not written).
    pub fn reflect_machines(
        &self,
        world: &World,
        arm: &mut crate::arm::store::Store,
        link: &joins::Link,
    ) -> Vec<(store::Key, joins::Held)> {
        let config = world.config();
        let mut s = self.store.lock().expect("store lock");
        s.settle(world, world.clock.now());
        // CAPI's health checks send away the Machines they find unhealthy ([`remediation`]).
        s.remediate(world);
        let keys: Vec<store::Key> =
            s.objects.keys().filter(|k| k.0 == "cluster.x-k8s.io" && k.1 == "machines").cloned().collect();
        // CAPZ's finalizer: the VMs of Machines going or gone go first.
        let live: Vec<String> = keys.iter().filter(|k| !s.deleting.contains_key(*k)).map(|k| k.3.clone()).collect();
        capz::reap(arm, &live);
        // CAPI deletes a deleted Machine's Node (`machine_controller.go` `reconcileDelete`): the
        // Nodes of VMs that are gone go with them.
        let gone: Vec<(String, String)> = s
            .registered
            .iter()
            .filter(|(vm, _)| arm.get(&vm.to_ascii_lowercase()).is_none())
            .map(|(vm, node)| (vm.clone(), node.clone()))
            .collect();
        for (vm, node) in gone {
            s.registered.remove(&vm);
            s.boots.remove(&vm);
            s.kubelets.retain(|(v, _), _| *v != vm);
            s.heartbeats.remove(&node);
            s.csrs.remove(&node);
            let key = store::key(kinds::Kind::served("", "nodes").expect("nodes served"), "", &node);
            if s.objects.contains_key(&key) {
                s.remove(&key, world);
            }
        }
        let now = store::timestamp(world);
        let mut found = Vec::new();
        for k in keys {
            let Some(mut obj) = s.objects.get(&k).cloned() else { continue };
            let mut held = joins::held(&s, &obj.value, &joins::Azure { store: arm, config: &config, link });
            if s.deleting.contains_key(&k) {
                found.push((k, held));
                continue;
            }
            if held.step == "vm" {
                match capz::make_vm(&s, arm, &obj.value, world.clock.now()) {
                    Ok(provider_id) => {
                        obj.value["spec"]["providerID"] = json!(provider_id);
                        // CAPI copies the AzureMachine's addresses, CAPZ's `InternalDNS` the VM's
                        // name (`azure/services/virtualmachines` `getAddresses`).
                        obj.value["status"]["addresses"] = json!([{"type": "InternalDNS", "address": k.3}]);
                        held = joins::held(&s, &obj.value, &joins::Azure { store: arm, config: &config, link });
                    }
                    Err(refused) => held = refused,
                }
            }
            // Past DNS, the boot and the Node ([`boot`]).
            let mut node = None;
            // A VM whose Node registered keeps it when DNS fails later: its kubelet stops posting.
            let registered = arm
                .of_kind(&crate::arm::kinds::VM)
                .find(|vm| vm.name == k.3)
                .is_some_and(|vm| s.registered.contains_key(&vm.id));
            if held.step == "boot" || (held.step == "dns" && registered) {
                let pointer = joins::pointer_source(&s, &obj.value).unwrap_or_default();
                let dns = (held.step == "dns").then(|| held.clone());
                let progress = boot::advance(&mut s, arm, link, &obj.value, &pointer, dns, world);
                held = progress.held;
                node = progress.node.and_then(|n| {
                    let v = s.value("", "nodes", "", &n)?;
                    Some((n, v["metadata"]["uid"].clone(), boot::node_ready(v)))
                });
            }
            let wanted = joins::machine_conditions(&held, &obj.value, node.as_ref().map(|n| n.2));
            let conditions = conditions_json(&wanted, &obj.value["status"]["conditions"], &now);
            if let Some(infra) = wanted.iter().find(|c| c.0 == "InfrastructureReady") {
                capz::reflect(&mut s, &obj.value, infra, &now);
            }
            let bootstrap = conditions.first().is_some_and(|c| c["status"] == "True");
            let infrastructure = conditions.get(1).is_some_and(|c| c["status"] == "True");
            // CAPI's phases (`machine_controller_phases.go` `reconcilePhase`).
            let phase = match (bootstrap, infrastructure) {
                (_, true) if node.is_some() => "Running",
                (_, true) => "Provisioned",
                (true, false) => "Provisioning",
                (false, false) => "Pending",
            };
            let unchanged = s.objects.get(&k).is_some_and(|o| {
                o.value["spec"]["providerID"] == obj.value["spec"]["providerID"]
                    && o.value["status"]["addresses"] == obj.value["status"]["addresses"]
            });
            let node_ref = node
                .as_ref()
                .map(|(name, uid, _)| json!({"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}));
            if !unchanged
                || obj.value["status"]["conditions"] != json!(conditions)
                || obj.value["status"]["phase"] != phase
                || obj.value["status"].get("nodeRef") != node_ref.as_ref()
            {
                let mut next = obj;
                match &node_ref {
                    Some(r) => next.value["status"]["nodeRef"] = r.clone(),
                    None => {
                        if let Some(st) = next.value["status"].as_object_mut() {
                            st.remove("nodeRef");
                        }
                    }
                }
                next.value["status"]["infrastructureReady"] = json!(infrastructure);
                next.value["status"]["conditions"] = json!(conditions);
                next.value["status"]["phase"] = json!(phase);
                next.value["status"]["bootstrapReady"] = json!(bootstrap);
                s.store(next);
            }
            found.push((k, held));
        }
        found
    }

    pub fn objects(&self, world: &World) -> Vec<Value> {
        self.settle(world);
        let s = self.store.lock().expect("store lock");
        s.objects
            .iter()
            .map(|(k, o)| {
                json!({
                    "apiVersion": o.kind.api_version(), "kind": o.kind.kind, "namespace": k.2, "name": k.3,
                    "resourceVersion": o.value["metadata"]["resourceVersion"],
                    "deleting": s.deleting.contains_key(k),
                })
            })
            .collect()
    }
}

/// A v1beta1 condition: `type` and `status`, and when false its `reason` and `severity`; a
/// `message` when there is one; the `lastTransitionTime` of the condition of the same type, status
/// and reason in `old` (a list of conditions), else `now`.
pub(super) fn condition(
    old: &Value,
    kind: &str,
    ok: bool,
    reason: &str,
    severity: &str,
    message: &str,
    now: &str,
) -> Value {
    let status = if ok { "True" } else { "False" };
    let since = old
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind && c["status"] == status && c["reason"].as_str().unwrap_or("") == reason)
        .map(|c| c["lastTransitionTime"].clone())
        .unwrap_or_else(|| json!(now));
    let mut c = json!({"type": kind, "status": status, "lastTransitionTime": since});
    if !ok {
        c["reason"] = json!(reason);
        c["severity"] = json!(severity);
    }
    if !message.is_empty() {
        c["message"] = json!(message);
    }
    c
}

/// The conditions CAPI and CAPZ write from `(type, ok, reason, message)`: severity `Info` for a
/// wait, `Error` for a failure with a message ([`condition`]).
pub(super) fn conditions_json(
    wanted: &[(&'static str, bool, &'static str, String)],
    old: &Value,
    now: &str,
) -> Vec<Value> {
    wanted
        .iter()
        .map(|(kind, ok, reason, message)| {
            let severity = if message.is_empty() { "Info" } else { "Error" };
            condition(old, kind, *ok, reason, severity, message, now)
        })
        .collect()
}

/// True for the paths the Kubernetes API owns: `/version`, `/api[/...]`, `/apis[/...]`.
pub fn is_kube_path(path: &str) -> bool {
    // `/version/` too: the API server's version route is `GET /` under the web service path
    // `/version` (kubernetes/apiserver `pkg/server/routes/version.go`), and the Python client asks there.
    path == "/version"
        || path == "/version/"
        || path == "/api"
        || path.starts_with("/api/")
        || path == "/apis"
        || path.starts_with("/apis/")
}

/// The answer on the sim's plain-HTTP port to a Kubernetes path: 400 `BadRequest` naming the TLS
/// endpoint. A real API server has no plain port (insecure serving went in Kubernetes 1.20); the
/// sim's plain port belongs to ARM, EC2 and `/_sim/`, and says where to go rather than answering
/// as ARM, or in a way a client could take for an empty cluster.
pub fn only_over_tls(sim: &Sim) -> Response {
    let e = KubeError::bad_request(format!(
        "the Kubernetes API is served over TLS only, at {} (GET /_sim/kubeconfig for a kubeconfig)",
        sim.kube.endpoint.url
    ));
    sim.world.count(|c| *c.requests.entry("kube plain-http".into()).or_default() += 1);
    (e.code, [(axum::http::header::CONTENT_TYPE, "application/json")], e.body().to_string()).into_response()
}

/// A boolean query parameter as the API server reads it (kubernetes/apimachinery
/// `pkg/runtime/conversion.go`, `Convert_Slice_string_To_Pointer_bool`): "0" and "false" in any
/// case are false, anything else (`True` as the Python client sends it, an empty value) is true.
fn query_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

/// What a path names.
#[derive(Debug, PartialEq)]
enum Route {
    Version,
    ApiVersions,
    GroupList,
    Group(String),
    Resources { group: String, version: String },
    Collection { kind: &'static Kind, ns: Option<String> },
    Object { kind: &'static Kind, ns: String, name: String, sub: Option<String> },
    Unknown,
}

fn route(path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["api"] => return Route::ApiVersions,
        ["apis"] => return Route::GroupList,
        ["apis", g] => return Route::Group(g.to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::Unknown,
    };
    let kind = |plural: &str| Kind::find(group, version, plural);
    let known_group = KINDS.iter().any(|k| k.group == group && k.version == version);
    match rest {
        [] if known_group => Route::Resources { group: group.into(), version: version.into() },
        ["namespaces", ns, plural] if kind(plural).is_some_and(|k| k.namespaced) => {
            Route::Collection { kind: kind(plural).expect("kind"), ns: Some(ns.to_string()) }
        }
        ["namespaces", ns, plural, name, sub @ ..] if sub.len() <= 1 && kind(plural).is_some_and(|k| k.namespaced) => {
            Route::Object {
                kind: kind(plural).expect("kind"),
                ns: ns.to_string(),
                name: name.to_string(),
                sub: sub.first().map(|s| s.to_string()),
            }
        }
        [plural] if kind(plural).is_some() => Route::Collection { kind: kind(plural).expect("kind"), ns: None },
        [plural, name, sub @ ..] if sub.len() <= 1 && kind(plural).is_some_and(|k| !k.namespaced) => Route::Object {
            kind: kind(plural).expect("kind"),
            ns: String::new(),
            name: name.to_string(),
            sub: sub.first().map(|s| s.to_string()),
        },
        _ => Route::Unknown,
    }
}

/// Answers one Kubernetes API request.
pub async fn serve(sim: &Sim, method: Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Response {
    // CAPI's v1beta2: the request is taken as v1beta1, which the store holds, and the answer
    // converted back ([`convert`]).
    let v2_prefix = format!("/apis/{}/{}", kinds::CAPI, convert::V1BETA2);
    let (path, v2) = match uri.path().strip_prefix(&v2_prefix) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            (format!("/apis/{}/v1beta1{rest}", kinds::CAPI), true)
        }
        _ => (uri.path().to_string(), false),
    };
    let route = route(&path);
    // The resource a deprecation warning would name ([`schema::deprecation_warning`]).
    let resource_of = match &route {
        Route::Collection { kind, .. } | Route::Object { kind, .. } => Some(kind.resource()),
        _ => None,
    };
    let converted;
    let body: &[u8] = if v2 && !body.is_empty() {
        let ns = match &route {
            Route::Collection { ns, .. } => ns.clone().unwrap_or_default(),
            Route::Object { ns, .. } => ns.clone(),
            _ => String::new(),
        };
        match serde_norway::from_slice::<Value>(body) {
            Ok(mut v) => {
                convert::down(&mut v, &ns);
                converted = serde_json::to_vec(&v).unwrap_or_default();
                &converted
            }
            Err(_) => body,
        }
    } else {
        body
    };
    let query: HashMap<String, String> =
        serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let content_type = header(headers, "content-type").split(';').next().unwrap_or_default().trim().to_string();
    let (verb, resource) = describe(&method, &route, &query, &content_type);
    sim.world.count(|c| *c.requests.entry(format!("kube {verb} {resource}")).or_default() += 1);
    let authorized = route == Route::Version
        || header(headers, "authorization").strip_prefix("Bearer ").is_some_and(|t| t.trim() == sim.kube.token);
    if authorized {
        // The controllers and CAPI's and CAPZ's view of the Machines, brought up to date before
        // the request sees them (the ARM store first, then the Kubernetes one, as everywhere both
        // are held).
        let link = joins::Link::of(sim);
        let mut arm = sim.arm.store.lock().expect("store lock");
        sim.kube.reflect_machines(&sim.world, &mut arm, &link);
    }
    let result = if !authorized {
        Err(KubeError::unauthorized())
    } else {
        let config = sim.world.config();
        if config.latency.request_latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(config.latency.request_latency_ms)).await;
        }
        let host = header(headers, "host");
        handle(
            sim,
            &method,
            route,
            &query,
            &content_type,
            headers,
            body,
            if host.is_empty() { "127.0.0.1" } else { host },
        )
    };
    let (status, mut body) = match result {
        Ok(ok) => ok,
        Err(e) => {
            sim.world.count(|c| *c.errors.entry(e.reason.to_string()).or_default() += 1);
            (e.code, e.body())
        }
    };
    if v2 {
        convert::up(&mut body);
        if body["kind"] == "APIResourceList" {
            body["groupVersion"] = json!(format!("{}/{}", kinds::CAPI, convert::V1BETA2));
        }
    }
    sim.world.count(|c| *c.statuses.entry(status.as_u16()).or_default() += 1);
    let mut response =
        (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response();
    // A request at a version its CRD deprecates is answered with the API server's warning
    // ([`schema::deprecation_warning`]), whatever its outcome.
    if authorized
        && !v2
        && let Some(w) = resource_of.and_then(|k| sim.kube.registry().deprecations.get(&k).cloned())
        && let Ok(v) = axum::http::HeaderValue::from_str(&format!("299 - {:?}", w))
    {
        response.headers_mut().insert("warning", v);
    }
    response
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// The verb (`get`, `list`, `create`, `update`, `patch`, `apply`, `delete`, `discovery`) and
/// resource (`plural.group`) a request is counted under.
fn describe(method: &Method, route: &Route, query: &HashMap<String, String>, content_type: &str) -> (String, String) {
    let (resource, collection, sub) = match route {
        Route::Collection { kind, .. } => (kind.resource(), true, None),
        Route::Object { kind, sub, .. } => (kind.resource(), false, sub.clone()),
        Route::Unknown => return (method.as_str().to_ascii_lowercase(), "unknown".into()),
        _ => return ("get".into(), "discovery".into()),
    };
    let verb = match *method {
        Method::GET if collection && query.get("watch").is_some_and(|w| query_bool(w)) => "watch",
        Method::GET if collection => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH if content_type == "application/apply-patch+yaml" => "apply",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    };
    let resource = match sub {
        Some(s) => format!("{resource}/{s}"),
        None => resource,
    };
    (verb.to_string(), resource)
}

#[allow(clippy::too_many_arguments)]
fn handle(
    sim: &Sim,
    method: &Method,
    route: Route,
    query: &HashMap<String, String>,
    content_type: &str,
    headers: &HeaderMap,
    body: &[u8],
    host: &str,
) -> store::Answer {
    let world = &sim.world;
    match route {
        Route::Version => return Ok((StatusCode::OK, version())),
        Route::ApiVersions => {
            return Ok((
                StatusCode::OK,
                json!({"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}),
            ));
        }
        Route::GroupList => {
            let groups: Vec<Value> = GROUPS.iter().map(|(g, v)| api_group(g, v)).collect();
            return Ok((StatusCode::OK, json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})));
        }
        Route::Group(g) => {
            return match GROUPS.iter().find(|(name, _)| *name == g) {
                Some((name, v)) => Ok((StatusCode::OK, api_group(name, v))),
                None => Err(not_served()),
            };
        }
        Route::Resources { group, version } => return Ok((StatusCode::OK, resource_list(&group, &version))),
        Route::Unknown => return Err(not_served()),
        _ => {}
    }
    let registry = sim.kube.registry();
    let manager = query.get("fieldManager").filter(|m| !m.is_empty()).cloned().unwrap_or_else(|| {
        let ua = header(headers, "user-agent");
        let product = ua.split('/').next().unwrap_or_default().trim();
        if product.is_empty() { "unknown".to_string() } else { product.to_string() }
    });
    let now = world.clock.now();
    let ctx = WriteCtx {
        world,
        now,
        registry: &registry,
        strict: query.get("fieldValidation").is_some_and(|v| v == "Strict"),
        dry_run: query.get("dryRun").is_some_and(|v| v == "All"),
        manager,
    };
    // Settled a moment ago, with the Machines, by `serve` (`reflect_machines`).
    let mut store = sim.kube.store.lock().expect("store lock");
    let answer = match route {
        Route::Collection { kind, ns } => match *method {
            Method::GET if query.get("watch").is_some_and(|w| query_bool(w)) => Err(KubeError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "watch is not supported by xcsp-sim; poll with list",
            )),
            Method::GET => {
                let labels = Selector::parse(query.get("labelSelector").map(String::as_str).unwrap_or_default())
                    .map_err(KubeError::bad_request)?;
                let field = field_selector(query.get("fieldSelector").map(String::as_str).unwrap_or_default())?;
                Ok((StatusCode::OK, store.list(kind, ns.as_deref(), &labels, &field)))
            }
            Method::POST if kind.namespaced && ns.is_none() => Err(method_not_allowed()),
            Method::POST => store.create(kind, ns.as_deref().unwrap_or_default(), parse_json(body)?, &ctx),
            _ => Err(method_not_allowed()),
        },
        Route::Object { kind, ns, name, sub: None } => match *method {
            Method::GET => store.get(kind, &ns, &name),
            Method::PUT => store.replace(kind, &ns, &name, parse_json(body)?, &ctx),
            Method::DELETE => store.delete(kind, &ns, &name, &ctx),
            Method::PATCH
                if query.contains_key("force")
                    && (content_type == "application/merge-patch+json"
                        || (content_type == "application/strategic-merge-patch+json" && !kind.custom)) =>
            {
                Err(force_outside_apply())
            }
            Method::PATCH => match content_type {
                "application/apply-patch+yaml" => {
                    if !query.contains_key("fieldManager") || ctx.manager.is_empty() {
                        return Err(KubeError::bad_request("PATCH: fieldManager is required for apply requests"));
                    }
                    let force = query.get("force").is_some_and(|f| query_bool(f));
                    store.apply(kind, &ns, &name, parse_yaml(body)?, force, &ctx)
                }
                "application/merge-patch+json" => store.merge_patch(kind, &ns, &name, &parse_json(body)?, &ctx),
                "application/strategic-merge-patch+json" if !kind.custom => {
                    store.merge_patch(kind, &ns, &name, &parse_json(body)?, &ctx)
                }
                other => Err(KubeError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    format!(
                        "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/apply-patch+yaml (got '{other}')"
                    ),
                )),
            },
            _ => Err(method_not_allowed()),
        },
        Route::Object { kind, ns, name, sub: Some(sub) } => {
            subresource(&mut store, method, kind, &ns, &name, &sub, content_type, body, &ctx)
        }
        _ => Err(not_served()),
    };
    if answer.is_ok() && !ctx.dry_run && *method != Method::GET {
        store.settle(world, world.clock.now());
    }
    answer
}

/// `status` (GET, PUT, merge PATCH: only `status` changes) and `scale` (GET, PUT, merge PATCH:
/// only `spec.replicas` changes) of types that have them.
#[allow(clippy::too_many_arguments)]
fn subresource(
    store: &mut Store,
    method: &Method,
    kind: &'static Kind,
    ns: &str,
    name: &str,
    sub: &str,
    content_type: &str,
    body: &[u8],
    ctx: &WriteCtx,
) -> store::Answer {
    let resource = kind.resource();
    let k = store::key(kind, ns, name);
    // A CSR's `approval` takes the conditions as `status` takes the status (the API server's
    // approval subresource updates only `status.conditions`).
    let approval = sub == "approval" && kind.kind == "CertificateSigningRequest";
    let served = (sub == "status" && kind.status) || (sub == "scale" && kind.scale) || approval;
    if !served {
        return Err(not_served());
    }
    let Some(obj) = store.objects.get(&k).cloned() else { return Err(KubeError::not_found(&resource, name)) };
    if *method != Method::GET
        && !matches!((method, content_type), (&Method::PUT, _) | (&Method::PATCH, "application/merge-patch+json"))
    {
        return Err(method_not_allowed());
    }
    if sub == "status" || approval {
        if *method == Method::GET {
            return Ok((StatusCode::OK, obj.render()));
        }
        let input = parse_json(body)?;
        let mut next = obj.clone();
        if *method == Method::PUT {
            next.value["status"] = input["status"].clone();
        } else {
            crate::world::merge_patch(&mut next.value, &json!({"status": input["status"]}));
        }
        let next_value = store::admit(kind, next.value.clone(), ctx)?;
        next.value = next_value;
        if ctx.dry_run || next.value == obj.value {
            return Ok((StatusCode::OK, next.render()));
        }
        return Ok((StatusCode::OK, store.store(next)));
    }
    if *method != Method::GET {
        let input = parse_json(body)?;
        let Some(replicas) = input["spec"]["replicas"].as_i64() else {
            return Err(KubeError::bad_request("spec.replicas must be an integer"));
        };
        store.merge_patch(kind, ns, name, &json!({"spec": {"replicas": replicas}}), ctx)?;
    }
    let o = &store.objects.get(&k).cloned().unwrap_or(obj).value;
    Ok((
        StatusCode::OK,
        json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": ns, "uid": o["metadata"]["uid"],
                "resourceVersion": o["metadata"]["resourceVersion"], "creationTimestamp": o["metadata"]["creationTimestamp"]},
            "spec": {"replicas": o["spec"]["replicas"].as_i64().unwrap_or(1)},
            "status": {"replicas": o["status"]["replicas"].as_i64().unwrap_or(0),
                "selector": o["status"]["selector"].as_str().unwrap_or_default()},
        }),
    ))
}

fn parse_json(body: &[u8]) -> Result<Value, KubeError> {
    serde_json::from_slice(body).map_err(|e| KubeError::bad_request(format!("the body is not valid JSON: {e}")))
}

/// An apply configuration: YAML (JSON is YAML).
fn parse_yaml(body: &[u8]) -> Result<Value, KubeError> {
    serde_norway::from_slice(body).map_err(|e| KubeError::bad_request(format!("error decoding YAML: {e}")))
}

/// `metadata.name=x,metadata.namespace!=y`: only those two fields, as most types allow.
fn field_selector(s: &str) -> Result<Vec<(String, bool, String)>, KubeError> {
    let mut out = Vec::new();
    for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
            (f, false, v)
        } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            (f, true, v)
        } else {
            return Err(KubeError::bad_request(format!("invalid selector: '{s}'; can't understand '{term}'")));
        };
        if !matches!(field.trim(), "metadata.name" | "metadata.namespace") {
            return Err(KubeError::bad_request(format!("field label not supported: {}", field.trim())));
        }
        out.push((field.trim().to_string(), eq, value.trim().to_string()));
    }
    Ok(out)
}

/// `force` given to a patch that is not an apply: the API server refuses the patch options
/// themselves (apimachinery `ValidatePatchOptions`), whatever the value.
fn force_outside_apply() -> KubeError {
    let cause = schema::Cause {
        reason: schema::CauseReason::FieldValueForbidden,
        field: "force".into(),
        message: "Forbidden: may not be specified for non-apply patch".into(),
    };
    KubeError::invalid("PatchOptions", "meta.k8s.io", "", &[cause])
}

fn not_served() -> KubeError {
    KubeError::new(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource")
}

fn method_not_allowed() -> KubeError {
    KubeError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

fn version() -> Value {
    json!({
        "major": "1", "minor": "31", "gitVersion": "v1.31.0+xcsp-sim", "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2024-08-13T00:00:00Z", "goVersion": "go1.22.5", "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// A group's discovery: its versions, preferred first. CAPI's is served at `v1beta2` too, which
/// CAPI 1.13's CRDs mark as the storage version and list first (the preferred version).
fn api_group(name: &str, version: &str) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    let mut versions = vec![gv(version)];
    if name == kinds::CAPI {
        versions.insert(0, gv(convert::V1BETA2));
    }
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": name, "preferredVersion": versions[0].clone(), "versions": versions})
}

/// An APIResourceList of a group version, with `status`/`scale` subresources.
fn resource_list(group: &str, version: &str) -> Value {
    let verbs = json!(["create", "delete", "get", "list", "patch", "update"]);
    let mut resources = Vec::new();
    for k in KINDS.iter().filter(|k| k.group == group && k.version == version) {
        let mut r = json!({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced, "kind": k.kind, "verbs": verbs});
        if !k.short_names.is_empty() {
            r["shortNames"] = json!(k.short_names);
        }
        if k.custom {
            r["categories"] = json!(["cluster-api"]);
        }
        resources.push(r);
        if k.status {
            resources
                .push(json!({"name": format!("{}/status", k.plural), "singularName": "", "namespaced": k.namespaced,
                "kind": k.kind, "verbs": ["get", "patch", "update"]}));
        }
        if k.scale {
            resources
                .push(json!({"name": format!("{}/scale", k.plural), "singularName": "", "namespaced": k.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_to_discovery_collections_and_objects() {
        assert_eq!(route("/version"), Route::Version);
        assert!(is_kube_path("/version/") && route("/version/") == Route::Version);
        assert!(query_bool("true") && query_bool("True") && query_bool("1") && query_bool(""));
        assert!(!query_bool("false") && !query_bool("FALSE") && !query_bool("0"));
        assert_eq!(route("/apis"), Route::GroupList);
        assert!(matches!(route("/api/v1"), Route::Resources { .. }));
        assert!(matches!(route("/api/v1/namespaces"), Route::Collection { ns: None, .. }));
        assert!(matches!(route("/api/v1/namespaces/default"), Route::Object { ref name, .. } if name == "default"));
        assert!(matches!(route("/api/v1/namespaces/default/secrets"), Route::Collection { ns: Some(_), .. }));
        assert!(matches!(
            route("/apis/cluster.x-k8s.io/v1beta1/namespaces/a/machinesets/b/scale"),
            Route::Object { sub: Some(ref s), .. } if s == "scale"
        ));
        assert_eq!(route("/apis/cluster.x-k8s.io/v1beta1/namespaces/a/widgets"), Route::Unknown);
        assert_eq!(route("/apis/cluster.x-k8s.io/v1beta1/machinesets/b"), Route::Unknown);
        assert!(!is_kube_path("/subscriptions/x") && !is_kube_path("/apiary") && is_kube_path("/apis/x"));
    }
}
