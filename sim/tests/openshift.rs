//! OpenShift's side of the world's upstream cluster, driven by the real `kube` client: the
//! `Infrastructure` and the cluster's own `Cluster` an OpenShift cluster on AWS holds from install,
//! cluster-capi-operator's Cluster admission (the one Cluster of `openshift-cluster-api`, the
//! infrastructure kinds it knows, no deletion there), OpenShift's CAPZ Deployment when CAPZ is
//! installed as the seed proposes, and none of it on a plain cluster.

mod common;

use common::kube_client::resource;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use xcsp_sim::{OpenShift, SimConfig, SimServer};

const NS: &str = "openshift-cluster-api";
const INFRA: &str = "il5-gpu-x7k2p";

fn clusters() -> ApiResource {
    resource("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters")
}

async fn start(openshift: Option<OpenShift>) -> (SimServer, kube::Client) {
    common::with_cluster(SimConfig { openshift, ..SimConfig::default() }).await
}

fn openshift(capz: bool) -> Option<OpenShift> {
    Some(OpenShift {
        infrastructure_name: INFRA.into(),
        api_internal_url: "https://api-int.il5.example.mil:6443".into(),
        region: "us-gov-west-1".into(),
        capz,
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
    })
}

fn cluster(name: &str, ns: &str, infra_kind: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"infrastructureRef": {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": infra_kind, "name": name, "namespace": ns}},
    }))
    .unwrap()
}

/// The API's refusal: its HTTP code and message.
fn refusal<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn namespace(client: &kube::Client, name: &str) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("", "v1", "Namespace", "namespaces"));
    let ns = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    api.create(&PostParams::default(), &ns.unwrap()).await.expect("namespace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openshift_cluster_holds_its_infrastructure_and_admits_one_cluster_in_openshift_cluster_api() {
    let (_server, client) = start(openshift(false)).await;
    // The Infrastructure object, as installers leave it.
    let infra: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Infrastructure", "infrastructures"));
    let status = infra.get("cluster").await.expect("Infrastructure cluster").data["status"].clone();
    assert_eq!(status["infrastructureName"], INFRA);
    assert_eq!(status["platformStatus"]["type"], "AWS");
    assert_eq!(status["apiServerInternalURI"], "https://api-int.il5.example.mil:6443");
    // The network operator's report: an AWS cluster's overlay MTU as installed.
    let network: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Network", "networks"));
    let network = network.get("cluster").await.expect("Network cluster").data["status"].clone();
    assert_eq!(network["clusterNetworkMTU"], 8901, "{network}");
    assert_eq!(network["networkType"], "OVNKubernetes");

    // The cluster's own Cluster, pointing at its AWSCluster.
    let own: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &clusters());
    let mine = own.get(INFRA).await.expect("the cluster's own Cluster");
    assert_eq!(mine.data["spec"]["infrastructureRef"]["kind"], "AWSCluster");

    // A second Cluster in openshift-cluster-api is refused, naming the one name allowed there.
    let (code, message) =
        refusal(own.create(&PostParams::default(), &cluster("il5-gpu-x7k2p-link", NS, "AzureCluster")).await);
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("denied request: cluster name must be il5-gpu-x7k2p in openshift-cluster-api namespace"),
        "{message}"
    );
    // It cannot be deleted either.
    let (code, message) = refusal(own.delete(INFRA, &DeleteParams::default()).await);
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("deletion of cluster is not allowed"), "{message}");
    assert!(own.get(INFRA).await.is_ok(), "still there");

    // Elsewhere a Cluster may have any name, but only an infrastructure kind the webhook knows.
    namespace(&client, "xcsp-gpu").await;
    let other: Api<DynamicObject> = Api::namespaced_with(client.clone(), "xcsp-gpu", &clusters());
    let (code, message) =
        refusal(other.create(&PostParams::default(), &cluster("pool", "xcsp-gpu", "WidgetCluster")).await);
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("spec.infrastructureRef.kind: Unsupported value: \"WidgetCluster\""), "{message}");
    other.create(&PostParams::default(), &cluster("pool", "xcsp-gpu", "AzureCluster")).await.expect("admitted");
    other.delete("pool", &DeleteParams::default()).await.expect("deletable outside openshift-cluster-api");

    // Today's OpenShift on AWS runs no CAPZ.
    let deployments: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &resource("apps", "v1", "Deployment", "deployments"));
    let (code, _) = refusal(deployments.get("capz-controller-manager").await);
    assert_eq!(code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_capz_installed_its_deployment_names_the_service_account_and_token_audience() {
    let (_server, client) = start(openshift(true)).await;
    let deployments: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &resource("apps", "v1", "Deployment", "deployments"));
    let d = deployments.get("capz-controller-manager").await.expect("OpenShift's CAPZ Deployment");
    let pod = &d.data["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "capz-manager");
    let sources = pod["volumes"][0]["projected"]["sources"].as_array().cloned().unwrap_or_default();
    let audiences: Vec<&Value> = sources.iter().map(|s| &s["serviceAccountToken"]["audience"]).collect();
    assert_eq!(audiences, [&json!("api://AzureADTokenExchange")]);
    let sa: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &resource("", "v1", "ServiceAccount", "serviceaccounts"));
    assert!(sa.get("capz-manager").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_cluster_has_no_infrastructure_and_no_openshift_admission() {
    let (_server, client) = start(None).await;
    let infra: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Infrastructure", "infrastructures"));
    let (code, _) = refusal(infra.get("cluster").await);
    assert_eq!(code, 404);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &clusters());
    api.create(&PostParams::default(), &cluster("any-name", NS, "AzureCluster")).await.expect("admitted");
    api.delete("any-name", &DeleteParams::default()).await.expect("deleted");
}
