//! The walker: runs operations over a dependency graph on tokio.
//!
//! One loop owns the state. It starts an operation as soon as everything the resource depends on
//! is done, highest remaining path first, within a concurrency limit per provider; operations run
//! as tasks and report back to the loop, which records each result in state and saves it before
//! anything else happens. Nothing but the loop touches state, so a save always reflects every
//! completed operation, and a create's intent is saved before the create starts.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use xcsp_core::provider::{Attributes, BoxFuture, Observed, Provider, ProviderError, Request};
use xcsp_core::{Address, ProviderKind};
use xcsp_plans::graph::{Node, ResourceGraph};
use xcsp_plans::plan::{Action, compare};
use xcsp_state::{ResourceState, State, StateError};

use crate::events::{Event, Events};
use crate::schedule::{remaining_paths, typical_duration};

/// The providers a run may call, by kind.
#[derive(Clone, Default)]
pub struct Providers(HashMap<ProviderKind, Arc<dyn Provider>>);

impl Providers {
    pub fn new() -> Providers {
        Providers::default()
    }

    pub fn with(mut self, provider: Arc<dyn Provider>) -> Providers {
        self.0.insert(provider.kind(), provider);
        self
    }

    pub fn get(&self, kind: ProviderKind) -> Option<&Arc<dyn Provider>> {
        self.0.get(&kind)
    }

    pub fn kinds(&self) -> impl Iterator<Item = ProviderKind> + '_ {
        self.0.keys().copied()
    }
}

/// Which ready operation starts first when more are ready than may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Longest remaining path to the end of the run first.
    #[default]
    CriticalPath,
    /// In the order they became ready (for comparison in benchmarks).
    Fifo,
}

/// How many operations may run at once.
#[derive(Debug, Clone)]
pub struct Limits {
    /// In total.
    pub total: usize,
    /// Per provider; a provider that throttles gets fewer until it recovers.
    pub per_provider: HashMap<ProviderKind, usize>,
}

impl Default for Limits {
    fn default() -> Self {
        // Clouds limit request rates, not operations in flight, and an operation in flight mostly
        // waits (a VPN gateway polls for 30-45 minutes): ARM refills 10 writes/s per subscription
        // and principal, EC2's mutating bucket 5/s. These caps keep the burst far below both and
        // leave room beside ten 45-minute gateways; throttling halves them until it passes.
        let per_provider = [
            (ProviderKind::Local, 64),
            (ProviderKind::Aws, 10),
            (ProviderKind::Azure, 20),
            (ProviderKind::Kubernetes, 10),
        ]
        .into_iter()
        .collect();
        Limits { total: 32, per_provider }
    }
}

impl Limits {
    /// Caps every provider (and the total) at `n`.
    pub fn capped(mut self, n: usize) -> Limits {
        let n = n.max(1);
        self.total = self.total.min(n);
        for v in self.per_provider.values_mut() {
            *v = (*v).min(n);
        }
        self
    }
}

/// How often an operation is tried again.
#[derive(Debug, Clone)]
pub struct Retries {
    /// Runs of an operation that ended throttled (after the provider's own retries).
    pub throttled: u32,
    /// Tries of a delete that something still uses, and the first wait between them (doubling).
    pub in_use: u32,
    pub in_use_wait: Duration,
}

impl Default for Retries {
    fn default() -> Self {
        Retries { throttled: 5, in_use: 10, in_use_wait: Duration::from_secs(2) }
    }
}

/// Everything a run needs besides the graph and the state.
#[derive(Clone)]
pub struct Run {
    pub stack: String,
    pub providers: Providers,
    pub limits: Limits,
    pub order: Order,
    pub retries: Retries,
    pub events: Events,
    /// 0: go on; 1: start nothing new; 2 or more: abandon what is running.
    pub cancel: watch::Receiver<u32>,
    /// Resources that destroy must refuse to delete.
    pub protected: HashSet<Address>,
    /// The actions of the plan the user approved, by address (absent: no change). When set, an
    /// operation that would do more than its planned action (a replacement the plan showed as
    /// an update, a change where it showed none) is refused instead, naming both.
    pub approved: Option<HashMap<Address, Action>>,
    /// Recorded resources to replace whatever their attributes say (`apply --replace`).
    pub replace: HashSet<Address>,
}

