//! The operations that read state and talk to clouds: plan, apply, destroy, status, render,
//! force-unlock; and [`carry_out`], the one way any of them (and `rotate-keys` and `watch`)
//! changes the clouds: a plan the caller's [`Approver`] approved, walked by the engine doing
//! exactly that plan.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::watch;
use xcsp_core::diag::Problem;
use xcsp_core::{Address, ProviderKind};
use xcsp_engine::{Adopt, Events, Limits, Providers, Run, Summary};
use xcsp_plans::graph::ResourceGraph;
use xcsp_plans::plan::{self, Action, Plan, SavedPlan};
use xcsp_plans::spec::{KubernetesObjects, Output};
use xcsp_state::State;
use xcsp_state::backend::{Backend, LockInfo};

use crate::backend::{Held, Saver, backend, codec, open};
use crate::cluster::{self, Kubeconfig};
use crate::{Approver, Stack, StackError, clouds};

/// What this run replaces whatever its attributes say, and why: the `--replace` addresses (each a
/// resource of the spec that state records), and a key due for rotation per link
/// (`psk_rotation_days`).
fn replacing(s: &Stack, state: &State, asked: &[String]) -> crate::Result<BTreeMap<Address, String>> {
    let l = &s.loaded;
    let mut out = crate::keys::overdue(l, state);
    for text in asked {
        let a: Address =
            text.parse().map_err(|e| StackError::NotAnAddress { text: text.clone(), detail: format!("{e}") })?;
        if l.graph.get(&a).is_none() {
            return Err(StackError::NotInSpec(a).into());
        }
        if state.resources.get(&a).and_then(|r| r.id.as_ref()).is_none() {
            return Err(StackError::NotInState(a).into());
        }
        out.insert(a, "asked for on the command line (--replace)".into());
    }
    Ok(out)
}

/// The OIDC issuer check (unless offline): warnings are said, a mismatch stops the operation.
async fn check_issuers(s: &Stack) -> crate::Result<()> {
    let l = &s.loaded;
    if s.options.offline {
        return Ok(());
    }
    // The keys the cluster signs with, when it can be read (else only the documents are checked).
    let keys = match s.cluster() {
        Ok(found) if !l.model.identities.is_empty() => {
            xcsp_kube::survey::signing_keys(&found.client_config()).await.ok()
        }
        _ => None,
    };
    let (errors, warnings): (Vec<_>, Vec<_>) =
        crate::discovery::check(&l.model, keys.as_deref()).await.into_iter().partition(|p| p.is_error());
    for w in warnings {
        s.say.diag(w);
    }
    if errors.is_empty() { Ok(()) } else { Err(StackError::Issuer { problems: errors }.into()) }
}

/// A FIPS cluster's stack run by a build that is not FIPS: a warning at plan, refused at apply
/// unless allowed (`xcsp::fips::build`), since the credentials would cross TLS outside a validated
/// module.
pub fn check_build(
    model: &xcsp_plans::validate::Model,
    fips_build: bool,
    applying: bool,
    allowed: bool,
) -> Result<Option<Problem>, StackError> {
    let fips = &model.cluster.fips;
    if !fips.value || fips_build {
        return Ok(None);
    }
    if applying && !allowed {
        return Err(StackError::NonFipsBuild);
    }
    Ok(Some(
        Problem::warning(
            "xcsp::fips::build",
            "the cluster runs in FIPS mode, and this xcsp is not a FIPS build: its TLS to the clouds and the cluster runs outside a validated module",
        )
        .label(&fips.span, "the cluster runs in FIPS mode")
        .with_help("use the FIPS build (xcsp's default features); apply refuses without --allow-non-fips-build"),
    ))
}

/// What plan and apply check before anything changes (unless offline): the build against the
/// cluster's FIPS mode, the OIDC issuers and the cluster's preflight.
async fn checks_before_changes(s: &Stack, applying: bool) -> crate::Result<()> {
    let allowed = s.options.allow_non_fips_build;
    if let Some(warning) = check_build(&s.loaded.model, xcsp_crypto::FIPS, applying, allowed)? {
        s.say.diag(warning);
    }
    check_issuers(s).await?;
    if let Some(chosen) = crate::preflight::before_changes(s).await? {
        let _ = s.providers.set(chosen);
    }
    Ok(())
}

