//! Expansion: a validated model becomes the resource nodes the pool needs, for the `ipsec`
//! driver with BGP the topology of docs/src/reference/cloud-facts.md: one AWS VGW, 2 customer gateways and 2 VPN
//! connections (4 tunnels) facing an active-active Azure VPN gateway with 2 public IPs,
//! 4 local network gateways and 4 connections; the workload identity; the CAPZ/CAPI objects.

mod network;
mod pool;

use indexmap::IndexMap;
use xcsp_core::{Address, ResourceType as T, Value};

use crate::graph::{Input, Node};
use crate::served::{self, Read, Served};
use crate::spec::{AzureCloud, Driver};
use crate::topology;
use crate::validate::Model;
use network::expand_network;
use pool::expand_pool;

pub use crate::topology::{CONTROL_PLANE_PORTS, DEFAULT_INSIDE_CIDRS, WORKER_PORTS, machine_sets};

/// The namespace OpenShift runs Cluster API in: the cluster's own Cluster lives there, and
/// OpenShift admits no other (the pool's objects go to [`crate::spec::pool_namespace`]).
pub const CAPI_NAMESPACE: &str = "openshift-cluster-api";

/// The label of the `k8s_namespace` node the pool's objects live in.
pub const NAMESPACE_NODE: &str = "pools";

struct Builder<'m> {
    model: &'m Model,
    /// The namespace of the pool's Kubernetes objects, and its node once added.
    namespace: String,
    namespace_node: Option<Address>,
    nodes: Vec<Node>,
    /// What the nodes serve of the computed exports.
    exports: Vec<(Address, Served)>,
}

impl Builder<'_> {
    /// Node `i` is made after the pool's namespace and deleted before it.
    fn in_namespace(&mut self, i: usize) {
        if let Some(ns) = self.namespace_node.clone() {
            self.after(i, &ns);
        }
    }

    fn add(&mut self, rtype: T, name: &str, index: Option<u32>, attrs: Vec<(&str, Value)>) -> usize {
        let address = Address { rtype, name: name.to_string(), index };
        let mut attributes: IndexMap<String, Value> = attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        // A VNet's DNS servers are a property of the VNet, which carries the tags; a blob is no
        // ARM resource (its provider marks it with metadata instead).
        if matches!(rtype.provider(), xcsp_core::ProviderKind::Aws | xcsp_core::ProviderKind::Azure)
            && !matches!(rtype, T::AzureVnetDnsServers | T::AzureStorageBlob)
        {
            attributes.insert("tags".into(), self.tags(&address));
        }
        self.nodes.push(Node {
            address,
            attributes,
            inputs: Vec::new(),
            depends_on: Vec::new(),
            prevent_destroy: false,
        });
        self.nodes.len() - 1
    }

    /// Adds an Azure resource that lives in the stack's resource group: its Azure name (the
    /// stack and `parts`), resource group and location come first, then `attrs`.
    fn add_azure(
        &mut self,
        rtype: T,
        name: &str,
        index: Option<u32>,
        parts: &[&str],
        attrs: Vec<(&str, Value)>,
    ) -> usize {
        let az = &self.model.azure;
        let mut all = vec![
            ("name", Value::string(self.azure_name(parts))),
            ("resource_group", Value::string(&az.resource_group.value)),
            ("location", Value::string(&az.location.value)),
        ];
        all.extend(attrs);
        let at = self.add(rtype, name, index, all);
        // Refresh reports a network resource ARM left `Failed`: drift, and apply puts it again.
        if matches!(
            rtype,
            T::AzureVirtualNetwork
                | T::AzureNetworkSecurityGroup
                | T::AzurePublicIp
                | T::AzureNatGateway
                | T::AzureVpnGateway
                | T::AzureLocalNetworkGateway
                | T::AzureVpnConnection
        ) {
            self.nodes[at].attributes.insert("provisioning_state".into(), Value::string("Succeeded"));
        }
        at
    }

    /// The spec's tags for the resource's cloud, then xcsp's stack and address tags (which win).
    fn tags(&self, address: &Address) -> Value {
        let mut tags = match address.rtype.provider() {
            xcsp_core::ProviderKind::Aws => self.model.aws.tags.value.clone(),
            _ => self.model.azure.tags.value.clone(),
        };
        let keys = xcsp_core::tags::keys_for(address.rtype.provider());
        tags.insert(keys.stack.to_string(), Value::string(&self.model.stack));
        tags.insert(keys.address.to_string(), Value::string(address.to_string()));
        Value::Map(tags)
    }

    /// `attribute` of node `at` is `output` of `from`, known once `from` exists.
    fn input(&mut self, at: usize, attribute: &str, from: &Address, output: &str) {
        let node = &mut self.nodes[at];
        let sensitive = from.rtype == T::PresharedKey;
        let unknown = if sensitive { Value::sensitive(Value::Unknown) } else { Value::Unknown };
        set_path(&mut node.attributes, attribute, unknown);
        node.inputs.push(Input { attribute: attribute.to_string(), from: from.clone(), output: output.to_string() });
    }

    /// Marks every node added since `start` as protected from destroy, if `protect`.
    fn protect_since(&mut self, start: usize, protect: bool) {
        for n in &mut self.nodes[start..] {
            n.prevent_destroy |= protect;
        }
    }

    fn after(&mut self, at: usize, dep: &Address) {
        self.nodes[at].depends_on.push(dep.clone());
    }

    fn addr(&self, at: usize) -> Address {
        self.nodes[at].address.clone()
    }

    /// Node `at` serves `attribute` of the computed exports of block `kind` `name` (`item` of it,
    /// for a list), read from its record as `read`.
    fn serves(&mut self, at: usize, kind: &str, name: Option<&str>, attribute: &str, item: Option<usize>, read: Read) {
        let served = Served { key: served::key(kind, name, attribute), item, read };
        self.exports.push((self.addr(at), served));
    }

    /// An Azure resource name: the stack and the spec's name, as the Azure naming rules allow.
    fn azure_name(&self, parts: &[&str]) -> String {
        topology::azure_name(&self.model.stack, parts)
    }
}

