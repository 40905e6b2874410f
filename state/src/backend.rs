//! Where a stack's state lives: a trait over the local directory and S3, so the commands and the
//! engine do not care which. Every method may reach the network, so all are async.

use std::future::Future;
use std::pin::Pin;

use crate::local::{LocalBackend, LockInfo};
use crate::{State, StateError};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub trait Backend: Send + Sync {
    /// Where it is, for messages (`.xcsp/il5-gpu`, `s3://bucket/key`).
    fn location(&self) -> String;
    fn read(&self) -> BoxFuture<'_, Result<Option<State>, StateError>>;
    /// Writes with the next serial; refuses to overwrite a state that changed since it was read.
    fn write<'a>(&'a self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>>;
    /// Takes the stack's lock, or says who holds it (and since when).
    fn lock<'a>(&'a self, holder: &'a str, operation: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>>;
    /// Releases a lock this process took.
    fn unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>>;
    /// Removes a dead holder's lock, only if `id` is the one it records.
    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>>;
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
