//! One reconcile of an `XcspStack`: the spec loaded from the resource, refreshed, planned and
//! applied within the resource's policy (the same `xcsp_stack::run::apply` the command line runs,
//! with the policy as its approver), the pool tended, the stack's health read, and all of it
//! written to the resource's status, Events and the metrics. A resource being deleted with
//! `onDelete: Destroy` has its stack destroyed before its finalizer goes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::finalizer::{Event as Finalizing, finalizer};
use kube::{Api, Resource, ResourceExt};
use xcsp_core::SourceFile;
use xcsp_plans::VarInputs;
use xcsp_plans::plan::{Action as Change, Plan};
use xcsp_stack::run::{self, ApplyOptions, Walk};
use xcsp_stack::{Approver, Notice, RunOptions, Say, Source, Stack, StackError, StateSettings, cost, health};

use crate::metrics::{Metrics, StackLabels};
use crate::resource::{Condition, OnDelete, PlanSummary, Policy, XcspStack, XcspStackStatus};

/// The finalizer that lets a `Destroy` resource's stack go before the resource does.
pub const FINALIZER: &str = "xcsp.io/stack";

/// What every reconcile shares.
pub struct Context {
    pub client: kube::Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Where each resource's state lives when given: `<state_root>/<namespace>/<name>`; else its
    /// spec's `backend` block, else a Secret in its namespace.
    pub state_root: Option<std::path::PathBuf>,
    /// The lock holder the command line shows when the controller holds a stack's lock.
    pub identity: String,
    pub offline: bool,
    /// Counts SIGTERMs: a running apply stops starting operations at the first.
    pub cancel: tokio::sync::watch::Receiver<u32>,
    /// Reconciles that failed in a row, per resource (by UID), for the backoff.
    pub failures: Mutex<std::collections::BTreeMap<String, u32>>,
    /// Per resource (by UID), the generation its next reconcile is due for and when: a change
    /// that is not the spec's (the controller's own status write, the finalizer) starts none
    /// before then, whether the last one succeeded (the interval) or failed (the backoff).
    pub due: Mutex<std::collections::BTreeMap<String, (Option<i64>, Instant)>>,
}

/// Why a reconcile failed; the resource's status and Events say it in full.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Stack(String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(String),
}

fn key(o: &XcspStack) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

/// The resource itself, not its name: one deleted and made again is another.
fn uid(o: &XcspStack) -> String {
    o.metadata.uid.clone().unwrap_or_else(|| key(o))
}

/// The next reconcile of `o`'s generation is not before `after` from now.
fn due_in(ctx: &Context, o: &XcspStack, after: Duration) {
    ctx.due.lock().expect("not poisoned").insert(uid(o), (o.metadata.generation, Instant::now() + after));
}

fn labels(o: &XcspStack) -> StackLabels {
    StackLabels { namespace: o.namespace().unwrap_or_default(), name: o.name_any() }
}

/// A diagnostic as text, on lines (no colours, no box drawing): for a status message and an Event.
pub fn text_of(report: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    let _ = miette::NarratableReportHandler::new().render_report(&mut out, report);
    out.trim().to_string()
}

/// The digest that names a plan: its spec's digest and each change (address, action, and the
/// attributes an update or a replacement changes), so the same plan made again has the same
/// digest and any other plan has another.
pub fn digest(plan: &Plan) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(plan.spec_digest.as_bytes());
    for c in plan.changes.iter().filter(|c| c.action != Change::NoOp) {
        h.update(format!("\n{} {}", c.action.verb(), c.address).as_bytes());
        if let (Some(before), Some(after)) = (&c.before, &c.after) {
            for (k, v) in after {
                if !before.get(k).is_some_and(|r| v.matches_recorded(r)) && !v.has_unknown() {
                    h.update(format!(" {k}").as_bytes());
                }
            }
        }
    }
    format!("sha256:{}", &hex::encode(h.finalize())[..16])
}

/// The resource's policy as an approver; it keeps what it was shown for the status.
struct Policed {
    policy: Policy,
    approved: Option<String>,
    /// The digest of the plan last carried out: an approval is used once, so the same changes
    /// coming back (the same resource deleted again) wait for a new one.
    consumed: Option<String>,
    applied_spec: Option<String>,
    seen: Mutex<Option<(String, Plan)>>,
}

