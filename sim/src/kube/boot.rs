//! The boot of a worker VM that CAPZ made, once its DNS resolves the cluster's names
//! ([`super::joins`]'s `dns` step), up to its Node: each step as the machine meets it, the first
//! that fails holding the Machine with its reason (`GET /_sim/machines`).
//!
//! 1. `api_path`: Ignition opens `https://api-int.<domain>:22623` and the kubelet `:6443`, both on
//!    the cluster's internal API load balancer `<infra>-int` (openshift/installer
//!    `pkg/asset/manifests/aws/cluster.go`, `ControlPlaneLoadBalancer` and its additional listener).
//!    The packets cross an UP tunnel to the cluster's VPC, the load balancer's security group
//!    (CAPA's `apiserver-lb`, [`crate::aws::fixture::security_groups`]) must let the port in from
//!    the VM's subnet, and the answer goes back through the route tables of the load balancer's
//!    subnets (the private ones), which reach the VNet only where the link's VGW propagates its
//!    routes (AWS, "Route propagation", VPC User Guide).
//! 2. `ignition`: the machine-config server answers `/config/<pool>` with the pool's rendered
//!    config; for a pool it does not know, or one not rendered yet, it answers 500
//!    (openshift/machine-config-operator `pkg/server/cluster_server.go` `GetConfig`, `api.go`).
//! 3. `kubelet`: the rendered config's units that run before the kubelet
//!    (`Before=` or `RequiredBy=kubelet-dependencies.target`) run on the VM. Those of the AWS
//!    templates (`aws-kubelet-nodename.service`, `aws-kubelet-providerid.service`, MCO
//!    `templates/common/aws/units`) ask the EC2 instance metadata service, which an Azure VM has
//!    none of, and fail. Any other runs as the script its `ExecStart=` names, with `bash`, in a
//!    scratch root where `curl` answers the Azure Instance Metadata Service of this VM
//!    ([`imds_curl`]); the kubelet then reads `/etc/kubernetes/node.env` (the worker kubelet's
//!    drop-in `20-node-env.conf`), and registers with `--hostname-override=${KUBELET_NODE_NAME}`,
//!    `--provider-id=${KUBELET_PROVIDERID}` and
//!    `--node-labels=node-role.kubernetes.io/worker,node.openshift.io/os_id=${ID},${CUSTOM_KUBELET_LABELS}`
//!    (MCO `templates/worker/01-worker-kubelet/_base/units/kubelet.service.yaml`).
//! 4. `csr`: the machine approver approves the kubelet's certificate request ([`csr_approved`]).
//! 5. The Node registers after the boot's duration ([`BOOT_SECS`]), and no sooner than the part
//!    of it that follows Ignition's fetch ([`AFTER_FETCH`]) after the fetch first succeeds: a VM
//!    made before its path to the machine-config server works sits in Ignition, which retries
//!    the fetch without end (coreos/ignition `doc/operator-notes.md`, "HTTP Backoff and Retry":
//!    a 10 s wait for headers, a backoff from 100 ms doubling to 5 s; a 5xx is retried, any
//!    other answer ends the fetch), and boots on once it answers. It is `Ready` while its path
//!    to the API holds; once it breaks, the node lifecycle controller marks it `Unknown` after the
//!    node-monitor grace period ([`NODE_MONITOR_GRACE_SECS`]).

use std::path::Path;

use serde_json::{Value, json};

use super::joins::nsg_allows;
use super::mco::AWS_UPDATE_DNS;
use super::store::Held;
pub use super::store::Registration;
use super::store::Store;
use crate::link::view::Link;

/// Seconds from a VM's creation to its Node's registration: the first boot, Ignition, the pivot
/// to the pool's OS image and its reboot, the kubelet's start (OpenShift documents no figure; a
/// few minutes on Azure's GPU sizes).
pub const BOOT_SECS: (f64, f64) = (180.0, 420.0);

/// The share of a boot that comes after Ignition's fetch of the config: applying it, the pivot
/// to the pool's OS image and its reboot, the kubelet's start. Before it: the VM's start, its
/// firmware and kernel, the initramfs bringing up the network.
pub const AFTER_FETCH: f64 = 0.75;

/// The node lifecycle controller's `--node-monitor-grace-period`: 50 s since Kubernetes 1.32
/// (kubernetes/kubernetes issue 127352 discusses the 50-second default; 40 s before).
pub const NODE_MONITOR_GRACE_SECS: f64 = 50.0;

fn held(step: &'static str, message: String, source: &'static str) -> Held {
    Held { step, message, source }
}

/// Whether a VM in `subnet` opens TCP `port` on the cluster's internal API load balancer.
pub fn api_path(link: &Link, infra: &str, subnet: Option<&ipnet::Ipv4Net>, port: i64) -> Result<(), Held> {
    let at = |message: String| {
        held(
            "api_path",
            message,
            "openshift/installer pkg/asset/manifests/aws/cluster.go (the internal API load balancer); CAPA securitygroups.go; AWS VPC User Guide, route propagation",
        )
    };
    let Some(cluster) = link.clusters.iter().find(|c| c.fixture.infra == infra) else {
        return Err(at(format!("no AWS network of cluster {infra} (the sim's --fixture makes it)")));
    };
    let vpc = &cluster.fixture.vpc_id;
    if !link.up_vpcs.contains(vpc) {
        return Err(at(format!("no tunnel to {vpc} (the cluster's VPC) is UP: TCP {port} to api-int goes nowhere")));
    }
    for (subnet_id, _, table) in &cluster.fixture.private_subnets {
        let back = link.propagation.get(table).is_some_and(|vgws| vgws.iter().any(|v| link.up_vgws.contains(v)));
        if !back {
            return Err(at(format!(
                "the route table {table} of {subnet_id} (where the internal API load balancer answers from) has no route back to the VNet: no VGW with an UP tunnel propagates into it"
            )));
        }
    }
    let Some(subnet) = subnet else {
        return Err(at("the VM's subnet is unknown".into()));
    };
    if !crate::aws::resolver::admits(&cluster.api_lb_rules, "tcp", port, subnet) {
        return Err(at(format!(
            "the internal API load balancer's security group {} lets no TCP {port} in from the VM's subnet {subnet}",
            cluster.fixture.api_lb_security_group
        )));
    }
    Ok(())
}

