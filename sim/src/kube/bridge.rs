//! The stand-ins for what cannot run here, as clients of the upstream cluster
//! ([`crate::cluster`]): OpenShift's install (its API objects, the machine-config operator's
//! pools, configs and pointer secrets, cluster-capi-operator's admission), the machine-config
//! operator's render controller, CAPZ's making of VMs in the ARM emulator, and each VM's boot and
//! kubelet. Cluster API's own controllers, the API server, garbage collection, CSR signing and the
//! node lifecycle are the upstream programs'.
//!
//! Each pass ([`Bridge::run`], every [`PASS`]) lists what the stand-ins read from the API server
//! into the [`Store`] they were written against (their own state, such as which VM registered
//! which Node, carried from pass to pass), runs them, and writes back through the API only what a
//! stand-in owns: an AzureMachine's `spec.providerID` and status (CAPZ's), a Node and its status
//! and Lease (the kubelet's), a CertificateSigningRequest and its approval (the kubelet's and the
//! machine approver's), rendered MachineConfigs, pool statuses and pointer Secrets (the
//! machine-config operator's). Machines, their phase, conditions and `nodeRef` are CAPI's alone.
//! A kubelet whose path to the API is cut stops renewing its Lease; the node lifecycle
//! controller, not the sim, then turns its Node `Unknown`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::kinds::{CAPZ, KINDS, Kind, api};
use super::store::{Key, Obj, Store, key};
use super::{boot, joins};
use crate::link::clouds::Clouds;
use crate::link::view::Link;
use crate::world::World;

/// How often the stand-ins look at the cluster.
pub const PASS: Duration = Duration::from_millis(500);

/// The field manager of every write the stand-ins make.
const MANAGER: &str = "xcsp-sim";

/// The stand-ins' state between passes and what the last pass found.
pub struct Bridge {
    client: kube::Client,
    /// The machine-config operator's `node-bootstrapper` service account, whose token a booting
    /// node presents to ask for its certificate.
    bootstrapper: kube::Client,
    audit_log: std::path::PathBuf,
    store: Mutex<Store>,
    machines: Mutex<Vec<Value>>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").finish_non_exhaustive()
    }
}

/// What the API server adds that the stand-ins neither read nor write.
fn comparable(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in ["resourceVersion", "managedFields", "generation", "creationTimestamp", "uid", "selfLink"] {
            m.remove(k);
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    v
}

/// What the stand-ins read of the floors below them on each pass: both clouds (and the link
/// through them), and whether a CAPZ manager runs.
pub trait Floors: Send + Sync + 'static {
    fn clouds(&self) -> Clouds<'_>;
    fn real_capz(&self) -> bool;
}