impl Approver for Policed {
    fn review(&self, plan: &Plan, _cost: &cost::Estimate) {
        *self.seen.lock().expect("not poisoned") = Some((digest(plan), plan.clone()));
    }

    fn approve(&self, plan: &Plan, _question: &str) -> Result<(), StackError> {
        let d = digest(plan);
        let named = self.approved.as_deref() == Some(d.as_str()) && self.consumed.as_deref() != Some(d.as_str());
        let ok = match self.policy {
            Policy::Apply => true,
            // Only drift: the clouds brought back to the spec last applied in full.
            Policy::Repair => named || self.applied_spec.as_deref() == Some(plan.spec_digest.as_str()),
            Policy::Plan => named,
        };
        if ok {
            Ok(())
        } else {
            let why = match self.policy {
                Policy::Repair => "the spec is not the one last applied (Repair applies only drift)",
                _ => "policy Plan applies only an approved plan",
            };
            Err(StackError::NotApproved { question: format!("{why}: set spec.approvedPlan to {d} to apply it") })
        }
    }
}

/// The stack a resource holds: its spec text and variables, its state under the controller's
/// root, what it says collected for the status (and logged).
fn stack_of(o: &XcspStack, ctx: &Context, said: Arc<Mutex<Vec<String>>>) -> Result<Stack, xcsp_plans::LoadFailure> {
    let name = format!("{}.xcsp.hcl", o.name_any());
    let files = vec![SourceFile::new(name, o.spec.source.clone())];
    let mut env: Vec<(String, String)> =
        std::env::vars().filter_map(|(k, v)| k.strip_prefix("XCSP_VAR_").map(|n| (n.to_string(), v))).collect();
    env.sort();
    let flags = o.spec.variables.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let inputs = VarInputs { env, flags, ..VarInputs::default() };
    let (source, loaded) = Source::from_files(files, inputs)?;
    let who = key(o);
    let say = Say::new(move |n| {
        let line = match n {
            Notice::Warning(t) => format!("warning: {t}"),
            Notice::Note(t) => format!("note: {t}"),
            Notice::Diagnostic(d) => format!("{}: {d}", d.code().map(|c| c.to_string()).unwrap_or_default()),
            Notice::Progress(t) => t,
        };
        tracing::info!(stack = %who, "{line}");
        said.lock().expect("not poisoned").push(line);
    });
    // State where `--state-dir` says, else where the spec's `backend` block says, else in the
    // resource's namespace in the cluster (a Secret and a Lease), where the command line finds it
    // with `--backend kubernetes --backend-config namespace=NS`.
    let holder = Some(format!("{} ({})", ctx.identity, key(o)));
    let namespace = o.namespace().unwrap_or_default();
    let state = match (&ctx.state_root, &loaded.model.backend) {
        (Some(root), _) => StateSettings {
            state_dir: Some(root.join(&namespace).join(o.name_any())),
            holder,
            ..StateSettings::default()
        },
        (None, Some(_)) => StateSettings { holder, ..StateSettings::default() },
        (None, None) => StateSettings {
            backend: Some("kubernetes".into()),
            backend_config: vec![format!("namespace={namespace}")],
            holder,
            ..StateSettings::default()
        },
    };
    // A reconcile does not wait out a MachineSet's Nodes: the next one reads them.
    let options = RunOptions { wait_for_nodes: false, offline: ctx.offline, ..RunOptions::default() };
    Ok(Stack::new(source, loaded, state, options, say))
}

/// The kube-runtime entry: the finalizer first, then the stack.
pub async fn reconcile(o: Arc<XcspStack>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<XcspStack> = Api::namespaced(ctx.client.clone(), &o.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, o, |event| async {
        match event {
            Finalizing::Apply(o) => keep(o, ctx.clone()).await,
            Finalizing::Cleanup(o) => cleanup(o, ctx.clone()).await,
        }
    })
    .await
    .map_err(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(e) | kube::runtime::finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer(other.to_string()),
    })
}

