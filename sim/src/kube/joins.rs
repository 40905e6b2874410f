//! Why a Machine has no Node: the first step of CAPZ's AzureMachine reconcile it is held at, in
//! the order the controller takes them, and what CAPI needs before it would match a Node to it.
//! Each step is checked as the upstream code checks it (the source is given with each): the
//! Kubernetes objects, then CAPZ's first Azure calls, which need the token Entra gives for the
//! projected service-account token (checked against the federated credentials the ARM emulator
//! holds) and the role assignments that let the identity make a VM; then CAPZ makes the VM
//! ([`super::capz`]), whose first need is DNS (`dns`); past it, `boot`, which [`super::boot`]
//! takes on to the Node. Read through `GET /_sim/machines`.

use serde_json::{Value, json};

pub use super::store::Held;
use super::store::Store;
use crate::arm::store::Store as ArmStore;
use crate::link::view::Link;
use crate::world::SimConfig;

/// What CAPZ's Azure calls meet: the ARM emulator's resources and the sim's configuration; and
/// what a booting VM's packets meet on the way to the cluster ([`Link`]).
pub struct Azure<'a> {
    pub store: &'a ArmStore,
    pub config: &'a SimConfig,
    pub link: &'a Link,
    /// CAPZ's own manager runs ([`crate::cluster::Capz`]): it makes the VM, and what holds a
    /// Machine before its VM is what CAPZ itself reports ([`capz_reported`]).
    pub real_capz: bool,
    /// Per client id, the last token request Entra answered ([`crate::arm::auth::Tokens::last`]).
    pub tokens: &'a std::collections::HashMap<String, crate::arm::auth::TokenRecord>,
    /// How Resource Manager last judged each client's access ([`crate::arm::Arm::access`]).
    pub access: &'a std::collections::HashMap<String, Option<(String, String)>>,
}

const CAPI: &str = "cluster.x-k8s.io";
/// The finalizer CAPZ puts on an AzureMachine at its first reconcile (`api/v1beta1`
/// `MachineFinalizer`).
const CAPZ_FINALIZER: &str = "azuremachine.infrastructure.cluster.x-k8s.io";
const CAPZ: &str = "infrastructure.cluster.x-k8s.io";

