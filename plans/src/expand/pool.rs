//! A worker pool's resources: its network security group and subnet, its AzureMachineTemplate,
//! one MachineSet per zone and, if asked, a MachineHealthCheck.

use indexmap::IndexMap;
use xcsp_core::{Address, ResourceType as T, Value};

use super::Builder;
use crate::served::Read;
use crate::spec::{Egress, Image};
use crate::topology::{self, machine_sets};

/// `cluster`: the nodes a pool's machines need of their Cluster (the Cluster, its kubeconfig).
pub(super) fn expand_pool(b: &mut Builder, p: &crate::spec::Pool, vnet: &Address, cluster: &[&Address], rg: &Address) {
    let model = b.model;
    let name = p.name.value.as_str();
    let infra = &model.cluster.infrastructure_name.value;
    let c = &model.cluster;
    let mut rules = Vec::new();
    for (proto, from, to, what) in topology::node_ports(c.ovn_ipsec.value) {
        // An NSG rule names no ICMP type and ESP has no ports (network `networkSecurityGroup.json`:
        // `destinationPortRange` is a port, a range or `*`).
        let ports = match *proto {
            "icmp" | "esp" => "*".to_string(),
            _ if from == to => from.to_string(),
            _ => format!("{from}-{to}"),
        };
        for (src, which) in [(c.machine_network.value, "cluster nodes"), (c.cluster_network.value, "cluster pods")] {
            rules.push(Value::Map(
                [
                    ("protocol".to_string(), Value::string(*proto)),
                    ("ports".to_string(), Value::string(&ports)),
                    ("source".to_string(), Value::string(src.to_string())),
                    ("description".to_string(), Value::string(format!("{what} from {which}"))),
                ]
                .into_iter()
                .collect(),
            ));
        }
    }
    let nsg = b.add_azure(
        T::AzureNetworkSecurityGroup,
        name,
        None,
        &[name, topology::NSG_PART],
        vec![("rules", Value::List(rules))],
    );
    b.after(nsg, rg);
    let nsg_addr = b.addr(nsg);
    let subnet_name = b.azure_name(&[name]);
    let node = topology::pool_subnet_node(name);
    let nat = (p.egress.value == Egress::NatGateway).then(|| nat_gateway(b, &node, name, rg));
    let subnet = b.add(
        T::AzureSubnet,
        &node,
        None,
        vec![
            ("name", Value::string(&subnet_name)),
            ("virtual_network", Value::Unknown),
            ("address_prefix", Value::string(p.subnet_cidr.value.to_string())),
            ("network_security_group", Value::Unknown),
            // A private subnet (no implicit public address) unless the spec keeps Azure's default
            // outbound access (network `virtualNetwork.json` 2024-03-01, `defaultOutboundAccess`;
            // unset, a subnet made at that api-version has it).
            ("default_outbound_access", Value::Bool(p.egress.value == Egress::DefaultOutbound)),
            ("nat_gateway", Value::Null),
        ],
    );
    b.input(subnet, "virtual_network", vnet, "name");
    b.input(subnet, "network_security_group", &nsg_addr, "id");
    if let Some(nat) = &nat {
        b.input(subnet, "nat_gateway", nat, "id");
    }
    b.serves(subnet, "worker_pool", Some(name), "subnet_id", None, Read::Id);
    let subnet_addr = b.addr(subnet);
    let mut image_after = None;
    let image = match &p.image.value {
        Image::Marketplace { publisher, offer, sku, version } => Value::Map(
            [("publisher", publisher), ("offer", offer), ("sku", sku), ("version", version)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::string(v)))
                .collect(),
        ),
        Image::Id(id) => Value::Map([("id".to_string(), Value::string(id))].into_iter().collect()),
        Image::Vhd(vhd) => {
            let (id, version) = boot_image(b, vhd, rg);
            image_after = Some(version);
            Value::Map([("id".to_string(), Value::string(id))].into_iter().collect())
        }
    };
    // CAPZ refuses any change to an AzureMachineTemplate's `spec.template.spec`
    // (`internal/webhooks/azuremachinetemplate_webhook.go`, ValidateUpdate: "field is
    // immutable. Please create new resource instead"). The template's name and address carry a
    // digest of what it renders, so a change of size, image, disk or subnet is a new template;
    // the MachineSets move to it, and the old one goes only after them (engine::walk::apply).
    let template_attrs: Vec<(&str, Value)> = vec![
        ("vm_size", Value::string(&p.vm_size.value)),
        ("image", image),
        ("os_disk_size_gb", Value::int(p.os_disk_size_gb.value)),
        ("os_disk_type", Value::string(&p.os_disk_type.value)),
        ("subnet", Value::string(&subnet_name)),
        ("accelerated_networking", Value::Bool(p.accelerated_networking)),
        // Validate makes sure a pool's cluster block has one.
        ("ssh_public_key", Value::string(c.ssh_public_key.as_ref().map(|k| k.value.as_str()).unwrap_or_default())),
    ];
    let digest = template_digest(&template_attrs);
    let template_name = format!("{infra}-{name}-{digest}");
    let namespace = b.namespace.clone();
    let mut attrs = vec![("namespace", Value::string(&namespace)), ("name", Value::string(&template_name))];
    attrs.extend(template_attrs);
    let amt = b.add(T::K8sAzureMachineTemplate, &format!("{name}-{digest}"), None, attrs);
    b.after(amt, &subnet_addr);
    if let Some(version) = &image_after {
        b.after(amt, version);
    }
    b.in_namespace(amt);
    let amt_addr = b.addr(amt);
    let mut labels: IndexMap<String, Value> = p.labels.value.clone();
    labels.insert("node.openshift.io/cloud-provider".into(), Value::string("azure"));
    let taints: Vec<Value> = p
        .taints
        .value
        .iter()
        .map(|t| {
            Value::Map(
                [("key", &t.key), ("value", &t.value), ("effect", &t.effect)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Value::string(v)))
                    .collect(),
            )
        })
        .collect();
    labels.insert(xcsp_core::tags::POOL_LABEL.into(), Value::string(pool_label(b, name)));
    let user_data = expand_machine_config(b, p, &labels);
    // CAPI copies a Machine's `node-role.kubernetes.io/*` labels to its Node (openshift/cluster-api
    // `api/core/v1beta1/machine_types.go` `NodeRoleLabelPrefix`, the Machine controller's label
    // sync), once the Node is matched: `oc get nodes` shows the pool's role. The pool's
    // MachineConfigPool selects by the pool label, which the kubelet sets at registration.
    labels.insert(format!("node-role.kubernetes.io/{}", pool_role(b, name)), Value::string(""));
    expand_runtime_class(b, p, &taints);
    // A VM is made from what it needs to exist and boot right (the subnet, its network security
    // group, the identity, the bootstrap data) and the VNet's DNS servers, which it reads by DHCP
    // at boot and keeps until it restarts or renews its lease (Microsoft Learn, "Name resolution
    // for resources in Azure virtual networks"): not the link. So the MachineSets are made while
    // the gateway builds, and each VM, created in minutes, waits at its Ignition fetch, which
    // retries until the machine-config server answers (coreos/ignition `doc/operator-notes.md`,
    // "HTTP Backoff and Retry": every 5 s at most, without end). What needs the link follows it:
    // each MachineSet's `k8s_nodes_ready` (apply's wait for its Nodes Ready, whose time limit
    // thus runs from the link, not from the gateway's start) and the MachineHealthCheck after
    // them (its `nodeStartupTimeout` runs from a Machine's creation, cluster-api
    // `internal/controllers/machinehealthcheck/machinehealthcheck_targets.go`). Destroy removes
    // the cluster's objects, the machines with them, before any cloud resource.
    let dns: Vec<Address> = b
        .nodes
        .iter()
        .map(|n| &n.address)
        .filter(|a| a.rtype == T::AzureVnetDnsServers && a.name == p.network.value)
        .cloned()
        .collect();
    let link: Vec<Address> = b
        .nodes
        .iter()
        .map(|n| &n.address)
        .filter(|a| matches!(a.rtype, T::AzureVpnConnection | T::AwsVpnConnection) && a.name == p.network.value)
        .cloned()
        .collect();
    let mut waits = Vec::new();
    for (index, zone, replicas) in machine_sets(p) {
        let ms_name = topology::machine_set_name(infra, name, &model.azure.location.value, zone.as_deref());
        let mut attrs = vec![
            ("namespace", Value::string(&namespace)),
            ("name", Value::string(&ms_name)),
            ("cluster_name", Value::string(format!("{infra}-{}", p.network.value))),
            ("replicas", Value::int(replicas)),
            ("bootstrap_secret", Value::string(format!("{}-user-data", pool_role(b, name)))),
            ("infrastructure_template", Value::string(&template_name)),
            ("labels", Value::Map(labels.clone())),
            ("taints", Value::List(taints.clone())),
        ];
        if let Some(z) = zone {
            attrs.push(("failure_domain", Value::string(z)));
        }
        let ms = b.add(T::K8sMachineSet, name, index, attrs);
        b.after(ms, &amt_addr);
        b.after(ms, &user_data);
        for c in cluster {
            b.after(ms, c);
        }
        for d in &dns {
            b.after(ms, d);
        }
        // The ordering before the machines were made under the gateway, kept only as the
        // baseline `scripts/bench-apply.py --compare-ordering` measures against.
        if std::env::var_os(MACHINES_AFTER_LINK).is_some() {
            for t in &link {
                b.after(ms, t);
            }
        }
        let ms_addr = b.addr(ms);
        let wait = b.add(
            T::K8sNodesReady,
            name,
            index,
            vec![
                ("namespace", Value::string(&namespace)),
                ("name", Value::string(&ms_name)),
                ("replicas", Value::int(replicas)),
            ],
        );
        b.after(wait, &ms_addr);
        for t in &link {
            b.after(wait, t);
        }
        waits.push(b.addr(wait));
    }
    if p.machine_health_check {
        let mhc = b.add(
            T::K8sMachineHealthCheck,
            name,
            None,
            vec![
                ("namespace", Value::string(&namespace)),
                ("name", Value::string(format!("{infra}-{name}"))),
                ("cluster_name", Value::string(format!("{infra}-{}", p.network.value))),
                ("selector", Value::string(format!("{infra}-{name}"))),
                (
                    "max_unhealthy",
                    Value::int(
                        p.max_unhealthy
                            .as_ref()
                            .map_or(crate::spec::default_max_unhealthy(p.replicas.value), |m| m.value),
                    ),
                ),
                ("node_startup_timeout_seconds", Value::int(p.node_startup_timeout_seconds.value)),
                ("unhealthy_timeout_seconds", Value::int(p.unhealthy_timeout_seconds.value)),
            ],
        );
        for w in &waits {
            b.after(mhc, w);
        }
    }
}

