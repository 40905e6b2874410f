//! Field ownership for server-side apply: the set of field paths each manager owns, how an apply
//! or an update changes those sets, the conflicts an apply meets, and `managedFields` rendering.
//!
//! A field path is a list of elements: an object key, or a list item as `fieldsV1` names it, `k:{...}`
//! (an item of an `x-kubernetes-list-type: map` list, by its `x-kubernetes-list-map-keys`, keys sorted)
//! or `v:...` (an item of a `set`, by its JSON). An owned path is a *leaf* of the object the manager
//! sent: a scalar, an atomic list (a list with no list type, or `atomic`, owned whole), an atomic map
//! (`x-kubernetes-map-type: atomic`), an empty object; and each map-list item itself besides its
//! fields, each set item. That is structured-merge-diff's model as the API server uses it for custom
//! resources (kubernetes-sigs/structured-merge-diff `typed/merge.go`, `fieldpath/serialize-pe.go`;
//! the Kubernetes docs, "Server-Side Apply", "Merge strategy": granular lists and maps merge item by
//! item, atomic ones are replaced whole). `metadata` follows ObjectMeta's own markers:
//! `ownerReferences` a map list keyed by `uid`, `finalizers` a set (k8s.io/apimachinery
//! `pkg/apis/meta/v1/types.go`). Without a schema (the built-in kinds the sim serves without one)
//! every other list is atomic. The API server also marks owned maps with `.`; this emulator marks
//! only map-list items. Object keys never start with `k:` or `v:` here (label, annotation and field
//! names cannot hold a colon), so the two kinds of element are told apart by their prefix.

use super::schema::{ListType, list_type};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::LazyLock;

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

/// ObjectMeta's list markers, the part of its schema the merge needs.
static METADATA: LazyLock<Value> = LazyLock::new(|| {
    json!({"type": "object", "properties": {
        "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set"},
    }})
});

/// The schema of `key` under an object of `schema` (`Null` when unknown); `root` for the top level,
/// where `metadata` is ObjectMeta's.
fn child<'a>(schema: &'a Value, key: &str, root: bool) -> &'a Value {
    if root && key == "metadata" {
        return &METADATA;
    }
    match schema["properties"].get(key) {
        Some(s) => s,
        None if schema["additionalProperties"].is_object() => &schema["additionalProperties"],
        None => &Value::Null,
    }
}

fn atomic_map(schema: &Value) -> bool {
    schema["x-kubernetes-map-type"] == "atomic"
}

/// The `k:` element of a map-list item: its key fields, sorted, as JSON.
fn item_key(item: &Value, keys: &[&str]) -> String {
    let mut names: Vec<&str> = keys.to_vec();
    names.sort_unstable();
    let parts: Vec<String> =
        names.iter().filter_map(|k| Some(format!("{}:{}", Value::from(*k), item.get(*k)?))).collect();
    format!("k:{{{}}}", parts.join(","))
}

/// The `v:` element of a set item.
fn item_value(item: &Value) -> String {
    format!("v:{item}")
}

/// The leaves of `v` (see the module doc), as paths from `v`, under the resource's `schema`
/// (its `openAPIV3Schema`, or `Null`).
pub fn leaves(v: &Value, schema: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    if let Value::Object(m) = v {
        for (k, x) in m {
            collect(x, child(schema, k, true), &mut vec![k.clone()], &mut out);
        }
    }
    out
}

