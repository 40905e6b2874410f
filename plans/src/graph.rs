//! The resource graph: one node per resource, an edge from each resource to those that depend on
//! it. Built by `expand`, read by the planner and (later) the walker.

use std::collections::HashMap;
use std::fmt::Write;

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use serde::{Deserialize, Serialize};
use xcsp_core::provider::Attributes;
use xcsp_core::value::Value;
use xcsp_core::{Address, ProviderKind};

/// An attribute whose value another resource produces when it is created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// The attribute of this resource, e.g. `tunnel1_psk` or `public_ips[1]`.
    pub attribute: String,
    /// The producing resource.
    pub from: Address,
    /// The producer's attribute, e.g. `value` or `id`.
    pub output: String,
}

/// One resource the spec needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub address: Address,
    /// Desired attributes; those filled by inputs are unknown here.
    pub attributes: Attributes,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Input>,
    /// Ordering-only dependencies (no value flows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Address>,
    /// The block it comes from says `prevent_destroy = true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prevent_destroy: bool,
}

impl Node {
    /// Every resource this one depends on, each once.
    pub fn dependencies(&self) -> Vec<Address> {
        let mut deps: Vec<Address> =
            self.inputs.iter().map(|i| i.from.clone()).chain(self.depends_on.iter().cloned()).collect();
        deps.sort();
        deps.dedup();
        deps
    }

    /// The attributes with each input filled from its producer's recorded outputs, as far as
    /// `output_of(producer, output)` knows them; the rest stay unknown. An input into an attribute
    /// marked sensitive stays marked.
    pub fn filled(&self, output_of: impl Fn(&Address, &str) -> Option<Value>) -> Attributes {
        let mut attrs = self.attributes.clone();
        for input in &self.inputs {
            let Some(value) = output_of(&input.from, &input.output) else { continue };
            let (name, index) = split_index(&input.attribute);
            let Some(slot) = attrs.get_mut(name) else { continue };
            let slot = match (index, slot) {
                (None, slot) => slot,
                (Some(i), Value::List(items)) if i < items.len() => &mut items[i],
                _ => continue,
            };
            *slot = if slot.is_sensitive() && !value.is_sensitive() { Value::sensitive(value) } else { value };
        }
        attrs
    }
}

/// `public_ips[1]` -> (`public_ips`, Some(1)); `subnet` -> (`subnet`, None).
fn split_index(attribute: &str) -> (&str, Option<usize>) {
    if let Some((name, rest)) = attribute.split_once('[')
        && let Some(Ok(i)) = rest.strip_suffix(']').map(str::parse)
    {
        return (name, Some(i));
    }
    (attribute, None)
}

/// A cycle among resources: the addresses on it, in order.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
#[error("resources depend on each other in a cycle: {}", .0.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" -> "))]
#[diagnostic(code(xcsp::graph::cycle))]
pub struct Cycle(pub Vec<Address>);

/// A dependency on an address no node has.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
#[error("{from} depends on {to}, which is not in the graph")]
#[diagnostic(code(xcsp::graph::dangling))]
pub struct Dangling {
    pub from: Address,
    pub to: Address,
}

#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic)]
pub enum GraphError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Cycle(#[from] Cycle),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Dangling(#[from] Dangling),
    #[error("two resources have the address {0}")]
    #[diagnostic(code(xcsp::graph::duplicate))]
    Duplicate(Address),
}

#[derive(Debug, Clone, Default)]
pub struct ResourceGraph {
    graph: StableDiGraph<Node, ()>,
    index: HashMap<Address, NodeIndex>,
}

impl ResourceGraph {
    /// Builds the graph and checks it: unique addresses, every dependency present, no cycle.
    pub fn new(nodes: Vec<Node>) -> Result<ResourceGraph, GraphError> {
        let mut g = ResourceGraph::default();
        for n in nodes {
            let addr = n.address.clone();
            let ix = g.graph.add_node(n);
            if g.index.insert(addr.clone(), ix).is_some() {
                return Err(GraphError::Duplicate(addr));
            }
        }
        let edges: Vec<(NodeIndex, Address)> = g
            .graph
            .node_indices()
            .flat_map(|ix| g.graph[ix].dependencies().into_iter().map(move |d| (ix, d)))
            .collect();
        for (ix, dep) in edges {
            let Some(&from) = g.index.get(&dep) else {
                return Err(Dangling { from: g.graph[ix].address.clone(), to: dep }.into());
            };
            g.graph.add_edge(from, ix, ());
        }
        g.check_acyclic()?;
        Ok(g)
    }