/// Set in the environment, the MachineSets wait for the link's VPN connections as they did
/// before they were made while the gateway builds: a benchmark's baseline, not a setting.
const MACHINES_AFTER_LINK: &str = "XCSP_BENCH_MACHINES_AFTER_LINK";

/// The machine-config role of a pool: its MachineConfigPool's name, unique per stack (the
/// namespace is the stack's).
/// The value of the pool label ([`xcsp_core::tags::POOL_LABEL`]) its Nodes carry from their
/// registration: the kubelet sets it (`CUSTOM_KUBELET_LABELS`), so the MachineConfigPool and the
/// RuntimeClass select by it rather than by `node-role.kubernetes.io/<role>`, which the kubelet
/// may not set (openshift/kubernetes `plugin/pkg/admission/noderestriction/admission.go`: of the
/// node roles only master, worker, control-plane and etcd, and only at creation) and which arrives
/// only with CAPI's label sync, after the Node's machine is matched. In between, a Node with only
/// `node-role.kubernetes.io/worker` is the worker pool's (machine-config-operator
/// `pkg/helpers/helpers.go` `GetPoolsForNode`), whose node controller may move it to the worker's
/// rendered config, with the AWS units, and reboot it.
fn pool_label(b: &Builder, pool: &str) -> String {
    crate::spec::pool_label(&b.model.cluster, pool)
}

