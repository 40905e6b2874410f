//! How the resources Azure cannot tag are found again on refresh, by deterministic names.
//!
//! Subnets, federated identity credentials and role assignments take no tags. Each is listed
//! under a parent the stack owns (its VNet, its identity, its resource group) and recognized:
//! - a subnet by its name: `GatewaySubnet` is `azure_subnet.gateway-<network>` of the VNet
//!   `azure_virtual_network.<network>`, and `<stack>-<pool>` is `azure_subnet.pool-<pool>`
//!   (the names plans::expand gives them);
//! - a federated credential by a name derived from its address (`xcsp-<name>`, or
//!   `xcspi-<index>-<name>` for an indexed one), under an identity tagged with the stack;
//! - a role assignment or custom role definition by its name, a UUID v5 of stack and address (so
//!   that a create that ran twice makes one), and its description naming both, which is checked
//!   against it.

use xcsp_core::{ADDRESS_TAG, Address, ResourceType, STACK_TAG};

/// The subnet of `vnet` named `subnet`, if it is one xcsp makes.
pub fn subnet_address(stack: &str, vnet: &Address, subnet: &str) -> Option<Address> {
    let name = if subnet == "GatewaySubnet" {
        format!("gateway-{}", vnet.name)
    } else {
        format!("pool-{}", subnet.strip_prefix(stack)?.strip_prefix('-')?)
    };
    Some(Address::new(ResourceType::AzureSubnet, name))
}

pub fn federated_credential_name(address: &Address) -> String {
    match address.index {
        None => format!("xcsp-{}", address.name),
        Some(i) => format!("xcspi-{i}-{}", address.name),
    }
}

pub fn federated_credential_address(name: &str) -> Option<Address> {
    let address = if let Some(rest) = name.strip_prefix("xcspi-") {
        let (index, name) = rest.split_once('-')?;
        Address::indexed(ResourceType::AzureFederatedCredential, name, index.parse().ok()?)
    } else {
        Address::new(ResourceType::AzureFederatedCredential, name.strip_prefix("xcsp-")?)
    };
    // Only names an address can have (Azure allows a few more).
    address.to_string().parse::<Address>().ok()
}

pub fn role_assignment_name(stack: &str, address: &Address) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, format!("xcsp:{stack}:{address}").as_bytes()).to_string()
}

pub fn role_description(stack: &str, address: &Address) -> String {
    format!("{STACK_TAG}={stack} {ADDRESS_TAG}={address}")
}

/// The address of the role assignment or custom role definition named `name` with
/// `description`, if it is this stack's (a definition's name is its GUID, made the same way).
pub fn role_owner(stack: &str, rtype: ResourceType, name: &str, description: &str) -> Option<Address> {
    let mut parts = description.split(' ');
    let s = parts.next()?.strip_prefix(STACK_TAG)?.strip_prefix('=')?;
    let a: Address = parts.next()?.strip_prefix(ADDRESS_TAG)?.strip_prefix('=')?.parse().ok()?;
    (s == stack && a.rtype == rtype && role_assignment_name(stack, &a) == name).then_some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_map_back_to_their_addresses() {
        let vnet = Address::new(ResourceType::AzureVirtualNetwork, "link");
        assert_eq!(subnet_address("il5", &vnet, "GatewaySubnet").unwrap().to_string(), "azure_subnet.gateway-link");
        assert_eq!(subnet_address("il5", &vnet, "il5-gpu").unwrap().to_string(), "azure_subnet.pool-gpu");
        assert_eq!(subnet_address("il5", &vnet, "made-by-hand"), None);
        assert_eq!(subnet_address("il5", &vnet, "il5x-gpu"), None);
    }

    #[test]
    fn federated_credential_names_round_trip() {
        for a in ["azure_federated_identity_credential.capz", "azure_federated_identity_credential.ci[2]"] {
            let a: Address = a.parse().unwrap();
            assert_eq!(federated_credential_address(&federated_credential_name(&a)), Some(a));
        }
        assert_eq!(federated_credential_address("made-by-hand"), None);
    }

    #[test]
    fn a_role_assignment_is_ours_only_under_its_own_name() {
        let a: Address = "azure_role_assignment.capz".parse().unwrap();
        let name = role_assignment_name("il5", &a);
        let d = role_description("il5", &a);
        assert_eq!(role_owner("il5", ResourceType::AzureRoleAssignment, &name, &d), Some(a.clone()));
        assert_eq!(role_owner("other", ResourceType::AzureRoleAssignment, &name, &d), None);
        assert_eq!(
            role_owner("il5", ResourceType::AzureRoleAssignment, "00000000-0000-0000-0000-000000000000", &d),
            None
        );
        assert_eq!(role_owner("il5", ResourceType::AzureRoleAssignment, &name, "made by hand"), None);
        assert_eq!(name, role_assignment_name("il5", &a), "deterministic");
    }
}
