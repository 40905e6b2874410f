//! What Azure refuses around an imported boot image: storage account names, a gallery image
//! version from a blob that is not there (or not yet copied), a gallery or definition deleted
//! while it holds definitions or versions, and a VM booted from a gallery image its size cannot
//! run.
//!
//! Sources: GalleryRP 2023-07-03 `gallery.json` (`GalleryDiskImageSource`: `uri` "Currently used
//! to specify vhd/blob source", `storageAccountId` "the Storage Account Id that contains the vhd
//! blob"; a version name is `Major.Minor.Patch` of 32-bit integers; image definition names are
//! letters, digits, dots and dashes); Microsoft Learn, "Resolve errors for storage account names"
//! (`AccountNameInvalid`: 3-24 lowercase letters and digits; `StorageAccountAlreadyTaken`);
//! deleting a resource with nested resources is 409 `CannotDeleteResource` ("Cannot delete
//! resource while nested resources exist", as Azure answers for a gallery or a definition);
//! a Generation 1 image on a Generation 2 size is refused as for Marketplace images
//! ([`super::compute::generation_refusal`]).

use super::error::ArmError;
use super::kinds::{self, Kind};
use super::refs::is;
use super::store::{Resource, Store};
use serde_json::Value;

/// Refusals of a PUT of a storage account or gallery resource.
pub fn check_put(
    store: &Store,
    kind: &'static Kind,
    id: &str,
    body: &Value,
    now: std::time::Instant,
) -> Result<(), ArmError> {
    let name = id.rsplit('/').next().unwrap_or_default();
    if is(kind, &kinds::STORAGE_ACCOUNT) {
        let valid =
            (3..=24).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !valid {
            return Err(ArmError::bad_request(
                "AccountNameInvalid",
                format!(
                    "{name} is not a valid storage account name. Storage account name must be between 3 and 24 characters in length and use numbers and lower-case letters only."
                ),
            ));
        }
        if store.storage_account_named(name).is_some_and(|r| !r.id.eq_ignore_ascii_case(id)) {
            return Err(ArmError::conflict(
                "StorageAccountAlreadyTaken",
                format!("The storage account named {name} is already taken."),
            ));
        }
    } else if is(kind, &kinds::GALLERY_IMAGE) {
        let p = &body["properties"];
        if !matches!(p["hyperVGeneration"].as_str(), None | Some("V1" | "V2")) {
            return Err(ArmError::bad_request(
                "InvalidParameter",
                "The value of parameter hyperVGeneration is invalid.",
            ));
        }
        if !matches!(p["architecture"].as_str(), None | Some("x64" | "Arm64")) {
            return Err(ArmError::bad_request("InvalidParameter", "The value of parameter architecture is invalid."));
        }
        if p["osType"].as_str().is_none() || p["identifier"]["publisher"].as_str().is_none() {
            return Err(ArmError::bad_request(
                "InvalidParameter",
                "Required parameters 'osType' and 'identifier' (publisher, offer, sku) are missing.",
            ));
        }
    } else if is(kind, &kinds::GALLERY_IMAGE_VERSION) {
        let parts: Vec<&str> = name.split('.').collect();
        if parts.len() != 3 || !parts.iter().all(|p| p.parse::<i32>().is_ok_and(|n| n >= 0)) {
            return Err(ArmError::bad_request(
                "InvalidParameter",
                format!(
                    "The gallery image version name '{name}' is invalid. It must follow the format <MajorVersion>.<MinorVersion>.<Patch> of 32-bit integers."
                ),
            ));
        }
        let source = &body["properties"]["storageProfile"]["osDiskImage"]["source"];
        let (Some(uri), Some(account_id)) = (source["uri"].as_str(), source["storageAccountId"].as_str()) else {
            return Err(ArmError::bad_request(
                "InvalidParameter",
                "storageProfile.osDiskImage.source needs the blob's uri and its storageAccountId.",
            ));
        };
        let readable = blob_of(store, uri, account_id).is_some_and(|b| b.copied(now));
        if !readable {
            return Err(ArmError::bad_request(
                "InvalidParameter",
                format!(
                    "The source blob '{uri}' is not accessible, or its copy has not completed, in storage account '{account_id}'."
                ),
            ));
        }
    }
    Ok(())
}

/// The blob a gallery source names: `{account endpoint}/{container}/{blob}` in the account of
/// `account_id`.
fn blob_of<'s>(store: &'s Store, uri: &str, account_id: &str) -> Option<&'s super::blob::Blob> {
    let account = store.blob_account(account_id)?;
    let marker = super::blob::endpoint("", &store.get(account_id)?.name);
    let rest = &uri[uri.find(&marker)? + marker.len()..];
    let (container, blob) = rest.split_once('/')?;
    store.blobs.find(&account, container, blob)
}

/// A gallery or image definition deleted while it still holds definitions or versions.
pub fn check_delete(store: &Store, kind: &'static Kind, r: &Resource) -> Result<(), ArmError> {
    let child = if is(kind, &kinds::GALLERY) {
        &kinds::GALLERY_IMAGE
    } else if is(kind, &kinds::GALLERY_IMAGE) {
        &kinds::GALLERY_IMAGE_VERSION
    } else {
        return Ok(());
    };
    if store.children(&r.id, child).is_empty() {
        return Ok(());
    }
    Err(ArmError::conflict(
        "CannotDeleteResource",
        "Cannot delete resource while nested resources exist. Some existing nested resource IDs include: '…'. Please delete all nested resources before deleting this resource.",
    ))
}

/// A VM's `imageReference.id` when it names a gallery image version: refused unless the version
/// exists and finished, and its definition's generation and architecture fit the size (the
/// world's sizes are all x64).
pub fn vm_image(store: &Store, size: &str, id: &str) -> Result<(), ArmError> {
    if !id.to_ascii_lowercase().contains("/providers/microsoft.compute/galleries/") {
        return Ok(());
    }
    let missing = || {
        ArmError::new(
            axum::http::StatusCode::NOT_FOUND,
            "GalleryImageNotFound",
            format!("The gallery image {id} is not available in this region or does not exist."),
        )
    };
    let version = store.get(id).ok_or_else(missing)?;
    if version.body["properties"]["provisioningState"].as_str().is_some_and(|s| s != "Succeeded") {
        return Err(ArmError::conflict(
            "ImageVersionNotReady",
            format!(
                "The gallery image version {id} is still being replicated (provisioningState {}).",
                version.body["properties"]["provisioningState"]
            ),
        ));
    }
    let definition_id = id.rsplitn(3, '/').nth(2).unwrap_or_default();
    let definition = store.get(definition_id).ok_or_else(missing)?;
    let p = &definition.body["properties"];
    if p["hyperVGeneration"].as_str() == Some("V1") && super::skus::find(size).is_some_and(|s| s.gen2_only()) {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "The selected VM size '{size}' cannot boot Hypervisor Generation '1'. If this was a Create operation please check that the Hypervisor Generation of the Image matches the Hypervisor Generation of the selected VM Size. If this was an Update operation please select a Hypervisor Generation '1' VM Size. For more information, see https://aka.ms/azuregen2vm"
            ),
        ));
    }
    if p["architecture"].as_str() == Some("Arm64") {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "Cannot create a VM of size '{size}' because this VM size only supports a CPU Architecture of 'x64', but an image or disk with CPU Architecture 'Arm64' was given."
            ),
        ));
    }
    Ok(())
}
