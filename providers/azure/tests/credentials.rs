//! Which cloud the provider reaches and as whom: a Government configuration asks Entra for
//! Government tokens and sends every call to the Resource Manager it names; a token for another
//! audience is refused with a clear error; a workload identity reads its federated token file
//! again for every new access token, so a rotated (or revoked) token takes effect mid-run.

mod common;

use base64::Engine;
use common::*;
use serde_json::json;
use xcsp_azure::{AzureProvider, Cloud, CredentialSource};
use xcsp_core::provider::Provider;
use xcsp_core::{ProviderKind, ResourceType};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn government_requests_carry_the_government_audience_and_others_are_refused() {
    let emu = Emulator::start("instant");
    emu.configure(json!({ "expected_audience": GOV })).await;

    let gov = emu.provider();
    gov.refresh(STACK, ResourceType::AzureResourceGroup).await.expect("a Government token is accepted");
    let tokens = emu.tokens().await;
    assert!(!tokens.is_empty());
    for t in &tokens {
        assert_eq!(t["audience"], json!(GOV), "{t}");
        assert_eq!(t["tenant"], json!(TENANT), "{t}");
    }
    let requests = emu.requests().await;
    // One list per key the stack tag may have (xcsp_core::tags::read_keys).
    assert_eq!(requests.get("GET Microsoft.Resources/resourceGroups (list)"), Some(&2), "{requests:?}");

    // The same emulator reached as the public cloud: the token is for the wrong audience.
    let mut config = emu.config();
    config.cloud = Cloud::Public.through(&emu.base, &emu.base);
    let public = AzureProvider::new(config).unwrap();
    let e = public.refresh(STACK, ResourceType::AzureResourceGroup).await.expect_err("refused");
    let text = e.to_string();
    assert!(text.contains("InvalidAuthenticationTokenAudience"), "{text}");
    assert!(!text.contains("local-secret"), "the client secret never shows: {text}");
}

/// An unsigned JWT with the claims the emulator's Entra checks (it does not verify signatures).
fn assertion(issuer: &str, subject: &str, audience: &str) -> String {
    let b64 = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3600;
    format!(
        "{}.{}.c2lnbmF0dXJl",
        b64(json!({"alg": "RS256", "typ": "JWT"})),
        b64(json!({"iss": issuer, "sub": subject, "aud": audience, "exp": exp}))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_identity_reads_its_token_file_for_every_new_token() {
    let emu = Emulator::start("instant");
    // Tokens that live under the two minutes the provider renews ahead: every call needs a new one.
    emu.configure(json!({ "token_lifetime_secs": 60 })).await;
    let il5 = il5();
    // The identity with its role on the resource group: Resource Manager judges a workload
    // identity's calls by Azure RBAC, so its own list needs one.
    let wanted = [
        "azure_resource_group.main",
        "azure_user_assigned_identity.capz",
        "azure_federated_identity_credential.capz",
        "azure_role_assignment.capz",
    ];
    let nodes: Vec<_> =
        il5.nodes.iter().filter(|n| wanted.contains(&n.address.to_string().as_str())).cloned().collect();
    assert_eq!(nodes.len(), 4);
    let admin = AzureProvider::new(emu.config_for(&il5.subscription, &il5.tenant, &il5.resource_group)).unwrap();
    let recorded = apply_in_order(&admin, &il5.stack, &nodes, &Recorder::default()).await;
    let fic = recorded.get("azure_federated_identity_credential.capz");
    let (issuer, subject) = (fic["issuer"].as_str().unwrap(), fic["subject"].as_str().unwrap());
    assert_eq!(subject, "system:serviceaccount:openshift-cluster-api:capz-manager");
    let audience = fic["audiences"].to_json()[0].as_str().unwrap().to_string();
    let client_id = recorded.get("azure_user_assigned_identity.capz")["client_id"].as_str().unwrap().to_string();

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, assertion(issuer, subject, &audience)).unwrap();
    let mut config = emu.config_for(&il5.subscription, &il5.tenant, &il5.resource_group);
    config.credential = CredentialSource::WorkloadIdentity { client_id: client_id.clone(), token_file: file.clone() };
    let capz = AzureProvider::new(config).unwrap();
    let found = capz.refresh(&il5.stack, ResourceType::AzureUserAssignedIdentity).await.expect("federated login");
    assert_eq!(found.len(), 1);

    // The token file now holds another service account's token: the next access token is refused.
    std::fs::write(&file, assertion(issuer, "system:serviceaccount:default:intruder", &audience)).unwrap();
    let e = capz.refresh(&il5.stack, ResourceType::AzureUserAssignedIdentity).await.expect_err("refused");
    assert!(e.to_string().contains("AADSTS70021"), "{e}");

    // Rotated back to a valid token: accepted again without a new provider.
    std::fs::write(&file, assertion(issuer, subject, &audience)).unwrap();
    capz.refresh(&il5.stack, ResourceType::AzureUserAssignedIdentity).await.expect("federated login again");
    let grants: Vec<_> = emu.tokens().await.into_iter().filter(|t| t["client_id"] == json!(client_id)).collect();
    assert!(grants.len() >= 3, "one token request per call: {grants:?}");
    assert!(grants.iter().all(|t| t["grant"] == json!("client_assertion")), "{grants:?}");
    assert!(nodes.iter().all(|n| n.address.rtype.provider() == ProviderKind::Azure));
}
