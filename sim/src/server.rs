//! The HTTP front: one axum router serving the admin API under `/_sim/`, EC2 form posts to `/`,
//! and everything else as ARM (token endpoint included). Request ids, counters, faults and
//! throttling happen here. The world's Kubernetes cluster, when it runs one, is the upstream
//! programs' ([`crate::cluster`]), started by [`SimServer::start_with_cluster`].

use crate::admin;
use crate::arm::{self, Ctx, Reply, auth, error::ArmError, path};
use crate::whole::Sim;
use crate::world::{SimConfig, World};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Builds the router of a sim's plain port: admin, EC2 and ARM.
pub fn router(sim: Arc<Sim>) -> Router {
    Router::new().nest("/_sim", admin::router()).fallback(entry).with_state(sim)
}

/// A cloud finishes a request it has accepted even when its client goes away (a killed
/// `xcsp apply`): the request runs on a task of its own, which a dropped connection does not
/// cancel, where the connection's own future would be dropped with it and leave, say, a Route 53
/// Resolver endpoint made in moto but missing from the sim's view of it. AWS documents that a
/// request whose answer was lost may have succeeded (EC2 API reference, "Ensuring idempotency":
/// retry with the same client token after a timeout or connection error); ARM runs a write it
/// accepted to its end (an LRO goes on without its poller).
async fn to_the_end(work: impl std::future::Future<Output = Response> + Send + 'static) -> Response {
    tokio::spawn(work).await.unwrap_or_else(|e| {
        eprintln!("xcsp-sim: a request's task failed: {e}");
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    })
}

fn json_response(status: StatusCode, body: Option<serde_json::Value>, headers: &[(String, String)]) -> Response {
    let mut resp = match body {
        Some(b) => (status, [(axum::http::header::CONTENT_TYPE, "application/json; charset=utf-8")], b.to_string())
            .into_response(),
        None => status.into_response(),
    };
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) {
            resp.headers_mut().append(k, v);
        }
    }
    resp
}

fn error_response(world: &World, e: ArmError) -> Response {
    world.count(|c| *c.errors.entry(e.code.clone()).or_default() += 1);
    json_response(e.status, Some(e.body()), &e.headers)
}

async fn entry(State(sim): State<Arc<Sim>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    to_the_end(serve_one(sim, method, uri, headers, body)).await
}

async fn serve_one(sim: Arc<Sim>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    if crate::aws::is_ec2(&method, uri.path(), &headers) {
        return crate::aws::serve(&sim.clouds().ec2(), &headers, &body).await;
    }
    if crate::aws::resolver::is_resolver(&headers) {
        return crate::aws::resolver::serve(&sim.aws, &headers, &body).await;
    }
    if let Some(rest) = uri.path().strip_prefix(arm::blob::PATH) {
        return serve_blob(&sim, &method, &uri, rest, &headers);
    }
    let request_id = uuid::Uuid::new_v4().to_string();
    let target = path::parse(uri.path());
    let name = arm::operation_name(&method, &target);
    sim.world.count(|c| *c.requests.entry(name.clone()).or_default() += 1);
    let at = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).and_then(arm::clouds::by_host);
    let misrouted = wrong_host(at, &target);
    let at = at.map(|(cloud, _)| cloud);
    let mut resp = match &target {
        _ if misrouted.is_some() => misrouted.unwrap_or_default(),
        path::Target::Token { tenant } => token(&sim, &method, tenant, &body, at),
        path::Target::OpenIdConfiguration { tenant } => openid_configuration(&method, &base_url(&headers), tenant),
        path::Target::InstanceDiscovery => instance_discovery(&method, &uri),
        _ => serve_arm(&sim, method.clone(), &uri, &headers, &body, target, at).await,
    };
    let status = resp.status().as_u16();
    let header = |h: axum::http::header::HeaderName| {
        headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
    };
    let record = crate::world::RequestRecord {
        method: method.to_string(),
        host: header(axum::http::header::HOST),
        path: uri.path().to_string(),
        api_version: serde_urlencoded::from_str::<HashMap<String, String>>(uri.query().unwrap_or_default())
            .ok()
            .and_then(|q| q.get("api-version").cloned()),
        user_agent: header(axum::http::header::USER_AGENT),
        status,
        operation: name,
    };
    sim.world.count(|c| {
        *c.statuses.entry(status).or_default() += 1;
        if c.log.len() >= crate::world::REQUEST_LOG_LEN {
            c.log.pop_front();
        }
        c.log.push_back(record);
    });
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::try_from(request_id.as_str()) {
        h.insert("x-ms-request-id", v.clone());
        h.insert("x-ms-correlation-request-id", v);
    }
    resp
}

