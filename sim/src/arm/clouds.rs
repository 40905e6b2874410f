//! Azure's clouds as their clients know them: each one's Entra authority host, Resource Manager
//! host and the management audiences its Resource Manager accepts. A request that reaches the sim
//! under one of these host names (through the world's TLS front, [`crate::front`]) is answered as
//! that cloud answers; a request to the plain loopback address is judged by no cloud.
//!
//! Sources: the Azure SDK for Go's `azcore/cloud` (`AzurePublic`, `AzureGovernment`: authority
//! host, ARM endpoint and audience, which CAPZ's `ARMClientOptions` in `azure/defaults.go`
//! selects by `AzureCluster.spec.azureEnvironment`); Microsoft Learn, "Compare Azure Government and
//! global Azure" (the endpoint table: `login.microsoftonline.us`, `management.usgovcloudapi.net`,
//! `management.core.usgovcloudapi.net`); the refusals' codes in [`super::auth`].

/// One Azure cloud.
#[derive(Debug, PartialEq, Eq)]
pub struct Cloud {
    /// The name xcsp's spec and CAPZ's `cloud` option use (`public`, `usgovernment`).
    pub name: &'static str,
    /// CAPZ's `azureEnvironment` for it.
    pub environment: &'static str,
    /// Entra's authority host.
    pub authority: &'static str,
    /// Resource Manager's host.
    pub resource_manager: &'static str,
    /// The audiences (token resources) its Resource Manager accepts, without a trailing `/`.
    pub audiences: &'static [&'static str],
}

pub static PUBLIC: Cloud = Cloud {
    name: "public",
    environment: "AzurePublicCloud",
    authority: "login.microsoftonline.com",
    resource_manager: "management.azure.com",
    audiences: &["https://management.azure.com", "https://management.core.windows.net"],
};

pub static US_GOVERNMENT: Cloud = Cloud {
    name: "usgovernment",
    environment: "AzureUSGovernmentCloud",
    authority: "login.microsoftonline.us",
    resource_manager: "management.usgovcloudapi.net",
    audiences: &["https://management.usgovcloudapi.net", "https://management.core.usgovcloudapi.net"],
};

pub static CLOUDS: &[&Cloud] = &[&PUBLIC, &US_GOVERNMENT];

/// What a host name is to a cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Authority,
    ResourceManager,
}

/// The cloud and role of a `Host` header's name (port ignored, case ignored), if it is one.
pub fn by_host(host: &str) -> Option<(&'static Cloud, Role)> {
    let name = host.rsplit_once(':').map_or(host, |(h, port)| if port.parse::<u16>().is_ok() { h } else { host });
    CLOUDS.iter().find_map(|c| {
        if name.eq_ignore_ascii_case(c.authority) {
            Some((*c, Role::Authority))
        } else if name.eq_ignore_ascii_case(c.resource_manager) {
            Some((*c, Role::ResourceManager))
        } else {
            None
        }
    })
}

/// The cloud named `name` (`public`, `usgovernment`, or CAPZ's environment names).
pub fn named(name: &str) -> Option<&'static Cloud> {
    CLOUDS.iter().copied().find(|c| c.name.eq_ignore_ascii_case(name) || c.environment.eq_ignore_ascii_case(name))
}

/// The cloud whose Resource Manager accepts `audience` (a trailing `/` ignored).
pub fn of_audience(audience: &str) -> Option<&'static Cloud> {
    let a = audience.trim_end_matches('/');
    CLOUDS.iter().copied().find(|c| c.audiences.iter().any(|x| x.eq_ignore_ascii_case(a)))
}

/// Every host name the world serves over TLS for the clouds.
pub fn host_names() -> Vec<&'static str> {
    CLOUDS.iter().flat_map(|c| [c.authority, c.resource_manager]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_name_their_cloud_and_role() {
        assert_eq!(by_host("login.microsoftonline.us"), Some((&US_GOVERNMENT, Role::Authority)));
        assert_eq!(by_host("Management.UsGovCloudApi.net:443"), Some((&US_GOVERNMENT, Role::ResourceManager)));
        assert_eq!(by_host("login.microsoftonline.com"), Some((&PUBLIC, Role::Authority)));
        assert_eq!(by_host("127.0.0.1:8080"), None);
        assert_eq!(named("AzureUSGovernmentCloud"), Some(&US_GOVERNMENT));
        assert_eq!(of_audience("https://management.core.usgovcloudapi.net/"), Some(&US_GOVERNMENT));
        assert_eq!(of_audience("https://management.azure.com"), Some(&PUBLIC));
        assert_eq!(of_audience("api://AzureADTokenExchange"), None);
        assert_eq!(host_names().len(), 4);
    }
}
