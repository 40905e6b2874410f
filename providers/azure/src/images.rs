//! The release's boot image, imported: a storage account (Microsoft.Storage 2023-05-01), the
//! RHCOS VHD copied into it by Azure (the blob service's Copy Blob, authorized with the account's
//! key), a Compute Gallery, an image definition and an image version made from the blob
//! (Microsoft.Compute GalleryRP 2023-07-03).
//!
//! - The copy is Azure's: xcsp sends the source URL and polls the blob's copy status
//!   (`x-ms-copy-status` `pending`, then `success`, `failed` or `aborted`; Microsoft Learn, "Copy
//!   Blob"), never the bytes. A failed or aborted copy leaves the blob, which the next write
//!   deletes and copies again.
//! - A blob is no ARM resource and carries no tags: the stack and address go into its metadata
//!   (`x-ms-meta-xcsp_stack`, `x-ms-meta-xcsp_address`; metadata names must be C# identifiers),
//!   which refresh reads when it lists the container.
//! - The image version's create is long-running: Azure copies the blob into the gallery's
//!   replica in each target region before it answers `Succeeded`.

use std::sync::Arc;

use azure_storage::{CloudLocation, StorageCredentials};
use azure_storage_blobs::prelude::{BlobServiceClient, ClientBuilder};
use serde_json::{Value as Json, json};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, Observed, Progress, ProviderError, Request};
use xcsp_core::{Address, ResourceType as T, Value};

use crate::AzureProvider;
use crate::arm::{self, resource_tags};

/// The container the VHDs go into.
pub const CONTAINER: &str = "vhd";

fn failed(address: &Address, code: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::Failed { address: address.to_string(), code: code.into(), message: message.into() }
}

/// A blob-service error as a provider error: the service's code (`x-ms-error-code`) when it gave one.
fn blob_error(address: &Address, e: azure_core::Error) -> ProviderError {
    match e.as_http_error() {
        Some(h) if u16::from(h.status()) == 404 => ProviderError::NotFound { address: address.to_string() },
        Some(h) => failed(
            address,
            h.error_code().unwrap_or("BlobServiceError"),
            format!("HTTP {}: {}", u16::from(h.status()), h.error_message().unwrap_or_default()),
        ),
        None => failed(address, "BlobService", e.to_string()),
    }
}

pub fn storage_account_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    Ok(json!({
        "location": d.str("location")?,
        "tags": resource_tags(d, stack),
        "sku": {"name": d.str("sku")?},
        "kind": d.str("kind")?,
        // What a regulated subscription's policy asks of a storage account (and what the
        // OpenShift installer sets on its own): no anonymous reads, TLS 1.2, HTTPS only.
        "properties": {
            "allowBlobPublicAccess": false,
            "minimumTlsVersion": "TLS1_2",
            "supportsHttpsTrafficOnly": true,
        },
    }))
}

pub fn read_storage_account(body: &Json) -> Attributes {
    let mut out = arm::read_common(body);
    if let Some(sku) = body["sku"]["name"].as_str() {
        out.insert("sku".into(), Value::string(sku));
    }
    if let Some(kind) = body["kind"].as_str() {
        out.insert("kind".into(), Value::string(kind));
    }
    if let Some(blob) = body["properties"]["primaryEndpoints"]["blob"].as_str() {
        out.insert("blob_endpoint".into(), Value::string(blob));
    }
    out
}

pub fn gallery_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    Ok(json!({
        "location": d.str("location")?,
        "tags": resource_tags(d, stack),
        "properties": {"description": format!("Boot images of xcsp stack {stack}")},
    }))
}

pub fn read_gallery(body: &Json) -> Attributes {
    arm::read_common(body)
}

pub fn gallery_image_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    Ok(json!({
        "location": d.str("location")?,
        "tags": resource_tags(d, stack),
        "properties": {
            "osType": d.str("os_type")?,
            "osState": "Generalized",
            "hyperVGeneration": d.str("hyper_v_generation")?,
            "architecture": d.str("architecture")?,
            "identifier": d.json("identifier")?,
        },
    }))
}

