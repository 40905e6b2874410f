//! The blob service of the world's storage accounts, path-style under `/_blob/{account}/` (each
//! account's `primaryEndpoints.blob`): what importing a boot image calls.
//!
//! - Create Container (`PUT /{container}?restype=container`): 201, or 409 `ContainerAlreadyExists`.
//! - Copy Blob (`PUT /{container}/{blob}` with `x-ms-copy-source`): 202 with `x-ms-copy-id` and
//!   `x-ms-copy-status: pending`; the copy then runs in the service and ends `success` after a
//!   while. A source the service cannot read is refused at once, 404 `CannotVerifyCopySource`.
//!   The copy is asynchronous and takes page blobs (Microsoft Learn, "Copy Blob").
//! - Get Blob Properties (`HEAD`): the copy's status and progress (`x-ms-copy-status`,
//!   `x-ms-copy-progress` as `copied/total` bytes).
//! - Delete Blob; List Blobs (`GET /{container}?restype=container&comp=list`, with metadata).
//!
//! Every request is authorized with the account's key (Shared Key: `Authorization: SharedKey
//! {account}:{signature}`, the HMAC-SHA256 of the request's canonical string under the key;
//! Microsoft Learn, "Authorize with Shared Key"); a wrong or missing signature is 403
//! `AuthenticationFailed`, as the service answers.
//!
//! The world publishes the release's RHCOS VHDs at their real URLs ([`published_vhd`]); the
//! sim never fetches anything.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Where the world serves an account's blob service: `{base}/_blob/{account}/` (its
/// `primaryEndpoints.blob`).
pub const PATH: &str = "/_blob/";

/// An account's blob endpoint on the world at `base`.
pub fn endpoint(base: &str, account: &str) -> String {
    format!("{base}{PATH}{}/", account.to_ascii_lowercase())
}

/// One copied blob.
#[derive(Debug, Clone)]
pub struct Blob {
    pub source: String,
    pub copy_id: String,
    pub size: u64,
    pub started: Instant,
    pub done_at: Instant,
    pub metadata: BTreeMap<String, String>,
    pub created: time::OffsetDateTime,
}

impl Blob {
    pub fn copied(&self, now: Instant) -> bool {
        now >= self.done_at
    }
}

/// The blob service's state: containers and blobs per account (lower-cased account name).
#[derive(Debug, Default)]
pub struct Blobs {
    pub containers: BTreeMap<(String, String), BTreeMap<String, Blob>>,
}

impl Blobs {
    /// Everything of an account (deleted with it: Microsoft Learn, "Delete a storage account":
    /// its data goes with it).
    pub fn drop_account(&mut self, account: &str) {
        let account = account.to_ascii_lowercase();
        self.containers.retain(|(a, _), _| *a != account);
    }

    /// The blob at `url` (`{endpoint}/{container}/{blob}` of an account), if it exists.
    pub fn find(&self, account: &str, container: &str, name: &str) -> Option<&Blob> {
        self.containers.get(&(account.to_ascii_lowercase(), container.to_string()))?.get(name)
    }
}

/// The RHCOS VHD the release publishes at `url`, with its size: the world's release's build, for
/// each architecture, at `rhcos.blob.core.windows.net/imagebucket` as the CoreOS stream names it.
pub fn published_vhd(url: &str) -> Option<u64> {
    let build = crate::release::RHCOS_BUILD;
    ["x86_64", "aarch64"]
        .iter()
        .any(|arch| url == format!("https://rhcos.blob.core.windows.net/imagebucket/rhcos-{build}-azure.{arch}.vhd"))
        .then_some(16 * 1024 * 1024 * 1024 + 512)
}

/// The account key, derived from the account's ARM id (stable for the account's life).
pub fn account_key(account_id: &str) -> String {
    use sha2::Digest;
    base64::engine::general_purpose::STANDARD
        .encode(Sha256::digest(format!("key1:{}", account_id.to_ascii_lowercase())))
}

/// How long Azure takes to copy a VHD of `size` bytes between regions, unscaled (a few minutes
/// for an RHCOS VHD of 16 GiB).
fn copy_duration(size: u64) -> Duration {
    Duration::from_secs_f64(60.0 + size as f64 / (100.0 * 1024.0 * 1024.0))
}

/// A blob-service error: its code in `x-ms-error-code` and an XML body, as the service answers.
pub fn error(status: StatusCode, code: &str, message: &str) -> (StatusCode, Vec<(String, String)>, String) {
    (
        status,
        vec![("x-ms-error-code".into(), code.into()), ("content-type".into(), "application/xml".into())],
        format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        ),
    )
}

fn rfc1123(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc2822).unwrap_or_default().replace("+0000", "GMT")
}

