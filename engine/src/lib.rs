//! The engine: applies and destroys a stack by walking its resource graph on tokio, recording
//! every completed step in state before the next begins.
//!
//! - [`refresh`] reads the stack's resources from the clouds in bulk and adopts what an
//!   interrupted apply left behind.
//! - [`walk`] runs creates, updates, replaces and deletes in dependency order, in parallel, critical
//!   path first, with per-provider concurrency that backs off under throttling.
//! - [`events`] is what a run reports.
//!
//! The engine owns no provider: the caller hands it every one, xcsp's own pre-shared keys
//! (`xcsp-local`) included.

pub mod events;
pub mod refresh;
pub mod schedule;
pub mod walk;

pub use events::{Event, Events};
pub use refresh::{Adopt, Refreshed, refresh, refresh_only};
pub use walk::{Limits, Order, Providers, Retries, Run, StepError, Store, Summary, apply, destroy};
pub use xcsp_plans::plan::Action;
