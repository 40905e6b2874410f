//! The provider trait: the one seam through which the engine reaches a cloud.
//!
//! Providers (AWS, Azure, Kubernetes, local) implement it in the `providers` crate; SDK types
//! never cross it. Four operations cover the lifecycle:
//! - `refresh` reads, in bulk, every resource of one type that carries the stack's tag. It returns
//!   the recorded ones and also those that no state knows (created by an apply that died before
//!   recording them): the engine adopts the latter by their address tag instead of creating twins.
//! - `write` (create or update) and `delete` may be long-running; they report progress as they
//!   wait.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use indexmap::IndexMap;

use crate::address::Address;
use crate::rtype::{ProviderKind, ResourceType};
use crate::value::Value;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Attributes of one resource, by name.
pub type Attributes = IndexMap<String, Value>;

/// One resource as the cloud holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// From the resource's address tag.
    pub address: Address,
    /// The cloud's identifier (EC2 id, ARM resource id, Kubernetes namespace/name).
    pub id: String,
    pub attributes: Attributes,
}

/// What the engine asks a provider to make true for one resource.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub stack: &'a str,
    pub address: &'a Address,
    /// The cloud id, for updates and deletes.
    pub id: Option<&'a str>,
    /// Desired attributes with every unknown already filled in by its producer.
    pub attributes: &'a Attributes,
}

impl Request<'_> {
    /// The engine knows no cloud id for it yet: it asks for a create.
    pub fn is_create(&self) -> bool {
        self.id.is_none()
    }
}

/// Where a long-running operation reports what it is waiting for.
pub trait Progress: Send + Sync {
    fn waiting(&self, address: &Address, what: &str);
}

/// Why a provider operation did not succeed.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
pub enum ProviderError {
    #[error("{address}: the cloud throttled the request ({detail})")]
    #[diagnostic(
        code(xcsp::provider::throttled),
        help("xcsp retries throttled calls; this one exhausted its deadline")
    )]
    Throttled { address: String, detail: String, retry_after: Option<Duration> },

    #[error("{address}: still in use: {detail}")]
    #[diagnostic(
        code(xcsp::provider::in_use),
        help("something still depends on it; destroy retries once dependents are gone")
    )]
    InUse { address: String, detail: String },

    #[error("{address}: not found in the cloud")]
    #[diagnostic(code(xcsp::provider::not_found))]
    NotFound { address: String },

    #[error("{address}: {operation} did not finish within {timeout:?}")]
    #[diagnostic(
        code(xcsp::provider::timeout),
        help("raise the timeout for this resource type, or re-run apply to resume waiting")
    )]
    Timeout { address: String, operation: &'static str, timeout: Duration },

    #[error("{address}: {code}: {message}")]
    #[diagnostic(code(xcsp::provider::failed))]
    Failed { address: String, code: String, message: String },
}

/// A cloud (or xcsp itself) seen through the operations the engine needs.
pub trait Provider: Send + Sync {
    fn kind(&self) -> ProviderKind;

    /// What refresh reads, in as few calls as the API allows: the resources state records
    /// (`known`: address, id and the attributes recorded, in the shape of an observation), found
    /// by their id whatever their tags say now (a resource whose tags drifted is an update, never
    /// a create), and the others tagged with `stack` (for adoption and sweeps).
    fn refresh_known<'a>(
        &'a self,
        stack: &'a str,
        rtype: ResourceType,
        known: &'a [Observed],
    ) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>>;

    /// Every resource of `rtype` tagged with `stack` (nothing known from state).
    fn refresh<'a>(
        &'a self,
        stack: &'a str,
        rtype: ResourceType,
    ) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        self.refresh_known(stack, rtype, &[])
    }

    /// Makes the cloud hold `req.attributes` for `req.address`: a create when `req.id` is `None`,
    /// an update of that id otherwise. One method, because every cloud here writes both the same
    /// way (ARM and server-side apply are one PUT/apply; EC2 creates look for the address tag
    /// first, so a create may find the resource and update it); [`Request::is_create`] tells a
    /// provider which one the engine meant, for its messages and budgets.
    fn write<'a>(
        &'a self,
        req: Request<'a>,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Observed, ProviderError>>;

    fn delete<'a>(&'a self, req: Request<'a>, progress: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>>;

    /// What the cloud runs one operation at a time (an Azure VPN gateway and its connections):
    /// operations with the same key never run together. The engine starts only one per key, so
    /// an operation waiting its turn holds no concurrency slot; a provider does not serialise
    /// its callers itself, so any other caller must keep the same rule. `None`: no such constraint.
    fn serial_key(&self, _req: &Request<'_>) -> Option<String> {
        None
    }
}