impl Bridge {
    /// Installs OpenShift's objects (what [`Store::new`] seeds for the world's `openshift`
    /// config) in the upstream cluster and cluster-capi-operator's admission as a
    /// ValidatingAdmissionPolicy, then answers a bridge ready to [`Bridge::run`].
    pub async fn install(
        world: &World,
        client: kube::Client,
        bootstrapper: kube::Client,
        ca_pem: &str,
        audit_log: std::path::PathBuf,
    ) -> Result<Arc<Bridge>, String> {
        let store = Store::new(world, ca_pem);
        let seeded: Vec<Obj> = store.objects.values().cloned().collect();
        // Namespaces first, then the rest in the seed's order.
        let (namespaces, rest): (Vec<Obj>, Vec<Obj>) = seeded.into_iter().partition(|o| o.kind.plural == "namespaces");
        for o in namespaces.into_iter().chain(rest) {
            create(&client, o.kind, &o.value).await?;
        }
        if let Some(o) = world.config().openshift.filter(|o| o.feature_set.runs_capi()) {
            for policy in super::openshift::admission_policies(&o.infrastructure_name) {
                crate::cluster::apply_as(&client, &policy, MANAGER).await?;
            }
            enforced(&client, &o.infrastructure_name).await?;
        }
        // The bootstrap identity a node asks for its certificate with, bound to the role that lets
        // it ask and no more (machine-config-operator `manifests/machineconfigserver`: the
        // `node-bootstrapper` service account, ClusterRole `system:node-bootstrapper`); it holds
        // no `certificatesigningrequests/nodeclient`, so kube-controller-manager's csrapproving
        // controller leaves its requests to the machine approver.
        let bootstrap = [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-machine-config-operator"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "node-bootstrapper", "namespace": "openshift-machine-config-operator"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "system-bootstrap-node-bootstrapper"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
                "subjects": [{"kind": "ServiceAccount", "name": "node-bootstrapper", "namespace": "openshift-machine-config-operator"}]}),
        ];
        for o in &bootstrap {
            crate::cluster::apply_as(&client, o, MANAGER).await?;
        }
        Ok(Arc::new(Bridge {
            client,
            bootstrapper,
            audit_log,
            store: Mutex::new(store),
            machines: Mutex::new(Vec::new()),
        }))
    }

    /// The API server's deletions so far, from its audit log (`/_sim/kube/audit`): each with
    /// `time` (when the server received it), `user`, `verb` and `uri`.
    pub fn deletions(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.audit_log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| {
                e["stage"] == "ResponseComplete" && e["responseStatus"]["code"].as_i64().is_some_and(|c| c < 300)
            })
            .map(|e| {
                json!({"time": e["requestReceivedTimestamp"], "user": e["user"]["username"],
                    "verb": e["verb"], "uri": e["requestURI"]})
            })
            .collect()
    }

    /// Each Machine with where CAPZ holds it, as the last pass found them (`/_sim/machines`).
    pub fn machines(&self) -> Vec<Value> {
        self.machines.lock().expect("machines lock").clone()
    }

    /// Passes until the runtime stops; a pass that fails is logged and the next one tries again.
    pub async fn run(self: Arc<Self>, sim: Arc<dyn Floors>) {
        loop {
            if let Err(e) = self.pass(sim.as_ref()).await {
                eprintln!("xcsp-sim: a pass of the stand-ins failed (tried again): {e}");
            }
            tokio::time::sleep(PASS).await;
        }
    }

    async fn snapshot(&self) -> Result<BTreeMap<Key, Obj>, String> {
        let mut out = BTreeMap::new();
        for kind in KINDS {
            let list = match api(&self.client, kind, "").list(&Default::default()).await {
                Ok(l) => l,
                // A kind whose CRD is not installed (Cluster API's, on a cluster that runs none
                // until someone installs it) has no objects.
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(e) => return Err(format!("listing {}: {e}", kind.resource())),
            };
            for o in list.items {
                let mut value = serde_json::to_value(&o).map_err(|e| e.to_string())?;
                value["apiVersion"] = json!(kind.api_version());
                value["kind"] = json!(kind.kind);
                if let Some(m) = value["metadata"].as_object_mut() {
                    m.remove("managedFields");
                }
                let ns = value["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
                let name = value["metadata"]["name"].as_str().unwrap_or_default().to_string();
                out.insert(key(kind, if kind.namespaced { &ns } else { "" }, &name), Obj { kind, value });
            }
        }
        Ok(out)
    }

    /// One pass: read, run the stand-ins, write back what they own.
    async fn pass(&self, sim: &dyn Floors) -> Result<(), String> {
        let snapshot = self.snapshot().await?;
        let (after, posting) = self.stand_ins(sim, snapshot.clone());
        // What a stand-in made first, then what it changed: an object that names another (a
        // pool's status its rendered config) is written after the one it names, as the operators
        // themselves order their writes.
        let (made, changed): (Vec<_>, Vec<_>) = after.iter().partition(|(k, _)| !snapshot.contains_key(*k));
        for (k, obj) in made.into_iter().chain(changed) {
            let before = snapshot.get(k);
            if let Err(e) = self.write(obj, before).await {
                eprintln!("xcsp-sim: writing {} {}/{}: {e}", obj.kind.kind, k.2, k.3);
            }
        }
        for node in &posting {
            self.renew(node).await?;
        }
        self.finish_pod_deletions(&posting).await
    }

    /// What a kubelet does for a Pod being deleted on its node once its containers stopped: the
    /// final delete with a grace period of 0 (kubernetes `pkg/kubelet/status/status_manager.go`
    /// `syncPod`, `canBeDeleted`). No container runs here, so the world's posting kubelets do it
    /// at once; without it a DaemonSet's rollout would wait on them forever.
    async fn finish_pod_deletions(&self, nodes: &[String]) -> Result<(), String> {
        if nodes.is_empty() {
            return Ok(());
        }
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::all(self.client.clone());
        let list = pods.list(&Default::default()).await.map_err(|e| format!("listing Pods: {e}"))?;
        for p in list.items {
            let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| nodes.iter().any(|x| x == n));
            if !on || p.metadata.deletion_timestamp.is_none() {
                continue;
            }
            let (ns, name) = (p.metadata.namespace.unwrap_or_default(), p.metadata.name.unwrap_or_default());
            let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), &ns);
            let now = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
            match api.delete(&name, &now).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(format!("deleting Pod {ns}/{name}: {e}")),
            }
        }
        Ok(())
    }

    /// Runs the stand-ins on `snapshot`; answers the objects as they left them and the Nodes
    /// whose kubelet posts now.
    fn stand_ins(&self, sim: &dyn Floors, snapshot: BTreeMap<Key, Obj>) -> (BTreeMap<Key, Obj>, Vec<String>) {
        let clouds = sim.clouds();
        let world = clouds.world;
        let config = world.config();
        let link = Link::of(&clouds);
        let tokens = clouds.arm.tokens.lock().expect("tokens lock").last.clone();
        let access = clouds.arm.access.lock().expect("access lock").clone();
        let arm = clouds.arm.store.lock().expect("arm lock");
        let mut s = self.store.lock().expect("store lock");
        s.objects = snapshot;
        s.settle_machine_configs(world);
        super::openshift::settle_storage_operator(&mut s, &super::store::timestamp(world));
        let machines: Vec<Value> =
            s.objects.iter().filter(|(k, _)| k.1 == "machines").map(|(_, o)| o.value.clone()).collect();
        let deleting = |m: &Value| m["metadata"].get("deletionTimestamp").is_some();
        let real_capz = sim.real_capz();
        // A kubelet whose VM is gone posts nothing more; its Node stays until someone deletes it
        // (CAPI deletes no Node of a cluster without control-plane Machines:
        // `machine_controller.go` `isDeleteNodeAllowed`).
        let gone: Vec<String> =
            s.registered.keys().filter(|vm| arm.get(&vm.to_ascii_lowercase()).is_none()).cloned().collect();
        for vm in gone {
            if let Some(node) = s.registered.remove(&vm) {
                s.heartbeats.remove(&node);
                s.csrs.remove(&node);
                s.booted.remove(&node);
                s.updates.remove(&node);
                s.rebootstrapping.remove(&node);
                s.renewed.remove(&node);
            }
            s.boots.remove(&vm);
            s.kubelets.retain(|(v, _), _| *v != vm);
        }
        let mut found = Vec::new();
        for m in machines.iter().filter(|m| !deleting(m)) {
            let ns = m["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = m["metadata"]["name"].as_str().unwrap_or_default();
            // The Machine as CAPZ's scope sees it: CAPI copies the provider ID and addresses the
            // AzureMachine carries, which CAPZ wrote when it made the VM.
            let mut machine = m.clone();
            let am = s.value(CAPZ, "azuremachines", ns, name).cloned();
            if machine["spec"]["providerID"].is_null()
                && let Some(pid) = am.as_ref().and_then(|a| a["spec"]["providerID"].as_str())
            {
                machine["spec"]["providerID"] = json!(pid);
                machine["status"]["addresses"] = json!([{"type": "InternalDNS", "address": name}]);
            }
            let azure =
                joins::Azure { store: &arm, config: &config, link: &link, real_capz, tokens: &tokens, access: &access };
            let mut held = joins::held(&s, &machine, &azure);
            let registered = arm
                .of_kind(&crate::arm::kinds::VM)
                .find(|vm| vm.name == name)
                .is_some_and(|vm| s.registered.contains_key(&vm.id));
            if held.step == "boot" || (held.step == "dns" && registered) {
                let pointer = joins::vm_pointer_source(&arm, name).unwrap_or_default();
                let dns = (held.step == "dns").then(|| held.clone());
                let progress = boot::advance(&mut s, &arm, &link, &machine, &pointer, dns, world);
                held = progress.held;
            }
            // Pod traffic to the cluster's nodes, for a machine whose Node registered.
            let pod_network = registered.then(|| {
                let infra = config.openshift.as_ref().map(|o| o.infrastructure_name.as_str()).unwrap_or_default();
                let ipsec = config.openshift.as_ref().is_some_and(|o| o.ovn_ipsec);
                let subnet = joins::vm_subnet(&arm, name);
                match boot::pod_network(&link, &arm, name, infra, subnet.as_ref(), ipsec) {
                    Ok(()) => json!({"passes": true}),
                    Err(why) => json!({"passes": false, "message": why}),
                }
            });
            // Where its clock comes from, by the config its machine-config server serves.
            let time_source = registered.then(|| {
                let pointer = joins::vm_pointer_source(&arm, name).unwrap_or_default();
                let pool = pointer.rsplit_once("/config/").map(|(_, p)| p).unwrap_or_default();
                match boot::served_config(&s, pool).map_err(|h| h.message).and_then(|c| boot::time_source(&c)) {
                    Ok(source) => json!({"synchronized": true, "source": source}),
                    Err(why) => json!({"synchronized": false, "message": why}),
                }
            });
            found.push(json!({
                "namespace": ns, "name": name,
                "time_source": time_source,
                "machine_set": m["metadata"]["labels"]["cluster.x-k8s.io/set-name"],
                "held_at": held.step, "message": held.message, "source": held.source,
                "node_ref_needs": joins::node_ref_needs(&s, m),
                "pod_network": pod_network,
            }));
        }
        *self.machines.lock().expect("machines lock") = found;
        // The kubelets posting now: those whose heartbeat this pass renewed.
        let fresh = world.clock.now();
        let mut posting: Vec<String> = s
            .heartbeats
            .iter()
            .filter(|(_, at)| fresh.duration_since(**at) < PASS * 2)
            .map(|(n, _)| n.clone())
            .collect();
        // The cluster's own Nodes on AWS post whatever becomes of the link.
        if let Some(o) = config.openshift.as_ref() {
            posting.extend(super::openshift::control_plane_nodes(o));
        }
        (s.objects.clone(), posting)
    }

    /// Writes what a stand-in changed or made in `obj` (compared with `before`), through the
    /// subresource that carries it.
    async fn write(&self, obj: &Obj, before: Option<&Obj>) -> Result<(), String> {
        let kind = obj.kind;
        let ns = obj.value["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = obj.value["metadata"]["name"].as_str().unwrap_or_default();
        let owned = matches!(
            (kind.group, kind.plural),
            (CAPZ, "azuremachines")
                | ("", "nodes")
                | ("", "secrets")
                | (super::kinds::CERTIFICATES, "certificatesigningrequests")
                | (super::kinds::MACHINECONFIGURATION, _)
                // The `storage` operator's report and the node DaemonSet's stable generation
                // ([`super::openshift::settle_storage_operator`]).
                | (super::kinds::OPENSHIFT_CONFIG, "clusteroperators")
                | (super::kinds::APPS, "daemonsets")
        );
        if !owned {
            return Ok(());
        }
        let api = api(&self.client, kind, ns);
        let Some(before) = before else {
            // A Secret only the machine-config operator makes; no other kind of Secret is ours.
            if kind.plural == "secrets" && !name.ends_with("-user-data-managed") {
                return Ok(());
            }
            let as_whom = if kind.plural == "certificatesigningrequests" { &self.bootstrapper } else { &self.client };
            return create(as_whom, kind, &obj.value).await;
        };
        if comparable(&obj.value) != comparable(&before.value) {
            // Only what the stand-in changed (a Node's taints that someone else wrote since the
            // snapshot stay theirs, as a controller's patch of its own fields leaves them).
            let mut patch = json!({});
            for field in ["labels", "annotations"] {
                if obj.value["metadata"][field] != before.value["metadata"][field] {
                    patch["metadata"][field] = obj.value["metadata"][field].clone();
                }
            }
            let (now, was) = (&obj.value["spec"], &before.value["spec"]);
            if now != was {
                let keys = now
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                    .chain(was.as_object().into_iter().flatten().map(|(k, _)| k));
                for k in keys {
                    if now[k] != was[k] {
                        patch["spec"][k] = now[k].clone();
                    }
                }
            }
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| e.to_string())?;
        }
        let status = &obj.value["status"];
        if status.is_null() || *status == before.value["status"] {
            return Ok(());
        }
        match kind.plural {
            // The machine approver's approval goes through its own subresource.
            "certificatesigningrequests" => {
                let body = json!({"apiVersion": kind.api_version(), "kind": kind.kind, "metadata": {"name": name},
                    "status": {"conditions": status["conditions"]}});
                api.patch_subresource("approval", name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            // A kubelet posts Ready True or False, never Unknown: that is the node lifecycle
            // controller's.
            "nodes" if boot::ready_status(&obj.value) == "Unknown" => Ok(()),
            _ => api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
        }
    }

    /// The kubelet's heartbeat: its Lease in `kube-node-lease` (renewed every 10 s by a real
    /// kubelet, `pkg/kubelet/nodelease`; every pass here).
    async fn renew(&self, node: &str) -> Result<(), String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), "kube-node-lease");
        let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": node},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now}});
        leases
            .patch(node, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&lease))
            .await
            .map(|_| ())
            .map_err(|e| format!("renewing the Lease of {node}: {e}"))
    }
}

