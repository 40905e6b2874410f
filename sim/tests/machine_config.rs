//! The controllers an OpenShift cluster runs that a new machine pool meets, driven by the real
//! `kube` client: the machine-config operator (install's pools, template configs and
//! `worker-user-data`; a new pool rendered from the configs it selects, and its managed pointer
//! secret in `openshift-machine-api`), stand-ins as clients of the world's upstream cluster; and
//! kube-controller-manager's service-account tokens controller, which the product's kubeconfig
//! Secrets rely on.

mod common;

use common::kube_client::resource;

use std::time::{Duration, Instant};

use base64::Engine as _;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use xcsp_sim::{OpenShift, SimConfig, SimServer};

fn pools() -> ApiResource {
    resource("machineconfiguration.openshift.io", "v1", "MachineConfigPool", "machineconfigpools")
}

fn configs() -> ApiResource {
    resource("machineconfiguration.openshift.io", "v1", "MachineConfig", "machineconfigs")
}

fn secrets() -> ApiResource {
    resource("", "v1", "Secret", "secrets")
}

async fn start(openshift: bool) -> (SimServer, kube::Client) {
    let openshift = openshift.then(|| OpenShift {
        infrastructure_name: "il5-gpu-x7k2p".into(),
        api_internal_url: "https://api-int.il5.example.mil:6443".into(),
        region: "us-gov-west-1".into(),
        capz: true,
        service_account_issuer: None,
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
    common::with_cluster(SimConfig { openshift, ..SimConfig::default() }).await
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("an object")
}

/// `key` of a Secret's data, decoded.
fn data(secret: &DynamicObject, key: &str) -> Option<String> {
    let b64 = secret.data["data"][key].as_str()?;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).ok()?).ok()
}

