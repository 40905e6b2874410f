//! The Azure provider: network, identity and role resources through the azure_mgmt_* 0.21
//! clients (network 2024-03-01, msi 2023-01-31, authorization 2022-04-01, resources 2021-04-01)
//! and azure_identity 0.21.
//!
//! - Bodies are built as ARM JSON ([`arm`]) and handed to the typed clients; what comes back is
//!   read into attributes with the plan's names, so that a refreshed resource diffs cleanly.
//! - Writes and deletes are sent with `send()` and their long-running operations followed to the
//!   end here ([`lro`]), reporting progress; the SDK's own polling reports nothing, loses the
//!   operation's error and does not exist for deletes.
//! - Retries happen on two levels. Beneath the clients ([`transport`]): 429 after `Retry-After`,
//!   5xx, dropped and hung connections with backoff and jitter. Around each call ([`AzureProvider::retry`]):
//!   the ARM answers that mean "later", such as `AnotherOperationInProgress` and `PrincipalNotFound`
//!   right after an identity is made. Both stop at the operation's deadline (per type, see
//!   [`Timeouts`]).
//! - Writes to one VPN gateway and its connections are serialized by a lock per gateway (Azure
//!   runs one operation at a time per gateway), and those to a VNet, its subnets and its DNS
//!   servers by one per VNet (its body carries them all); everything else runs in parallel.
//! - Refresh lists each type once in the stack's resource group and recognizes the stack's
//!   resources by their tags; what Azure cannot tag is found by deterministic names ([`identify`]).
//! - Secrets never reach a log, an error or a `Debug` output: see [`transport`] for what
//!   azure_core would log, and [`credential::SecretString`].

pub mod arm;
pub mod capacity;
mod cloud;
mod config;
pub mod credential;
pub mod identify;
mod images;
mod lro;
mod resources;
mod shared_key;
mod transport;

use std::collections::HashMap;
use std::sync::Arc;

use azure_core::auth::TokenCredential;
use azure_core::error::ErrorKind;
use azure_core::{ClientOptions, RetryOptions, TransportOptions, Url};
use xcsp_core::provider::{BoxFuture, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{Address, ProviderKind, ResourceType as T};

pub use cloud::Cloud;
pub use config::{AzureConfig, Backoff, Timeouts};
pub use credential::{CredentialSource, SecretString};

use transport::{Budget, Seal, Transport};
use xcsp_core::attrs::Reader;

/// Reaches one subscription of one Azure cloud.
pub struct AzureProvider {
    config: AzureConfig,
    session: lro::Session,
    network: azure_mgmt_network::Client,
    msi: azure_mgmt_msi::Client,
    authz: azure_mgmt_authorization::Client,
    resources: azure_mgmt_resources::Client,
    compute: azure_mgmt_compute::package_2024_03_01::Client,
    storage: azure_mgmt_storage::package_2023_05::Client,
    /// The blob service's pipeline options (see [`images::storage_options`]).
    storage_options: ClientOptions,
    /// Role definition ids by role name, looked up once.
    roles: tokio::sync::Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for AzureProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureProvider").field("config", &self.config).finish_non_exhaustive()
    }
}

fn config_error(message: String) -> ProviderError {
    ProviderError::Failed { address: "azure".into(), code: "Config".into(), message }
}

impl AzureProvider {
    /// With the credential `config.credential` names (by default the chain Azure tools use).
    pub fn new(config: AzureConfig) -> Result<AzureProvider, ProviderError> {
        let credential = credential::credential(&config.credential, &config.cloud, &config.tenant_id).map_err(|e| {
            ProviderError::Failed { address: "azure".into(), code: "Credential".into(), message: e.to_string() }
        })?;
        Self::with_credential(config, credential)
    }