/// Sets `a` or `a[i]` in an attribute map.
fn set_path(attrs: &mut IndexMap<String, Value>, path: &str, v: Value) {
    match path.split_once('[') {
        None => {
            attrs.insert(path.to_string(), v);
        }
        Some((key, rest)) => {
            let i: usize = rest.trim_end_matches(']').parse().expect("paths are written by expand");
            if let Some(Value::List(items)) = attrs.get_mut(key)
                && i < items.len()
            {
                items[i] = v;
            }
        }
    }
}

fn unknowns(n: usize) -> Value {
    Value::List(vec![Value::Unknown; n])
}

/// A model's resource nodes, and what of the computed exports each serves.
#[derive(Debug, Clone)]
pub struct Expanded {
    pub nodes: Vec<Node>,
    /// Each node that serves a computed export, with how (`exports::computed` reads them).
    pub exports: Vec<(Address, Served)>,
}

/// The access CAPI needs to the cluster its Machines join, for a Cluster named `cluster`: CAPI
/// reaches the "workload cluster" through Secret `<cluster>-kubeconfig` (key `value`), read only
/// when it carries the `cluster.x-k8s.io/cluster-name` label (cluster-api `util/secret`,
/// `internal/setup/setup.go` `ManagerCacheOptions`). Here the workload cluster is the cluster
/// itself. OpenShift's own such secret holds a token it rotates every 30 minutes, so a copy would
/// go stale: xcsp gives the pool a service account of its own, bound to a cluster role with what
/// CAPI does in a workload cluster (openshift/cluster-api `controllers/clustercache`: `GET /`,
/// the Node informer, its controller pod; the Machine controller's Node patches and deletes;
/// drain's pod list, DaemonSet reads and evictions; the volume-detach wait's VolumeAttachments and
/// PersistentVolumes), and a long-lived token Secret the tokens controller fills; the kubeconfig
/// is built from that token at apply. Answers the kubeconfig Secret's node.
fn expand_cluster_access(b: &mut Builder, network: &str, cluster: &str) -> usize {
    let ns = b.namespace.clone();
    let account = format!("{cluster}-capi");
    let sa = b.add(
        T::K8sServiceAccount,
        network,
        None,
        vec![("namespace", Value::string(&ns)), ("name", Value::string(&account))],
    );
    b.in_namespace(sa);
    let sa_addr = b.addr(sa);
    let token = b.add(
        T::K8sServiceAccountToken,
        network,
        None,
        vec![
            ("namespace", Value::string(&ns)),
            ("name", Value::string(format!("{account}-token"))),
            ("service_account", Value::string(&account)),
        ],
    );
    b.after(token, &sa_addr);
    let token_addr = b.addr(token);
    // Cluster-wide objects: the namespace in the name keeps two stacks apart.
    let role_name = format!("{ns}-{account}");
    let role = b.add(T::K8sClusterRole, network, None, vec![("name", Value::string(&role_name))]);
    let role_addr = b.addr(role);
    let binding = b.add(
        T::K8sClusterRoleBinding,
        network,
        None,
        vec![
            ("name", Value::string(&role_name)),
            ("role", Value::string(&role_name)),
            ("service_account_namespace", Value::string(&ns)),
            ("service_account", Value::string(&account)),
        ],
    );
    b.after(binding, &role_addr);
    b.after(binding, &sa_addr);
    let binding_addr = b.addr(binding);
    let kubeconfig = b.add(
        T::K8sKubeconfigSecret,
        network,
        None,
        vec![
            ("namespace", Value::string(&ns)),
            ("name", Value::string(format!("{cluster}-kubeconfig"))),
            ("cluster_name", Value::string(cluster)),
            ("server", Value::string(internal_api_url(&b.model.cluster.api_url.value))),
            ("token_secret", Value::string(format!("{account}-token"))),
            // Refresh reads whether the copy still holds the token secret's token and CA.
            ("in_sync", Value::Bool(true)),
        ],
    );
    b.after(kubeconfig, &token_addr);
    b.after(kubeconfig, &binding_addr);
    kubeconfig
}

