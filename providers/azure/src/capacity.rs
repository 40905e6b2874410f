//! What a subscription can run in a location, read before apply: the VM sizes offered to it there
//! and in which zones (Resource SKUs, `GET /subscriptions/{s}/providers/Microsoft.Compute/skus`,
//! api-version 2021-07-01, filtered by location), and its vCPU quotas with what is in use
//! (`GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages`, 2024-03-01).
//!
//! A size is offered when a `virtualMachines` SKU of that name lists the location and no
//! restriction of type `Location` names it; a zone when the SKU's `locationInfo` lists it and no
//! restriction of type `Zone` names it (Microsoft Learn, "Resource Skus - List": `restrictions`,
//! `reasonCode` `NotAvailableForSubscription` or `QuotaId`; "Resolve errors for SKU not
//! available"). Quotas: one per VM family (`name.value` the SKU's `family`) and the regional total
//! `cores` (Microsoft Learn, "Check vCPU quotas": a deployment needs both). And whether a
//! Marketplace image is in the location (`VirtualMachineImages_List`, 2024-03-01; 404 when not).

use futures::StreamExt;
use serde::Serialize;
use xcsp_core::provider::ProviderError;

use crate::AzureProvider;

/// One VM size as a location offers it to the subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeOffer {
    pub name: String,
    /// Its quota family (`family`).
    pub family: String,
    /// `vCPUs` among its capabilities.
    pub vcpus: i64,
    /// The zones it runs in there for this subscription.
    pub zones: Vec<String>,
    /// The zones the location has for it but not for this subscription.
    pub restricted_zones: Vec<String>,
    /// Not offered in the location to this subscription at all.
    pub restricted: bool,
}

/// One quota and its use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quota {
    /// `cores` or a family (`standardNDASv4_A100Family`).
    pub name: String,
    pub localized: String,
    pub current: i64,
    pub limit: i64,
}

/// The regional total every VM counts against beside its family's quota.
pub const REGIONAL_CORES: &str = "cores";

/// Azure answered 404: what was read is not there.
fn not_found(e: &azure_core::Error) -> bool {
    matches!(e.kind(), azure_core::error::ErrorKind::HttpResponse { status, .. } if u16::from(*status) == 404)
}

/// A read's failure, naming what was read.
fn failed(what: &str, e: azure_core::Error) -> ProviderError {
    let message = e.to_string();
    let first = message.lines().next().unwrap_or_default().chars().take(400).collect::<String>();
    ProviderError::Failed {
        address: "azure".into(),
        code: "CapacityRead".into(),
        message: format!("cannot read {what}: {first}"),
    }
}

impl AzureProvider {
    /// The VM sizes offered in `location`, as the Resource SKUs API lists them.
    pub async fn vm_sizes(&self, location: &str) -> Result<Vec<SizeOffer>, ProviderError> {
        let what = format!("the VM sizes of {location} (Microsoft.Compute/skus)");
        let mut pages = self
            .compute
            .resource_skus_client()
            .list(&self.config.subscription_id)
            .filter(format!("location eq '{location}'"))
            .into_stream();
        let mut skus = Vec::new();
        while let Some(page) = pages.next().await {
            skus.extend(page.map_err(|e| failed(&what, e))?.value);
        }
        Ok(skus
            .into_iter()
            .filter(|s| s.resource_type.as_deref() == Some("virtualMachines"))
            .filter(|s| s.locations.iter().any(|l| l.eq_ignore_ascii_case(location)))
            .map(|s| offer(&s, location))
            .collect())
    }

    /// The versions of a Marketplace image in `location` (`VirtualMachineImages_List`), `None` when
    /// the location does not carry it (404).
    pub async fn image_versions(
        &self,
        location: &str,
        publisher: &str,
        offer: &str,
        sku: &str,
    ) -> Result<Option<Vec<String>>, ProviderError> {
        let what = format!("the versions of image {publisher}:{offer}:{sku} in {location}");
        let listed = self
            .compute
            .virtual_machine_images_client()
            .list(location, publisher, offer, sku, &self.config.subscription_id)
            .await;
        match listed {
            Ok(images) => Ok(Some(images.into_iter().map(|i| i.name).collect())),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(failed(&what, e)),
        }
    }

