//! The local backend: `<dir>/state.json`, written atomically (temp file, fsync, rename, fsync
//! of the directory), and `<dir>/state.lock`, created exclusively with its record already in it
//! (written to a temp file, then hard-linked into place), so a lock file is never empty.
//! Every file it creates (state, backup, lock) is readable by its owner only (mode 0600 on Unix):
//! state holds resource ids and, unsealed, secrets.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::backend::{Backend, BoxFuture, LockInfo, UNREADABLE_LOCK};
use crate::{State, StateError, decode};

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

/// Creates (or truncates) `path` readable and writable by its owner only (0600 on Unix). A file
/// that was already there is narrowed to 0600 too, if it is a regular file (never a device such
/// as `/dev/stdout`).
pub fn create_private(path: &Path) -> std::io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let f = options.open(path)?;
    narrow(&f)?;
    Ok(f)
}

/// Writes `bytes` to `path` as [`create_private`] creates it.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_private(path)?.write_all(bytes)
}

/// Sets an open regular file to 0600 (a no-op off Unix).
fn narrow(f: &File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = f.metadata()?;
        if meta.is_file() && meta.permissions().mode() & 0o777 != 0o600 {
            f.set_permissions(fs::Permissions::from_mode(0o600))?;
        }
    }
    #[cfg(not(unix))]
    let _ = f;
    Ok(())
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
        let mut f = create_private(&tmp).map_err(Self::io(&tmp))?;
        f.write_all(&text).and_then(|_| f.sync_all()).map_err(Self::io(&tmp))?;
        if path.exists() {
            // Copied into a file made 0600, never with the mode of a state an older xcsp wrote.
            let backup = self.dir.join("state.json.backup");
            let mut to = create_private(&backup).map_err(Self::io(&backup))?;
            File::open(&path).and_then(|mut from| std::io::copy(&mut from, &mut to)).map_err(Self::io(&path))?;
        }
        fs::rename(&tmp, &path).map_err(Self::io(&path))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(Self::io(&self.dir))?;
        Ok(())
    }

    /// Takes the lock, or says who holds it.
    pub fn lock(&self, holder: &str, operation: &str) -> Result<LockGuard, StateError> {
        fs::create_dir_all(&self.dir).map_err(Self::io(&self.dir))?;
        let path = self.lock_path();
        let info = LockInfo::new(holder, operation);
        let text = serde_json::to_vec(&info).expect("lock info serializes");
        // A holder may release between our attempt and our look at its record: try again then.
        for _ in 0..3 {
            match self.create_lock(&info, &text) {
                Ok(()) => return Ok(LockGuard { path, info }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match self.held() {
                    Ok(held) => return Err(held.refusal()),
                    Err(StateError::NotLocked) => continue,
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(Self::io(&path)(e)),
            }
        }
        Err(self.held()?.refusal())
    }

    /// Creates the lock file with `text` in it, failing with `AlreadyExists` if there is one.
    fn create_lock(&self, info: &LockInfo, text: &[u8]) -> std::io::Result<()> {
        let path = self.lock_path();
        let tmp = self.dir.join(format!(".state.lock.{}.tmp", info.id));
        let mut f = create_private(&tmp)?;
        f.write_all(text).and_then(|_| f.sync_all())?;
        // A hard link is made only if nothing has the name yet: exclusive, and whole.
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                // A file system without hard links (FAT, some network mounts): create it
                // exclusively and write the record, the one moment it can be seen empty.
                let mut options = fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut f = options.open(&path)?;
                f.write_all(text).and_then(|_| f.sync_all())
            }
            other => other,
        }
    }

    /// The lock's record, or an "unreadable" one if the file holds something else.
    fn held(&self) -> Result<LockInfo, StateError> {
        let path = self.lock_path();
        match fs::read_to_string(&path) {
            Ok(t) => Ok(serde_json::from_str(&t).unwrap_or_else(|_| LockInfo::unreadable(UNREADABLE_LOCK))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StateError::NotLocked),
            Err(e) => Err(Self::io(&path)(e)),
        }
    }

    /// Removes a lock whose holder died, only if `id` is the id it records: a lock taken since by
    /// someone else is never removed by mistake.
    pub fn force_unlock(&self, id: &str) -> Result<LockInfo, StateError> {
        let path = self.lock_path();
        let held = self.held()?;
        if held.id != id {
            return Err(StateError::LockMismatch { given: id.to_string(), held: held.id, holder: held.holder });
        }
        fs::remove_file(&path).map_err(Self::io(&path))?;
        Ok(held)
    }
}

impl Backend for LocalBackend {
    fn location(&self) -> String {
        self.dir().display().to_string()
    }

    fn read(&self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        let r = LocalBackend::read(self);
        Box::pin(async move { r })
    }

    fn write<'a>(&'a self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        let r = LocalBackend::write(self, state);
        Box::pin(async move { r })
    }

    fn lock<'a>(&'a self, holder: &'a str, operation: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        // The file stays until unlock: the guard's drop would remove it here.
        let r = LocalBackend::lock(self, holder, operation).map(|g| {
            let info = g.info.clone();
            std::mem::forget(g);
            info
        });
        Box::pin(async move { r })
    }

    fn unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        let r = LocalBackend::force_unlock(self, id).map(|_| ());
        Box::pin(async move { r })
    }

    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        let r = LocalBackend::force_unlock(self, id);
        Box::pin(async move { r })
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
    fn an_unreadable_lock_is_reported_and_cleared_by_its_fixed_id() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(dir.path());
        fs::write(dir.path().join("state.lock"), "").unwrap();
        let Err(StateError::Locked { id, .. }) = b.lock("next", "apply") else { panic!("an empty lock file holds") };
        assert_eq!(id, UNREADABLE_LOCK);
        assert!(matches!(b.force_unlock("other"), Err(StateError::LockMismatch { .. })));
        b.force_unlock(UNREADABLE_LOCK).unwrap();
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

    #[cfg(unix)]
    #[test]
    fn state_backup_and_lock_are_readable_by_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(dir.path());
        let mut s = State::new("stack");
        b.write(&mut s).unwrap();
        // A state an older xcsp left world-readable: its backup is not, and the next write narrows it.
        fs::set_permissions(dir.path().join("state.json"), fs::Permissions::from_mode(0o644)).unwrap();
        b.write(&mut s).unwrap();
        let guard = b.lock("alice", "apply").unwrap();
        for name in ["state.json", "state.json.backup", "state.lock"] {
            assert_eq!(mode(&dir.path().join(name)), 0o600, "{name}");
        }
        drop(guard);
        let loose = dir.path().join("plan.json");
        fs::write(&loose, "old").unwrap();
        fs::set_permissions(&loose, fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&loose, b"new").unwrap();
        assert_eq!((mode(&loose), fs::read_to_string(&loose).unwrap().as_str()), (0o600, "new"));
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
