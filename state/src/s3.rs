//! The S3 backend: one state object per stack and a lock object beside it.
//!
//! - Reads remember the object's ETag; writes carry `If-Match: <etag>` (or `If-None-Match: *` for
//!   the first one), so a write racing another is refused by S3 itself (412) and reported, never
//!   lost (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
//! - The lock is `<key>.lock`, created with `If-None-Match: *` and recording the holder,
//!   operation, host, process and time; a held lock is never taken over, only reported with its
//!   holder and age. Unlocking (and `force-unlock`, given the lock's id) deletes it with
//!   `If-Match` on the ETag just read, so a lock someone took in between is never removed.
//! - With bucket versioning on, every write leaves the previous state as an older version (and an
//!   unlock leaves a delete marker on the lock key, which `If-None-Match: *` treats as absent).
//! - Server-side encryption (`AES256` or `aws:kms`) on request; client-side encryption by the codec.
//!   Sealing a state that was stored plaintext leaves the plaintext in the bucket's older versions
//!   when versioning is (or was) on: the first sealed write over a plaintext state says so, once,
//!   as a [`StateWarning`], with how to delete them.
//!
//! The SDK retries a request whose answer was lost; a conditional request retried after it
//! actually succeeded meets its own write and gets 412. Both paths check for that (the stored
//! bytes are ours; the lock records our id) before reporting a conflict.

use std::sync::Mutex;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;

use crate::backend::{Backend, BoxFuture, LockInfo, UNREADABLE_LOCK};
use crate::crypto::Codec;
use crate::{State, StateError, StateWarning, Warnings, decode};

/// Where the state object lives.
#[derive(Debug, Clone)]
pub struct S3Config {
    pub bucket: String,
    pub key: String,
    pub region: String,
    /// For the local clouds (moto); `AWS_ENDPOINT_URL` works too.
    pub endpoint: Option<String>,
    /// `AES256` or `aws:kms`.
    pub server_side_encryption: Option<String>,
    /// Explicit access key and secret (the local clouds); otherwise the default chain.
    pub static_credentials: Option<(String, String)>,
}

pub struct S3Backend {
    client: Client,
    config: S3Config,
    codec: Codec,
    /// The ETag of the state as last read or written.
    etag: Mutex<Option<String>>,
    /// Whether the state as last read or written is plaintext.
    stored_plain: Mutex<bool>,
    warnings: Option<Warnings>,
}

/// How many times a request S3 answers with 409 (another conditional request on the same key
/// was in flight) is sent again.
const CONFLICT_ATTEMPTS: usize = 4;

/// The HTTP status of a failed request that S3 answered; `None` when nothing answered, or when
/// what answered is not S3 (see [`not_s3`]), so that no 404 or 412 from a web server is taken for
/// S3's "no such key" or "changed since read".
fn s3_status<E: ProvideErrorMetadata>(e: &SdkError<E>) -> Option<u16> {
    e.raw_response().filter(|_| not_s3(e).is_none()).map(|r| r.status().as_u16())
}

/// What came back, when it did not come from S3: `HTTP 404 from nginx/1.25 (text/html: "404 Not
/// Found")`. S3 (and moto) put a request id on every answer and an error code on every failure
/// with a body; a web server, a proxy's error page or a captive portal does neither.
fn not_s3<E: ProvideErrorMetadata>(e: &SdkError<E>) -> Option<String> {
    let raw = e.raw_response()?;
    let headers = raw.headers();
    if e.code().is_some() || ["x-amz-request-id", "x-amzn-requestid"].iter().any(|h| headers.get(*h).is_some()) {
        return None;
    }
    Some(answer(raw.status().as_u16(), headers.get("server"), headers.get("content-type"), raw.body().bytes()))
}

/// An error and its causes on one line (`dispatch failure: io error: ... Connection refused`),
/// without the SDK's debug dump of the whole response.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.ends_with(&more) {
            text.push_str(&format!(": {more}"));
        }
        source = cause.source();
    }
    text
}

