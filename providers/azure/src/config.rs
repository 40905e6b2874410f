//! Which Azure to talk to ([`Cloud`]), as whom, and how long to wait for it.

use std::collections::BTreeMap;
use std::time::Duration;

use xcsp_core::ResourceType;

use crate::cloud::Cloud;
use crate::credential::CredentialSource;

/// How long one operation may take, by resource type. A deadline covers the calls, their
/// retries and the long-running operation's polling; waiting for a gateway's lock is not counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeouts {
    /// Every type without its own entry.
    pub default: Duration,
    /// One refresh (the bulk list of one type).
    pub refresh: Duration,
    pub by_type: BTreeMap<ResourceType, Duration>,
}

impl Default for Timeouts {
    /// 30 minutes, and 90 for the VPN gateway: Azure quotes 45 minutes and more for its
    /// creation, and 90 is what the azurerm Terraform provider allows. An imported boot image's
    /// copy and its image version's replication get 60 (a 16 GiB VHD between clouds or regions).
    fn default() -> Timeouts {
        let mut by_type = BTreeMap::new();
        by_type.insert(ResourceType::AzureVpnGateway, Duration::from_secs(90 * 60));
        by_type.insert(ResourceType::AzureStorageBlob, Duration::from_secs(60 * 60));
        by_type.insert(ResourceType::AzureGalleryImageVersion, Duration::from_secs(60 * 60));
        Timeouts { default: Duration::from_secs(30 * 60), refresh: Duration::from_secs(10 * 60), by_type }
    }
}

impl Timeouts {
    pub fn of(&self, rtype: ResourceType) -> Duration {
        self.by_type.get(&rtype).copied().unwrap_or(self.default)
    }

    pub fn set(&mut self, rtype: ResourceType, timeout: Duration) -> &mut Timeouts {
        self.by_type.insert(rtype, timeout);
        self
    }
}

/// Waits between retries of a failed call: exponential from `first` up to `max`, with jitter,
/// unless Azure says how long (`Retry-After`).
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    /// How long one HTTP exchange may hang before it counts as a dropped connection.
    pub attempt_timeout: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            first: Duration::from_millis(500),
            max: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(120),
        }
    }
}

/// Everything the provider needs from the spec and the environment.
#[derive(Debug, Clone)]
pub struct AzureConfig {
    pub subscription_id: String,
    pub tenant_id: String,
    /// The stack's resource group: refresh lists in it; a resource whose attributes name no
    /// `resource_group` lives in it.
    pub resource_group: String,
    pub cloud: Cloud,
    pub credential: CredentialSource,
    pub timeouts: Timeouts,
    /// The wait between polls of a long-running operation when Azure does not say (`Retry-After`).
    pub poll_interval: Duration,
    pub backoff: Backoff,
}

impl AzureConfig {
    /// A configuration with the credential chain Azure tools use and the default timeouts.
    pub fn new(subscription_id: &str, tenant_id: &str, resource_group: &str, cloud: Cloud) -> AzureConfig {
        AzureConfig {
            subscription_id: subscription_id.to_string(),
            tenant_id: tenant_id.to_string(),
            resource_group: resource_group.to_string(),
            cloud,
            credential: CredentialSource::Default,
            timeouts: Timeouts::default(),
            poll_interval: Duration::from_secs(10),
            backoff: Backoff::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_gets_ninety_minutes_and_the_rest_thirty() {
        let mut t = Timeouts::default();
        assert_eq!(t.of(ResourceType::AzureVpnGateway), Duration::from_secs(5400));
        assert_eq!(t.of(ResourceType::AzurePublicIp), Duration::from_secs(1800));
        t.set(ResourceType::AzureVpnConnection, Duration::from_secs(60));
        assert_eq!(t.of(ResourceType::AzureVpnConnection), Duration::from_secs(60));
    }
}
