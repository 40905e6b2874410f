//! Azure's own host names, served by the world over TLS (`xcsp_sim::front`) and reached the way
//! CAPZ reaches them: through the world's `CONNECT` proxy, trusting the world's CA. Driven with the
//! real azure_identity 0.21 and azure_mgmt_resources 0.21 clients on a reqwest client given the
//! proxy and the CA, each authority answering as its own cloud: a Government tenant is served at
//! `login.microsoftonline.us` and refused at `login.microsoftonline.com` (AADSTS900382), a token
//! for another cloud's Resource Manager is refused (AADSTS500011), Resource Manager accepts both
//! Government management audiences and refuses a public one (`InvalidAuthenticationTokenAudience`).
//!
//! Needs the world's cluster (its proxy and CA): fails, never skips, when the upstream binaries
//! are not built.

use std::sync::Arc;

use azure_core::auth::TokenCredential;
use azure_identity::ClientSecretCredential;
use serde_json::Value;
use xcsp_sim::{SimConfig, SimServer};

const TENANT: &str = "11111111-2222-3333-4444-555555555555";
const SUB: &str = "00000000-0000-0000-0000-00000000abcd";

fn http(server: &SimServer) -> reqwest::Client {
    let cluster = server.cluster().expect("the world's cluster");
    reqwest::Client::builder()
        .proxy(reqwest::Proxy::https(cluster.proxy.url()).unwrap())
        .add_root_certificate(reqwest::Certificate::from_pem(cluster.ca_pem.as_bytes()).unwrap())
        .tls_built_in_root_certs(false)
        .build()
        .unwrap()
}

fn credential(http: &reqwest::Client, authority: &str) -> Arc<ClientSecretCredential> {
    Arc::new(ClientSecretCredential::new(
        Arc::new(xcsp_crypto::AzureHttp(http.clone())),
        azure_core::Url::parse(&format!("https://{authority}/")).unwrap(),
        TENANT.into(),
        "capz".into(),
        "s3cret".into(),
    ))
}

async fn token_log(server: &SimServer) -> Vec<Value> {
    let v: Value = reqwest::get(format!("{}/_sim/tokens", server.base_url)).await.unwrap().json().await.unwrap();
    v["requests"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cloud_answers_at_its_own_host_names_over_tls() {
    let config = SimConfig { azure_cloud: Some("usgovernment".into()), ..SimConfig::default() };
    let server = tokio::task::spawn_blocking(move || SimServer::start_with_cluster(config, 0, Default::default()))
        .await
        .unwrap()
        .expect("the world with its cluster (XCSP_UPSTREAM_BIN from scripts/upstream-setup)");
    let http = http(&server);

    // The Government authority serves its tenant a token for either Government audience.
    let gov = credential(&http, "login.microsoftonline.us");
    for scope in ["https://management.core.usgovcloudapi.net/.default", "https://management.usgovcloudapi.net/.default"]
    {
        let t = gov.get_token(&[scope]).await.unwrap_or_else(|e| panic!("{scope}: {e}"));
        // Resource Manager under its Government name accepts it, over TLS through the proxy.
        let client = azure_mgmt_resources::Client::builder(gov.clone())
            .endpoint(azure_core::Url::parse("https://management.usgovcloudapi.net").unwrap())
            .scopes(&[scope])
            .transport(azure_core::TransportOptions::new(Arc::new(xcsp_crypto::AzureHttp(http.clone()))))
            .build()
            .unwrap();
        let made = client
            .resource_groups_client()
            .create_or_update(
                "capz-rg",
                serde_json::from_value::<azure_mgmt_resources::models::ResourceGroup>(
                    serde_json::json!({"location": "usgovvirginia"}),
                )
                .unwrap(),
                SUB,
            )
            .await
            .unwrap_or_else(|e| panic!("resource group with a token for {scope}: {e}"));
        assert_eq!(made.location, "usgovvirginia");
        assert!(!t.token.secret().is_empty());
    }

    // The public authority refuses a Government tenant, as Entra refuses a cross-cloud request.
    let public = credential(&http, "login.microsoftonline.com");
    let refused = public.get_token(&["https://management.azure.com/.default"]).await.map(|_| ()).unwrap_err();
    let refused = format!("{refused:?}");
    assert!(refused.contains("AADSTS900382"), "{refused}");

    // A token for the public cloud's Resource Manager is not served by the Government authority.
    let refused = gov.get_token(&["https://management.azure.com/.default"]).await.map(|_| ()).unwrap_err();
    let refused = format!("{refused:?}");
    assert!(refused.contains("AADSTS500011"), "{refused}");

    // A token for another audience (issued at the plain address, which judges no cloud) is refused
    // by the Government Resource Manager.
    let plain = Arc::new(ClientSecretCredential::new(
        xcsp_crypto::AzureHttp::for_peer(xcsp_crypto::Peer::Entra).unwrap(),
        azure_core::Url::parse(&format!("{}/", server.base_url)).unwrap(),
        TENANT.into(),
        "capz".into(),
        "s3cret".into(),
    ));
    let client = azure_mgmt_resources::Client::builder(plain)
        .endpoint(azure_core::Url::parse("https://management.usgovcloudapi.net").unwrap())
        .scopes(&["https://management.azure.com/.default"])
        .transport(azure_core::TransportOptions::new(Arc::new(xcsp_crypto::AzureHttp(http.clone()))))
        .build()
        .unwrap();
    let refused = client.resource_groups_client().get("capz-rg", SUB).await.map(|_| ()).unwrap_err();
    let refused = format!("{refused:?}");
    assert!(refused.contains("InvalidAuthenticationTokenAudience"), "{refused}");

    // Each host serves only its own API.
    let wrong = http
        .get(format!("https://login.microsoftonline.us/subscriptions/{SUB}/resourcegroups?api-version=2021-04-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 404);

    // The token log says where each request was asked and what was refused.
    let log = token_log(&server).await;
    let at = |cloud: &str, code: Option<u64>| {
        log.iter().filter(|r| r["authority"] == cloud && r["refused"].as_u64() == code).count()
    };
    assert_eq!(at("usgovernment", None), 2, "{log:#?}");
    assert_eq!(at("public", Some(900382)), 1, "{log:#?}");
    assert_eq!(at("usgovernment", Some(500011)), 1, "{log:#?}");
    assert_eq!(log.iter().filter(|r| r["authority"].is_null()).count(), 1, "{log:#?}");
}
