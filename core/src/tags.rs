//! The keys xcsp marks its resources with, per cloud, and the older keys it still reads.
//!
//! A resource carries its stack and its address so that an interrupted run can adopt it and a
//! sweep can find it. The keys must be valid wherever they are written:
//! - AWS tags and Kubernetes labels/annotations take `xcsp.io/stack` and `xcsp.io/address` (AWS
//!   allows `/` in tag keys; Kubernetes label keys take a DNS-subdomain prefix and a `/`).
//! - Azure refuses tag names containing `< > % & \ ? /` (Microsoft Learn, "Use tags to organize
//!   your Azure resources", Limitations; `InvalidTagNameCharacters`), so on Azure, and in the
//!   `additionalTags` CAPZ copies onto VMs, NICs and disks, the `/` becomes `_`:
//!   `xcsp.io_stack`, `xcsp.io_address` (the shape openshift/installer uses on Azure for
//!   `kubernetes.io_cluster.<infra>`, `pkg/asset/machines/azure/azuremachines.go`).
//!
//! State and resources written before this scheme carried the `/` keys on Azure too (only the
//! local clouds ever accepted them): refresh and sweeps read both, writes use the new keys, so an
//! update puts the new keys on such a resource.

use crate::ProviderKind;

/// The pair of keys naming a resource's stack and address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagKeys {
    pub stack: &'static str,
    pub address: &'static str,
}

/// AWS tags, Kubernetes labels (stack) and annotations (address).
pub const SLASHED: TagKeys = TagKeys { stack: "xcsp.io/stack", address: "xcsp.io/address" };
/// Azure tags (resources and CAPZ `additionalTags`).
pub const AZURE: TagKeys = TagKeys { stack: "xcsp.io_stack", address: "xcsp.io_address" };

/// The Kubernetes label every machine of a pool carries (`<infra>-<pool>`), whichever zone's
/// MachineSet made it; the pool's MachineHealthCheck selects by it.
pub const POOL_LABEL: &str = "xcsp.io/pool";

/// The keys xcsp writes on resources of `provider`.
pub fn keys_for(provider: ProviderKind) -> TagKeys {
    match provider {
        ProviderKind::Azure => AZURE,
        _ => SLASHED,
    }
}

/// The keys refresh and sweeps recognise on `provider`, newest first.
pub fn read_keys(provider: ProviderKind) -> &'static [TagKeys] {
    match provider {
        ProviderKind::Azure => &[AZURE, SLASHED],
        _ => &[SLASHED],
    }
}

/// Is `key` one of xcsp's own tag keys on any cloud (users may not set them)?
pub fn is_reserved(key: &str) -> bool {
    key.starts_with("xcsp.io/") || key.starts_with("xcsp.io_")
}

/// The stack and address a resource's tags name, read through `lookup` with every key pair
/// `provider` recognises (the first pair that names a stack wins).
pub fn owner<'a>(provider: ProviderKind, lookup: impl Fn(&str) -> Option<&'a str>) -> Option<(&'a str, &'a str)> {
    read_keys(provider).iter().find_map(|k| Some((lookup(k.stack)?, lookup(k.address)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn azure_keys_hold_no_character_azure_refuses() {
        for k in [AZURE.stack, AZURE.address] {
            assert!(!k.chars().any(|c| "<>%&\\?/".contains(c)), "{k}");
        }
    }

    #[test]
    fn an_azure_resource_tagged_with_the_old_keys_is_still_recognised() {
        let old: HashMap<&str, &str> =
            [("xcsp.io/stack", "il5"), ("xcsp.io/address", "azure_virtual_network.link")].into();
        assert_eq!(owner(ProviderKind::Azure, |k| old.get(k).copied()), Some(("il5", "azure_virtual_network.link")));
        let new: HashMap<&str, &str> = [("xcsp.io_stack", "il5"), ("xcsp.io_address", "a.b")].into();
        assert_eq!(owner(ProviderKind::Azure, |k| new.get(k).copied()), Some(("il5", "a.b")));
        assert_eq!(owner(ProviderKind::Aws, |k| new.get(k).copied()), None);
    }
}