/// Whether pod traffic between this pool node (in `subnet`, VM `machine`) and the cluster's
/// worker nodes gets through: OVN-Kubernetes carries it between nodes as Geneve (UDP 6081) or,
/// with IPsec between nodes (`ipsecConfig.mode: Full`), as ESP (IP protocol 50) after an IKE
/// exchange (UDP 500; 4500 only behind NAT, which the tunnels do not do), in IPsec transport mode
/// (OKD documentation, "Configuring IPsec encryption": the ports for all-machine to all-machine
/// communications; openshift/installer `pkg/asset/manifests/aws/cluster.go` opens them between
/// the cluster's own nodes). A
/// packet needs an UP tunnel, the nodes' security group (CAPA's `node`) to let it in from the VM's
/// subnet, and the VM's network security group to let it out. None of it touches the kubelet's
/// path to the API: the Node is `Ready` while every pod packet across the link is dropped.
/// `Err` names the first protocol that does not pass, and where.
pub fn pod_network(
    link: &Link,
    arm: &crate::arm::store::Store,
    machine: &str,
    infra: &str,
    subnet: Option<&ipnet::Ipv4Net>,
    ipsec: bool,
) -> Result<(), String> {
    let Some(cluster) = link.clusters.iter().find(|c| c.fixture.infra == infra) else {
        return Err(format!("no AWS network of cluster {infra}"));
    };
    if !link.up_vpcs.contains(&cluster.fixture.vpc_id) {
        return Err(format!("no tunnel to {} is UP", cluster.fixture.vpc_id));
    }
    let Some(subnet) = subnet else { return Err("the VM's subnet is unknown".into()) };
    let needed: &[(&str, &str, i64, &str)] = if ipsec {
        &[("udp", "Udp", 500, "IKE (UDP 500)"), ("50", "Esp", -1, "ESP (IP protocol 50)")]
    } else {
        &[("udp", "Udp", 6081, "Geneve (UDP 6081)")]
    };
    let dest = cluster
        .fixture
        .private_subnets
        .first()
        .and_then(|(_, cidr, _)| cidr.parse::<ipnet::Ipv4Net>().ok()?.hosts().nth(9));
    for (aws, azure, port, what) in needed {
        if !crate::aws::resolver::admits(&cluster.node_rules, aws, *port, subnet) {
            return Err(format!(
                "{what} from {subnet} is dropped: the cluster nodes' security group {} lets none in from the VM's subnet",
                cluster.fixture.node_security_group
            ));
        }
        if let Some(dest) = dest {
            nsg_allows(arm, machine, azure, *port, dest).map_err(|why| format!("{what} is dropped: {why}"))?;
        }
    }
    Ok(())
}

/// The first address the internal API load balancer may answer from: the first host of the
/// cluster's first private subnet (where it has a node per zone).
pub fn api_lb_address(link: &Link, infra: &str) -> Option<std::net::Ipv4Addr> {
    let cluster = link.clusters.iter().find(|c| c.fixture.infra == infra)?;
    let (_, cidr, _) = cluster.fixture.private_subnets.first()?;
    cidr.parse::<ipnet::Ipv4Net>().ok()?.hosts().next()
}

/// What the machine-config server answers for `/config/<pool>`: the pool's rendered config.
pub fn served_config(store: &Store, pool: &str) -> Result<Value, Held> {
    let at = |message: String| {
        held("ignition", message, "openshift/machine-config-operator pkg/server/cluster_server.go GetConfig; api.go")
    };
    let mc = super::kinds::MACHINECONFIGURATION;
    let Some(p) = store.value(mc, "machineconfigpools", "", pool) else {
        return Err(at(format!(
            "the machine-config server answers 500 for /config/{pool}: machineconfigpools.machineconfiguration.openshift.io \"{pool}\" not found"
        )));
    };
    let rendered = p["status"]["configuration"]["name"].as_str().unwrap_or_default();
    match store.value(mc, "machineconfigs", "", rendered) {
        Some(config) if !rendered.is_empty() => Ok(config["spec"]["config"].clone()),
        _ => Err(at(format!(
            "the machine-config server answers 500 for /config/{pool}: the pool has no rendered config yet ({})",
            p["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "RenderDegraded" && c["status"] == "True"))
                .and_then(|c| c["message"].as_str())
                .unwrap_or("not rendered")
        ))),
    }
}

/// A `curl` that answers, for one VM, what Azure's Instance Metadata Service answers
/// (`http://169.254.169.254/metadata/instance/compute/<field>?api-version=...&format=text`, header
/// `Metadata: true`, else HTTP 400; Microsoft Learn, "Azure Instance Metadata Service"); any other
/// address is out of reach, as curl reports it (exit 7), the EC2 metadata service included.
fn imds_curl(vm_id: &str, vm_name: &str) -> String {
    format!(
        r#"#!/bin/bash
# The sim's stand-in for curl on an Azure VM: only the Instance Metadata Service answers.
header=0; url=""; fail=0
for a in "$@"; do
  case "$a" in
    "Metadata: true") header=1 ;;
    -f|-fsS|-fs|-sSf|-sf|--fail) fail=1 ;;
    http://*|https://*) url="$a" ;;
  esac
done
case "$url" in
  http://169.254.169.254/metadata/*) ;;
  *) echo "curl: (7) Failed to connect to ${{url#*://}}" >&2; exit 7 ;;
esac
if [ "$header" != 1 ] || [[ "$url" != *api-version=* ]]; then
  [ "$fail" = 1 ] && {{ echo "curl: (22) The requested URL returned error: 400" >&2; exit 22; }}
  echo '{{"error":"Bad request"}}'; exit 0
fi
path="${{url%%\?*}}"
case "$path" in
  */metadata/instance/compute/resourceId) printf '%s' '{vm_id}' ;;
  */metadata/instance/compute/name) printf '%s' '{vm_name}' ;;
  *) [ "$fail" = 1 ] && {{ echo "curl: (22) The requested URL returned error: 404" >&2; exit 22; }} ;;
esac
"#
    )
}

/// A `data:` URL's bytes (base64 or percent-encoded, as Ignition reads them).
fn data_url(source: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let rest = source.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    if meta.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD.decode(data).ok()
    } else {
        Some(percent(data))
    }
}

fn percent(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// The label keys the kubelet may set on its own Node (`--node-labels`) in the `kubernetes.io` and
/// `k8s.io` namespaces: upstream's (kubernetes `staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go`,
/// `kubeletLabels`, `kubeletLabelNamespaces`) and the node roles OpenShift's fork adds
/// (`well_known_openshift_labels.go`, quoted in openshift/enhancements `enhancements/arbiter-clusters.md`,
/// "Kubernetes Change": control-plane, arbiter, master, worker, etcd).
const KUBELET_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];
const OPENSHIFT_NODE_LABELS: &[&str] = &[
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/arbiter",
    "node-role.kubernetes.io/master",
    "node-role.kubernetes.io/worker",
    "node-role.kubernetes.io/etcd",
];

/// The kubelet's refusal of its `--node-labels` (kubernetes `cmd/kubelet/app/options/options.go`
/// `ValidateKubeletFlags`, `isKubernetesLabel`): a key in the `kubernetes.io` or `k8s.io` namespace
/// (or a subdomain of either) that it may not set, listed sorted in the kubelet's words. The
/// kubelet then exits and never registers.
pub fn refused_node_labels<'a>(keys: impl Iterator<Item = &'a str>) -> Option<String> {
    let in_namespace = |ns: &str, domain: &str| ns == domain || ns.ends_with(&format!(".{domain}"));
    let mut unknown: Vec<&str> = keys
        .filter(|k| {
            let ns = k.split_once('/').map_or("", |(d, _)| d);
            let kubernetes = in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io");
            let allowed = KUBELET_LABELS.contains(k)
                || OPENSHIFT_NODE_LABELS.contains(k)
                || KUBELET_LABEL_NAMESPACES.iter().any(|d| in_namespace(ns, d));
            kubernetes && !allowed
        })
        .collect();
    if unknown.is_empty() {
        return None;
    }
    unknown.sort_unstable();
    Some(format!(
        "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{}]\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix ({}) or be in the specifically allowed set ({})",
        unknown.join(" "),
        KUBELET_LABEL_NAMESPACES.join(", "),
        KUBELET_LABELS.join(", ")
    ))
}

/// The AWS template units, which fail on an Azure VM.
const AWS_UNITS: &[&str] = &["aws-kubelet-nodename.service", "aws-kubelet-providerid.service"];