/// The canonical string a Shared Key signature covers (Microsoft Learn, "Authorize with Shared
/// Key", Blob service, version 2009-09-19 and later).
fn string_to_sign(
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    account: &str,
) -> String {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let length = h("content-length");
    let length = if length == "0" { String::new() } else { length };
    let mut ms: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("x-ms-"))
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or_default().trim().to_string()))
        .collect();
    ms.sort();
    let mut out = [
        method.as_str().to_string(),
        h("content-encoding"),
        h("content-language"),
        length,
        h("content-md5"),
        h("content-type"),
        h("date"),
        h("if-modified-since"),
        h("if-match"),
        h("if-none-match"),
        h("if-unmodified-since"),
        h("range"),
    ]
    .join("\n");
    out.push('\n');
    for (k, v) in ms {
        out.push_str(&format!("{k}:{v}\n"));
    }
    out.push_str(&format!("/{account}{path}"));
    let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in query {
        params.entry(k.to_ascii_lowercase()).or_default().push(v.clone());
    }
    for (k, mut vs) in params {
        vs.sort();
        out.push_str(&format!("\n{k}:{}", vs.join(",")));
    }
    out
}

/// Whether the request carries a valid Shared Key signature of `account` under `key`.
pub fn authorized(
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    account: &str,
    key: &str,
) -> bool {
    let Some(given) = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("SharedKey "))
        .and_then(|v| v.strip_prefix(&format!("{account}:")))
    else {
        return false;
    };
    let Ok(key) = base64::engine::general_purpose::STANDARD.decode(key) else { return false };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else { return false };
    mac.update(string_to_sign(method, path, query, headers, account).as_bytes());
    let Ok(given) = base64::engine::general_purpose::STANDARD.decode(given) else { return false };
    mac.verify_slice(&given).is_ok()
}

/// What one request to the blob service answers: status, headers, body.
pub type Answer = (StatusCode, Vec<(String, String)>, String);