/// The first step of CAPZ's reconcile of this Machine's AzureMachine that does not pass.
pub fn held(store: &Store, machine: &Value, azure: &Azure) -> Held {
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = machine["metadata"]["name"].as_str().unwrap_or_default();
    let at = |step, message: String, source| Held { step, message, source };
    // The Cluster, by the Machine's label, in its namespace.
    let cluster = machine["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"]
        .as_str()
        .and_then(|c| store.value(CAPI, "clusters", ns, c));
    let Some(cluster) = cluster else {
        return at(
            "cluster",
            "Machine is missing cluster label or cluster does not exist".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go Reconcile (util.GetClusterFromMetadata)",
        );
    };
    // The AzureCluster: by the Cluster's infrastructureRef name, in the Machine's namespace.
    let ac_name = cluster["spec"]["infrastructureRef"]["name"].as_str().unwrap_or_default();
    let Some(azure_cluster) = store.value(CAPZ, "azureclusters", ns, ac_name) else {
        return at(
            "azure_cluster",
            "AzureCluster is not available yet".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go Reconcile (azureClusterName)",
        );
    };
    // The cluster scope resolves the identity's credentials (no Azure call yet).
    let id = &azure_cluster["spec"]["identityRef"];
    let mut identity = None;
    if let Some(id_name) = id["name"].as_str() {
        let id_ns = id["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(ns);
        identity = store.value(CAPZ, "azureclusteridentities", id_ns, id_name);
        if identity.is_none() {
            return at(
                "identity",
                format!("failed to retrieve AzureClusterIdentity external object {id_ns:?}/{id_name:?}: not found"),
                "cluster-api-provider-azure azure/scope/identity.go NewAzureCredentialsProvider",
            );
        }
    }
    // CAPI reads an infrastructure cluster of contract v1beta1 (CAPZ's AzureCluster) as provisioned
    // from `status.ready` and says so on the Cluster, which CAPZ waits for; no CAPI cluster
    // controller runs here, so the sim reads the AzureCluster's readiness directly.
    if azure_cluster["status"]["ready"] != json!(true) {
        return at(
            "infrastructure",
            "Cluster infrastructure is not provisioned yet (VMRunning False, WaitingForClusterInfrastructure)".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go reconcileNormal; cluster-api internal/contract/infrastructure_cluster.go Provisioned",
        );
    }
    // The bootstrap data: the Machine's dataSecretName, a Secret in its namespace, key `value`.
    let bootstrap = "cluster-api-provider-azure azure/scope/machine.go GetBootstrapData";
    let Some(secret) = machine["spec"]["bootstrap"]["dataSecretName"].as_str().filter(|s| !s.is_empty()) else {
        return at(
            "bootstrap_data",
            "Bootstrap data secret reference is not yet available (VMRunning False, WaitingForBootstrapData)".into(),
            "cluster-api-provider-azure controllers/azuremachine_controller.go reconcileNormal",
        );
    };
    let Some(data) = store.value("", "secrets", ns, secret) else {
        return at(
            "bootstrap_data",
            format!(
                "failed to retrieve bootstrap data secret for AzureMachine {ns}/{name}: secrets {secret:?} not found"
            ),
            bootstrap,
        );
    };
    if data["data"].get("value").is_none() {
        return at("bootstrap_data", "error retrieving bootstrap data: secret value key is missing".into(), bootstrap);
    }
    // The identity's client id (the identity step above found it), whose token requests the
    // world's Entra answered.
    let client_id = identity.and_then(|i| i["spec"]["clientID"].as_str()).unwrap_or_default();
    // Made: CAPZ's PUT of the VM has finished. Once it is, a failing Azure call of a later
    // reconcile is only CAPZ's log, and the VM, its boot and its Node go on as they were.
    let made = azure
        .store
        .of_kind(&crate::arm::kinds::VM)
        .any(|vm| vm.name == name && vm.body["properties"]["provisioningState"] == "Succeeded");
    if !made && !azure.real_capz {
        return at(
            "vm",
            format!(
                "no CAPZ controller runs in the cluster (Deployment {}/capz-controller-manager): nothing reconciles the AzureMachine",
                super::openshift::CAPI_NAMESPACE
            ),
            "the world's cluster runs CAPZ's manager where OpenShift's manifests deploy it (--capz)",
        );
    }
    if !made {
        return capz_reported(store, machine, azure, client_id);
    }
    let source = vm_pointer_source(azure.store, name);
    if let Some(h) = dns(&azure_cluster, source.as_deref(), azure, name) {
        return h;
    }
    at(
        "boot",
        "the VM exists; its boot (ignition from the machine-config server over the link, DNS) and its Node are not emulated yet".into(),
        "sim/README.md, Not held yet",
    )
}

/// The first thing a booting VM does: Ignition fetches the config its pointer names
/// (`https://api-int.<domain>:22623/config/<pool>`). `api-int.<domain>` exists only in the
/// cluster's Route 53 private hosted zone, which answers only inside the VPCs associated with it
/// or through a Resolver inbound endpoint in one (AWS, Route 53 Developer Guide: "Working with
/// private hosted zones", "Forwarding inbound DNS queries to your VPCs"). A VNet without DNS
/// servers of its own uses Azure's resolver (`properties.dhcpOptions.dnsServers` empty), which
/// cannot. With DNS servers, the VM asks them in order and keeps to the first that answers
/// (Microsoft Learn, "Create, change, or delete a virtual network", Change DNS servers); one
/// answers the cluster's names when it is an address of an OPERATIONAL inbound endpoint, a tunnel
/// to the endpoint's VPC is UP, and the endpoint's security groups let DNS (UDP 53) in from the
/// VM's subnet. Held at `dns` with the first server's reason otherwise.
fn dns(azure_cluster: &Value, source: Option<&str>, azure: &Azure, machine: &str) -> Option<Held> {
    let servers =
        azure.store.get(&vnet_id(azure_cluster).to_ascii_lowercase())?.body["properties"]["dhcpOptions"]["dnsServers"]
            .clone();
    let servers: Vec<&str> = servers.as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let subnet = vm_subnet(azure.store, machine);
    // Why each server does not answer (None: it answers).
    let link = azure.link;
    let why_not: Vec<Option<String>> = servers
        .iter()
        .map(|ip| match link.resolvers.iter().find(|e| e.ips.iter().any(|e_ip| e_ip == ip)) {
            None => Some(format!(
                "the DNS server {ip} is no Route 53 Resolver inbound endpoint's address: nothing answers there"
            )),
            Some(e) if e.status != "OPERATIONAL" => {
                Some(format!("the Resolver endpoint {} at {ip} is {}", e.id, e.status))
            }
            Some(e) if !link.up_vpcs.contains(&e.vpc_id) => Some(format!(
                "no tunnel to {} (the Resolver endpoint {} at {ip}) is UP: the query goes nowhere",
                e.vpc_id, e.id
            )),
            Some(_)
                if let Err(why) =
                    ip.parse().map_or(Ok(()), |dest| nsg_allows(azure.store, machine, "Udp", 53, dest)) =>
            {
                Some(why)
            }
            Some(e) if !subnet.is_some_and(|s| e.admits_dns_from(&s)) => Some(format!(
                "the security groups of the Resolver endpoint {} let no DNS (UDP 53) in from the VM's subnet {}",
                e.id,
                subnet.map(|s| s.to_string()).unwrap_or_else(|| "(unknown)".into())
            )),
            Some(_) => None,
        })
        .collect();
    if why_not.iter().any(Option::is_none) {
        return None;
    }
    let reason = why_not.into_iter().flatten().next().unwrap_or_else(|| {
        "the VNet has no DNS servers of its own, so the VM asks Azure's resolver, which cannot resolve the cluster's private names".to_string()
    });
    let source = source.unwrap_or("its pointer's config");
    Some(Held {
        step: "dns",
        message: format!("{reason}: Ignition cannot fetch {source}"),
        source: "AWS Route 53 Developer Guide (private hosted zones, Resolver inbound endpoints); ARM virtualNetworks dhcpOptions.dnsServers; Microsoft Learn, Change DNS servers",
    })
}

/// The address range of the subnet a Machine's VM is in, by its NIC (`<machine>-nic`).
pub fn vm_subnet(arm: &ArmStore, machine: &str) -> Option<ipnet::Ipv4Net> {
    vm_subnet_resource(arm, machine).and_then(|s| s.body["properties"]["addressPrefix"].as_str()?.parse().ok())
}

/// The subnet a Machine's VM's NIC is in, as the ARM emulator holds it.
pub fn vm_subnet_resource<'a>(arm: &'a ArmStore, machine: &str) -> Option<&'a crate::arm::store::Resource> {
    arm.of_kind(&crate::arm::kinds::NIC)
        .find(|n| n.name == format!("{machine}-nic"))
        .and_then(|n| n.body["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"].as_str())
        .and_then(|id| arm.get(&id.to_ascii_lowercase()))
}

