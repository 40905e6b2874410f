//! The machine-config operator's part of an OpenShift cluster, as far as a new machine pool meets
//! it (openshift/machine-config-operator, commit 7ff337a4f; rule rows in `sim/README.md`, "Rule
//! table (Kubernetes)"):
//!
//! - what install leaves: the `master` and `worker` pools, the worker's template MachineConfigs,
//!   and the installer's `worker-user-data` pointer secret in `openshift-machine-api`;
//! - the render controller: a pool's MachineConfigs are those its `machineConfigSelector` selects
//!   (a null or empty selector selects none); their merge is a `rendered-<pool>-<hash>`
//!   MachineConfig that the pool's `status.configuration` names, with its sources;
//! - the operator's sync: every pool gets `openshift-machine-api/<pool>-user-data-managed`, a
//!   pointer ignition config that fetches `/config/<pool>` from the machine-config server at the
//!   internal API host, port 22623, trusting the server's CA.
//!
//! It runs each pass of the stand-ins ([`super::bridge`]); what a deleted pool owned goes by the
//! cluster's garbage collector (kube-controller-manager's).

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::kinds::{Kind, MACHINECONFIGURATION};
use super::store::Store;
use crate::world::{OpenShift, World};

/// Where the machine API's secrets live (the installer's and the operator's user data).
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
/// The label that ties a MachineConfig to a pool's role.
pub const ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";
/// The machine-config server's port (`pkg/server/api.go` `SecurePort`).
pub const SERVER_PORT: u16 = 22623;
/// The Ignition spec version the operator writes (`ign3types.MaxVersion`, config v3_5).
const IGNITION_VERSION: &str = "3.5.0";
const MC_API: &str = "machineconfiguration.openshift.io/v1";

fn kind(group: &str, plural: &str) -> &'static Kind {
    Kind::served(group, plural).expect("a served kind")
}

