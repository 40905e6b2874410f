//! The IL5 example's CAPZ/CAPI objects, validated by the world's upstream API server against the
//! CRDs of the pinned CAPZ and CAPI modules (`scripts/upstream-setup`; `XCSP_UPSTREAM_BIN`): a
//! dry-run create with `fieldValidation=Strict`, so types, required fields, enums, patterns,
//! lengths, CEL rules and unknown fields are checked as the API server checks them, and nothing is
//! stored. The check is shown to fail on a wrong type, a missing required field, an unknown field
//! and a value outside an enum.

use std::path::Path;
use std::sync::OnceLock;

use kube::Resource as _;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value as Json, json};
use xcsp_core::{Address, ProviderKind, Value};
use xcsp_sim::{SimConfig, SimServer};

/// One cluster for the whole test binary, with the runtime its client runs on.
struct World {
    _sim: SimServer,
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let _ = xcsp_crypto::install();
        let sim = SimServer::start_with_cluster(SimConfig::default(), 0, Default::default())
            .unwrap_or_else(|e| panic!("the sim and its cluster start: {e}"));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let client = runtime.block_on(sim.client()).expect("a client of the cluster");
        // The kind a pool's Cluster names as its control plane, installed as apply installs it
        // before the Cluster: CAPI's conversion webhook resolves a `controlPlaneRef` by its CRD's
        // contract label.
        runtime.block_on(install(&client, xcsp_kube::control_plane::crd()));
        World { _sim: sim, runtime, client }
    })
}

