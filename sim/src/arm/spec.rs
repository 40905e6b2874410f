//! What ARM does with the properties of a PUT body it does not define, or defines read-only: it
//! drops them, so they are neither stored nor answered back. The definitions are Microsoft's own
//! (`azure-rest-api-specs`, read at run time from the reference set as the CRDs are, never copied):
//! each emulated type's model, its `$ref`s followed across files and its `allOf`s merged.
//!
//! Sources: Azure/arm-template-whatif#96 (ARM's program manager: "most RPs will silently drop
//! properties [they do] not know about"); the ARM resource provider contract
//! (Azure/azure-resource-manager-rpc `v1.0/async-api-reference.md`: a `provisioningState` sent in a
//! PUT is "a normal readonly property", ignored when it matches the server's value). The contract
//! adds that a different value "should" be refused with 400; no source shows the Network resource
//! provider doing so, so the sim drops every read-only property whatever its value (a gap in
//! `sim/README.md`). The Azure *data-plane* guidelines (microsoft/api-guidelines
//! `azure/Guidelines.md`) ask services to refuse unknown fields; ARM resource providers are not held
//! to them. Role assignments are stored as sent.

use super::kinds::Kind;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

/// The model of each type, by `arm_type`: (spec file under `specification/`, definition).
const MODELS: &[(&str, &str, &str)] = &[
    (
        "Microsoft.Network/virtualNetworks",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/virtualNetwork.json",
        "VirtualNetwork",
    ),
    (
        "Microsoft.Network/virtualNetworks/subnets",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/virtualNetwork.json",
        "Subnet",
    ),
    (
        "Microsoft.Network/networkSecurityGroups",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/networkSecurityGroup.json",
        "NetworkSecurityGroup",
    ),
    (
        "Microsoft.Network/networkSecurityGroups/securityRules",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/networkSecurityGroup.json",
        "SecurityRule",
    ),
    (
        "Microsoft.Network/publicIPAddresses",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/publicIpAddress.json",
        "PublicIPAddress",
    ),
    (
        "Microsoft.Network/natGateways",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/natGateway.json",
        "NatGateway",
    ),
    (
        "Microsoft.Network/virtualNetworkGateways",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/virtualNetworkGateway.json",
        "VirtualNetworkGateway",
    ),
    (
        "Microsoft.Network/localNetworkGateways",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/virtualNetworkGateway.json",
        "LocalNetworkGateway",
    ),
    (
        "Microsoft.Network/connections",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/virtualNetworkGateway.json",
        "VirtualNetworkGatewayConnection",
    ),
    (
        "Microsoft.Network/routeTables",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/routeTable.json",
        "RouteTable",
    ),
    (
        "Microsoft.Network/routeTables/routes",
        "network/resource-manager/Microsoft.Network/stable/2024-03-01/routeTable.json",
        "Route",
    ),
    (
        "Microsoft.Network/networkInterfaces",
        "network/resource-manager/Microsoft.Network/stable/2023-05-01/networkInterface.json",
        "NetworkInterface",
    ),
    (
        "Microsoft.Compute/virtualMachines",
        "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-03-01/virtualMachine.json",
        "VirtualMachine",
    ),
    (
        "Microsoft.Compute/availabilitySets",
        "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-03-01/availabilitySet.json",
        "AvailabilitySet",
    ),
    (
        "Microsoft.Compute/disks",
        "compute/resource-manager/Microsoft.Compute/DiskRP/stable/2023-10-02/disk.json",
        "Disk",
    ),
    (
        "Microsoft.ManagedIdentity/userAssignedIdentities",
        "msi/resource-manager/Microsoft.ManagedIdentity/stable/2023-01-31/ManagedIdentity.json",
        "Identity",
    ),
    (
        "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials",
        "msi/resource-manager/Microsoft.ManagedIdentity/stable/2023-01-31/ManagedIdentity.json",
        "FederatedIdentityCredential",
    ),
];

/// The reference set's `azure-rest-api-specs/specification`: under `$XCSP_REFERENCE_DIR`, else
/// `shared/reference` beside the checkout (as the CRDs are found).
pub fn specs_dir() -> PathBuf {
    std::env::var_os("XCSP_REFERENCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/reference")))
        .join("azure-rest-api-specs/specification")
}