/// AWS's Time Sync Service: a link-local address each EC2 instance reaches through its own
/// hypervisor (AWS, "Set the time for your EC2 instance"), and nothing outside EC2 does.
pub const AWS_TIME_SYNC: &str = "169.254.169.123";

/// Where a node booted with `config` keeps its time, or why it cannot: `/etc/chrony.conf` as the
/// config writes it (the last config's file wins), else RHCOS's platform default, which on Azure
/// is the host's PTP clock (fedora-coreos-config `coreos-platform-chrony-config`, used only while
/// the file is the OS's own).
pub fn time_source(config: &Value) -> Result<String, String> {
    let file = config["storage"]["files"].as_array().into_iter().flatten().find(|f| f["path"] == "/etc/chrony.conf");
    let Some(file) = file else { return Ok("the Azure host's PTP clock (RHCOS's platform default)".into()) };
    let text = file["contents"]["source"].as_str().and_then(data_url).map(|b| String::from_utf8_lossy(&b).into_owned());
    let text = text.unwrap_or_default();
    let mut sources = Vec::new();
    for l in text.lines().map(str::trim) {
        let mut words = l.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("refclock"), Some("PHC"), Some(dev)) => return Ok(format!("the Azure host's PTP clock ({dev})")),
            (Some("server" | "pool" | "peer"), Some(addr), _) => sources.push(addr.to_string()),
            _ => {}
        }
    }
    match sources.iter().find(|a| a.as_str() != AWS_TIME_SYNC) {
        Some(reachable) => Ok(format!("time server {reachable}")),
        None if sources.is_empty() => Err("/etc/chrony.conf names no time source".into()),
        None => Err(format!(
            "/etc/chrony.conf names only {AWS_TIME_SYNC} (AWS's Time Sync Service, link-local to EC2), which an Azure VM cannot reach: the clock drifts"
        )),
    }
}

/// Runs the units of `config` that prepare the kubelet, on the VM `vm_id` named `vm_name`, and
/// answers what the kubelet registers with.
pub fn kubelet(config: &Value, vm_id: &str, vm_name: &str) -> Result<Registration, Held> {
    let at = |message: String| {
        held(
            "kubelet",
            message,
            "openshift/machine-config-operator templates/common/aws/units, templates/worker/01-worker-kubelet",
        )
    };
    let units: Vec<&Value> = config["systemd"]["units"].as_array().into_iter().flatten().collect();
    let active = |u: &&&Value| u["mask"] != json!(true) && u["enabled"] != json!(false);
    for u in units.iter().filter(active) {
        let name = u["name"].as_str().unwrap_or_default();
        if AWS_UNITS.contains(&name) {
            return Err(at(format!(
                "{name} failed: it asks the EC2 instance metadata service, which an Azure VM does not have, so /etc/kubernetes/node.env is never written and kubelet.service does not start"
            )));
        }
        // MCO `templates/common/aws/units/aws-update-dns.service.yaml`: `update-dns-server
        // 169.254.169.253` makes AWS's VPC resolver the node's, before the kubelet.
        if name == AWS_UPDATE_DNS {
            return Err(held(
                "dns",
                format!(
                    "{name} made 169.254.169.253 (AWS's VPC resolver, link-local to EC2) the node's resolver, which an Azure VM cannot reach: api-int does not resolve and the kubelet cannot reach the API"
                ),
                "openshift/machine-config-operator templates/common/aws/units/aws-update-dns.service.yaml",
            ));
        }
    }
    let files: Vec<&Value> = config["storage"]["files"].as_array().into_iter().flatten().collect();
    let root = tempfile::tempdir().map_err(|e| at(format!("the sim cannot make a scratch root: {e}")))?;
    let root_path = root.path();
    std::fs::create_dir_all(root_path.join("etc/kubernetes")).ok();
    std::fs::create_dir_all(root_path.join("bin")).ok();
    let curl = root_path.join("bin/curl");
    std::fs::write(&curl, imds_curl(vm_id, vm_name)).ok();
    set_executable(&curl);
    for u in units.iter().filter(active) {
        let contents = u["contents"].as_str().unwrap_or_default();
        let before_kubelet = contents.lines().any(|l| {
            let l = l.trim();
            (l.starts_with("Before=") || l.starts_with("RequiredBy=")) && l.contains("kubelet-dependencies.target")
        });
        if !before_kubelet {
            continue;
        }
        let name = u["name"].as_str().unwrap_or_default();
        let Some(exec) = contents.lines().find_map(|l| l.trim().strip_prefix("ExecStart=")) else { continue };
        let path = exec.split_whitespace().next().unwrap_or_default();
        let Some(script) =
            files.iter().find(|f| f["path"] == path).and_then(|f| f["contents"]["source"].as_str()).and_then(data_url)
        else {
            return Err(at(format!("{name} failed: {path} is not a file the config writes")));
        };
        run(root_path, &String::from_utf8_lossy(&script)).map_err(|e| at(format!("{name} failed: {e}")))?;
    }
    let env = std::fs::read_to_string(root_path.join("etc/kubernetes/node.env")).unwrap_or_default();
    let worker_needs_env = units.iter().any(|u| {
        u["name"] == "kubelet.service"
            && u["dropins"].as_array().is_some_and(|d| {
                d.iter().any(|d| d["contents"].as_str().is_some_and(|c| c.contains("/etc/kubernetes/node.env")))
            })
    });
    if env.is_empty() && worker_needs_env {
        return Err(at(
            "kubelet.service does not start: its drop-in 20-node-env.conf needs /etc/kubernetes/node.env, which nothing wrote"
                .into(),
        ));
    }
    let var = |k: &str| {
        env.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).map(|v| v.trim().to_string()).unwrap_or_default()
    };
    let node_name = Some(var("KUBELET_NODE_NAME")).filter(|n| !n.is_empty()).unwrap_or_else(|| vm_name.to_string());
    let mut labels = serde_json::Map::new();
    let flag = format!("node-role.kubernetes.io/worker,node.openshift.io/os_id=rhcos,{}", var("CUSTOM_KUBELET_LABELS"));
    for l in flag.split(',').filter(|l| !l.is_empty()) {
        let (k, v) = l.split_once('=').unwrap_or((l, ""));
        labels.insert(k.to_string(), json!(v));
    }
    if let Some(refused) = refused_node_labels(labels.keys().map(String::as_str)) {
        return Err(at(format!("kubelet.service exits: failed to validate kubelet flags: {refused}")));
    }
    // The kubelet's own labels (kubernetes/kubernetes `pkg/kubelet/kubelet_node_status.go` `initialNode`).
    for (k, v) in [
        ("kubernetes.io/hostname", node_name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ] {
        labels.insert(k.to_string(), json!(v));
    }
    Ok(Registration { node_name, provider_id: var("KUBELET_PROVIDERID"), labels })
}

#[cfg(unix)]
fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
}

#[cfg(not(unix))]
fn set_executable(_: &Path) {}

/// Runs a unit's script under `bash` with `root` standing for `/` where it writes the kubelet's
/// environment, and `root/bin` first on the PATH; at most 20 seconds.
fn run(root: &Path, script: &str) -> Result<(), String> {
    let script = script.replace("/etc/kubernetes/", &format!("{}/etc/kubernetes/", root.display()));
    let file = root.join("unit.sh");
    std::fs::write(&file, script).map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new("bash")
        .arg(&file)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", root.join("bin").display()))
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read as _;
                    let _ = e.read_to_string(&mut err);
                }
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("exit {}: {}", status.code().unwrap_or(-1), err.trim()))
                };
            }
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                return Err("still running after 20 s".into());
            }
        }
    }
}

