//! What a kubeconfig file says about its cluster, read without building a client (the cli checks
//! that an implicit `~/.kube/config` is for the spec's cluster before using it).

use std::path::Path;

use kube::config::Kubeconfig;

/// The context used (`context`, or the file's current one) and its API server URL. The errors
/// name the file and the context, never a credential.
pub fn server(path: &Path, context: Option<&str>) -> Result<(String, String), String> {
    let kc = Kubeconfig::read_from(path).map_err(|e| format!("cannot read the kubeconfig {}: {e}", path.display()))?;
    let name = context
        .map(str::to_string)
        .or_else(|| kc.current_context.clone())
        .ok_or_else(|| format!("{} has no current context", path.display()))?;
    let cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or_else(|| format!("{} has no context `{name}`", path.display()))?;
    kc.clusters
        .iter()
        .find(|c| c.name == cluster)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .map(|server| (name.clone(), server))
        .ok_or_else(|| format!("{} has no server for the cluster `{cluster}` of context `{name}`", path.display()))
}
