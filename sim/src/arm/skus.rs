//! The VM sizes the world knows: what a size is (vCPUs, memory, GPUs, the Hyper-V generations it
//! boots), for the kubelet's capacity on a Node and for the checks that need a size's facts.
//!
//! Each figure is from the size's page on Microsoft Learn (`virtual-machines/sizes/...`, the
//! "Host specifications" and "Feature support" tables) and the resource SKU capability names
//! (`vCPUs`, `MemoryGB`, `GPUs`, `HyperVGenerations`) of `Microsoft.Compute/skus`
//! (`ResourceSkuCapabilities`). A size missing here is unknown to the world (sim/README.md).
//! Beside the catalog: the Resource SKUs and usages Compute serves for it, from the world's
//! [`crate::world::Compute`] offer.

use serde_json::{Value, json};

/// One VM size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub name: &'static str,
    /// The quota family (`Microsoft.Compute/locations/{l}/usages` names it, and the resource SKU's `family`).
    pub family: &'static str,
    pub vcpus: u32,
    pub memory_gib: u32,
    pub gpus: u32,
    /// `HyperVGenerations`: "V1", "V2" or "V1,V2".
    pub generations: &'static str,
}

const fn size(
    name: &'static str,
    family: &'static str,
    vcpus: u32,
    memory_gib: u32,
    gpus: u32,
    generations: &'static str,
) -> Size {
    Size { name, family, vcpus, memory_gib, gpus, generations }
}

/// The catalog: Dsv5 (`sizes/general-purpose/dsv5-series`), NCasT4_v3 (`sizes/gpu-accelerated/ncast4v3-series`),
/// NC A100 v4 (`nca100v4-series`), ND A100 v4 (`nda100-v4-series`), NDm A100 v4 (`ndm-a100-v4-series`).
pub const SIZES: &[Size] = &[
    size("Standard_D4s_v5", "standardDSv5Family", 4, 16, 0, "V1,V2"),
    size("Standard_D8s_v5", "standardDSv5Family", 8, 32, 0, "V1,V2"),
    size("Standard_NC4as_T4_v3", "standardNCASv3_T4Family", 4, 28, 1, "V1,V2"),
    size("Standard_NC8as_T4_v3", "standardNCASv3_T4Family", 8, 56, 1, "V1,V2"),
    size("Standard_NC24ads_A100_v4", "StandardNCADSA100v4Family", 24, 220, 1, "V2"),
    size("Standard_ND96asr_v4", "standardNDASv4_A100Family", 96, 900, 8, "V2"),
    size("Standard_ND96amsr_A100_v4", "standardNDAMSv4_A100Family", 96, 1900, 8, "V2"),
];

/// The locations the world serves resource SKUs for, and how many availability zones each has
/// (Microsoft Learn, "Availability zone service and regional support": US Gov Virginia and the
/// public US regions below have three; US Gov Arizona and US Gov Texas none).
pub const LOCATIONS: &[(&str, u32)] = &[
    ("usgovvirginia", 3),
    ("usgovarizona", 0),
    ("usgovtexas", 0),
    ("eastus", 3),
    ("eastus2", 3),
    ("centralus", 3),
    ("southcentralus", 3),
    ("westus2", 3),
    ("westus3", 3),
];

/// A family's vCPU quota where the world's config sets none: enough for the examples' pools
/// (two 96-vCPU machines) and a replacement each.
pub const DEFAULT_FAMILY_VCPUS: u32 = 400;
/// The regional total (`cores`) where the config sets none.
pub const DEFAULT_REGIONAL_VCPUS: u32 = 1000;

/// Resource SKUs' api-version (`Skus/stable/2021-07-01/skus.json`, what CAPZ's and xcsp's SDKs
/// send) and the usages' (`ComputeRP/stable/2024-03-01/computeRPCommon.json`).
pub const SKUS_API: &[&str] = &["2021-07-01"];
pub const USAGES_API: &[&str] = &["2024-03-01"];

fn zones_of(location: &str) -> Option<u32> {
    LOCATIONS.iter().find(|(l, _)| l.eq_ignore_ascii_case(location)).map(|(_, z)| *z)
}