/// What OpenShift's worker kubelet keeps back from the machine for the system
/// (machine-config-operator `templates/worker/01-worker-kubelet/_base/files/kubelet.yaml`,
/// `systemReserved`: cpu 500m, memory 1Gi, ephemeral-storage 1Gi) and the pods it runs at most
/// (`maxPods: 250`).
const SYSTEM_RESERVED: (u64, u64) = (500, 1 << 30);
const MAX_PODS: u32 = 250;

/// The kubelet's `capacity` and `allocatable` on a VM of `size` (kubernetes
/// `pkg/kubelet/nodestatus/setters.go` `MachineInfo`: cpu and memory from the machine, pods from
/// `maxPods`, allocatable = capacity - reserved). GPUs are not among them: the NVIDIA device plugin
/// advertises `nvidia.com/gpu` once the GPU Operator runs on the Node, which is not the world's.
/// A size the world does not know ([`crate::arm::skus`]) reports none, and nothing schedules on it.
fn machine_info(size: &str) -> Option<(Value, Value)> {
    let s = crate::arm::skus::find(size)?;
    let memory = u64::from(s.memory_gib) << 30;
    let capacity = json!({
        "cpu": s.vcpus.to_string(),
        "memory": format!("{}Ki", memory >> 10),
        "pods": MAX_PODS.to_string(),
    });
    let allocatable = json!({
        "cpu": format!("{}m", u64::from(s.vcpus) * 1000 - SYSTEM_RESERVED.0),
        "memory": format!("{}Ki", (memory - SYSTEM_RESERVED.1) >> 10),
        "pods": MAX_PODS.to_string(),
    });
    Some((capacity, allocatable))
}

/// The Node a kubelet registers (kubernetes/kubernetes `pkg/kubelet/kubelet_node_status.go`
/// `initialNode`): its labels, its provider ID, its machine's capacity, and the taint
/// `--cloud-provider=external` puts on it until a cloud controller manager initializes it
/// (`node.cloudprovider.kubernetes.io/uninitialized`; on an AWS cluster, AWS's, which does not
/// know an `azure://` provider ID). MCO's worker kubelet unit passes `--cloud-provider=external`
/// on AWS (`templates/worker/01-worker-kubelet/_base/units/kubelet.service.yaml`).
pub fn node(reg: &Registration, vm_size: &str, now: &str) -> Value {
    let mut spec = json!({
        "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}],
    });
    if !reg.provider_id.is_empty() {
        spec["providerID"] = json!(reg.provider_id);
    }
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": reg.node_name, "labels": reg.labels},
        "spec": spec,
        "status": {
            "conditions": kubelet_conditions(true, now),
            "nodeInfo": {"operatingSystem": "linux", "architecture": "amd64", "osImage": "Red Hat Enterprise Linux CoreOS"},
            "addresses": [{"type": "Hostname", "address": reg.node_name}],
        },
    });
    if let Some((capacity, allocatable)) = machine_info(vm_size) {
        node["status"]["capacity"] = capacity;
        node["status"]["allocatable"] = allocatable;
    }
    node
}

/// The conditions a kubelet posts (kubernetes `pkg/kubelet/nodestatus/setters.go`: `ReadyCondition`,
/// `MemoryPressureCondition`, `DiskPressureCondition`, `PIDPressureCondition`, their reasons and
/// messages for a healthy node), or, once it stopped posting, each `Unknown` as the node lifecycle
/// controller leaves them (`tryUpdateNodeHealth`). CAPI's NodeHealthy summarises all four
/// (`internal/controllers/machine/machine_controller_status.go` `summarizeNodeConditions`): a Node
/// without the pressure conditions keeps its Machine `Ready` Unknown.
pub fn kubelet_conditions(posting: bool, since: &str) -> Vec<Value> {
    let mut out = vec![ready_condition(posting, since)];
    for (kind, reason, message) in [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ] {
        out.push(if posting {
            json!({"type": kind, "status": "False", "reason": reason, "message": message,
                "lastTransitionTime": since, "lastHeartbeatTime": since})
        } else {
            json!({"type": kind, "status": "Unknown", "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.", "lastTransitionTime": since})
        });
    }
    out
}

/// Whether a Node's `Ready` condition is True (CAPI's `noderefutil.IsNodeReady`).
pub fn node_ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// The Node's `Ready` condition: the kubelet's while it posts its status, the node lifecycle
/// controller's `Unknown` once it stopped for the grace period
/// (`pkg/controller/nodelifecycle/node_lifecycle_controller.go` `tryUpdateNodeHealth`).
pub fn ready_condition(posting: bool, since: &str) -> Value {
    if posting {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status", "lastTransitionTime": since, "lastHeartbeatTime": since})
    } else {
        json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.", "lastTransitionTime": since})
    }
}

/// An Azure VM's network interface MTU: Azure's default, 1,500 bytes (Microsoft Learn, "Configure
/// the maximum transmission unit (MTU) for virtual machines in Azure").
pub const AZURE_NIC_MTU: u32 = 1500;
/// What OVN-Kubernetes adds to the overlay MTU on an IPv4 node's interface (ovn-kubernetes
/// `go-controller/pkg/types/const.go` `GeneveHeaderLengthIPv4`).
const GENEVE_HEADER_IPV4: u32 = 58;
/// The kubelet's Ready condition while no network plugin has written its configuration (kubernetes
/// `pkg/kubelet/kubelet.go` `updateRuntimeUp`, the runtime's `NetworkReady` false; CRI-O's message).
const NETWORK_NOT_READY: &str = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: no CNI configuration file in /etc/kubernetes/cni/net.d/. Has your network provider started?";

/// Whether OVN-Kubernetes starts on the node: ovnkube-node refuses to when its interface's MTU
/// cannot carry the cluster's overlay MTU plus the Geneve header (ovn-kubernetes
/// `go-controller/pkg/node/default_node_network_controller.go` `validateVTEPInterfaceMTU`,
/// called from `gateway_init.go`); then no CNI configuration is written and the kubelet reports
/// the node not ready.
fn overlay_starts(world: &crate::world::World) -> Result<(), Held> {
    let Some(o) = world.config().openshift else { return Ok(()) };
    let required = o.cluster_network_mtu + GENEVE_HEADER_IPV4;
    if required <= AZURE_NIC_MTU {
        return Ok(());
    }
    Err(held(
        "network",
        format!(
            "ovnkube-node exits: MTU ({AZURE_NIC_MTU}) of network interface eth0 is too small for specified overlay MTU ({required}): the cluster's network runs at {} (Network cluster, status.clusterNetworkMTU), so the kubelet reports its container runtime network not ready",
            o.cluster_network_mtu
        ),
        "ovn-kubernetes go-controller/pkg/node/default_node_network_controller.go validateVTEPInterfaceMTU",
    ))
}

/// The kubelet's conditions: `posting` and the network up, Ready; posting without a network,
/// Ready False with the runtime's reason; not posting, the node lifecycle controller's Unknown.
fn node_conditions(posting: bool, network: bool, since: &str) -> Vec<Value> {
    let mut out = kubelet_conditions(posting, since);
    if posting && !network {
        out[0] = json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
            "message": NETWORK_NOT_READY, "lastTransitionTime": since, "lastHeartbeatTime": since});
    }
    out
}

