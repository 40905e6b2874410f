//! What the engine tells whoever watches it: one event per step of each operation. The CLI turns
//! them into a live view, timestamped lines, or JSON lines; tests read them directly.

use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;
use xcsp_core::Address;
use xcsp_core::provider::Progress;
use xcsp_plans::plan::Action;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Reading every resource of one type from its cloud.
    Refreshing {
        rtype: String,
    },
    /// A resource found by its tags that state did not know (an interrupted create) is now recorded.
    Adopted {
        address: Address,
        id: String,
    },
    /// A recorded resource is gone from its cloud.
    Vanished {
        address: Address,
    },
    Started {
        address: Address,
        op: Action,
    },
    /// A long wait, and what it waits for.
    Waiting {
        address: Address,
        what: String,
    },
    /// The cloud throttled; the operation will run again later with less concurrency.
    Throttled {
        address: Address,
        limit: usize,
    },
    Finished {
        address: Address,
        op: Action,
        #[serde(with = "millis")]
        elapsed: Duration,
    },
    Failed {
        address: Address,
        op: Action,
        error: String,
    },
    /// Not run because something it depends on failed (or the run was interrupted).
    Skipped {
        address: Address,
        because: String,
    },
    /// How long the rest of the run should take: the longest remaining chain of typical
    /// durations, scaled by how the finished operations compared with theirs. Sent at the start
    /// and after each operation ends.
    Estimate {
        #[serde(with = "millis")]
        remaining: Duration,
    },
    /// Ctrl-C: no new operations start; those in flight are awaited.
    Stopping {
        in_flight: usize,
    },
    /// A second Ctrl-C: in-flight operations are abandoned (their intents stay in state).
    Abandoning {
        in_flight: usize,
    },
}

impl Event {
    pub fn address(&self) -> Option<&Address> {
        match self {
            Event::Refreshing { .. } | Event::Estimate { .. } | Event::Stopping { .. } | Event::Abandoning { .. } => {
                None
            }
            Event::Adopted { address, .. }
            | Event::Vanished { address }
            | Event::Started { address, .. }
            | Event::Waiting { address, .. }
            | Event::Throttled { address, .. }
            | Event::Finished { address, .. }
            | Event::Failed { address, .. }
            | Event::Skipped { address, .. } => Some(address),
        }
    }
}

mod millis {
    pub fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// Where events go. Sending never blocks; a watcher that went away is ignored.
#[derive(Clone)]
pub struct Events(Option<UnboundedSender<Event>>);

impl Events {
    pub fn new(tx: UnboundedSender<Event>) -> Events {
        Events(Some(tx))
    }

    /// Events written to stderr, one JSON object per line (for tests: shown when one fails).
    /// Needs a tokio runtime.
    pub fn to_stderr() -> Events {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                eprintln!("{}", serde_json::to_string(&e).unwrap_or_default());
            }
        });
        Events::new(tx)
    }

    /// Events nobody watches.
    pub fn none() -> Events {
        Events(None)
    }

    pub fn send(&self, event: Event) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(event);
        }
    }
}

impl Progress for Events {
    fn waiting(&self, address: &Address, what: &str) {
        self.send(Event::Waiting { address: address.clone(), what: what.to_string() });
    }
}
