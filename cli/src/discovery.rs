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
    cause.to_string()
}

/// Fetches every issuer's discovery document and reports mismatches (errors) and issuers that
/// could not be checked (warnings).
pub async fn check(model: &Model) -> Vec<Problem> {
    let client = match reqwest::Client::builder().timeout(Duration::from_secs(5)).build() {
        Ok(c) => c,
        Err(_) => return Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

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
