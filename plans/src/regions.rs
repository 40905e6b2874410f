//! What xcsp knows of Azure regions: which have availability zones.
//!
//! From Microsoft Learn, "Azure regions list" (reliability/regions-list, 2025-09) for the public
//! cloud, and "Azure regions with availability zone support" for Azure Government, where US Gov
//! Virginia is the only region listed with zones. A zonal resource (a public IP with `zones`, a
//! VM in a zone) in a region without zones is refused by ARM with
//! `LocationNotSupportAvailabilityZones`.

/// Public and Government regions with availability zones (programmatic names).
const WITH_ZONES: &[&str] = &[
    "australiaeast",
    "austriaeast",
    "belgiumcentral",
    "brazilsouth",
    "canadacentral",
    "centralindia",
    "centralus",
    "chilecentral",
    "eastasia",
    "eastus",
    "eastus2",
    "francecentral",
    "germanywestcentral",
    "indonesiacentral",
    "israelcentral",
    "italynorth",
    "japaneast",
    "japanwest",
    "koreacentral",
    "malaysiawest",
    "mexicocentral",
    "newzealandnorth",
    "northeurope",
    "norwayeast",
    "polandcentral",
    "qatarcentral",
    "southafricanorth",
    "southcentralus",
    "southeastasia",
    "spaincentral",
    "swedencentral",
    "switzerlandnorth",
    "uaenorth",
    "uksouth",
    "westeurope",
    "westus2",
    "westus3",
    "usgovvirginia",
];

/// Regions the same sources list without availability zones.
const WITHOUT_ZONES: &[&str] = &[
    "australiacentral",
    "australiacentral2",
    "australiasoutheast",
    "brazilsoutheast",
    "canadaeast",
    "francesouth",
    "germanynorth",
    "koreasouth",
    "northcentralus",
    "norwaywest",
    "southafricawest",
    "southindia",
    "switzerlandwest",
    "uaecentral",
    "ukwest",
    "westcentralus",
    "westindia",
    "westus",
    "usgovarizona",
    "usgovtexas",
    "usdodeast",
    "usdodcentral",
];

/// Whether `location` has availability zones: `None` for a region xcsp does not know.
pub fn has_zones(location: &str) -> Option<bool> {
    let l = location.to_ascii_lowercase();
    if WITH_ZONES.contains(&l.as_str()) {
        Some(true)
    } else if WITHOUT_ZONES.contains(&l.as_str()) {
        Some(false)
    } else {
        None
    }
}
