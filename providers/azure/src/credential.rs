//! Who xcsp is towards Entra ID: the credential sources Azure's own tools try, in their order,
//! and the two small credentials azure_identity 0.21 lacks.
//!
//! The order (`CredentialSource::Default`) is the one `DefaultAzureCredential` documents in the
//! newer Azure SDKs: environment client secret, workload identity, managed identity, Azure CLI.
//! The first two are chosen by the environment alone; managed identity and the CLI are tried at
//! the first token request and the first that answers is kept.
//!
//! Our own credentials, where azure_identity 0.21 falls short:
//! - its `WorkloadIdentityCredential` reads the federated token file once, at creation, while
//!   Kubernetes rotates projected tokens hourly and a gateway apply runs longer than that:
//!   [`FederatedTokenFile`] reads the file again for every new access token;
//! - its managed identity credentials cannot select a user-assigned identity:
//!   [`ManagedIdentity`] passes `client_id` to IMDS (or the App Service endpoint).
//!
//! This module is the one place of the provider that reads environment variables, and only the
//! ones Azure tools define (`AZURE_*`, `IDENTITY_*`).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use azure_core::auth::{AccessToken, TokenCredential};
use azure_core::error::{Error, ErrorKind};
use azure_core::{HttpClient, Method, Request, Url};
use azure_identity::{AzureCliCredential, ClientSecretCredential};
use time::OffsetDateTime;

use crate::cloud::Cloud;

/// A secret string: shown nowhere, neither by `Debug` nor by `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(secret: impl Into<String>) -> SecretString {
        SecretString(secret.into())
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString(<redacted>)")
    }
}

/// Where the provider's Entra ID token comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum CredentialSource {
    /// The chain Azure tools use: `AZURE_CLIENT_ID` + `AZURE_CLIENT_SECRET` (tenant from
    /// `AZURE_TENANT_ID`, else the configured one); then `AZURE_FEDERATED_TOKEN_FILE` +
    /// `AZURE_CLIENT_ID` (workload identity); then managed identity (`AZURE_CLIENT_ID`, if set,
    /// selects a user-assigned one); then the Azure CLI's login.
    Default,
    ClientSecret {
        client_id: String,
        secret: SecretString,
    },
    /// A federated token (a Kubernetes service account token, a CI OIDC token) in a file that is
    /// read again whenever a new access token is needed.
    WorkloadIdentity {
        client_id: String,
        token_file: PathBuf,
    },
    /// `None`: the system-assigned identity.
    ManagedIdentity {
        client_id: Option<String>,
    },
    AzureCli,
}

/// What a source comes to once the environment is read.
#[derive(Debug, Clone, PartialEq)]
enum Choice {
    ClientSecret {
        tenant: String,
        client_id: String,
        secret: SecretString,
    },
    WorkloadIdentity {
        tenant: String,
        client_id: String,
        token_file: PathBuf,
    },
    ManagedIdentity {
        client_id: Option<String>,
        endpoint: MiEndpoint,
    },
    AzureCli,
    /// Managed identity, else the Azure CLI, whichever answers first.
    FirstAvailable {
        client_id: Option<String>,
        endpoint: MiEndpoint,
    },
}

fn choose(source: &CredentialSource, tenant: &str, env: &dyn Fn(&str) -> Option<String>) -> Choice {
    let endpoint = MiEndpoint::from_env(env);
    match source {
        CredentialSource::ClientSecret { client_id, secret } => {
            Choice::ClientSecret { tenant: tenant.into(), client_id: client_id.clone(), secret: secret.clone() }
        }
        CredentialSource::WorkloadIdentity { client_id, token_file } => Choice::WorkloadIdentity {
            tenant: tenant.into(),
            client_id: client_id.clone(),
            token_file: token_file.clone(),
        },
        CredentialSource::ManagedIdentity { client_id } => {
            Choice::ManagedIdentity { client_id: client_id.clone(), endpoint }
        }
        CredentialSource::AzureCli => Choice::AzureCli,
        CredentialSource::Default => {
            let tenant = env("AZURE_TENANT_ID").unwrap_or_else(|| tenant.to_string());
            let client_id = env("AZURE_CLIENT_ID");
            match (client_id, env("AZURE_CLIENT_SECRET"), env("AZURE_FEDERATED_TOKEN_FILE")) {
                (Some(client_id), Some(secret), _) => {
                    Choice::ClientSecret { tenant, client_id, secret: SecretString(secret) }
                }
                (Some(client_id), None, Some(file)) => {
                    Choice::WorkloadIdentity { tenant, client_id, token_file: PathBuf::from(file) }
                }
                (client_id, _, _) => Choice::FirstAvailable { client_id, endpoint },
            }
        }
    }
}