fn collect(v: &Value, schema: &Value, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() && !atomic_map(schema) => {
            for (k, x) in m {
                path.push(k.clone());
                collect(x, child(schema, k, false), path, out);
                path.pop();
            }
        }
        // An empty granular list is no field of anyone's: only its items are owned.
        Value::Array(items) if items.is_empty() && !matches!(list_type(schema), ListType::Atomic) => {}
        Value::Array(items) if !items.is_empty() => match list_type(schema) {
            ListType::Atomic => {
                out.insert(path.clone());
            }
            ListType::Set => {
                for x in items {
                    path.push(item_value(x));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListType::Map(keys) => {
                for x in items {
                    path.push(item_key(x, &keys));
                    out.insert(path.clone());
                    collect(x, &schema["items"], path, out);
                    path.pop();
                }
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The item of `list` an element names.
fn find_item(list: &[Value], element: &str) -> Option<usize> {
    if let Some(k) = element.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        list.iter().position(|x| want.iter().all(|(f, v)| x.get(f) == Some(v)))
    } else {
        let want: Value = serde_json::from_str(element.strip_prefix("v:")?).ok()?;
        list.iter().position(|x| *x == want)
    }
}

/// True when `element` names a list item (`k:` or `v:`).
fn is_item(element: &str) -> bool {
    element.starts_with("k:") || element.starts_with("v:")
}

/// The value at `path`, if any.
pub fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| match cur {
        Value::Array(list) if is_item(k) => list.get(find_item(list, k)?),
        _ => cur.as_object()?.get(k),
    })
}

fn get_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, k| match cur {
        Value::Array(list) if is_item(k) => {
            let i = find_item(list, k)?;
            list.get_mut(i)
        }
        Value::Object(m) => m.get_mut(k),
        _ => None,
    })
}

/// True when `path` holds the same thing in `a` and `b`: the same value, or for a list item's own
/// path (its fields are paths of their own) its presence in both or neither.
pub fn same_at(a: &Value, b: &Value, path: &[String]) -> bool {
    match path.last() {
        Some(last) if is_item(last) => get(a, path).is_some() == get(b, path).is_some(),
        _ => get(a, path) == get(b, path),
    }
}

/// True when `path` is a key field of a map-list item (`.../k:{"name":..}/name`): it goes with its
/// item, never alone.
fn is_key_field(path: &[String]) -> bool {
    let [.., item, field] = path else { return false };
    item.strip_prefix("k:")
        .and_then(|k| serde_json::from_str::<Map<String, Value>>(k).ok())
        .is_some_and(|keys| keys.contains_key(field))
}

/// A path as structured-merge-diff prints it in conflicts (`fieldpath.Path.String`): `.name` for a
/// field, `[k=V,...]` for a map-list item (values as JSON), `[=V]` for a set item.
pub fn display(path: &[String]) -> String {
    let mut out = String::new();
    for e in path {
        if let Some(k) = e.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = keys.iter().map(|(f, v)| format!("{f}={v}")).collect();
            out += &format!("[{}]", parts.join(","));
        } else if let Some(v) = e.strip_prefix("v:") {
            out += &format!("[={v}]");
        } else {
            out += &format!(".{e}");
        }
    }
    out
}

/// True when one path is a prefix of the other (they name overlapping parts of an object).
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Removes the value at `path` (a field, or a list item), then every parent object or list it
/// leaves empty (up to the top). A key field of a map-list item is left: it goes with its item.
pub fn remove(v: &mut Value, path: &[String]) {
    if is_key_field(path) {
        return;
    }
    let Some((last, parents)) = path.split_last() else { return };
    let emptied = match get_mut(v, parents) {
        Some(Value::Array(list)) if is_item(last) => {
            let Some(i) = find_item(list, last) else { return };
            list.remove(i);
            list.is_empty()
        }
        Some(Value::Object(parent)) => {
            if parent.remove(last).is_none() {
                return;
            }
            parent.is_empty()
        }
        _ => return,
    };
    if emptied && !parents.is_empty() {
        remove(v, parents);
    }
}

/// Merges an applied configuration into an object under the resource's `schema`: objects merge
/// key by key (an atomic map is replaced), a map list item by item matched on its keys (an item
/// not there yet is appended), a set by adding the values it lacks; anything else (scalars,
/// atomic lists) replaces.
pub fn merge(target: &mut Value, config: &Value, schema: &Value) {
    merge_in(target, config, schema, true);
}

