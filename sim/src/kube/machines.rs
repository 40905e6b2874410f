//! The MachineSet controller: a MachineSet with `spec.replicas: N` gets N Machines (after a VM's
//! creation time), excess Machines are deleted (after a VM's deletion time), Machines of a deleted
//! MachineSet are garbage-collected, and `status.replicas`/`readyReplicas` follow. It runs lazily,
//! whenever a request looks at the Kubernetes API (like the ARM side's long-running operations).

use super::fields::{self, Manager};
use super::kinds::{CAPI, CAPZ, Kind};
use super::store::{Key, PendingMachine, Store, key, random_suffix};
use crate::world::World;
use serde_json::{Value, json};
use std::time::Instant;

/// Seconds an Azure VM takes to be created (the Machine appears then), before scaling.
pub const CREATE_SECS: (f64, f64) = (240.0, 360.0);
/// Seconds an Azure VM takes to be deleted (the Machine is removed then), before scaling.
pub const DELETE_SECS: (f64, f64) = (90.0, 150.0);

const CONTROLLER: &str = "machineset-controller";

fn machine_kind() -> &'static Kind {
    Kind::find(CAPI, "v1beta1", "machines").expect("machines served")
}

/// The uid of the MachineSet that controls a Machine.
fn owner_uid(machine: &Value) -> Option<&str> {
    machine["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "MachineSet" && r["controller"] == true)
        .and_then(|r| r["uid"].as_str())
}

impl Store {
    /// Brings Machines and MachineSet statuses up to date at `now`.
    pub fn settle(&mut self, world: &World, now: Instant) {
        // The tokens controller and the machine-config operator react to objects, not to the
        // clock: they run only when something changed since their last pass.
        if self.rv != self.controllers_rv {
            self.settle_tokens(world);
            self.settle_machine_configs(world);
            self.controllers_rv = self.rv;
        }
        let m_kind = machine_kind();
        let sets: Vec<(Key, String, i64)> = self
            .objects
            .iter()
            .filter(|(k, _)| k.0 == CAPI && k.1 == "machinesets")
            .map(|(k, o)| {
                let uid = o.value["metadata"]["uid"].as_str().unwrap_or_default().to_string();
                (k.clone(), uid, o.value["spec"]["replicas"].as_i64().unwrap_or(1).max(0))
            })
            .collect();
        // Garbage collection: Machines whose MachineSet is gone; creations it will never need.
        let live_uids: Vec<&str> = sets.iter().map(|s| s.1.as_str()).collect();
        let orphans: Vec<Key> = self
            .machines()
            .filter(|(k, o)| {
                owner_uid(&o.value).is_some_and(|u| !live_uids.contains(&u)) && !self.deleting.contains_key(*k)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in orphans {
            let due = now + world.lro_duration(DELETE_SECS.0, DELETE_SECS.1);
            self.mark_deleting(k, due, world);
        }
        self.pending.retain(|p| live_uids.contains(&p.uid.as_str()));
        // Scale each MachineSet toward spec.replicas.
        for (ms_key, uid, desired) in &sets {
            let mut alive: Vec<(Key, String)> = self
                .machines()
                .filter(|(k, o)| owner_uid(&o.value) == Some(uid) && !self.deleting.contains_key(*k))
                .map(|(k, o)| {
                    (k.clone(), o.value["metadata"]["creationTimestamp"].as_str().unwrap_or_default().to_string())
                })
                .collect();
            let pending = self.pending.iter().filter(|p| &p.uid == uid).count() as i64;
            let have = alive.len() as i64 + pending;
            if have < *desired {
                for _ in 0..(desired - have) {
                    let due = now + world.lro_duration(CREATE_SECS.0, CREATE_SECS.1);
                    self.pending.push(PendingMachine { machine_set: ms_key.clone(), uid: uid.clone(), due });
                }
            } else if have > *desired {
                let mut excess = have - desired;
                while excess > 0 {
                    let Some(i) = self.pending.iter().rposition(|p| &p.uid == uid) else { break };
                    self.pending.remove(i);
                    excess -= 1;
                }
                // Newest first, as CAPI's default "Random" policy prefers no particular one.
                alive.sort_by(|a, b| b.1.cmp(&a.1));
                for (k, _) in alive.into_iter().take(excess.max(0) as usize) {
                    let due = now + world.lro_duration(DELETE_SECS.0, DELETE_SECS.1);
                    self.mark_deleting(k, due, world);
                }
            }
        }
        // Creations and deletions that are due.
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending).into_iter().partition(|p| p.due <= now);
        self.pending = later;
        for p in due {
            if let Some(ms) = self.objects.get(&p.machine_set).map(|o| o.value.clone()) {
                self.create_machine(m_kind, &ms, world);
            }
        }
        let gone: Vec<Key> = self.deleting.iter().filter(|(_, d)| **d <= now).map(|(k, _)| k.clone()).collect();
        for k in gone {
            if k.0 == CAPI && k.1 == "machines" {
                self.remove_machine(&k, world);
            } else {
                self.remove(&k, world);
            }
        }
        // Status.
        for (ms_key, uid, _) in &sets {
            let owned: Vec<bool> = self
                .machines()
                .filter(|(_, o)| owner_uid(&o.value) == Some(uid))
                .map(|(k, _)| !self.deleting.contains_key(k))
                .collect();
            // A ready replica is a Machine whose Node is Ready (CAPI `machineset_controller.go`,
            // the status calculation over `noderefutil.IsNodeReady`).
            let ready = self
                .machines()
                .filter(|(k, o)| owner_uid(&o.value) == Some(uid) && !self.deleting.contains_key(*k))
                .filter_map(|(_, o)| o.value["status"]["nodeRef"]["name"].as_str())
                .filter(|n| self.value("", "nodes", "", n).is_some_and(super::boot::node_ready))
                .count();
            let Some(ms) = self.objects.get(ms_key).cloned() else { continue };
            let mut next = ms.clone();
            let st = &mut next.value["status"];
            st["replicas"] = json!(owned.len());
            st["readyReplicas"] = json!(ready);
            st["availableReplicas"] = json!(ready);
            st["fullyLabeledReplicas"] = json!(owned.len());
            // CAPI 1.13's own counters (`core/reconcilers/machineset/machineset_controller_status.go`
            // `setReplicas`: Machines whose v1beta2 `Ready`, `Available` condition is true), which
            // the v1beta1 API carries under `status.v1beta2` and v1beta2 shows as its own. The sim
            // gives Machines no v1beta2 conditions; a Machine whose Node is Ready counts for both
            // (a MachineSet's `minReadySeconds` is 0 here).
            st["v1beta2"]["readyReplicas"] = json!(ready);
            st["v1beta2"]["availableReplicas"] = json!(ready);
            st["observedGeneration"] = ms.value["metadata"]["generation"].clone();
            if let Some(sel) = selector_string(&ms.value["spec"]["selector"]) {
                st["selector"] = json!(sel);
            }
            if next.value != ms.value {
                self.store(next);
            }
        }
    }

    fn machines(&self) -> impl Iterator<Item = (&Key, &super::store::Obj)> {
        self.objects.iter().filter(|(k, _)| k.0 == CAPI && k.1 == "machines")
    }

    fn create_machine(&mut self, kind: &'static Kind, ms: &Value, world: &World) {
        let ns = ms["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let ms_name = ms["metadata"]["name"].as_str().unwrap_or_default();
        let mut name = format!("{ms_name}-{}", random_suffix());
        while self.objects.contains_key(&key(kind, &ns, &name)) {
            name = format!("{ms_name}-{}", random_suffix());
        }
        let template = &ms["spec"]["template"];
        let mut spec = template["spec"].clone();
        if spec.get("clusterName").is_none() {
            spec["clusterName"] = ms["spec"]["clusterName"].clone();
        }
        let mut machine = json!({
            "apiVersion": kind.api_version(), "kind": kind.kind,
            "metadata": {
                "name": name, "namespace": ns,
                "ownerReferences": [{
                    "apiVersion": ms["apiVersion"], "kind": "MachineSet", "name": ms_name,
                    "uid": ms["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true,
                }],
                "finalizers": ["machine.cluster.x-k8s.io"],
            },
            "spec": spec,
        });
        if let Some(labels) = template["metadata"]["labels"].as_object().filter(|l| !l.is_empty()) {
            machine["metadata"]["labels"] = Value::Object(labels.clone());
        }
        // CAPI's MachineSet controller puts the cluster's name into the template's labels, so every
        // Machine carries it (`machineset_controller.go` `reconcileMachineSetOwnerAndLabels`); CAPZ
        // finds the Cluster by it.
        if let Some(cluster) = ms["spec"]["clusterName"].as_str() {
            machine["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] = json!(cluster);
        }
        if let Some(ann) = template["metadata"]["annotations"].as_object().filter(|a| !a.is_empty()) {
            machine["metadata"]["annotations"] = Value::Object(ann.clone());
        }
        let mut managers: Vec<Manager> = Vec::new();
        let time = super::store::timestamp(world);
        fields::record_update(
            &mut managers,
            CONTROLLER,
            &kind.api_version(),
            &time,
            (&json!({}), &super::store::owned_part(kind, &machine)),
            // The controller's own write: its lists (ownerReferences, finalizers) are ObjectMeta's.
            &Value::Null,
        );
        // CAPI's phases (`machine_controller_phases.go`, `reconcilePhase`): the bootstrap data is
        // there (`dataSecretName`), so Provisioning; Provisioned needs the infrastructure provider
        // to report the VM ready, Running a Node. No infrastructure provider runs here.
        machine["status"] = json!({"phase": "Provisioning", "bootstrapReady": true, "infrastructureReady": false});
        // CAPI's MachineSet controller clones the template into the Machine's infrastructure machine
        // and points the Machine at it; the Machine becomes its controller
        // (`machine_controller_phases.go` `ensureExternalOwnershipAndWatch`). Both land in one pass
        // here, so the AzureMachine is made after the Machine, with both owners at once.
        let template = infrastructure_template(self, ms, &ns);
        let am_kind = azure_machine_kind();
        if template.is_some() {
            machine["spec"]["infrastructureRef"] =
                json!({"apiVersion": am_kind.api_version(), "kind": am_kind.kind, "name": name, "namespace": ns});
        }
        let created = self.insert_new(kind, machine, managers, world);
        if let Some((template_name, spec)) = template {
            self.clone_infrastructure(ms, &created, &template_name, spec, world);
        }
    }

    /// CAPI's MachineSet controller clones the template its `infrastructureRef` names into the
    /// Machine's infrastructure machine (`machineset_controller.go` `syncReplicas`,
    /// `external.CreateFromTemplate`): an AzureMachine named as the Machine, in its namespace, with
    /// the template's `spec.template.spec`, the Machine's labels and annotations and the
    /// `cluster.x-k8s.io/cloned-from-*` annotations (`controllers/external/util.go`
    /// `GenerateTemplate`), owned by the MachineSet and controlled by the Machine.
    fn clone_infrastructure(&mut self, ms: &Value, machine: &Value, template_name: &str, spec: Value, world: &World) {
        let am_kind = azure_machine_kind();
        let mut annotations = machine["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
        annotations.insert("cluster.x-k8s.io/cloned-from-name".into(), json!(template_name));
        annotations.insert(
            "cluster.x-k8s.io/cloned-from-groupkind".into(),
            json!("AzureMachineTemplate.infrastructure.cluster.x-k8s.io"),
        );
        let am = json!({
            "apiVersion": am_kind.api_version(), "kind": am_kind.kind,
            "metadata": {
                "name": machine["metadata"]["name"], "namespace": machine["metadata"]["namespace"],
                "labels": machine["metadata"]["labels"],
                "annotations": annotations,
                "ownerReferences": [
                    {"apiVersion": ms["apiVersion"], "kind": "MachineSet", "name": ms["metadata"]["name"],
                     "uid": ms["metadata"]["uid"]},
                    {"apiVersion": machine["apiVersion"], "kind": "Machine", "name": machine["metadata"]["name"],
                     "uid": machine["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true},
                ],
            },
            "spec": spec,
        });
        let mut managers: Vec<Manager> = Vec::new();
        fields::record_update(
            &mut managers,
            CONTROLLER,
            &am_kind.api_version(),
            &super::store::timestamp(world),
            (&json!({}), &super::store::owned_part(am_kind, &am)),
            &Value::Null,
        );
        self.insert_new(am_kind, am, managers, world);
    }

    /// Removes a Machine whose deletion is done, and its AzureMachine with it: the garbage collector
    /// follows the AzureMachine's controller reference (CAPZ's finalizer on it deletes the VM, which
    /// `capz::reap` does for the sim).
    fn remove_machine(&mut self, k: &Key, world: &World) {
        self.remove(k, world);
        let am = key(azure_machine_kind(), &k.2, &k.3);
        let controlled = self.objects.get(&am).is_some_and(|o| {
            o.value["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|r| r["kind"] == "Machine" && r["controller"] == true))
        });
        if controlled {
            self.remove(&am, world);
        }
    }
}

/// The template a MachineSet's Machines are cloned from, when it is CAPZ's and exists: its name
/// and `spec.template.spec`. Without it CAPI would make no Machine at all; the sim makes them with
/// the ref naming the template (a simplification the sim README names).
fn infrastructure_template(s: &Store, ms: &Value, ns: &str) -> Option<(String, Value)> {
    let tref = &ms["spec"]["template"]["spec"]["infrastructureRef"];
    if tref["kind"] != "AzureMachineTemplate" {
        return None;
    }
    let name = tref["name"].as_str()?;
    let template = s.value(CAPZ, "azuremachinetemplates", ns, name)?;
    Some((name.to_string(), template["spec"]["template"]["spec"].clone()))
}

fn azure_machine_kind() -> &'static Kind {
    Kind::find(CAPZ, "v1beta1", "azuremachines").expect("azuremachines served")
}

/// `matchLabels` as a selector string (`k=v,...`), as `status.selector` shows it for the scale subresource.
fn selector_string(sel: &Value) -> Option<String> {
    let m = sel["matchLabels"].as_object()?;
    Some(m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect::<Vec<_>>().join(","))
}
