//! Drives the real azure_identity 0.21 and azure_mgmt_{resources,network,msi,authorization} 0.21
//! clients over HTTP against the emulator: VNet, VNG (LRO), identity + role assignment through
//! PrincipalNotFound, throttling the SDK must retry, and a full teardown polled by hand.

use azure_core::auth::TokenCredential;
use azure_core::error::ErrorKind;
use azure_identity::{ClientSecretCredential, WorkloadIdentityCredential};
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xcsp_sim::{SimConfig, SimServer};

const SUB: &str = "00000000-0000-0000-0000-00000000abcd";
const TENANT: &str = "11111111-2222-3333-4444-555555555555";
const RG: &str = "xcsp-pool";

fn credential(base: &str) -> Arc<ClientSecretCredential> {
    Arc::new(ClientSecretCredential::new(
        xcsp_crypto::AzureHttp::for_peer(xcsp_crypto::Peer::Entra).unwrap(),
        azure_core::Url::parse(&format!("{base}/")).unwrap(),
        TENANT.into(),
        "xcsp-client".into(),
        "s3cret".into(),
    ))
}

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("model from json")
}

/// Polls a delete's Location (or Azure-AsyncOperation) URL until it finishes, as xcsp must.
async fn poll_delete(cred: &dyn TokenCredential, raw: azure_core::Response) {
    let status = u16::from(raw.status());
    assert!(status == 202 || status == 200 || status == 204, "delete answered {status}");
    if status != 202 {
        return;
    }
    let location = raw.headers().get_optional_string(&azure_core::headers::LOCATION).expect("202 carries Location");
    let token = cred.get_token(&["https://management.azure.com/.default"]).await.unwrap();
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = http.get(&location).bearer_auth(token.token.secret()).send().await.unwrap();
        match r.status().as_u16() {
            202 => {
                let wait =
                    r.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
                assert!(wait.is_some(), "202 poll carries Retry-After");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            200 | 204 => return,
            other => panic!("delete poll answered {other}: {}", r.text().await.unwrap_or_default()),
        }
        assert!(Instant::now() < deadline, "delete did not finish");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_azure_clients_create_and_delete_a_gateway_stack() {
    let mut config = SimConfig::default();
    // Gateways take 3-4.5 s, everything else milliseconds.
    config.latency.time_scale = 1.0 / 600.0;
    config.principal_replication_lag_ms = Some(1000);
    let sim = SimServer::start(config, 0).unwrap();
    let base = sim.base_url.clone();
    let endpoint = azure_core::Url::parse(&base).unwrap();
    let cred = credential(&base);

    let resources = azure_mgmt_resources::Client::builder(cred.clone())
        .endpoint(endpoint.clone())
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();
    let network = azure_mgmt_network::Client::builder(cred.clone())
        .endpoint(endpoint.clone())
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();
    let msi = azure_mgmt_msi::Client::builder(cred.clone())
        .endpoint(endpoint.clone())
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();
    let authz = azure_mgmt_authorization::Client::builder(cred.clone())
        .endpoint(endpoint.clone())
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();

    // Resource group.
    let rg = resources
        .resource_groups_client()
        .create_or_update(
            RG,
            from_json::<azure_mgmt_resources::models::ResourceGroup>(
                json!({"location": "usgovvirginia", "tags": {"xcsp-stack": "t1"}}),
            ),
            SUB,
        )
        .await
        .unwrap();
    assert_eq!(rg.location, "usgovvirginia");

    // Virtual network with GatewaySubnet (LRO: the client polls Azure-AsyncOperation).
    let vnet_id =
        format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks/pool-vnet");
    let vnet = network
        .virtual_networks_client()
        .create_or_update(
            RG,
            "pool-vnet",
            from_json::<azure_mgmt_network::models::VirtualNetwork>(json!({
                "location": "usgovvirginia",
                "tags": {"xcsp-stack": "t1"},
                "properties": {
                    "addressSpace": {"addressPrefixes": ["10.20.0.0/16"]},
                    "subnets": [
                        {"name": "GatewaySubnet", "properties": {"addressPrefix": "10.20.255.0/27"}},
                        {"name": "workers", "properties": {"addressPrefix": "10.20.1.0/24"}}
                    ]
                }
            })),
            SUB,
        )
        .await
        .unwrap();
    let vnet_json = serde_json::to_value(&vnet).unwrap();
    assert_eq!(vnet_json["properties"]["provisioningState"], "Succeeded");
    assert_eq!(vnet_json["properties"]["subnets"].as_array().unwrap().len(), 2);

    // Two Standard public IPs and an active-active, BGP, AZ gateway.
    for pip in ["pool-gw-pip1", "pool-gw-pip2"] {
        network
            .public_ip_addresses_client()
            .create_or_update(
                RG,
                pip,
                from_json::<azure_mgmt_network::models::PublicIpAddress>(json!({
                    "location": "usgovvirginia", "sku": {"name": "Standard", "tier": "Regional"}, "zones": ["1", "2", "3"],
                    "properties": {"publicIPAllocationMethod": "Static"}
                })),
                SUB,
            )
            .await
            .unwrap();
    }
    let pip =
        |n: &str| format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/publicIPAddresses/{n}");
    let gw_id =
        format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworkGateways/pool-gw");
    let gateway_body = json!({
        "location": "usgovvirginia",
        "properties": {
            "gatewayType": "Vpn", "vpnType": "RouteBased", "enableBgp": true, "activeActive": true,
            "sku": {"name": "VpnGw2AZ", "tier": "VpnGw2AZ"},
            "bgpSettings": {"asn": 65515, "bgpPeeringAddresses": [
                {"ipconfigurationId": format!("{gw_id}/ipConfigurations/ip1"), "customBgpIpAddresses": ["169.254.21.2", "169.254.22.2"]},
                {"ipconfigurationId": format!("{gw_id}/ipConfigurations/ip2"), "customBgpIpAddresses": ["169.254.21.6", "169.254.22.6"]}
            ]},
            "ipConfigurations": [
                {"name": "ip1", "properties": {"subnet": {"id": format!("{vnet_id}/subnets/GatewaySubnet")}, "publicIPAddress": {"id": pip("pool-gw-pip1")}}},
                {"name": "ip2", "properties": {"subnet": {"id": format!("{vnet_id}/subnets/GatewaySubnet")}, "publicIPAddress": {"id": pip("pool-gw-pip2")}}}
            ]
        }
    });
    let started = Instant::now();
    let gw_client = network.virtual_network_gateways_client();
    // Spawned: the SDK future polls the LRO while the rest runs beside it, as xcsp's apply does.
    let gw_future = tokio::spawn(
        gw_client
            .create_or_update(
                RG,
                "pool-gw",
                from_json::<azure_mgmt_network::models::VirtualNetworkGateway>(gateway_body.clone()),
                SUB,
            )
            .into_future(),
    );

    // Meanwhile: identity, federated credential and a role assignment that meets the replication lag.
    let identity = msi
        .user_assigned_identities_client()
        .create_or_update(
            SUB,
            RG,
            "pool-capz",
            from_json::<azure_mgmt_msi::models::Identity>(json!({"location": "usgovvirginia"})),
        )
        .await
        .unwrap();
    let principal = identity.properties.as_ref().unwrap().principal_id.clone().unwrap().to_string();
    msi.federated_identity_credentials_client()
        .create_or_update(
            SUB,
            RG,
            "pool-capz",
            "capi-controllers",
            from_json::<azure_mgmt_msi::models::FederatedIdentityCredential>(json!({"properties": {
                "issuer": "https://oidc.example.org/cluster", "subject": "system:serviceaccount:openshift-cluster-api:capi-controllers",
                "audiences": ["api://AzureADTokenExchangeUSGov"]}})),
        )
        .await
        .unwrap();
    let mut contributor = authz
        .role_definitions_client()
        .list(format!("/subscriptions/{SUB}/resourceGroups/{RG}"))
        .filter("roleName eq 'Contributor'")
        .into_stream();
    let roles = contributor.next().await.unwrap().unwrap().value;
    assert_eq!(roles.len(), 1);
    let role_id = roles[0].id.clone().unwrap();
    assert!(role_id.ends_with("b24988ac-6180-42a0-ab88-20f7382dd24c"));
    let scope = format!("/subscriptions/{SUB}/resourceGroups/{RG}");
    let ra_name = "6f1a0c1e-6b8e-4d0b-9a43-5bbd3b4f6a11";
    let mut principal_not_found = 0;
    let ra = loop {
        let props = azure_mgmt_authorization::models::RoleAssignmentProperties::new(role_id.clone(), principal.clone());
        match authz
            .role_assignments_client()
            .create(
                scope.clone(),
                ra_name,
                azure_mgmt_authorization::models::RoleAssignmentCreateParameters::new(props),
            )
            .await
        {
            Ok(ra) => break ra,
            Err(e) => match e.kind() {
                ErrorKind::HttpResponse { status, error_code: Some(code) } if code == "PrincipalNotFound" => {
                    assert_eq!(u16::from(*status), 400);
                    principal_not_found += 1;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                other => panic!("unexpected role assignment error {other:?}: {e}"),
            },
        }
    };
    assert!(principal_not_found >= 1, "the first attempt must meet PrincipalNotFound");
    assert_eq!(ra.properties.unwrap().principal_id, principal);

    // A second write to the gateway while it is provisioning is refused.
    let early = gw_client
        .update_tags(
            RG,
            "pool-gw",
            from_json::<azure_mgmt_network::models::TagsObject>(json!({"tags": {"a": "b"}})),
            SUB,
        )
        .send()
        .await;
    match early {
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::HttpResponse { error_code: Some(c), .. } if c == "AnotherOperationInProgress"),
            "{e}"
        ),
        Ok(_) => panic!("a second gateway write mid-operation must get 409"),
    }

    let gw = gw_future.await.unwrap().unwrap();
    let gw_json = serde_json::to_value(&gw).unwrap();
    assert_eq!(gw_json["properties"]["provisioningState"], "Succeeded");
    assert!(started.elapsed() >= Duration::from_secs(1), "the gateway LRO took {:?}", started.elapsed());
    assert_eq!(
        gw_json["properties"]["bgpSettings"]["bgpPeeringAddresses"][1]["customBgpIpAddresses"][0],
        "169.254.21.6"
    );
    assert_eq!(
        gw_json["properties"]["bgpSettings"]["bgpPeeringAddresses"][0]["tunnelIpAddresses"].as_array().unwrap().len(),
        1
    );

    // Throttling: a tight write bucket; the SDK's retry policy honours Retry-After.
    sim.sim.world.patch_config(&json!({"throttle": {"writes": {"capacity": 2, "refill_per_sec": 2.0}}})).unwrap();
    for i in 0..5 {
        network
            .network_security_groups_client()
            .create_or_update(
                RG,
                format!("nsg{i}"),
                from_json::<azure_mgmt_network::models::NetworkSecurityGroup>(json!({"location": "usgovvirginia"})),
                SUB,
            )
            .await
            .unwrap_or_else(|e| panic!("nsg{i}: {e:?} {:?}", sim.sim.world.counters()));
    }
    let counters = sim.sim.world.counters();
    assert!(counters.errors.get("SubscriptionRequestsThrottled").copied().unwrap_or(0) >= 1, "{counters:?}");
    sim.sim.world.patch_config(&json!({"throttle": {"enabled": false}})).unwrap();

    // Tag filter over the subscription.
    let mut tagged = network.virtual_networks_client().list_all(SUB).into_stream();
    let page = tagged.next().await.unwrap().unwrap();
    assert_eq!(page.value.len(), 1);

    // Teardown in dependency order; every delete is send-only, so poll by hand.
    let raw =
        network.virtual_network_gateways_client().delete(RG, "pool-gw", SUB).send().await.unwrap().into_raw_response();
    // While the gateway is being deleted its public IP is still in use.
    let in_use = network.public_ip_addresses_client().delete(RG, "pool-gw-pip1", SUB).send().await;
    assert!(
        matches!(in_use.unwrap_err().kind(), ErrorKind::HttpResponse { error_code: Some(c), .. } if c == "PublicIPAddressCannotBeDeleted")
    );
    poll_delete(cred.as_ref(), raw).await;
    for p in ["pool-gw-pip1", "pool-gw-pip2"] {
        let raw = network.public_ip_addresses_client().delete(RG, p, SUB).send().await.unwrap().into_raw_response();
        poll_delete(cred.as_ref(), raw).await;
    }
    authz.role_assignments_client().delete(scope.clone(), ra_name).await.unwrap();
    msi.user_assigned_identities_client().delete(SUB, RG, "pool-capz").send().await.unwrap();
    let raw = network.virtual_networks_client().delete(RG, "pool-vnet", SUB).send().await.unwrap().into_raw_response();
    poll_delete(cred.as_ref(), raw).await;
    let raw = resources.resource_groups_client().delete(RG, SUB).send().await.unwrap().into_raw_response();
    poll_delete(cred.as_ref(), raw).await;
    let gone = resources.resource_groups_client().get(RG, SUB).await;
    assert!(matches!(gone.unwrap_err().kind(), ErrorKind::HttpResponse { status, .. } if u16::from(*status) == 404));
    let store = sim.sim.arm.store.lock().unwrap();
    assert!(store.resources.is_empty(), "left behind: {:?}", store.resources.keys().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_identity_token_needs_a_matching_federated_credential() {
    let sim = SimServer::start(SimConfig::default(), 0).unwrap();
    let base = sim.base_url.clone();
    let cred = credential(&base);
    let msi = azure_mgmt_msi::Client::builder(cred.clone())
        .endpoint(azure_core::Url::parse(&base).unwrap())
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();
    let resources = azure_mgmt_resources::Client::builder(cred.clone())
        .endpoint(azure_core::Url::parse(&base).unwrap())
        .transport(xcsp_crypto::AzureHttp::transport(xcsp_crypto::Peer::AzureResourceManager).unwrap())
        .build()
        .unwrap();
    resources
        .resource_groups_client()
        .create_or_update(
            "rg",
            from_json::<azure_mgmt_resources::models::ResourceGroup>(json!({"location": "eastus"})),
            SUB,
        )
        .await
        .unwrap();
    let id = msi
        .user_assigned_identities_client()
        .create_or_update(
            SUB,
            "rg",
            "capz",
            from_json::<azure_mgmt_msi::models::Identity>(json!({"location": "eastus"})),
        )
        .await
        .unwrap();
    let client_id = id.properties.unwrap().client_id.unwrap().to_string();
    let issuer = "https://oidc.example.org/c1";
    let subject = "system:serviceaccount:openshift-cluster-api:capi-controllers";
    let jwt = |aud: &str| {
        use base64::Engine;
        let enc = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.sig",
            enc(json!({"alg": "RS256"})),
            enc(json!({"iss": issuer, "sub": subject, "aud": aud, "exp": 4102444800u64}))
        )
    };
    let wi = |aud: &str| {
        WorkloadIdentityCredential::new(
            xcsp_crypto::AzureHttp::for_peer(xcsp_crypto::Peer::Entra).unwrap(),
            azure_core::Url::parse(&format!("{base}/")).unwrap(),
            TENANT.into(),
            client_id.clone(),
            jwt(aud),
        )
    };
    // No federated credential yet: AADSTS70021.
    assert!(
        wi("api://AzureADTokenExchange").get_token(&["https://management.usgovcloudapi.net/.default"]).await.is_err()
    );
    msi.federated_identity_credentials_client()
        .create_or_update(
            SUB,
            "rg",
            "capz",
            "capi",
            from_json::<azure_mgmt_msi::models::FederatedIdentityCredential>(json!({"properties": {"issuer": issuer, "subject": subject, "audiences": ["api://AzureADTokenExchangeUSGov"]}})),
        )
        .await
        .unwrap();
    // Wrong audience still fails; the right one gets a token (with ext_expires_in, which azure_identity requires).
    assert!(
        wi("api://AzureADTokenExchange").get_token(&["https://management.usgovcloudapi.net/.default"]).await.is_err()
    );
    let token = wi("api://AzureADTokenExchangeUSGov")
        .get_token(&["https://management.usgovcloudapi.net/.default"])
        .await
        .unwrap();
    assert!(token.token.secret().starts_with("xcsp-sim."));
    let log = sim.sim.arm.tokens.lock().unwrap().log.clone();
    let last = log.last().unwrap();
    assert_eq!(last.grant, "client_assertion");
    assert_eq!(last.audience, "https://management.usgovcloudapi.net");
    assert!(log.iter().filter(|r| !r.issued && r.grant == "client_assertion").count() == 2);
}