/// The zones `size` runs in at `location` for the subscription (`Some(vec![])`: regional only, in
/// a location without zones); `None` when it does not run there at all.
pub fn offered_zones(config: &crate::world::Compute, location: &str, size: &Size) -> Option<Vec<String>> {
    let region = zones_of(location)?;
    let all: Vec<String> = (1..=region).map(|z| z.to_string()).collect();
    let key = format!("{location}/{}", size.name);
    match config.zones.iter().find(|(k, _)| k.eq_ignore_ascii_case(&key)) {
        Some((_, zones)) if zones.is_empty() => None,
        Some((_, zones)) => Some(all.into_iter().filter(|z| zones.contains(z)).collect()),
        None => Some(all),
    }
}

/// A family's vCPU limit and the regional one.
pub fn limits(config: &crate::world::Compute, family: &str) -> (u32, u32) {
    let family = config
        .family_vcpus
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(family))
        .map_or(DEFAULT_FAMILY_VCPUS, |(_, v)| *v);
    (family, config.regional_vcpus.unwrap_or(DEFAULT_REGIONAL_VCPUS))
}

/// vCPUs in use at `location`: of one family, and in all (the VMs the store holds there).
pub fn in_use(store: &super::store::Store, location: &str, family: &str) -> (u32, u32) {
    let mut of_family = 0;
    let mut all = 0;
    for vm in store.of_kind(&super::kinds::VM) {
        if !vm.body["location"].as_str().is_some_and(|l| l.eq_ignore_ascii_case(location)) {
            continue;
        }
        let Some(size) = vm.body["properties"]["hardwareProfile"]["vmSize"].as_str().and_then(find) else { continue };
        all += size.vcpus;
        if size.family.eq_ignore_ascii_case(family) {
            of_family += size.vcpus;
        }
    }
    (of_family, all)
}

