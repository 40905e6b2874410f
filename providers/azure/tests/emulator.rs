//! The Azure provider against the ARM emulator over HTTP, with the real azure_identity and
//! azure_mgmt_* clients: the IL5 example's Azure side applied by the engine, refreshed in bulk,
//! planned again with no changes, destroyed to nothing; throttling, injected 5xx and the
//! PrincipalNotFound window survived; the Government audience requested.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use azure_core::auth::TokenCredential;
use azure_identity::ClientSecretCredential;
use serde_json::json;
use xcsp_azure::{AzureConfig, AzureProvider, Cloud};
use xcsp_core::{Address, ProviderKind, Value};
use xcsp_engine::local::LocalProvider;
use xcsp_engine::{Adopt, Events, Providers, Run};
use xcsp_plans::graph::{Node, ResourceGraph};
use xcsp_sim::{SimConfig, SimServer};
use xcsp_state::State;

/// The IL5 example's Azure (and key) resources; inputs from AWS become fixed outside IPs.
fn azure_side() -> (xcsp_plans::Loaded, ResourceGraph) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud");
    let loaded = xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads"));
    let mut nodes: Vec<Node> = Vec::new();
    for node in loaded.graph.nodes() {
        if !matches!(node.address.rtype.provider(), ProviderKind::Azure | ProviderKind::Local) {
            continue;
        }
        let mut node = node.clone();
        let from_aws: Vec<_> =
            node.inputs.iter().filter(|i| i.from.rtype.provider() == ProviderKind::Aws).cloned().collect();
        for input in from_aws {
            let t = node.address.index.unwrap_or(0);
            node.attributes.insert(input.attribute.clone(), Value::string(format!("198.51.100.{}", 10 + t)));
            node.inputs.retain(|i| i.attribute != input.attribute);
        }
        node.depends_on.retain(|d| d.rtype.provider() != ProviderKind::Aws);
        nodes.push(node);
    }
    let graph = ResourceGraph::new(nodes).expect("the Azure side is a graph of its own");
    (loaded, graph)
}

fn provider(base: &str, sub: &str, tenant: &str, rg: &str) -> AzureProvider {
    let credential: Arc<dyn TokenCredential> = Arc::new(ClientSecretCredential::new(
        azure_core::new_http_client(),
        azure_core::Url::parse(&format!("{base}/")).unwrap(),
        tenant.into(),
        "xcsp-test".into(),
        "not-a-real-secret".into(),
    ));
    let cloud = Cloud::Custom {
        resource_manager: base.into(),
        authority_host: base.into(),
        audience: "https://management.usgovcloudapi.net".into(),
    };
    let mut config = AzureConfig::new(sub, tenant, rg, cloud);
    config.poll_interval = std::time::Duration::from_millis(50);
    AzureProvider::with_credential(config, credential).expect("a provider")
}

