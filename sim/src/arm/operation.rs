//! A long-running operation's record, as the store keeps it (started, polled and settled in
//! [`super::lro`]).

use std::time::Instant;
use time::OffsetDateTime;

/// What an operation does when it finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpAction {
    Put,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpStatus {
    InProgress,
    Succeeded,
    Failed { code: String, message: String },
}

impl OpStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            OpStatus::InProgress => "InProgress",
            OpStatus::Succeeded => "Succeeded",
            OpStatus::Failed { .. } => "Failed",
        }
    }
}

/// A long-running operation.
#[derive(Debug, Clone)]
pub struct Operation {
    pub id: String,
    /// Lower-cased key of the target resource.
    pub target: String,
    pub action: OpAction,
    pub started: OffsetDateTime,
    pub completes_at: Instant,
    pub status: OpStatus,
    /// If set, the operation ends `Failed` with this code and message.
    pub fail: Option<(String, String)>,
    /// Lower-cased keys of virtual network gateways this operation holds (one write at a time).
    pub gateways: Vec<String>,
    /// Path of the status endpoint (without scheme/host).
    pub async_path: String,
    /// Path of the Location endpoint.
    pub location_path: String,
}