/// The part of the graph this run applies: everything, unless the spec says
/// `kubernetes_objects = "render"`; then the Kubernetes objects are left out (said once, with
/// `xcsp render DIR` as the way to deliver them), except when state records some: those an
/// earlier run applied stay xcsp's, so the run never plans to delete them.
pub fn in_reach(s: &Stack, state: &State) -> ResourceGraph {
    let graph = objects_in_reach(s, state);
    providers_in_reach(s, state, graph)
}

/// The Cluster API providers xcsp installs, less those the cluster has of its own (as the
/// preflight read it: `cluster_api.providers = "auto"`), unless state records them: what an
/// earlier run installed stays xcsp's until destroyed.
fn providers_in_reach(s: &Stack, state: &State, graph: ResourceGraph) -> ResourceGraph {
    use crate::preflight::Source;
    let Some(chosen) = s.providers.get() else { return graph };
    let dropped: Vec<Address> = graph
        .nodes()
        .filter(|n| n.address.rtype == xcsp_core::ResourceType::K8sClusterApiProvider)
        .filter(|n| {
            let source = match n.address.name.as_str() {
                "core" => &chosen.core,
                "approver" => &chosen.approver,
                _ => &chosen.azure,
            };
            *source != Source::Xcsp && !state.resources.contains_key(&n.address)
        })
        .map(|n| n.address.clone())
        .collect();
    if dropped.is_empty() {
        return graph;
    }
    for a in &dropped {
        s.say.note(format_args!(
            "{a}: the cluster has this provider of its own, so xcsp installs none (cluster_api.providers = \"auto\")"
        ));
    }
    let kept: Vec<_> = graph
        .nodes()
        .filter(|n| !dropped.contains(&n.address))
        .cloned()
        .map(|mut n| {
            n.depends_on.retain(|d| !dropped.contains(d));
            n
        })
        .collect();
    ResourceGraph::new(kept).expect("a graph less some providers is a graph")
}

/// [`in_reach`] before the providers: the Kubernetes objects by `kubernetes_objects`.
fn objects_in_reach(s: &Stack, state: &State) -> ResourceGraph {
    let l = &s.loaded;
    let recorded = state.resources.keys().filter(|a| a.rtype.provider() == ProviderKind::Kubernetes).count();
    if l.model.cluster.kubernetes_objects.value == KubernetesObjects::Apply {
        return l.graph.clone();
    }
    if recorded > 0 {
        s.say.note(format_args!(
            "kubernetes_objects = \"render\", but state records {recorded} Kubernetes objects an earlier run applied: they stay in this run (applied, refreshed and destroyed by xcsp) until `xcsp state rm ADDR` hands them over."
        ));
        return l.graph.clone();
    }
    let kept: Vec<_> =
        l.graph.nodes().filter(|n| n.address.rtype.provider() != ProviderKind::Kubernetes).cloned().collect();
    // The objects left out; the waits for the MachineSets' Nodes go with them, being none.
    let left_out = l
        .graph
        .nodes()
        .filter(|n| n.address.rtype.provider() == ProviderKind::Kubernetes && !n.address.rtype.only_waits())
        .count();
    if left_out > 0 {
        s.say.note(format_args!(
            "kubernetes_objects = \"render\", so the {left_out} Kubernetes objects of the spec (the CAPZ/CAPI objects, the pool's machine configuration, CAPI's access to the cluster, and their namespace) are left out of this run: write them with `xcsp render DIR` for oc apply or GitOps."
        ));
    }
    ResourceGraph::new(kept).expect("no resource depends on a Kubernetes object")
}

/// The kubeconfig of the cluster, when Kubernetes objects are among `kinds`. Without one, `strict`
/// operations (apply, destroy) stop before changing anything; plan and status warn and go on,
/// taking the objects state records as recorded.
pub fn kubeconfig(s: &Stack, kinds: &BTreeSet<ProviderKind>, strict: bool) -> crate::Result<Option<Kubeconfig>> {
    if !kinds.contains(&ProviderKind::Kubernetes) {
        return Ok(None);
    }
    match s.cluster() {
        Ok(found) => Ok(Some(found.clone())),
        Err(p) if strict => Err(StackError::NoCluster(p.clone())),
        Err(p) => {
            s.say.diag(cluster::warning(p.clone()));
            Ok(None)
        }
    }
}

