//! An Azure cloud's endpoints and token audience: a leaf that the configuration and the
//! credentials both read.

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

    /// What Resource Manager tokens are issued for. In a sovereign cloud it differs from the
    /// public one; a token for the wrong audience is refused with 401.
    pub fn audience(&self) -> String {
        match self {
            Cloud::Public => "https://management.azure.com".into(),
            Cloud::UsGovernment => "https://management.usgovcloudapi.net".into(),
            Cloud::Custom { audience, .. } => audience.trim_end_matches('/').to_string(),
        }
    }

    /// The OAuth scope for Resource Manager.
    pub fn scope(&self) -> String {
        format!("{}/.default", self.audience())
    }

    /// This cloud reached through other hosts (a local emulator, a proxy), keeping its audience,
    /// so that a Government configuration still asks for Government tokens.
    pub fn through(&self, resource_manager: &str, authority_host: &str) -> Cloud {
        Cloud::Custom {
            resource_manager: resource_manager.to_string(),
            authority_host: authority_host.to_string(),
            audience: self.audience(),
        }
    }
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
        let local = g.through("http://127.0.0.1:1/", "http://127.0.0.1:1");
        assert_eq!(local.resource_manager(), "http://127.0.0.1:1");
        assert_eq!(local.authority_host(), "http://127.0.0.1:1/");
        assert_eq!(local.scope(), "https://management.usgovcloudapi.net/.default");
        assert_eq!(Cloud::Public.scope(), "https://management.azure.com/.default");
    }
}