/// One `ResourceSku` of a size at a location (`skus.json` `ResourceSku`): its capabilities, the
/// zones of the location, and a restriction for what the subscription may not use there
/// (`ResourceSkuRestrictions`, `reasonCode` `NotAvailableForSubscription`: type `Location` when
/// the size does not run there at all, else type `Zone` naming the zones it does not run in).
fn resource_sku(config: &crate::world::Compute, location: &str, size: &Size) -> Value {
    let region = zones_of(location).unwrap_or(0);
    let all: Vec<String> = (1..=region).map(|z| z.to_string()).collect();
    let mut restrictions = Vec::new();
    match offered_zones(config, location, size) {
        None => restrictions
            .push(json!({"type": "Location", "values": [location], "reasonCode": "NotAvailableForSubscription",
            "restrictionInfo": {"locations": [location]}})),
        Some(zones) => {
            let missing: Vec<&String> = all.iter().filter(|z| !zones.contains(z)).collect();
            if !missing.is_empty() {
                restrictions
                    .push(json!({"type": "Zone", "values": [location], "reasonCode": "NotAvailableForSubscription",
                    "restrictionInfo": {"locations": [location], "zones": missing}}));
            }
        }
    }
    let tier_size = size.name.trim_start_matches("Standard_");
    json!({
        "resourceType": "virtualMachines",
        "name": size.name,
        "tier": "Standard",
        "size": tier_size,
        "family": size.family,
        "locations": [location],
        "locationInfo": [{"location": location, "zones": all, "zoneDetails": []}],
        "capabilities": [
            {"name": "vCPUs", "value": size.vcpus.to_string()},
            {"name": "MemoryGB", "value": size.memory_gib.to_string()},
            {"name": "GPUs", "value": size.gpus.to_string()},
            {"name": "HyperVGenerations", "value": size.generations},
            {"name": "AcceleratedNetworkingEnabled", "value": "True"},
        ],
        "restrictions": restrictions,
    })
}

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/skus[?$filter=location eq 'L']`
/// (`ResourceSkus_List`): every size of the catalog at every location asked, and the `Aligned`
/// availability-set SKU CAPZ also looks for.
pub fn list(ctx: &super::Ctx) -> Result<super::Reply, super::error::ArmError> {
    super::check_api_version(ctx, SKUS_API, "skus")?;
    let filter = ctx.query.get("$filter").map(|f| super::parse_filter(f)).transpose()?.unwrap_or_default();
    let wanted = filter.iter().find(|(k, _)| k == "location").map(|(_, v)| v.clone());
    let config = &ctx.config.compute;
    let mut value = Vec::new();
    for (location, _) in LOCATIONS.iter().filter(|(l, _)| wanted.as_ref().is_none_or(|w| l.eq_ignore_ascii_case(w))) {
        for size in SIZES {
            value.push(resource_sku(config, location, size));
        }
        value.push(json!({"resourceType": "availabilitySets", "name": "Aligned", "locations": [location],
            "locationInfo": [{"location": location, "zones": [], "zoneDetails": []}],
            "capabilities": [{"name": "MaximumPlatformFaultDomainCount", "value": "2"}], "restrictions": []}));
    }
    Ok(super::Reply::json(axum::http::StatusCode::OK, json!({"value": value})))
}

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages` (`Usage_List`,
/// `ListUsagesResult`): the regional `cores` and each family's vCPUs, limit and what the VMs at
/// that location use (Microsoft Learn, "Check vCPU quotas").
pub fn usages(
    ctx: &super::Ctx,
    store: &super::store::Store,
    location: &str,
) -> Result<super::Reply, super::error::ArmError> {
    super::check_api_version(ctx, USAGES_API, "locations/usages")?;
    if zones_of(location).is_none() {
        return Err(super::error::ArmError::new(
            axum::http::StatusCode::NOT_FOUND,
            "NoRegisteredProviderFound",
            format!(
                "No registered resource provider found for location '{location}' and API version '{}' for type 'locations/usages'.",
                ctx.api_version()
            ),
        ));
    }
    let config = &ctx.config.compute;
    let usage = |name: &str, localized: String, current: u32, limit: u32| json!({"unit": "Count", "currentValue": current, "limit": limit, "name": {"value": name, "localizedValue": localized}});
    let (_, all) = in_use(store, location, "");
    let (_, regional) = limits(config, "");
    let mut value = vec![usage("cores", "Total Regional vCPUs".into(), all, regional)];
    let mut families: Vec<&str> = SIZES.iter().map(|s| s.family).collect();
    families.sort_unstable();
    families.dedup();
    for family in families {
        let (current, _) = in_use(store, location, family);
        let (limit, _) = limits(config, family);
        value.push(usage(family, localized(family), current, limit));
    }
    Ok(super::Reply::json(axum::http::StatusCode::OK, json!({"value": value})))
}

/// A family's name as the portal shows it: `standardNDASv4_A100Family` -> "Standard NDASv4_A100
/// Family vCPUs".
fn localized(family: &str) -> String {
    let core = family.trim_end_matches("Family");
    let core = core.strip_prefix("standard").or_else(|| core.strip_prefix("Standard")).unwrap_or(core);
    format!("Standard {core} Family vCPUs")
}

/// What Compute answers a VM create the subscription cannot run: a Marketplace image the location
/// does not carry (`PlatformImageNotFound`), the size not offered at the location or zone
/// (`SkuNotAvailable`), or past the family's or the region's vCPU quota (`OperationNotAllowed`),
/// worded as Azure words them (Microsoft Learn, "Resolve errors for SKU not available";
/// "Resolve quota errors"; "Troubleshoot ... PlatformImageNotFound").
pub fn create_refusal(
    config: &crate::world::Compute,
    store: &super::store::Store,
    location: &str,
    zone: Option<&str>,
    size_name: &str,
    image: Option<(&str, &str, &str, &str)>,
    subscription: &str,
) -> Option<(&'static str, String)> {
    if let Some((publisher, offer, sku, version)) = image {
        let carried = !config.without_marketplace.iter().any(|l| l.eq_ignore_ascii_case(location));
        let versions = if carried { image_versions(publisher, offer, sku) } else { Vec::new() };
        if versions.is_empty() || (version != "latest" && !versions.contains(&version)) {
            return Some((
                "PlatformImageNotFound",
                format!(
                    "The platform image '{publisher}:{offer}:{sku}:{version}' is not available. Verify that all fields in the storage profile are correct. For more details about storage profile information, please refer to https://aka.ms/storageprofile"
                ),
            ));
        }
    }
    let Some(size) = find(size_name) else {
        return Some((
            "SkuNotAvailable",
            format!(
                "The requested VM size {size_name} is not available in location '{location}'. Please try another size or deploy to a different location. See https://aka.ms/azureskunotavailable for details."
            ),
        ));
    };
    let offered = offered_zones(config, location, size);
    let zone_ok = match (&offered, zone) {
        (None, _) => false,
        (Some(zones), Some(z)) => zones.iter().any(|x| x == z),
        (Some(_), None) => true,
    };
    if !zone_ok {
        let zones = zone.map(|z| format!(" zones '{z}'")).unwrap_or_default();
        return Some((
            "SkuNotAvailable",
            format!(
                "The requested VM size '{}' is currently not available in location '{location}'{zones} for subscription '{subscription}'. Please try another size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable for details.",
                size.name
            ),
        ));
    }
    let (family_used, all_used) = in_use(store, location, size.family);
    let (family_limit, regional_limit) = limits(config, size.family);
    for (what, used, limit) in
        [(size.family.to_string(), family_used, family_limit), ("Total Regional".to_string(), all_used, regional_limit)]
    {
        if used + size.vcpus > limit {
            return Some((
                "OperationNotAllowed",
                format!(
                    "Operation could not be completed as it results in exceeding approved {what} Cores quota. Additional details - Deployment Model: Resource Manager, Location: {location}, Current Limit: {limit}, Current Usage: {used}, Additional Required: {}, (Minimum) New Limit Required: {}. Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView/Parameters/ by specifying parameters listed in the 'Details' section for deployment to succeed.",
                    size.vcpus,
                    used + size.vcpus
                ),
            ));
        }
    }
    None
}

/// The Marketplace images the world's locations carry (publisher, offer, SKU, version): RHCOS
/// without a purchase plan, `azureopenshift:aro4`, of the releases 4.18 to 4.22, Generation 1
/// (`aro_<XY>`) and 2 (`<XY>-v2`) (openshift/enhancements `enhancements/rhcos/marketplace-images.md`;
/// the version numbers are the world's, 4.22's the build the cluster's `coreos-bootimages` names).
pub const IMAGES: &[(&str, &str, &str, &str)] = &[
    ("azureopenshift", "aro4", "aro_418", "418.94.20250122"),
    ("azureopenshift", "aro4", "418-v2", "418.94.20250122"),
    ("azureopenshift", "aro4", "aro_419", "419.96.202505150000-0"),
    ("azureopenshift", "aro4", "419-v2", "419.96.202505150000-0"),
    ("azureopenshift", "aro4", "aro_420", "420.96.202508120000-0"),
    ("azureopenshift", "aro4", "420-v2", "420.96.202508120000-0"),
    ("azureopenshift", "aro4", "aro_422", crate::release::RHCOS_BUILD),
    ("azureopenshift", "aro4", "422-v2", crate::release::RHCOS_BUILD),
];

/// The versions of a Marketplace image SKU (empty: no such image).
pub fn image_versions(publisher: &str, offer: &str, sku: &str) -> Vec<&'static str> {
    IMAGES
        .iter()
        .filter(|(p, o, s, _)| {
            p.eq_ignore_ascii_case(publisher) && o.eq_ignore_ascii_case(offer) && s.eq_ignore_ascii_case(sku)
        })
        .map(|(_, _, _, v)| *v)
        .collect()
}

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/publishers/{p}/artifacttypes/vmimage/offers/{o}/skus/{k}/versions`
/// (`VirtualMachineImages_List`, 2024-03-01): an array of `VirtualMachineImageResource` (`name`
/// the version, `location`, `id`); an image the location does not carry is 404 `NotFound`
/// "Artifact: VMImage was not found." (Microsoft Learn, "Virtual Machine Images - List").
pub fn image_list(
    ctx: &super::Ctx,
    sub: &str,
    location: &str,
    image: (&str, &str, &str),
) -> Result<super::Reply, super::error::ArmError> {
    super::check_api_version(ctx, USAGES_API, "locations/publishers/artifacttypes/offers/skus/versions")?;
    let (publisher, offer, sku) = image;
    let versions = image_versions(publisher, offer, sku);
    let carried = !ctx.config.compute.without_marketplace.iter().any(|l| l.eq_ignore_ascii_case(location));
    if zones_of(location).is_none() || versions.is_empty() || !carried {
        return Err(super::error::ArmError::new(
            axum::http::StatusCode::NOT_FOUND,
            "NotFound",
            "Artifact: VMImage was not found.",
        ));
    }
    let value: Vec<Value> = versions
        .iter()
        .map(|v| {
            json!({"name": v, "location": location,
                "id": format!("/Subscriptions/{sub}/Providers/Microsoft.Compute/Locations/{location}/Publishers/{publisher}/ArtifactTypes/VMImage/Offers/{offer}/Skus/{sku}/Versions/{v}")})
        })
        .collect();
    Ok(super::Reply::json(axum::http::StatusCode::OK, json!(value)))
}

/// The size of that name (ARM compares size names without regard to case).
pub fn find(name: &str) -> Option<&'static Size> {
    SIZES.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

impl Size {
    /// Whether the size boots only Generation 2 images.
    pub fn gen2_only(&self) -> bool {
        self.generations == "V2"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_found_without_regard_to_case_and_know_their_generation() {
        let nd = find("standard_nd96asr_v4").expect("ND96asr_v4");
        assert_eq!((nd.vcpus, nd.memory_gib, nd.gpus), (96, 900, 8));
        assert!(nd.gen2_only());
        assert!(!find("Standard_NC4as_T4_v3").unwrap().gen2_only());
        assert!(find("Standard_Z1").is_none());
        assert_eq!(localized("standardNDASv4_A100Family"), "Standard NDASv4_A100 Family vCPUs");
    }

    #[test]
    fn the_offer_decides_zones_and_the_quota_counts_running_vms() {
        let nd = find("Standard_ND96asr_v4").unwrap();
        let mut config = crate::world::Compute::default();
        assert_eq!(offered_zones(&config, "usgovvirginia", nd), Some(vec!["1".into(), "2".into(), "3".into()]));
        assert_eq!(offered_zones(&config, "usgovarizona", nd), Some(vec![]));
        assert_eq!(offered_zones(&config, "mars", nd), None);
        config.zones.insert("usgovvirginia/Standard_ND96asr_v4".into(), vec!["1".into()]);
        assert_eq!(offered_zones(&config, "USGovVirginia", nd), Some(vec!["1".into()]));
        let store = super::super::store::Store::default();
        let refused =
            create_refusal(&config, &store, "usgovvirginia", Some("2"), "Standard_ND96asr_v4", None, "s").unwrap();
        assert_eq!(refused.0, "SkuNotAvailable");
        assert!(
            create_refusal(&config, &store, "usgovvirginia", Some("1"), "Standard_ND96asr_v4", None, "s").is_none()
        );
        config.family_vcpus.insert("standardNDASv4_A100Family".into(), 0);
        let refused =
            create_refusal(&config, &store, "usgovvirginia", Some("1"), "Standard_ND96asr_v4", None, "s").unwrap();
        assert_eq!(refused.0, "OperationNotAllowed");
        assert!(refused.1.contains("Current Limit: 0, Current Usage: 0, Additional Required: 96"), "{}", refused.1);
        let image = Some(("azureopenshift", "aro4", "417-v2", "latest"));
        let refused = create_refusal(&config, &store, "usgovvirginia", Some("1"), "Standard_ND96asr_v4", image, "s");
        assert_eq!(refused.unwrap().0, "PlatformImageNotFound");
        assert_eq!(image_versions("AzureOpenShift", "aro4", "422-v2"), [crate::release::RHCOS_BUILD]);
    }
}