/// The part of the graph a run applies and the providers it needs (`strict`: stop without a
/// kubeconfig when Kubernetes objects are in reach, as apply does).
pub async fn reach(s: &Stack, state: &State, strict: bool) -> crate::Result<(ResourceGraph, Providers)> {
    let graph = in_reach(s, state);
    let kinds = needed(&graph, state);
    let kube = kubeconfig(s, &kinds, strict)?;
    let providers = clouds::providers(&s.loaded.model, &kinds, kube.as_ref()).await?;
    Ok((graph, providers))
}

/// The providers kinds a run needs: those of the graph and of what state records.
pub fn needed(graph: &ResourceGraph, state: &State) -> BTreeSet<ProviderKind> {
    graph
        .nodes()
        .map(|n| n.address.rtype.provider())
        .chain(state.resources.keys().map(|a| a.rtype.provider()))
        .collect()
}

/// Reads the stack's resources from the clouds into `state`; a cloud without access configured is
/// said, and its resources are taken as recorded.
pub async fn refresh(
    s: &Stack,
    providers: &Providers,
    state: &mut State,
    adopt: Adopt,
    events: &Events,
) -> crate::Result<()> {
    let found = xcsp_engine::refresh(providers, s.name(), state, adopt, events).await?;
    for kind in found.not_refreshed {
        s.say.warn(format_args!(
            "no {} access configured; its resources are taken as state records them.",
            kind.title()
        ));
    }
    Ok(())
}

/// A plan as `xcsp plan` makes it: refreshed (when `refresh` and state exists), checked against
/// the cluster and the location's capacity, with its monthly cost.
pub struct Planned {
    pub plan: Plan,
    pub cost: crate::cost::Estimate,
    /// The state it was made from, for a saved plan's staleness check.
    pub lineage: Option<String>,
    pub serial: u64,
}

impl Planned {
    /// The plan as `plan --out` writes it (secrets redacted), sealed like state when a state key
    /// is configured; apply refuses it once the spec or the state moves.
    pub fn sealed(&self, s: &Stack) -> crate::Result<Vec<u8>> {
        let saved = SavedPlan::new(self.plan.redacted(), self.lineage.clone(), self.serial);
        Ok(codec(s)?.seal(&serde_json::to_vec_pretty(&saved).expect("plans serialize"))?)
    }
}

/// How [`diffed`] reads the clouds: as plan does, or as apply does.
struct Against<'a> {
    /// Apply: stop without a kubeconfig when Kubernetes objects are in reach, make the providers
    /// whatever state records (they carry the plan out), and wait after a MachineSet's write for
    /// its Nodes when `wait_for_nodes`. Plan warns and goes on, and makes providers only to refresh.
    applying: bool,
    wait_for_nodes: bool,
    /// Refresh state from the clouds first (when it records anything).
    refresh: bool,
    /// Where the refreshed state is written at once (apply keeps what refresh found).
    save: Option<&'a Arc<dyn Backend>>,
    /// The lock to let go of once state is refreshed (plan: the diff and the capacity check
    /// change nothing); apply keeps its lock to the end.
    release: Option<Held>,
    events: &'a Events,
}

/// The one refresh/diff path of plan and apply, over state read under the lock: the graph in
/// reach and the providers it needs, state refreshed from the clouds (adopting what carries the
/// stack's tags), the plan against it (with `--replace` and the keys due for rotation), checked
/// against the location's capacity.
async fn diffed(
    s: &Stack,
    state: &mut State,
    how: Against<'_>,
    replace: &[String],
) -> crate::Result<(ResourceGraph, Option<Providers>, Plan)> {
    let l = &s.loaded;
    let graph = in_reach(s, state);
    let kinds = needed(&graph, state);
    let mut kube = kubeconfig(s, &kinds, how.applying)?;
    if let Some(k) = kube.as_mut() {
        k.wait_for_nodes = how.wait_for_nodes;
    }
    let refreshing = how.refresh && !state.resources.is_empty();
    let providers =
        if how.applying || refreshing { Some(clouds::providers(&l.model, &kinds, kube.as_ref()).await?) } else { None };
    if let (true, Some(providers)) = (refreshing, &providers) {
        refresh(s, providers, state, Adopt::All, how.events).await?;
        if let Some(backend) = how.save {
            backend.write(state).await?;
        }
    }
    drop(how.release);
    let replace = replacing(s, state, replace)?;
    let p = plan::diff_replacing(&l.model.stack, &l.model.digest, &graph, &state.attributes(), &replace);
    crate::capacity::before_changes(&l.model, &p, s.options.offline, &s.say).await?;
    Ok((graph, providers, p))
}

