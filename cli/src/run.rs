//! The commands that read state and talk to clouds: plan, apply, destroy, status, force-unlock.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use tokio::sync::{mpsc, watch};
use xcsp_core::{Address, ProviderKind};
use xcsp_engine::{Adopt, Events, Limits, Order, Providers, Run, Summary};
use xcsp_plans::Loaded;
use xcsp_plans::graph::ResourceGraph;
use xcsp_plans::plan::{self, Action, SavedPlan};
use xcsp_plans::spec::KubernetesObjects;
use xcsp_state::State;

use crate::backend::{Saver, backend, codec, open};
use crate::cluster::{self, Kubeconfig};
use crate::progress::{self, Mode};
use crate::report::{self, CliError};
use crate::{RunArgs, SpecArgs, StateArgs, clouds};

pub struct PlanOptions {
    pub json: bool,
    pub detailed_exitcode: bool,
    pub out: Option<PathBuf>,
    pub refresh: bool,
    pub offline: bool,
    pub replace: Vec<String>,
}

/// What this run replaces whatever its attributes say, and why: the `--replace` addresses (each a
/// resource of the spec that state records), and a key due for rotation per link
/// (`psk_rotation_days`).
fn replacing(l: &Loaded, state: &State, asked: &[String]) -> miette::Result<BTreeMap<Address, String>> {
    let mut out = crate::rotate::overdue(l, state);
    for text in asked {
        let a: Address =
            text.parse().map_err(|e| CliError::NotAnAddress { text: text.clone(), detail: format!("{e}") })?;
        if l.graph.get(&a).is_none() {
            return Err(CliError::NotInSpec(a).into());
        }
        if state.resources.get(&a).and_then(|r| r.id.as_ref()).is_none() {
            return Err(CliError::NotInState(a).into());
        }
        out.insert(a, "asked for on the command line (--replace)".into());
    }
    Ok(out)
}

/// The OIDC issuer check (unless offline): warnings are shown, a mismatch stops the command.
async fn check_issuers(l: &Loaded, offline: bool) -> miette::Result<()> {
    if offline {
        return Ok(());
    }
    // The keys the cluster signs with, when it can be read (else only the documents are checked).
    let keys = match cluster::find(&l.model) {
        Ok(found) if !l.model.identities.is_empty() => {
            xcsp_kube::survey::signing_keys(&found.client_config()).await.ok()
        }
        _ => None,
    };
    let (errors, warnings): (Vec<_>, Vec<_>) =
        crate::discovery::check(&l.model, keys.as_deref()).await.into_iter().partition(|p| p.is_error());
    for w in &warnings {
        report::diag(w);
    }
    if errors.is_empty() { Ok(()) } else { Err(CliError::Issuer { problems: errors }.into()) }
}

/// The part of the graph this run applies: everything, unless the spec says
/// `kubernetes_objects = "render"`; then the Kubernetes objects are left out (said once, on
/// stderr, with `xcsp render DIR` as the way to deliver them), except when state records some:
/// those an earlier run applied stay xcsp's, so the run never plans to delete them.
pub(crate) fn in_reach(l: &Loaded, state: &State) -> ResourceGraph {
    let recorded = state.resources.keys().filter(|a| a.rtype.provider() == ProviderKind::Kubernetes).count();
    if l.model.cluster.kubernetes_objects.value == KubernetesObjects::Apply {
        return l.graph.clone();
    }
    if recorded > 0 {
        report::note(format_args!(
            "kubernetes_objects = \"render\", but state records {recorded} Kubernetes objects an earlier run applied: they stay in this run (applied, refreshed and destroyed by xcsp) until `xcsp state rm ADDR` hands them over."
        ));
        return l.graph.clone();
    }
    let kept: Vec<_> =
        l.graph.nodes().filter(|n| n.address.rtype.provider() != ProviderKind::Kubernetes).cloned().collect();
    let left_out = l.graph.len() - kept.len();
    if left_out > 0 {
        report::note(format_args!(
            "kubernetes_objects = \"render\", so the {left_out} Kubernetes objects of the spec (the CAPZ/CAPI objects, the pool's machine configuration, CAPI's access to the cluster, and their namespace) are left out of this run: write them with `xcsp render DIR` for oc apply or GitOps."
        ));
    }
    ResourceGraph::new(kept).expect("no resource depends on a Kubernetes object")
}