pub fn read_gallery_image(body: &Json) -> Attributes {
    let mut out = arm::read_common(body);
    let p = &body["properties"];
    for (key, field) in
        [("os_type", "osType"), ("hyper_v_generation", "hyperVGeneration"), ("architecture", "architecture")]
    {
        if let Some(v) = p[field].as_str() {
            out.insert(key.into(), Value::string(v));
        }
    }
    if p["identifier"].is_object() {
        out.insert("identifier".into(), Value::from_json(&p["identifier"]));
    }
    if let Some(gallery) = body["id"].as_str().and_then(|id| id.rsplit('/').nth(2)) {
        out.insert("gallery".into(), Value::string(gallery));
    }
    out
}

pub fn gallery_image_version_body(d: &Reader, stack: &str) -> Result<Json, ProviderError> {
    let location = d.str("location")?;
    Ok(json!({
        "location": location,
        "tags": resource_tags(d, stack),
        "properties": {
            "publishingProfile": {
                "targetRegions": [{"name": location, "regionalReplicaCount": 1, "storageAccountType": "Standard_LRS"}],
                "replicaCount": 1,
                "storageAccountType": "Standard_LRS",
            },
            "storageProfile": {"osDiskImage": {
                "hostCaching": "ReadOnly",
                "source": {"uri": d.str("source_uri")?, "storageAccountId": d.str("storage_account_id")?},
            }},
        },
    }))
}

pub fn read_gallery_image_version(body: &Json) -> Attributes {
    let mut out = arm::read_common(body);
    let p = &body["properties"];
    let source = &p["storageProfile"]["osDiskImage"]["source"];
    if let Some(uri) = source["uri"].as_str() {
        out.insert("source_uri".into(), Value::string(uri));
    }
    if let Some(account) = source["storageAccountId"].as_str() {
        out.insert("storage_account_id".into(), Value::string(account));
    }
    if let Some(id) = body["id"].as_str() {
        let mut up = id.rsplit('/');
        if let (Some(image), Some(gallery)) = (up.nth(2), up.nth(1)) {
            out.insert("image".into(), Value::string(image));
            out.insert("gallery".into(), Value::string(gallery));
        }
    }
    let state = p["provisioningState"].as_str().unwrap_or("Succeeded");
    out.insert("provisioning_state".into(), Value::string(state));
    out
}

/// A blob as refresh records it: its URL (its id), where it is and what it was copied from.
fn read_blob(account: &str, endpoint: &str, blob: &azure_storage_blobs::blob::Blob, rg: &str) -> (String, Attributes) {
    let url = format!("{}/{CONTAINER}/{}", endpoint.trim_end_matches('/'), blob.name);
    let mut attributes = Attributes::new();
    attributes.insert("name".into(), Value::string(&blob.name));
    attributes.insert("resource_group".into(), Value::string(rg));
    attributes.insert("storage_account".into(), Value::string(account));
    attributes.insert("container".into(), Value::string(CONTAINER));
    attributes.insert("url".into(), Value::string(&url));
    if let Some(source) = &blob.properties.copy_source {
        attributes.insert("source_uri".into(), Value::string(source));
    }
    let copied = blob.properties.copy_status.as_ref().map(|s| format!("{s:?}").to_ascii_lowercase());
    attributes.insert("copy_status".into(), Value::string(copied.unwrap_or_else(|| "success".into())));
    (url, attributes)
}

