//! `GET /_sim/machines`: where CAPZ holds a Machine, step by step as its reconcile takes them
//! (the Cluster by the Machine's label, the AzureCluster by name, the identity, the
//! infrastructure's readiness, the bootstrap data), and what CAPI needs before it matches a Node
//! (the Cluster's ControlPlaneInitialized, its labelled kubeconfig Secret). Objects are made with
//! the real kube client, one prerequisite at a time, and each answer is read after each. The
//! cluster is the world's upstream one: CAPI's own controllers make the Machines and their
//! AzureMachines, write their conditions and run the health check; the stand-ins (CAPZ's part)
//! only write the AzureMachine's status.

mod common;

use common::kube_client::{self, create};

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use xcsp_sim::{SimConfig, SimServer};

const NS: &str = "pool";

fn api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    kube_client::api(client, NS, group, kind, plural)
}

/// The one Machine's entry, once the MachineSet has made it.
async fn machine(base: &str) -> Value {
    machine_past(base, "").await
}

/// The one Machine's entry once its step is past `step` (the stand-ins see a change at their
/// next pass).
async fn machine_past(base: &str, step: &str) -> Value {
    let bound = common::timing(base).await.capi_reconciles();
    let deadline = bound.deadline();
    loop {
        let all: Value = reqwest::get(format!("{base}/_sim/machines")).await.unwrap().json().await.unwrap();
        if let Some(m) = all["machines"].as_array().and_then(|m| m.first())
            && m["held_at"] != step
        {
            return m.clone();
        }
        assert!(Instant::now() < deadline, "no Machine past {step:?} within {bound}: {all}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The one Machine's entry once `field` is `wanted`, which CAPI's next reconcile writes at the
/// latest; fails with the last entry after that.
async fn machine_with(base: &str, field: &str, wanted: Value) -> Value {
    let bound = common::timing(base).await.capi_reconciles();
    let deadline = bound.deadline();
    loop {
        let m = machine(base).await;
        if m[field] == wanted {
            return m;
        }
        assert!(Instant::now() < deadline, "{field} is not {wanted} within {bound}: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Until `f` answers something, within CAPI's next reconcile of what it reads (the world runs
/// its default timing here).
async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let bound = common::bounds::Timing::new(xcsp_sim::cluster::Timing::default().to_json()).capi_reconciles();
    let deadline = bound.deadline();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {bound}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A sim in the `fast` profile, its kube client and base URL, and the pool's namespace made.
async fn start() -> (SimServer, kube::Client, String) {
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Fast;
    let (server, client) = common::with_cluster(config).await;
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

/// Makes AzureMachineTemplate `t`, a GPU size.
async fn create_template(client: &kube::Client) {
    create(
        &api(client, "infrastructure.cluster.x-k8s.io", "AzureMachineTemplate", "azuremachinetemplates"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate",
            "metadata": {"name": "t", "namespace": NS},
            "spec": {"template": {"spec": {"vmSize": "Standard_ND96asr_v4", "osDisk": {"osType": "Linux", "diskSizeGB": 128}}}}}),
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
    // CAPI's MachineSet controller makes Machines only for a Cluster that exists
    // (`machineset_controller.go`: `GetClusterByName`) from a template that exists
    // (`reconcileExternalTemplateReference`).
    create(&api(&client, "cluster.x-k8s.io", "Cluster", "clusters"), cluster()).await;
    create_template(&client).await;
    create(&api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets"), machine_set("t", json!({}))).await;
    let m = machine(&base).await;
    assert_eq!(m["machine_set"], "gpu");
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
    let m = machine_past(&base, "azure_cluster").await;
    assert_eq!(m["held_at"], "identity", "{m}");
    assert!(m["message"].as_str().unwrap().contains("\"pool\"/\"id\""), "{m}");

    create_identity(&client).await;
    let m = machine_past(&base, "identity").await;
    assert_eq!(m["held_at"], "infrastructure", "{m}");

    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    azure_clusters.patch_status("c-azure", &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    let m = machine_past(&base, "infrastructure").await;
    assert_eq!(m["held_at"], "bootstrap_data", "{m}");
    assert!(m["message"].as_str().unwrap().ends_with("secrets \"boot\" not found"), "{m}");
    let secrets = api(&client, "", "Secret", "secrets");
    create(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "boot", "namespace": NS}, "data": {"format": "aWduaXRpb24="}}))
        .await;
    let m = machine_with(&base, "message", json!("error retrieving bootstrap data: secret value key is missing")).await;
    assert_eq!(m["message"], "error retrieving bootstrap data: secret value key is missing", "{m}");
    secrets.patch("boot", &by, &Patch::Merge(json!({"data": {"value": "e30="}}))).await.unwrap();
    let m = machine_past(&base, "bootstrap_data").await;
    assert_eq!(m["held_at"], "vm", "every step before CAPZ's first Azure call passes: {m}");
    assert!(
        m["message"].as_str().unwrap().starts_with("no CAPZ controller runs in the cluster"),
        "a plain API server runs no CAPZ: {m}"
    );

    // What CAPI needs before it matches a Node: the condition, and the kubeconfig Secret with its label.
    let clusters = api(&client, "cluster.x-k8s.io", "Cluster", "clusters");
    // The v1beta1 condition alone is not what CAPI's v1beta2 controllers read.
    let v1 = json!({"status": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True", "lastTransitionTime": "2026-11-24T00:00:00Z"}]}});
    clusters.patch_status("c", &by, &Patch::Merge(v1)).await.unwrap();
    tokio::time::sleep(xcsp_sim::kube::bridge::PASS * 3).await;
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
    machine_with(
        &base,
        "node_ref_needs",
        json!(["the label cluster.x-k8s.io/cluster-name on Secret pool/c-kubeconfig"]),
    )
    .await;
    let label = json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c"}}});
    secrets.patch("c-kubeconfig", &by, &Patch::Merge(label)).await.unwrap();
    machine_with(&base, "node_ref_needs", json!([])).await;
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
    create(&api(&client, "cluster.x-k8s.io", "Cluster", "clusters"), cluster()).await;
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
    // The Machine's controller takes the AzureMachine at its reconcile (`reconcileExternal`).
    let owners = until("the Machine owns its AzureMachine", async || {
        let owners = azure_machines.get(&name).await.unwrap().metadata.owner_references.unwrap_or_default();
        owners.iter().any(|o| o.controller == Some(true)).then_some(owners)
    })
    .await;
    let controller = owners.iter().find(|o| o.controller == Some(true)).expect("a controller owner");
    assert_eq!(
        (controller.kind.as_str(), controller.name.as_str(), Some(controller.uid.as_str())),
        ("Machine", name.as_str(), the_machine.metadata.uid.as_deref())
    );
    // CAPI 1.13 leaves the Machine its only owner (the MachineSet's reference, set at the clone,
    // is replaced).
    assert_eq!(owners.len(), 1, "{owners:?}");
    // No AzureCluster: CAPZ returns before any condition of its own.
    assert_eq!(m["held_at"], "azure_cluster", "{m}");

    // Up to the bootstrap data. No CAPZ runs in this plain world: the conditions on the AzureMachine
    // are the real CAPZ's (tests/capz_upstream.rs), not written here.
    let azure_clusters = api(&client, "infrastructure.cluster.x-k8s.io", "AzureCluster", "azureclusters");
    create(&azure_clusters, azure_cluster()).await;
    create_identity(&client).await;
    let m = machine_with(&base, "held_at", json!("infrastructure")).await;
    assert_eq!(m["held_at"], "infrastructure", "{m}");
    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    azure_clusters.patch_status("c-azure", &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    machine_with(&base, "held_at", json!("bootstrap_data")).await;

    // Scaled to zero, the Machine goes and its AzureMachine with it (CAPI deletes the
    // infrastructure machine before it lets its Machine go).
    sets.patch("gpu", &by, &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    until("both gone", async || {
        let gone =
            azure_machines.get_opt(&name).await.unwrap().is_none() && machines.get_opt(&name).await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_remediates_nothing_while_more_machines_are_unhealthy_than_it_allows() {
    let (server, client, base) = start().await;
    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    let clusters = api(&client, "cluster.x-k8s.io", "Cluster", "clusters");
    create(&clusters, cluster()).await;
    // CAPI reads the Nodes of an initialized Cluster through the kubeconfig Secret of the Cluster
    // (`controllers/clustercache`): here the world's own API server, as for the pool's Cluster.
    use base64::Engine as _;
    let kubeconfig = base64::engine::general_purpose::STANDARD.encode(server.kubeconfig().unwrap());
    create(
        &api(&client, "", "Secret", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c-kubeconfig", "namespace": NS,
            "labels": {"cluster.x-k8s.io/cluster-name": "c"}}, "data": {"value": kubeconfig}}),
    )
    .await;
    let initialized = json!({"status": {"v1beta2": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": "2026-11-24T00:00:00Z"}]}}});
    clusters.patch_status("c", &by, &Patch::Merge(initialized)).await.unwrap();
    let azure_clusters = api(&client, "infrastructure.cluster.x-k8s.io", "AzureCluster", "azureclusters");
    create(&azure_clusters, azure_cluster()).await;
    azure_clusters.patch_status("c-azure", &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    create_template(&client).await;
    let mut two = machine_set("t", json!({}));
    two["spec"]["replicas"] = json!(2);
    create(&api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets"), two).await;
    // Every machine fails its startup (no CAPZ runs here, so none gets a Node). The check is made
    // once both exist and both are past its startup timeout, so its first pass finds 2 unhealthy of
    // 2, one more than it allows (made earlier, it would find them one at a time, each alone
    // within the allowance, and remediate each).
    let machines = api(&client, "cluster.x-k8s.io", "Machine", "machines");
    let timing = common::timing(&base).await;
    let made = timing.capi_reconciles();
    let deadline = made.deadline();
    while machines.list(&Default::default()).await.unwrap().items.len() < 2 {
        assert!(Instant::now() < deadline, "the MachineSet made no two Machines within {made}");
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
    let allowed = check.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "RemediationAllowed")
        .cloned()
        .unwrap_or_default();
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
    let listed = machines.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    assert!(listed.items.iter().all(|m| m.metadata.deletion_timestamp.is_none()), "nothing was sent away");

    // Allowed them all, the check sends both away and the MachineSet makes two others.
    let originals: Vec<String> = listed.items.iter().map(|m| m.metadata.name.clone().unwrap()).collect();
    checks.patch("gpu", &by, &Patch::Merge(json!({"spec": {"maxUnhealthy": "100%"}}))).await.unwrap();
    // The check's remediation, then the MachineSet's two new Machines: CAPI's, each on the event.
    let replaced = timing.capi_reconciles().then(&timing.capi_reconciles());
    let deadline = replaced.deadline();
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
        assert!(Instant::now() < deadline, "not replaced within {replaced}: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
