//! The pool's boot image: the storage account and the VHD blob, the compute gallery, its image
//! definition and version. Each type's handler: its write, delete and list.

use serde_json::Value as Json;
use xcsp_core::ResourceType as T;
use xcsp_core::provider::{Attributes, BoxFuture, Observed, ProviderError};

use super::{Kind, Listing, Put, Remove, model, to_json};

/// `azure_storage_account`.
pub(crate) struct StorageAccountKind;

impl Kind for StorageAccountKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let read: fn(&Json) -> Attributes = crate::images::read_storage_account;
            let name = d.str("name")?;
            let m: azure_mgmt_storage::package_2023_05::models::StorageAccountCreateParameters =
                model(address, crate::images::storage_account_body(&d, stack)?)?;
            let c = p.storage.storage_accounts_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("storage account"),
                    || raw!(c.create(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get_properties(rg, &name, sub)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, sub, rg, .. } = *r;
            let address = req.address;
            let (name, c) = (r.name(), p.storage.storage_accounts_client());
            p.delete_with(address, progress, &r.deleting("storage account"), || raw!(c.delete(rg, &name, sub).send()))
                .await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, rtype, sub, rg, .. } = *l;
            let c = p.storage.storage_accounts_client();
            Ok(l.tagged(
                p.list_all(rtype, || all_pages!(c.list_by_resource_group(rg, sub))).await?,
                crate::images::read_storage_account,
            ))
        })
    }
}

/// `azure_storage_blob`.
pub(crate) struct StorageBlobKind;

impl Kind for StorageBlobKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(w.p.put_blob(w.req, w.progress))
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(r.p.remove_blob(r.req, r.progress))
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
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
        })
    }
}

/// `azure_gallery`.
pub(crate) struct GalleryKind;

impl Kind for GalleryKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let read: fn(&Json) -> Attributes = crate::images::read_gallery;
            let name = d.str("name")?;
            let m: azure_mgmt_compute::package_2024_03_01::models::Gallery =
                model(address, crate::images::gallery_body(&d, stack)?)?;
            let c = p.compute.galleries_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("compute gallery"),
                    || raw!(c.create_or_update(sub, rg, &name, m.clone()).send()),
                    || as_json!(c.get(sub, rg, &name)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, sub, rg, .. } = *r;
            let address = req.address;
            let (name, c) = (r.name(), p.compute.galleries_client());
            p.delete_with(address, progress, &r.deleting("compute gallery"), || raw!(c.delete(sub, rg, &name).send()))
                .await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, rtype, sub, rg, .. } = *l;
            let c = p.compute.galleries_client();
            Ok(l.tagged(
                p.list_all(rtype, || all_pages!(c.list_by_resource_group(sub, rg))).await?,
                crate::images::read_gallery,
            ))
        })
    }
}

/// `azure_gallery_image`.
pub(crate) struct GalleryImageKind;

impl Kind for GalleryImageKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let read: fn(&Json) -> Attributes = crate::images::read_gallery_image;
            let (name, gallery) = (d.str("name")?, d.str("gallery")?);
            let m: azure_mgmt_compute::package_2024_03_01::models::GalleryImage =
                model(address, crate::images::gallery_image_body(&d, stack)?)?;
            let c = p.compute.gallery_images_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("image definition"),
                    || raw!(c.create_or_update(sub, rg, &gallery, &name, m.clone()).send()),
                    || as_json!(c.get(sub, rg, &gallery, &name)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, d, sub, rg, .. } = *r;
            let address = req.address;
            let name = r.name();
            let gallery = r.segment(2).map(str::to_string).or_else(|| d.opt_str("gallery")).unwrap_or_default();
            let c = p.compute.gallery_images_client();
            p.delete_with(address, progress, &r.deleting("image definition"), || {
                raw!(c.delete(sub, rg, &gallery, &name).send())
            })
            .await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(list_images(l))
    }
}

/// `azure_gallery_image_version`.
pub(crate) struct GalleryImageVersionKind;

impl Kind for GalleryImageVersionKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
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
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, d, sub, rg, .. } = *r;
            let address = req.address;
            let name = r.name();
            let image = r.segment(2).map(str::to_string).or_else(|| d.opt_str("image")).unwrap_or_default();
            let gallery = r.segment(4).map(str::to_string).or_else(|| d.opt_str("gallery")).unwrap_or_default();
            let c = p.compute.gallery_image_versions_client();
            p.delete_with(address, progress, &r.deleting("image version"), || {
                raw!(c.delete(sub, rg, &gallery, &image, &name).send())
            })
            .await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(list_images(l))
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
