//! CRD structural schemas as the Kubernetes API server applies them: loading the CRDs, pruning unknown
//! fields, defaulting, and validation (types, required, enum, pattern, lengths, bounds, item counts), each
//! problem a [`Cause`] in the API server's shape. This is the project's one CRD validator: the emulator
//! uses it on every write and `providers/kube`'s tests check rendered objects with it.
//!
//! Also checked: `format: date-time`, list-type uniqueness (`x-kubernetes-list-type: set|map`), and
//! the `x-kubernetes-validations` rules (CEL, evaluated by cel-interpreter with `self` bound to the
//! value; transition rules, those naming `oldSelf`, are skipped as the API server skips them on
//! create, and `messageExpression` and `fieldPath` are not read). Not checked: the other formats
//! (`int32`, `int64`), `not`/`oneOf`, CEL's cost budget. A `pattern` the `regex` crate cannot compile
//! (ECMA-only syntax such as look-around) is skipped and listed by [`Schema::skipped_patterns`].

use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a field is invalid, with the API server's `reason` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CauseReason {
    FieldValueInvalid,
    FieldValueRequired,
    FieldValueNotSupported,
    FieldValueTypeInvalid,
    FieldValueTooLong,
    FieldValueTooMany,
    FieldValueForbidden,
    FieldValueDuplicate,
}

impl CauseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CauseReason::FieldValueInvalid => "FieldValueInvalid",
            CauseReason::FieldValueRequired => "FieldValueRequired",
            CauseReason::FieldValueNotSupported => "FieldValueNotSupported",
            CauseReason::FieldValueTypeInvalid => "FieldValueTypeInvalid",
            CauseReason::FieldValueTooLong => "FieldValueTooLong",
            CauseReason::FieldValueTooMany => "FieldValueTooMany",
            CauseReason::FieldValueForbidden => "FieldValueForbidden",
            CauseReason::FieldValueDuplicate => "FieldValueDuplicate",
        }
    }
}

/// One invalid field: `field` is the API server's path (`spec.template.spec.vmSize`, `spec.x[0].y`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub reason: CauseReason,
    pub field: String,
    pub message: String,
}

impl Cause {
    /// The cause as it appears in a `Status`'s `details.causes`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"reason": self.reason.as_str(), "message": self.message, "field": self.field})
    }
}

impl fmt::Display for Cause {
    /// `field: message`, as the API server joins them into a `Status` message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Errors reading CRDs.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a CustomResourceDefinition: {reason}")]
    NotACrd { path: PathBuf, reason: String },
    #[error("{path} does not serve version {version}")]
    NoVersion { path: PathBuf, version: String },
}

/// One version of a CustomResourceDefinition: names, scope, subresources and its schema.
#[derive(Debug)]
pub struct Crd {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    pub scale_subresource: bool,
    pub schema: Schema,
    pub file: PathBuf,
    /// The warning the API server sends with every request at this version when the CRD marks it
    /// `deprecated` ([`deprecation_warning`]).
    pub deprecation: Option<String>,
}

/// What the API server warns of a request at a `deprecated` version of a CRD: its
/// `deprecationWarning`, else "<group>/<version> <Kind> is deprecated", followed by "; use
/// <group>/<v> <Kind>" naming the newest served, not deprecated, version newer than it
/// (kubernetes `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go`
/// `defaultDeprecationWarning`; the `Warning` header, KEP-1693, code 299).
pub fn deprecation_warning(spec: &Value, version: &Value) -> Option<String> {
    if version["deprecated"] != true {
        return None;
    }
    if let Some(w) = version["deprecationWarning"].as_str() {
        return Some(w.to_string());
    }
    let (group, kind) = (spec["group"].as_str()?, spec["names"]["kind"].as_str()?);
    let this = version["name"].as_str()?;
    let mut msg = format!("{group}/{this} {kind} is deprecated");
    let newer = spec["versions"]
        .as_array()?
        .iter()
        .filter(|v| v["served"] != false && v["deprecated"] != true)
        .filter_map(|v| v["name"].as_str())
        .filter(|v| kube_version_order(v) > kube_version_order(this))
        .max_by_key(|v| kube_version_order(v));
    if let Some(v) = newer {
        msg += &format!("; use {group}/{v} {kind}");
    }
    Some(msg)
}

/// A string the API server takes as `format: date-time` (go-openapi `strfmt.ParseDateTime`, which
/// the CRD validation uses: RFC 3339 with or without fractional seconds, and the same without a
/// zone, read as local time). Checked only where the CRDs use it (conditions' `lastTransitionTime`,
/// ...); the refusal is worded as the API server words it (".lastTransitionTime in body must be
/// of type date-time: ...", kubernetes-client/java#1754). The other formats of the CRDs
/// (`int32`, `int64` on integers) are not checked.
fn is_date_time(s: &str) -> bool {
    use time::format_description::well_known::Rfc3339;
    if time::OffsetDateTime::parse(s, &Rfc3339).is_ok() {
        return true;
    }
    // No zone: `YYYY-MM-DDTHH:MM:SS` and an optional fraction.
    let (main, frac) = s.split_once('.').unwrap_or((s, ""));
    let shape = main.len() == 19
        && main.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == 'T',
            13 | 16 => c == ':',
            _ => c.is_ascii_digit(),
        });
    shape && frac.chars().all(|c| c.is_ascii_digit())
}

