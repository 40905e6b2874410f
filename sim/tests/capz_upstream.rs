//! The real CAPZ (v1.26.0's manager, built by `scripts/upstream-setup`) run by the world as
//! OpenShift deploys it, making a worker's VM through the ARM emulator under Azure Government's own
//! host names. Kubernetes objects are made with the real kube client, Azure ones through the ARM
//! emulator's REST API at the plain address.

mod common;

use std::time::{Duration, Instant};

use common::kube_client::{self, create};
use common::{AUTH_API, Harness, MSI_API, RG_API, SUB, TENANT, net, rg_path};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use xcsp_sim::SimConfig;
use xcsp_sim::cluster::{CAPZ_NAMESPACE, Capz, ClusterConfig};

const NS: &str = CAPZ_NAMESPACE;
const CONTRIBUTOR: &str = "b24988ac-6180-42a0-ab88-20f7382dd24c";
const READER: &str = "acdd72a7-3385-48ef-bd42-f606fba81ae7";
const CLUSTER: &str = "xcsp-gpu";
const CAPZ_GROUP: &str = "infrastructure.cluster.x-k8s.io";

fn api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    kube_client::api(client, NS, group, kind, plural)
}

async fn requests(h: &Harness) -> Vec<Value> {
    let v: Value = h.admin("GET", "/requests", None).await.json().await.unwrap();
    v["requests"].as_array().cloned().unwrap_or_default()
}