/// One line saying what an answer was: status, server, content type and the gist of its body.
fn answer(status: u16, server: Option<&str>, content_type: Option<&str>, body: Option<&[u8]>) -> String {
    let mut text = format!("HTTP {status}");
    if let Some(server) = server {
        text.push_str(&format!(" from {server}"));
    }
    let kind = content_type.map(|c| c.split(';').next().unwrap_or(c).trim().to_string());
    let gist = body.map(gist).unwrap_or_default();
    match (kind, gist.is_empty()) {
        (Some(kind), false) => text.push_str(&format!(" ({kind}: \"{gist}\")")),
        (None, false) => text.push_str(&format!(" (\"{gist}\")")),
        (Some(kind), true) => text.push_str(&format!(" ({kind}, no text)")),
        (None, true) => text.push_str(" (an empty body)"),
    }
    text
}

/// The readable text of a body, at most 100 characters: an HTML page's visible text (its title
/// when the page shows none), or the first characters of anything else.
fn gist(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(16 * 1024)]).to_string();
    let lower = text.to_ascii_lowercase();
    let section = |open: &str, close: &str| {
        let start = lower.find(open)?;
        let inner = lower[start..].find('>').map(|i| start + i + 1)?;
        let end = lower[inner..].find(close).map_or(text.len(), |i| inner + i);
        Some((start, inner, end))
    };
    let visible = if lower.contains("<html") || lower.contains("<!doctype html") {
        let title = section("<title", "</title").map(|(_, i, e)| text[i..e].to_string()).unwrap_or_default();
        let body = section("<body", "</body").map_or(text.as_str(), |(_, i, e)| &text[i..e]);
        let mut shown = String::new();
        let mut in_tag = false;
        for c in body.chars() {
            match c {
                '<' => in_tag = true,
                '>' if in_tag => {
                    in_tag = false;
                    shown.push(' ');
                }
                c if !in_tag => shown.push(c),
                _ => {}
            }
        }
        if shown.trim().is_empty() { title } else { shown }
    } else {
        text
    };
    let words = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    match words.char_indices().nth(100) {
        Some((cut, _)) => format!("{}...", &words[..cut]),
        None => words,
    }
}

/// A stored object: its bytes and ETag.
struct Object {
    bytes: Vec<u8>,
    etag: Option<String>,
}

impl S3Backend {
    pub async fn new(config: S3Config, codec: Codec) -> S3Backend {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(xcsp_crypto::aws_http_client())
            .region(aws_config::Region::new(config.region.clone()));
        if let Some(e) = &config.endpoint {
            loader = loader.endpoint_url(e);
        }
        if let Some((key, secret)) = &config.static_credentials {
            loader = loader.credentials_provider(aws_sdk_s3::config::Credentials::new(
                key,
                secret,
                None,
                None,
                "xcsp-static",
            ));
        }
        let shared = loader.load().await;
        // Path-style addressing works with every endpoint, the local clouds included.
        let s3 = aws_sdk_s3::config::Builder::from(&shared).force_path_style(true).build();
        S3Backend {
            client: Client::from_conf(s3),
            config,
            codec,
            etag: Mutex::new(None),
            stored_plain: Mutex::new(false),
            warnings: None,
        }
    }

    /// Where warnings go (without this, they are dropped).
    pub fn with_warnings(mut self, warnings: Warnings) -> S3Backend {
        self.warnings = Some(warnings);
        self
    }

    /// Called after the first sealed write over a plaintext state: on a bucket that keeps versions
    /// (versioning on, or on once) the older versions still hold the plaintext, and nothing xcsp
    /// writes removes them. Asks for the key's versions rather than the bucket's versioning, which
    /// says nothing of what was kept while it was on.
    async fn warn_of_plaintext_versions(&self) {
        let Some(warn) = &self.warnings else { return };
        let key = &self.config.key;
        let listed = self.client.list_object_versions().bucket(&self.config.bucket).prefix(key.as_str()).send().await;
        let kept = match listed {
            Ok(l) => {
                let older = l.versions().iter().filter(|v| v.key() == Some(key) && v.is_latest() != Some(true)).count();
                match (older, l.is_truncated() == Some(true)) {
                    (0, false) => return,
                    (n, true) => format!("keeps at least {n} older versions of {key}"),
                    (1, false) => format!("keeps an older version of {key}"),
                    (n, false) => format!("keeps {n} older versions of {key}"),
                }
            }
            Err(e) => format!(
                "may keep older versions of {key} (listing them failed: {})",
                e.code().map(String::from).unwrap_or_else(|| chain(&e))
            ),
        };
        warn(&StateWarning::PlaintextVersions {
            location: self.location(),
            bucket: self.config.bucket.clone(),
            key: self.config.key.clone(),
            kept,
        });
    }

