//! Everything the CLI says on stderr: diagnostics, warnings, notes, and the errors that end a
//! command. Commands return `miette::Result`; `main` renders the error here and exits 1. Exit
//! codes that are not failures (2 for `plan --detailed-exitcode`, 130 for an interrupted run) are
//! a command's `Ok` value.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};
use xcsp_core::Address;
use xcsp_core::diag::Problem;

/// Renders one diagnostic (with its labels, help and related diagnostics) on stderr.
pub fn diag(d: &dyn Diagnostic) {
    let handler = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        GraphicalReportHandler::new()
    } else {
        GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
    };
    // Pre-shared keys and sensitive variables found in the spec are masked in the shown source.
    let handler = handler.with_context_lines(1);
    let mut out = String::new();
    let _ = handler.render_report(&mut out, d);
    eprintln!("{out}");
}

/// Something the user should know that does not stop the command.
pub fn warn(text: impl std::fmt::Display) {
    eprintln!("Warning: {text}");
}

/// How the command reads the spec or state, said once.
pub fn note(text: impl std::fmt::Display) {
    eprintln!("Note: {text}");
}

/// The end of a failed command: its error rendered, exit status 1. An error that gathers
/// others (every problem of a spec) shows each of them in full, then itself as the last line.
pub fn fail(error: &miette::Report) -> ExitCode {
    match error.related() {
        Some(related) => {
            for d in related {
                diag(d);
            }
            eprintln!("Error: {error}");
        }
        None => diag(error.as_ref()),
    }
    ExitCode::from(1)
}

