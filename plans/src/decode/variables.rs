//! Variables: their declarations, the values given from outside the spec (the environment,
//! var files, `-var` flags) and their binding into the names expressions see.

use std::collections::HashMap;
use std::sync::Arc;

use hcl_edit::expr::Expression;
use indexmap::IndexMap;
use sha2::{Digest, Sha256};
use xcsp_core::{Problem, Problems, SourceFile, Span, Value};

use super::fields::evaluate_block;
use super::{Env, VarInputs, strings_in};
use crate::eval::Evaluator;
use crate::schema::{self, suggest};
use crate::syntax::RawBlock;

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

/// Declares the variables of `blocks` and binds each in `env` to its value from `inputs`, or
/// else its default; names and values go into `digest`, sensitive strings into `secrets`.
pub(super) fn bind(
    blocks: &[&RawBlock],
    inputs: &VarInputs,
    env: &mut Env,
    digest: &mut Sha256,
    secrets: &mut Vec<String>,
    problems: &mut Problems,
) {
    let variables = declare_variables(blocks, problems);
    let values = input_values(inputs, &variables, problems);
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
            strings_in(&value, secrets);
        }
        env.vars.insert(name, if var.sensitive { Value::sensitive(value) } else { value });
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
    let mut files = Vec::new();
    for path in &inputs.files {
        match std::fs::read_to_string(path) {
            Ok(text) => files.push(SourceFile::new(path.display().to_string(), text)),
            Err(e) => {
                problems
                    .push(Problem::error("xcsp::var::file", format!("cannot read var file {}: {e}", path.display())));
            }
        }
    }
    for file in files.into_iter().chain(inputs.file_texts.iter().cloned()) {
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
