//! The stand-ins' view of the cluster: each pass, the objects of the kinds they read, listed from
//! the API server ([`super::bridge`]), and what the stand-ins carry from pass to pass (which VM
//! booted when, which Node its kubelet registered, its heartbeats and certificate requests). What
//! a stand-in changes or adds here, the bridge writes back through the API; nothing here is an
//! API of its own.

use super::kinds::Kind;
use crate::world::World;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Instant;

/// group, plural, namespace ("" when cluster-scoped), name.
pub type Key = (&'static str, &'static str, String, String);

/// Namespaces OpenShift's install leaves behind besides its own (the pool's objects go in
/// `openshift-cluster-api`).
pub const DEFAULT_NAMESPACES: &[&str] = &["openshift-cluster-api"];

/// An object as listed: its kind and its body (without `managedFields`).
#[derive(Debug, Clone)]
pub struct Obj {
    pub kind: &'static Kind,
    pub value: Value,
}

/// Where a Machine is held.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// `cluster`, `azure_cluster`, `identity`, `infrastructure`, `bootstrap_data`,
    /// `token_exchange`, `authorization`, `vm`, `dns`, `boot`; past it ([`super::boot`]):
    /// `api_path`, `ignition`, `kubelet`, `csr`, `booting`, `node_ref`, `network`, or `joined`.
    pub step: &'static str,
    /// What the controller logs or reports there.
    pub message: String,
    pub source: &'static str,
}

/// What the kubelet registers with.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub node_name: String,
    pub provider_id: String,
    pub labels: serde_json::Map<String, Value>,
}

/// The objects of the last pass and the stand-ins' own state.
#[derive(Debug)]
pub struct Store {
    pub objects: BTreeMap<Key, Obj>,
    /// The PEM of the CA the API server's (and the machine-config server's) certificates chain to.
    pub ca_pem: String,
    /// A booting VM (by id): when its boot is done ([`super::boot`]).
    pub boots: BTreeMap<String, Instant>,
    /// What a VM's kubelet registers with, for a rendered config (VM id, config): run once.
    pub kubelets: BTreeMap<(String, String), Result<Registration, Held>>,
    /// VM id -> the Node its kubelet registered.
    pub registered: BTreeMap<String, String>,
    /// Node name -> when its kubelet last posted status (the sim's last look with the path up).
    pub heartbeats: BTreeMap<String, Instant>,
    /// Node name -> the name of its kubelet's bootstrap CertificateSigningRequest.
    pub csrs: BTreeMap<String, String>,
    /// Node name -> the rendered config its machine booted with (what the machine-config server
    /// served it, and wrote into its initial node annotations).
    pub booted: BTreeMap<String, String>,
    /// Node name -> the config its machine-config daemon is updating to, and when it is done.
    pub updates: BTreeMap<String, (String, Instant)>,
    /// Nodes whose kubelet bootstraps again (its client certificate expired), and those that got
    /// a new certificate that way.
    pub rebootstrapping: std::collections::BTreeSet<String>,
    pub renewed: std::collections::BTreeSet<String>,
}

impl Store {
    /// Adds the Namespace `name`.
    pub fn add_namespace(&mut self, name: &str) {
        let v = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        self.insert(Kind::find("", "v1", "namespaces").expect("namespaces served"), v);
    }

    /// Adds or replaces an object (the bridge creates what the last pass did not list).
    pub fn insert(&mut self, kind: &'static Kind, value: Value) {
        let k = key(
            kind,
            value["metadata"]["namespace"].as_str().unwrap_or_default(),
            value["metadata"]["name"].as_str().unwrap_or_default(),
        );
        self.objects.insert(k, Obj { kind, value });
    }

    /// Puts back an object a stand-in changed.
    pub fn put(&mut self, obj: Obj) {
        let Obj { kind, value } = obj;
        self.insert(kind, value);
    }

    /// The body of an object of the kind `group`/`plural`, as the last pass listed it.
    pub fn value(&self, group: &str, plural: &str, ns: &str, name: &str) -> Option<&Value> {
        let kind = Kind::served(group, plural)?;
        self.objects.get(&key(kind, ns, name)).map(|o| &o.value)
    }
}

pub fn key(kind: &'static Kind, ns: &str, name: &str) -> Key {
    (kind.group, kind.plural, if kind.namespaced { ns.to_string() } else { String::new() }, name.to_string())
}

/// The world's wall-clock time (advanced with the world clock), as Kubernetes writes timestamps.
pub fn timestamp(world: &World) -> String {
    let ahead = world.clock.now().saturating_duration_since(Instant::now());
    let t = time::OffsetDateTime::now_utc() + ahead;
    t.format(&time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z")).unwrap_or_default()
}
