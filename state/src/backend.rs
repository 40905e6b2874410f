//! Where a stack's state lives: a trait over the local directory and S3, so the commands and the
//! engine do not care which. Every method may reach the network, so all are async.
//!
//! Storage and locking are separate concerns with one owner each: `read`/`write` move state,
//! `lock`/`unlock`/`force_unlock` guard it, and a lock records who holds it, where, for what and
//! since when, so a refused run can say exactly that.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::{State, StateError};

/// The id under which a lock whose record cannot be read is reported and force-unlocked.
pub const UNREADABLE_LOCK: &str = "unreadable";

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub trait Backend: Send + Sync {
    /// Where it is, for messages (`.xcsp/il5-gpu`, `s3://bucket/key`).
    fn location(&self) -> String;
    fn read(&self) -> BoxFuture<'_, Result<Option<State>, StateError>>;
    /// Writes with the next serial; refuses to overwrite a state that changed since it was read.
    fn write<'a>(&'a self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>>;
    /// Takes the stack's lock, or says who holds it (and since when). A held lock is never
    /// taken over, however old: only `force_unlock` with its id removes it.
    fn lock<'a>(&'a self, holder: &'a str, operation: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>>;
    /// Releases a lock this process took (and only that one: a lock someone else holds since a
    /// force-unlock stays).
    fn unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>>;
    /// Removes a dead holder's lock, only if `id` is the one it records.
    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>>;
}

/// Who holds a lock, on which machine and process, for what, since when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockInfo {
    pub id: String,
    /// Who asked for it (a user name, a CI job).
    pub holder: String,
    pub operation: String,
    /// The machine it was taken on, and the process there.
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub pid: u32,
    /// Seconds since the Unix epoch.
    pub since: u64,
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The kernel's host name (what `hostname` prints), for the lock record.
fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().map(|h| h.trim().to_string()).filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unknown host".into())
}

impl LockInfo {
    /// A fresh lock record for this process.
    pub fn new(holder: &str, operation: &str) -> LockInfo {
        LockInfo {
            id: uuid::Uuid::new_v4().to_string(),
            holder: holder.to_string(),
            operation: operation.to_string(),
            host: hostname(),
            pid: std::process::id(),
            since: now(),
        }
    }

    /// What a lock whose record cannot be read is reported as.
    pub fn unreadable(id: &str) -> LockInfo {
        LockInfo {
            id: id.to_string(),
            holder: "unknown (the lock record is unreadable)".into(),
            operation: "unknown".into(),
            host: String::new(),
            pid: 0,
            since: 0,
        }
    }

    /// The error telling a second run who holds the lock and for how long already: the age is
    /// what lets an operator judge a lock stale (its holder died) before force-unlocking it.
    pub fn refusal(&self) -> StateError {
        let process = match (self.host.as_str(), self.pid) {
            ("", _) => "an unknown process".to_string(),
            (host, 0) => format!("a process on {host}"),
            (host, pid) => format!("pid {pid} on {host}"),
        };
        let since = time::OffsetDateTime::from_unix_timestamp(self.since as i64)
            .ok()
            .and_then(|t| {
                t.format(time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC")).ok()
            })
            .unwrap_or_else(|| "an unknown time".into());
        StateError::Locked {
            id: self.id.clone(),
            holder: self.holder.clone(),
            process,
            operation: self.operation.clone(),
            since: format!("{since}, {} ago", age(now().saturating_sub(self.since))),
        }
    }
}

/// `42s`, `3m05s`, `2h07m`, `3d04h`.
fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_holder_process_operation_and_age() {
        let mut info = LockInfo::new("ci-job-7", "apply");
        info.since -= 3 * 3600 + 4 * 60;
        let text = info.refusal().to_string();
        let expected = format!("locked by ci-job-7 (pid {} on {}) for `apply`", info.pid, info.host);
        assert!(text.contains(&expected), "{text}");
        assert!(text.contains("3h04m ago") && text.contains(&info.id), "{text}");
        assert_eq!([age(5), age(185), age(90_061)], ["5s", "3m05s", "1d01h"]);
    }
}