/// `xcsp plan`: what apply would do, nothing changed.
pub async fn plan(s: &Stack, refresh_first: bool, replace: &[String]) -> crate::Result<Planned> {
    checks_before_changes(s, false).await?;
    let (_, held, mut state) = open(s, "plan").await?;
    crate::keys::note_under_way(s, &state);
    let how = Against {
        applying: false,
        wait_for_nodes: false,
        refresh: refresh_first,
        save: None,
        release: Some(held),
        events: &Events::none(),
    };
    let (graph, _, p) = diffed(s, &mut state, how, replace).await?;
    let cost = crate::cost::of_run(&s.loaded, &p, &graph);
    let lineage = (state.serial > 0).then(|| state.lineage.clone());
    Ok(Planned { plan: p, cost, lineage, serial: state.serial })
}

/// A run of the engine over `s`'s providers, with its options, events and cancellation (a count
/// of requests to stop: one stops starting operations, two abandon those running).
pub fn new_run(s: &Stack, providers: Providers, events: Events, cancel: watch::Receiver<u32>) -> Run {
    let mut run = Run::new(s.name(), providers);
    run.limits = Limits::default().capped(s.options.parallelism);
    run.order = s.options.order;
    run.events = events;
    run.cancel = cancel;
    run.protected = s.loaded.graph.nodes().filter(|n| n.prevent_destroy).map(|n| n.address.clone()).collect();
    run
}

/// Where a run of [`carry_out`] reports and what stops it.
#[derive(Clone)]
pub struct Walk {
    pub events: Events,
    pub cancel: watch::Receiver<u32>,
}

impl Walk {
    /// No events, never cancelled.
    pub fn quiet() -> Walk {
        Walk { events: Events::none(), cancel: watch::channel(0).1 }
    }
}

/// The one way a change reaches the clouds: `approved` (a plan the caller's approver said yes to)
/// walked over `graph` by the engine, doing exactly that plan and no more (an operation bigger
/// than its planned action is refused as `BeyondPlan`), replacing what the plan replaces, and
/// saving state through `backend` after every step.
pub async fn carry_out(
    s: &Stack,
    providers: &Providers,
    graph: &ResourceGraph,
    state: &mut State,
    backend: &Arc<dyn Backend>,
    approved: &Plan,
    walk: Walk,
) -> crate::Result<Summary> {
    let mut run = new_run(s, providers.clone(), walk.events, walk.cancel);
    run.approved = Some(approved.changes.iter().map(|c| (c.address.clone(), c.action)).collect());
    // What the approved plan replaces is replaced, also where only `--replace` asked for it.
    run.replace = approved.changes.iter().filter(|c| c.action == Action::Replace).map(|c| c.address.clone()).collect();
    let mut store = Saver(backend.clone());
    Ok(xcsp_engine::apply(&run, graph, state, &mut store).await?)
}

/// What apply is given besides the stack.
pub struct ApplyOptions {
    /// A saved plan (`plan --out`), sealed as written, and where it came from: apply does that
    /// plan or nothing.
    pub saved: Option<(std::path::PathBuf, Vec<u8>)>,
    /// Addresses to replace whatever their attributes say.
    pub replace: Vec<String>,
    pub walk: Walk,
}

/// What an apply did.
pub struct Applied {
    /// The engine's summary; `None` when the plan changed nothing and nothing ran.
    pub summary: Option<Summary>,
    /// The spec's outputs with what state now records.
    pub outputs: Vec<Output>,
    /// State as the apply left it (just refreshed, when nothing ran).
    pub state: State,
}

