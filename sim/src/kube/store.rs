//! The Kubernetes object store: objects with their metadata (uid, resourceVersion from one global
//! counter, generation, creationTimestamp, managedFields) and the verbs that change them: create,
//! replace, merge patch, server-side apply, delete. Admission (pruning, defaulting, CRD validation)
//! happens here, before anything is stored.

use super::fields::{self, Manager, Operation};
use super::kinds::Kind;
use super::meta;
use super::schema::{self, Cause, Schema};
use super::selector::Selector;
use super::status::{self, KubeError};
use super::webhooks;
use crate::world::World;
use axum::http::StatusCode;
use base64::Engine;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// group, plural, namespace ("" when cluster-scoped), name.
pub type Key = (&'static str, &'static str, String, String);

/// Namespaces that exist from the start and after a reset.
pub const DEFAULT_NAMESPACES: &[&str] = &["default", "openshift-cluster-api"];

/// A stored object: its body (without `managedFields`) and its managers.
#[derive(Debug, Clone)]
pub struct Obj {
    pub kind: &'static Kind,
    pub value: Value,
    pub managers: Vec<Manager>,
}

impl Obj {
    /// The object as the API answers it.
    pub fn render(&self) -> Value {
        let mut v = self.value.clone();
        if !self.managers.is_empty() {
            v["metadata"]["managedFields"] = fields::render(&self.managers);
        }
        v
    }
}

/// A Machine the MachineSet controller will create when `due`.
#[derive(Debug, Clone)]
pub struct PendingMachine {
    pub machine_set: Key,
    pub uid: String,
    pub due: Instant,
}

/// The schemas of the custom resources, by `plural.group`, and what went wrong loading them.
#[derive(Debug, Default)]
pub struct Registry {
    pub schemas: HashMap<String, Schema>,
    /// `plural.group` -> the warning a request at the served v1beta1 gets, when the CRD
    /// deprecates that version (CAPI 1.13's do).
    pub deprecations: HashMap<String, String>,
    pub files: Vec<String>,
    pub error: Option<String>,
}

impl Registry {
    /// Loads the v1beta1 schemas of the served custom resources from a CRD directory.
    pub fn load(dir: &std::path::Path) -> Registry {
        match schema::load_crds(dir, "v1beta1") {
            Ok(crds) => {
                let mut r = Registry::default();
                for c in crds {
                    if let Some(k) = Kind::find(&c.group, &c.version, &c.plural) {
                        r.files.push(c.file.display().to_string());
                        if let Some(w) = c.deprecation {
                            r.deprecations.insert(k.resource(), w);
                        }
                        r.schemas.insert(k.resource(), c.schema);
                    }
                }
                r
            }
            Err(e) => Registry { error: Some(e.to_string()), ..Default::default() },
        }
    }
}

/// What a write needs from its request and the world.
pub struct WriteCtx<'a> {
    pub world: &'a World,
    pub now: Instant,
    pub registry: &'a Registry,
    /// Refuse unknown fields (`fieldValidation=Strict`) instead of pruning them.
    pub strict: bool,
    /// `dryRun=All`: everything but storing.
    pub dry_run: bool,
    /// The field manager (`fieldManager=`, else the User-Agent's product).
    pub manager: String,
}

impl WriteCtx<'_> {
    /// The `openAPIV3Schema` of a custom resource, `Null` for the kinds served without one.
    pub fn schema(&self, kind: &Kind) -> &Value {
        self.registry.schemas.get(&kind.resource()).map(Schema::root).unwrap_or(&Value::Null)
    }
}