/// Creates an object, then writes its status (which a create of a kind with a status
/// subresource drops); an object that exists already is left as it is.
async fn create(client: &kube::Client, kind: &Kind, value: &Value) -> Result<(), String> {
    let ns = value["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = value["metadata"]["name"].as_str().unwrap_or_default();
    let api = api(client, kind, ns);
    let mut body = value.clone();
    if let Some(m) = body["metadata"].as_object_mut() {
        for k in ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"] {
            m.remove(k);
        }
    }
    let object: DynamicObject = serde_json::from_value(body.clone()).map_err(|e| e.to_string())?;
    match api.create(&PostParams { field_manager: Some(MANAGER.into()), ..Default::default() }, &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
        Err(e) => return Err(format!("creating {} {ns}/{name}: {e}", kind.kind)),
    }
    // A request's approval is written through its own subresource, by the next pass.
    if kind.status
        && kind.plural != "certificatesigningrequests"
        && body["status"].is_object()
        && body["status"] != json!({})
    {
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": body["status"]})))
            .await
            .map_err(|e| format!("writing the status of {} {ns}/{name}: {e}", kind.kind))?;
    }
    Ok(())
}

/// Waits until the API server enforces cluster-capi-operator's admission policy (its policy
/// and binding reach the admission plugin through an informer, so a request right after they
/// were written may pass): a dry-run create of a second Cluster in `openshift-cluster-api` is
/// refused. Within 30 s, else an error.
async fn enforced(client: &kube::Client, infra: &str) -> Result<(), String> {
    let kind = super::kinds::Kind::served(super::kinds::CAPI, "clusters").expect("clusters read");
    let api = api(client, kind, super::openshift::CAPI_NAMESPACE);
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": kind.api_version(), "kind": "Cluster",
        "metadata": {"name": format!("{infra}-admission-probe"), "namespace": super::openshift::CAPI_NAMESPACE},
        "spec": {"infrastructureRef": {"apiVersion": format!("{}/v1beta1", super::kinds::CAPZ), "kind": "AzureCluster", "name": "probe"}},
    }))
    .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match api.create(&PostParams { dry_run: true, ..Default::default() }, &probe).await {
            Err(kube::Error::Api(e)) if e.code == 403 => return Ok(()),
            other if std::time::Instant::now() > deadline => {
                return Err(format!("cluster-capi-operator's admission policy is not enforced after 30 s: {other:?}"));
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