/// `xcsp apply`: plan, shown to `approver` with its cost; if it changes something and the approver
/// says yes, carried out.
pub async fn apply(s: &Stack, approver: &dyn Approver, opts: ApplyOptions) -> crate::Result<Applied> {
    let l = &s.loaded;
    let (backend, _held, mut state) = open(s, "apply").await?;
    crate::keys::note_under_way(s, &state);
    let mut from_file: Option<SavedPlan> = None;
    if let Some((path, bytes)) = opts.saved {
        let text = codec(s)?.open(&bytes)?;
        let saved: SavedPlan = serde_json::from_slice(&text)
            .map_err(|e| StackError::NotAPlan { path: path.clone(), detail: e.to_string() })?;
        let lineage = (state.serial > 0).then_some(state.lineage.as_str());
        saved.check_fresh(&l.model.digest, lineage, state.serial)?;
        from_file = Some(saved);
    }
    checks_before_changes(s, true).await?;
    let how = Against {
        applying: true,
        wait_for_nodes: s.options.wait_for_nodes,
        refresh: true,
        save: Some(&backend),
        release: None,
        events: &opts.walk.events,
    };
    let (graph, providers, p) = diffed(s, &mut state, how, &opts.replace).await?;
    let providers = providers.expect("apply makes its providers");
    // Apply does what the approved plan showed and no more: the saved plan when one is given (the
    // clouds may have moved since it was made; what now needs more than it showed is refused as
    // BeyondPlan, as Terraform applies a saved plan or nothing), else the plan just made. That
    // plan is the one shown and asked about.
    let approved = from_file.as_ref().map_or(&p, |f| &f.plan);
    approver.review(approved, &crate::cost::of_run(l, approved, &graph));
    if !approved.has_changes() {
        return Ok(Applied { summary: None, outputs: outputs(s, &state), state });
    }
    approver.approve(approved, "Do you want to perform these actions?")?;
    let summary = carry_out(s, &providers, &graph, &mut state, &backend, approved, opts.walk).await?;
    Ok(Applied { summary: Some(summary), outputs: outputs(s, &state), state })
}

