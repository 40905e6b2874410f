//! The Entra ID token endpoint (`/{tenant}/oauth2/v2.0/token`: client secret or client assertion)
//! and bearer-token checks for ARM calls.

use super::clouds::{self, Cloud};
use super::error::ArmError;
use super::kinds;
use super::store::Store;
use crate::world::SimConfig;
use axum::http::StatusCode;
use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What an issued token stands for.
#[derive(Debug, Clone)]
pub struct TokenInfo {
    pub tenant: String,
    pub client_id: String,
    pub audience: String,
    pub expires: Instant,
    /// The cloud whose authority issued it, when it was asked for under a cloud's host name.
    pub cloud: Option<&'static str>,
}

/// One token request, as recorded for `/_sim/tokens`.
#[derive(Debug, Clone, Serialize)]
pub struct TokenRecord {
    pub tenant: String,
    pub client_id: String,
    /// `client_secret` or `client_assertion`.
    pub grant: String,
    pub scope: String,
    pub audience: String,
    /// Claims of the client assertion (iss, sub, aud), if one was presented.
    pub assertion: Option<Value>,
    /// True if a token was issued.
    pub issued: bool,
    /// The cloud whose authority host it was asked at (`public`, `usgovernment`); `None` at the
    /// plain loopback address.
    pub authority: Option<&'static str>,
    /// The refusal's `AADSTS` code, if refused.
    pub refused: Option<u32>,
    /// The refusal's description (its first line, without the trace ids), if refused.
    pub error: Option<String>,
}

/// Issued tokens and the request log.
#[derive(Debug, Default)]
pub struct Tokens {
    pub issued: HashMap<String, TokenInfo>,
    pub log: Vec<TokenRecord>,
    /// Per client id, the last request's record (what a reader of the newest answer needs,
    /// without walking the log).
    pub last: HashMap<String, TokenRecord>,
}

/// An error in Entra's shape.
pub struct AadError {
    pub status: StatusCode,
    pub body: Value,
}

fn aad(status: StatusCode, error: &str, code: u32, description: &str) -> AadError {
    AadError {
        status,
        body: json!({
            "error": error,
            "error_description": format!("AADSTS{code}: {description}\r\nTrace ID: {}\r\nCorrelation ID: {}\r\nTimestamp: {}",
                uuid::Uuid::new_v4(), uuid::Uuid::new_v4(), crate::arm::now_rfc3339()),
            "error_codes": [code],
            "timestamp": crate::arm::now_rfc3339(),
            "trace_id": uuid::Uuid::new_v4().to_string(),
            "correlation_id": uuid::Uuid::new_v4().to_string(),
        }),
    }
}

/// The OpenID Connect scopes MSAL adds to every token request, the client-credential flow's
/// included (MSAL for Go v1.7.2 `apps/internal/oauth/ops/accesstokens/accesstokens.go`
/// `defaultScopes`, `AppendDefaultScopes`): Entra reads them as no resource.
const OIDC_SCOPES: &[&str] = &["openid", "offline_access", "profile"];

/// The scopes of a request that name a resource (the OpenID Connect ones left out).
fn resource_scopes(scope: &str) -> impl Iterator<Item = &str> {
    scope.split_whitespace().filter(|s| !OIDC_SCOPES.contains(s))
}

/// `scope=https://management.azure.com/.default` -> `https://management.azure.com`.
pub fn audience_of(scope: &str) -> String {
    let first = resource_scopes(scope).next().unwrap_or_default();
    first.trim_end_matches("/.default").trim_end_matches(".default").trim_end_matches('/').to_string()
}

fn decode_jwt_claims(jwt: &str) -> Option<Value> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Handles a token request.
pub fn token(
    tokens: &mut Tokens,
    store: &Store,
    config: &SimConfig,
    tenant: &str,
    form: &HashMap<String, String>,
    now: Instant,
    at: Option<&'static Cloud>,
) -> Result<Value, AadError> {
    let get = |k: &str| form.get(k).map(String::as_str).unwrap_or_default();
    let client_id = get("client_id").to_string();
    let scope = get("scope").to_string();
    let mut record = TokenRecord {
        tenant: tenant.to_string(),
        client_id: client_id.clone(),
        grant: String::new(),
        scope: scope.clone(),
        audience: audience_of(&scope),
        assertion: None,
        issued: false,
        authority: at.map(|c| c.name),
        refused: None,
        error: None,
    };
    let result = check_cloud(&record, config, at).and_then(|()| check_grant(&mut record, store, config, form));
    record.issued = result.is_ok();
    record.refused = result.as_ref().err().and_then(|e| e.body["error_codes"][0].as_u64()).map(|c| c as u32);
    record.error = result
        .as_ref()
        .err()
        .and_then(|e| e.body["error_description"].as_str().and_then(|d| d.split("\r\n").next()).map(String::from));
    tokens.log.push(record.clone());
    tokens.last.insert(record.client_id.clone(), record.clone());
    result?;
    let token = format!("xcsp-sim.{}", uuid::Uuid::new_v4().simple());
    let lifetime = config.token_lifetime_secs;
    tokens.issued.insert(
        token.clone(),
        TokenInfo {
            tenant: tenant.to_string(),
            client_id,
            audience: record.audience.clone(),
            expires: now + Duration::from_secs(lifetime),
            cloud: at.map(|c| c.name),
        },
    );
    Ok(json!({
        "token_type": "Bearer",
        "expires_in": lifetime,
        "ext_expires_in": lifetime,
        "access_token": token,
    }))
}

