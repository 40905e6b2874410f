//! From raw blocks to the typed [`Spec`]: schema checks (unknown, missing, duplicate, wrong
//! type), variables, the order in which blocks refer to each other (and cycles), evaluation,
//! and defaults. Every problem is collected; nothing stops at the first.
//!
//! The parts: `variables` (declarations and values from outside), `order` (which block refers
//! to which, evaluation order and cycles), `fields` (a block's attributes evaluated, checked and
//! read as typed values with spans) and `blocks` (each block kind's decoder).

mod blocks;
mod fields;
mod order;
mod variables;

use std::collections::HashMap;
use std::path::PathBuf;

use hcl_edit::expr::Expression;
use indexmap::IndexMap;
use sha2::{Digest, Sha256};
use xcsp_core::{Problem, Problems, Span, Value};

use crate::eval::Scope;
use crate::schema::{self, BlockSpec, suggest};
use crate::spec::*;
use crate::syntax::{RawBlock, RawSpec};

/// Variable values from outside the spec, lowest precedence first within each source.
#[derive(Debug, Clone, Default)]
pub struct VarInputs {
    /// `XCSP_VAR_<name>` environment variables (lowest precedence).
    pub env: Vec<(String, String)>,
    /// `-var-file` paths, in order.
    pub files: Vec<PathBuf>,
    /// Var files already read (after `files`, in order): evaluating the spec again from them
    /// reads no file.
    pub file_texts: Vec<std::sync::Arc<xcsp_core::SourceFile>>,
    /// `-var name=value` flags, in order (highest precedence).
    pub flags: Vec<String>,
    /// Values of computed exports known from state (`exports::key` -> value), for loading the
    /// spec again after apply; empty when planning.
    pub computed: std::collections::BTreeMap<String, Value>,
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
    let mut secrets = Vec::new();
    variables::bind(&blocks("variable"), inputs, &mut env, &mut digest, &mut secrets, problems);

    // Evaluation order: blocks that others refer to go first; cycles are reported and skipped.
    let entities: Vec<&RawBlock> = schema::REFERENCEABLE.iter().flat_map(|k| blocks(k)).collect();
    let order::Order { order, in_cycle, references } = order::evaluation_order(&entities, problems);

    let blocks::Decoded { cluster, aws, azure, networks, identities, pools } =
        blocks::decode_in_order(&entities, &order, &mut env, inputs, problems);
    // Blocks on a cycle were not evaluated; make their names resolve to unknowns so that
    // outputs referring to them do not add a second error.
    for (i, b) in entities.iter().enumerate() {
        if in_cycle[i] {
            let name = b.labels.first().map(|l| l.0.clone());
            env.blocks.insert((b.kind.clone(), name), IndexMap::new());
        }
    }

    let outputs = blocks::decode_outputs(&blocks("output"), &env, problems);
    let backend = blocks::decode_backend(&blocks("backend"), &env, problems);

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

fn literal_string(e: &Expression) -> Option<String> {
    match e {
        Expression::String(s) => Some(s.value().clone()),
        _ => None,
    }
}
