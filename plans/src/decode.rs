//! From raw blocks to the typed [`Spec`]: schema checks (unknown, missing, duplicate, wrong
//! type), variables, the order in which blocks refer to each other (and cycles), evaluation,
//! and defaults. Every problem is collected; nothing stops at the first.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use hcl_edit::expr::Expression;
use indexmap::IndexMap;
use ipnet::Ipv4Net;
use petgraph::graph::DiGraph;
use sha2::{Digest, Sha256};
use xcsp_core::{Problem, Problems, SourceFile, Span, Value};

use crate::eval::{self, Evaluator, Scope};
use crate::net::parse_cidr;
use crate::schema::{self, BlockSpec, Ty, suggest};
use crate::spec::*;
use crate::syntax::{RawAttr, RawBlock, RawSpec};

/// Variable values from outside the spec, lowest precedence first within each source.
#[derive(Debug, Clone, Default)]
pub struct VarInputs {
    /// `XCSP_VAR_<name>` environment variables (lowest precedence).
    pub env: Vec<(String, String)>,
    /// `-var-file` paths, in order.
    pub files: Vec<PathBuf>,
    /// `-var name=value` flags, in order (highest precedence).
    pub flags: Vec<String>,
    /// Values of computed exports known from state (`exports::key` -> value), for loading the
    /// spec again after apply; empty when planning.
    pub computed: std::collections::BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum VarType {
    String,
    Number,
    Bool,
    List,
    Map,
    Any,
}

struct Variable {
    ty: VarType,
    sensitive: bool,
    value: Option<Value>,
    span: Span,
}

/// Names visible to expressions while decoding.
#[derive(Default)]
struct Env {
    vars: IndexMap<String, Value>,
    blocks: HashMap<(String, Option<String>), IndexMap<String, Value>>,
    declared: HashMap<String, indexmap::IndexSet<String>>,
}

impl Scope for Env {
    fn variable(&self, name: &str) -> Option<&Value> {
        self.vars.get(name)
    }
    fn variable_names(&self) -> Vec<String> {
        self.vars.keys().cloned().collect()
    }
    fn block(&self, kind: &str, name: Option<&str>) -> Option<&IndexMap<String, Value>> {
        self.blocks.get(&(kind.to_string(), name.map(String::from)))
    }
    fn block_names(&self, kind: &str) -> Vec<String> {
        self.declared.get(kind).map(|n| n.iter().cloned().collect()).unwrap_or_default()
    }
}

/// Decodes a parsed spec. Returns the spec (as much as could be decoded) and every problem.
pub fn decode(raw: &RawSpec, inputs: &VarInputs, problems: &mut Problems) -> Spec {
    let mut digest = Sha256::new();
    for f in &raw.files {
        digest.update(f.name.as_bytes());
        digest.update([0]);
        digest.update(f.text.as_bytes());
        digest.update([0]);
    }

    // Root attributes.
    let mut stack = None;
    for a in &raw.attrs {
        if schema::ROOT_ATTRS.iter().any(|s| s.name == a.key) {
            stack = literal_string(&a.expr).map(|s| Sp::new(s, a.span.clone()));
            if stack.is_none() {
                problems
                    .push(Problem::error("xcsp::spec::type", "`stack` must be a literal string").label(&a.span, ""));
            }
        } else {
            let help = suggest(&a.key, schema::ROOT_ATTRS.iter().map(|s| s.name))
                .unwrap_or_else(|| "only `stack` may be set outside a block".into());
            problems.push(
                Problem::error("xcsp::spec::unknown_attribute", format!("unknown top-level attribute `{}`", a.key))
                    .label(&a.key_span, "")
                    .with_help(help),
            );
        }
    }

    // Which blocks exist; unknown and duplicate ones.
    let mut by_kind: IndexMap<&str, Vec<&RawBlock>> = IndexMap::new();
    let mut first_of: HashMap<(&str, Option<&str>), &RawBlock> = HashMap::new();
    for b in &raw.blocks {
        let Some(spec) = schema::top_level(&b.kind) else {
            let help = suggest(&b.kind, schema::TOP_LEVEL.iter().map(|s| s.kind)).unwrap_or_else(|| {
                format!("blocks are: {}", schema::TOP_LEVEL.iter().map(|s| s.kind).collect::<Vec<_>>().join(", "))
            });
            problems.push(
                Problem::error("xcsp::spec::unknown_block", format!("unknown block `{}`", b.kind))
                    .label(&b.kind_span, "")
                    .with_help(help),
            );
            continue;
        };
        if !check_labels(b, spec, problems) {
            continue;
        }
        let name = b.labels.first().map(|l| l.0.as_str());
        if let Some(prev) = first_of.get(&(spec.kind, name)) {
            let what = match name {
                Some(n) => format!("`{} \"{n}\"` is declared twice", b.kind),
                None => format!("there can be only one `{}` block", b.kind),
            };
            problems.push(
                Problem::error("xcsp::spec::duplicate_block", what)
                    .label(&b.head_span(), "declared again here")
                    .label(&prev.head_span(), "first declared here"),
            );
            continue;
        }
        first_of.insert((spec.kind, name), b);
        by_kind.entry(spec.kind).or_default().push(b);
    }
    let blocks = |kind: &str| by_kind.get(kind).cloned().unwrap_or_default();

    let mut env = Env::default();
    for kind in schema::REFERENCEABLE {
        let names = blocks(kind).iter().filter_map(|b| b.labels.first().map(|l| l.0.clone())).collect();
        env.declared.insert(kind.to_string(), names);
    }

    // Variables.
    let variables = declare_variables(&blocks("variable"), problems);
    let values = input_values(inputs, &variables, problems);
    let mut secrets = Vec::new();
    for (name, var) in variables {
        digest.update(name.as_bytes());
        let value = match values.get(&name).cloned().or(var.value) {
            Some(v) => v,
            None => {
                problems.push(
                    Problem::error("xcsp::var::missing", format!("no value for variable `{name}`"))
                        .label(&var.span, "declared here without a default")
                        .with_help(format!("pass -var {name}=..., a -var-file, or set XCSP_VAR_{name}")),
                );
                Value::Unknown
            }
        };
        if !type_matches(var.ty, &value) {
            problems.push(
                Problem::error(
                    "xcsp::var::type",
                    format!("variable `{name}` expects a {:?} value, got a {}", var.ty, value.type_name())
                        .to_lowercase(),
                )
                .label(&var.span, ""),
            );
        }
        digest.update(serde_json::to_vec(&value).unwrap_or_default());
        if var.sensitive {
            strings_in(&value, &mut secrets);
        }
        env.vars.insert(name, if var.sensitive { Value::sensitive(value) } else { value });
    }

    // Evaluation order: blocks that others refer to go first; cycles are reported and skipped.
    let entities: Vec<&RawBlock> = schema::REFERENCEABLE.iter().flat_map(|k| blocks(k)).collect();
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
            report_cycle(&graph, &scc, &entities, &id_of, problems);
            for n in &scc {
                in_cycle[graph[*n]] = true;
            }
        } else {
            order.push(graph[scc[0]]);
        }
    }

    let mut cluster = None;
    let mut aws = None;
    let mut azure = None;
    let mut networks = Vec::new();
    let mut identities = Vec::new();
    let mut pools = Vec::new();
    let network_names = env.block_names("network");
    let identity_names = env.block_names("workload_identity");
    for i in order {
        let b = entities[i];
        let spec = schema::top_level(&b.kind).expect("entities are known kinds");
        let fields = evaluate_block(b, spec, &env, problems);
        let exports = match b.kind.as_str() {
            "cluster" => {
                cluster = decode_cluster(&fields, problems);
                fields.exports(spec)
            }
            "aws" => {
                aws = decode_aws(&fields, problems);
                let mut e = fields.exports(spec);
                if let Some(a) = &aws {
                    e.insert("partition".into(), Value::string(a.partition()));
                    e.entry("asn".into()).or_insert(Value::int(a.asn.value));
                }
                e
            }
            "azure" => {
                azure = decode_azure(&fields, problems);
                fields.exports(spec)
            }
            "network" => {
                if let Some(n) = decode_network(&fields, problems) {
                    networks.push(n);
                }
                fields.exports(spec)
            }
            "workload_identity" => {
                let mut e = fields.exports(spec);
                if let Some(id) = decode_identity(&fields, cluster.as_ref(), azure.as_ref(), problems) {
                    e.insert("issuer".into(), Value::string(&id.issuer.value));
                    e.insert("audience".into(), Value::string(&id.audience.value));
                    e.insert("subject".into(), Value::string(id.subject()));
                    identities.push(id);
                }
                e
            }
            "worker_pool" => {
                if let Some(p) = decode_pool(&fields, &network_names, &identity_names, problems) {
                    pools.push(p);
                }
                fields.exports(spec)
            }
            other => unreachable!("{other} is not referenceable"),
        };
        let name = b.labels.first().map(|l| l.0.clone());
        let mut exports = exports;
        for c in spec.computed {
            if let Some(v) = inputs.computed.get(&crate::exports::key(&b.kind, name.as_deref(), c)) {
                exports.insert(c.to_string(), v.clone());
            }
        }
        env.blocks.insert((b.kind.clone(), name), exports);
    }
    // Blocks on a cycle were not evaluated; make their names resolve to unknowns so that
    // outputs referring to them do not add a second error.
    for (i, b) in entities.iter().enumerate() {
        if in_cycle[i] {
            let name = b.labels.first().map(|l| l.0.clone());
            env.blocks.insert((b.kind.clone(), name), IndexMap::new());
        }
    }

    let mut outputs = Vec::new();
    for b in blocks("output") {
        let fields = evaluate_block(b, &schema::OUTPUT, &env, problems);
        if let Some((value, _)) = fields.attrs.get("value") {
            outputs.push(Output {
                name: b.labels[0].0.clone(),
                value: value.clone(),
                sensitive: fields.bool_or("sensitive", false, problems),
                description: fields.get_string("description", problems).map(|s| s.value),
            });
        }
    }

    let mut backend = None;
    for (i, b) in blocks("backend").iter().enumerate() {
        let fields = evaluate_block(b, &schema::BACKEND, &env, problems);
        let (kind, span) = b.labels[0].clone();
        if i > 0 {
            problems.push(
                Problem::error("xcsp::backend::duplicate", "a stack has one state backend")
                    .label(&b.head_span(), "a second `backend` block")
                    .with_help("keep one `backend` block"),
            );
            continue;
        }
        if kind != "local" && kind != "s3" {
            problems.push(
                Problem::error("xcsp::backend::kind", format!("unknown backend `{kind}`"))
                    .label(&span, "")
                    .with_help("backends are `local` and `s3`"),
            );
            continue;
        }
        let get = |k: &str, problems: &mut Problems| fields.get_string(k, problems).map(|s| s.value);
        let decoded = Backend {
            path: get("path", problems),
            bucket: get("bucket", problems),
            key: get("key", problems),
            region: get("region", problems),
            endpoint: get("endpoint", problems),
            server_side_encryption: get("server_side_encryption", problems),
            encryption: get("encryption", problems),
            kind,
        };
        if let Some(e) = decoded.encryption.as_deref().filter(|e| !["enforced", "optional"].contains(e)) {
            problems.push(
                Problem::error("xcsp::backend::encryption", format!("unknown encryption mode `{e}`"))
                    .label(&b.head_span(), "")
                    .with_help("`enforced` (plaintext state and plans are refused) or `optional` (the default)"),
            );
        }
        if decoded.kind == "s3" && decoded.bucket.is_none() {
            problems.push(
                Problem::error("xcsp::backend::bucket", "an `s3` backend needs `bucket`")
                    .label(&b.head_span(), "")
                    .with_help("add `bucket = \"...\"` (the key defaults to `<stack>/state.json`)"),
            );
        }
        backend = Some(decoded);
    }

    // A file that does not parse contributes no blocks, so a block missing now may well be in it:
    // after a syntax error, say only that.
    let unparsed = problems.iter().any(|p| p.code == "xcsp::spec::syntax");
    for (kind, present) in [("cluster", cluster.is_some()), ("aws", aws.is_some()), ("azure", azure.is_some())] {
        if !present && blocks(kind).is_empty() && !unparsed {
            let at = raw.files.first().map(|f| Span::new(f, 0..0));
            let mut p = Problem::error("xcsp::spec::missing_block", format!("the spec has no `{kind}` block"))
                .with_help(format!(
                    "every spec describes one cluster, its AWS side and its Azure side; add `{kind} {{ ... }}`"
                ));
            if let Some(at) = at {
                p = p.label(&at, "");
            }
            problems.push(p);
        }
    }

    let stack = stack.or_else(|| cluster.as_ref().map(|c| c.infrastructure_name.clone()));
    let stack_span = stack.as_ref().map(|s| s.span.clone());
    let stack = stack.map(|s| s.value).unwrap_or_else(|| "default".into());
    for keys in networks.iter().filter_map(|n| n.preshared_keys.as_ref()) {
        for k in keys {
            strings_in(&k.value, &mut secrets);
        }
    }
    Spec {
        stack,
        stack_span,
        files: raw.files.clone(),
        cluster,
        aws,
        azure,
        networks,
        identities,
        pools,
        outputs,
        references,
        digest: hex::encode(digest.finalize()),
        secrets,
        backend,
    }
}