/// The credential for `source`, reading the process environment for `CredentialSource::Default`.
pub(crate) fn credential(
    source: &CredentialSource,
    cloud: &Cloud,
    tenant: &str,
) -> azure_core::Result<Arc<dyn TokenCredential>> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    build(choose(source, tenant, &env), cloud)
}

fn build(choice: Choice, cloud: &Cloud) -> azure_core::Result<Arc<dyn TokenCredential>> {
    let http = xcsp_crypto::AzureHttp::for_peer(xcsp_crypto::Peer::Entra)
        .map_err(|e| Error::full(ErrorKind::Credential, e, "no TLS for Entra ID"))?;
    let authority = Url::parse(&cloud.authority_host())
        .map_err(|e| Error::full(ErrorKind::Credential, e, "the authority host is not a URL"))?;
    Ok(match choice {
        Choice::ClientSecret { tenant, client_id, secret } => {
            Arc::new(ClientSecretCredential::new(http, authority, tenant, client_id, secret.0))
        }
        Choice::WorkloadIdentity { tenant, client_id, token_file } => {
            Arc::new(FederatedTokenFile { http, authority, tenant, client_id, token_file, cache: Cache::default() })
        }
        Choice::ManagedIdentity { client_id, endpoint } => Arc::new(ManagedIdentity::new(http, endpoint, client_id)),
        Choice::AzureCli => Arc::new(AzureCliCredential::new()),
        Choice::FirstAvailable { client_id, endpoint } => Arc::new(FirstAvailable {
            sources: vec![
                ("managed identity", Arc::new(ManagedIdentity::new(http, endpoint, client_id).probing())),
                ("Azure CLI", Arc::new(AzureCliCredential::new())),
            ],
            chosen: tokio::sync::Mutex::new(None),
        }),
    })
}

/// Access tokens by scope, renewed two minutes before they expire.
#[derive(Debug, Default)]
struct Cache(tokio::sync::Mutex<HashMap<Vec<String>, AccessToken>>);

impl Cache {
    async fn get<F, Fut>(&self, scopes: &[&str], fetch: F) -> azure_core::Result<AccessToken>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = azure_core::Result<AccessToken>>,
    {
        let key: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        // Held across the fetch: concurrent callers wait for one token instead of each asking.
        let mut tokens = self.0.lock().await;
        if let Some(t) = tokens.get(&key)
            && t.expires_on > OffsetDateTime::now_utc() + Duration::from_secs(120)
        {
            return Ok(t.clone());
        }
        let token = fetch().await?;
        tokens.insert(key, token.clone());
        Ok(token)
    }

    async fn clear(&self) {
        self.0.lock().await.clear();
    }
}

/// Workload identity: a client assertion read from a file for each new token.
struct FederatedTokenFile {
    http: Arc<dyn HttpClient>,
    authority: Url,
    tenant: String,
    client_id: String,
    token_file: PathBuf,
    cache: Cache,
}

impl fmt::Debug for FederatedTokenFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FederatedTokenFile")
            .field("authority", &self.authority.as_str())
            .field("tenant", &self.tenant)
            .field("client_id", &self.client_id)
            .field("token_file", &self.token_file)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl TokenCredential for FederatedTokenFile {
    async fn get_token(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        self.cache
            .get(scopes, || async {
                let assertion = tokio::fs::read_to_string(&self.token_file).await.map_err(|e| {
                    Error::full(
                        ErrorKind::Credential,
                        e,
                        format!("cannot read the federated token file {}", self.token_file.display()),
                    )
                })?;
                // Our own exchange rather than azure_identity's: its error drops Entra's answer
                // (AADSTS70021 and its reason), which is what a user needs to fix the trust.
                let mut url = self.authority.clone();
                url.set_path(&format!("{}/oauth2/v2.0/token", self.tenant));
                let form = [
                    ("client_id", self.client_id.as_str()),
                    ("scope", &scopes.join(" ")),
                    ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    ("client_assertion", assertion.trim()),
                    ("grant_type", "client_credentials"),
                ];
                // The form encoding of a query string is the body's (application/x-www-form-urlencoded).
                let mut encoder = url.clone();
                encoder.query_pairs_mut().clear().extend_pairs(form);
                let body = encoder.query().unwrap_or_default().to_string();
                let mut request = Request::new(url, Method::Post);
                request.insert_header("content-type", "application/x-www-form-urlencoded");
                request.set_body(body);
                let (status, _, body) = self.http.execute_request(&request).await?.deconstruct();
                token_answer(u16::from(status), &body.collect().await?, "Entra ID")
            })
            .await
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        self.cache.clear().await;
        Ok(())
    }
}