/// After a failed reconcile: again after 5 s, doubling each time it fails again, up to 5 minutes.
pub fn error_policy(o: Arc<XcspStack>, error: &Error, ctx: Arc<Context>) -> Action {
    let mut failures = ctx.failures.lock().expect("not poisoned");
    let n = failures.entry(uid(&o)).or_insert(0);
    *n += 1;
    let wait = Duration::from_secs(5u64.saturating_mul(1 << (*n - 1).min(6))).min(Duration::from_secs(300));
    // The status write of the failed reconcile is a change of the object too: it must not start
    // the next attempt before the backoff.
    due_in(&ctx, &o, wait);
    ctx.metrics.reconcile_errors.get_or_create(&labels(&o)).inc();
    tracing::warn!(stack = %key(&o), "reconcile failed ({n} in a row), again in {}s: {error}", wait.as_secs());
    Action::requeue(wait)
}

async fn publish(ctx: &Context, o: &XcspStack, type_: EventType, reason: &str, action: &str, note: String) {
    // An Event's note holds at most 1 kB.
    let note: String = note.chars().take(1000).collect();
    let event = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
    if let Err(e) = ctx.recorder.publish(&event, &o.object_ref(&())).await {
        tracing::warn!(stack = %key(o), "cannot publish an Event: {e}");
    }
}

/// What one reconcile did to the stack, for the status.
struct Outcome {
    reconciled: Condition,
    last_plan: Option<PlanSummary>,
    /// The plan carried out, when one changed something.
    last_applied: Option<PlanSummary>,
    applied_spec: Option<String>,
    failed: Option<String>,
    /// State just refreshed by an apply that changed nothing: the health is read from it rather
    /// than by a second refresh.
    fresh: Option<xcsp_state::State>,
}

fn now() -> String {
    Timestamp::now().to_string()
}

fn condition(type_: &str, status: &str, reason: &str, message: impl Into<String>) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: now(),
        observed_generation: None,
    }
}

/// Plans and, within the policy, applies.
async fn apply_within_policy(o: &XcspStack, ctx: &Context, s: &Stack) -> Outcome {
    let previous = o.status.clone().unwrap_or_default();
    let approver = Policed {
        policy: o.spec.policy,
        approved: o.spec.approved_plan.clone(),
        consumed: previous.last_applied.as_ref().map(|p| p.digest.clone()),
        applied_spec: previous.applied_spec.clone(),
        seen: Mutex::new(None),
    };
    let walk = Walk { cancel: ctx.cancel.clone(), ..Walk::quiet() };
    let result = run::apply(s, &approver, ApplyOptions { saved: None, replace: vec![], walk }).await;
    let seen = approver.seen.lock().expect("not poisoned").take();
    let summary_of = |outcome: &str| {
        seen.as_ref().map(|(d, p)| {
            let changes: Vec<String> = p
                .changes
                .iter()
                .filter(|c| c.action != Change::NoOp)
                .map(|c| format!("{} {}", c.action.verb(), c.address))
                .collect();
            PlanSummary { digest: d.clone(), summary: p.counts(), changes, outcome: outcome.into(), planned_at: now() }
        })
    };
    let spec_digest = s.loaded.model.digest.clone();
    match result {
        Ok(applied) => match applied.summary {
            None => Outcome {
                fresh: Some(applied.state),
                reconciled: condition("Reconciled", "True", "UpToDate", "the clouds match the spec"),
                last_plan: summary_of("nothing to do"),
                last_applied: previous.last_applied.clone(),
                applied_spec: Some(spec_digest),
                failed: None,
            },
            Some(done) if done.succeeded() => {
                let words = format!("applied: {} operations", done.done.len());
                let what: Vec<String> = done.done.iter().map(|(a, act)| format!("{} {a}", act.verb())).collect();
                publish(ctx, o, EventType::Normal, "Applied", "Apply", format!("{words}: {}", what.join(", "))).await;
                Outcome {
                    fresh: None,
                    reconciled: condition("Reconciled", "True", "Applied", words.clone()),
                    last_plan: summary_of(&words),
                    last_applied: summary_of(&words),
                    applied_spec: Some(spec_digest),
                    failed: None,
                }
            }
            Some(done) => {
                let failures: Vec<String> =
                    done.failed.iter().map(|(a, _, e)| format!("{a}: {}", text_of(e))).collect();
                let words = format!(
                    "{} failed, {} skipped because of them ({} done); every finished step is in state",
                    done.failed.len(),
                    done.skipped.len(),
                    done.done.len()
                );
                publish(
                    ctx,
                    o,
                    EventType::Warning,
                    "ApplyFailed",
                    "Apply",
                    format!("{words}: {}", failures.join("; ")),
                )
                .await;
                Outcome {
                    fresh: None,
                    reconciled: condition(
                        "Reconciled",
                        "False",
                        "ApplyFailed",
                        format!("{words}: {}", failures.join("; ")),
                    ),
                    last_plan: summary_of(&words),
                    last_applied: summary_of(&words),
                    applied_spec: previous.applied_spec,
                    failed: Some(words),
                }
            }
        },
        Err(e @ StackError::NotApproved { .. }) => {
            let message = text_of(&e);
            let digest = seen.as_ref().map(|(d, _)| d.clone()).unwrap_or_default();
            // Said once per plan, not once per reconcile.
            if previous.last_plan.as_ref().is_none_or(|p| p.digest != digest) {
                publish(ctx, o, EventType::Normal, "AwaitingApproval", "Plan", message.clone()).await;
            }
            Outcome {
                fresh: None,
                reconciled: condition("Reconciled", "False", "AwaitingApproval", message.clone()),
                last_plan: summary_of(&message),
                last_applied: previous.last_applied.clone(),
                applied_spec: previous.applied_spec,
                failed: None,
            }
        }
        Err(e) => {
            let message = text_of(&e);
            let reason = e.reason();
            publish(ctx, o, EventType::Warning, reason, "Reconcile", message.clone()).await;
            Outcome {
                fresh: None,
                reconciled: condition("Reconciled", "False", reason, message.clone()),
                last_plan: summary_of(&message),
                last_applied: previous.last_applied.clone(),
                applied_spec: previous.applied_spec,
                failed: Some(message),
            }
        }
    }
}

