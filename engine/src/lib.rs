//! The engine: walks the resource graph on tokio, records every step in state.
