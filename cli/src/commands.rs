//! Each command over `xcsp_stack`: what it prints, what it asks, and its exit code. Nothing here
//! decides what happens to a stack.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use xcsp_core::Address;
use xcsp_engine::{Action, Event, Events, Summary};
use xcsp_plans::plan::{self, Plan};
use xcsp_stack::run::{self, ApplyOptions, Rendered, Walk};
use xcsp_stack::{Always, Approver, Never, Stack, StackError, cost, health, preflight, rotate};

use crate::progress::{self, Mode};
use crate::report::{self, CliError};
use crate::views;

/// The terminal as approver: shows each plan (not with `--json`), asks for "yes" unless
/// `--auto-approve`, and starts the progress view once a plan is approved.
struct Terminal {
    stack: String,
    auto_approve: bool,
    mode: Mode,
    events: Mutex<Option<UnboundedReceiver<Event>>>,
    view: Mutex<Option<JoinHandle<()>>>,
    /// Counts Ctrl-C once a plan is approved; before, Ctrl-C ends the command as any signal does
    /// (nothing has changed yet).
    interrupts: Mutex<Option<watch::Sender<u32>>>,
}

impl Terminal {
    /// The terminal for `s`, and the cancellation its approval arms.
    fn new(
        s: &Stack,
        auto_approve: bool,
        mode: Mode,
        events: Option<UnboundedReceiver<Event>>,
    ) -> (Terminal, watch::Receiver<u32>) {
        let (tx, rx) = watch::channel(0u32);
        let terminal = Terminal {
            stack: s.name().to_string(),
            auto_approve,
            mode,
            events: Mutex::new(events),
            view: Mutex::new(None),
            interrupts: Mutex::new(Some(tx)),
        };
        (terminal, rx)
    }

    /// Waits for the progress view to draw the run's last events.
    async fn finish(&self) {
        let view = self.view.lock().expect("not poisoned").take();
        if let Some(view) = view {
            let _ = view.await;
        }
    }
}

impl Approver for Terminal {
    fn review(&self, p: &Plan, cost: &cost::Estimate) {
        if self.mode != Mode::Json {
            print!("{}{}", plan::render(p), views::cost::render(cost));
        }
    }

    fn review_destroy(&self, doomed: &[Address]) {
        if self.mode == Mode::Json {
            return;
        }
        if doomed.is_empty() {
            println!("Nothing to destroy: the stack `{}` has no resources.", self.stack);
        } else {
            println!("xcsp will destroy {} resources:", doomed.len());
            for a in doomed {
                println!("  - {a}");
            }
        }
    }

    fn approve(&self, p: &Plan, question: &str) -> Result<(), StackError> {
        confirm(self.auto_approve, question)?;
        if let Some(tx) = self.interrupts.lock().expect("not poisoned").take() {
            count_interrupts(tx);
        }
        let changes = p.changes.iter().filter(|c| c.action != Action::NoOp).count();
        if let Some(rx) = self.events.lock().expect("not poisoned").take() {
            *self.view.lock().expect("not poisoned") = Some(progress::spawn(self.mode, rx, changes));
        }
        Ok(())
    }
}

/// Asks for "yes" on a terminal; refuses to go on without `--auto-approve` elsewhere.
fn confirm(auto_approve: bool, question: &str) -> Result<(), StackError> {
    if auto_approve {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(StackError::refused(CliError::NoTerminal));
    }
    print!("\n{question}\n  Only 'yes' will be accepted: ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() == "yes" { Ok(()) } else { Err(StackError::refused(CliError::Cancelled)) }
}

/// Ctrl-C once: start nothing new; twice: abandon what runs.
fn count_interrupts(tx: watch::Sender<u32>) {
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            tx.send_modify(|n| *n += 1);
        }
    });
}

/// Ctrl-C counted from now on ([`count_interrupts`]).
fn interrupts() -> watch::Receiver<u32> {
    let (tx, rx) = watch::channel(0u32);
    count_interrupts(tx);
    rx
}