/// Every string inside a value (secrets to hide in shown sources).
fn strings_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Sensitive(x) => strings_in(x, out),
        Value::List(l) => l.iter().for_each(|x| strings_in(x, out)),
        Value::Map(m) => m.values().for_each(|x| strings_in(x, out)),
        _ => {}
    }
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

fn check_labels(b: &RawBlock, spec: &BlockSpec, problems: &mut Problems) -> bool {
    let want = usize::from(spec.labelled);
    if b.labels.len() == want {
        if let Some((name, span)) = b.labels.first() {
            let ok = !name.is_empty()
                && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                problems.push(
                    Problem::error("xcsp::spec::name", format!("`{name}` is not a valid {} name", b.kind))
                        .label(span, "")
                        .with_help("names start with a letter and hold letters, digits, `_` and `-`"),
                );
                return false;
            }
        }
        return true;
    }
    let (msg, help) = if spec.labelled {
        (format!("a `{}` block needs exactly one name", b.kind), format!("write `{} \"NAME\" {{ ... }}`", b.kind))
    } else {
        (format!("a `{}` block takes no name", b.kind), format!("write `{} {{ ... }}`", b.kind))
    };
    problems.push(Problem::error("xcsp::spec::labels", msg).label(&b.head_span(), "").with_help(help));
    false
}