/// The kubeconfig of the cluster, when Kubernetes objects are among `kinds`. Without one, `strict`
/// commands (apply, destroy) stop before changing anything; plan and status warn and go on,
/// taking the objects state records as recorded.
pub(crate) fn kubeconfig(
    l: &Loaded,
    kinds: &BTreeSet<ProviderKind>,
    strict: bool,
) -> miette::Result<Option<Kubeconfig>> {
    if !kinds.contains(&ProviderKind::Kubernetes) {
        return Ok(None);
    }
    match cluster::find(&l.model) {
        Ok(found) => Ok(Some(found)),
        Err(p) if strict => Err(p.into()),
        Err(p) => {
            report::diag(&cluster::warning(p));
            Ok(None)
        }
    }
}

/// The part of the graph a run applies and the providers it needs (`strict`: stop without a
/// kubeconfig when Kubernetes objects are in reach, as apply does).
pub(crate) async fn reach(l: &Loaded, state: &State, strict: bool) -> miette::Result<(ResourceGraph, Providers)> {
    reach_waiting(l, state, strict, false).await
}

/// [`reach`], the Kubernetes provider waiting after a MachineSet's write for its Nodes to be
/// Ready when `wait_for_nodes` (apply's `--wait-for-nodes`).
pub(crate) async fn reach_waiting(
    l: &Loaded,
    state: &State,
    strict: bool,
    wait_for_nodes: bool,
) -> miette::Result<(ResourceGraph, Providers)> {
    let graph = in_reach(l, state);
    let kinds = needed(&graph, state);
    let mut kube = kubeconfig(l, &kinds, strict)?;
    if let Some(k) = kube.as_mut() {
        k.wait_for_nodes = wait_for_nodes;
    }
    let providers = clouds::providers(&l.model, &kinds, kube.as_ref()).await?;
    Ok((graph, providers))
}

/// The providers kinds a run needs: those of the graph and of what state records.
pub(crate) fn needed(graph: &ResourceGraph, state: &State) -> BTreeSet<ProviderKind> {
    graph
        .nodes()
        .map(|n| n.address.rtype.provider())
        .chain(state.resources.keys().map(|a| a.rtype.provider()))
        .collect()
}

pub(crate) async fn refresh(
    providers: &Providers,
    stack: &str,
    state: &mut State,
    adopt: Adopt,
    events: &Events,
) -> miette::Result<()> {
    let found = xcsp_engine::refresh(providers, stack, state, adopt, events).await?;
    for kind in found.not_refreshed {
        report::warn(format_args!(
            "no {} access configured; its resources are taken as state records them.",
            kind.title()
        ));
    }
    Ok(())
}