/// The conditions `xcsp status` gives, as `Kind.name.Type`, and `Ready`.
fn health_conditions(h: &health::Health) -> Vec<Condition> {
    let mut out = Vec::new();
    let ready = h.healthy() && h.pool_ready();
    let machines_ready = h.machines.iter().filter(|m| health::cause(h, m).is_none()).count();
    out.push(condition(
        "Ready",
        if ready { "True" } else { "False" },
        if ready {
            "Ready"
        } else if !h.healthy() {
            "TunnelsDown"
        } else if !h.leftover.is_empty() && machines_ready >= h.machines_wanted {
            "LeftoverNodes"
        } else {
            "MachinesNotReady"
        },
        format!(
            "{} of {} tunnels up; {machines_ready} of {} machines Ready Nodes",
            h.up,
            h.expected,
            h.machines_wanted.max(h.machines.len())
        ),
    ));
    for (kind, group) in [
        ("Link", &h.links),
        ("Identity", &h.identities),
        ("Pool", &h.pools),
        ("Cluster", &h.cluster),
        ("Provider", &h.providers),
    ] {
        for named in group {
            for c in &named.conditions {
                out.push(condition(
                    &format!("{kind}.{}.{}", named.name, c.kind),
                    c.status,
                    &c.reason,
                    c.message.clone(),
                ));
            }
        }
    }
    for m in &h.machines {
        let (status, reason, message) = match health::cause(h, m) {
            None => ("True", "NodeReady", "its Node is Ready".to_string()),
            Some(cause) => ("False", "NotReady", cause),
        };
        out.push(condition(&format!("Machine.{}.Ready", m.name), status, reason, message));
    }
    out
}

/// A condition keeps its transition time while its status stays.
fn carry_times(mut now: Vec<Condition>, before: &[Condition], generation: Option<i64>) -> Vec<Condition> {
    for c in &mut now {
        c.observed_generation = generation;
        if let Some(old) = before.iter().find(|b| b.type_ == c.type_ && b.status == c.status) {
            c.last_transition_time = old.last_transition_time.clone();
        }
    }
    now
}

