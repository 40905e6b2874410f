//! The real CAPZ's first Azure calls for a Machine on the OpenShift profile with CAPZ installed, as
//! `GET /_sim/machines` reports where it is held: its workload-identity token exchange refused by
//! the world's Entra (the projected token's issuer, subject and audience against the identity's
//! federated credentials), then its SKU list refused by Resource Manager's RBAC until a role at
//! the subscription allows `Microsoft.Compute/skus/read` (a custom role judged by its own
//! actions). CAPZ writes neither refusal on the AzureMachine (`InitMachineCache` returns the error
//! before any condition); the world reports its own answer. Kubernetes objects are made with the
//! real kube client, Azure ones through the ARM emulator's REST API.

mod common;

use std::time::{Duration, Instant};

use common::kube_client::{self, create};
use common::{AUTH_API, Harness, MSI_API, RG_API, SUB, rg_path};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use xcsp_sim::{OpenShift, SimConfig};

const NS: &str = "pool";
const ISSUER: &str = "https://oidc.example.mil";
const CONTRIBUTOR: &str = "b24988ac-6180-42a0-ab88-20f7382dd24c";

fn api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    kube_client::api(client, NS, group, kind, plural)
}

/// The one Machine's entry once the MachineSet has made it, its message no longer `not` and CAPZ
/// past a reconcile (not between one refusal and the next call it makes): by CAPZ's first report
/// on a new Machine at the latest ([`common::bounds::Timing::capz_reports`]).
async fn machine(base: &str, not: &str) -> Value {
    let start = Instant::now();
    let bound = common::timing(base).await.capz_reports();
    let deadline = bound.deadline();
    loop {
        let all: Value = reqwest::get(format!("{base}/_sim/machines")).await.unwrap().json().await.unwrap();
        if let Some(m) = all["machines"].as_array().and_then(|m| m.first())
            && m["message"] != not
            && m["message"] != "CAPZ has not reported on the AzureMachine yet"
        {
            eprintln!("after {:.1} s: {}", start.elapsed().as_secs_f64(), m["held_at"]);
            return m.clone();
        }
        if Instant::now() > deadline {
            let log: Value = reqwest::get(format!("{base}/_sim/requests")).await.unwrap().json().await.unwrap();
            let mut calls: Vec<String> = Vec::new();
            for r in log["requests"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["user_agent"].as_str().is_some_and(|u| u.contains("azsdk-go")))
            {
                let line = format!("{} {} {}", r["status"], r["method"], r["path"]);
                if calls.last() != Some(&line) {
                    calls.push(line);
                }
            }
            panic!("the Machine stays past {bound}: {all}\nCAPZ's calls:\n{}", calls.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Edits each AzureMachine (an annotation): CAPZ retries a failing AzureMachine with
/// controller-runtime's per-object exponential backoff (5 ms doubling to 1000 s), which the
/// refusals this test provokes push to minutes; an edit of the object is reconciled at once, so
/// the test makes one after each fix instead of waiting the backoff out.
async fn nudge(client: &kube::Client) {
    let machines = api(client, "infrastructure.cluster.x-k8s.io", "AzureMachine", "azuremachines");
    let stamp = uuid::Uuid::new_v4().to_string();
    for am in machines.list(&Default::default()).await.unwrap().items {
        let patch = json!({"metadata": {"annotations": {"test.xcsp.io/nudge": stamp}}});
        let name = am.metadata.name.unwrap_or_default();
        machines.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
}

/// Assigns role `role` (a GUID) to `principal` at `scope`.
async fn assign(h: &Harness, scope: &str, name: &str, role: &str, principal: &str) {
    let r = h
        .put(
            &format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{name}{AUTH_API}"),
            json!({"properties": {
                "roleDefinitionId": format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{role}"),
                "principalId": principal, "principalType": "ServicePrincipal"}}),
        )
        .await;
    assert!(r.status < 300, "role assignment: {}", r.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capz_exchanges_its_token_and_needs_a_role_for_each_call_at_its_scope() {
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Instant;
    config.throttle.enabled = false;
    config.openshift = Some(OpenShift {
        infrastructure_name: "infra-1".into(),
        api_internal_url: "https://api-int.example.mil:6443".into(),
        region: "us-gov-west-1".into(),
        capz: true,
        service_account_issuer: Some(ISSUER.into()),
        cluster_network_mtu: xcsp_sim::AWS_CLUSTER_NETWORK_MTU,
        capz_authority_host: None,
        fips: false,
        ovn_ipsec: false,
        worker_time_servers: vec![],
        cluster_hosted_dns: false,
        control_plane_nodes: false,
        proxy: None,
        mirrors: vec![],
        ebs_csi: false,
        feature_set: Default::default(),
    });
    let (h, client) = Harness::with_cluster(config).await;

    // Azure: the resource group, the identity, and a federated credential with the Government
    // audience (what OpenShift's CAPZ does not present).
    let rg = rg_path("workers");
    assert!(h.put(&format!("{rg}{RG_API}"), json!({"location": "usgovvirginia"})).await.status < 300);
    let uai = format!("{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/capz");
    let made = h.put(&format!("{uai}{MSI_API}"), json!({"location": "usgovvirginia"})).await;
    assert!(made.status < 300, "{}", made.json());
    let client_id = made.json()["properties"]["clientId"].as_str().unwrap().to_string();
    let principal = made.json()["properties"]["principalId"].as_str().unwrap().to_string();
    let fic = format!("{uai}/federatedIdentityCredentials/capz{MSI_API}");
    let credential = |audience: &str| {
        json!({"properties": {"issuer": ISSUER, "subject": "system:serviceaccount:openshift-cluster-api:capz-manager",
            "audiences": [audience]}})
    };
    assert!(h.put(&fic, credential("api://AzureADTokenExchangeUSGov")).await.status < 300);

    // The Kubernetes side, every step before the Azure calls passing.
    create(
        &api(&client, "", "Namespace", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    let capz = "infrastructure.cluster.x-k8s.io";
    create(
        &api(&client, capz, "AzureClusterIdentity", "azureclusteridentities"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "metadata": {"name": "id", "namespace": NS},
            "spec": {"type": "WorkloadIdentity", "clientID": client_id, "tenantID": "t1", "allowedNamespaces": {"list": [NS]}}}),
    )
    .await;
    let azure_clusters = api(&client, capz, "AzureCluster", "azureclusters");
    create(
        &azure_clusters,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "metadata": {"name": "c", "namespace": NS},
            "spec": {"location": "usgovvirginia", "subscriptionID": SUB, "resourceGroup": "workers",
                "networkSpec": {"vnet": {"name": "vnet", "resourceGroup": "workers"}},
                "identityRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity", "name": "id", "namespace": NS}}}),
    )
    .await;
    let by = PatchParams { field_manager: Some("test".into()), ..Default::default() };
    azure_clusters.patch_status("c", &by, &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    create(
        &api(&client, "cluster.x-k8s.io", "Cluster", "clusters"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": {"name": "c", "namespace": NS},
            "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "name": "c"}}}),
    )
    .await;
    create(
        &api(&client, capz, "AzureMachineTemplate", "azuremachinetemplates"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "metadata": {"name": "t", "namespace": NS},
            "spec": {"template": {"spec": {"vmSize": "Standard_NC24ads_A100_v4", "osDisk": {"osType": "Linux", "diskSizeGB": 128, "managedDisk": {"storageAccountType": "Premium_LRS"}},
                "networkInterfaces": [{"subnetName": "pool"}]}}}}),
    )
    .await;
    create(
        &api(&client, "", "Secret", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "boot", "namespace": NS}, "data": {"value": "e30="}}),
    )
    .await;
    create(
        &api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "metadata": {"name": "gpu", "namespace": NS},
            "spec": {"clusterName": "c", "replicas": 1,
                "selector": {"matchLabels": {"cluster.x-k8s.io/set-name": "gpu"}},
                "template": {"metadata": {"labels": {"cluster.x-k8s.io/set-name": "gpu"}},
                    "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "boot"},
                        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "name": "t"}}}}}),
    )
    .await;

    // Entra refuses the exchange: the credential's audience is not the projected token's.
    let m = machine(&h.base, "").await;
    assert_eq!(m["held_at"], "token_exchange", "{m}");
    let refused = m["message"].as_str().unwrap().to_string();
    assert!(refused.contains("AADSTS70021: No matching federated identity record found"), "{m}");
    assert!(
        refused.contains(&format!("Assertion Issuer: '{ISSUER}'"))
            && refused.contains("Assertion Subject: 'system:serviceaccount:openshift-cluster-api:capz-manager'")
            && refused.contains("Assertion Audience: 'api://AzureADTokenExchange'"),
        "{m}"
    );

    // The audience OpenShift's CAPZ presents: the exchange passes; no role lets it list the SKUs.
    assert!(h.put(&fic, credential("api://AzureADTokenExchange")).await.status < 300);
    nudge(&client).await;
    let m = machine(&h.base, &refused).await;
    assert_eq!(m["held_at"], "authorization", "{m}");
    let no_role = m["message"].as_str().unwrap().to_string();
    assert!(
        no_role.contains(&format!("with object id '{principal}'"))
            && no_role.contains("action 'Microsoft.Compute/skus/read' over scope '/subscriptions/"),
        "{m}"
    );

    // Contributor on the resource group covers the NIC, the VM and the subnet there, but not the
    // SKU list, which is a call at the subscription.
    assign(&h, &rg, "11111111-0000-0000-0000-000000000001", CONTRIBUTOR, &principal).await;
    nudge(&client).await;
    let m = machine(&h.base, "").await;
    assert_eq!(m["held_at"], "authorization", "{m}");
    assert!(m["message"].as_str().unwrap().contains(&format!("over scope '/subscriptions/{SUB}' or")), "{m}");

    // A custom role at the subscription is judged by its own actions: one without the SKU list
    // does not help, the same role given that action does, and every call passes.
    let sub = format!("/subscriptions/{SUB}");
    let def_guid = "22222222-0000-0000-0000-000000000001";
    let definition = format!("{sub}/providers/Microsoft.Authorization/roleDefinitions/{def_guid}{AUTH_API}");
    let role = |action: &str| {
        json!({"properties": {"roleName": "vm-skus", "type": "CustomRole", "assignableScopes": [sub.clone()],
            "permissions": [{"actions": [action], "notActions": []}]}})
    };
    let made = h.put(&definition, role("Microsoft.Compute/virtualMachines/read")).await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["properties"]["type"], "CustomRole");
    assign(&h, &sub, "11111111-0000-0000-0000-000000000002", def_guid, &principal).await;
    nudge(&client).await;
    let m = machine(&h.base, "").await;
    assert!(m["message"].as_str().unwrap().contains("'Microsoft.Compute/skus/read' over scope"), "{m}");
    assert!(h.put(&definition, role("Microsoft.Compute/skus/read")).await.status < 300);
    nudge(&client).await;
    // With the SKU list allowed, CAPZ's call passes: Resource Manager answered its identity's list
    // (CAPZ reconciles the nudged AzureMachine on the event).
    let listing = common::bounds::Bound::on_event("CAPZ");
    let deadline = listing.deadline();
    loop {
        let log: Value = reqwest::get(format!("{}/_sim/requests", h.base)).await.unwrap().json().await.unwrap();
        let listed = log["requests"].as_array().into_iter().flatten().any(|r| {
            r["path"].as_str().is_some_and(|p| p.ends_with("/providers/Microsoft.Compute/skus"))
                && r["status"] == 200
                && r["user_agent"].as_str().is_some_and(|u| u.contains("cluster-api-provider-azure/v1.26.0"))
        });
        if listed {
            break;
        }
        assert!(Instant::now() < deadline, "CAPZ lists the SKUs once it may, within {listing}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Listed by name, and not deleted while assigned.
    let listed = h
        .get(&format!(
            "{sub}/providers/Microsoft.Authorization/roleDefinitions{AUTH_API}&$filter=roleName%20eq%20'vm-skus'"
        ))
        .await;
    assert_eq!(listed.json()["value"].as_array().map(Vec::len), Some(1), "{}", listed.json());
    let refused = h.delete(&definition).await;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "RoleDefinitionHasAssignments".to_string()),
        "{}",
        refused.json()
    );
    // A second custom role of the same name is refused.
    let twin = format!(
        "{sub}/providers/Microsoft.Authorization/roleDefinitions/22222222-0000-0000-0000-000000000002{AUTH_API}"
    );
    let refused = h.put(&twin, role("Microsoft.Compute/skus/read")).await;
    assert_eq!((refused.status, refused.code()), (409, "RoleDefinitionWithSameNameExists".to_string()));
}