/// Where the real CAPZ holds a Machine whose VM it has not made: what it wrote on the Machine's
/// AzureMachine, its `Ready` condition's reason and message (CAPZ's own error, such as a refused
/// PUT's code). CAPZ writes nothing there when its first Azure call fails for want of a token
/// or for want of a role (the error is returned before any condition, `azuremachine_controller.go`
/// `reconcileNormal`, `InitMachineCache`, and only logged): then the world says why, the last
/// answer its Entra gave CAPZ's identity (`token_exchange`), or Resource Manager's last refusal of
/// it (`authorization`), once CAPZ has reconciled this AzureMachine (its finalizer is on it); else
/// that CAPZ has not reported yet. A refusal on a later call (a NIC's GET once the SKUs are
/// cached) CAPZ writes itself (`ReconcileAll`, `UpdatePutStatus`): the machine is held at `vm`.
fn capz_reported(store: &Store, machine: &Value, azure: &Azure, client_id: &str) -> Held {
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let r = &machine["spec"]["infrastructureRef"];
    let am = (r["kind"] == "AzureMachine")
        .then(|| store.value(CAPZ, "azuremachines", ns, r["name"].as_str().unwrap_or_default()))
        .flatten();
    // Its `Ready` summary when CAPZ wrote one, else the first condition CAPZ set false with a
    // message (a service's own, such as `NetworkInterfacesReady` from `UpdatePutStatus`).
    let conditions = am.and_then(|a| a["status"]["conditions"].as_array()).cloned().unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "Ready" && c["status"] != "True").or_else(|| {
        conditions.iter().find(|c| c["status"] == "False" && c["message"].as_str().is_some_and(|m| !m.is_empty()))
    });
    let source = "cluster-api-provider-azure v1.26.0 (run by the world): the AzureMachine's conditions";
    if let Some(c) = ready {
        let (reason, text) = (c["reason"].as_str().unwrap_or_default(), c["message"].as_str().unwrap_or_default());
        let message = if text.is_empty() { reason.to_string() } else { format!("{reason}: {text}") };
        return Held { step: "vm", message, source };
    }
    // CAPZ's first act on an AzureMachine is its finalizer, before any Azure call
    // (`reconcileNormal`): without it, CAPZ has not tried for this machine, and another's refusal
    // says nothing of it.
    let tried = am
        .and_then(|a| a["metadata"]["finalizers"].as_array())
        .is_some_and(|f| f.iter().any(|f| f.as_str() == Some(CAPZ_FINALIZER)));
    if !tried {
        return Held { step: "vm", message: "CAPZ has not reported on the AzureMachine yet".into(), source };
    }
    let last = azure.tokens.get(client_id).filter(|_| !client_id.is_empty());
    if let Some(t) = last.filter(|t| !t.issued) {
        return Held {
            step: "token_exchange",
            message: format!("Entra refused CAPZ's token request: {}", t.error.clone().unwrap_or_default()),
            source: "the world's Entra token log (GET /_sim/tokens); CAPZ logs the error and writes no condition",
        };
    }
    if let Some(Some((code, message))) = azure.access.get(client_id) {
        return Held {
            step: "authorization",
            message: format!("Resource Manager refused CAPZ's call: {code}: {message}"),
            source: "the world's Resource Manager (its last answer to CAPZ's identity); CAPZ logs the error and writes no condition",
        };
    }
    Held { step: "vm", message: "CAPZ has not reported on the AzureMachine yet".into(), source }
}

