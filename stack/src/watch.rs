//! `xcsp watch`: refresh every interval and, when the clouds have moved away from the spec (a
//! VPN connection deleted out of band, a rule revoked, a setting changed by hand), plan the
//! repair and, with `--auto-approve`, apply it: the same engine, lock and state as `apply`. The
//! lock is held for one cycle at a time, so other commands can run between cycles. Each cycle
//! says one line (tunnels up, what changed, what was done); a cycle that cannot finish (the lock
//! held by another command, a cloud call failing) says why and the next one tries again; Ctrl-C
//! ends the watch after the cycle in progress, exit 0.

use std::time::{Duration, Instant};

use xcsp_engine::{Action, Adopt, Events, Summary};
use xcsp_plans::plan;

use crate::backend::{backend, locked};
use crate::run::{Walk, carry_out, in_reach, reach, refresh};
use crate::{Approver, Stack, StackError, health};

/// `30s`, `2m`, `1h` or plain seconds.
pub fn interval(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.trim().char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.trim().split_at(i),
        None => (text.trim(), "s"),
    };
    let n: u64 = number.parse().map_err(|_| format!("`{text}` is not a duration such as 30s, 2m or 1h"))?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => return Err(format!("`{text}` is not a duration such as 30s, 2m or 1h")),
    }
    .ok_or_else(|| format!("`{text}` is longer than any interval xcsp waits"))?;
    if secs == 0 {
        return Err("the interval must be at least one second".into());
    }
    Ok(Duration::from_secs(secs))
}

fn now() -> String {
    let t = time::OffsetDateTime::now_utc();
    format!("{:02}:{:02}:{:02}Z", t.hour(), t.minute(), t.second())
}

/// With the link down (no tunnel up), the pool's health checks are held (paused, as Cluster API
/// pauses an object); back up, released once the Nodes are Ready again (xcsp_kube::health_check).
async fn hold_health_checks(
    s: &Stack,
    found: &crate::cluster::Kubeconfig,
    state: &xcsp_state::State,
    sets: &[(String, String)],
    h: &health::Health,
) {
    let checks: Vec<(String, String)> = state
        .resources
        .iter()
        .filter(|(a, _)| a.rtype == xcsp_core::ResourceType::K8sMachineHealthCheck)
        .filter_map(|(_, r)| r.id.as_deref()?.split_once('/').map(|(ns, n)| (ns.to_string(), n.to_string())))
        .collect();
    if checks.is_empty() || h.expected == 0 {
        return;
    }
    use xcsp_kube::health_check::{Change, Link, hold};
    let config = found.client_config();
    let link = if h.up == 0 {
        Link::Down
    } else {
        // Unread machines are not Ready ones: the holds stay as they are until they can be read.
        let machines = match xcsp_kube::pool::machines(&config, sets, &[]).await {
            Ok((m, _)) => m,
            Err(e) => {
                s.say.progress(format_args!(
                    "{} cannot read the pool's machines ({e}): health checks left as they are",
                    now()
                ));
                return;
            }
        };
        Link::Up { nodes_ready: machines.iter().all(|m| m.node.as_ref().is_some_and(|n| n.ready == "True")) }
    };
    match hold(&config, &checks, link).await {
        Ok(changes) => {
            for c in changes {
                match c {
                    Change::Held(name) => s.say.progress(format_args!(
                        "{} the link is down: health check {name} held (paused) so that it deletes no machine for it",
                        now()
                    )),
                    Change::Released(name) => {
                        s.say.progress(format_args!("{} the link is back: health check {name} released", now()))
                    }
                }
            }
        }
        Err(e) => s.say.progress(format_args!("{} cannot hold or release the pool's health checks: {e}", now())),
    }
}

/// `xcsp watch`: a cycle every `every` until `walk.cancel` says stop. With `repair`, drift is
/// planned and, if `approver` approves, carried out, and the pool's Nodes and health checks are
/// looked after; without it, drift is only said.
pub async fn watch(s: &Stack, approver: &dyn Approver, repair: bool, every: Duration, walk: Walk) -> crate::Result<()> {
    let cancel = walk.cancel.clone();
    s.say.progress(format_args!(
        "Watching stack `{}` every {}s ({}); Ctrl-C stops.",
        s.name(),
        every.as_secs(),
        if repair { "repairs are applied" } else { "repairs are only shown: --auto-approve applies them" }
    ));
    // The backend and the providers (credential chains, token caches, clients) are made once;
    // each cycle takes the lock, refreshes and, if asked, repairs. A spec or a configuration that
    // cannot work stops the watch here; what can pass (a lock another command holds, a cloud
    // that fails a call) is said, and the next cycle tries again.
    let backend = backend(s).await?;
    let providers = loop {
        let attempt = async {
            let (_held, state) = locked(s, &backend, "watch").await?;
            reach(s, &state, repair).await.map(|(_, p)| p)
        };
        match attempt.await {
            Ok(p) => break p,
            Err(e) if passing(&e) => {
                s.say.progress(format_args!(
                    "{} cannot start a cycle: {}; trying again in {}s",
                    now(),
                    said(&e),
                    every.as_secs()
                ));
                if stopped_during(s, every, &cancel).await {
                    return Ok(());
                }
            }
            Err(e) => return Err(e),
        }
    };
    loop {
        let started = Instant::now();
        if let Err(e) = cycle(s, &backend, &providers, approver, repair, walk.clone(), started).await {
            s.say.progress(format_args!(
                "{} this cycle did not finish: {}; trying again in {}s",
                now(),
                said(&e),
                every.as_secs()
            ));
        }
        if stopped_during(s, every.saturating_sub(started.elapsed()), &cancel).await {
            return Ok(());
        }
    }
}

