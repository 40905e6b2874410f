//! The Kubernetes API emulator driven by the real `kube` client: server-side apply (ownership,
//! idempotence, conflicts, force, dropped fields), CRD validation answered 422, MachineSets that
//! grow and lose Machines, label selectors, optimistic concurrency, 401 without the token,
//! discovery, and the admin side (kubeconfig, object list, journal, reset). These tests need the
//! CRDs in `shared/reference/crds` (or `$XCSP_REFERENCE_DIR/crds`) and fail without them.

mod common;

use common::kube_client::resource;

use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use xcsp_sim::{SimConfig, SimServer};

const NS: &str = "openshift-cluster-api";

fn amt() -> ApiResource {
    resource("infrastructure.cluster.x-k8s.io", "v1beta1", "AzureMachineTemplate", "azuremachinetemplates")
}

fn machine_sets() -> ApiResource {
    resource("cluster.x-k8s.io", "v1beta1", "MachineSet", "machinesets")
}

fn machines() -> ApiResource {
    resource("cluster.x-k8s.io", "v1beta1", "Machine", "machines")
}

/// A sim with the given latency profile and a client built from its kubeconfig.
async fn start(profile: &str) -> (SimServer, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = SimServer::start(SimConfig::default(), 0).expect("sim starts");
    server.sim.world.patch_config(&json!({"latency": {"profile": profile}})).expect("profile");
    let crds = server.sim.kube.registry();
    assert!(crds.error.is_none(), "the CRDs must load (set XCSP_REFERENCE_DIR): {:?}", crds.error);
    let client = client_for(&server.kubeconfig()).await;
    (server, client)
}

async fn client_for(kubeconfig: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config");
    kube::Client::try_from(config).expect("client")
}

fn template(name: &str, vm_size: Option<&str>, disk: Value) -> Value {
    let mut spec = json!({"osDisk": {"osType": "Linux", "diskSizeGB": disk}, "image": {"id": "/subscriptions/s/img"}});
    if let Some(v) = vm_size {
        spec["vmSize"] = json!(v);
    }
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "AzureMachineTemplate",
        "metadata": {"name": name, "namespace": NS, "labels": {"pool": "gpu"}},
        "spec": {"template": {"spec": spec}},
    })
}

fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn managers(o: &DynamicObject) -> Vec<(String, String)> {
    o.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| (m.manager.clone().unwrap_or_default(), m.operation.clone().unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn server_side_apply_validates_owns_fields_and_is_idempotent() {
    let (_server, client) = start("instant").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &amt());
    let pp = PatchParams::apply("xcsp");

    let created =
        api.patch("gpu", &pp, &Patch::Apply(&template("gpu", Some("Standard_NC6s_v3"), json!(128)))).await.unwrap();
    assert_eq!(created.data["spec"]["template"]["spec"]["vmSize"], "Standard_NC6s_v3");
    // Defaults from the CRD are filled in, as the API server does.
    assert_eq!(created.data["spec"]["template"]["spec"]["osDisk"]["cachingType"], "None");
    let read = api.get("gpu").await.unwrap();
    assert_eq!(managers(&read), [("xcsp".to_string(), "Apply".to_string())]);
    let fields = serde_json::to_value(&read.metadata.managed_fields.as_ref().unwrap()[0].fields_v1).unwrap();
    assert_eq!(fields["f:spec"]["f:template"]["f:spec"]["f:vmSize"], json!({}), "{fields}");
    assert_eq!(read.metadata.generation, Some(1));

    let again =
        api.patch("gpu", &pp, &Patch::Apply(&template("gpu", Some("Standard_NC6s_v3"), json!(128)))).await.unwrap();
    assert_eq!(
        again.metadata.resource_version, read.metadata.resource_version,
        "a no-op apply keeps the resourceVersion"
    );
    // A metadata change is a new resourceVersion but not a new generation (the spec is immutable:
    // `an_azure_machine_template_refuses_spec_changes_as_capz_does`).
    let mut labelled = template("gpu", Some("Standard_NC6s_v3"), json!(128));
    labelled["metadata"]["labels"]["tier"] = json!("a");
    let relabelled = api.patch("gpu", &pp, &Patch::Apply(&labelled)).await.unwrap();
    assert_ne!(relabelled.metadata.resource_version, read.metadata.resource_version);
    assert_eq!(relabelled.metadata.generation, Some(1));

    let wrong = api.patch("bad", &pp, &Patch::Apply(&template("bad", Some("Standard_D4s_v3"), json!("big")))).await;
    let s = api_error(wrong.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    assert!(
        s.message.starts_with("AzureMachineTemplate.infrastructure.cluster.x-k8s.io \"bad\" is invalid"),
        "{}",
        s.message
    );
    assert!(s.message.contains("spec.template.spec.osDisk.diskSizeGB"), "{}", s.message);
    let causes = &s.details.as_ref().unwrap().causes;
    assert_eq!(causes[0].field, "spec.template.spec.osDisk.diskSizeGB");
    assert_eq!(causes[0].reason, "FieldValueTypeInvalid");

    let missing = api.patch("bad", &pp, &Patch::Apply(&template("bad", None, json!(128)))).await;
    let s = api_error(missing.unwrap_err());
    assert_eq!(s.code, 422);
    assert!(s.message.contains("spec.template.spec.vmSize: Required value"), "{}", s.message);
    assert_eq!(api_error(api.get("bad").await.unwrap_err()).code, 404, "an invalid object is not stored");

    let no_manager =
        api.patch("gpu", &PatchParams::default(), &Patch::Apply(&template("gpu", Some("x"), json!(1)))).await;
    let s = api_error(no_manager.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "apply without a field manager is refused: {s:?}");

    let mut other_ns = template("gpu", Some("Standard_NC6s_v3"), json!(128));
    other_ns["metadata"]["namespace"] = json!("default");
    let s = api_error(api.patch("gpu", &pp, &Patch::Apply(&other_ns)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
}

/// An AzureCluster with the given `additionalTags`: its spec is mutable (unlike an
/// AzureMachineTemplate's), so the apply mechanics are shown on it.
fn azure_cluster(name: &str, tags: Value) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "AzureCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"location": "usgovvirginia", "additionalTags": tags},
    })
}

fn azure_clusters() -> ApiResource {
    resource("infrastructure.cluster.x-k8s.io", "v1beta1", "AzureCluster", "azureclusters")
}

#[tokio::test]
async fn a_second_manager_conflicts_and_force_takes_the_field() {
    let (_server, client) = start("instant").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &azure_clusters());
    let first = api
        .patch("il5", &PatchParams::apply("xcsp"), &Patch::Apply(&azure_cluster("il5", json!({"owner": "a"}))))
        .await
        .unwrap();
    assert_eq!(first.metadata.generation, Some(1));

    // Same value: shared ownership, no conflict.
    let same = azure_cluster("il5", json!({"owner": "a"}));
    api.patch("il5", &PatchParams::apply("ops"), &Patch::Apply(&same)).await.unwrap();

    let other = azure_cluster("il5", json!({"owner": "b"}));
    let s = api_error(api.patch("il5", &PatchParams::apply("ops"), &Patch::Apply(&other)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{s:?}");
    let cause = &s.details.as_ref().unwrap().causes[0];
    assert_eq!(cause.reason, "FieldManagerConflict");
    assert_eq!(cause.field, ".spec.additionalTags.owner");
    assert_eq!(cause.message, "conflict with \"xcsp\"", "an applier is named without an apiVersion");
    assert_eq!(s.message, "Apply failed with 1 conflict: conflict with \"xcsp\": .spec.additionalTags.owner");
    assert_eq!(api.get("il5").await.unwrap().data["spec"]["additionalTags"]["owner"], "a");

    let forced = api.patch("il5", &PatchParams::apply("ops").force(), &Patch::Apply(&other)).await.unwrap();
    assert_eq!(forced.data["spec"]["additionalTags"]["owner"], "b");
    assert_eq!(forced.metadata.generation, Some(2), "a spec change bumps the generation");
    // Now xcsp's old value conflicts with ops.
    let s = api_error(
        api.patch("il5", &PatchParams::apply("xcsp"), &Patch::Apply(&azure_cluster("il5", json!({"owner": "a"}))))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 409);
    assert!(s.details.as_ref().unwrap().causes[0].message.contains("\"ops\""));

    // An update (merge patch) never conflicts: it takes the field from its owners.
    let merge = PatchParams { field_manager: Some("editor".into()), ..Default::default() };
    let patched =
        api.patch("il5", &merge, &Patch::Merge(json!({"spec": {"additionalTags": {"owner": "c"}}}))).await.unwrap();
    assert!(managers(&patched).contains(&("editor".into(), "Update".into())), "{:?}", managers(&patched));
}

#[tokio::test]
async fn a_field_dropped_from_the_applied_config_is_removed_unless_another_manager_owns_it() {
    let (_server, client) = start("instant").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &azure_clusters());
    let xcsp = PatchParams::apply("xcsp");
    api.patch("il5", &xcsp, &Patch::Apply(&azure_cluster("il5", json!({"a": "1", "b": "2"})))).await.unwrap();
    let o = api.patch("il5", &xcsp, &Patch::Apply(&azure_cluster("il5", json!({"a": "1"})))).await.unwrap();
    assert_eq!(o.data["spec"]["additionalTags"], json!({"a": "1"}));

    // ops co-owns tag a; xcsp dropping it leaves it; ops dropping it too removes it.
    let ops = PatchParams::apply("ops");
    api.patch("il5", &ops, &Patch::Apply(&azure_cluster("il5", json!({"a": "1"})))).await.unwrap();
    let mut bare = azure_cluster("il5", json!({}));
    bare["spec"].as_object_mut().unwrap().remove("additionalTags");
    let o = api.patch("il5", &xcsp, &Patch::Apply(&bare)).await.unwrap();
    assert_eq!(o.data["spec"]["additionalTags"], json!({"a": "1"}));
    let o = api.patch("il5", &ops, &Patch::Apply(&azure_cluster("il5", json!({"z": "9"})))).await.unwrap();
    assert_eq!(o.data["spec"]["additionalTags"], json!({"z": "9"}));

    // Unknown fields are pruned by default and refused with fieldValidation=Strict.
    let mut unknown = bare.clone();
    unknown["spec"]["gpuCount"] = json!(4);
    let o = api.patch("il5", &xcsp, &Patch::Apply(&unknown)).await.unwrap();
    assert!(o.data["spec"].get("gpuCount").is_none());
    let s = api_error(api.patch("il5", &xcsp.clone().validation_strict(), &Patch::Apply(&unknown)).await.unwrap_err());
    assert_eq!(s.code, 400);
    assert!(s.message.contains("unknown field \"spec.gpuCount\""), "{}", s.message);
}

/// An AzureCluster whose `spec.networkSpec.subnets` (a map list keyed by `name` in CAPZ's CRD) holds
/// `subnets`.
fn with_subnets(subnets: Value) -> Value {
    let mut c = azure_cluster("il5", json!({}));
    c["spec"].as_object_mut().unwrap().remove("additionalTags");
    c["spec"]["networkSpec"] = json!({"subnets": subnets});
    c
}

#[tokio::test]
async fn map_lists_merge_item_by_item_between_managers_and_sets_and_keys_must_be_unique() {
    let (_server, client) = start("instant").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &azure_clusters());
    let (xcsp, ops) = (PatchParams::apply("xcsp"), PatchParams::apply("ops"));
    api.patch(
        "il5",
        &xcsp,
        &Patch::Apply(&with_subnets(json!([{"name": "gpu", "role": "node", "cidrBlocks": ["10.8.1.0/24"]}]))),
    )
    .await
    .unwrap();
    // A second applier adds its own subnet: no conflict, both stay.
    let o = api
        .patch("il5", &ops, &Patch::Apply(&with_subnets(json!([{"name": "bastion", "role": "bastion"}]))))
        .await
        .unwrap();
    let names = |o: &DynamicObject| -> Vec<String> {
        o.data["spec"]["networkSpec"]["subnets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&o), ["gpu", "bastion"]);
    let subnets = |o: &DynamicObject| -> BTreeMap<String, Value> {
        let mf = o.metadata.managed_fields.as_ref().unwrap();
        mf.iter()
            .map(|m| {
                let f = &m.fields_v1.as_ref().unwrap().0["f:spec"]["f:networkSpec"]["f:subnets"];
                (m.manager.clone().unwrap(), f.clone())
            })
            .collect()
    };
    let owned = subnets(&o);
    assert_eq!(owned["xcsp"]["k:{\"name\":\"gpu\"}"]["."], json!({}), "{owned:?}");
    assert!(owned["xcsp"]["k:{\"name\":\"gpu\"}"].get("f:cidrBlocks").is_some(), "{owned:?}");
    assert!(owned["ops"].get("k:{\"name\":\"gpu\"}").is_none(), "{owned:?}");

    // A controller's update of one field of xcsp's item takes that field only: xcsp's next apply,
    // which leaves the field out, meets no conflict and the controller's value stays.
    let mut live = api.get("il5").await.unwrap();
    live.data["spec"]["networkSpec"]["subnets"][0]["id"] = json!("/subscriptions/s/x/subnets/gpu");
    live.metadata.managed_fields = None;
    api.replace("il5", &PostParams { field_manager: Some("capz".into()), ..Default::default() }, &live).await.unwrap();
    let o = api
        .patch(
            "il5",
            &xcsp,
            &Patch::Apply(&with_subnets(json!([{"name": "gpu", "role": "node", "cidrBlocks": ["10.8.1.0/24"]}]))),
        )
        .await
        .unwrap();
    assert_eq!(o.data["spec"]["networkSpec"]["subnets"][0]["id"], "/subscriptions/s/x/subnets/gpu");
    assert_eq!(subnets(&o)["capz"]["k:{\"name\":\"gpu\"}"], json!({"f:id": {}}));
    // Changing a field xcsp owns inside the item is a conflict naming the item by its key.
    let s = api_error(
        api.patch("il5", &ops, &Patch::Apply(&with_subnets(json!([{"name": "bastion", "role": "bastion"}, {"name": "gpu", "role": "node", "cidrBlocks": ["10.9.0.0/24"]}]))))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 409, "{s:?}");
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"xcsp\": .spec.networkSpec.subnets[name=\"gpu\"].cidrBlocks"
    );

    // xcsp dropping its subnet takes away what only xcsp owned in it; capz's `id` keeps the item,
    // which then lacks the `role` CAPZ's schema requires: refused, as the API server would.
    let s = api_error(api.patch("il5", &xcsp, &Patch::Apply(&with_subnets(json!([])))).await.unwrap_err());
    assert_eq!(
        (s.code, s.details.as_ref().unwrap().causes[0].field.as_str()),
        (422, "spec.networkSpec.subnets[0].role")
    );
    // With ops applying the same item too (equal values: no conflict), xcsp's drop leaves it whole.
    let gpu = json!({"name": "gpu", "role": "node", "cidrBlocks": ["10.8.1.0/24"]});
    api.patch("il5", &ops, &Patch::Apply(&with_subnets(json!([{"name": "bastion", "role": "bastion"}, gpu]))))
        .await
        .unwrap();
    let o = api
        .patch("il5", &xcsp, &Patch::Apply(&with_subnets(json!([{"name": "extra", "role": "node"}]))))
        .await
        .unwrap();
    assert_eq!(names(&o), ["gpu", "bastion", "extra"]);
    assert_eq!(o.data["spec"]["networkSpec"]["subnets"][0]["cidrBlocks"], json!(["10.8.1.0/24"]));
    // An item only xcsp owns goes when xcsp drops it.
    let o = api.patch("il5", &xcsp, &Patch::Apply(&with_subnets(json!([])))).await.unwrap();
    assert_eq!(names(&o), ["gpu", "bastion"]);

    // Two items with one key are refused as the API server's list-type validation refuses them.
    let mut twins: DynamicObject =
        serde_json::from_value(with_subnets(json!([{"name": "b", "role": "node"}, {"name": "b", "role": "node"}])))
            .unwrap();
    twins.metadata.name = Some("twins".into());
    let s = api_error(api.create(&PostParams::default(), &twins).await.unwrap_err());
    assert_eq!(s.code, 422, "{s:?}");
    let causes = &s.details.as_ref().unwrap().causes;
    assert!(
        causes.iter().any(|c| c.reason == "FieldValueDuplicate"
            && c.field == "spec.networkSpec.subnets[1]"
            && c.message == "Duplicate value: map[string]interface {}{\"name\":\"b\"}"),
        "{causes:?}"
    );
}

#[tokio::test]
async fn a_crds_cel_rule_refuses_what_it_forbids() {
    let (_server, client) = start("instant").await;
    let mhcs = resource("cluster.x-k8s.io", "v1beta1", "MachineHealthCheck", "machinehealthchecks");
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &mhcs);
    let mhc = |ty: &str| {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineHealthCheck",
            "metadata": {"name": "gpu", "namespace": NS},
            "spec": {"clusterName": "il5", "selector": {"matchLabels": {"pool": "gpu"}},
                "unhealthyMachineConditions": [{"type": ty, "status": "False", "timeout": "5m"}]}})
    };
    // CAPI 1.13's CRD: `!(self in ['Ready', ...])` on unhealthyMachineConditions[].type.
    let s = api_error(api.patch("gpu", &PatchParams::apply("xcsp"), &Patch::Apply(&mhc("Ready"))).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    let causes = &s.details.as_ref().unwrap().causes;
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(
        (causes[0].reason.as_str(), causes[0].field.as_str(), causes[0].message.as_str()),
        (
            "FieldValueInvalid",
            "spec.unhealthyMachineConditions[0].type",
            "Invalid value: \"Ready\": type must not be one of: Ready, Available, HealthCheckSucceeded, OwnerRemediated, ExternallyRemediated"
        )
    );
    assert!(api.get_opt("gpu").await.unwrap().is_none(), "nothing stored");
    api.patch("gpu", &PatchParams::apply("xcsp"), &Patch::Apply(&mhc("GPUHealthy"))).await.unwrap();
}

