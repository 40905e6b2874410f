//! `GET /_sim/machines`: where CAPZ holds a Machine, step by step as its reconcile takes them
//! (the Cluster by the Machine's label, the AzureCluster by name, the identity, the
//! infrastructure's readiness, the bootstrap data), and what CAPI needs before it matches a Node
//! (the Cluster's ControlPlaneInitialized, its labelled kubeconfig Secret). Objects are made with
//! the real kube client, one prerequisite at a time, and each answer is read after each.

mod common;

use common::kube_client::{self, create};

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};
use xcsp_sim::{SimConfig, SimServer};

const NS: &str = "pool";

fn api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    kube_client::api(client, NS, group, kind, plural)
}

/// The one Machine's entry, once the MachineSet has made it.
async fn machine(base: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all: Value = reqwest::get(format!("{base}/_sim/machines")).await.unwrap().json().await.unwrap();
        if let Some(m) = all["machines"].as_array().and_then(|m| m.first()) {
            return m.clone();
        }
        assert!(Instant::now() < deadline, "no Machine: {all}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_is_held_at_the_first_step_capz_cannot_pass_and_capi_says_what_it_needs_for_a_node() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Fast;
    let server = SimServer::start(config, 0).expect("sim starts");
    assert!(server.sim.kube.registry().error.is_none(), "the CRDs must load (set XCSP_REFERENCE_DIR)");
    let kc = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let client =
        kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap())
            .unwrap();
    let base = server.base_url.clone();
    create(
        &api(&client, "", "Namespace", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;

    create(
        &api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets"),
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "metadata": {"name": "gpu", "namespace": NS},
            "spec": {
                "clusterName": "c", "replicas": 1,
                "selector": {"matchLabels": {"cluster.x-k8s.io/set-name": "gpu"}},
                "template": {
                    "metadata": {"labels": {"cluster.x-k8s.io/set-name": "gpu"}},
                    "spec": {
                        "clusterName": "c",
                        "bootstrap": {"dataSecretName": "boot"},
                        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "name": "t"},
                    },
                },
            },
        }),
    )
    .await;
    // The MachineSet controller labels its Machines with the cluster's name; no Cluster yet.
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "cluster", "{m}");
    assert_eq!(m["machine_set"], "gpu");
    assert_eq!(m["node_ref_needs"], json!(["Cluster pool/c"]), "{m}");

    create(
        &api(&client, "cluster.x-k8s.io", "Cluster", "clusters"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": {"name": "c", "namespace": NS},
            "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "name": "c-azure"}}}),
    )
    .await;
    let m = machine(&base).await;
    assert_eq!(
        (m["held_at"].as_str(), m["message"].as_str()),
        (Some("azure_cluster"), Some("AzureCluster is not available yet"))
    );
    assert_eq!(
        m["node_ref_needs"],
        json!(["the ControlPlaneInitialized condition on Cluster pool/c", "Secret pool/c-kubeconfig"]),
        "{m}"
    );

    let azure_clusters = api(&client, "infrastructure.cluster.x-k8s.io", "AzureCluster", "azureclusters");
    create(
        &azure_clusters,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "metadata": {"name": "c-azure", "namespace": NS},
            "spec": {"location": "usgovvirginia",
                "identityRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "name": "id", "namespace": NS}}}),
    )
    .await;
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "identity", "{m}");
    assert!(m["message"].as_str().unwrap().contains("\"pool\"/\"id\""), "{m}");

    create(
        &api(&client, "infrastructure.cluster.x-k8s.io", "AzureClusterIdentity", "azureclusteridentities"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "metadata": {"name": "id", "namespace": NS},
            "spec": {"type": "WorkloadIdentity", "clientID": "c1", "tenantID": "t1", "allowedNamespaces": {"list": [NS]}}}),
    )
    .await;
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "infrastructure", "{m}");

    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    azure_clusters.patch_status("c-azure", &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "bootstrap_data", "{m}");
    assert!(m["message"].as_str().unwrap().ends_with("secrets \"boot\" not found"), "{m}");
    // What CAPI shows on the Machine: the bootstrap data named, the infrastructure waiting for it.
    let machines = api(&client, "cluster.x-k8s.io", "Machine", "machines");
    let on_it = machines.get(m["name"].as_str().unwrap()).await.unwrap();
    let conditions = on_it.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let of = |t: &str| conditions.iter().find(|c| c["type"] == t).cloned().unwrap_or_default();
    assert_eq!(of("BootstrapReady")["status"], "True", "{conditions:?}");
    assert_eq!(
        (&of("InfrastructureReady")["status"], &of("InfrastructureReady")["reason"]),
        (&json!("False"), &json!("WaitingForBootstrapData"))
    );
    assert_eq!(on_it.data["status"]["phase"], "Provisioning");

    let secrets = api(&client, "", "Secret", "secrets");
    create(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "boot", "namespace": NS}, "data": {"format": "aWduaXRpb24="}}))
        .await;
    let m = machine(&base).await;
    assert_eq!(m["message"], "error retrieving bootstrap data: secret value key is missing", "{m}");
    secrets.patch("boot", &by, &Patch::Merge(json!({"data": {"value": "e30="}}))).await.unwrap();
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "token_exchange", "every step before CAPZ's first Azure call passes: {m}");
    assert!(
        m["message"].as_str().unwrap().starts_with("no CAPZ controller runs in the cluster"),
        "a plain API server runs no CAPZ: {m}"
    );

    // What CAPI needs before it matches a Node: the condition, and the kubeconfig Secret with its label.
    let clusters = api(&client, "cluster.x-k8s.io", "Cluster", "clusters");
    // The v1beta1 condition alone is not what CAPI's v1beta2 controllers read.
    let v1 = json!({"status": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True", "lastTransitionTime": "2026-11-24T00:00:00Z"}]}});
    clusters.patch_status("c", &by, &Patch::Merge(v1)).await.unwrap();
    let m = machine(&base).await;
    assert_eq!(
        m["node_ref_needs"],
        json!(["the ControlPlaneInitialized condition on Cluster pool/c", "Secret pool/c-kubeconfig"]),
        "{m}"
    );
    let initialized = json!({"status": {"v1beta2": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": "2026-11-24T00:00:00Z"}]}}});
    clusters.patch_status("c", &by, &Patch::Merge(initialized)).await.unwrap();
    create(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c-kubeconfig", "namespace": NS}, "data": {"value": "e30="}}))
        .await;
    let m = machine(&base).await;
    assert_eq!(
        m["node_ref_needs"],
        json!(["the label cluster.x-k8s.io/cluster-name on Secret pool/c-kubeconfig"]),
        "{m}"
    );
    let label = json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c"}}});
    secrets.patch("c-kubeconfig", &by, &Patch::Merge(label)).await.unwrap();
    let m = machine(&base).await;
    assert_eq!(m["node_ref_needs"], json!([]), "{m}");
}
