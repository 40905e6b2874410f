//! Spec -> model -> resource graph -> plan. No network IO: clouds are reached only through the
//! provider trait, by the engine, never from here.
//!
//! The stages, each with its own type: [`syntax`] (files -> raw spanned blocks), [`decode`]
//! (raw blocks -> typed [`spec::Spec`], evaluating expressions with [`eval`]), [`validate`]
//! (spec -> [`validate::Model`]), [`expand`] (model -> resource nodes), [`graph`] (nodes ->
//! checked DAG) and [`plan`] (graph vs recorded state -> changes).

pub mod components;
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
    let model = validate::validate(spec, &mut problems).map(|mut m| {
        read_components(&mut m, &mut problems);
        m
    });
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

/// Reads the components files the `cluster_api` block names, relative to the directory of the
/// file that names them; `providers = "xcsp"` needs both.
fn read_components(model: &mut validate::Model, problems: &mut xcsp_core::Problems) {
    use spec::ProvidersMode;
    let api = &mut model.cluster.cluster_api;
    for (key, source) in [("core_components", &mut api.core), ("azure_components", &mut api.azure)] {
        let Some(source) = source else {
            if api.providers.value == ProvidersMode::Xcsp {
                problems.push(
                    Problem::error("xcsp::cluster_api::components", format!("providers = \"xcsp\" needs `{key}`"))
                        .label(&api.providers.span, "xcsp installs the providers")
                        .with_help(format!(
                            "set `{key}` to the provider's release manifests ({}), or providers = \"auto\"",
                            if key == "core_components" {
                                "core-components.yaml of a Cluster API release"
                            } else {
                                "infrastructure-components.yaml of a CAPZ release"
                            }
                        )),
                );
            }
            continue;
        };
        let written = std::path::Path::new(&source.components.value);
        let dir = std::path::Path::new(&source.components.span.file.name).parent().map(std::path::Path::to_path_buf);
        let path = match dir {
            Some(d) if written.is_relative() => d.join(written),
            _ => written.to_path_buf(),
        };
        match components::read(&path) {
            Ok(c) => source.read = Some(c),
            Err(e) => problems.push(
                Problem::error("xcsp::cluster_api::components", e)
                    .label(&source.components.span, "the provider's release manifests")
                    .with_help("name a provider's components file: `core-components.yaml` of a Cluster API release, `infrastructure-components.yaml` of a CAPZ release"),
            ),
        }
    }
}