/// The order of Kubernetes version names (apimachinery `version.CompareKubeAwareVersionStrings`):
/// GA above beta above alpha, then by the numbers (`v1` > `v1beta2` > `v1beta1` > `v1alpha1`).
fn kube_version_order(v: &str) -> (u32, u8, u32) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (3, 0)
    };
    (major, stage, minor)
}

/// The CRD directory: `$XCSP_REFERENCE_DIR/crds`, else `shared/reference/crds` beside the checkout.
pub fn crds_dir() -> PathBuf {
    std::env::var_os("XCSP_REFERENCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/reference")))
        .join("crds")
}

/// Reads every CRD file (`*.yaml`) in `dir` and its subdirectories that serves `version`.
pub fn load_crds(dir: &Path, version: &str) -> Result<Vec<Crd>, SchemaError> {
    let mut files = Vec::new();
    collect_yaml(dir, &mut files)?;
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|source| SchemaError::Read { path: f.clone(), source })?;
        let doc: Value = match serde_norway::from_str(&text) {
            Ok(d) => d,
            Err(_) => continue, // metadata.yaml and friends: not CRDs
        };
        if doc["kind"] != "CustomResourceDefinition" {
            continue;
        }
        match Crd::from_definition(&doc, version, &f) {
            Ok(c) => out.push(c),
            Err(SchemaError::NoVersion { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), SchemaError> {
    let entries = std::fs::read_dir(dir).map_err(|source| SchemaError::Read { path: dir.to_path_buf(), source })?;
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_yaml(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
    Ok(())
}

impl Crd {
    /// The `version` of a parsed CustomResourceDefinition document.
    pub fn from_definition(doc: &Value, version: &str, file: &Path) -> Result<Crd, SchemaError> {
        let bad = |reason: &str| SchemaError::NotACrd { path: file.to_path_buf(), reason: reason.into() };
        let spec = &doc["spec"];
        let names = &spec["names"];
        let text = |v: &Value, what: &str| v.as_str().map(str::to_string).ok_or_else(|| bad(what));
        let list = |v: &Value| -> Vec<String> {
            v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
        };
        let v = spec["versions"]
            .as_array()
            .ok_or_else(|| bad("no spec.versions"))?
            .iter()
            .find(|v| v["name"] == version && v["served"] != false)
            .ok_or_else(|| SchemaError::NoVersion { path: file.to_path_buf(), version: version.into() })?;
        let kind = text(&names["kind"], "no spec.names.kind")?;
        Ok(Crd {
            group: text(&spec["group"], "no spec.group")?,
            version: version.into(),
            plural: text(&names["plural"], "no spec.names.plural")?,
            singular: names["singular"].as_str().map(str::to_string).unwrap_or_else(|| kind.to_ascii_lowercase()),
            kind,
            namespaced: spec["scope"] != "Cluster",
            short_names: list(&names["shortNames"]),
            categories: list(&names["categories"]),
            status_subresource: v["subresources"].get("status").is_some(),
            scale_subresource: v["subresources"].get("scale").is_some(),
            schema: Schema::new(v["schema"]["openAPIV3Schema"].clone()),
            file: file.to_path_buf(),
            deprecation: deprecation_warning(spec, v),
        })
    }
}

/// An openAPIV3Schema with its patterns and CEL rules compiled once.
pub struct Schema {
    root: Value,
    patterns: BTreeMap<String, Option<Regex>>,
    /// Each `x-kubernetes-validations` rule's program, or why it does not compile.
    rules: BTreeMap<String, Result<cel_interpreter::Program, String>>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema").field("patterns", &self.patterns.len()).field("rules", &self.rules.len()).finish()
    }
}

impl Schema {
    pub fn new(root: Value) -> Schema {
        let mut patterns = BTreeMap::new();
        compile_patterns(&root, &mut patterns);
        let mut rules = BTreeMap::new();
        compile_rules(&root, &mut rules);
        Schema { root, patterns, rules }
    }

    /// The schema as read.
    pub fn root(&self) -> &Value {
        &self.root
    }

    /// Patterns the `regex` crate cannot compile; values are not checked against them.
    pub fn skipped_patterns(&self) -> Vec<&str> {
        self.patterns.iter().filter(|(_, r)| r.is_none()).map(|(p, _)| p.as_str()).collect()
    }

    /// Removes fields the schema does not know (and `null`s where the schema is not `nullable`),
    /// as the API server does in its default (non-strict) mode; answers the removed fields' paths.
    /// `apiVersion`, `kind` and `metadata` at the top are left alone.
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
        let mut removed = Vec::new();
        if let Value::Object(map) = object {
            let props = self.root["properties"].as_object();
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match props.and_then(|p| p.get(&k)) {
                    Some(s) => {
                        let child = map.get_mut(&k).expect("key");
                        if child.is_null() && s["nullable"] != true {
                            map.remove(&k);
                        } else {
                            prune(s, child, &k, &mut removed);
                        }
                    }
                    None => {
                        map.remove(&k);
                        removed.push(k);
                    }
                }
            }
        }
        removed
    }

    /// The fields [`Schema::prune`] would remove (what `fieldValidation=Strict` refuses).
    pub fn unknown_fields(&self, object: &Value) -> Vec<String> {
        self.prune(&mut object.clone())
    }

    /// Fills absent properties that have a `default` in the schema, recursively.
    pub fn apply_defaults(&self, object: &mut Value) {
        defaults(&self.root, object);
    }

    /// Every problem of `object` against the schema (unknown fields are not problems here; see
    /// [`Schema::unknown_fields`]). `metadata` is checked for `name` and `namespace` only.
    pub fn validate(&self, object: &Value) -> Vec<Cause> {
        let mut out = Vec::new();
        if let Some(c) = check_name(&object["metadata"]["name"], "metadata.name") {
            out.push(c);
        }
        if let Some(ns) = object["metadata"].get("namespace")
            && let Some(c) = check_label_name(ns, "metadata.namespace")
        {
            out.push(c);
        }
        let Value::Object(map) = object else {
            out.push(type_cause("", "object", object));
            return out;
        };
        for r in self.root["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                out.push(required(r));
            }
        }
        let props = self.root["properties"].as_object();
        for (k, v) in map {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(s) = props.and_then(|p| p.get(k)) {
                self.check(s, v, k, &mut out);
            }
        }
        out
    }

    fn check(&self, schema: &Value, v: &Value, path: &str, out: &mut Vec<Cause>) {
        if v.is_null() {
            if schema["nullable"] != true && schema.get("type").is_some() {
                out.push(type_cause(path, schema["type"].as_str().unwrap_or("?"), v));
            }
            return;
        }
        let int_or_string = schema["x-kubernetes-int-or-string"] == true;
        if int_or_string {
            if !(v.is_string() || is_integer(v)) {
                out.push(Cause {
                    reason: CauseReason::FieldValueTypeInvalid,
                    field: path.into(),
                    message: format!(
                        "Invalid value: \"{}\": {path} in body must be of type integer,string: \"{}\"",
                        json_type(v),
                        json_type(v)
                    ),
                });
                return;
            }
        } else if let Some(ty) = schema["type"].as_str() {
            let ok = match ty {
                "object" => v.is_object(),
                "array" => v.is_array(),
                "string" => v.is_string(),
                "boolean" => v.is_boolean(),
                "integer" => is_integer(v),
                "number" => v.is_number(),
                _ => true,
            };
            if !ok {
                out.push(type_cause(path, ty, v));
                return;
            }
        }
        if let Some(allowed) = schema["enum"].as_array()
            && !allowed.contains(v)
        {
            let list: Vec<String> = allowed.iter().map(go_value).collect();
            out.push(Cause {
                reason: CauseReason::FieldValueNotSupported,
                field: path.into(),
                message: format!("Unsupported value: {}: supported values: {}", go_value(v), list.join(", ")),
            });
        }
        match v {
            Value::String(s) => self.check_string(schema, s, v, path, out),
            Value::Number(n) => check_number(schema, n, v, path, out),
            Value::Array(items) => {
                if let Some(min) = schema["minItems"].as_u64()
                    && (items.len() as u64) < min
                {
                    out.push(invalid(path, v, format!("{path} in body should have at least {min} items")));
                }
                if let Some(max) = schema["maxItems"].as_u64()
                    && items.len() as u64 > max
                {
                    out.push(Cause {
                        reason: CauseReason::FieldValueTooMany,
                        field: path.into(),
                        message: format!("Too many: {}: must have at most {max} items", items.len()),
                    });
                }
                check_list_type(schema, items, path, out);
                if schema["items"].is_object() {
                    for (i, x) in items.iter().enumerate() {
                        self.check(&schema["items"], x, &format!("{path}[{i}]"), out);
                    }
                }
            }
            Value::Object(map) => {
                for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        out.push(required(&join(path, r)));
                    }
                }
                if let Some(min) = schema["minProperties"].as_u64()
                    && (map.len() as u64) < min
                {
                    out.push(invalid(
                        path,
                        &json_len(map),
                        format!("{path} in body should have at least {min} properties"),
                    ));
                }
                if let Some(max) = schema["maxProperties"].as_u64()
                    && map.len() as u64 > max
                {
                    out.push(Cause {
                        reason: CauseReason::FieldValueTooMany,
                        field: path.into(),
                        message: format!("Too many: {}: must have at most {max} items", map.len()),
                    });
                }
                let props = schema["properties"].as_object();
                let embedded = schema["x-kubernetes-embedded-resource"] == true;
                for (k, x) in map {
                    if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    match props.and_then(|p| p.get(k)) {
                        Some(s) => self.check(s, x, &join(path, k), out),
                        None if schema["additionalProperties"].is_object() => {
                            self.check(&schema["additionalProperties"], x, &join(path, k), out)
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
        for sub in schema["allOf"].as_array().into_iter().flatten() {
            self.check(sub, v, path, out);
        }
        if let Some(any) = schema["anyOf"].as_array()
            && !any.is_empty()
            && !any.iter().any(|sub| {
                let mut tmp = Vec::new();
                self.check(sub, v, path, &mut tmp);
                tmp.is_empty()
            })
        {
            out.push(invalid(path, v, format!("{path} in body must validate at least one schema (anyOf)")));
        }
        self.check_rules(schema, v, path, out);
    }

    /// The value's `x-kubernetes-validations` rules, as the API server's CEL validator reports them
    /// (kubernetes `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go`,
    /// `validateExpressions`): a rule that is false is `Invalid value` with the rule's `message` (else
    /// "failed rule: RULE"), the value shown for a scalar and left out for an object or a list
    /// (apimachinery `field.Error.ErrorBody`, `omitValue`); a rule that fails to evaluate is
    /// `Invalid value: "TYPE": ERROR evaluating rule: RULE`; a rule with a `reason` of
    /// `FieldValueForbidden`/`Required` gives that cause. Rules naming `oldSelf` (transition rules)
    /// are not evaluated: the sim has no old object here, as on a create.
    fn check_rules(&self, schema: &Value, v: &Value, path: &str, out: &mut Vec<Cause>) {
        for rule in schema["x-kubernetes-validations"].as_array().into_iter().flatten() {
            let Some(text) = rule["rule"].as_str() else { continue };
            if text.contains("oldSelf") {
                continue;
            }
            let message = rule["message"].as_str().map(str::trim).filter(|m| !m.is_empty());
            let shown = message.map(str::to_string).unwrap_or_else(|| text.trim().to_string());
            let ty = schema["type"].as_str().unwrap_or("");
            let verdict = match self.rules.get(text) {
                Some(Ok(program)) => {
                    let mut ctx = cel_interpreter::Context::default();
                    ctx.add_variable_from_value("self", to_cel(v));
                    program.execute(&ctx).map_err(|e| e.to_string())
                }
                Some(Err(e)) => Err(format!("rule compile error: {e}")),
                None => continue,
            };
            let detail = match verdict {
                Ok(cel_interpreter::Value::Bool(true)) => continue,
                Ok(cel_interpreter::Value::Bool(false)) => {
                    message.map(str::to_string).unwrap_or_else(|| format!("failed rule: {}", text.trim()))
                }
                Ok(other) => format!("rule did not evaluate to a bool: {other:?} evaluating rule: {shown}"),
                Err(e) => {
                    out.push(invalid(path, &Value::from(ty), format!("{e} evaluating rule: {shown}")));
                    continue;
                }
            };
            let cause = match rule["reason"].as_str() {
                Some("FieldValueForbidden") => Cause {
                    reason: CauseReason::FieldValueForbidden,
                    field: path.into(),
                    message: format!("Forbidden: {detail}"),
                },
                Some("FieldValueRequired") => Cause {
                    reason: CauseReason::FieldValueRequired,
                    field: path.into(),
                    message: format!("Required value: {detail}"),
                },
                _ if v.is_object() || v.is_array() => Cause {
                    reason: CauseReason::FieldValueInvalid,
                    field: path.into(),
                    message: format!("Invalid value: {detail}"),
                },
                _ => invalid(path, v, detail),
            };
            out.push(cause);
        }
    }

    fn check_string(&self, schema: &Value, s: &str, v: &Value, path: &str, out: &mut Vec<Cause>) {
        let len = s.chars().count() as u64;
        if let Some(max) = schema["maxLength"].as_u64()
            && len > max
        {
            out.push(Cause {
                reason: CauseReason::FieldValueTooLong,
                field: path.into(),
                message: format!("Too long: may not be more than {max} bytes"),
            });
        }
        if let Some(min) = schema["minLength"].as_u64()
            && len < min
        {
            out.push(invalid(path, v, format!("{path} in body should be at least {min} chars long")));
        }
        if let Some(p) = schema["pattern"].as_str()
            && let Some(Some(re)) = self.patterns.get(p)
            && !re.is_match(s)
        {
            out.push(invalid(path, v, format!("{path} in body should match '{p}'")));
        }
        if schema["format"] == "date-time" && !is_date_time(s) {
            out.push(invalid(path, v, format!("{path} in body must be of type date-time: {s:?}")));
        }
    }
}

fn check_number(schema: &Value, n: &serde_json::Number, v: &Value, path: &str, out: &mut Vec<Cause>) {
    let x = n.as_f64().unwrap_or(0.0);
    if let Some(min) = schema["minimum"].as_f64() {
        let exclusive = schema["exclusiveMinimum"] == true;
        if (exclusive && x <= min) || x < min {
            let rel = if exclusive { "greater than" } else { "greater than or equal to" };
            out.push(invalid(path, v, format!("{path} in body should be {rel} {}", schema["minimum"])));
        }
    }
    if let Some(max) = schema["maximum"].as_f64() {
        let exclusive = schema["exclusiveMaximum"] == true;
        if (exclusive && x >= max) || x > max {
            let rel = if exclusive { "less than" } else { "less than or equal to" };
            out.push(invalid(path, v, format!("{path} in body should be {rel} {}", schema["maximum"])));
        }
    }
}

/// A list's `x-kubernetes-list-type`: `atomic` (also when unset, as for CRDs), `set`, or `map` with
/// its `x-kubernetes-list-map-keys`. Read by the validator (uniqueness) and by server-side apply
/// (how a list merges, [`super::fields`]).
pub enum ListType<'a> {
    Atomic,
    Set,
    Map(Vec<&'a str>),
}

pub fn list_type(schema: &Value) -> ListType<'_> {
    match schema["x-kubernetes-list-type"].as_str() {
        Some("set") => ListType::Set,
        Some("map") => ListType::Map(
            schema["x-kubernetes-list-map-keys"].as_array().into_iter().flatten().filter_map(Value::as_str).collect(),
        ),
        _ => ListType::Atomic,
    }
}

/// The uniqueness a list's `x-kubernetes-list-type` asks for: a `set`'s items, a `map`'s key tuples
/// (`x-kubernetes-list-map-keys`; an item without a key field counts as one unspecified key). Each
/// repeated value is reported once, at its second index, as `Duplicate value: V`, the value Go's `%#v`
/// of a string or of the key map (kubernetes `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/
/// schema/listtype/validation.go`, `validateListSet` and `validateListMap`; apimachinery
/// `field.Duplicate`). An item of a map list that is not an object is refused first, alone.
fn check_list_type(schema: &Value, items: &[Value], path: &str, out: &mut Vec<Cause>) {
    let duplicate = |i: usize, shown: String| Cause {
        reason: CauseReason::FieldValueDuplicate,
        field: format!("{path}[{i}]"),
        message: format!("Duplicate value: {shown}"),
    };
    match list_type(schema) {
        ListType::Set => {
            for i in repeats(items) {
                out.push(duplicate(i, go_sharp(&items[i])));
            }
        }
        ListType::Map(names) => {
            if let Some(i) = items.iter().position(|x| !x.is_object() && !x.is_null()) {
                out.push(invalid(
                    &format!("{path}[{i}]"),
                    &items[i],
                    "must be an object for an array of list-type map".into(),
                ));
                return;
            }
            let keys: Vec<Value> = items
                .iter()
                .map(|x| {
                    let m: Map<String, Value> =
                        names.iter().filter_map(|n| Some((n.to_string(), x.get(*n)?.clone()))).collect();
                    Value::Object(m)
                })
                .collect();
            for i in repeats(&keys) {
                out.push(duplicate(i, go_sharp(&keys[i])));
            }
        }
        ListType::Atomic => {}
    }
}

/// The indices of the first repetition of each value seen more than once.
fn repeats(items: &[Value]) -> Vec<usize> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, x) in items.iter().enumerate() {
        let n = seen.entry(x.to_string()).or_insert(0);
        *n += 1;
        if *n == 2 {
            out.push(i);
        }
    }
    out
}

