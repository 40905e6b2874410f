//! ARM rules from the README's rule table, each driven over HTTP: tags (through the real
//! azure_mgmt_resources / azure_mgmt_network 0.21 clients and the spec-validating harness), IPsec
//! policy limits, duplicate child names in one body, and gateways that still have connections.

mod common;

use azure_core::error::ErrorKind;
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use xcsp_sim::{SimConfig, SimServer};

/// The ARM error code of an SDK error (None for anything but an HTTP error answer).
fn sdk_code(e: &azure_core::Error) -> Option<(u16, String)> {
    match e.kind() {
        ErrorKind::HttpResponse { status, error_code } => Some((u16::from(*status), error_code.clone()?)),
        _ => None,
    }
}

fn many_tags(n: usize) -> Value {
    Value::Object((0..n).map(|i| (format!("t{i}"), json!("v"))).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_rules_refuse_bad_names_values_and_counts_on_every_write() {
    let mut config = SimConfig::default();
    config.latency.profile = xcsp_sim::Profile::Instant;
    config.throttle.enabled = false;
    let sim = SimServer::start(config, 0).unwrap();
    let base = sim.base_url.clone();
    let endpoint = azure_core::Url::parse(&base).unwrap();
    let cred = Arc::new(azure_identity::ClientSecretCredential::new(
        xcsp_crypto::AzureHttp::for_peer(xcsp_crypto::Peer::Entra).unwrap(),
        azure_core::Url::parse(&format!("{base}/")).unwrap(),
        TENANT.into(),
        "xcsp-client".into(),
        "s3cret".into(),
    ));
    let resources = azure_mgmt_resources::Client::builder(cred.clone())
        .endpoint(endpoint.clone())
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();
    let network = azure_mgmt_network::Client::builder(cred.clone())
        .endpoint(endpoint)
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();
    let groups = resources.resource_groups_client();
    let rg = |tags: Value| {
        serde_json::from_value::<azure_mgmt_resources::models::ResourceGroup>(
            json!({"location": "usgovvirginia", "tags": tags}),
        )
        .unwrap()
    };

    // Resource group PUT: the very first write of a stack.
    let cases = [
        (json!({"xcsp.io/stack": "il5"}), "InvalidTagNameCharacters"),
        (json!({"a<b": "x"}), "InvalidTagNameCharacters"),
        (json!({"cost&center": "x"}), "InvalidTagNameCharacters"),
        (json!({"50%": "x"}), "InvalidTagNameCharacters"),
        (json!({"back\\slash": "x"}), "InvalidTagNameCharacters"),
        (json!({"why?": "x"}), "InvalidTagNameCharacters"),
        (json!({"microsoft.owner": "x"}), "InvalidTagName"),
        (json!({"Azure-team": "x"}), "InvalidTagName"),
        (json!({"WINDOWS_build": "x"}), "InvalidTagName"),
        (json!({ "n".repeat(513): "x" }), "InvalidTagName"),
        (json!({"k": "v".repeat(257)}), "InvalidTagValueLength"),
        (many_tags(51), "InvalidTags"),
    ];
    for (tags, want) in cases {
        let e = groups.create_or_update("pool", rg(tags.clone()), SUB).await.unwrap_err();
        assert_eq!(sdk_code(&e), Some((400, want.to_string())), "tags {tags}");
    }
    assert!(groups.get("pool", SUB).await.is_err(), "nothing was created");
    // The limits themselves are allowed.
    let ok = json!({ "xcsp-stack": "il5", "n".repeat(512): "v".repeat(256), "my-azure-thing": "x" });
    groups.create_or_update("pool", rg(ok), SUB).await.unwrap();
    groups.create_or_update("pool", rg(many_tags(50)), SUB).await.unwrap();

    // Resource group PATCH.
    let patch =
        serde_json::from_value::<azure_mgmt_resources::models::ResourceGroupPatchable>(json!({"tags": {"a/b": "x"}}))
            .unwrap();
    let e = groups.update("pool", patch, SUB).await.unwrap_err();
    assert_eq!(sdk_code(&e), Some((400, "InvalidTagNameCharacters".to_string())));

    // Resource PUT (an LRO in the SDK) and network UpdateTags PATCH.
    let vnet = |tags: Value| {
        serde_json::from_value::<azure_mgmt_network::models::VirtualNetwork>(json!({"location": "usgovvirginia",
            "tags": tags, "properties": {"addressSpace": {"addressPrefixes": ["10.20.0.0/16"]}}}))
        .unwrap()
    };
    let vnets = network.virtual_networks_client();
    let e = vnets.create_or_update("pool", "vnet", vnet(json!({"azureservice": "x"})), SUB).await.unwrap_err();
    assert_eq!(sdk_code(&e), Some((400, "InvalidTagName".to_string())));
    vnets.create_or_update("pool", "vnet", vnet(json!({"xcsp-stack": "il5"})), SUB).await.unwrap();
    let tags_object =
        serde_json::from_value::<azure_mgmt_network::models::TagsObject>(json!({"tags": many_tags(51)})).unwrap();
    let e = vnets.update_tags("pool", "vnet", tags_object, SUB).await.unwrap_err();
    assert_eq!(sdk_code(&e), Some((400, "InvalidTags".to_string())));
    let got = vnets.get("pool", "vnet", SUB).await.unwrap();
    assert_eq!(got.resource.tags.unwrap()["xcsp-stack"], "il5", "a refused PATCH changes nothing");
}

/// A resource group with a VNet, one Standard public IP, a VpnGw1AZ gateway and a local network
/// gateway, through the spec-validating harness (instant profile).
async fn gateway_stack(h: &Harness, rg: &str) {
    let p = |rest: &str| format!("{}{NET_API}", net(rg, rest));
    assert_eq!(h.put(&format!("{}{RG_API}", rg_path(rg)), location("eastus")).await.status, 201);
    let r = h
        .put(
            &p("virtualNetworks/vnet"),
            json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "GatewaySubnet", "properties": {"addressPrefix": "10.0.255.0/27"}}]}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = h
        .put(
            &p("publicIPAddresses/pip"),
            json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = h
        .put(
            &p("virtualNetworkGateways/gw"),
            json!({"location": "eastus", "properties": {"gatewayType": "Vpn", "vpnType": "RouteBased",
            "sku": {"name": "VpnGw1AZ", "tier": "VpnGw1AZ"}, "ipConfigurations": [{"name": "ip0", "properties": {
                "subnet": {"id": net(rg, "virtualNetworks/vnet/subnets/GatewaySubnet")},
                "publicIPAddress": {"id": net(rg, "publicIPAddresses/pip")}}}]}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(h.wait(&r).await, "Succeeded");
    let r = h
        .put(
            &p("localNetworkGateways/lng"),
            json!({"location": "eastus", "properties": {"gatewayIpAddress": "203.0.113.10",
            "localNetworkAddressSpace": {"addressPrefixes": ["10.128.0.0/14"]}}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
}

fn ipsec_connection(rg: &str, policy: Value) -> Value {
    json!({"location": "eastus", "properties": {"connectionType": "IPsec", "connectionProtocol": "IKEv2",
        "sharedKey": "Aa1.b_2c3d4",
        "virtualNetworkGateway1": {"id": net(rg, "virtualNetworkGateways/gw"), "properties": {}},
        "localNetworkGateway2": {"id": net(rg, "localNetworkGateways/lng"), "properties": {}},
        "ipsecPolicies": [policy]}})
}

fn policy(sa_secs: i64, ipsec_enc: &str, ipsec_int: &str) -> Value {
    json!({"saLifeTimeSeconds": sa_secs, "saDataSizeKilobytes": 102400000, "ipsecEncryption": ipsec_enc,
        "ipsecIntegrity": ipsec_int, "ikeEncryption": "GCMAES256", "ikeIntegrity": "SHA384",
        "dhGroup": "ECP384", "pfsGroup": "ECP384"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipsec_policies_obey_the_spec_enums_the_sa_lifetime_floor_and_gcm_pairing() {
    let h = Harness::instant().await;
    gateway_stack(&h, "rg").await;
    let conn = format!("{}{NET_API}", net("rg", "connections/c"));
    let refused = [
        // IPsec integrity has no SHA384 (IpsecIntegrity enum of the 2024-03-01 spec).
        (policy(27000, "AES256", "SHA384"), "ipsecIntegrity"),
        (policy(27000, "AES256", "SHA512"), "ipsecIntegrity"),
        (
            json!({"saLifeTimeSeconds": 27000, "saDataSizeKilobytes": 1024, "ipsecEncryption": "AES256",
            "ipsecIntegrity": "SHA256", "ikeEncryption": "AES256", "ikeIntegrity": "SHA512",
            "dhGroup": "DHGroup14", "pfsGroup": "PFS2048"}),
            "ikeIntegrity",
        ),
        (
            json!({"saLifeTimeSeconds": 27000, "saDataSizeKilobytes": 1024, "ipsecEncryption": "AES256",
            "ipsecIntegrity": "SHA256", "ikeEncryption": "AES256", "ikeIntegrity": "SHA256",
            "dhGroup": "DHGroup5", "pfsGroup": "PFS2048"}),
            "dhGroup",
        ),
        (policy(299, "AES256", "SHA256"), "saLifeTimeSeconds"),
        // GCM encryption needs the same GCM integrity, and GCM integrity the same GCM encryption.
        (policy(27000, "GCMAES256", "SHA256"), "ipsecIntegrity"),
        (policy(27000, "GCMAES256", "GCMAES128"), "ipsecIntegrity"),
        (policy(27000, "AES256", "GCMAES256"), "ipsecIntegrity"),
    ];
    for (p, field) in refused {
        let r = h.put(&conn, ipsec_connection("rg", p.clone())).await;
        assert_eq!((r.status, r.code().as_str()), (400, "InvalidRequestContent"), "{p}: {:?}", r.body);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(field), "{p}: the message names {field}: {message}");
    }
    assert_eq!(h.get(&conn).await.status, 404, "nothing was created");
    for p in [
        policy(300, "GCMAES256", "GCMAES256"),
        policy(3600, "AES256", "SHA256"),
        policy(27000, "GCMAES128", "GCMAES128"),
    ] {
        let r = h.put(&conn, ipsec_connection("rg", p.clone())).await;
        assert!(r.status == 201 || r.status == 200, "{p}: {:?}", r.body);
        assert_eq!(h.wait(&r).await, "Succeeded");
    }
    h.assert_conformant();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_children_with_one_name_and_gateways_with_connections_are_refused() {
    let h = Harness::instant().await;
    gateway_stack(&h, "rg").await;
    let p = |rest: &str| format!("{}{NET_API}", net("rg", rest));

    // Subnets in one VNet body, compared case-insensitively.
    let r = h
        .put(
            &p("virtualNetworks/vnet2"),
            json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
            "subnets": [{"name": "workers", "properties": {"addressPrefix": "10.1.1.0/24"}},
                        {"name": "Workers", "properties": {"addressPrefix": "10.1.2.0/24"}}]}}),
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (400, "InvalidRequestFormat"), "{:?}", r.body);
    let detail = &r.json()["error"]["details"][0];
    assert_eq!(detail["code"], "DuplicateResourceName");
    assert!(detail["message"].as_str().unwrap().contains("two child resources with the same name (Workers)"));
    assert_eq!(h.get(&p("virtualNetworks/vnet2")).await.status, 404);

    // Security rules in one NSG body.
    let rule = |name: &str, priority: i64| {
        json!({"name": name, "properties": {"protocol": "Tcp", "access": "Allow", "direction": "Inbound",
        "priority": priority, "sourceAddressPrefix": "*", "sourcePortRange": "*",
        "destinationAddressPrefix": "*", "destinationPortRange": "443"}})
    };
    let r = h
        .put(
            &p("networkSecurityGroups/nsg"),
            json!({"location": "eastus", "properties": {"securityRules": [rule("https", 100), rule("https", 110)]}}),
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (400, "InvalidRequestFormat"), "{:?}", r.body);
    assert_eq!(r.json()["error"]["details"][0]["code"], "DuplicateResourceName");
    let r = h
        .put(
            &p("networkSecurityGroups/nsg"),
            json!({"location": "eastus", "properties": {"securityRules": [rule("https", 100), rule("ssh", 110)]}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    // A gateway or local network gateway that a connection still references cannot be deleted.
    let r = h.put(&p("connections/c"), ipsec_connection("rg", policy(27000, "AES256", "SHA256"))).await;
    assert_eq!(h.wait(&r).await, "Succeeded");
    for gw in ["virtualNetworkGateways/gw", "localNetworkGateways/lng"] {
        let r = h.delete(&p(gw)).await;
        assert_eq!((r.status, r.code().as_str()), (400, "VirtualNetworkGatewayCannotBeDeleted"), "{gw}: {:?}", r.body);
        assert!(r.json()["error"]["message"].as_str().unwrap().contains("/connections/c"));
        assert_eq!(h.get(&p(gw)).await.status, 200);
    }
    let r = h.delete(&p("connections/c")).await;
    assert_eq!(r.status, 202);
    assert_eq!(h.wait(&r).await, "Succeeded");
    for gw in ["virtualNetworkGateways/gw", "localNetworkGateways/lng"] {
        let r = h.delete(&p(gw)).await;
        assert!(r.status == 202 || r.status == 200, "{gw}: {:?}", r.body);
        h.wait(&r).await;
    }
    h.assert_conformant();
}

/// A pool's NAT gateway (`natGateway.json` 2024-03-01): its public IP and its subnet reference
/// it and are shown so; an IP already allocated elsewhere is refused (`PublicIPAddressInUse`), and
/// neither the NAT gateway nor its IP can go while something still uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nat_gateway_serves_its_subnet_and_goes_only_after_it() {
    let h = Harness::instant().await;
    gateway_stack(&h, "rg").await;
    let p = |rest: &str| format!("{}{NET_API}", net("rg", rest));
    let r = h
        .put(
            &p("publicIPAddresses/nat-ip"),
            json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let nat = |ip: &str| {
        json!({"location": "eastus", "sku": {"name": "Standard"},
            "properties": {"idleTimeoutInMinutes": 4, "publicIpAddresses": [{"id": net("rg", &format!("publicIPAddresses/{ip}"))}]}})
    };
    // The gateway's IP is taken.
    let r = h.put(&p("natGateways/taken"), nat("pip")).await;
    assert_eq!((r.status, r.code().as_str()), (400, "PublicIPAddressInUse"), "{:?}", r.body);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("already allocated to resource"));
    let r = h.put(&p("natGateways/missing"), nat("nowhere")).await;
    assert_eq!((r.status, r.code().as_str()), (400, "InvalidResourceReference"), "{:?}", r.body);
    let r = h.put(&p("natGateways/nat"), nat("nat-ip")).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(h.wait(&r).await, "Succeeded");
    let r = h.put(&p("natGateways/second"), nat("nat-ip")).await;
    assert_eq!((r.status, r.code().as_str()), (400, "PublicIPAddressInUse"), "one IP, one NAT gateway");
    let r = h
        .put(
            &p("virtualNetworks/vnet/subnets/workers"),
            json!({"properties": {"addressPrefix": "10.0.1.0/24", "defaultOutboundAccess": false,
                "natGateway": {"id": net("rg", "natGateways/nat")}}}),
        )
        .await;
    assert!(r.status == 201 || r.status == 200, "{:?}", r.body);
    h.wait(&r).await;
    let subnet_r = h.get(&p("virtualNetworks/vnet/subnets/workers")).await;
    let subnet = subnet_r.json();
    assert_eq!(subnet["properties"]["defaultOutboundAccess"], false);
    let nat_id = net("rg", "natGateways/nat");
    let got_r = h.get(&p("natGateways/nat")).await;
    let got = got_r.json();
    assert!(got["properties"]["subnets"][0]["id"].as_str().unwrap().ends_with("/subnets/workers"), "{got}");
    let ip_r = h.get(&p("publicIPAddresses/nat-ip")).await;
    let ip = ip_r.json();
    assert!(ip["properties"]["natGateway"]["id"].as_str().unwrap().eq_ignore_ascii_case(&nat_id), "{ip}");
    // In use: neither goes.
    let r = h.delete(&p("natGateways/nat")).await;
    assert_eq!((r.status, r.code().as_str()), (400, "InUseNatGatewayCannotBeDeleted"), "{:?}", r.body);
    let r = h.delete(&p("publicIPAddresses/nat-ip")).await;
    assert_eq!((r.status, r.code().as_str()), (400, "PublicIPAddressCannotBeDeleted"), "{:?}", r.body);
    // In the order xcsp's graph gives (subnet, NAT gateway, IP), each goes.
    for what in ["virtualNetworks/vnet/subnets/workers", "natGateways/nat", "publicIPAddresses/nat-ip"] {
        let r = h.delete(&p(what)).await;
        assert!(r.status == 202 || r.status == 200, "{what}: {:?}", r.body);
        h.wait(&r).await;
        assert_eq!(h.get(&p(what)).await.status, 404, "{what}");
    }
}