/// The objects and the state of the MachineSet controller.
#[derive(Debug)]
pub struct Store {
    pub objects: BTreeMap<Key, Obj>,
    /// The last resourceVersion handed out.
    pub rv: u64,
    pub pending: Vec<PendingMachine>,
    /// Machines being deleted, removed when due.
    pub deleting: BTreeMap<Key, Instant>,
    /// The PEM of the CA the API's (and the machine-config server's) certificates chain to.
    pub ca_pem: String,
    /// `rv` when the object-driven controllers (tokens, machine-config) last ran.
    pub controllers_rv: u64,
    /// A booting VM (by id): when its boot is done ([`super::boot`]).
    pub boots: BTreeMap<String, Instant>,
    /// What a VM's kubelet registers with, for a rendered config (VM id, config): run once.
    pub kubelets: BTreeMap<(String, String), Result<super::boot::Registration, super::joins::Held>>,
    /// VM id -> the Node its kubelet registered.
    pub registered: BTreeMap<String, String>,
    /// Node name -> when its kubelet last posted status (the sim's last look with the path up).
    pub heartbeats: BTreeMap<String, Instant>,
    /// Node name -> the name of its kubelet's bootstrap CertificateSigningRequest.
    pub csrs: BTreeMap<String, String>,
    /// A real signer issues approved kubelet certificates (the upstream cluster's
    /// kube-controller-manager), so a kubelet waits for its certificate before it registers.
    pub signer_runs: bool,
}

/// An answer: HTTP status and body.
pub type Answer = Result<(StatusCode, Value), KubeError>;

impl Store {
    /// A store with the default namespaces.
    pub fn new(world: &World, ca_pem: &str) -> Store {
        let mut s = Store {
            objects: BTreeMap::new(),
            rv: 0,
            pending: Vec::new(),
            deleting: BTreeMap::new(),
            ca_pem: ca_pem.to_string(),
            controllers_rv: 0,
            boots: BTreeMap::new(),
            kubelets: BTreeMap::new(),
            registered: BTreeMap::new(),
            heartbeats: BTreeMap::new(),
            csrs: BTreeMap::new(),
            signer_runs: false,
        };
        for name in DEFAULT_NAMESPACES {
            s.add_namespace(name, world);
        }
        if let Some(o) = world.config().openshift {
            super::openshift::seed(&mut s, &o, world);
            super::mco::seed(&mut s, &o, world);
        }
        s
    }

    /// Makes the Namespace `name`, as the cluster holds it from install.
    pub fn add_namespace(&mut self, name: &str, world: &World) {
        let mut v = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        finish_namespace(&mut v);
        self.insert_new(Kind::find("", "v1", "namespaces").expect("namespaces served"), v, Vec::new(), world);
    }

    /// Stores a new object after stamping its metadata; answers its rendering.
    pub(super) fn insert_new(
        &mut self,
        kind: &'static Kind,
        mut v: Value,
        managers: Vec<Manager>,
        world: &World,
    ) -> Value {
        self.rv += 1;
        let m = &mut v["metadata"];
        m["uid"] = json!(uuid::Uuid::new_v4().to_string());
        m["resourceVersion"] = json!(self.rv.to_string());
        m["creationTimestamp"] = json!(timestamp(world));
        if kind.custom {
            m["generation"] = json!(1);
        }
        let obj = Obj { kind, value: v, managers };
        let out = obj.render();
        self.objects.insert(key_of(kind, &obj.value), obj);
        out
    }

    /// The stored body of an object of the served kind `group`/`plural`, for the sim's own
    /// controllers and checks (no API answer, no managed fields).
    pub fn value(&self, group: &str, plural: &str, ns: &str, name: &str) -> Option<&Value> {
        let kind = Kind::served(group, plural)?;
        self.objects.get(&key(kind, ns, name)).map(|o| &o.value)
    }

    pub fn get(&self, kind: &'static Kind, ns: &str, name: &str) -> Answer {
        let key = key(kind, ns, name);
        match self.objects.get(&key) {
            Some(o) => Ok((StatusCode::OK, o.render())),
            None => Err(KubeError::not_found(&kind.resource(), name)),
        }
    }