fn block_references(b: &RawBlock) -> Vec<eval::Reference> {
    let mut out: Vec<eval::Reference> = b.attrs.iter().flat_map(|a| eval::references(&a.expr, &b.file)).collect();
    for inner in &b.blocks {
        out.extend(block_references(inner));
    }
    out.retain(|r| r.kind != "var");
    out
}

fn literal_string(e: &Expression) -> Option<String> {
    match e {
        Expression::String(s) => Some(s.value().clone()),
        _ => None,
    }
}

fn declare_variables(blocks: &[&RawBlock], problems: &mut Problems) -> IndexMap<String, Variable> {
    let empty = Env::default();
    let mut out = IndexMap::new();
    for b in blocks {
        let fields = evaluate_block(b, &schema::VARIABLE, &empty, problems);
        let ty = match b.attr("type") {
            None => VarType::Any,
            Some(a) => match type_expr(&a.expr) {
                Some(t) => t,
                None => {
                    problems.push(
                        Problem::error("xcsp::var::type_expr", "unknown variable type")
                            .label(&a.span, "")
                            .with_help("types are string, number, bool, list(...), map(...) and any"),
                    );
                    VarType::Any
                }
            },
        };
        let default = fields.attrs.get("default").map(|(v, _)| v.clone());
        if let (Some(d), Some(a)) = (&default, b.attr("default"))
            && !type_matches(ty, d)
        {
            problems.push(
                Problem::error(
                    "xcsp::var::type",
                    format!("the default is a {}, not a {ty:?}", d.type_name()).to_lowercase(),
                )
                .label(&a.span, ""),
            );
        }
        out.insert(
            b.labels[0].0.clone(),
            Variable {
                ty,
                sensitive: fields.bool_or("sensitive", false, problems),
                value: default,
                span: b.head_span(),
            },
        );
    }
    out
}

