//! The resource types xcsp manages, and what each one's schema says about change and secrecy.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which provider owns a resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Values xcsp makes itself (generated pre-shared keys); no cloud call.
    Local,
    Aws,
    Azure,
    Kubernetes,
}

impl ProviderKind {
    pub fn title(self) -> &'static str {
        match self {
            ProviderKind::Local => "xcsp",
            ProviderKind::Aws => "AWS",
            ProviderKind::Azure => "Azure",
            ProviderKind::Kubernetes => "Kubernetes",
        }
    }
}

macro_rules! resource_types {
    ($($variant:ident => $name:literal, $provider:ident;)*) => {
        /// Every kind of resource xcsp can plan. The name is the first part of an address.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ResourceType { $($variant,)* }

        impl ResourceType {
            pub const ALL: &'static [ResourceType] = &[$(ResourceType::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(ResourceType::$variant => $name,)* }
            }

            pub fn provider(self) -> ProviderKind {
                match self { $(ResourceType::$variant => ProviderKind::$provider,)* }
            }
        }

        impl FromStr for ResourceType {
            type Err = UnknownResourceType;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s { $($name => Ok(ResourceType::$variant),)* _ => Err(UnknownResourceType(s.to_string())) }
            }
        }
    };
}

resource_types! {
    PresharedKey => "xcsp_preshared_key", Local;
    AwsVpnGateway => "aws_vpn_gateway", Aws;
    AwsVpnGatewayAttachment => "aws_vpn_gateway_attachment", Aws;
    AwsRoutePropagation => "aws_vpn_gateway_route_propagation", Aws;
    AwsCustomerGateway => "aws_customer_gateway", Aws;
    AwsVpnConnection => "aws_vpn_connection", Aws;
    AwsVpnConnectionRoute => "aws_vpn_connection_route", Aws;
    AwsSecurityGroupIngress => "aws_security_group_ingress", Aws;
    AwsSecurityGroup => "aws_security_group", Aws;
    AwsResolverEndpoint => "aws_route53_resolver_endpoint", Aws;
    AzureResourceGroup => "azure_resource_group", Azure;
    AzureVirtualNetwork => "azure_virtual_network", Azure;
    AzureSubnet => "azure_subnet", Azure;
    AzureVnetDnsServers => "azure_virtual_network_dns_servers", Azure;
    AzureNetworkSecurityGroup => "azure_network_security_group", Azure;
    AzurePublicIp => "azure_public_ip", Azure;
    AzureNatGateway => "azure_nat_gateway", Azure;
    AzureVpnGateway => "azure_virtual_network_gateway", Azure;
    AzureLocalNetworkGateway => "azure_local_network_gateway", Azure;
    AzureVpnConnection => "azure_virtual_network_gateway_connection", Azure;
    AzureUserAssignedIdentity => "azure_user_assigned_identity", Azure;
    AzureFederatedCredential => "azure_federated_identity_credential", Azure;
    AzureRoleAssignment => "azure_role_assignment", Azure;
    AzureRoleDefinition => "azure_role_definition", Azure;
    AzureStorageAccount => "azure_storage_account", Azure;
    AzureStorageBlob => "azure_storage_blob", Azure;
    AzureGallery => "azure_shared_image_gallery", Azure;
    AzureGalleryImage => "azure_shared_image", Azure;
    AzureGalleryImageVersion => "azure_shared_image_version", Azure;
    K8sNamespace => "k8s_namespace", Kubernetes;
    K8sAzureClusterIdentity => "k8s_azure_cluster_identity", Kubernetes;
    K8sAzureCluster => "k8s_azure_cluster", Kubernetes;
    K8sCluster => "k8s_cluster", Kubernetes;
    K8sAzureMachineTemplate => "k8s_azure_machine_template", Kubernetes;
    K8sMachineSet => "k8s_machine_set", Kubernetes;
    K8sMachineHealthCheck => "k8s_machine_health_check", Kubernetes;
    K8sNodesReady => "k8s_nodes_ready", Kubernetes;
    K8sMachineConfig => "k8s_machine_config", Kubernetes;
    K8sMachineConfigPool => "k8s_machine_config_pool", Kubernetes;
    K8sRuntimeClass => "k8s_runtime_class", Kubernetes;
    K8sUserDataSecret => "k8s_user_data_secret", Kubernetes;
    K8sServiceAccount => "k8s_service_account", Kubernetes;
    K8sServiceAccountToken => "k8s_service_account_token", Kubernetes;
    K8sClusterRole => "k8s_cluster_role", Kubernetes;
    K8sClusterRoleBinding => "k8s_cluster_role_binding", Kubernetes;
    K8sKubeconfigSecret => "k8s_kubeconfig_secret", Kubernetes;
    K8sClusterApiProvider => "k8s_cluster_api_provider", Kubernetes;
}

