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
    #[error("{path} is {what}, not a spec file")]
    #[diagnostic(code(xcsp::spec::file), help("{help}"))]
    NotSpecFile { path: PathBuf, what: String, help: String },
}

/// The largest spec file xcsp reads: a spec is a few kilobytes; anything near this is not one,
/// and reading it whole would only cost memory.
pub const MAX_SPEC_FILE: u64 = 4 * 1024 * 1024;

/// Refuses, before reading, what is not a regular spec file of a sane size: a FIFO would block
/// the run, a device would never end.
fn check_file(p: &Path) -> Result<(), LoadError> {
    let meta = std::fs::metadata(p).map_err(|source| LoadError::Io { path: p.to_path_buf(), source })?;
    let refuse =
        |what: String, help: &str| Err(LoadError::NotSpecFile { path: p.to_path_buf(), what, help: help.to_string() });
    if meta.is_dir() {
        return refuse("a directory".into(), "spec files end in `.xcsp.hcl`; rename the directory or pass its parent");
    }
    if !meta.is_file() {
        return refuse(
            "not a regular file (a FIFO, socket or device)".into(),
            "pass a spec file or a directory of them",
        );
    }
    if meta.len() > MAX_SPEC_FILE {
        return refuse(
            format!("{} bytes, over the {MAX_SPEC_FILE}-byte limit for a spec file", meta.len()),
            "a spec is a few kilobytes; check that this is the file you meant",
        );
    }
    Ok(())
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
            check_file(&p)?;
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

#[cfg(test)]
mod file_tests {
    use super::*;

    #[test]
    fn fifos_directories_and_huge_files_are_refused_before_reading() {
        let dir = std::env::temp_dir().join(format!("xcsp-spec-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("pipe.xcsp.hcl");
        let _ = std::fs::remove_file(&fifo);
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let e = load_files(&fifo).unwrap_err();
        assert!(matches!(e, LoadError::NotSpecFile { .. }) && e.to_string().contains("not a regular file"), "{e}");
        // A directory named like a spec file, inside a spec directory.
        std::fs::remove_file(&fifo).unwrap();
        std::fs::create_dir_all(dir.join("nested.xcsp.hcl")).unwrap();
        let e = load_files(&dir).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        std::fs::remove_dir(dir.join("nested.xcsp.hcl")).unwrap();
        let big = dir.join("big.xcsp.hcl");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_SPEC_FILE + 1).unwrap();
        let e = load_files(&big).unwrap_err();
        assert!(e.to_string().contains("over the 4194304-byte limit"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
