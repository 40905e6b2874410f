//! The KubeProvider against the world's upstream cluster (kube-apiserver, kube-controller-manager
//! and CAPI's manager; `XCSP_UPSTREAM_BIN`, which `scripts/test` sets), with the real kube client:
//! the IL5 example's objects applied with server-side apply, read back by kind, applied again
//! without a change, an invalid object refused with the schema's message, and a MachineSet
//! deleted only after its machines are gone.

/// The deadlines for upstream controllers, derived from the world's timing (the workspace tests'
/// module, shared by path).
#[path = "../../../tests/src/bounds.rs"]
#[allow(dead_code)]
mod bounds;

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value as Json, json};
use xcsp_core::provider::{Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{Address, ProviderKind, ResourceType as T, Value};
use xcsp_kube::{KubeConfig, KubeProvider};
use xcsp_sim::{SimConfig, SimServer};

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);
impl Progress for Recorder {
    fn waiting(&self, address: &Address, what: &str) {
        self.0.lock().unwrap().push(format!("{address}: {what}"));
    }
}

/// The kinds of a pool's namespace the checks below count.
const KINDS: &[(T, &str, &str)] = &[
    (T::K8sAzureCluster, "v1beta1", "AzureCluster"),
    (T::K8sAzureClusterIdentity, "v1beta1", "AzureClusterIdentity"),
    (T::K8sAzureMachineTemplate, "v1beta1", "AzureMachineTemplate"),
    (T::K8sCluster, "v1beta2", "Cluster"),
    (T::K8sMachineHealthCheck, "v1beta2", "MachineHealthCheck"),
    (T::K8sMachineSet, "v1beta2", "MachineSet"),
    (T::K8sUserDataSecret, "v1", "Secret"),
    (T::K8sServiceAccount, "v1", "ServiceAccount"),
];