/// Sleeps `wait`, or less if Ctrl-C comes; whether it came (and the watch stops).
async fn stopped_during(s: &Stack, wait: Duration, cancel: &tokio::sync::watch::Receiver<u32>) -> bool {
    let mut cancel = cancel.clone();
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        _ = cancel.changed() => {}
    }
    if *cancel.borrow() > 0 {
        s.say.progress(format_args!("{} stopped", now()));
        return true;
    }
    false
}

/// An error a later cycle may not meet: the state's lock held by another command, a cloud's call
/// failing. A spec or configuration error is not.
fn passing(e: &StackError) -> bool {
    matches!(e, StackError::State(xcsp_state::StateError::Locked { .. }) | StackError::Provider(_))
}

/// An error on one line: its message, and its help when it has one.
fn said(e: &StackError) -> String {
    use miette::Diagnostic;
    let help = e.help().map(|h| format!(" ({h})")).unwrap_or_default();
    format!("{e}{help}").replace('\n', " ")
}

/// Looks after the pool between applies: machines CAPI made since (a scale-up, a remediation)
/// register tainted until someone initializes their Nodes (xcsp_kube::nodes), as apply does;
/// with the link down the pool's health checks are held, and released once it is back.
pub async fn tend_pool(s: &Stack, state: &xcsp_state::State, h: &health::Health) {
    let sets = crate::run::machine_sets(state);
    if sets.is_empty() {
        return;
    }
    let Ok(found) = s.cluster() else { return };
    match xcsp_kube::nodes::initialize_in(&found.client_config(), &sets).await {
        Ok(done) => {
            for n in done.lifted {
                s.say.progress(format_args!("{} Node {n}: removed {}", now(), xcsp_kube::nodes::UNINITIALIZED));
            }
        }
        Err(e) => s.say.progress(format_args!("{} cannot make the pool's Nodes schedulable: {e}", now())),
    }
    hold_health_checks(s, &found, state, &sets, h).await;
}

/// What one cycle found and did.
pub struct Cycle {
    pub health: health::Health,
    /// The changes the spec needs (drift), as `action address`.
    pub changes: Vec<String>,
    /// The repair's summary, when one was carried out.
    pub repaired: Option<Summary>,
}

/// One cycle: lock, refresh, save, plan and, with `repair` and the approver's yes, repair.
pub async fn cycle(
    s: &Stack,
    backend: &std::sync::Arc<dyn xcsp_state::backend::Backend>,
    providers: &xcsp_engine::Providers,
    approver: &dyn Approver,
    repair: bool,
    walk: Walk,
    started: Instant,
) -> crate::Result<Cycle> {
    let l = &s.loaded;
    let (_held, mut state) = locked(s, backend, "watch").await?;
    let graph = in_reach(s, &state);
    refresh(s, providers, &mut state, Adopt::All, &Events::none()).await?;
    backend.write(&mut state).await?;
    let p = plan::diff(&l.model.stack, &l.model.digest, &graph, &state.attributes());
    let h = health::health(&l.model, &state);
    let changes: Vec<String> = p
        .changes
        .iter()
        .filter(|c| c.action != Action::NoOp)
        .map(|c| format!("{} {}", c.action.words(), c.address))
        .collect();
    let tunnels = format!("{} of {} tunnels up", h.up, h.expected);
    if repair {
        tend_pool(s, &state, &h).await;
    }
    // A tunnel down with nothing to change is an outage on the path or a cloud's side, not
    // drift: it is named with both clouds' view, for someone to look at.
    for t in h.tunnels.iter().filter(|t| !t.up) {
        s.say.progress(format_args!(
            "{} down: {} ({}): AWS {} ({}), Azure {}",
            now(),
            t.tunnel,
            t.outside_ip,
            t.aws_status,
            t.aws_detail,
            t.azure_status
        ));
    }
    let mut repaired = None;
    if changes.is_empty() {
        let outage = if h.up < h.expected { ", nothing in the spec to change" } else { "" };
        s.say.progress(format_args!("{} {tunnels}; no drift{outage}", now()));
    } else if !repair {
        s.say.progress(format_args!("{} {tunnels}; drift, not repaired: {}", now(), changes.join(", ")));
    } else {
        match approver.approve(&p, "Do you want to repair this drift?") {
            Err(StackError::NotApproved { .. }) => {
                s.say.progress(format_args!("{} {tunnels}; drift, not approved: {}", now(), changes.join(", ")));
            }
            Err(e) => return Err(e),
            Ok(()) => {
                s.say.progress(format_args!("{} {tunnels}; repairing: {}", now(), changes.join(", ")));
                let summary = carry_out(s, providers, &graph, &mut state, backend, &p, walk).await?;
                if summary.succeeded() {
                    s.say.progress(format_args!("{} repaired in {:.1} s", now(), started.elapsed().as_secs_f64()));
                } else {
                    for (_, _, error) in &summary.failed {
                        s.say.diag(error.clone());
                    }
                    s.say.progress(format_args!("{} the repair did not finish; trying again next cycle", now()));
                }
                repaired = Some(summary);
            }
        }
    }
    Ok(Cycle { health: h, changes, repaired })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_as_people_write_them() {
        assert_eq!(interval("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(interval("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(interval("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(interval("45"), Ok(Duration::from_secs(45)));
        assert!(interval("0s").is_err() && interval("ten").is_err() && interval("5d").is_err());
    }
}