/// The base URL the client used: the `Host` header, and `https` when a TLS-terminating proxy in
/// front of the sim says so with `X-Forwarded-Proto: https` (the sim itself serves plain http).
/// URLs the sim writes into answers (long-running operation headers, OpenID metadata) start with it.
pub fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    format!("{}://{host}", if https { "https" } else { "http" })
}

/// Entra's OpenID Connect metadata for a tenant (what MSAL reads before it asks for a token).
/// Only `token_endpoint` is served by the sim; the other endpoints are named as Entra names them.
fn openid_configuration(method: &Method, base: &str, tenant: &str) -> Response {
    if *method != Method::GET {
        return json_response(StatusCode::METHOD_NOT_ALLOWED, None, &[]);
    }
    let t = format!("{base}/{tenant}");
    json_response(
        StatusCode::OK,
        Some(serde_json::json!({
            "token_endpoint": format!("{t}/oauth2/v2.0/token"),
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "jwks_uri": format!("{t}/discovery/v2.0/keys"),
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "issuer": format!("{t}/v2.0"),
            "request_uri_parameter_supported": false,
            "authorization_endpoint": format!("{t}/oauth2/v2.0/authorize"),
            "device_authorization_endpoint": format!("{t}/oauth2/v2.0/devicecode"),
            "end_session_endpoint": format!("{t}/oauth2/v2.0/logout"),
        })),
        &[],
    )
}

/// An Entra path asked at a Resource Manager host, or an ARM path at an authority host: each host
/// serves only its own API (404, as a host answers a path it does not route).
fn wrong_host(at: Option<(&arm::clouds::Cloud, arm::clouds::Role)>, target: &path::Target) -> Option<Response> {
    let (_, role) = at?;
    let entra = matches!(
        target,
        path::Target::Token { .. } | path::Target::OpenIdConfiguration { .. } | path::Target::InstanceDiscovery
    );
    (entra != (role == arm::clouds::Role::Authority)).then(|| json_response(StatusCode::NOT_FOUND, None, &[]))
}

/// Entra's instance discovery (`GET /common/discovery/instance?api-version=1.1&authorization_endpoint=
/// https://<host>/<tenant>/oauth2/v2.0/authorize`): where the tenant's OpenID metadata is, and each
/// cloud's authority host with its aliases, the shape MSAL reads (MSAL for Go v1.7.2
/// `apps/internal/oauth/ops/authority/authority.go` `InstanceDiscoveryResponse`,
/// `InstanceDiscoveryMetadata`; asked by its token cache, `base/storage/storage.go`). The
/// authorization endpoint must be on a cloud's authority host; another is `invalid_instance`, which
/// MSAL reports as "the authority host is not valid".
fn instance_discovery(method: &Method, uri: &Uri) -> Response {
    if *method != Method::GET {
        return json_response(StatusCode::METHOD_NOT_ALLOWED, None, &[]);
    }
    let query: HashMap<String, String> =
        serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let endpoint = query.get("authorization_endpoint").and_then(|e| reqwest::Url::parse(e).ok());
    let known = endpoint.as_ref().and_then(|e| {
        let host = e.host_str()?;
        let (cloud, role) = arm::clouds::by_host(host)?;
        let tenant = e.path_segments()?.next()?.to_string();
        (role == arm::clouds::Role::Authority).then_some((cloud, tenant))
    });
    let Some((cloud, tenant)) = known else {
        return json_response(
            StatusCode::BAD_REQUEST,
            Some(serde_json::json!({"error": "invalid_instance",
                "error_description": "AADSTS50049: Unknown or invalid instance."})),
            &[],
        );
    };
    let metadata: Vec<serde_json::Value> = arm::clouds::CLOUDS
        .iter()
        .map(|c| {
            serde_json::json!({"preferred_network": c.authority, "preferred_cache": c.authority,
                "aliases": [c.authority]})
        })
        .collect();
    json_response(
        StatusCode::OK,
        Some(serde_json::json!({
            "tenant_discovery_endpoint":
                format!("https://{}/{tenant}/v2.0/.well-known/openid-configuration", cloud.authority),
            "api-version": "1.1",
            "metadata": metadata,
        })),
        &[],
    )
}