/// What an authority of one cloud refuses before it looks at the client: a tenant homed in
/// another cloud (`azure_cloud`), and a token for another cloud's Resource Manager.
///
/// - AADSTS900382 "Confidential Client is not supported in Cross Cloud request." (400,
///   `invalid_request`): what a client credential asked at `login.microsoftonline.com` for an Azure
///   Government tenant gets (Microsoft Learn, "Microsoft Entra authentication and authorization
///   error codes", added by MicrosoftDocs/azure-docs#45945; the answer as seen in
///   sjkp/letsencrypt-siteextension#399 and Azure/ms-rest-nodeauth#110).
/// - AADSTS500011 "The resource principal named ... was not found in the tenant" (400,
///   `invalid_resource`): a scope naming a resource the cloud does not have (the same reference,
///   `InvalidResourceServicePrincipalNotFound`).
fn check_cloud(record: &TokenRecord, config: &SimConfig, at: Option<&'static Cloud>) -> Result<(), AadError> {
    let Some(at) = at else { return Ok(()) };
    if let Some(home) = config.azure_cloud.as_deref().and_then(clouds::named)
        && home != at
    {
        return Err(aad(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            900382,
            "Confidential Client is not supported in Cross Cloud request.",
        ));
    }
    if let Some(other) = clouds::of_audience(&record.audience)
        && other != at
    {
        return Err(aad(
            StatusCode::BAD_REQUEST,
            "invalid_resource",
            500011,
            &format!(
                "The resource principal named {} was not found in the tenant named {}. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant. You might have sent your authentication request to the wrong tenant.",
                record.audience, record.tenant
            ),
        ));
    }
    Ok(())
}

fn check_grant(
    record: &mut TokenRecord,
    store: &Store,
    config: &SimConfig,
    form: &HashMap<String, String>,
) -> Result<(), AadError> {
    let get = |k: &str| form.get(k).map(String::as_str).unwrap_or_default();
    if get("grant_type") != "client_credentials" {
        return Err(aad(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            70003,
            "The app requested an unsupported grant type (xcsp-sim supports client_credentials).",
        ));
    }
    if record.client_id.is_empty() {
        return Err(aad(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            900144,
            "The request body must contain the following parameter: 'client_id'.",
        ));
    }
    if record.scope.is_empty() {
        return Err(aad(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            900144,
            "The request body must contain the following parameter: 'scope'.",
        ));
    }
    if !resource_scopes(&record.scope).all(|s| s.ends_with("/.default"))
        || resource_scopes(&record.scope).next().is_none()
    {
        return Err(aad(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            1002012,
            &format!(
                "The provided value for scope {} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).",
                record.scope
            ),
        ));
    }
    if form.contains_key("client_secret") {
        record.grant = "client_secret".into();
        let secret = get("client_secret");
        if secret.is_empty() {
            return Err(aad(StatusCode::UNAUTHORIZED, "invalid_client", 7000215, "Invalid client secret provided."));
        }
        if !config.client_secrets.is_empty() {
            match config.client_secrets.get(&record.client_id) {
                None => {
                    return Err(aad(
                        StatusCode::BAD_REQUEST,
                        "unauthorized_client",
                        700016,
                        &format!(
                            "Application with identifier '{}' was not found in the directory '{}'.",
                            record.client_id, record.tenant
                        ),
                    ));
                }
                Some(s) if s != secret => {
                    return Err(aad(
                        StatusCode::UNAUTHORIZED,
                        "invalid_client",
                        7000215,
                        "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.",
                    ));
                }
                Some(_) => {}
            }
        }
        return Ok(());
    }
    if form.contains_key("client_assertion") {
        record.grant = "client_assertion".into();
        if get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
            return Err(aad(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                50027,
                "Invalid client_assertion_type: expected urn:ietf:params:oauth:client-assertion-type:jwt-bearer.",
            ));
        }
        let Some(claims) = decode_jwt_claims(get("client_assertion")) else {
            return Err(aad(StatusCode::BAD_REQUEST, "invalid_client", 50027, "JWT token is invalid or malformed."));
        };
        record.assertion = Some(claims.clone());
        if let Some(exp) = claims["exp"].as_i64()
            && exp < time::OffsetDateTime::now_utc().unix_timestamp()
        {
            return Err(aad(
                StatusCode::BAD_REQUEST,
                "invalid_client",
                700024,
                "Client assertion is not within its valid time range.",
            ));
        }
        // A user-assigned identity accepts only assertions matching one of its federated credentials.
        let auds: Vec<&str> = match &claims["aud"] {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let (iss, sub) = (claims["iss"].as_str().unwrap_or_default(), claims["sub"].as_str().unwrap_or_default());
        if let Some(Err(description)) = federated_match(store, &record.client_id, iss, sub, &auds) {
            return Err(aad(StatusCode::BAD_REQUEST, "invalid_request", 70021, &description));
        }
        return Ok(());
    }
    Err(aad(
        StatusCode::UNAUTHORIZED,
        "invalid_client",
        7000218,
        "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
    ))
}