    fn check_acyclic(&self) -> Result<(), Cycle> {
        if petgraph::algo::toposort(&self.graph, None).is_ok() {
            return Ok(());
        }
        let scc = petgraph::algo::tarjan_scc(&self.graph)
            .into_iter()
            .find(|c| c.len() > 1 || self.graph.contains_edge(c[0], c[0]))
            .expect("toposort found a cycle");
        let mut addrs: Vec<Address> = scc.iter().rev().map(|ix| self.graph[*ix].address.clone()).collect();
        addrs.push(addrs[0].clone());
        Err(Cycle(addrs))
    }

    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    pub fn get(&self, addr: &Address) -> Option<&Node> {
        self.index.get(addr).map(|ix| &self.graph[*ix])
    }

    /// Nodes in dependency order (each after everything it depends on); ties keep insertion order.
    pub fn in_order(&self) -> Vec<&Node> {
        let mut indegree: HashMap<NodeIndex, usize> = self
            .graph
            .node_indices()
            .map(|ix| (ix, self.graph.edges_directed(ix, petgraph::Incoming).count()))
            .collect();
        let mut ready: std::collections::BTreeSet<NodeIndex> =
            indegree.iter().filter(|(_, d)| **d == 0).map(|(ix, _)| *ix).collect();
        let mut out = Vec::with_capacity(self.len());
        while let Some(ix) = ready.pop_first() {
            out.push(&self.graph[ix]);
            for e in self.graph.edges_directed(ix, petgraph::Outgoing) {
                let d = indegree.get_mut(&e.target()).expect("node");
                *d -= 1;
                if *d == 0 {
                    ready.insert(e.target());
                }
            }
        }
        out
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.graph.node_weights()
    }

    /// Graphviz DOT, one cluster per provider, edges from dependency to dependent.
    pub fn to_dot(&self) -> String {
        let mut out =
            String::from("digraph xcsp {\n  rankdir = LR;\n  node [shape = box, fontname = \"monospace\"];\n");
        let mut by_provider: std::collections::BTreeMap<ProviderKind, Vec<&Node>> = Default::default();
        for n in self.in_order() {
            by_provider.entry(n.address.rtype.provider()).or_default().push(n);
        }
        for (p, nodes) in by_provider {
            let _ = writeln!(out, "  subgraph \"cluster_{}\" {{\n    label = \"{}\";", p.title(), p.title());
            for n in nodes {
                let _ = writeln!(out, "    \"{}\";", n.address);
            }
            out.push_str("  }\n");
        }
        for e in (&self.graph).edge_references() {
            let _ =
                writeln!(out, "  \"{}\" -> \"{}\";", self.graph[e.source()].address, self.graph[e.target()].address);
        }
        out.push_str("}\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xcsp_core::ResourceType;

    fn node(name: &str, deps: &[&str]) -> Node {
        Node {
            address: Address::new(ResourceType::AzureSubnet, name),
            attributes: Default::default(),
            inputs: vec![],
            depends_on: deps.iter().map(|d| Address::new(ResourceType::AzureSubnet, *d)).collect(),
            prevent_destroy: false,
        }
    }

    #[test]
    fn orders_dependencies_first() {
        let g = ResourceGraph::new(vec![node("c", &["b"]), node("b", &["a"]), node("a", &[])]).unwrap();
        let order: Vec<String> = g.in_order().iter().map(|n| n.address.name.clone()).collect();
        assert_eq!(order, ["a", "b", "c"]);
    }

    #[test]
    fn names_the_cycle() {
        let err = ResourceGraph::new(vec![node("a", &["c"]), node("b", &["a"]), node("c", &["b"])]).unwrap_err();
        let GraphError::Cycle(Cycle(addrs)) = err else { panic!("expected a cycle, got {err:?}") };
        assert_eq!(addrs.len(), 4);
        assert_eq!(addrs.first(), addrs.last());
    }

    #[test]
    fn refuses_dangling_and_duplicate() {
        assert!(matches!(ResourceGraph::new(vec![node("a", &["zz"])]), Err(GraphError::Dangling(_))));
        assert!(matches!(ResourceGraph::new(vec![node("a", &[]), node("a", &[])]), Err(GraphError::Duplicate(_))));
    }
}