/// `data:` URL of bytes as `vincent-petithory/dataurl` `EncodeBytes` writes one.
fn data_url(bytes: &[u8]) -> String {
    format!("data:text/plain;charset=utf-8;base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The pointer config of `role` (`pkg/controller/common/helpers.go` `PointerConfig`): merge the
/// config served at `https://<internal API host>:22623/config/<role>`, trusting `ca_pem`.
pub fn pointer_config(o: &OpenShift, role: &str, ca_pem: &str) -> Value {
    json!({
        "ignition": {
            "config": {"merge": [{"source": format!("https://{}:{SERVER_PORT}/config/{role}", internal_host(o))}]},
            "security": {"tls": {"certificateAuthorities": [{"source": data_url(ca_pem.as_bytes())}]}},
            "version": IGNITION_VERSION,
        }
    })
}

/// The host of `apiServerInternalURI` (`pkg/operator/sync.go` `getIgnitionHost`).
pub fn internal_host(o: &OpenShift) -> &str {
    let rest = o.api_internal_url.split_once("://").map_or(o.api_internal_url.as_str(), |(_, r)| r);
    rest.split(['/', ':']).next().unwrap_or_default()
}

/// The units and files of the template MachineConfigs an AWS cluster's worker pool carries (the
/// names only, which is what a pool of another cloud has to override): `templates/common/aws` is
/// rendered into `00-worker` on every AWS cluster (`pkg/controller/template/render.go`).
/// `aws-update-dns.service` is there on every AWS cluster, enabled only where the cluster hosts its
/// load balancers' DNS (`templates/common/aws/units/aws-update-dns.service.yaml`: `enabled` when
/// `cloudLoadBalancerConfig.dnsType` is `ClusterHosted`).
fn worker_templates(o: &OpenShift) -> Vec<(&'static str, Value)> {
    let unit =
        |name: &str| json!({"name": name, "enabled": true, "contents": format!("# {name}, from the MCO templates\n")});
    let file = |path: &str| json!({"path": path, "mode": 493, "contents": {"source": data_url(b"#!/bin/bash\n")}});
    let update_dns = json!({"name": AWS_UPDATE_DNS, "enabled": o.cluster_hosted_dns,
        "contents": "[Unit]\nDescription=Update Default AWS Resolver\nBefore=kubelet-dependencies.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/bin/update-dns-server 169.254.169.253\n\n[Install]\nRequiredBy=kubelet-dependencies.target\n"});
    vec![
        (
            "00-worker",
            json!({"systemd": {"units": [unit("aws-kubelet-nodename.service"), unit("aws-kubelet-providerid.service"), update_dns]},
                   "storage": {"files": [file("/usr/local/bin/aws-kubelet-nodename"), file("/usr/local/bin/aws-kubelet-providerid")]}}),
        ),
        (
            "01-worker-kubelet",
            json!({"systemd": {"units": [
                unit("kubelet.service"),
                {"name": "kubelet.service", "dropins": [{"name": "20-node-env.conf",
                    "contents": "[Service]\nEnvironmentFile=/etc/kubernetes/node.env\n"}]},
            ]}}),
        ),
        ("01-worker-container-runtime", json!({"storage": {"files": [file("/etc/crio/crio.conf.d/00-default")]}})),
    ]
}

/// Where the machine-config operator runs.
pub const MCO_NAMESPACE: &str = "openshift-machine-config-operator";
/// The AWS template unit that points the node's resolver at AWS's (enabled where the cluster hosts
/// its load balancers' DNS).
pub const AWS_UPDATE_DNS: &str = "aws-update-dns.service";

/// The counts a pool's status carries.
pub const COUNTS: [&str; 5] =
    ["machineCount", "updatedMachineCount", "readyMachineCount", "unavailableMachineCount", "degradedMachineCount"];

pub use crate::release::{RELEASE, RHCOS_BUILD};

/// ConfigMap `coreos-bootimages` (machine-config-operator `pkg/operator/bootimages.go`: keys
/// `releaseVersion` and `stream`, the CoreOS stream metadata of the release) with the Azure
/// Marketplace images without a purchase plan, `azureopenshift:aro4`, SKU `aro_<XY>` for
/// Generation 1 and `<XY>-v2` for Generation 2 (openshift/enhancements
/// `enhancements/rhcos/marketplace-images.md`). The build number is the world's.
fn boot_images() -> Value {
    let xy: String = RELEASE.split('.').take(2).collect();
    let image =
        |sku: String| json!({"publisher": "azureopenshift", "offer": "aro4", "sku": sku, "version": RHCOS_BUILD});
    let stream = json!({
        "stream": format!("rhcos-{}", RELEASE.rsplit_once('.').map_or(RELEASE, |(m, _)| m)),
        // The release's VHD, which an install on Azure imports into a gallery (coreos/stream-metadata-go
        // `stream/rhcos/rhcos.go` `Extensions.AzureDisk`: "copied into an image gallery").
        "architectures": {"x86_64": {"rhel-coreos-extensions": {
            "azure-disk": {"release": RHCOS_BUILD,
                "url": format!("https://rhcos.blob.core.windows.net/imagebucket/rhcos-{RHCOS_BUILD}-azure.x86_64.vhd")},
            "marketplace": {"azure": {"no-purchase-plan": {
                "hyperVGen1": image(format!("aro_{xy}")),
                "hyperVGen2": image(format!("{xy}-v2")),
            }}},
        }}},
    });
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "coreos-bootimages", "namespace": MCO_NAMESPACE},
        "data": {"releaseVersion": RELEASE, "stream": stream.to_string()}})
}

