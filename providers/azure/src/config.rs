//! Which Azure to talk to, and as whom.

use std::sync::Arc;
use std::time::Duration;

use azure_core::auth::TokenCredential;
use azure_identity::{DefaultAzureCredential, TokenCredentialOptions, WorkloadIdentityCredential};

/// An Azure cloud: where Resource Manager and Entra ID live, and the audience tokens are for.
#[derive(Debug, Clone, PartialEq)]
pub enum Cloud {
    Public,
    UsGovernment,
    /// Explicit endpoints (sovereign clouds, Azure Stack, the local clouds).
    Custom {
        resource_manager: String,
        authority_host: String,
        audience: String,
    },
}

impl Cloud {
    pub fn resource_manager(&self) -> String {
        match self {
            Cloud::Public => "https://management.azure.com".into(),
            Cloud::UsGovernment => "https://management.usgovcloudapi.net".into(),
            Cloud::Custom { resource_manager, .. } => resource_manager.trim_end_matches('/').to_string(),
        }
    }

    /// The Entra ID authority host, with a trailing slash as azure_identity expects.
    pub fn authority_host(&self) -> String {
        let host = match self {
            Cloud::Public => "https://login.microsoftonline.com",
            Cloud::UsGovernment => "https://login.microsoftonline.us",
            Cloud::Custom { authority_host, .. } => authority_host.as_str(),
        };
        format!("{}/", host.trim_end_matches('/'))
    }

    /// The token scope for Resource Manager.
    pub fn scope(&self) -> String {
        let audience = match self {
            Cloud::Public => "https://management.azure.com",
            Cloud::UsGovernment => "https://management.usgovcloudapi.net",
            Cloud::Custom { audience, .. } => audience.as_str(),
        };
        format!("{}/.default", audience.trim_end_matches('/'))
    }
}

/// Everything the provider needs from the spec and the environment.
#[derive(Debug, Clone)]
pub struct AzureConfig {
    pub subscription_id: String,
    pub tenant_id: String,
    /// The pool's resource group: every resource but the group itself lives in it.
    pub resource_group: String,
    pub cloud: Cloud,
    /// How long one operation may take, the VPN gateway apart.
    pub timeout: Duration,
    /// How long a VPN gateway create or delete may take (Azure quotes 45 minutes and more).
    pub vpn_gateway_timeout: Duration,
    /// The first wait between polls of a long-running operation when Azure does not say.
    pub poll_interval: Duration,
}

impl AzureConfig {
    pub fn new(subscription_id: &str, tenant_id: &str, resource_group: &str, cloud: Cloud) -> AzureConfig {
        AzureConfig {
            subscription_id: subscription_id.to_string(),
            tenant_id: tenant_id.to_string(),
            resource_group: resource_group.to_string(),
            cloud,
            timeout: Duration::from_secs(30 * 60),
            vpn_gateway_timeout: Duration::from_secs(90 * 60),
            poll_interval: Duration::from_secs(5),
        }
    }
}

/// The credential, in the order Azure's own tools try them: a federated token file (workload
/// identity, `AZURE_FEDERATED_TOKEN_FILE`), then `DefaultAzureCredential`'s chain: environment
/// client secret (`AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`), managed identity
/// (App Service, then VM), Azure CLI. Tokens come from the cloud's authority host.
pub fn credential(cloud: &Cloud) -> azure_core::Result<Arc<dyn TokenCredential>> {
    let mut options = TokenCredentialOptions::default();
    options.set_authority_host(cloud.authority_host());
    if std::env::var_os("AZURE_FEDERATED_TOKEN_FILE").is_some() {
        return Ok(Arc::new(WorkloadIdentityCredential::create(options)?));
    }
    Ok(Arc::new(DefaultAzureCredential::create(options)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn government_endpoints_and_audience() {
        let g = Cloud::UsGovernment;
        assert_eq!(g.resource_manager(), "https://management.usgovcloudapi.net");
        assert_eq!(g.authority_host(), "https://login.microsoftonline.us/");
        assert_eq!(g.scope(), "https://management.usgovcloudapi.net/.default");
        let c = Cloud::Custom {
            resource_manager: "http://127.0.0.1:1/".into(),
            authority_host: "http://127.0.0.1:1".into(),
            audience: "https://management.azure.com/".into(),
        };
        assert_eq!(c.resource_manager(), "http://127.0.0.1:1");
        assert_eq!(c.authority_host(), "http://127.0.0.1:1/");
        assert_eq!(c.scope(), "https://management.azure.com/.default");
    }
}
