//! State in the cluster (`backend "kubernetes" { namespace = ... }`): the stack's state in a Secret
//! `xcsp-state-<stack>`, sealed like any state when a key is configured, and its lock a Lease
//! `xcsp-lock-<stack>` whose annotation holds the lock's record. The command line and the
//! controller reach both through the cluster's API, so they take turns on one stack.
//!
//! Writes carry the resourceVersion last read (the API server refuses a stale one with 409), so a
//! state written by another run since is never overwritten; the lock is made with `create`, which
//! only one caller wins. A held lock never expires: as with the other backends, only
//! `force-unlock` with its id removes it. A Secret holds at most 1 MiB (etcd's request limit).

use std::sync::Mutex;

use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};
use xcsp_state::backend::{Backend, BoxFuture, LockInfo, UNREADABLE_LOCK};
use xcsp_state::crypto::Codec;
use xcsp_state::{State, StateError, decode};

use crate::KubeConfig;

/// The annotation of the lock's Lease that holds its record.
const LOCK_RECORD: &str = "xcsp.io/lock";
/// What a Secret's data may hold (the API server refuses larger objects).
const SECRET_LIMIT: usize = 1024 * 1024;
const CONFLICT_ATTEMPTS: usize = 5;

/// `<prefix>-<stack>` as a Kubernetes object name (a lowercase DNS-1123 subdomain): a stack name
/// is allowed capitals and `_`, which such a name is not; one that has to change is lowercased,
/// its other characters made `-`, and a digest of the name as written appended, so two stacks
/// never share an object.
pub fn object_name(prefix: &str, stack: &str) -> String {
    let safe: String = stack
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    if safe == stack {
        return format!("{prefix}-{stack}");
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let digest =
        stack.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{prefix}-{}-{:08x}", safe.trim_matches('-'), digest as u32)
}

pub struct KubeBackend {
    secrets: Api<Secret>,
    leases: Api<Lease>,
    namespace: String,
    stack: String,
    codec: Codec,
    /// The Secret's resourceVersion when last read or written.
    version: Mutex<Option<String>>,
}

impl KubeBackend {
    /// The backend of `stack` in `namespace` of the cluster `config` reaches.
    pub async fn new(
        config: &KubeConfig,
        namespace: &str,
        stack: &str,
        codec: Codec,
    ) -> Result<KubeBackend, StateError> {
        let client = crate::connect::client(config).await.map_err(|message| StateError::Remote {
            what: "reaching the cluster",
            location: format!("kubernetes://{namespace}"),
            message,
        })?;
        Ok(KubeBackend {
            secrets: Api::namespaced(client.clone(), namespace),
            leases: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            stack: stack.into(),
            codec,
            version: Mutex::new(None),
        })
    }

    fn secret_name(&self) -> String {
        object_name("xcsp-state", &self.stack)
    }

    fn lease_name(&self) -> String {
        object_name("xcsp-lock", &self.stack)
    }

    fn lock_location(&self) -> String {
        format!("kubernetes://{}/leases/{}", self.namespace, self.lease_name())
    }

    fn remote(&self, what: &'static str, location: String, e: kube::Error) -> StateError {
        StateError::Remote { what, location, message: e.to_string() }
    }

    /// The Secret's sealed state and resourceVersion, if there is one.
    async fn stored(&self) -> Result<Option<(Vec<u8>, Option<String>)>, StateError> {
        let found = self
            .secrets
            .get_opt(&self.secret_name())
            .await
            .map_err(|e| self.remote("reading state", self.location(), e))?;
        Ok(found.map(|s| {
            let bytes = s.data.as_ref().and_then(|d| d.get("state")).map(|b| b.0.clone()).unwrap_or_default();
            (bytes, s.metadata.resource_version)
        }))
    }

    /// The lock's record and the Lease's resourceVersion; an unreadable record under a fixed id.
    async fn held(&self) -> Result<Option<(LockInfo, Option<String>)>, StateError> {
        let found = self
            .leases
            .get_opt(&self.lease_name())
            .await
            .map_err(|e| self.remote("reading the lock", self.lock_location(), e))?;
        Ok(found.map(|l| {
            let record = l.metadata.annotations.as_ref().and_then(|a| a.get(LOCK_RECORD));
            let info = record
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or_else(|| LockInfo::unreadable(UNREADABLE_LOCK));
            (info, l.metadata.resource_version)
        }))
    }

    /// Deletes the Lease if it records `id` and has not changed since it was read.
    async fn remove_lock(&self, id: &str) -> Result<LockInfo, StateError> {
        for _ in 0..CONFLICT_ATTEMPTS {
            let Some((held, version)) = self.held().await? else { return Err(StateError::NotLocked) };
            if held.id != id {
                return Err(StateError::LockMismatch { given: id.to_string(), held: held.id, holder: held.holder });
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions { resource_version: version, uid: None }),
                ..DeleteParams::default()
            };
            match self.leases.delete(&self.lease_name(), &params).await {
                Ok(_) => return Ok(held),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(kube::Error::Api(s)) if s.code == 404 => return Err(StateError::NotLocked),
                Err(e) => return Err(self.remote("removing the lock", self.lock_location(), e)),
            }
        }
        Err(StateError::Remote {
            what: "removing the lock",
            location: self.lock_location(),
            message: "the lock kept changing while being removed".into(),
        })
    }
}

