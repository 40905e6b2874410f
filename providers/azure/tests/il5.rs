//! The IL5 example's Azure side against the ARM emulator, with the real clients: created in
//! dependency order (each round at once, so the four connections reach the gateway together),
//! refreshed in bulk with one list per type, planned again with no changes, drift shown, and
//! destroyed to nothing.

mod common;

use std::collections::BTreeMap;

use common::*;
use xcsp_azure::AzureProvider;
use xcsp_core::provider::{Provider, Request};
use xcsp_core::{Address, ProviderKind, Value};
use xcsp_plans::plan::Action;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_il5_azure_side_is_created_in_order_refreshed_in_bulk_and_destroyed() {
    let emu = Emulator::start("fast");
    let il5 = il5();
    let p = AzureProvider::new(emu.config_for(&il5.subscription, &il5.tenant, &il5.resource_group)).unwrap();
    let progress = Recorder::default();

    let mut recorded = apply_in_order(&p, &il5.stack, &il5.nodes, &progress).await;

    // One operation at a time reached the gateway: its four connections, ready together, share
    // the gateway's serial key, and the helper (as the engine) starts one per key.
    assert_eq!(emu.errors("AnotherOperationInProgress").await, 0);
    assert!(progress.said("azure_virtual_network_gateway.link", "Azure is creating the VPN gateway"));
    let key_of = |address: &str, id: Option<&str>| {
        let a: Address = address.parse().unwrap();
        let attrs = recorded.attributes[&a].clone();
        p.serial_key(&Request { stack: &il5.stack, address: &a, id, attributes: &attrs })
    };
    let gateway_id = recorded.ids[&"azure_virtual_network_gateway.link".parse::<Address>().unwrap()].clone();
    let gateway = key_of("azure_virtual_network_gateway.link", Some(&gateway_id));
    assert!(gateway.is_some());
    for i in 0..4 {
        assert_eq!(key_of(&format!("azure_virtual_network_gateway_connection.link[{i}]"), None), gateway, "{i}");
    }
    // A VNet, its subnets and its DNS servers share the VNet's key (each PUT of the VNet carries
    // its subnets and DNS servers), and nothing else does.
    let vnet = key_of("azure_virtual_network.link", None);
    assert!(vnet.as_deref().is_some_and(|k| k.ends_with("/virtualnetworks/il5-gpu-link")), "{vnet:?}");
    for a in ["azure_subnet.gateway-link", "azure_subnet.pool-gpu", "azure_virtual_network_dns_servers.link"] {
        assert_eq!(key_of(a, None), vnet, "{a}");
    }
    assert_ne!(vnet, gateway);
    assert_eq!(key_of("azure_network_security_group.gpu", None), None);
    // The outputs other resources and the Kubernetes side consume.
    let uai = recorded.get("azure_user_assigned_identity.capz");
    for output in ["principal_id", "client_id", "tenant_id", "id", "name"] {
        assert!(uai[output].as_str().is_some_and(|v| !v.is_empty()), "{output}: {uai:?}");
    }
    let pip = recorded.get("azure_public_ip.link[0]");
    assert!(pip["ip_address"].as_str().is_some_and(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok()), "{pip:?}");
    let conn = recorded.get("azure_virtual_network_gateway_connection.link[3]");
    // Both instances' addresses: instance 1 faces tunnel 3; instance 0 names its second one.
    assert_eq!(conn["custom_bgp_addresses"], Value::strings(["169.254.22.2", "169.254.22.6"]));

    // Refresh in bulk: one list per type; one by one only the connections' shared keys, which
    // ARM keeps out of the connection and lists nowhere.
    emu.reset_counters().await;
    let found = refresh_all(&p, &il5.stack, &mut recorded).await;
    let azure_nodes: Vec<&Address> =
        il5.nodes.iter().filter(|n| n.address.rtype.provider() == ProviderKind::Azure).map(|n| &n.address).collect();
    assert_eq!(found.len(), azure_nodes.len(), "found {found:?}");
    assert!(azure_nodes.iter().all(|a| found.contains(a)));
    let calls: BTreeMap<String, u64> = emu.requests().await.into_iter().filter(|(k, _)| !k.contains("token")).collect();
    let expected: BTreeMap<String, u64> = [
        // One list per stack tag key Azure may carry (today's and the one written before).
        ("GET Microsoft.Resources/resourceGroups (list)", 2),
        // The VNets, again for the subnets inside them, and again for their DNS servers.
        ("GET Microsoft.Network/virtualNetworks (list)", 3),
        ("GET Microsoft.Network/networkSecurityGroups (list)", 1),
        ("GET Microsoft.Network/publicIPAddresses (list)", 1),
        ("GET Microsoft.Network/natGateways (list)", 1),
        ("GET Microsoft.Network/virtualNetworkGateways (list)", 1),
        ("GET Microsoft.Network/localNetworkGateways (list)", 1),
        ("GET Microsoft.Network/connections (list)", 1),
        ("GET Microsoft.Network/connections/sharedkey", 4),
        // The identities, and again for their federated credentials (one list per identity).
        ("GET Microsoft.ManagedIdentity/userAssignedIdentities (list)", 2),
        ("GET Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials (list)", 1),
        // At the resource group and at the subscription; the stack's custom roles at the subscription.
        ("GET Microsoft.Authorization/roleAssignments (list)", 2),
        ("GET Microsoft.Authorization/roleDefinitions (list)", 1),
        // An imported boot image's types, though this stack has none (a sweep finds strays):
        // the storage accounts, for themselves and for their blobs; the galleries, for themselves,
        // their definitions and their versions (nothing deeper without a gallery of the stack).
        ("GET Microsoft.Storage/storageAccounts (list)", 2),
        ("GET Microsoft.Compute/galleries (list)", 3),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(calls, expected);
    eprintln!(
        "refresh of the IL5 Azure side ({} resources): {} ARM calls",
        azure_nodes.len(),
        calls.values().sum::<u64>()
    );

    // Planned again against what refresh read: nothing to do.
    assert_eq!(changes(&il5, &recorded), vec![]);

    // Changed behind xcsp's back: a rule removed from the NSG, the federated credential deleted.
    let nsg = addr("azure_network_security_group.gpu");
    let fic = addr("azure_federated_identity_credential.capz");
    let nsg_id = recorded.ids[&nsg].clone();
    let rules = emu.resource(&nsg_id).await["properties"]["securityRules"].as_array().cloned().unwrap();
    emu.delete_resource(rules[0]["id"].as_str().unwrap()).await;
    emu.delete_resource(&recorded.ids[&fic].clone()).await;
    let mut drifted = recorded.clone();
    drifted.attributes.remove(&fic);
    let found = refresh_all(&p, &il5.stack, &mut drifted).await;
    assert!(!found.contains(&fic));
    assert_eq!(changes(&il5, &drifted), vec![(fic.to_string(), Action::Create), (nsg.to_string(), Action::Update)]);

    // Destroy, dependents first: the emulator holds nothing afterwards.
    destroy_in_order(&p, &il5.stack, &il5.nodes, &recorded).await;
    assert_eq!(emu.resource_ids().await, Vec::<String>::new());
    for t in azure_types() {
        assert!(refresh(&p, &il5.stack, t).await.is_empty(), "{t} left");
    }
}