/// The status of a Node's `Ready` condition (`True`, `False`, `Unknown`; empty without one).
pub fn ready_status(node: &Value) -> &str {
    node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str())
        .unwrap_or_default()
}

/// The repository OpenShift's release payload names its component images in, the OS image a
/// new node pivots to among them.
const RELEASE_COMPONENTS: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev";

/// An Amazon ECR registry host, reached only with credentials from an EC2 instance role.
fn is_ecr(host: &str) -> bool {
    let host = host.split(':').next().unwrap_or(host);
    (host.contains(".dkr.ecr.") || host.contains(".dkr.ecr-fips.")) && host.contains(".amazonaws.com")
}

/// Whether a booting VM can pull the release's images (the pivot to the pool's OS image at first
/// boot, then every Pod's image): from a mirror of the cluster's (an ImageDigestMirrorSet entry
/// whose source covers the release's repository), which the world places inside the VPC and so
/// reaches over the link the API path already needs, unless it is in Amazon ECR (the kubelet's
/// and CRI-O's credentials for ECR come from an EC2 instance role, which an Azure VM has not);
/// else from the source on the internet, which needs the subnet's NAT gateway or Azure's default
/// outbound access (`defaultOutboundAccess` absent or true; Microsoft Learn, "Default outbound
/// access in Azure"): AWS forwards nothing from a VPN connection to the internet.
fn image_pull(arm: &crate::arm::store::Store, machine: &str, world: &crate::world::World) -> Result<(), Held> {
    let mirrors = world.config().openshift.map(|o| o.mirrors).unwrap_or_default();
    let covering: Vec<&crate::world::ImageMirror> = mirrors
        .iter()
        .filter(|m| RELEASE_COMPONENTS == m.source || RELEASE_COMPONENTS.starts_with(&format!("{}/", m.source)))
        .collect();
    if covering.iter().any(|m| m.mirrors.iter().any(|x| !is_ecr(x.split('/').next().unwrap_or(x)))) {
        return Ok(());
    }
    let never = covering.iter().any(|m| m.never_contact_source);
    let subnet = super::joins::vm_subnet_resource(arm, machine);
    let props = subnet.map(|s| s.body["properties"].clone()).unwrap_or_default();
    let nat = props["natGateway"]["id"]
        .as_str()
        .and_then(|id| arm.get(&id.to_ascii_lowercase()))
        .is_some_and(|n| n.body["properties"]["publicIpAddresses"].as_array().is_some_and(|ips| !ips.is_empty()));
    let default_outbound = props["defaultOutboundAccess"].as_bool().unwrap_or(true);
    let ecr = if covering.is_empty() {
        String::new()
    } else {
        " (its mirrors are in Amazon ECR, which refuses a VM without an EC2 instance role)".to_string()
    };
    let why = if never {
        format!(
            "the cluster mirrors {RELEASE_COMPONENTS} only to Amazon ECR, which refuses a VM without an EC2 instance role, and NeverContactSource forbids the source"
        )
    } else if !nat && !default_outbound {
        format!(
            "the VM cannot pull {RELEASE_COMPONENTS}: its subnet is private (defaultOutboundAccess false) with no NAT gateway, and no mirror of the cluster's serves it over the link{ecr}"
        )
    } else {
        return Ok(());
    };
    Err(held(
        "pull",
        why,
        "Microsoft Learn: Default outbound access in Azure; Amazon VPC: VPN edge-to-edge routing; openshift/api ImageDigestMirrorSet",
    ))
}

/// What became of a booting machine: where it is held, and its Node once one registered.
pub struct Progress {
    pub held: Held,
    /// The Node's name, when the kubelet registered one with this Machine's provider ID.
    pub node: Option<String>,
}