/// `xcsp destroy`: every resource state records (and, with `sweep`, whatever carries the stack's
/// tags) deleted, once `approver` says yes. `None` when there was nothing to destroy.
pub async fn destroy(s: &Stack, approver: &dyn Approver, sweep: bool, walk: Walk) -> crate::Result<Option<Summary>> {
    let l = &s.loaded;
    let (backend, _held, mut state) = open(s, "destroy").await?;
    let kinds = if sweep {
        needed(&in_reach(s, &state), &state)
    } else {
        state.resources.keys().map(|a| a.rtype.provider()).collect()
    };
    let kube = kubeconfig(s, &kinds, true)?;
    let providers = clouds::providers(&l.model, &kinds, kube.as_ref()).await?;
    if sweep || !state.resources.is_empty() {
        let adopt = if sweep { Adopt::All } else { Adopt::Known };
        refresh(s, &providers, &mut state, adopt, &walk.events).await?;
        backend.write(&mut state).await?;
    }
    let doomed: Vec<Address> = state.resources.iter().filter(|(_, r)| r.id.is_some()).map(|(a, _)| a.clone()).collect();
    // What the approver is asked about: every recorded resource deleted.
    let gone = Plan {
        stack: l.model.stack.clone(),
        spec_digest: l.model.digest.clone(),
        changes: doomed
            .iter()
            .map(|a| plan::Change {
                address: a.clone(),
                action: Action::Delete,
                before: None,
                after: None,
                replace_because: vec![],
            })
            .collect(),
    };
    approver.review_destroy(&doomed);
    let summary = if !doomed.is_empty() {
        approver.approve(&gone, "Do you really want to destroy all resources of this stack?")?;
        let run = new_run(s, providers.clone(), walk.events.clone(), walk.cancel.clone());
        let mut store = Saver(backend.clone());
        let summary = xcsp_engine::destroy(&run, &mut state, &mut store).await?;
        drop(run);
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
        refresh(s, &providers, &mut fresh, Adopt::All, &Events::none()).await?;
        if !fresh.resources.is_empty() {
            if let Some(done) = &summary {
                for (_, _, error) in &done.failed {
                    s.say.diag(error.clone());
                }
            }
            let remaining =
                fresh.resources.iter().map(|(a, r)| format!("{a} ({})", r.id.as_deref().unwrap_or("?"))).collect();
            return Err(StackError::Remaining { remaining }.into());
        }
    }
    Ok(summary)
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

/// The replicas of the MachineSets state records, as the spec sets them.
fn machines_wanted(l: &xcsp_plans::Loaded, state: &State) -> usize {
    l.graph
        .nodes()
        .filter(|n| {
            n.address.rtype == xcsp_core::ResourceType::K8sMachineSet && state.resources.contains_key(&n.address)
        })
        .filter_map(|n| n.attributes.get("replicas").and_then(|v| v.as_i64()))
        .map(|r| r.max(0) as usize)
        .sum()
}

/// What `xcsp status` finds.
pub struct Status {
    pub health: crate::health::Health,
    pub outputs: Vec<Output>,
    /// State as refreshed (not written back).
    pub state: State,
}

impl Status {
    /// Every tunnel up on both sides and every machine of the pool a Ready Node.
    pub fn fine(&self) -> bool {
        self.health.healthy() && self.health.pool_ready()
    }
}

/// `xcsp status`: the stack refreshed (state is not written), each link's tunnels and conditions,
/// the identities, the pool's machines and what keeps each from being a Ready Node. It writes
/// nothing, so it takes no lock: it can follow an apply another run (or the controller) is making.
pub async fn status(s: &Stack) -> crate::Result<Status> {
    let state = refreshed(s).await?;
    Ok(Status { health: health_of(s, &state).await, outputs: outputs(s, &state), state })
}

/// The stack's state as recorded, refreshed from the clouds; read without the lock and not written.
pub async fn refreshed(s: &Stack) -> crate::Result<State> {
    let mut state = backend(s).await?.read().await?.unwrap_or_else(|| State::new(s.name()));
    if !state.resources.is_empty() {
        let (_, providers) = reach(s, &state, false).await?;
        refresh(s, &providers, &mut state, Adopt::Known, &Events::none()).await?;
    }
    Ok(state)
}

/// The stack's health from `state` as refreshed, with the cluster's view of the pool when it can be
/// read (a read that fails is said and left out).
pub async fn health_of(s: &Stack, state: &State) -> crate::health::Health {
    let l = &s.loaded;
    let mut health = crate::health::health(&l.model, state);
    health.pools = crate::health::pools(&l.graph, state);
    // The pool's machines, when state records MachineSets and the cluster can be read. What they
    // ask for counts whether or not they can be read: machines nobody could see are not Ready.
    let sets = machine_sets(state);
    health.machines_wanted = machines_wanted(l, state);
    let federated = state.resources.keys().any(|a| a.rtype == xcsp_core::ResourceType::AzureFederatedCredential);
    if (federated || !sets.is_empty())
        && let Ok(found) = s.cluster()
    {
        if !sets.is_empty() {
            let labels: Vec<String> =
                l.model.pools.iter().map(|p| xcsp_plans::spec::pool_label(&l.model.cluster, &p.name.value)).collect();
            match xcsp_kube::pool::machines(&found.client_config(), &sets, &labels).await {
                Ok((machines, leftover)) => (health.machines, health.leftover) = (machines, leftover),
                Err(e) => s.say.warn(format_args!("cannot read the pool's machines: {e}")),
            }
            let nodes: Vec<String> =
                health.machines.iter().filter_map(|m| m.node.as_ref().map(|n| n.name.clone())).collect();
            match xcsp_kube::pool::ebs_csi(&found.client_config(), &nodes).await {
                Ok(Some(e)) => health.cluster.extend(crate::health::ebs_csi(&e)),
                Ok(None) => {}
                Err(e) => s.say.warn(format_args!("cannot read the EBS CSI driver: {e}")),
            }
            health.cluster.extend(crate::health::leftover(&health.leftover));
            let tolerance = l.model.pools.iter().map(|p| p.outage_tolerance_seconds.value).min().unwrap_or_default();
            match xcsp_kube::pool::outage_exposed(&found.client_config(), &nodes, tolerance - 1).await {
                Ok(exposed) if !nodes.is_empty() => health.cluster.push(crate::health::outage(&l.model, &exposed)),
                Ok(_) => {}
                Err(e) => s.say.warn(format_args!("cannot read the Pods on the pool's Nodes: {e}")),
            }
        }
        // The federated credentials against the token CAPZ presents (plan checked the spec's
        // values, unless it ran `--offline`; this reads what Azure holds now).
        if federated {
            match crate::preflight::survey(found).await {
                Ok(survey) => health.identities = crate::health::identities(state, &survey),
                Err(e) => s.say.warn(format_args!("cannot read the cluster: {e}")),
            }
        }
    }
    // The identities' role assignments, with or without the cluster.
    for r in crate::health::roles(&l.model, state) {
        match health.identities.iter_mut().find(|n| n.name == r.name) {
            Some(n) => n.conditions.extend(r.conditions),
            None => health.identities.push(r),
        }
    }
    health
}

/// The spec's outputs, with what `state` records filled in for values known only after apply.
/// The spec is evaluated again from the sources loaded at the start (not read again), with the
/// computed exports as values.
pub fn outputs(s: &Stack, state: &State) -> Vec<Output> {
    let l = &s.loaded;
    let recorded =
        |a: &xcsp_core::Address| state.resources.get(a).and_then(|r| Some((r.id.as_deref()?, &r.attributes)));
    let mut with_state = s.source.inputs.clone();
    with_state.computed = xcsp_plans::exports::computed(&l.exports, recorded);
    match xcsp_plans::check_sources(s.source.files.clone(), &with_state) {
        Ok(again) => again.model.outputs,
        Err(_) => l.model.outputs.clone(),
    }
}

/// One object `render` writes, or why an object of the spec is not written.
pub enum Rendered {
    Object(serde_json::Value),
    /// Its content is read from the cluster (an operator or controller writes the source).
    OnlyInCluster {
        address: Address,
        name: String,
        what: &'static str,
    },
}

/// `xcsp render`: the spec's Kubernetes objects with the values state records, in `capi_version`.
pub async fn render(s: &Stack, capi_version: &str) -> crate::Result<Vec<Rendered>> {
    let l = &s.loaded;
    let (_, guard, state) = open(s, "render").await?;
    drop(guard);
    let output_of = |from: &xcsp_core::Address, output: &str| {
        let r = state.resources.get(from)?;
        r.attributes
            .get(output)
            .cloned()
            .or_else(|| (output == "id").then(|| r.id.clone().map(xcsp_core::Value::string)).flatten())
    };
    let mut out = Vec::new();
    for node in l
        .graph
        .in_order()
        .into_iter()
        .filter(|n| n.address.rtype.provider() == ProviderKind::Kubernetes && !n.address.rtype.only_waits())
    {
        if let Some(what) = xcsp_kube::copied_at_apply(node.address.rtype) {
            let name = node.attributes.get("name").and_then(|v| v.as_str()).unwrap_or_default().to_string();
            out.push(Rendered::OnlyInCluster { address: node.address.clone(), name, what });
            continue;
        }
        let object = xcsp_kube::object(&l.model.stack, &node.address, &node.filled(output_of))
            .map_err(|e| StackError::Render(e.to_string()))?;
        // A Cluster's externally managed control plane goes before it.
        out.extend(xcsp_kube::control_plane::rendered_with(&object).into_iter().map(Rendered::Object));
        out.push(Rendered::Object(xcsp_kube::in_capi_version(object, capi_version)));
    }
    Ok(out)
}

/// `xcsp force-unlock`: removes the lock `id`, returning who held it.
pub async fn force_unlock(s: &Stack, id: &str) -> crate::Result<LockInfo> {
    Ok(backend(s).await?.force_unlock(id).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> xcsp_plans::validate::Model {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name);
        xcsp_plans::load(&dir, &Default::default()).unwrap_or_else(|_| panic!("{name} loads")).model
    }

    #[test]
    fn a_fips_clusters_stack_warns_a_non_fips_build_at_plan_and_stops_its_apply_unless_allowed() {
        let il5 = example("il5-govcloud");
        assert!(il5.cluster.fips.value, "the IL5 example's cluster runs in FIPS mode");
        // The FIPS build: nothing to say, plan or apply.
        assert!(check_build(&il5, true, false, false).unwrap().is_none());
        assert!(check_build(&il5, true, true, false).unwrap().is_none());
        // A non-FIPS build: plan warns, pointing at the spec's `fips`; apply refuses unless allowed.
        let warning = check_build(&il5, false, false, false).unwrap().expect("a warning at plan");
        assert!(!warning.is_error() && warning.code == "xcsp::fips::build", "{warning:?}");
        assert_eq!(warning.labels.len(), 1);
        let refused = check_build(&il5, false, true, false).unwrap_err();
        assert!(matches!(refused, StackError::NonFipsBuild));
        assert!(check_build(&il5, false, true, true).unwrap().is_some(), "allowed: applied, and still said");
        // A cluster not in FIPS mode asks nothing of the build.
        let commercial = example("public");
        assert!(!commercial.cluster.fips.value);
        assert!(check_build(&commercial, false, true, false).unwrap().is_none());
    }
}
