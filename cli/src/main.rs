//! The `xcsp` binary: parses flags, reads the environment, renders diagnostics, plans and
//! progress. Only this crate knows about terminals and exit codes; what it says on stderr goes
//! through [`report`].

mod commands;
mod progress;
mod reference;
mod report;
mod state_cmd;
mod views;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xcsp_engine::Order;
use xcsp_plans::VarInputs;
use xcsp_stack::{Notice, RunOptions, Say, Source, Stack, StateSettings, timeline, watch};

/// The version and the commit it was built from (`build.rs`; `unknown` outside a git checkout).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("XCSP_COMMIT"), ")");

/// The controller's image: this build's, the FIPS one unless built without it.
#[cfg(feature = "fips")]
const DEFAULT_IMAGE: &str = concat!("ghcr.io/xcsp/xcsp:", env!("CARGO_PKG_VERSION"));
#[cfg(not(feature = "fips"))]
const DEFAULT_IMAGE: &str = concat!("ghcr.io/xcsp/xcsp:", env!("CARGO_PKG_VERSION"), "-non-fips");

/// `--version`: the version, then the cryptographic module every TLS connection and key goes
/// through (whether this is the FIPS build).
static LONG_VERSION: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{VERSION}\ncrypto: {}", xcsp_crypto::module()));

#[derive(Parser)]
#[command(name = "xcsp", version = VERSION, long_version = LONG_VERSION.as_str(),
          about = "Declarative cross-cloud worker pools for OpenShift")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
pub struct SpecArgs {
    /// A spec file, or a directory of `*.xcsp.hcl` files.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Set a variable: NAME=VALUE (repeatable; wins over var files and XCSP_VAR_<NAME>).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// Read variables from an HCL file of `name = value` lines (repeatable).
    #[arg(long = "var-file", value_name = "FILE")]
    var_files: Vec<PathBuf>,
}

#[derive(clap::Args)]
pub struct StateArgs {
    /// Where the local backend keeps state (default: .xcsp/<stack>).
    #[arg(long, env = "XCSP_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// The state backend, `local`, `s3` or `kubernetes` (wins over the spec's `backend` block).
    #[arg(long, env = "XCSP_BACKEND", value_parser = ["local", "s3", "kubernetes"])]
    backend: Option<String>,
    /// A backend setting, KEY=VALUE (repeatable; wins over XCSP_BACKEND_* and the spec's
    /// `backend` block): bucket, key, region, endpoint, server_side_encryption, path, encryption,
    /// namespace.
    #[arg(long = "backend-config", value_name = "KEY=VALUE")]
    backend_config: Vec<String>,
    /// How long to wait for the stack's lock when another run holds it (`30s`, `5m`; default:
    /// refuse at once), as Terraform's `-lock-timeout`.
    #[arg(long, env = "XCSP_LOCK_TIMEOUT", default_value = "0s", value_parser = lock_timeout)]
    lock_timeout: std::time::Duration,
}

/// `0s` (no wait) or an interval.
fn lock_timeout(text: &str) -> Result<std::time::Duration, String> {
    if text.trim().trim_end_matches(['s', 'm', 'h']) == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    watch::interval(text)
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Print one JSON event per line instead of the live view.
    #[arg(long)]
    json: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    auto_approve: bool,
    /// At most this many operations at once (each provider also has its own limit).
    #[arg(long, default_value_t = 32)]
    parallelism: usize,
    /// Skip checks that reach outside the clouds (the OIDC issuer's discovery document).
    #[arg(long, env = "XCSP_OFFLINE", value_parser = clap::builder::BoolishValueParser::new())]
    offline: bool,
    /// After writing a MachineSet, wait (up to 30 minutes) for its machines' Nodes to be Ready,
    /// as Terraform's `wait_for_rollout` waits for a Deployment; `false` ends when the objects
    /// are written, and `xcsp status` follows the machines.
    #[arg(long, env = "XCSP_WAIT_FOR_NODES", default_value_t = true, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    wait_for_nodes: bool,
    /// Apply a stack whose cluster runs in FIPS mode with this build although it is not a FIPS
    /// build (its TLS to the clouds and the cluster then runs outside a validated module).
    #[arg(long, env = "XCSP_ALLOW_NON_FIPS_BUILD", value_parser = clap::builder::BoolishValueParser::new())]
    allow_non_fips_build: bool,
    /// Which ready operation starts first (`fifo` only to compare against, in benchmarks).
    #[arg(long, default_value = "critical-path", hide = true, value_parser = ["critical-path", "fifo"])]
    order: String,
}