/// A value as Go's `%#v` prints the decoded JSON: a string quoted, a map as
/// `map[string]interface {}{"k":V, ...}` with its keys sorted.
fn go_sharp(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys.iter().map(|k| format!("{:?}:{}", k, go_sharp(&m[*k]))).collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
        other => other.to_string(),
    }
}

fn compile_rules(s: &Value, out: &mut BTreeMap<String, Result<cel_interpreter::Program, String>>) {
    for rule in s["x-kubernetes-validations"].as_array().into_iter().flatten() {
        if let Some(text) = rule["rule"].as_str()
            && !out.contains_key(text)
        {
            out.insert(text.to_string(), cel_interpreter::Program::compile(text).map_err(|e| e.to_string()));
        }
    }
    for sub in s["properties"].as_object().into_iter().flat_map(|m| m.values()) {
        compile_rules(sub, out);
    }
    for key in ["items", "additionalProperties"] {
        if s[key].is_object() {
            compile_rules(&s[key], out);
        }
    }
    for sub in s["allOf"].as_array().into_iter().flatten() {
        compile_rules(sub, out);
    }
}

/// A JSON value as the API server hands it to CEL: integers as `int`, objects as maps.
fn to_cel(v: &Value) -> cel_interpreter::Value {
    use cel_interpreter::Value as C;
    match v {
        Value::Null => C::Null,
        Value::Bool(b) => C::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => C::Int(i),
            None => C::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => C::from(s.as_str()),
        Value::Array(a) => C::List(std::sync::Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: std::collections::HashMap<String, C> = m.iter().map(|(k, x)| (k.clone(), to_cel(x))).collect();
            C::Map(map.into())
        }
    }
}