/// A resource that is not being deleted: reconcile its stack.
async fn keep(o: Arc<XcspStack>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let api: Api<XcspStack> = Api::namespaced(ctx.client.clone(), &o.namespace().unwrap_or_default());
    let every = xcsp_stack::watch::interval(&o.spec.interval).unwrap_or(Duration::from_secs(300));
    let due = ctx.due.lock().expect("not poisoned").get(&uid(&o)).copied();
    if let Some((generation, at)) = due
        && generation == o.metadata.generation
    {
        let left = at.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            return Ok(Action::requeue(left));
        }
    }
    let previous = o.status.clone().unwrap_or_default();
    let said = Arc::new(Mutex::new(Vec::new()));
    let s = match stack_of(&o, &ctx, said.clone()) {
        Ok(s) => s,
        Err(e) => {
            // A spec mistake waits for the resource to change: trying again cannot fix it.
            let message = text_of(&e);
            publish(&ctx, &o, EventType::Warning, "InvalidSpec", "Load", message.clone()).await;
            let status = XcspStackStatus {
                observed_generation: o.metadata.generation,
                conditions: carry_times(
                    vec![condition("Reconciled", "False", "InvalidSpec", message)],
                    &previous.conditions,
                    o.metadata.generation,
                ),
                ..previous
            };
            // Said once: this generation is not tried again (an edit makes another).
            due_in(&ctx, &o, Duration::from_secs(365 * 24 * 3600));
            write_status(&api, &o, &status).await?;
            return Ok(Action::await_change());
        }
    };
    let outcome = apply_within_policy(&o, &ctx, &s).await;
    // The stack as it is now, as `xcsp status` reads it; and, where the policy lets the
    // controller change things, the pool tended (Nodes initialized, health checks held while the
    // link is down).
    let state = match outcome.fresh {
        Some(state) => Ok(state),
        None => run::refreshed(&s).await,
    };
    let (health_json, mut conditions, tunnels) = match state {
        Ok(state) => {
            let h = &run::health_of(&s, &state).await;
            if o.spec.policy != Policy::Plan {
                xcsp_stack::watch::tend_pool(&s, &state, h).await;
            }
            ctx.metrics.record(&labels(&o), h);
            (Some(health::to_json(h)), health_conditions(h), Some(format!("{}/{}", h.up, h.expected)))
        }
        Err(e) => {
            let message = text_of(&e);
            (
                previous.health.clone(),
                vec![condition("Ready", "Unknown", "StatusUnread", message)],
                previous.tunnels.clone(),
            )
        }
    };
    conditions.insert(1.min(conditions.len()), outcome.reconciled);
    let status = XcspStackStatus {
        observed_generation: o.metadata.generation,
        conditions: carry_times(conditions, &previous.conditions, o.metadata.generation),
        tunnels,
        last_plan: outcome.last_plan,
        last_applied: outcome.last_applied,
        applied_spec: outcome.applied_spec,
        health: health_json,
    };
    write_status(&api, &o, &status).await?;
    ctx.metrics.reconcile_seconds.get_or_create(&labels(&o)).observe(started.elapsed().as_secs_f64());
    if let Some(failed) = outcome.failed {
        return Err(Error::Stack(failed));
    }
    ctx.failures.lock().expect("not poisoned").remove(&uid(&o));
    due_in(&ctx, &o, every);
    Ok(Action::requeue(every))
}

