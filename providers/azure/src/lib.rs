//! The Azure provider: network, identity and role resources through the azure_mgmt_* 0.21
//! clients (network 2024-03-01, msi 2023-01-31, authorization 2022-04-01, resources 2021-04-01).
//!
//! - Bodies are built as ARM JSON ([`arm`]) and handed to the typed clients; what comes back is
//!   read into attributes with the plan's names.
//! - Long-running creates are awaited through the SDK (it polls `Azure-AsyncOperation`); deletes
//!   are send-only in these crates, so the provider polls `Location`/`Azure-AsyncOperation` itself.
//! - Writes to one VPN gateway and its connections are serialized (Azure runs one operation at a
//!   time per gateway); everything else runs in parallel.
//! - Retries: the SDK's own policy covers 408/429/5xx with `Retry-After`; on top, the provider
//!   retries `AnotherOperationInProgress`, `PrincipalNotFound` right after an identity is made,
//!   `RetryableError` and dropped connections, with backoff and jitter, until the type's deadline.
//! - Refresh lists each type once per resource group (subnets come embedded in their VNet,
//!   federated credentials are listed per identity of the stack).

pub mod arm;
pub mod config;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use azure_core::auth::TokenCredential;
use azure_core::error::ErrorKind;
use futures::StreamExt;
use rand::Rng;
use serde_json::{Value as Json, json};
use xcsp_core::provider::{Attributes, BoxFuture, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{ADDRESS_TAG, Address, ProviderKind, ResourceType as T, STACK_TAG};

pub use config::{AzureConfig, Cloud};

use arm::Desired;

type Network = azure_mgmt_network::Client;

/// Reaches one subscription of one Azure cloud.
pub struct AzureProvider {
    config: AzureConfig,
    credential: Arc<dyn TokenCredential>,
    network: Network,
    msi: azure_mgmt_msi::Client,
    authz: azure_mgmt_authorization::Client,
    resources: azure_mgmt_resources::Client,
    http: reqwest::Client,
    /// One lock per VPN gateway name: its writes and its connections' writes take it.
    gateways: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Role definition ids by role name, looked up once.
    roles: tokio::sync::Mutex<HashMap<String, String>>,
}

fn model<M: serde::de::DeserializeOwned>(address: &Address, body: Json) -> Result<M, ProviderError> {
    serde_json::from_value(body).map_err(|e| ProviderError::Failed {
        address: address.to_string(),
        code: "InvalidBody".into(),
        message: format!("the request body does not fit the API model: {e}"),
    })
}

fn to_json<M: serde::Serialize>(m: &M) -> Json {
    serde_json::to_value(m).unwrap_or(Json::Null)
}

/// What one failed call means for the caller.
enum Failure {
    /// Try again after a while.
    Transient(String),
    Final(ProviderError),
}

fn classify(address: &Address, e: &azure_core::Error) -> Failure {
    let text = e.to_string();
    match e.kind() {
        ErrorKind::HttpResponse { status, error_code } => {
            let status = u16::from(*status);
            let code = error_code.clone().unwrap_or_default();
            let a = address.to_string();
            match (status, code.as_str()) {
                (404, _) => Failure::Final(ProviderError::NotFound { address: a }),
                (_, "AnotherOperationInProgress" | "PrincipalNotFound" | "RetryableError" | "Canceled") => {
                    Failure::Transient(code)
                }
                (429, _) => Failure::Transient("throttled".into()),
                (500..=599, _) => Failure::Transient(format!("HTTP {status}")),
                (_, c) if c.contains("InUse") || c.contains("CannotBeDeleted") || c.contains("CannotDelete") => {
                    Failure::Final(ProviderError::InUse {
                        address: a,
                        detail: format!("{code}: {}", first_line(&text)),
                    })
                }
                _ => Failure::Final(ProviderError::Failed {
                    address: a,
                    code: if code.is_empty() { format!("HTTP {status}") } else { code },
                    message: first_line(&text),
                }),
            }
        }
        ErrorKind::Io => Failure::Transient(format!("connection: {}", first_line(&text))),
        _ => Failure::Final(ProviderError::Failed {
            address: address.to_string(),
            code: format!("{:?}", e.kind()),
            message: first_line(&text),
        }),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().chars().take(400).collect()
}

impl AzureProvider {
    /// With the credential chain Azure tools use (see [`config::credential`]).
    pub fn new(config: AzureConfig) -> Result<AzureProvider, ProviderError> {
        let credential = config::credential(&config.cloud).map_err(|e| ProviderError::Failed {
            address: "azure".into(),
            code: "Credential".into(),
            message: e.to_string(),
        })?;
        Self::with_credential(config, credential)
    }

    pub fn with_credential(
        config: AzureConfig,
        credential: Arc<dyn TokenCredential>,
    ) -> Result<AzureProvider, ProviderError> {
        let bad = |e: String| ProviderError::Failed { address: "azure".into(), code: "Config".into(), message: e };
        let endpoint = azure_core::Url::parse(&config.cloud.resource_manager()).map_err(|e| bad(e.to_string()))?;
        let scope = config.cloud.scope();
        let scopes: &[&str] = &[&scope];
        let network = azure_mgmt_network::Client::builder(credential.clone())
            .endpoint(endpoint.clone())
            .scopes(scopes)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let msi = azure_mgmt_msi::Client::builder(credential.clone())
            .endpoint(endpoint.clone())
            .scopes(scopes)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let authz = azure_mgmt_authorization::Client::builder(credential.clone())
            .endpoint(endpoint.clone())
            .scopes(scopes)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let resources = azure_mgmt_resources::Client::builder(credential.clone())
            .endpoint(endpoint)
            .scopes(scopes)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(AzureProvider {
            config,
            credential,
            network,
            msi,
            authz,
            resources,
            http: reqwest::Client::new(),
            gateways: Mutex::new(HashMap::new()),
            roles: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    fn sub(&self) -> &str {
        &self.config.subscription_id
    }

    fn rg(&self) -> &str {
        &self.config.resource_group
    }

    fn rg_id(&self) -> String {
        format!("/subscriptions/{}/resourceGroups/{}", self.sub(), self.rg())
    }

    fn timeout(&self, rtype: T) -> Duration {
        if matches!(rtype, T::AzureVpnGateway) { self.config.vpn_gateway_timeout } else { self.config.timeout }
    }

    fn gateway_lock(&self, gateway: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.gateways.lock().expect("not poisoned");
        map.entry(gateway.to_ascii_lowercase()).or_default().clone()
    }

    /// Runs `call` until it succeeds, fails for good, or the deadline passes.
    async fn retry<R, F, Fut>(
        &self,
        address: &Address,
        what: &'static str,
        progress: &dyn Progress,
        call: F,
    ) -> Result<R, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = azure_core::Result<R>>,
    {
        let timeout = self.timeout(address.rtype);
        let deadline = Instant::now() + timeout;
        let mut wait = Duration::from_millis(500);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let attempt = match tokio::time::timeout(remaining, call()).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(ProviderError::Timeout { address: address.to_string(), operation: what, timeout });
                }
            };
            match attempt {
                Ok(r) => return Ok(r),
                Err(e) => match classify(address, &e) {
                    Failure::Final(err) => return Err(err),
                    Failure::Transient(why) => {
                        if Instant::now() + wait > deadline {
                            return Err(match why.as_str() {
                                "throttled" => ProviderError::Throttled {
                                    address: address.to_string(),
                                    detail: "Azure kept answering 429".into(),
                                    retry_after: None,
                                },
                                _ => ProviderError::Timeout { address: address.to_string(), operation: what, timeout },
                            });
                        }
                        progress.waiting(address, &format!("Azure answered {why}; trying again"));
                        let jitter = rand::rng().random_range(0..=wait.as_millis() as u64 / 2);
                        tokio::time::sleep(wait + Duration::from_millis(jitter)).await;
                        wait = (wait * 2).min(Duration::from_secs(30));
                    }
                },
            }
        }
    }

    /// Polls a delete that answered 202 until it is done.
    async fn finish_delete(
        &self,
        address: &Address,
        response: azure_core::Response,
        progress: &dyn Progress,
    ) -> Result<(), ProviderError> {
        let status = u16::from(response.status());
        if status != 202 {
            return Ok(());
        }
        let headers = response.headers();
        let async_op =
            headers.get_optional_string(&azure_core::headers::HeaderName::from_static("azure-asyncoperation"));
        let location = headers.get_optional_string(&azure_core::headers::LOCATION);
        let (url, is_async) = match (async_op, location) {
            (Some(u), _) => (u, true),
            (None, Some(u)) => (u, false),
            (None, None) => return Ok(()),
        };
        let timeout = self.timeout(address.rtype);
        let deadline = Instant::now() + timeout;
        progress.waiting(address, "waiting for Azure to finish deleting");
        let failed = |message: String| ProviderError::Failed {
            address: address.to_string(),
            code: "DeleteFailed".into(),
            message,
        };
        loop {
            let token =
                self.credential.get_token(&[&self.config.cloud.scope()]).await.map_err(|e| failed(e.to_string()))?;
            let r = self.http.get(&url).bearer_auth(token.token.secret()).send().await;
            let mut after = self.config.poll_interval;
            // A dropped connection (Err) just polls again.
            if let Ok(r) = r {
                if let Some(secs) =
                    r.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<f64>().ok())
                {
                    after = Duration::from_secs_f64(secs.max(0.05));
                }
                let code = r.status().as_u16();
                let body: Json = r.json().await.unwrap_or(Json::Null);
                if is_async && body["status"].is_string() {
                    match body["status"].as_str() {
                        Some("Succeeded") => return Ok(()),
                        Some("Failed" | "Canceled") => {
                            return Err(failed(
                                body["error"]["message"].as_str().unwrap_or("the delete failed").to_string(),
                            ));
                        }
                        _ => {}
                    }
                } else {
                    // A Location-style answer (also what some services put behind the
                    // Azure-AsyncOperation header): 202 until done, then 200 or 204.
                    match code {
                        200 | 204 => return Ok(()),
                        202 => {}
                        429 | 500..=599 => {}
                        other => return Err(failed(format!("polling the delete answered HTTP {other}"))),
                    }
                }
            }
            if Instant::now() + after > deadline {
                return Err(ProviderError::Timeout { address: address.to_string(), operation: "delete", timeout });
            }
            tokio::time::sleep(after).await;
        }
    }

    async fn role_definition(
        &self,
        address: &Address,
        role: &str,
        progress: &dyn Progress,
    ) -> Result<String, ProviderError> {
        if let Some(id) = self.roles.lock().await.get(role) {
            return Ok(id.clone());
        }
        let scope = self.rg_id();
        let filter = format!("roleName eq '{role}'");
        let page = self
            .retry(address, "look up the role", progress, || {
                let mut stream =
                    self.authz.role_definitions_client().list(scope.clone()).filter(filter.clone()).into_stream();
                async move { stream.next().await.unwrap_or_else(|| Ok(Default::default())) }
            })
            .await?;
        let id = page.value.first().and_then(|d| d.id.clone()).ok_or_else(|| ProviderError::Failed {
            address: address.to_string(),
            code: "RoleNotFound".into(),
            message: format!("no role definition named `{role}` at {scope}"),
        })?;
        self.roles.lock().await.insert(role.to_string(), id.clone());
        Ok(id)
    }

    /// Creates or updates (ARM PUTs are both) and reads the result back.
    async fn put(
        &self,
        stack: &str,
        address: &Address,
        attrs: &Attributes,
        progress: &dyn Progress,
    ) -> Result<Observed, ProviderError> {
        let d = Desired { address, attrs };
        let rg = self.rg().to_string();
        let sub = self.sub().to_string();
        let n = &self.network;
        let (id, read) = match address.rtype {
            T::AzureResourceGroup => {
                let name = d.str("name")?;
                let body = arm::resource_group_body(&d, stack)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_resources::models::ResourceGroup>(address, body.clone());
                        let c = self.resources.resource_groups_client();
                        let (name, sub) = (name.clone(), sub.clone());
                        async move { c.create_or_update(name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_resource_group(&j))
            }
            T::AzureVirtualNetwork => {
                let name = d.str("name")?;
                // Keep the subnets it has: a PUT without them would delete them.
                let existing = match n.virtual_networks_client().get(&rg, &name, &sub).await {
                    Ok(v) => to_json(&v)["properties"]["subnets"].clone(),
                    Err(_) => Json::Null,
                };
                let body = arm::vnet_body(&d, stack, existing)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_network::models::VirtualNetwork>(address, body.clone());
                        let c = n.virtual_networks_client();
                        let (rg, name, sub) = (rg.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(rg, name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_vnet(&j, &rg))
            }
            T::AzureSubnet => {
                let name = d.str("name")?;
                let vnet = d.str("virtual_network")?;
                let body = arm::subnet_body(&d)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_network::models::Subnet>(address, body.clone());
                        let c = n.subnets_client();
                        let (rg, vnet, name, sub) = (rg.clone(), vnet.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(rg, vnet, name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_subnet(&j, &vnet))
            }
            T::AzureNetworkSecurityGroup => {
                let name = d.str("name")?;
                let body = arm::nsg_body(&d, stack)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_network::models::NetworkSecurityGroup>(address, body.clone());
                        let c = n.network_security_groups_client();
                        let (rg, name, sub) = (rg.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(rg, name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_nsg(&j, &rg))
            }
            T::AzurePublicIp => {
                let name = d.str("name")?;
                let body = arm::public_ip_body(&d, stack)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_network::models::PublicIpAddress>(address, body.clone());
                        let c = n.public_ip_addresses_client();
                        let (rg, name, sub) = (rg.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(rg, name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_public_ip(&j, &rg))
            }
            T::AzureVpnGateway => {
                let name = d.str("name")?;
                let id = format!("{}/providers/Microsoft.Network/virtualNetworkGateways/{name}", self.rg_id());
                let body = arm::gateway_body(&d, stack, &id)?;
                let lock = self.gateway_lock(&name);
                let _held = lock.lock().await;
                progress.waiting(address, "Azure is provisioning the VPN gateway (typically 30-45 minutes)");
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_network::models::VirtualNetworkGateway>(address, body.clone());
                        let c = n.virtual_network_gateways_client();
                        let (rg, name, sub) = (rg.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(rg, name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_gateway(&j, &rg))
            }
            T::AzureLocalNetworkGateway => {
                let name = d.str("name")?;
                let body = arm::local_gateway_body(&d, stack)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_network::models::LocalNetworkGateway>(address, body.clone());
                        let c = n.local_network_gateways_client();
                        let (rg, name, sub) = (rg.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(rg, name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_local_gateway(&j, &rg))
            }
            T::AzureVpnConnection => {
                let name = d.str("name")?;
                let gateway = d.str("virtual_network_gateway")?;
                let body = arm::connection_body(&d, stack)?;
                let lock = self.gateway_lock(arm::leaf(&gateway));
                progress.waiting(address, "waiting for the VPN gateway to be free (one operation at a time)");
                let _held = lock.lock().await;
                progress.waiting(address, "Azure is creating the connection");
                let r = self
                    .retry(address, "create", progress, || {
                        let m =
                            model::<azure_mgmt_network::models::VirtualNetworkGatewayConnection>(address, body.clone());
                        let c = n.virtual_network_gateway_connections_client();
                        let (rg, name, sub) = (rg.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(rg, name, m.map_err(to_core)?, sub).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_connection(&j, &rg))
            }
            T::AzureUserAssignedIdentity => {
                let name = d.str("name")?;
                let body = arm::identity_body(&d, stack)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_msi::models::Identity>(address, body.clone());
                        let c = self.msi.user_assigned_identities_client();
                        let (rg, name, sub) = (rg.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(sub, rg, name, m.map_err(to_core)?).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_identity(&j, &rg))
            }
            T::AzureFederatedCredential => {
                let identity = d.str("identity")?;
                let name = address.name.clone();
                let body = arm::federated_body(&d)?;
                let r = self
                    .retry(address, "create", progress, || {
                        let m = model::<azure_mgmt_msi::models::FederatedIdentityCredential>(address, body.clone());
                        let c = self.msi.federated_identity_credentials_client();
                        let (rg, identity, name, sub) = (rg.clone(), identity.clone(), name.clone(), sub.clone());
                        async move { c.create_or_update(sub, rg, identity, name, m.map_err(to_core)?).await }
                    })
                    .await?;
                let j = to_json(&r);
                (j["id"].as_str().unwrap_or_default().to_string(), arm::read_federated(&j, &identity))
            }
            T::AzureRoleAssignment => {
                let scope = d.str("scope")?;
                let principal = d.str("principal")?;
                let role = self.role_definition(address, &d.str("role")?, progress).await?;
                let name = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, format!("xcsp:{stack}:{address}").as_bytes())
                    .to_string();
                let principal_type = d.opt_str("principal_type").unwrap_or_else(|| "ServicePrincipal".into());
                let description = arm::role_description(stack, address);
                progress.waiting(address, "assigning the role (Entra may take a while to see a new identity)");
                let r = self
                    .retry(address, "create", progress, || {
                        let body = json!({ "properties": {
                            "roleDefinitionId": role, "principalId": principal,
                            "principalType": principal_type, "description": description,
                        }});
                        let m =
                            model::<azure_mgmt_authorization::models::RoleAssignmentCreateParameters>(address, body);
                        let c = self.authz.role_assignments_client();
                        let (scope, name) = (scope.clone(), name.clone());
                        async move { c.create(scope, name, m.map_err(to_core)?).await }
                    })
                    .await?;
                let j = to_json(&r);
                let mut read = arm::read_role_assignment(&j);
                read.insert("role".into(), xcsp_core::Value::string(d.str("role")?));
                (j["id"].as_str().unwrap_or_default().to_string(), read)
            }
            other => {
                return Err(ProviderError::Failed {
                    address: address.to_string(),
                    code: "NotAzure".into(),
                    message: format!("{} is not an Azure resource type", other.as_str()),
                });
            }
        };
        Ok(Observed { address: address.clone(), id, attributes: read })
    }

    async fn remove(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<(), ProviderError> {
        let address = req.address;
        let d = Desired { address, attrs: req.attributes };
        let id = req.id.unwrap_or_default();
        let name = d.opt_str("name").unwrap_or_else(|| arm::leaf(id).to_string());
        let (rg, sub) = (self.rg().to_string(), self.sub().to_string());
        let n = &self.network;
        macro_rules! delete_raw {
            ($call:expr) => {{
                let response = self
                    .retry(address, "delete", progress, || {
                        let fut = $call;
                        async move { fut.await.map(|r| r.into_raw_response()) }
                    })
                    .await;
                match response {
                    Ok(r) => self.finish_delete(address, r, progress).await,
                    Err(ProviderError::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }};
        }
        match address.rtype {
            T::AzureResourceGroup => {
                delete_raw!(self.resources.resource_groups_client().delete(name.clone(), sub.clone()).send())
            }
            T::AzureVirtualNetwork => {
                delete_raw!(n.virtual_networks_client().delete(rg.clone(), name.clone(), sub.clone()).send())
            }
            T::AzureSubnet => {
                let vnet = d.str("virtual_network")?;
                delete_raw!(n.subnets_client().delete(rg.clone(), vnet.clone(), name.clone(), sub.clone()).send())
            }
            T::AzureNetworkSecurityGroup => {
                delete_raw!(n.network_security_groups_client().delete(rg.clone(), name.clone(), sub.clone()).send())
            }
            T::AzurePublicIp => {
                delete_raw!(n.public_ip_addresses_client().delete(rg.clone(), name.clone(), sub.clone()).send())
            }
            T::AzureVpnGateway => {
                let lock = self.gateway_lock(&name);
                let _held = lock.lock().await;
                progress.waiting(address, "Azure is deleting the VPN gateway (typically 15-30 minutes)");
                delete_raw!(n.virtual_network_gateways_client().delete(rg.clone(), name.clone(), sub.clone()).send())
            }
            T::AzureLocalNetworkGateway => {
                delete_raw!(n.local_network_gateways_client().delete(rg.clone(), name.clone(), sub.clone()).send())
            }
            T::AzureVpnConnection => {
                let gateway = d.opt_str("virtual_network_gateway").unwrap_or_default();
                let lock = self.gateway_lock(arm::leaf(&gateway));
                let _held = lock.lock().await;
                delete_raw!(
                    n.virtual_network_gateway_connections_client().delete(rg.clone(), name.clone(), sub.clone()).send()
                )
            }
            T::AzureUserAssignedIdentity => delete_raw!(
                self.msi.user_assigned_identities_client().delete(sub.clone(), rg.clone(), name.clone()).send()
            ),
            T::AzureFederatedCredential => {
                let identity = d.str("identity")?;
                let fic = address.name.clone();
                delete_raw!(
                    self.msi
                        .federated_identity_credentials_client()
                        .delete(sub.clone(), rg.clone(), identity.clone(), fic.clone())
                        .send()
                )
            }
            T::AzureRoleAssignment => {
                let scope = d.opt_str("scope").unwrap_or_else(|| self.rg_id());
                let ra = arm::leaf(id).to_string();
                delete_raw!(self.authz.role_assignments_client().delete(scope.clone(), ra.clone()).send())
            }
            _ => Ok(()),
        }
    }

    /// Lists one type in the stack's resource group, keeping those tagged with the stack.
    async fn list(&self, stack: &str, rtype: T) -> Result<Vec<Observed>, ProviderError> {
        let rg = self.rg().to_string();
        let sub = self.sub().to_string();
        let n = &self.network;
        let probe = Address::new(rtype, "refresh");
        let progress = NoProgress;
        macro_rules! collect {
            ($builder:expr) => {{
                let pages: Result<Vec<Json>, ProviderError> = self
                    .retry(&probe, "refresh", &progress, || {
                        let mut stream = $builder.into_stream();
                        async move {
                            let mut items = Vec::new();
                            while let Some(page) = stream.next().await {
                                let page = page?;
                                items.extend(page.value.iter().map(to_json));
                            }
                            Ok(items)
                        }
                    })
                    .await;
                match pages {
                    Ok(items) => items,
                    // No resource group yet (or any more): nothing of the stack exists.
                    Err(ProviderError::NotFound { .. }) => Vec::new(),
                    Err(e) => return Err(e),
                }
            }};
        }
        let ours = |j: &Json| j["tags"][STACK_TAG].as_str() == Some(stack);
        let tagged = |items: Vec<Json>, read: &dyn Fn(&Json) -> Attributes| -> Vec<Observed> {
            items
                .iter()
                .filter(|j| ours(j))
                .filter_map(|j| {
                    let address: Address = j["tags"][ADDRESS_TAG].as_str()?.parse().ok()?;
                    (address.rtype == rtype).then(|| Observed {
                        address,
                        id: j["id"].as_str().unwrap_or_default().to_string(),
                        attributes: read(j),
                    })
                })
                .collect()
        };
        Ok(match rtype {
            T::AzureResourceGroup => {
                let items = collect!(self.resources.resource_groups_client().list(sub.clone()));
                tagged(items, &arm::read_resource_group)
            }
            T::AzureVirtualNetwork => {
                tagged(collect!(n.virtual_networks_client().list(rg.clone(), sub.clone())), &|j| arm::read_vnet(j, &rg))
            }
            T::AzureSubnet => {
                // Subnets come inside their VNet. GatewaySubnet belongs to the network the VNet
                // was made for; pool subnets are named `<stack>-<pool>` (see plans::expand).
                let vnets = collect!(n.virtual_networks_client().list(rg.clone(), sub.clone()));
                let mut out = Vec::new();
                for v in vnets.iter().filter(|j| ours(j)) {
                    let Some(vnet_address) = v["tags"][ADDRESS_TAG].as_str().and_then(|a| a.parse::<Address>().ok())
                    else {
                        continue;
                    };
                    let vnet_name = v["name"].as_str().unwrap_or_default();
                    for s in v["properties"]["subnets"].as_array().into_iter().flatten() {
                        let name = s["name"].as_str().unwrap_or_default();
                        let label = if name == "GatewaySubnet" {
                            format!("gateway-{}", vnet_address.name)
                        } else if let Some(pool) = name.strip_prefix(&format!("{stack}-")) {
                            format!("pool-{pool}")
                        } else {
                            continue;
                        };
                        out.push(Observed {
                            address: Address::new(T::AzureSubnet, &label),
                            id: s["id"].as_str().unwrap_or_default().to_string(),
                            attributes: arm::read_subnet(s, vnet_name),
                        });
                    }
                }
                out
            }
            T::AzureNetworkSecurityGroup => {
                tagged(collect!(n.network_security_groups_client().list(rg.clone(), sub.clone())), &|j| {
                    arm::read_nsg(j, &rg)
                })
            }
            T::AzurePublicIp => tagged(collect!(n.public_ip_addresses_client().list(rg.clone(), sub.clone())), &|j| {
                arm::read_public_ip(j, &rg)
            }),
            T::AzureVpnGateway => {
                tagged(collect!(n.virtual_network_gateways_client().list(rg.clone(), sub.clone())), &|j| {
                    arm::read_gateway(j, &rg)
                })
            }
            T::AzureLocalNetworkGateway => {
                tagged(collect!(n.local_network_gateways_client().list(rg.clone(), sub.clone())), &|j| {
                    arm::read_local_gateway(j, &rg)
                })
            }
            T::AzureVpnConnection => {
                tagged(collect!(n.virtual_network_gateway_connections_client().list(rg.clone(), sub.clone())), &|j| {
                    arm::read_connection(j, &rg)
                })
            }
            T::AzureUserAssignedIdentity => tagged(
                collect!(self.msi.user_assigned_identities_client().list_by_resource_group(sub.clone(), rg.clone())),
                &|j| arm::read_identity(j, &rg),
            ),
            T::AzureFederatedCredential => {
                let identities = collect!(
                    self.msi.user_assigned_identities_client().list_by_resource_group(sub.clone(), rg.clone())
                );
                let mut out = Vec::new();
                for i in identities.iter().filter(|j| ours(j)) {
                    let identity = i["name"].as_str().unwrap_or_default().to_string();
                    let creds = collect!(self.msi.federated_identity_credentials_client().list(
                        sub.clone(),
                        rg.clone(),
                        identity.clone()
                    ));
                    for c in creds {
                        let name = c["name"].as_str().unwrap_or_default();
                        out.push(Observed {
                            address: Address::new(T::AzureFederatedCredential, name),
                            id: c["id"].as_str().unwrap_or_default().to_string(),
                            attributes: arm::read_federated(&c, &identity),
                        });
                    }
                }
                out
            }
            T::AzureRoleAssignment => {
                let items = collect!(self.authz.role_assignments_client().list_for_scope(self.rg_id()));
                items
                    .iter()
                    .filter_map(|j| {
                        let address = arm::role_owner(stack, j["properties"]["description"].as_str()?)?;
                        Some(Observed {
                            address,
                            id: j["id"].as_str().unwrap_or_default().to_string(),
                            attributes: arm::read_role_assignment(j),
                        })
                    })
                    .collect()
            }
            _ => Vec::new(),
        })
    }
}

/// SDK errors for a body that does not fit its model (never expected: the bodies are ours).
fn to_core(e: ProviderError) -> azure_core::Error {
    azure_core::Error::message(ErrorKind::DataConversion, e.to_string())
}

struct NoProgress;

impl Progress for NoProgress {
    fn waiting(&self, _: &Address, _: &str) {}
}

impl Provider for AzureProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Azure
    }

    fn refresh<'a>(&'a self, stack: &'a str, rtype: T) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(self.list(stack, rtype))
    }

    fn create<'a>(
        &'a self,
        req: Request<'a>,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move { self.put(req.stack, req.address, req.attributes, progress).await })
    }

    fn update<'a>(
        &'a self,
        req: Request<'a>,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move { self.put(req.stack, req.address, req.attributes, progress).await })
    }

    fn delete<'a>(&'a self, req: Request<'a>, progress: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move { self.remove(&req, progress).await })
    }
}
