//! The command-line reference of the guide (`docs/src/reference/cli.md`), generated from the
//! clap definitions the binary parses with, so the page cannot drift from the flags: the hidden
//! `xcsp reference` prints it, and `tests/tests/docs.rs` fails when the page differs (and rewrites
//! it with `XCSP_BLESS=1`).

use std::fmt::Write as _;

use clap::{Arg, Command};

/// The page for `root` and every visible subcommand, depth first, in definition order.
pub fn markdown(root: &Command) -> String {
    let mut out = String::from(
        "# Command-line reference\n\n\
         Generated from the binary's own flag definitions (`cli/src/reference.rs`); do not edit by hand.\n\
         What each command does and how it behaves is in [Commands in detail](commands.md).\n",
    );
    let mut root = root.clone();
    root.build();
    command(&mut out, &root, "xcsp");
    out
}

fn command(out: &mut String, cmd: &Command, path: &str) {
    if !out.ends_with("\n\n") {
        out.push('\n');
    }
    let _ = write!(out, "## `{path}`\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = write!(out, "{}\n\n", about.to_string().trim());
    }
    let usage = cmd.clone().bin_name(path).render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    let _ = write!(out, "```text\n{usage}\n```\n\n");
    let args: Vec<&Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
    if !args.is_empty() {
        for a in args {
            let _ = writeln!(out, "- {}", argument(a));
        }
        out.push('\n');
    }
    let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help").collect();
    if !subs.is_empty() {
        let names: Vec<String> = subs.iter().map(|s| format!("`{}`", s.get_name())).collect();
        let _ = writeln!(out, "Subcommands: {}.", names.join(", "));
    }
    for s in subs {
        command(out, s, &format!("{path} {}", s.get_name()));
    }
}

/// One argument: how it is written, its help, and its default, values and variable.
fn argument(a: &Arg) -> String {
    let value = a.get_value_names().map(|v| v.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" "));
    let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
    let written = match (a.get_long(), a.get_short()) {
        (Some(l), Some(s)) => format!("-{s}, --{l}"),
        (Some(l), None) => format!("--{l}"),
        (None, Some(s)) => format!("-{s}"),
        (None, None) => value.clone().unwrap_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase())),
    };
    let written = match (a.is_positional(), takes_value, &value) {
        (false, true, Some(v)) => format!("{written} {v}"),
        (false, true, None) => format!("{written} <{}>", a.get_id().as_str().to_uppercase()),
        _ => written,
    };
    let mut text = format!("`{written}`");
    if let Some(help) = a.get_long_help().or(a.get_help()) {
        let help = help.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = write!(text, ": {help}");
    }
    let mut notes = Vec::new();
    let defaults: Vec<String> = a.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect();
    if !defaults.is_empty() && takes_value {
        notes.push(format!("default `{}`", stable_default(&defaults.join(","))));
    }
    let values: Vec<String> =
        a.get_possible_values().iter().filter(|v| !v.is_hide_set()).map(|v| format!("`{}`", v.get_name())).collect();
    if !values.is_empty() && takes_value {
        notes.push(format!("one of {}", values.join(", ")));
    }
    if let Some(env) = a.get_env() {
        notes.push(format!("env `{}`", env.to_string_lossy()));
    }
    if a.is_required_set() {
        notes.push("required".into());
    }
    if !notes.is_empty() {
        let _ = write!(text, " ({})", notes.join("; "));
    }
    text
}

/// A default that names this build (the controller's image carries the version and, outside the
/// FIPS build, a suffix) written as what it stands for, so one page fits every build.
fn stable_default(d: &str) -> String {
    if d == crate::DEFAULT_IMAGE {
        "ghcr.io/xcsp/xcsp:<version> (<version>-non-fips in a non-FIPS build)".into()
    } else {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_visible_command_and_flag_is_on_the_page() {
        let page = super::markdown(&crate::Cli::command());
        for heading in ["## `xcsp apply`", "## `xcsp state reseal`", "## `xcsp controller manifests`"] {
            assert!(page.contains(heading), "{heading}");
        }
        assert!(page.contains("`--parallelism <N>`") || page.contains("`--parallelism <PARALLELISM>`"), "{page}");
        assert!(!page.contains("--order"), "a hidden flag stays hidden");
        assert!(!page.contains(env!("CARGO_PKG_VERSION")), "no build's version on the page");
    }
}