fn type_expr(e: &Expression) -> Option<VarType> {
    match e {
        Expression::Variable(v) => match v.as_str() {
            "string" => Some(VarType::String),
            "number" => Some(VarType::Number),
            "bool" => Some(VarType::Bool),
            "any" => Some(VarType::Any),
            _ => None,
        },
        Expression::FuncCall(f) => match f.name.name.as_str() {
            "list" | "set" => Some(VarType::List),
            "map" | "object" => Some(VarType::Map),
            _ => None,
        },
        _ => None,
    }
}

fn type_matches(ty: VarType, v: &Value) -> bool {
    matches!(
        (ty, v),
        (VarType::Any, _)
            | (_, Value::Unknown)
            | (VarType::String, Value::String(_))
            | (VarType::Number, Value::Number(_))
            | (VarType::Bool, Value::Bool(_))
            | (VarType::List, Value::List(_))
            | (VarType::Map, Value::Map(_))
    ) || matches!(v, Value::Sensitive(inner) if type_matches(ty, inner))
}

/// Values for variables from the environment, var files and flags, later ones winning.
fn input_values(
    inputs: &VarInputs,
    vars: &IndexMap<String, Variable>,
    problems: &mut Problems,
) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    let empty = Env::default();
    let parse_value = |name: &str, raw: &str, origin: &str, problems: &mut Problems| -> Option<Value> {
        let Some(var) = vars.get(name) else {
            problems.push(
                Problem::error(
                    "xcsp::var::undeclared",
                    format!("{origin} sets `{name}`, but no such variable is declared"),
                )
                .with_help(
                    suggest(name, vars.keys().map(String::as_str))
                        .unwrap_or_else(|| format!("declare it: variable \"{name}\" {{}}")),
                ),
            );
            return None;
        };
        if var.ty == VarType::String {
            return Some(Value::String(raw.to_string()));
        }
        let file = SourceFile::new(origin.to_string(), raw.to_string());
        match hcl_edit::parser::parse_expr(raw) {
            Ok(expr) => {
                let mut ev = Evaluator { file: &file, scope: &empty, problems };
                Some(ev.eval(&expr))
            }
            Err(e) => {
                problems.push(Problem::error(
                    "xcsp::var::syntax",
                    format!("{origin}: `{name}` is not a valid value: {}", e.message()),
                ));
                None
            }
        }
    };
    for (name, raw) in &inputs.env {
        if vars.contains_key(name)
            && let Some(v) = parse_value(name, raw, &format!("XCSP_VAR_{name}"), problems)
        {
            out.insert(name.clone(), v);
        }
    }
    for path in &inputs.files {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                problems
                    .push(Problem::error("xcsp::var::file", format!("cannot read var file {}: {e}", path.display())));
                continue;
            }
        };
        let file = SourceFile::new(path.display().to_string(), text);
        let (raw, parse_problems) = crate::syntax::parse(vec![Arc::clone(&file)]);
        problems.extend(parse_problems);
        for b in &raw.blocks {
            problems.push(
                Problem::error("xcsp::var::file", "a var file holds only `name = value` lines").label(&b.kind_span, ""),
            );
        }
        for a in &raw.attrs {
            let Some(var) = vars.get(&a.key) else {
                let help = suggest(&a.key, vars.keys().map(String::as_str));
                let mut p =
                    Problem::error("xcsp::var::undeclared", format!("no variable named `{}` is declared", a.key))
                        .label(&a.key_span, "");
                p.help = help;
                problems.push(p);
                continue;
            };
            let mut ev = Evaluator { file: &file, scope: &empty, problems };
            let v = ev.eval(&a.expr);
            if !type_matches(var.ty, &v) {
                problems.push(
                    Problem::error(
                        "xcsp::var::type",
                        format!("`{}` expects a {:?} value", a.key, var.ty).to_lowercase(),
                    )
                    .label(&a.span, ""),
                );
            }
            out.insert(a.key.clone(), v);
        }
    }
    for flag in &inputs.flags {
        let Some((name, raw)) = flag.split_once('=') else {
            problems.push(Problem::error("xcsp::var::flag", format!("-var `{flag}` is not NAME=VALUE")));
            continue;
        };
        if let Some(v) = parse_value(name.trim(), raw, "-var", problems) {
            out.insert(name.trim().to_string(), v);
        }
    }
    out
}

