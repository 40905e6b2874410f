//! Evaluating HCL expressions to values: literals, templates, operators, conditionals, a few
//! functions, and references to variables (`var.x`) and other blocks (`network.link.tunnels`).
//!
//! Attributes known only after apply evaluate to [`Value::Unknown`], which propagates through
//! every operation. Values from sensitive variables stay marked sensitive. Errors are collected
//! as problems and the failed expression evaluates to `Unknown`, so one mistake is reported once.

use std::sync::Arc;

use hcl_edit::Span as _;
use hcl_edit::expr::{BinaryOperator, Expression, TraversalOperator, UnaryOperator};
use hcl_edit::template::{Element, Template};
use indexmap::IndexMap;
use serde_json::Number;
use xcsp_core::{Problem, Problems, SourceFile, Span, Value};

use crate::schema::{self, suggest};

/// A reference from one expression to a variable or a block.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// `var`, or a block kind such as `network`.
    pub kind: String,
    /// The variable name, or the label of a labelled block; `None` for singleton blocks.
    pub name: Option<String>,
    /// The attribute read, if the reference goes that deep.
    pub attr: Option<String>,
    pub span: Span,
}

impl Reference {
    /// `network.link`, `cluster`, `var.x`: the thing referred to, without the attribute.
    pub fn target(&self) -> String {
        match &self.name {
            Some(n) => format!("{}.{n}", self.kind),
            None => self.kind.clone(),
        }
    }
}

/// What names mean while evaluating.
pub trait Scope {
    fn variable(&self, name: &str) -> Option<&Value>;
    fn variable_names(&self) -> Vec<String>;
    /// The attributes a block exports, if the block exists and has been evaluated.
    fn block(&self, kind: &str, name: Option<&str>) -> Option<&IndexMap<String, Value>>;
    fn block_names(&self, kind: &str) -> Vec<String>;
}

/// Lists every reference an expression makes, in source order.
pub fn references(expr: &Expression, file: &Arc<SourceFile>) -> Vec<Reference> {
    let mut out = Vec::new();
    collect_refs(expr, file, &mut out);
    out
}

fn collect_refs(expr: &Expression, file: &Arc<SourceFile>, out: &mut Vec<Reference>) {
    match expr {
        Expression::Array(a) => a.iter().for_each(|e| collect_refs(e, file, out)),
        Expression::Object(o) => o.iter().for_each(|(k, v)| {
            if let Some(k) = k.as_expr() {
                collect_refs(k, file, out);
            }
            collect_refs(v.expr(), file, out);
        }),
        Expression::StringTemplate(t) => template_refs(t, file, out),
        Expression::HeredocTemplate(h) => template_refs(&h.template, file, out),
        Expression::Parenthesis(p) => collect_refs(p.inner(), file, out),
        Expression::Variable(_) | Expression::Traversal(_) => {
            if let Some((r, _)) = head(expr, file) {
                out.push(r);
            }
            if let Expression::Traversal(t) = expr {
                for op in &t.operators {
                    if let TraversalOperator::Index(i) = op.value() {
                        collect_refs(i, file, out);
                    }
                }
            }
        }
        Expression::Conditional(c) => {
            collect_refs(&c.cond_expr, file, out);
            collect_refs(&c.true_expr, file, out);
            collect_refs(&c.false_expr, file, out);
        }
        Expression::FuncCall(f) => f.args.iter().for_each(|a| collect_refs(a, file, out)),
        Expression::UnaryOp(u) => collect_refs(&u.expr, file, out),
        Expression::BinaryOp(b) => {
            collect_refs(&b.lhs_expr, file, out);
            collect_refs(&b.rhs_expr, file, out);
        }
        Expression::ForExpr(f) => {
            collect_refs(&f.intro.collection_expr, file, out);
        }
        Expression::Null(_) | Expression::Bool(_) | Expression::Number(_) | Expression::String(_) => {}
    }
}

fn template_refs(t: &Template, file: &Arc<SourceFile>, out: &mut Vec<Reference>) {
    for el in t.iter() {
        if let Element::Interpolation(i) = el {
            collect_refs(&i.expr, file, out);
        }
    }
}

