//! What can be done to one stack, whoever asks: plan, apply, destroy, status and its conditions,
//! drift and repair (`watch`), key rotation, preflight, cost, timeline data. The command line
//! (`cli/`) and the in-cluster controller are front ends over it: they hold flags, the
//! environment's command-line conventions, prompts, rendering and exit codes; this crate holds
//! every decision.
//!
//! A [`Stack`] is the run context: the loaded spec (planned once; nothing here reads it again),
//! where its state lives, how runs go, and a [`Say`] sink for what an operation says that is not
//! its result. Every change to the clouds goes through one sequence, [`run::carry_out`]: a plan,
//! approved by the caller's [`Approver`] (a terminal prompt, `--auto-approve`, a saved plan, a
//! controller's policy), walked by the engine doing exactly that plan and no more. `apply`,
//! `rotate-keys` and `watch` all use it.

pub mod backend;
pub mod capacity;
pub mod clouds;
pub mod cluster;
pub mod cost;
pub mod discovery;
mod error;
pub mod health;
pub mod keys;
pub mod preflight;
pub mod rotate;
pub mod run;
mod say;
pub mod timeline;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use error::{KeySources, Refusal, Result, StackError};
pub use say::{Notice, Say};
use xcsp_core::SourceFile;
use xcsp_engine::Order;
use xcsp_plans::plan::Plan;
use xcsp_plans::{LoadFailure, Loaded, VarInputs};

/// Where the stack's state lives, as the caller was told (the command line's `--state-dir`,
/// `--backend`, `--backend-config`; a controller's resource): [`backend::backend`] applies the
/// precedence over the environment's `XCSP_BACKEND*` and the spec's `backend` block.
#[derive(Debug, Clone, Default)]
pub struct StateSettings {
    /// Where the local backend keeps state (default `.xcsp/<stack>`).
    pub state_dir: Option<PathBuf>,
    /// `local` or `s3`, winning over the spec's `backend` block.
    pub backend: Option<String>,
    /// `KEY=VALUE` settings, winning over the environment and the spec.
    pub backend_config: Vec<String>,
    /// Who holds the lock while an operation runs, as a refused command shows it (default:
    /// `XCSP_LOCK_HOLDER`, else the user).
    pub holder: Option<String>,
    /// How long to wait for a lock another run holds before refusing (zero: refuse at once).
    pub lock_timeout: std::time::Duration,
}

/// How a run goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// At most this many operations at once (each provider has its own limit too).
    pub parallelism: usize,
    /// Which ready operation starts first.
    pub order: Order,
    /// Skip the checks that reach outside the clouds and the cluster's survey.
    pub offline: bool,
    /// After a MachineSet's write, wait for its machines' Nodes to be Ready.
    pub wait_for_nodes: bool,
    /// Apply a FIPS cluster's stack with a build that is not FIPS (plan only warns).
    pub allow_non_fips_build: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            parallelism: 32,
            order: Order::CriticalPath,
            offline: false,
            wait_for_nodes: true,
            allow_non_fips_build: false,
        }
    }
}

/// The spec's sources as they were loaded, and the variables given: outputs are evaluated again
/// from these once state knows the values computed at apply, without reading any file again.
#[derive(Debug, Clone)]
pub struct Source {
    pub files: Vec<Arc<SourceFile>>,
    pub inputs: VarInputs,
}

impl Source {
    /// Loads and checks the spec at `path` (a file or a directory of `*.xcsp.hcl`). Its var files
    /// are read here, once, like the spec.
    pub fn load(path: &Path, mut inputs: VarInputs) -> Result<(Source, Loaded), LoadFailure> {
        let files = xcsp_plans::syntax::load_files(path)?;
        let (readable, unreadable): (Vec<PathBuf>, Vec<PathBuf>) = std::mem::take(&mut inputs.files)
            .into_iter()
            .partition(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()));
        for p in readable {
            match std::fs::read_to_string(&p) {
                Ok(text) => inputs.file_texts.push(SourceFile::new(p.display().to_string(), text)),
                // Said by the spec's check, as any unreadable var file.
                Err(_) => inputs.files.push(p),
            }
        }
        inputs.files.extend(unreadable);
        Source::from_files(files, inputs)
    }

    /// Checks a spec already in memory (a controller's resource holds its text).
    pub fn from_files(files: Vec<Arc<SourceFile>>, inputs: VarInputs) -> Result<(Source, Loaded), LoadFailure> {
        let loaded = xcsp_plans::check_sources(files.clone(), &inputs)?;
        Ok((Source { files, inputs }, loaded))
    }
}

/// One stack and how to reach it: the run context every operation takes.
pub struct Stack {
    /// The spec, loaded and checked once.
    pub loaded: Loaded,
    pub source: Source,
    pub state: StateSettings,
    pub options: RunOptions,
    pub say: Say,
    /// Whose each Cluster API provider is, once the cluster was read before changes.
    pub providers: std::sync::OnceLock<preflight::Chosen>,
    /// The cluster's kubeconfig, or why none was found: looked up once, the first time a run
    /// needs it ([`Stack::cluster`]).
    kubeconfig: std::sync::OnceLock<std::result::Result<cluster::Kubeconfig, xcsp_core::Problem>>,
}

impl Stack {
    pub fn new(source: Source, loaded: Loaded, state: StateSettings, options: RunOptions, say: Say) -> Stack {
        Stack {
            loaded,
            source,
            state,
            options,
            say,
            providers: std::sync::OnceLock::new(),
            kubeconfig: std::sync::OnceLock::new(),
        }
    }

    /// The kubeconfig of the spec's cluster ([`cluster::find`]), looked up once for the stack's
    /// life: every check, backend and provider of its runs reaches the same cluster through the
    /// same file, and a missing one is the same problem wherever it is met.
    pub fn cluster(&self) -> std::result::Result<&cluster::Kubeconfig, &xcsp_core::Problem> {
        self.kubeconfig.get_or_init(|| cluster::find(&self.loaded.model)).as_ref()
    }

    /// The spec's stack name.
    pub fn name(&self) -> &str {
        &self.loaded.model.stack
    }
}

/// Who decides whether a plan is carried out. It is shown every plan a run would carry out (with
/// its cost) before anything changes, and asked only when the plan changes something.
pub trait Approver: Send + Sync {
    /// The plan of this run, all of it (shown by a terminal, recorded by a controller).
    fn review(&self, _plan: &Plan, _cost: &cost::Estimate) {}

    /// What a destroy would delete (before it is asked to approve it).
    fn review_destroy(&self, _doomed: &[xcsp_core::Address]) {}

    /// Whether to carry out `plan`; `question` says what it would do in words. An error ends the
    /// operation before anything changes ([`StackError::NotApproved`] when the answer was no).
    fn approve(&self, plan: &Plan, question: &str) -> crate::Result<()>;
}

/// Approves every plan (`--auto-approve`, a controller whose policy applies everything).
pub struct Always;

impl Approver for Always {
    fn approve(&self, _plan: &Plan, _question: &str) -> crate::Result<()> {
        Ok(())
    }
}

/// Approves nothing: what would change is only shown (`xcsp watch` without `--auto-approve`).
pub struct Never;

impl Approver for Never {
    fn approve(&self, _plan: &Plan, question: &str) -> crate::Result<()> {
        Err(StackError::NotApproved { question: question.to_string() })
    }
}