async fn write_status(api: &Api<XcspStack>, o: &XcspStack, status: &XcspStackStatus) -> Result<(), Error> {
    let patch = serde_json::json!({ "status": status });
    api.patch_status(&o.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// A resource being deleted: with `onDelete: Destroy`, its stack goes first; the finalizer goes
/// only once the destroy succeeded.
async fn cleanup(o: Arc<XcspStack>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.metrics.forget(&labels(&o));
    ctx.due.lock().expect("not poisoned").remove(&uid(&o));
    if o.spec.on_delete == OnDelete::Orphan {
        publish(&ctx, &o, EventType::Normal, "Orphaned", "Delete", "the stack's resources and state are left".into())
            .await;
        return Ok(Action::await_change());
    }
    let said = Arc::new(Mutex::new(Vec::new()));
    let s = stack_of(&o, &ctx, said).map_err(|e| Error::Stack(text_of(&e)))?;
    let walk = Walk { cancel: ctx.cancel.clone(), ..Walk::quiet() };
    match run::destroy(&s, &xcsp_stack::Always, true, walk).await {
        Ok(summary) if summary.as_ref().is_none_or(|d| d.succeeded()) => {
            let n = summary.map_or(0, |d| d.done.len());
            publish(
                &ctx,
                &o,
                EventType::Normal,
                "Destroyed",
                "Destroy",
                format!("{n} resources destroyed; nothing tagged with the stack remains"),
            )
            .await;
            Ok(Action::await_change())
        }
        Ok(Some(done)) => {
            let words = format!("{} failed, {} skipped", done.failed.len(), done.skipped.len());
            publish(&ctx, &o, EventType::Warning, "DestroyFailed", "Destroy", words.clone()).await;
            Err(Error::Stack(words))
        }
        Ok(None) => Ok(Action::await_change()),
        Err(e) => {
            let message = text_of(&e);
            publish(&ctx, &o, EventType::Warning, "DestroyFailed", "Destroy", message.clone()).await;
            Err(Error::Stack(message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xcsp_core::Value;
    use xcsp_plans::plan::Change as Changed;

    fn plan(after: &str) -> Plan {
        let attrs = |v: &str| -> xcsp_core::provider::Attributes {
            [("tunnel1_inside_cidr".to_string(), Value::string(v))].into_iter().collect()
        };
        Plan {
            stack: "s".into(),
            spec_digest: "d1".into(),
            changes: vec![Changed {
                address: "aws_vpn_connection.link[0]".parse().unwrap(),
                action: Change::Update,
                before: Some(attrs("169.254.21.0/30")),
                after: Some(attrs(after)),
                replace_because: vec![],
            }],
        }
    }

    #[test]
    fn a_plan_made_again_has_its_digest_and_another_plan_another() {
        assert_eq!(digest(&plan("169.254.22.0/30")), digest(&plan("169.254.22.0/30")));
        let mut other = plan("169.254.22.0/30");
        other.spec_digest = "d2".into();
        assert_ne!(digest(&plan("169.254.22.0/30")), digest(&other));
        other = plan("169.254.22.0/30");
        other.changes[0].action = Change::Replace;
        assert_ne!(digest(&plan("169.254.22.0/30")), digest(&other));
    }

    #[test]
    fn each_policy_approves_what_it_says() {
        let p = plan("169.254.22.0/30");
        let d = digest(&p);
        let policed = |policy, approved: Option<&str>, applied: Option<&str>| Policed {
            policy,
            approved: approved.map(String::from),
            consumed: None,
            applied_spec: applied.map(String::from),
            seen: Mutex::new(None),
        };
        assert!(policed(Policy::Apply, None, None).approve(&p, "q").is_ok());
        assert!(policed(Policy::Plan, None, Some("d1")).approve(&p, "q").is_err());
        assert!(policed(Policy::Plan, Some("sha256:other"), None).approve(&p, "q").is_err());
        assert!(policed(Policy::Plan, Some(&d), None).approve(&p, "q").is_ok());
        // Repair: drift of the spec last applied, or a plan someone approved.
        assert!(policed(Policy::Repair, None, Some("d1")).approve(&p, "q").is_ok());
        let refused = policed(Policy::Repair, None, Some("d0")).approve(&p, "q").unwrap_err();
        assert!(text_of(&refused).contains(&d), "{}", text_of(&refused));
        assert!(policed(Policy::Repair, Some(&d), Some("d0")).approve(&p, "q").is_ok());
        // An approval is used once: the same plan after it was carried out waits for another.
        let used = Policed { consumed: Some(d.clone()), ..policed(Policy::Plan, Some(&d), None) };
        assert!(used.approve(&p, "q").is_err());
    }

    #[test]
    fn a_refusal_reads_as_its_reason() {
        let locked = StackError::State(xcsp_state::StateError::Locked {
            id: "1".into(),
            holder: "someone".into(),
            process: "pid 1".into(),
            operation: "apply".into(),
            since: "now".into(),
        });
        assert_eq!(locked.reason(), "Locked");
        let policed = Policed {
            policy: Policy::Plan,
            approved: None,
            consumed: None,
            applied_spec: None,
            seen: Mutex::new(None),
        };
        assert_eq!(policed.approve(&plan("169.254.22.0/30"), "q").unwrap_err().reason(), "NotApproved");
    }
}
