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
        azure_core::new_http_client(),
        azure_core::Url::parse(&format!("{base}/")).unwrap(),
        TENANT.into(),
        "xcsp-client".into(),
        "s3cret".into(),
    ));
    let resources = azure_mgmt_resources::Client::builder(cred.clone()).endpoint(endpoint.clone()).build().unwrap();
    let network = azure_mgmt_network::Client::builder(cred.clone()).endpoint(endpoint).build().unwrap();
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
