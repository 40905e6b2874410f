//! Shared vocabulary of xcsp: addresses, values, resource types, diagnostics and the provider trait.
//!
//! Every other crate depends on this one and it depends on none of them. It does no IO and knows
//! no cloud SDK: providers translate between these types and their SDK's types.

pub mod address;
pub mod attrs;
pub mod codes;
pub mod diag;
pub mod provider;
pub mod rtype;
pub mod tags;
pub mod value;

pub use address::Address;
pub use diag::{Problem, Problems, SourceFile, Span};
pub use rtype::{ProviderKind, ResourceType};
pub use value::Value;

/// The AWS tag / Kubernetes label that names the stack a resource belongs to (Azure: [`tags::AZURE`]).
pub const STACK_TAG: &str = tags::SLASHED.stack;
/// The AWS tag / Kubernetes annotation that names a resource's address within its stack, so an
/// untracked resource can be adopted (Azure: [`tags::AZURE`]).
pub const ADDRESS_TAG: &str = tags::SLASHED.address;
