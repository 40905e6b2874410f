//! Spec -> model -> resource graph -> plan. No network IO: clouds are reached only through the
//! provider trait, by the engine, never from here.
//!
//! The stages, each with its own type: [`syntax`] (files -> raw spanned blocks), [`decode`]
//! (raw blocks -> typed [`spec::Spec`], evaluating expressions with [`eval`]), [`validate`]
//! (spec -> [`validate::Model`]), [`expand`] (model -> resource nodes), [`graph`] (nodes ->
//! checked DAG) and [`plan`] (graph vs recorded state -> changes).

pub mod decode;
pub mod eval;
pub mod expand;
pub mod exports;
pub mod graph;
pub mod net;
pub mod plan;
pub mod regions;
pub mod schema;
pub mod served;
pub mod spec;
pub mod syntax;
pub mod topology;
pub mod validate;

use std::path::Path;

use xcsp_core::{Problem, Problems};

pub use decode::VarInputs;
pub use graph::ResourceGraph;
pub use validate::Model;

/// A spec read, checked and expanded: what `validate`, `plan` and `graph` start from.
pub struct Loaded {
    pub model: Model,
    pub graph: ResourceGraph,
    /// Each resource that serves a computed export, and how (for [`exports::computed`]).
    pub exports: Vec<(xcsp_core::Address, served::Served)>,
    /// Warnings (errors stop loading).
    pub warnings: Problems,
}

/// Why loading stopped.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LoadFailure {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Io(#[from] syntax::LoadError),
    #[error("{0}")]
    #[diagnostic(transparent)]
    Problems(Problems),
}

/// Reads a spec (a file or a directory), checks everything, and builds the resource graph.
pub fn load(path: &Path, inputs: &VarInputs) -> Result<Loaded, LoadFailure> {
    let files = syntax::load_files(path)?;
    check_sources(files, inputs)
}

/// The whole front end over sources already in memory (tests and the fuzzer use this).
pub fn check_sources(
    files: Vec<std::sync::Arc<xcsp_core::SourceFile>>,
    inputs: &VarInputs,
) -> Result<Loaded, LoadFailure> {
    let (raw, mut problems) = syntax::parse(files);
    let spec = decode::decode(&raw, inputs, &mut problems);
    // Secrets never show in a rendered diagnostic, whichever file it points into.
    let shown = spec.files.iter().chain(problems.iter().flat_map(|p| p.labels.iter().map(|(s, _)| &s.file)));
    for file in shown {
        for secret in &spec.secrets {
            file.hide(secret);
        }
    }
    let model = validate::validate(spec, &mut problems);
    problems.sort();
    let Some(model) = model.filter(|_| !problems.has_errors()) else {
        return Err(LoadFailure::Problems(problems));
    };
    let expanded = expand::expanded(&model);
    match ResourceGraph::new(expanded.nodes) {
        Ok(graph) => Ok(Loaded { model, graph, exports: expanded.exports, warnings: problems }),
        Err(e) => {
            problems.push(Problem::error("xcsp::graph::invalid", e.to_string()));
            Err(LoadFailure::Problems(problems))
        }
    }
}
