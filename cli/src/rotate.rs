//! `xcsp rotate-keys`: new pre-shared keys for a link's tunnels, one tunnel at a time, so the link
//! never has two tunnels down at once. For each key: replace it (`--replace` semantics: the AWS
//! tunnel and the Azure connection that use it take the new key in the same walk), then wait until
//! every tunnel of the link is up on both sides before the next; a tunnel that does not come back
//! stops the rotation with what is known. Every step is in state as apply records it, so an
//! interrupted rotation is finished by the next `xcsp apply` (the key in state is the one both
//! sides are given) or by running `rotate-keys` again.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use xcsp_core::{Address, ResourceType};
use xcsp_engine::{Action, Adopt, Events};
use xcsp_plans::Loaded;
use xcsp_plans::plan;

use crate::backend::{Saver, open};
use crate::report::CliError;
use crate::run::{confirm, interrupts, new_run, print_failures, reach, refresh};
use crate::{RunArgs, StateArgs, health};

pub struct Options {
    /// Only this link's keys (all IPsec links' otherwise).
    pub link: Option<String>,
    /// How long one tunnel may take to come back up.
    pub timeout: Duration,
}

pub async fn rotate(l: &Loaded, args: &StateArgs, run_args: &RunArgs, opts: Options) -> miette::Result<ExitCode> {
    let (backend, _held, mut state) = open(l, args, "rotate-keys").await?;
    let keys: Vec<Address> = l
        .graph
        .nodes()
        .filter(|n| n.address.rtype == ResourceType::PresharedKey)
        .filter(|n| opts.link.as_ref().is_none_or(|link| n.address.name == *link))
        .filter(|n| state.resources.get(&n.address).is_some_and(|r| r.id.is_some()))
        .map(|n| n.address.clone())
        .collect();
    if keys.is_empty() {
        return Err(CliError::NoKeys { link: opts.link.clone() }.into());
    }
    let (graph, providers) = reach(l, &state, false).await?;
    refresh(&providers, &l.model.stack, &mut state, Adopt::All, &Events::none()).await?;
    backend.write(&mut state).await?;
    // Nothing else may be pending: a rotation changes the keys and what uses them, no more.
    let pending: Vec<String> = plan::diff(&l.model.stack, &l.model.digest, &graph, &state.attributes())
        .changes
        .into_iter()
        .filter(|c| c.action != Action::NoOp)
        .map(|c| c.address.to_string())
        .collect();
    if !pending.is_empty() {
        return Err(CliError::Pending { pending }.into());
    }
    println!("xcsp will replace {} pre-shared keys, one tunnel at a time:", keys.len());
    for k in &keys {
        let age =
            state.resources[k].attributes.get("created").and_then(|v| v.as_str()).unwrap_or("before xcsp recorded it");
        println!("  - {k} (made {age})");
    }
    confirm(run_args, "Do you want to rotate these keys?")?;
    let cancel = interrupts();
    for key in &keys {
        if *cancel.borrow() > 0 {
            return Err(
                CliError::RotationStopped { key: key.clone(), why: "interrupted before its turn".into() }.into()
            );
        }
        let started = Instant::now();
        let replace: BTreeSet<Address> = [key.clone()].into_iter().collect();
        let p = plan::diff_replacing(&l.model.stack, &l.model.digest, &graph, &state.attributes(), &replace);
        let mut run = new_run(l, providers.clone(), run_args, Events::none(), cancel.clone());
        run.approved = Some(p.changes.iter().map(|c| (c.address.clone(), c.action)).collect());
        run.replace = replace.into_iter().collect();
        let mut store = Saver(backend.clone());
        let summary = xcsp_engine::apply(&run, &graph, &mut state, &mut store).await?;
        if !summary.succeeded() {
            print_failures(&summary);
            return Err(CliError::RotationStopped { key: key.clone(), why: "its change did not apply".into() }.into());
        }
        let changed: Vec<String> = summary.done.iter().filter(|(a, _)| a != key).map(|(a, _)| a.to_string()).collect();
        println!("{key}: new key given to {}", changed.join(", "));
        // The tunnel is back when every tunnel of its link is up on both sides again.
        loop {
            refresh(&providers, &l.model.stack, &mut state, Adopt::Known, &Events::none()).await?;
            let h = health::health(&l.model, &state);
            let link = h.links.iter().find(|x| x.name == key.name);
            if link.is_some_and(|x| x.conditions.iter().any(|c| c.kind == "TunnelEstablished" && c.status == "True")) {
                println!(
                    "{key}: every tunnel of `{}` up on both sides after {:.1} s",
                    key.name,
                    started.elapsed().as_secs_f64()
                );
                break;
            }
            if started.elapsed() > opts.timeout {
                let why = link
                    .and_then(|x| x.conditions.first())
                    .map_or("the link is not in the spec".to_string(), |c| c.message.clone());
                return Err(CliError::RotationStopped { key: key.clone(), why }.into());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        backend.write(&mut state).await?;
    }
    println!("\nRotated {} keys; every tunnel up on both sides.", keys.len());
    Ok(ExitCode::SUCCESS)
}
