//! Diagnostics: problems found in a spec, each with a stable code, labelled source spans and help.
//!
//! Problems are values, collected in batches ([`Problems`]) so that a user sees every mistake
//! in one run. They implement `miette::Diagnostic`; only the binary chooses how to render them.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use miette::{Diagnostic, LabeledSpan, NamedSource, Severity, SourceCode};

/// One source file of a spec, shared by every span that points into it.
///
/// Diagnostics show lines of it; secrets found while loading (pre-shared keys, sensitive
/// variables) are registered with [`SourceFile::hide`] and appear as `*` in whatever is shown.
#[derive(Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    hidden: Mutex<Vec<String>>,
    /// The text as diagnostics show it, built at the first rendering (after loading is done).
    shown: OnceLock<NamedSource<String>>,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Arc<SourceFile> {
        Arc::new(SourceFile {
            name: name.into(),
            text: text.into(),
            hidden: Mutex::new(Vec::new()),
            shown: OnceLock::new(),
        })
    }

    /// Masks every occurrence of `secret` wherever this file is shown. Call before rendering.
    pub fn hide(&self, secret: &str) {
        // Very short values would mask ordinary text and are no secret worth the name.
        if secret.len() >= 4 {
            self.hidden.lock().expect("not poisoned").push(secret.to_string());
        }
    }

    /// The text with hidden values replaced, byte for byte, by `*` (spans stay valid).
    fn shown(&self) -> &NamedSource<String> {
        self.shown.get_or_init(|| {
            let mut text = self.text.clone();
            for secret in self.hidden.lock().expect("not poisoned").iter() {
                text = text.replace(secret.as_str(), &"*".repeat(secret.len()));
            }
            NamedSource::new(self.name.clone(), text)
        })
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text.as_bytes()[..offset];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let col = offset - before.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1) + 1;
        (line, col)
    }
}

/// A byte range in one source file.
#[derive(Clone)]
pub struct Span {
    pub file: Arc<SourceFile>,
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(file: &Arc<SourceFile>, range: std::ops::Range<usize>) -> Span {
        Span { file: Arc::clone(file), start: range.start, end: range.end.max(range.start) }
    }

    /// The text the span covers.
    pub fn text(&self) -> &str {
        self.file.text.get(self.start..self.end).unwrap_or("")
    }

    /// `file:line:col`, for plain-text output.
    pub fn location(&self) -> String {
        let (line, col) = self.file.line_col(self.start);
        format!("{}:{line}:{col}", self.file.name)
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}..{}]", self.file.name, self.start, self.end)
    }
}

impl PartialEq for Span {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.file, &other.file) && self.start == other.start && self.end == other.end
    }
}

/// One thing wrong (or worth a warning) in a spec.
#[derive(Debug, Clone)]
pub struct Problem {
    /// Stable code, e.g. `xcsp::cidr::overlap`.
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    pub help: Option<String>,
    /// The first label is the primary one; labels in another file than the primary's are
    /// mentioned in the help text instead (a diagnostic renders one source).
    pub labels: Vec<(Span, String)>,
}

impl Problem {
    pub fn error(code: &'static str, message: impl Into<String>) -> Problem {
        Problem { code, severity: Severity::Error, message: message.into(), help: None, labels: Vec::new() }
    }

    pub fn warning(code: &'static str, message: impl Into<String>) -> Problem {
        Problem { severity: Severity::Warning, ..Problem::error(code, message) }
    }

    pub fn label(mut self, span: &Span, text: impl Into<String>) -> Problem {
        self.labels.push((span.clone(), text.into()));
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Problem {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    fn primary_file(&self) -> Option<&Arc<SourceFile>> {
        self.labels.first().map(|(s, _)| &s.file)
    }

    /// Labels that live in another file than the primary label, rendered as text.
    fn foreign_labels(&self) -> Vec<String> {
        let Some(primary) = self.primary_file() else { return Vec::new() };
        self.labels
            .iter()
            .filter(|(s, _)| !Arc::ptr_eq(&s.file, primary))
            .map(|(s, text)| format!("{}: {text}", s.location()))
            .collect()
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl Diagnostic for Problem {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }

    fn severity(&self) -> Option<Severity> {
        Some(self.severity)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        let foreign = self.foreign_labels();
        match (&self.help, foreign.is_empty()) {
            (None, true) => None,
            (Some(h), true) => Some(Box::new(h.clone())),
            (h, false) => {
                let mut text = foreign.join("\n");
                if let Some(h) = h {
                    text = format!("{h}\n{text}");
                }
                Some(Box::new(text))
            }
        }
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.primary_file().map(|f| f.shown() as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let primary = self.primary_file()?;
        Some(Box::new(self.labels.iter().enumerate().filter(move |(_, (s, _))| Arc::ptr_eq(&s.file, primary)).map(
            |(i, (s, text))| {
                let label = (!text.is_empty()).then(|| text.clone());
                if i == 0 {
                    LabeledSpan::new_primary_with_span(label, s.start..s.end)
                } else {
                    LabeledSpan::new_with_span(label, s.start..s.end)
                }
            },
        )))
    }
}

/// Every problem found in one pass, reported together.
#[derive(Debug, Clone, Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn push(&mut self, p: Problem) {
        self.0.push(p);
    }

    pub fn extend(&mut self, other: Problems) {
        self.0.extend(other.0);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Problem::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.0.iter().filter(|p| p.is_error()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Problem> {
        self.0.iter()
    }

    /// Orders problems by file and position, so output is stable and reads top to bottom.
    pub fn sort(&mut self) {
        self.0.sort_by(|a, b| {
            let key = |p: &Problem| p.labels.first().map(|(s, _)| (s.file.name.clone(), s.start));
            key(a).cmp(&key(b)).then_with(|| a.code.cmp(b.code))
        });
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errors = self.error_count();
        write!(f, "the spec has {errors} error{}", if errors == 1 { "" } else { "s" })
    }
}

impl std::error::Error for Problems {}

impl Diagnostic for Problems {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new("xcsp::spec"))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        Some(Box::new(self.0.iter().map(|p| p as &dyn Diagnostic)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let f = SourceFile::new("a.hcl", "ab\ncd\n");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(4), (2, 2));
    }
}
