//! The plan-time check of each workload identity's issuer: its OpenID discovery document must
//! name exactly the issuer the spec gives, or Entra will refuse every token the cluster's
//! service accounts present (the federated credential matches `iss` byte for byte). Skipped with
//! `--offline`; an issuer that cannot be reached is a warning, not an error.

use std::time::Duration;

use xcsp_core::Problem;
use xcsp_plans::validate::Model;

/// What a fetched discovery document says about the issuer the spec names.
pub fn judge(expected: &str, document: &serde_json::Value) -> Result<(), String> {
    match document.get("issuer").and_then(serde_json::Value::as_str) {
        None => Err("its discovery document has no `issuer`".into()),
        Some(found) if found == expected => Ok(()),
        Some(found) => Err(format!("its discovery document names the issuer `{found}`")),
    }
}

/// The most specific cause of an error ("dns error: failed to lookup address", not "error
/// sending request").
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    // A FIPS build refused by a server without FIPS-approved TLS says so.
    match xcsp_crypto::explain(e) {
        Some(fips) => format!("{cause} ({fips})"),
        None => cause.to_string(),
    }
}

/// What a fetched JWKS lacks of the keys the cluster signs with (`cluster`: their key ids, when the
/// cluster could be read).
pub fn missing_keys(cluster: &[String], published: &serde_json::Value) -> Vec<String> {
    let published = xcsp_kube::survey::key_ids(published);
    cluster.iter().filter(|k| !published.contains(k)).cloned().collect()
}

/// Fetches every issuer's discovery document and the signing keys it points at (`jwks_uri`), as
/// Entra does before it takes a token, and reports mismatches (errors) and issuers that could not
/// be checked (warnings). `cluster_keys`: the key ids the cluster signs its tokens with, when read.
pub async fn check(model: &Model, cluster_keys: Option<&[String]>) -> Vec<Problem> {
    let builder = xcsp_crypto::reqwest_client(xcsp_crypto::Peer::OidcIssuer, reqwest::Client::builder());
    let client = match builder.map(|b| b.timeout(Duration::from_secs(5)).build()) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return vec![Problem::warning(
                "xcsp::oidc::unreachable",
                format!("the OIDC issuers cannot be checked: {e}"),
            )];
        }
        Err(e) => {
            return vec![Problem::warning(
                "xcsp::oidc::unreachable",
                format!("the OIDC issuers cannot be checked: {e}"),
            )];
        }
    };
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for id in &model.identities {
        let issuer = &id.issuer;
        if !seen.insert(issuer.value.clone()) {
            continue;
        }
        let url = format!("{}/.well-known/openid-configuration", issuer.value.trim_end_matches('/'));
        let fetched = async {
            let response = client.get(&url).send().await.map_err(|e| innermost(&e))?;
            if !response.status().is_success() {
                return Err(format!("HTTP {}", response.status()));
            }
            response.json::<serde_json::Value>().await.map_err(|e| innermost(&e))
        };
        match fetched.await {
            Ok(doc) => {
                if let Err(why) = judge(&issuer.value, &doc) {
                    problems.push(
                        Problem::error("xcsp::oidc::issuer_mismatch", format!("the OIDC issuer does not match: {why}"))
                            .label(&issuer.span, "the spec's issuer")
                            .with_help("use exactly the `issuer` of the discovery document (scheme, host, path, no trailing slash)"),
                    );
                }
                problems.extend(check_keys(&client, issuer, &doc, cluster_keys).await);
            }
            Err(why) => problems.push(
                Problem::warning("xcsp::oidc::unreachable", format!("could not check the OIDC issuer at {url}: {why}"))
                    .label(&issuer.span, "")
                    .with_help("make sure the cluster's issuer serves its discovery document publicly; --offline skips this check"),
            ),
        }
    }
    problems
}

/// Entra verifies a token with the keys the discovery document's `jwks_uri` serves: a JWKS that
/// cannot be fetched (an S3 bucket behind Block Public Access answers 403; GovCloud has no
/// CloudFront to front it) or lacks the key the cluster signs with is a refusal of every token.
async fn check_keys(
    client: &reqwest::Client,
    issuer: &xcsp_plans::spec::Sp<String>,
    doc: &serde_json::Value,
    cluster_keys: Option<&[String]>,
) -> Option<Problem> {
    let Some(uri) = doc["jwks_uri"].as_str() else {
        return Some(
            Problem::error(
                "xcsp::oidc::jwks",
                "the issuer's discovery document has no `jwks_uri`: Entra cannot verify any token",
            )
            .label(&issuer.span, "the spec's issuer"),
        );
    };
    let fetched = async {
        let response = client.get(uri).send().await.map_err(|e| innermost(&e))?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        response.json::<serde_json::Value>().await.map_err(|e| innermost(&e))
    };
    let jwks = match fetched.await {
        Ok(j) => j,
        Err(why) => {
            return Some(
                Problem::error(
                    "xcsp::oidc::jwks",
                    format!("the issuer's signing keys at {uri} cannot be fetched ({why}): Entra fetches them there to verify every token, so it would refuse them all"),
                )
                .label(&issuer.span, "the spec's issuer")
                .with_help("serve the keys publicly (an S3 bucket behind Block Public Access answers 403: allow public reads of the two documents, or serve them elsewhere)"),
            );
        }
    };
    let missing = missing_keys(cluster_keys?, &jwks);
    (!missing.is_empty()).then(|| {
        Problem::error(
            "xcsp::oidc::jwks",
            format!(
                "the cluster signs its service-account tokens with key {} which the issuer's keys at {uri} do not hold: Entra would refuse every token it signs",
                missing.join(", ")
            ),
        )
        .label(&issuer.span, "the spec's issuer")
        .with_help("publish the cluster's current keys (`oc get --raw /openid/v1/jwks`) at the jwks_uri, as after a key rotation")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_cluster_signs_with_must_be_published() {
        let jwks = serde_json::json!({"keys": [{"kid": "a", "kty": "RSA"}, {"kid": "b", "kty": "RSA"}]});
        assert!(missing_keys(&["a".into()], &jwks).is_empty());
        assert_eq!(missing_keys(&["a".into(), "c".into()], &jwks), ["c"]);
        assert_eq!(missing_keys(&["a".into()], &serde_json::json!({})), ["a"]);
    }

    #[test]
    fn the_document_must_name_the_same_issuer() {
        let doc = |iss: &str| serde_json::json!({ "issuer": iss, "jwks_uri": format!("{iss}/keys.json") });
        let spec = "https://oidc.example.com/cluster";
        assert!(judge(spec, &doc(spec)).is_ok());
        assert!(judge(spec, &doc("https://oidc.example.com/cluster/")).unwrap_err().contains("cluster/`"));
        assert!(judge(spec, &doc("https://other.example.com")).is_err());
        assert!(judge(spec, &serde_json::json!({})).unwrap_err().contains("no `issuer`"));
    }
}
