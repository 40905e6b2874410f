//! The local backend: `<dir>/state.json`, written atomically (temp file, fsync, rename, fsync
//! of the directory), and `<dir>/state.lock`, created exclusively, recording who holds it.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{State, StateError, decode};

/// Who holds a lock, for what, since when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockInfo {
    pub id: String,
    pub holder: String,
    pub operation: String,
    /// Seconds since the Unix epoch.
    pub since: u64,
}

pub struct LocalBackend {
    dir: PathBuf,
    codec: crate::crypto::Codec,
}

/// Held while an operation runs; removes the lock file when dropped.
pub struct LockGuard {
    path: PathBuf,
    pub info: LockInfo,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

impl LocalBackend {
    pub fn new(dir: impl Into<PathBuf>) -> LocalBackend {
        LocalBackend { dir: dir.into(), codec: Default::default() }
    }

    /// Seals what it writes and opens what it reads with `codec` (client-side encryption).
    pub fn with_codec(mut self, codec: crate::crypto::Codec) -> LocalBackend {
        self.codec = codec;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.join("state.lock")
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
        move |source| StateError::Io { path: path.display().to_string(), source }
    }

    /// The recorded state, or `None` if the stack has none yet.
    pub fn read(&self) -> Result<Option<State>, StateError> {
        let path = self.state_path();
        match fs::read(&path) {
            Ok(bytes) => {
                let plain = self.codec.open(&bytes)?;
                decode(&path.display().to_string(), &String::from_utf8_lossy(&plain)).map(Some)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Self::io(&path)(e)),
        }
    }

    /// Writes the state with the next serial, atomically; the previous copy stays as `.backup`.
    pub fn write(&self, state: &mut State) -> Result<(), StateError> {
        fs::create_dir_all(&self.dir).map_err(Self::io(&self.dir))?;
        state.serial += 1;
        let path = self.state_path();
        let tmp = self.dir.join(format!(".state.json.{}.tmp", std::process::id()));
        let text = self.codec.seal(&serde_json::to_vec_pretty(state).expect("state serializes"))?;
        let mut f = File::create(&tmp).map_err(Self::io(&tmp))?;
        f.write_all(&text).and_then(|_| f.sync_all()).map_err(Self::io(&tmp))?;
        if path.exists() {
            fs::copy(&path, self.dir.join("state.json.backup")).map_err(Self::io(&path))?;
        }
        fs::rename(&tmp, &path).map_err(Self::io(&path))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(Self::io(&self.dir))?;
        Ok(())
    }

    /// Takes the lock, or says who holds it.
    pub fn lock(&self, holder: &str, operation: &str) -> Result<LockGuard, StateError> {
        fs::create_dir_all(&self.dir).map_err(Self::io(&self.dir))?;
        let path = self.lock_path();
        let info = LockInfo {
            id: uuid::Uuid::new_v4().to_string(),
            holder: holder.to_string(),
            operation: operation.to_string(),
            since: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        };
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                let text = serde_json::to_vec(&info).expect("lock info serializes");
                f.write_all(&text).and_then(|_| f.sync_all()).map_err(Self::io(&path))?;
                Ok(LockGuard { path, info })
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let held: Option<LockInfo> = fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok());
                let held = held.unwrap_or(LockInfo {
                    id: "?".into(),
                    holder: "unknown".into(),
                    operation: "unknown".into(),
                    since: 0,
                });
                Err(StateError::Locked {
                    id: held.id,
                    holder: held.holder,
                    operation: held.operation,
                    since: format!("{} (Unix time)", held.since),
                })
            }
            Err(e) => Err(Self::io(&path)(e)),
        }
    }

    /// Removes a lock whose holder died, only if `id` is the id it records: a lock taken since by
    /// someone else is never removed by mistake.
    pub fn force_unlock(&self, id: &str) -> Result<LockInfo, StateError> {
        let path = self.lock_path();
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(StateError::NotLocked),
            Err(e) => return Err(Self::io(&path)(e)),
        };
        let held: LockInfo = serde_json::from_str(&text)
            .map_err(|e| StateError::Corrupt { path: path.display().to_string(), message: e.to_string() })?;
        if held.id != id {
            return Err(StateError::LockMismatch { given: id.to_string(), held: held.id, holder: held.holder });
        }
        fs::remove_file(&path).map_err(Self::io(&path))?;
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_unlock_needs_the_lock_id() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(dir.path());
        assert!(matches!(b.force_unlock("nope"), Err(StateError::NotLocked)));
        let guard = b.lock("dead-ci-job", "apply").unwrap();
        let id = guard.info.id.clone();
        std::mem::forget(guard);
        assert!(matches!(b.force_unlock("wrong"), Err(StateError::LockMismatch { .. })));
        assert_eq!(b.force_unlock(&id).unwrap().holder, "dead-ci-job");
        b.lock("next", "apply").unwrap();
    }

    #[test]
    fn writes_atomically_and_bumps_the_serial() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(dir.path());
        assert!(b.read().unwrap().is_none());
        let mut s = State::new("stack");
        b.write(&mut s).unwrap();
        b.write(&mut s).unwrap();
        let back = b.read().unwrap().unwrap();
        assert_eq!(back.serial, 2);
        assert_eq!(back.lineage, s.lineage);
        assert!(dir.path().join("state.json.backup").exists());
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_second_locker_is_told_who_holds_it_until_release() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(dir.path());
        let guard = b.lock("alice@host pid 1", "apply").unwrap();
        let Err(StateError::Locked { id, holder, operation, .. }) = b.lock("bob@host pid 2", "plan") else {
            panic!("second lock should fail");
        };
        assert_eq!(
            (id.as_str(), holder.as_str(), operation.as_str()),
            (guard.info.id.as_str(), "alice@host pid 1", "apply")
        );
        drop(guard);
        assert!(b.lock("bob@host pid 2", "plan").is_ok());
    }
}