    /// With a credential of the caller's (`config.credential` is then ignored).
    pub fn with_credential(
        config: AzureConfig,
        credential: Arc<dyn TokenCredential>,
    ) -> Result<AzureProvider, ProviderError> {
        let endpoint = Url::parse(&config.cloud.resource_manager()).map_err(|e| config_error(e.to_string()))?;
        let scope = config.cloud.scope();
        let transport = Arc::new(Transport::new(config.backoff.clone()).map_err(|e| config_error(e.to_string()))?);
        // Our transport retries; azure_core's retry would retry again on top of it.
        let mut options =
            ClientOptions::new(TransportOptions::new_custom_policy(transport.clone())).retry(RetryOptions::none());
        options.per_call_policies_mut().push(Arc::new(Seal));
        let scopes = vec![scope.clone()];
        Ok(AzureProvider {
            network: azure_mgmt_network::Client::new(
                endpoint.clone(),
                credential.clone(),
                scopes.clone(),
                options.clone(),
            ),
            msi: azure_mgmt_msi::Client::new(endpoint.clone(), credential.clone(), scopes.clone(), options.clone()),
            authz: azure_mgmt_authorization::Client::new(
                endpoint.clone(),
                credential.clone(),
                scopes.clone(),
                options.clone(),
            ),
            compute: azure_mgmt_compute::package_2024_03_01::Client::new(
                endpoint.clone(),
                credential.clone(),
                scopes.clone(),
                options.clone(),
            ),
            storage: azure_mgmt_storage::package_2023_05::Client::new(
                endpoint.clone(),
                credential.clone(),
                scopes.clone(),
                options.clone(),
            ),
            storage_options: images::storage_options(transport.clone()),
            resources: azure_mgmt_resources::Client::new(endpoint.clone(), credential.clone(), scopes, options),
            session: lro::Session { endpoint, scope, credential, transport, poll_interval: config.poll_interval },
            config,
            roles: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    pub fn config(&self) -> &AzureConfig {
        &self.config
    }

    /// The VPN gateway (lower-case ARM id) that `req` writes to, if it writes to one.
    fn gateway_of(&self, req: &Request<'_>) -> Option<String> {
        let d = Reader::new(req.address, req.attributes);
        let gateway = match req.address.rtype {
            T::AzureVpnGateway => match req.id {
                Some(id) if !id.is_empty() => id.to_string(),
                _ => self.arm_id(&d, "Microsoft.Network/virtualNetworkGateways").ok()?,
            },
            T::AzureVpnConnection => d.opt_str("virtual_network_gateway")?,
            _ => return None,
        };
        Some(gateway.to_ascii_lowercase())
    }

    /// The VNet whose body a write or delete of `req` sends or changes: the VNet itself, one of its
    /// subnets, its DNS servers. ARM keeps a VNet's subnets and DHCP options in its body, so a
    /// VNet PUT made from a read taken before a subnet's create or delete undoes it (a deleted
    /// subnet comes back, a new one goes); one at a time per VNet, as Terraform's azurerm
    /// provider locks a VNet's name around every subnet and DNS-servers change
    /// (`locks.ByName(id.VirtualNetworkName, VirtualNetworkResourceName)`).
    fn vnet_of(&self, req: &Request<'_>) -> Option<String> {
        let d = Reader::new(req.address, req.attributes);
        let name = match req.address.rtype {
            T::AzureVirtualNetwork => d.opt_str("name")?,
            T::AzureSubnet | T::AzureVnetDnsServers => d.opt_str("virtual_network")?,
            _ => return None,
        };
        let id = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{name}",
            self.config.subscription_id,
            self.resource_group(&d)
        );
        Some(id.to_ascii_lowercase())
    }

    /// The ARM id a top-level resource of `provider_type` named in `d` has (or will have).
    fn arm_id(&self, d: &Reader, provider_type: &str) -> Result<String, ProviderError> {
        Ok(format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{provider_type}/{}",
            self.config.subscription_id,
            self.resource_group(d),
            d.str("name")?
        ))
    }

    fn resource_group(&self, d: &Reader) -> String {
        d.opt_str("resource_group").unwrap_or_else(|| self.config.resource_group.clone())
    }

    /// Runs `call` until it succeeds, fails for good, or the operation's deadline passes.
    /// Transport-level failures were already retried beneath; here the ARM answers that mean
    /// "try again later" are.
    async fn retry<R, F, Fut>(&self, address: &Address, progress: &dyn Progress, call: F) -> Result<R, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = azure_core::Result<R>>,
    {
        let budget = transport::budget();
        let mut attempt = 0u32;
        let mut reported = String::new();
        loop {
            attempt += 1;
            let error = match tokio::time::timeout(budget.remaining(), call()).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) => e,
                Err(_) => {
                    return Err(ProviderError::Timeout {
                        address: address.to_string(),
                        operation: budget.operation,
                        timeout: budget.timeout,
                    });
                }
            };
            let (code, message) = match classify(address, &error) {
                Failure::Final(e) => return Err(e),
                Failure::Transient { code, message } => (code, message),
            };
            let wait = transport::backoff(&self.config.backoff, attempt);
            if budget.exceeded_after(wait) {
                let a = address.to_string();
                return Err(match code.as_str() {
                    "Throttled" => ProviderError::Throttled { address: a, detail: message, retry_after: None },
                    _ => ProviderError::Failed {
                        address: a,
                        code,
                        message: format!("{message} (retried for {:?}, the operation's deadline)", budget.timeout),
                    },
                });
            }
            if code != reported {
                progress.waiting(address, &transient_reason(&code));
                reported = code;
            }
            tracing::debug!(address = %address, code = reported, attempt, "retrying");
            tokio::time::sleep(wait).await;
        }
    }
}

/// What an ARM answer means for whoever made the call.
enum Failure {
    /// Worth trying again.
    Transient {
        code: String,
        message: String,
    },
    Final(ProviderError),
}

/// ARM error codes that clear by themselves.
const TRANSIENT_CODES: &[&str] = &[
    // One operation at a time per gateway (and a few other resources).
    "AnotherOperationInProgress",
    "RetryableError",
    "RetryableErrorDueToAnotherOperation",
    "CanceledAndSupersededDueToAnotherOperation",
    // A resource referenced by the request is still being provisioned.
    "ReferencedResourceNotProvisioned",
    // Entra ID replication after an identity is made (docs/src/reference/cloud-facts.md: 15-30 s, sometimes more).
    "PrincipalNotFound",
    // A cached token that expired while a call waited; the next call takes a fresh one.
    "ExpiredAuthenticationToken",
];