/// One block's evaluated attributes and nested blocks.
struct Fields<'a> {
    block: &'a RawBlock,
    attrs: IndexMap<String, (Value, &'a RawAttr)>,
    blocks: Vec<(String, Fields<'a>)>,
}

fn evaluate_block<'a>(b: &'a RawBlock, spec: &BlockSpec, env: &Env, problems: &mut Problems) -> Fields<'a> {
    let mut attrs = IndexMap::new();
    for a in &b.attrs {
        let Some(aspec) = spec.attr(&a.key) else {
            let help = suggest(&a.key, spec.attrs.iter().map(|s| s.name)).unwrap_or_else(|| {
                format!("`{}` takes: {}", spec.kind, spec.attrs.iter().map(|s| s.name).collect::<Vec<_>>().join(", "))
            });
            problems.push(
                Problem::error(
                    "xcsp::spec::unknown_attribute",
                    format!("`{}` has no attribute `{}`", spec.kind, a.key),
                )
                .label(&a.key_span, "")
                .with_help(help),
            );
            continue;
        };
        if let Some((_, prev)) = attrs.get(&a.key) {
            let prev: &&RawAttr = prev;
            problems.push(
                Problem::error("xcsp::spec::duplicate_attribute", format!("`{}` is set twice", a.key))
                    .label(&a.key_span, "set again here")
                    .label(&prev.key_span, "first set here"),
            );
            continue;
        }
        if spec.kind == "variable" && a.key == "type" {
            attrs.insert(a.key.clone(), (Value::Null, a));
            continue;
        }
        let value = if let Ty::Reference(kind) = aspec.ty {
            reference_name(a, kind, env, problems)
        } else {
            let mut ev = Evaluator { file: &b.file, scope: env, problems };
            ev.eval(&a.expr)
        };
        check_type(aspec.ty, &value, &a.span, problems);
        attrs.insert(a.key.clone(), (value, a));
    }
    for aspec in spec.attrs.iter().filter(|s| s.required) {
        if !attrs.contains_key(aspec.name) && !b.attrs.iter().any(|a| a.key == aspec.name) {
            problems.push(
                Problem::error("xcsp::spec::missing_attribute", format!("`{}` needs `{}`", spec.kind, aspec.name))
                    .label(&b.head_span(), "in this block")
                    .with_help(format!("add `{} = ...` ({})", aspec.name, aspec.ty.describe())),
            );
        }
    }
    let mut blocks = Vec::new();
    for inner in &b.blocks {
        let Some(ispec) = spec.block(&inner.kind) else {
            let help = suggest(&inner.kind, spec.blocks.iter().map(|s| s.kind))
                .or_else(|| {
                    suggest(&inner.kind, spec.attrs.iter().map(|s| s.name))
                        .map(|h| format!("{h} (an attribute, written `name = value`)"))
                })
                .unwrap_or_else(|| format!("`{}` has no nested blocks of that kind", spec.kind));
            problems.push(
                Problem::error("xcsp::spec::unknown_block", format!("`{}` has no `{}` block", spec.kind, inner.kind))
                    .label(&inner.kind_span, "")
                    .with_help(help),
            );
            continue;
        };
        if !inner.labels.is_empty() {
            problems.push(
                Problem::error("xcsp::spec::labels", format!("a `{}` block takes no name", inner.kind))
                    .label(&inner.head_span(), ""),
            );
        }
        if let Some((_, prev)) = blocks.iter().find(|(k, _)| *k == inner.kind) {
            let prev: &Fields = prev;
            problems.push(
                Problem::error(
                    "xcsp::spec::duplicate_block",
                    format!("`{}` may hold only one `{}` block", spec.kind, inner.kind),
                )
                .label(&inner.kind_span, "again here")
                .label(&prev.block.kind_span, "first here"),
            );
            continue;
        }
        blocks.push((inner.kind.clone(), evaluate_block(inner, ispec, env, problems)));
    }
    Fields { block: b, attrs, blocks }
}

/// A `Ty::Reference` attribute: `network.link` or `"link"`, resolved to the block's name.
fn reference_name(a: &RawAttr, kind: &str, env: &Env, problems: &mut Problems) -> Value {
    let refs = eval::references(&a.expr, &a.span.file);
    let name = match (&a.expr, refs.as_slice()) {
        (Expression::String(s), _) => Some(s.value().clone()),
        (Expression::Traversal(_) | Expression::Variable(_), [r]) if r.kind == kind && r.attr.is_none() => {
            r.name.clone()
        }
        _ => None,
    };
    let Some(name) = name else {
        problems.push(
            Problem::error("xcsp::spec::reference", format!("expected a reference to a `{kind}` block"))
                .label(&a.span, "")
                .with_help(format!("write `{kind}.NAME`")),
        );
        return Value::Unknown;
    };
    if !env.declared.get(kind).is_some_and(|names| names.contains(&name)) {
        let names = env.block_names(kind);
        let help = suggest(&name, names.iter().map(String::as_str));
        let mut p = Problem::error("xcsp::expr::unknown_reference", format!("no `{kind}.{name}` block is declared"))
            .label(&a.span, "");
        p.help = help;
        problems.push(p);
        return Value::Unknown;
    }
    Value::String(name)
}

fn check_type(ty: Ty, v: &Value, span: &Span, problems: &mut Problems) {
    let inner = match v {
        Value::Sensitive(i) => i.as_ref(),
        other => other,
    };
    let ok = match (ty, inner) {
        (_, Value::Unknown) | (Ty::Any, _) | (Ty::Reference(_), _) => true,
        (Ty::String, Value::String(_)) | (Ty::Number, Value::Number(_)) | (Ty::Bool, Value::Bool(_)) => true,
        (Ty::ListOfStrings, Value::List(l)) => {
            l.iter().all(|x| matches!(x, Value::String(_) | Value::Unknown) || x.as_str().is_some())
        }
        (Ty::MapOfStrings, Value::Map(m)) => m.values().all(|x| x.as_str().is_some() || x.has_unknown()),
        (Ty::ListOfObjects, Value::List(l)) => l.iter().all(|x| matches!(x, Value::Map(_) | Value::Unknown)),
        _ => false,
    };
    if !ok {
        problems.push(
            Problem::error("xcsp::spec::type", format!("expected {}, found {}", ty.describe(), describe_value(inner)))
                .label(span, ""),
        );
    }
}

fn describe_value(v: &Value) -> String {
    match v {
        Value::List(l) if l.iter().any(|x| !matches!(x, Value::String(_))) => "a list with non-string items".into(),
        Value::Map(m) if m.values().any(|x| !matches!(x, Value::String(_))) => "a map with non-string values".into(),
        other => format!("a {}", other.type_name()),
    }
}