pub async fn plan(l: &Loaded, args: &StateArgs, opts: PlanOptions) -> miette::Result<ExitCode> {
    check_issuers(l, opts.offline).await?;
    crate::preflight::before_changes(&l.model, opts.offline).await?;
    let (_, guard, mut state) = open(l, args, "plan").await?;
    crate::rotate::note_under_way(&state);
    let graph = in_reach(l, &state);
    let kinds = needed(&graph, &state);
    let kube = kubeconfig(l, &kinds, false)?;
    if opts.refresh && !state.resources.is_empty() {
        let providers = clouds::providers(&l.model, &kinds, kube.as_ref()).await?;
        refresh(&providers, &l.model.stack, &mut state, Adopt::All, &Events::none()).await?;
    }
    drop(guard);
    let replace = replacing(l, &state, &opts.replace)?;
    let mut p = plan::diff_replacing(&l.model.stack, &l.model.digest, &graph, &state.attributes(), &replace);
    plan::finish_waits(&mut p, &state.unsettled());
    crate::capacity::before_changes(&l.model, &p, opts.offline).await?;
    if let Some(out) = opts.out {
        let lineage = (state.serial > 0).then(|| state.lineage.clone());
        let saved = SavedPlan::new(p.redacted(), lineage, state.serial);
        // Sealed like state when a state key is configured.
        let text = codec(l, args)?.seal(&serde_json::to_vec_pretty(&saved).expect("plans serialize"))?;
        // Owner-only (0600), as state is.
        xcsp_state::local::write_private(&out, &text).map_err(|source| CliError::Write {
            what: "write",
            path: out.clone(),
            source,
        })?;
    }
    let cost = crate::cost::of_run(l, &p, &graph);
    if opts.json {
        // The plan as it is saved, with its monthly cost beside it.
        let mut shown = serde_json::to_value(p.redacted()).expect("plans serialize");
        shown["cost"] = serde_json::to_value(&cost).expect("estimates serialize");
        println!("{}", serde_json::to_string_pretty(&shown).expect("plans serialize"));
    } else {
        print!("{}{}", plan::render(&p), crate::cost::render(&cost));
    }
    Ok(if opts.detailed_exitcode && p.has_changes() { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

/// Asks for "yes" on a terminal; refuses to go on without `--auto-approve` elsewhere.
pub(crate) fn confirm(args: &RunArgs, question: &str) -> miette::Result<()> {
    if args.auto_approve {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::NoTerminal.into());
    }
    print!("\n{question}\n  Only 'yes' will be accepted: ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() == "yes" { Ok(()) } else { Err(CliError::Cancelled.into()) }
}

/// Ctrl-C once: start nothing new; twice: abandon what runs.
pub(crate) fn interrupts() -> watch::Receiver<u32> {
    let (tx, rx) = watch::channel(0u32);
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            tx.send_modify(|n| *n += 1);
        }
    });
    rx
}

/// A run of the engine as the CLI makes them; `cancel` counts Ctrl-C ([`interrupts`]).
pub(crate) fn new_run(
    l: &Loaded,
    providers: Providers,
    args: &RunArgs,
    events: Events,
    cancel: watch::Receiver<u32>,
) -> Run {
    let mut run = Run::new(&l.model.stack, providers);
    run.limits = Limits::default().capped(args.parallelism);
    run.order = if args.order == "fifo" { Order::Fifo } else { Order::CriticalPath };
    run.events = events;
    run.cancel = cancel;
    run.protected = l.graph.nodes().filter(|n| n.prevent_destroy).map(|n| n.address.clone()).collect();
    run
}

pub(crate) fn print_failures(summary: &Summary) {
    for (_, _, error) in &summary.failed {
        report::diag(error);
    }
}

