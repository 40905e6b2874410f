//! `xcsp controller`: xcsp in the cluster. Each `XcspStack` resource holds an xcsp spec and a
//! policy; the controller keeps its stack as they say, on the same library (`xcsp_stack`) as the
//! command line: refresh, plan, apply within the policy, tend the pool, and report the conditions
//! `xcsp status` gives in the resource's status, as Kubernetes Events and as metrics. One replica
//! leads (a Lease); the others wait. State is where the command line finds it (by default a
//! Secret in the resource's namespace, locked by a Lease there), so the two take turns on one stack.

pub mod lease;
pub mod manifests;
pub mod metrics;
pub mod reconcile;
pub mod resource;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::Controller;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;

pub use resource::XcspStack;

/// How the controller runs (`xcsp controller run`'s flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// Watch only this namespace's resources (all namespaces otherwise).
    pub namespace: Option<String>,
    /// Each resource's state goes to `<state_root>/<namespace>/<name>` when given; else where its
    /// spec's `backend` block says; else in its namespace (the `kubernetes` backend).
    pub state_root: Option<PathBuf>,
    pub metrics_addr: SocketAddr,
    /// Where the leader's Lease is (the controller's own namespace).
    pub lease_namespace: String,
    /// This replica, in the Lease, the Events and the state locks it holds.
    pub identity: String,
    /// Skip the checks that reach outside the clouds (the OIDC issuer's discovery document).
    pub offline: bool,
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ControllerError {
    #[error("cannot reach the cluster: {0}")]
    #[diagnostic(
        code(xcsp::controller::client),
        help("in a Pod it uses its service account; elsewhere KUBECONFIG or ~/.kube/config")
    )]
    Client(String),

    #[error("the cluster does not serve XcspStack resources: {0}")]
    #[diagnostic(
        code(xcsp::controller::no_crd),
        help("install the CRD first: `xcsp controller manifests | oc apply -f -` (or `xcsp controller crd`)")
    )]
    NoCrd(String),

    #[error("cannot serve the metrics on {0}")]
    #[diagnostic(code(xcsp::controller::metrics), help("--metrics-addr another address, or port 0 for any"))]
    Metrics(String),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Lost(#[from] lease::Lost),
}

/// A kubeconfig for a Pod's service account (the API server at `host`:`port` as the Pod's
/// environment names it, the service account's CA), naming its token file rather than holding the
/// token, so the kubelet's rotations of the projected token are read. The stack's Kubernetes
/// provider reads a kubeconfig; in a Pod this is the one it is given.
pub fn in_cluster_kubeconfig(host: &str, port: &str) -> String {
    const SA: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
    let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "in-cluster", "cluster": {
            "server": format!("https://{host}:{port}"),
            "certificate-authority": format!("{SA}/ca.crt"),
        } }],
        "users": [{ "name": "service-account", "user": { "tokenFile": format!("{SA}/token") } }],
        "contexts": [{ "name": "in-cluster", "context": { "cluster": "in-cluster", "user": "service-account" } }],
        "current-context": "in-cluster",
    });
    serde_norway::to_string(&config).expect("YAML")
}

/// Runs until SIGTERM or Ctrl-C (after the reconciles in flight end), or until the Lease is lost.
pub async fn run(config: Config) -> miette::Result<()> {
    // The in-cluster configuration, its TLS the module's (checked before it is used).
    let kube_config = kube::Config::infer().await.map_err(|e| ControllerError::Client(e.to_string()))?;
    let client = xcsp_kube::checked_client(kube_config).map_err(ControllerError::Client)?;
    let stacks: Api<XcspStack> = match &config.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    stacks.list(&ListParams::default().limit(1)).await.map_err(|e| ControllerError::NoCrd(e.to_string()))?;
    let metrics = metrics::Metrics::new();
    let served = metrics.clone();
    // Bound before anything else: a port that is taken stops the controller at once, and port 0
    // is served on the port the system gives, which the log says.
    let listener = tokio::net::TcpListener::bind(config.metrics_addr)
        .await
        .map_err(|e| ControllerError::Metrics(format!("{}: {e}", config.metrics_addr)))?;
    let addr = listener.local_addr().map_err(|e| ControllerError::Metrics(e.to_string()))?;
    tracing::info!("metrics on http://{addr}/metrics");
    tokio::spawn(async move {
        if let Err(e) = metrics::serve(listener, served).await {
            tracing::error!("the metrics on {addr} stopped: {e}");
        }
    });
    let elector = lease::Elector::new(
        Api::namespaced(client.clone(), &config.lease_namespace),
        "xcsp-controller",
        &config.identity,
    );
    elector.acquire(|holder| tracing::info!("waiting for the Lease xcsp-controller, held by {holder}")).await;
    tracing::info!(identity = %config.identity, "leading: the Lease xcsp-controller is this replica's");
    // SIGTERM, Ctrl-C or the Lease lost: an apply in flight starts nothing more and ends at what
    // runs (its state saved, its lock released), the controller takes no new reconcile, and the
    // process ends once the reconciles in flight have.
    let (stop, cancel) = tokio::sync::watch::channel(0u32);
    let stopped = Arc::new(tokio::sync::Notify::new());
    let lost: Arc<Mutex<Option<lease::Lost>>> = Arc::new(Mutex::new(None));
    {
        let (stopped, lost) = (stopped.clone(), lost.clone());
        tokio::spawn(async move {
            let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: finishing what runs"),
                _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: finishing what runs"),
                gone = elector.keep() => {
                    tracing::error!("{gone}: finishing what runs, then stopping");
                    *lost.lock().expect("not poisoned") = Some(gone);
                }
            }
            stop.send_modify(|n| *n += 1);
            stopped.notify_one();
        });
    }
    let reporter = Reporter { controller: "xcsp-controller".into(), instance: Some(config.identity.clone()) };
    let ctx = Arc::new(reconcile::Context {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        metrics,
        state_root: config.state_root.clone(),
        identity: config.identity.clone(),
        offline: config.offline,
        cancel,
        failures: Mutex::new(Default::default()),
        due: Mutex::new(Default::default()),
    });
    let shutdown = stopped.clone();
    let controller = Controller::new(stacks, watcher::Config::default())
        .graceful_shutdown_on(async move { shutdown.notified().await })
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|r| async move {
            match r {
                Ok((o, _)) => tracing::debug!("reconciled {}/{}", o.namespace.unwrap_or_default(), o.name),
                Err(e) => tracing::debug!("reconcile: {e}"),
            }
        });
    controller.await;
    match lost.lock().expect("not poisoned").take() {
        Some(gone) => Err(ControllerError::Lost(gone).into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_cluster_kubeconfig_names_the_token_file_and_the_ca() {
        let text = in_cluster_kubeconfig("fd00::1", "443");
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://[fd00::1]:443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
        );
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.token_file.as_deref(), Some("/var/run/secrets/kubernetes.io/serviceaccount/token"));
        assert!(user.token.is_none());
        assert_eq!(kc.current_context.as_deref(), Some("in-cluster"));
    }
}
