//! The admin API under `/_sim/`: reset, configuration (latency, faults, throttling), counters,
//! token log, resource dump, out-of-band changes for drift tests, the world clock, the journal of
//! deletions, and the cluster's side (kubeconfig, the API server's deletions, each Machine's join).

use crate::arm::path::{self, Target};
use crate::arm::store::{ResKind, Resource};
use crate::whole::Sim;
use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

type S = State<Arc<Sim>>;

pub fn router() -> Router<Arc<Sim>> {
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/reset", post(reset))
        .route("/config", get(config_get).patch(config_patch).put(config_put))
        .route("/counters", get(counters).delete(counters_reset))
        .route("/tokens", get(tokens))
        .route("/requests", get(requests))
        .route("/resources", get(resources))
        .route("/resource", get(resource_get).put(resource_put).patch(resource_patch).delete(resource_delete))
        .route("/operations", get(operations))
        .route("/clock/advance", post(clock_advance))
        .route("/tunnels", get(tunnels))
        .route("/aws/counters", get(aws_counters))
        .route("/journal", get(journal))
        .route("/kubeconfig", get(kubeconfig))
        .route("/kube/audit", get(kube_audit))
        .route("/machines", get(machines))
        .route("/timing", get(timing))
        .route("/resolvers", get(resolvers))
}

fn bad(msg: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": {"code": "BadAdminRequest", "message": msg.into()}})))
        .into_response()
}

/// Every AWS tunnel's negotiated status and, when DOWN, why.
async fn tunnels(State(sim): S) -> Json<Value> {
    Json(json!({ "tunnels": crate::link::tunnels::verdicts(&sim.clouds()) }))
}

/// EC2 requests per action.
async fn aws_counters(State(sim): S) -> Json<Value> {
    Json(json!({ "requests": sim.aws.counts() }))
}

/// Deletions across ARM and Kubernetes, in order.
async fn journal(State(sim): S) -> Json<Value> {
    Json(json!({ "entries": sim.world.journal_entries() }))
}

