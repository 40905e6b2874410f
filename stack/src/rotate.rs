//! `xcsp rotate-keys`: new pre-shared keys for a link's tunnels, one tunnel at a time, so the link
//! never has two tunnels down at once. For each key: replace it (`--replace` semantics: the AWS
//! tunnel and the Azure connection that use it take the new key in the same walk), then wait until
//! every tunnel of the link is up on both sides before the next; a tunnel that does not come back
//! stops the rotation with what is known. Every step is in state as apply records it, so an
//! interrupted rotation is finished by the next `xcsp apply` (the key in state is the one both
//! sides are given) or by running `rotate-keys` again. State also records the rotation itself
//! (`State::rotation`: when it started and the keys it has left), so a second `rotate-keys`
//! resumes it: a key already made by it is given to its tunnel and waited for, never replaced
//! twice, and the keys it had finished are left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use time::format_description::well_known::Rfc3339;
use xcsp_core::{Address, ResourceType};
use xcsp_engine::{Action, Adopt, Events};
use xcsp_plans::Loaded;
use xcsp_plans::plan;
use xcsp_state::Rotation;

use crate::backend::open;
use crate::keys::created;
use crate::run::{Walk, carry_out, reach, refresh};
use crate::{Approver, Stack, StackError, health};

pub struct Options {
    /// Only this link's keys (all IPsec links' otherwise).
    pub link: Option<String>,
    /// How long one tunnel may take to come back up.
    pub timeout: Duration,
}