fn pool_role(b: &Builder, pool: &str) -> String {
    crate::spec::pool_role(&b.model.stack, &b.model.cluster, pool)
}

/// Whether the kubelet may set label `key` on its own Node: any key but those in the
/// kubernetes.io and k8s.io domains (their subdomains too), an unprefixed one (`gpu=true`)
/// included: a label's namespace is its prefix, empty without one, and the kubelet's
/// `--node-labels` check and NodeRestriction admission refuse the Kubernetes namespaces but for
/// the kubelet's own few (`kubelet.kubernetes.io`, `node.kubernetes.io`, the labels it sets
/// itself), which xcsp leaves to the kubelet (kubernetes `cmd/kubelet/app/options/options.go` and
/// `plugin/pkg/admission/noderestriction/admission.go`, `isKubernetesLabel`, `getLabelNamespace`;
/// the MCO's own `node.openshift.io/os_id` goes the same way). The others reach the Node through
/// CAPI's label sync, or not at all.
fn kubelet_may_set(key: &str) -> bool {
    let namespace = key.split_once('/').map_or("", |(d, _)| d);
    let kubernetes = |domain: &str| namespace == domain || namespace.ends_with(&format!(".{domain}"));
    !kubernetes("kubernetes.io") && !kubernetes("k8s.io")
}

