//! Which ready operation goes first: the one with the longest remaining path to the end of the
//! run (critical path first), so a 40-minute VPN gateway never waits behind quick resources.

use std::collections::HashMap;
use std::time::Duration;

use xcsp_core::{Address, ResourceType};

/// How long creating a resource of this type usually takes in its real cloud. Only the ratios
/// matter: they rank ready operations.
pub fn typical_duration(rtype: ResourceType) -> Duration {
    use ResourceType as T;
    let secs = match rtype {
        T::AzureVpnGateway => 40 * 60,
        T::AwsVpnConnection => 5 * 60,
        T::AzureVpnConnection => 2 * 60,
        T::AwsVpnGateway | T::AwsVpnGatewayAttachment => 60,
        // Route 53 Resolver makes an ENI per address before the endpoint is OPERATIONAL.
        T::AwsResolverEndpoint => 3 * 60,
        T::AzurePublicIp | T::AzureVirtualNetwork | T::AzureSubnet => 15,
        T::AzureRoleAssignment
        | T::AzureRoleDefinition
        | T::AzureUserAssignedIdentity
        | T::AzureFederatedCredential => 10,
        T::PresharedKey => 0,
        // An imported boot image: Azure's copy of a 16 GiB VHD, then the image version's
        // replication (Microsoft Learn quotes minutes to tens of minutes for an OS disk).
        T::AzureStorageBlob => 5 * 60,
        T::AzureGalleryImageVersion => 20 * 60,
        T::AzureStorageAccount => 30,
        // A VM's boot once it reaches the cluster: Ignition, the pivot, the kubelet's join.
        T::K8sNodesReady => 5 * 60,
        _ => 5,
    };
    Duration::from_secs(secs)
}

/// For each item, its own cost plus the longest chain of costs after it.
/// `successors[a]` are the items that can only start once `a` is done.
pub fn remaining_paths(
    costs: &HashMap<Address, Duration>,
    successors: &HashMap<Address, Vec<Address>>,
) -> HashMap<Address, Duration> {
    fn visit(
        a: &Address,
        costs: &HashMap<Address, Duration>,
        successors: &HashMap<Address, Vec<Address>>,
        memo: &mut HashMap<Address, Duration>,
    ) -> Duration {
        if let Some(d) = memo.get(a) {
            return *d;
        }
        let tail = successors
            .get(a)
            .into_iter()
            .flatten()
            .map(|s| visit(s, costs, successors, memo))
            .max()
            .unwrap_or_default();
        let total = costs.get(a).copied().unwrap_or_default() + tail;
        memo.insert(a.clone(), total);
        total
    }
    let mut memo = HashMap::new();
    for a in costs.keys() {
        visit(a, costs, successors, &mut memo);
    }
    memo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Address {
        s.parse().unwrap()
    }

    #[test]
    fn the_gateway_chain_outranks_quick_branches() {
        // rg -> vng -> conn ; rg -> identity
        let costs: HashMap<Address, Duration> = [
            (a("azure_resource_group.main"), Duration::from_secs(5)),
            (a("azure_virtual_network_gateway.link"), Duration::from_secs(2400)),
            (a("azure_virtual_network_gateway_connection.link[0]"), Duration::from_secs(120)),
            (a("azure_user_assigned_identity.capz"), Duration::from_secs(10)),
        ]
        .into_iter()
        .collect();
        let successors: HashMap<Address, Vec<Address>> = [
            (
                a("azure_resource_group.main"),
                vec![a("azure_virtual_network_gateway.link"), a("azure_user_assigned_identity.capz")],
            ),
            (a("azure_virtual_network_gateway.link"), vec![a("azure_virtual_network_gateway_connection.link[0]")]),
        ]
        .into_iter()
        .collect();
        let r = remaining_paths(&costs, &successors);
        assert_eq!(r[&a("azure_resource_group.main")], Duration::from_secs(2525));
        assert_eq!(r[&a("azure_virtual_network_gateway.link")], Duration::from_secs(2520));
        assert_eq!(r[&a("azure_user_assigned_identity.capz")], Duration::from_secs(10));
    }
}