/// `xcsp rotate-keys`: the keys rotated one at a time, once `approver` approves the rotation (a
/// plan replacing each key); `walk` stops it between keys and within one.
pub async fn rotate(s: &Stack, approver: &dyn Approver, opts: Options, walk: Walk) -> crate::Result<usize> {
    let l = &s.loaded;
    let (backend, _held, mut state) = open(s, "rotate-keys").await?;
    // A rotation under way resumes with the keys it has left (none left: it is over).
    let resumed = state.rotation.clone().map(|mut r| {
        r.keys.retain(|k| rotatable(l, &state, k));
        r
    });
    let rotation = match resumed.filter(|r| !r.keys.is_empty()) {
        Some(r) => {
            if let Some(link) = opts.link.as_ref().filter(|link| r.keys.iter().any(|k| k.name != **link)) {
                return Err(StackError::RotationUnderWay {
                    link: link.clone(),
                    keys: r.keys.iter().map(|k| k.to_string()).collect(),
                }
                .into());
            }
            s.say.progress(format_args!("Resuming the rotation started {}: {} keys left.", r.started, r.keys.len()));
            r
        }
        None => {
            let keys: Vec<Address> = l
                .graph
                .nodes()
                .filter(|n| n.address.rtype == ResourceType::PresharedKey)
                .filter(|n| opts.link.as_ref().is_none_or(|link| n.address.name == *link))
                .filter(|n| rotatable(l, &state, &n.address))
                .map(|n| n.address.clone())
                .collect();
            if keys.is_empty() {
                return Err(StackError::NoKeys { link: opts.link.clone() }.into());
            }
            Rotation { started: now(), keys, made: BTreeMap::new() }
        }
    };
    let keys = rotation.keys.clone();
    let (graph, providers) = reach(s, &state, false).await?;
    refresh(s, &providers, &mut state, Adopt::All, &Events::none()).await?;
    backend.write(&mut state).await?;
    // Nothing else may be pending: a rotation changes the keys and what uses them, no more. A key
    // this rotation made may not have reached its tunnel yet (the run stopped between the two):
    // giving it is the rotation's own work, finished below, and the only change let through.
    let fresh: Vec<&Address> = keys.iter().filter(|k| made_by(&state, &rotation, k)).collect();
    let pending: Vec<String> = plan::diff(&l.model.stack, &l.model.digest, &graph, &state.attributes())
        .changes
        .into_iter()
        .filter(|c| c.action != Action::NoOp && !only_takes_keys(&graph, c, &fresh))
        .map(|c| c.address.to_string())
        .collect();
    if !pending.is_empty() {
        return Err(StackError::Pending { pending }.into());
    }
    s.say.progress(format_args!("xcsp will replace {} pre-shared keys, one tunnel at a time:", keys.len()));
    for k in &keys {
        if fresh.contains(&k) {
            s.say.progress(format_args!(
                "  - {k} (already new: given to its tunnel and waited for, not replaced again)"
            ));
            continue;
        }
        let age =
            state.resources[k].attributes.get("created").and_then(|v| v.as_str()).unwrap_or("before xcsp recorded it");
        s.say.progress(format_args!("  - {k} (made {age})"));
    }
    // What is asked: each key replaced (and, in the runs, what takes it updated).
    let asked = plan::Plan {
        stack: l.model.stack.clone(),
        spec_digest: l.model.digest.clone(),
        changes: keys
            .iter()
            .map(|k| plan::Change {
                address: k.clone(),
                action: Action::Replace,
                before: None,
                after: None,
                replace_because: vec![("key".into(), "xcsp rotate-keys".into())],
            })
            .collect(),
    };
    approver.approve(&asked, "Do you want to rotate these keys?")?;
    // What is left of the rotation is in state before the first key changes, and after each.
    state.rotation = Some(rotation);
    backend.write(&mut state).await?;
    let cancel = walk.cancel.clone();
    for key in &keys {
        if *cancel.borrow() > 0 {
            return Err(
                StackError::RotationStopped { key: key.clone(), why: "interrupted before its turn".into() }.into()
            );
        }
        let started_key = Instant::now();
        // A key this rotation made already is given to what uses it; any other is replaced.
        let made_before = created(&state, key);
        let already = state.rotation.as_ref().is_some_and(|r| made_by(&state, r, key));
        let replace: BTreeMap<Address, String> = if already {
            BTreeMap::new()
        } else {
            [(key.clone(), "xcsp rotate-keys".to_string())].into_iter().collect()
        };
        let p = plan::diff_replacing(&l.model.stack, &l.model.digest, &graph, &state.attributes(), &replace);
        let summary = carry_out(s, &providers, &graph, &mut state, &backend, &p, walk.clone()).await?;
        // The key this run made is this rotation's, whether or not its tunnel took it.
        if let Some(made) = created(&state, key).filter(|c| Some(c) != made_before.as_ref()) {
            if let Some(r) = state.rotation.as_mut() {
                r.made.insert(key.clone(), made);
            }
            backend.write(&mut state).await?;
        }
        if !summary.succeeded() {
            for (_, _, error) in &summary.failed {
                s.say.diag(error.clone());
            }
            return Err(StackError::RotationStopped { key: key.clone(), why: "its change did not apply".into() }.into());
        }
        let changed: Vec<String> = summary.done.iter().filter(|(a, _)| a != key).map(|(a, _)| a.to_string()).collect();
        if changed.is_empty() {
            s.say.progress(format_args!("{key}: its tunnel has the new key already"));
        } else {
            s.say.progress(format_args!("{key}: new key given to {}", changed.join(", ")));
        }
        // The tunnel is back when every tunnel of its link is up on both sides again: only what
        // the tunnels' health is read from is polled.
        let polled =
            [ResourceType::AwsVpnConnection, ResourceType::AzureLocalNetworkGateway, ResourceType::AzureVpnConnection];
        loop {
            xcsp_engine::refresh_only(&providers, &l.model.stack, &mut state, &polled, Adopt::Known, &Events::none())
                .await?;
            let h = health::health(&l.model, &state);
            let link = h.links.iter().find(|x| x.name == key.name);
            if link.is_some_and(|x| x.conditions.iter().any(|c| c.kind == "TunnelEstablished" && c.status == "True")) {
                s.say.progress(format_args!(
                    "{key}: every tunnel of `{}` up on both sides after {:.1} s",
                    key.name,
                    started_key.elapsed().as_secs_f64()
                ));
                break;
            }
            if started_key.elapsed() > opts.timeout {
                let why = link
                    .and_then(|x| x.conditions.first())
                    .map_or("the link is not in the spec".to_string(), |c| c.message.clone());
                return Err(StackError::RotationStopped { key: key.clone(), why }.into());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        if let Some(r) = state.rotation.as_mut() {
            r.keys.retain(|k| k != key);
        }
        backend.write(&mut state).await?;
    }
    state.rotation = None;
    backend.write(&mut state).await?;
    Ok(keys.len())
}

/// A generated key of the spec that state records as made.
fn rotatable(l: &Loaded, state: &xcsp_state::State, key: &Address) -> bool {
    l.graph.get(key).is_some() && state.resources.get(key).is_some_and(|r| r.id.is_some())
}

fn now() -> String {
    time::OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default()
}

/// Whether the key state records is the one `rotation` made.
fn made_by(state: &xcsp_state::State, rotation: &Rotation, key: &Address) -> bool {
    rotation.made.get(key).is_some_and(|m| created(state, key).as_ref() == Some(m))
}

/// A change whose every differing attribute comes from one of `keys` (a key not yet given to
/// what uses it), and nothing else.
fn only_takes_keys(graph: &xcsp_plans::ResourceGraph, c: &plan::Change, keys: &[&Address]) -> bool {
    let (Some(node), Some(before), Some(after)) = (graph.get(&c.address), &c.before, &c.after) else {
        return false;
    };
    if c.action != Action::Update {
        return false;
    }
    let from_keys: BTreeSet<&str> = node
        .inputs
        .iter()
        .filter(|i| keys.contains(&&i.from))
        .map(|i| i.attribute.split('[').next().unwrap_or_default())
        .collect();
    // The attributes the planner finds different (`plan::compare`): wanted, and not what is
    // recorded; an unknown or a read-back-only value is no difference.
    let differing: Vec<&String> = after
        .iter()
        .filter(|(k, v)| !before.get(*k).is_some_and(|r| v.matches_recorded(r)) && !v.has_unknown())
        .map(|(k, _)| k)
        .collect();
    !differing.is_empty() && differing.iter().all(|k| from_keys.contains(k.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::overdue;
    use xcsp_core::Value;
    use xcsp_state::{ResourceState, State};

    /// The public example with `psk_rotation_days = 30` on its link.
    fn loaded() -> Loaded {
        let dir = tempfile::tempdir().unwrap();
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/public/pool.xcsp.hcl");
        let spec = std::fs::read_to_string(example).unwrap().replacen(
            "network \"link\" {",
            "network \"link\" {\n  psk_rotation_days = 30",
            1,
        );
        std::fs::write(dir.path().join("pool.xcsp.hcl"), spec).unwrap();
        xcsp_plans::load(dir.path(), &Default::default()).unwrap_or_else(|_| panic!("the spec loads"))
    }

    fn key(state: &mut State, i: usize, days_old: i64) {
        let made = time::OffsetDateTime::now_utc() - time::Duration::days(days_old);
        let made = made.format(&time::format_description::well_known::Rfc3339).unwrap();
        let attributes = [("created".to_string(), Value::string(made))].into_iter().collect();
        let a: Address = format!("xcsp_preshared_key.link[{i}]").parse().unwrap();
        state.resources.insert(a.clone(), ResourceState { id: Some(a.to_string()), attributes, dependencies: vec![] });
    }

    /// A resumed rotation lets through a change that gives a key to its tunnel, and nothing more.
    #[test]
    fn only_a_change_that_gives_a_key_to_its_tunnel_passes() {
        let l = loaded();
        let key: Address = "xcsp_preshared_key.link[0]".parse().unwrap();
        let attrs = |psk: &str, cidr: &str| -> xcsp_core::provider::Attributes {
            [("tunnel1_psk", Value::sensitive(Value::string(psk))), ("tunnel1_inside_cidr", Value::string(cidr))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect()
        };
        let change = |action, after: xcsp_core::provider::Attributes| plan::Change {
            address: "aws_vpn_connection.link[0]".parse().unwrap(),
            action,
            before: Some(attrs("old-key", "169.254.21.0/30")),
            after: Some(after),
            replace_because: vec![],
        };
        let new_key = change(Action::Update, attrs("new-key", "169.254.21.0/30"));
        assert!(only_takes_keys(&l.graph, &new_key, &[&key]));
        // Not a key this rotation made, or not the key the tunnel takes from: refused.
        assert!(!only_takes_keys(&l.graph, &new_key, &[]));
        let other: Address = "xcsp_preshared_key.link[3]".parse().unwrap();
        assert!(!only_takes_keys(&l.graph, &new_key, &[&other]));
        // A key and something else (a spec edit, drift): refused.
        let more = change(Action::Update, attrs("new-key", "169.254.21.8/30"));
        assert!(!only_takes_keys(&l.graph, &more, &[&key]));
        // Nothing different, or a replacement: not this rotation's to let through.
        assert!(!only_takes_keys(&l.graph, &change(Action::Update, attrs("old-key", "169.254.21.0/30")), &[&key]));
        assert!(!only_takes_keys(&l.graph, &change(Action::Replace, attrs("new-key", "169.254.21.0/30")), &[&key]));
    }

    #[test]
    fn one_key_per_link_is_due_the_oldest_and_the_plan_says_why() {
        let l = loaded();
        let mut state = State::new("demo-k8x2q");
        for (i, age) in [10, 45, 31, 29].into_iter().enumerate() {
            key(&mut state, i, age);
        }
        let due = overdue(&l, &state);
        assert_eq!(due.keys().map(|a| a.to_string()).collect::<Vec<_>>(), ["xcsp_preshared_key.link[1]"]);
        let why = &due[&"xcsp_preshared_key.link[1]".parse::<Address>().unwrap()];
        assert!(why.contains("psk_rotation_days = 30") && why.contains("1 more of this link"), "{why}");
        let p = plan::diff_replacing(&l.model.stack, &l.model.digest, &l.graph, &state.attributes(), &due);
        let shown = plan::render(&p);
        assert!(shown.contains("xcsp_preshared_key.link[1] must be replaced"), "{shown}");
        // Young keys are left alone.
        let mut young = State::new("demo-k8x2q");
        key(&mut young, 0, 29);
        assert!(overdue(&l, &young).is_empty());
    }
}