/// Splits `root.a.b...` into the reference it makes and how many traversal operators that used.
fn head(expr: &Expression, file: &Arc<SourceFile>) -> Option<(Reference, usize)> {
    let (root, ops): (&str, &[hcl_edit::Decorated<TraversalOperator>]) = match expr {
        Expression::Variable(v) => (v.as_str(), &[]),
        Expression::Traversal(t) => match &t.expr {
            Expression::Variable(v) => (v.as_str(), &t.operators),
            _ => return None,
        },
        _ => return None,
    };
    let get_attr = |i: usize| match ops.get(i).map(|o| o.value()) {
        Some(TraversalOperator::GetAttr(a)) => Some((a.as_str().to_string(), ops[i].span())),
        _ => None,
    };
    let start = expr.span().map_or(0, |s| s.start);
    let span_to =
        |end: Option<std::ops::Range<usize>>, fallback: usize| Span::new(file, start..end.map_or(fallback, |r| r.end));
    let root_end = start + root.len();
    let (name, attr, used) = if root == "var" || schema::is_labelled_block(root) {
        match get_attr(0) {
            None => (None, None, 0),
            Some((name, _)) => match get_attr(1) {
                Some((attr, _)) => (Some(name), Some(attr), 2),
                None => (Some(name), None, 1),
            },
        }
    } else {
        match get_attr(0) {
            Some((attr, _)) => (None, Some(attr), 1),
            None => (None, None, 0),
        }
    };
    let last = if used == 0 { None } else { ops[used - 1].span() };
    Some((Reference { kind: root.to_string(), name, attr, span: span_to(last, root_end) }, used))
}

/// Evaluates expressions of one file against a scope, collecting problems.
pub struct Evaluator<'a> {
    pub file: &'a Arc<SourceFile>,
    pub scope: &'a dyn Scope,
    pub problems: &'a mut Problems,
}