impl<'a> Fields<'a> {
    fn head(&self) -> Span {
        self.block.head_span()
    }

    /// A map of strings (the schema checked the type), empty when not written.
    fn string_map(&self, name: &str) -> Sp<IndexMap<String, Value>> {
        match self.attrs.get(name) {
            Some((Value::Map(m), a)) => Sp::new(m.clone(), a.span.clone()),
            _ => Sp::new(IndexMap::new(), self.head()),
        }
    }

    fn tags(&self) -> Sp<IndexMap<String, Value>> {
        self.string_map("tags")
    }

    fn nested(&self, kind: &str) -> Option<&Fields<'a>> {
        self.blocks.iter().find(|(k, _)| k == kind).map(|(_, f)| f)
    }

    /// Exported attributes: what was written (defaults are added by the decoder) and the
    /// computed ones, unknown until apply.
    fn exports(&self, spec: &BlockSpec) -> IndexMap<String, Value> {
        let mut out: IndexMap<String, Value> = self.attrs.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect();
        for c in spec.computed {
            out.insert(c.to_string(), Value::Unknown);
        }
        out
    }

    /// A value that must be known now: unknown ones get a problem.
    fn known(&self, name: &str, problems: &mut Problems) -> Option<(Value, Span)> {
        let (v, a) = self.attrs.get(name)?;
        if v.has_unknown() {
            problems.push(
                Problem::error("xcsp::spec::unknown_at_plan", format!("`{name}` must be known when planning"))
                    .label(&a.span, "this depends on a value known only after apply")
                    .with_help("use a literal or a variable here"),
            );
            return None;
        }
        Some((v.clone(), a.span.clone()))
    }

    fn get_string(&self, name: &str, problems: &mut Problems) -> Option<Sp<String>> {
        let (v, span) = self.known(name, problems)?;
        v.as_str().map(|s| Sp::new(s.to_string(), span))
    }

    fn string_or(&self, name: &str, default: &str, problems: &mut Problems) -> Sp<String> {
        self.get_string(name, problems).unwrap_or_else(|| Sp::new(default.to_string(), self.head()))
    }

    fn get_number(&self, name: &str, problems: &mut Problems) -> Option<Sp<i64>> {
        let (v, span) = self.known(name, problems)?;
        match v.as_i64() {
            Some(n) => Some(Sp::new(n, span)),
            None if matches!(v, Value::Number(_)) => {
                problems.push(
                    Problem::error("xcsp::spec::type", format!("`{name}` must be a whole number")).label(&span, ""),
                );
                None
            }
            None => None,
        }
    }

    fn number_or(&self, name: &str, default: i64, problems: &mut Problems) -> Sp<i64> {
        self.get_number(name, problems).unwrap_or_else(|| Sp::new(default, self.head()))
    }

    fn bool_or(&self, name: &str, default: bool, problems: &mut Problems) -> bool {
        match self.known(name, problems) {
            Some((Value::Bool(b), _)) => b,
            _ => default,
        }
    }

    fn strings(&self, name: &str, problems: &mut Problems) -> Option<Sp<Vec<String>>> {
        let (v, span) = self.known(name, problems)?;
        let items: Option<Vec<String>> = v.as_list()?.iter().map(|x| x.as_str().map(String::from)).collect();
        items.map(|i| Sp::new(i, span))
    }

    /// Each element of a list attribute with its own span (the attribute's span if not a literal list).
    fn elements(&self, name: &str, problems: &mut Problems) -> Option<Vec<Sp<Value>>> {
        let (v, span) = self.known(name, problems)?;
        let (_, raw) = self.attrs.get(name)?;
        let spans: Vec<Span> = match &raw.expr {
            Expression::Array(a) => {
                a.iter().map(|e| Span::new(&raw.span.file, hcl_edit::Span::span(e).unwrap_or(0..0))).collect()
            }
            _ => Vec::new(),
        };
        let sensitive = v.is_sensitive();
        let items = v.as_list()?;
        Some(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    let x = if sensitive { Value::sensitive(x.clone()) } else { x.clone() };
                    Sp::new(x, spans.get(i).cloned().unwrap_or_else(|| span.clone()))
                })
                .collect(),
        )
    }

    fn cidr(&self, name: &str, problems: &mut Problems) -> Option<Sp<Ipv4Net>> {
        let s = self.get_string(name, problems)?;
        cidr_at(&s.value, &s.span, problems)
    }

    fn cidr_or(&self, name: &str, default: &str, problems: &mut Problems) -> Option<Sp<Ipv4Net>> {
        match self.attrs.contains_key(name) {
            true => self.cidr(name, problems),
            false => Some(Sp::new(default.parse().expect("default CIDRs are valid"), self.head())),
        }
    }

    fn choice<T: Copy>(&self, name: &str, options: &[(&str, T)], default: T, problems: &mut Problems) -> Sp<T> {
        let Some(s) = self.get_string(name, problems) else { return Sp::new(default, self.head()) };
        match options.iter().find(|(k, _)| *k == s.value) {
            Some((_, v)) => Sp::new(*v, s.span),
            None => {
                let names: Vec<&str> = options.iter().map(|(k, _)| *k).collect();
                let help =
                    suggest(&s.value, names.iter().copied()).unwrap_or_else(|| format!("one of: {}", names.join(", ")));
                problems.push(
                    Problem::error("xcsp::spec::enum", format!("`{}` is not a valid {name}", s.value))
                        .label(&s.span, "")
                        .with_help(help),
                );
                Sp::new(default, s.span)
            }
        }
    }
}