fn merge_in(target: &mut Value, config: &Value, schema: &Value, root: bool) {
    match (target, config) {
        (Value::Object(t), Value::Object(c)) if !atomic_map(schema) => {
            for (k, x) in c {
                let sub = child(schema, k, root);
                match t.get_mut(k) {
                    Some(old) if (old.is_object() && x.is_object()) || (old.is_array() && x.is_array()) => {
                        merge_in(old, x, sub, false)
                    }
                    _ => {
                        t.insert(k.clone(), x.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(c)) => match list_type(schema) {
            ListType::Set => {
                for x in c {
                    if !t.contains(x) {
                        t.push(x.clone());
                    }
                }
            }
            ListType::Map(keys) => {
                for x in c {
                    match t.iter().position(|y| item_key(y, &keys) == item_key(x, &keys)) {
                        Some(i) => merge_in(&mut t[i], x, &schema["items"], false),
                        None => t.push(x.clone()),
                    }
                }
            }
            ListType::Atomic => *t = c.clone(),
        },
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
            if sent.iter().any(|p| overlaps(p, q)) && !same_at(live, next, q) {
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
/// `new` (of a resource with `schema`): `me` owns every leaf it changed; other managers lose every
/// field whose value changed.
pub fn record_update(
    managers: &mut Vec<Manager>,
    me: &str,
    api_version: &str,
    time: &str,
    (old, new): (&Value, &Value),
    schema: &Value,
) {
    let changed: FieldSet = leaves(new, schema).into_iter().filter(|p| !same_at(old, new, p)).collect();
    for m in managers.iter_mut() {
        m.fields.retain(|q| same_at(old, new, q) && get(new, q).is_some());
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
            let name = if is_item(k) { k.clone() } else { format!("f:{k}") };
            cur = cur.entry(name).or_insert_with(|| Value::Object(Map::new())).as_object_mut().expect("object");
        }
        if p.last().is_some_and(|k| k.starts_with("k:")) {
            cur.insert(".".into(), Value::Object(Map::new()));
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
                    if k == "." {
                        out.insert(path.clone());
                        continue;
                    }
                    path.push(k.strip_prefix("f:").unwrap_or(k).to_string());
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
        let got: Vec<Path> = leaves(&v, &Value::Null).into_iter().collect();
        assert_eq!(got, vec![p("spec.a"), p("spec.b"), p("spec.c"), p("spec.d.e")]);
        assert_eq!(parse_fields_v1(&fields_v1(&leaves(&v, &Value::Null))), leaves(&v, &Value::Null));
    }

    #[test]
    fn an_update_takes_changed_fields_from_other_managers() {
        let old = json!({"spec": {"a": 1, "b": 2}});
        let mut managers = Vec::new();
        record_update(&mut managers, "first", "v1", "t", (&json!({}), &old), &Value::Null);
        let new = json!({"spec": {"a": 1, "b": 3}});
        record_update(&mut managers, "second", "v1", "t", (&old, &new), &Value::Null);
        assert_eq!(managers[0].fields, [p("spec.a")].into_iter().collect());
        assert_eq!(managers[1].fields, [p("spec.b")].into_iter().collect());
    }

    #[test]
    fn removing_a_leaf_removes_parents_it_empties() {
        let mut v = json!({"spec": {"x": {"y": 1}, "z": 2}});
        remove(&mut v, &p("spec.x.y"));
        assert_eq!(v, json!({"spec": {"z": 2}}));
    }

    /// A schema with a map list (`subnets`, keyed by `name`), a set (`zones`), an atomic list
    /// (`cidrs`) and an atomic map (`selector`).
    fn typed() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "subnets": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "cidr": {"type": "string"}, "role": {"type": "string"}}}},
            "zones": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "cidrs": {"type": "array", "items": {"type": "string"}},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
        }}}})
    }

    #[test]
    fn map_list_items_and_set_values_are_leaves_of_their_own_and_render_as_fields_v1_names_them() {
        let v = json!({"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "u1", "name": "o"}]},
            "spec": {"subnets": [{"name": "node", "cidr": "10.0.0.0/24"}], "zones": ["1", "2"],
                     "cidrs": ["10.0.0.0/16"], "selector": {"a": "b"}}});
        let got = leaves(&v, &typed());
        let want: FieldSet = [
            vec!["metadata", "finalizers", "v:\"a\""],
            vec!["metadata", "ownerReferences", "k:{\"uid\":\"u1\"}"],
            vec!["metadata", "ownerReferences", "k:{\"uid\":\"u1\"}", "name"],
            vec!["metadata", "ownerReferences", "k:{\"uid\":\"u1\"}", "uid"],
            vec!["spec", "cidrs"],
            vec!["spec", "selector"],
            vec!["spec", "subnets", "k:{\"name\":\"node\"}"],
            vec!["spec", "subnets", "k:{\"name\":\"node\"}", "cidr"],
            vec!["spec", "subnets", "k:{\"name\":\"node\"}", "name"],
            vec!["spec", "zones", "v:\"1\""],
            vec!["spec", "zones", "v:\"2\""],
        ]
        .into_iter()
        .map(|p| p.into_iter().map(str::to_string).collect())
        .collect();
        assert_eq!(got, want);
        let rendered = fields_v1(&got);
        assert_eq!(
            rendered["f:spec"]["f:subnets"]["k:{\"name\":\"node\"}"],
            json!({".": {}, "f:cidr": {}, "f:name": {}})
        );
        assert_eq!(rendered["f:spec"]["f:zones"], json!({"v:\"1\"": {}, "v:\"2\"": {}}));
        assert_eq!(parse_fields_v1(&rendered), got);
        for path in &got {
            assert!(get(&v, path).is_some(), "{path:?}");
        }
    }

    #[test]
    fn a_map_list_merges_item_by_item_a_set_by_value_and_atomic_ones_whole() {
        let mut live = json!({"spec": {"subnets": [{"name": "cp", "cidr": "10.0.0.0/24"}, {"name": "node", "cidr": "10.0.1.0/24"}],
            "zones": ["1"], "cidrs": ["10.0.0.0/16", "10.1.0.0/16"], "selector": {"a": "b", "c": "d"}}});
        let config = json!({"spec": {"subnets": [{"name": "node", "role": "node"}, {"name": "gpu", "cidr": "10.0.2.0/24"}],
            "zones": ["2", "1"], "cidrs": ["10.2.0.0/16"], "selector": {"x": "y"}}});
        merge(&mut live, &config, &typed());
        assert_eq!(
            live,
            json!({"spec": {"subnets": [{"name": "cp", "cidr": "10.0.0.0/24"},
                {"name": "node", "cidr": "10.0.1.0/24", "role": "node"}, {"name": "gpu", "cidr": "10.0.2.0/24"}],
                "zones": ["1", "2"], "cidrs": ["10.2.0.0/16"], "selector": {"x": "y"}}})
        );
        // Without a schema every list is atomic.
        let mut plain = json!({"spec": {"subnets": [{"name": "cp"}]}});
        merge(&mut plain, &json!({"spec": {"subnets": [{"name": "gpu"}]}}), &Value::Null);
        assert_eq!(plain, json!({"spec": {"subnets": [{"name": "gpu"}]}}));
    }

    #[test]
    fn removing_an_item_takes_it_whole_and_an_emptied_list_with_it() {
        let mut v = json!({"spec": {"subnets": [{"name": "a", "cidr": "x"}, {"name": "b"}], "zones": ["1"], "k": 1}});
        let item = |n: &str| vec!["spec".to_string(), "subnets".into(), format!("k:{{\"name\":{n:?}}}")];
        remove(&mut v, &item("a"));
        assert_eq!(v["spec"]["subnets"], json!([{"name": "b"}]));
        remove(&mut v, &item("b"));
        remove(&mut v, &["spec".to_string(), "zones".into(), "v:\"1\"".into()]);
        assert_eq!(v, json!({"spec": {"k": 1}}));
        assert!(is_key_field(&[item("a"), vec!["name".into()]].concat()));
        assert!(!is_key_field(&[item("a"), vec!["cidr".into()]].concat()));
    }

    #[test]
    fn an_update_inside_an_item_takes_that_field_not_the_item() {
        let old = json!({"spec": {"subnets": [{"name": "a", "cidr": "x"}]}});
        let mut managers = Vec::new();
        record_update(&mut managers, "first", "v1", "t", (&json!({}), &old), &typed());
        let new = json!({"spec": {"subnets": [{"name": "a", "cidr": "y"}]}});
        record_update(&mut managers, "second", "v1", "t", (&old, &new), &typed());
        let k = "k:{\"name\":\"a\"}";
        let path =
            |tail: &[&str]| -> Path { ["spec", "subnets", k].iter().chain(tail).map(|s| s.to_string()).collect() };
        assert_eq!(managers[0].fields, [path(&[]), path(&["name"])].into_iter().collect());
        assert_eq!(managers[1].fields, [path(&["cidr"])].into_iter().collect());
    }
}