/// Serves one authorized request on `account`'s blobs (`rest`: the path after the account).
pub fn serve(
    blobs: &mut Blobs,
    account: &str,
    method: &Method,
    rest: &[&str],
    query: &[(String, String)],
    headers: &HeaderMap,
    now: Instant,
    scale: f64,
) -> Answer {
    let q = |k: &str| query.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)).map(|(_, v)| v.as_str());
    let account = account.to_ascii_lowercase();
    let etag = format!("\"0x{:X}\"", now.elapsed().as_nanos() as u64 ^ 0x8DC0_0000_0000_0000);
    let date = rfc1123(time::OffsetDateTime::now_utc());
    let base = vec![
        ("x-ms-version".to_string(), "2022-11-02".to_string()),
        ("date".to_string(), date.clone()),
        ("server".to_string(), "Windows-Azure-Blob/1.0 Microsoft-HTTPAPI/2.0".to_string()),
    ];
    match (method, rest) {
        (&Method::PUT, [container]) if q("restype") == Some("container") => {
            let key = (account.clone(), container.to_string());
            if blobs.containers.contains_key(&key) {
                return error(
                    StatusCode::CONFLICT,
                    "ContainerAlreadyExists",
                    "The specified container already exists.",
                );
            }
            blobs.containers.insert(key, BTreeMap::new());
            let mut h = base;
            h.push(("etag".into(), etag));
            h.push(("last-modified".into(), date));
            (StatusCode::CREATED, h, String::new())
        }
        (&Method::GET, [container]) if q("comp") == Some("list") => {
            let Some(c) = blobs.containers.get(&(account.clone(), container.to_string())) else {
                return error(StatusCode::NOT_FOUND, "ContainerNotFound", "The specified container does not exist.");
            };
            let mut xml = format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults ContainerName=\"{container}\"><Blobs>"
            );
            for (name, b) in c {
                xml.push_str(&format!("<Blob><Name>{name}</Name><Properties>{}</Properties>", properties_xml(b, now)));
                if q("include").is_some_and(|i| i.contains("metadata")) {
                    xml.push_str("<Metadata>");
                    for (k, v) in &b.metadata {
                        xml.push_str(&format!("<{k}>{v}</{k}>"));
                    }
                    xml.push_str("</Metadata>");
                }
                xml.push_str("</Blob>");
            }
            xml.push_str("</Blobs><NextMarker /></EnumerationResults>");
            let mut h = base;
            h.push(("content-type".into(), "application/xml".into()));
            (StatusCode::OK, h, xml)
        }
        (&Method::PUT, [container, name @ ..]) if !name.is_empty() => {
            let name = name.join("/");
            let Some(source) = headers.get("x-ms-copy-source").and_then(|v| v.to_str().ok()) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "MissingRequiredHeader",
                    "An HTTP header that's mandatory for this request is not specified: only Copy Blob is served here.",
                );
            };
            let Some(c) = blobs.containers.get_mut(&(account.clone(), container.to_string())) else {
                return error(StatusCode::NOT_FOUND, "ContainerNotFound", "The specified container does not exist.");
            };
            let Some(size) = published_vhd(source) else {
                return error(StatusCode::NOT_FOUND, "CannotVerifyCopySource", "The specified blob does not exist.");
            };
            if c.get(&name).is_some_and(|b| !b.copied(now)) {
                return error(
                    StatusCode::CONFLICT,
                    "PendingCopyOperation",
                    "There is currently a pending copy operation.",
                );
            }
            let metadata: BTreeMap<String, String> = headers
                .iter()
                .filter_map(|(k, v)| {
                    Some((k.as_str().strip_prefix("x-ms-meta-")?.to_string(), v.to_str().ok()?.to_string()))
                })
                .collect();
            let copy_id = uuid::Uuid::new_v4().to_string();
            c.insert(
                name,
                Blob {
                    source: source.to_string(),
                    copy_id: copy_id.clone(),
                    size,
                    started: now,
                    done_at: now + copy_duration(size).mul_f64(scale),
                    metadata,
                    created: time::OffsetDateTime::now_utc(),
                },
            );
            let mut h = base;
            h.push(("etag".into(), etag));
            h.push(("last-modified".into(), date));
            h.push(("x-ms-copy-id".into(), copy_id));
            h.push(("x-ms-copy-status".into(), "pending".into()));
            (StatusCode::ACCEPTED, h, String::new())
        }
        (&Method::HEAD, [container, name @ ..]) if !name.is_empty() => {
            let Some(b) = blobs.find(&account, container, &name.join("/")) else {
                return (StatusCode::NOT_FOUND, vec![("x-ms-error-code".into(), "BlobNotFound".into())], String::new());
            };
            let mut h = base;
            h.extend([
                ("etag".to_string(), etag),
                ("last-modified".to_string(), rfc1123(b.created)),
                ("x-ms-creation-time".to_string(), rfc1123(b.created)),
                ("content-length".to_string(), b.size.to_string()),
                ("content-type".to_string(), "application/octet-stream".to_string()),
                ("x-ms-blob-type".to_string(), "PageBlob".to_string()),
                ("x-ms-server-encrypted".to_string(), "true".to_string()),
                ("x-ms-lease-status".to_string(), "unlocked".to_string()),
                ("x-ms-lease-state".to_string(), "available".to_string()),
                ("x-ms-copy-id".to_string(), b.copy_id.clone()),
                ("x-ms-copy-source".to_string(), b.source.clone()),
                ("x-ms-copy-status".to_string(), status_of(b, now).to_string()),
                ("x-ms-copy-progress".to_string(), format!("{}/{}", copied_bytes(b, now), b.size)),
            ]);
            for (k, v) in &b.metadata {
                h.push((format!("x-ms-meta-{k}"), v.clone()));
            }
            (StatusCode::OK, h, String::new())
        }
        (&Method::DELETE, [container, name @ ..]) if !name.is_empty() => {
            let name = name.join("/");
            match blobs.containers.get_mut(&(account.clone(), container.to_string())).and_then(|c| c.remove(&name)) {
                Some(_) => {
                    let mut h = base;
                    h.push(("x-ms-delete-type-permanent".into(), "true".into()));
                    (StatusCode::ACCEPTED, h, String::new())
                }
                None => error(StatusCode::NOT_FOUND, "BlobNotFound", "The specified blob does not exist."),
            }
        }
        _ => error(
            StatusCode::BAD_REQUEST,
            "UnsupportedHttpVerb",
            "The resource doesn't support the specified HTTP verb.",
        ),
    }
}

fn status_of(b: &Blob, now: Instant) -> &'static str {
    if b.copied(now) { "success" } else { "pending" }
}

fn copied_bytes(b: &Blob, now: Instant) -> u64 {
    if b.copied(now) {
        return b.size;
    }
    let total = b.done_at.saturating_duration_since(b.started).as_secs_f64().max(f64::MIN_POSITIVE);
    let done = now.saturating_duration_since(b.started).as_secs_f64();
    ((done / total).min(1.0) * b.size as f64) as u64
}

fn properties_xml(b: &Blob, now: Instant) -> String {
    format!(
        "<Creation-Time>{c}</Creation-Time><Last-Modified>{c}</Last-Modified><Etag>0x8DC{seq:X}</Etag><Content-Length>{size}</Content-Length><Content-Type>application/octet-stream</Content-Type><BlobType>PageBlob</BlobType><LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState><ServerEncrypted>true</ServerEncrypted><CopyId>{id}</CopyId><CopySource>{src}</CopySource><CopyStatus>{st}</CopyStatus><CopyProgress>{done}/{size}</CopyProgress>",
        c = rfc1123(b.created),
        seq = b.created.unix_timestamp(),
        size = b.size,
        id = b.copy_id,
        src = b.source,
        st = status_of(b, now),
        done = copied_bytes(b, now),
    )
}
