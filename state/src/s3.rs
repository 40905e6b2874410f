//! The S3 backend: one state object per stack and a lock object beside it.
//!
//! - Reads remember the object's ETag; writes carry `If-Match: <etag>` (or `If-None-Match: *` for
//!   the first one), so a write racing another is refused by S3 itself (412) and reported, never
//!   lost (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
//! - The lock is `<key>.lock`, created with `If-None-Match: *` and holding the holder, operation,
//!   host and time; a held lock is never taken over, only reported with its holder and age;
//!   `force-unlock` removes it given its id.
//! - With bucket versioning on, every write leaves the previous state as an older version.
//! - Server-side encryption (`AES256` or `aws:kms`) on request; client-side encryption by the codec.

use std::sync::Mutex;

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;

use crate::backend::{Backend, BoxFuture};
use crate::crypto::Codec;
use crate::local::LockInfo;
use crate::{State, StateError, decode};

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
}

fn remote(what: &'static str, location: &str, e: impl std::fmt::Display) -> StateError {
    StateError::Remote { what, location: location.to_string(), message: e.to_string() }
}

fn status<E>(e: &aws_sdk_s3::error::SdkError<E>) -> Option<u16> {
    e.raw_response().map(|r| r.status().as_u16())
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl S3Backend {
    pub async fn new(config: S3Config, codec: Codec) -> S3Backend {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
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
        S3Backend { client: Client::from_conf(s3), config, codec, etag: Mutex::new(None) }
    }

    fn lock_key(&self) -> String {
        format!("{}.lock", self.config.key)
    }

    async fn read_lock(&self) -> Result<Option<LockInfo>, StateError> {
        let loc = format!("s3://{}/{}", self.config.bucket, self.lock_key());
        match self.client.get_object().bucket(&self.config.bucket).key(self.lock_key()).send().await {
            Ok(o) => {
                let bytes = o.body.collect().await.map_err(|e| remote("reading the lock", &loc, e))?.into_bytes();
                Ok(serde_json::from_slice(&bytes).ok())
            }
            Err(e) if status(&e) == Some(404) => Ok(None),
            Err(e) => Err(remote("reading the lock", &loc, aws_sdk_s3::error::DisplayErrorContext(e))),
        }
    }
}

impl Backend for S3Backend {
    fn location(&self) -> String {
        format!("s3://{}/{}", self.config.bucket, self.config.key)
    }

    fn read(&self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(async move {
            let loc = self.location();
            match self.client.get_object().bucket(&self.config.bucket).key(&self.config.key).send().await {
                Ok(o) => {
                    *self.etag.lock().expect("etag lock") = o.e_tag().map(String::from);
                    let bytes = o.body.collect().await.map_err(|e| remote("reading state", &loc, e))?.into_bytes();
                    let plain = self.codec.open(&bytes)?;
                    decode(&loc, &String::from_utf8_lossy(&plain)).map(Some)
                }
                Err(e) if status(&e) == Some(404) => {
                    *self.etag.lock().expect("etag lock") = None;
                    Ok(None)
                }
                Err(e) => Err(remote("reading state", &loc, aws_sdk_s3::error::DisplayErrorContext(e))),
            }
        })
    }

    fn write<'a>(&'a self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let loc = self.location();
            state.serial += 1;
            let body = self.codec.seal(&serde_json::to_vec_pretty(state).expect("state serializes"))?;
            let etag = self.etag.lock().expect("etag lock").clone();
            let mut put =
                self.client.put_object().bucket(&self.config.bucket).key(&self.config.key).body(ByteStream::from(body));
            put = match etag {
                Some(e) => put.if_match(e),
                None => put.if_none_match("*"),
            };
            if let Some(sse) = &self.config.server_side_encryption {
                put = put.server_side_encryption(sse.as_str().into());
            }
            match put.send().await {
                Ok(r) => {
                    *self.etag.lock().expect("etag lock") = r.e_tag().map(String::from);
                    Ok(())
                }
                Err(e) if matches!(status(&e), Some(412 | 409)) => {
                    state.serial -= 1;
                    Err(StateError::Conflict { location: loc })
                }
                Err(e) => {
                    state.serial -= 1;
                    Err(remote("writing state", &loc, aws_sdk_s3::error::DisplayErrorContext(e)))
                }
            }
        })
    }

    fn lock<'a>(&'a self, holder: &'a str, operation: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        Box::pin(async move {
            let loc = format!("s3://{}/{}", self.config.bucket, self.lock_key());
            let info = LockInfo {
                id: uuid::Uuid::new_v4().to_string(),
                holder: holder.to_string(),
                operation: operation.to_string(),
                since: now(),
            };
            let body = serde_json::to_vec(&info).expect("lock info serializes");
            let put = self
                .client
                .put_object()
                .bucket(&self.config.bucket)
                .key(self.lock_key())
                .if_none_match("*")
                .body(ByteStream::from(body))
                .send()
                .await;
            match put {
                Ok(_) => Ok(info),
                Err(e) if matches!(status(&e), Some(412 | 409)) => {
                    let held = self.read_lock().await?.unwrap_or(LockInfo {
                        id: "?".into(),
                        holder: "unknown".into(),
                        operation: "unknown".into(),
                        since: 0,
                    });
                    let age = now().saturating_sub(held.since);
                    Err(StateError::Locked {
                        id: held.id,
                        holder: held.holder,
                        operation: held.operation,
                        since: format!("{} ({}m{:02}s ago)", held.since, age / 60, age % 60),
                    })
                }
                Err(e) => Err(remote("taking the lock", &loc, aws_sdk_s3::error::DisplayErrorContext(e))),
            }
        })
    }

    fn unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move { self.force_unlock(id).await.map(|_| ()) })
    }

    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        Box::pin(async move {
            let loc = format!("s3://{}/{}", self.config.bucket, self.lock_key());
            let Some(held) = self.read_lock().await? else { return Err(StateError::NotLocked) };
            if held.id != id {
                return Err(StateError::LockMismatch { given: id.to_string(), held: held.id, holder: held.holder });
            }
            self.client
                .delete_object()
                .bucket(&self.config.bucket)
                .key(self.lock_key())
                .send()
                .await
                .map_err(|e| remote("removing the lock", &loc, aws_sdk_s3::error::DisplayErrorContext(e)))?;
            Ok(held)
        })
    }
}
