//! State: what xcsp has made, by address, in a versioned JSON format, and the backends that
//! store and lock it (a local directory, S3), sealed client-side when a key is configured.
//! Knows nothing of providers, plans or the environment: the binary picks the backend and keys.

pub mod backend;
pub mod crypto;
pub mod local;
pub mod s3;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use xcsp_core::Address;
use xcsp_core::provider::Attributes;

/// The format version this build writes. Older versions are upgraded on read, one step per
/// version (there is one version so far); newer ones are refused.
pub const FORMAT_VERSION: u32 = 1;

/// One recorded resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    /// The cloud's id; absent while only the intent to create is recorded.
    pub id: Option<String>,
    /// Attributes; secrets are stored as `{"$sensitive": ...}`.
    pub attributes: Attributes,
    #[serde(default)]
    pub dependencies: Vec<Address>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// Bumped on every write.
    pub serial: u64,
    /// Fixed for the life of a stack's state: a plan made against another lineage is refused.
    pub lineage: String,
    pub stack: String,
    pub resources: BTreeMap<Address, ResourceState>,
    /// A key rotation under way (`xcsp rotate-keys`), so that an interrupted one resumes where it
    /// stopped rather than starting over. Absent from the file when none is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<Rotation>,
}

/// A key rotation under way: when it started and the keys it has still to finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rotation {
    /// RFC 3339, for people.
    pub started: String,
    /// Still to finish, in the order they are rotated.
    pub keys: Vec<Address>,
    /// The `created` of each key this rotation made: a key whose recorded `created` is this one
    /// is already new, however long ago the rotation started.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub made: BTreeMap<Address, String>,
}

impl State {
    pub fn new(stack: &str) -> State {
        State {
            version: FORMAT_VERSION,
            serial: 0,
            lineage: uuid::Uuid::new_v4().to_string(),
            stack: stack.to_string(),
            resources: BTreeMap::new(),
            rotation: None,
        }
    }

    /// Recorded attributes by address, as the planner diffs them. An intent (a create that was
    /// started but never confirmed) is not a resource yet: the plan creates it again, and the
    /// provider adopts what the interrupted create left behind.
    pub fn attributes(&self) -> BTreeMap<Address, Attributes> {
        self.resources.iter().filter(|(_, r)| r.id.is_some()).map(|(a, r)| (a.clone(), r.attributes.clone())).collect()
    }
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StateError {
    #[error("cannot access state at {path}: {source}")]
    #[diagnostic(code(xcsp::state::io))]
    Io { path: String, source: std::io::Error },
    #[error("state at {path} is not valid: {message}")]
    #[diagnostic(code(xcsp::state::corrupt), help("restore the previous copy ({path}.backup) or repair it by hand"))]
    Corrupt { path: String, message: String },
    #[error("state at {path} has format version {found}, newer than this xcsp understands ({FORMAT_VERSION})")]
    #[diagnostic(code(xcsp::state::too_new), help("upgrade xcsp"))]
    TooNew { path: String, found: u32 },
    #[error("state is locked by {holder} ({process}) for `{operation}` since {since} (lock id {id})")]
    #[diagnostic(
        code(xcsp::state::locked),
        help(
            "wait for it to finish; a lock is never taken over. If its holder died (check {process}), run `xcsp force-unlock {id}`"
        )
    )]
    Locked {
        id: String,
        holder: String,
        process: String,
        operation: String,
        /// When, and how long ago: the age is what shows a lock whose holder died.
        since: String,
    },
    #[error("state encryption: {0}")]
    #[diagnostic(
        code(xcsp::state::key),
        help(
            "keys come from XCSP_STATE_KEY (base64 of 32 bytes) or XCSP_STATE_PASSPHRASE; during a rotation the previous one goes in XCSP_STATE_KEY_OLD or XCSP_STATE_PASSPHRASE_OLD"
        )
    )]
    Key(String),
    #[error("{what} at {location}: {message}")]
    #[diagnostic(code(xcsp::state::remote))]
    Remote { what: &'static str, location: String, message: String },
    #[error("{what} at {location}: {endpoint} answered {answer}, which is not S3")]
    #[diagnostic(
        code(xcsp::state::not_s3),
        help(
            "the backend's endpoint (`endpoint` in the backend block, XCSP_BACKEND_ENDPOINT or --backend-config endpoint=URL) must be an S3 API; xcsp addresses it path-style, as ENDPOINT/BUCKET/KEY"
        )
    )]
    NotS3 { what: &'static str, location: String, endpoint: String, answer: String },
    #[error("state at {location} changed since it was read (another run wrote it); nothing was overwritten")]
    #[diagnostic(
        code(xcsp::state::conflict),
        help("another process holds or held the stack without the lock; check `xcsp state list`, then run again")
    )]
    Conflict { location: String },
    #[error("state is not locked")]
    #[diagnostic(code(xcsp::state::not_locked))]
    NotLocked,
    #[error("lock id {given} does not match the lock held by {holder} (id {held})")]
    #[diagnostic(
        code(xcsp::state::lock_mismatch),
        help("a different run holds the lock now; check that it is dead before unlocking with its id")
    )]
    LockMismatch { given: String, held: String, holder: String },
}

/// Something a backend says while it works that is not a failure: the command goes on. Handed
/// to whoever built the backend (the binary renders it), never printed here.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StateWarning {
    #[error(
        "state at {location} is encrypted from now on, but bucket {bucket} {kept}: versions written before now stay plaintext, pre-shared keys included"
    )]
    #[diagnostic(
        code(xcsp::state::plaintext_versions),
        severity(Warning),
        help(
            "list them with `aws s3api list-object-versions --bucket {bucket} --prefix {key}`, then delete every version of {key} but the newest (the sealed one) with `aws s3api delete-object --bucket {bucket} --key {key} --version-id VERSION_ID`; a lifecycle rule that expires noncurrent versions does the same in time"
        )
    )]
    PlaintextVersions {
        location: String,
        bucket: String,
        key: String,
        /// `keeps 3 older versions of KEY`, or why it may.
        kept: String,
    },
}

/// Where a backend sends its [`StateWarning`]s.
pub type Warnings = std::sync::Arc<dyn Fn(&StateWarning) + Send + Sync>;

/// Parses state text, upgrading older format versions.
pub fn decode(path: &str, text: &str) -> Result<State, StateError> {
    let corrupt = |message: String| StateError::Corrupt { path: path.to_string(), message };
    let raw: serde_json::Value = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
    let version =
        raw.get("version").and_then(serde_json::Value::as_u64).ok_or_else(|| corrupt("no `version`".into()))? as u32;
    if version > FORMAT_VERSION {
        return Err(StateError::TooNew { path: path.to_string(), found: version });
    }
    // Upgrade steps, one per version, go here as the format changes: v1 is the first.
    serde_json::from_value(raw).map_err(|e| corrupt(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_newer_and_malformed_state() {
        assert!(matches!(decode("s", r#"{"version": 99}"#), Err(StateError::TooNew { found: 99, .. })));
        assert!(matches!(decode("s", "{"), Err(StateError::Corrupt { .. })));
        let s = State::new("x");
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(decode("s", &text).unwrap(), s);
    }
}
