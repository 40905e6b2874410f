//! Why a Machine has no Node: the first step of CAPZ's AzureMachine reconcile it is held at, in
//! the order the controller takes them, and what CAPI needs before it would match a Node to it.
//! Each step is checked as the upstream code checks it (the source is given with each); the
//! steps after the bootstrap data (the VM, its boot, the Node) are not emulated yet, so a Machine
//! that passes them all is held at `vm`. Read through `GET /_sim/machines`.

use serde_json::{Value, json};

use super::store::Store;

const CAPI: &str = "cluster.x-k8s.io";
const CAPZ: &str = "infrastructure.cluster.x-k8s.io";

/// Where a Machine is held.
pub struct Held {
    /// `cluster`, `azure_cluster`, `identity`, `infrastructure`, `bootstrap_data` or `vm`.
    pub step: &'static str,
    /// What the controller logs or reports there.
    pub message: String,
    pub source: &'static str,
}

/// The first step of CAPZ's reconcile of this Machine's AzureMachine that does not pass.
pub fn held(store: &Store, machine: &Value) -> Held {
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = machine["metadata"]["name"].as_str().unwrap_or_default();
    let at = |step, message: String, source| Held { step, message, source };
    // The Cluster, by the Machine's label, in its namespace.
    let cluster = machine["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"]
        .as_str()
        .and_then(|c| store.value(CAPI, "clusters", ns, c));
    let Some(cluster) = cluster else {
        return at(
            "cluster",
            "Machine is missing cluster label or cluster does not exist".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go Reconcile (util.GetClusterFromMetadata)",
        );
    };
    // The AzureCluster: by the Cluster's infrastructureRef name, in the Machine's namespace.
    let ac_name = cluster["spec"]["infrastructureRef"]["name"].as_str().unwrap_or_default();
    let Some(azure_cluster) = store.value(CAPZ, "azureclusters", ns, ac_name) else {
        return at(
            "azure_cluster",
            "AzureCluster is not available yet".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go Reconcile (azureClusterName)",
        );
    };
    // The cluster scope resolves the identity's credentials (no Azure call yet).
    let id = &azure_cluster["spec"]["identityRef"];
    if let Some(id_name) = id["name"].as_str() {
        let id_ns = id["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(ns);
        if store.value(CAPZ, "azureclusteridentities", id_ns, id_name).is_none() {
            return at(
                "identity",
                format!("failed to retrieve AzureClusterIdentity external object {id_ns:?}/{id_name:?}: not found"),
                "cluster-api-provider-azure azure/scope/identity.go NewAzureCredentialsProvider",
            );
        }
    }
    // CAPI reads an infrastructure cluster of contract v1beta1 (CAPZ's AzureCluster) as provisioned
    // from `status.ready` and says so on the Cluster, which CAPZ waits for; no CAPI cluster
    // controller runs here, so the sim reads the AzureCluster's readiness directly.
    if azure_cluster["status"]["ready"] != json!(true) {
        return at(
            "infrastructure",
            "Cluster infrastructure is not provisioned yet (VMRunning False, WaitingForClusterInfrastructure)".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go reconcileNormal; cluster-api internal/contract/infrastructure_cluster.go Provisioned",
        );
    }
    // The bootstrap data: the Machine's dataSecretName, a Secret in its namespace, key `value`.
    let bootstrap = "cluster-api-provider-azure azure/scope/machine.go GetBootstrapData";
    let Some(secret) = machine["spec"]["bootstrap"]["dataSecretName"].as_str().filter(|s| !s.is_empty()) else {
        return at(
            "bootstrap_data",
            "Bootstrap data secret reference is not yet available (VMRunning False, WaitingForBootstrapData)".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go reconcileNormal",
        );
    };
    let Some(data) = store.value("", "secrets", ns, secret) else {
        return at(
            "bootstrap_data",
            format!(
                "failed to retrieve bootstrap data secret for AzureMachine {ns}/{name}: secrets {secret:?} not found"
            ),
            bootstrap,
        );
    };
    if data["data"].get("value").is_none() {
        return at("bootstrap_data", "error retrieving bootstrap data: secret value key is missing".into(), bootstrap);
    }
    at(
        "vm",
        "CAPZ would create the NIC and VM now; the sim does not emulate that yet".into(),
        "sim/README.md, Not emulated",
    )
}

/// What CAPI needs of the Machine's Cluster before it matches a Node to the Machine, and is missing.
pub fn node_ref_needs(store: &Store, machine: &Value) -> Vec<String> {
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let Some(name) = machine["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"].as_str() else {
        return vec!["a Cluster (the Machine has no cluster-name label)".into()];
    };
    let Some(cluster) = store.value(CAPI, "clusters", ns, name) else {
        return vec![format!("Cluster {ns}/{name}")];
    };
    let mut needs = Vec::new();
    // cluster-api internal/controllers/machine/machine_controller.go watchClusterNodes: no Node
    // watch until the control plane is initialized, a v1beta2 condition (through the v1beta1 API
    // the sim serves, `status.v1beta2.conditions`).
    let initialized = cluster["status"]["v1beta2"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True"));
    if !initialized {
        needs.push(format!("the ControlPlaneInitialized condition on Cluster {ns}/{name}"));
    }
    // cluster-api util/secret (`<cluster>-kubeconfig`, key `value`), read by ClusterCache through
    // a cache that holds only Secrets labelled cluster.x-k8s.io/cluster-name
    // (internal/setup/setup.go ManagerCacheOptions).
    let kubeconfig = format!("{name}-kubeconfig");
    match store.value("", "secrets", ns, &kubeconfig) {
        Some(s) if s["metadata"]["labels"].get("cluster.x-k8s.io/cluster-name").is_some() => {}
        Some(_) => needs.push(format!("the label cluster.x-k8s.io/cluster-name on Secret {ns}/{kubeconfig}")),
        None => needs.push(format!("Secret {ns}/{kubeconfig}")),
    }
    needs
}