/// The parsed spec files and each type's model.
pub struct Models {
    files: HashMap<PathBuf, Value>,
    by_type: HashMap<&'static str, (PathBuf, Value)>,
}

/// The models, read once; `Err` says why they could not be (then bodies are stored as sent).
pub static MODELS_LOADED: LazyLock<Result<Models, String>> = LazyLock::new(|| {
    let m = Models::load(&specs_dir());
    if let Err(e) = &m {
        eprintln!("xcsp-sim: ARM bodies are stored as sent (unknown and read-only properties kept): {e}");
    }
    m
});

/// `p` with its `.` and `..` components resolved lexically (the specs' `$ref`s climb with `..`).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The file a `$ref`'s file part names, relative to the file the `$ref` is in.
fn ref_file(from: &Path, target: &str) -> PathBuf {
    normalize(&from.parent().unwrap_or(Path::new("")).join(target))
}

impl Models {
    /// Reads the spec files of [`MODELS`] and every file their `$ref`s reach.
    pub fn load(root: &Path) -> Result<Models, String> {
        let mut m = Models { files: HashMap::new(), by_type: HashMap::new() };
        for (ty, file, def) in MODELS {
            let path = normalize(&root.join(file));
            m.read(&path)?;
            let schema = m.files[&path]["definitions"]
                .get(*def)
                .cloned()
                .ok_or_else(|| format!("{} has no definition {def}", path.display()))?;
            m.by_type.insert(ty, (path, schema));
        }
        // Every file a `$ref` names, transitively.
        let mut pending: Vec<PathBuf> = m.files.keys().cloned().collect();
        while let Some(f) = pending.pop() {
            let mut refs = Vec::new();
            collect_refs(&m.files[&f], &mut refs);
            for r in refs {
                let (target, _) = r.split_once('#').unwrap_or((&r, ""));
                if target.is_empty() {
                    continue;
                }
                let t = ref_file(&f, target);
                if !m.files.contains_key(&t) {
                    m.read(&t)?;
                    pending.push(t);
                }
            }
        }
        Ok(m)
    }

    fn read(&mut self, path: &Path) -> Result<(), String> {
        if self.files.contains_key(path) {
            return Ok(());
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let doc = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        self.files.insert(path.to_path_buf(), doc);
        Ok(())
    }

    /// `schema` with its `$ref` followed (repeatedly), and the file it now lives in.
    fn deref<'a>(&'a self, file: &'a Path, schema: &'a Value) -> (&'a Path, &'a Value) {
        let (mut f, mut s) = (file, schema);
        for _ in 0..16 {
            let Some(r) = s["$ref"].as_str() else { break };
            let (target, pointer) = r.split_once('#').unwrap_or((r, ""));
            let path = if target.is_empty() { f.to_path_buf() } else { ref_file(f, target) };
            let Some((key, doc)) = self.files.get_key_value(&path) else { break };
            let Some(next) = (if pointer.is_empty() { Some(doc) } else { doc.pointer(pointer) }) else { break };
            (f, s) = (key.as_path(), next);
        }
        (f, s)
    }