/// The cluster's internal API URL: OpenShift serves the API at `api.<cluster domain>` and, inside
/// its network, at `api-int.<cluster domain>` (`Infrastructure.status.apiServerInternalURI`; the
/// installer's pointer ignition names the same host, `pkg/asset/ignition/machine/node.go`).
pub fn internal_api_url(api_url: &str) -> String {
    match api_url.split_once("://api.") {
        Some((scheme, rest)) => format!("{scheme}://api-int.{rest}"),
        None => api_url.to_string(),
    }
}

/// Expands a validated model into resource nodes, in a stable order.
pub fn expand(model: &Model) -> Vec<Node> {
    expanded(model).nodes
}

/// [`expand`], with what each node serves of the computed exports.
pub fn expanded(model: &Model) -> Expanded {
    let namespace = crate::spec::pool_namespace(&model.stack, &model.cluster);
    let mut b = Builder { model, namespace, namespace_node: None, nodes: Vec::new(), exports: Vec::new() };
    let az = &model.azure;
    let rg = b.add(
        T::AzureResourceGroup,
        topology::RESOURCE_GROUP_NODE,
        None,
        vec![("name", Value::string(&az.resource_group.value)), ("location", Value::string(&az.location.value))],
    );
    b.serves(rg, "azure", None, "resource_group_id", None, Read::Id);
    let rg_addr = b.addr(rg);

    let mut vnets = IndexMap::new();
    for n in &model.networks {
        let start = b.nodes.len();
        let vnet = expand_network(&mut b, n, &rg_addr);
        b.protect_since(start, n.prevent_destroy);
        vnets.insert(n.name.value.clone(), vnet);
    }

    // The pool's Kubernetes objects live in a namespace of their own, made first and deleted
    // last (deleting it would take what is left in it).
    if !model.identities.is_empty() || !model.pools.is_empty() {
        let ns = b.add(T::K8sNamespace, NAMESPACE_NODE, None, vec![("name", Value::string(&b.namespace.clone()))]);
        b.namespace_node = Some(b.addr(ns));
    }

    let mut identities = IndexMap::new();
    for id in &model.identities {
        let start = b.nodes.len();
        let name = &id.name.value;
        let uai = b.add_azure(T::AzureUserAssignedIdentity, name, None, &[name], vec![]);
        b.after(uai, &rg_addr);
        for a in ["client_id", "principal_id"] {
            b.serves(uai, "workload_identity", Some(name.as_str()), a, None, Read::Attribute(a.into()));
        }
        let uai_addr = b.addr(uai);
        let fic = b.add(
            T::AzureFederatedCredential,
            name,
            None,
            vec![
                ("identity", Value::Unknown),
                ("issuer", Value::string(&id.issuer.value)),
                ("subject", Value::string(id.subject())),
                ("audiences", Value::strings([id.audience.value.as_str()])),
            ],
        );
        b.input(fic, "identity", &uai_addr, "name");
        let ra = b.add(
            T::AzureRoleAssignment,
            name,
            None,
            vec![
                ("scope", Value::Unknown),
                ("role", Value::string(&id.role.value)),
                ("principal", Value::Unknown),
                ("principal_type", Value::string("ServicePrincipal")),
            ],
        );
        b.input(ra, "scope", &rg_addr, "id");
        b.input(ra, "principal", &uai_addr, "principal_id");
        // CAPZ lists VM SKUs at the subscription for every machine (`azure/scope/machine.go`
        // `InitMachineCache`, `azure/services/resourceskus`), which the resource group's role does
        // not cover (an assignment applies at its scope and below): a custom role with that one
        // action, assigned at the subscription, and nothing more there.
        let subscription = format!("/subscriptions/{}", az.subscription_id.value);
        let skus_role = format!("xcsp-{}-{name}-vm-skus", model.stack);
        let def = b.add(
            T::AzureRoleDefinition,
            name,
            None,
            vec![
                ("name", Value::string(&skus_role)),
                ("scope", Value::string(&subscription)),
                ("actions", Value::strings(["Microsoft.Compute/skus/read"])),
            ],
        );
        let def_addr = b.addr(def);
        let skus = b.add(
            T::AzureRoleAssignment,
            &format!("{name}-skus"),
            None,
            vec![
                ("scope", Value::string(&subscription)),
                ("role", Value::string(&skus_role)),
                ("principal", Value::Unknown),
                ("principal_type", Value::string("ServicePrincipal")),
            ],
        );
        b.input(skus, "principal", &uai_addr, "principal_id");
        b.after(skus, &def_addr);
        let skus_addr = b.addr(skus);
        let aci = b.add(
            T::K8sAzureClusterIdentity,
            name,
            None,
            vec![
                ("namespace", Value::string(&b.namespace)),
                ("name", Value::string(format!("{}-{name}", model.cluster.infrastructure_name.value))),
                ("type", Value::string("WorkloadIdentity")),
                ("tenant_id", Value::string(&az.tenant_id.value)),
                ("client_id", Value::Unknown),
                ("allowed_namespaces", Value::strings([b.namespace.as_str()])),
            ],
        );
        b.input(aci, "client_id", &uai_addr, "client_id");
        b.in_namespace(aci);
        // The controller can use the identity only once the federation and the role exist.
        let (fic_addr, ra_addr) = (b.addr(fic), b.addr(ra));
        b.after(aci, &fic_addr);
        b.after(aci, &ra_addr);
        b.after(aci, &skus_addr);
        identities.insert(name.clone(), b.addr(aci));
        b.protect_since(start, id.prevent_destroy);
    }

    // One AzureCluster + Cluster per network that carries pools.
    let mut clusters = IndexMap::new();
    for n in &model.networks {
        let Some(first) = model.pools.iter().find(|p| p.network.value == n.name.value) else { continue };
        let name = &n.name.value;
        let vnet_addr = vnets[name].clone();
        let infra = &model.cluster.infrastructure_name.value;
        let environment = match az.cloud.value {
            AzureCloud::UsGovernment => "AzureUSGovernmentCloud",
            AzureCloud::Public | AzureCloud::Custom => "AzurePublicCloud",
        };
        let mut attrs = vec![
            ("namespace", Value::string(&b.namespace)),
            ("name", Value::string(format!("{infra}-{name}"))),
            ("location", Value::string(&az.location.value)),
            ("resource_group", Value::string(&az.resource_group.value)),
            ("subscription_id", Value::string(&az.subscription_id.value)),
            ("azure_environment", Value::string(environment)),
            // An externally managed AzureCluster carries the control plane's endpoint itself (CAPI's
            // infra-cluster contract, "Externally managed infrastructure"): the cluster's API.
            ("control_plane_endpoint", Value::string(&model.cluster.api_url.value)),
            ("vnet", Value::Unknown),
            ("identity", Value::string(format!("{infra}-{}", first.identity.value))),
            ("externally_managed", Value::Bool(true)),
            // Its manager (xcsp) marks it ready, a status write after the object's; refresh reads
            // `status.ready` back, so a run that stopped between the two shows it in the plan.
            ("infrastructure_ready", Value::Bool(true)),
        ];
        if n.driver.value == Driver::External {
            attrs.push(("network_managed_externally", Value::Bool(true)));
        }
        let ac = b.add(T::K8sAzureCluster, name, None, attrs);
        b.input(ac, "vnet", &vnet_addr, "name");
        b.in_namespace(ac);
        let ident = identities[&first.identity.value].clone();
        b.after(ac, &ident);
        let ac_addr = b.addr(ac);
        let cl = b.add(
            T::K8sCluster,
            name,
            None,
            vec![
                ("namespace", Value::string(&b.namespace)),
                ("name", Value::string(format!("{infra}-{name}"))),
                ("infrastructure_ref", Value::string(format!("{infra}-{name}"))),
                // xcsp marks it initialized (status conditions, written after the object);
                // refresh reads them back.
                ("control_plane_initialized", Value::Bool(true)),
                // Its control plane is the OpenShift cluster, an externally managed one to CAPI
                // (xcsp's XcspControlPlane object of the same name): CAPI then drains and
                // deletes a removed machine's Node (`isDeleteNodeAllowed`).
                ("control_plane", Value::string(format!("XcspControlPlane/{infra}-{name}"))),
            ],
        );
        b.after(cl, &ac_addr);
        b.in_namespace(cl);
        let cl_addr = b.addr(cl);
        let kubeconfig = expand_cluster_access(&mut b, name, &format!("{infra}-{name}"));
        b.after(kubeconfig, &cl_addr);
        clusters.insert(name.clone(), (cl_addr, b.addr(kubeconfig)));
    }

    for p in &model.pools {
        let start = b.nodes.len();
        let (cluster, kubeconfig) = &clusters[&p.network.value];
        expand_pool(&mut b, p, &vnets[&p.network.value], &[cluster, kubeconfig], &rg_addr);
        b.protect_since(start, p.prevent_destroy);
    }
    if !model.pools.is_empty() {
        expand_providers(&mut b);
    }
    Expanded { nodes: b.nodes, exports: b.exports }
}