/// Creates the CRD `crd` and waits for the API server to serve it (`Established`).
async fn install(client: &kube::Client, crd: Json) {
    let gvk = kube::api::GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &kube::api::ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions"));
    let name = crd["metadata"]["name"].as_str().unwrap().to_string();
    api.create(&PostParams::default(), &serde_json::from_value(crd).unwrap()).await.expect("the CRD is made");
    for _ in 0..100 {
        let found = api.get(&name).await.unwrap();
        let conditions = found.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        if conditions.iter().any(|c| c["type"] == "Established" && c["status"] == "True") {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the API server does not serve {name}");
}

/// Every problem the API server finds in `object` (`fieldValidation=Strict`, `dryRun=All`), as
/// `field: message`; empty when it would store it.
fn problems(object: &Json) -> Vec<String> {
    let w = world();
    w.runtime.block_on(async {
        let api_version = object["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap());
        let (resource, _) =
            kube::discovery::pinned_kind(&w.client, &gvk).await.expect("the API server serves the kind");
        let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
        if !ns.is_empty() {
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(w.client.clone());
            let made: k8s_openapi::api::core::v1::Namespace =
                serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
            let _ = namespaces.create(&PostParams::default(), &made).await;
        }
        let path = DynamicObject::url_path(&resource, (!ns.is_empty()).then_some(ns));
        let request = http::Request::post(format!("{path}?dryRun=All&fieldValidation=Strict"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(object).unwrap())
            .unwrap();
        match w.client.request::<DynamicObject>(request).await {
            Ok(_) => Vec::new(),
            Err(kube::Error::Api(e)) => {
                // A schema refusal (422) names each field; a strict decoding one (400) lists the
                // unknown fields in its message.
                let causes: Vec<String> = e
                    .details
                    .iter()
                    .flat_map(|d| d.causes.iter())
                    .filter(|c| !c.field.is_empty())
                    .map(|c| format!("{}: {}", c.field, c.message))
                    .collect();
                if !causes.is_empty() {
                    return causes;
                }
                match e.message.split_once("strict decoding error: ") {
                    Some((_, fields)) => fields
                        .split(", ")
                        .map(|f| match f.strip_prefix("unknown field \"").and_then(|f| f.strip_suffix('"')) {
                            Some(field) => format!("{field}: unknown field"),
                            None => f.to_string(),
                        })
                        .collect(),
                    None => vec![e.message],
                }
            }
            Err(e) => panic!("the API server did not answer: {e}"),
        }
    })
}

/// The objects of a kind a CRD of the reference set defines (CAPZ and CAPI); the built-in and
/// OpenShift kinds have none there.
fn has_crd(o: &Json) -> bool {
    o["apiVersion"].as_str().is_some_and(|v| v.contains("cluster.x-k8s.io/"))
}

/// The IL5 example's CAPZ/CAPI objects, with the values apply would fill in (client id, VNet
/// name).
fn il5_objects() -> Vec<Json> {
    example_objects("il5-govcloud").into_iter().filter(has_crd).collect()
}

/// The one object of `kind` named `name`-ish in `objects`.
fn find<'a>(objects: &'a [Json], kind: &str) -> Vec<&'a Json> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn example_objects(example: &str) -> Vec<Json> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(example);
    let loaded = xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads"));
    loaded
        .graph
        .in_order()
        .into_iter()
        .filter(|n| n.address.rtype.provider() == ProviderKind::Kubernetes && !n.address.rtype.only_waits())
        // What `xcsp render` writes: not the copies apply makes from the cluster.
        .filter(|n| xcsp_kube::copied_at_apply(n.address.rtype).is_none())
        .map(|n| {
            let attrs = n.filled(|from: &Address, output| match (from.rtype.as_str(), output) {
                ("azure_user_assigned_identity", "client_id") => {
                    Some(Value::string("8d3f2c1a-5b6e-4f70-9a81-2c3d4e5f6a7b"))
                }
                ("azure_virtual_network", "name") => Some(Value::string("il5-gpu-link")),
                _ => None,
            });
            xcsp_kube::object(&loaded.model.stack, &n.address, &attrs).unwrap()
        })
        // As `xcsp render` writes them: a Cluster's control plane before it.
        .flat_map(|o| {
            let mut with = xcsp_kube::control_plane::rendered_with(&o);
            with.push(o);
            with
        })
        .collect()
}

#[test]
fn the_il5_objects_are_valid_against_the_capz_and_capi_crds() {
    let objects = il5_objects();
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "AzureClusterIdentity",
            "AzureCluster",
            "Cluster",
            "AzureMachineTemplate",
            "MachineSet",
            "MachineSet",
            "MachineHealthCheck"
        ]
    );
    // All in the pool's own namespace, made first: OpenShift admits one Cluster in
    // openshift-cluster-api, its own.
    let all = example_objects("il5-govcloud");
    assert_eq!(
        all[0],
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": "xcsp-il5-gpu",
            "labels": {"xcsp.io/stack": "il5-gpu"},
            "annotations": {"xcsp.io/address": "k8s_namespace.pools"},
        }})
    );
    for o in &objects {
        assert_eq!(problems(o), Vec::<String>::new(), "{}", serde_json::to_string_pretty(o).unwrap());
        assert_eq!(o["metadata"]["namespace"], "xcsp-il5-gpu");
    }
    assert_eq!(objects[0]["spec"]["allowedNamespaces"]["list"], json!(["xcsp-il5-gpu"]));
    let sets = find(&objects, "MachineSet");
    let ms = sets[0];
    // Bootstrapped from the pool's own machine-config pool, whose node selector is the pool label
    // the kubelet registers the Node with (CAPI copies the role label later).
    assert_eq!(ms["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"], "xcsp-il5-gpu-gpu-user-data");
    assert_eq!(ms["spec"]["template"]["metadata"]["labels"]["node.openshift.io/cloud-provider"], "azure");
    assert_eq!(ms["spec"]["template"]["metadata"]["labels"]["node-role.kubernetes.io/xcsp-il5-gpu-gpu"], "");
    let mcp = find(&all, "MachineConfigPool")[0];
    assert_eq!(mcp["metadata"]["name"], "xcsp-il5-gpu-gpu");
    assert!(mcp["metadata"].get("namespace").is_none(), "a pool is cluster-wide");
    assert_eq!(mcp["spec"]["nodeSelector"]["matchLabels"], json!({"xcsp.io/pool": "il5-gpu-x7k2p-gpu"}));
    assert_eq!(
        mcp["spec"]["machineConfigSelector"]["matchExpressions"][0]["values"],
        json!(["worker", "xcsp-il5-gpu-gpu"])
    );
    let mc = find(&all, "MachineConfig")[0];
    assert_eq!(mc["metadata"]["labels"]["machineconfiguration.openshift.io/role"], "xcsp-il5-gpu-gpu");
    // CAPI reaches the cluster as a service account of the pool's own, bound to what it does there.
    let binding = find(&all, "ClusterRoleBinding")[0];
    assert_eq!(binding["subjects"][0]["namespace"], "xcsp-il5-gpu");
    let roles: Vec<&str> =
        find(&all, "ClusterRole").into_iter().filter_map(|r| r["metadata"]["name"].as_str()).collect();
    assert_eq!(roles, [xcsp_kube::control_plane::CAPI_ROLE, binding["roleRef"]["name"].as_str().unwrap()]);
    let token = find(&all, "Secret")[0];
    assert_eq!(token["type"], "kubernetes.io/service-account-token");
    assert!(token.get("data").is_none(), "the tokens controller fills the token in");
    // One MachineSet per zone, each placing its machines there, one replica each; the health
    // check selects the pool's machines in both.
    let zones: Vec<&Json> = sets.iter().map(|m| &m["spec"]["template"]["spec"]["failureDomain"]).collect();
    assert_eq!(zones, [&json!("1"), &json!("2")]);
    assert!(sets.iter().all(|m| m["spec"]["replicas"] == 1));
    let pool = &ms["spec"]["template"]["metadata"]["labels"]["xcsp.io/pool"];
    assert_eq!(&find(&objects, "MachineHealthCheck")[0]["spec"]["selector"]["matchLabels"]["xcsp.io/pool"], pool);
    // The template's name carries the digest of what it renders (CAPZ refuses changes to it).
    let amt = find(&objects, "AzureMachineTemplate")[0];
    let template = amt["metadata"]["name"].as_str().unwrap();
    assert!(template.starts_with("il5-gpu-x7k2p-gpu-") && template.len() == "il5-gpu-x7k2p-gpu-".len() + 8);
    assert_eq!(ms["spec"]["template"]["spec"]["infrastructureRef"]["name"], template);
    assert_eq!(amt["spec"]["template"]["spec"]["additionalTags"]["xcsp.io_stack"], "il5-gpu");
    assert_eq!(objects[1]["spec"]["azureEnvironment"], "AzureUSGovernmentCloud");
    assert_eq!(objects[0]["spec"]["type"], "WorkloadIdentity");
}