#[tokio::test]
async fn an_azure_machine_template_refuses_spec_changes_as_capz_does() {
    let (server, client) = start("instant").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &amt());
    let xcsp = PatchParams::apply("xcsp");
    let created =
        api.patch("gpu", &xcsp, &Patch::Apply(&template("gpu", Some("Standard_NC6s_v3"), json!(128)))).await.unwrap();
    let denied = |s: &kube::core::Status| {
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
        let prefix = "admission webhook \"validation.azuremachinetemplate.infrastructure.cluster.x-k8s.io\" denied \
                      the request: AzureMachineTemplate.infrastructure.cluster.x-k8s.io \"gpu\" is invalid: \
                      AzureMachineTemplate.spec.template.spec: Invalid value: {";
        assert!(s.message.starts_with(prefix), "{}", s.message);
        let immutable = "}: AzureMachineTemplate spec.template.spec field is immutable. Please create new resource \
                         instead. ref doc: https://cluster-api.sigs.k8s.io/tasks/updating-machine-templates.html";
        assert!(s.message.ends_with(immutable), "{}", s.message);
        let d = s.details.as_ref().unwrap();
        assert_eq!(
            (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
            ("gpu", "infrastructure.cluster.x-k8s.io", "AzureMachineTemplate")
        );
        assert_eq!(d.causes.len(), 1);
        assert_eq!(
            (d.causes[0].reason.as_str(), d.causes[0].field.as_str()),
            ("FieldValueInvalid", "AzureMachineTemplate.spec.template.spec")
        );
        assert!(d.causes[0].message.starts_with("Invalid value: {\""), "{}", d.causes[0].message);
        assert!(d.causes[0].message.ends_with(&immutable[1..]), "{}", d.causes[0].message);
    };

    // Server-side apply, with and without force, merge patch and PUT: all refused.
    let bigger = template("gpu", Some("Standard_NC6s_v3"), json!(256));
    denied(&api_error(api.patch("gpu", &xcsp, &Patch::Apply(&bigger)).await.unwrap_err()));
    denied(&api_error(api.patch("gpu", &xcsp.clone().force(), &Patch::Apply(&bigger)).await.unwrap_err()));
    let merge = PatchParams::default();
    let vm = json!({"spec": {"template": {"spec": {"vmSize": "Standard_D8s_v5"}}}});
    denied(&api_error(api.patch("gpu", &merge, &Patch::Merge(&vm)).await.unwrap_err()));
    let mut replaced = api.get("gpu").await.unwrap();
    replaced.data["spec"]["template"]["spec"]["vmSize"] = json!("Standard_D8s_v5");
    denied(&api_error(api.replace("gpu", &PostParams::default(), &replaced).await.unwrap_err()));
    // A plain dry run is refused too; only CAPI's topology dry runs (annotated) pass.
    let dry = PatchParams { dry_run: true, ..Default::default() };
    denied(&api_error(api.patch("gpu", &dry, &Patch::Merge(&vm)).await.unwrap_err()));
    let topology = json!({"metadata": {"annotations": {"topology.cluster.x-k8s.io/dry-run": ""}},
        "spec": {"template": {"spec": {"vmSize": "Standard_D8s_v5"}}}});
    let dry_ok = api.patch("gpu", &dry, &Patch::Merge(&topology)).await.unwrap();
    assert_eq!(dry_ok.data["spec"]["template"]["spec"]["vmSize"], "Standard_D8s_v5");
    let stored = api.get("gpu").await.unwrap();
    assert_eq!(stored.data["spec"], created.data["spec"], "nothing refused or dry-run was stored");
    assert_eq!(stored.metadata.resource_version, created.metadata.resource_version);

    // The same spec (re-applied, or PUT back as read) and metadata changes are allowed.
    let again =
        api.patch("gpu", &xcsp, &Patch::Apply(&template("gpu", Some("Standard_NC6s_v3"), json!(128)))).await.unwrap();
    assert_eq!(again.metadata.resource_version, created.metadata.resource_version);
    let labels = json!({"metadata": {"labels": {"tier": "a"}, "annotations": {"note": "x"}}});
    let relabelled = api.patch("gpu", &merge, &Patch::Merge(&labels)).await.unwrap();
    assert_eq!(relabelled.labels()["tier"], "a");
    let mut annotated = template("gpu", Some("Standard_NC6s_v3"), json!(128));
    annotated["metadata"]["annotations"] = json!({"xcsp.io/digest": "abc"});
    api.patch("gpu", &xcsp, &Patch::Apply(&annotated)).await.unwrap();
    let mut put_back = api.get("gpu").await.unwrap();
    put_back.metadata.labels.as_mut().unwrap().insert("tier".into(), "b".into());
    let put = api.replace("gpu", &PostParams::default(), &put_back).await.unwrap();
    assert_eq!(put.labels()["tier"], "b");
    assert_eq!(put.data["spec"], created.data["spec"]);
    // A new template under a new name is how a spec changes; deleting the old one is allowed.
    api.patch("gpu-2", &xcsp, &Patch::Apply(&template("gpu-2", Some("Standard_D8s_v5"), json!(128)))).await.unwrap();
    api.delete("gpu", &DeleteParams::default()).await.unwrap();
    let counters: Value =
        reqwest::get(format!("{}/_sim/counters", server.base_url)).await.unwrap().json().await.unwrap();
    assert!(counters.to_string().contains("Invalid"), "refusals are counted under their reason: {counters}");
}

