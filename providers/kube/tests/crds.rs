//! The IL5 example's CAPZ/CAPI objects, validated against the real CRD schemas in
//! `../shared/reference/crds` (or `$XCSP_REFERENCE_DIR/crds`): types, required fields, enums,
//! string lengths and unknown fields, as the API server checks a structural schema. The
//! validator is shown to fail on a wrong type and a missing required field.

use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};
use xcsp_core::{Address, ProviderKind, Value};

fn reference() -> PathBuf {
    let dir = std::env::var("XCSP_REFERENCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference"));
    assert!(dir.join("crds").is_dir(), "the CRDs are missing at {}/crds (set XCSP_REFERENCE_DIR)", dir.display());
    dir.join("crds")
}

/// The v1beta1 openAPIV3Schema of the CRD for `kind`.
fn schema(kind: &str) -> Json {
    let file = match kind {
        "AzureClusterIdentity" => "capz-v1.26.0/infrastructure.cluster.x-k8s.io_azureclusteridentities.yaml",
        "AzureCluster" => "capz-v1.26.0/infrastructure.cluster.x-k8s.io_azureclusters.yaml",
        "AzureMachineTemplate" => "capz-v1.26.0/infrastructure.cluster.x-k8s.io_azuremachinetemplates.yaml",
        "Cluster" => "capi-v1.13.3/cluster.x-k8s.io_clusters.yaml",
        "MachineSet" => "capi-v1.13.3/cluster.x-k8s.io_machinesets.yaml",
        "MachineHealthCheck" => "capi-v1.13.3/cluster.x-k8s.io_machinehealthchecks.yaml",
        other => panic!("no CRD for {other}"),
    };
    let text = std::fs::read_to_string(reference().join(file)).unwrap();
    let crd: Json = serde_norway::from_str(&text).unwrap();
    let version =
        crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == "v1beta1").expect("v1beta1 served");
    version["schema"]["openAPIV3Schema"].clone()
}

/// Structural-schema checks; every problem as `path: what`.
fn validate(schema: &Json, v: &Json, path: &str, out: &mut Vec<String>) {
    let ty = schema["type"].as_str();
    let ok = match (ty, v) {
        (Some("object"), Json::Object(_)) | (Some("array"), Json::Array(_)) | (Some("string"), Json::String(_)) => true,
        (Some("boolean"), Json::Bool(_)) => true,
        (Some("integer"), Json::Number(n)) => n.is_i64() || n.is_u64(),
        (Some("number"), Json::Number(_)) => true,
        (None, _) => true,
        _ => false,
    };
    if !ok && schema["x-kubernetes-int-or-string"] != true {
        out.push(format!("{path}: expected {}, got {v}", ty.unwrap_or("?")));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(v)
    {
        out.push(format!("{path}: {v} is not one of {allowed:?}"));
    }
    if let (Some(s), Some(max)) = (v.as_str(), schema["maxLength"].as_u64())
        && s.len() as u64 > max
    {
        out.push(format!("{path}: longer than {max}"));
    }
    if let (Some(s), Some(min)) = (v.as_str(), schema["minLength"].as_u64())
        && (s.len() as u64) < min
    {
        out.push(format!("{path}: shorter than {min}"));
    }
    match v {
        Json::Object(map) => {
            for r in schema["required"].as_array().into_iter().flatten().filter_map(Json::as_str) {
                if !map.contains_key(r) {
                    out.push(format!("{path}.{r}: required"));
                }
            }
            let props = schema["properties"].as_object();
            for (k, x) in map {
                match props.and_then(|p| p.get(k)) {
                    Some(s) => validate(s, x, &format!("{path}.{k}"), out),
                    None if !schema["additionalProperties"].is_null() => {
                        if schema["additionalProperties"].is_object() {
                            validate(&schema["additionalProperties"], x, &format!("{path}.{k}"), out);
                        }
                    }
                    None if schema["x-kubernetes-preserve-unknown-fields"] == true || props.is_none() => {}
                    None => out.push(format!("{path}.{k}: unknown field")),
                }
            }
        }
        Json::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                validate(&schema["items"], x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn problems(object: &Json) -> Vec<String> {
    let mut out = Vec::new();
    validate(&schema(object["kind"].as_str().unwrap()), object, "", &mut out);
    out
}

/// The example's objects, with the values apply would fill in (client id, VNet name).
fn il5_objects() -> Vec<Json> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud");
    let loaded = xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads"));
    loaded
        .graph
        .in_order()
        .into_iter()
        .filter(|n| n.address.rtype.provider() == ProviderKind::Kubernetes)
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
        .collect()
}

#[test]
fn the_il5_objects_are_valid_against_the_capz_and_capi_crds() {
    let objects = il5_objects();
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["AzureClusterIdentity", "AzureCluster", "Cluster", "AzureMachineTemplate", "MachineSet", "MachineHealthCheck"]
    );
    for o in &objects {
        assert_eq!(problems(o), Vec::<String>::new(), "{}", serde_json::to_string_pretty(o).unwrap());
        assert_eq!(o["metadata"]["namespace"], "openshift-cluster-api");
    }
    let ms = &objects[4];
    assert_eq!(ms["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"], "worker-user-data");
    assert_eq!(ms["spec"]["template"]["metadata"]["labels"]["node.openshift.io/cloud-provider"], "azure");
    assert_eq!(objects[1]["spec"]["azureEnvironment"], "AzureUSGovernmentCloud");
    assert_eq!(objects[0]["spec"]["type"], "WorkloadIdentity");
}

#[test]
fn the_validator_rejects_a_wrong_type_and_a_missing_required_field() {
    let objects = il5_objects();
    let mut ms = objects[4].clone();
    ms["spec"]["replicas"] = json!("two");
    assert!(problems(&ms).iter().any(|p| p.starts_with(".spec.replicas: expected integer")), "{:?}", problems(&ms));
    let mut amt = objects[3].clone();
    amt["spec"]["template"]["spec"].as_object_mut().unwrap().remove("vmSize");
    assert!(problems(&amt).contains(&".spec.template.spec.vmSize: required".to_string()), "{:?}", problems(&amt));
    let mut id = objects[0].clone();
    id["spec"]["type"] = json!("Password");
    assert!(
        problems(&id).iter().any(|p| p.starts_with(".spec.type: \"Password\" is not one of")),
        "{:?}",
        problems(&id)
    );
}

#[test]
fn render_writes_one_yaml_document_per_object_in_apply_order() {
    let objects = il5_objects();
    let files = xcsp_kube::render(&objects);
    assert_eq!(files[0].0, "01-azureclusteridentity-il5-gpu-x7k2p-capz.yaml");
    assert_eq!(files[4].0, "05-machineset-il5-gpu-x7k2p-gpu.yaml");
    for ((_, text), o) in files.iter().zip(&objects) {
        let back: Json = serde_norway::from_str(text).unwrap();
        assert_eq!(&back, o);
    }
}

#[test]
fn unknown_values_ask_for_an_apply_first() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud");
    let loaded = xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads"));
    let aci = loaded.graph.nodes().find(|n| n.address.rtype.as_str() == "k8s_azure_cluster_identity").unwrap();
    let err = xcsp_kube::object("il5-gpu", &aci.address, &aci.attributes).unwrap_err();
    assert!(err.to_string().contains("run `xcsp apply` first"), "{err}");
}