#[derive(Subcommand)]
enum Command {
    /// Check the spec without calling any cloud; report every problem.
    Validate(SpecArgs),
    /// Show what apply would create, change, replace or destroy.
    Plan {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
        /// Exit 0 when nothing changes, 2 when something would, 1 on error.
        #[arg(long)]
        detailed_exitcode: bool,
        /// Also write the plan to FILE; apply will refuse it once the spec or state moves.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Read the stack's resources from the clouds first (the default once state exists).
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        refresh: bool,
        /// Skip checks that reach outside the clouds (the OIDC issuer's discovery document).
        #[arg(long, env = "XCSP_OFFLINE", value_parser = clap::builder::BoolishValueParser::new())]
        offline: bool,
        /// Plan to replace this recorded resource whatever its attributes say (repeatable).
        #[arg(long, value_name = "ADDR")]
        replace: Vec<String>,
    },
    /// Create, update and delete cloud resources until they match the spec.
    Apply {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
        #[command(flatten)]
        run: RunArgs,
        /// Apply only if this saved plan (from `plan --out`) still matches the spec and state.
        #[arg(long, conflicts_with = "replace")]
        plan: Option<PathBuf>,
        /// Replace this recorded resource whatever its attributes say, and change what uses it
        /// (repeatable; e.g. `xcsp_preshared_key.link[0]` for a new tunnel key).
        #[arg(long, value_name = "ADDR")]
        replace: Vec<String>,
    },
    /// New pre-shared keys for the links' tunnels, one tunnel at a time.
    ///
    /// Each key waits for every tunnel of its link to be up on both sides before the next.
    RotateKeys {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
        #[command(flatten)]
        run: RunArgs,
        /// Only this link's keys (the `network` block's name).
        #[arg(long)]
        link: Option<String>,
        /// Seconds one tunnel may take to come back before the rotation stops.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
    /// Refresh every interval and repair drift (shown only without --auto-approve).
    ///
    /// Drift is a resource gone or changed out of band; the repair uses the same engine, lock
    /// and state as apply.
    Watch {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
        #[command(flatten)]
        run: RunArgs,
        /// How often: `30s`, `2m`, `1h` or seconds.
        #[arg(long, default_value = "30s", value_parser = watch::interval)]
        interval: std::time::Duration,
    },
    /// Delete everything the stack made.
    Destroy {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
        #[command(flatten)]
        run: RunArgs,
        /// Also delete resources tagged with the stack that state does not know, and fail if
        /// anything tagged with the stack remains afterwards.
        #[arg(long)]
        sweep: bool,
    },
    /// Show each tunnel as both clouds report it, each link's conditions and the pool's machines.
    ///
    /// Exit 0 when every tunnel of the spec's links is up on both sides, 2 when one is not.
    Status {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
        #[arg(long)]
        json: bool,
    },
    /// Read the cluster and say whether the pool can join it, before anything changes.
    ///
    /// What is read: its infrastructure, the Cluster API it serves, and where CAPZ runs and as whom.
    Preflight {
        #[command(flatten)]
        spec: SpecArgs,
        #[arg(long)]
        json: bool,
    },
    /// Draw an apply or destroy from its `--json` events as SVG (`xcsp timeline run.jsonl > run.svg`).
    ///
    /// A bar per operation, grouped by cloud, the critical path darker, waits as ticks.
    Timeline {
        /// The JSON lines `xcsp apply --json` (or destroy) printed.
        events: PathBuf,
        #[command(flatten)]
        spec: SpecArgs,
    },
    /// Print the resource graph as Graphviz DOT.
    Graph(SpecArgs),
    /// Write the pool's CAPZ/CAPI objects as YAML into DIR, for `oc apply` or GitOps
    /// (values such as the identity's client id come from state: apply first).
    Render {
        dir: PathBuf,
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
        /// The `cluster.x-k8s.io` version to write the Cluster, MachineSets and
        /// MachineHealthCheck in (v1beta2: what CAPI 1.13 stores and prefers, for GitOps).
        #[arg(long, default_value = "v1beta1", value_parser = xcsp_kube::CAPI_VERSIONS)]
        capi_version: String,
    },
    /// Look at or repair recorded state (under the stack's lock).
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Remove the lock of a run that died, given the lock id its error message showed.
    ForceUnlock {
        lock_id: String,
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Print a shell completion script (e.g. `xcsp completions bash > /etc/bash_completion.d/xcsp`).
    Completions { shell: clap_complete::Shell },
    /// What a diagnostic code means and what to do about it (`xcsp explain xcsp::pool::egress`).
    Explain { code: String },
    /// Print the guide's command-line reference (docs/src/reference/cli.md), made from these definitions.
    #[command(hide = true)]
    Reference,
    /// xcsp in the cluster: reconcile XcspStack resources, or print what installs it.
    Controller {
        #[command(subcommand)]
        command: ControllerCommand,
    },
}

#[derive(Subcommand)]
pub enum ControllerCommand {
    /// Reconcile XcspStack resources until SIGTERM (one replica leads, through a Lease).
    ///
    /// In a Pod it reaches the cluster as its service account; elsewhere through KUBECONFIG.
    Run {
        /// Only this namespace's resources (all namespaces otherwise).
        #[arg(long, env = "XCSP_WATCH_NAMESPACE")]
        namespace: Option<String>,
        /// Keep each resource's state in DIR/<namespace>/<name>. Without it, state is where the
        /// spec's `backend` block says, else a Secret in the resource's namespace (`kubernetes`).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Where /metrics and /healthz are served.
        #[arg(long, default_value = "0.0.0.0:9464")]
        metrics_addr: std::net::SocketAddr,
        /// The namespace of the leader's Lease (the controller's own).
        #[arg(long, env = "POD_NAMESPACE", default_value = "xcsp-system")]
        lease_namespace: String,
        /// This replica's name in the Lease, the Events and the state locks (default: the Pod's).
        #[arg(long, env = "POD_NAME")]
        identity: Option<String>,
        /// Skip the checks that reach outside the clouds (the OIDC issuer's discovery document).
        #[arg(long, env = "XCSP_OFFLINE", value_parser = clap::builder::BoolishValueParser::new())]
        offline: bool,
    },
    /// Print the manifests that install the controller: CRD, RBAC, volume, Deployment.
    Manifests {
        #[arg(long, default_value = "xcsp-system")]
        namespace: String,
        /// The image that holds this `xcsp` binary.
        #[arg(long, default_value = DEFAULT_IMAGE)]
        image: String,
        /// The AWS IAM role the controller's service account token is exchanged for.
        #[arg(long)]
        aws_role_arn: Option<String>,
        /// The Entra application (client id) whose federated credential trusts the controller's token.
        #[arg(long, requires = "azure_tenant_id")]
        azure_client_id: Option<String>,
        #[arg(long, requires = "azure_client_id")]
        azure_tenant_id: Option<String>,
    },
    /// Print only the XcspStack CRD.
    Crd,
}

#[derive(Subcommand)]
pub enum StateCommand {
    /// Every recorded resource and its cloud id.
    List {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
    },
    /// One resource's recorded attributes (secrets shown as markers unless --show-sensitive).
    Show {
        address: String,
        /// Print secrets (pre-shared keys) in the clear.
        #[arg(long)]
        show_sensitive: bool,
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Forget a resource (the cloud resource stays; apply adopts it again by its tags).
    Rm {
        address: String,
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Print the state (sealed with the configured key, if any) for a backup or a repair.
    Pull {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Write the state back sealed with the configured key and this build's derivation
    /// (PBKDF2-HMAC-SHA256, AES-256-GCM): once, with a non-FIPS build, for state an older xcsp
    /// sealed with a passphrase through Argon2id, which a FIPS build does not open.
    Reseal {
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Replace the state with FILE (same lineage and a serial not older, unless --force).
    Push {
        file: PathBuf,
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        spec: SpecArgs,
        #[command(flatten)]
        state: StateArgs,
    },
}

impl StateCommand {
    fn args(&self) -> (&SpecArgs, &StateArgs) {
        match self {
            StateCommand::List { spec, state }
            | StateCommand::Show { spec, state, .. }
            | StateCommand::Rm { spec, state, .. }
            | StateCommand::Pull { spec, state }
            | StateCommand::Reseal { spec, state }
            | StateCommand::Push { spec, state, .. } => (spec, state),
        }
    }
}

fn inputs(args: &SpecArgs) -> VarInputs {
    let mut env: Vec<(String, String)> =
        std::env::vars().filter_map(|(k, v)| k.strip_prefix("XCSP_VAR_").map(|n| (n.to_string(), v))).collect();
    env.sort();
    VarInputs { env, files: args.var_files.clone(), flags: args.vars.clone(), ..VarInputs::default() }
}

/// Reads and checks the spec; its warnings are shown, its errors end the command.
fn load(args: &SpecArgs) -> miette::Result<(Source, xcsp_plans::Loaded)> {
    let (source, l) = Source::load(&args.path, inputs(args))?;
    for w in l.warnings.iter() {
        report::diag(w);
    }
    Ok((source, l))
}

/// What the library says, where the command line says it: warnings, notes and diagnostics on
/// stderr, the steps of long operations on stdout.
fn say() -> Say {
    Say::new(|n| match n {
        Notice::Warning(t) => report::warn(t),
        Notice::Note(t) => report::note(t),
        Notice::Diagnostic(d) => report::diag(d.as_ref()),
        Notice::Progress(t) => println!("{t}"),
    })
}

fn settings(args: &StateArgs) -> StateSettings {
    StateSettings {
        state_dir: args.state_dir.clone(),
        backend: args.backend.clone(),
        backend_config: args.backend_config.clone(),
        holder: None,
        lock_timeout: args.lock_timeout,
    }
}

fn options(args: &RunArgs) -> RunOptions {
    RunOptions {
        parallelism: args.parallelism,
        order: if args.order == "fifo" { Order::Fifo } else { Order::CriticalPath },
        offline: args.offline,
        wait_for_nodes: args.wait_for_nodes,
        allow_non_fips_build: args.allow_non_fips_build,
    }
}

/// The stack the command works on: the spec, where its state is, how runs go.
fn stack(spec: &SpecArgs, state: Option<&StateArgs>, options: RunOptions) -> miette::Result<Stack> {
    let (source, l) = load(spec)?;
    Ok(Stack::new(source, l, state.map(settings).unwrap_or_default(), options, say()))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime starts")
}

fn main() -> ExitCode {
    // Before anything connects: the module's provider for every TLS client (the FIPS build also
    // checks that the module runs in FIPS mode, and refuses to go on otherwise).
    if let Err(e) = xcsp_crypto::install() {
        return report::fail(&miette::Report::new(e));
    }
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => report::fail(&error),
    }
}

fn run(cli: Cli) -> miette::Result<ExitCode> {
    match cli.command {
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "xcsp",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Reference => {
            print!("{}", reference::markdown(&<Cli as clap::CommandFactory>::command()));
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain { code } => match report::explain(&code) {
            Some(text) => {
                println!("{text}");
                Ok(ExitCode::SUCCESS)
            }
            None => {
                let like = report::codes_like(&code);
                Err(report::CliError::UnknownCode { code, like }.into())
            }
        },
        Command::Validate(args) => {
            let (_, l) = load(&args)?;
            println!("The spec is valid: {} resources in stack `{}`.", l.graph.len(), l.model.stack);
            Ok(ExitCode::SUCCESS)
        }
        Command::Graph(args) => {
            print!("{}", load(&args)?.1.graph.to_dot());
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan { spec, state, json, detailed_exitcode, out, refresh, offline, replace } => {
            let s = stack(&spec, Some(&state), RunOptions { offline, ..RunOptions::default() })?;
            let opts = commands::PlanOptions { json, detailed_exitcode, out, refresh, replace };
            runtime().block_on(commands::plan(&s, opts))
        }
        Command::Apply { spec, state, run: args, plan, replace } => {
            let s = stack(&spec, Some(&state), options(&args))?;
            runtime().block_on(commands::apply(&s, args.json, args.auto_approve, plan, replace))
        }
        Command::Timeline { events, spec } => {
            let (_, l) = load(&spec)?;
            let text = std::fs::read_to_string(&events).map_err(|source| xcsp_stack::StackError::Read {
                what: "the events",
                path: events.clone(),
                source,
            })?;
            let mut bars = timeline::bars(&text).map_err(xcsp_stack::StackError::Events)?;
            timeline::mark_critical(&mut bars, &l.graph);
            print!("{}", views::timeline::svg(&bars));
            Ok(ExitCode::SUCCESS)
        }
        Command::Watch { spec, state, run: args, interval } => {
            let s = stack(&spec, Some(&state), options(&args))?;
            runtime().block_on(commands::watch(&s, args.auto_approve, interval))
        }
        Command::RotateKeys { spec, state, run: args, link, timeout } => {
            let s = stack(&spec, Some(&state), options(&args))?;
            let opts = xcsp_stack::rotate::Options { link, timeout: std::time::Duration::from_secs(timeout) };
            runtime().block_on(commands::rotate(&s, args.auto_approve, opts))
        }
        Command::Destroy { spec, state, run: args, sweep } => {
            let s = stack(&spec, Some(&state), options(&args))?;
            runtime().block_on(commands::destroy(&s, args.json, args.auto_approve, sweep))
        }
        Command::Status { spec, state, json } => {
            let s = stack(&spec, Some(&state), RunOptions::default())?;
            runtime().block_on(commands::status(&s, json))
        }
        Command::Preflight { spec, json } => {
            let s = stack(&spec, None, RunOptions::default())?;
            runtime().block_on(commands::preflight(&s, json))
        }
        Command::Render { dir, spec, state, capi_version } => {
            let s = stack(&spec, Some(&state), RunOptions::default())?;
            runtime().block_on(commands::render(&s, &dir, &capi_version))
        }
        Command::State { command } => {
            let (spec, state) = command.args();
            let s = stack(spec, Some(state), RunOptions::default())?;
            runtime().block_on(state_cmd::run(&s, &command))
        }
        Command::Controller { command } => controller(command),
        Command::ForceUnlock { lock_id, spec, state } => {
            let s = stack(&spec, Some(&state), RunOptions::default())?;
            runtime().block_on(commands::force_unlock(&s, &lock_id))
        }
    }
}

fn controller(command: ControllerCommand) -> miette::Result<ExitCode> {
    match command {
        ControllerCommand::Crd => {
            let crd = <xcsp_controller::XcspStack as kube::CustomResourceExt>::crd();
            let value = serde_json::to_value(crd).expect("the CRD serializes");
            print!("{}", xcsp_controller::manifests::yaml(&[value]));
        }
        ControllerCommand::Manifests { namespace, image, aws_role_arn, azure_client_id, azure_tenant_id } => {
            let options = xcsp_controller::manifests::Options {
                namespace,
                image,
                aws_role_arn,
                azure_client_id,
                azure_tenant_id,
            };
            print!("{}", xcsp_controller::manifests::yaml(&xcsp_controller::manifests::objects(&options)));
        }
        ControllerCommand::Run { namespace, state_dir, metrics_addr, lease_namespace, identity, offline } => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_env("XCSP_LOG")
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
                )
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .init();
            in_cluster_kubeconfig()?;
            let identity = identity.unwrap_or_else(|| {
                let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "xcsp-controller".into());
                format!("{host}-{}", std::process::id())
            });
            let config = xcsp_controller::Config {
                namespace,
                state_root: state_dir,
                metrics_addr,
                lease_namespace,
                identity,
                offline,
            };
            runtime().block_on(xcsp_controller::run(config))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// In a Pod without KUBECONFIG: a kubeconfig for the service account
/// (`xcsp_controller::in_cluster_kubeconfig`), written and named in KUBECONFIG before any thread
/// starts, so the stack's Kubernetes provider reaches the cluster as the controller does.
fn in_cluster_kubeconfig() -> miette::Result<()> {
    let (Ok(host), Ok(port)) = (std::env::var("KUBERNETES_SERVICE_HOST"), std::env::var("KUBERNETES_SERVICE_PORT"))
    else {
        return Ok(());
    };
    if std::env::var_os("KUBECONFIG").is_some() {
        return Ok(());
    }
    let text = xcsp_controller::in_cluster_kubeconfig(&host, &port);
    let path = std::env::temp_dir().join("xcsp-in-cluster.kubeconfig");
    std::fs::write(&path, text).map_err(|source| report::CliError::Write {
        what: "write",
        path: path.clone(),
        source,
    })?;
    // SAFETY: called from main before the runtime (or any other thread) starts.
    unsafe { std::env::set_var("KUBECONFIG", &path) };
    Ok(())
}