    /// The properties of an object schema, its `allOf`s merged (first definition wins), each with
    /// the file it is in; and its `additionalProperties`. `None` for a free-form object.
    #[allow(clippy::type_complexity)]
    fn members<'a>(
        &'a self,
        file: &'a Path,
        schema: &'a Value,
    ) -> Option<(HashMap<&'a str, (&'a Path, &'a Value)>, Option<(&'a Path, &'a Value)>)> {
        let (file, schema) = self.deref(file, schema);
        let mut props = HashMap::new();
        let mut additional = None;
        let mut typed = false;
        if let Some(p) = schema["properties"].as_object() {
            typed = true;
            for (k, v) in p {
                props.entry(k.as_str()).or_insert((file, v));
            }
        }
        match &schema["additionalProperties"] {
            Value::Object(_) => {
                typed = true;
                additional = Some((file, &schema["additionalProperties"]));
            }
            Value::Bool(true) => return None,
            _ => {}
        }
        for sub in schema["allOf"].as_array().into_iter().flatten() {
            match self.members(file, sub) {
                Some((p, a)) => {
                    typed = true;
                    for (k, v) in p {
                        props.entry(k).or_insert(v);
                    }
                    additional = additional.or(a);
                }
                None => return None,
            }
        }
        typed.then_some((props, additional))
    }

    /// Drops from `value` what `schema` does not define and what it marks `readOnly`; answers the
    /// JSON paths dropped.
    fn prune(&self, file: &Path, schema: &Value, value: &mut Value, path: &str, dropped: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                let Some((props, additional)) = self.members(file, schema) else { return };
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    let child = format!("{path}.{k}");
                    match props.get(k.as_str()) {
                        Some((f, s)) => {
                            let read_only = s["readOnly"] == true || self.deref(f, s).1["readOnly"] == true;
                            if read_only {
                                map.remove(&k);
                                dropped.push(child);
                            } else if let Some(x) = map.get_mut(&k) {
                                self.prune(f, s, x, &child, dropped);
                            }
                        }
                        None => match additional {
                            Some((f, s)) => {
                                if let Some(x) = map.get_mut(&k) {
                                    self.prune(f, s, x, &child, dropped);
                                }
                            }
                            None => {
                                map.remove(&k);
                                dropped.push(child);
                            }
                        },
                    }
                }
            }
            Value::Array(items) => {
                let (f, s) = self.deref(file, schema);
                if s["items"].is_object() {
                    for (i, x) in items.iter_mut().enumerate() {
                        self.prune(f, &s["items"], x, &format!("{path}[{i}]"), dropped);
                    }
                }
            }
            _ => {}
        }
    }

    /// Drops from a PUT body of `kind` what ARM would not keep; answers the JSON paths dropped. A
    /// type without a model here is left as it is.
    pub fn prune_put(&self, kind: &Kind, body: &mut Value) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Some((file, schema)) = self.by_type.get(kind.arm_type) {
            self.prune(file, schema, body, "$", &mut dropped);
        }
        dropped
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                out.push(r.to_string());
            }
            for x in m.values() {
                collect_refs(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// Prunes a PUT body with the loaded models (nothing when they could not be read).
pub fn prune_put(kind: &Kind, body: &mut Value) -> Vec<String> {
    match &*MODELS_LOADED {
        Ok(m) => m.prune_put(kind, body),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::kinds;
    use super::*;
    use serde_json::json;

    fn models() -> Models {
        Models::load(&specs_dir()).unwrap_or_else(|e| panic!("the reference specs are needed: {e}"))
    }

    #[test]
    fn every_modelled_type_is_served_and_has_its_definition() {
        let m = models();
        for (ty, _, _) in MODELS {
            assert!(kinds::KINDS.iter().any(|k| k.arm_type == *ty), "{ty} is not served");
            assert!(m.by_type.contains_key(ty), "{ty}");
        }
    }

    #[test]
    fn unknown_and_read_only_properties_are_dropped_and_the_rest_kept() {
        let m = models();
        let mut vnet = json!({
            "location": "usgovvirginia",
            "tags": {"a": "b"},
            "name": "ignored", "type": "ignored", "etag": "W/\"x\"", "gpuCount": 4,
            "properties": {
                "addressSpace": {"addressPrefixes": ["10.8.0.0/16"], "bogus": 1},
                "provisioningState": "Succeeded", "resourceGuid": "g",
                "subnets": [{"name": "GatewaySubnet", "etag": "e", "properties": {
                    "addressPrefix": "10.8.255.0/27", "provisioningState": "Failed", "extra": true}}],
            },
        });
        let mut dropped = m.prune_put(&kinds::VNET, &mut vnet);
        dropped.sort();
        assert_eq!(
            vnet,
            json!({"location": "usgovvirginia", "tags": {"a": "b"}, "properties": {
                "addressSpace": {"addressPrefixes": ["10.8.0.0/16"]},
                "subnets": [{"name": "GatewaySubnet", "properties": {"addressPrefix": "10.8.255.0/27"}}]}})
        );
        assert_eq!(
            dropped,
            [
                "$.etag",
                "$.gpuCount",
                "$.name",
                "$.properties.addressSpace.bogus",
                "$.properties.provisioningState",
                "$.properties.resourceGuid",
                "$.properties.subnets[0].etag",
                "$.properties.subnets[0].properties.extra",
                "$.properties.subnets[0].properties.provisioningState",
                "$.type",
            ]
        );
    }
}