/// The config source the Ignition pointer a VM was made with names: the custom data CAPZ passed
/// (the bootstrap data, base64), which the ARM emulator keeps and never answers.
pub fn vm_pointer_source(arm: &ArmStore, vm: &str) -> Option<String> {
    use base64::Engine as _;
    let data = arm.of_kind(&crate::arm::kinds::VM).find(|v| v.name == vm)?.secret.clone()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim()).ok()?;
    let pointer: Value = serde_json::from_slice(&bytes).ok()?;
    pointer["ignition"]["config"]["merge"][0]["source"].as_str().map(String::from)
}

/// The config source a Machine's bootstrap pointer names (`ignition.config.merge[0].source`).
pub fn pointer_source(store: &Store, machine: &Value) -> Option<String> {
    use base64::Engine as _;
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let secret = store.value("", "secrets", ns, machine["spec"]["bootstrap"]["dataSecretName"].as_str()?)?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(secret["data"]["value"].as_str()?).ok()?;
    let pointer: Value = serde_json::from_slice(&bytes).ok()?;
    pointer["ignition"]["config"]["merge"][0]["source"].as_str().map(String::from)
}

/// The id of the AzureCluster's VNet: `networkSpec.vnet`, in its own resource group if it names
/// one, else the cluster's (CAPZ `azure/scope/cluster.go`, `Vnet`).
pub fn vnet_id(azure_cluster: &Value) -> String {
    let spec = &azure_cluster["spec"];
    let rg = spec["resourceGroup"].as_str().unwrap_or_default();
    let vnet = &spec["networkSpec"]["vnet"];
    format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}",
        spec["subscriptionID"].as_str().unwrap_or_default(),
        vnet["resourceGroup"].as_str().filter(|r| !r.is_empty()).unwrap_or(rg),
        vnet["name"].as_str().unwrap_or_default()
    )
}