    /// Whether the image a pool's `image_id` names exists: a gallery image version
    /// (`.../galleries/{g}/images/{i}/versions/{v}`, `GalleryImageVersions_Get`), a gallery image
    /// definition (`.../galleries/{g}/images/{i}`, its latest version booted;
    /// `GalleryImages_Get`) or a managed image (`.../providers/Microsoft.Compute/images/{n}`,
    /// `Images_Get`), each read in the subscription and resource group the id names. `None` for
    /// an id of another shape, which is not read.
    pub async fn image_exists(&self, id: &str) -> Result<Option<bool>, ProviderError> {
        let Some(image) = ImageId::parse(id) else { return Ok(None) };
        let what = format!("image {id}");
        let c = &self.compute;
        let read = match &image {
            ImageId::Version { sub, rg, gallery, image, version } => {
                c.gallery_image_versions_client().get(sub, rg, gallery, image, version).await.map(|_| ())
            }
            ImageId::Definition { sub, rg, gallery, image } => {
                c.gallery_images_client().get(sub, rg, gallery, image).await.map(|_| ())
            }
            ImageId::Managed { sub, rg, name } => c.images_client().get(rg, name, sub).await.map(|_| ()),
        };
        match read {
            Ok(()) => Ok(Some(true)),
            Err(e) if not_found(&e) => Ok(Some(false)),
            Err(e) => Err(failed(&what, e)),
        }
    }

    /// The subscription's compute quotas in `location` and their use.
    pub async fn quotas(&self, location: &str) -> Result<Vec<Quota>, ProviderError> {
        let what = format!("the compute quotas of {location} (Microsoft.Compute/locations/usages)");
        let mut pages = self.compute.usage_client().list(location, &self.config.subscription_id).into_stream();
        let mut usages = Vec::new();
        while let Some(page) = pages.next().await {
            usages.extend(page.map_err(|e| failed(&what, e))?.value);
        }
        Ok(usages
            .into_iter()
            .map(|u| Quota {
                name: u.name.value.unwrap_or_default(),
                localized: u.name.localized_value.unwrap_or_default(),
                current: i64::from(u.current_value),
                limit: u.limit,
            })
            .collect())
    }
}

/// The images an `image_id` may name, by the segments of its ARM id (names compared without case,
/// as ARM does).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ImageId {
    Version { sub: String, rg: String, gallery: String, image: String, version: String },
    Definition { sub: String, rg: String, gallery: String, image: String },
    Managed { sub: String, rg: String, name: String },
}

impl ImageId {
    fn parse(id: &str) -> Option<ImageId> {
        let parts: Vec<&str> = id.split('/').filter(|s| !s.is_empty()).collect();
        let key = |i: usize, k: &str| parts.get(i).is_some_and(|p| p.eq_ignore_ascii_case(k));
        let at = |i: usize| parts.get(i).map(|s| s.to_string());
        if !(key(0, "subscriptions") && key(2, "resourceGroups") && key(4, "providers") && key(5, "Microsoft.Compute"))
        {
            return None;
        }
        let (sub, rg) = (at(1)?, at(3)?);
        match parts.len() {
            12 if key(6, "galleries") && key(8, "images") && key(10, "versions") => {
                Some(ImageId::Version { sub, rg, gallery: at(7)?, image: at(9)?, version: at(11)? })
            }
            10 if key(6, "galleries") && key(8, "images") => {
                Some(ImageId::Definition { sub, rg, gallery: at(7)?, image: at(9)? })
            }
            8 if key(6, "images") => Some(ImageId::Managed { sub, rg, name: at(7)? }),
            _ => None,
        }
    }
}