fn token(sim: &Sim, method: &Method, tenant: &str, body: &[u8], at: Option<&'static arm::clouds::Cloud>) -> Response {
    if *method != Method::POST {
        return json_response(StatusCode::METHOD_NOT_ALLOWED, None, &[]);
    }
    let form: HashMap<String, String> = serde_urlencoded::from_bytes(body).unwrap_or_default();
    let config = sim.world.config();
    let now = sim.world.clock.now();
    let result = {
        let store = sim.arm.store.lock().expect("store lock");
        let mut tokens = sim.arm.tokens.lock().expect("tokens lock");
        auth::token(&mut tokens, &store, &config, tenant, &form, now, at)
    };
    match result {
        Ok(v) => json_response(StatusCode::OK, Some(v), &[]),
        Err(e) => json_response(e.status, Some(e.body), &[]),
    }
}

async fn serve_arm(
    sim: &Arc<Sim>,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
    target: path::Target,
    at: Option<&'static arm::clouds::Cloud>,
) -> Response {
    let config = sim.world.config();
    let now = sim.world.clock.now();
    let caller = {
        let tokens = sim.arm.tokens.lock().expect("tokens lock");
        auth::bearer(&tokens, &config, arm::authorization(headers), now, at)
    };
    let caller = match caller {
        Ok(c) => c,
        Err(e) => return error_response(&sim.world, e),
    };
    if sim.world.chance(config.faults.error_rate) {
        sim.world.count(|c| c.injected_errors += 1);
        let status = StatusCode::from_u16(config.faults.error_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let code = if status == StatusCode::SERVICE_UNAVAILABLE { "ServiceUnavailable" } else { "InternalServerError" };
        return error_response(
            &sim.world,
            ArmError::new(
                status,
                code,
                "Encountered internal server error (injected by xcsp-sim). Diagnostic information: timestamp ''.",
            ),
        );
    }
    let drop = sim.world.chance(config.faults.drop_rate);
    if drop && !config.faults.drop_after_apply {
        return crate::world::dropped(&sim.world);
    }
    let mut extra: Vec<(String, String)> = Vec::new();
    if let Some(sub) = arm::subscription_of(&target) {
        match sim.arm.throttle(&config, &sub, &caller.client_id, &method, now) {
            Ok(Some((class, remaining))) => {
                extra.push((format!("x-ms-ratelimit-remaining-subscription-{}", class.name()), remaining.to_string()))
            }
            Ok(None) => {}
            Err(e) => return error_response(&sim.world, e),
        }
    }
    if config.latency.request_latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(config.latency.request_latency_ms)).await;
    }
    let query: HashMap<String, String> =
        serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let ctx = Ctx { method: &method, base: base_url(headers), query, caller, now, world: &sim.world, config, body };
    let client_id = ctx.caller.client_id.clone();
    let need = arm::authz::required(&method, &target, body);
    let allowed = {
        let store = sim.arm.store.lock().expect("store lock");
        arm::authz::authorize(&store, &ctx.config, &client_id, &need)
    };
    let result = allowed.and_then(|()| sim.arm.dispatch(&target, &ctx));
    record_access(sim, &client_id, result.as_ref().err());
    if method == Method::DELETE
        && let Ok(r) = &result
        && (r.status == StatusCode::OK || r.status == StatusCode::ACCEPTED)
    {
        sim.world.journal("azure", "DELETE", uri.path());
    }
    if drop {
        return crate::world::dropped(&sim.world);
    }
    match result {
        Ok(Reply { status, mut body, mut headers }) => {
            headers.extend(extra);
            if let Some(b) = body.as_mut() {
                negotiated_status(sim, b);
            }
            json_response(status, body, &headers)
        }
        Err(mut e) => {
            e.headers.extend(extra);
            error_response(&sim.world, e)
        }
    }
}