/// The spec CAPZ makes a Machine's VM from: its AzureMachine's, the object the Machine's
/// `infrastructureRef` names (CAPZ reads the AzureMachine, never the template); where the sim made
/// none (the MachineSet's template was missing when the Machine was made, and the ref still names
/// the template), the template's `spec.template.spec`. `Err` names what is missing.
pub fn machine_spec<'a>(store: &'a Store, machine: &Value) -> Result<&'a Value, String> {
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let r = &machine["spec"]["infrastructureRef"];
    let name = r["name"].as_str().unwrap_or_default();
    if r["kind"] == "AzureMachine" {
        return store
            .value(CAPZ, "azuremachines", ns, name)
            .map(|am| &am["spec"])
            .ok_or_else(|| format!("AzureMachine {ns}/{name} not found"));
    }
    store
        .value(CAPZ, "azuremachinetemplates", ns, name)
        .map(|t| &t["spec"]["template"]["spec"])
        .ok_or_else(|| format!("AzureMachineTemplate {ns}/{name} not found"))
}

/// What CAPI needs of the Machine's Cluster before it matches a Node to the Machine, and is missing.
pub fn node_ref_needs(store: &Store, machine: &Value) -> Vec<String> {
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let Some(name) = machine["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"].as_str() else {
        return vec!["a Cluster (the Machine has no cluster-name label)".into()];
    };
    let Some(cluster) = store.value(CAPI, "clusters", ns, name) else {
        return vec![format!("Cluster {ns}/{name}")];
    };
    let mut needs = Vec::new();
    // cluster-api internal/controllers/machine/machine_controller.go watchClusterNodes: no Node
    // watch until the control plane is initialized, a v1beta2 condition (through the v1beta1 API
    // the sim serves, `status.v1beta2.conditions`).
    let initialized = cluster["status"]["v1beta2"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True"));
    if !initialized {
        needs.push(format!("the ControlPlaneInitialized condition on Cluster {ns}/{name}"));
    }
    // cluster-api util/secret (`<cluster>-kubeconfig`, key `value`), read by ClusterCache through
    // a cache that holds only Secrets labelled cluster.x-k8s.io/cluster-name
    // (internal/setup/setup.go ManagerCacheOptions).
    let kubeconfig = format!("{name}-kubeconfig");
    match store.value("", "secrets", ns, &kubeconfig) {
        Some(s) if s["metadata"]["labels"].get("cluster.x-k8s.io/cluster-name").is_some() => {}
        Some(_) => needs.push(format!("the label cluster.x-k8s.io/cluster-name on Secret {ns}/{kubeconfig}")),
        None => needs.push(format!("Secret {ns}/{kubeconfig}")),
    }
    needs
}

/// Whether the network security group on the VM's subnet lets `protocol` to `port` at `dest` out
/// (the Azure half of the path; replies are allowed back, NSGs being stateful). Its rules are read
/// in priority order and the first that matches decides; none matching, Azure's default outbound
/// rules do: `AllowVnetOutBound` (65000, `VirtualNetwork` to `VirtualNetwork`), then
/// `AllowInternetOutBound`, then `DenyAllOutBound` (Microsoft Learn, "Network security groups":
/// "Security rules", "Default security rules"). The cluster's addresses are in the
/// `VirtualNetwork` tag, which takes in the address spaces connected through the VNet's gateway
/// (Microsoft Learn, "Virtual network service tags", `VirtualNetwork`). A subnet without an NSG
/// lets everything out; CAPZ's NICs carry no NSG of their own. `Err` names the deciding rule.
pub fn nsg_allows(
    arm: &crate::arm::store::Store,
    machine: &str,
    protocol: &str,
    port: i64,
    dest: std::net::Ipv4Addr,
) -> Result<(), String> {
    use crate::arm::kinds;
    let Some(nic) = arm.of_kind(&kinds::NIC).find(|n| n.name == format!("{machine}-nic")) else { return Ok(()) };
    let subnet_id =
        nic.body["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"].as_str().unwrap_or_default();
    let Some(subnet) = arm.get(&subnet_id.to_ascii_lowercase()) else { return Ok(()) };
    let source: Option<ipnet::Ipv4Net> =
        subnet.body["properties"]["addressPrefix"].as_str().and_then(|p| p.parse().ok());
    let Some(nsg_id) = subnet.body["properties"]["networkSecurityGroup"]["id"].as_str() else { return Ok(()) };
    let nsg_key = nsg_id.to_ascii_lowercase();
    let Some(nsg) = arm.get(&nsg_key) else { return Ok(()) };
    let mut rules: Vec<&Value> = arm
        .children(&nsg_key, &kinds::SECURITY_RULE)
        .into_iter()
        .map(|r| &r.body["properties"])
        .filter(|p| p["direction"].as_str().is_some_and(|d| d.eq_ignore_ascii_case("Outbound")))
        .collect();
    rules.sort_by_key(|p| p["priority"].as_i64().unwrap_or(i64::MAX));
    // One of a rule's prefixes (its single field or its list) covers the address.
    let covers = |p: &Value, one: &str, many: &str, addr: Option<std::net::Ipv4Addr>, net: Option<ipnet::Ipv4Net>| {
        let mut all: Vec<&str> = p[many].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        all.extend(p[one].as_str());
        all.iter().any(|x| match *x {
            "*" | "VirtualNetwork" => true,
            cidr => {
                let n: Option<ipnet::Ipv4Net> =
                    cidr.parse().ok().or_else(|| cidr.parse::<std::net::Ipv4Addr>().ok().map(ipnet::Ipv4Net::from));
                n.is_some_and(|n| addr.is_some_and(|a| n.contains(&a)) || net.is_some_and(|s| n.contains(&s)))
            }
        })
    };
    let ports = |p: &Value| {
        let mut all: Vec<&str> =
            p["destinationPortRanges"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        all.extend(p["destinationPortRange"].as_str());
        all.iter().any(|r| match r.split_once('-') {
            _ if *r == "*" => true,
            Some((a, b)) => a.parse::<i64>().is_ok_and(|a| a <= port) && b.parse::<i64>().is_ok_and(|b| port <= b),
            None => r.parse::<i64>().is_ok_and(|p| p == port),
        })
    };
    let matched = rules.into_iter().find(|p| {
        p["protocol"].as_str().is_some_and(|x| x == "*" || x.eq_ignore_ascii_case(protocol))
            && ports(p)
            && covers(p, "destinationAddressPrefix", "destinationAddressPrefixes", Some(dest), None)
            && covers(p, "sourceAddressPrefix", "sourceAddressPrefixes", None, source)
    });
    match matched {
        Some(p) if !p["access"].as_str().is_some_and(|a| a.eq_ignore_ascii_case("Allow")) => Err(format!(
            "the network security group {} on the VM's subnet denies {protocol} {port} out to {dest} (rule priority {}, {})",
            nsg.name,
            p["priority"],
            p["description"].as_str().unwrap_or("no description")
        )),
        // A matching Allow, or none: `AllowVnetOutBound` lets the cluster's addresses out.
        _ => Ok(()),
    }
}
