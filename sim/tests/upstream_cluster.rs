//! The local cluster run by upstream programs (`xcsp_sim::cluster`): etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler of Kubernetes 1.35 and Cluster API 1.13's manager, built by
//! `scripts/upstream-setup` (its directory in `XCSP_UPSTREAM_BIN`; `scripts/test` sets it). Each
//! check goes through the real Kubernetes client and is decided by the upstream program, not by
//! code of this project: the version the server reports, CAPI's MachineSet controller making
//! Machines (their managed fields name CAPI's manager), CRD conversion through CAPI's webhook,
//! CAPI's admission scoped to `openshift-cluster-api` as on OpenShift, garbage collection, CSR
//! signing, the node lifecycle controller turning a Node whose Lease stops `Unknown`, and the
//! scheduler refusing a Node that carries the cloud provider's uninitialized taint.
//!
//! Fails, never skips, when the binaries are not built.

use std::time::{Duration, Instant};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use xcsp_sim::cluster::{ClusterConfig, UpstreamCluster};

const NS: &str = "openshift-cluster-api";

fn capi(client: &kube::Client, version: &str, kind: &str, plural: &str, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", version, kind);
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, plural))
}

fn capz(client: &kube::Client, kind: &str, plural: &str, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1beta1", kind);
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, plural))
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("an object")
}

async fn wait_for<T>(what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    api.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap())
        .await
        .unwrap();
}