/// Notes how Resource Manager judged a caller's access: refused (401, 403) or allowed (any answer
/// that is not a refusal of access; a 404 of a GET before a create is the call's, not the caller's).
fn record_access(sim: &Sim, client_id: &str, error: Option<&ArmError>) {
    let judged = match error {
        Some(e) if e.status == StatusCode::FORBIDDEN || e.status == StatusCode::UNAUTHORIZED => {
            Some((e.code.clone(), e.message.clone()))
        }
        _ => None,
    };
    sim.arm.access.lock().expect("access lock").insert(client_id.to_string(), judged);
}

/// Connections show the status the world negotiated with the AWS side (`Connected` when their
/// tunnel is up), in a GET of one connection or in a list.
fn negotiated_status(sim: &Sim, body: &mut serde_json::Value) {
    let is_connection = |v: &serde_json::Value| {
        v["type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Network/connections"))
    };
    let mut targets: Vec<&mut serde_json::Value> = Vec::new();
    if is_connection(body) {
        targets.push(body);
    } else if let Some(items) = body.get_mut("value").and_then(|v| v.as_array_mut()) {
        targets.extend(items.iter_mut().filter(|v| is_connection(v)));
    }
    if targets.is_empty() {
        return;
    }
    let status = crate::link::tunnels::azure_status(&sim.clouds());
    for t in targets {
        let id = t["id"].as_str().unwrap_or_default().to_ascii_lowercase();
        if let Some(s) = status.get(&id) {
            t["properties"]["connectionStatus"] = serde_json::json!(s);
        } else if t["properties"].get("connectionStatus").is_some() {
            t["properties"]["connectionStatus"] = serde_json::json!("NotConnected");
        }
    }
}

