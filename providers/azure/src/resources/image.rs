//! The pool's boot image: the storage account and the VHD blob, the compute gallery, its image
//! definition and version. Each type's handler: its write, delete and list.

use serde_json::Value as Json;
use xcsp_core::ResourceType as T;
use xcsp_core::provider::{Attributes, Observed, ProviderError};

use super::{Listing, Put, Remove, model, to_json};

/// `azure_storage_account`.
pub(super) mod storage_account {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let name = d.str("name")?;
        let c = p.storage.storage_accounts_client();
        w.send(
            "storage account",
            crate::images::read_storage_account,
            crate::images::storage_account_body(&d, stack)?,
            |m: azure_mgmt_storage::package_2023_05::models::StorageAccountCreateParameters| {
                raw!(c.create(rg, &name, m, sub).send())
            },
            || as_json!(c.get_properties(rg, &name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let (name, c) = (r.name(), p.storage.storage_accounts_client());
        r.delete("storage account", || raw!(c.delete(rg, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let c = p.storage.storage_accounts_client();
        Ok(l.tagged(
            p.list_all(rtype, || all_pages!(c.list_by_resource_group(rg, sub))).await?,
            crate::images::read_storage_account,
        ))
    }
}

/// `azure_storage_blob`.
pub(super) mod storage_blob {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        w.p.put_blob(w.req, w.progress).await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        r.p.remove_blob(r.req, r.progress).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, stack, rtype, known, sub, rg, .. } = *l;
        // In the container of each storage account of the stack.
        let c = p.storage.storage_accounts_client();
        let accounts: Vec<String> = p
            .list_all(rtype, || all_pages!(c.list_by_resource_group(rg, sub)))
            .await?
            .iter()
            .filter(|j| l.ours(j))
            .filter_map(|j| j["name"].as_str().map(str::to_string))
            .collect();
        Ok(p.list_blobs(stack, known, &accounts).await?)
    }
}

/// `azure_gallery`.
pub(super) mod gallery {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let name = d.str("name")?;
        let c = p.compute.galleries_client();
        w.send(
            "compute gallery",
            crate::images::read_gallery,
            crate::images::gallery_body(&d, stack)?,
            |m: azure_mgmt_compute::package_2024_03_01::models::Gallery| {
                raw!(c.create_or_update(sub, rg, &name, m).send())
            },
            || as_json!(c.get(sub, rg, &name)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let (name, c) = (r.name(), p.compute.galleries_client());
        r.delete("compute gallery", || raw!(c.delete(sub, rg, &name).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let c = p.compute.galleries_client();
        Ok(l.tagged(
            p.list_all(rtype, || all_pages!(c.list_by_resource_group(sub, rg))).await?,
            crate::images::read_gallery,
        ))
    }
}

/// `azure_gallery_image`.
pub(super) mod gallery_image {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let (name, gallery) = (d.str("name")?, d.str("gallery")?);
        let c = p.compute.gallery_images_client();
        w.send(
            "image definition",
            crate::images::read_gallery_image,
            crate::images::gallery_image_body(&d, stack)?,
            |m: azure_mgmt_compute::package_2024_03_01::models::GalleryImage| {
                raw!(c.create_or_update(sub, rg, &gallery, &name, m).send())
            },
            || as_json!(c.get(sub, rg, &gallery, &name)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, d, sub, rg, .. } = *r;
        let name = r.name();
        let gallery = r.segment(2).map(str::to_string).or_else(|| d.opt_str("gallery")).unwrap_or_default();
        let c = p.compute.gallery_images_client();
        r.delete("image definition", || raw!(c.delete(sub, rg, &gallery, &name).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        list_images(l).await
    }
}

/// `azure_gallery_image_version`.
pub(super) mod gallery_image_version {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, progress, d, sub, rg, .. } = *w;
        let (address, stack) = (req.address, req.stack);
        let read: fn(&Json) -> Attributes = crate::images::read_gallery_image_version;
        let (name, gallery, image) = (d.str("name")?, d.str("gallery")?, d.str("image")?);
        let m: azure_mgmt_compute::package_2024_03_01::models::GalleryImageVersion =
            model(address, crate::images::gallery_image_version_body(&d, stack)?)?;
        let c = p.compute.gallery_image_versions_client();
        let get = || as_json!(c.get(sub, rg, &gallery, &image, &name));
        let body = match p.adopt_in_flight(req, progress, "Azure is making the image version", get, read).await? {
            Some(done) => done,
            None => {
                p.write(
                    address,
                    progress,
                    "Azure is making the image version from the VHD and replicating it (typically 10-30 minutes)",
                    || raw!(c.create_or_update(sub, rg, &gallery, &image, &name, m.clone()).send()),
                    get,
                )
                .await?
            }
        };
        Ok(w.observed(&body, read))
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, d, sub, rg, .. } = *r;
        let name = r.name();
        let image = r.segment(2).map(str::to_string).or_else(|| d.opt_str("image")).unwrap_or_default();
        let gallery = r.segment(4).map(str::to_string).or_else(|| d.opt_str("gallery")).unwrap_or_default();
        let c = p.compute.gallery_image_versions_client();
        r.delete("image version", || raw!(c.delete(sub, rg, &gallery, &image, &name).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        list_images(l).await
    }
}

/// The definitions or the versions of every gallery of the stack: one list per gallery (and per
/// definition, for versions).
async fn list_images(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
    let Listing { p, rtype, known, sub, rg, .. } = *l;
    let galleries = p.compute.galleries_client();
    let mut out = Vec::new();
    for g in p.list_all(rtype, || all_pages!(galleries.list_by_resource_group(sub, rg))).await? {
        if !l.ours(&g)
            && !known
                .iter()
                .any(|k| k.id.to_ascii_lowercase().starts_with(&g["id"].as_str().unwrap_or("-").to_ascii_lowercase()))
        {
            continue;
        }
        let gallery = g["name"].as_str().unwrap_or_default().to_string();
        let c = p.compute.gallery_images_client();
        let images = p.list_all(rtype, || all_pages!(c.list_by_gallery(sub, rg, &gallery))).await?;
        if rtype == T::AzureGalleryImage {
            out.extend(l.tagged(images, crate::images::read_gallery_image));
            continue;
        }
        let v = p.compute.gallery_image_versions_client();
        for image in images {
            let image = image["name"].as_str().unwrap_or_default().to_string();
            let versions = p.list_all(rtype, || all_pages!(v.list_by_gallery_image(sub, rg, &gallery, &image))).await?;
            out.extend(l.tagged(versions, crate::images::read_gallery_image_version));
        }
    }
    Ok(out)
}