/// The taints the node lifecycle controller puts on a Node it cannot hear from or that is not
/// ready, `NoExecute` (k8s.io/api `core/v1/well_known_taints.go` `TaintNodeUnreachable`,
/// `TaintNodeNotReady`): a Pod not tolerating them is evicted once its toleration's seconds pass.
const OUTAGE_TAINTS: [&str; 2] = ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"];

/// The taint a kubelet with an external cloud provider registers its Node with (k8s.io/cloud-provider
/// `api/well_known_taints.go` `TaintExternalCloudProvider`), which xcsp lifts.
const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// The CRI-O runtime handler the RuntimeClass names: the one every worker's CRI-O is configured
/// with and runs by default from OpenShift 4.18 (machine-config-operator
/// `templates/worker/01-worker-container-runtime/_base/files/crio.yaml`: `default_runtime = "crun"`;
/// `[crio.runtime.runtimes.crun]` and `runc` defined from 4.16), so a Pod that names the
/// RuntimeClass runs as it would without it.
pub const RUNTIME_HANDLER: &str = "crun";

/// The pool's RuntimeClass, named as its role: a Pod that names it (`runtimeClassName`) is placed
/// on the pool's Nodes, tolerates the pool's taints, and stays on a Node the control plane cannot
/// reach for the pool's `outage_tolerance_seconds` instead of the 300 s every other Pod gets.
///
/// Why a RuntimeClass: a link outage longer than about five minutes has the node lifecycle
/// controller taint every pool Node `unreachable:NoExecute`, and the taint eviction controller
/// deletes every Pod whose toleration (the `DefaultTolerationSeconds` admission plugin's 300 s)
/// ran out, while the VMs and their GPU work run on. The API server's `RuntimeClass` admission
/// plugin, on by default in every release, merges a RuntimeClass's `scheduling.tolerations` and
/// `nodeSelector` into each Pod that names it (kubernetes `plugin/pkg/admission/runtimeclass`
/// `setScheduling`, `tolerations.MergeTolerations`, which keeps the longer of two `NoExecute`
/// tolerations of one taint), and `DefaultTolerationSeconds` adds nothing to a Pod that already
/// tolerates the taint. No webhook to keep running, no cluster-wide default changed, no
/// namespace's Pods touched: a Pod opts in by one field, and any other Pod is evicted as before.
/// Rejected: `MutatingAdmissionPolicy` (not served on a Default cluster of 4.21-4.23), a webhook
/// (the controller would have to be up for every Pod creation), namespace default tolerations
/// (`PodTolerationRestriction`: every Pod of the namespace, on AWS nodes too, with no way out).
fn expand_runtime_class(b: &mut Builder, p: &crate::spec::Pool, taints: &[Value]) {
    let role = pool_role(b, &p.name.value);
    let seconds = p.outage_tolerance_seconds.value;
    let mut tolerations: Vec<Value> = taints.to_vec();
    // The pool's work may land on a Node no one has initialized yet (a scale-up or a remediation
    // while neither apply, `watch` nor the controller runs): the taint keeps other Pods off a
    // Node that may still lack the pool's own taints, not the pool's own Pods.
    tolerations.push(Value::Map(
        [
            ("key".to_string(), Value::string(UNINITIALIZED_TAINT)),
            ("operator".to_string(), Value::string("Exists")),
            ("effect".to_string(), Value::string("NoSchedule")),
        ]
        .into_iter()
        .collect(),
    ));
    for key in OUTAGE_TAINTS {
        tolerations.push(Value::Map(
            [
                ("key".to_string(), Value::string(key)),
                ("operator".to_string(), Value::string("Exists")),
                ("effect".to_string(), Value::string("NoExecute")),
                ("toleration_seconds".to_string(), Value::int(seconds)),
            ]
            .into_iter()
            .collect(),
        ));
    }
    b.add(
        T::K8sRuntimeClass,
        &p.name.value,
        None,
        vec![
            ("name", Value::string(&role)),
            ("handler", Value::string(RUNTIME_HANDLER)),
            ("pool_label", Value::string(pool_label(b, &p.name.value))),
            ("tolerations", Value::List(tolerations)),
            ("outage_tolerance_seconds", Value::int(seconds)),
        ],
    );
}