fn cidr_at(text: &str, span: &Span, problems: &mut Problems) -> Option<Sp<Ipv4Net>> {
    match parse_cidr(text) {
        Ok(n) => Some(Sp::new(n, span.clone())),
        Err(msg) => {
            problems.push(
                Problem::error("xcsp::cidr::syntax", msg)
                    .label(span, "")
                    .with_help("write an IPv4 network as a.b.c.d/len"),
            );
            None
        }
    }
}

fn decode_cluster(f: &Fields, problems: &mut Problems) -> Option<Cluster> {
    Some(Cluster {
        infrastructure_name: f.get_string("infrastructure_name", problems)?,
        api_url: f.get_string("api_url", problems)?,
        oidc_issuer_url: f.get_string("oidc_issuer_url", problems)?,
        machine_network: f.cidr("machine_network", problems)?,
        cluster_network: f.cidr_or("cluster_network", "10.128.0.0/14", problems)?,
        service_network: f.cidr_or("service_network", "172.30.0.0/16", problems)?,
        overlay_mtu: f.get_number("overlay_mtu", problems)?,
        kubeconfig: f.get_string("kubeconfig", problems),
        kube_context: f.get_string("kube_context", problems),
        kubernetes_objects: f.choice(
            "kubernetes_objects",
            &[("apply", KubernetesObjects::Apply), ("render", KubernetesObjects::Render)],
            KubernetesObjects::Apply,
            problems,
        ),
        span: f.head(),
    })
}

fn decode_aws(f: &Fields, problems: &mut Problems) -> Option<Aws> {
    Some(Aws {
        region: f.get_string("region", problems)?,
        vpc_id: f.get_string("vpc_id", problems),
        route_table_ids: f.strings("route_table_ids", problems),
        security_group_ids: f.strings("security_group_ids", problems),
        asn: f.number_or("asn", 64512, problems),
        fips: f.bool_or("fips", false, problems),
        tags: f.tags(),
        span: f.head(),
    })
}

fn decode_azure(f: &Fields, problems: &mut Problems) -> Option<Azure> {
    let cloud = f.choice(
        "cloud",
        &[("public", AzureCloud::Public), ("usgovernment", AzureCloud::UsGovernment), ("custom", AzureCloud::Custom)],
        AzureCloud::Public,
        problems,
    );
    let endpoints = f.nested("endpoints").and_then(|e| {
        Some(Endpoints {
            resource_manager: e.get_string("resource_manager", problems)?,
            authority: e.get_string("authority", problems)?,
        })
    });
    Some(Azure {
        cloud,
        endpoints,
        subscription_id: f.get_string("subscription_id", problems)?,
        tenant_id: f.get_string("tenant_id", problems)?,
        location: f.get_string("location", problems)?,
        resource_group: f.get_string("resource_group", problems)?,
        tags: f.tags(),
        span: f.head(),
    })
}

fn decode_network(f: &Fields, problems: &mut Problems) -> Option<Network> {
    let policy = f.nested("ipsec_policy");
    let p_str = |name: &str, default: &str, problems: &mut Problems| match policy {
        Some(p) => p.string_or(name, default, problems),
        None => Sp::new(default.to_string(), f.head()),
    };
    let p_num = |name: &str, default: i64, problems: &mut Problems| match policy {
        Some(p) => p.number_or(name, default, problems),
        None => Sp::new(default, f.head()),
    };
    let ipsec = IpsecPolicy {
        ike_version: p_str("ike_version", "ikev2", problems),
        encryption: p_str("encryption", "aes256", problems),
        integrity: p_str("integrity", "sha256", problems),
        dh_group: p_num("dh_group", 14, problems),
        pfs_group: p_num("pfs_group", 14, problems),
        ike_lifetime_seconds: p_num("ike_lifetime_seconds", 28800, problems),
        sa_lifetime_seconds: p_num("sa_lifetime_seconds", 3600, problems),
        dpd_timeout_seconds: policy.and_then(|p| p.get_number("dpd_timeout_seconds", problems)),
        rekey_margin_seconds: policy.and_then(|p| p.get_number("rekey_margin_seconds", problems)),
    };
    let tunnel_inside_cidrs = f.elements("tunnel_inside_cidrs", problems).map(|items| {
        items.iter().filter_map(|it| cidr_at(it.value.as_str().unwrap_or_default(), &it.span, problems)).collect()
    });
    Some(Network {
        name: Sp::new(f.block.labels[0].0.clone(), f.block.labels[0].1.clone()),
        driver: f.choice(
            "driver",
            &[("ipsec", Driver::Ipsec), ("external", Driver::External)],
            Driver::Ipsec,
            problems,
        ),
        vnet_cidr: f.cidr("vnet_cidr", problems)?,
        gateway_subnet: f.cidr("gateway_subnet", problems),
        gateway_sku: f.string_or("gateway_sku", "VpnGw2AZ", problems),
        routing: f.choice("routing", &[("bgp", Routing::Bgp), ("static", Routing::Static)], Routing::Bgp, problems),
        azure_asn: f.number_or("azure_asn", 65515, problems),
        vpc_id: f.get_string("vpc_id", problems),
        tunnel_inside_cidrs,
        preshared_keys: f.elements("preshared_keys", problems),
        tunnel_mtu: f.number_or("tunnel_mtu", 1400, problems),
        ipsec,
        prevent_destroy: f.bool_or("prevent_destroy", false, problems),
        span: f.head(),
    })
}