/// A sim serving on a loopback port, on a thread of its own (usable from sync and async code):
/// ARM, EC2 and the admin API on plain HTTP; and, when started with one, the world's cluster.
pub struct SimServer {
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub base_url: String,
    pub addr: SocketAddr,
    pub sim: Arc<Sim>,
    /// The world's cluster and the runtime its stand-ins run on.
    cluster: Option<Cluster>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The upstream cluster of a [`SimServer`]. Its programs die with the thread that started them
/// ([`crate::child::die_with_parent`]), so one thread of its own starts them and lives as long
/// as the cluster, running the stand-ins ([`crate::kube::bridge::Bridge::run`]) on its runtime.
struct Cluster {
    cluster: Arc<crate::cluster::UpstreamCluster>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The thread ends, its programs with it; no wait: a drop inside an async test must not
        // block.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Errors starting a sim.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot bind 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the world's cluster: {0}")]
    Cluster(String),
}

impl SimServer {
    /// Starts a sim on `127.0.0.1:port` (0 = a free port), in a background thread, without a
    /// cluster.
    pub fn start(config: SimConfig, port: u16) -> Result<SimServer, StartError> {
        // The world's own HTTP clients (to moto, to the cluster) are reqwest's, which takes its TLS
        // from the process-wide provider: the product's module, as in the programs it serves.
        let _ = xcsp_crypto::install();
        let listener =
            std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|source| StartError::Bind { port, source })?;
        listener.set_nonblocking(true).map_err(|source| StartError::Bind { port, source })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind { port, source })?;
        let sim = Arc::new(Sim::new(config));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("xcsp-sim")
            .enable_all()
            .build()
            .map_err(StartError::Runtime)?;
        let app = router(sim.clone());
        let thread = std::thread::Builder::new()
            .name("xcsp-sim".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .into_future()
                        .await;
                });
            })
            .map_err(StartError::Runtime)?;
        Ok(SimServer {
            base_url: format!("http://{addr}"),
            addr,
            sim,
            cluster: None,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// Starts a sim as [`SimServer::start`] does, then the world's cluster: the upstream programs
    /// ([`crate::cluster::UpstreamCluster`]), OpenShift's objects installed in it for the world's
    /// `openshift` config, and the stand-ins ([`crate::kube::bridge::Bridge`]) running as its
    /// clients on a runtime of their own. Usable from sync and async code.
    /// The API server's service-account issuer is the cluster config's, else the OpenShift
    /// config's (`Authentication.spec.serviceAccountIssuer`).
    pub fn start_with_cluster(
        config: SimConfig,
        port: u16,
        mut cluster: crate::cluster::ClusterConfig,
    ) -> Result<SimServer, StartError> {
        if cluster.service_account_issuer.is_none() {
            cluster.service_account_issuer = config.openshift.as_ref().and_then(|o| o.service_account_issuer.clone());
        }
        // An OpenShift cluster with CAPZ deployed runs CAPZ's own manager, with the environment its
        // Deployment is given ([`crate::kube::openshift`]).
        if cluster.capz.is_none()
            && let Some(o) = config.openshift.as_ref().filter(|o| o.capz)
        {
            let env = o.capz_authority_host.iter().filter(|h| !h.is_empty());
            cluster.capz = Some(crate::cluster::Capz {
                env: env.map(|h| ("AZURE_AUTHORITY_HOST".to_string(), h.clone())).collect(),
            });
        }
        if let Some(o) = &config.openshift {
            cluster.no_capi = !o.feature_set.runs_capi();
        }
        let config_has_nodes = config.openshift.as_ref().is_some_and(|o| o.control_plane_nodes);
        let mut server = SimServer::start(config, port)?;
        server.sim.real_capz.store(cluster.capz.is_some(), std::sync::atomic::Ordering::SeqCst);
        let _ = server.sim.timing.set(cluster.timing.clone());
        type Started = (Arc<crate::cluster::UpstreamCluster>, Arc<crate::kube::bridge::Bridge>);
        let (ready, started) = std::sync::mpsc::channel::<Result<Started, String>>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let sim = server.sim.clone();
        let sim_for_runner = server.sim.clone();
        let real_capz_at_start = cluster.capz.is_some();
        let timing = cluster.timing.clone();
        // Pods run only once bound where the world has Nodes to bind them to.
        let has_nodes = config_has_nodes;
        std::thread::Builder::new()
            .name("xcsp-cluster".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("xcsp-cluster")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(format!("cannot start its runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let started = async {
                        let cluster =
                            crate::cluster::UpstreamCluster::start(cluster).await.map_err(|e| e.to_string())?;
                        let client = cluster.client().await.map_err(|e| e.to_string())?;
                        let bootstrapper = cluster
                            .client_as(
                                crate::kube::boot::NODE_BOOTSTRAPPER,
                                crate::kube::boot::NODE_BOOTSTRAPPER_GROUPS,
                            )
                            .await
                            .map_err(|e| e.to_string())?;
                        let bridge = crate::kube::bridge::Bridge::install(
                            &sim.world,
                            client,
                            bootstrapper,
                            &cluster.ca_pem,
                            cluster.audit_log.clone(),
                        )
                        .await
                        .map_err(|e| format!("installing OpenShift's objects: {e}"))?;
                        Ok::<_, String>((Arc::new(cluster), bridge))
                    }
                    .await;
                    // Azure's host names over TLS, routed by the world's proxy.
                    let started = match started {
                        Ok((cluster, bridge)) => {
                            let (cert, key) = &cluster.clouds_tls;
                            match crate::front::start(router(sim.clone()), cert, key).await {
                                Ok(front) => {
                                    for host in crate::arm::clouds::host_names() {
                                        cluster.proxy.routes.add(host, 443, front);
                                    }
                                    Ok((cluster, bridge))
                                }
                                Err(e) => Err(format!("cannot serve Azure's host names over TLS: {e}")),
                            }
                        }
                        Err(e) => Err(e),
                    };
                    match started {
                        Ok((cluster, bridge)) => {
                            tokio::spawn(bridge.clone().run(sim));
                            // The pods of the upstream managers a Deployment asks for.
                            let for_runner = sim_for_runner.clone();
                            let runs_capz = real_capz_at_start;
                            let on_capz = Box::new(move |running: bool| {
                                for_runner.real_capz.store(runs_capz || running, std::sync::atomic::Ordering::SeqCst);
                            });
                            match cluster.client().await.map_err(|e| e.to_string()).and_then(|client| {
                                crate::kube::pods::Runner::new(&cluster, client, timing.clone(), on_capz, has_nodes)
                            }) {
                                Ok(runner) => {
                                    tokio::spawn(Arc::new(runner).run());
                                }
                                Err(e) => eprintln!("xcsp-sim: the pod runner does not run: {e}"),
                            }
                            let _ = ready.send(Ok((cluster.clone(), bridge)));
                            let _ = stopped.await;
                            drop(cluster);
                        }
                        Err(e) => {
                            let _ = ready.send(Err(e));
                        }
                    }
                });
                runtime.shutdown_background();
            })
            .map_err(StartError::Runtime)?;
        let (cluster, bridge) = started
            .recv()
            .unwrap_or_else(|_| Err("the thread starting the cluster ended".into()))
            .map_err(StartError::Cluster)?;
        let _ = server.sim.bridge.set(bridge);
        let _ = server.sim.kubeconfig.set(cluster.kubeconfig());
        server.cluster = Some(Cluster { cluster, stop: Some(stop) });
        Ok(server)
    }

    /// [`SimServer::start_with_cluster`] with the default cluster config, from async code: the
    /// blocking start runs on the runtime's blocking pool instead of holding its worker.
    pub async fn start_with_cluster_async(config: SimConfig) -> Result<SimServer, StartError> {
        tokio::task::spawn_blocking(move || SimServer::start_with_cluster(config, 0, Default::default()))
            .await
            .unwrap_or_else(|e| Err(StartError::Cluster(format!("the start's task failed: {e}"))))
    }

    /// The world's cluster, when the sim runs one.
    pub fn cluster(&self) -> Option<&crate::cluster::UpstreamCluster> {
        self.cluster.as_ref().map(|c| c.cluster.as_ref())
    }

    /// A kubeconfig for the world's cluster (its TLS endpoint and CA, the admin token), when the
    /// sim runs one.
    pub fn kubeconfig(&self) -> Option<String> {
        self.sim.kubeconfig.get().cloned()
    }

    /// A client of the world's cluster as its admin, when the sim runs one.
    pub async fn client(&self) -> Option<kube::Client> {
        self.cluster()?.client().await.ok()
    }

    /// Stops serving and waits for the server thread.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // Do not join here: a drop inside an async test must not block on open client connections.
    }
}

