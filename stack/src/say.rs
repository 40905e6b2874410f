//! What an operation says that is not its result: warnings, notes, diagnostics (a spec or cluster
//! problem that does not stop it), and progress lines of the long operations (`watch`,
//! `rotate-keys`). The front end decides where they go: the command line writes them to stderr
//! and stdout, a controller to its log and the resource's Events.

use std::fmt::Display;
use std::sync::Arc;

/// One thing said.
#[derive(Debug, Clone)]
pub enum Notice {
    /// Something the user should know that does not stop the operation.
    Warning(String),
    /// How the operation reads the spec or state, said once.
    Note(String),
    /// A problem (spec, cluster, state backend) that does not stop the operation.
    Diagnostic(Arc<dyn miette::Diagnostic + Send + Sync>),
    /// A step of a long operation, one line (`watch`'s cycles, `rotate-keys`' keys).
    Progress(String),
}

/// Where notices go; cheap to clone.
#[derive(Clone)]
pub struct Say(Arc<dyn Fn(Notice) + Send + Sync>);

impl Say {
    pub fn new(sink: impl Fn(Notice) + Send + Sync + 'static) -> Say {
        Say(Arc::new(sink))
    }

    /// Says nothing (tests, and checks whose notices another call already said).
    pub fn nothing() -> Say {
        Say::new(|_| {})
    }

    pub fn warn(&self, text: impl Display) {
        (self.0)(Notice::Warning(text.to_string()))
    }

    pub fn note(&self, text: impl Display) {
        (self.0)(Notice::Note(text.to_string()))
    }

    pub fn diag(&self, d: impl miette::Diagnostic + Send + Sync + 'static) {
        (self.0)(Notice::Diagnostic(Arc::new(d)))
    }

    /// A diagnostic that cannot be handed over: its message, code, help and severity are.
    pub fn diag_ref(&self, d: &dyn miette::Diagnostic) {
        let said = Said {
            message: d.to_string(),
            code: d.code().map(|c| c.to_string()),
            help: d.help().map(|h| h.to_string()),
            severity: d.severity(),
        };
        (self.0)(Notice::Diagnostic(Arc::new(said)))
    }

    pub fn progress(&self, text: impl Display) {
        (self.0)(Notice::Progress(text.to_string()))
    }
}

impl std::fmt::Debug for Say {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Say")
    }
}

/// What [`Say::diag_ref`] keeps of a diagnostic.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct Said {
    message: String,
    code: Option<String>,
    help: Option<String>,
    severity: Option<miette::Severity>,
}

impl miette::Diagnostic for Said {
    fn code<'a>(&'a self) -> Option<Box<dyn Display + 'a>> {
        self.code.as_ref().map(|c| Box::new(c) as Box<dyn Display>)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn Display>)
    }

    fn severity(&self) -> Option<miette::Severity> {
        self.severity
    }
}