impl Evaluator<'_> {
    fn span(&self, e: &impl hcl_edit::Span) -> Span {
        Span::new(self.file, e.span().unwrap_or(0..0))
    }

    fn fail(&mut self, span: Span, code: &'static str, message: String, help: Option<String>) -> Value {
        let mut p = Problem::error(code, message).label(&span, "");
        p.help = help;
        self.problems.push(p);
        Value::Unknown
    }

    pub fn eval(&mut self, expr: &Expression) -> Value {
        match expr {
            Expression::Null(_) => Value::Null,
            Expression::Bool(b) => Value::Bool(*b.value()),
            Expression::Number(n) => number(n.value()),
            Expression::String(s) => Value::String(s.value().clone()),
            Expression::Array(a) => Value::List(a.iter().map(|e| self.eval(e)).collect()),
            Expression::Object(o) => {
                let mut map = IndexMap::new();
                for (k, v) in o.iter() {
                    let key = match (k.as_ident(), k.as_expr()) {
                        (Some(i), _) => i.as_str().to_string(),
                        (None, Some(e)) => match self.eval(e) {
                            Value::String(s) => s,
                            Value::Unknown => return Value::Unknown,
                            other => {
                                let span = self.span(e);
                                return self.type_error(span, "string", &other);
                            }
                        },
                        (None, None) => continue,
                    };
                    let value = self.eval(v.expr());
                    map.insert(key, value);
                }
                Value::Map(map)
            }
            Expression::StringTemplate(t) => self.template(t),
            Expression::HeredocTemplate(h) => self.template(&h.template),
            Expression::Parenthesis(p) => self.eval(p.inner()),
            Expression::Variable(_) | Expression::Traversal(_) => self.traversal(expr),
            Expression::Conditional(c) => match self.eval(&c.cond_expr) {
                Value::Bool(true) => self.eval(&c.true_expr),
                Value::Bool(false) => self.eval(&c.false_expr),
                Value::Unknown => Value::Unknown,
                other => {
                    let span = self.span(&c.cond_expr);
                    self.type_error(span, "bool", &other)
                }
            },
            Expression::FuncCall(f) => {
                let args: Vec<Value> = f.args.iter().map(|a| self.eval(a)).collect();
                let span = self.span(f.as_ref());
                self.call(f.name.name.as_str(), args, span)
            }
            Expression::UnaryOp(u) => {
                let v = self.eval(&u.expr);
                let span = self.span(u.as_ref());
                let (v, sensitive) = strip(v);
                let out = match (u.operator.value(), &v) {
                    (_, Value::Unknown) => Value::Unknown,
                    (UnaryOperator::Not, Value::Bool(b)) => Value::Bool(!b),
                    (UnaryOperator::Neg, Value::Number(n)) => neg(n),
                    (UnaryOperator::Not, other) => return self.type_error(span, "bool", other),
                    (UnaryOperator::Neg, other) => return self.type_error(span, "number", other),
                };
                remark(out, sensitive)
            }
            Expression::BinaryOp(b) => {
                let l = self.eval(&b.lhs_expr);
                let r = self.eval(&b.rhs_expr);
                let span = self.span(b.as_ref());
                self.binary(*b.operator.value(), l, r, span)
            }
            Expression::ForExpr(f) => {
                let span = self.span(f.as_ref());
                self.fail(
                    span,
                    "xcsp::expr::unsupported",
                    "`for` expressions are not supported in xcsp specs".into(),
                    Some("write the list or map out, or compute it in a variable".into()),
                )
            }
        }
    }

    fn type_error(&mut self, span: Span, expected: &str, got: &Value) -> Value {
        self.fail(span, "xcsp::expr::type", format!("expected a {expected}, found a {}", got.type_name()), None)
    }

    fn template(&mut self, t: &Template) -> Value {
        let mut out = String::new();
        let mut sensitive = false;
        for el in t.iter() {
            match el {
                Element::Literal(s) => out.push_str(s.value()),
                Element::Interpolation(i) => {
                    let (v, s) = strip(self.eval(&i.expr));
                    sensitive |= s;
                    match v {
                        Value::Unknown => return Value::Unknown,
                        Value::String(s) => out.push_str(&s),
                        Value::Number(n) => out.push_str(&n.to_string()),
                        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
                        other => {
                            let span = self.span(&i.expr);
                            return self.type_error(span, "string", &other);
                        }
                    }
                }
                Element::Directive(d) => {
                    let span = self.span(d.as_ref());
                    return self.fail(
                        span,
                        "xcsp::expr::unsupported",
                        "template directives (`%{if}`, `%{for}`) are not supported".into(),
                        Some("use a conditional expression instead".into()),
                    );
                }
            }
        }
        remark(Value::String(out), sensitive)
    }

    fn traversal(&mut self, expr: &Expression) -> Value {
        let Some((r, used)) = head(expr, self.file) else {
            // A traversal of something that is not a name, e.g. `[1, 2][0]`.
            let Expression::Traversal(t) = expr else { unreachable!("head() handles plain variables") };
            let base = self.eval(&t.expr);
            return self.apply_ops(base, &t.operators);
        };
        let base = self.resolve(&r);
        match expr {
            Expression::Traversal(t) => self.apply_ops(base, &t.operators[used..]),
            _ => base,
        }
    }

    fn resolve(&mut self, r: &Reference) -> Value {
        let unknown_ref = |this: &mut Self, what: String, candidates: Vec<String>, wanted: &str| {
            let help = suggest(wanted, candidates.iter().map(String::as_str));
            this.fail(r.span.clone(), "xcsp::expr::unknown_reference", what, help)
        };
        if r.kind == "var" {
            let Some(name) = &r.name else {
                return unknown_ref(self, "`var` needs a variable name, as in `var.region`".into(), vec![], "");
            };
            return match self.scope.variable(name) {
                Some(v) => v.clone(),
                None => {
                    let names = self.scope.variable_names();
                    unknown_ref(self, format!("no variable named `{name}` is declared"), names, name)
                }
            };
        }
        if !schema::is_block_kind(&r.kind) {
            let roots: Vec<String> =
                ["var"].into_iter().chain(schema::REFERENCEABLE.iter().copied()).map(String::from).collect();
            return unknown_ref(self, format!("unknown name `{}`", r.kind), roots, &r.kind);
        }
        if schema::is_labelled_block(&r.kind) && r.name.is_none() {
            return unknown_ref(self, format!("`{0}` needs a block name, as in `{0}.NAME`", r.kind), vec![], "");
        }
        let Some(exports) = self.scope.block(&r.kind, r.name.as_deref()) else {
            let names = self.scope.block_names(&r.kind);
            let wanted = r.name.clone().unwrap_or_default();
            return unknown_ref(self, format!("no `{}` block is declared", r.target()), names, &wanted);
        };
        match &r.attr {
            None => Value::Map(exports.clone()),
            Some(attr) => match exports.get(attr) {
                Some(v) => v.clone(),
                None => {
                    let names: Vec<String> = exports.keys().cloned().collect();
                    unknown_ref(self, format!("`{}` has no attribute `{attr}`", r.target()), names, attr)
                }
            },
        }
    }

    fn apply_ops(&mut self, mut value: Value, ops: &[hcl_edit::Decorated<TraversalOperator>]) -> Value {
        for (i, op) in ops.iter().enumerate() {
            let (v, sensitive) = strip(value);
            let span = Span::new(self.file, op.span().unwrap_or(0..0));
            value = match (op.value(), v) {
                (_, Value::Unknown) => return Value::Unknown,
                (TraversalOperator::GetAttr(a), Value::Map(m)) => match m.get(a.as_str()) {
                    Some(v) => v.clone(),
                    None => {
                        let help = suggest(a.as_str(), m.keys().map(String::as_str));
                        return self.fail(
                            span,
                            "xcsp::expr::no_attribute",
                            format!("no attribute `{}`", a.as_str()),
                            help,
                        );
                    }
                },
                (TraversalOperator::Index(e), base) => {
                    let idx = self.eval(e);
                    self.index(base, idx, span)
                }
                (TraversalOperator::LegacyIndex(n), base) => self.index(base, Value::int(*n.value() as i64), span),
                (TraversalOperator::AttrSplat(_) | TraversalOperator::FullSplat(_), Value::List(items)) => {
                    let rest = &ops[i + 1..];
                    let out = items.into_iter().map(|it| self.apply_ops(it, rest)).collect();
                    return remark(Value::List(out), sensitive);
                }
                (_, other) => {
                    return self.fail(
                        span,
                        "xcsp::expr::type",
                        format!("cannot traverse into a {}", other.type_name()),
                        None,
                    );
                }
            };
            value = remark(value, sensitive);
        }
        value
    }

    fn index(&mut self, base: Value, idx: Value, span: Span) -> Value {
        match (base, idx) {
            (_, Value::Unknown) => Value::Unknown,
            (Value::List(l), Value::Number(n)) => {
                let len = l.len();
                match n.as_u64().and_then(|i| l.into_iter().nth(i as usize)) {
                    Some(v) => v,
                    None => self.fail(
                        span,
                        "xcsp::expr::index",
                        format!("index {n} is out of range for a list of {len}"),
                        None,
                    ),
                }
            }
            (Value::Map(m), Value::String(k)) => match m.get(&k) {
                Some(v) => v.clone(),
                None => self.fail(span, "xcsp::expr::index", format!("no key \"{k}\" in this map"), None),
            },
            (base, idx) => self.fail(
                span,
                "xcsp::expr::index",
                format!("cannot index a {} with a {}", base.type_name(), idx.type_name()),
                None,
            ),
        }
    }

    fn binary(&mut self, op: BinaryOperator, l: Value, r: Value, span: Span) -> Value {
        use BinaryOperator::*;
        let (l, ls) = strip(l);
        let (r, rs) = strip(r);
        if l == Value::Unknown || r == Value::Unknown {
            return Value::Unknown;
        }
        let out = match op {
            Eq => Value::Bool(l == r),
            NotEq => Value::Bool(l != r),
            And | Or => match (&l, &r) {
                (Value::Bool(a), Value::Bool(b)) => Value::Bool(if op == And { *a && *b } else { *a || *b }),
                _ => return self.type_error(span, "bool", if matches!(l, Value::Bool(_)) { &r } else { &l }),
            },
            _ => {
                let (Value::Number(a), Value::Number(b)) = (&l, &r) else {
                    return self.type_error(span, "number", if matches!(l, Value::Number(_)) { &r } else { &l });
                };
                let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
                match op {
                    Less => Value::Bool(a < b),
                    LessEq => Value::Bool(a <= b),
                    Greater => Value::Bool(a > b),
                    GreaterEq => Value::Bool(a >= b),
                    Plus => float(a + b),
                    Minus => float(a - b),
                    Mul => float(a * b),
                    Div | Mod if b == 0.0 => {
                        return self.fail(span, "xcsp::expr::division_by_zero", "division by zero".into(), None);
                    }
                    Div => float(a / b),
                    Mod => float(a % b),
                    Eq | NotEq | And | Or => unreachable!("handled above"),
                }
            }
        };
        remark(out, ls || rs)
    }

    fn call(&mut self, name: &str, args: Vec<Value>, span: Span) -> Value {
        let sensitive = args.iter().any(Value::is_sensitive);
        let args: Vec<Value> = args.into_iter().map(|a| a.unmarked()).collect();
        if args.iter().any(Value::has_unknown) {
            return Value::Unknown;
        }
        let arity = |this: &mut Self, n: usize| -> bool {
            if args.len() != n {
                this.fail(
                    span.clone(),
                    "xcsp::expr::function",
                    format!("{name}() takes {n} argument{}, got {}", if n == 1 { "" } else { "s" }, args.len()),
                    None,
                );
                return false;
            }
            true
        };
        let out = match name {
            "lower" | "upper" => {
                if !arity(self, 1) {
                    return Value::Unknown;
                }
                match &args[0] {
                    Value::String(s) => {
                        Value::String(if name == "lower" { s.to_lowercase() } else { s.to_uppercase() })
                    }
                    other => return self.type_error(span, "string", other),
                }
            }
            "length" => {
                if !arity(self, 1) {
                    return Value::Unknown;
                }
                match &args[0] {
                    Value::String(s) => Value::int(s.chars().count() as i64),
                    Value::List(l) => Value::int(l.len() as i64),
                    Value::Map(m) => Value::int(m.len() as i64),
                    other => return self.type_error(span, "string, list or map", other),
                }
            }
            "join" => {
                if !arity(self, 2) {
                    return Value::Unknown;
                }
                match (&args[0], &args[1]) {
                    (Value::String(sep), Value::List(items)) => {
                        let parts: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
                        match parts {
                            Some(p) => Value::String(p.join(sep)),
                            None => return self.type_error(span, "list of strings", &args[1]),
                        }
                    }
                    _ => return self.type_error(span, "separator string and a list", &args[0]),
                }
            }
            "concat" => {
                let mut out = Vec::new();
                for a in &args {
                    match a {
                        Value::List(l) => out.extend(l.iter().cloned()),
                        other => return self.type_error(span, "list", other),
                    }
                }
                Value::List(out)
            }
            "merge" => {
                let mut out = IndexMap::new();
                for a in &args {
                    match a {
                        Value::Map(m) => out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone()))),
                        other => return self.type_error(span, "map", other),
                    }
                }
                Value::Map(out)
            }
            "tostring" => {
                if !arity(self, 1) {
                    return Value::Unknown;
                }
                match &args[0] {
                    Value::String(s) => Value::String(s.clone()),
                    Value::Number(n) => Value::String(n.to_string()),
                    Value::Bool(b) => Value::String(b.to_string()),
                    other => return self.type_error(span, "string, number or bool", other),
                }
            }
            "cidrsubnet" => {
                if !arity(self, 3) {
                    return Value::Unknown;
                }
                match crate::net::cidrsubnet(&args[0], &args[1], &args[2]) {
                    Ok(v) => Value::String(v),
                    Err(msg) => return self.fail(span, "xcsp::expr::function", format!("cidrsubnet(): {msg}"), None),
                }
            }
            other => {
                let help = suggest(other, FUNCTIONS.iter().copied())
                    .or_else(|| Some(format!("available functions: {}", FUNCTIONS.join(", "))));
                return self.fail(span, "xcsp::expr::function", format!("unknown function `{other}`"), help);
            }
        };
        remark(out, sensitive)
    }
}

/// The functions specs may call.
pub const FUNCTIONS: &[&str] = &["cidrsubnet", "concat", "join", "length", "lower", "merge", "tostring", "upper"];

fn strip(v: Value) -> (Value, bool) {
    match v {
        Value::Sensitive(inner) => (*inner, true),
        other => (other, false),
    }
}

fn remark(v: Value, sensitive: bool) -> Value {
    if sensitive { Value::sensitive(v) } else { v }
}

fn number(n: &hcl_edit::Number) -> Value {
    if let Some(i) = n.as_i64() { Value::int(i) } else { float(n.as_f64().unwrap_or(0.0)) }
}

fn float(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::int(f as i64)
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn neg(n: &Number) -> Value {
    match n.as_i64() {
        Some(i) => Value::int(-i),
        None => float(-n.as_f64().unwrap_or(0.0)),
    }
}