fn decode_identity(
    f: &Fields,
    cluster: Option<&Cluster>,
    azure: Option<&Azure>,
    problems: &mut Problems,
) -> Option<Identity> {
    let issuer = match (f.get_string("issuer", problems), cluster) {
        (Some(s), _) => s,
        (None, Some(c)) => c.oidc_issuer_url.clone(),
        (None, None) => return None,
    };
    let audience = match (f.get_string("audience", problems), azure) {
        (Some(s), _) => s,
        (None, Some(a)) => Sp::new(a.cloud.value.default_audience().to_string(), f.head()),
        (None, None) => return None,
    };
    Some(Identity {
        name: Sp::new(f.block.labels[0].0.clone(), f.block.labels[0].1.clone()),
        issuer,
        audience,
        namespace: f.string_or("namespace", "openshift-cluster-api", problems),
        service_account: f.string_or("service_account", "capi-controllers", problems),
        role: f.string_or("role", "Contributor", problems),
        prevent_destroy: f.bool_or("prevent_destroy", false, problems),
        span: f.head(),
    })
}

fn decode_pool(f: &Fields, networks: &[String], identities: &[String], problems: &mut Problems) -> Option<Pool> {
    let only = |attr: &str, kind: &str, names: &[String], problems: &mut Problems| -> Option<Sp<String>> {
        if let Some(s) = f.get_string(attr, problems) {
            return Some(s);
        }
        if f.attrs.contains_key(attr) {
            return None; // reported already
        }
        match names {
            [one] => Some(Sp::new(one.clone(), f.head())),
            _ => {
                problems.push(
                    Problem::error(
                        "xcsp::spec::missing_attribute",
                        format!("this pool must say which `{kind}` it uses"),
                    )
                    .label(&f.head(), "")
                    .with_help(if names.is_empty() {
                        format!("declare a `{kind}` block")
                    } else {
                        format!("add `{attr} = {kind}.NAME` (one of: {})", names.join(", "))
                    }),
                );
                None
            }
        }
    };
    let network = only("network", "network", networks, problems);
    let identity = only("identity", "workload_identity", identities, problems);
    let image = match (f.nested("image"), f.get_string("image_id", problems)) {
        (Some(_), Some(id)) => {
            problems.push(
                Problem::error("xcsp::pool::image", "set either `image_id` or an `image` block, not both")
                    .label(&id.span, ""),
            );
            None
        }
        (None, Some(id)) => Some(Sp::new(Image::Id(id.value), id.span)),
        (Some(img), None) => Some(Sp::new(
            Image::Marketplace {
                publisher: img.get_string("publisher", problems)?.value,
                offer: img.get_string("offer", problems)?.value,
                sku: img.get_string("sku", problems)?.value,
                version: img.get_string("version", problems)?.value,
            },
            img.head(),
        )),
        (None, None) => {
            problems.push(
                Problem::error("xcsp::pool::image", "a worker pool needs an image").label(&f.head(), "").with_help(
                    "add `image { publisher, offer, sku, version }` (the RHCOS marketplace image) or `image_id`",
                ),
            );
            None
        }
    };
    let disk = f.nested("os_disk");
    let taints = match f.known("taints", problems) {
        Some((v, span)) => Sp::new(decode_taints(&v, &span, problems), span),
        None => Sp::new(Vec::new(), f.head()),
    };
    let labels = f.string_map("labels");
    Some(Pool {
        name: Sp::new(f.block.labels[0].0.clone(), f.block.labels[0].1.clone()),
        network: network?,
        identity: identity?,
        vm_size: f.get_string("vm_size", problems)?,
        replicas: f.number_or("replicas", 1, problems),
        subnet_cidr: f.cidr("subnet_cidr", problems)?,
        image: image?,
        os_disk_size_gb: disk.map_or_else(|| Sp::new(128, f.head()), |d| d.number_or("size_gb", 128, problems)),
        os_disk_type: disk.map_or_else(
            || Sp::new("Premium_LRS".into(), f.head()),
            |d| d.string_or("storage_account_type", "Premium_LRS", problems),
        ),
        zones: f.strings("zones", problems).unwrap_or_else(|| Sp::new(Vec::new(), f.head())),
        labels,
        taints,
        accelerated_networking: f.bool_or("accelerated_networking", true, problems),
        machine_health_check: f.bool_or("machine_health_check", false, problems),
        prevent_destroy: f.bool_or("prevent_destroy", false, problems),
        span: f.head(),
    })
}

fn decode_taints(v: &Value, span: &Span, problems: &mut Problems) -> Vec<Taint> {
    let mut out = Vec::new();
    for item in v.as_list().unwrap_or_default() {
        let Some(m) = item.as_map() else { continue };
        let get = |k: &str| m.get(k).and_then(Value::as_str).map(String::from);
        let unknown: Vec<&String> = m.keys().filter(|k| !["key", "value", "effect"].contains(&k.as_str())).collect();
        if !unknown.is_empty() {
            problems.push(
                Problem::error("xcsp::pool::taint", format!("a taint has no field `{}`", unknown[0]))
                    .label(span, "")
                    .with_help("a taint is { key, value, effect }"),
            );
        }
        match (get("key"), get("effect")) {
            (Some(key), Some(effect)) => out.push(Taint { key, value: get("value").unwrap_or_default(), effect }),
            _ => problems.push(
                Problem::error("xcsp::pool::taint", "every taint needs a `key` and an `effect`")
                    .label(span, "")
                    .with_help("a taint is { key, value, effect }"),
            ),
        }
    }
    out
}