/// Why a command stopped, for the errors the CLI itself finds (the crates' own errors travel as
/// their diagnostics).
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum CliError {
    #[error("--backend-config takes KEY=VALUE with KEY one of {known}; got `{pair}`")]
    #[diagnostic(code(xcsp::cli::backend_config))]
    BackendConfig { pair: String, known: String },

    #[error("unknown encryption mode `{0}`: `enforced` or `optional`")]
    #[diagnostic(code(xcsp::cli::encryption_mode))]
    EncryptionMode(String),

    #[error("unknown backend `{0}`: `local` or `s3`")]
    #[diagnostic(code(xcsp::cli::backend))]
    UnknownBackend(String),

    #[error("the s3 backend needs a bucket")]
    #[diagnostic(
        code(xcsp::cli::no_bucket),
        help("`bucket` in the backend block, XCSP_BACKEND_BUCKET or --backend-config bucket=NAME")
    )]
    NoBucket,

    #[error("cannot read {what} {}", path.display())]
    #[diagnostic(code(xcsp::cli::read))]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot {what} {}", path.display())]
    #[diagnostic(code(xcsp::cli::write))]
    Write {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} is not a saved plan: {detail}", path.display())]
    #[diagnostic(code(xcsp::cli::not_a_plan))]
    NotAPlan { path: PathBuf, detail: String },

    #[error("not on a terminal, so nobody can confirm")]
    #[diagnostic(code(xcsp::cli::no_terminal), help("pass --auto-approve to go ahead"))]
    NoTerminal,

    #[error("cancelled: nothing was changed")]
    #[diagnostic(code(xcsp::cli::cancelled))]
    Cancelled,

    #[error("`{text}` is not a resource address: {detail}")]
    #[diagnostic(code(xcsp::cli::address))]
    NotAnAddress { text: String, detail: String },

    #[error("the spec has no {0}")]
    #[diagnostic(code(xcsp::cli::not_in_spec), help("`xcsp graph` lists the spec's resources"))]
    NotInSpec(Address),

    #[error("state has no {0}")]
    #[diagnostic(code(xcsp::cli::not_in_state), help("`xcsp state list` shows what state records"))]
    NotInState(Address),

    #[error(
        "{} is the state of stack `{pushed}`, the spec's stack is `{spec}`: refusing to push another stack's state (--force does not override this)",
        file.display()
    )]
    #[diagnostic(code(xcsp::cli::other_stack))]
    OtherStack { file: PathBuf, pushed: String, spec: String },

    #[error(
        "{} is lineage {lineage} serial {serial}, the stack has lineage {current_lineage} serial {current_serial}: refusing to go back or across (--force overrides)",
        file.display()
    )]
    #[diagnostic(code(xcsp::cli::backwards))]
    Backwards { file: PathBuf, lineage: String, serial: u64, current_lineage: String, current_serial: u64 },

    #[error("{} resources tagged with the stack remain:{}", remaining.len(), remaining.iter().map(|r| format!("\n  - {r}")).collect::<String>())]
    #[diagnostic(
        code(xcsp::cli::remaining),
        help("they were found by their tags after the destroy; see the failures above")
    )]
    Remaining { remaining: Vec<String> },

    #[error("{detail} (the kubeconfig from {from})")]
    #[diagnostic(code(xcsp::cli::kubeconfig))]
    Kubeconfig { detail: String, from: String },

    #[error("the OIDC issuer check found {} error{}", problems.len(), if problems.len() == 1 { "" } else { "s" })]
    #[diagnostic(code(xcsp::cli::issuer))]
    Issuer {
        #[related]
        problems: Vec<Problem>,
    },

    #[error("the Azure capacity check found {} error{}", problems.len(), if problems.len() == 1 { "" } else { "s" })]
    #[diagnostic(code(xcsp::cli::capacity))]
    Capacity {
        #[related]
        problems: Vec<Problem>,
    },

    #[error("the cluster check found {} error{}", problems.len(), if problems.len() == 1 { "" } else { "s" })]
    #[diagnostic(code(xcsp::cli::cluster))]
    Cluster {
        #[related]
        problems: Vec<Problem>,
    },

    #[error("{0}")]
    #[diagnostic(code(xcsp::cli::render))]
    Render(String),

    #[error("the events are not JSON lines of `--json`: {0}")]
    #[diagnostic(code(xcsp::cli::events))]
    Events(String),

    #[error("no generated pre-shared key is recorded{}", link.as_ref().map(|l| format!(" for link `{l}`")).unwrap_or_default())]
    #[diagnostic(
        code(xcsp::cli::no_keys),
        help(
            "keys the spec sets (`pre_shared_keys`) are rotated by changing the spec; generated ones exist after `xcsp apply`"
        )
    )]
    NoKeys { link: Option<String> },

    #[error("the stack has changes pending besides the keys:{}", pending.iter().map(|p| format!("\n  - {p}")).collect::<String>())]
    #[diagnostic(
        code(xcsp::cli::pending),
        help("run `xcsp apply` first: a rotation changes the keys and what uses them, nothing else")
    )]
    Pending { pending: Vec<String> },

    #[error("the rotation stopped at {key}: {why}")]
    #[diagnostic(
        code(xcsp::cli::rotation),
        help(
            "every finished step is in state, and so are the keys left to rotate: once the tunnel is back (`xcsp status`), `xcsp rotate-keys` resumes (a key already new is given to its tunnel, not replaced again)"
        )
    )]
    RotationStopped { key: Address, why: String },

    #[error("a key rotation is under way with keys outside link `{link}`:{}", keys.iter().map(|k| format!("\n  - {k}")).collect::<String>())]
    #[diagnostic(
        code(xcsp::cli::rotation_under_way),
        help("finish it first: `xcsp rotate-keys` without --link resumes it; then rotate link `{link}`")
    )]
    RotationUnderWay { link: String, keys: Vec<String> },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_what_and_where() {
        let e = CliError::Remaining { remaining: vec!["aws_vpn_gateway.main (vgw-1)".into()] };
        assert_eq!(e.to_string(), "1 resources tagged with the stack remain:\n  - aws_vpn_gateway.main (vgw-1)");
        let e = CliError::Read {
            what: "the plan",
            path: "p.json".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("cannot read the plan p.json"), "{e}");
        assert_eq!(e.code().unwrap().to_string(), "xcsp::cli::read");
        assert!(CliError::NoTerminal.help().unwrap().to_string().contains("--auto-approve"));
    }
}
