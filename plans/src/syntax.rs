//! Loading spec files and parsing them into spanned raw blocks (no meaning attached yet).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hcl_edit::expr::Expression;
use hcl_edit::structure::{BlockLabel, Body, Structure};
use xcsp_core::{Problem, Problems, SourceFile, Span};

/// The suffix that marks a spec file in a directory.
pub const SPEC_SUFFIX: &str = ".xcsp.hcl";

/// An attribute as written: its key and unevaluated expression.
#[derive(Debug, Clone)]
pub struct RawAttr {
    pub key: String,
    pub key_span: Span,
    pub expr: Expression,
    /// Span of the expression.
    pub span: Span,
}

/// A block as written.
#[derive(Debug, Clone)]
pub struct RawBlock {
    pub kind: String,
    pub kind_span: Span,
    pub labels: Vec<(String, Span)>,
    pub attrs: Vec<RawAttr>,
    pub blocks: Vec<RawBlock>,
    /// The whole block.
    pub span: Span,
    pub file: Arc<SourceFile>,
}

impl RawBlock {
    pub fn attr(&self, key: &str) -> Option<&RawAttr> {
        self.attrs.iter().find(|a| a.key == key)
    }

    /// The span that best names the block: its labels if any, else its keyword.
    pub fn head_span(&self) -> Span {
        match (self.labels.first(), self.labels.last()) {
            (Some((_, first)), Some((_, last))) => Span::new(&self.file, self.kind_span.start..last.end.max(first.end)),
            _ => self.kind_span.clone(),
        }
    }
}

/// Top-level attributes and blocks of every file of a spec.
#[derive(Debug, Default)]
pub struct RawSpec {
    pub files: Vec<Arc<SourceFile>>,
    pub attrs: Vec<RawAttr>,
    pub blocks: Vec<RawBlock>,
}

/// Why a spec could not be read at all.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    #[diagnostic(code(xcsp::spec::io))]
    Io { path: PathBuf, source: std::io::Error },
    #[error("no `*{SPEC_SUFFIX}` files in {0}")]
    #[diagnostic(code(xcsp::spec::empty), help("name spec files like `pool.xcsp.hcl`, or pass a single file"))]
    Empty(PathBuf),
}

/// Reads a single spec file, or every `*.xcsp.hcl` file of a directory in name order.
pub fn load_files(path: &Path) -> Result<Vec<Arc<SourceFile>>, LoadError> {
    let io = |source| LoadError::Io { path: path.to_path_buf(), source };
    let paths = if path.is_dir() {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(SPEC_SUFFIX)))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(LoadError::Empty(path.to_path_buf()));
        }
        paths
    } else {
        vec![path.to_path_buf()]
    };
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(|source| LoadError::Io { path: p.clone(), source })?;
            Ok(SourceFile::new(p.display().to_string(), text))
        })
        .collect()
}

/// Parses every file; syntax errors are problems, and the files that parse still contribute blocks.
pub fn parse(files: Vec<Arc<SourceFile>>) -> (RawSpec, Problems) {
    let mut spec = RawSpec::default();
    let mut problems = Problems::default();
    for file in &files {
        match hcl_edit::parser::parse_body(&file.text) {
            Ok(body) => {
                let (attrs, blocks) = lower_body(&body, file);
                spec.attrs.extend(attrs);
                spec.blocks.extend(blocks);
            }
            Err(e) => {
                let at = e.location().offset().min(file.text.len());
                let end = (at + 1).min(file.text.len());
                problems.push(
                    Problem::error("xcsp::spec::syntax", format!("invalid HCL: {}", e.message()))
                        .label(&Span::new(file, at..end), "here")
                        .with_help("fix the syntax; nothing else in this file was checked"),
                );
            }
        }
    }
    spec.files = files;
    (spec, problems)
}

fn span_of(file: &Arc<SourceFile>, s: &impl hcl_edit::Span) -> Span {
    Span::new(file, s.span().unwrap_or(0..0))
}

fn lower_body(body: &Body, file: &Arc<SourceFile>) -> (Vec<RawAttr>, Vec<RawBlock>) {
    let mut attrs = Vec::new();
    let mut blocks = Vec::new();
    for structure in body.iter() {
        match structure {
            Structure::Attribute(a) => attrs.push(RawAttr {
                key: a.key.as_str().to_string(),
                key_span: span_of(file, &a.key),
                expr: a.value.clone(),
                span: span_of(file, &a.value),
            }),
            Structure::Block(b) => {
                let (inner_attrs, inner_blocks) = lower_body(&b.body, file);
                let labels = b
                    .labels
                    .iter()
                    .map(|l| {
                        let text = match l {
                            BlockLabel::Ident(i) => i.as_str().to_string(),
                            BlockLabel::String(s) => s.as_str().to_string(),
                        };
                        (text, span_of(file, l))
                    })
                    .collect();
                blocks.push(RawBlock {
                    kind: b.ident.as_str().to_string(),
                    kind_span: span_of(file, &b.ident),
                    labels,
                    attrs: inner_attrs,
                    blocks: inner_blocks,
                    span: span_of(file, b),
                    file: Arc::clone(file),
                });
            }
        }
    }
    (attrs, blocks)
}