/// Regression: a pool with `image_id` rendered an empty marketplace image, which the API server
/// refused (publisher, offer, sku and version required); it is an image by id. The public
/// example's image, imported from the release's VHD, is booted by its gallery version's id.
#[test]
fn the_public_example_with_an_image_id_is_valid_too() {
    let objects: Vec<Json> = example_objects("public").into_iter().filter(has_crd).collect();
    assert!(!objects.is_empty());
    for o in &objects {
        assert_eq!(problems(o), Vec::<String>::new(), "{}", serde_json::to_string_pretty(o).unwrap());
    }
    let template = objects.iter().find(|o| o["kind"] == "AzureMachineTemplate").unwrap();
    let image = &template["spec"]["template"]["spec"]["image"];
    assert!(image["id"].is_string() && image.get("marketplace").is_none(), "{image}");
}

#[test]
fn the_api_server_refuses_a_wrong_type_a_missing_required_field_and_an_unknown_one() {
    let objects = il5_objects();
    let mut ms = find(&objects, "MachineSet")[0].clone();
    ms["spec"]["replicas"] = json!("two");
    assert!(
        problems(&ms).iter().any(|p| p
            .starts_with("spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer")),
        "{:?}",
        problems(&ms)
    );
    ms["spec"]["template"]["spec"]["gpus"] = json!(2);
    assert!(problems(&ms).contains(&"spec.template.spec.gpus: unknown field".to_string()), "{:?}", problems(&ms));
    let mut amt = find(&objects, "AzureMachineTemplate")[0].clone();
    amt["spec"]["template"]["spec"].as_object_mut().unwrap().remove("vmSize");
    assert!(problems(&amt).contains(&"spec.template.spec.vmSize: Required value".to_string()), "{:?}", problems(&amt));
    let mut id = objects[0].clone();
    id["spec"]["type"] = json!("Password");
    assert!(
        problems(&id).iter().any(|p| p.starts_with("spec.type: Unsupported value: \"Password\": supported values:")),
        "{:?}",
        problems(&id)
    );
}