impl Run {
    /// A run with the default limits and retries, critical path first, watched by nobody and
    /// never interrupted; callers change what they need.
    pub fn new(stack: &str, providers: Providers) -> Run {
        Run {
            stack: stack.to_string(),
            providers,
            limits: Limits::default(),
            order: Order::CriticalPath,
            retries: Retries::default(),
            events: Events::none(),
            cancel: watch::channel(0).1,
            protected: HashSet::new(),
            approved: None,
            replace: HashSet::new(),
        }
    }
}

/// Saves state; called after every change the walk makes to it, and awaited before the walk
/// goes on (a backend may be remote).
pub trait Store: Send {
    fn save<'a>(&'a mut self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>>;
}

/// A synchronous saver (a local file, a test's vector) is a store.
impl<F: FnMut(&mut State) -> Result<(), StateError> + Send> Store for F {
    fn save<'a>(&'a mut self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        let result = self(state);
        Box::pin(async move { result })
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Summary {
    pub done: Vec<(Address, Action)>,
    /// Resources whose desired attributes already hold: nothing was called.
    pub unchanged: usize,
    pub failed: Vec<(Address, Action, StepError)>,
    pub skipped: Vec<(Address, String)>,
    pub interrupted: bool,
}

/// Why one step of a run did not succeed: the cloud said no, or the engine would not ask it.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
pub enum StepError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Provider(#[from] ProviderError),

    /// A `--plan` apply reached a step the approved plan did not show.
    #[error(
        "{address}: BeyondPlan: the approved plan showed {planned}, but it now needs {needed} (something it depends on changed during this apply); nothing was done to it: run `xcsp plan` to see the change"
    )]
    #[diagnostic(code(xcsp::engine::beyond_plan))]
    BeyondPlan { address: Address, planned: &'static str, needed: &'static str },

    #[error("{address}: NoProvider: no {provider} provider is configured for this run")]
    #[diagnostic(code(xcsp::engine::no_provider))]
    NoProvider { address: Address, provider: &'static str },

    /// `prevent_destroy`: the step would destroy the resource (a delete, or the first half of a
    /// replacement).
    #[error("{address}: Protected: {}", if *.replacement { "the change needs a replacement, and the spec protects it from destruction (prevent_destroy)" } else { "the spec protects it from destruction (prevent_destroy)" })]
    #[diagnostic(code(xcsp::engine::protected))]
    Protected { address: Address, replacement: bool },

    /// The task running the operation ended without an answer (it panicked).
    #[error("{address}: Panic: the operation stopped unexpectedly: {detail}")]
    #[diagnostic(code(xcsp::engine::panic))]
    Panicked { address: Address, detail: String },
}

impl Summary {
    pub fn succeeded(&self) -> bool {
        self.failed.is_empty() && self.skipped.is_empty() && !self.interrupted
    }
}

enum Work {
    /// Make the resource match this node.
    Converge(Node),
    /// Remove the recorded resource.
    Remove,
}

struct Item {
    kind: ProviderKind,
    deps: Vec<Address>,
    work: Work,
}

/// What an operation task hands back to the loop.
enum Outcome {
    Written(Observed),
    Removed,
}

type TaskResult = (Address, Action, Attributes, Result<Outcome, StepError>);

