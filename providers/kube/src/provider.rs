//! The Kubernetes provider: the pool's CAPZ/CAPI objects applied to the cluster with server-side
//! apply (field manager `xcsp`), read back in one list per kind, and deleted with the machines
//! they made gone first.
//!
//! - Apply never forces: a field another manager owns with another value is a conflict, reported
//!   with the manager and field (as `kubectl apply --server-side` does without `--force-conflicts`),
//!   so xcsp never silently takes a field back from an operator or a person.
//! - Objects carry the stack as a label and their address as an annotation: refresh lists each
//!   kind once across namespaces by the label and maps objects back by the annotation.
//! - A MachineSet is scaled to zero and its Machines are waited for before it is deleted, so the
//!   network they use outlives them (destroy deletes the Kubernetes objects first).

use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::json;
use xcsp_core::provider::{Attributes, BoxFuture, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{ADDRESS_TAG, Address, ProviderKind, ResourceType as T, STACK_TAG, Value};

use crate::connect::{KubeConfig, capi_version, client, machines, resource};

/// The field manager xcsp applies as.
pub const FIELD_MANAGER: &str = "xcsp";

/// CAPI's condition for a Cluster whose control plane can take workers (`clusterv1.ControlPlaneInitializedCondition`).
const CONTROL_PLANE_INITIALIZED: &str = "ControlPlaneInitialized";

/// The annotation that marks infrastructure its provider leaves alone (CAPI `ManagedByAnnotation`).
pub const MANAGED_BY: &str = "cluster.x-k8s.io/managed-by";

/// A call whose object is already gone (a delete, a scale of what went) as done.
fn absent_is_fine<T>(r: Result<T, ProviderError>) -> Result<(), ProviderError> {
    match r {
        Ok(_) | Err(ProviderError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The annotation xcsp writes on a CRD whose cleanup failed, to have it tried again at once
/// ([`KubeProvider::until_crd`]).
const CLEANUP_NUDGED: &str = "xcsp.io/cleanup-requeued";

/// Whether a deleted CRD's cleanup of its objects failed and waits out the finalizer's back-off:
/// condition `Terminating` with reason `InstanceDeletionFailed` (apiextensions-apiserver
/// `crd_finalizer.go` `deleteInstances`).
fn crd_cleanup_failed(crd: &serde_json::Value) -> bool {
    crd["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter().any(|c| c["type"] == "Terminating" && c["status"] == "True" && c["reason"] == "InstanceDeletionFailed")
    })
}

/// Now, in whole seconds, as a condition's `lastTransitionTime`.
fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// CustomResourceDefinitions.
fn crd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    )
}

/// ClusterRoles.
fn cluster_roles() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        "clusterroles",
    )
}

/// The pool Clusters' control planes ([`crate::control_plane`]).
fn control_planes() -> ApiResource {
    use crate::control_plane as cp;
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(cp::GROUP, cp::VERSION, cp::KIND), cp::PLURAL)
}

/// Secrets, for the copies xcsp reads at apply.
fn secrets() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets")
}

/// `key` of a Secret's `data`, decoded.
fn secret_bytes(secret: &DynamicObject, key: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(secret.data["data"][key].as_str()?).ok()
}

pub struct KubeProvider {
    client: kube::Client,
    config: KubeConfig,
    /// [`capi_version`], asked once, on the first use of a Cluster API kind.
    capi: tokio::sync::OnceCell<&'static str>,
}

impl std::fmt::Debug for KubeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The kubeconfig's credentials stay out of every output.
        f.debug_struct("KubeProvider").field("kubeconfig", &self.config.kubeconfig).finish_non_exhaustive()
    }
}

fn failed(address: &Address, code: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::Failed { address: address.to_string(), code: code.into(), message: message.into() }
}

/// What a kube error means for the operation: worth another try, or final.
fn classify(address: &Address, e: kube::Error) -> Result<ProviderError, ProviderError> {
    match e {
        kube::Error::Api(s) => {
            let causes: Vec<String> = s
                .details
                .as_ref()
                .map(|d| d.causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect())
                .unwrap_or_default();
            // The API server's message usually lists the causes already; add those it does not.
            let missing: Vec<String> = causes.into_iter().filter(|c| !s.message.contains(c.as_str())).collect();
            let message =
                if missing.is_empty() { s.message.clone() } else { format!("{} ({})", s.message, missing.join("; ")) };
            match s.code {
                404 => Err(ProviderError::NotFound { address: address.to_string() }),
                409 if s
                    .details
                    .as_ref()
                    .is_some_and(|d| d.causes.iter().any(|c| c.reason == "FieldManagerConflict")) =>
                {
                    Err(failed(
                        address,
                        "FieldManagerConflict",
                        format!(
                            "{message}; another field manager owns these fields: change them there, or remove them from that manager"
                        ),
                    ))
                }
                409 => Err(failed(address, "Conflict", message)),
                422 => Err(failed(address, "Invalid", message)),
                401 | 403 => Err(failed(
                    address,
                    if s.code == 401 { "Unauthorized" } else { "Forbidden" },
                    format!("{message}; check the kubeconfig's credentials and their RBAC for Cluster API objects"),
                )),
                429 | 500..=599 => Ok(failed(address, &format!("HTTP {}", s.code), message)),
                _ => Err(failed(address, &s.reason, message)),
            }
        }
        // A handshake the FIPS build refused goes no better on another try.
        other if xcsp_crypto::explain(&other).is_some() => Err(failed(address, "Connection", crate::why(&other))),
        other => Ok(failed(address, "Connection", crate::why(&other))),
    }
}

impl KubeProvider {
    /// A client for the cluster of `config.kubeconfig` (its current context, or `config.context`).
    pub async fn new(config: KubeConfig) -> Result<KubeProvider, String> {
        Ok(KubeProvider { client: client(&config).await?, config, capi: tokio::sync::OnceCell::new() })
    }

