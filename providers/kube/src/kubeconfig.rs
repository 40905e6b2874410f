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

/// A kubeconfig for `server` that authenticates with a service account's `token` and trusts the
/// cluster's CA (`ca_pem`), as CAPI reads `<cluster>-kubeconfig` (one cluster, user and context).
pub fn for_token(cluster: &str, server: &str, ca_pem: &[u8], user: &str, token: &str) -> String {
    use base64::Engine as _;
    let kc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{ "name": cluster, "cluster": {
            "server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }}],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{ "name": cluster, "context": { "cluster": cluster, "user": user } }],
        "current-context": cluster,
    });
    serde_norway::to_string(&kc).unwrap_or_default()
}
