//! Everything the CLI says on stderr: diagnostics, warnings, notes, and the errors that end a
//! command. Commands return `miette::Result`; `main` renders the error here and exits 1. Exit
//! codes that are not failures (2 for `plan --detailed-exitcode`, 130 for an interrupted run) are
//! a command's `Ok` value.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};

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
    // Where to read more about the codes shown: the first one the table documents.
    let first_code = error
        .related()
        .and_then(|mut r| r.find_map(|d| d.code().map(|c| c.to_string())))
        .or_else(|| error.code().map(|c| c.to_string()))
        .filter(|c| c != "xcsp::cli::unknown_code" && explain(c).is_some());
    if let Some(code) = first_code {
        eprintln!("`xcsp explain {code}` says what a code means and what to do about it.");
    }
    // A FIPS build refused by a server without FIPS-approved TLS: said, whatever carried the error.
    let chain: Vec<String> = error.chain().map(|e| e.to_string()).collect();
    if let Some(fips) = xcsp_crypto::explain_text(&chain.join(": ")) {
        eprintln!("  help: {fips}");
    }
    ExitCode::from(1)
}

/// `xcsp explain CODE`: the code's line of `xcsp_core::codes`, as a person reads it.
pub fn explain(code: &str) -> Option<String> {
    let c = xcsp_core::codes::CODES.iter().find(|c| c.code == code)?;
    Some(format!(
        "{} ({})\n\n{}.\n\nEvery code: docs/src/reference/diagnostics.md in the guide.",
        c.code, c.severity, c.meaning
    ))
}

/// The codes that share `code`'s area (`xcsp::pool::...`), for a code not in the table.
pub fn codes_like(code: &str) -> Vec<&'static str> {
    let area: String = code.split("::").take(2).collect::<Vec<_>>().join("::") + "::";
    xcsp_core::codes::CODES.iter().map(|c| c.code).filter(|c| c.starts_with(&area)).collect()
}

/// Why a command stopped, for the errors the CLI itself finds (the crates' own errors travel as
/// their diagnostics).
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum CliError {
    #[error("cannot {what} {}", path.display())]
    #[diagnostic(code(xcsp::cli::write))]
    Write {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("not on a terminal, so nobody can confirm")]
    #[diagnostic(code(xcsp::cli::no_terminal), help("pass --auto-approve to go ahead"))]
    NoTerminal,

    #[error("cancelled: nothing was changed")]
    #[diagnostic(code(xcsp::cli::cancelled))]
    Cancelled,

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

    #[error("`{code}` is no code of xcsp's")]
    #[diagnostic(code(xcsp::cli::unknown_code), help("{}", if like.is_empty() { "every code is in docs/src/reference/diagnostics.md".to_string() } else { format!("codes of that area: {}", like.join(", ")) }))]
    UnknownCode { code: String, like: Vec<&'static str> },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_what_and_where() {
        let e = CliError::Write {
            what: "write",
            path: "p.json".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert!(e.to_string().starts_with("cannot write p.json"), "{e}");
        assert_eq!(e.code().unwrap().to_string(), "xcsp::cli::write");
        assert!(CliError::NoTerminal.help().unwrap().to_string().contains("--auto-approve"));
    }

    #[test]
    fn explain_says_the_tables_line_and_names_codes_of_the_area_for_an_unknown_one() {
        let said = explain("xcsp::cidr::syntax").unwrap();
        assert!(said.starts_with("xcsp::cidr::syntax (error)\n\n"), "{said}");
        // Not written as one literal: the table's test reads every code literal of the sources.
        let unknown = format!("xcsp::cidr::{}", "nothing");
        assert!(explain(&unknown).is_none());
        let like = codes_like(&unknown);
        assert!(like.contains(&"xcsp::cidr::syntax") && like.iter().all(|c| c.starts_with("xcsp::cidr::")), "{like:?}");
    }
}