/// A kubeconfig for the world's cluster (its CA and the admin token); 404 when it runs none.
async fn kubeconfig(State(sim): S) -> Response {
    match sim.kubeconfig.get() {
        Some(k) => ([(axum::http::header::CONTENT_TYPE, "application/yaml")], k.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The API server's deletions (its audit log), in the order it received them; empty when the
/// world runs no cluster.
async fn kube_audit(State(sim): S) -> Json<Value> {
    Json(json!({ "deletions": sim.bridge.get().map(|b| b.deletions()).unwrap_or_default() }))
}

/// Each Machine: where CAPZ holds it, and what CAPI needs before it matches a Node, as the
/// stand-ins' last pass found them; empty when the world runs no cluster.
async fn machines(State(sim): S) -> Json<Value> {
    Json(json!({ "machines": sim.bridge.get().map(|b| b.machines()).unwrap_or_default() }))
}

/// What bounds how soon the world's upstream controllers act, as the world started them (their
/// flags, in seconds), with the world's own: Entra's token lifetime and a VM's boot (the latency
/// profile's scale applied). `null` for a part the world does not run.
async fn timing(State(sim): S) -> Json<Value> {
    let config = sim.world.config();
    let scale = config.duration_scale();
    let (fastest, slowest) = crate::kube::boot::BOOT_SECS;
    let mut out = sim.timing.get().map(|t| t.to_json()).unwrap_or_else(|| json!({}));
    out["entra"] = json!({ "token_lifetime": config.token_lifetime_secs });
    out["boot"] = json!({ "min": fastest * scale, "max": slowest * scale });
    // A machine-config daemon's update of its machine (drain, write, reboot).
    let (fastest, slowest) = crate::kube::rollout::UPDATE_SECS;
    out["machine_config_update"] = json!({ "min": fastest * scale, "max": slowest * scale });
    // The slowest long-running operation a worker's VM takes to make (its NIC's PUT is synchronous).
    // The stand-ins (a VM's boot, its kubelet's status posts) look at the cluster once a pass.
    out["stand_ins"] = json!({ "pass": crate::kube::bridge::PASS.as_secs_f64() });
    out["arm"] = json!({ "vm_create_max": crate::arm::kinds::VM.put_secs.1 * scale });
    if !sim.real_capz.load(std::sync::atomic::Ordering::SeqCst) {
        out["capz"] = Value::Null;
    }
    Json(out)
}

/// Route 53 Resolver's inbound endpoints as a VM's DNS query meets them (`aws::resolver`).
async fn resolvers(State(sim): S) -> Json<Value> {
    let view = sim.aws.resolvers.lock().expect("resolvers lock").clone();
    Json(json!({ "resolvers": view }))
}

async fn reset(State(sim): S) -> StatusCode {
    sim.reset();
    StatusCode::NO_CONTENT
}

async fn config_get(State(sim): S) -> Json<Value> {
    Json(serde_json::to_value(sim.world.config()).expect("config serializes"))
}

/// JSON merge patch of the configuration, e.g. `{"latency": {"profile": "instant"}}`.
async fn config_patch(State(sim): S, Json(patch): Json<Value>) -> Response {
    match sim.world.patch_config(&patch) {
        Ok(c) => Json(serde_json::to_value(c).expect("config serializes")).into_response(),
        Err(e) => bad(e.to_string()),
    }
}

async fn config_put(State(sim): S, Json(v): Json<Value>) -> Response {
    match serde_json::from_value::<crate::world::SimConfig>(v) {
        Ok(c) => {
            sim.world.set_config(c.clone());
            Json(serde_json::to_value(c).expect("config serializes")).into_response()
        }
        Err(e) => bad(e.to_string()),
    }
}

async fn counters(State(sim): S) -> Json<Value> {
    Json(serde_json::to_value(sim.world.counters()).expect("counters serialize"))
}

async fn counters_reset(State(sim): S) -> StatusCode {
    sim.world.reset_counters();
    StatusCode::NO_CONTENT
}

/// The Azure requests the world saw, oldest first ([`crate::world::Counters::log`]).
async fn requests(State(sim): S) -> Json<Value> {
    Json(json!({ "requests": sim.world.requests() }))
}

async fn tokens(State(sim): S) -> Json<Value> {
    let t = sim.arm.tokens.lock().expect("tokens lock");
    Json(json!({ "requests": t.log }))
}

fn settle(sim: &Sim) {
    let now = sim.world.clock.now();
    sim.arm.store.lock().expect("store lock").settle(now);
}

/// Every resource as GET renders it, plus the emulator's view (kind, operation in flight).
async fn resources(State(sim): S) -> Json<Value> {
    settle(&sim);
    let store = sim.arm.store.lock().expect("store lock");
    let value: Vec<Value> = store
        .resources
        .values()
        .map(|r| json!({"id": r.id, "type": r.kind.arm_type(), "operation": r.op, "body": store.render(&r.id)}))
        .collect();
    Json(json!({ "value": value }))
}

#[derive(Deserialize)]
struct IdQuery {
    id: String,
}

async fn resource_get(State(sim): S, Query(q): Query<IdQuery>) -> Response {
    settle(&sim);
    let store = sim.arm.store.lock().expect("store lock");
    match store.get(&q.id) {
        Some(r) => Json(store.render(&r.id)).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Out-of-band create or replace: the body is stored as-is (no validation, no LRO), as if someone
/// changed the resource in the portal.
async fn resource_put(State(sim): S, Query(q): Query<IdQuery>, Json(body): Json<Value>) -> Response {
    let kind = match path::parse(&q.id) {
        Target::Resource { kind, .. } => ResKind::Typed(kind),
        Target::ResourceGroup { .. } => ResKind::ResourceGroup,
        Target::RoleAssignment { .. } => ResKind::RoleAssignment,
        _ => return bad(format!("'{}' is not the id of an emulated resource", q.id)),
    };
    if !body.is_object() {
        return bad("the body must be a JSON object");
    }
    let now = sim.world.clock.now();
    let mut store = sim.arm.store.lock().expect("store lock");
    let prev = store.get(&q.id).cloned();
    let seq = prev.as_ref().map(|p| p.seq).unwrap_or_else(|| store.next_seq());
    let name = q.id.rsplit('/').next().unwrap_or_default().to_string();
    store.insert(Resource {
        id: prev.as_ref().map(|p| p.id.clone()).unwrap_or(q.id.clone()),
        kind,
        name,
        body,
        created_at: prev.as_ref().map(|p| p.created_at).unwrap_or(now),
        changed_at: now,
        seq,
        op: None,
        secret: prev.and_then(|p| p.secret),
    });
    let out = store.render(&q.id);
    (StatusCode::OK, Json(out)).into_response()
}

/// Out-of-band JSON merge patch of a stored body, e.g. `{"tags": {"owner": null}}`.
async fn resource_patch(State(sim): S, Query(q): Query<IdQuery>, Json(patch): Json<Value>) -> Response {
    settle(&sim);
    let mut store = sim.arm.store.lock().expect("store lock");
    let Some(r) = store.get_mut(&q.id) else { return StatusCode::NOT_FOUND.into_response() };
    crate::world::merge_patch(&mut r.body, &patch);
    let id = r.id.clone();
    Json(store.render(&id)).into_response()
}

/// Out-of-band delete of a resource and everything under it.
async fn resource_delete(State(sim): S, Query(q): Query<IdQuery>) -> Response {
    let mut store = sim.arm.store.lock().expect("store lock");
    let removed = store.remove_tree(&q.id);
    if removed.is_empty() {
        StatusCode::NOT_FOUND.into_response()
    } else {
        Json(json!({"deleted": removed.iter().map(|r| r.id.clone()).collect::<Vec<_>>()})).into_response()
    }
}

async fn operations(State(sim): S) -> Json<Value> {
    settle(&sim);
    let store = sim.arm.store.lock().expect("store lock");
    let now = sim.world.clock.now();
    let value: Vec<Value> = store
        .ops
        .values()
        .map(|o| {
            json!({
                "id": o.id, "target": o.target, "action": format!("{:?}", o.action), "status": o.status.as_str(),
                "remaining_ms": o.completes_at.saturating_duration_since(now).as_millis() as u64,
            })
        })
        .collect();
    Json(json!({ "value": value }))
}

#[derive(Deserialize)]
struct Advance {
    seconds: f64,
}

/// Moves the world clock forward (e.g. past a 45 minute gateway in the realistic profile).
async fn clock_advance(State(sim): S, Json(a): Json<Advance>) -> Response {
    if !(a.seconds >= 0.0 && a.seconds.is_finite()) {
        return bad("seconds must be a non-negative number");
    }
    sim.world.clock.advance(Duration::from_secs_f64(a.seconds));
    settle(&sim);
    StatusCode::NO_CONTENT.into_response()
}