/// Takes a Machine whose VM resolves the cluster's names (held at `boot` by [`super::joins`])
/// through its boot, registering its Node when the boot is done, and keeps the Node's `Ready`
/// condition as the node lifecycle controller would. `pointer` is the bootstrap pointer's config
/// source (`https://<host>:22623/config/<pool>`); `dns` why the VM's DNS fails now, if it does
/// (a registered Node's kubelet then stops posting: it no longer finds the API).
pub fn advance(
    s: &mut Store,
    arm: &crate::arm::store::Store,
    link: &Link,
    machine: &Value,
    pointer: &str,
    dns: Option<Held>,
    world: &crate::world::World,
) -> Progress {
    let config = world.config();
    let name = machine["metadata"]["name"].as_str().unwrap_or_default();
    let now = world.clock.now();
    let stamp = super::store::timestamp(world);
    let Some(vm) = arm.of_kind(&crate::arm::kinds::VM).find(|vm| vm.name == name) else {
        return Progress { held: held("vm", "the VM is gone".into(), "sim"), node: None };
    };
    let (vm_id, created) = (vm.id.clone(), vm.created_at);
    let vm_size = vm.body["properties"]["hardwareProfile"]["vmSize"].as_str().unwrap_or_default().to_string();
    let infra = config.openshift.as_ref().map(|o| o.infrastructure_name.clone()).unwrap_or_default();
    let subnet = super::joins::vm_subnet(arm, name);
    // The path to the API, the machine-config server's answer, and the kubelet's preparation.
    // Ignition needs the machine-config server once; the kubelet needs the API all along.
    let azure_side = |port: i64| -> Result<(), Held> {
        let Some(dest) = api_lb_address(link, &infra) else { return Ok(()) };
        nsg_allows(arm, name, "Tcp", port, dest).map_err(|why| {
            held("api_path", why, "Microsoft Learn: Network security groups (rule processing, default rules); Virtual network service tags (VirtualNetwork)")
        })
    };
    let hung = config.faults.hung_vms.iter().any(|v| v.eq_ignore_ascii_case(name));
    let api = dns
        .map_or(Ok(()), Err)
        .and_then(|()| {
            if hung {
                Err(held("kubelet", "the VM hangs (fault hung_vms): its kubelet posts nothing".into(), "sim fault"))
            } else {
                Ok(())
            }
        })
        .and_then(|()| api_path(link, &infra, subnet.as_ref(), 6443))
        .and_then(|()| azure_side(6443));
    let node_name = s.registered.get(&vm_id).cloned();
    let Some(node_name) = node_name else {
        let mcs = i64::from(super::mco::SERVER_PORT);
        if let Err(h) = api_path(link, &infra, subnet.as_ref(), mcs).and_then(|()| azure_side(mcs)) {
            return Progress { held: h, node: None };
        }
        let pool = pointer.rsplit_once("/config/").map(|(_, p)| p).unwrap_or_default().to_string();
        let served = match served_config(s, &pool) {
            Ok(c) => c,
            Err(h) => return Progress { held: h, node: None },
        };
        let rendered = s
            .value(super::kinds::MACHINECONFIGURATION, "machineconfigpools", "", &pool)
            .and_then(|p| p["status"]["configuration"]["name"].as_str())
            .unwrap_or_default()
            .to_string();
        let key = (vm_id.clone(), served.to_string());
        let reg = match s.kubelets.get(&key) {
            Some(r) => r.clone(),
            None => {
                let r = kubelet(&served, &vm_id, name);
                s.kubelets.insert(key, r.clone());
                r
            }
        };
        let reg = match reg {
            Ok(r) => r,
            Err(h) => return Progress { held: h, node: None },
        };
        if let Err(h) = api {
            return Progress { held: h, node: None };
        }
        if let Err(h) = image_pull(arm, name, world) {
            return Progress { held: h, node: None };
        }
        // The first pass that gets here is the first fetch that succeeds (the passes come
        // far more often than Ignition's 5 s backoff): the rest of the boot runs from then.
        let due = *s.boots.entry(vm_id.clone()).or_insert_with(|| {
            let boot = world.lro_duration(BOOT_SECS.0, BOOT_SECS.1);
            (created + boot).max(now + boot.mul_f64(AFTER_FETCH))
        });
        if now < due {
            return Progress {
                held: held(
                    "booting",
                    format!(
                        "the VM boots: Ignition, the pivot to the pool's image, the kubelet ({} s to go)",
                        due.duration_since(now).as_secs()
                    ),
                    "sim latency profile (BOOT_SECS)",
                ),
                node: None,
            };
        }
        if let Err(h) = client_certificate(s, &reg.node_name, &stamp) {
            return Progress { held: h, node: None };
        }
        let network = overlay_starts(world);
        if s.value("", "nodes", "", &reg.node_name).is_none() {
            let kind = super::kinds::Kind::served("", "nodes").expect("nodes served");
            let mut v = node(&reg, &vm_size, &stamp);
            v["status"]["conditions"] = json!(node_conditions(true, network.is_ok(), &stamp));
            s.insert(kind, v);
        }
        s.registered.insert(vm_id.clone(), reg.node_name.clone());
        s.booted.entry(reg.node_name.clone()).or_insert(rendered);
        s.heartbeats.insert(reg.node_name.clone(), now);
        return network_or_joined(s, machine, &reg.node_name, network);
    };
    // A kubelet whose client certificate expired is refused by the API and bootstraps again
    // (kubernetes `pkg/kubelet/certificate/bootstrap/bootstrap.go` `LoadClientConfig`: a
    // certificate no longer valid sends it back to the bootstrap kubeconfig): a new request,
    // which the machine approver refuses now that its Node exists ([`csr_approved`]). Until one
    // is approved and signed it posts nothing.
    let expired = config.faults.expired_client_certs.iter().any(|v| v.eq_ignore_ascii_case(name))
        && !s.renewed.contains(&node_name);
    let api = if expired {
        if s.rebootstrapping.insert(node_name.clone()) {
            s.csrs.remove(&node_name);
        }
        match client_certificate(s, &node_name, &stamp) {
            Ok(()) => {
                s.rebootstrapping.remove(&node_name);
                s.renewed.insert(node_name.clone());
                api
            }
            Err(why) => Err(held(
                "csr",
                format!("its client certificate expired and the API refuses it; it bootstraps again: {}", why.message),
                "kubernetes pkg/kubelet/certificate/bootstrap/bootstrap.go LoadClientConfig; openshift/cluster-machine-approver pkg/controller/csr_check.go authorizeNodeClientCSR",
            )),
        }
    } else {
        api
    };
    // A registered Node: its kubelet posts status while the path holds.
    let grace = world.lro_duration(NODE_MONITOR_GRACE_SECS, NODE_MONITOR_GRACE_SECS);
    let posting = match &api {
        Ok(()) => {
            s.heartbeats.insert(node_name.clone(), now);
            true
        }
        Err(_) => s.heartbeats.get(&node_name).is_some_and(|last| now.duration_since(*last) < grace),
    };
    let network = overlay_starts(world);
    let key = super::store::key(super::kinds::Kind::served("", "nodes").expect("nodes served"), "", &node_name);
    if let Some(mut obj) = s.objects.get(&key).cloned() {
        let wanted = node_conditions(posting, network.is_ok(), &stamp);
        if ready_status(&obj.value) != wanted[0]["status"].as_str().unwrap_or_default() {
            obj.value["status"]["conditions"] = json!(wanted);
            s.put(obj);
        }
    }
    match api {
        Err(h) if !posting => Progress { held: h, node: Some(node_name) },
        _ => network_or_joined(s, machine, &node_name, network),
    }
}

/// A registered Node whose network plugin does not start is held at `network`, once CAPI could
/// match it; else where [`joined`] says.
fn network_or_joined(s: &Store, machine: &Value, node_name: &str, network: Result<(), Held>) -> Progress {
    let progress = joined(s, machine, node_name);
    match network {
        Err(h) if progress.held.step == "joined" => Progress { held: h, node: progress.node },
        _ => progress,
    }
}

/// The kubelet's first client certificate, which it asks for before it can register: on
/// OpenShift the machine approver approves it only for a node named as a Machine's `InternalDNS`
/// address (case aside), and for Cluster API Machines only its `machine-approver-capi` instance
/// looks (openshift/cluster-machine-approver `pkg/machinehandler/machinehandler.go`
/// `FindMatchingMachineFromInternalDNS`, `manifests/04-deployment-capi.yaml`; CAPZ gives a VM's
/// Machine the address `InternalDNS` = the VM's name, `azure/services/virtualmachines`
/// `getAddresses`). Without it the request stays Pending and no Node registers.
/// The kubelet's client certificate for `node_name`: its request (made once), approved where the
/// machine approver would approve it, and signed by kube-controller-manager's signer; else where
/// it is held. The kubelet posts only with that certificate.
fn client_certificate(s: &mut Store, node_name: &str, stamp: &str) -> Result<(), Held> {
    let (csr, approved) = kubelet_csr(s, node_name, stamp);
    if !approved {
        csr_approved(s, node_name, &csr)?;
        approve(s, &csr, stamp);
    }
    if s.value(super::kinds::CERTIFICATES, "certificatesigningrequests", "", &csr)
        .is_none_or(|c| c["status"]["certificate"].as_str().is_none_or(str::is_empty))
    {
        return Err(held(
            "csr",
            format!("certificate signing request {csr} is approved; the kubelet waits for its certificate"),
            "kubernetes pkg/controller/certificates/signer (csrsigning, kubernetes.io/kube-apiserver-client-kubelet)",
        ));
    }
    Ok(())
}