/// Where a managed identity's tokens come from: the VM's instance metadata service, or the
/// endpoint App Service, Functions and Container Apps put in `IDENTITY_ENDPOINT`.
#[derive(Clone, PartialEq)]
enum MiEndpoint {
    Imds,
    AppService { url: String, header: SecretString },
}

impl fmt::Debug for MiEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MiEndpoint::Imds => f.write_str("Imds"),
            MiEndpoint::AppService { url, .. } => {
                f.debug_struct("AppService").field("url", url).finish_non_exhaustive()
            }
        }
    }
}

impl MiEndpoint {
    fn from_env(env: &dyn Fn(&str) -> Option<String>) -> MiEndpoint {
        match (env("IDENTITY_ENDPOINT"), env("IDENTITY_HEADER")) {
            (Some(url), Some(header)) => MiEndpoint::AppService { url, header: SecretString(header) },
            _ => MiEndpoint::Imds,
        }
    }
}

#[derive(Debug)]
struct ManagedIdentity {
    http: Arc<dyn HttpClient>,
    endpoint: MiEndpoint,
    client_id: Option<String>,
    /// How long to wait for an answer: short when probing (IMDS is unreachable off Azure).
    timeout: Duration,
    cache: Cache,
}

impl ManagedIdentity {
    fn new(http: Arc<dyn HttpClient>, endpoint: MiEndpoint, client_id: Option<String>) -> ManagedIdentity {
        ManagedIdentity { http, endpoint, client_id, timeout: Duration::from_secs(30), cache: Cache::default() }
    }

    fn probing(mut self) -> ManagedIdentity {
        self.timeout = Duration::from_secs(2);
        self
    }

    async fn fetch(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        let [scope] = scopes else {
            return Err(Error::message(ErrorKind::Credential, "managed identity takes exactly one scope"));
        };
        let resource = scope.strip_suffix("/.default").unwrap_or(scope);
        let (base, api_version) = match &self.endpoint {
            MiEndpoint::Imds => ("http://169.254.169.254/metadata/identity/oauth2/token", "2018-02-01"),
            MiEndpoint::AppService { url, .. } => (url.as_str(), "2019-08-01"),
        };
        let mut url = Url::parse(base)
            .map_err(|e| Error::full(ErrorKind::Credential, e, "the managed identity endpoint is not a URL"))?;
        url.query_pairs_mut().append_pair("api-version", api_version).append_pair("resource", resource);
        if let Some(id) = &self.client_id {
            url.query_pairs_mut().append_pair("client_id", id);
        }
        let mut request = Request::new(url, Method::Get);
        match &self.endpoint {
            MiEndpoint::Imds => request.insert_header("metadata", "true"),
            MiEndpoint::AppService { header, .. } => request.insert_header("x-identity-header", header.0.clone()),
        }
        let response = tokio::time::timeout(self.timeout, async {
            let r = self.http.execute_request(&request).await?;
            let (status, _, body) = r.deconstruct();
            Ok::<_, Error>((status, body.collect().await?))
        })
        .await
        .map_err(|_| Error::message(ErrorKind::Credential, "no managed identity endpoint answered"))??;
        let (status, body) = response;
        token_answer(u16::from(status), &body, "the managed identity endpoint")
    }
}

/// An access token out of a token endpoint's answer; a refusal with the endpoint's own reason
/// (Entra's `error_description` starts with its AADSTS code), never with what was sent.
fn token_answer(status: u16, body: &[u8], who: &str) -> azure_core::Result<AccessToken> {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if !(200..300).contains(&status) {
        let reason = json["error_description"].as_str().or(json["error"].as_str()).unwrap_or("no reason given");
        let reason = reason.lines().next().unwrap_or_default().to_string();
        return Err(Error::with_message(ErrorKind::Credential, || {
            format!("{who} refused the token request (HTTP {status}): {reason}")
        }));
    }
    let number = |v: &serde_json::Value| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok()));
    let expires_on = match (number(&json["expires_on"]), number(&json["expires_in"])) {
        (Some(at), _) => OffsetDateTime::from_unix_timestamp(at).ok(),
        (None, Some(secs)) => Some(OffsetDateTime::now_utc() + Duration::from_secs(secs.max(0) as u64)),
        (None, None) => None,
    };
    match (json["access_token"].as_str(), expires_on) {
        (Some(token), Some(at)) => Ok(AccessToken::new(token.to_string(), at)),
        _ => Err(Error::with_message(ErrorKind::Credential, || format!("the answer of {who} has no token or expiry"))),
    }
}