/// What install leaves for the machine-config operator's part (see the module doc).
pub fn seed(store: &mut Store, o: &OpenShift) {
    store.add_namespace(MACHINE_API_NAMESPACE);
    for role in ["master", "worker"] {
        // The install manifests' pools: each selects its role's MachineConfigs and the nodes
        // labelled with the role.
        let pool = json!({"apiVersion": MC_API, "kind": "MachineConfigPool", "metadata": {"name": role},
        "spec": {
            "machineConfigSelector": {"matchLabels": {ROLE_LABEL: role}},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{role}"): ""}},
            "paused": false,
        }});
        store.insert(kind(MACHINECONFIGURATION, "machineconfigpools"), pool);
    }
    for (name, config) in worker_templates(o) {
        let mut config = config;
        config["ignition"] = json!({"version": IGNITION_VERSION});
        let mc = json!({"apiVersion": MC_API, "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {ROLE_LABEL: "worker"},
                "annotations": {"machineconfiguration.openshift.io/generated-by-controller-version": "sim"}},
            "spec": {"config": config}});
        store.insert(kind(MACHINECONFIGURATION, "machineconfigs"), mc);
    }
    // A worker chrony config as OpenShift documents one ("Configuring chrony time service": a
    // MachineConfig of role worker writing /etc/chrony.conf), naming the cluster's time servers.
    if !o.worker_time_servers.is_empty() {
        let conf: String = o.worker_time_servers.iter().map(|s| format!("server {s} iburst\n")).collect::<String>()
            + "driftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\nlogdir /var/log/chrony\n";
        let mc = json!({"apiVersion": MC_API, "kind": "MachineConfig",
            "metadata": {"name": "99-worker-chrony", "labels": {ROLE_LABEL: "worker"}},
            "spec": {"config": {"ignition": {"version": IGNITION_VERSION}, "storage": {"files": [
                {"path": "/etc/chrony.conf", "mode": 420, "overwrite": true, "contents": {"source": data_url(conf.as_bytes())}}]}}}});
        store.insert(kind(MACHINECONFIGURATION, "machineconfigs"), mc);
    }
    // A FIPS install's configs (openshift/installer `pkg/asset/machines/machineconfig/fips.go`
    // `ForFIPSEnabled`: `99-<role>-fips`, `spec.fips: true`).
    if o.fips {
        for role in ["master", "worker"] {
            let mc = json!({"apiVersion": MC_API, "kind": "MachineConfig",
                "metadata": {"name": format!("99-{role}-fips"), "labels": {ROLE_LABEL: role}},
                "spec": {"config": {"ignition": {"version": IGNITION_VERSION}}, "fips": true}});
            store.insert(kind(MACHINECONFIGURATION, "machineconfigs"), mc);
        }
    }
    // The boot images of the cluster's release, as the operator publishes them.
    store.add_namespace(MCO_NAMESPACE);
    store.insert(kind("", "configmaps"), boot_images());
    // The installer's own pointer secret (openshift/installer `pkg/asset/machines`: `worker-user-data`,
    // key `userData`), the one OpenShift's secret-sync copies for its own Cluster.
    let user_data = pointer_config(o, "worker", &store.ca_pem);
    store.insert(kind("", "secrets"), user_data_secret("worker-user-data", &user_data, None));
}

/// A Secret in `openshift-machine-api` with `userData` (and the operator's `disableTemplating`).
fn user_data_secret(name: &str, config: &Value, label: Option<&str>) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut v = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": MACHINE_API_NAMESPACE},
        "data": {"userData": b64(&config.to_string()), "disableTemplating": b64("true\n")}});
    if let Some(l) = label {
        v["metadata"]["labels"] = json!({ l: "" });
    }
    v
}

/// Ignition's config merge for the parts the templates use: units by name and files by path, a
/// later config's entry replacing an earlier one's (coreos/ignition `docs/operator-notes.md`,
/// "Config Merging"; MCO `MergeMachineConfigs` orders a custom pool's configs after the worker's).
fn merge(configs: &[&Value]) -> Value {
    let mut units: Vec<Value> = Vec::new();
    let mut files: Vec<Value> = Vec::new();
    for c in configs {
        for u in c["systemd"]["units"].as_array().into_iter().flatten() {
            match units.iter_mut().find(|x| x["name"] == u["name"]) {
                Some(x) => {
                    for (k, v) in u.as_object().into_iter().flatten() {
                        x[k] = v.clone();
                    }
                }
                None => units.push(u.clone()),
            }
        }
        for f in c["storage"]["files"].as_array().into_iter().flatten() {
            match files.iter_mut().find(|x| x["path"] == f["path"]) {
                Some(x) => *x = f.clone(),
                None => files.push(f.clone()),
            }
        }
    }
    json!({"ignition": {"version": IGNITION_VERSION}, "systemd": {"units": units}, "storage": {"files": files}})
}