/// A request to a storage account's blob service ([`arm::blob::PATH`]`{account}/...`, the account's
/// `primaryEndpoints.blob`): the account must exist and the request carry its key's signature.
fn serve_blob(sim: &Sim, method: &Method, uri: &Uri, rest: &str, headers: &HeaderMap) -> Response {
    let config = sim.world.config();
    let now = sim.world.clock.now();
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let query: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let answer = |(status, hs, body): arm::blob::Answer| {
        let mut resp = (status, body).into_response();
        for (k, v) in hs {
            if let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) {
                resp.headers_mut().insert(k, v);
            }
        }
        if let Ok(v) = HeaderValue::try_from(uuid::Uuid::new_v4().to_string()) {
            resp.headers_mut().insert("x-ms-request-id", v);
        }
        resp
    };
    let Some((account, path)) = segs.split_first() else {
        return answer(arm::blob::error(
            StatusCode::BAD_REQUEST,
            "InvalidUri",
            "The requested URI does not represent any resource on the server.",
        ));
    };
    let mut store = sim.arm.store.lock().expect("store lock");
    store.settle(now);
    let Some(found) = store.storage_account_named(account).map(|r| r.id.clone()) else {
        return answer(arm::blob::error(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            "The specified resource does not exist.",
        ));
    };
    let key = arm::blob::account_key(&found);
    if !arm::blob::authorized(method, uri.path(), &query, headers, account, &key) {
        return answer(arm::blob::error(
            StatusCode::FORBIDDEN,
            "AuthenticationFailed",
            "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.",
        ));
    }
    let label = store.blob_account(&found).unwrap_or_default();
    // Counted by operation: a copy apart from the other writes.
    let operation =
        if headers.contains_key("x-ms-copy-source") { "Copy Blob".to_string() } else { format!("{method} blob") };
    sim.world.count(|c| *c.requests.entry(operation).or_default() += 1);
    answer(arm::blob::serve(&mut store.blobs, &label, method, path, &query, headers, now, config.duration_scale()))
}