#[async_trait::async_trait]
impl TokenCredential for ManagedIdentity {
    async fn get_token(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        self.cache.get(scopes, || self.fetch(scopes)).await
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        self.cache.clear().await;
        Ok(())
    }
}

/// The first source that yields a token, kept for the following requests.
#[derive(Debug)]
struct FirstAvailable {
    sources: Vec<(&'static str, Arc<dyn TokenCredential>)>,
    chosen: tokio::sync::Mutex<Option<usize>>,
}

#[async_trait::async_trait]
impl TokenCredential for FirstAvailable {
    async fn get_token(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        let mut chosen = self.chosen.lock().await;
        if let Some(i) = *chosen {
            drop(chosen);
            return self.sources[i].1.get_token(scopes).await;
        }
        let mut tried = Vec::new();
        for (i, (name, source)) in self.sources.iter().enumerate() {
            match source.get_token(scopes).await {
                Ok(token) => {
                    tracing::debug!(source = name, "Azure credential chosen");
                    *chosen = Some(i);
                    return Ok(token);
                }
                Err(e) => tried.push(format!("{name}: {}", e.to_string().lines().next().unwrap_or_default())),
            }
        }
        Err(Error::with_message(ErrorKind::Credential, || {
            format!(
                "no Azure credential found. Set AZURE_CLIENT_ID with AZURE_CLIENT_SECRET (or \
                 AZURE_FEDERATED_TOKEN_FILE), run on Azure with a managed identity, or `az login`. Tried {}",
                tried.join("; ")
            )
        }))
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        for (_, s) in &self.sources {
            s.clear_cache().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| vars.get(k).cloned()
    }

    #[test]
    fn the_default_chain_prefers_a_client_secret_then_workload_identity() {
        let all = env(&[
            ("AZURE_CLIENT_ID", "app"),
            ("AZURE_CLIENT_SECRET", "s3cret"),
            ("AZURE_TENANT_ID", "home"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token"),
        ]);
        assert_eq!(
            choose(&CredentialSource::Default, "spec-tenant", &all),
            Choice::ClientSecret {
                tenant: "home".into(),
                client_id: "app".into(),
                secret: SecretString::new("s3cret")
            }
        );
        let federated = env(&[("AZURE_CLIENT_ID", "app"), ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token")]);
        assert_eq!(
            choose(&CredentialSource::Default, "spec-tenant", &federated),
            Choice::WorkloadIdentity {
                tenant: "spec-tenant".into(),
                client_id: "app".into(),
                token_file: "/var/run/token".into()
            }
        );
        // A secret without a client id is no credential: on to managed identity, which the
        // client id (when set) selects.
        let partial = env(&[("AZURE_CLIENT_SECRET", "s3cret")]);
        assert_eq!(
            choose(&CredentialSource::Default, "t", &partial),
            Choice::FirstAvailable { client_id: None, endpoint: MiEndpoint::Imds }
        );
        let app_service = env(&[("IDENTITY_ENDPOINT", "http://localhost:8081/msi/token"), ("IDENTITY_HEADER", "h")]);
        assert!(matches!(
            choose(&CredentialSource::Default, "t", &app_service),
            Choice::FirstAvailable { endpoint: MiEndpoint::AppService { .. }, .. }
        ));
    }

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        let source = CredentialSource::ClientSecret { client_id: "app".into(), secret: SecretString::new("s3cret") };
        let shown = format!("{source:?} {:?}", choose(&source, "t", &env(&[("IDENTITY_HEADER", "hdr-secret")])));
        assert!(!shown.contains("s3cret"), "{shown}");
        let endpoint =
            MiEndpoint::from_env(&env(&[("IDENTITY_ENDPOINT", "http://x"), ("IDENTITY_HEADER", "hdr-secret")]));
        assert!(!format!("{endpoint:?}").contains("hdr-secret"));
    }
}