impl Store {
    /// The render controller and the operator's user-data sync, on an OpenShift world.
    pub fn settle_machine_configs(&mut self, world: &World) {
        let Some(o) = world.config().openshift else { return };
        let mcp = kind(MACHINECONFIGURATION, "machineconfigpools");
        let mc = kind(MACHINECONFIGURATION, "machineconfigs");
        let pools: Vec<Value> = self.objects.values().filter(|x| *x.kind == *mcp).map(|x| x.value.clone()).collect();
        for pool in pools {
            let name = pool["metadata"]["name"].as_str().unwrap_or_default().to_string();
            self.render_pool(mc, &pool);
            // `pkg/operator/sync.go` `syncMachineConfigPools`: one managed pointer secret per pool,
            // labelled as carrying a CA bundle the operator keeps current.
            let secret = format!("{name}-user-data-managed");
            if self.value("", "secrets", MACHINE_API_NAMESPACE, &secret).is_none() {
                let config = pointer_config(&o, &name, &self.ca_pem);
                let mut v = user_data_secret(
                    &secret,
                    &config,
                    Some("machineconfiguration.openshift.io/managed-ca-bundle-derived-from-configmap"),
                );
                v["metadata"]["ownerReferences"] = json!([{"apiVersion": MC_API, "kind": "MachineConfigPool",
                    "name": name, "uid": pool["metadata"]["uid"]}]);
                self.insert(kind("", "secrets"), v);
                world.journal("kubernetes", "machine-config-operator", &format!("{MACHINE_API_NAMESPACE}/{secret}"));
            }
        }
        self.settle_nodes(world);
    }

    /// `pkg/controller/render/render_controller.go` `syncMachineConfigPool`: the configs the pool
    /// selects (by name; a custom role's after the worker's), merged into `rendered-<pool>-<hash>`,
    /// which the pool's spec and status name. A pool that selects nothing is not rendered and says
    /// why in `RenderDegraded`.
    fn render_pool(&mut self, mc: &'static Kind, pool: &Value) {
        let name = pool["metadata"]["name"].as_str().unwrap_or_default();
        let selector = &pool["spec"]["machineConfigSelector"];
        let valid = selector_error(selector);
        let empty =
            selector.as_object().is_none_or(|o| o.values().all(|v| v.is_null() || v == &json!({}) || v == &json!([])));
        let mut chosen: Vec<(bool, String, Value)> = match &valid {
            None if !empty => self
                .objects
                .values()
                .filter(|x| *x.kind == *mc)
                .filter(|x| !x.value["metadata"]["ownerReferences"].is_array())
                .filter(|x| selects(selector, &x.value["metadata"]["labels"]))
                .map(|x| {
                    let worker = x.value["metadata"]["labels"][ROLE_LABEL] == "worker";
                    (!worker, x.value["metadata"]["name"].as_str().unwrap_or_default().to_string(), x.value.clone())
                })
                .collect(),
            _ => Vec::new(),
        };
        chosen.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut status = pool["status"].clone();
        if chosen.is_empty() {
            let why = match valid {
                Some(e) => format!("invalid label selector: {e}"),
                None if empty => "Pool has a nil or empty machineConfigSelector and selects no MachineConfigs".into(),
                None => format!("no MachineConfigs found matching selector for pool {name}"),
            };
            set_condition(&mut status, "RenderDegraded", "True", &why);
            set_condition(&mut status, "Updated", "False", "");
            status["configuration"] = json!({});
        } else {
            let configs: Vec<&Value> = chosen.iter().map(|c| &c.2["spec"]["config"]).collect();
            let merged = merge(&configs);
            // `MergeMachineConfigs`: FIPS is on when any selected config asks for it.
            let fips = chosen.iter().any(|c| c.2["spec"]["fips"] == true);
            let mut h = Sha256::new();
            h.update(merged.to_string().as_bytes());
            h.update([u8::from(fips)]);
            let rendered = format!("rendered-{name}-{}", &hex::encode(h.finalize())[..32]);
            if self.value(MACHINECONFIGURATION, "machineconfigs", "", &rendered).is_none() {
                let owner = json!([{"apiVersion": MC_API, "kind": "MachineConfigPool", "name": name,
                    "uid": pool["metadata"]["uid"], "controller": true}]);
                let v = json!({"apiVersion": MC_API, "kind": "MachineConfig",
                    "metadata": {"name": rendered, "ownerReferences": owner},
                    "spec": {"config": merged, "fips": fips}});
                self.insert(mc, v);
            }
            let source: Vec<Value> =
                chosen.iter().map(|c| json!({"apiVersion": MC_API, "kind": "MachineConfig", "name": c.1})).collect();
            status["configuration"] = json!({"name": rendered, "source": source});
            set_condition(&mut status, "RenderDegraded", "False", "");
        }
        // The counts and `Updated`/`Updating` are the node controller's ([`Store::settle_nodes`]).
        for k in COUNTS {
            if status[k].is_null() {
                status[k] = json!(0);
            }
        }
        status["observedGeneration"] = pool["metadata"]["generation"].clone();
        if status == pool["status"] {
            return;
        }
        let key = super::store::key(kind(MACHINECONFIGURATION, "machineconfigpools"), "", name);
        if let Some(mut obj) = self.objects.get(&key).cloned() {
            obj.value["status"] = status;
            obj.value["spec"]["configuration"] = obj.value["status"]["configuration"].clone();
            self.put(obj);
        }
    }
}