    /// The version of `cluster.x-k8s.io` the pool's objects are written and read in.
    async fn capi(&self) -> &'static str {
        self.capi.get_or_init(|| capi_version(&self.client)).await
    }

    /// The API of `address`'s kind in `namespace` (cluster-wide for a kind in no namespace).
    async fn api(&self, address: &Address, namespace: &str) -> Result<Api<DynamicObject>, ProviderError> {
        let ar = resource(address.rtype, self.capi().await)
            .ok_or_else(|| failed(address, "NotKubernetes", "not a Kubernetes object"))?;
        Ok(if address.rtype.cluster_scoped() {
            Api::all_with(self.client.clone(), &ar)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &ar)
        })
    }

    /// Runs `call` until it succeeds, fails for good, or `timeout` passes; 429, 5xx and
    /// connection failures are tried again with backoff.
    async fn retry<R, F, Fut>(&self, address: &Address, call: F) -> Result<R, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<R, kube::Error>>,
    {
        let deadline = Instant::now() + self.config.timeout;
        let mut wait = self.config.poll_interval.min(Duration::from_millis(500));
        loop {
            let e = match call().await {
                Ok(r) => return Ok(r),
                Err(e) => classify(address, e)?,
            };
            if Instant::now() + wait > deadline {
                return Err(e);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(30));
        }
    }

    /// Waits until Secret `ns/name` exists with every one of `keys` (a controller or operator
    /// writes it), saying what it waits for; answers it.
    async fn wait_for_secret(
        &self,
        a: &Address,
        ns: &str,
        name: &str,
        keys: &[&str],
        writer: &str,
        progress: &dyn Progress,
    ) -> Result<DynamicObject, ProviderError> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &secrets());
        let deadline = Instant::now() + self.config.timeout;
        loop {
            if let Some(s) = self.retry(a, || api.get_opt(name)).await?
                && keys.iter().all(|k| s.data["data"][*k].is_string())
            {
                return Ok(s);
            }
            if Instant::now() > deadline {
                return Err(failed(
                    a,
                    "NotWritten",
                    format!(
                        "Secret {ns}/{name} has no {} after {}s: {writer} has not written it",
                        keys.join(", "),
                        self.config.timeout.as_secs()
                    ),
                ));
            }
            progress.waiting(a, &format!("waiting for {writer} to write Secret {ns}/{name}"));
            tokio::time::sleep(self.config.poll_interval.min(Duration::from_secs(2))).await;
        }
    }

    /// The content of a copy xcsp writes from what the cluster holds (`crate::copied_at_apply`):
    /// the pool's pointer ignition, as CAPZ reads bootstrap data (`value`, `format: ignition`),
    /// or a kubeconfig with the pool's service-account token. None of it enters state or output.
    async fn copied_data(
        &self,
        a: &Address,
        attrs: &xcsp_core::attrs::Reader<'_>,
        ns: &str,
        progress: &dyn Progress,
    ) -> Result<Option<serde_json::Value>, ProviderError> {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        Ok(match a.rtype {
            T::K8sUserDataSecret => {
                let source = attrs.str_or_empty("source");
                let (src_ns, src_name) = source.split_once('/').unwrap_or(("openshift-machine-api", &source));
                let s = self
                    .wait_for_secret(a, src_ns, src_name, &["userData"], "the machine-config operator", progress)
                    .await?;
                Some(json!({ "value": s.data["data"]["userData"], "format": b64(b"ignition") }))
            }
            T::K8sKubeconfigSecret => {
                let token_secret = attrs.str_or_empty("token_secret");
                let s = self
                    .wait_for_secret(
                        a,
                        ns,
                        &token_secret,
                        &["token", "ca.crt"],
                        "the service-account tokens controller",
                        progress,
                    )
                    .await?;
                let token = String::from_utf8(secret_bytes(&s, "token").unwrap_or_default()).unwrap_or_default();
                let ca = secret_bytes(&s, "ca.crt").unwrap_or_default();
                let cluster = attrs.str_or_empty("cluster_name");
                let kc =
                    crate::kubeconfig::for_token(&cluster, &attrs.str_or_empty("server"), &ca, &token_secret, &token);
                Some(json!({ "value": b64(kc.as_bytes()) }))
            }
            _ => None,
        })
    }

    async fn apply(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed, ProviderError> {
        let a = req.address;
        if a.rtype == T::K8sClusterApiProvider {
            return self.apply_provider(req, progress).await;
        }
        if a.rtype == T::K8sNodesReady {
            return self.await_nodes(req, progress).await;
        }
        let object = crate::object(req.stack, a, req.attributes).map_err(|e| failed(a, "Unknown", e.to_string()))?;
        let mut object = crate::in_capi_version(object, self.capi().await);
        let reader = xcsp_core::attrs::Reader::new(a, req.attributes);
        let ns_of = object["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        if let Some(data) = self.copied_data(a, &reader, &ns_of, progress).await? {
            object["data"] = data;
        }
        if a.rtype == T::K8sMachineConfig {
            let found = self.worker_aws_units(a).await?;
            crate::machine_config::mask(&mut object["spec"]["config"], &found);
        }
        let (ns, name) = (
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let api = self.api(a, ns).await?;
        if a.rtype == T::K8sNamespace {
            // A namespace xcsp did not make is not taken over: destroy would delete it with
            // whatever else is in it.
            if let Some(found) = self.retry(a, || api.get_opt(name)).await? {
                let owner = found.metadata.labels.as_ref().and_then(|l| l.get(STACK_TAG)).cloned();
                if owner.as_deref() != Some(req.stack) {
                    let whose = owner.map_or("made outside xcsp".to_string(), |o| format!("stack `{o}`'s"));
                    return Err(failed(
                        a,
                        "NamespaceTaken",
                        format!(
                            "namespace {name} exists and is {whose}: the pool's objects need a namespace of their own (cluster.namespace)"
                        ),
                    ));
                }
            }
        }
        if a.rtype == T::K8sCluster && !object["spec"]["controlPlaneRef"].is_null() {
            let cp = object["spec"]["controlPlaneRef"]["name"].as_str().unwrap_or(name).to_string();
            self.ensure_control_plane(a, ns, &cp, &object["metadata"]["labels"]).await?;
        }
        let params = PatchParams::apply(FIELD_MANAGER);
        let patch = Patch::Apply(&object);
        let applied = self.retry(a, || api.patch(name, &params, &patch)).await?;
        if object["metadata"]["annotations"].get(MANAGED_BY).is_some() {
            // CAPZ leaves an externally managed AzureCluster alone, and CAPI waits for its
            // readiness: its manager sets `status.ready` (CAPZ `azurecluster_controller.go`,
            // `ResourceIsNotExternallyManaged`; CAPI's infra-cluster contract, "Externally managed
            // infrastructure"). xcsp manages it, and everything it describes exists by now.
            let ready = json!({ "status": { "ready": true } });
            let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            let ready = Patch::Merge(&ready);
            self.retry(a, || api.patch_status(name, &params, &ready)).await?;
        }
        if a.rtype == T::K8sCluster {
            self.control_plane_initialized(a, &api, name).await?;
        }
        let mut out = req.attributes.clone();
        out.insert("uid".into(), Value::string(applied.metadata.uid.clone().unwrap_or_default()));
        Ok(Observed { address: a.clone(), id: object_id(ns, name), attributes: out })
    }

    /// The AWS-only units of the cluster's worker configs (the MachineConfigs of role `worker`,
    /// which the pool inherits): what the release's templates render, read rather than
    /// remembered, so a unit a later release adds is masked too.
    async fn worker_aws_units(&self, a: &Address) -> Result<Vec<String>, ProviderError> {
        let Some(ar) = resource(T::K8sMachineConfig, "v1") else { return Ok(vec![]) };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let params = ListParams::default().labels(&format!("{}=worker", crate::machine_config::ROLE_LABEL));
        let list = match self.retry(a, || api.list(&params)).await {
            Ok(l) => l,
            Err(ProviderError::NotFound { .. }) => return Ok(vec![]),
            Err(e) => return Err(e),
        };
        Ok(crate::survey::read_worker_configs(&list.items).aws_units)
    }

    /// `k8s_nodes_ready`: the MachineSet `namespace/name`'s `replicas` Nodes Ready and
    /// schedulable ([`Self::nodes_ready`]). It follows the link in the graph, while the MachineSet
    /// does not, so its time limit runs from when the VMs can reach the cluster.
    async fn await_nodes(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed, ProviderError> {
        let a = req.address;
        let reader = xcsp_core::attrs::Reader::new(a, req.attributes);
        let (ns, name) = (reader.str_or_empty("namespace"), reader.str_or_empty("name"));
        if self.config.wait_for_nodes {
            let set = Address { rtype: T::K8sMachineSet, ..a.clone() };
            let api = self.api(&set, &ns).await?;
            self.nodes_ready(a, &api, &name, reader.opt_int("replicas").unwrap_or(1), progress).await?;
        }
        Ok(Observed { address: a.clone(), id: object_id(&ns, &name), attributes: req.attributes.clone() })
    }

    /// Waits for a MachineSet's machines to have Nodes that are Ready and schedulable: its
    /// `status.readyReplicas` (CAPI counts a Machine whose Node is Ready, `machineset_controller.go`)
    /// reaching `want`, and no Node of it left with the cloud provider's uninitialized taint, which
    /// this wait removes ([`crate::nodes`]); at most `machine_timeout`, saying how many are on the way.
    async fn nodes_ready(
        &self,
        a: &Address,
        api: &Api<DynamicObject>,
        name: &str,
        want: i64,
        progress: &dyn Progress,
    ) -> Result<(), ProviderError> {
        let deadline = Instant::now() + self.config.machine_timeout;
        // Look soon, then back off to the poll interval (a VM's boot takes minutes).
        let mut pause = Duration::from_millis(250).min(self.config.poll_interval);
        loop {
            let set = self.retry(a, || api.get(name)).await?;
            let ready = set.data["status"]["readyReplicas"].as_i64().unwrap_or(0);
            // The set's Machines, read once a poll for both uses below.
            let ns = set.metadata.namespace.clone().unwrap_or_default();
            let machines_api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &ns, &machines(self.capi().await));
            let of_set = crate::connect::of_set(name);
            let listed = self.retry(a, || machines_api.list(&of_set)).await?.items;
            // The Nodes registered so far are made schedulable (crate::nodes): no cloud
            // controller initializes an `azure://` Node.
            let init =
                crate::nodes::initialize_machines(&self.client, &listed).await.map_err(|e| failed(a, "Unknown", e))?;
            for n in &init.lifted {
                progress.waiting(
                    a,
                    &format!(
                        "Node {n}: removed {} (no cloud controller initializes an azure:// Node)",
                        crate::nodes::UNINITIALIZED
                    ),
                );
            }
            if ready >= want && init.left.is_empty() {
                return Ok(());
            }
            // A machine Azure will never make stops the wait now ([`crate::failure`]): waiting
            // `machine_timeout` would end the same way, half an hour later.
            if ready < want {
                let infra = crate::failure::azure_machines_in(&self.client, &ns).await;
                let failed_machines: Vec<(String, crate::failure::Terminal)> = listed
                    .iter()
                    .filter_map(|m| {
                        let terminal = crate::failure::of_machine(m, &infra)?;
                        Some((format!("{ns}/{}", m.metadata.name.clone().unwrap_or_default()), terminal))
                    })
                    .collect();
                if let Some((_, first)) = failed_machines.first() {
                    let each: Vec<String> = failed_machines
                        .iter()
                        .map(|(m, t)| format!("Machine {m} (AzureMachine {}): {}", t.azure_machine, t.describe()))
                        .collect();
                    return Err(failed(
                        a,
                        &first.code,
                        format!(
                            "{ready} of {want} Nodes of MachineSet {name} Ready, and {} of its machines will never be: {}",
                            failed_machines.len(),
                            each.join("; ")
                        ),
                    ));
                }
            }
            if Instant::now() > deadline {
                return Err(failed(
                    a,
                    "NodesNotReady",
                    format!(
                        "{ready} of {want} Nodes of MachineSet {name} Ready after {} min: `xcsp status` says where each machine is held",
                        self.config.machine_timeout.as_secs() / 60
                    ),
                ));
            }
            let machines = set.data["status"]["replicas"].as_i64().unwrap_or(0);
            progress.waiting(
                a,
                &format!("{ready} of {want} Nodes Ready ({machines} machines; VMs boot and join over the link)"),
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.config.poll_interval);
        }
    }

    /// The pool's Cluster has no control plane of its own (the cluster's is OpenShift's), so CAPI
    /// would never mark it initialized, and without that it never watches the Nodes that match
    /// its Machines (openshift/cluster-api `machine_controller.go` `watchClusterNodes`). OpenShift
    /// marks its own Cluster the same way (openshift/cluster-capi-operator
    /// `corecluster_controller.go` `ensureCoreClusterControlPlaneInitializedCondition`); xcsp does
    /// it for the Cluster it manages. Other conditions are kept: the status is read, the condition
    /// set or replaced, and written back against the version read (a conflict is tried again).
    async fn control_plane_initialized(
        &self,
        a: &Address,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> Result<(), ProviderError> {
        let deadline = Instant::now() + self.config.timeout;
        loop {
            let current = self.retry(a, || api.get_status(name)).await?;
            let status = &current.data["status"];
            // Both shapes, as OpenShift writes them: the v1beta1 condition, and the v1beta2 one
            // (reason `Initialized`, CAPI `ClusterControlPlaneInitializedReason`) that CAPI's
            // v1beta2 controllers read. Through the v1beta1 API the v1beta2 conditions live in
            // `status.v1beta2`; through v1beta2 they are `status.conditions`, and the v1beta1
            // ones `status.deprecated.v1beta1` (cluster-api `api/core/v1beta1/conversion.go`).
            let v1beta2 = self.capi().await == "v1beta2";
            let (v1, v2) = if v1beta2 {
                (&status["deprecated"]["v1beta1"]["conditions"], &status["conditions"])
            } else {
                (&status["conditions"], &status["v1beta2"]["conditions"])
            };
            if initialized(status) {
                return Ok(());
            }
            let at = now_rfc3339();
            let with = |list: &serde_json::Value, condition: serde_json::Value| {
                let mut list: Vec<serde_json::Value> = list.as_array().cloned().unwrap_or_default();
                list.retain(|c| c["type"] != CONTROL_PLANE_INITIALIZED);
                list.push(condition);
                list
            };
            let old =
                with(v1, json!({ "type": CONTROL_PLANE_INITIALIZED, "status": "True", "lastTransitionTime": at }));
            let new = with(
                v2,
                json!({ "type": CONTROL_PLANE_INITIALIZED, "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": at }),
            );
            let status = if v1beta2 {
                json!({ "conditions": new, "deprecated": { "v1beta1": { "conditions": old } } })
            } else {
                json!({ "conditions": old, "v1beta2": { "conditions": new } })
            };
            let patch =
                json!({ "metadata": { "resourceVersion": current.metadata.resource_version }, "status": status });
            let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            let patch = Patch::Merge(&patch);
            match api.patch_status(name, &params, &patch).await {
                Ok(_) => return Ok(()),
                // Someone wrote the status since it was read: read it again.
                Err(kube::Error::Api(s)) if s.code == 409 && Instant::now() < deadline => {}
                Err(e) => match classify(a, e) {
                    Ok(passing) if Instant::now() < deadline => {
                        tracing::debug!("{a}: {passing}; trying the status write again");
                    }
                    Ok(e) | Err(e) => return Err(e),
                },
            }
            tokio::time::sleep(self.config.poll_interval.min(Duration::from_millis(500))).await;
        }
    }

    async fn remove(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<(), ProviderError> {
        let a = req.address;
        if a.rtype == T::K8sClusterApiProvider {
            return self.remove_provider(req, progress).await;
        }
        // A wait made nothing: the MachineSet's removal takes the machines.
        if a.rtype == T::K8sNodesReady {
            return Ok(());
        }
        let id = req.id.unwrap_or_default();
        let Some((ns, name)) = split_id(a, id) else {
            return Err(failed(a, "BadId", format!("`{id}` is not namespace/name")));
        };
        let api = self.api(a, ns).await?;
        if a.rtype == T::K8sMachineSet {
            // Scale to zero (xcsp owns spec.replicas) and wait for the machines to go, so their
            // VMs leave the subnet before the network goes.
            let zero = json!({ "spec": { "replicas": 0 } });
            let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            let patch = Patch::Merge(&zero);
            absent_is_fine(self.retry(a, || api.patch(name, &params, &patch)).await)?;
            let machines: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), ns, &machines(self.capi().await));
            let selector = crate::connect::of_set(name);
            let deadline = Instant::now() + self.config.machine_timeout;
            // The provider IDs of the machines going, to delete their Nodes after them.
            let mut provider_ids = std::collections::BTreeSet::new();
            loop {
                let listed = self.retry(a, || machines.list(&selector)).await?.items;
                provider_ids
                    .extend(listed.iter().filter_map(|m| m.data["spec"]["providerID"].as_str().map(String::from)));
                // A VM's kubelet names its Node after the VM, which CAPZ names after the Machine.
                provider_ids.extend(listed.iter().filter_map(|m| m.metadata.name.clone()));
                let left = listed.len();
                if left == 0 {
                    self.delete_nodes(a, ns, name, &provider_ids).await?;
                    break;
                }
                if Instant::now() > deadline {
                    return Err(ProviderError::Timeout {
                        address: a.to_string(),
                        operation: "delete",
                        timeout: self.config.machine_timeout,
                    });
                }
                let machines = if left == 1 { "machine" } else { "machines" };
                progress.waiting(a, &format!("waiting for {left} {machines} of MachineSet {name} to be deleted"));
                tokio::time::sleep(self.config.poll_interval).await;
            }
        }
        let params = DeleteParams::default();
        absent_is_fine(self.retry(a, || api.delete(name, &params)).await)?;
        let deadline = Instant::now() + self.config.timeout;
        loop {
            match self.retry(a, || api.get_opt(name)).await? {
                None if a.rtype == T::K8sCluster => return self.remove_control_plane(a, ns, name).await,
                None => return Ok(()),
                Some(_) if Instant::now() > deadline => {
                    return Err(ProviderError::Timeout {
                        address: a.to_string(),
                        operation: "delete",
                        timeout: self.config.timeout,
                    });
                }
                Some(_) => {
                    progress.waiting(a, "waiting for the API server to remove the object (finalizers)");
                    tokio::time::sleep(self.config.poll_interval).await;
                }
            }
        }
    }

    /// The Cluster's externally managed control plane ([`crate::control_plane`]): its CRD and the
    /// ClusterRole that lets CAPI's manager read it (cluster-wide, shared by every stack's
    /// Clusters), then the object `ns/name` and its status.
    async fn ensure_control_plane(
        &self,
        a: &Address,
        ns: &str,
        name: &str,
        labels: &serde_json::Value,
    ) -> Result<(), ProviderError> {
        use crate::control_plane as cp;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let crds: Api<DynamicObject> = Api::all_with(self.client.clone(), &crd_resource());
        let crd = cp::crd();
        let crd = Patch::Apply(&crd);
        self.retry(a, || crds.patch(cp::CRD, &params, &crd)).await?;
        // The API server serves the kind once the CRD is Established.
        self.until_crd(a, cp::CRD, "apply", established).await?;
        let roles: Api<DynamicObject> = Api::all_with(self.client.clone(), &cluster_roles());
        let role = cp::capi_role();
        let role = Patch::Apply(&role);
        self.retry(a, || roles.patch(cp::CAPI_ROLE, &params, &role)).await?;
        let objects: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &control_planes());
        let object = cp::object(ns, name, labels);
        let object = Patch::Apply(&object);
        self.retry(a, || objects.patch(name, &params, &object)).await?;
        let status = cp::status(&now_rfc3339());
        let merge = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        let status = Patch::Merge(&status);
        self.retry(a, || objects.patch_status(name, &merge, &status)).await?;
        Ok(())
    }

    /// After the Cluster `ns/name` is gone: its control plane object (CAPI deletes it with the
    /// Cluster; a Cluster CAPI never saw leaves it), then the CRD and CAPI's ClusterRole once no
    /// stack's control plane is left, and only those xcsp installed.
    async fn remove_control_plane(&self, a: &Address, ns: &str, name: &str) -> Result<(), ProviderError> {
        use crate::control_plane as cp;
        let crds: Api<DynamicObject> = Api::all_with(self.client.clone(), &crd_resource());
        let Some(crd) = self.retry(a, || crds.get_opt(cp::CRD)).await? else { return Ok(()) };
        let objects: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &control_planes());
        let params = DeleteParams::default();
        absent_is_fine(self.retry(a, || objects.delete(name, &params)).await)?;
        let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &control_planes());
        let every = ListParams::default();
        let left = self.retry(a, || all.list(&every)).await?.items;
        if left.iter().any(|o| o.metadata.deletion_timestamp.is_none()) {
            return Ok(());
        }
        let ours = |labels: &Option<std::collections::BTreeMap<String, String>>| {
            labels.as_ref().and_then(|l| l.get(cp::INSTALLED_BY)).is_some_and(|v| v == "xcsp")
        };
        let roles: Api<DynamicObject> = Api::all_with(self.client.clone(), &cluster_roles());
        if let Some(role) = self.retry(a, || roles.get_opt(cp::CAPI_ROLE)).await?
            && ours(&role.metadata.labels)
        {
            absent_is_fine(self.retry(a, || roles.delete(cp::CAPI_ROLE, &params)).await)?;
        }
        if ours(&crd.metadata.labels) {
            absent_is_fine(self.retry(a, || crds.delete(cp::CRD, &params)).await)?;
            // The API server removes a CRD once its objects are gone (its `CustomResourceCleanup`
            // finalizer): the destroy ends when it has.
            self.until_crd(a, cp::CRD, "delete", |found| found.is_none()).await?;
        }
        Ok(())
    }

    /// Reads CRD `name` until `done` holds of it (`None`: gone), within the provider's timeout.
    ///
    /// A deleted CRD goes once the API server's finalizer has removed its objects, and that
    /// finalizer retries a failed cleanup on its work queue's per-item back-off
    /// (apiextensions-apiserver `pkg/controller/finalizer/crd_finalizer.go`, `AddRateLimited`;
    /// client-go's default: 5 ms doubling to 1,000 s), so a failure of a moment (`could not list
    /// instances: storage is (re)initializing`, the watch cache of a CRD nothing had listed yet)
    /// can keep it `Terminating` for minutes. Any change to the CRD other than that condition
    /// queues it again at once (`updateCustomResourceDefinition`): while the CRD says
    /// `InstanceDeletionFailed`, an annotation is written to it, every 2 s at most.
    async fn until_crd(
        &self,
        a: &Address,
        name: &str,
        operation: &'static str,
        done: impl Fn(Option<&DynamicObject>) -> bool,
    ) -> Result<(), ProviderError> {
        let crds: Api<DynamicObject> = Api::all_with(self.client.clone(), &crd_resource());
        let deadline = Instant::now() + self.config.timeout;
        let mut nudged: Option<Instant> = None;
        loop {
            let found = self.retry(a, || crds.get_opt(name)).await?;
            if done(found.as_ref()) {
                return Ok(());
            }
            if found.as_ref().is_some_and(|crd| crd_cleanup_failed(&crd.data))
                && nudged.is_none_or(|t| t.elapsed() >= Duration::from_secs(2))
            {
                let patch = Patch::Merge(json!({"metadata": {"annotations": {CLEANUP_NUDGED: now_rfc3339()}}}));
                let params = PatchParams::default();
                absent_is_fine(self.retry(a, || crds.patch(name, &params, &patch)).await)?;
                nudged = Some(Instant::now());
            }
            if Instant::now() > deadline {
                return Err(ProviderError::Timeout { address: a.to_string(), operation, timeout: self.config.timeout });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Deletes the Nodes of MachineSet `ns/set`, whose machines are all gone: those whose provider
    /// ID or name is one of `provider_ids` (the machines' provider IDs and names: CAPZ names a VM,
    /// and its kubelet its Node, after the Machine), and those CAPI annotated as the set's (`cluster.x-k8s.io/owner-kind`,
    /// `owner-name`, `cluster-namespace`, cluster-api `api/core/v1beta2/common_types.go`), such as
    /// the Node of a machine replaced earlier.
    /// CAPI deletes a deleted Machine's Node only in a cluster with control-plane Machines
    /// (cluster-api `internal/controllers/machine/machine_controller.go` `isDeleteNodeAllowed`:
    /// "no control plane members"); an OpenShift cluster's control plane is no CAPI Machine, and
    /// AWS's cloud controller cannot look an `azure://` provider ID up to remove it, so without
    /// this the pool's Nodes would stay, `NotReady`, after the pool is gone.
    async fn delete_nodes(
        &self,
        a: &Address,
        ns: &str,
        set: &str,
        provider_ids: &std::collections::BTreeSet<String>,
    ) -> Result<(), ProviderError> {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        let all = ListParams::default();
        let listed = self.retry(a, || nodes.list(&all)).await?.items;
        let params = DeleteParams::default();
        for n in listed {
            let pid = n.spec.as_ref().and_then(|s| s.provider_id.clone()).unwrap_or_default();
            let Some(name) = n.metadata.name.clone() else { continue };
            let annotation = |k: &str| n.metadata.annotations.as_ref().and_then(|m| m.get(k)).map(String::as_str);
            let the_sets = annotation("cluster.x-k8s.io/owner-kind") == Some("MachineSet")
                && annotation("cluster.x-k8s.io/owner-name") == Some(set)
                && annotation("cluster.x-k8s.io/cluster-namespace") == Some(ns);
            if the_sets || provider_ids.contains(&pid) || provider_ids.contains(&name) {
                absent_is_fine(self.retry(a, || nodes.delete(&name, &params)).await)?;
            }
        }
        Ok(())
    }

    /// The objects of `rtype` labelled with `stack`, and those state records (`known`: address
    /// and `namespace/name`) that the label selector missed (their label was changed), by name.
    async fn list(&self, stack: &str, rtype: T, known: &[Observed]) -> Result<Vec<Observed>, ProviderError> {
        if rtype == T::K8sClusterApiProvider {
            return self.list_providers(stack, known).await;
        }
        // A wait recorded stands while its MachineSet does (gone, it is waited for again).
        if rtype == T::K8sNodesReady {
            let mut out = Vec::new();
            for k in known.iter().filter(|k| k.address.rtype == rtype) {
                let Some((ns, name)) = split_id(&k.address, &k.id) else { continue };
                let set = Address { rtype: T::K8sMachineSet, ..k.address.clone() };
                let api = self.api(&set, ns).await?;
                if self.retry(&k.address, || api.get_opt(name)).await?.is_some() {
                    out.push(Observed { address: k.address.clone(), id: k.id.clone(), attributes: Attributes::new() });
                }
            }
            return Ok(out);
        }
        let probe = Address::new(rtype, "refresh");
        let Some(ar) = resource(rtype, self.capi().await) else { return Ok(Vec::new()) };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let params = ListParams::default().labels(&format!("{STACK_TAG}={stack}"));
        let list = match self.retry(&probe, || api.list(&params)).await {
            Ok(l) => l,
            // The kind is not served (its CRD is not installed yet): none of its objects exist.
            Err(ProviderError::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for o in &list.items {
            let Some(address) = o
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ADDRESS_TAG))
                .and_then(|a| a.parse::<Address>().ok())
            else {
                continue;
            };
            if address.rtype != rtype {
                continue;
            }
            out.push(self.observed(o, address).await?);
        }
        for Observed { address, id, .. } in known.iter().filter(|k| k.address.rtype == rtype) {
            if out.iter().any(|o| &o.id == id) {
                continue;
            }
            let Some((ns, name)) = split_id(address, id) else { continue };
            let api = self.api(address, ns).await?;
            if let Some(o) = self.retry(address, || api.get_opt(name)).await? {
                out.push(self.observed(&o, address.clone()).await?);
            }
        }
        Ok(out)
    }
}

/// A CRD the API server serves: `Established` (its kinds answer once it is).
fn established(found: Option<&DynamicObject>) -> bool {
    found.is_some_and(|c| {
        c.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
    })
}

/// The kinds of a provider's objects that destroy removes, in order: the webhooks first (nothing
/// calls a manager that is going), the manager and what it uses, its namespace, its CRDs last.
const PROVIDER_KINDS: &[(&str, &str, &str, &str)] = &[
    ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    ("apps", "v1", "Deployment", "deployments"),
    ("", "v1", "Service", "services"),
    ("", "v1", "Secret", "secrets"),
    ("", "v1", "ConfigMap", "configmaps"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles"),
    ("", "v1", "ServiceAccount", "serviceaccounts"),
    ("", "v1", "Namespace", "namespaces"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"),
];

fn provider_resource(kind: &str) -> Option<ApiResource> {
    PROVIDER_KINDS
        .iter()
        .find(|k| k.2 == kind)
        .map(|(g, v, k, p)| ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), p))
}

impl KubeProvider {
    /// The Pods of manager Deployment `d` (its selector's labels, in its namespace), as JSON; none
    /// when they cannot be read (their health is then not shown, never guessed).
    async fn manager_pods(&self, d: &serde_json::Value) -> Vec<serde_json::Value> {
        let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
        let Some(labels) = d["spec"]["selector"]["matchLabels"].as_object().filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let selector: Vec<String> =
            labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods");
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        match api.list(&ListParams::default().labels(&selector.join(","))).await {
            Ok(list) => list.items.iter().filter_map(|p| serde_json::to_value(p).ok()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// What refresh records of a provider: its Deployment ([`crate::components::observe`]) and its
    /// Pods' restarts and last error ([`crate::components::pod_health`]), which no spec asks for and plan does not compare.
    async fn observe_provider(&self, d: &serde_json::Value) -> Attributes {
        let mut attributes = Attributes::new();
        for (k, v) in crate::components::observe(d) {
            attributes.insert(k.to_string(), Value::from_json(&v));
        }
        let (restarts, last_error) = crate::components::pod_health(&self.manager_pods(d).await);
        attributes.insert("restarts".into(), Value::int(restarts));
        if let Some(e) = last_error {
            attributes.insert("last_error".into(), Value::String(e));
        }
        attributes
    }

    /// Installs (or updates) one Cluster API provider from its components file
    /// ([`crate::components`]) and waits for its manager to be available.
    /// A provider's objects from its components file, checked against the planned digest.
    async fn components_objects(
        &self,
        req: &Request<'_>,
        r: &xcsp_core::attrs::Reader<'_>,
    ) -> Result<Vec<serde_json::Value>, ProviderError> {
        use crate::components as c;
        let a = req.address;
        let path = r.str_or_empty("components");
        let digest = r.str_or_empty("components_digest");
        let bytes = std::fs::read(&path).map_err(|e| failed(a, "Components", format!("cannot read {path}: {e}")))?;
        let found = {
            use sha2::Digest as _;
            hex::encode(sha2::Sha256::digest(&bytes))
        };
        if found != digest {
            return Err(failed(
                a,
                "Components",
                format!("{path} changed since the plan (sha256 {found}, planned {digest}): plan again"),
            ));
        }
        let provider = r.str_or_empty("name");
        let text = String::from_utf8(bytes).map_err(|_| failed(a, "Components", format!("{path} is not UTF-8")))?;
        let text = c::envsubst(&text, &c::variables(&provider)).map_err(|e| failed(a, "Components", e))?;
        let docs = c::documents(&text).map_err(|e| failed(a, "Components", format!("{path}: {e}")))?;
        // A CRD another manager owns stays theirs (preflight refused one the pool needs).
        let crds: Api<DynamicObject> = Api::all_with(self.client.clone(), &crd_resource());
        let mut skip = std::collections::BTreeSet::new();
        for d in docs.iter().filter(|d| d["kind"] == "CustomResourceDefinition") {
            let name = d["metadata"]["name"].as_str().unwrap_or_default().to_string();
            if let Some(existing) = self.retry(a, || crds.get_opt(&name)).await? {
                let owner = existing.metadata.labels.as_ref().and_then(|l| l.get(STACK_TAG)).cloned();
                if owner.as_deref() != Some(req.stack) {
                    skip.insert(name);
                }
            }
        }
        let (namespace, watch, image, authority) = (
            r.str_or_empty("namespace"),
            r.str_or_empty("watch_namespace"),
            r.str_or_empty("image"),
            r.str_or_empty("authority_host"),
        );
        let address = a.to_string();
        let install = c::Install {
            stack: req.stack,
            address: &address,
            provider: &provider,
            namespace: &namespace,
            watch_namespace: &watch,
            image: &image,
            authority_host: &authority,
            components: &path,
            digest: &digest,
        };
        Ok(c::transform(docs, &install, &skip))
    }

    /// The machine approver's objects, its image the cluster's own approver's (`from`: namespace/name).
    async fn approver_objects(
        &self,
        req: &Request<'_>,
        r: &xcsp_core::attrs::Reader<'_>,
        from: &str,
    ) -> Result<Vec<serde_json::Value>, ProviderError> {
        let a = req.address;
        let (ns, name) = from.split_once('/').unwrap_or(("", from));
        let deployments: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &provider_resource("Deployment").expect("deployments"));
        let Some(found) = self.retry(a, || deployments.get_opt(name)).await? else {
            return Err(failed(
                a,
                "NoApprover",
                format!(
                    "the cluster runs no machine approver (Deployment {from}) whose image xcsp would run for the pool's Machines"
                ),
            ));
        };
        let containers = found.data["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
        let image = containers
            .iter()
            .find(|c| c["name"] == "machine-approver-controller")
            .or(containers.first())
            .and_then(|c| c["image"].as_str())
            .unwrap_or_default()
            .to_string();
        let (provider, namespace, watch) =
            (r.str_or_empty("name"), r.str_or_empty("namespace"), r.str_or_empty("watch_namespace"));
        let address = a.to_string();
        let install = crate::components::Install {
            stack: req.stack,
            address: &address,
            provider: &provider,
            namespace: &namespace,
            watch_namespace: &watch,
            image: &image,
            authority_host: "",
            components: from,
            digest: "",
        };
        Ok(crate::components::approver(&install, &image))
    }

    async fn apply_provider(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed, ProviderError> {
        let a = req.address;
        let r = xcsp_core::attrs::Reader::new(a, req.attributes);
        let objects = match r.opt_str("image_from") {
            Some(from) => self.approver_objects(req, &r, &from).await?,
            None => self.components_objects(req, &r).await?,
        };
        use crate::components as c;
        let path = r.str_or_empty("components");
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for o in &objects {
            let kind = o["kind"].as_str().unwrap_or_default();
            let Some(ar) = provider_resource(kind) else {
                return Err(failed(a, "Components", format!("{path}: xcsp does not install a {kind}")));
            };
            let ns = o["metadata"]["namespace"].as_str();
            let api: Api<DynamicObject> = match ns {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
                None => Api::all_with(self.client.clone(), &ar),
            };
            let name = o["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let patch = Patch::Apply(o);
            self.retry(a, || api.patch(&name, &params, &patch)).await?;
        }
        // Its kinds are served once each CRD is Established.
        for o in objects.iter().filter(|o| o["kind"] == "CustomResourceDefinition") {
            self.until_crd(a, o["metadata"]["name"].as_str().unwrap_or_default(), "apply", established).await?;
        }
        let Some(d) = c::deployment(&objects) else {
            return Err(failed(a, "Components", format!("{path} holds no manager Deployment")));
        };
        let (ns, name) = (
            d["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
            d["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        );
        let deployments: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &ns, &provider_resource("Deployment").expect("deployments"));
        // A manager's start: its image pulled, its webhook certificate issued, its caches synced.
        let deadline = Instant::now() + self.config.timeout;
        loop {
            let found = self.retry(a, || deployments.get_opt(&name)).await?;
            let value = found.map(|d| serde_json::to_value(d).unwrap_or_default()).unwrap_or_default();
            let seen = self.observe_provider(&value).await;
            if seen.get("available") == Some(&Value::Bool(true)) {
                let mut out = req.attributes.clone();
                out.extend(seen);
                return Ok(Observed { address: a.clone(), id: object_id(&ns, &name), attributes: out });
            }
            let mut why = c::unavailable_because(&value);
            if let Some(Value::String(e)) = seen.get("last_error") {
                why = format!("{why}; {e}");
            }
            if Instant::now() > deadline {
                return Err(failed(
                    a,
                    "ManagerUnavailable",
                    format!("Deployment {ns}/{name} is not available after {}s: {why}", self.config.timeout.as_secs()),
                ));
            }
            progress.waiting(a, &format!("waiting for Deployment {ns}/{name} to be available: {why}"));
            tokio::time::sleep(self.config.poll_interval.min(Duration::from_secs(2))).await;
        }
    }

    /// Removes what xcsp installed of one provider (by its label and address, whatever the
    /// components file says now), CRDs last, and waits for them to go.
    async fn remove_provider(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<(), ProviderError> {
        let a = req.address;
        let address = a.to_string();
        let selector = ListParams::default().labels(&format!("{STACK_TAG}={}", req.stack));
        let mut crds_left = Vec::new();
        for (g, v, k, p) in PROVIDER_KINDS {
            let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), p);
            let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let listed = match self.retry(a, || all.list(&selector)).await {
                Ok(l) => l.items,
                Err(ProviderError::NotFound { .. }) => continue,
                Err(e) => return Err(e),
            };
            for o in listed {
                let ours = o.metadata.annotations.as_ref().and_then(|x| x.get(ADDRESS_TAG)) == Some(&address);
                if !ours {
                    continue;
                }
                let name = o.metadata.name.clone().unwrap_or_default();
                let api: Api<DynamicObject> = match &o.metadata.namespace {
                    Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
                    None => Api::all_with(self.client.clone(), &ar),
                };
                let params = DeleteParams::default();
                absent_is_fine(self.retry(a, || api.delete(&name, &params)).await)?;
                if *k == "CustomResourceDefinition" {
                    crds_left.push(name);
                }
            }
        }
        // The API server removes a CRD once its objects are gone.
        if !crds_left.is_empty() {
            progress.waiting(a, &format!("waiting for the provider's {} CRDs to be removed", crds_left.len()));
        }
        for name in &crds_left {
            self.until_crd(a, name, "delete", |found| found.is_none()).await?;
        }
        Ok(())
    }

    /// The providers xcsp installed, each read from its manager Deployment.
    async fn list_providers(&self, stack: &str, known: &[Observed]) -> Result<Vec<Observed>, ProviderError> {
        let probe = Address::new(T::K8sClusterApiProvider, "refresh");
        let ar = provider_resource("Deployment").expect("deployments");
        let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let params = ListParams::default().labels(&format!("{STACK_TAG}={stack}"));
        let mut out = Vec::new();
        let mut seen_ids = std::collections::BTreeSet::new();
        let mut found: Vec<DynamicObject> = self.retry(&probe, || all.list(&params)).await?.items;
        for k in known.iter().filter(|k| k.address.rtype == T::K8sClusterApiProvider) {
            let Some((ns, name)) = split_id(&k.address, &k.id) else { continue };
            if found
                .iter()
                .any(|d| d.metadata.namespace.as_deref() == Some(ns) && d.metadata.name.as_deref() == Some(name))
            {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
            if let Some(d) = self.retry(&probe, || api.get_opt(name)).await? {
                found.push(d);
            }
        }
        for d in found {
            let Some(address) = d
                .metadata
                .annotations
                .as_ref()
                .and_then(|x| x.get(ADDRESS_TAG))
                .and_then(|x| x.parse::<Address>().ok())
                .filter(|x| x.rtype == T::K8sClusterApiProvider)
            else {
                continue;
            };
            let id = object_id(
                d.metadata.namespace.as_deref().unwrap_or_default(),
                d.metadata.name.as_deref().unwrap_or_default(),
            );
            if !seen_ids.insert(id.clone()) {
                continue;
            }
            let value = serde_json::to_value(&d).unwrap_or_default();
            let attributes = self.observe_provider(&value).await;
            out.push(Observed { address, id, attributes });
        }
        Ok(out)
    }

    /// [`observe`], and for a copy xcsp writes from the cluster (`crate::copied_at_apply`) whether
    /// it still holds what its source holds (`in_sync`): the operator rotates the CA in the
    /// pointer ignition, and a token secret can be replaced. Only the verdict is recorded.
    async fn observed(&self, o: &DynamicObject, address: Address) -> Result<Observed, ProviderError> {
        let mut seen = observe(o, address.clone());
        let ns = o.metadata.namespace.clone().unwrap_or_default();
        let annotation = |key: &str| o.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned();
        let get = |ns: String, name: String| {
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &ns, &secrets());
            async move { api.get_opt(&name).await }
        };
        let in_sync = match address.rtype {
            T::K8sUserDataSecret => {
                let Some(source) = annotation(SOURCE_ANNOTATION) else { return Ok(seen) };
                let (src_ns, src_name) = source.split_once('/').unwrap_or_default();
                let src = self.retry(&address, || get(src_ns.to_string(), src_name.to_string())).await?;
                src.is_some_and(|s| {
                    s.data["data"]["userData"] == o.data["data"]["value"] && o.data["data"]["value"].is_string()
                })
            }
            T::K8sKubeconfigSecret => {
                let Some(token_secret) = annotation(TOKEN_ANNOTATION) else { return Ok(seen) };
                let src = self.retry(&address, || get(ns.clone(), token_secret.clone())).await?;
                let held = String::from_utf8(secret_bytes(o, "value").unwrap_or_default()).unwrap_or_default();
                src.is_some_and(|s| {
                    use base64::Engine as _;
                    let token = String::from_utf8(secret_bytes(&s, "token").unwrap_or_default()).unwrap_or_default();
                    let ca = base64::engine::general_purpose::STANDARD
                        .encode(secret_bytes(&s, "ca.crt").unwrap_or_default());
                    !token.is_empty() && held.contains(&token) && held.contains(&ca)
                })
            }
            T::K8sCluster => {
                // The control plane the Cluster names counts only while it exists and says it is
                // externally managed and initialized (a kill before its status write, or a hand's
                // delete, shows in the plan and apply writes it again).
                let Some(cp) = seen.attributes.get("control_plane").and_then(|v| v.as_str()).map(String::from) else {
                    return Ok(seen);
                };
                let name = cp.split_once('/').map_or(cp.as_str(), |(_, n)| n).to_string();
                let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &ns, &control_planes());
                let found = match self.retry(&address, || api.get_opt(&name)).await {
                    Ok(found) => found,
                    // The kind is not served (its CRD gone): no control plane.
                    Err(ProviderError::NotFound { .. }) => None,
                    Err(e) => return Err(e),
                };
                let whole = found.is_some_and(|o| {
                    o.data["status"]["externalManagedControlPlane"] == true
                        && o.data["status"]["initialization"]["controlPlaneInitialized"] == true
                });
                if !whole {
                    seen.attributes.shift_remove("control_plane");
                }
                return Ok(seen);
            }
            _ => return Ok(seen),
        };
        seen.attributes.insert("in_sync".into(), Value::Bool(in_sync));
        Ok(seen)
    }
}

/// The annotations on a copy that name its source, so refresh can compare them.
pub const SOURCE_ANNOTATION: &str = "xcsp.io/copied-from";
pub const TOKEN_ANNOTATION: &str = "xcsp.io/token-secret";

/// What refresh records of an object: its identity, and what people change by hand, read back
/// so a plan shows it as drift.
fn observe(o: &DynamicObject, address: Address) -> Observed {
    let (ns, name) = (o.metadata.namespace.clone().unwrap_or_default(), o.metadata.name.clone().unwrap_or_default());
    let mut attributes = Attributes::new();
    attributes.insert("namespace".into(), Value::string(&ns));
    attributes.insert("name".into(), Value::string(&name));
    attributes.insert("uid".into(), Value::string(o.metadata.uid.clone().unwrap_or_default()));
    let spec = &o.data["spec"];
    match address.rtype {
        T::K8sMachineSet => {
            if let Some(n) = spec["replicas"].as_i64() {
                attributes.insert("replicas".into(), Value::int(n));
            }
        }
        T::K8sAzureMachineTemplate => {
            if let Some(size) = spec["template"]["spec"]["vmSize"].as_str() {
                attributes.insert("vm_size".into(), Value::string(size));
            }
        }
        // The statuses xcsp writes after the object (`apply`): an AzureCluster's `ready`, a
        // Cluster's ControlPlaneInitialized in both its v1beta1 and v1beta2 shapes, whichever
        // version the object was read at.
        T::K8sAzureCluster => {
            attributes.insert("infrastructure_ready".into(), Value::Bool(o.data["status"]["ready"] == true));
        }
        // A RuntimeClass keeps `handler` and `scheduling` at the top level; how long its Pods
        // ride out an unreachable Node is read back, so a hand edit is drift.
        T::K8sRuntimeClass => {
            let unreachable = o.data["scheduling"]["tolerations"].as_array().and_then(|t| {
                t.iter().find(|t| t["key"] == "node.kubernetes.io/unreachable")?["tolerationSeconds"].as_i64()
            });
            if let Some(n) = unreachable {
                attributes.insert("outage_tolerance_seconds".into(), Value::int(n));
            }
        }
        T::K8sCluster => {
            attributes.insert("control_plane_initialized".into(), Value::Bool(initialized(&o.data["status"])));
            let r = &spec["controlPlaneRef"];
            if let (Some(kind), Some(name)) = (r["kind"].as_str(), r["name"].as_str()) {
                attributes.insert("control_plane".into(), Value::string(format!("{kind}/{name}")));
            }
        }
        _ => {}
    }
    Observed { id: object_id(&ns, &name), address, attributes }
}

/// Whether a Cluster's status, read at `v1beta1` or `v1beta2`, carries ControlPlaneInitialized
/// True in both shapes xcsp writes: `status.conditions`, and the other version's list
/// (`status.v1beta2.conditions` through v1beta1, `status.deprecated.v1beta1.conditions` through
/// v1beta2).
fn initialized(status: &serde_json::Value) -> bool {
    let set = |c: &serde_json::Value| {
        c.as_array().is_some_and(|c| c.iter().any(|c| c["type"] == CONTROL_PLANE_INITIALIZED && c["status"] == "True"))
    };
    set(&status["conditions"])
        && (set(&status["v1beta2"]["conditions"]) || set(&status["deprecated"]["v1beta1"]["conditions"]))
}

/// An object's id in state: `namespace/name`, or the name of a cluster-wide object.
fn object_id(ns: &str, name: &str) -> String {
    if ns.is_empty() { name.to_string() } else { format!("{ns}/{name}") }
}

/// `(namespace, name)` from an id; the id of an object in no namespace is its name.
fn split_id<'a>(address: &Address, id: &'a str) -> Option<(&'a str, &'a str)> {
    if address.rtype.cluster_scoped() { Some(("", id)) } else { id.split_once('/') }
}

impl Provider for KubeProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Kubernetes
    }

    fn refresh_known<'a>(
        &'a self,
        stack: &'a str,
        rtype: T,
        known: &'a [Observed],
    ) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(self.list(stack, rtype, known))
    }

    /// Server-side apply creates and updates alike.
    fn write<'a>(
        &'a self,
        req: Request<'a>,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move { self.apply(&req, progress).await })
    }

    fn delete<'a>(&'a self, req: Request<'a>, progress: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move { self.remove(&req, progress).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The condition the API server's CRD finalizer writes when listing or deleting the CRD's
    /// objects failed (then it waits out its back-off), as the world's kube-apiserver wrote it.
    #[test]
    fn a_failed_cleanup_is_read_from_the_crds_terminating_condition() {
        let crd = |reason: &str| {
            json!({"status": {"conditions": [
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
                {"type": "Terminating", "status": "True", "reason": reason,
                    "message": "could not list instances: storage is (re)initializing"}]}})
        };
        assert!(crd_cleanup_failed(&crd("InstanceDeletionFailed")));
        assert!(!crd_cleanup_failed(&crd("InstanceDeletionInProgress")));
        assert!(!crd_cleanup_failed(&json!({"status": {}})));
    }
}