    /// A `<Kind>List` of the objects in `ns` (every namespace when `None`) matching the selectors.
    pub fn list(
        &self,
        kind: &'static Kind,
        ns: Option<&str>,
        labels: &Selector,
        field: &[(String, bool, String)],
    ) -> Value {
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|((g, p, n, _), _)| *g == kind.group && *p == kind.plural && ns.is_none_or(|ns| ns == n))
            .filter(|(_, o)| labels.matches(&o.value["metadata"]["labels"]))
            .filter(|(_, o)| {
                field.iter().all(|(f, eq, want)| {
                    let got = fields::get(&o.value, &f.split('.').map(str::to_string).collect::<Vec<_>>())
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    (got == want) == *eq
                })
            })
            .map(|(_, o)| o.render())
            .collect();
        json!({
            "apiVersion": kind.api_version(), "kind": format!("{}List", kind.kind),
            "metadata": {"resourceVersion": self.rv.to_string()}, "items": items,
        })
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects.contains_key(&("", "namespaces", String::new(), ns.to_string()))
    }

    /// Checks the object's identity against the URL and fills in its namespace.
    fn identify(
        &self,
        kind: &'static Kind,
        ns: &str,
        url_name: Option<&str>,
        v: &mut Value,
    ) -> Result<String, KubeError> {
        if !v.is_object() {
            return Err(KubeError::bad_request("the body must be an object"));
        }
        let av = v["apiVersion"].as_str().unwrap_or_default().to_string();
        if av != kind.api_version() || v["kind"] != kind.kind {
            return Err(KubeError::bad_request(format!(
                "the object's apiVersion and kind ({av}, {}) do not match the URL's ({}, {})",
                v["kind"].as_str().unwrap_or_default(),
                kind.api_version(),
                kind.kind
            )));
        }
        if !v["metadata"].is_object() {
            v["metadata"] = json!({});
        }
        let name = match (v["metadata"]["name"].as_str(), url_name) {
            (Some(b), Some(u)) if b != u => {
                return Err(KubeError::bad_request(format!(
                    "the name of the object ({b}) does not match the name on the URL ({u})"
                )));
            }
            (Some(b), _) => b.to_string(),
            (None, Some(u)) => u.to_string(),
            (None, None) => match v["metadata"]["generateName"].as_str() {
                Some(prefix) => format!("{prefix}{}", random_suffix()),
                None => String::new(),
            },
        };
        v["metadata"]["name"] = json!(name);
        if kind.namespaced {
            match v["metadata"]["namespace"].as_str() {
                Some(b) if b != ns => {
                    return Err(KubeError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => v["metadata"]["namespace"] = json!(ns),
            }
            if !self.namespace_exists(ns) {
                return Err(KubeError::not_found("namespaces", ns));
            }
        } else if let Some(m) = v["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        Ok(name)
    }

    /// POST: a new object (409 AlreadyExists when the name is taken).
    pub fn create(&mut self, kind: &'static Kind, ns: &str, mut v: Value, ctx: &WriteCtx) -> Answer {
        let name = self.identify(kind, ns, None, &mut v)?;
        if v["metadata"].get("resourceVersion").is_some_and(|r| !r.is_null()) {
            return Err(KubeError::bad_request("resourceVersion should not be set on objects to be created"));
        }
        sanitize(kind, &mut v, None);
        let v = admit(kind, v, ctx)?;
        if self.objects.contains_key(&key(kind, ns, &name)) {
            return Err(KubeError::already_exists(&kind.resource(), &name));
        }
        super::openshift::validate_create(self, kind, ns, &v)?;
        let mut managers = Vec::new();
        fields::record_update(
            &mut managers,
            &ctx.manager,
            &kind.api_version(),
            &timestamp(ctx.world),
            (&json!({}), &owned_part(kind, &v)),
            ctx.schema(kind),
        );
        if ctx.dry_run {
            return Ok((StatusCode::CREATED, Obj { kind, value: v, managers }.render()));
        }
        Ok((StatusCode::CREATED, self.insert_new(kind, v, managers, ctx.world)))
    }

    /// PUT: replaces the object; a `metadata.resourceVersion` in the body must be the current one.
    pub fn replace(&mut self, kind: &'static Kind, ns: &str, name: &str, mut v: Value, ctx: &WriteCtx) -> Answer {
        self.identify(kind, ns, Some(name), &mut v)?;
        let old = self.existing(kind, ns, name)?;
        if let Some(rv) = v["metadata"]["resourceVersion"].as_str()
            && rv != old.value["metadata"]["resourceVersion"]
        {
            return Err(KubeError::modified(&kind.resource(), name));
        }
        sanitize(kind, &mut v, Some(&old.value));
        self.update(kind, old, v, ctx)
    }

    /// `application/merge-patch+json` (and strategic merge patch for built-in types, treated alike).
    pub fn merge_patch(&mut self, kind: &'static Kind, ns: &str, name: &str, patch: &Value, ctx: &WriteCtx) -> Answer {
        let old = self.existing(kind, ns, name)?;
        if let Some(rv) = patch["metadata"]["resourceVersion"].as_str()
            && rv != old.value["metadata"]["resourceVersion"]
        {
            return Err(KubeError::modified(&kind.resource(), name));
        }
        let mut v = old.value.clone();
        crate::world::merge_patch(&mut v, patch);
        self.identify(kind, ns, Some(name), &mut v)?;
        sanitize(kind, &mut v, Some(&old.value));
        self.update(kind, old, v, ctx)
    }

    fn existing(&self, kind: &'static Kind, ns: &str, name: &str) -> Result<Obj, KubeError> {
        self.objects.get(&key(kind, ns, name)).cloned().ok_or_else(|| KubeError::not_found(&kind.resource(), name))
    }

    /// An Update-operation write of `v` over `old`.
    fn update(&mut self, kind: &'static Kind, old: Obj, v: Value, ctx: &WriteCtx) -> Answer {
        let v = admit(kind, v, ctx)?;
        let mut managers = old.managers.clone();
        let time = timestamp(ctx.world);
        fields::record_update(
            &mut managers,
            &ctx.manager,
            &kind.api_version(),
            &time,
            (&owned_part(kind, &old.value), &owned_part(kind, &v)),
            ctx.schema(kind),
        );
        self.commit(kind, old, v, managers, ctx)
    }

    /// Stores `v` as the new state of `old` unless nothing changed (then the resourceVersion stays).
    fn commit(
        &mut self,
        kind: &'static Kind,
        old: Obj,
        mut v: Value,
        managers: Vec<Manager>,
        ctx: &WriteCtx,
    ) -> Answer {
        if v != old.value {
            let rendered = Obj { kind, value: v.clone(), managers: managers.clone() }.render();
            webhooks::validate_update(kind, &old.value, &v, &rendered, ctx.dry_run)?;
            super::openshift::validate_update(self, kind, &v)?;
        }
        let same_fields = managers.len() == old.managers.len()
            && managers.iter().zip(&old.managers).all(|(a, b)| a.manager == b.manager && a.fields == b.fields);
        if v == old.value && same_fields {
            return Ok((StatusCode::OK, old.render()));
        }
        if kind.custom && generation_part(kind, &v) != generation_part(kind, &old.value) {
            let g = old.value["metadata"]["generation"].as_i64().unwrap_or(1);
            v["metadata"]["generation"] = json!(g + 1);
        }
        let next = Obj { kind, value: v, managers };
        if ctx.dry_run {
            return Ok((StatusCode::OK, next.render()));
        }
        Ok((StatusCode::OK, self.store(next)))
    }

    /// Stores an existing object under a new resourceVersion; answers its rendering.
    pub fn store(&mut self, mut obj: Obj) -> Value {
        self.rv += 1;
        obj.value["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let out = obj.render();
        self.objects.insert(key_of(obj.kind, &obj.value), obj);
        out
    }

    /// Server-side apply of `config` by `ctx.manager`; creates the object when it is missing.
    pub fn apply(
        &mut self,
        kind: &'static Kind,
        ns: &str,
        name: &str,
        mut config: Value,
        force: bool,
        ctx: &WriteCtx,
    ) -> Answer {
        if config["apiVersion"].as_str().is_none() || config["kind"].as_str().is_none() {
            return Err(KubeError::bad_request("apiVersion and kind must be set in an apply configuration"));
        }
        self.identify(kind, ns, Some(name), &mut config)?;
        sanitize(kind, &mut config, None);
        if let Some(schema) = ctx.registry.schemas.get(&kind.resource()) {
            strict_check(schema, &config, ctx.strict)?;
            schema.prune(&mut config);
        }
        let sent = fields::leaves(&owned_part(kind, &config), ctx.schema(kind));
        let me = ctx.manager.clone();
        let time = timestamp(ctx.world);
        let Some(old) = self.objects.get(&key(kind, ns, name)).cloned() else {
            let v = admit(kind, config, ctx)?;
            super::openshift::validate_create(self, kind, ns, &v)?;
            let managers = vec![Manager {
                manager: me,
                operation: Operation::Apply,
                api_version: kind.api_version(),
                time,
                fields: sent,
            }];
            if ctx.dry_run {
                return Ok((StatusCode::CREATED, Obj { kind, value: v, managers }.render()));
            }
            return Ok((StatusCode::CREATED, self.insert_new(kind, v, managers, ctx.world)));
        };
        let mut next = old.value.clone();
        let mine = old.managers.iter().find(|m| m.manager == me && m.operation == Operation::Apply);
        if let Some(mine) = mine {
            for p in mine.fields.difference(&sent) {
                let shared = old
                    .managers
                    .iter()
                    .filter(|m| !(m.manager == me && m.operation == Operation::Apply))
                    .any(|m| m.fields.iter().any(|q| fields::overlaps(p, q)));
                if !shared {
                    fields::remove(&mut next, p);
                }
            }
        }
        fields::merge(&mut next, &config, ctx.schema(kind));
        let conflicts = fields::conflicts(&old.managers, &me, &sent, &old.value, &next);
        if !conflicts.is_empty() && !force {
            return Err(conflict_error(kind, name, &conflicts));
        }
        let next = admit(kind, next, ctx)?;
        let mut managers = old.managers.clone();
        for m in managers.iter_mut().filter(|m| !(m.manager == me && m.operation == Operation::Apply)) {
            m.fields.retain(|q| !conflicts.iter().any(|c| &c.path == q));
        }
        match managers.iter_mut().find(|m| m.manager == me && m.operation == Operation::Apply) {
            Some(m) if m.fields == sent => {}
            Some(m) => {
                m.fields = sent;
                m.time = time;
            }
            None => managers.push(Manager {
                manager: me,
                operation: Operation::Apply,
                api_version: kind.api_version(),
                time,
                fields: sent,
            }),
        }
        for m in managers.iter_mut() {
            m.fields.retain(|q| fields::get(&next, q).is_some());
        }
        managers.retain(|m| !m.fields.is_empty());
        self.commit(kind, old, next, managers, ctx)
    }

    /// DELETE. Custom resources answer the deleted object, built-in types a `Status`; Machines
    /// (which carry a finalizer) and Namespaces answer the object marked for deletion.
    pub fn delete(&mut self, kind: &'static Kind, ns: &str, name: &str, ctx: &WriteCtx) -> Answer {
        let old = self.existing(kind, ns, name)?;
        super::openshift::validate_delete(self, kind, ns)?;
        if ctx.dry_run {
            return Ok((StatusCode::OK, old.render()));
        }
        ctx.world.journal("kubernetes", "DELETE", &kind.path(ns, name));
        if kind.kind == "Machine" {
            let due = ctx.now + ctx.world.lro_duration(super::machines::DELETE_SECS.0, super::machines::DELETE_SECS.1);
            return Ok((StatusCode::OK, self.mark_deleting(key(kind, ns, name), due, ctx.world)));
        }
        if kind.plural == "namespaces" {
            let inside: Vec<Key> = self.objects.keys().filter(|k| k.2 == name).cloned().collect();
            for k in inside {
                self.remove(&k, ctx.world);
            }
            self.remove(&key(kind, ns, name), ctx.world);
            let mut v = old.render();
            v["metadata"]["deletionTimestamp"] = json!(timestamp(ctx.world));
            v["status"]["phase"] = json!("Terminating");
            return Ok((StatusCode::OK, v));
        }
        self.remove(&key(kind, ns, name), ctx.world);
        if kind.custom {
            Ok((StatusCode::OK, old.render()))
        } else {
            Ok((StatusCode::OK, status::success(kind.plural, kind.group, name, &old.value["metadata"]["uid"])))
        }
    }

    /// Removes an object now (the end of a deletion).
    pub fn remove(&mut self, key: &Key, world: &World) {
        if self.objects.remove(key).is_some() {
            self.deleting.remove(key);
            self.rv += 1;
            if let Some(kind) = Kind::served(key.0, key.1) {
                world.journal("kubernetes", "removed", &kind.path(&key.2, &key.3));
            }
        }
    }

    /// Sets `deletionTimestamp` and schedules the removal; answers the object.
    pub fn mark_deleting(&mut self, key: Key, due: Instant, world: &World) -> Value {
        let Some(mut obj) = self.objects.get(&key).cloned() else { return Value::Null };
        if self.deleting.contains_key(&key) {
            return obj.render();
        }
        self.deleting.insert(key, due);
        obj.value["metadata"]["deletionTimestamp"] = json!(timestamp(world));
        obj.value["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        self.store(obj)
    }
}

pub fn key(kind: &'static Kind, ns: &str, name: &str) -> Key {
    (kind.group, kind.plural, if kind.namespaced { ns.to_string() } else { String::new() }, name.to_string())
}

fn key_of(kind: &'static Kind, v: &Value) -> Key {
    key(
        kind,
        v["metadata"]["namespace"].as_str().unwrap_or_default(),
        v["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

/// The world's wall-clock time (advanced with the world clock), as Kubernetes writes timestamps.
pub fn timestamp(world: &World) -> String {
    let ahead = world.clock.now().saturating_duration_since(Instant::now());
    let t = time::OffsetDateTime::now_utc() + ahead;
    t.format(&time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z")).unwrap_or_default()
}

/// Five characters as the API server's name generator picks them.
pub fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// Drops what clients cannot set: system metadata (kept from `old` when there is one) and, for
/// types with a status subresource, `status` (kept from `old`).
fn sanitize(kind: &'static Kind, v: &mut Value, old: Option<&Value>) {
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "generateName",
        ] {
            m.remove(k);
        }
        if let Some(old) = old {
            for k in [
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                if let Some(x) = old["metadata"].get(k) {
                    m.insert(k.to_string(), x.clone());
                }
            }
        }
    }
    if kind.status
        && let Some(o) = v.as_object_mut()
    {
        o.remove("status");
        if let Some(s) = old.and_then(|o| o.get("status")) {
            o.insert("status".into(), s.clone());
        }
    }
}

/// The part of an object that field managers own: labels, annotations, owner references and
/// finalizers of the metadata, and everything else but `apiVersion`, `kind` (and `status` where
/// it is a subresource).
pub fn owned_part(kind: &Kind, v: &Value) -> Value {
    let mut out = v.clone();
    if let Some(o) = out.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
        if kind.status {
            o.remove("status");
        }
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.retain(|k, _| matches!(k.as_str(), "labels" | "annotations" | "ownerReferences" | "finalizers"));
            if m.is_empty() {
                o.remove("metadata");
            }
        }
    }
    out
}

/// What a change of bumps `metadata.generation`: all but metadata (and status where it is a subresource).
fn generation_part(kind: &Kind, v: &Value) -> Value {
    let mut out = v.clone();
    if let Some(o) = out.as_object_mut() {
        o.remove("metadata");
        if kind.status {
            o.remove("status");
        }
    }
    out
}

fn strict_check(schema: &Schema, v: &Value, strict: bool) -> Result<(), KubeError> {
    let unknown = schema.unknown_fields(v);
    if strict && !unknown.is_empty() {
        let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
        return Err(KubeError::bad_request(format!("strict decoding error: {}", list.join(", "))));
    }
    Ok(())
}

/// Admission: built-in rules for Secrets, ConfigMaps and Namespaces; for custom resources the
/// CRD schema (unknown fields refused in strict mode, else pruned; defaults; validation); for every
/// kind the ObjectMeta label and annotation rules ([`meta`]).
pub fn admit(kind: &'static Kind, mut v: Value, ctx: &WriteCtx) -> Result<Value, KubeError> {
    let name = v["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut causes: Vec<Cause> = Vec::new();
    match kind.kind {
        "Secret" => {
            if let Some(Value::Object(sd)) = v.as_object_mut().and_then(|o| o.remove("stringData")) {
                for (k, x) in sd {
                    let text = x.as_str().unwrap_or_default().to_string();
                    v["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
            if v.get("type").is_none() {
                v["type"] = json!("Opaque");
            }
            causes.extend(string_map(&v["data"], "data", true));
        }
        "ConfigMap" => causes.extend(string_map(&v["data"], "data", false)),
        "Namespace" => finish_namespace(&mut v),
        _ => {}
    }
    if kind.plural == "namespaces" {
        causes.extend(schema::check_label_name(&v["metadata"]["name"], "metadata.name"));
    }
    match ctx.registry.schemas.get(&kind.resource()) {
        Some(schema) => {
            strict_check(schema, &v, ctx.strict)?;
            schema.prune(&mut v);
            schema.apply_defaults(&mut v);
            causes.extend(schema.validate(&v));
        }
        None if kind.plural != "namespaces" => {
            causes.extend(schema::check_name(&v["metadata"]["name"], "metadata.name"))
        }
        None => {}
    }
    for part in ["labels", "annotations"] {
        causes.extend(string_map(&v["metadata"][part], &format!("metadata.{part}"), false));
    }
    causes.extend(meta::label_causes(&v["metadata"]["labels"], "metadata.labels"));
    causes.extend(meta::annotation_causes(&v["metadata"]["annotations"], "metadata.annotations"));
    if causes.is_empty() { Ok(v) } else { Err(KubeError::invalid(kind.kind, kind.group, &name, &causes)) }
}

fn string_map(v: &Value, field: &str, base64: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let Some(m) = v.as_object() else {
        if !v.is_null() {
            out.push(Cause {
                reason: schema::CauseReason::FieldValueTypeInvalid,
                field: field.into(),
                message: "Invalid value: must be a map of strings".into(),
            });
        }
        return out;
    };
    for (k, x) in m {
        let ok = match x.as_str() {
            Some(s) => !base64 || base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
            None => false,
        };
        if !ok {
            let what = if base64 { "a base64-encoded string" } else { "a string" };
            out.push(Cause {
                reason: schema::CauseReason::FieldValueInvalid,
                field: format!("{field}[{k}]"),
                message: format!("Invalid value: {x}: must be {what}"),
            });
        }
    }
    out
}

pub(super) fn finish_namespace(v: &mut Value) {
    let name = v["metadata"]["name"].clone();
    v["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
    if v["spec"]["finalizers"].is_null() {
        v["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    v["status"] = json!({"phase": "Active"});
}

/// 409 with one `FieldManagerConflict` cause per field another manager owns, worded as the API
/// server words it (kubernetes/apiserver `pkg/endpoints/handlers/fieldmanager/internal/conflict.go`:
/// `NewConflictError`, `getConflictMessage`, `printManager`).
fn conflict_error(kind: &Kind, name: &str, conflicts: &[fields::Conflict]) -> KubeError {
    let path = |c: &fields::Conflict| fields::display(&c.path);
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.owner()), "field": path(c)}))
        .collect();
    let message = if conflicts.len() == 1 {
        let c = &conflicts[0];
        format!("Apply failed with 1 conflict: conflict with {}: {}", c.owner(), path(c))
    } else {
        // Grouped by owner, owners sorted by their encoded identifier, paths in the order found.
        let mut owners: Vec<(String, String, Vec<String>)> = Vec::new();
        for c in conflicts {
            let key = c.owner_key();
            match owners.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, _, paths)) => paths.push(path(c)),
                None => owners.push((key, c.owner(), vec![path(c)])),
            }
        }
        owners.sort_by(|a, b| a.0.cmp(&b.0));
        let mut lines = Vec::new();
        for (_, owner, paths) in owners {
            lines.push(format!("conflicts with {owner}:"));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
    };
    KubeError::new(StatusCode::CONFLICT, "Conflict", message)
        .with_details(json!({"name": name, "group": kind.group, "kind": kind.plural, "causes": causes}))
}