    /// A failed request as an error: one line naming the endpoint and what it answered when that
    /// is not S3; S3's own account otherwise.
    fn remote<E: ProvideErrorMetadata + std::error::Error + 'static>(
        &self,
        what: &'static str,
        location: &str,
        e: SdkError<E>,
    ) -> StateError {
        if let Some(answer) = not_s3(&e) {
            return StateError::NotS3 { what, location: location.to_string(), endpoint: self.endpoint(), answer };
        }
        let message = match (e.code(), s3_status(&e)) {
            (Some(code), Some(status)) => {
                format!("S3 answered HTTP {status} {code}: {}", e.message().unwrap_or("(no message)"))
            }
            _ => chain(&e),
        };
        StateError::Remote { what, location: location.to_string(), message }
    }

    /// Where requests go, for messages.
    fn endpoint(&self) -> String {
        match &self.config.endpoint {
            Some(e) => e.clone(),
            None => format!("the S3 endpoint of {}", self.config.region),
        }
    }

    fn lock_key(&self) -> String {
        format!("{}.lock", self.config.key)
    }

    fn lock_location(&self) -> String {
        format!("s3://{}/{}", self.config.bucket, self.lock_key())
    }

    async fn get(&self, key: &str, what: &'static str) -> Result<Option<Object>, StateError> {
        let loc = format!("s3://{}/{key}", self.config.bucket);
        match self.client.get_object().bucket(&self.config.bucket).key(key).send().await {
            Ok(o) => {
                let etag = o.e_tag().map(String::from);
                let content_type = o.content_type().map(String::from);
                let bytes = o.body.collect().await.map_err(|e| StateError::Remote {
                    what,
                    location: loc.clone(),
                    message: e.to_string(),
                })?;
                // xcsp stores JSON: a web page in its place is a web server's answer.
                if content_type.as_deref().is_some_and(|c| c.starts_with("text/html")) {
                    let answer = answer(200, None, content_type.as_deref(), Some(&bytes.to_vec()));
                    return Err(StateError::NotS3 { what, location: loc, endpoint: self.endpoint(), answer });
                }
                Ok(Some(Object { bytes: bytes.to_vec(), etag }))
            }
            // Only S3's "no such key" is an absent object: a missing bucket, or a 404 page, is an error.
            Err(e) if s3_status(&e) == Some(404) && e.code() == Some("NoSuchKey") => Ok(None),
            Err(e) => Err(self.remote(what, &loc, e)),
        }
    }

    /// The lock's record and ETag; an unreadable record is reported under a fixed id.
    async fn held(&self) -> Result<Option<(LockInfo, Option<String>)>, StateError> {
        Ok(self.get(&self.lock_key(), "reading the lock").await?.map(|o| {
            let info = serde_json::from_slice(&o.bytes).unwrap_or_else(|_| LockInfo::unreadable(UNREADABLE_LOCK));
            (info, o.etag)
        }))
    }

    /// Deletes the lock if it records `id` and has not changed since it was read.
    async fn remove_lock(&self, id: &str) -> Result<LockInfo, StateError> {
        for _ in 0..CONFLICT_ATTEMPTS {
            let Some((held, etag)) = self.held().await? else { return Err(StateError::NotLocked) };
            if held.id != id {
                return Err(StateError::LockMismatch { given: id.to_string(), held: held.id, holder: held.holder });
            }
            let mut delete = self.client.delete_object().bucket(&self.config.bucket).key(self.lock_key());
            if let Some(etag) = etag {
                delete = delete.if_match(etag);
            }
            match delete.send().await {
                Ok(_) => return Ok(held),
                // Changed since read (412), or another conditional request in flight (409): look again.
                Err(e) if matches!(s3_status(&e), Some(412 | 409)) => continue,
                // Gone since read (404 on a conditional delete).
                Err(e) if s3_status(&e) == Some(404) => return Err(StateError::NotLocked),
                Err(e) => return Err(self.remote("removing the lock", &self.lock_location(), e)),
            }
        }
        Err(StateError::Remote {
            what: "removing the lock",
            location: self.lock_location(),
            message: "the lock kept changing while being removed".into(),
        })
    }
}

