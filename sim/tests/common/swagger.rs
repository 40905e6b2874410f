//! A small Swagger 2.0 validator for the conformance suite: loads the reference specs, resolves
//! `$ref` across files (relative paths, JSON pointers), merges `allOf`, and checks required
//! properties, types, strict enums, unknown properties and nulls. `readOnly` properties are
//! ignored in requests; `x-ms-client-flatten` does not change bodies, so it is ignored.

#![allow(dead_code)]

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use xcsp_sim::arm::spec::normalize;

/// Whether a body is sent or received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Request,
    Response,
}

/// The spec files (relative to `azure-rest-api-specs/specification/`) the emulator answers for.
pub const SPEC_FILES: &[&str] = &[
    "network/resource-manager/Microsoft.Network/stable/2024-03-01/virtualNetwork.json",
    "network/resource-manager/Microsoft.Network/stable/2024-03-01/networkSecurityGroup.json",
    "network/resource-manager/Microsoft.Network/stable/2024-03-01/publicIpAddress.json",
    "network/resource-manager/Microsoft.Network/stable/2024-03-01/virtualNetworkGateway.json",
    "network/resource-manager/Microsoft.Network/stable/2024-03-01/routeTable.json",
    "msi/resource-manager/Microsoft.ManagedIdentity/stable/2023-01-31/ManagedIdentity.json",
    "authorization/resource-manager/Microsoft.Authorization/stable/2022-04-01/authorization-RoleAssignmentsCalls.json",
    "resources/resource-manager/Microsoft.Resources/stable/2024-03-01/resources.json",
];

#[derive(Debug, Clone)]
enum Seg {
    Lit(String),
    Param(String),
    /// A parameter spanning several segments (`{scope}`, `{roleAssignmentId}`).
    Multi(String),
}

/// One operation of a spec.
#[derive(Debug, Clone)]
pub struct Op {
    pub method: String,
    pub template: String,
    segs: Vec<Seg>,
    pub file: PathBuf,
    pub op: Value,
    /// Path-level parameters.
    pub path_params: Value,
}

impl Op {
    pub fn id(&self) -> &str {
        self.op["operationId"].as_str().unwrap_or_default()
    }
}

/// The loaded specs.
pub struct Specs {
    pub root: PathBuf,
    files: Mutex<HashMap<PathBuf, std::sync::Arc<Value>>>,
    pub ops: Vec<Op>,
}

/// The reference directory; the suite fails (never skips) when it is missing.
pub fn reference_dir() -> PathBuf {
    let dir = std::env::var_os("XCSP_REFERENCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/reference")));
    let specs = dir.join("azure-rest-api-specs/specification");
    assert!(
        specs.is_dir(),
        "the Azure REST API specs are missing: expected {} (set XCSP_REFERENCE_DIR to the folder holding azure-rest-api-specs/)",
        specs.display()
    );
    dir
}

impl Specs {
    pub fn load() -> Specs {
        let root = reference_dir().join("azure-rest-api-specs/specification");
        let specs = Specs { root: root.clone(), files: Mutex::new(HashMap::new()), ops: Vec::new() };
        let mut ops = Vec::new();
        for f in SPEC_FILES {
            let file = normalize(&root.join(f));
            let doc = specs.file(&file);
            for (template, item) in doc["paths"].as_object().expect("paths") {
                let segs = template
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(|s| {
                        if s.starts_with('{') && s.ends_with('}') {
                            let name = s[1..s.len() - 1].to_string();
                            if name == "scope" || name == "roleAssignmentId" || name == "roleId" {
                                Seg::Multi(name)
                            } else {
                                Seg::Param(name)
                            }
                        } else {
                            Seg::Lit(s.to_ascii_lowercase())
                        }
                    })
                    .collect::<Vec<_>>();
                for (method, op) in item.as_object().expect("path item") {
                    if method == "parameters" {
                        continue;
                    }
                    ops.push(Op {
                        method: method.to_ascii_uppercase(),
                        template: template.clone(),
                        segs: segs.clone(),
                        file: file.clone(),
                        op: op.clone(),
                        path_params: item.get("parameters").cloned().unwrap_or(Value::Null),
                    });
                }
            }
        }
        Specs { ops, ..specs }
    }

