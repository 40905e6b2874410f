//! The Cluster API providers xcsp installs on a cluster that runs none: the world plays an
//! OpenShift cluster with the `Default` feature set (no Cluster API at all, as every production
//! cluster on AWS), and runs the pods of the managers' Deployments as the upstream binaries
//! `scripts/upstream-setup` builds; the components are the providers' release manifests built
//! from the pinned modules (`$XCSP_UPSTREAM_BIN/components`).

/// The deadlines for upstream controllers, derived from the world's timing (the workspace tests'
/// module, shared by path).
#[path = "../../../tests/src/bounds.rs"]
#[allow(dead_code)]
mod bounds;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;
use xcsp_core::provider::{Progress, Provider, Request};
use xcsp_core::{Address, ResourceType as T, STACK_TAG};
use xcsp_kube::{KubeConfig, KubeProvider};
use xcsp_sim::{SimConfig, SimServer};

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);
impl Progress for Recorder {
    fn waiting(&self, address: &Address, what: &str) {
        self.0.lock().unwrap().push(format!("{address}: {what}"));
    }
}

fn components(name: &str) -> String {
    let bin = std::env::var("XCSP_UPSTREAM_BIN").expect("XCSP_UPSTREAM_BIN (scripts/upstream-setup) is set");
    let path = std::path::Path::new(&bin).join("components").join(name);
    assert!(path.exists(), "{} exists: scripts/upstream-setup writes it", path.display());
    path.display().to_string()
}

