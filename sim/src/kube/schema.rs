//! CRD structural schemas as the Kubernetes API server applies them: loading the CRDs, pruning unknown
//! fields, defaulting, and validation (types, required, enum, pattern, lengths, bounds, item counts), each
//! problem a [`Cause`] in the API server's shape. This is the project's one CRD validator: the emulator
//! uses it on every write and `providers/kube`'s tests check rendered objects with it.
//!
//! Not checked: `x-kubernetes-validations` (CEL rules), `format`, list-type uniqueness
//! (`x-kubernetes-list-type: set|map`), `not`/`oneOf`. A `pattern` the `regex` crate cannot compile
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

/// An openAPIV3Schema with its patterns compiled once.
#[derive(Debug)]
pub struct Schema {
    root: Value,
    patterns: BTreeMap<String, Option<Regex>>,
}

impl Schema {
    pub fn new(root: Value) -> Schema {
        let mut patterns = BTreeMap::new();
        compile_patterns(&root, &mut patterns);
        Schema { root, patterns }
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