    /// A parsed spec or example file (cached).
    pub fn file(&self, path: &Path) -> std::sync::Arc<Value> {
        let path = normalize(path);
        let mut files = self.files.lock().unwrap();
        files
            .entry(path.clone())
            .or_insert_with(|| {
                let text =
                    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                std::sync::Arc::new(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            })
            .clone()
    }

    /// Resolves a `$ref` seen in `file`.
    pub fn resolve(&self, file: &Path, reference: &str) -> (PathBuf, Value) {
        let (f, pointer) = reference.split_once('#').unwrap_or((reference, ""));
        let target = if f.is_empty() { file.to_path_buf() } else { normalize(&file.parent().expect("dir").join(f)) };
        let doc = self.file(&target);
        let v = if pointer.is_empty() { Some((*doc).clone()) } else { doc.pointer(pointer).cloned() }
            .unwrap_or_else(|| panic!("unresolvable $ref {reference} in {}", file.display()));
        (target, v)
    }

    /// The operation matching a request (most literal segments wins).
    pub fn find(&self, method: &str, path: &str) -> Option<&Op> {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        // `/{roleAssignmentId}` has no literal segment: its documented format names the type.
        let is_role_assignment =
            path.to_ascii_lowercase().contains("/providers/microsoft.authorization/roleassignments/");
        self.ops
            .iter()
            .filter(|o| o.segs.iter().any(|s| matches!(s, Seg::Lit(_))) || is_role_assignment)
            .filter(|o| o.method.eq_ignore_ascii_case(method) && matches(&o.segs, &segs))
            .max_by_key(|o| o.segs.iter().filter(|s| matches!(s, Seg::Lit(_))).count())
    }

    fn parameter(&self, file: &Path, p: &Value) -> (PathBuf, Value) {
        match p["$ref"].as_str() {
            Some(r) => self.resolve(file, r),
            None => (file.to_path_buf(), p.clone()),
        }
    }

    /// The body parameter of an operation: (name, file, schema).
    pub fn body_param(&self, op: &Op) -> Option<(String, PathBuf, Value)> {
        let params =
            op.op["parameters"].as_array().into_iter().flatten().chain(op.path_params.as_array().into_iter().flatten());
        for p in params {
            let (f, p) = self.parameter(&op.file, p);
            if p["in"] == "body" {
                return Some((p["name"].as_str().unwrap_or_default().to_string(), f, p["schema"].clone()));
            }
        }
        None
    }

    /// Validates a request body of `op`.
    pub fn check_request(&self, op: &Op, body: &Value) -> Vec<String> {
        match self.body_param(op) {
            Some((_, f, schema)) => self.validate(&f, &schema, body, Mode::Request),
            None => Vec::new(),
        }
    }

    /// Validates a response (status declared, body against the schema of that status or `default`).
    pub fn check_response(&self, op: &Op, status: u16, body: Option<&Value>) -> Vec<String> {
        let responses = &op.op["responses"];
        let declared = responses.get(status.to_string());
        let entry = match declared {
            Some(e) => e.clone(),
            None if status >= 400 => match responses.get("default") {
                Some(d) => d.clone(),
                None => return vec![format!("{}: status {status} is not declared", op.id())],
            },
            None => {
                return vec![format!(
                    "{}: status {status} is not declared (declared: {:?})",
                    op.id(),
                    responses.as_object().map(|o| o.keys().collect::<Vec<_>>())
                )];
            }
        };
        let Some(schema) = entry.get("schema") else {
            return Vec::new();
        };
        match body {
            Some(b) => self
                .validate(&op.file, schema, b, Mode::Response)
                .into_iter()
                .map(|e| format!("{} {status}: {e}", op.id()))
                .collect(),
            None => vec![format!("{} {status}: the spec declares a body but none was sent", op.id())],
        }
    }

    /// Validates `value` against `schema` (found in `file`).
    pub fn validate(&self, file: &Path, schema: &Value, value: &Value, mode: Mode) -> Vec<String> {
        let mut errs = Vec::new();
        self.check(file, schema, value, "$", mode, &mut errs);
        errs
    }

    fn deref(&self, file: &Path, schema: &Value) -> (PathBuf, Value) {
        let mut f = file.to_path_buf();
        let mut s = schema.clone();
        while let Some(r) = s["$ref"].as_str().map(String::from) {
            let (f2, s2) = self.resolve(&f, &r);
            f = f2;
            s = s2;
        }
        (f, s)
    }

    fn is_read_only(&self, file: &Path, schema: &Value) -> bool {
        schema["readOnly"] == true || (schema.get("$ref").is_some() && self.deref(file, schema).1["readOnly"] == true)
    }

    /// Properties, required names and additionalProperties across `$ref` and `allOf`.
    fn collect(
        &self,
        file: &Path,
        schema: &Value,
        props: &mut BTreeMap<String, (PathBuf, Value)>,
        required: &mut Vec<String>,
        additional: &mut Option<(PathBuf, Value)>,
        depth: usize,
    ) {
        assert!(depth < 64, "allOf/$ref chain too deep");
        let (file, schema) = self.deref(file, schema);
        if let Some(p) = schema["properties"].as_object() {
            for (k, v) in p {
                props.entry(k.clone()).or_insert((file.clone(), v.clone()));
            }
        }
        for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            required.push(r.to_string());
        }
        if let Some(ap) = schema.get("additionalProperties") {
            *additional = Some((file.clone(), ap.clone()));
        }
        for sub in schema["allOf"].as_array().into_iter().flatten() {
            self.collect(&file, sub, props, required, additional, depth + 1);
        }
    }