/// A run's events for the view, and what stops it (Ctrl-C, once the plan is approved).
fn walk(s: &Stack, json: bool, auto_approve: bool) -> (Terminal, Walk) {
    let mode = Mode::pick(json);
    let (tx, rx) = mpsc::unbounded_channel();
    let (terminal, cancel) = Terminal::new(s, auto_approve, mode, Some(rx));
    (terminal, Walk { events: Events::new(tx), cancel })
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
    for (_, _, error) in &summary.failed {
        report::diag(error);
    }
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

pub struct PlanOptions {
    pub json: bool,
    pub detailed_exitcode: bool,
    pub out: Option<PathBuf>,
    pub refresh: bool,
    pub replace: Vec<String>,
}

pub async fn plan(s: &Stack, opts: PlanOptions) -> miette::Result<ExitCode> {
    let planned = run::plan(s, opts.refresh, &opts.replace).await?;
    if let Some(out) = opts.out {
        // Owner-only (0600), as state is.
        xcsp_state::local::write_private(&out, &planned.sealed(s)?).map_err(|source| CliError::Write {
            what: "write",
            path: out.clone(),
            source,
        })?;
    }
    let p = &planned.plan;
    if opts.json {
        // The plan as it is saved, with its monthly cost beside it.
        let mut shown = serde_json::to_value(p.redacted()).expect("plans serialize");
        shown["cost"] = serde_json::to_value(&planned.cost).expect("estimates serialize");
        println!("{}", serde_json::to_string_pretty(&shown).expect("plans serialize"));
    } else {
        print!("{}{}", plan::render(p), views::cost::render(&planned.cost));
    }
    Ok(if opts.detailed_exitcode && p.has_changes() { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

pub async fn apply(
    s: &Stack,
    json: bool,
    auto_approve: bool,
    saved: Option<PathBuf>,
    replace: Vec<String>,
) -> miette::Result<ExitCode> {
    let saved = match saved {
        Some(path) => {
            let bytes = std::fs::read(&path).map_err(|source| StackError::Read {
                what: "the plan",
                path: path.clone(),
                source,
            })?;
            Some((path, bytes))
        }
        None => None,
    };
    let (terminal, walk) = walk(s, json, auto_approve);
    let applied = run::apply(s, &terminal, ApplyOptions { saved, replace, walk }).await;
    terminal.finish().await;
    let applied = applied?;
    let Some(summary) = applied.summary else { return Ok(ExitCode::SUCCESS) };
    let code = finish("Apply", &summary);
    if !json {
        print!("{}", plan::render_outputs(&applied.outputs));
    }
    code
}

pub async fn destroy(s: &Stack, json: bool, auto_approve: bool, sweep: bool) -> miette::Result<ExitCode> {
    let (terminal, walk) = walk(s, json, auto_approve);
    let summary = run::destroy(s, &terminal, sweep, walk).await;
    terminal.finish().await;
    match summary? {
        Some(done) => finish("Destroy", &done),
        None => Ok(ExitCode::SUCCESS),
    }
}

pub async fn status(s: &Stack, json: bool) -> miette::Result<ExitCode> {
    let status = run::status(s).await?;
    let health = &status.health;
    if json {
        println!("{}", serde_json::to_string_pretty(&health::to_json(health)).expect("status serializes"));
    } else {
        print!("{}", views::health::render(health));
        print!("{}", plan::render_outputs(&status.outputs));
    }
    // 2 when a tunnel is down or a machine of the pool is not a Ready node.
    Ok(if status.fine() { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

pub async fn rotate(s: &Stack, auto_approve: bool, opts: rotate::Options) -> miette::Result<ExitCode> {
    let (terminal, cancel) = Terminal::new(s, auto_approve, Mode::Lines, None);
    let walk = Walk { events: Events::none(), cancel };
    let rotated = rotate::rotate(s, &terminal, opts, walk).await?;
    println!("\nRotated {rotated} keys; every tunnel up on both sides.");
    Ok(ExitCode::SUCCESS)
}

pub async fn watch(s: &Stack, auto_approve: bool, every: Duration) -> miette::Result<ExitCode> {
    let walk = Walk { events: Events::none(), cancel: interrupts() };
    let approver: &dyn Approver = if auto_approve { &Always } else { &Never };
    xcsp_stack::watch::watch(s, approver, auto_approve, every, walk).await?;
    Ok(ExitCode::SUCCESS)
}

/// `xcsp preflight`: what the cluster is, then the verdict; exit 1 when something stops the pool.
pub async fn preflight(s: &Stack, json: bool) -> miette::Result<ExitCode> {
    let (survey, problems) = preflight::read(&s).await?;
    if json {
        let said: Vec<serde_json::Value> = problems
            .iter()
            .map(|p| serde_json::json!({"severity": if p.is_error() { "error" } else { "warning" }, "code": p.code, "message": p.message}))
            .collect();
        let chosen = preflight::providers(&s.loaded.model, &survey);
        let out = serde_json::json!({"cluster": survey, "problems": said,
            "boots": preflight::boots(&s.loaded.model, &survey),
            "providers": {"core": preflight::source_text(&chosen.core), "azure": preflight::source_text(&chosen.azure),
                "approver": preflight::source_text(&chosen.approver)}});
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
    } else {
        print!("{}", preflight::describe(&survey));
        let chosen = preflight::providers(&s.loaded.model, &survey);
        println!(
            "Providers:    Cluster API's core {}; CAPZ {}",
            preflight::source_text(&chosen.core),
            preflight::source_text(&chosen.azure)
        );
        for line in preflight::boots(&s.loaded.model, &survey) {
            println!("Boots:        {line}");
        }
        let ns = xcsp_plans::spec::pool_namespace(s.name(), &s.loaded.model.cluster);
        println!(
            "Pool objects: namespace {ns} (the pool's own: {} admits one Cluster, OpenShift's)",
            xcsp_kube::survey::OPENSHIFT_CAPI_NAMESPACE
        );
    }
    preflight::stop_on_errors(problems, &s.say)?;
    if !json {
        println!("\nThe cluster can take the pool.");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn render(s: &Stack, dir: &Path, capi_version: &str) -> miette::Result<ExitCode> {
    let mut objects = Vec::new();
    for r in run::render(s, capi_version).await? {
        match r {
            Rendered::Object(o) => objects.push(o),
            Rendered::OnlyInCluster { address, name, what } => println!(
                "not rendered: {address} ({name}) holds {what}, which only the cluster has; with kubernetes_objects = \"apply\" xcsp writes it there"
            ),
        }
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

pub async fn force_unlock(s: &Stack, id: &str) -> miette::Result<ExitCode> {
    let held = run::force_unlock(s, id).await?;
    println!("Removed the lock held by {} (pid {} on {}) for `{}`.", held.holder, held.pid, held.host, held.operation);
    Ok(ExitCode::SUCCESS)
}