/// The pool's own machine configuration and bootstrap data: a MachineConfig of its role that
/// makes the kubelet register with the Azure VM's name and CAPZ's provider ID and the pool's
/// kubelet labels, in place of the AWS units every worker config of an AWS cluster carries; a
/// MachineConfigPool of that role that inherits the worker's configs (machine-config-operator
/// `docs/custom-pools.md`; `MergeMachineConfigs` puts a custom role's configs after the
/// worker's, so its units override theirs by name); and the copy, in the pool's namespace, of
/// the pointer ignition the machine-config operator writes for the pool
/// (`openshift-machine-api/<role>-user-data-managed`, `pkg/operator/sync.go`), as CAPZ reads
/// bootstrap data: key `value`, in the Machine's namespace (`azure/scope/machine.go`
/// `GetBootstrapData`). Answers the copy's address.
fn expand_machine_config(b: &mut Builder, p: &crate::spec::Pool, labels: &IndexMap<String, Value>) -> Address {
    let name = p.name.value.as_str();
    let role = pool_role(b, name);
    let kubelet_labels: Vec<String> = labels
        .iter()
        .filter(|(k, _)| kubelet_may_set(k))
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    let mut attrs = vec![
        ("name", Value::string(format!("99-{role}-azure"))),
        ("role", Value::string(&role)),
        ("kubelet_labels", Value::strings(kubelet_labels)),
    ];
    // A FIPS cluster's nodes boot in FIPS mode: the MCO turns it on for a pool whose merged
    // configs ask for it (`MergeMachineConfigs`: any config's `fips`). The pool inherits the
    // installer's `99-worker-fips`, and says so itself, so it does not hang on that config alone.
    if b.model.cluster.fips.value {
        attrs.push(("fips", Value::Bool(true)));
    }
    let mc = b.add(T::K8sMachineConfig, name, None, attrs);
    let mc_addr = b.addr(mc);
    let mcp = b.add(
        T::K8sMachineConfigPool,
        name,
        None,
        vec![("name", Value::string(&role)), ("pool_label", Value::string(pool_label(b, name)))],
    );
    b.after(mcp, &mc_addr);
    let mcp_addr = b.addr(mcp);
    let copy = b.add(
        T::K8sUserDataSecret,
        name,
        None,
        vec![
            ("namespace", Value::string(&b.namespace)),
            ("name", Value::string(format!("{role}-user-data"))),
            ("source", Value::string(format!("openshift-machine-api/{role}-user-data-managed"))),
            // Refresh reads whether the copy still holds what the operator wrote (it rotates the CA).
            ("in_sync", Value::Bool(true)),
        ],
    );
    b.after(copy, &mcp_addr);
    b.in_namespace(copy);
    b.addr(copy)
}