fn compile_patterns(s: &Value, out: &mut BTreeMap<String, Option<Regex>>) {
    if let Some(p) = s["pattern"].as_str()
        && !out.contains_key(p)
    {
        out.insert(p.to_string(), Regex::new(p).ok());
    }
    for sub in s["properties"].as_object().into_iter().flat_map(|m| m.values()) {
        compile_patterns(sub, out);
    }
    for key in ["items", "additionalProperties", "not"] {
        if s[key].is_object() {
            compile_patterns(&s[key], out);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for sub in s[key].as_array().into_iter().flatten() {
            compile_patterns(sub, out);
        }
    }
}

fn prune(schema: &Value, v: &mut Value, path: &str, removed: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
            let embedded = schema["x-kubernetes-embedded-resource"] == true;
            let props = schema["properties"].as_object();
            let additional = &schema["additionalProperties"];
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = join(path, &k);
                let sub =
                    props.and_then(|p| p.get(&k)).or(if additional.is_object() { Some(additional) } else { None });
                match sub {
                    Some(s) => {
                        let child = map.get_mut(&k).expect("key");
                        if child.is_null() && s["nullable"] != true {
                            map.remove(&k);
                        } else {
                            prune(s, child, &child_path, removed);
                        }
                    }
                    None if preserve || *additional == Value::Bool(true) => {}
                    None => {
                        map.remove(&k);
                        removed.push(child_path);
                    }
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for (i, x) in items.iter_mut().enumerate() {
                prune(&schema["items"], x, &format!("{path}[{i}]"), removed);
            }
        }
        _ => {}
    }
}