/// Sets the pool condition `kind` (type, status, message), keeping the others.
pub(super) fn set_condition(status: &mut Value, kind: &str, value: &str, message: &str) {
    let mut list: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let wanted = json!({"type": kind, "status": value, "message": message});
    match list.iter_mut().find(|c| c["type"] == kind) {
        Some(c) => *c = wanted,
        None => list.push(wanted),
    }
    status["conditions"] = Value::Array(list);
}

/// What is wrong with a `metav1.LabelSelector`, as apimachinery's `LabelSelectorAsSelector` says
/// it (`pkg/apis/meta/v1/helpers.go`, `labels.NewRequirement`): an operator it does not know, or
/// `In`/`NotIn` without values, `Exists`/`DoesNotExist` with some.
fn selector_error(selector: &Value) -> Option<String> {
    for e in selector["matchExpressions"].as_array().into_iter().flatten() {
        let values = e["values"].as_array().map_or(0, Vec::len);
        match e["operator"].as_str().unwrap_or_default() {
            "In" | "NotIn" if values == 0 => {
                return Some("for 'in', 'notin' operators, values set can't be empty".into());
            }
            "Exists" | "DoesNotExist" if values > 0 => {
                return Some("values set must be empty for exists and does not exist".into());
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => return Some(format!("{op:?} is not a valid label selector operator")),
        }
    }
    None
}

/// Whether a valid `metav1.LabelSelector` selects an object with `labels`: every `matchLabels`
/// pair and every `matchExpressions` requirement holds.
pub(super) fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels[k].as_str();
    let pairs = selector["matchLabels"].as_object().into_iter().flatten().all(|(k, v)| label(k) == v.as_str());
    pairs
        && selector["matchExpressions"].as_array().into_iter().flatten().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let among = |v: Option<&str>| {
                v.is_some_and(|v| e["values"].as_array().into_iter().flatten().any(|x| x.as_str() == Some(v)))
            };
            match e["operator"].as_str().unwrap_or_default() {
                "In" => among(label(key)),
                "NotIn" => !among(label(key)),
                "Exists" => label(key).is_some(),
                _ => label(key).is_none(),
            }
        })
}