/// A Cluster, its AzureCluster, an AzureMachineTemplate and a MachineSet of `replicas` in `ns`.
async fn pool(client: &kube::Client, ns: &str, replicas: Option<i64>) {
    let pp = PostParams::default();
    capz(client, "AzureCluster", "azureclusters", ns)
        .create(
            &pp,
            &object(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
                "metadata": {"name": "gpu", "annotations": {"cluster.x-k8s.io/managed-by": "xcsp"}},
                "spec": {"location": "usgovvirginia", "resourceGroup": "rg", "subscriptionID": "00000000-0000-0000-0000-000000000001",
                         "networkSpec": {"vnet": {"name": "vnet"}}},
            })),
        )
        .await
        .unwrap();
    capi(client, "v1beta2", "Cluster", "clusters", ns)
        .create(
            &pp,
            &object(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "metadata": {"name": "gpu"},
                "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureCluster", "name": "gpu"}},
            })),
        )
        .await
        .unwrap();
    capz(client, "AzureMachineTemplate", "azuremachinetemplates", ns)
        .create(
            &pp,
            &object(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachineTemplate",
                "metadata": {"name": "gpu-a100"},
                "spec": {"template": {"spec": {"vmSize": "Standard_ND96asr_v4", "osDisk": {"osType": "Linux", "diskSizeGB": 256}}}},
            })),
        )
        .await
        .unwrap();
    let mut spec = json!({
        "clusterName": "gpu",
        "selector": {"matchLabels": {"pool": "gpu"}},
        "template": {
            "metadata": {"labels": {"pool": "gpu"}},
            "spec": {
                "clusterName": "gpu",
                "bootstrap": {"dataSecretName": "gpu-user-data"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureMachineTemplate", "name": "gpu-a100"},
            },
        },
    });
    if let Some(n) = replicas {
        spec["replicas"] = json!(n);
    }
    capi(client, "v1beta2", "MachineSet", "machinesets", ns)
        .create(
            &pp,
            &object(json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "metadata": {"name": "gpu"}, "spec": spec})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_programs_are_the_cluster() {
    xcsp_crypto::install().unwrap();
    let mut cluster = match UpstreamCluster::start(ClusterConfig::default()).await {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let client = cluster.client().await.unwrap();

    // The version the server reports is the pinned upstream release, stamped as Kubernetes'
    // own build stamps it.
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.git_version, "v1.35.4", "{v:?}");
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "35"));
    assert!(cluster.versions["capi-manager"].contains("v1.13.6"), "{:?}", cluster.versions);

    namespace(&client, NS).await;
    namespace(&client, "pool-elsewhere").await;

    // CAPI's MachineSet controller makes the Machines, and each AzureMachine from the template.
    pool(&client, NS, Some(2)).await;
    let machines = capi(&client, "v1beta2", "Machine", "machines", NS);
    let made = wait_for("two Machines made by CAPI", 60, async || {
        let l = machines.list(&Default::default()).await.ok()?;
        (l.items.len() == 2).then_some(l.items)
    })
    .await;
    for m in &made {
        let managers: Vec<String> =
            m.metadata.managed_fields.iter().flatten().filter_map(|f| f.manager.clone()).collect();
        assert!(!managers.is_empty() && managers.iter().all(|x| x != "xcsp-world"), "{managers:?}");
        let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("MachineSet", "gpu"));
        assert!(m.metadata.finalizers.iter().flatten().any(|f| f == "machine.cluster.x-k8s.io"), "{m:?}");
    }
    let azure_machines = capz(&client, "AzureMachine", "azuremachines", NS);
    wait_for("an AzureMachine per Machine, cloned by CAPI", 60, async || {
        let l = azure_machines.list(&Default::default()).await.ok()?;
        let names: Vec<_> = l.items.iter().filter_map(|a| a.metadata.name.clone()).collect();
        made.iter().all(|m| names.contains(m.metadata.name.as_ref().unwrap())).then_some(())
    })
    .await;

    // Stored at v1beta2, read at v1beta1 through CAPI's conversion webhook: the v1beta1 shape
    // names the template by apiVersion, not apiGroup.
    let old = capi(&client, "v1beta1", "MachineSet", "machinesets", NS).get("gpu").await.unwrap();
    assert_eq!(
        old.data["spec"]["template"]["spec"]["infrastructureRef"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta1",
        "{:#}",
        old.data
    );

    // CAPI's webhooks see only openshift-cluster-api: there a MachineSet without replicas is
    // defaulted by CAPI's webhook; elsewhere it is stored as sent.
    let set = capi(&client, "v1beta2", "MachineSet", "machinesets", NS);
    let defaulted = set.get("gpu").await.unwrap();
    assert!(defaulted.data["spec"]["replicas"].is_number());
    pool(&client, "pool-elsewhere", None).await;
    let elsewhere = capi(&client, "v1beta2", "MachineSet", "machinesets", "pool-elsewhere").get("gpu").await.unwrap();
    assert!(elsewhere.data["spec"].get("replicas").is_none(), "no webhook defaulted it: {:#}", elsewhere.data);
    let refused = capi(&client, "v1beta2", "MachineSet", "machinesets", NS)
        .patch(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selector": {"matchLabels": {"pool": "other"}}}})),
        )
        .await;
    assert!(refused.is_err(), "CAPI's validating webhook refuses a selector the template's labels do not match");

    // Scaling to zero: CAPI deletes the Machines (its finalizer, then the AzureMachine).
    set.patch("gpu", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    wait_for("Machines gone after scaling to zero", 90, async || {
        let l = machines.list(&Default::default()).await.ok()?;
        let a = azure_machines.list(&Default::default()).await.ok()?;
        (l.items.is_empty() && a.items.is_empty()).then_some(())
    })
    .await;

    // kube-controller-manager's garbage collector: a ConfigMap owned by a deleted one goes.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), NS);
    let owner = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap())
        .await
        .unwrap();
    let uid = owner.metadata.uid.clone().unwrap();
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "owned",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}))
        .unwrap(),
    )
    .await
    .unwrap();
    cms.delete("owner", &Default::default()).await.unwrap();
    wait_for("the owned ConfigMap collected", 60, async || cms.get_opt("owned").await.ok()?.is_none().then_some(()))
        .await;

    // CSR signing: a kubelet client CSR, approved, is signed by kube-controller-manager with the
    // cluster's CA.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, "system:node:gpu-0");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:nodes");
    let request = params.serialize_request(&key).unwrap().pem().unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    csrs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "node-csr-gpu-0"}, "spec": {
            "request": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, request),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"]}}))
        .unwrap(),
    )
    .await
    .unwrap();
    let approval = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "node-csr-gpu-0"},
        "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "approved"}]}});
    csrs.patch_approval("node-csr-gpu-0", &PatchParams::default(), &Patch::Merge(&approval)).await.unwrap();
    let cert = wait_for("the CSR signed", 60, async || {
        csrs.get("node-csr-gpu-0").await.ok()?.status?.certificate.map(|c| c.0)
    })
    .await;
    assert!(String::from_utf8_lossy(&cert).contains("BEGIN CERTIFICATE"));

    // The node lifecycle controller: a Node whose Lease is renewed stays Ready; once the Lease
    // stops, it goes Unknown after --node-monitor-grace-period (8 s here).
    let nodes: Api<Node> = Api::all(client.clone());
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "gpu-0"}, "spec": {}})).unwrap(),
        )
        .await
        .unwrap();
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
    nodes.patch_status("gpu-0", &PatchParams::default(), &Patch::Merge(&ready)).await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renew = async |leases: &Api<Lease>| {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "gpu-0"},
            "spec": {"holderIdentity": "gpu-0", "leaseDurationSeconds": 40,
                     "renewTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
        leases.patch("gpu-0", &PatchParams::apply("kubelet").force(), &Patch::Apply(&lease)).await.unwrap();
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(12) {
        renew(&leases).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let condition = |n: &Node| {
        n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready").map(|c| c.status.clone())
    };
    assert_eq!(condition(&nodes.get("gpu-0").await.unwrap()).as_deref(), Some("True"), "renewed: still Ready");
    wait_for("Ready Unknown once the Lease stops", 60, async || {
        (condition(&nodes.get("gpu-0").await.ok()?).as_deref() == Some("Unknown")).then_some(())
    })
    .await;

    scheduling(&client).await;
    cluster.check_running().expect("every upstream program still runs");
}

/// kube-scheduler: a Pod that tolerates only the pool's `nvidia.com/gpu` taint stays Pending on a
/// Node as the world's kubelet registers it with `--cloud-provider=external` (the uninitialized
/// taint, which no cloud controller lifts from an `azure://` Node), with the scheduler's reason;
/// once the taint is lifted it is bound there, the Node's capacity (from the VM's size) fitting it.
async fn scheduling(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let reg = xcsp_sim::kube::boot::Registration {
        node_name: "gpu-1".into(),
        provider_id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/gpu-1"
            .into(),
        labels: serde_json::from_value(json!({"pool": "gpu"})).unwrap(),
    };
    let stamp = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut node = xcsp_sim::kube::boot::node(&reg, "Standard_ND96asr_v4", &stamp);
    node["spec"]["taints"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}));
    assert_eq!(node["status"]["allocatable"]["cpu"], "95500m", "{node:#}");
    nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
    // Its kubelet renews its Lease all along, so the node lifecycle controller keeps it Ready.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let kubelet = tokio::spawn(async move {
        loop {
            let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "gpu-1"},
                "spec": {"holderIdentity": "gpu-1", "leaseDurationSeconds": 40,
                         "renewTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
            let _ = leases.patch("gpu-1", &PatchParams::apply("kubelet").force(), &Patch::Apply(&lease)).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NS);
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "cuda"},
        "spec": {"nodeSelector": {"pool": "gpu"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubi9",
                                 "resources": {"requests": {"cpu": "8", "memory": "64Gi"}}}]}}))
    .unwrap();
    // The service-account admission plugin wants the namespace's `default` account, which
    // kube-controller-manager makes shortly after the namespace.
    wait_for("the Pod admitted", 60, async || pods.create(&PostParams::default(), &pod).await.ok()).await;
    let why = wait_for("the scheduler's reason", 60, async || {
        let p = pods.get("cuda").await.ok()?;
        let c = p.status?.conditions?.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
        c.message
    })
    .await;
    // Kubernetes 1.35's TaintToleration plugin counts the Nodes, without naming the taint
    // ("node(s) had untolerated taint(s)"); the lifting below shows which one it was.
    assert!(why.contains("untolerated taint"), "{why}");
    nodes
        .patch(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}}),
            ),
        )
        .await
        .unwrap();
    let bound =
        wait_for("the Pod bound once the taint is lifted", 60, async || pods.get("cuda").await.ok()?.spec?.node_name)
            .await;
    assert_eq!(bound, "gpu-1");
    kubelet.abort();
}
