//! The `xcsp` binary: parses flags, reads the environment, renders diagnostics and plans.
//! Only this crate knows about terminals, exit codes and environment variables.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use miette::{GraphicalReportHandler, GraphicalTheme};
use xcsp_plans::{LoadFailure, Loaded, VarInputs, plan};

#[derive(Parser)]
#[command(name = "xcsp", version, about = "Declarative cross-cloud worker pools for OpenShift")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct SpecArgs {
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

#[derive(Subcommand)]
enum Command {
    /// Check the spec without calling any cloud; report every problem.
    Validate(SpecArgs),
    /// Show what apply would create, change, replace or destroy.
    Plan {
        #[command(flatten)]
        spec: SpecArgs,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
        /// Exit 0 when nothing changes, 2 when something would, 1 on error.
        #[arg(long)]
        detailed_exitcode: bool,
        /// Also write the plan to FILE; apply will refuse it once the spec or state moves.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Where the local backend keeps state (default: .xcsp/<stack>).
        #[arg(long, env = "XCSP_STATE_DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Print the resource graph as Graphviz DOT.
    Graph(SpecArgs),
}

fn inputs(args: &SpecArgs) -> VarInputs {
    let mut env: Vec<(String, String)> =
        std::env::vars().filter_map(|(k, v)| k.strip_prefix("XCSP_VAR_").map(|n| (n.to_string(), v))).collect();
    env.sort();
    VarInputs { env, files: args.var_files.clone(), flags: args.vars.clone() }
}

fn report(diag: &dyn miette::Diagnostic) {
    let handler = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        GraphicalReportHandler::new()
    } else {
        GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
    };
    // No context lines: a neighbouring line could hold a pre-shared key written in the spec.
    let handler = handler.with_context_lines(0);
    let mut out = String::new();
    let _ = handler.render_report(&mut out, diag);
    eprintln!("{out}");
}

fn load(args: &SpecArgs) -> Result<Loaded, ExitCode> {
    match xcsp_plans::load(&args.path, &inputs(args)) {
        Ok(l) => {
            for w in l.warnings.iter() {
                report(w);
            }
            Ok(l)
        }
        Err(LoadFailure::Problems(problems)) => {
            for p in problems.iter() {
                report(p);
            }
            eprintln!("Error: {problems}");
            Err(ExitCode::from(1))
        }
        Err(e) => {
            report(&e);
            Err(ExitCode::from(1))
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "localhost".into())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate(args) => load(&args).map(|l| {
            println!("The spec is valid: {} resources in stack `{}`.", l.graph.len(), l.model.stack);
            ExitCode::SUCCESS
        }),
        Command::Graph(args) => load(&args).map(|l| {
            print!("{}", l.graph.to_dot());
            ExitCode::SUCCESS
        }),
        Command::Plan { spec, json, detailed_exitcode, out, state_dir } => load(&spec).and_then(|l| {
            let dir = state_dir.unwrap_or_else(|| PathBuf::from(".xcsp").join(&l.model.stack));
            let backend = xcsp_state::local::LocalBackend::new(dir);
            let holder = format!(
                "{}@{} pid {}",
                std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
                hostname(),
                std::process::id()
            );
            let recorded = backend.lock(&holder, "plan").and_then(|guard| {
                let state = backend.read()?;
                drop(guard);
                Ok(state)
            });
            let recorded = recorded.map_err(|e| {
                report(&e);
                ExitCode::from(1)
            })?;
            let attrs = recorded.as_ref().map(|s| s.attributes()).unwrap_or_default();
            let p = plan::diff(&l.model.stack, &l.model.digest, &l.graph, &attrs);
            if let Some(out) = out {
                let saved = plan::SavedPlan::new(
                    p.redacted(),
                    recorded.as_ref().map(|s| s.lineage.clone()),
                    recorded.as_ref().map_or(0, |s| s.serial),
                );
                let text = serde_json::to_vec_pretty(&saved).expect("plans serialize");
                if let Err(e) = std::fs::write(&out, text) {
                    eprintln!("Error: cannot write {}: {e}", out.display());
                    return Err(ExitCode::from(1));
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&p.redacted()).expect("plans serialize"));
            } else {
                print!("{}", plan::render(&p));
            }
            Ok(if detailed_exitcode && p.has_changes() { ExitCode::from(2) } else { ExitCode::SUCCESS })
        }),
    };
    result.unwrap_or_else(|code| code)
}