impl AzureProvider {
    /// A blob client of the stack's storage account `account`, with its key (List Keys) and its
    /// blob endpoint as ARM names it (`primaryEndpoints.blob`: each cloud has its own suffix).
    async fn blob_service(
        &self,
        address: &Address,
        progress: &dyn Progress,
        rg: &str,
        account: &str,
    ) -> Result<(BlobServiceClient, String), ProviderError> {
        let sub = self.config.subscription_id.as_str();
        let c = self.storage.storage_accounts_client();
        let body = self
            .retry(address, progress, || {
                let get = c.get_properties(rg, account, sub);
                async move { get.await.map(|m| serde_json::to_value(&m).unwrap_or(Json::Null)) }
            })
            .await?;
        let endpoint = body["properties"]["primaryEndpoints"]["blob"]
            .as_str()
            .ok_or_else(|| {
                failed(address, "NoBlobEndpoint", format!("storage account {account} names no blob endpoint"))
            })?
            .trim_end_matches('/')
            .to_string();
        let keys = self.retry(address, progress, || c.list_keys(rg, account, sub).into_future()).await?;
        let key = keys
            .keys
            .iter()
            .find_map(|k| k.value.clone())
            .ok_or_else(|| failed(address, "NoAccountKey", format!("storage account {account} gave no key")))?;
        // Signed by our policy through the crypto module; azure_storage itself signs nothing.
        let signer =
            crate::shared_key::SharedKey::new(account, &key).map_err(|m| failed(address, "NoAccountKey", m))?;
        let mut options = self.storage_options.clone();
        options.per_retry_policies_mut().insert(0, Arc::new(signer));
        let location = CloudLocation::Custom { account: account.to_string(), uri: endpoint.clone() };
        let client = ClientBuilder::with_location(location, StorageCredentials::anonymous())
            .client_options(options)
            .blob_service_client();
        Ok((client, endpoint))
    }