fn classify(address: &Address, e: &azure_core::Error) -> Failure {
    let first_line = |s: &str| s.lines().next().unwrap_or_default().chars().take(400).collect::<String>();
    let a = address.to_string();
    match e.kind() {
        ErrorKind::HttpResponse { status, error_code } => {
            let status = u16::from(*status);
            let code = error_code.clone().unwrap_or_default();
            let message = e
                .as_http_error()
                .and_then(|h| h.error_message())
                .map(first_line)
                .unwrap_or_else(|| first_line(&e.to_string()));
            if TRANSIENT_CODES.contains(&code.as_str()) {
                return Failure::Transient { code, message };
            }
            match status {
                429 => Failure::Transient { code: "Throttled".into(), message },
                408 | 500..=599 => Failure::Transient { code: format!("HTTP {status}"), message },
                404 if !matches!(code.as_str(), "ParentResourceNotFound" | "ResourceGroupNotFound") => {
                    Failure::Final(ProviderError::NotFound { address: a })
                }
                _ if code.contains("InUse") || code.ends_with("CannotBeDeleted") => {
                    Failure::Final(ProviderError::InUse { address: a, detail: format!("{code}: {message}") })
                }
                _ => Failure::Final(ProviderError::Failed {
                    address: a,
                    code: if code.is_empty() { format!("HTTP {status}") } else { code },
                    message,
                }),
            }
        }
        ErrorKind::Io => Failure::Transient { code: "Connection".into(), message: first_line(&e.to_string()) },
        kind => Failure::Final(ProviderError::Failed {
            address: a,
            code: match kind {
                ErrorKind::Credential => "Credential".into(),
                other => format!("{other:?}"),
            },
            message: first_line(&e.to_string()),
        }),
    }
}

fn transient_reason(code: &str) -> String {
    match code {
        "PrincipalNotFound" => "Entra ID does not know the new identity yet (replication); retrying".into(),
        "AnotherOperationInProgress" => "another operation runs on it in Azure; retrying".into(),
        "Throttled" => "Azure is throttling requests; retrying".into(),
        "Connection" => "the connection to Azure failed; retrying".into(),
        other => format!("Azure answered {other}; retrying"),
    }
}

/// `e` with every secret of the request replaced, in case Azure echoed one in a message.
fn scrub(e: ProviderError, secrets: &[String]) -> ProviderError {
    let clean = |s: String| secrets.iter().fold(s, |s, secret| s.replace(secret.as_str(), "(sensitive value)"));
    match e {
        ProviderError::Failed { address, code, message } => {
            ProviderError::Failed { address, code, message: clean(message) }
        }
        ProviderError::InUse { address, detail } => ProviderError::InUse { address, detail: clean(detail) },
        ProviderError::Throttled { address, detail, retry_after } => {
            ProviderError::Throttled { address, detail: clean(detail), retry_after }
        }
        other => other,
    }
}

/// Progress of calls no one watches (refresh).
struct Quiet;

impl Progress for Quiet {
    fn waiting(&self, _: &Address, _: &str) {}
}

impl Provider for AzureProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Azure
    }

    fn refresh_known<'a>(
        &'a self,
        stack: &'a str,
        rtype: T,
        known: &'a [Observed],
    ) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        let budget = Budget::starting_now(self.config.timeouts.refresh, "refresh");
        Box::pin(transport::within(budget, self.list(stack, rtype, known)))
    }

    /// Create and update are both a PUT in ARM.
    fn write<'a>(
        &'a self,
        req: Request<'a>,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(self.write_resource(req, progress))
    }

    fn serial_key(&self, req: &Request<'_>) -> Option<String> {
        self.gateway_of(req).or_else(|| self.vnet_of(req))
    }

    fn delete<'a>(&'a self, req: Request<'a>, progress: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let budget = Budget::starting_now(self.config.timeouts.of(req.address.rtype), "delete");
            let secrets = Reader::new(req.address, req.attributes).secrets();
            transport::within(budget, self.remove(&req, progress)).await.map_err(|e| scrub(e, &secrets))
        })
    }
}

impl AzureProvider {
    async fn write_resource(&self, req: Request<'_>, progress: &dyn Progress) -> Result<Observed, ProviderError> {
        let operation = if req.is_create() { "create" } else { "update" };
        let budget = Budget::starting_now(self.config.timeouts.of(req.address.rtype), operation);
        let secrets = Reader::new(req.address, req.attributes).secrets();
        transport::within(budget, self.put(&req, progress, operation)).await.map_err(|e| scrub(e, &secrets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_secrets_are_scrubbed_from_errors() {
        let e = ProviderError::Failed {
            address: "a".into(),
            code: "InvalidSharedKey".into(),
            message: "the key 'abc.123' is invalid".into(),
        };
        let ProviderError::Failed { message, .. } = scrub(e, &["abc.123".into()]) else { unreachable!() };
        assert_eq!(message, "the key '(sensitive value)' is invalid");
    }
}