pub async fn apply(
    spec: &SpecArgs,
    l: &Loaded,
    args: &StateArgs,
    run_args: &RunArgs,
    saved: Option<PathBuf>,
    replace: &[String],
) -> miette::Result<ExitCode> {
    let (backend, _held, mut state) = open(l, args, "apply").await?;
    crate::rotate::note_under_way(&state);
    let mut from_file: Option<SavedPlan> = None;
    if let Some(path) = saved {
        let bytes =
            std::fs::read(&path).map_err(|source| CliError::Read { what: "the plan", path: path.clone(), source })?;
        let text = codec(l, args)?.open(&bytes)?;
        let saved: SavedPlan = serde_json::from_slice(&text)
            .map_err(|e| CliError::NotAPlan { path: path.clone(), detail: e.to_string() })?;
        let lineage = (state.serial > 0).then_some(state.lineage.as_str());
        saved.check_fresh(&l.model.digest, lineage, state.serial)?;
        from_file = Some(saved);
    }
    check_issuers(l, run_args.offline).await?;
    crate::preflight::before_changes(&l.model, run_args.offline).await?;
    let (graph, providers) = reach_waiting(l, &state, true, run_args.wait_for_nodes).await?;
    let mode = Mode::pick(run_args.json);
    let (tx, rx) = mpsc::unbounded_channel();
    let events = Events::new(tx);
    if !state.resources.is_empty() {
        refresh(&providers, &l.model.stack, &mut state, Adopt::All, &events).await?;
        backend.write(&mut state).await?;
    }
    let replace = replacing(l, &state, replace)?;
    let mut p = plan::diff_replacing(&l.model.stack, &l.model.digest, &graph, &state.attributes(), &replace);
    plan::finish_waits(&mut p, &state.unsettled());
    crate::capacity::before_changes(&l.model, &p, run_args.offline).await?;
    let changes = p.changes.iter().filter(|c| c.action != Action::NoOp).count();
    if mode != Mode::Json {
        print!("{}{}", plan::render(&p), crate::cost::render(&crate::cost::of_run(l, &p, &graph)));
    }
    if !p.has_changes() {
        return Ok(ExitCode::SUCCESS);
    }
    confirm(run_args, "Do you want to perform these actions?")?;
    let view = progress::spawn(mode, rx, changes);
    let mut run = new_run(l, providers, run_args, events, interrupts());
    // Apply does what the approved plan showed and no more: the saved plan when one is given (the
    // clouds may have moved since it was made; what now needs more than it showed is refused as
    // BeyondPlan, as Terraform applies a saved plan or nothing), else the plan just shown.
    let approved = from_file.as_ref().map_or(&p, |f| &f.plan);
    run.approved = Some(approved.changes.iter().map(|c| (c.address.clone(), c.action)).collect());
    // What the approved plan replaces is replaced, also where only `--replace` asked for it.
    run.replace = approved.changes.iter().filter(|c| c.action == Action::Replace).map(|c| c.address.clone()).collect();
    let mut store = Saver(backend.clone());
    let summary = xcsp_engine::apply(&run, &graph, &mut state, &mut store).await?;
    drop(run);
    let _ = view.await;
    let code = finish("Apply", &summary);
    if mode != Mode::Json {
        print!("{}", plan::render_outputs(&crate::outputs(spec, l, &state)));
    }
    code
}

fn finish(what: &str, summary: &Summary) -> miette::Result<ExitCode> {
    let count = |op| summary.done.iter().filter(|(_, o)| *o == op).count();
    let counts = format!(
        "{} added, {} changed, {} replaced, {} destroyed",
        count(Action::Create),
        count(Action::Update),
        count(Action::Replace),
        count(Action::Delete)
    );
    print_failures(summary);
    if summary.succeeded() {
        println!("\n{what} complete! Resources: {counts}.");
        return Ok(ExitCode::SUCCESS);
    }
    if summary.interrupted {
        println!(
            "\n{what} interrupted. Resources: {counts}; {} not started. Every finished step is recorded in state: run the same command again to resume.",
            summary.skipped.len()
        );
        return Ok(ExitCode::from(130));
    }
    println!(
        "\n{what} failed. Resources: {counts}; {} failed, {} skipped because of them. Every finished step is recorded in state: fix the cause and run the same command again to resume.",
        summary.failed.len(),
        summary.skipped.len()
    );
    Ok(ExitCode::from(1))
}