/// The error for a name that is no resource type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown resource type `{0}`")]
pub struct UnknownResourceType(pub String);

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ResourceType {
    /// A Kubernetes object that lives in no namespace.
    pub fn cluster_scoped(self) -> bool {
        use ResourceType::*;
        matches!(
            self,
            K8sNamespace
                | K8sMachineConfig
                | K8sMachineConfigPool
                | K8sRuntimeClass
                | K8sClusterRole
                | K8sClusterRoleBinding
        )
    }

    /// A step that makes nothing in a cloud or cluster: it waits for what others made (a
    /// MachineSet's Nodes Ready) and is recorded once it saw it.
    pub fn only_waits(self) -> bool {
        self == ResourceType::K8sNodesReady
    }

    /// Attributes that cannot change in place, each with the reason a replacement is needed.
    pub fn forces_replacement(self, attribute: &str) -> Option<&'static str> {
        use ResourceType::*;
        let table: &[(&str, &str)] = match self {
            PresharedKey => &[("length", "a generated key is never re-derived")],
            AwsVpnGateway => &[("amazon_side_asn", "a VPN gateway's Amazon-side ASN is fixed at creation")],
            AwsVpnGatewayAttachment => {
                &[("vpc_id", "a VPN gateway attaches to one VPC; moving it detaches and re-attaches")]
            }
            AwsCustomerGateway => &[
                ("ip_address", "customer gateways are immutable in EC2"),
                ("bgp_asn", "customer gateways are immutable in EC2"),
            ],
            AwsVpnConnection => &[
                (
                    "customer_gateway",
                    "EC2 can move a connection only between gateways of the same kind; xcsp replaces it",
                ),
                ("static_routes_only", "the routing mode of a VPN connection is fixed at creation"),
            ],
            AwsVpnConnectionRoute => &[("destination_cidr", "a static VPN route has no update call")],
            AwsSecurityGroup => &[
                ("name", "a security group's name is fixed at creation"),
                ("description", "a security group's description is fixed at creation"),
                ("vpc_id", "a security group belongs to one VPC"),
            ],
            AwsResolverEndpoint => &[
                ("direction", "an endpoint's direction is fixed at creation"),
                ("security_group_ids", "UpdateResolverEndpoint cannot change an endpoint's security groups"),
                ("subnet_ids", "xcsp places an endpoint's addresses at creation"),
                ("vpc_id", "an endpoint belongs to one VPC"),
            ],
            AzureVnetDnsServers => &[("virtual_network", "the DNS servers belong to one virtual network")],
            AzureResourceGroup => &[("location", "a resource group's location is fixed at creation")],
            AzureVirtualNetwork | AzureNetworkSecurityGroup | AzureLocalNetworkGateway | AzureUserAssignedIdentity => {
                &[("location", "Azure resources cannot move between regions")]
            }
            // `default_outbound_access` changes in place: the 2024-03-01 spec says it is set only at
            // creation, but Microsoft Learn ("Default outbound access in Azure") now makes existing
            // subnets private by an update. A refusal is a clear ARM error; replacing a subnet that
            // holds the pool's VMs would fail anyway (InUseSubnetCannotBeDeleted).
            AzureSubnet => &[("virtual_network", "a subnet belongs to one virtual network")],
            AzureNatGateway => &[
                ("zones", "a NAT gateway's zone is fixed at creation"),
                ("location", "Azure resources cannot move between regions"),
            ],
            AzurePublicIp => &[
                ("sku", "a public IP's SKU cannot change while it is in use"),
                ("zones", "a public IP's zones are fixed at creation"),
                ("location", "Azure resources cannot move between regions"),
            ],
            AzureVpnGateway => &[
                ("public_ips", "the gateway's IP configurations are fixed at creation"),
                ("vpn_type", "a gateway's VPN type is fixed at creation"),
                ("location", "Azure resources cannot move between regions"),
            ],
            AzureVpnConnection => &[
                ("local_network_gateway", "a connection's endpoints are fixed at creation"),
                ("virtual_network_gateway", "a connection's endpoints are fixed at creation"),
            ],
            AzureFederatedCredential => &[("identity", "a federated credential belongs to one identity")],
            AzureStorageAccount | AzureGallery => &[
                ("name", "an Azure resource's name is part of its identity"),
                ("location", "Azure resources cannot move between regions"),
            ],
            AzureStorageBlob => &[
                ("name", "a blob's name is part of its identity"),
                ("storage_account", "a blob belongs to one storage account"),
                ("container", "a blob belongs to one container"),
                ("source_uri", "a copied blob is the copy of one source"),
            ],
            AzureGalleryImage => &[
                ("name", "an Azure resource's name is part of its identity"),
                ("gallery", "an image definition belongs to one gallery"),
                ("hyper_v_generation", "an image definition's Hyper-V generation is fixed at creation"),
                ("architecture", "an image definition's architecture is fixed at creation"),
                ("os_type", "an image definition's OS type is fixed at creation"),
                ("identifier", "an image definition's identifier is fixed at creation"),
            ],
            AzureGalleryImageVersion => &[
                ("name", "an Azure resource's name is part of its identity"),
                ("gallery", "an image version belongs to one gallery"),
                ("image", "an image version belongs to one image definition"),
                ("source_uri", "an image version is made once from its source"),
            ],
            AzureRoleDefinition => &[("scope", "xcsp names a role definition in its scope")],
            AzureRoleAssignment => &[
                ("scope", "role assignments are immutable"),
                ("role", "role assignments are immutable"),
                ("principal", "role assignments are immutable"),
            ],
            K8sNamespace | K8sMachineConfig | K8sMachineConfigPool | K8sClusterRole | K8sClusterRoleBinding => {
                &[("name", "a Kubernetes object's name is part of its identity")]
            }
            K8sRuntimeClass => &[
                ("name", "a Kubernetes object's name is part of its identity"),
                ("handler", "a RuntimeClass's handler is immutable (node.k8s.io validation)"),
            ],
            K8sUserDataSecret | K8sServiceAccount | K8sServiceAccountToken | K8sKubeconfigSecret => &[
                ("namespace", "a Kubernetes object's namespace is part of its identity"),
                ("name", "a Kubernetes object's name is part of its identity"),
            ],
            K8sAzureClusterIdentity
            | K8sAzureCluster
            | K8sCluster
            | K8sAzureMachineTemplate
            | K8sMachineSet
            | K8sMachineHealthCheck
            | K8sNodesReady => &[
                ("namespace", "a Kubernetes object's namespace is part of its identity"),
                ("name", "a Kubernetes object's name is part of its identity"),
            ],
            K8sClusterApiProvider => &[("namespace", "a provider's objects live in its namespace")],
            AwsRoutePropagation | AwsSecurityGroupIngress => &[],
        };
        table.iter().find(|(a, _)| *a == attribute).map(|(_, why)| *why)
    }
}

impl Serialize for ResourceType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ResourceType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in ResourceType::ALL {
            assert_eq!(t.as_str().parse::<ResourceType>().unwrap(), *t);
        }
    }

    #[test]
    fn replacement_reasons_are_per_attribute() {
        assert!(ResourceType::AwsCustomerGateway.forces_replacement("ip_address").is_some());
        assert!(ResourceType::AwsCustomerGateway.forces_replacement("tags").is_none());
        assert!(ResourceType::AwsRoutePropagation.forces_replacement("route_table_ids").is_none());
    }
}