/// (kind, name, what xcsp's last write left: the object's generation and the time of the
/// `xcsp` field manager's entry) of every object of [`KINDS`] and every Machine in `ns`, listed
/// through the API server. The cluster's controllers write status and metadata of their own; an
/// apply that changes nothing moves neither.
async fn objects(client: &kube::Client, ns: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let machine = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Machine"),
        "machines",
    );
    let mut resources: Vec<(kube::api::ApiResource, &str)> =
        KINDS.iter().map(|(t, v, k)| (xcsp_kube::resource(*t, v).unwrap(), *k)).collect();
    resources.push((machine, "Machine"));
    for (ar, kind) in resources {
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(client.clone(), ns, &ar);
        for o in api.list(&Default::default()).await.unwrap().items {
            let written = o
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .filter(|m| m.manager.as_deref() == Some("xcsp"))
                .map(|m| format!("{:?}", m.time))
                .collect::<Vec<_>>()
                .join(",");
            let generation = o.metadata.generation.unwrap_or_default();
            out.push((kind.to_string(), o.metadata.name.unwrap_or_default(), format!("{generation} {written}")));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_il5_objects_are_applied_read_back_reapplied_and_deleted_machines_first() {
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Fast;
    // An OpenShift cluster: the machine-config operator writes the pool's pointer ignition.
    config.openshift = Some(xcsp_sim::OpenShift {
        infrastructure_name: "il5-gpu-x7k2p".into(),
        api_internal_url: "https://api-int.il5.example.mil:6443".into(),
        region: "us-gov-west-1".into(),
        capz: true,
        service_account_issuer: None,
        cluster_network_mtu: xcsp_sim::AWS_CLUSTER_NETWORK_MTU,
        // The IL5 tenant is Azure Government's: its owner pointed CAPZ at that authority.
        capz_authority_host: Some("https://login.microsoftonline.us/".into()),
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
    let sim = SimServer::start_with_cluster_async(config)
        .await
        .unwrap_or_else(|e| panic!("the sim and its cluster start: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig().unwrap()).unwrap();
    let mut kc = KubeConfig::new(&kubeconfig);
    kc.poll_interval = Duration::from_millis(50);
    let kube = KubeProvider::new(kc).await.expect("a client from the kubeconfig");

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud");
    let loaded = xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads"));
    let stack = loaded.model.stack.clone();
    // The pool's own namespace: OpenShift admits one Cluster in openshift-cluster-api, its own.
    let ns = xcsp_plans::spec::pool_namespace(&stack, &loaded.model.cluster);
    assert_ne!(ns, "openshift-cluster-api");
    // What the Azure side would give: an identity's client id, the VNet's name.
    let made_up = |from: &Address, output: &str| Some(Value::string(format!("{output}-of-{}", from.name)));
    let nodes: Vec<_> = loaded
        .graph
        .in_order()
        .into_iter()
        // The objects (not the waits for the MachineSets' Nodes, which make none).
        .filter(|n| n.address.rtype.provider() == ProviderKind::Kubernetes && !n.address.rtype.only_waits())
        .collect();
    assert_eq!(
        nodes.len(),
        17,
        "Namespace, AzureClusterIdentity, AzureCluster, Cluster, CAPI's access (ServiceAccount, token Secret, \
         ClusterRole, ClusterRoleBinding, kubeconfig Secret), the pool's MachineConfig, MachineConfigPool and \
         user-data Secret, AzureMachineTemplate, a MachineSet per zone, MachineHealthCheck, RuntimeClass"
    );
    assert_eq!(nodes[0].address.rtype, T::K8sNamespace, "the namespace comes first");

    let mut made: Vec<Observed> = Vec::new();
    for n in &nodes {
        let attrs = n.filled(made_up);
        let req = Request { stack: &stack, address: &n.address, id: None, attributes: &attrs };
        let o = kube.write(req, &Recorder::default()).await.unwrap_or_else(|e| panic!("apply {}: {e}", n.address));
        let name = attrs["name"].as_str().unwrap();
        let id = if n.address.rtype.cluster_scoped() { name.to_string() } else { format!("{ns}/{name}") };
        assert_eq!(o.id, id);
        made.push(o);
    }
    // The AzureCluster xcsp manages is ready (CAPZ leaves an externally managed one to its
    // manager) and names the control plane's endpoint, the cluster's API.
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let azure_clusters: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), &ns, &xcsp_kube::resource(T::K8sAzureCluster, "v1beta1").unwrap());
    let ac = nodes.iter().find(|n| n.address.rtype == T::K8sAzureCluster).unwrap();
    let ac = azure_clusters.get(ac.attributes["name"].as_str().unwrap()).await.unwrap();
    assert_eq!(ac.data["status"]["ready"], true, "{:?}", ac.data);
    assert_eq!(ac.data["spec"]["controlPlaneEndpoint"]["port"], 6443, "{:?}", ac.data);
    assert!(
        ac.data["spec"]["controlPlaneEndpoint"]["host"].as_str().is_some_and(|h| h.starts_with("api.")),
        "{:?}",
        ac.data
    );
    // The pool's Cluster is marked initialized, as OpenShift marks its own: it has no control
    // plane of its own, and CAPI watches its Nodes only once it is.
    let clusters: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), &ns, &xcsp_kube::resource(T::K8sCluster, "v1beta2").unwrap());
    let cl = nodes.iter().find(|n| n.address.rtype == T::K8sCluster).unwrap();
    let cl = clusters.get(cl.attributes["name"].as_str().unwrap()).await.unwrap();
    // The sim serves CAPI 1.13's v1beta2 and prefers it, so the provider wrote and reads that:
    // the v1beta2 conditions are the status's own, the v1beta1 ones deprecated.
    assert_eq!(cl.types.as_ref().map(|t| t.api_version.as_str()), Some("cluster.x-k8s.io/v1beta2"));
    assert_eq!(cl.data["spec"]["infrastructureRef"]["apiGroup"], "infrastructure.cluster.x-k8s.io", "{:?}", cl.data);
    for conditions in [&cl.data["status"]["deprecated"]["v1beta1"]["conditions"], &cl.data["status"]["conditions"]] {
        let conditions = conditions.as_array().cloned().unwrap_or_default();
        assert!(
            conditions.iter().any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True"),
            "both the v1beta1 and the v1beta2 condition: {:?}",
            cl.data
        );
    }
    let first = objects(&client, &ns).await;
    let kinds: Vec<&str> = first.iter().map(|(k, _, _)| k.as_str()).filter(|k| *k != "Machine").collect();
    assert_eq!(
        kinds,
        [
            "AzureCluster",
            "AzureClusterIdentity",
            "AzureMachineTemplate",
            "Cluster",
            "MachineHealthCheck",
            "MachineSet",
            "MachineSet",
            "Secret",
            "Secret",
            "Secret",
            "ServiceAccount",
            // The namespace's own, which kube-controller-manager's serviceaccount controller makes.
            "ServiceAccount"
        ]
    );
    // The copies xcsp makes from what the cluster holds: the pool's pointer ignition as CAPZ reads
    // bootstrap data, and a kubeconfig with the token the tokens controller issued.
    let secrets: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), &ns, &xcsp_kube::resource(T::K8sUserDataSecret, "v1beta1").unwrap());
    let decoded = |s: &kube::api::DynamicObject, key: &str| {
        use base64::Engine as _;
        let b = base64::engine::general_purpose::STANDARD.decode(s.data["data"][key].as_str().unwrap()).unwrap();
        String::from_utf8(b).unwrap()
    };
    let user_data = nodes.iter().find(|n| n.address.rtype == T::K8sUserDataSecret).unwrap();
    let user_data = secrets.get(user_data.attributes["name"].as_str().unwrap()).await.unwrap();
    let role = format!("{ns}-gpu");
    assert_eq!(decoded(&user_data, "format"), "ignition");
    let pointer: Json = serde_json::from_str(&decoded(&user_data, "value")).unwrap();
    assert_eq!(
        pointer["ignition"]["config"]["merge"][0]["source"],
        json!(format!("https://api-int.il5.example.mil:22623/config/{role}")),
        "the pointer fetches the pool's own config"
    );
    let kubeconfig_secret = nodes.iter().find(|n| n.address.rtype == T::K8sKubeconfigSecret).unwrap();
    let kubeconfig_secret = secrets.get(kubeconfig_secret.attributes["name"].as_str().unwrap()).await.unwrap();
    assert!(kubeconfig_secret.metadata.labels.as_ref().unwrap().contains_key("cluster.x-k8s.io/cluster-name"));
    let written: Json = serde_norway::from_str(&decoded(&kubeconfig_secret, "value")).unwrap();
    assert_eq!(written["clusters"][0]["cluster"]["server"], "https://api-int.il5.example.mil:6443");
    let token = written["users"][0]["user"]["token"].as_str().unwrap();
    let admin_token = sim.cluster().unwrap().admin_token.clone();
    assert_ne!(token, admin_token, "the service account's token, not the kubeconfig's own");
    // A JWT the tokens controller signed for the service account (header, claims, signature).
    assert_eq!(token.split('.').count(), 3, "{token}");
    let claims = {
        use base64::Engine as _;
        let part = token.split('.').nth(1).unwrap();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap();
        serde_json::from_slice::<Json>(&bytes).unwrap()
    };
    assert!(claims["sub"].as_str().is_some_and(|s| s.starts_with(&format!("system:serviceaccount:{ns}:"))), "{claims}");

    // Applied again, unchanged: the API server keeps every resourceVersion.
    for n in &nodes {
        let attrs = n.filled(made_up);
        let id = made.iter().find(|o| o.address == n.address).map(|o| o.id.clone());
        let req = Request { stack: &stack, address: &n.address, id: id.as_deref(), attributes: &attrs };
        kube.write(req, &Recorder::default()).await.unwrap();
    }
    let again: Vec<_> = objects(&client, &ns).await.into_iter().filter(|(k, _, _)| k != "Machine").collect();
    let before: Vec<_> = first.iter().filter(|(k, _, _)| k != "Machine").cloned().collect();
    assert_eq!(again, before, "a no-op apply changes nothing");

    // Refresh: by kind, across namespaces, by the stack's label.
    let mut types: Vec<T> = nodes.iter().map(|n| n.address.rtype).collect();
    types.dedup();
    for rtype in types {
        let mut found: Vec<Address> =
            kube.refresh(&stack, rtype).await.unwrap().into_iter().map(|o| o.address).collect();
        let mut want: Vec<Address> =
            nodes.iter().filter(|n| n.address.rtype == rtype).map(|n| n.address.clone()).collect();
        found.sort();
        want.sort();
        assert_eq!(found, want, "{rtype:?}");
    }

    // Scaled by hand: refresh shows the new count (drift), and an apply that would scale it back
    // meets the other manager's field and says so instead of taking it (never forced).
    let ms = made.iter().find(|o| o.address.rtype == T::K8sMachineSet).unwrap();
    let (ns, name) = ms.id.split_once('/').unwrap();
    let ar = xcsp_kube::resource(T::K8sMachineSet, "v1beta2").unwrap();
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(client.clone(), ns, &ar);
    let by_hand = kube::api::PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    api.patch(name, &by_hand, &kube::api::Patch::Merge(json!({ "spec": { "replicas": 5 } }))).await.unwrap();
    let found = kube.refresh(&stack, T::K8sMachineSet).await.unwrap();
    assert_eq!(found.iter().find(|o| o.address == ms.address).unwrap().attributes["replicas"], Value::int(5));
    let node = nodes.iter().find(|n| n.address == ms.address).unwrap();
    let attrs = node.filled(made_up);
    let req = Request { stack: &stack, address: &ms.address, id: Some(&ms.id), attributes: &attrs };
    match kube.write(req, &Recorder::default()).await {
        Err(ProviderError::Failed { code, message, .. }) => {
            assert_eq!(code, "FieldManagerConflict");
            assert!(message.contains("kubectl-edit") && message.contains("spec.replicas"), "{message}");
        }
        other => panic!("an apply over another manager's field went through: {other:?}"),
    }
    api.patch(name, &by_hand, &kube::api::Patch::Merge(json!({ "spec": { "replicas": 1 } }))).await.unwrap();

    // The stack label removed by hand: the label selector misses the object, the recorded id
    // does not (refresh_known), so plan sees it and never plans a create.
    let amt = made.iter().find(|o| o.address.rtype == T::K8sAzureMachineTemplate).unwrap();
    let (amt_ns, amt_name) = amt.id.split_once('/').unwrap();
    let client_for_checks = client.clone();
    let amt_api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client,
        amt_ns,
        &xcsp_kube::resource(T::K8sAzureMachineTemplate, "v1beta1").unwrap(),
    );
    let unlabel = json!({ "metadata": { "labels": { "xcsp.io/stack": null } } });
    amt_api.patch(amt_name, &by_hand, &kube::api::Patch::Merge(unlabel)).await.unwrap();
    assert!(kube.refresh(&stack, T::K8sAzureMachineTemplate).await.unwrap().is_empty());
    let known = vec![amt.clone()];
    let found = kube.refresh_known(&stack, T::K8sAzureMachineTemplate, &known).await.unwrap();
    assert_eq!(found.iter().map(|o| (&o.address, &o.id)).collect::<Vec<_>>(), vec![(&amt.address, &amt.id)]);

    // An identity of a type CAPZ does not know: refused with the schema's reason.
    let identity = nodes.iter().find(|n| n.address.rtype == T::K8sAzureClusterIdentity).unwrap();
    let mut bad = identity.filled(made_up);
    bad.insert("type".into(), Value::string("Magic"));
    bad.insert("name".into(), Value::string("another"));
    let req = Request { stack: &stack, address: &identity.address, id: None, attributes: &bad };
    match kube.write(req, &Recorder::default()).await {
        Err(ProviderError::Failed { code, message, .. }) => {
            assert_eq!(code, "Invalid");
            assert!(message.contains("spec.type"), "{message}");
        }
        other => panic!("an invalid identity type was accepted: {other:?}"),
    }

    // A namespace that exists and is not this stack's is not taken over (destroy would delete it
    // with whatever is in it).
    let namespaces: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(amt_api.clone().into_client(), &xcsp_kube::resource(T::K8sNamespace, "v1beta1").unwrap());
    let theirs: kube::api::DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "someone-elses", "labels": {"xcsp.io/stack": "other"}}}),
    )
    .unwrap();
    namespaces.create(&Default::default(), &theirs).await.unwrap();
    let ns_node = &nodes[0];
    let mut attrs = ns_node.filled(made_up);
    attrs.insert("name".into(), Value::string("someone-elses"));
    let req = Request { stack: &stack, address: &ns_node.address, id: None, attributes: &attrs };
    match kube.write(req, &Recorder::default()).await {
        Err(ProviderError::Failed { code, message, .. }) => {
            assert_eq!(code, "NamespaceTaken");
            assert!(message.contains("someone-elses exists and is stack `other`'s"), "{message}");
        }
        other => panic!("another stack's namespace was taken over: {other:?}"),
    }

    // Destroy in reverse: each zone's MachineSet waits for its machine to go first.
    let making = bounds::Timing::new(xcsp_sim::cluster::Timing::default().to_json()).capi_reconciles();
    let deadline = making.deadline();
    while objects(&client_for_checks, &ns).await.iter().filter(|(k, _, _)| k == "Machine").count() < 2 {
        assert!(std::time::Instant::now() < deadline, "the MachineSet made its machines within {making}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let progress = Recorder::default();
    for o in made.iter().rev() {
        let attrs = nodes.iter().find(|n| n.address == o.address).unwrap().filled(made_up);
        let req = Request { stack: &stack, address: &o.address, id: Some(&o.id), attributes: &attrs };
        kube.delete(req, &progress).await.unwrap_or_else(|e| panic!("delete {}: {e}", o.address));
    }
    let said = progress.0.lock().unwrap().clone();
    assert!(said.iter().filter(|s| s.contains("waiting for 1 machine of MachineSet")).count() >= 2, "{said:?}");
    assert_eq!(objects(&client_for_checks, &ns).await, vec![], "nothing left");
    let pools: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client_for_checks.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("machineconfiguration.openshift.io", "v1", "MachineConfigPool"),
            "machineconfigpools",
        ),
    );
    assert!(pools.get_opt(&role).await.unwrap().is_none(), "MachineConfigPool {role} is left");
    let roles: kube::Api<k8s_openapi::api::rbac::v1::ClusterRole> = kube::Api::all(client_for_checks.clone());
    let role_name = format!("{ns}-il5-gpu-x7k2p-link-capi");
    assert!(roles.get_opt(&role_name).await.unwrap().is_none(), "ClusterRole {role_name} is left");
    // The namespace goes last; the namespace controller finishes it.
    let namespaces_api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client_for_checks.clone());
    let left = namespaces_api.get_opt(&ns).await.unwrap();
    assert!(left.as_ref().is_none_or(|n| n.metadata.deletion_timestamp.is_some()), "the namespace went last: {left:?}");
    // Gone already: deleting again is fine.
    let o = &made[0];
    let attrs = nodes[0].filled(made_up);
    let req = Request { stack: &stack, address: &o.address, id: Some(&o.id), attributes: &attrs };
    kube.delete(req, &progress).await.expect("a second delete of a gone object succeeds");
}