impl Backend for KubeBackend {
    fn location(&self) -> String {
        format!("kubernetes://{}/secrets/{}", self.namespace, self.secret_name())
    }

    fn read(&self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(async move {
            let stored = self.stored().await?;
            *self.version.lock().expect("not poisoned") = stored.as_ref().and_then(|(_, v)| v.clone());
            let Some((bytes, _)) = stored else { return Ok(None) };
            let plain = self.codec.open(&bytes)?;
            decode(&self.location(), &String::from_utf8_lossy(&plain)).map(Some)
        })
    }

    fn write<'a>(&'a self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            state.serial += 1;
            let result = async {
                let body = self.codec.seal(&serde_json::to_vec_pretty(state).expect("state serializes"))?;
                if body.len() > SECRET_LIMIT {
                    return Err(StateError::Remote {
                        what: "writing state",
                        location: self.location(),
                        message: format!("{} bytes, more than a Secret holds (1 MiB): use the s3 backend", body.len()),
                    });
                }
                let version = self.version.lock().expect("not poisoned").clone();
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(self.secret_name()),
                        resource_version: version.clone(),
                        labels: Some([(xcsp_core::tags::SLASHED.stack.to_string(), self.stack.clone())].into()),
                        ..ObjectMeta::default()
                    },
                    type_: Some("xcsp.io/state".into()),
                    data: Some([("state".to_string(), ByteString(body.clone()))].into()),
                    ..Secret::default()
                };
                let written = match &version {
                    Some(_) => self.secrets.replace(&self.secret_name(), &PostParams::default(), &secret).await,
                    None => self.secrets.create(&PostParams::default(), &secret).await,
                };
                match written {
                    Ok(s) => Ok(s.metadata.resource_version),
                    // Changed since read (409 on replace), or made since (409 on create), or
                    // deleted since (404 on replace): unless what is stored is what we sent.
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => match self.stored().await? {
                        Some((bytes, v)) if bytes == body => Ok(v),
                        _ => Err(StateError::Conflict { location: self.location() }),
                    },
                    Err(e) => Err(self.remote("writing state", self.location(), e)),
                }
            }
            .await;
            match result {
                Ok(version) => {
                    *self.version.lock().expect("not poisoned") = version;
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
            let record = serde_json::to_string(&info).expect("lock info serializes");
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.lease_name()),
                    annotations: Some([(LOCK_RECORD.to_string(), record)].into()),
                    labels: Some([(xcsp_core::tags::SLASHED.stack.to_string(), self.stack.clone())].into()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(holder.to_string()),
                    acquire_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                    ..LeaseSpec::default()
                }),
            };
            for _ in 0..CONFLICT_ATTEMPTS {
                match self.leases.create(&PostParams::default(), &lease).await {
                    Ok(_) => return Ok(info),
                    Err(kube::Error::Api(s)) if s.code == 409 => match self.held().await? {
                        // Ours: an earlier attempt landed and its answer was lost.
                        Some((held, _)) if held.id == info.id => return Ok(info),
                        Some((held, _)) => return Err(held.refusal()),
                        // Released between our attempt and our look: try again.
                        None => continue,
                    },
                    // No answer (a connection cut after the request left): the Lease may be ours.
                    Err(e) => {
                        return match self.held().await {
                            Ok(Some((held, _))) if held.id == info.id => Ok(info),
                            _ => Err(self.remote("taking the lock", self.lock_location(), e)),
                        };
                    }
                }
            }
            Err(StateError::Remote {
                what: "taking the lock",
                location: self.lock_location(),
                message: "the lock kept changing hands".into(),
            })
        })
    }

    fn unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move { self.remove_lock(id).await.map(|_| ()) })
    }

    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        Box::pin(async move { self.remove_lock(id).await })
    }
}

#[cfg(test)]
mod tests {
    use super::object_name;

    #[test]
    fn a_stack_name_becomes_an_object_name_without_colliding() {
        assert_eq!(object_name("xcsp-state", "il5-gpu"), "xcsp-state-il5-gpu");
        let upper = object_name("xcsp-state", "IL5_gpu");
        assert!(upper.starts_with("xcsp-state-il5-gpu-") && upper.len() == "xcsp-state-il5-gpu-".len() + 8, "{upper}");
        assert_ne!(upper, object_name("xcsp-state", "il5_gpu"));
        assert!(upper.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }
}