fn csr_approved(s: &Store, node_name: &str, csr: &str) -> Result<(), Held> {
    use super::openshift::{MACHINE_APPROVER_CAPI, MACHINE_APPROVER_NAMESPACE};
    let at = |message: String| {
        held(
            "csr",
            message,
            "openshift/cluster-machine-approver pkg/machinehandler/machinehandler.go, manifests/04-deployment-capi.yaml",
        )
    };
    // OpenShift's own (TechPreviewNoUpgrade), or one a cluster's owner (or xcsp) runs from the
    // same image for Cluster API Machines (`--api-group-version=cluster.x-k8s.io/...`), whose
    // `--machine-namespace`, when set, must be the Machine's (its `main.go`).
    let machine_ns = s
        .objects
        .iter()
        .filter(|(k, _)| k.0 == "cluster.x-k8s.io" && k.1 == "machines")
        .find(|(_, o)| o.value["metadata"]["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(node_name)))
        .and_then(|(_, o)| o.value["metadata"]["namespace"].as_str().map(String::from));
    let another = s
        .objects
        .iter()
        .filter(|(k, _)| k.0 == "apps" && k.1 == "deployments")
        .any(|(_, d)| super::pods::approves_capi_machines(&d.value, machine_ns.as_deref()));
    if s.value("apps", "deployments", MACHINE_APPROVER_NAMESPACE, MACHINE_APPROVER_CAPI).is_none() && !another {
        return Err(at(format!(
            "the kubelet's certificate signing request {csr} stays Pending: no machine approver for Cluster API Machines runs (Deployment {MACHINE_APPROVER_NAMESPACE}/{MACHINE_APPROVER_CAPI}, deployed only with the TechPreviewNoUpgrade feature set); `oc adm certificate approve {csr}` would let it register"
        )));
    }
    // `authorizeNodeClientCSR`: a bootstrap request for a Node that exists, or for a Machine that
    // already has its node, is never approved.
    if s.value("", "nodes", "", node_name).is_some() {
        return Err(at(format!(
            "the kubelet's certificate signing request {csr} stays Pending: node {node_name} already exists, so the machine approver cannot approve it; `oc adm certificate approve {csr}` would let it post again"
        )));
    }
    let known = s.objects.iter().filter(|(k, _)| k.0 == "cluster.x-k8s.io" && k.1 == "machines").any(|(_, o)| {
        o.value["status"]["addresses"].as_array().is_some_and(|a| {
            a.iter().any(|a| {
                a["type"] == "InternalDNS"
                    && a["address"].as_str().is_some_and(|x| x.trim_end_matches('.').eq_ignore_ascii_case(node_name))
            })
        })
    });
    if !known {
        return Err(at(format!(
            "the kubelet's certificate signing request {csr} for node {node_name} stays Pending: no Machine has the address InternalDNS {node_name}, so the machine approver does not approve it"
        )));
    }
    Ok(())
}

/// The signer of a kubelet's client certificate, and the account the bootstrap kubeconfig
/// OpenShift's machine config gives the kubelet (k8s.io/api `certificates/v1`
/// `KubeAPIServerClientKubeletSignerName`; openshift/cluster-machine-approver
/// `pkg/controller/csr_check.go` `nodeBootstrapperUsername`).
const KUBELET_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const NODE_BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
/// Its groups, as the API server gives a service account's token.
pub const NODE_BOOTSTRAPPER_GROUPS: &[&str] =
    &["system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator", "system:authenticated"];

/// The kubelet's bootstrap CertificateSigningRequest for `node_name`, made on its first need (and
/// again if someone deleted it): cluster-scoped, named `csr-` and five characters as
/// `generateName` gives, for the client signer, asked by the node bootstrapper, with a real
/// PKCS#10 request for `CN=system:node:<node>, O=system:nodes` on a fresh ECDSA P-256 key (what
/// the kubelet's certificate manager sends, `pkg/kubelet/certificate`). Its name, and whether it
/// is approved (a `True` `Approved` condition: the machine approver's, or `oc adm certificate
/// approve`'s through the `approval` subresource).
fn kubelet_csr(s: &mut Store, node_name: &str, stamp: &str) -> (String, bool) {
    let kind =
        super::kinds::Kind::served(super::kinds::CERTIFICATES, "certificatesigningrequests").expect("csr served");
    if let Some(name) = s.csrs.get(node_name).cloned()
        && let Some(csr) = s.value(super::kinds::CERTIFICATES, "certificatesigningrequests", "", &name)
    {
        let approved = csr["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Approved" && c["status"] == "True"));
        return (name, approved);
    }
    let request = (|| {
        let key = rcgen::KeyPair::generate().ok()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).ok()?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CommonName, format!("system:node:{node_name}"));
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:nodes");
        params.serialize_request(&key).ok()?.pem().ok()
    })()
    .unwrap_or_default();
    use base64::Engine as _;
    let suffix: String =
        uuid::Uuid::new_v4().simple().to_string().chars().filter(char::is_ascii_lowercase).take(5).collect();
    let name = format!("csr-{suffix:x<5}");
    let csr = json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "generateName": "csr-", "creationTimestamp": stamp},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request),
            "signerName": KUBELET_SIGNER,
            "usages": ["digital signature", "client auth"],
            "username": NODE_BOOTSTRAPPER,
            "groups": NODE_BOOTSTRAPPER_GROUPS,
        },
        "status": {},
    });
    s.insert(kind, csr);
    s.csrs.insert(node_name.to_string(), name.clone());
    (name, false)
}

/// The machine approver's approval (openshift/cluster-machine-approver `pkg/controller/controller.go`
/// `approve`: condition `Approved`, reason `NodeCSRApprove`, its message). Issuing the
/// certificate (kube-controller-manager's `csrsigning`) is not emulated.
fn approve(s: &mut Store, csr: &str, stamp: &str) {
    let key = super::store::key(
        super::kinds::Kind::served(super::kinds::CERTIFICATES, "certificatesigningrequests").expect("csr served"),
        "",
        csr,
    );
    if let Some(mut obj) = s.objects.get(&key).cloned() {
        obj.value["status"]["conditions"] = json!([{
            "type": "Approved", "status": "True", "reason": "NodeCSRApprove",
            "message": "This CSR was approved by the Node CSR Approver (cluster-machine-approver)",
            "lastUpdateTime": stamp, "lastTransitionTime": stamp,
        }]);
        s.put(obj);
    }
}