/// The IL5 example with a `cluster_api` block naming the components.
fn il5_with_providers(dir: &std::path::Path) -> xcsp_plans::Loaded {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud");
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            let mut text = std::fs::read_to_string(&p).unwrap();
            if text.contains("\ncluster {") {
                text = text.replacen(
                    "\ncluster {",
                    &format!(
                        "\ncluster {{\n  cluster_api {{\n    providers = \"xcsp\"\n    core_components = \"{}\"\n    azure_components = \"{}\"\n  }}\n",
                        components("core-components.yaml"),
                        components("infrastructure-components.yaml")
                    ),
                    1,
                );
            }
            std::fs::write(dir.join(p.file_name().unwrap()), text).unwrap();
        }
    }
    xcsp_plans::load(dir, &Default::default()).unwrap_or_else(|e| panic!("the example with providers loads: {e:?}"))
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_default_cluster_xcsp_installs_runs_and_removes_the_providers() {
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Fast;
    config.openshift = Some(xcsp_sim::OpenShift {
        infrastructure_name: "il5-gpu-x7k2p".into(),
        api_internal_url: "https://api-int.il5.example.mil:6443".into(),
        region: "us-gov-west-1".into(),
        capz: false,
        service_account_issuer: None,
        cluster_network_mtu: xcsp_sim::AWS_CLUSTER_NETWORK_MTU,
        capz_authority_host: None,
        fips: false,
        ovn_ipsec: false,
        worker_time_servers: vec![],
        cluster_hosted_dns: false,
        // A real cluster's Nodes, where the scheduler places the managers' Pods (a world without
        // Nodes runs none).
        control_plane_nodes: true,
        proxy: None,
        mirrors: vec![],
        ebs_csi: false,
        feature_set: xcsp_sim::world::FeatureSet::Default,
    });
    let sim = SimServer::start_with_cluster_async(config)
        .await
        .unwrap_or_else(|e| panic!("the sim and its cluster start: {e}"));
    let client = sim.client().await.expect("an admin client");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig().unwrap()).unwrap();
    let mut kc = KubeConfig::new(&kubeconfig);
    kc.poll_interval = Duration::from_millis(100);
    let kube = KubeProvider::new(kc).await.expect("a client from the kubeconfig");

    // The Default cluster serves no Cluster API: only the IPAM CRDs the cluster-version operator installs.
    let groups = client.list_api_groups().await.unwrap();
    assert!(!groups.groups.iter().any(|g| g.name == "cluster.x-k8s.io"), "no Cluster API on a Default cluster");
    assert!(groups.groups.iter().any(|g| g.name == "ipam.cluster.x-k8s.io"), "the CVO's IPAM CRDs are there");

    let spec_dir = tempfile::tempdir().unwrap();
    let loaded = il5_with_providers(spec_dir.path());
    let stack = loaded.model.stack.clone();
    let pool_ns = xcsp_plans::spec::pool_namespace(&stack, &loaded.model.cluster);
    let providers: Vec<_> =
        loaded.graph.in_order().into_iter().filter(|n| n.address.rtype == T::K8sClusterApiProvider).collect();
    let mut names: Vec<String> = providers.iter().map(|n| n.address.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        ["k8s_cluster_api_provider.approver", "k8s_cluster_api_provider.azure", "k8s_cluster_api_provider.core"]
    );
    // Every Cluster API object of the pool comes after them.
    let machine_set = loaded.graph.nodes().find(|n| n.address.rtype == T::K8sMachineSet).unwrap();
    for p in &providers {
        assert!(machine_set.depends_on.contains(&p.address), "{} after {}", machine_set.address, p.address);
    }

    let progress = Recorder::default();
    let started = Instant::now();
    let mut ids = Vec::new();
    for n in &providers {
        let attrs = n.filled(|_, _| None);
        let req = Request { stack: &stack, address: &n.address, id: None, attributes: &attrs };
        let o = kube.write(req, &progress).await.unwrap_or_else(|e| panic!("install {}: {e}", n.address));
        assert_eq!(o.attributes["available"], xcsp_core::Value::Bool(true), "{}", n.address);
        assert_eq!(o.attributes["watch_namespace"].as_str(), Some(pool_ns.as_str()));
        ids.push(o.id.clone());
    }
    eprintln!("the providers available {:.1} s after the first write", started.elapsed().as_secs_f64());
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "xcsp-capi-system/capi-controller-manager",
            "xcsp-capi-system/machine-approver-capi",
            "xcsp-capz-system/capz-controller-manager"
        ]
    );
    let seen = kube.refresh(&stack, T::K8sClusterApiProvider).await.unwrap();
    let mut versions: Vec<String> = seen
        .iter()
        .map(|o| format!("{} {}", o.address, o.attributes.get("version").and_then(|v| v.as_str()).unwrap_or("-")))
        .collect();
    versions.sort();
    assert_eq!(
        versions,
        [
            "k8s_cluster_api_provider.approver -",
            "k8s_cluster_api_provider.azure v1.26.0",
            "k8s_cluster_api_provider.core v1.13.6"
        ]
    );
    let azure = seen.iter().find(|o| o.address.name == "azure").unwrap();
    assert_eq!(azure.attributes["authority_host"].as_str(), Some("https://login.microsoftonline.us/"));
    assert_eq!(azure.attributes["restarts"], xcsp_core::Value::int(0), "{:?}", azure.attributes.get("last_error"));
    // Each manager runs where the scheduler bound its Pod: a control-plane Node on AWS, never a
    // pool Node across the link.
    let pods_api =
        |ns: &str| kube::Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource("", "v1", "Pod", "pods"));
    for ns in ["xcsp-capi-system", "xcsp-capz-system"] {
        let pods = pods_api(ns).list(&Default::default()).await.unwrap().items;
        assert!(!pods.is_empty(), "the managers' Pods in {ns}");
        for p in pods {
            let node = p.data["spec"]["nodeName"].as_str().unwrap_or_default().to_string();
            assert!(node.starts_with("il5-gpu-x7k2p-master-"), "{:?} on {node:?}", p.metadata.name);
        }
    }
    // The approver runs the cluster's own approver's image, for the pool's Machines only.
    let approvers: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        "xcsp-capi-system",
        &resource("apps", "v1", "Deployment", "deployments"),
    );
    let approver = approvers.get("machine-approver-capi").await.unwrap();
    let container = &approver.data["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "quay.io/openshift/origin-cluster-machine-approver:4.22");
    assert!(container["args"].to_string().contains(&format!("--machine-namespace={pool_ns}")), "{container}");

    // The webhooks answer through their Services with the service CA's certificate: a Cluster
    // written in v1beta1 is converted (CAPI stores v1beta2) and defaulted by CAPI's manager.
    let ns_api: kube::Api<DynamicObject> =
        kube::Api::all_with(client.clone(), &resource("", "v1", "Namespace", "namespaces"));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pool_ns}});
    ns_api.patch(&pool_ns, &PatchParams::apply("test"), &Patch::Apply(&ns)).await.unwrap();
    let clusters: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        &pool_ns,
        &resource("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters"),
    );
    let bare = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "probe", "namespace": pool_ns}, "spec": {"paused": true}});
    let refused = clusters.patch("probe", &PatchParams::apply("test"), &Patch::Apply(&bare)).await.unwrap_err();
    assert!(
        refused.to_string().contains("admission webhook \"validation.cluster.cluster.x-k8s.io\" denied the request"),
        "CAPI's own webhook answered: {refused}"
    );
    // Not paused: CAPI adds its finalizer and, when the Cluster is deleted, removes it (a paused
    // Cluster's finalizer stays, and its CRD with it).
    let cluster = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "probe", "namespace": pool_ns}, "spec": {"infrastructureRef": {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster", "name": "probe"}}});
    clusters
        .patch("probe", &PatchParams::apply("test"), &Patch::Apply(&cluster))
        .await
        .unwrap_or_else(|e| panic!("a Cluster through CAPI's webhooks and conversion: {e}"));
    let v1beta2: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        &pool_ns,
        &resource("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
    );
    let stored = v1beta2.get("probe").await.unwrap();
    assert_eq!(stored.data["spec"]["infrastructureRef"]["name"], "probe");
    // A version change is an update in place: the manager's Deployment rolls to the new image
    // (the world runs the same binary for any tag of CAPZ's repository) and is available again,
    // while the CRDs and the pool's objects stay the same objects.
    let crd_uid = |crds: Vec<DynamicObject>| {
        crds.into_iter()
            .find(|c| c.metadata.name.as_deref() == Some("azuremachines.infrastructure.cluster.x-k8s.io"))
            .and_then(|c| c.metadata.uid)
    };
    let crd_api: kube::Api<DynamicObject> = kube::Api::all_with(
        client.clone(),
        &resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"),
    );
    let crd_before = crd_uid(crd_api.list(&Default::default()).await.unwrap().items).expect("CAPZ's CRD");
    let probe_before = v1beta2.get("probe").await.unwrap().metadata.uid;
    let (at, azure_node) = providers.iter().enumerate().find(|(_, n)| n.address.name == "azure").unwrap();
    let newer = "registry.k8s.io/cluster-api-azure/cluster-api-azure-controller:v1.26.1";
    let mut attrs = azure_node.filled(|_, _| None);
    attrs.insert("image".into(), xcsp_core::Value::string(newer));
    attrs.insert("version".into(), xcsp_core::Value::string("v1.26.1"));
    let req = Request { stack: &stack, address: &azure_node.address, id: Some(&ids[at]), attributes: &attrs };
    let o = kube.write(req, &progress).await.unwrap_or_else(|e| panic!("update the azure provider: {e}"));
    assert_eq!(o.id, ids[at], "the same Deployment, updated");
    assert_eq!(o.attributes["available"], xcsp_core::Value::Bool(true));
    assert_eq!(o.attributes["version"].as_str(), Some("v1.26.1"));
    let capz: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        "xcsp-capz-system",
        &resource("apps", "v1", "Deployment", "deployments"),
    );
    let d = capz.get("capz-controller-manager").await.unwrap();
    let images: Vec<&serde_json::Value> =
        d.data["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| &c["image"]).collect();
    assert_eq!(images, [newer]);
    assert_eq!(crd_uid(crd_api.list(&Default::default()).await.unwrap().items), Some(crd_before));
    assert_eq!(v1beta2.get("probe").await.unwrap().metadata.uid, probe_before, "the pool's objects are untouched");
    clusters.delete("probe", &Default::default()).await.unwrap();
    // CAPI's manager removes its finalizer on the delete's event, at the latest on its resync.
    let letting_go = bounds::Timing::new(xcsp_sim::cluster::Timing::default().to_json()).capi_reconciles();
    let deadline = letting_go.deadline();
    while clusters.get_opt("probe").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "CAPI's manager lets the deleted Cluster go within {letting_go}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A manager that crashes (a hand edit gives it a certificate directory that does not exist):
    // refresh reads its restarts and its last error from its Pod, where the kubelet puts the
    // log's tail because xcsp asks for it (`FallbackToLogsOnError`; CAPZ's release manifest does
    // not). Applying the provider again writes the template back and the manager recovers.
    let mut broken = capz.get("capz-controller-manager").await.unwrap().data;
    let containers = &mut broken["spec"]["template"]["spec"]["containers"];
    containers[0]["args"].as_array_mut().unwrap().push(json!("--webhook-cert-dir=/nonexistent/xcsp-probe"));
    let edit = json!({"spec": {"template": {"spec": {"containers": containers.clone()}}}});
    capz.patch("capz-controller-manager", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    let crashing = bounds::Bound::on_event("the world's pod runner rolling the edited template")
        .then(&bounds::Bound::kubelet_restart());
    let deadline = crashing.deadline();
    let (restarts, last_error) = loop {
        let seen = kube.refresh(&stack, T::K8sClusterApiProvider).await.unwrap();
        let azure = seen.iter().find(|o| o.address.name == "azure").unwrap();
        let restarts = azure.attributes.get("restarts").and_then(|v| v.as_i64()).unwrap_or(0);
        let last = azure.attributes.get("last_error").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        if restarts >= 1 && !last.is_empty() {
            break (restarts, last);
        }
        assert!(Instant::now() < deadline, "the crash and a restart within {crashing}: {last:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(restarts >= 1);
    assert!(last_error.contains("exited with code 1 (Error)"), "{last_error}");
    assert!(last_error.contains("/nonexistent/xcsp-probe"), "the manager's own error, from its log: {last_error}");
    let req = Request { stack: &stack, address: &azure_node.address, id: Some(&ids[at]), attributes: &attrs };
    let o = kube.write(req, &progress).await.unwrap_or_else(|e| panic!("repair the azure provider: {e}"));
    assert_eq!(o.attributes["available"], xcsp_core::Value::Bool(true));
    assert_eq!(o.attributes["restarts"], xcsp_core::Value::int(0), "a new Pod: {:?}", o.attributes.get("last_error"));
    let args =
        capz.get("capz-controller-manager").await.unwrap().data["spec"]["template"]["spec"]["containers"][0]["args"]
            .to_string();
    assert!(!args.contains("xcsp-probe"), "{args}");

    // A manager OpenShift would not admit: a fixed user outside the namespace's range.
    let deployments: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(client.clone(), &pool_ns, &resource("apps", "v1", "Deployment", "deployments"));
    let fixed = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "fixed", "namespace": pool_ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "fixed"}}, "template": {
            "metadata": {"labels": {"app": "fixed"}},
            "spec": {"containers": [{"name": "manager", "image": "registry.k8s.io/cluster-api/cluster-api-controller:v1.13.6",
                "securityContext": {"runAsUser": 65532}}]}}}});
    deployments.patch("fixed", &PatchParams::apply("test"), &Patch::Apply(&fixed)).await.unwrap();
    // The world's pod runner admits (or refuses) a Deployment's pod on its next pass, as the
    // replica-set controller on the watch event.
    let admitting = bounds::Bound::on_event("the replica-set controller (the world's pod runner)");
    let deadline = admitting.deadline();
    let message = loop {
        let d = deployments.get("fixed").await.unwrap();
        let failure = d.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "ReplicaFailure").cloned());
        if let Some(f) = failure {
            break f["message"].as_str().unwrap_or_default().to_string();
        }
        assert!(Instant::now() < deadline, "the world reports the refused pod within {admitting}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(message.contains("unable to validate against any security context constraint"), "{message}");
    assert!(message.contains("runAsUser: Invalid value: 65532"), "{message}");
    deployments.delete("fixed", &Default::default()).await.unwrap();

    // Destroy: the providers' objects go, their CRDs last; the CVO's IPAM CRDs stay.
    for (n, id) in providers.iter().zip(&ids).rev() {
        let attrs = n.filled(|_, _| None);
        let req = Request { stack: &stack, address: &n.address, id: Some(id), attributes: &attrs };
        kube.delete(req, &progress).await.unwrap_or_else(|e| panic!("remove {}: {e}", n.address));
    }
    let crds: kube::Api<DynamicObject> = kube::Api::all_with(
        client.clone(),
        &resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"),
    );
    let left: Vec<String> = crds
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.ends_with("cluster.x-k8s.io"))
        .collect();
    assert_eq!(left, ["ipaddressclaims.ipam.cluster.x-k8s.io", "ipaddresses.ipam.cluster.x-k8s.io"]);
    let labelled = kube::api::ListParams::default().labels(&format!("{STACK_TAG}={stack}"));
    for (g, v, k, p) in [
        ("apps", "v1", "Deployment", "deployments"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings"),
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ] {
        let api: kube::Api<DynamicObject> = kube::Api::all_with(client.clone(), &resource(g, v, k, p));
        let found = api.list(&labelled).await.unwrap().items;
        assert!(
            found.is_empty(),
            "no {k} of xcsp's is left: {:?}",
            found.iter().map(|o| o.metadata.name.clone()).collect::<Vec<_>>()
        );
    }
    drop(sim);
}