/// Brings the clouds to the graph: creates, updates and replaces its resources, and removes the
/// recorded ones it no longer has (after whatever depended on them).
pub async fn apply(
    run: &Run,
    graph: &ResourceGraph,
    state: &mut State,
    store: &mut dyn Store,
) -> Result<Summary, StateError> {
    let mut items: BTreeMap<Address, Item> = graph
        .nodes()
        .map(|n| {
            let item =
                Item { kind: n.address.rtype.provider(), deps: n.dependencies(), work: Work::Converge(n.clone()) };
            (n.address.clone(), item)
        })
        .collect();
    let removed: Vec<Address> = state.resources.keys().filter(|a| graph.get(a).is_none()).cloned().collect();
    let mut removals = removal_items(state, &removed);
    // A removed resource that a kept one was recorded depending on goes only after that one has
    // converged: a superseded machine template after the MachineSets point at its successor.
    for (a, item) in removals.iter_mut() {
        for (kept, r) in &state.resources {
            if graph.get(kept).is_some() && r.dependencies.contains(a) {
                item.deps.push(kept.clone());
            }
        }
    }
    items.extend(removals);
    walk(run, items, state, store).await
}

/// Removes every recorded resource, dependents first.
pub async fn destroy(run: &Run, state: &mut State, store: &mut dyn Store) -> Result<Summary, StateError> {
    let all: Vec<Address> = state.resources.keys().cloned().collect();
    let items = removal_items(state, &all);
    walk(run, items, state, store).await
}

/// Removal of `addresses`: each waits for the removal of everything (among them) that depends on it.
fn removal_items(state: &State, addresses: &[Address]) -> BTreeMap<Address, Item> {
    let set: HashSet<&Address> = addresses.iter().collect();
    let mut deps: BTreeMap<Address, Vec<Address>> = addresses.iter().map(|a| (a.clone(), Vec::new())).collect();
    for a in addresses {
        for d in &state.resources[a].dependencies {
            if set.contains(d) {
                deps.get_mut(d).expect("every removal has an entry").push(a.clone());
            }
        }
    }
    // The cluster's objects go before any cloud resource: machines drain over the link and use
    // the subnet, and the objects name what they run on.
    let cluster: Vec<Address> =
        addresses.iter().filter(|a| a.rtype.provider() == ProviderKind::Kubernetes).cloned().collect();
    for (a, d) in deps.iter_mut() {
        if a.rtype.provider() != ProviderKind::Kubernetes {
            d.extend(cluster.iter().cloned());
        }
    }
    deps.into_iter()
        .map(|(a, deps)| {
            let item = Item { kind: a.rtype.provider(), deps, work: Work::Remove };
            (a, item)
        })
        .collect()
}

/// Reads producer outputs from state: an attribute, or the cloud id for `id`.
fn output_of(state: &State, from: &Address, output: &str) -> Option<xcsp_core::Value> {
    let r = state.resources.get(from)?;
    r.id.as_ref()?;
    match r.attributes.get(output) {
        Some(v) => Some(v.clone()),
        None if output == "id" => r.id.clone().map(xcsp_core::Value::string),
        None => None,
    }
}

struct Walker<'r> {
    run: &'r Run,
    items: BTreeMap<Address, Item>,
    waiting_on: HashMap<Address, usize>,
    successors: HashMap<Address, Vec<Address>>,
    priority: HashMap<Address, Duration>,
    /// Each item's remaining chain of typical durations (for the estimate, whatever the order).
    paths: HashMap<Address, Duration>,
    /// Typical and actual durations of the finished operations, summed.
    pace: (Duration, Duration),
    ready: BinaryHeap<(Duration, Reverse<u64>, Address)>,
    seq: u64,
    limit: HashMap<ProviderKind, usize>,
    running: HashMap<ProviderKind, usize>,
    throttled: HashMap<Address, u32>,
    started: HashMap<Address, Instant>,
    summary: Summary,
    finished: HashSet<Address>,
    /// Serial keys ([`Provider::serial_key`]) of running operations, and the ready items that
    /// wait for one to be free (they hold no slot meanwhile).
    serial: HashMap<Address, String>,
    parked: HashMap<String, Vec<Address>>,
}