fn offer(s: &azure_mgmt_compute::package_2024_03_01::models::ResourceSku, location: &str) -> SizeOffer {
    use azure_mgmt_compute::package_2024_03_01::models::resource_sku_restrictions::Type;
    let here = |l: &String| l.eq_ignore_ascii_case(location);
    let zones: Vec<String> = s
        .location_info
        .iter()
        .filter(|i| i.location.as_ref().is_some_and(here))
        .flat_map(|i| i.zones.clone())
        .collect();
    let mut restricted = false;
    let mut restricted_zones = Vec::new();
    for r in &s.restrictions {
        let info = r.restriction_info.as_ref();
        let in_location = info.is_some_and(|i| i.locations.iter().any(here)) || r.values.iter().any(here);
        match r.type_ {
            Some(Type::Location) if in_location => restricted = true,
            Some(Type::Zone) if in_location => {
                restricted_zones.extend(info.map(|i| i.zones.clone()).unwrap_or_default())
            }
            _ => {}
        }
    }
    let vcpus = s
        .capabilities
        .iter()
        .find(|c| c.name.as_deref() == Some("vCPUs"))
        .and_then(|c| c.value.as_deref()?.parse().ok())
        .unwrap_or(0);
    let mut offered: Vec<String> = zones.iter().filter(|z| !restricted_zones.contains(z)).cloned().collect();
    offered.sort();
    restricted_zones.sort();
    restricted_zones.dedup();
    SizeOffer {
        name: s.name.clone().unwrap_or_default(),
        family: s.family.clone().unwrap_or_default(),
        vcpus,
        zones: offered,
        restricted_zones,
        restricted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_ids_are_read_by_their_segments_whatever_their_case() {
        let base = "/subscriptions/s/resourceGroups/images/providers/Microsoft.Compute";
        let s = |x: &str| x.to_string();
        assert_eq!(
            ImageId::parse(&format!("{base}/galleries/rhcos/images/rhcos/versions/4.19.0")),
            Some(ImageId::Version {
                sub: s("s"),
                rg: s("images"),
                gallery: s("rhcos"),
                image: s("rhcos"),
                version: s("4.19.0")
            })
        );
        assert_eq!(
            ImageId::parse(&format!("{}/galleries/g/images/i", base.to_ascii_lowercase())),
            Some(ImageId::Definition { sub: s("s"), rg: s("images"), gallery: s("g"), image: s("i") })
        );
        assert_eq!(
            ImageId::parse(&format!("{base}/images/rhcos-4.19")),
            Some(ImageId::Managed { sub: s("s"), rg: s("images"), name: s("rhcos-4.19") })
        );
        assert_eq!(
            ImageId::parse("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v"),
            None
        );
        assert_eq!(ImageId::parse("rhcos"), None);
    }

    #[test]
    fn restrictions_take_zones_and_locations_away() {
        let sku: azure_mgmt_compute::package_2024_03_01::models::ResourceSku = serde_json::from_value(serde_json::json!({
            "resourceType": "virtualMachines", "name": "Standard_ND96asr_v4", "family": "standardNDASv4_A100Family",
            "locations": ["usgovvirginia"],
            "locationInfo": [{"location": "usgovvirginia", "zones": ["2", "1", "3"]}],
            "capabilities": [{"name": "vCPUs", "value": "96"}],
            "restrictions": [{"type": "Zone", "values": ["usgovvirginia"], "reasonCode": "NotAvailableForSubscription",
                "restrictionInfo": {"locations": ["usgovvirginia"], "zones": ["3"]}}]
        }))
        .unwrap();
        let o = offer(&sku, "USGovVirginia");
        assert_eq!(
            (o.vcpus, o.zones.clone(), o.restricted_zones.clone(), o.restricted),
            (96, vec!["1".into(), "2".into()], vec!["3".into()], false)
        );
        let mut gone = sku.clone();
        gone.restrictions[0].type_ =
            Some(azure_mgmt_compute::package_2024_03_01::models::resource_sku_restrictions::Type::Location);
        assert!(offer(&gone, "usgovvirginia").restricted);
    }
}
