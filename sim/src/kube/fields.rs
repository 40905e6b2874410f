//! Field ownership for server-side apply: the set of field paths each manager owns, how an apply
//! or an update changes those sets, the conflicts an apply meets, and `managedFields` rendering.
//!
//! A field path is a list of object keys. An owned path is a *leaf* of the object the manager sent:
//! a scalar, a list (lists are atomic: owned whole) or an empty object. The API server also keys
//! list items (`k:{...}`, `v:...`) and marks owned maps with `.`; this emulator does not.

use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

pub type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// Apply or Update, as in `managedFields[].operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Manager {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: String,
    pub fields: FieldSet,
}

/// The leaves of `v` (see the module doc), as paths from `v`.
pub fn leaves(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    if let Value::Object(m) = v {
        for (k, x) in m {
            collect(x, &mut vec![k.clone()], &mut out);
        }
    }
    out
}

fn collect(v: &Value, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                path.push(k.clone());
                collect(x, path, out);
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The value at `path`, if any.
pub fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.as_object()?.get(k))
}

/// True when one path is a prefix of the other (they name overlapping parts of an object).
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Removes the value at `path`, then every parent object it leaves empty (up to the top).
pub fn remove(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let Some(parent) = get_mut(v, parents).and_then(Value::as_object_mut) else { return };
    parent.remove(last);
    if parent.is_empty() && !parents.is_empty() {
        remove(v, parents);
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, k| cur.as_object_mut()?.get_mut(k))
}

/// Merges an applied configuration into an object: objects merge key by key, anything else
/// (scalars, lists) replaces.
pub fn merge(target: &mut Value, config: &Value) {
    match (target, config) {
        (Value::Object(t), Value::Object(c)) => {
            for (k, x) in c {
                match t.get_mut(k) {
                    Some(old) if old.is_object() && x.is_object() => merge(old, x),
                    _ => {
                        t.insert(k.clone(), x.clone());
                    }
                }
            }
        }
        (t, c) => *t = c.clone(),
    }
}

/// One field another manager owns whose value an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    /// The owner's operation: an `Apply` owner is named alone, an `Update` owner with its apiVersion.
    pub operation: Operation,
    pub path: Path,
}

impl Conflict {
    /// The owner as the API server prints it (`printManager`): `"name"` for an applier,
    /// `"name" using apiVersion` for an updater (the identifier it compares carries no time).
    pub fn owner(&self) -> String {
        match self.operation {
            Operation::Apply => format!("{:?}", self.manager),
            Operation::Update => format!("{:?} using {}", self.manager, self.api_version),
        }
    }

    /// The owner's identifier as the API server encodes it (JSON of manager, operation and, for
    /// an updater, apiVersion), by which it sorts the owners of several conflicts.
    pub fn owner_key(&self) -> String {
        match self.operation {
            Operation::Apply => serde_json::json!({"manager": self.manager, "operation": "Apply"}).to_string(),
            Operation::Update => format!(
                "{{\"manager\":{},\"operation\":\"Update\",\"apiVersion\":{}}}",
                serde_json::Value::from(self.manager.clone()),
                serde_json::Value::from(self.api_version.clone())
            ),
        }
    }
}

/// The conflicts of an apply by `me` that turns `live` into `next`, sending `sent`: every field
/// owned by another manager, overlapping a sent field, whose value differs between the two.
pub fn conflicts(managers: &[Manager], me: &str, sent: &FieldSet, live: &Value, next: &Value) -> Vec<Conflict> {
    let mut out = Vec::new();
    for m in managers.iter().filter(|m| !(m.manager == me && m.operation == Operation::Apply)) {
        for q in &m.fields {
            if sent.iter().any(|p| overlaps(p, q)) && get(live, q) != get(next, q) {
                out.push(Conflict {
                    manager: m.manager.clone(),
                    api_version: m.api_version.clone(),
                    operation: m.operation,
                    path: q.clone(),
                });
            }
        }
    }
    out
}

/// After an update (PUT, merge patch, create, or a controller's write) by `me` turned `old` into
/// `new`: `me` owns every leaf it changed; other managers lose every field whose value changed.
pub fn record_update(managers: &mut Vec<Manager>, me: &str, api_version: &str, time: &str, old: &Value, new: &Value) {
    let changed: FieldSet = leaves(new).into_iter().filter(|p| get(old, p) != get(new, p)).collect();
    for m in managers.iter_mut() {
        m.fields.retain(|q| get(old, q) == get(new, q) && get(new, q).is_some());
    }
    if !changed.is_empty() {
        match managers.iter_mut().find(|m| m.manager == me && m.operation == Operation::Update) {
            Some(m) => {
                m.fields.extend(changed);
                m.time = time.to_string();
                m.api_version = api_version.to_string();
            }
            None => managers.push(Manager {
                manager: me.to_string(),
                operation: Operation::Update,
                api_version: api_version.to_string(),
                time: time.to_string(),
                fields: changed,
            }),
        }
    }
    managers.retain(|m| !m.fields.is_empty());
}

/// `managedFields` as the API server renders it (`fieldsType: FieldsV1`, paths as nested `f:` keys).
pub fn render(managers: &[Manager]) -> Value {
    Value::Array(
        managers
            .iter()
            .map(|m| {
                json!({
                    "manager": m.manager,
                    "operation": m.operation.as_str(),
                    "apiVersion": m.api_version,
                    "time": m.time,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1(&m.fields),
                })
            })
            .collect(),
    )
}

fn fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for k in p {
            cur = cur
                .entry(format!("f:{k}"))
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("object");
        }
    }
    Value::Object(root)
}

/// The paths in a rendered `fieldsV1` (the inverse of the rendering).
pub fn parse_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    fn walk(v: &Value, path: &mut Path, out: &mut FieldSet) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, x) in m {
                    path.push(k.trim_start_matches("f:").to_string());
                    walk(x, path, out);
                    path.pop();
                }
            }
            _ if !path.is_empty() => {
                out.insert(path.clone());
            }
            _ => {}
        }
    }
    walk(v, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Path {
        s.split('.').map(str::to_string).collect()
    }

    #[test]
    fn leaves_are_scalars_lists_and_empty_objects() {
        let v = json!({"spec": {"a": 1, "b": [1, 2], "c": {}, "d": {"e": "x"}}});
        let got: Vec<Path> = leaves(&v).into_iter().collect();
        assert_eq!(got, vec![p("spec.a"), p("spec.b"), p("spec.c"), p("spec.d.e")]);
        assert_eq!(parse_fields_v1(&fields_v1(&leaves(&v))), leaves(&v));
    }

    #[test]
    fn an_update_takes_changed_fields_from_other_managers() {
        let old = json!({"spec": {"a": 1, "b": 2}});
        let mut managers = Vec::new();
        record_update(&mut managers, "first", "v1", "t", &json!({}), &old);
        let new = json!({"spec": {"a": 1, "b": 3}});
        record_update(&mut managers, "second", "v1", "t", &old, &new);
        assert_eq!(managers[0].fields, [p("spec.a")].into_iter().collect());
        assert_eq!(managers[1].fields, [p("spec.b")].into_iter().collect());
    }

    #[test]
    fn removing_a_leaf_removes_parents_it_empties() {
        let mut v = json!({"spec": {"x": {"y": 1}, "z": 2}});
        remove(&mut v, &p("spec.x.y"));
        assert_eq!(v, json!({"spec": {"z": 2}}));
    }
}