/// The namespaces xcsp's managers run in, one per provider (destroying one never takes the other's).
pub const PROVIDER_NAMESPACES: [(&str, &str); 2] =
    [("core", crate::spec::XCSP_CAPI_NAMESPACE), ("azure", crate::spec::XCSP_CAPZ_NAMESPACE)];

/// The Cluster API providers xcsp installs (the `cluster_api` block's components): one node each,
/// every Cluster API and CAPZ object of the pool after them (so destroy removes the providers
/// last, once their objects, and the VMs those hold, are gone). Which of them a run keeps is
/// decided against the cluster (`providers = "auto"`: not where the cluster has its own).
fn expand_providers(b: &mut Builder) {
    let api = &b.model.cluster.cluster_api;
    if api.providers.value == crate::spec::ProvidersMode::Cluster {
        return;
    }
    let authority = match b.model.azure.cloud.value {
        AzureCloud::UsGovernment => "https://login.microsoftonline.us/".to_string(),
        AzureCloud::Custom => b.model.azure.endpoints.as_ref().map(|e| e.authority.value.clone()).unwrap_or_default(),
        AzureCloud::Public => String::new(),
    };
    let sources = [("core", api.core.clone()), ("azure", api.azure.clone())];
    let mut providers = Vec::new();
    for ((name, source), (_, namespace)) in sources.into_iter().zip(PROVIDER_NAMESPACES) {
        let Some(read) = source.as_ref().and_then(|s| s.read.clone()) else { continue };
        let image = source.as_ref().and_then(|s| s.image.as_ref()).map_or(read.image.clone(), |i| i.value.clone());
        let mut attrs = vec![
            ("name", Value::string(&read.provider)),
            ("namespace", Value::string(namespace)),
            ("components", Value::string(read.path.display().to_string())),
            ("components_digest", Value::string(&read.digest)),
            ("version", Value::string(crate::components::image_version(&image))),
            ("image", Value::string(&image)),
            ("watch_namespace", Value::string(&b.namespace)),
            // Refresh reads the manager's Deployment back: Available, as apply leaves it.
            ("available", Value::Bool(true)),
        ];
        if name == "azure" {
            attrs.push(("authority_host", Value::string(&authority)));
        }
        let at = b.add(T::K8sClusterApiProvider, name, None, attrs);
        providers.push(b.addr(at));
        if name == "core" {
            // A cluster where xcsp brings Cluster API brings no machine approver for its Machines
            // either (OpenShift deploys `machine-approver-capi` with TechPreviewNoUpgrade only): the
            // pool's nodes' certificate requests would wait for a person. xcsp runs one from the
            // image of the cluster's own approver (read at apply), for the pool's namespace only.
            let core = b.addr(at);
            let approver = b.add(
                T::K8sClusterApiProvider,
                "approver",
                None,
                vec![
                    ("name", Value::string("machine-approver-capi")),
                    ("namespace", Value::string(namespace)),
                    ("image_from", Value::string(crate::spec::MACHINE_APPROVER_DEPLOYMENT)),
                    ("watch_namespace", Value::string(&b.namespace)),
                    ("available", Value::Bool(true)),
                ],
            );
            b.after(approver, &core);
            providers.push(b.addr(approver));
        }
    }
    let users = [
        T::K8sAzureClusterIdentity,
        T::K8sAzureCluster,
        T::K8sCluster,
        T::K8sAzureMachineTemplate,
        T::K8sMachineSet,
        T::K8sMachineHealthCheck,
    ];
    for i in 0..b.nodes.len() {
        if users.contains(&b.nodes[i].address.rtype) {
            for p in &providers {
                b.after(i, p);
            }
        }
    }
}