impl Backend for S3Backend {
    fn location(&self) -> String {
        format!("s3://{}/{}", self.config.bucket, self.config.key)
    }

    fn read(&self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(async move {
            let loc = self.location();
            let found = self.get(&self.config.key, "reading state").await?;
            *self.etag.lock().expect("etag lock") = found.as_ref().and_then(|o| o.etag.clone());
            *self.stored_plain.lock().expect("plain lock") =
                found.as_ref().is_some_and(|o| !Codec::is_sealed(&o.bytes));
            let Some(object) = found else { return Ok(None) };
            let plain = self.codec.open(&object.bytes)?;
            decode(&loc, &String::from_utf8_lossy(&plain)).map(Some)
        })
    }

    fn write<'a>(&'a self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let loc = self.location();
            state.serial += 1;
            let result = async {
                let body = self.codec.seal(&serde_json::to_vec_pretty(state).expect("state serializes"))?;
                let etag = self.etag.lock().expect("etag lock").clone();
                for _ in 0..CONFLICT_ATTEMPTS {
                    let mut put = self
                        .client
                        .put_object()
                        .bucket(&self.config.bucket)
                        .key(&self.config.key)
                        .body(ByteStream::from(body.clone()));
                    put = match &etag {
                        Some(e) => put.if_match(e),
                        None => put.if_none_match("*"),
                    };
                    if let Some(sse) = &self.config.server_side_encryption {
                        put = put.server_side_encryption(sse.as_str().into());
                    }
                    match put.send().await {
                        Ok(r) => return Ok(r.e_tag().map(String::from)),
                        Err(e) if s3_status(&e) == Some(409) => continue,
                        // 412: changed since read; 404: deleted since read (If-Match on nothing).
                        Err(e) if matches!(s3_status(&e), Some(412 | 404)) => {
                            // Unless what is stored is what we sent (a retry after a lost answer).
                            let stored = self.get(&self.config.key, "reading state").await?;
                            return match stored {
                                Some(o) if o.bytes == body => Ok(o.etag),
                                _ => Err(StateError::Conflict { location: loc.clone() }),
                            };
                        }
                        Err(e) => return Err(self.remote("writing state", &loc, e)),
                    }
                }
                Err(StateError::Conflict { location: loc.clone() })
            }
            .await;
            match result {
                Ok(etag) => {
                    *self.etag.lock().expect("etag lock") = etag;
                    let sealed = self.codec.encrypts();
                    let was_plain = std::mem::replace(&mut *self.stored_plain.lock().expect("plain lock"), !sealed);
                    if sealed && was_plain {
                        self.warn_of_plaintext_versions().await;
                    }
                    Ok(())
                }
                Err(e) => {
                    state.serial -= 1;
                    Err(e)
                }
            }
        })
    }

    fn lock<'a>(&'a self, holder: &'a str, operation: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        Box::pin(async move {
            let info = LockInfo::new(holder, operation);
            let body = serde_json::to_vec(&info).expect("lock info serializes");
            for _ in 0..CONFLICT_ATTEMPTS {
                let put = self
                    .client
                    .put_object()
                    .bucket(&self.config.bucket)
                    .key(self.lock_key())
                    .if_none_match("*")
                    .body(ByteStream::from(body.clone()))
                    .send()
                    .await;
                match put {
                    Ok(_) => return Ok(info),
                    Err(e) if s3_status(&e) == Some(409) => continue,
                    Err(e) if s3_status(&e) == Some(412) => match self.held().await? {
                        // Ours: an earlier attempt landed and its answer was lost.
                        Some((held, _)) if held.id == info.id => return Ok(info),
                        Some((held, _)) => return Err(held.refusal()),
                        // Released between our attempt and our look: try again.
                        None => continue,
                    },
                    Err(e) => return Err(self.remote("taking the lock", &self.lock_location(), e)),
                }
            }
            match self.held().await? {
                Some((held, _)) => Err(held.refusal()),
                None => Err(StateError::Remote {
                    what: "taking the lock",
                    location: self.lock_location(),
                    message: "the lock kept changing hands".into(),
                }),
            }
        })
    }

    fn unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move { self.remove_lock(id).await.map(|_| ()) })
    }

    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        Box::pin(async move { self.remove_lock(id).await })
    }
}