pub async fn destroy(l: &Loaded, args: &StateArgs, run_args: &RunArgs, sweep: bool) -> miette::Result<ExitCode> {
    let (backend, _held, mut state) = open(l, args, "destroy").await?;
    let kinds = if sweep {
        needed(&in_reach(l, &state), &state)
    } else {
        state.resources.keys().map(|a| a.rtype.provider()).collect()
    };
    let kube = kubeconfig(l, &kinds, true)?;
    let providers = clouds::providers(&l.model, &kinds, kube.as_ref()).await?;
    let mode = Mode::pick(run_args.json);
    let (tx, rx) = mpsc::unbounded_channel();
    let events = Events::new(tx);
    if sweep || !state.resources.is_empty() {
        let adopt = if sweep { Adopt::All } else { Adopt::Known };
        refresh(&providers, &l.model.stack, &mut state, adopt, &events).await?;
        backend.write(&mut state).await?;
    }
    let doomed: Vec<&Address> = state.resources.iter().filter(|(_, r)| r.id.is_some()).map(|(a, _)| a).collect();
    if mode != Mode::Json {
        if doomed.is_empty() {
            println!("Nothing to destroy: the stack `{}` has no resources.", l.model.stack);
        } else {
            println!("xcsp will destroy {} resources:", doomed.len());
            for a in &doomed {
                println!("  - {a}");
            }
        }
    }
    let total = doomed.len();
    let summary = if total > 0 {
        confirm(run_args, "Do you really want to destroy all resources of this stack?")?;
        let view = progress::spawn(mode, rx, total);
        let run = new_run(l, providers.clone(), run_args, events, interrupts());
        let mut store = Saver(backend.clone());
        let summary = xcsp_engine::destroy(&run, &mut state, &mut store).await?;
        drop(run);
        let _ = view.await;
        // A rotation under way ends with the keys it was rotating.
        if state.rotation.is_some() && !state.resources.keys().any(|a| a.rtype == xcsp_core::ResourceType::PresharedKey)
        {
            state.rotation = None;
            backend.write(&mut state).await?;
        }
        Some(summary)
    } else {
        state.resources.clear();
        state.rotation = None;
        backend.write(&mut state).await?;
        None
    };
    if sweep {
        // Whatever still carries the stack's tags, seen from a state that knows nothing.
        let mut fresh = State::new(&l.model.stack);
        refresh(&providers, &l.model.stack, &mut fresh, Adopt::All, &Events::none()).await?;
        if !fresh.resources.is_empty() {
            if let Some(s) = &summary {
                print_failures(s);
            }
            let remaining =
                fresh.resources.iter().map(|(a, r)| format!("{a} ({})", r.id.as_deref().unwrap_or("?"))).collect();
            return Err(CliError::Remaining { remaining }.into());
        }
    }
    match summary {
        Some(s) => finish("Destroy", &s),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The MachineSets state records, as (namespace, name).
pub fn machine_sets(state: &State) -> Vec<(String, String)> {
    state
        .resources
        .iter()
        .filter(|(a, _)| a.rtype == xcsp_core::ResourceType::K8sMachineSet)
        .filter_map(|(_, r)| r.id.as_deref()?.split_once('/').map(|(ns, n)| (ns.to_string(), n.to_string())))
        .collect()
}

pub async fn status(spec: &SpecArgs, l: &Loaded, args: &StateArgs, json: bool) -> miette::Result<ExitCode> {
    let (_, guard, mut state) = open(l, args, "status").await?;
    if !state.resources.is_empty() {
        let (_, providers) = reach(l, &state, false).await?;
        refresh(&providers, &l.model.stack, &mut state, Adopt::Known, &Events::none()).await?;
    }
    drop(guard);
    let mut health = crate::health::health(&l.model, &state);
    health.pools = crate::health::pools(&l.graph, &state);
    // The pool's machines, when state records MachineSets and the cluster can be read.
    let sets = machine_sets(&state);
    let federated = state.resources.keys().any(|a| a.rtype == xcsp_core::ResourceType::AzureFederatedCredential);
    if (federated || !sets.is_empty())
        && let Ok(found) = cluster::find(&l.model)
    {
        if !sets.is_empty() {
            match xcsp_kube::pool::machines(&found.client_config(), &sets).await {
                Ok(m) => health.machines = m,
                Err(e) => report::warn(format_args!("cannot read the pool's machines: {e}")),
            }
            let nodes: Vec<String> =
                health.machines.iter().filter_map(|m| m.node.as_ref().map(|n| n.name.clone())).collect();
            match xcsp_kube::pool::ebs_csi(&found.client_config(), &nodes).await {
                Ok(Some(e)) => health.cluster = crate::health::ebs_csi(&e),
                Ok(None) => {}
                Err(e) => report::warn(format_args!("cannot read the EBS CSI driver: {e}")),
            }
        }
        // The federated credentials against the token CAPZ presents (plan checked the spec's
        // values, unless it ran `--offline`; this reads what Azure holds now).
        if federated {
            match crate::preflight::survey(&found).await {
                Ok(s) => health.identities = crate::health::identities(&state, &s),
                Err(e) => report::warn(format_args!("cannot read the cluster: {e}")),
            }
        }
    }
    // The identities' role assignments, with or without the cluster.
    for r in crate::health::roles(&l.model, &state) {
        match health.identities.iter_mut().find(|n| n.name == r.name) {
            Some(n) => n.conditions.extend(r.conditions),
            None => health.identities.push(r),
        }
    }
    if json {
        let mut shown = serde_json::to_value(&health).expect("status serializes");
        // What keeps each machine from being a Ready node, as the table says it.
        if let Some(list) = shown["machines"].as_array_mut() {
            for (shown, m) in list.iter_mut().zip(&health.machines) {
                shown["cause"] = serde_json::json!(crate::health::cause(&health, m));
            }
        }
        println!("{}", serde_json::to_string_pretty(&shown).expect("status serializes"));
    } else {
        print!("{}", crate::health::render(&health));
        print!("{}", plan::render_outputs(&crate::outputs(spec, l, &state)));
    }
    // 2 when a tunnel is down or a machine of the pool is not a Ready node.
    Ok(if health.healthy() && health.pool_ready() { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

pub async fn render(
    l: &Loaded,
    args: &StateArgs,
    dir: &std::path::Path,
    capi_version: &str,
) -> miette::Result<ExitCode> {
    let (_, guard, state) = open(l, args, "render").await?;
    drop(guard);
    let output_of = |from: &xcsp_core::Address, output: &str| {
        let r = state.resources.get(from)?;
        r.attributes
            .get(output)
            .cloned()
            .or_else(|| (output == "id").then(|| r.id.clone().map(xcsp_core::Value::string)).flatten())
    };
    let mut objects = Vec::new();
    for node in l.graph.in_order().into_iter().filter(|n| n.address.rtype.provider() == ProviderKind::Kubernetes) {
        if let Some(what) = xcsp_kube::copied_at_apply(node.address.rtype) {
            // Its content is read from the cluster (an operator or controller writes the source).
            let name = node.attributes.get("name").and_then(|v| v.as_str()).unwrap_or_default();
            println!(
                "not rendered: {} ({name}) holds {what}, which only the cluster has; with kubernetes_objects = \"apply\" xcsp writes it there",
                node.address
            );
            continue;
        }
        let object = xcsp_kube::object(&l.model.stack, &node.address, &node.filled(output_of))
            .map_err(|e| CliError::Render(e.to_string()))?;
        objects.push(xcsp_kube::in_capi_version(object, capi_version));
    }
    std::fs::create_dir_all(dir).map_err(|source| CliError::Write {
        what: "create",
        path: dir.to_path_buf(),
        source,
    })?;
    for (name, text) in xcsp_kube::render(&objects) {
        let path = dir.join(&name);
        std::fs::write(&path, text).map_err(|source| CliError::Write { what: "write", path: path.clone(), source })?;
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn force_unlock(l: &Loaded, args: &StateArgs, id: &str) -> miette::Result<ExitCode> {
    let held = backend(l, args).await?.force_unlock(id).await?;
    println!("Removed the lock held by {} (pid {} on {}) for `{}`.", held.holder, held.pid, held.host, held.operation);
    Ok(ExitCode::SUCCESS)
}
