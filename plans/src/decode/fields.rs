//! One block's attributes evaluated and checked against the schema (unknown, duplicate,
//! missing, wrong type), then read back as typed values with the spans they came from.

use hcl_edit::expr::Expression;
use indexmap::IndexMap;
use ipnet::Ipv4Net;
use xcsp_core::{Problem, Problems, Span, Value};

use super::Env;
use crate::eval::{self, Evaluator, Scope};
use crate::net::parse_cidr;
use crate::schema::{AttrDefault, BlockSpec, Ty, suggest};
use crate::spec::*;
use crate::syntax::{RawAttr, RawBlock};

/// One block's evaluated attributes and nested blocks.
pub(super) struct Fields<'a> {
    pub(super) block: &'a RawBlock,
    /// The schema it was checked against, whose defaults the `*_or` readers must match.
    pub(super) spec: &'static BlockSpec,
    pub(super) attrs: IndexMap<String, (Value, &'a RawAttr)>,
    pub(super) blocks: Vec<(String, Fields<'a>)>,
}

pub(super) fn evaluate_block<'a>(
    b: &'a RawBlock,
    spec: &'static BlockSpec,
    env: &Env,
    problems: &mut Problems,
) -> Fields<'a> {
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
    Fields { block: b, spec, attrs, blocks }
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
    pub(super) fn head(&self) -> Span {
        self.block.head_span()
    }

    /// A map of strings (the schema checked the type), empty when not written.
    pub(super) fn string_map(&self, name: &str) -> Sp<IndexMap<String, Value>> {
        match self.attrs.get(name) {
            Some((Value::Map(m), a)) => Sp::new(m.clone(), a.span.clone()),
            _ => Sp::new(IndexMap::new(), self.head()),
        }
    }

    pub(super) fn tags(&self) -> Sp<IndexMap<String, Value>> {
        self.string_map("tags")
    }

    pub(super) fn nested(&self, kind: &str) -> Option<&Fields<'a>> {
        self.blocks.iter().find(|(k, _)| k == kind).map(|(_, f)| f)
    }

    /// Exported attributes: what was written (defaults are added by the decoder) and the
    /// computed ones, unknown until apply.
    pub(super) fn exports(&self, spec: &BlockSpec) -> IndexMap<String, Value> {
        let mut out: IndexMap<String, Value> = self.attrs.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect();
        for c in spec.computed {
            out.insert(c.to_string(), Value::Unknown);
        }
        out
    }

    /// A value that must be known now: unknown ones get a problem.
    pub(super) fn known(&self, name: &str, problems: &mut Problems) -> Option<(Value, Span)> {
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

    pub(super) fn get_string(&self, name: &str, problems: &mut Problems) -> Option<Sp<String>> {
        let (v, span) = self.known(name, problems)?;
        v.as_str().map(|s| Sp::new(s.to_string(), span))
    }

    /// The schema's default for `name` is `default`, the decoder's: the reference is generated
    /// from the schema (`schema::reference`), so a default changed in one place and not the other
    /// fails every test that decodes a spec.
    fn check_default(&self, name: &str, default: &str) {
        check_default(self.spec, name, default);
    }

    pub(super) fn string_or(&self, name: &str, default: &str, problems: &mut Problems) -> Sp<String> {
        self.check_default(name, default);
        self.get_string(name, problems).unwrap_or_else(|| Sp::new(default.to_string(), self.head()))
    }

    pub(super) fn get_number(&self, name: &str, problems: &mut Problems) -> Option<Sp<i64>> {
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

    pub(super) fn number_or(&self, name: &str, default: i64, problems: &mut Problems) -> Sp<i64> {
        self.check_default(name, &default.to_string());
        self.get_number(name, problems).unwrap_or_else(|| Sp::new(default, self.head()))
    }

    pub(super) fn bool_or(&self, name: &str, default: bool, problems: &mut Problems) -> bool {
        self.spanned_bool_or(name, default, problems).value
    }

    /// A boolean with where it was written (the block's head when it was not).
    pub(super) fn spanned_bool_or(&self, name: &str, default: bool, problems: &mut Problems) -> Sp<bool> {
        self.check_default(name, &default.to_string());
        match self.known(name, problems) {
            Some((Value::Bool(b), span)) => Sp::new(b, span),
            _ => Sp::new(default, self.head()),
        }
    }

    pub(super) fn strings(&self, name: &str, problems: &mut Problems) -> Option<Sp<Vec<String>>> {
        let (v, span) = self.known(name, problems)?;
        let items: Option<Vec<String>> = v.as_list()?.iter().map(|x| x.as_str().map(String::from)).collect();
        items.map(|i| Sp::new(i, span))
    }

    /// Each element of a list attribute with its own span (the attribute's span if not a literal list).
    pub(super) fn elements(&self, name: &str, problems: &mut Problems) -> Option<Vec<Sp<Value>>> {
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

    pub(super) fn cidr(&self, name: &str, problems: &mut Problems) -> Option<Sp<Ipv4Net>> {
        let s = self.get_string(name, problems)?;
        cidr_at(&s.value, &s.span, problems)
    }

    pub(super) fn cidr_or(&self, name: &str, default: &str, problems: &mut Problems) -> Option<Sp<Ipv4Net>> {
        self.check_default(name, default);
        match self.attrs.contains_key(name) {
            true => self.cidr(name, problems),
            false => Some(Sp::new(default.parse().expect("default CIDRs are valid"), self.head())),
        }
    }

    pub(super) fn choice<T: Copy + PartialEq>(
        &self,
        name: &str,
        options: &[(&str, T)],
        default: T,
        problems: &mut Problems,
    ) -> Sp<T> {
        self.check_default(name, options.iter().find(|(_, v)| *v == default).map_or("", |(k, _)| *k));
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

/// `spec` documents `default` as the default of `name` (see `Fields::check_default`). Checked in
/// debug builds, which every test runs: a difference is the project's mistake, never a user's,
/// so a release build does not stop on it.
pub(super) fn check_default(spec: &BlockSpec, name: &str, default: &str) {
    if !cfg!(debug_assertions) {
        return;
    }
    let documented = spec.attr(name).map(|a| a.default);
    if let Some(AttrDefault::Literal(d)) = documented {
        assert_eq!(
            d, default,
            "the schema documents `{}.{name}` defaulting to {d:?}, the decoder takes {default:?}",
            spec.kind
        );
    } else if !matches!(documented, Some(AttrDefault::Described(_))) {
        panic!("the schema documents no default for `{}.{name}`, the decoder takes {default:?}", spec.kind);
    }
}

pub(super) fn cidr_at(text: &str, span: &Span, problems: &mut Problems) -> Option<Sp<Ipv4Net>> {
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

#[cfg(test)]
mod tests {
    /// Every default the decoder takes is the schema's: decoding a spec with every optional block
    /// present goes through each `*_or` reader (each checks, whether the attribute is written or
    /// not), which panics on a difference (`decode::fields::check_default`).
    #[test]
    fn the_decoders_defaults_are_the_schemas() {
        let spec = include_str!("../../../examples/public/pool.xcsp.hcl")
            .replacen("  overlay_mtu ", "  cluster_api {}\n  overlay_mtu ", 1)
            .replacen("  azure_asn      = 65020\n", "  azure_asn      = 65020\n  ipsec_policy {}\n", 1)
            .replacen("  replicas    = 1\n", "  replicas    = 1\n  os_disk {}\n", 1)
            + "output \"o\" { value = 1 }\n";
        assert_eq!(spec.matches(" {}").count(), 4, "every optional block is in: {spec}");
        let file = xcsp_core::SourceFile::new("s.xcsp.hcl", spec.as_str());
        let loaded = crate::check_sources(vec![file], &crate::VarInputs::default());
        assert!(loaded.is_ok(), "{}", loaded.err().map(|e| e.to_string()).unwrap_or_default());
    }
}