/// A registered Node: CAPI matches it to the Machine only when the provider IDs are the same
/// (cluster-api `internal/controllers/machine/machine_controller_noderef.go` `getNode`).
fn joined(s: &Store, machine: &Value, node_name: &str) -> Progress {
    let node_pid =
        s.value("", "nodes", "", node_name).and_then(|n| n["spec"]["providerID"].as_str()).unwrap_or_default();
    let machine_pid = machine["spec"]["providerID"].as_str().unwrap_or_default();
    if node_pid != machine_pid {
        return Progress {
            held: held(
                "node_ref",
                format!(
                    "the Node {node_name} registered with provider ID {:?}, the Machine's is {machine_pid:?}: CAPI never matches them",
                    node_pid
                ),
                "cluster-api internal/controllers/machine/machine_controller_noderef.go getNode",
            ),
            node: None,
        };
    }
    Progress {
        held: held(
            "joined",
            format!("the Node {node_name} is this Machine's"),
            "cluster-api machine_controller_noderef.go",
        ),
        node: Some(node_name.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aws_clusters_overlay_mtu_keeps_an_azure_nodes_network_down_and_a_migrated_one_does_not() {
        let world = |mtu: u32| {
            crate::world::World::new(crate::world::SimConfig {
                openshift: Some(crate::world::OpenShift {
                    infrastructure_name: "infra".into(),
                    api_internal_url: "https://api-int.example.mil:6443".into(),
                    region: "us-gov-west-1".into(),
                    capz: true,
                    service_account_issuer: None,
                    cluster_network_mtu: mtu,
                    capz_authority_host: None,
                    fips: false,
                    ovn_ipsec: false,
                    worker_time_servers: vec![],
                    cluster_hosted_dns: false,
                    control_plane_nodes: false,
                    proxy: None,
                    mirrors: vec![],
                    ebs_csi: false,
                    feature_set: Default::default(),
                }),
                ..Default::default()
            })
        };
        let down = overlay_starts(&world(crate::world::AWS_CLUSTER_NETWORK_MTU)).unwrap_err();
        assert_eq!(down.step, "network");
        assert!(
            down.message.starts_with(
                "ovnkube-node exits: MTU (1500) of network interface eth0 is too small for specified overlay MTU (8959)"
            ),
            "{}",
            down.message
        );
        // 1442 + 58 is the NIC's 1500 exactly; one more byte does not fit.
        assert!(overlay_starts(&world(1442)).is_ok());
        assert!(overlay_starts(&world(1443)).is_err());
        let conditions = node_conditions(true, false, "2026-11-28T00:00:00Z");
        assert_eq!((&conditions[0]["status"], &conditions[0]["reason"]), (&json!("False"), &json!("KubeletNotReady")));
        assert_eq!(ready_status(&json!({"status": {"conditions": conditions}})), "False");
        assert_eq!(node_conditions(true, true, "t")[0]["status"], "True");
        assert_eq!(node_conditions(false, false, "t")[0]["status"], "Unknown", "not posting: the controller's Unknown");
    }

    fn data(s: &str) -> String {
        use base64::Engine as _;
        format!("data:text/plain;charset=utf-8;base64,{}", base64::engine::general_purpose::STANDARD.encode(s))
    }

    fn config(units: Value, script: &str) -> Value {
        json!({"systemd": {"units": units},
            "storage": {"files": [{"path": "/usr/local/bin/env", "contents": {"source": data(script)}}]}})
    }

    const UNIT: &str = "[Unit]\nBefore=kubelet-dependencies.target\n[Service]\nExecStart=/usr/local/bin/env\n";

    #[test]
    fn an_aws_unit_left_enabled_fails_on_azure() {
        let c = config(json!([{"name": "aws-kubelet-providerid.service", "enabled": true}]), "");
        let e = kubelet(&c, "/subscriptions/s/resourceGroups/RG/x", "vm-1").unwrap_err();
        assert_eq!(e.step, "kubelet");
        assert!(e.message.contains("EC2 instance metadata"), "{}", e.message);
        let masked = config(json!([{"name": "aws-kubelet-providerid.service", "mask": true}]), "");
        assert!(kubelet(&masked, "id", "vm-1").is_ok());
    }

    #[test]
    fn a_script_reads_the_azure_metadata_service_and_writes_the_kubelet_environment() {
        let script = r#"#!/bin/bash
set -euo pipefail
id="$(curl -fsS -H 'Metadata: true' 'http://169.254.169.254/metadata/instance/compute/resourceId?api-version=2021-02-01&format=text')"
name="$(curl -fsS -H 'Metadata: true' 'http://169.254.169.254/metadata/instance/compute/name?api-version=2021-02-01&format=text')"
printf 'KUBELET_NODE_NAME=%s\nKUBELET_PROVIDERID=azure://%s\nCUSTOM_KUBELET_LABELS=gpu=true\n' "$name" "$id" > /etc/kubernetes/node.env
"#;
        let c = config(json!([{"name": "env.service", "enabled": true, "contents": UNIT}]), script);
        let r =
            kubelet(&c, "/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-1", "vm-1")
                .unwrap();
        assert_eq!(r.node_name, "vm-1");
        assert_eq!(
            r.provider_id,
            "azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-1"
        );
        assert_eq!(r.labels["gpu"], "true");
        assert_eq!(r.labels["node-role.kubernetes.io/worker"], "");
    }

    #[test]
    fn the_metadata_service_wants_its_header_and_the_ec2_one_is_out_of_reach() {
        let no_header = "#!/bin/bash\nset -e\ncurl -fsS 'http://169.254.169.254/metadata/instance/compute/name?api-version=2021-02-01&format=text'\n";
        let c = config(json!([{"name": "env.service", "enabled": true, "contents": UNIT}]), no_header);
        assert!(kubelet(&c, "id", "vm").unwrap_err().message.contains("exit 22"));
        let ec2 = "#!/bin/bash\nset -e\ncurl -fsS http://169.254.169.254/latest/meta-data/instance-id\n";
        let c = config(json!([{"name": "env.service", "enabled": true, "contents": UNIT}]), ec2);
        assert!(kubelet(&c, "id", "vm").unwrap_err().message.contains("exit 7"));
    }

    #[test]
    fn the_kubelet_refuses_node_labels_in_the_kubernetes_namespaces_it_may_not_set() {
        // OpenShift's own roles and the kubelet's namespaces pass; a custom role does not.
        let ok = ["node-role.kubernetes.io/worker", "node.openshift.io/os_id", "node.kubernetes.io/x", "gpu"];
        assert_eq!(refused_node_labels(ok.into_iter()), None);
        let refused = refused_node_labels(
            ["node-role.kubernetes.io/gpu", "app.kubernetes.io/name", "x.k8s.io/y", "kubernetes.io/hostname"]
                .into_iter(),
        )
        .unwrap();
        assert!(
            refused.starts_with("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [app.kubernetes.io/name node-role.kubernetes.io/gpu x.k8s.io/y]\n"),
            "{refused}"
        );
        let script =
            "#!/bin/bash\nprintf 'CUSTOM_KUBELET_LABELS=node-role.kubernetes.io/gpu\\n' > /etc/kubernetes/node.env\n";
        let c = config(json!([{"name": "env.service", "enabled": true, "contents": UNIT}]), script);
        let e = kubelet(&c, "id", "vm").unwrap_err();
        assert_eq!(e.step, "kubelet");
        assert!(
            e.message.starts_with("kubelet.service exits: failed to validate kubelet flags: unknown"),
            "{}",
            e.message
        );
    }

    #[test]
    fn without_node_env_the_worker_kubelet_does_not_start() {
        let c = json!({"systemd": {"units": [{"name": "kubelet.service", "dropins": [{"name": "20-node-env.conf",
            "contents": "[Service]\nEnvironmentFile=/etc/kubernetes/node.env\n"}]}]}});
        assert!(kubelet(&c, "id", "vm").unwrap_err().message.contains("node.env"));
    }

    #[test]
    fn an_enabled_aws_dns_unit_points_the_node_at_a_resolver_it_cannot_reach() {
        let unit = |enabled: bool| {
            json!({"systemd": {"units": [{"name": AWS_UPDATE_DNS, "enabled": enabled,
                "contents": "[Unit]\nBefore=kubelet-dependencies.target\n[Service]\nExecStart=/usr/local/bin/update-dns-server 169.254.169.253\n"}]}})
        };
        let held = kubelet(&unit(true), "id", "vm").unwrap_err();
        assert_eq!(held.step, "dns");
        assert!(held.message.contains("169.254.169.253"), "{}", held.message);
        let mut masked = unit(true);
        masked["systemd"]["units"][0]["mask"] = json!(true);
        for c in [unit(false), masked] {
            assert!(kubelet(&c, "id", "vm").is_ok_and(|r| r.node_name == "vm"), "{c}");
        }
    }

    #[test]
    fn a_node_keeps_time_from_what_chrony_conf_names() {
        let with = |conf: &str| {
            let source = format!("data:,{}", conf.replace(' ', "%20").replace('\n', "%0A"));
            json!({"storage": {"files": [{"path": "/etc/chrony.conf", "contents": {"source": source}}]}})
        };
        assert!(time_source(&json!({})).is_ok_and(|s| s.contains("PTP")), "RHCOS's platform default");
        let aws = time_source(&with("server 169.254.169.123 iburst\nmakestep 1.0 3\n")).unwrap_err();
        assert!(aws.contains("169.254.169.123"), "{aws}");
        assert!(time_source(&with("refclock PHC /dev/ptp_hyperv poll 3\n")).is_ok());
        assert!(
            time_source(&with("server 169.254.169.123 iburst\nserver 10.0.0.2 iburst\n"))
                .is_ok_and(|s| s.contains("10.0.0.2"))
        );
    }
}
