//! Which kubeconfig reaches the cluster the pool's CAPZ/CAPI objects go to, in this order: the
//! spec's `cluster.kubeconfig`, then `KUBECONFIG`, then `~/.kube/config`, the last only when its
//! context is for the spec's `cluster.api_url`.
//!
//! An explicit setting that names a missing file is an error, never a reason to look further:
//! falling through to another kubeconfig would apply to another cluster than the one asked for.
//! The implicit default is guarded for the same reason: it holds whatever cluster a workstation
//! last logged in to. Nothing here reads or prints a credential of the file.

use std::path::PathBuf;

use miette::Severity;
use xcsp_core::Problem;
use xcsp_plans::validate::Model;

/// The kubeconfig a run uses, and where it was found.
#[derive(Debug, Clone)]
pub struct Kubeconfig {
    pub path: PathBuf,
    /// The context to use instead of the file's current one: `cluster.kube_context`, or
    /// `XCSP_KUBE_CONTEXT`.
    pub context: Option<String>,
    /// `cluster.kubeconfig`, `KUBECONFIG` or `~/.kube/config`, for messages.
    pub from: &'static str,
    /// Whether a MachineSet's write waits for its Nodes ([`xcsp_kube::KubeConfig::wait_for_nodes`]).
    pub wait_for_nodes: bool,
}

impl Kubeconfig {
    /// How the Kubernetes clients reach it: this file and context.
    pub fn client_config(&self) -> xcsp_kube::KubeConfig {
        let mut config = xcsp_kube::KubeConfig::new(&self.path);
        config.context = self.context.clone();
        config.wait_for_nodes = self.wait_for_nodes;
        config
    }
}

const HELP: &str = "set KUBECONFIG=FILE, or `kubeconfig = \"FILE\"` in the spec's cluster block (`oc login` writes one); \
     or set `kubernetes_objects = \"render\"` in the cluster block to leave the objects out and write them with `xcsp render DIR`";

/// `~/x` with the home directory; anything else as written (relative to the working directory,
/// as every path xcsp is given).
fn expand(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// The same API server, whatever the case of the host or a trailing slash.
fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/').eq_ignore_ascii_case(b.trim_end_matches('/'))
}

/// Finds the kubeconfig of the spec's cluster; the error says everything that was tried and how
/// to fix it.
pub fn find(model: &Model) -> Result<Kubeconfig, Problem> {
    let cluster = &model.cluster;
    let context = cluster
        .kube_context
        .as_ref()
        .map(|c| c.value.clone())
        .or_else(|| std::env::var("XCSP_KUBE_CONTEXT").ok().filter(|c| !c.is_empty()));
    if let Some(written) = &cluster.kubeconfig {
        let path = expand(&written.value);
        if path.is_file() {
            return Ok(Kubeconfig { path, context, from: "cluster.kubeconfig", wait_for_nodes: false });
        }
        return Err(Problem::error(
            "xcsp::cluster::kubeconfig",
            format!("the spec's cluster.kubeconfig is {}, which is not a file", path.display()),
        )
        .label(&written.span, "this kubeconfig")
        .with_help("point it at the cluster's kubeconfig (`oc login` writes one), or remove it to use KUBECONFIG"));
    }
    let mut tried = vec!["cluster.kubeconfig (not set in the spec)".to_string()];
    let env = std::env::var_os("KUBECONFIG").unwrap_or_default();
    match std::env::split_paths(&env).find(|p| !p.as_os_str().is_empty()) {
        Some(path) if path.is_file() => {
            return Ok(Kubeconfig { path, context, from: "KUBECONFIG", wait_for_nodes: false });
        }
        Some(path) => {
            return Err(Problem::error(
                "xcsp::cluster::kubeconfig",
                format!("KUBECONFIG names {}, which is not a file", path.display()),
            )
            .with_help("point KUBECONFIG at the cluster's kubeconfig, or unset it"));
        }
        None => tried.push("KUBECONFIG (not set)".into()),
    }
    let api_url = &cluster.api_url.value;
    match std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")) {
        Some(path) if path.is_file() => match xcsp_kube::server(&path, context.as_deref()) {
            Ok((_, server)) if same_server(&server, api_url) => {
                return Ok(Kubeconfig { path, context, from: "~/.kube/config", wait_for_nodes: false });
            }
            Ok((name, server)) => tried.push(format!(
                "{} (not used: its context `{name}` is for {server}, not the spec's cluster.api_url {api_url})",
                path.display()
            )),
            Err(e) => tried.push(format!("{} (not used: {e})", path.display())),
        },
        Some(path) => tried.push(format!("{} (no such file)", path.display())),
        None => tried.push("~/.kube/config (HOME is not set)".into()),
    }
    Err(Problem::error(
        "xcsp::cluster::no_kubeconfig",
        format!("no kubeconfig for the cluster {api_url}; tried {}", tried.join(", ")),
    )
    .label(&cluster.span, "the cluster the CAPZ/CAPI objects go to (kubernetes_objects = \"apply\")")
    .with_help(HELP))
}

/// The same problem as a warning, for plan and status, which go on without the cluster.
pub fn warning(p: Problem) -> Problem {
    let message = format!("{}; apply and destroy stop before changing anything until one is found", p.message);
    Problem { severity: Severity::Warning, message, ..p }
}