#[test]
fn render_writes_one_yaml_document_per_object_in_apply_order() {
    let objects = example_objects("il5-govcloud");
    let files = xcsp_kube::render(&objects);
    assert_eq!(files[0].0, "01-namespace-xcsp-il5-gpu.yaml");
    assert_eq!(files[1].0, "02-azureclusteridentity-il5-gpu-x7k2p-capz.yaml");
    assert!(files.iter().any(|f| f.0.ends_with("-machineset-il5-gpu-x7k2p-gpu-usgovvirginia1.yaml")), "{files:?}");
    let mut golden = String::new();
    for ((name, text), o) in files.iter().zip(&objects) {
        let back: Json = serde_norway::from_str(text).unwrap();
        assert_eq!(&back, o);
        // What `xcsp render` writes passes the API server's schema check as written.
        if has_crd(&back) {
            assert_eq!(problems(&back), Vec::<String>::new(), "{name}");
        }
        golden.push_str(&format!("# {name}\n{text}"));
    }
    insta::assert_snapshot!("il5_rendered_objects", golden);
}

#[test]
fn unknown_values_ask_for_an_apply_first() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud");
    let loaded = xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads"));
    let aci = loaded.graph.nodes().find(|n| n.address.rtype.as_str() == "k8s_azure_cluster_identity").unwrap();
    let err = xcsp_kube::object("il5-gpu", &aci.address, &aci.attributes).unwrap_err();
    assert!(err.to_string().contains("run `xcsp apply` first"), "{err}");
}

#[test]
fn the_il5_capi_objects_in_v1beta2_are_valid_against_capi_1_13s_v1beta2_schemas() {
    let capi: Vec<Json> = il5_objects()
        .into_iter()
        .filter(|o| o["apiVersion"].as_str().is_some_and(|v| v.starts_with("cluster.x-k8s.io/")))
        .map(|o| xcsp_kube::in_capi_version(o, "v1beta2"))
        .collect();
    let kinds: Vec<&str> = capi.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Cluster", "MachineSet", "MachineSet", "MachineHealthCheck"], "{kinds:?}");
    for o in &capi {
        assert_eq!(o["apiVersion"], "cluster.x-k8s.io/v1beta2");
        let kind = o["kind"].as_str().unwrap();
        let found = problems(o);
        assert!(found.is_empty(), "{kind}: {found:?}\n{o:#}");
    }
    let cluster = find(&capi, "Cluster")[0];
    assert_eq!(
        cluster["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureCluster", "name": cluster["spec"]["infrastructureRef"]["name"]})
    );
    let check = find(&capi, "MachineHealthCheck")[0];
    assert_eq!(check["spec"]["checks"]["unhealthyNodeConditions"][0]["timeoutSeconds"], 900, "{check:#}");
    assert_eq!(check["spec"]["checks"]["nodeStartupTimeoutSeconds"], 2700, "{check:#}");
    assert_eq!(check["spec"]["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"], 1, "{check:#}");
    // The same objects in v1beta1 are the ones apply writes.
    let same: Vec<Json> = il5_objects().into_iter().map(|o| xcsp_kube::in_capi_version(o, "v1beta1")).collect();
    assert_eq!(same, il5_objects());
}

/// The keys the cluster signs its service-account tokens with, as xcsp reads them for the OIDC
/// check: the API server's `/openid/v1/jwks`, and a token it issues (TokenRequest, CAPZ's
/// audience) carries one of those key ids in its header.
#[test]
fn the_cluster_names_the_keys_it_signs_tokens_with() {
    let w = world();
    w.runtime.block_on(async {
        let keys = xcsp_kube::survey::signing_keys_of(&w.client).await.expect("the cluster's JWKS");
        assert!(!keys.is_empty(), "{keys:?}");
        let request = || {
            http::Request::post("/api/v1/namespaces/default/serviceaccounts/default/token")
                .header("Content-Type", "application/json")
                .body(
                    serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["api://AzureADTokenExchange"]}}))
                    .unwrap(),
                )
                .unwrap()
        };
        // The namespace's `default` account is made by kube-controller-manager shortly after start.
        let mut answer = Json::Null;
        for _ in 0..60 {
            if let Ok(text) = w.client.request_text(request()).await {
                answer = serde_json::from_str(&text).unwrap();
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        let token = answer["status"]["token"].as_str().expect("a token");
        use base64::Engine as _;
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap();
        let header: Json = serde_json::from_slice(&header).unwrap();
        let kid = header["kid"].as_str().expect("a key id");
        assert!(keys.iter().any(|k| k == kid), "{kid} in {keys:?}");
    });
}