    /// Copies the VHD into the blob (after the container), waits for Azure to finish the copy.
    pub(crate) async fn put_blob(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed, ProviderError> {
        let (address, stack) = (req.address, req.stack);
        let d = Reader::new(address, req.attributes);
        let rg = self.resource_group(&d);
        let (account, name, source) = (d.str("storage_account")?, d.str("name")?, d.str("source_uri")?);
        let (service, endpoint) = self.blob_service(address, progress, &rg, &account).await?;
        let container = service.container_client(CONTAINER);
        match container.create().await {
            Ok(_) => {}
            Err(e) if e.as_http_error().is_some_and(|h| u16::from(h.status()) == 409) => {}
            Err(e) => return Err(blob_error(address, e)),
        }
        let blob = container.blob_client(&name);
        // A blob copied (or copying) from this source is kept; one whose copy failed, or copied
        // from another source, is deleted and copied again.
        use azure_storage_blobs::blob::CopyStatus;
        let kept = match blob.get_properties().await {
            Ok(props) => {
                let p = &props.blob.properties;
                let keep = p.copy_source.as_deref() == Some(source.as_str())
                    && !matches!(p.copy_status, Some(CopyStatus::Failed | CopyStatus::Aborted));
                if !keep {
                    blob.delete().await.map_err(|e| blob_error(address, e))?;
                }
                keep
            }
            Err(_) => false,
        };
        if !kept {
            let url = azure_core::Url::parse(&source)
                .map_err(|e| failed(address, "InvalidSource", format!("the VHD URL {source} is not a URL: {e}")))?;
            let mut metadata = azure_core::request_options::Metadata::new();
            metadata.insert("xcsp_stack", stack.to_string());
            metadata.insert("xcsp_address", address.to_string());
            blob.copy(url).metadata(metadata).await.map_err(|e| blob_error(address, e))?;
        }
        loop {
            let props = blob.get_properties().await.map_err(|e| blob_error(address, e))?;
            let p = &props.blob.properties;
            match p.copy_status {
                Some(CopyStatus::Success) | None => break,
                Some(CopyStatus::Pending) => {
                    // The copy goes on in Azure past our deadline; the next apply finds it and waits.
                    let budget = crate::transport::budget();
                    if budget.exceeded_after(self.session.poll_interval) {
                        return Err(ProviderError::Timeout {
                            address: address.to_string(),
                            operation: budget.operation,
                            timeout: budget.timeout,
                        });
                    }
                    let done = p.copy_progress.as_ref().map(|c| format!(" ({c:?})")).unwrap_or_default();
                    progress.waiting(address, &format!("Azure is copying the RHCOS VHD into {account}{done}"));
                    tokio::time::sleep(self.session.poll_interval).await;
                }
                Some(CopyStatus::Failed | CopyStatus::Aborted) => {
                    return Err(failed(
                        address,
                        "CopyFailed",
                        format!(
                            "Azure could not copy {source}: {}",
                            p.copy_status_description.as_deref().unwrap_or("no reason given")
                        ),
                    ));
                }
            }
        }
        let props = blob.get_properties().await.map_err(|e| blob_error(address, e))?;
        let (id, attributes) = read_blob(&account, &endpoint, &props.blob, &rg);
        Ok(Observed { address: address.clone(), id, attributes })
    }

    /// Deletes the blob; an account or container already gone has none.
    pub(crate) async fn remove_blob(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<(), ProviderError> {
        let address = req.address;
        let d = Reader::new(address, req.attributes);
        let rg = self.resource_group(&d);
        let (Some(account), Some(name)) = (d.opt_str("storage_account"), d.opt_str("name")) else { return Ok(()) };
        let service = match self.blob_service(address, progress, &rg, &account).await {
            Ok((s, _)) => s,
            Err(e) if arm::gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        match service.container_client(CONTAINER).blob_client(&name).delete().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_http_error().is_some_and(|h| u16::from(h.status()) == 404) => Ok(()),
            Err(e) => Err(blob_error(address, e)),
        }
    }

    /// The blobs of the stack in the container of each of `accounts` (the storage accounts of the
    /// stack, as refresh listed them): those whose URL state records, or whose metadata names the
    /// stack.
    pub(crate) async fn list_blobs(
        &self,
        stack: &str,
        known: &[Observed],
        accounts: &[String],
    ) -> Result<Vec<Observed>, ProviderError> {
        use futures::StreamExt;
        let rg = self.config.resource_group.clone();
        let probe = Address::new(T::AzureStorageBlob, "refresh");
        let mut out = Vec::new();
        for account in accounts {
            let (service, endpoint) = match self.blob_service(&probe, &crate::Quiet, &rg, account).await {
                Ok(s) => s,
                Err(e) if arm::gone(&e) => continue,
                Err(e) => return Err(e),
            };
            let mut pages = service.container_client(CONTAINER).list_blobs().include_metadata(true).into_stream();
            while let Some(page) = pages.next().await {
                let page = match page {
                    Ok(p) => p,
                    Err(e) if e.as_http_error().is_some_and(|h| u16::from(h.status()) == 404) => break,
                    Err(e) => return Err(blob_error(&probe, e)),
                };
                for blob in page.blobs.blobs() {
                    let (url, attributes) = read_blob(account, &endpoint, blob, &rg);
                    let meta = |k: &str| blob.metadata.as_ref().and_then(|m| m.get(k)).cloned();
                    let recorded = known
                        .iter()
                        .find(|k| k.address.rtype == T::AzureStorageBlob && k.id.eq_ignore_ascii_case(&url))
                        .map(|k| k.address.clone());
                    let tagged = (meta("xcsp_stack").as_deref() == Some(stack))
                        .then(|| meta("xcsp_address").and_then(|a| a.parse::<Address>().ok()))
                        .flatten();
                    if let Some(address) = recorded.or(tagged).filter(|a| a.rtype == T::AzureStorageBlob) {
                        out.push(Observed { address, id: url, attributes });
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The client options of the blob service's pipeline: our transport (its retries and deadlines),
/// azure_core's retry off, and the request's key-signed `Authorization` sealed away from
/// azure_core's debug log after the storage crate signs it (its signing policy is the last of
/// its own, so the seal goes after it, among the options' per-retry policies).
pub(crate) fn storage_options(transport: Arc<crate::transport::Transport>) -> azure_core::ClientOptions {
    let mut options = azure_core::ClientOptions::new(azure_core::TransportOptions::new_custom_policy(transport))
        .retry(azure_core::RetryOptions::none());
    options.per_retry_policies_mut().push(Arc::new(crate::transport::Seal));
    options
}
