//! CAPZ's first Azure calls for a Machine, as `GET /_sim/machines` follows them on the OpenShift
//! profile with CAPZ installed: the workload-identity token exchange at Entra (the projected
//! token's issuer, subject and audience against the identity's federated credentials, made with
//! ARM calls), then the role assignments each call needs at its own scope (the SKU list at the
//! subscription, the NIC and VM in the resource group, the subnet join). Kubernetes objects are
//! made with the real kube client, Azure ones through the ARM emulator's REST API.

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

/// The one Machine's entry once the MachineSet has made it, after `wanted` steps are past.
async fn machine(base: &str, not: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all: Value = reqwest::get(format!("{base}/_sim/machines")).await.unwrap().json().await.unwrap();
        if let Some(m) = all["machines"].as_array().and_then(|m| m.first())
            && m["message"] != not
        {
            return m.clone();
        }
        assert!(Instant::now() < deadline, "the Machine stays: {all}");
        tokio::time::sleep(Duration::from_millis(50)).await;
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
        proxy: None,
        mirrors: vec![],
        ebs_csi: false,
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
    assert!(refused.starts_with("AADSTS70021: No matching federated identity record found"), "{m}");
    assert!(
        refused.contains(&format!("Assertion Issuer: '{ISSUER}'"))
            && refused.contains("Assertion Subject: 'system:serviceaccount:openshift-cluster-api:capz-manager'")
            && refused.contains("Assertion Audience: 'api://AzureADTokenExchange'"),
        "{m}"
    );

    // The audience OpenShift's CAPZ presents: the exchange passes; no role lets it list the SKUs.
    assert!(h.put(&fic, credential("api://AzureADTokenExchange")).await.status < 300);
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
    let m = machine(&h.base, "").await;
    assert!(m["message"].as_str().unwrap().contains("'Microsoft.Compute/skus/read' over scope"), "{m}");
    assert!(h.put(&definition, role("Microsoft.Compute/skus/read")).await.status < 300);
    let m = machine(&h.base, &no_role).await;
    assert_eq!(m["held_at"], "vm", "{m}");
    assert!(
        m["message"].as_str().unwrap().contains("/subnets/pool not found"),
        "the pool's subnet is not there yet: {m}"
    );

    // The pool's network: CAPZ makes the NIC in its subnet and the VM, and the Machine gets the
    // VM's provider ID, its resource group lower-cased; CAPI then waits for a Node.
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/vnet");
    let made = h
        .put(
            &format!("{vnet}{}", common::NET_API),
            json!({"location": "usgovvirginia", "properties": {"addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
                "subnets": [{"name": "pool", "properties": {"addressPrefix": "10.1.1.0/24"}}]}}),
        )
        .await;
    h.wait(&made).await;
    let m = machine(&h.base, m["message"].as_str().unwrap()).await;
    // The VM boots into DNS first: the VNet has no DNS servers, Azure's resolver cannot answer
    // for the cluster's private names.
    assert_eq!(m["held_at"], "dns", "{m}");
    let no_dns = m["message"].as_str().unwrap().to_string();
    let mut with_dns = h.get(&format!("{vnet}{}", common::NET_API)).await.json().clone();
    with_dns["properties"]["dhcpOptions"] = json!({"dnsServers": ["10.0.0.10"]});
    let updated = h.put(&format!("{vnet}{}", common::NET_API), with_dns).await;
    h.wait(&updated).await;
    // A DNS server the VNet names must be something that answers the cluster's names: an
    // address of a Route 53 Resolver inbound endpoint in the cluster's VPC, over the link.
    let m = machine(&h.base, &no_dns).await;
    assert_eq!(m["held_at"], "dns", "{m}");
    assert!(
        m["message"]
            .as_str()
            .unwrap()
            .contains("the DNS server 10.0.0.10 is no Route 53 Resolver inbound endpoint's address"),
        "{m}"
    );
    let machines = api(&client, "cluster.x-k8s.io", "Machine", "machines");
    let vm_name = m["name"].as_str().unwrap();
    // CAPI copies the AzureMachine's provider ID to its Machine at its next reconcile.
    let deadline = Instant::now() + Duration::from_secs(30);
    let on_it = loop {
        let on_it = machines.get(vm_name).await.unwrap();
        if on_it.data["status"]["phase"] == "Provisioned" || Instant::now() > deadline {
            break on_it;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        on_it.data["spec"]["providerID"],
        json!(format!(
            "azure:///subscriptions/{SUB}/resourceGroups/workers/providers/Microsoft.Compute/virtualMachines/{vm_name}"
        ))
    );
    assert_eq!(on_it.data["status"]["phase"], "Provisioned");
    let resources: Value = reqwest::get(format!("{}/_sim/resources", h.base)).await.unwrap().json().await.unwrap();
    let of_type = |t: &str| resources["value"].as_array().unwrap().iter().filter(|r| r["type"] == t).count();
    assert_eq!((of_type("Microsoft.Compute/virtualMachines"), of_type("Microsoft.Network/networkInterfaces")), (1, 1));
    // Its NIC keeps the subnet from being deleted.
    let refused = h.delete(&format!("{vnet}/subnets/pool{}", common::NET_API)).await;
    assert_eq!(refused.code(), "InUseSubnetCannotBeDeleted", "{}", refused.json());
    assert!(refused.json()["error"]["message"].as_str().unwrap().contains(&format!("networkInterfaces/{vm_name}-nic")));

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

    // The MachineSet scaled to nothing: its Machine goes, and CAPZ deletes the VM and NIC with it.
    let sets = api(&client, "cluster.x-k8s.io", "MachineSet", "machinesets");
    sets.patch("gpu", &by, &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let _ = machines.list(&Default::default()).await.unwrap();
        let resources: Value = reqwest::get(format!("{}/_sim/resources", h.base)).await.unwrap().json().await.unwrap();
        let left = resources["value"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["type"] == "Microsoft.Compute/virtualMachines")
            .count();
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the VM outlives its Machine");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A Generation 1 image on a size that boots Generation 2 only: Compute refuses the VM, CAPZ's
    // VM service says so on the AzureMachine and CAPI mirrors it on the Machine. The same size
    // with the release's Generation 2 SKU gets its VM.
    let templates = api(&client, capz, "AzureMachineTemplate", "azuremachinetemplates");
    for (name, sku) in [("gen1", "aro_418"), ("gen2", "418-v2")] {
        create(
            &templates,
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "metadata": {"name": name, "namespace": NS},
                "spec": {"template": {"spec": {"vmSize": "Standard_ND96asr_v4",
                    "image": {"marketplace": {"publisher": "azureopenshift", "offer": "aro4", "sku": sku, "version": "418.94.20250122"}},
                    "osDisk": {"osType": "Linux", "diskSizeGB": 128, "managedDisk": {"storageAccountType": "Premium_LRS"}},
                    "networkInterfaces": [{"subnetName": "pool"}]}}}}),
        )
        .await;
        create(
            &sets,
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "metadata": {"name": name, "namespace": NS},
                "spec": {"clusterName": "c", "replicas": 1,
                    "selector": {"matchLabels": {"cluster.x-k8s.io/set-name": name}},
                    "template": {"metadata": {"labels": {"cluster.x-k8s.io/set-name": name}},
                        "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "boot"},
                            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate", "name": name}}}}}),
        )
        .await;
    }
    let of_set = |set: &'static str| {
        let base = h.base.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let all: Value = reqwest::get(format!("{base}/_sim/machines")).await.unwrap().json().await.unwrap();
                let found = all["machines"].as_array().into_iter().flatten().find(|m| m["machine_set"] == set).cloned();
                if let Some(m) = found.filter(|m| m["held_at"] != "cluster") {
                    return m;
                }
                assert!(Instant::now() < deadline, "no Machine of {set}: {all}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let gen1 = of_set("gen1").await;
    assert_eq!(gen1["held_at"], "vm", "{gen1}");
    let said = gen1["message"].as_str().unwrap();
    assert!(
        said.starts_with("virtualmachine failed to create or update. err: ")
            && said.contains(
                "BadRequest: The selected VM size 'Standard_ND96asr_v4' cannot boot Hypervisor Generation '1'."
            ),
        "{gen1}"
    );
    // CAPI mirrors the AzureMachine's Ready into InfrastructureReady at its next reconcile.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (on_it, infra) = loop {
        let on_it = machines.get(gen1["name"].as_str().unwrap()).await.unwrap();
        let infra = on_it.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "InfrastructureReady")
            .cloned()
            .unwrap_or_default();
        if infra["reason"] == "Failed" || Instant::now() > deadline {
            break (on_it, infra);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        (&infra["status"], &infra["reason"], &infra["severity"]),
        (&json!("False"), &json!("Failed"), &json!("Error"))
    );
    assert!(infra["message"].as_str().unwrap().contains("cannot boot Hypervisor Generation '1'"), "{infra}");
    assert!(on_it.data["spec"]["providerID"].is_null(), "no VM, no provider ID: {on_it:?}");
    let gen2 = of_set("gen2").await;
    assert_eq!(gen2["held_at"], "dns", "the Generation 2 SKU boots: {gen2}");
}