fn run(providers: Providers, stack: &str) -> Run {
    let mut run = Run::new(stack, providers);
    run.retries.in_use_wait = std::time::Duration::from_millis(100);
    run.events = Events::to_stderr();
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_il5_azure_side_applies_refreshes_cleanly_and_destroys_to_nothing() {
    let mut config = SimConfig::default();
    config.latency.time_scale = 1.0 / 6000.0;
    config.principal_replication_lag_ms = Some(800);
    let sim = SimServer::start(config, 0).expect("the ARM emulator starts");
    let (loaded, graph) = azure_side();
    let az = &loaded.model.azure;
    let azure =
        Arc::new(provider(&sim.base_url, &az.subscription_id.value, &az.tenant_id.value, &az.resource_group.value));
    let providers = Providers::new().with(Arc::new(LocalProvider)).with(azure.clone());
    let run = run(providers.clone(), &loaded.model.stack);

    // Some throttling and server errors along the way.
    sim.sim
        .world
        .patch_config(
            &json!({"throttle": {"writes": {"capacity": 6, "refill_per_sec": 6.0}}, "faults": {"error_rate": 0.05}}),
        )
        .unwrap();

    let mut state = State::new(&loaded.model.stack);
    let mut store = |_: &mut State| Ok(());
    let summary = xcsp_engine::apply(&run, &graph, &mut state, &mut store).await.unwrap();
    assert!(summary.succeeded(), "{:?}", summary.failed);
    assert_eq!(summary.done.len(), graph.len());
    let counters = sim.sim.world.counters();
    assert!(
        counters.injected_errors > 0 || counters.errors.contains_key("SubscriptionRequestsThrottled"),
        "{counters:?}"
    );
    // Writes to the gateway and its connections were serialized: Azure never had to refuse one.
    assert_eq!(counters.errors.get("AnotherOperationInProgress"), None, "{counters:?}");
    sim.sim.world.patch_config(&json!({"throttle": {"enabled": false}, "faults": {"error_rate": 0.0}})).unwrap();

    // The identity came out with the ids the Kubernetes side needs.
    let uai: Address = "azure_user_assigned_identity.capz".parse().unwrap();
    assert!(state.resources[&uai].attributes["client_id"].as_str().is_some_and(|c| c.len() == 36));

    // Refresh: one list per type (subnets come inside their VNet), nothing vanished or adopted.
    let before = sim.sim.world.counters().requests;
    let mut refreshed = state.clone();
    let r = xcsp_engine::refresh(&providers, &loaded.model.stack, &mut refreshed, Adopt::All, &Events::none())
        .await
        .unwrap();
    assert!(r.vanished.is_empty() && r.adopted.is_empty(), "{r:?}");
    let after = sim.sim.world.counters().requests;
    let lists: BTreeMap<&String, u64> =
        after.iter().map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0))).filter(|(_, n)| *n > 0).collect();
    assert!(lists.keys().all(|k| k.starts_with("GET ") && (k.ends_with("(list)") || k.contains("token"))), "{lists:?}");
    assert!(
        lists.values().all(|n| *n <= 2),
        "one list per type (VNets twice: themselves and their subnets): {lists:?}"
    );
    let calls: u64 = lists.iter().filter(|(k, _)| !k.contains("token")).map(|(_, n)| n).sum();
    eprintln!("refresh of the IL5 Azure side ({} resources): {calls} ARM calls {lists:?}", state.resources.len());

    // Planned again against the refreshed state: nothing to do.
    let plan = xcsp_plans::plan::diff(&loaded.model.stack, &loaded.model.digest, &graph, &refreshed.attributes());
    let changed: Vec<String> = plan
        .changes
        .iter()
        .filter(|c| c.action != xcsp_plans::plan::Action::NoOp)
        .map(|c| format!("{} {:?}: {:?} -> {:?}", c.address, c.action, c.before, c.after))
        .collect();
    assert!(changed.is_empty(), "{changed:#?}");

    // Update in place: a tag added to every taggable Azure resource is PUT to each, read back,
    // and planned again with no changes.
    let tagged: Vec<Node> = graph
        .nodes()
        .cloned()
        .map(|mut n| {
            if n.address.rtype.provider() == ProviderKind::Azure
                && let Some(Value::Map(tags)) = n.attributes.get_mut("tags")
            {
                tags.insert("team".into(), Value::string("gpu-platform"));
            }
            n
        })
        .collect();
    let graph = ResourceGraph::new(tagged).unwrap();
    let summary = xcsp_engine::apply(&run, &graph, &mut refreshed, &mut store).await.unwrap();
    assert!(summary.succeeded(), "{:?}", summary.failed);
    let updated = summary.done.iter().filter(|(_, op)| *op == xcsp_engine::Op::Update).count();
    assert!(updated >= 15, "every taggable resource updated: {:?}", summary.done);
    let mut after_update = refreshed.clone();
    xcsp_engine::refresh(&providers, &loaded.model.stack, &mut after_update, Adopt::All, &Events::none())
        .await
        .unwrap();
    let vng: Address = "azure_virtual_network_gateway.link".parse().unwrap();
    assert_eq!(
        after_update.resources[&vng].attributes["tags"].as_map().unwrap()["team"],
        Value::string("gpu-platform")
    );
    let plan = xcsp_plans::plan::diff(&loaded.model.stack, &loaded.model.digest, &graph, &after_update.attributes());
    assert!(
        !plan.has_changes(),
        "{:?}",
        plan.changes.iter().filter(|c| c.action != xcsp_plans::plan::Action::NoOp).collect::<Vec<_>>()
    );

    // Changed behind xcsp's back: the federated credential deleted out of band is drift.
    let fic: Address = "azure_federated_identity_credential.capz".parse().unwrap();
    let fic_id = refreshed.resources[&fic].id.clone().unwrap();
    let deleted = reqwest::Client::new()
        .delete(format!("{}/_sim/resource", sim.base_url))
        .query(&[("id", fic_id.as_str())])
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    let mut drifted = refreshed.clone();
    let r =
        xcsp_engine::refresh(&providers, &loaded.model.stack, &mut drifted, Adopt::All, &Events::none()).await.unwrap();
    assert_eq!(r.vanished, vec![fic.clone()]);
    let plan = xcsp_plans::plan::diff(&loaded.model.stack, &loaded.model.digest, &graph, &drifted.attributes());
    let creates: Vec<&Address> =
        plan.changes.iter().filter(|c| c.action == xcsp_plans::plan::Action::Create).map(|c| &c.address).collect();
    assert_eq!(creates, vec![&fic]);
    let summary = xcsp_engine::apply(&run, &graph, &mut drifted, &mut store).await.unwrap();
    assert!(summary.succeeded() && summary.done.len() == 1, "{summary:?}");
    let mut refreshed = drifted;

    // Government audience on every token request.
    let tokens: serde_json::Value =
        reqwest::get(format!("{}/_sim/tokens", sim.base_url)).await.unwrap().json().await.unwrap();
    let tokens = tokens["requests"].as_array().expect("a list of token requests");
    assert!(!tokens.is_empty());
    assert!(tokens.iter().all(|t| t["audience"] == "https://management.usgovcloudapi.net"), "{tokens:?}");

    // Destroy: everything, dependents first, and the emulator holds nothing.
    let summary = xcsp_engine::destroy(&run, &mut refreshed, &mut store).await.unwrap();
    assert!(summary.succeeded(), "{:?}", summary.failed);
    assert!(refreshed.resources.is_empty());
    let store = sim.sim.arm.store.lock().unwrap();
    assert!(store.resources.is_empty(), "left behind: {:?}", store.resources.keys().collect::<Vec<_>>());
}
