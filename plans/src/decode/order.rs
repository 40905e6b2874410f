//! The order in which blocks are evaluated: a block that others refer to goes first. Blocks
//! that refer to each other in a cycle are reported and left out.

use std::collections::HashMap;

use petgraph::graph::DiGraph;
use xcsp_core::{Problem, Problems};

use crate::eval;
use crate::syntax::RawBlock;

/// The referenceable blocks' evaluation order.
pub(super) struct Order {
    /// Indexes of the blocks to evaluate, each after those it refers to.
    pub(super) order: Vec<usize>,
    /// By index: the block is on a cycle (and not evaluated).
    pub(super) in_cycle: Vec<bool>,
    /// Which block refers to which (`worker_pool.gpu` -> `network.link`).
    pub(super) references: Vec<(String, String)>,
}

/// The order of `entities` (the referenceable blocks), reporting every cycle among them.
pub(super) fn evaluation_order(entities: &[&RawBlock], problems: &mut Problems) -> Order {
    let id_of = |b: &RawBlock| match b.labels.first() {
        Some((n, _)) => format!("{}.{n}", b.kind),
        None => b.kind.clone(),
    };
    let index: HashMap<String, usize> = entities.iter().enumerate().map(|(i, b)| (id_of(b), i)).collect();
    let mut graph = DiGraph::<usize, eval::Reference>::new();
    let nodes: Vec<_> = (0..entities.len()).map(|i| graph.add_node(i)).collect();
    let mut references = Vec::new();
    for (i, b) in entities.iter().enumerate() {
        for r in block_references(b) {
            if let Some(&j) = index.get(&r.target()) {
                references.push((id_of(b), r.target()));
                if i != j || r.attr.is_some() {
                    graph.add_edge(nodes[i], nodes[j], r);
                }
            }
        }
        // Defaults that read other blocks are dependencies too.
        if b.kind == "workload_identity" {
            for dep in ["cluster", "azure"] {
                if let Some(&j) = index.get(dep) {
                    graph.add_edge(nodes[i], nodes[j], synthetic_ref(dep, b));
                }
            }
        }
    }
    let mut in_cycle = vec![false; entities.len()];
    let mut order = Vec::new();
    // tarjan_scc yields components in reverse topological order: dependencies first.
    for scc in petgraph::algo::tarjan_scc(&graph) {
        let self_loop = scc.len() == 1 && graph.find_edge(scc[0], scc[0]).is_some();
        if scc.len() > 1 || self_loop {
            report_cycle(&graph, &scc, entities, &id_of, problems);
            for n in &scc {
                in_cycle[graph[*n]] = true;
            }
        } else {
            order.push(graph[scc[0]]);
        }
    }
    Order { order, in_cycle, references }
}

fn synthetic_ref(kind: &str, b: &RawBlock) -> eval::Reference {
    eval::Reference { kind: kind.into(), name: None, attr: None, span: b.head_span() }
}

fn report_cycle(
    graph: &DiGraph<usize, eval::Reference>,
    scc: &[petgraph::graph::NodeIndex],
    entities: &[&RawBlock],
    id_of: &dyn Fn(&RawBlock) -> String,
    problems: &mut Problems,
) {
    let members: std::collections::HashSet<_> = scc.iter().copied().collect();
    let mut p = Problem::error("xcsp::graph::cycle", "");
    let mut chain = Vec::new();
    for e in graph.edge_indices() {
        let (a, b) = graph.edge_endpoints(e).expect("edge exists");
        if members.contains(&a) && members.contains(&b) {
            let (from, to) = (id_of(entities[graph[a]]), id_of(entities[graph[b]]));
            p = p.label(&graph[e].span, format!("{from} refers to {to}"));
            chain.push(format!("{from} -> {to}"));
        }
    }
    p.message = format!("these blocks refer to each other in a cycle: {}", chain.join(", "));
    problems.push(p.with_help("break the cycle: one of these values must not depend on the others"));
}

fn block_references(b: &RawBlock) -> Vec<eval::Reference> {
    let mut out: Vec<eval::Reference> = b.attrs.iter().flat_map(|a| eval::references(&a.expr, &b.file)).collect();
    for inner in &b.blocks {
        out.extend(block_references(inner));
    }
    out.retain(|r| r.kind != "var");
    out
}
