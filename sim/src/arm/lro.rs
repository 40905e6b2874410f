//! Long-running operations: their records, starting one (its resource goes `Updating` or
//! `Deleting`, the gateways it writes are held), the Azure-AsyncOperation and Location headers of
//! the first answer with their Retry-After, the status and result endpoints a client polls, and
//! the settling of operations whose time has come, which moves the provisioning state to
//! `Succeeded` or `Failed` (done lazily on every request, no background task).

use super::error::ArmError;
use super::kinds;
pub use super::operation::{OpAction, OpStatus, Operation};
use super::store::{ResKind, Resource, Store};
use super::{Ctx, Reply};
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Creates an operation on `key`, marks the resource, and finishes it at once if its duration is 0.
#[allow(clippy::too_many_arguments)]
pub fn start_op(
    store: &mut Store,
    ctx: &Ctx,
    sub: &str,
    key: &str,
    action: OpAction,
    namespace: &str,
    location: &str,
    secs: (f64, f64),
    gateways: Vec<String>,
    arm_type: &str,
) -> Operation {
    let duration = ctx.world.lro_duration(secs.0, secs.1);
    let fail = ctx.world.with_config(|c| {
        let idx = c.faults.fail_lros.iter().position(|f| {
            f.count > 0
                && (f.resource_type.is_empty()
                    || arm_type.to_ascii_lowercase().contains(&f.resource_type.to_ascii_lowercase()))
        })?;
        let f = &mut c.faults.fail_lros[idx];
        f.count -= 1;
        let out = (f.code.clone(), f.message.clone());
        if f.count == 0 {
            c.faults.fail_lros.remove(idx);
        }
        Some(out)
    });
    let id = uuid::Uuid::new_v4().to_string();
    let (async_path, location_path) = if namespace == "Microsoft.Resources" {
        let p = format!("/subscriptions/{sub}/operationresults/{id}");
        (p.clone(), p)
    } else {
        let loc = if location.is_empty() { "global" } else { location };
        (
            format!("/subscriptions/{sub}/providers/{namespace}/locations/{loc}/operations/{id}"),
            format!("/subscriptions/{sub}/providers/{namespace}/locations/{loc}/operationResults/{id}"),
        )
    };
    let op = Operation {
        id: id.clone(),
        target: key.to_ascii_lowercase(),
        action,
        started: time::OffsetDateTime::now_utc(),
        completes_at: ctx.now + duration,
        status: OpStatus::InProgress,
        fail,
        gateways,
        async_path,
        location_path,
    };
    store.ops.insert(id.clone(), op.clone());
    if let Some(r) = store.get_mut(key) {
        r.op = Some(id.clone());
        set_provisioning_state(r, if action == OpAction::Delete { "Deleting" } else { "Updating" });
    }
    if duration.is_zero() {
        store.settle(ctx.now);
    }
    store.ops.get(&id).cloned().unwrap_or(op)
}

fn op_url(ctx: &Ctx, path: &str) -> String {
    let v = if ctx.api_version().is_empty() { "2024-03-01" } else { ctx.api_version() };
    format!("{}{path}?api-version={v}", ctx.base)
}

fn retry_headers(ctx: &Ctx, op: &Operation, reply: Reply) -> Reply {
    let remaining = op.completes_at.saturating_duration_since(ctx.now);
    let realistic = ctx.config.latency.profile == crate::world::Profile::Realistic;
    let every = poll_interval(remaining, realistic);
    reply
        .header("Retry-After", every.as_secs_f64().ceil().max(if realistic { 1.0 } else { 0.0 }).to_string())
        .header("retry-after-ms", every.as_millis().to_string())
}

/// Headers of an LRO's first response.
pub fn op_reply(ctx: &Ctx, op: &Operation, status: StatusCode, with_location: bool) -> Reply {
    // Microsoft.Resources (resource group deletes) answers 202 with a Location only: its one
    // operation URL answers 202 until done, never a status document.
    if op.async_path == op.location_path {
        return retry_headers(ctx, op, Reply::empty(status).header("Location", op_url(ctx, &op.location_path)));
    }
    let mut reply = Reply::empty(status).header("Azure-AsyncOperation", op_url(ctx, &op.async_path));
    if with_location {
        reply = reply.header("Location", op_url(ctx, &op.location_path));
    }
    retry_headers(ctx, op, reply)
}