fn defaults(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = schema["properties"].as_object() {
                for (k, s) in props {
                    if !map.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                }
                for (k, x) in map.iter_mut() {
                    if let Some(s) = props.get(k) {
                        defaults(s, x);
                    }
                }
            } else if schema["additionalProperties"].is_object() {
                for x in map.values_mut() {
                    defaults(&schema["additionalProperties"], x);
                }
            }
        }
        Value::Array(items) => {
            for x in items {
                defaults(&schema["items"], x);
            }
        }
        _ => {}
    }
}

fn is_integer(v: &Value) -> bool {
    v.as_i64().is_some() || v.as_u64().is_some()
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn json_len(map: &Map<String, Value>) -> Value {
    Value::from(map.len())
}

/// A value as the API server quotes it in messages: strings in double quotes, the rest as JSON.
fn go_value(v: &Value) -> String {
    v.to_string()
}

fn type_cause(path: &str, ty: &str, v: &Value) -> Cause {
    let got = json_type(v);
    Cause {
        reason: CauseReason::FieldValueTypeInvalid,
        field: path.into(),
        message: format!("Invalid value: \"{got}\": {path} in body must be of type {ty}: \"{got}\""),
    }
}

fn required(path: &str) -> Cause {
    Cause { reason: CauseReason::FieldValueRequired, field: path.into(), message: "Required value".into() }
}

fn invalid(path: &str, v: &Value, detail: String) -> Cause {
    Cause {
        reason: CauseReason::FieldValueInvalid,
        field: path.into(),
        message: format!("Invalid value: {}: {detail}", go_value(v)),
    }
}

/// An object name must be a DNS-1123 subdomain (what the API server requires of custom resources,
/// Secrets and ConfigMaps); `None` when it is one.
pub fn check_name(name: &Value, field: &str) -> Option<Cause> {
    let Some(s) = name.as_str().filter(|s| !s.is_empty()) else {
        return Some(Cause {
            reason: CauseReason::FieldValueRequired,
            field: field.into(),
            message: "Required value: name or generateName is required".into(),
        });
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if s.len() <= 253 && s.split('.').all(label_ok) {
        return None;
    }
    Some(invalid(
        field,
        name,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
         start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
         '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            .into(),
    ))
}

/// A namespace name must be a DNS-1123 label; `None` when it is one.
pub fn check_label_name(name: &Value, field: &str) -> Option<Cause> {
    let s = name.as_str().unwrap_or_default();
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        return None;
    }
    Some(invalid(
        field,
        name,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and \
         end with an alphanumeric character (e.g. 'my-name', or '123-abc', regex used for validation is \
         '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::new(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "string", "pattern": "^[A-Z][a-z]+$", "maxLength": 8},
                        "count": {"type": "integer", "minimum": 1, "maximum": 3},
                        "mode": {"type": "string", "enum": ["On", "Off"], "default": "Off"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "look": {"type": "string", "pattern": "^(?!x)a$"},
                        "tags": {"type": "array", "maxItems": 1, "items": {"type": "string", "minLength": 1}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "pattern": {"type": "object", "properties": {"default": {"type": "string", "pattern": "^d$"}}}
                    }
                }
            }
        }))
    }

    fn fields(causes: &[Cause]) -> Vec<(String, &'static str)> {
        causes.iter().map(|c| (c.field.clone(), c.reason.as_str())).collect()
    }

    #[test]
    fn date_times_are_read_as_the_api_server_reads_them() {
        for ok in
            ["2026-11-24T13:35:14Z", "2026-11-24T13:35:14.123Z", "2026-11-24T13:35:14+01:00", "2026-11-24T13:35:14"]
        {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in ["yesterday", "2026-11-24", "24/11/2026 13:35", ""] {
            assert!(!is_date_time(bad), "{bad}");
        }
        let s = Schema::new(serde_json::json!({"type": "object", "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"}}}));
        let on_it = |v: serde_json::Value| -> Vec<Cause> {
            s.validate(&serde_json::json!({"metadata": {"name": "x"}, "lastTransitionTime": v}))
        };
        let causes = on_it(serde_json::json!("yesterday"));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].message.contains("lastTransitionTime in body must be of type date-time: \"yesterday\""),
            "{causes:?}"
        );
        assert_eq!(on_it(serde_json::json!("2026-11-24T13:35:14Z")), Vec::<Cause>::new());
    }

    #[test]
    fn a_set_or_map_list_with_a_repeated_item_is_refused_at_the_repeat() {
        let s = Schema::new(serde_json::json!({"type": "object", "properties": {
            "zones": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "subnets": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object"}},
            "pairs": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
                "items": {"type": "object"}},
            "plain": {"type": "array", "items": {"type": "string"}}}}));
        let causes = s.validate(&serde_json::json!({"metadata": {"name": "x"},
            "zones": ["1", "2", "1", "1"],
            "subnets": [{"name": "n"}, {"name": "m"}, {"name": "n", "cidr": "x"}],
            "pairs": [{"a": "x", "b": 1}, {"b": 1, "a": "x"}],
            "plain": ["1", "1"]}));
        let mut got: Vec<(String, &str, String)> =
            causes.iter().map(|c| (c.field.clone(), c.reason.as_str(), c.message.clone())).collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (
                    "pairs[1]".into(),
                    "FieldValueDuplicate",
                    "Duplicate value: map[string]interface {}{\"a\":\"x\", \"b\":1}".into()
                ),
                (
                    "subnets[2]".into(),
                    "FieldValueDuplicate",
                    "Duplicate value: map[string]interface {}{\"name\":\"n\"}".into()
                ),
                ("zones[2]".into(), "FieldValueDuplicate", "Duplicate value: \"1\"".into()),
            ]
        );
        let not_objects = s.validate(&serde_json::json!({"metadata": {"name": "x"}, "subnets": [{"name": "n"}, "n"]}));
        // The type check and the list-type check each report it, as the API server runs both.
        assert_eq!(not_objects.len(), 2, "{not_objects:?}");
        assert!(
            not_objects
                .iter()
                .any(|c| c.message == "Invalid value: \"n\": must be an object for an array of list-type map")
        );
    }

    #[test]
    fn cel_rules_of_the_crds_are_evaluated_with_self_bound_to_the_value() {
        // The rule CAPI 1.13's MachineHealthCheck puts on unhealthyMachineConditions[].type.
        let rule = "!(self in ['Ready','Available','HealthCheckSucceeded','OwnerRemediated','ExternallyRemediated'])";
        let s = Schema::new(serde_json::json!({"type": "object", "properties": {
            "type": {"type": "string", "x-kubernetes-validations": [{"rule": rule,
                "message": "type must not be one of: Ready, Available, HealthCheckSucceeded, OwnerRemediated, ExternallyRemediated"}]},
            "spec": {"type": "object", "x-kubernetes-validations": [{"rule": "self.min <= self.max"}],
                "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}}},
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3", "reason": "FieldValueForbidden",
                "message": "too long"}]},
            "broken": {"type": "string", "x-kubernetes-validations": [{"rule": "self.nosuch()"}]},
            "moved": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}));
        let on = |v: serde_json::Value| -> Vec<Cause> {
            let mut o = v;
            o["metadata"] = serde_json::json!({"name": "x"});
            s.validate(&o)
        };
        assert_eq!(
            on(serde_json::json!({"type": "MyCheck", "spec": {"min": 1, "max": 2}, "name": "ab", "moved": "x"})),
            vec![]
        );
        let c = on(serde_json::json!({"type": "Ready"}));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].reason, CauseReason::FieldValueInvalid);
        assert_eq!(
            c[0].to_string(),
            "type: Invalid value: \"Ready\": type must not be one of: Ready, Available, HealthCheckSucceeded, OwnerRemediated, ExternallyRemediated"
        );
        let c = on(serde_json::json!({"spec": {"min": 3, "max": 2}}));
        assert_eq!(
            c.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec!["spec: Invalid value: failed rule: self.min <= self.max"]
        );
        let c = on(serde_json::json!({"name": "abc"}));
        assert_eq!(c.iter().map(ToString::to_string).collect::<Vec<_>>(), vec!["name: Forbidden: too long"]);
        let c = on(serde_json::json!({"broken": "x"}));
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].message.starts_with("Invalid value: \"string\": ")
                && c[0].message.ends_with("evaluating rule: self.nosuch()"),
            "{c:?}"
        );
    }

    #[test]
    fn a_deprecated_version_is_warned_of_naming_the_newest_served_one() {
        let spec = serde_json::json!({"group": "cluster.x-k8s.io", "names": {"kind": "MachineSet"}, "versions": [
            {"name": "v1beta1", "served": true, "deprecated": true},
            {"name": "v1beta2", "served": true},
            {"name": "v1alpha4", "served": false}]});
        let v = |i: usize| spec["versions"][i].clone();
        assert_eq!(
            deprecation_warning(&spec, &v(0)).as_deref(),
            Some("cluster.x-k8s.io/v1beta1 MachineSet is deprecated; use cluster.x-k8s.io/v1beta2 MachineSet")
        );
        assert_eq!(deprecation_warning(&spec, &v(1)), None);
        let own = serde_json::json!({"name": "v1beta1", "deprecated": true, "deprecationWarning": "gone soon"});
        assert_eq!(deprecation_warning(&spec, &own).as_deref(), Some("gone soon"));
        assert!(kube_version_order("v1") > kube_version_order("v1beta2"));
        assert!(kube_version_order("v1beta2") > kube_version_order("v1beta1"));
        assert!(kube_version_order("v1beta1") > kube_version_order("v1alpha4"));
    }

    #[test]
    fn each_rule_names_the_field_and_reason() {
        let s = schema();
        let bad = json!({"metadata": {"name": "Bad_Name"}, "spec": {
            "size": "small-and-long", "count": 4, "mode": "Maybe", "port": true, "tags": ["", "b"],
            "labels": {"a": 1}, "pattern": {"default": "e"}
        }});
        let got = fields(&s.validate(&bad));
        for want in [
            ("metadata.name", "FieldValueInvalid"),
            ("spec.size", "FieldValueTooLong"),
            ("spec.size", "FieldValueInvalid"),
            ("spec.count", "FieldValueInvalid"),
            ("spec.mode", "FieldValueNotSupported"),
            ("spec.port", "FieldValueTypeInvalid"),
            ("spec.tags", "FieldValueTooMany"),
            ("spec.tags[0]", "FieldValueInvalid"),
            ("spec.labels.a", "FieldValueTypeInvalid"),
            ("spec.pattern.default", "FieldValueInvalid"),
        ] {
            assert!(got.contains(&(want.0.to_string(), want.1)), "{want:?} not in {got:?}");
        }
        let missing = s.validate(&json!({"metadata": {"name": "ok"}, "spec": {}}));
        assert_eq!(missing[0].to_string(), "spec.size: Required value");
        let wrong = s.validate(&json!({"metadata": {"name": "ok"}, "spec": {"size": "Big", "count": "2"}}));
        assert_eq!(
            wrong[0].to_string(),
            "spec.count: Invalid value: \"string\": spec.count in body must be of type integer: \"string\""
        );
    }

    #[test]
    fn valid_values_pass_and_an_uncompilable_pattern_is_skipped_and_listed() {
        let s = schema();
        let ok = json!({"metadata": {"name": "a.b-c"}, "spec": {"size": "Big", "count": 2, "port": "http", "look": "b",
            "free": {"any": {"thing": 1}}, "labels": {"x": "y"}}});
        assert_eq!(s.validate(&ok), vec![]);
        assert_eq!(s.skipped_patterns(), vec!["^(?!x)a$"]);
    }

    #[test]
    fn pruning_removes_unknown_fields_but_keeps_preserved_ones_and_defaults_fill_in() {
        let s = schema();
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "odd": 1}, "extra": 1,
            "spec": {"size": "Big", "nope": true, "free": {"kept": 1}, "labels": {"k": "v"}}});
        assert_eq!(s.unknown_fields(&o), vec!["extra".to_string(), "spec.nope".to_string()]);
        s.prune(&mut o);
        s.apply_defaults(&mut o);
        assert_eq!(
            o,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "odd": 1},
                "spec": {"size": "Big", "free": {"kept": 1}, "labels": {"k": "v"}, "mode": "Off"}})
        );
    }
}