fn capz_log(h: &Harness) -> String {
    let dir = h.server.cluster().expect("cluster").dir().join("capz-manager.log");
    let text = std::fs::read_to_string(&dir).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// Azure: the resource group, the VNet with the pool's subnet, the identity with a federated
/// credential for CAPZ's service account, Contributor on the resource group.
async fn azure(h: &Harness, issuer: &str) -> String {
    let rg = rg_path("workers");
    assert!(h.put(&format!("{rg}{RG_API}"), json!({"location": "usgovvirginia"})).await.status < 300);
    let vnet = net("workers", "virtualNetworks/vnet");
    let made = h
        .put(
            &format!("{vnet}?api-version=2024-03-01"),
            json!({"location": "usgovvirginia", "properties": {"addressSpace": {"addressPrefixes": ["10.20.0.0/16"]},
                "subnets": [{"name": "pool", "properties": {"addressPrefix": "10.20.1.0/24"}}]}}),
        )
        .await;
    assert!(made.status < 300, "{:?}", made.body);
    h.wait(&made).await;
    let uai = format!("{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/capz");
    let made = h.put(&format!("{uai}{MSI_API}"), json!({"location": "usgovvirginia"})).await;
    assert!(made.status < 300, "{:?}", made.body);
    let client_id = made.json()["properties"]["clientId"].as_str().unwrap().to_string();
    let principal = made.json()["properties"]["principalId"].as_str().unwrap().to_string();
    let fic = format!("{uai}/federatedIdentityCredentials/capz{MSI_API}");
    let body = json!({"properties": {"issuer": issuer,
        "subject": format!("system:serviceaccount:{NS}:capz-manager"), "audiences": ["api://AzureADTokenExchange"]}});
    assert!(h.put(&fic, body).await.status < 300);
    // Contributor on the resource group (the NIC, the VM, the subnet join); Reader at the
    // subscription, for the SKU list CAPZ makes there.
    let sub = format!("/subscriptions/{SUB}");
    for (scope, role) in [(rg.as_str(), CONTRIBUTOR), (sub.as_str(), READER)] {
        let assignment =
            format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{}{AUTH_API}", uuid::Uuid::new_v4());
        let role = format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{role}");
        let body = json!({"properties": {"roleDefinitionId": role, "principalId": principal, "principalType": "ServicePrincipal"}});
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = h.put(&assignment, body.clone()).await;
            if r.status < 300 {
                break;
            }
            assert!(Instant::now() < deadline, "{:?}", r.body);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    client_id
}

/// The cluster side as xcsp makes it: identity, externally managed AzureCluster, Cluster, the
/// template and a MachineSet of one with its bootstrap data.
async fn pool(client: &kube::Client, client_id: &str, sku: &str) {
    create(
        &api(client, CAPZ_GROUP, "AzureClusterIdentity", "azureclusteridentities"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "metadata": {"name": "id", "namespace": NS},
            "spec": {"type": "WorkloadIdentity", "clientID": client_id, "tenantID": TENANT, "allowedNamespaces": {}}}),
    )
    .await;
    let azure_clusters = api(client, CAPZ_GROUP, "AzureCluster", "azureclusters");
    create(
        &azure_clusters,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
            "metadata": {"name": CLUSTER, "namespace": NS, "annotations": {"cluster.x-k8s.io/managed-by": ""}},
            "spec": {"location": "usgovvirginia", "subscriptionID": SUB, "resourceGroup": "workers",
                "azureEnvironment": "AzureUSGovernmentCloud",
                "networkSpec": {"vnet": {"name": "vnet", "resourceGroup": "workers"},
                    "subnets": [{"name": "pool", "role": "node"}]},
                "identityRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "name": "id", "namespace": NS}}}),
    )
    .await;
    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    azure_clusters.patch_status(CLUSTER, &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    create(
        &api(client, "cluster.x-k8s.io", "Cluster", "clusters"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": {"name": CLUSTER, "namespace": NS},
            "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "name": CLUSTER}}}),
    )
    .await;
    create(
        &api(client, CAPZ_GROUP, "AzureMachineTemplate", "azuremachinetemplates"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "metadata": {"name": "t", "namespace": NS},
            "spec": {"template": {"spec": {"vmSize": "Standard_NC24ads_A100_v4",
                "osDisk": {"osType": "Linux", "diskSizeGB": 128, "managedDisk": {"storageAccountType": "Premium_LRS"}},
                "image": {"marketplace": {"publisher": "azureopenshift", "offer": "aro4", "sku": sku, "version": "419.96.202505150000-0"}},
                "sshPublicKey": "",
                "networkInterfaces": [{"subnetName": "pool"}]}}}}),
    )
    .await;
    create(
        &api(client, "", "Secret", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "boot", "namespace": NS},
            "data": {"value": "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy4yLjAifX0=", "format": "aWduaXRpb24="}}),
    )
    .await;
    create(
        &api(client, "cluster.x-k8s.io", "MachineSet", "machinesets"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "metadata": {"name": "gpu", "namespace": NS},
            "spec": {"clusterName": CLUSTER, "replicas": 1,
                "selector": {"matchLabels": {"cluster.x-k8s.io/set-name": "gpu"}},
                "template": {"metadata": {"labels": {"cluster.x-k8s.io/set-name": "gpu"}},
                    "spec": {"clusterName": CLUSTER, "bootstrap": {"dataSecretName": "boot"},
                        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "name": "t"}}}}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_capz_makes_a_workers_vm_through_the_arm_emulator() {
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Instant;
    config.throttle.enabled = false;
    config.azure_cloud = Some("usgovernment".into());
    let cluster = ClusterConfig {
        capz: Some(Capz { env: vec![("AZURE_AUTHORITY_HOST".into(), "https://login.microsoftonline.us/".into())] }),
        ..Default::default()
    };
    let (h, client) = Harness::with_cluster_config(config, cluster).await;
    let client_id = azure(&h, "https://kubernetes.default.svc").await;
    pool(&client, &client_id, "419-v2").await;

    // CAPZ's own client makes the NIC and the VM, and the AzureMachine is Ready by CAPZ's conditions,
    // with the VM's state. CAPZ sets the two apart: `VMRunningCondition` from the PUT's outcome, the
    // state only when the PUT hands back a VM (`azure/services/virtualmachines/virtualmachines.go`
    // `Reconcile`: `UpdatePutStatus`, then `SetVMState` under `result != nil`), so one status write
    // may carry Ready without the state, and the next reconcile adds it.
    let machines = api(&client, CAPZ_GROUP, "AzureMachine", "azuremachines");
    let ready = wait(&h, "the AzureMachine Ready by CAPZ, with its VM state", 120, async || {
        let list = machines.list(&Default::default()).await.ok()?;
        let am = list.items.into_iter().next()?;
        let conditions = am.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let ready = conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
        (ready && !am.data["status"]["vmState"].is_null()).then_some(am)
    })
    .await;
    let name = ready.metadata.name.clone().unwrap();
    assert_eq!(ready.data["status"]["vmState"], "Succeeded", "{:#}", ready.data);
    let pid = ready.data["spec"]["providerID"].as_str().unwrap_or_default();
    assert!(pid.starts_with("azure:///subscriptions/") && pid.ends_with(&format!("/virtualMachines/{name}")), "{pid}");
    let log = requests(&h).await;
    let by_capz = |method: &str, tail: &str| {
        log.iter().any(|r| {
            r["method"] == method
                && r["host"] == "management.usgovcloudapi.net"
                && r["path"].as_str().is_some_and(|p| p.ends_with(tail))
                && r["user_agent"].as_str().is_some_and(|u| u.contains("cluster-api-provider-azure/v1.26.0"))
                && r["status"].as_u64().is_some_and(|s| s < 300)
        })
    };
    assert!(by_capz("PUT", &format!("/networkInterfaces/{name}-nic")), "{}", calls(&log));
    assert!(by_capz("PUT", &format!("/virtualMachines/{name}")), "{}", calls(&log));
    // The VM as Resource Manager answers it: the custom data CAPZ passed is not answered.
    let all: Value = h.admin("GET", "/resources", None).await.json().await.unwrap();
    let vm =
        all["value"].as_array().unwrap().iter().find(|r| r["type"] == "Microsoft.Compute/virtualMachines").unwrap();
    assert!(vm["body"]["properties"]["osProfile"].get("customData").is_none(), "{:#}", vm["body"]);
    eprintln!("CAPZ's Azure calls:\n{}", calls(&log));

    // Deleting the MachineSet: CAPZ deletes the VM, its NIC and disk, and the availability set.
    api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets").delete("gpu", &Default::default()).await.unwrap();
    wait(&h, "CAPZ deleting what it made", 120, async || {
        let all: Value = h.admin("GET", "/resources", None).await.json().await.ok()?;
        let left: Vec<String> = all["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str())
            .filter(|id| id.contains("Microsoft.Compute") || id.contains("networkInterfaces"))
            .map(String::from)
            .collect();
        left.is_empty().then_some(())
    })
    .await;
    let log = requests(&h).await;
    eprintln!("CAPZ's Azure calls, with the delete:\n{}", calls(&log));
}

/// CAPZ's Azure calls, in order, repeats folded: status, method, path, api-version.
fn calls(log: &[Value]) -> String {
    let mut lines: Vec<String> = Vec::new();
    for r in log.iter().filter(|r| r["user_agent"].as_str().is_some_and(|u| u.contains("azsdk-go"))) {
        let line = format!("{} {} {} {} {}", r["status"], r["method"], r["host"], r["path"], r["api_version"]);
        if lines.last() != Some(&line) {
            lines.push(line);
        }
    }
    lines.join("\n")
}

async fn wait<T>(h: &Harness, what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!(
                "{what}: not within {secs} s.\nCAPZ's Azure calls:\n{}\nits log:\n{}",
                calls(&requests(h).await),
                capz_log(h)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn world(capz_env: Vec<(String, String)>) -> (SimConfig, ClusterConfig) {
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Instant;
    config.throttle.enabled = false;
    config.azure_cloud = Some("usgovernment".into());
    (config, ClusterConfig { capz: Some(Capz { env: capz_env }), ..Default::default() })
}

/// CAPZ as OpenShift deploys it, with no `AZURE_AUTHORITY_HOST`, for an Azure Government tenant:
/// its workload-identity credential is built without the cloud's authority (CAPZ v1.26.0
/// `azure/scope/identity.go`, the `WorkloadIdentity` case sets no `Cloud`, unlike the service
/// principal's), so azidentity asks the public `login.microsoftonline.com`, which refuses the
/// tenant (AADSTS900382), and no VM is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_authority_host_capz_asks_the_public_authority_and_is_refused() {
    let (config, cluster) = world(Vec::new());
    let (h, client) = Harness::with_cluster_config(config, cluster).await;
    let client_id = azure(&h, "https://kubernetes.default.svc").await;
    pool(&client, &client_id, "419-v2").await;
    wait(&h, "CAPZ's token request refused at the public authority", 60, async || {
        let v: Value = h.admin("GET", "/tokens", None).await.json().await.ok()?;
        let refused = v["requests"]
            .as_array()?
            .iter()
            .any(|t| t["client_id"] == client_id.as_str() && t["authority"] == "public" && t["refused"] == 900382);
        refused.then_some(())
    })
    .await;
    let log = requests(&h).await;
    assert!(log.iter().any(|r| r["host"] == "login.microsoftonline.com"), "{}", calls(&log));
    assert!(!log.iter().any(|r| r["host"] == "login.microsoftonline.us"), "{}", calls(&log));
    assert!(
        !log.iter().any(|r| r["method"] == "PUT" && r["host"] == "management.usgovcloudapi.net"),
        "{}",
        calls(&log)
    );
}

/// A Generation 1 image on a size that boots only Generation 2: Compute refuses CAPZ's VM PUT
/// (400 `BadRequest`), and CAPZ's own VM service writes the error on the AzureMachine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_1_image_ends_in_capz_own_error_on_the_azure_machine() {
    let (config, cluster) = world(vec![("AZURE_AUTHORITY_HOST".into(), "https://login.microsoftonline.us/".into())]);
    let (h, client) = Harness::with_cluster_config(config, cluster).await;
    let client_id = azure(&h, "https://kubernetes.default.svc").await;
    pool(&client, &client_id, "aro_419").await;
    let machines = api(&client, CAPZ_GROUP, "AzureMachine", "azuremachines");
    let said = wait(&h, "CAPZ's error on the AzureMachine", 120, async || {
        let am = machines.list(&Default::default()).await.ok()?.items.into_iter().next()?;
        let conditions = am.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions
            .iter()
            .filter_map(|c| c["message"].as_str())
            .find(|m| m.contains("cannot boot Hypervisor Generation '1'"))
            .map(String::from)
    })
    .await;
    assert!(said.contains("BadRequest"), "{said}");
    let log = requests(&h).await;
    assert!(
        log.iter().any(|r| r["method"] == "PUT"
            && r["status"] == 400
            && r["path"].as_str().is_some_and(|p| p.contains("/virtualMachines/"))),
        "{}",
        calls(&log)
    );
}