/// `GET` on an operation's status (Azure-AsyncOperation) or result (Location) endpoint.
pub fn operation(store: &Store, ctx: &Ctx, id: &str, location_style: bool) -> Result<Reply, ArmError> {
    let Some(op) = store.ops.get(id) else {
        return Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "OperationNotFound",
            format!("The operation '{id}' was not found."),
        ));
    };
    if !location_style {
        let mut body = json!({
            "id": op_url(ctx, &op.async_path), "name": op.id, "status": op.status.as_str(),
            "startTime": op.started.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        });
        if let OpStatus::Failed { code, message } = &op.status {
            body["error"] = json!({"code": code, "message": message});
        }
        let reply = Reply::json(StatusCode::OK, body);
        return Ok(if op.status == OpStatus::InProgress { retry_headers(ctx, op, reply) } else { reply });
    }
    match &op.status {
        OpStatus::InProgress => Ok(retry_headers(
            ctx,
            op,
            Reply::empty(StatusCode::ACCEPTED).header("Location", op_url(ctx, &op.location_path)),
        )),
        OpStatus::Succeeded if op.action == OpAction::Delete => {
            Ok(Reply::empty(if op.location_path.contains("/operationresults/") {
                StatusCode::OK
            } else {
                StatusCode::NO_CONTENT
            }))
        }
        OpStatus::Succeeded => Ok(Reply::json(StatusCode::OK, store.render(&op.target))),
        OpStatus::Failed { code, message } => Err(ArmError::bad_request(code, message.clone())),
    }
}

/// 409 `AnotherOperationInProgress` if the gateway `gw` is held by an operation.
pub fn busy(store: &Store, ctx: &Ctx, gw: &str, id: &str) -> Result<(), ArmError> {
    if let Some(op) = store.gateway_busy(gw) {
        return Err(ArmError::conflict(
            "AnotherOperationInProgress",
            format!(
                "Operation on resource '{id}' failed: another operation on this or dependent resource is in progress. To retrieve status of the operation use uri: {}.",
                op_url(ctx, &op.async_path)
            ),
        ));
    }
    Ok(())
}

/// Polling interval to advertise for an operation due in `remaining`.
pub fn poll_interval(remaining: Duration, realistic: bool) -> Duration {
    let cap = if realistic { Duration::from_secs(10) } else { Duration::from_secs(1) };
    remaining.min(cap).max(Duration::from_millis(if realistic { 1000 } else { 20 }))
}

impl Store {
    /// Finishes every operation whose completion time has passed, in completion order.
    pub fn settle(&mut self, now: Instant) {
        let mut due: Vec<(Instant, String)> = self
            .ops
            .values()
            .filter(|o| o.status == OpStatus::InProgress && o.completes_at <= now)
            .map(|o| (o.completes_at, o.id.clone()))
            .collect();
        due.sort();
        for (_, id) in due {
            self.finish(&id);
        }
    }

    fn finish(&mut self, op_id: &str) {
        let Some(op) = self.ops.get(op_id).cloned() else { return };
        let status = match &op.fail {
            Some((code, message)) => OpStatus::Failed { code: code.clone(), message: message.clone() },
            None => OpStatus::Succeeded,
        };
        let owns = self.resources.get(&op.target).is_some_and(|r| r.op.as_deref() == Some(op_id));
        if owns {
            match (op.action, &status) {
                (OpAction::Delete, OpStatus::Succeeded) => {
                    for gone in self.remove_tree(&op.target) {
                        super::compute::after_delete(self, &gone);
                    }
                }
                (_, st) => {
                    let state = if *st == OpStatus::Succeeded { "Succeeded" } else { "Failed" };
                    let keys: Vec<String> = std::iter::once(op.target.clone())
                        .chain(self.descendants(&op.target).map(|(k, _)| k.clone()))
                        .collect();
                    for k in keys {
                        if let Some(r) = self.resources.get_mut(&k) {
                            if k == op.target || r.op.is_none() {
                                set_provisioning_state(r, state);
                            }
                            if k == op.target {
                                r.op = None;
                            }
                        }
                    }
                    if op.action == OpAction::Put && *st == OpStatus::Succeeded {
                        self.on_put_succeeded(&op.target);
                    }
                }
            }
        }
        if let Some(o) = self.ops.get_mut(op_id) {
            o.status = status;
        }
    }

    /// Effects of a finished create: a gateway's dynamic public IPs get their address.
    fn on_put_succeeded(&mut self, key: &str) {
        let Some(r) = self.resources.get(key) else { return };
        if !matches!(r.kind, ResKind::Typed(k) if std::ptr::eq(k, &kinds::VNG)) {
            return;
        }
        let pips: Vec<String> = r.body["properties"]["ipConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["properties"]["publicIPAddress"]["id"].as_str().map(str::to_ascii_lowercase))
            .collect();
        for p in pips {
            let needs = self.resources.get(&p).is_some_and(|r| r.body["properties"].get("ipAddress").is_none());
            if needs {
                let ip = self.next_public_ip();
                if let Some(r) = self.resources.get_mut(&p) {
                    r.body["properties"]["ipAddress"] = json!(ip);
                }
            }
        }
    }

    /// In-flight operations holding the gateway `gw_key`.
    pub fn gateway_busy(&self, gw_key: &str) -> Option<&Operation> {
        self.ops.values().find(|o| o.status == OpStatus::InProgress && o.gateways.iter().any(|g| g == gw_key))
    }
}

pub fn set_provisioning_state(r: &mut Resource, state: &str) {
    if let ResKind::Typed(k) = r.kind
        && !k.provisioning_state
    {
        return;
    }
    if let Some(p) = r.body.get_mut("properties").and_then(Value::as_object_mut) {
        p.insert("provisioningState".into(), json!(state));
    }
}