/// The first 8 hex digits of the sha256 of a template's rendered attributes.
/// The release's RHCOS VHD imported as the OpenShift installer imports it on Azure: a storage
/// account of the stack, the VHD copied into it as a page blob by Azure itself (Copy Blob from the
/// release's URL: xcsp never downloads it), a Compute Gallery with a Generation 2 image definition
/// of the VHD's architecture, and an image version made from the blob. One of each per stack (the
/// definition and version per architecture), shared by every pool that boots the same VHD.
/// Answers the image version's ARM id (known now: every name is) and its node.
fn boot_image(b: &mut Builder, vhd: &crate::spec::RhcosVhd, rg: &Address) -> (String, Address) {
    use sha2::{Digest, Sha256};
    let az = &b.model.azure;
    let stack = b.model.stack.clone();
    let arch = vhd.arch.clone();
    let version_name = vhd.gallery_version();
    // A storage account name is 3-24 lowercase letters and digits, unique across Azure.
    let digest = hex::encode(Sha256::digest(
        format!("{}/{}/{stack}", az.subscription_id.value, az.resource_group.value).as_bytes(),
    ));
    let account_name = format!("xcsp{}", &digest[..16]);
    // A gallery's name is letters, digits, periods and underscores.
    let gallery_name: String = format!("{stack}_images")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' })
        .collect();
    let definition = format!("rhcos-gen2-{}", vhd.gallery_architecture().to_ascii_lowercase());
    let version_id = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/galleries/{gallery_name}/images/{definition}/versions/{version_name}",
        az.subscription_id.value, az.resource_group.value
    );
    let version_addr = Address { rtype: T::AzureGalleryImageVersion, name: format!("rhcos_{arch}"), index: None };
    if b.nodes.iter().any(|n| n.address == version_addr) {
        return (version_id, version_addr);
    }
    let account_addr = Address { rtype: T::AzureStorageAccount, name: "images".into(), index: None };
    let gallery_addr = Address { rtype: T::AzureGallery, name: "images".into(), index: None };
    let location = Value::string(&az.location.value);
    let resource_group = Value::string(&az.resource_group.value);
    if !b.nodes.iter().any(|n| n.address == account_addr) {
        let account = b.add(
            T::AzureStorageAccount,
            "images",
            None,
            vec![
                ("name", Value::string(&account_name)),
                ("resource_group", resource_group.clone()),
                ("location", location.clone()),
                ("sku", Value::string("Standard_LRS")),
                ("kind", Value::string("StorageV2")),
            ],
        );
        b.after(account, rg);
        let gallery = b.add(
            T::AzureGallery,
            "images",
            None,
            vec![
                ("name", Value::string(&gallery_name)),
                ("resource_group", resource_group.clone()),
                ("location", location.clone()),
            ],
        );
        b.after(gallery, rg);
    }
    let blob = b.add(
        T::AzureStorageBlob,
        &format!("rhcos_{arch}"),
        None,
        vec![
            ("name", Value::string(vhd.file_name())),
            ("resource_group", resource_group.clone()),
            ("storage_account", Value::string(&account_name)),
            ("container", Value::string("vhd")),
            ("source_uri", Value::string(&vhd.url)),
            // A copy still running, failed or aborted is drift: apply waits for it, or copies again.
            ("copy_status", Value::string("success")),
        ],
    );
    b.after(blob, &account_addr);
    let blob_addr = b.addr(blob);
    let image = b.add(
        T::AzureGalleryImage,
        &format!("rhcos_{arch}"),
        None,
        vec![
            ("name", Value::string(&definition)),
            ("resource_group", resource_group.clone()),
            ("location", location.clone()),
            ("gallery", Value::string(&gallery_name)),
            ("os_type", Value::string("Linux")),
            ("hyper_v_generation", Value::string("V2")),
            ("architecture", Value::string(vhd.gallery_architecture())),
            (
                "identifier",
                Value::Map(
                    [("publisher", "xcsp"), ("offer", "rhcos"), ("sku", definition.as_str())]
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Value::string(v)))
                        .collect(),
                ),
            ),
        ],
    );
    b.after(image, &gallery_addr);
    let image_addr = b.addr(image);
    let version = b.add(
        T::AzureGalleryImageVersion,
        &format!("rhcos_{arch}"),
        None,
        vec![
            ("name", Value::string(&version_name)),
            ("resource_group", resource_group),
            ("location", location),
            ("gallery", Value::string(&gallery_name)),
            ("image", Value::string(&definition)),
            ("source_uri", Value::Unknown),
            ("storage_account_id", Value::Unknown),
            // A version Azure left `Failed` (its replication) is drift, and put again.
            ("provisioning_state", Value::string("Succeeded")),
        ],
    );
    b.input(version, "source_uri", &blob_addr, "url");
    b.input(version, "storage_account_id", &account_addr, "id");
    b.after(version, &image_addr);
    (version_id, version_addr)
}