/// Entra's check of a workload-identity assertion against the federated credentials of the
/// user-assigned identity whose client id is `client_id`: `None` when no such identity exists
/// (the sim then does not judge the client), else whether one credential has the assertion's
/// issuer and subject exactly and one of its audiences, with AADSTS70021's description if not
/// (Microsoft Learn, "Workload identity federation": "the issuer, subject, and audience ... must
/// match"; the error text as Entra returns it).
pub fn federated_match(
    store: &Store,
    client_id: &str,
    iss: &str,
    sub: &str,
    auds: &[&str],
) -> Option<Result<(), String>> {
    let identity =
        store.of_kind(&kinds::IDENTITY).find(|r| r.body["properties"]["clientId"].as_str() == Some(client_id))?;
    let matched = store.children(&identity.id, &kinds::FEDERATED_CREDENTIAL).iter().any(|fic| {
        let p = &fic.body["properties"];
        p["issuer"].as_str() == Some(iss)
            && p["subject"].as_str() == Some(sub)
            && p["audiences"].as_array().into_iter().flatten().any(|a| a.as_str().is_some_and(|a| auds.contains(&a)))
    });
    Some(if matched {
        Ok(())
    } else {
        Err(format!(
            "No matching federated identity record found for presented assertion. Assertion Issuer: '{iss}'. Assertion Subject: '{sub}'. Assertion Audience: '{}'.",
            auds.join(",")
        ))
    })
}

/// Checks the `Authorization` header of an ARM call.
///
/// At a cloud's Resource Manager host (`at`), the token's audience must be one that cloud's
/// Resource Manager accepts; at the plain address, `expected_audience` when set.
pub fn bearer(
    tokens: &Tokens,
    config: &SimConfig,
    header: Option<&str>,
    now: Instant,
    at: Option<&'static Cloud>,
) -> Result<TokenInfo, ArmError> {
    let Some(h) = header else {
        return Err(ArmError::new(
            StatusCode::UNAUTHORIZED,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        ));
    };
    let Some(token) = h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")) else {
        return Err(ArmError::new(
            StatusCode::UNAUTHORIZED,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is provided in an invalid format.",
        ));
    };
    let Some(info) = tokens.issued.get(token.trim()) else {
        return Err(ArmError::new(
            StatusCode::UNAUTHORIZED,
            "InvalidAuthenticationToken",
            "The access token is invalid.",
        ));
    };
    if info.expires <= now {
        return Err(ArmError::new(
            StatusCode::UNAUTHORIZED,
            "ExpiredAuthenticationToken",
            "The access token expiry UTC time is earlier than current UTC time.",
        ));
    }
    if let Some(cloud) = at
        && !cloud.audiences.iter().any(|a| a.eq_ignore_ascii_case(info.audience.trim_end_matches('/')))
    {
        return Err(ArmError::new(
            StatusCode::UNAUTHORIZED,
            "InvalidAuthenticationTokenAudience",
            format!(
                "The access token has been obtained for wrong audience or resource '{}'. It should exactly match with one of the allowed audiences '{}'.",
                info.audience,
                cloud.audiences.iter().map(|a| format!("{a}/")).collect::<Vec<_>>().join("','")
            ),
        ));
    }
    if at.is_none()
        && let Some(expected) = &config.expected_audience
        && audience_of(expected) != info.audience
    {
        return Err(ArmError::new(
            StatusCode::UNAUTHORIZED,
            "InvalidAuthenticationTokenAudience",
            format!(
                "The access token has been obtained for wrong audience or resource '{}'. It should exactly match with one of the allowed audiences '{}'.",
                info.audience, expected
            ),
        ));
    }
    Ok(info.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audience_is_the_scope_without_default_suffix() {
        assert_eq!(
            audience_of("https://management.usgovcloudapi.net/.default"),
            "https://management.usgovcloudapi.net"
        );
        assert_eq!(audience_of("https://management.azure.com//.default"), "https://management.azure.com");
        // MSAL for Go's request: the resource's scope with its OpenID Connect ones.
        assert_eq!(
            audience_of("https://management.core.usgovcloudapi.net//.default openid offline_access profile"),
            "https://management.core.usgovcloudapi.net"
        );
    }

    #[test]
    fn jwt_claims_decode() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"iss":"https://i","sub":"s"}"#);
        let c = decode_jwt_claims(&format!("e30.{payload}.sig")).unwrap();
        assert_eq!(c["iss"], "https://i");
    }
}