    fn check(&self, file: &Path, schema: &Value, v: &Value, at: &str, mode: Mode, errs: &mut Vec<String>) {
        let (file, schema) = self.deref(file, schema);
        if v.is_null() {
            if mode == Mode::Response && schema["x-nullable"] != true {
                errs.push(format!("{at}: null is not allowed"));
            }
            return;
        }
        let ty = schema["type"].as_str().map(String::from).or_else(|| {
            (schema.get("properties").is_some()
                || schema.get("allOf").is_some()
                || schema.get("additionalProperties").is_some())
            .then(|| "object".to_string())
        });
        match ty.as_deref() {
            Some("object") => {
                let Some(obj) = v.as_object() else {
                    errs.push(format!("{at}: expected an object, got {v}"));
                    return;
                };
                let mut props = BTreeMap::new();
                let mut required = Vec::new();
                let mut additional = None;
                self.collect(&file, &schema, &mut props, &mut required, &mut additional, 0);
                for r in &required {
                    if obj.get(r).is_none_or(Value::is_null) {
                        let ro = props.get(r).is_some_and(|(f, s)| self.is_read_only(f, s));
                        if !(mode == Mode::Request && ro) {
                            errs.push(format!("{at}: required property '{r}' is missing"));
                        }
                    }
                }
                for (k, val) in obj {
                    let here = format!("{at}.{k}");
                    if let Some((pf, ps)) = props.get(k) {
                        if mode == Mode::Request && self.is_read_only(pf, ps) {
                            continue;
                        }
                        self.check(pf, ps, val, &here, mode, errs);
                    } else {
                        match &additional {
                            Some((af, ap)) if ap.is_object() => self.check(af, ap, val, &here, mode, errs),
                            Some((_, Value::Bool(true))) => {}
                            _ if props.is_empty() && additional.is_none() => {}
                            _ => errs.push(format!("{here}: property not defined by the spec")),
                        }
                    }
                }
            }
            Some("array") => {
                let Some(items) = v.as_array() else {
                    errs.push(format!("{at}: expected an array, got {v}"));
                    return;
                };
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check(&file, item_schema, item, &format!("{at}[{i}]"), mode, errs);
                    }
                }
            }
            Some("string") => match v.as_str() {
                None => errs.push(format!("{at}: expected a string, got {v}")),
                Some(s) => {
                    let extensible = schema["x-ms-enum"]["modelAsString"] == true;
                    if let Some(allowed) = schema["enum"].as_array()
                        && !extensible
                        && !allowed.iter().any(|a| a.as_str().is_some_and(|a| a.eq_ignore_ascii_case(s)))
                    {
                        errs.push(format!("{at}: '{s}' is not one of {allowed:?}"));
                    }
                }
            },
            Some("integer") if !(v.is_i64() || v.is_u64()) => {
                errs.push(format!("{at}: expected an integer, got {v}"));
            }
            Some("number") if !v.is_number() => {
                errs.push(format!("{at}: expected a number, got {v}"));
            }
            Some("boolean") if !v.is_boolean() => {
                errs.push(format!("{at}: expected a boolean, got {v}"));
            }
            _ => {}
        }
    }
}

fn matches(template: &[Seg], path: &[&str]) -> bool {
    match template.split_first() {
        None => path.is_empty(),
        Some((Seg::Lit(l), rest)) => {
            path.first().is_some_and(|p| p.eq_ignore_ascii_case(l)) && matches(rest, &path[1..])
        }
        Some((Seg::Param(_), rest)) => !path.is_empty() && matches(rest, &path[1..]),
        Some((Seg::Multi(_), rest)) => (1..=path.len()).any(|n| matches(rest, &path[n..])),
    }
}

/// Substitutes `{param}` in a template from an example's parameters.
pub fn fill_template(template: &str, params: &Value) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let j = rest[i..].find('}').expect("closing brace") + i;
        let name = &rest[i + 1..j];
        let value = params[name].as_str().map(String::from).unwrap_or_else(|| params[name].to_string());
        out.push_str(value.trim_start_matches('/'));
        rest = &rest[j + 1..];
    }
    out.push_str(rest);
    out
}