/// Reads `name` with `api` until `done` holds of it (the controllers run between requests).
async fn until(api: &Api<DynamicObject>, name: &str, done: impl Fn(&DynamicObject) -> bool) -> DynamicObject {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(o) = api.get_opt(name).await.expect("get") {
            if done(&o) {
                return o;
            }
        }
        assert!(Instant::now() < deadline, "{name} never got there: {:?}", api.get_opt(name).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pool(name: &str, selector: Value) -> DynamicObject {
    object(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {"machineConfigSelector": selector,
                 "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}},
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pool_is_rendered_from_the_configs_it_selects_and_gets_a_managed_pointer_secret() {
    let (server, client) = start(true).await;
    let pools_api: Api<DynamicObject> = Api::all_with(client.clone(), &pools());
    let configs_api: Api<DynamicObject> = Api::all_with(client.clone(), &configs());
    let machine_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "openshift-machine-api", &secrets());

    // Install's worker pool, rendered from its three template configs; the installer's pointer.
    let worker = until(&pools_api, "worker", |p| p.data["status"]["configuration"]["name"].is_string()).await;
    let sources: Vec<&str> = worker.data["status"]["configuration"]["source"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["00-worker", "01-worker-container-runtime", "01-worker-kubelet"]);
    let installer = machine_api.get("worker-user-data").await.expect("the installer's secret");
    let pointer: Value = serde_json::from_str(&data(&installer, "userData").unwrap()).unwrap();
    assert_eq!(
        pointer["ignition"]["config"]["merge"][0]["source"],
        "https://api-int.il5.example.mil:22623/config/worker"
    );

    // A custom pool that inherits from worker (MCO docs/custom-pools.md), with a config of its own
    // that masks an AWS unit; it is rendered after the worker's configs and gets its pointer.
    let own = object(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-gpu-azure", "labels": {"machineconfiguration.openshift.io/role": "gpu"}},
        "spec": {"config": {"ignition": {"version": "3.2.0"},
            "systemd": {"units": [{"name": "aws-kubelet-providerid.service", "mask": true}]}}},
    }));
    configs_api.create(&PostParams::default(), &own).await.expect("config made");
    let selector = json!({"matchExpressions": [{"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "gpu"]}]});
    pools_api.create(&PostParams::default(), &pool("gpu", selector)).await.expect("pool made");
    let gpu = until(&pools_api, "gpu", |p| p.data["status"]["configuration"]["name"].is_string()).await;
    let rendered = gpu.data["status"]["configuration"]["name"].as_str().unwrap().to_string();
    assert!(rendered.starts_with("rendered-gpu-"), "{rendered}");
    let last = gpu.data["status"]["configuration"]["source"].as_array().unwrap().last().cloned().unwrap();
    assert_eq!(last["name"], "99-gpu-azure", "a custom role's configs come after the worker's");
    let merged = configs_api.get(&rendered).await.expect("the rendered config");
    let units = merged.data["spec"]["config"]["systemd"]["units"].as_array().unwrap();
    let unit = units.iter().find(|u| u["name"] == "aws-kubelet-providerid.service").unwrap();
    assert_eq!(unit["mask"], true, "the pool's own config overrides the worker's unit: {unit}");
    assert_eq!(units.iter().filter(|u| u["name"] == "aws-kubelet-providerid.service").count(), 1);

    let managed = until(&machine_api, "gpu-user-data-managed", |_| true).await;
    let pointer: Value = serde_json::from_str(&data(&managed, "userData").unwrap()).unwrap();
    assert_eq!(pointer["ignition"]["config"]["merge"][0]["source"], "https://api-int.il5.example.mil:22623/config/gpu");
    assert_eq!(pointer["ignition"]["version"], "3.5.0");
    let ca = pointer["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"].as_str().unwrap();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca.strip_prefix("data:text/plain;charset=utf-8;base64,").expect("a data URL"))
        .unwrap();
    assert!(String::from_utf8(pem).unwrap().contains("BEGIN CERTIFICATE"));
    assert!(
        managed
            .metadata
            .labels
            .unwrap()
            .contains_key("machineconfiguration.openshift.io/managed-ca-bundle-derived-from-configmap")
    );

    // What the pool owns goes with it (Kubernetes' garbage collector, which watches a kind of a
    // CRD only once its discovery, every 30 s, has found it: up to a minute here).
    pools_api.delete("gpu", &DeleteParams::default()).await.expect("pool deleted");
    let deadline = Instant::now() + Duration::from_secs(60);
    while machine_api.get_opt("gpu-user-data-managed").await.unwrap().is_some()
        || configs_api.get_opt(&rendered).await.unwrap().is_some()
    {
        assert!(Instant::now() < deadline, "the pool's secret or rendered config outlives it");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(configs_api.get_opt("99-gpu-azure").await.unwrap().is_some(), "a config the pool selected is not its own");

    // A pool that selects nothing is not rendered, and says so.
    pools_api.create(&PostParams::default(), &pool("empty", json!({}))).await.expect("pool made");
    let empty = until(&pools_api, "empty", |p| p.data["status"]["conditions"].is_array()).await;
    assert!(empty.data["status"]["configuration"]["name"].is_null());
    let degraded =
        empty.data["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "RenderDegraded");
    assert_eq!(degraded.unwrap()["status"], "True");
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_secret_is_filled_for_its_account_and_goes_with_it() {
    let (server, client) = start(false).await;
    let sa_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource("", "v1", "ServiceAccount", "serviceaccounts"));
    let secret_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &secrets());
    let token_secret = |name: &str, account: &str| {
        object(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": account}}}))
    };
    sa_api
        .create(
            &PostParams::default(),
            &object(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "capi"}})),
        )
        .await
        .expect("account made");
    secret_api.create(&PostParams::default(), &token_secret("capi-token", "capi")).await.expect("secret made");
    let filled = until(&secret_api, "capi-token", |s| s.data["data"]["token"].is_string()).await;
    assert!(data(&filled, "ca.crt").unwrap().contains("BEGIN CERTIFICATE"));
    assert_eq!(data(&filled, "namespace").unwrap(), "default");
    let sa = sa_api.get("capi").await.unwrap();
    assert_eq!(
        filled.metadata.annotations.unwrap()["kubernetes.io/service-account.uid"],
        sa.metadata.uid.unwrap(),
        "the secret carries its account's uid"
    );
    // A token secret for an account that does not exist is deleted; so is one whose account goes.
    secret_api.create(&PostParams::default(), &token_secret("orphan", "nobody")).await.expect("secret made");
    let cleaning = common::bounds::Bound::on_event("kube-controller-manager's service account token controller");
    let deadline = cleaning.deadline();
    while secret_api.get_opt("orphan").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the orphan token secret stays past {cleaning}");
    }
    sa_api.delete("capi", &DeleteParams::default()).await.expect("account deleted");
    while secret_api.get_opt("capi-token").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the token secret outlives its account");
    }
    drop(server);
}

/// A kubelet's heartbeat for `node`: its Lease renewed now (the node lifecycle controller reads it).
async fn heartbeat(client: &kube::Client, node: &str) {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": node},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now}});
    let patch = kube::api::Patch::Apply(&lease);
    leases.patch(node, &kube::api::PatchParams::apply("kubelet").force(), &patch).await.expect("lease renewed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_never_comes_back_holds_its_pool_s_next_config_from_every_other_node() {
    let (server, client) = start(true).await;
    let pools_api: Api<DynamicObject> = Api::all_with(client.clone(), &pools());
    let configs_api: Api<DynamicObject> = Api::all_with(client.clone(), &configs());
    let nodes_api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("", "v1", "Node", "nodes"));
    let selector = json!({"matchExpressions": [{"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "gpu"]}]});
    let mut gpu = pool("gpu", selector);
    gpu.data["spec"]["nodeSelector"] = json!({"matchLabels": {"xcsp.io/pool": "il5-gpu"}});
    pools_api.create(&PostParams::default(), &gpu).await.expect("pool made");
    let first = until(&pools_api, "gpu", |p| p.data["status"]["configuration"]["name"].is_string()).await;
    let first = first.data["status"]["configuration"]["name"].as_str().unwrap().to_string();

    // Two of the pool's Nodes, both on the pool's config (as their daemons' first run leaves
    // them): `alive` posts, `left` is a removed machine's, its Ready Unknown for good.
    for (name, ready) in [("alive", "True"), ("left", "Unknown")] {
        let node = object(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
            "labels": {"xcsp.io/pool": "il5-gpu", "node-role.kubernetes.io/worker": ""},
            "annotations": {"machineconfiguration.openshift.io/currentConfig": first,
                "machineconfiguration.openshift.io/desiredConfig": first,
                "machineconfiguration.openshift.io/state": "Done"}}}));
        nodes_api.create(&PostParams::default(), &node).await.expect("node made");
        let status = json!({"status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        nodes_api
            .patch_status(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status))
            .await
            .expect("status posted");
    }
    heartbeat(&client, "alive").await;
    let counted = until(&pools_api, "gpu", |p| p.data["status"]["machineCount"] == 2).await;
    assert_eq!(counted.data["status"]["unavailableMachineCount"], 1, "{}", counted.data["status"]);

    // A change for every worker (an admin's MachineConfig, as a pull-secret change or an upgrade
    // makes one): the pool renders a new config, and no Node is pointed at it while the
    // unavailable one uses up `maxUnavailable: 1`.
    let extra = object(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-extra", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/extra", "mode": 420,
            "contents": {"source": "data:,x"}}]}}},
    }));
    configs_api.create(&PostParams::default(), &extra).await.expect("config made");
    let next = until(&pools_api, "gpu", |p| p.data["spec"]["configuration"]["name"].as_str() != Some(&first)).await;
    let next = next.data["spec"]["configuration"]["name"].as_str().unwrap().to_string();
    for _ in 0..8 {
        heartbeat(&client, "alive").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let alive = nodes_api.get("alive").await.unwrap();
        assert_eq!(
            alive.metadata.annotations.unwrap()["machineconfiguration.openshift.io/desiredConfig"],
            first,
            "the node controller pointed a Node at {next} with no capacity left"
        );
    }
    let held = pools_api.get("gpu").await.unwrap();
    let updated =
        held.data["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Updated").cloned();
    assert_eq!(updated.unwrap()["status"], "False", "{}", held.data["status"]);
    assert_eq!(held.data["status"]["updatedMachineCount"], 0, "{}", held.data["status"]);

    // The leftover Node deleted (what Cluster API does for the pool's Cluster, whose control
    // plane xcsp's object stands for): the rollout goes on.
    nodes_api.delete("left", &DeleteParams::default()).await.expect("node deleted");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        heartbeat(&client, "alive").await;
        let alive = nodes_api.get("alive").await.unwrap();
        if alive.metadata.annotations.unwrap()["machineconfiguration.openshift.io/desiredConfig"] == next {
            break;
        }
        assert!(Instant::now() < deadline, "the alive Node was never pointed at {next}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(server);
}