fn template_digest(attrs: &[(&str, Value)]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (k, v) in attrs {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.to_json().to_string().as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())[..8].to_string()
}

#[cfg(test)]
mod tests {
    use super::kubelet_may_set;

    #[test]
    fn the_kubelet_sets_every_label_outside_the_kubernetes_namespaces() {
        for key in ["gpu", "nvidia.com/gpu.product", "node.openshift.io/cloud-provider", "xcsp.io/pool"] {
            assert!(kubelet_may_set(key), "{key}");
        }
        for key in ["node-role.kubernetes.io/gpu", "kubernetes.io/arch", "node-restriction.kubernetes.io/x", "k8s.io/y"]
        {
            assert!(!kubelet_may_set(key), "{key}");
        }
    }
}

/// The pool's way out: a Standard NAT gateway with one Standard static public IP, both without a
/// zone (Azure places a no-zone NAT gateway; "NAT gateway and availability zones", Microsoft Learn),
/// which serves every machine of the subnet whatever its zone. Returns the NAT gateway.
fn nat_gateway(b: &mut Builder, node: &str, pool: &str, rg: &Address) -> Address {
    let pip = b.add_azure(
        T::AzurePublicIp,
        node,
        None,
        &[pool, topology::NAT_PART, "ip"],
        vec![("sku", Value::string("Standard")), ("allocation", Value::string("Static"))],
    );
    b.after(pip, rg);
    let pip = b.addr(pip);
    let nat = b.add_azure(
        T::AzureNatGateway,
        node,
        None,
        &[pool, topology::NAT_PART],
        vec![
            ("sku", Value::string("Standard")),
            ("idle_timeout_minutes", Value::int(4)),
            ("public_ips", Value::List(vec![Value::Unknown])),
        ],
    );
    b.input(nat, "public_ips[0]", &pip, "id");
    b.addr(nat)
}
