//! The IL5 example's Azure side applied through a hostile Resource Manager (throttled writes,
//! 5% server errors, dropped connections, Entra replication lag after the identity is made),
//! then every taggable resource updated in place and every connection's shared key rotated:
//! each change is PUT, read back, and a plan of the new desired state shows nothing left to do.

mod common;

use common::*;
use serde_json::json;
use xcsp_azure::AzureProvider;
use xcsp_core::provider::{Provider, Request};
use xcsp_core::{ProviderKind, ResourceType, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_survives_throttling_faults_and_replication_lag_then_updates_in_place() {
    let emu = Emulator::start("fast");
    emu.configure(json!({
        "seed": 7,
        "principal_replication_lag_ms": 6000,
        "faults": { "error_rate": 0.05, "error_status": 503, "drop_rate": 0.03 },
        "throttle": { "enabled": true, "writes": { "capacity": 6, "refill_per_sec": 4.0 } },
    }))
    .await;
    let mut il5 = il5();
    let p = AzureProvider::new(emu.config_for(&il5.subscription, &il5.tenant, &il5.resource_group)).unwrap();
    let progress = Recorder::default();
    let mut recorded = apply_in_order(&p, &il5.stack, &il5.nodes, &progress).await;

    let counters = emu.counters().await;
    let count = |path: &[&str]| path.iter().fold(&counters, |c, k| &c[*k]).as_u64().unwrap_or(0);
    assert!(count(&["statuses", "429"]) > 0, "writes were throttled: {counters}");
    assert!(count(&["injected_errors"]) > 0, "server errors were injected: {counters}");
    assert!(count(&["errors", "PrincipalNotFound"]) > 0, "the role assignment met the replication lag: {counters}");
    // One operation at a time reached the gateway: a refusal for another operation in progress
    // can only come from a write sent again after its answer was lost (a dropped connection
    // whose request the emulator applied, and which the retry meets, once per attempt, until the
    // operation ends), never from two writes the callers let overlap.
    assert!(count(&["errors", "AnotherOperationInProgress"]) == 0 || count(&["dropped_connections"]) > 0, "{counters}");
    assert!(progress.said("azure_role_assignment.capz", "Entra ID does not know the new identity yet"));

    // Everything is there, exactly once, and a plan against it is empty.
    let azure = il5.nodes.iter().filter(|n| n.address.rtype.provider() == ProviderKind::Azure).count();
    emu.configure(json!({ "faults": { "error_rate": 0.0, "drop_rate": 0.0 }, "throttle": { "enabled": false } })).await;
    assert_eq!(refresh_all(&p, &il5.stack, &mut recorded).await.len(), azure);
    assert_eq!(changes(&il5, &recorded), vec![]);

    // Updates in place: a user tag on every taggable resource, a new key on every connection.
    emu.reset_counters().await;
    let mut updated = 0;
    for node in il5.nodes.iter_mut().filter(|n| n.address.rtype.provider() == ProviderKind::Azure) {
        let mut changed = false;
        // ARM has no tags on subnets, federated credentials, role assignments and role definitions.
        let taggable = !matches!(
            node.address.rtype,
            ResourceType::AzureSubnet
                | ResourceType::AzureFederatedCredential
                | ResourceType::AzureRoleAssignment
                | ResourceType::AzureRoleDefinition
        );
        if let Some(Value::Map(tags)) = node.attributes.get_mut("tags").filter(|_| taggable) {
            tags.insert("owner".into(), Value::string("platform-team"));
            changed = true;
        }
        if node.address.rtype == ResourceType::AzureVpnConnection {
            node.inputs.retain(|i| i.attribute != "shared_key");
            node.attributes.insert("shared_key".into(), Value::sensitive(Value::string("Rotated_key_2026.11")));
            changed = true;
        }
        if !changed {
            continue;
        }
        let desired = node.filled(|from, output| recorded.attributes.get(from).and_then(|a| a.get(output)).cloned());
        let id = recorded.ids[&node.address].clone();
        let r = Request { stack: &il5.stack, address: &node.address, id: Some(&id), attributes: &desired };
        let observed = p.write(r, &progress).await.unwrap_or_else(|e| panic!("update {}: {e}", node.address));
        assert_eq!(observed.id, id, "{} updated in place, not replaced", node.address);
        if taggable {
            assert_eq!(
                observed.attributes.get("tags").map(Value::to_json).unwrap_or_default()["owner"],
                json!("platform-team"),
                "{} reads its new tag back",
                node.address
            );
        }
        recorded.record(desired, observed);
        updated += 1;
    }
    assert!(updated >= 14, "{updated} resources updated");
    let requests = emu.requests().await;
    let puts: u64 = requests.iter().filter(|(k, _)| k.starts_with("PUT ")).map(|(_, v)| v).sum();
    assert!(puts >= updated, "each update is a PUT: {requests:?}");
    assert!(!requests.keys().any(|k| k.starts_with("DELETE")), "nothing deleted: {requests:?}");

    // The emulator holds the new key (the tunnels would renegotiate on it).
    let conn = &recorded.ids[&addr("azure_virtual_network_gateway_connection.link[2]")];
    assert_eq!(emu.shared_key(conn).await, "Rotated_key_2026.11");

    // Read back in bulk and planned against the new desired state: nothing left to do.
    refresh_all(&p, &il5.stack, &mut recorded).await;
    assert_eq!(changes(&il5, &recorded), vec![]);

    destroy_in_order(&p, &il5.stack, &il5.nodes, &recorded).await;
    assert_eq!(emu.resource_ids().await, Vec::<String>::new());
}