fn machine_set(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "clusterName": "il5", "replicas": replicas,
            "selector": {"matchLabels": {"pool": name}},
            "template": {
                "metadata": {"labels": {"pool": name, "node.openshift.io/cloud-provider": "azure"}},
                "spec": {
                    "clusterName": "il5",
                    "bootstrap": {"dataSecretName": "worker-user-data"},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                        "kind": "AzureMachineTemplate", "name": "gpu"},
                },
            },
        },
    })
}

async fn wait_for_machines(api: &Api<DynamicObject>, selector: &str, n: usize) -> Vec<DynamicObject> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let items = api.list(&ListParams::default().labels(selector)).await.unwrap().items;
        let live: Vec<DynamicObject> = items.into_iter().filter(|m| m.metadata.deletion_timestamp.is_none()).collect();
        let all = api.list(&ListParams::default().labels(selector)).await.unwrap().items.len();
        if live.len() == n && all == n {
            return live;
        }
        assert!(Instant::now() < deadline, "waited for {n} machines, have {} ({all} with deleting ones)", live.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_machine_set_gets_its_machines_after_the_create_time_and_loses_them_at_zero() {
    // fast: a VM takes 4-6 min realistic, 0.4-0.6 s here; deletion 1.5-2.5 min, 0.15-0.25 s here.
    let (_server, client) = start("fast").await;
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
    let ms: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machines());
    sets.patch("gpu", &PatchParams::apply("xcsp"), &Patch::Apply(&machine_set("gpu", 2))).await.unwrap();
    assert!(ms.list(&ListParams::default()).await.unwrap().items.is_empty(), "no Machine before the VM exists");

    let got = wait_for_machines(&ms, "pool=gpu", 2).await;
    for m in &got {
        assert!(m.metadata.name.as_deref().unwrap().starts_with("gpu-"));
        assert_eq!(m.metadata.name.as_deref().unwrap().len(), "gpu-".len() + 5);
        let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("MachineSet", "gpu", Some(true)));
        assert_eq!(m.metadata.labels.as_ref().unwrap()["node.openshift.io/cloud-provider"], "azure");
        assert_eq!(m.data["spec"]["bootstrap"]["dataSecretName"], "worker-user-data");
    }
    let status = sets.get("gpu").await.unwrap().data["status"].clone();
    // Two replicas, none ready: a ready replica is a Machine with a Ready Node, and no VM boots here.
    assert_eq!((status["replicas"].as_i64(), status["readyReplicas"].as_i64()), (Some(2), Some(0)), "{status}");

    // Scale to zero the way a client would (merge patch), then wait for the machines to go.
    let merge = PatchParams { field_manager: Some("xcsp".into()), ..Default::default() };
    sets.patch("gpu", &merge, &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    let right_after = ms.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(right_after.len(), 2, "machines stay while their VMs are deleted");
    assert!(right_after.iter().all(|m| m.metadata.deletion_timestamp.is_some()));
    wait_for_machines(&ms, "pool=gpu", 0).await;
    assert_eq!(sets.get("gpu").await.unwrap().data["status"]["replicas"], 0);

    // Deleting a MachineSet garbage-collects its Machines.
    sets.patch("gpu", &merge, &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    wait_for_machines(&ms, "pool=gpu", 1).await;
    sets.delete("gpu", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(sets.get("gpu").await.unwrap_err()).code, 404);
    wait_for_machines(&ms, "pool=gpu", 0).await;
}

#[tokio::test]
async fn core_objects_list_by_label_and_refuse_stale_writes_duplicates_and_missing_namespaces() {
    let (_server, client) = start("instant").await;
    let default: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "default");
    let capi: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = |name: &str, labels: Value| -> k8s_openapi::api::core::v1::ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})).unwrap()
    };
    let pp = PostParams::default();
    default.create(&pp, &cm("a", json!({"pool": "gpu", "tier": "x"}))).await.unwrap();
    default.create(&pp, &cm("b", json!({"pool": "cpu"}))).await.unwrap();
    default.create(&pp, &cm("c", json!({}))).await.unwrap();
    capi.create(&pp, &cm("d", json!({"pool": "gpu"}))).await.unwrap();

    let names = |l: kube::api::ObjectList<k8s_openapi::api::core::v1::ConfigMap>| -> Vec<String> {
        l.items.into_iter().map(|o| o.metadata.name.unwrap()).collect()
    };
    assert_eq!(names(default.list(&ListParams::default().labels("pool=gpu")).await.unwrap()), ["a"]);
    assert_eq!(names(default.list(&ListParams::default().labels("pool!=gpu")).await.unwrap()), ["b", "c"]);
    assert_eq!(names(default.list(&ListParams::default().labels("pool")).await.unwrap()), ["a", "b"]);
    assert_eq!(names(default.list(&ListParams::default().labels("pool,tier=x")).await.unwrap()), ["a"]);
    let all: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::all(client.clone());
    let everywhere = all.list(&ListParams::default().labels("pool=gpu")).await.unwrap();
    assert_eq!(names(everywhere.clone()), ["a", "d"]);
    assert!(everywhere.metadata.resource_version.is_some());

    let dup = api_error(default.create(&pp, &cm("a", json!({}))).await.unwrap_err());
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    let mut stale = default.get("a").await.unwrap();
    default.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "w"}}))).await.unwrap();
    stale.data = Some([("k".to_string(), "mine".to_string())].into());
    let s = api_error(default.replace("a", &pp, &stale).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    let fresh = default.get("a").await.unwrap();
    stale.metadata.resource_version = fresh.metadata.resource_version;
    assert_eq!(default.replace("a", &pp, &stale).await.unwrap().data.unwrap()["k"], "mine");

    let nowhere: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), "no-such-namespace");
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}})).unwrap();
    let s = api_error(nowhere.create(&pp, &secret).await.unwrap_err());
    assert_eq!((s.code, s.message.as_str()), (404, "namespaces \"no-such-namespace\" not found"));
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), NS);
    let stored = secrets.create(&pp, &secret).await.unwrap();
    assert_eq!(stored.data.unwrap()["a"].0, b"b", "stringData is stored as data");

    let gone = default.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(gone.is_right(), "a built-in object answers a Status when deleted");
    assert_eq!(api_error(default.delete("b", &DeleteParams::default()).await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn requests_need_the_worlds_bearer_token() {
    let (server, client) = start("instant").await;
    let wrong = server.kubeconfig().replace(&server.sim.kube.token, "not-the-token");
    let intruder = client_for(&wrong).await;
    let api: Api<DynamicObject> = Api::namespaced_with(intruder, NS, &amt());
    let s = api_error(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (401, "Unauthorized"));
    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(server.sim.kube.endpoint.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let raw =
        trusting.get(format!("{}/apis/cluster.x-k8s.io/v1beta1/machinesets", server.kube_url)).send().await.unwrap();
    assert_eq!(raw.status(), 401);
    let body: Value = raw.json().await.unwrap();
    assert_eq!((body["kind"].as_str(), body["reason"].as_str()), (Some("Status"), Some("Unauthorized")));
    let ok: Api<DynamicObject> = Api::namespaced_with(client, NS, &amt());
    assert!(ok.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn discovery_finds_the_capz_and_capi_kinds() {
    let (_server, client) = start("instant").await;
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    let discovery = kube::discovery::Discovery::new(client.clone()).run().await.unwrap();
    for (group, kind) in [
        ("infrastructure.cluster.x-k8s.io", "AzureMachineTemplate"),
        ("infrastructure.cluster.x-k8s.io", "AzureClusterIdentity"),
        ("infrastructure.cluster.x-k8s.io", "AzureCluster"),
        ("cluster.x-k8s.io", "MachineSet"),
        ("cluster.x-k8s.io", "MachineHealthCheck"),
        ("cluster.x-k8s.io", "Cluster"),
        ("", "Secret"),
    ] {
        let gvk = GroupVersionKind::gvk(group, if group.is_empty() { "v1" } else { "v1beta1" }, kind);
        let (ar, caps) = discovery.resolve_gvk(&gvk).unwrap_or_else(|| panic!("{kind} is discovered"));
        assert_eq!(caps.scope, kube::discovery::Scope::Namespaced, "{kind}");
        assert!(caps.supports_operation(kube::discovery::verbs::PATCH), "{kind}");
        assert_eq!(ar.kind, kind);
    }
    let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "MachineSet");
    let (ar, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(ar.plural, "machinesets");
    let ns = GroupVersionKind::gvk("", "v1", "Namespace");
    assert_eq!(discovery.resolve_gvk(&ns).unwrap().1.scope, kube::discovery::Scope::Cluster);
}

#[tokio::test]
async fn admin_lists_objects_journals_deletes_in_order_counts_and_resets() {
    let (server, client) = start("instant").await;
    let http = reqwest::Client::new();
    let base = &server.base_url;
    let kubeconfig = http.get(format!("{base}/_sim/kubeconfig")).send().await.unwrap().text().await.unwrap();
    let kc = Kubeconfig::from_yaml(&kubeconfig).unwrap();
    assert_eq!(kc.current_context.as_deref(), Some("xcsp-sim"));
    assert_eq!(kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some(server.kube_url.as_str()));

    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &amt());
    api.patch(
        "gpu",
        &PatchParams::apply("xcsp"),
        &Patch::Apply(&template("gpu", Some("Standard_NC6s_v3"), json!(128))),
    )
    .await
    .unwrap();
    let objects: Value = http.get(format!("{base}/_sim/kube/objects")).send().await.unwrap().json().await.unwrap();
    let listed: Vec<(String, String, String)> = objects["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().into(),
                o["namespace"].as_str().unwrap().into(),
                o["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(listed.contains(&("AzureMachineTemplate".into(), NS.into(), "gpu".into())), "{listed:?}");
    assert!(listed.contains(&("Namespace".into(), String::new(), NS.into())));

    // A Kubernetes delete, then an ARM delete: the journal keeps the order.
    api.delete("gpu", &DeleteParams::default()).await.unwrap();
    let form = [
        ("grant_type", "client_credentials"),
        ("client_id", "c"),
        ("client_secret", "s"),
        ("scope", "https://management.azure.com/.default"),
    ];
    let token: Value =
        http.post(format!("{base}/t/oauth2/v2.0/token")).form(&form).send().await.unwrap().json().await.unwrap();
    let bearer = format!("Bearer {}", token["access_token"].as_str().unwrap());
    let rg =
        format!("{base}/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups/rg?api-version=2021-04-01");
    let put = http.put(&rg).header("authorization", &bearer).json(&json!({"location": "eastus"})).send().await.unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let del = http.delete(&rg).header("authorization", &bearer).send().await.unwrap();
    assert_eq!(del.status(), 202);
    let journal: Value = http.get(format!("{base}/_sim/journal")).send().await.unwrap().json().await.unwrap();
    let entries: Vec<(String, String)> = journal["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["cloud"].as_str().unwrap().into(), e["verb"].as_str().unwrap().into()))
        .collect();
    assert_eq!(entries[..2], [("kubernetes".into(), "DELETE".into()), ("kubernetes".into(), "removed".into())]);
    assert_eq!(entries[2], ("azure".into(), "DELETE".into()), "{journal}");
    assert!(
        journal["entries"][0]["id"]
            .as_str()
            .unwrap()
            .ends_with("/namespaces/openshift-cluster-api/azuremachinetemplates/gpu")
    );

    let counters = server.sim.world.counters();
    assert_eq!(counters.requests.get("kube apply azuremachinetemplates.infrastructure.cluster.x-k8s.io"), Some(&1));
    assert_eq!(counters.requests.get("kube delete azuremachinetemplates.infrastructure.cluster.x-k8s.io"), Some(&1));

    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap())
        .await
        .unwrap();
    let token_before = server.sim.kube.token.clone();
    assert_eq!(http.post(format!("{base}/_sim/reset")).send().await.unwrap().status(), 204);
    assert_eq!(server.sim.kube.token, token_before, "reset keeps the token");
    assert_eq!(api_error(cms.get("x").await.unwrap_err()).code, 404, "reset forgets objects (the client still works)");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let ns: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(ns, ["default", NS]);
}

#[tokio::test]
async fn in_the_realistic_profile_machines_follow_the_world_clock() {
    let (server, client) = start("realistic").await;
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
    let ms: Api<DynamicObject> = Api::namespaced_with(client, NS, &machines());
    sets.patch("gpu", &PatchParams::apply("xcsp"), &Patch::Apply(&machine_set("gpu", 1))).await.unwrap();
    server.sim.world.clock.advance(Duration::from_secs(200));
    assert!(ms.list(&ListParams::default()).await.unwrap().items.is_empty(), "a VM takes 4-6 minutes");
    server.sim.world.clock.advance(Duration::from_secs(200));
    assert_eq!(ms.list(&ListParams::default()).await.unwrap().items.len(), 1);
    let merge = PatchParams { field_manager: Some("xcsp".into()), ..Default::default() };
    sets.patch("gpu", &merge, &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    server.sim.world.clock.advance(Duration::from_secs(60));
    assert_eq!(ms.list(&ListParams::default()).await.unwrap().items.len(), 1, "deleting a VM takes 1.5-2.5 minutes");
    server.sim.world.clock.advance(Duration::from_secs(100));
    assert!(ms.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn scale_and_status_subresources_and_dry_run() {
    let (_server, client) = start("instant").await;
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
    let ms: Api<DynamicObject> = Api::namespaced_with(client, NS, &machines());
    let mut config = machine_set("gpu", 1);
    config["status"] = json!({"replicas": 42});
    sets.patch("gpu", &PatchParams::apply("xcsp"), &Patch::Apply(&config)).await.unwrap();
    let scale = sets.get_scale("gpu").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().replicas, 1, "status comes from the controller, not from the applied config");

    let pp = PatchParams { field_manager: Some("autoscaler".into()), ..Default::default() };
    sets.patch_scale("gpu", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    assert_eq!(ms.list(&ListParams::default().labels("pool=gpu")).await.unwrap().items.len(), 3);
    let status =
        sets.patch_status("gpu", &pp, &Patch::Merge(json!({"status": {"observedGeneration": 7}}))).await.unwrap();
    assert_eq!(status.data["status"]["observedGeneration"], 7);
    assert_eq!(status.data["spec"]["replicas"], 3, "a status write leaves the spec alone");

    // The scale write made the autoscaler the owner of spec.replicas, as on a real cluster.
    let s = api_error(
        sets.patch("gpu", &PatchParams::apply("xcsp"), &Patch::Apply(&machine_set("gpu", 5))).await.unwrap_err(),
    );
    assert_eq!((s.code, s.details.as_ref().unwrap().causes[0].field.as_str()), (409, ".spec.replicas"));
    let dry = PatchParams { dry_run: true, ..PatchParams::apply("xcsp").force() };
    let seen = sets.patch("gpu", &dry, &Patch::Apply(&machine_set("gpu", 5))).await.unwrap();
    assert_eq!(seen.data["spec"]["replicas"], 5);
    assert_eq!(sets.get("gpu").await.unwrap().data["spec"]["replicas"], 3, "a dry run stores nothing");
}

#[tokio::test]
async fn object_metadata_labels_and_annotations_are_checked_as_the_api_server_does() {
    let (_server, client) = start("instant").await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    let cm = |labels: Value, annotations: Value| -> k8s_openapi::api::core::v1::ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": "cm", "labels": labels, "annotations": annotations}}))
            .unwrap()
    };
    let invalid = |e: kube::Error| {
        let s = api_error(e);
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
        s
    };

    let s = invalid(cms.create(&pp, &cm(json!({"xcsp.io/stack": "gpu pool"}), json!({}))).await.unwrap_err());
    assert_eq!(
        s.message,
        "ConfigMap \"cm\" is invalid: metadata.labels: Invalid value: \"gpu pool\": a valid label must be an empty \
         string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
         character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
         '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    let cause = &s.details.as_ref().unwrap().causes[0];
    assert_eq!((cause.reason.as_str(), cause.field.as_str()), ("FieldValueInvalid", "metadata.labels"));
    assert!(cause.message.starts_with("Invalid value: \"gpu pool\": a valid label"), "{}", cause.message);

    let long = "v".repeat(64);
    let s = invalid(cms.create(&pp, &cm(json!({"pool": long}), json!({}))).await.unwrap_err());
    assert!(s.message.ends_with(": must be no more than 63 characters"), "{}", s.message);

    // Keys: at most one '/', a DNS-subdomain prefix, a name of at most 63; two problems are bracketed.
    let s = invalid(cms.create(&pp, &cm(json!({"a/b/c": "x", "Xcsp.io/stack": "x"}), json!({}))).await.unwrap_err());
    assert!(s.message.starts_with("ConfigMap \"cm\" is invalid: [metadata.labels: Invalid value: \""), "{}", s.message);
    assert!(s.message.contains("\"a/b/c\": a qualified name must consist of alphanumeric characters"), "{}", s.message);
    assert!(s.message.contains("\"Xcsp.io/stack\": prefix part a lowercase RFC 1123 subdomain"), "{}", s.message);
    assert_eq!(s.details.as_ref().unwrap().causes.len(), 2);
    let s = invalid(cms.create(&pp, &cm(json!({"k".repeat(64): "x"}), json!({}))).await.unwrap_err());
    assert!(s.message.ends_with("name part must be no more than 63 characters"), "{}", s.message);

    // Annotation keys are qualified names whatever their case; all of them take at most 256 KiB.
    let s = invalid(cms.create(&pp, &cm(json!({}), json!({"bad key": "x"}))).await.unwrap_err());
    assert!(s.message.contains("metadata.annotations: Invalid value: \"bad key\": name part must"), "{}", s.message);
    let big = "x".repeat(256 * 1024);
    let s = invalid(cms.create(&pp, &cm(json!({}), json!({"a": big}))).await.unwrap_err());
    assert_eq!(
        s.message,
        "ConfigMap \"cm\" is invalid: metadata.annotations: Too long: must have at most 262144 bytes"
    );
    assert_eq!(s.details.as_ref().unwrap().causes[0].reason, "FieldValueTooLong");
    assert_eq!(api_error(cms.get("cm").await.unwrap_err()).code, 404, "nothing refused is stored");

    let ok = cms
        .create(&pp, &cm(json!({"xcsp.io/stack": "gpu-pool_1.a", "empty": ""}), json!({"XCSP.io/Digest": "x"})))
        .await
        .unwrap();
    assert_eq!(ok.metadata.labels.unwrap()["empty"], "");

    // Updates and custom resources too.
    let merge = PatchParams::default();
    let s = invalid(
        cms.patch("cm", &merge, &Patch::Merge(json!({"metadata": {"labels": {"pool": "-gpu"}}}))).await.unwrap_err(),
    );
    assert!(
        s.message.starts_with("ConfigMap \"cm\" is invalid: metadata.labels: Invalid value: \"-gpu\""),
        "{}",
        s.message
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &amt());
    let mut t = template("gpu", Some("Standard_NC6s_v3"), json!(128));
    t["metadata"]["labels"]["pool"] = json!("gpu/a");
    let s = invalid(api.patch("gpu", &PatchParams::apply("xcsp"), &Patch::Apply(&t)).await.unwrap_err());
    assert!(
        s.message.starts_with(
            "AzureMachineTemplate.infrastructure.cluster.x-k8s.io \"gpu\" is invalid: metadata.labels: Invalid value: \
             \"gpu/a\""
        ),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn a_malformed_label_selector_or_an_invalid_key_or_value_is_a_bad_request() {
    let (_server, client) = start("instant").await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm", "labels": {"replicas": "3", "pool": "gpu"}}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let bad = |selector: &'static str| {
        let cms = cms.clone();
        async move {
            let s = api_error(cms.list(&ListParams::default().labels(selector)).await.unwrap_err());
            assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{selector}: {s:?}");
            s.message
        }
    };
    assert_eq!(bad("pool=gpu)").await, "found ')', expected: ',' or 'end of string'");
    assert_eq!(bad("pool in (gpu").await, "unable to parse requirement: found '', expected: ',' or ')'");
    assert_eq!(
        bad("pool gpu").await,
        "unable to parse requirement: found 'gpu', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        bad("pool=-gpu").await,
        "unable to parse requirement: values[0][pool]: Invalid value: \"-gpu\": a valid label must be an empty string \
         or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
         character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
         '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    let key = bad("xcsp.io/stack/x").await;
    assert!(
        key.starts_with("unable to parse requirement: <nil>: Invalid value: \"xcsp.io/stack/x\": a qualified name"),
        "{key}"
    );
    assert_eq!(
        bad("replicas>three").await,
        "unable to parse requirement: values[0]: Invalid value: \"three\": for 'Gt', 'Lt' operators, the value must be \
         an integer"
    );
    // What parses selects as the API server does, `gt`/`lt` included.
    let names = |l: kube::core::ObjectList<k8s_openapi::api::core::v1::ConfigMap>| l.items.len();
    assert_eq!(names(cms.list(&ListParams::default().labels("replicas>2, pool in (gpu,)")).await.unwrap()), 1);
    assert_eq!(names(cms.list(&ListParams::default().labels("replicas<3")).await.unwrap()), 0);
}

#[tokio::test]
async fn force_on_a_patch_that_is_not_an_apply_is_refused_as_invalid_patch_options() {
    let (_server, client) = start("instant").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &amt());
    api.patch(
        "gpu",
        &PatchParams::apply("xcsp"),
        &Patch::Apply(&template("gpu", Some("Standard_NC6s_v3"), json!(128))),
    )
    .await
    .unwrap();
    // kube refuses `force` on a merge patch client-side, so the request is built by hand and sent through it.
    for force in ["true", "false"] {
        let request = axum::http::Request::patch(format!(
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{NS}/azuremachinetemplates/gpu?force={force}"
        ))
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::to_vec(&json!({"metadata": {"labels": {"tier": "a"}}})).unwrap())
        .unwrap();
        let s = api_error(client.request::<DynamicObject>(request).await.unwrap_err());
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
        assert_eq!(
            s.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        let d = s.details.as_ref().unwrap();
        assert_eq!((d.group.as_str(), d.kind.as_str()), ("meta.k8s.io", "PatchOptions"));
        assert_eq!((d.causes[0].reason.as_str(), d.causes[0].field.as_str()), ("FieldValueForbidden", "force"));
    }
    assert!(api.get("gpu").await.unwrap().labels().get("tier").is_none(), "the patch was not applied");
}

#[tokio::test]
async fn a_machine_gets_its_machine_sets_failure_domain() {
    let (_server, client) = start("instant").await;
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
    let ms: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machines());
    let mut zonal = machine_set("gpu-z2", 2);
    zonal["spec"]["template"]["spec"]["failureDomain"] = json!("2");
    sets.patch("gpu-z2", &PatchParams::apply("xcsp"), &Patch::Apply(&zonal)).await.unwrap();
    let got = wait_for_machines(&ms, "pool=gpu-z2", 2).await;
    for m in &got {
        assert_eq!(m.data["spec"]["failureDomain"], "2", "{:?}", m.data);
    }
}
