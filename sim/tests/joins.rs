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

/// A sim in the `fast` profile, its kube client and base URL, and the pool's namespace made.
async fn start() -> (SimServer, kube::Client, String) {
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
    (server, client, base)
}

/// Cluster `c`, its infrastructure AzureCluster `c-azure`.
fn cluster() -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": {"name": "c", "namespace": NS},
        "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "name": "c-azure"}}})
}

/// AzureCluster `c-azure`, its identity `id`.
fn azure_cluster() -> Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "metadata": {"name": "c-azure", "namespace": NS},
        "spec": {"location": "usgovvirginia",
            "identityRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "name": "id", "namespace": NS}}})
}

/// Makes AzureClusterIdentity `id`, a workload identity.
async fn create_identity(client: &kube::Client) {
    create(
        &api(client, "infrastructure.cluster.x-k8s.io", "AzureClusterIdentity", "azureclusteridentities"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "metadata": {"name": "id", "namespace": NS},
            "spec": {"type": "WorkloadIdentity", "clientID": "c1", "tenantID": "t1", "allowedNamespaces": {"list": [NS]}}}),
    )
    .await;
}

/// MachineSet `gpu` of cluster `c`, one replica, its template `template`, bootstrap data `boot`.
fn machine_set(template: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "metadata": {"name": "gpu", "namespace": NS},
        "spec": {
            "clusterName": "c", "replicas": 1,
            "selector": {"matchLabels": {"cluster.x-k8s.io/set-name": "gpu"}},
            "template": {
                "metadata": {"labels": {"cluster.x-k8s.io/set-name": "gpu"}, "annotations": annotations},
                "spec": {
                    "clusterName": "c",
                    "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "name": template},
                },
            },
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_is_held_at_the_first_step_capz_cannot_pass_and_capi_says_what_it_needs_for_a_node() {
    let (_server, client, base) = start().await;
    create(&api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets"), machine_set("t", json!({}))).await;
    // The MachineSet controller labels its Machines with the cluster's name; no Cluster yet.
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "cluster", "{m}");
    assert_eq!(m["machine_set"], "gpu");
    assert_eq!(m["node_ref_needs"], json!(["Cluster pool/c"]), "{m}");

    create(&api(&client, "cluster.x-k8s.io", "Cluster", "clusters"), cluster()).await;
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
    create(&azure_clusters, azure_cluster()).await;
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "identity", "{m}");
    assert!(m["message"].as_str().unwrap().contains("\"pool\"/\"id\""), "{m}");

    create_identity(&client).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machine_set_clones_its_template_into_the_machines_azure_machine_which_carries_capzs_conditions() {
    let (_server, client, base) = start().await;
    let spec = json!({"vmSize": "Standard_ND96asr_v4", "osDisk": {"osType": "Linux", "diskSizeGB": 128},
        "image": {"id": "/subscriptions/s/img"}, "networkInterfaces": [{"subnetName": "gpu"}]});
    create(
        &api(&client, "infrastructure.cluster.x-k8s.io", "AzureMachineTemplate", "azuremachinetemplates"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate",
            "metadata": {"name": "gpu-1a2b3c", "namespace": NS}, "spec": {"template": {"spec": spec}}}),
    )
    .await;
    let sets = api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets");
    create(&sets, machine_set("gpu-1a2b3c", json!({"team": "ml"}))).await;
    let m = machine(&base).await;
    let name = m["name"].as_str().unwrap().to_string();
    let machines = api(&client, "cluster.x-k8s.io", "Machine", "machines");
    let azure_machines = api(&client, "infrastructure.cluster.x-k8s.io", "AzureMachine", "azuremachines");
    let the_machine = machines.get(&name).await.unwrap();
    assert_eq!(
        the_machine.data["spec"]["infrastructureRef"],
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachine", "name": name, "namespace": NS})
    );
    let am = azure_machines.get(&name).await.unwrap();
    let stored = api(&client, "infrastructure.cluster.x-k8s.io", "AzureMachineTemplate", "azuremachinetemplates")
        .get("gpu-1a2b3c")
        .await
        .unwrap();
    assert_eq!(am.data["spec"]["vmSize"], spec["vmSize"]);
    assert_eq!(
        am.data["spec"], stored.data["spec"]["template"]["spec"],
        "the template's spec.template.spec (CRD defaults in)"
    );
    let labels = am.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("cluster.x-k8s.io/set-name").map(String::as_str), Some("gpu"));
    assert_eq!(labels.get("cluster.x-k8s.io/cluster-name").map(String::as_str), Some("c"));
    let annotations = am.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("cluster.x-k8s.io/cloned-from-name").map(String::as_str), Some("gpu-1a2b3c"));
    assert_eq!(
        annotations.get("cluster.x-k8s.io/cloned-from-groupkind").map(String::as_str),
        Some("AzureMachineTemplate.infrastructure.cluster.x-k8s.io")
    );
    assert_eq!(annotations.get("team").map(String::as_str), Some("ml"));
    let owners = am.metadata.owner_references.clone().unwrap_or_default();
    let controller = owners.iter().find(|o| o.controller == Some(true)).expect("a controller owner");
    assert_eq!(
        (controller.kind.as_str(), controller.name.as_str(), Some(controller.uid.as_str())),
        ("Machine", name.as_str(), the_machine.metadata.uid.as_deref())
    );
    assert!(owners.iter().any(|o| o.kind == "MachineSet" && o.name == "gpu"), "{owners:?}");
    // No Cluster: CAPZ returns before any condition of its own.
    assert_eq!(m["held_at"], "cluster", "{m}");
    let am = azure_machines.get(&name).await.unwrap();
    assert_eq!(am.data["status"]["conditions"], json!([]), "{:#}", am.data);
    assert_eq!(am.data["status"]["ready"], false);

    // Up to the bootstrap data: CAPZ's VMRunning says what it waits for, and CAPI mirrors it.
    create(&api(&client, "cluster.x-k8s.io", "Cluster", "clusters"), cluster()).await;
    let azure_clusters = api(&client, "infrastructure.cluster.x-k8s.io", "AzureCluster", "azureclusters");
    create(&azure_clusters, azure_cluster()).await;
    create_identity(&client).await;
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "infrastructure", "{m}");
    let am = azure_machines.get(&name).await.unwrap();
    let of = |o: &DynamicObject, t: &str| {
        o.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == t)
            .cloned()
            .unwrap_or_default()
    };
    for t in ["VMRunning", "Ready"] {
        assert_eq!(
            (of(&am, t)["status"].as_str(), of(&am, t)["reason"].as_str(), of(&am, t)["severity"].as_str()),
            (Some("False"), Some("WaitingForClusterInfrastructure"), Some("Info")),
            "{t}: {:#}",
            am.data
        );
    }
    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    azure_clusters.patch_status("c-azure", &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    let m = machine(&base).await;
    assert_eq!(m["held_at"], "bootstrap_data", "{m}");
    let am = azure_machines.get(&name).await.unwrap();
    assert_eq!(of(&am, "VMRunning")["reason"], "WaitingForBootstrapData", "{:#}", am.data);
    let on_machine = machines.get(&name).await.unwrap();
    assert_eq!(of(&on_machine, "InfrastructureReady")["reason"], "WaitingForBootstrapData");
    // With its conditions, the AzureMachine still obeys CAPZ's CRD schema.
    let crds = xcsp_sim::kube::schema::load_crds(&xcsp_sim::kube::schema::crds_dir(), "v1beta1").unwrap();
    let crd = crds.iter().find(|c| c.kind == "AzureMachine").expect("CAPZ's AzureMachine CRD");
    let as_served = serde_json::to_value(&am).unwrap();
    assert_eq!(crd.schema.validate(&as_served), vec![], "{as_served:#}");

    // Scaled to zero, the Machine goes and its AzureMachine with it.
    sets.patch("gpu", &by, &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while azure_machines.get_opt(&name).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the AzureMachine outlived its Machine");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(machines.get_opt(&name).await.unwrap().is_none(), "the Machine went first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_remediates_nothing_while_more_machines_are_unhealthy_than_it_allows() {
    let (_server, client, _base) = start().await;
    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    let clusters = api(&client, "cluster.x-k8s.io", "Cluster", "clusters");
    create(&clusters, cluster()).await;
    let initialized = json!({"status": {"v1beta2": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": "2026-11-24T00:00:00Z"}]}}});
    clusters.patch_status("c", &by, &Patch::Merge(initialized)).await.unwrap();
    let azure_clusters = api(&client, "infrastructure.cluster.x-k8s.io", "AzureCluster", "azureclusters");
    create(&azure_clusters, azure_cluster()).await;
    azure_clusters.patch_status("c-azure", &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    let mut two = machine_set("t", json!({}));
    two["spec"]["replicas"] = json!(2);
    create(&api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets"), two).await;
    // Every machine fails its startup (no CAPZ runs here, so none gets a Node). The check is made
    // once both exist and both are past its startup timeout, so its first pass finds 2 unhealthy of
    // 2, one more than it allows (made earlier, it would find them one at a time, each alone
    // within the allowance, and remediate each).
    let machines = api(&client, "cluster.x-k8s.io", "Machine", "machines");
    let deadline = Instant::now() + Duration::from_secs(30);
    while machines.list(&Default::default()).await.unwrap().items.len() < 2 {
        assert!(Instant::now() < deadline, "the MachineSet made no two Machines");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // (Timestamps have whole seconds: 2.5 s puts both clear of the 1 s timeout whatever their stamps.)
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let checks = api(&client, "cluster.x-k8s.io", "MachineHealthCheck", "machinehealthchecks");
    create(
        &checks,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineHealthCheck", "metadata": {"name": "gpu", "namespace": NS},
            "spec": {"clusterName": "c", "selector": {"matchLabels": {"cluster.x-k8s.io/set-name": "gpu"}},
                "nodeStartupTimeout": "1s", "maxUnhealthy": 1}}),
    )
    .await;
    let check = loop {
        let c = checks.get("gpu").await.unwrap();
        if c.data["status"]["expectedMachines"] == 2 && c.data["status"]["currentHealthy"] == 0 {
            break c;
        }
        assert!(Instant::now() < deadline, "the check never saw two unhealthy machines: {:#}", c.data);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let allowed = &check.data["status"]["conditions"][0];
    assert_eq!(
        (allowed["type"].as_str(), allowed["status"].as_str(), allowed["reason"].as_str()),
        (Some("RemediationAllowed"), Some("False"), Some("TooManyUnhealthy")),
        "{:#}",
        check.data
    );
    assert_eq!(
        allowed["message"],
        "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: 2, unhealthy: 2, maxUnhealthy: 1)"
    );
    assert_eq!(check.data["status"]["remediationsAllowed"], 0);
    let crds = xcsp_sim::kube::schema::load_crds(&xcsp_sim::kube::schema::crds_dir(), "v1beta1").unwrap();
    let crd = crds.iter().find(|c| c.kind == "MachineHealthCheck").expect("CAPI's MachineHealthCheck CRD");
    let as_served = serde_json::to_value(&check).unwrap();
    assert_eq!(crd.schema.validate(&as_served), vec![], "{as_served:#}");
    let listed = machines.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    assert!(listed.items.iter().all(|m| m.metadata.deletion_timestamp.is_none()), "nothing was sent away");

    // Allowed them all, the check sends both away and the MachineSet makes two others.
    let originals: Vec<String> = listed.items.iter().map(|m| m.metadata.name.clone().unwrap()).collect();
    checks.patch("gpu", &by, &Patch::Merge(json!({"spec": {"maxUnhealthy": "100%"}}))).await.unwrap();
    loop {
        let now: Vec<String> = machines
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|m| m.metadata.name)
            .collect();
        if now.len() == 2 && now.iter().all(|n| !originals.contains(n)) {
            break;
        }
        assert!(Instant::now() < deadline + Duration::from_secs(30), "not replaced: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