impl<'r> Walker<'r> {
    fn new(run: &'r Run, items: BTreeMap<Address, Item>) -> Walker<'r> {
        let mut successors: HashMap<Address, Vec<Address>> = HashMap::new();
        let mut waiting_on = HashMap::new();
        for (a, item) in &items {
            let deps: Vec<&Address> = item.deps.iter().filter(|d| items.contains_key(*d)).collect();
            waiting_on.insert(a.clone(), deps.len());
            for d in deps {
                successors.entry(d.clone()).or_default().push(a.clone());
            }
        }
        let costs = items.keys().map(|a| (a.clone(), typical_duration(a.rtype))).collect();
        let paths = remaining_paths(&costs, &successors);
        let priority = match run.order {
            Order::CriticalPath => paths.clone(),
            Order::Fifo => HashMap::new(),
        };
        let limit = run.limits.per_provider.clone();
        let mut w = Walker {
            run,
            items,
            waiting_on,
            successors,
            priority,
            paths,
            pace: (Duration::ZERO, Duration::ZERO),
            ready: BinaryHeap::new(),
            seq: 0,
            limit,
            running: HashMap::new(),
            throttled: HashMap::new(),
            started: HashMap::new(),
            summary: Summary::default(),
            finished: HashSet::new(),
            serial: HashMap::new(),
            parked: HashMap::new(),
        };
        let roots: Vec<Address> = w.waiting_on.iter().filter(|(_, n)| **n == 0).map(|(a, _)| a.clone()).collect();
        let mut roots = roots;
        roots.sort();
        for a in roots {
            w.make_ready(a);
        }
        w
    }

    /// The run's remaining time as [`Event::Estimate`] states it: per item not yet finished, its
    /// remaining chain of typical durations (less what a running one has already taken), scaled
    /// by the finished operations' actual/typical ratio; the longest of them.
    fn estimate(&self) -> Duration {
        let (typical, actual) = self.pace;
        let scale = if typical.is_zero() { 1.0 } else { actual.as_secs_f64() / typical.as_secs_f64() };
        let failed: HashSet<&Address> = self.summary.failed.iter().map(|(a, _, _)| a).collect();
        let secs = self
            .items
            .keys()
            .filter(|a| !self.finished.contains(*a) && !failed.contains(a))
            .map(|a| {
                let chain = self.paths.get(a).copied().unwrap_or_default().as_secs_f64() * scale;
                let spent = self.started.get(a).map(|t| t.elapsed().as_secs_f64()).unwrap_or_default();
                (chain - spent).max(0.0)
            })
            .fold(0.0f64, f64::max);
        Duration::from_secs_f64(secs)
    }

    fn make_ready(&mut self, a: Address) {
        let p = self.priority.get(&a).copied().unwrap_or_default();
        self.seq += 1;
        self.ready.push((p, Reverse(self.seq), a));
    }

    fn in_flight(&self) -> usize {
        self.running.values().sum()
    }

    /// The highest-priority ready item whose provider has room, if any.
    fn next_startable(&mut self) -> Option<Address> {
        if self.in_flight() >= self.run.limits.total {
            return None;
        }
        let mut held = Vec::new();
        let mut found = None;
        while let Some(entry) = self.ready.pop() {
            let kind = self.items[&entry.2].kind;
            let cap = self.limit.get(&kind).copied().unwrap_or(1);
            if self.running.get(&kind).copied().unwrap_or(0) < cap {
                found = Some(entry.2);
                break;
            }
            held.push(entry);
        }
        self.ready.extend(held);
        found
    }

    /// Whether an operation holding `key` runs; if so, `a` waits for it, parked.
    fn park_behind(&mut self, key: &str, a: &Address) -> bool {
        if !self.serial.values().any(|k| k == key) {
            return false;
        }
        self.parked.entry(key.to_string()).or_default().push(a.clone());
        true
    }

    /// `a` stopped running: what waited for its serial key is ready again.
    fn release(&mut self, a: &Address) {
        if let Some(key) = self.serial.remove(a) {
            for p in self.parked.remove(&key).unwrap_or_default() {
                self.make_ready(p);
            }
        }
    }

    /// Marks `a` done and readies what waited only for it.
    fn complete(&mut self, a: &Address) {
        self.finished.insert(a.clone());
        for s in self.successors.get(a).cloned().unwrap_or_default() {
            let n = self.waiting_on.get_mut(&s).expect("successors are items");
            *n -= 1;
            if *n == 0 {
                self.make_ready(s);
            }
        }
    }

    /// For every item that never ran: the failed dependency that kept it back, or the interruption.
    fn skipped(&self) -> Vec<(Address, String)> {
        let failed: HashSet<&Address> = self.summary.failed.iter().map(|(a, _, _)| a).collect();
        let mut out = Vec::new();
        for a in self.items.keys() {
            if self.finished.contains(a) || failed.contains(a) {
                continue;
            }
            let mut stack = vec![a];
            let mut seen = HashSet::new();
            let mut because = None;
            while let Some(x) = stack.pop() {
                for d in &self.items[x].deps {
                    if failed.contains(d) {
                        because = Some(format!("{d} failed"));
                        break;
                    }
                    if self.items.contains_key(d) && seen.insert(d) {
                        stack.push(d);
                    }
                }
                if because.is_some() {
                    break;
                }
            }
            let because = because.unwrap_or_else(|| "the run was interrupted".to_string());
            out.push((a.clone(), because));
        }
        out
    }
}

async fn walk(
    run: &Run,
    items: BTreeMap<Address, Item>,
    state: &mut State,
    store: &mut dyn Store,
) -> Result<Summary, StateError> {
    let mut w = Walker::new(run, items);
    run.events.send(Event::Estimate { remaining: w.estimate() });
    let mut tasks: JoinSet<TaskResult> = JoinSet::new();
    let mut task_kind: HashMap<tokio::task::Id, (Address, ProviderKind)> = HashMap::new();
    let mut cancel = run.cancel.clone();
    let mut level = *cancel.borrow();
    let mut cancel_open = true;

    loop {
        // Start all that may start (nothing new once interrupted).
        while let Some(a) = if level == 0 { w.next_startable() } else { None } {
            let kind = w.items[&a].kind;
            match prepare(run, &w.items[&a], &a, state)? {
                Prepared::Nothing => {
                    w.summary.unchanged += 1;
                    w.complete(&a);
                }
                Prepared::Run { op, desired, id, provider, intent } => {
                    let req = Request { stack: &run.stack, address: &a, id: id.as_deref(), attributes: &desired };
                    if let Some(key) = provider.serial_key(&req) {
                        if w.park_behind(&key, &a) {
                            continue;
                        }
                        w.serial.insert(a.clone(), key);
                    }
                    if let Some(intent) = intent {
                        state.resources.insert(a.clone(), intent);
                        store.save(state).await?;
                    }
                    run.events.send(Event::Started { address: a.clone(), op });
                    w.started.insert(a.clone(), Instant::now());
                    *w.running.entry(kind).or_default() += 1;
                    let handle = tasks.spawn(operate(run.clone(), provider, a.clone(), op, desired, id));
                    task_kind.insert(handle.id(), (a, kind));
                }
                Prepared::Refuse(op, error) => {
                    run.events.send(Event::Failed { address: a.clone(), op, error: error.to_string() });
                    w.summary.failed.push((a, op, error));
                }
            }
        }
        if tasks.is_empty() {
            break;
        }
        tokio::select! {
            joined = tasks.join_next_with_id() => {
                let Some(joined) = joined else { continue };
                let (address, op, desired, result) = match joined {
                    Ok((id, r)) => {
                        task_kind.remove(&id);
                        r
                    }
                    Err(e) => {
                        let (address, _) = task_kind.remove(&e.id()).expect("every task is registered");
                        let op = if matches!(w.items[&address].work, Work::Remove) { Action::Delete } else { Action::Create };
                        let err = StepError::Panicked { address: address.clone(), detail: e.to_string() };
                        (address, op, Attributes::new(), Err(err))
                    }
                };
                let kind = w.items[&address].kind;
                *w.running.get_mut(&kind).expect("was running") -= 1;
                w.release(&address);
                let elapsed = w.started.get(&address).map(Instant::elapsed).unwrap_or_default();
                match result {
                    Ok(outcome) => {
                        record(state, &w.items[&address], &address, desired, outcome);
                        store.save(state).await?;
                        run.events.send(Event::Finished { address: address.clone(), op, elapsed });
                        w.summary.done.push((address.clone(), op));
                        let max = run.limits.per_provider.get(&kind).copied().unwrap_or(1);
                        let cap = w.limit.entry(kind).or_insert(max);
                        *cap = (*cap + 1).min(max);
                        w.complete(&address);
                        let typical = typical_duration(address.rtype);
                        if !typical.is_zero() {
                            w.pace = (w.pace.0 + typical, w.pace.1 + elapsed);
                        }
                        run.events.send(Event::Estimate { remaining: w.estimate() });
                    }
                    Err(StepError::Provider(ProviderError::Throttled { .. }))
                        if w.throttled.get(&address).copied().unwrap_or(0) < run.retries.throttled =>
                    {
                        *w.throttled.entry(address.clone()).or_default() += 1;
                        let cap = w.limit.entry(kind).or_insert(1);
                        *cap = (*cap / 2).max(1);
                        run.events.send(Event::Throttled { address: address.clone(), limit: *cap });
                        w.make_ready(address);
                    }
                    Err(error) => {
                        run.events.send(Event::Failed { address: address.clone(), op, error: error.to_string() });
                        w.summary.failed.push((address, op, error));
                    }
                }
            }
            changed = cancel.changed(), if cancel_open => {
                if changed.is_err() {
                    cancel_open = false;
                    continue;
                }
                level = *cancel.borrow();
                if level == 1 {
                    run.events.send(Event::Stopping { in_flight: tasks.len() });
                } else if level >= 2 {
                    run.events.send(Event::Abandoning { in_flight: tasks.len() });
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    break;
                }
            }
        }
    }
    w.summary.interrupted = level > 0;
    w.summary.skipped = w.skipped();
    for (address, because) in &w.summary.skipped {
        run.events.send(Event::Skipped { address: address.clone(), because: because.clone() });
    }
    // Intents of abandoned creates stay in state: the next refresh adopts what they left.
    store.save(state).await?;
    Ok(w.summary)
}

enum Prepared {
    /// Already as desired.
    Nothing,
    Run {
        op: Action,
        desired: Attributes,
        id: Option<String>,
        provider: Arc<dyn Provider>,
        intent: Option<ResourceState>,
    },
    Refuse(Action, StepError),
}

/// Decides, from the state as it is now (every dependency done), what to do with one item.
fn prepare(run: &Run, item: &Item, a: &Address, state: &State) -> Result<Prepared, StateError> {
    let recorded = state.resources.get(a).filter(|r| r.id.is_some());
    let op = match (&item.work, recorded) {
        (Work::Remove, None) => Action::Delete,
        (Work::Remove, Some(_)) => Action::Delete,
        (Work::Converge(_), None) => Action::Create,
        (Work::Converge(node), Some(r)) => {
            let desired = node.filled(|from, output| output_of(state, from, output));
            match compare(a, &desired, &r.attributes).0 {
                _ if run.replace.contains(a) => Action::Replace,
                Action::NoOp => return Ok(Prepared::Nothing),
                Action::Replace => Action::Replace,
                _ => Action::Update,
            }
        }
    };
    if let (Some(approved), Work::Converge(_)) = (&run.approved, &item.work) {
        let planned = approved.get(a).copied().unwrap_or(Action::NoOp);
        let within = match op {
            Action::Create => matches!(planned, Action::Create | Action::Replace),
            Action::Update => matches!(planned, Action::Update | Action::Replace),
            Action::Replace => planned == Action::Replace,
            Action::Delete | Action::NoOp => true,
        };
        if !within {
            let error = StepError::BeyondPlan { address: a.clone(), planned: planned.words(), needed: op.words() };
            return Ok(Prepared::Refuse(op, error));
        }
    }
    let Some(provider) = run.providers.get(item.kind).cloned() else {
        let error = StepError::NoProvider { address: a.clone(), provider: item.kind.title() };
        return Ok(Prepared::Refuse(op, error));
    };
    if op == Action::Replace && run.protected.contains(a) {
        let error = StepError::Protected { address: a.clone(), replacement: true };
        return Ok(Prepared::Refuse(op, error));
    }
    match &item.work {
        Work::Remove => {
            if run.protected.contains(a) {
                let error = StepError::Protected { address: a.clone(), replacement: false };
                return Ok(Prepared::Refuse(op, error));
            }
            match recorded {
                // Only an intent: nothing was confirmed, and a refresh before the run found nothing.
                None => Ok(Prepared::Nothing),
                Some(r) => {
                    Ok(Prepared::Run { op, desired: r.attributes.clone(), id: r.id.clone(), provider, intent: None })
                }
            }
        }
        Work::Converge(node) => {
            let desired = node.filled(|from, output| output_of(state, from, output));
            let id = recorded.and_then(|r| r.id.clone());
            let intent = (op == Action::Create).then(|| ResourceState {
                id: None,
                attributes: desired.clone(),
                dependencies: node.dependencies(),
            });
            Ok(Prepared::Run { op, desired, id, provider, intent })
        }
    }
}

/// Runs one operation against its provider.
async fn operate(
    run: Run,
    provider: Arc<dyn Provider>,
    address: Address,
    op: Action,
    desired: Attributes,
    id: Option<String>,
) -> TaskResult {
    let existing = Request { stack: &run.stack, address: &address, id: id.as_deref(), attributes: &desired };
    let new = Request { id: None, ..existing.clone() };
    let result = match op {
        Action::Create => provider.write(new, &run.events).await.map(Outcome::Written),
        Action::Update => provider.write(existing, &run.events).await.map(Outcome::Written),
        Action::Replace => match remove(&run, provider.as_ref(), existing).await {
            Ok(()) => provider.write(new, &run.events).await.map(Outcome::Written),
            Err(e) => Err(e),
        },
        Action::Delete => remove(&run, provider.as_ref(), existing).await.map(|()| Outcome::Removed),
        Action::NoOp => unreachable!("prepare never runs a step with nothing to do"),
    };
    (address.clone(), op, desired.clone(), result.map_err(StepError::from))
}

/// Deletes, waiting and trying again while the cloud says something still uses the resource.
async fn remove(run: &Run, provider: &dyn Provider, req: Request<'_>) -> Result<(), ProviderError> {
    let mut wait = run.retries.in_use_wait;
    let mut tries = 1;
    loop {
        match provider.delete(req.clone(), &run.events).await {
            Err(ProviderError::InUse { detail, .. }) if tries < run.retries.in_use => {
                let what = format!("still in use ({detail}); trying again in {}s", wait.as_secs());
                run.events.send(Event::Waiting { address: req.address.clone(), what });
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(60));
                tries += 1;
            }
            Err(ProviderError::NotFound { .. }) => return Ok(()),
            other => return other,
        }
    }
}

/// Records a finished operation in state.
fn record(state: &mut State, item: &Item, a: &Address, desired: Attributes, outcome: Outcome) {
    match outcome {
        Outcome::Removed => {
            state.resources.remove(a);
        }
        Outcome::Written(observed) => {
            let dependencies = match &item.work {
                Work::Converge(node) => node.dependencies(),
                Work::Remove => Vec::new(),
            };
            let mut attributes = desired;
            for (k, v) in observed.attributes {
                attributes.insert(k, v);
            }
            // The write returned, so whatever it waits for after its call is done.
            state.resources.insert(a.clone(), ResourceState { id: Some(observed.id), attributes, dependencies });
        }
    }
}
