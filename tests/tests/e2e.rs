//! End to end through the built binaries: `xcsp-sim` (ARM emulator, moto behind the EC2 fidelity
//! layer, an IPI cluster fixture) and `xcsp`, driving the real SDK clients over HTTP.
//! - The IL5 example: plan, apply, all four tunnels UP as the sim judges them, a second plan with
//!   no changes (exit 0 with --detailed-exitcode), destroy --sweep leaving nothing in either cloud.
//! - Crash safety: apply killed with SIGKILL at five points across the run, re-run each time; it
//!   converges and each cloud holds exactly one of every resource, none untracked.
//!
//! Needs moto (scripts/moto-setup); fails saying so when it is missing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xcsp_tests::bounds::{Bound, Timing};
use xcsp_tests::{bin, booting_vhd, root};

/// A running `xcsp-sim` with the IL5 cluster fixture and an OpenShift Kubernetes API (CAPZ
/// installed) whose kubeconfig every `xcsp` run gets (`KUBECONFIG`); killed (with its moto) when
/// dropped.
struct Clouds {
    child: Child,
    url: String,
    moto: String,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Clouds {
    fn start() -> Clouds {
        Clouds::upstream()
    }

    /// The same world with its cluster run by upstream programs (kube-apiserver, etcd,
    /// kube-controller-manager, Cluster API's manager; `xcsp-sim --upstream`), the IL5 spec's
    /// `api-int` name the API server's in the world. Fails, never skips, without them.
    fn upstream() -> Clouds {
        assert!(
            std::env::var_os("XCSP_UPSTREAM_BIN").is_some_and(|b| PathBuf::from(b).join("kube-apiserver").exists()),
            "the upstream cluster is not built: set XCSP_UPSTREAM_BIN=$(scripts/upstream-setup) (scripts/test does)"
        );
        // With the AWS EBS CSI driver, as OpenShift installs it on AWS.
        Clouds::start_with(&["--upstream", "--api-host", "api-int.il5.example.mil", "--ebs-csi"])
    }

    fn start_with(extra: &[&str]) -> Clouds {
        let venv = std::env::var("XCSP_MOTO_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/xcsp-moto"));
        assert!(
            venv.join("bin/moto_server").exists(),
            "moto is not installed at {}: run scripts/moto-setup (scripts/test does)",
            venv.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let default_set = extra.windows(2).any(|w| w == ["--feature-set", "Default"]);
        let mtu_given = extra.contains(&"--cluster-network-mtu");
        let mut child = Command::new(bin("xcsp-sim"))
            // The IL5 cluster's network on AWS, and its API an OpenShift one with CAPZ installed as
            // the seed proposes: OpenShift's admission sees every object xcsp applies.
            .args(["--latency", "fast", "--fixture", "il5-gpu-x7k2p:us-gov-west-1"])
            .args(["--openshift", "il5-gpu-x7k2p:us-gov-west-1"])
            // OpenShift's CAPZ, unless the world plays a Default cluster, which runs no Cluster API.
            .args(if default_set { &[][..] } else { &["--capz"][..] })
            // Its MTU migrated to what the link carries (the example's overlay_mtu): as installed,
            // 8901, the pool is refused (tests/tests/preflight.rs).
            .args(if mtu_given { &[][..] } else { &["--cluster-network-mtu", "1300"][..] })
            // The IL5 tenant is Azure Government's: its owner pointed CAPZ at that authority (as
            // installed, CAPZ asks the public one and the pool is refused, tests/tests/preflight.rs).
            .args(if default_set {
                &[][..]
            } else {
                &["--capz-authority-host", "https://login.microsoftonline.us/"][..]
            })
            // Its Entra tenant is homed in Azure Government: the public authority refuses it.
            .args(["--azure-cloud", "usgovernment"])
            // An IL5 cluster, installed in FIPS mode, as the example says.
            .arg("--fips")
            // The STS-mode cluster's public OIDC issuer, the one the IL5 example federates.
            .args(["--service-account-issuer", "https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("xcsp-sim starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a first line").unwrap();
        let url = first.split_whitespace().nth(3).expect("xcsp-sim listening on URL").to_string();
        let mut moto = String::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(rest) = line.split("(moto at ").nth(1) {
                moto = rest.trim_end_matches(')').to_string();
            }
            if line.starts_with("xcsp-sim fixture") {
                break;
            }
        }
        assert!(kubeconfig.exists(), "xcsp-sim wrote no kubeconfig");
        Clouds { child, url, moto, kubeconfig, _dir: dir }
    }

    /// A Kubernetes API read as a client makes it with the kubeconfig: its server (the sim's TLS
    /// port), trusting its CA, with its bearer token.
    fn kube_get(&self, path: &str) -> serde_json::Value {
        self.kube_request("GET", path, None)
    }

    /// A request to the sim's Kubernetes API as `kubectl` makes it (TLS to its CA, the bearer
    /// token), with a body of `(content type, text)`; answers the JSON (null on an error status).
    fn kube_request(&self, method: &str, path: &str, body: Option<(&str, &str)>) -> serde_json::Value {
        use base64::Engine as _;
        let kubeconfig = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let field = |name: &str| {
            let value =
                kubeconfig.lines().find_map(|l| l.trim().strip_prefix(name)).unwrap_or_else(|| panic!("{name}"));
            value.trim().trim_matches('"').to_string()
        };
        let (server, token) = (field("server:"), field("token:"));
        assert!(server.starts_with("https://"), "the kubeconfig names {server}");
        let ca = self._dir.path().join("kube-ca.pem");
        let pem = base64::engine::general_purpose::STANDARD.decode(field("certificate-authority-data:")).unwrap();
        std::fs::write(&ca, pem).unwrap();
        let mut curl = Command::new("curl");
        curl.args(["-sf", "-X", method, "--cacert"]).arg(&ca).args([
            "-H",
            &format!("Authorization: Bearer {token}"),
            &format!("{server}{path}"),
        ]);
        if let Some((content_type, text)) = body {
            curl.args(["-H", &format!("Content-Type: {content_type}"), "--data-binary", text]);
        }
        let out = curl.output().expect("curl");
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
    }

    /// The Kubernetes objects in the pool's namespace: (kind, name), the Machines and AzureMachines
    /// CAPI makes left out.
    /// What kube-controller-manager puts in every namespace (`serviceaccount-controller`,
    /// `root-ca-certificate-publisher`), which is not xcsp's.
    const CLUSTER_MADE: &[(&str, &str)] = &[("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")];

    /// Every object of the kinds xcsp and the world's stand-ins deal in, listed through the API
    /// server: `{"items": [{"kind", "namespace", "name", "object"}]}`.
    fn objects(&self) -> serde_json::Value {
        const LISTS: &[&str] = &[
            "/api/v1/namespaces",
            "/api/v1/secrets",
            "/api/v1/configmaps",
            "/api/v1/serviceaccounts",
            "/api/v1/nodes",
            "/apis/apps/v1/deployments",
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/azureclusteridentities",
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/azureclusters",
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/azuremachinetemplates",
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/azuremachines",
            "/apis/cluster.x-k8s.io/v1beta1/clusters",
            "/apis/cluster.x-k8s.io/v1beta1/machinesets",
            "/apis/cluster.x-k8s.io/v1beta1/machinehealthchecks",
            "/apis/cluster.x-k8s.io/v1beta1/machines",
            "/apis/config.openshift.io/v1/infrastructures",
            "/apis/config.openshift.io/v1/authentications",
            "/apis/machineconfiguration.openshift.io/v1/machineconfigpools",
            "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        ];
        let mut items = Vec::new();
        for path in LISTS {
            let list = self.kube_get(path);
            let kind = list["kind"].as_str().unwrap_or_default().trim_end_matches("List").to_string();
            for o in list["items"].as_array().cloned().unwrap_or_default() {
                items.push(serde_json::json!({"kind": kind, "namespace": o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    "name": o["metadata"]["name"], "object": o}));
            }
        }
        serde_json::json!({ "items": items })
    }

    fn kube_objects(&self) -> Vec<(String, String)> {
        let all = self.objects()["items"].as_array().cloned().unwrap_or_default();
        let mut out: Vec<(String, String)> = all
            .iter()
            .filter(|o| o["namespace"] == "xcsp-il5-gpu" && o["kind"] != "Machine" && o["kind"] != "AzureMachine")
            .filter(|o| !Clouds::CLUSTER_MADE.iter().any(|(k, n)| o["kind"] == *k && o["name"] == *n))
            // CAPZ's own: the `azure.json` Secret its AzureJSONTemplate controller makes for each
            // AzureMachineTemplate (CAPZ `controllers/helpers.go`, `<template>-azure-json`).
            .filter(|o| !(o["kind"] == "Secret" && o["name"].as_str().is_some_and(|n| n.ends_with("-azure-json"))))
            .map(|o| (o["kind"].as_str().unwrap_or_default().into(), o["name"].as_str().unwrap_or_default().into()))
            .collect();
        out.sort();
        out
    }

    /// `kubectl ARGS -o json` of the upstream cluster's own build, with the world's kubeconfig.
    fn kubectl(&self, args: &[&str]) -> serde_json::Value {
        let bin = PathBuf::from(std::env::var_os("XCSP_UPSTREAM_BIN").expect("XCSP_UPSTREAM_BIN")).join("kubectl");
        let out = Command::new(bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .args(["-o", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `xcsp` with the environment that points the SDKs here.
    fn xcsp(&self, state: &Path) -> Command {
        let mut c = Command::new(bin("xcsp"));
        c.env("AWS_ENDPOINT_URL", &self.url)
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("XCSP_AZURE_ENDPOINT", &self.url)
            .env("AZURE_AUTHORITY_HOST", &self.url)
            .env("AZURE_CLIENT_ID", "xcsp-e2e")
            .env("AZURE_CLIENT_SECRET", "local")
            .env("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000001")
            .env("XCSP_OFFLINE", "1")
            .env("XCSP_STATE_DIR", state)
            .env("KUBECONFIG", &self.kubeconfig)
            // A home without ~/.kube/config: the machine's own kubeconfig never takes part.
            .env("HOME", self._dir.path())
            .env_remove("XCSP_KUBE_CONTEXT")
            .env_remove("AWS_PROFILE");
        c
    }

    /// Deletes the IL5 pool's Machine `name` as a person would (`oc delete machine`).
    fn delete_machine(&self, name: &str) {
        self.kube_request(
            "DELETE",
            &format!("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machines/{name}"),
            None,
        );
    }

    /// The world's timing, what a wait for an upstream controller derives its deadline from.
    fn timing(&self) -> Timing {
        Timing::new(self.get("/_sim/timing"))
    }

    fn get(&self, path: &str) -> serde_json::Value {
        let out = Command::new("curl").args(["-sf", &format!("{}{path}", self.url)]).output().expect("curl");
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
    }

    /// The answer of an EC2 action without parameters, through the fidelity layer.
    fn ec2(&self, action: &str) -> String {
        self.ec2_with(action, &[])
    }

    /// Live EC2 VPN resources by kind, through the fidelity layer.
    fn aws_live(&self) -> (usize, usize, usize) {
        let call = |action: &str, tag: &str| -> usize {
            let text = self.ec2(action);
            text.matches(&format!("<{tag}>")).count()
                - text.matches("<state>deleted</state>").count()
                - text.matches("<state>deleting</state>").count()
        };
        (
            call("DescribeVpnGateways", "vpnGatewayId"),
            call("DescribeCustomerGateways", "customerGatewayId"),
            call("DescribeVpnConnections", "vpnConnectionId"),
        )
    }

    /// ARM resources, without the rules inside security groups (xcsp manages those as part of
    /// their group).
    fn arm_resources(&self) -> Vec<String> {
        let all = self.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
        all.iter()
            .filter(|r| !r["type"].as_str().unwrap_or_default().ends_with("/securityRules"))
            .map(|r| r["id"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    fn arm_count(&self) -> usize {
        self.arm_resources().len()
    }

    /// ARM resources xcsp makes: all but the VMs and NICs CAPZ makes for the pool's machines.
    fn arm_xcsp_count(&self) -> usize {
        // What CAPZ made for the machines: their VMs, OS disks, availability sets and NICs.
        let capz = |id: &String| id.contains("/Microsoft.Compute/") || id.contains("/networkInterfaces/");
        self.arm_resources().iter().filter(|id| !capz(id)).count()
    }
}

impl Drop for Clouds {
    fn drop(&mut self) {
        // SIGTERM lets the sim stop its moto child.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

fn il5() -> PathBuf {
    root().join("examples/il5-govcloud")
}

/// The state file as JSON.
fn recorded(state: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(state.join("state.json")).unwrap()).unwrap()
}

/// The local clouds with the IL5 example applied, and the directory its state is in.
fn applied() -> (Clouds, tempfile::TempDir) {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    ok(&clouds.xcsp(dir.path()).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    (clouds, dir)
}

/// What a run said, stdout then stderr.
fn text_of(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn ok(out: &std::process::Output) -> String {
    let text = text_of(out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status.code());
    text
}

fn tunnels_up(clouds: &Clouds, state: &Path) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let up = v["tunnels"]
            .as_array()
            .map_or(0, |t| t.iter().filter(|x| x["aws_status"] == "UP" && x["azure_status"] == "Connected").count());
        // The count, the conditions and the exit code say the same.
        assert_eq!(v["up"], up, "{v}");
        let established = &v["links"][0]["conditions"][0];
        assert_eq!(established["type"], "TunnelEstablished");
        assert_eq!(established["status"], if up == 4 { "True" } else { "False" }, "{v}");
        // Exit 0 needs every machine a Ready Node too: after a restored link the kubelets post
        // again a moment after the tunnels are up, so 2 then means a machine is still catching up.
        let machines_ready = v["machines"].as_array().is_none_or(|m| {
            m.iter().all(|m| m["cause"].is_null()) && m.len() as u64 >= v["machines_wanted"].as_u64().unwrap_or(0)
        });
        assert_eq!(out.status.code(), Some(if up == 4 && machines_ready { 0 } else { 2 }), "{v}");
        if (up == 4 && machines_ready) || Instant::now() > deadline {
            return up;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn il5_apply_brings_four_tunnels_up_then_destroy_sweep_leaves_nothing() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    ok(&clouds.xcsp(state).arg("plan").arg(il5()).output().unwrap());
    let applied = ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert!(applied.contains("Apply complete! Resources: 57 added"), "{applied}");
    assert_eq!(tunnels_up(&clouds, state), 4);
    // A tunnel whose path is cut (a test's fault in the sim) is DOWN on both sides: status says so
    // with exit 2, names the tunnel, and the link is whole again once the path is restored.
    let cut = clouds.get("/_sim/tunnels")["tunnels"][1]["outside_ip"].as_str().unwrap().to_string();
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": [cut]}}));
    let out = clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((out.status.code(), v["up"].as_u64()), (Some(2), Some(3)), "{v}");
    let down: Vec<&serde_json::Value> =
        v["tunnels"].as_array().unwrap().iter().filter(|t| t["aws_status"] != "UP").collect();
    assert_eq!(down.len(), 1, "{v}");
    assert_ne!(down[0]["azure_status"], "Connected", "both sides see it: {v}");
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": []}}));
    assert_eq!(tunnels_up(&clouds, state), 4, "restored, the tunnel negotiates again");
    // The pool's machines, as CAPI reports them: one per MachineSet (a zone each), each with its
    // Node Ready, named after the VM and carrying the VM's provider ID, resource group
    // lower-cased as CAPZ writes it. (A Machine appears when its VM would be made, its Node when
    // the VM has booted: a few seconds after the MachineSet here.)
    let deadline = clouds.timing().machine_joins().deadline();
    let (status, machines) = loop {
        let out = clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let machines = status["machines"].as_array().cloned().unwrap_or_default();
        let ready = machines.iter().filter(|m| m["node"]["ready"] == "True").count();
        if ready >= 2 || Instant::now() > deadline {
            break (status, machines);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(machines.len(), 2, "{status}");
    for m in &machines {
        assert_eq!(
            (&m["namespace"], &m["phase"], &m["node"]["ready"]),
            (&"xcsp-il5-gpu".into(), &"Running".into(), &"True".into()),
            "{status}"
        );
        assert_eq!(m["node"]["name"], m["name"], "the kubelet's node name is the VM's: {status}");
        let id = m["provider_id"].as_str().unwrap();
        assert!(
            id.starts_with("azure:///subscriptions/")
                && id.contains("/resourceGroups/il5-gpu-workers/providers/Microsoft.Compute/virtualMachines/"),
            "{status}"
        );
    }
    let sets: std::collections::BTreeSet<&str> = machines.iter().filter_map(|m| m["machine_set"].as_str()).collect();
    assert_eq!(sets.len(), 2, "{status}");
    let text = ok(&clouds.xcsp(state).arg("status").arg(il5()).output().unwrap());
    assert_eq!(text.matches(" True since ").count(), 2, "{text}");
    for healthy in [
        "pool gpu: NetworkSecurityGroupInPlace=True",
        "identity capz: TokenExchangeAccepted=True",
        "identity capz: RoleAssignmentsInPlace=True",
        "DnsOverLink=True",
        "SecurityGroupRulesInPlace=True",
    ] {
        assert!(text.contains(healthy), "{healthy}: {text}");
    }
    // The Nodes as the cluster has them: labelled by the pool's kubelet labels, with the Azure VM's
    // provider ID, initialized by apply (no cloud controller manager on an AWS cluster initializes
    // an Azure node): the uninitialized taint gone, the pool's own taint there.
    let nodes = clouds.kube_get("/api/v1/nodes");
    let nodes = nodes["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    for n in &nodes {
        assert_eq!(n["metadata"]["labels"]["node.openshift.io/cloud-provider"], "azure", "{n:#}");
        assert_eq!(n["metadata"]["labels"]["node-role.kubernetes.io/worker"], "", "{n:#}");
        assert!(machines.iter().any(|m| m["provider_id"] == n["spec"]["providerID"]), "{n:#}");
        assert_eq!(
            n["spec"]["taints"],
            serde_json::json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]),
            "{n:#}"
        );
    }
    let sets = clouds.kube_get("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machinesets");
    for ms in sets["items"].as_array().unwrap() {
        assert_eq!(ms["status"]["readyReplicas"], 1, "{ms:#}");
    }
    // Each machine's AzureMachine, cloned by CAPI from the pool's template and written by CAPZ:
    // the VM's provider ID, ready, VMRunning True.
    let azure_machines =
        clouds.kube_get("/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/azuremachines");
    let azure_machines = azure_machines["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(azure_machines.len(), 2, "{azure_machines:#?}");
    for am in &azure_machines {
        assert!(machines.iter().any(|m| m["provider_id"] == am["spec"]["providerID"]), "{am:#}");
        assert_eq!(am["status"]["ready"], true, "{am:#}");
        let running = am["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "VMRunning").cloned();
        assert_eq!(running.map(|c| c["status"].clone()), Some(serde_json::json!("True")), "{am:#}");
        let templates: Vec<&serde_json::Value> = sets["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ms| &ms["spec"]["template"]["spec"]["infrastructureRef"]["name"])
            .collect();
        assert!(templates.contains(&&am["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"]), "{am:#}");
    }
    // Where CAPZ holds each machine, as the sim follows its reconcile: past the Cluster, the
    // AzureCluster (ready: xcsp manages it), the identity, the bootstrap data (the pool's copy of
    // the pointer ignition the machine-config operator wrote for the pool's own
    // MachineConfigPool), Entra's token exchange (the federated credential matches the token
    // OpenShift's CAPZ presents) and the role checks of its first Azure calls (the SKU list at
    // the subscription, by the custom role xcsp defines for it; the NIC, VM and subnet join in
    // the resource group). CAPI has what it needs to match a Node: the Cluster marked
    // initialized, and its labelled kubeconfig secret.
    let said = ok(&clouds.xcsp(state).arg("preflight").arg(il5()).output().unwrap());
    assert!(
        said.contains("Pool objects: namespace xcsp-il5-gpu") && said.contains("The cluster can take the pool."),
        "{said}"
    );
    // Their VMs exist and resolve the cluster's private names: the VNet's DNS servers are the two
    // addresses of the Route 53 Resolver inbound endpoint in the cluster's VPC, whose own security
    // group lets DNS in from the VNet, over the tunnels. They boot: the internal API load
    // balancer's group lets the machine-config server's port in from the VNet (xcsp's rules, on
    // every group of the cluster), the server answers the pool's rendered config, whose unit
    // writes the kubelet's provider ID from the Azure metadata service, and each registers a Node
    // that CAPI matches to its Machine.
    let held = joined(&clouds, 2);
    for m in &held {
        assert_eq!(m["held_at"], "joined", "{m:#}");
        assert_eq!(m["node_ref_needs"], serde_json::json!([]), "{m}");
    }
    let resolvers = clouds.get("/_sim/resolvers")["resolvers"].as_array().cloned().unwrap_or_default();
    assert_eq!(resolvers.len(), 1, "one inbound endpoint: {resolvers:?}");
    let endpoint = &resolvers[0];
    assert_eq!(endpoint["status"], "OPERATIONAL", "{endpoint}");
    let cluster_vpc = clouds.ec2_with(
        "DescribeVpcs",
        &[("Filter.1.Name", "tag-key"), ("Filter.1.Value.1", "kubernetes.io/cluster/il5-gpu-x7k2p")],
    );
    let vpc = endpoint["vpc_id"].as_str().unwrap();
    assert!(
        vpc.starts_with("vpc-") && cluster_vpc.contains(&format!("<vpcId>{vpc}</vpcId>")),
        "{endpoint}\n{cluster_vpc}"
    );
    let arm_now = clouds.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
    let vnet = arm_now.iter().find(|r| r["type"] == "Microsoft.Network/virtualNetworks").expect("the VNet");
    let mut servers = vnet["body"]["properties"]["dhcpOptions"]["dnsServers"].clone();
    let mut ips = endpoint["ips"].clone();
    for list in [&mut servers, &mut ips] {
        list.as_array_mut().unwrap().sort_by_key(|v| v.to_string());
    }
    assert_eq!((servers.as_array().map(Vec::len), &servers), (Some(2), &ips), "{vnet}");
    // With every tunnel cut, the DNS servers are out of reach: the machines are held at `dns`,
    // saying why; restored, they pass it again.
    clouds.cut_every_tunnel();
    // Their kubelets stop posting: after the node-monitor grace period the Nodes are Unknown,
    // and the sim says why (the DNS servers are out of reach).
    let deadline = Instant::now() + Duration::from_secs(30);
    let held = loop {
        let held = clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
        if held.iter().all(|m| m["held_at"] == "dns") || Instant::now() > deadline {
            break held;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The node lifecycle controller turns them Unknown once their Leases are older than its
    // grace period.
    let deadline = clouds.timing().node_unknown().deadline();
    let (status, unknown) = loop {
        let status: serde_json::Value =
            serde_json::from_slice(&clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap().stdout)
                .unwrap();
        let unknown = status["machines"].as_array().unwrap().iter().filter(|m| m["node"]["ready"] == "Unknown").count();
        if unknown == 2 || Instant::now() > deadline {
            break (status, unknown);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(unknown, 2, "{status}");
    for m in status["machines"].as_array().unwrap() {
        let cause = m["cause"].as_str().unwrap_or_default();
        assert!(cause.contains("is not Ready (Unknown): the link is down (0 of 4 tunnels up)"), "{status}");
    }
    for m in &held {
        assert_eq!(m["held_at"], "dns", "{m:#}");
        let said = m["message"].as_str().unwrap();
        assert!(said.contains("is UP: the query goes nowhere"), "{m:#}");
        assert!(said.contains("https://api-int.il5-gpu-x7k2p.sim.internal:22623/config/xcsp-il5-gpu-gpu"), "{m:#}");
    }
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": []}}));
    assert_eq!(tunnels_up(&clouds, state), 4);
    joined(&clouds, 2);
    // The VNet's DNS servers changed by hand: status says DNS over the link fails and why the
    // Nodes went Unknown; plan shows the servers, and apply puts them back.
    let vnet_id = vnet["id"].as_str().unwrap().to_string();
    clouds.patch_resource(
        &vnet_id,
        &serde_json::json!({"properties": {"dhcpOptions": {"dnsServers": ["168.63.129.16"]}}}),
    );
    let deadline = clouds.timing().node_unknown().deadline();
    let status = loop {
        let out = clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let unknown = status["machines"].as_array().unwrap().iter().all(|m| m["node"]["ready"] == "Unknown");
        if unknown || Instant::now() > deadline {
            assert_eq!(out.status.code(), Some(2), "{status}");
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let dns = status["links"][0]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "DnsOverLink").cloned();
    let dns = dns.expect("the DnsOverLink condition");
    assert_eq!((&dns["status"], &dns["reason"]), (&"False".into(), &"ServersNotSet".into()), "{status}");
    for m in status["machines"].as_array().unwrap() {
        assert!(
            m["cause"]
                .as_str()
                .unwrap_or_default()
                .contains("DNS over the link fails (the VNet's DNS servers are [168.63.129.16]"),
            "{status}"
        );
    }
    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("~ azure_virtual_network_dns_servers.link will be updated in place"), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    joined(&clouds, 2);
    let status: serde_json::Value =
        serde_json::from_slice(&clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap().stdout)
            .unwrap();
    let dns = status["links"][0]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "DnsOverLink").cloned();
    assert_eq!(dns.map(|c| c["status"].clone()), Some("True".into()), "{status}");
    // The VMs and NICs CAPZ made, in the pool's subnet, with CAPZ's tags and xcsp's.
    let arm = clouds.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
    let vms: Vec<&serde_json::Value> =
        arm.iter().filter(|r| r["type"] == "Microsoft.Compute/virtualMachines").collect();
    assert_eq!(vms.len(), 2, "{vms:?}");
    for vm in &vms {
        assert_eq!(vm["body"]["properties"]["hardwareProfile"]["vmSize"], "Standard_ND96asr_v4", "{vm}");
        assert_eq!(vm["body"]["tags"]["sigs.k8s.io_cluster-api-provider-azure_role"], "node", "{vm}");
        assert_eq!(vm["body"]["tags"]["xcsp.io_stack"], "il5-gpu", "{vm}");
    }
    let nic_subnets: Vec<&str> = arm
        .iter()
        .filter(|r| r["type"] == "Microsoft.Network/networkInterfaces")
        .filter_map(|r| r["body"]["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"].as_str())
        .collect();
    assert_eq!(nic_subnets.len(), 2);
    assert!(nic_subnets.iter().all(|s| s.ends_with("/subnets/il5-gpu-gpu")), "{nic_subnets:?}");
    let pool = clouds.kube_get("/apis/machineconfiguration.openshift.io/v1/machineconfigpools/xcsp-il5-gpu-gpu");
    let sources: Vec<&str> = pool["status"]["configuration"]["source"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(sources.last(), Some(&"99-xcsp-il5-gpu-gpu-azure"), "the pool's own config is rendered last: {pool}");
    assert!(sources.contains(&"00-worker"), "the pool inherits the worker's configs: {pool}");
    // The cluster runs in FIPS mode: the pool's own config says so beside the installer's
    // `99-worker-fips`, and the rendered config its nodes boot from turns FIPS on.
    assert!(sources.contains(&"99-worker-fips"), "{pool}");
    let own = clouds.kube_get("/apis/machineconfiguration.openshift.io/v1/machineconfigs/99-xcsp-il5-gpu-gpu-azure");
    assert_eq!(own["spec"]["fips"], true, "{own}");
    let rendered = pool["status"]["configuration"]["name"].as_str().expect("rendered");
    let rendered = clouds.kube_get(&format!("/apis/machineconfiguration.openshift.io/v1/machineconfigs/{rendered}"));
    assert_eq!(rendered["spec"]["fips"], true, "{rendered}");
    // The operator rewrites the pool's pointer ignition (it rotates the CA in it): refresh sees
    // the copy out of date, plan says so, and apply writes it again.
    let managed = "/api/v1/namespaces/openshift-machine-api/secrets/xcsp-il5-gpu-gpu-user-data-managed";
    let rotated = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(br#"{"ignition":{"version":"3.5.0"}}"#)
    };
    let patch = serde_json::json!({"data": {"userData": rotated}}).to_string();
    let patched = clouds.kube_request("PATCH", managed, Some(("application/merge-patch+json", &patch)));
    assert_eq!(patched["data"]["userData"], rotated.as_str(), "{patched}");
    let planned = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    let said = text_of(&planned);
    assert_eq!(planned.status.code(), Some(2), "{said}");
    assert!(said.contains("k8s_user_data_secret.gpu will be updated") && said.contains("in_sync"), "{said}");
    assert!(said.contains("Plan: 0 to add, 1 to change"), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    let copy = clouds.kube_get("/api/v1/namespaces/xcsp-il5-gpu/secrets/xcsp-il5-gpu-gpu-user-data");
    assert_eq!(copy["data"]["value"], rotated.as_str(), "{copy}");
    // What a kill between xcsp's write of the AzureCluster or the Cluster's control plane and its
    // status write leaves (the object there, its status not): the AzureCluster not ready (CAPZ then
    // holds every new machine at `infrastructure`) and the control plane not initialized, which
    // CAPI copies to the Cluster's ControlPlaneInitialized (CAPI then matches no Node, and its
    // health checks skip the pool). Refresh reads both statuses, plan shows them, and apply writes
    // them again.
    let ns_path = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/azureclusters";
    let ac_name = clouds.kube_get(ns_path)["items"][0]["metadata"]["name"].as_str().unwrap().to_string();
    let unready = serde_json::json!({"status": {"ready": false}}).to_string();
    let path = format!("{ns_path}/{ac_name}/status");
    assert_eq!(
        clouds.kube_request("PATCH", &path, Some(("application/merge-patch+json", &unready)))["status"]["ready"],
        false
    );
    let cluster_path = format!("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/clusters/{ac_name}/status");
    let control_plane =
        format!("/apis/controlplane.xcsp.io/v1alpha1/namespaces/xcsp-il5-gpu/xcspcontrolplanes/{ac_name}/status");
    let uninitialized = serde_json::json!({"status": {"externalManagedControlPlane": false,
        "initialization": {"controlPlaneInitialized": false}, "conditions": []}});
    let patched = clouds.kube_request(
        "PATCH",
        &control_plane,
        Some(("application/merge-patch+json", &uninitialized.to_string())),
    );
    assert_eq!(patched["status"]["initialization"]["controlPlaneInitialized"], false, "{patched}");
    // (CAPI keeps a Cluster's ControlPlaneInitialized once True; cleared, it takes it again from
    // the control plane, now uninitialized: `setControlPlaneInitializedCondition`.)
    let cleared = serde_json::json!({"status": {"conditions": [], "v1beta2": {"conditions": []}}}).to_string();
    clouds.kube_request("PATCH", &cluster_path, Some(("application/merge-patch+json", &cleared)));
    let planned = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    let said = text_of(&planned);
    assert_eq!(planned.status.code(), Some(2), "{said}");
    assert!(said.contains("~ k8s_azure_cluster.link will be updated in place"), "{said}");
    assert!(said.contains("infrastructure_ready = false -> true"), "{said}");
    assert!(said.contains("~ k8s_cluster.link will be updated in place"), "{said}");
    assert!(said.contains("control_plane_initialized = false -> true"), "{said}");
    assert!(said.contains("Plan: 0 to add, 2 to change"), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.kube_get(&format!("{ns_path}/{ac_name}"))["status"]["ready"], true);
    let cluster = clouds.kube_get(&cluster_path.replace("/status", ""));
    assert_eq!(cluster["spec"]["controlPlaneRef"]["kind"], "XcspControlPlane", "{cluster}");
    let cp = clouds.kube_get(&control_plane.replace("/status", ""));
    assert_eq!(cp["status"]["externalManagedControlPlane"], true, "{cp}");
    assert!(
        cp["metadata"]["ownerReferences"].as_array().is_some_and(|o| o.iter().any(|o| o["kind"] == "Cluster")),
        "CAPI's Cluster controller owns it: {cp}"
    );
    let conditions = cluster["status"]["v1beta2"]["conditions"].clone();
    assert!(
        conditions.as_array().unwrap().iter().any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True"),
        "{conditions}"
    );
    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(0), "{said}");

    // The spec's tags are on both clouds' resources, beside xcsp's own.
    let vgws = clouds.ec2("DescribeVpnGateways");
    assert!(vgws.contains("<key>cost-center</key>") && vgws.contains("<value>gpu-il5</value>"), "{vgws}");
    let arm = clouds.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
    let gateway = arm.iter().find(|r| r["type"] == "Microsoft.Network/virtualNetworkGateways").expect("the gateway");
    assert_eq!(gateway["body"]["tags"]["cost-center"], "gpu-il5", "{gateway}");
    // Azure tag names take no `/`: xcsp's own keys there are `xcsp.io_stack` and `xcsp.io_address`.
    assert_eq!(gateway["body"]["tags"]["xcsp.io_address"], "azure_virtual_network_gateway.link", "{gateway}");
    assert!(arm.iter().all(|r| r["body"]["tags"].as_object().is_none_or(|t| t.keys().all(|k| !k.contains('/')))));

    // The CAPZ/CAPI objects are in the cluster, applied by xcsp and valid (the sim's API server
    // checks every object against the CRD schemas), wired to the identity Azure made.
    let kinds: Vec<String> = clouds.kube_objects().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        kinds,
        [
            "AzureCluster",
            "AzureClusterIdentity",
            "AzureMachineTemplate",
            "Cluster",
            "MachineHealthCheck",
            "MachineSet",
            "MachineSet",
            "Secret",
            "Secret",
            "Secret",
            "ServiceAccount"
        ]
    );
    // Its two MachineSets, one per zone, made the pool's two machines.
    let deadline = clouds.timing().capi_reconciles().deadline();
    let machines = || {
        let all = clouds.objects()["items"].as_array().cloned().unwrap_or_default();
        all.iter().filter(|o| o["kind"] == "Machine").count()
    };
    while machines() < 2 && Instant::now() < deadline {
        clouds.kube_get("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machines");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(machines(), 2, "{:#?}", clouds.objects());
    let state_json = recorded(state);
    let resources = &state_json["resources"];
    let client_id = resources["azure_user_assigned_identity.capz"]["attributes"]["client_id"].as_str().unwrap();
    let aci = clouds.kube_get(&format!(
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/azureclusteridentities/{}",
        resources["k8s_azure_cluster_identity.capz"]["attributes"]["name"].as_str().unwrap()
    ));
    assert_eq!(aci["spec"]["clientID"], client_id, "{aci}");
    assert_eq!(aci["spec"]["type"], "WorkloadIdentity");
    let fic_id = resources["azure_federated_identity_credential.capz"]["id"].as_str().unwrap();
    let fic = clouds.get(&format!("/_sim/resource?id={fic_id}"));
    assert_eq!(fic["properties"]["issuer"], "https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com", "{fic}");
    assert_eq!(fic["properties"]["subject"], "system:serviceaccount:openshift-cluster-api:capz-manager");

    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    // Without a kubeconfig (none in the spec, KUBECONFIG unset, no ~/.kube/config), plan warns
    // and takes the recorded objects as state has them: nothing to do, and certainly no plan to
    // delete them. Apply stops before changing anything.
    let blind =
        clouds.xcsp(state).env_remove("KUBECONFIG").args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    let said = String::from_utf8_lossy(&blind.stderr);
    assert_eq!(blind.status.code(), Some(0), "{}{said}", String::from_utf8_lossy(&blind.stdout));
    assert!(
        said.contains("no kubeconfig for the cluster") && said.contains("no Kubernetes access configured"),
        "{said}"
    );
    let serial = |s: &Path| -> u64 {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(s.join("state.json")).unwrap()).unwrap();
        v["serial"].as_u64().unwrap()
    };
    let before = serial(state);
    let blind =
        clouds.xcsp(state).env_remove("KUBECONFIG").args(["apply", "--auto-approve"]).arg(il5()).output().unwrap();
    let said = String::from_utf8_lossy(&blind.stderr);
    assert_eq!(blind.status.code(), Some(1), "{said}");
    assert!(said.contains("xcsp::cluster::no_kubeconfig"), "{said}");
    assert_eq!(serial(state), before, "a blind apply wrote state");

    // The CAPZ/CAPI objects, with the identity's client id from state.
    let objects = dir.path().join("objects");
    let rendered = ok(&clouds.xcsp(state).arg("render").arg(&objects).arg(il5()).output().unwrap());
    let mut files: Vec<_> = std::fs::read_dir(&objects).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    // Every object but the two copies of what only the cluster has (the pool's pointer ignition,
    // the kubeconfig with the service account's token), which render names instead, and the
    // Cluster's control plane before it (its CRD, CAPI's ClusterRole for it, the object), and
    // the pool's RuntimeClass.
    assert_eq!(files.len(), 18, "{rendered}");
    let kinds: Vec<String> = files
        .iter()
        .filter_map(|f| {
            std::fs::read_to_string(f).ok()?.lines().find_map(|l| l.strip_prefix("kind: ").map(String::from))
        })
        .collect();
    let at = |kind: &str| kinds.iter().position(|k| k == kind).unwrap_or_else(|| panic!("no {kind}: {kinds:?}"));
    assert!(
        at("CustomResourceDefinition") < at("XcspControlPlane") && at("XcspControlPlane") < at("Cluster"),
        "{kinds:?}"
    );
    assert_eq!(rendered.matches("not rendered: ").count(), 2, "{rendered}");
    assert!(rendered.contains("not rendered: k8s_user_data_secret.gpu"), "{rendered}");
    let namespace = std::fs::read_to_string(&files[0]).unwrap();
    assert!(namespace.contains("kind: Namespace") && namespace.contains("name: xcsp-il5-gpu"), "{namespace}");
    let identity = std::fs::read_to_string(&files[1]).unwrap();
    assert!(identity.contains("kind: AzureClusterIdentity") && identity.contains("clientID:"), "{identity}");

    // No secret in what a user sees.
    let state_text = std::fs::read_to_string(state.join("state.json")).unwrap();
    let psks: Vec<String> = serde_json::from_str::<serde_json::Value>(&state_text).unwrap()["resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(a, _)| a.starts_with("xcsp_preshared_key"))
        .map(|(_, r)| r["attributes"]["value"]["$sensitive"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(psks.len(), 4);
    for p in &psks {
        assert!(!applied.contains(p.as_str()), "a PSK reached apply's output");
    }
    // Nor the token xcsp put in the Cluster's kubeconfig secret: not in state, output or render.
    let token_secret = clouds.kube_get("/api/v1/namespaces/xcsp-il5-gpu/secrets/il5-gpu-x7k2p-link-capi-token");
    let token = token_secret["data"]["token"].as_str().expect("the tokens controller filled it in");
    let token = String::from_utf8({
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(token).unwrap()
    })
    .unwrap();
    for (what, text) in [("state", &state_text), ("apply's output", &applied), ("render's output", &rendered)] {
        assert!(!text.contains(&token), "the service account's token reached {what}");
    }
    for f in &files {
        assert!(!std::fs::read_to_string(f).unwrap().contains(&token), "the token reached {}", f.display());
    }

    let destroyed = ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert!(destroyed.contains("57 destroyed"), "{destroyed}");
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    // The DNS endpoint and its security group went too (moto's own lists, through the sim).
    assert_eq!(clouds.get("/_sim/resolvers")["resolvers"], serde_json::json!([]));
    assert!(!clouds.ec2("DescribeSecurityGroups").contains("xcsp-il5-gpu-link-dns"));
    assert_eq!(clouds.arm_count(), 0);
    assert_eq!(clouds.kube_objects(), vec![]);
    let all = clouds.objects()["items"].clone();
    assert!(
        !all.as_array().unwrap().iter().any(|o| o["kind"] == "Namespace" && o["name"] == "xcsp-il5-gpu"),
        "the pool's namespace went too: {all}"
    );
    // And the cluster-wide objects of the stack: its machine-config pool and config, CAPI's role.
    for (kind, name) in [
        ("MachineConfigPool", "xcsp-il5-gpu-gpu"),
        ("MachineConfig", "99-xcsp-il5-gpu-gpu-azure"),
        ("ClusterRole", "xcsp-il5-gpu-il5-gpu-x7k2p-link-capi"),
        ("ClusterRoleBinding", "xcsp-il5-gpu-il5-gpu-x7k2p-link-capi"),
        ("ClusterRole", "xcsp-capi-control-planes"),
    ] {
        assert!(
            !all.as_array().unwrap().iter().any(|o| o["kind"] == kind && o["name"] == name),
            "{kind} {name} left: {all}"
        );
    }
    // The control plane's kind went with the last Cluster that named one.
    let crd = clouds
        .kube_get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/xcspcontrolplanes.controlplane.xcsp.io");
    assert!(crd.is_null(), "{crd}");
    // The cluster went first: each MachineSet was scaled to zero and its machines deleted (by
    // CAPI) before it, and every object xcsp deleted before the first Azure delete, as the API
    // server's audit log and the ARM journal time them.
    let deletions = clouds.get("/_sim/kube/audit")["deletions"].as_array().cloned().unwrap_or_default();
    let journal = clouds.get("/_sim/journal")["entries"].as_array().cloned().unwrap_or_default();
    // xcsp's own Azure deletes (CAPZ deletes the VMs, NICs, disks it made as CAPI deletes Machines).
    let capz_made = |id: &str| id.contains("/Microsoft.Compute/") || id.contains("/networkInterfaces/");
    let first_arm = journal
        .iter()
        .find(|e| e["cloud"] == "azure" && !capz_made(e["id"].as_str().unwrap_or_default()))
        .map(|e| instant(&e["time"]))
        .expect("an Azure delete");
    let sets: Vec<(String, String)> = deletions
        .iter()
        .filter(|d| d["uri"].as_str().unwrap_or_default().contains("/machinesets/"))
        .map(|d| {
            let uri = d["uri"].as_str().unwrap();
            let path = uri.split('?').next().unwrap();
            (instant(&d["time"]), path.rsplit('/').next().unwrap().to_string())
        })
        .collect();
    assert_eq!(sets.len(), 2, "{deletions:#?}");
    for (at, name) in &sets {
        let last_machine = deletions
            .iter()
            .filter(|d| d["uri"].as_str().unwrap_or_default().contains(&format!("/machines/{name}-")))
            .map(|d| instant(&d["time"]))
            .max();
        assert!(last_machine.is_some_and(|m| m < *at), "machines of {name} before it: {deletions:#?}");
    }
    let last_xcsp = deletions.iter().filter(|d| d["user"] == "xcsp-admin").map(|d| instant(&d["time"])).max();
    assert!(
        last_xcsp.is_some_and(|k| k < first_arm),
        "every Kubernetes object before any Azure resource: {deletions:#?}"
    );
}

/// `xcsp status` of the il5 state once it says `needle` (or as it is by CAPI's next reconcile):
/// CAPI copies a VM's provider ID from the AzureMachine to the Machine on its next reconcile, a
/// moment after the sim's stand-in reports where the machine is held.
fn status_saying(clouds: &Clouds, state: &Path, needle: &str) -> String {
    let deadline = clouds.timing().capi_reconciles().deadline();
    loop {
        let text = text_of(&clouds.xcsp(state).arg("status").arg(il5()).output().unwrap());
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// An RFC 3339 UTC time with its fraction padded to nanoseconds, so that times compare as text.
fn instant(v: &serde_json::Value) -> String {
    let t = v.as_str().unwrap_or_default().trim_end_matches('Z');
    let (whole, fraction) = t.split_once('.').unwrap_or((t, ""));
    format!("{whole}.{fraction:0<9}Z")
}

#[test]
fn apply_killed_at_five_points_converges_without_twins() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // Kill after this many events of the run (JSON lines): early, mid-gateway, late.
    for kill_after in [2, 9, 17, 25, 33] {
        let (mut child, mut lines) = apply_json(&clouds, state);
        let mut seen = 0;
        while let Some(Ok(line)) = lines.next() {
            if line.starts_with('{') {
                seen += 1;
            }
            if seen >= kill_after {
                break;
            }
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // The lock of the killed run stays; the next run is told who holds it. Clear it as an
        // operator would, with the id from the lock file.
        if state.join("state.lock").exists() {
            clouds.force_unlock(state);
        }
    }
    let last = ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert!(last.contains("Apply complete!") || last.contains("No changes"), "{last}");
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));

    // Exactly one of each: 1 VPN gateway, 2 customer gateways, 2 VPN connections, and as many
    // ARM resources as state records Azure ones (subnets are children of the VNet in ARM too).
    assert_eq!(clouds.aws_live(), (1, 2, 2));
    let state_json = recorded(state);
    let azure = arm_in_state(&state_json);
    assert_eq!(clouds.arm_xcsp_count(), azure, "{:#?}", clouds.arm_resources());
    assert_eq!(tunnels_up(&clouds, state), 4);

    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    assert_eq!(clouds.arm_count(), 0);
}

/// Kills chosen by what is in flight, not by counts: the Azure VPN gateway's long-running create
/// (checked running in ARM at the kill), the instant an Azure create was answered, and a
/// Kubernetes apply. Each time the child is still running when killed. The next apply completes,
/// and every cloud resource and Kubernetes object is one state record and back (by id, so a twin
/// or a record without its resource shows).
#[test]
fn apply_killed_while_work_is_in_flight_leaves_each_resource_once_in_state() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let started = |a: &str| {
        let a = a.to_string();
        move |e: &serde_json::Value| e["event"] == "started" && e["address"].as_str().is_some_and(|x| x.starts_with(&a))
    };
    // The gateway's create running: ARM still says so when the apply dies.
    kill_when(&clouds, state, started("azure_virtual_network_gateway.link"), Duration::from_millis(800));
    let gateway = clouds.arm_resources().into_iter().find(|id| id.contains("/virtualNetworkGateways/")).expect("made");
    let body = clouds.get(&format!("/_sim/resource?id={gateway}"));
    assert_ne!(body["properties"]["provisioningState"], "Succeeded", "the LRO was in flight: {body}");
    // An Azure create answered, its record not yet written (or just written).
    kill_when(
        &clouds,
        state,
        |e: &serde_json::Value| {
            e["event"] == "finished" && e["address"].as_str().is_some_and(|a| a.starts_with("azure_"))
        },
        Duration::ZERO,
    );
    // A Kubernetes apply.
    kill_when(&clouds, state, started("k8s_"), Duration::ZERO);
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_whole(&clouds, state);
    assert_one_to_one(&clouds, state);
    joined(&clouds, 2);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    assert_eq!(clouds.arm_count(), 0);
}

/// An apply killed while Azure creates the VPN gateway (its operation checked still running in
/// ARM): the rerun adopts the gateway and waits for that operation instead of starting another
/// (ARM counts one PUT of the gateway and no `AnotherOperationInProgress`), says so, and exits 0
/// only with the gateway `Succeeded`, every tunnel up and every machine a Ready Node; a third run
/// has nothing to do.
#[test]
fn a_rerun_after_a_kill_during_the_gateways_creation_waits_for_that_operation() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    kill_when(
        &clouds,
        state,
        |e: &serde_json::Value| e["event"] == "started" && e["address"] == "azure_virtual_network_gateway.link",
        Duration::from_millis(800),
    );
    let gateway = clouds.arm_resources().into_iter().find(|id| id.contains("/virtualNetworkGateways/")).expect("made");
    let body = clouds.get(&format!("/_sim/resource?id={gateway}"));
    assert_ne!(body["properties"]["provisioningState"], "Succeeded", "the LRO was in flight: {body}");
    let out = clouds.xcsp(state).args(["apply", "--auto-approve", "--json"]).arg(il5()).output().unwrap();
    let said = ok(&out);
    assert!(
        said.lines().any(|l| l.contains("\"waiting\"")
            && l.contains("azure_virtual_network_gateway.link")
            && l.contains("the operation an interrupted run started is still running")),
        "{said}"
    );
    let body = clouds.get(&format!("/_sim/resource?id={gateway}"));
    assert_eq!(body["properties"]["provisioningState"], "Succeeded", "{body}");
    let counters = clouds.get("/_sim/counters");
    assert_eq!(counters["requests"]["PUT Microsoft.Network/virtualNetworkGateways"], 1, "{counters}");
    assert!(counters["errors"]["AnotherOperationInProgress"].is_null(), "{counters}");
    let status = clouds.xcsp(state).arg("status").arg(il5()).output().unwrap();
    assert_eq!(status.status.code(), Some(0), "every tunnel up, every machine a Ready Node: {}", text_of(&status));
    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(0), "{said}");
}

/// On the upstream cluster: apply of the IL5 example ends with both Nodes Ready, matched to
/// their Machines by Cluster API's own manager (`nodeRef`, its managed fields), schedulable (the
/// cloud provider's uninitialized taint removed, kube-scheduler binding a Pod that tolerates only
/// the pool's `nvidia.com/gpu` taint to one of them); a cut link turns
/// the Nodes `Unknown` by kube-controller-manager's node lifecycle controller and `xcsp status`
/// names the link; restored, they are Ready again; destroy leaves no object of the pool, the
/// Nodes included, as the API server lists them.
#[test]
fn on_the_upstream_cluster_the_pool_joins_survives_a_cut_link_and_goes_whole() {
    let clouds = Clouds::upstream();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let version = clouds.kubectl(&["version"]);
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.35.4", "{version}");

    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    let machines = clouds.kubectl(&["get", "machines", "-A", "--show-managed-fields"]);
    let items = machines["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{machines}");
    let nodes = clouds.kubectl(&["get", "nodes"]);
    for m in items {
        let managers: Vec<&str> =
            m["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|f| f["manager"].as_str()).collect();
        assert!(managers.contains(&"capi-manager"), "CAPI's manager made and manages it: {managers:?}");
        assert!(!managers.iter().any(|m| m.starts_with("xcsp")), "no stand-in writes a Machine: {managers:?}");
        let node = m["status"]["nodeRef"]["name"].as_str().expect("a nodeRef");
        let n = nodes["items"].as_array().unwrap().iter().find(|n| n["metadata"]["name"] == node).expect("its Node");
        assert_eq!(n["spec"]["providerID"], m["spec"]["providerID"], "{n}");
        assert!(n["spec"]["providerID"].as_str().unwrap().starts_with("azure:///subscriptions/"), "{n}");
    }
    let ready = |status: &str| {
        let nodes = clouds.kubectl(&["get", "nodes", "--show-managed-fields"]);
        nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| {
                n["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == status)
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(ready("True").len(), 2);

    // The real CAPZ made each VM: its own client (User-Agent) made the NIC and the VM under Azure
    // Government's name, and its manager wrote each AzureMachine Ready.
    let requests = clouds.get("/_sim/requests");
    let by_capz = |method: &str, tail: &str| {
        requests["requests"].as_array().unwrap().iter().any(|r| {
            r["method"] == method
                && r["host"] == "management.usgovcloudapi.net"
                && r["path"].as_str().is_some_and(|p| p.ends_with(tail))
                && r["user_agent"].as_str().is_some_and(|u| u.contains("cluster-api-provider-azure/v1.26.0"))
                && r["status"].as_u64().is_some_and(|s| s < 300)
        })
    };
    let azure_machines = clouds.kubectl(&["get", "azuremachines", "-A", "--show-managed-fields"]);
    let azure_machines = azure_machines["items"].as_array().unwrap();
    assert_eq!(azure_machines.len(), 2);
    for am in azure_machines {
        let name = am["metadata"]["name"].as_str().unwrap();
        assert!(by_capz("PUT", &format!("/networkInterfaces/{name}-nic")), "CAPZ made {name}'s NIC");
        assert!(by_capz("PUT", &format!("/virtualMachines/{name}")), "CAPZ made {name}'s VM");
        let ready = am["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["status"], "True", "{am:#}");
        assert_eq!(
            status_writers(am),
            ["cluster-api-provider-azure-manager"],
            "only CAPZ writes an AzureMachine's status"
        );
    }

    // Schedulable: apply removed the taint every kubelet with an external cloud provider
    // registers with, which no cloud controller removes from an azure:// Node, and kept the
    // pool's own. kube-scheduler binds a Pod that tolerates only the pool's taint to one of them.
    let pool_nodes: Vec<String> = ready("True")
        .iter()
        .map(|n| {
            let taints: Vec<&str> =
                n["spec"]["taints"].as_array().into_iter().flatten().filter_map(|t| t["key"].as_str()).collect();
            assert_eq!(taints, ["nvidia.com/gpu"], "{n}");
            n["metadata"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    let pod = dir.path().join("cuda.json");
    std::fs::write(
        &pod,
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cuda", "namespace": "default"},
            "spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubi9",
                                     "resources": {"requests": {"cpu": "8", "memory": "64Gi"}}}]}})
        .to_string(),
    )
    .unwrap();
    clouds.kubectl(&["create", "-f", pod.to_str().unwrap()]);
    let scheduling = Bound::on_event("kube-scheduler");
    let deadline = scheduling.deadline();
    let bound = loop {
        let p = clouds.kubectl(&["get", "pod", "cuda", "-n", "default"]);
        if let Some(n) = p["spec"]["nodeName"].as_str() {
            break n.to_string();
        }
        assert!(Instant::now() < deadline, "the GPU Pod is not scheduled within {scheduling}: {}", p["status"]);
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(pool_nodes.contains(&bound), "bound to {bound}, not a pool Node {pool_nodes:?}");

    // The EBS CSI node DaemonSet (upstream's DaemonSet controller) puts a Pod on each pool Node,
    // which never runs there; status names them. On this 4.22 cluster `storage` stays calm (its
    // controller recorded the generation stable before the pool came) until the driver rolls out
    // again, as an upgrade does: then the rollout never finishes, and status says so.
    let status_until = |wanted: &[&str]| {
        let rollout = Bound::on_event("the DaemonSet controller");
        let deadline = rollout.deadline();
        loop {
            let said = text_of(&clouds.xcsp(state).args(["status"]).arg(il5()).output().unwrap());
            if wanted.iter().all(|w| said.contains(w)) {
                break said;
            }
            assert!(Instant::now() < deadline, "status does not say {wanted:?} within {rollout}: {said}");
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    status_until(&[
        "cluster openshift-cluster-csi-drivers/aws-ebs-csi-driver-node: OnPoolNodes=False (NoEc2Metadata): 2 of its 2 Pods",
        "cluster ClusterOperator storage: Progressing=False (AsExpected)",
    ]);
    let ds = "/apis/apps/v1/namespaces/openshift-cluster-csi-drivers/daemonsets/aws-ebs-csi-driver-node";
    let stable = clouds.kube_get(ds);
    assert_eq!(stable["metadata"]["annotations"]["storage.openshift.io/stable-generation"], "1", "{stable}");
    let rollout =
        serde_json::json!({"spec": {"template": {"metadata": {"annotations": {"example.com/upgrade": "4.22.4"}}}}});
    clouds.kube_request("PATCH", ds, Some(("application/merge-patch+json", &rollout.to_string())));
    status_until(&["cluster ClusterOperator storage: Progressing=True", "Waiting for DaemonSet to deploy node pods"]);

    // The link cut: the kubelets' Leases stop, and the node lifecycle controller (the status
    // writer is kube-controller-manager) turns both Nodes Unknown.
    clouds.cut_every_tunnel();
    let grace = clouds.timing().node_unknown();
    let deadline = grace.deadline();
    let unknown = loop {
        let u = ready("Unknown");
        if u.len() == 2 || Instant::now() > deadline {
            break u;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(unknown.len(), 2, "both Nodes Unknown within {grace} of the cut");
    for n in &unknown {
        let writers = status_writers(n);
        assert!(writers.contains(&"kube-controller-manager"), "{writers:?}");
        let c = n["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(c["reason"], "NodeStatusUnknown", "{c}");
    }
    let status: serde_json::Value =
        serde_json::from_slice(&clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap().stdout)
            .unwrap();
    for m in status["machines"].as_array().unwrap() {
        let cause = m["cause"].as_str().unwrap_or_default();
        assert!(cause.contains("the link is down (0 of 4 tunnels up)"), "{status}");
    }

    // Restored: the tunnels negotiate again, the kubelets post again and the Nodes are Ready.
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": []}}));
    assert_eq!(tunnels_up(&clouds, state), 4);
    let posted = clouds.timing().node_ready_again();
    let deadline = posted.deadline();
    while ready("True").len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(ready("True").len(), 2, "both Nodes Ready again within {posted}");

    // A VM stopped past its kubelet's client certificate: the kubelet bootstraps again, and the
    // machine approver refuses a bootstrap request for a Node that exists
    // (openshift/cluster-machine-approver `csr_check.go` `authorizeNodeClientCSR`), so its Node
    // stays NotReady until a person approves the request. Status names it, with the command.
    let victim = ready("True")[0]["metadata"]["name"].as_str().unwrap().to_string();
    clouds.configure(&serde_json::json!({"faults": {"expired_client_certs": [victim.clone()]}}));
    let deadline = grace.deadline();
    while !ready("Unknown").iter().any(|n| n["metadata"]["name"] == victim.as_str()) {
        assert!(Instant::now() < deadline, "{victim} still posts with an expired certificate past {grace}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let said = status_saying(&clouds, state, "oc adm certificate approve");
    assert!(
        said.contains(&format!("its Node {victim} is not Ready (Unknown): its kubelet's client certificate expired")),
        "{said}"
    );
    assert!(said.contains("approves no bootstrap request for a Node that exists"), "{said}");
    let csrs = clouds.kubectl(&["get", "csr"]);
    let pending: Vec<&serde_json::Value> = csrs["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"]["conditions"].as_array().is_none_or(|c| c.is_empty()))
        .collect();
    assert_eq!(pending.len(), 1, "one Pending request, the re-bootstrapping kubelet's: {csrs}");
    let csr = pending[0]["metadata"]["name"].as_str().unwrap().to_string();
    assert!(said.contains(&format!("`oc adm certificate approve {csr}`")), "{said}");
    approve_csr(&clouds, &csr);
    let deadline = posted.deadline();
    while ready("True").len() < 2 {
        assert!(Instant::now() < deadline, "{victim} not Ready within {posted} of its new certificate");
        std::thread::sleep(Duration::from_millis(500));
    }

    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    for kind in ["machinesets", "machines", "azuremachines", "azuremachinetemplates", "machinehealthchecks"] {
        let left = clouds.kubectl(&["get", kind, "-A"]);
        assert_eq!(left["items"].as_array().unwrap().len(), 0, "{kind} left: {left}");
    }
    let clusters = clouds.kubectl(&["get", "clusters", "-A"]);
    let names: Vec<&str> =
        clusters["items"].as_array().unwrap().iter().filter_map(|c| c["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["il5-gpu-x7k2p"], "only the cluster's own Cluster stays");
    assert_eq!(
        clouds.kubectl(&["get", "nodes"])["items"].as_array().unwrap().len(),
        0,
        "the pool's Nodes went with it"
    );
    let namespaces = clouds.kubectl(&["get", "namespaces"]);
    assert!(
        !namespaces["items"].as_array().unwrap().iter().any(|n| n["metadata"]["name"] == "xcsp-il5-gpu"),
        "the pool's namespace is gone"
    );
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    assert_eq!(clouds.arm_count(), 0);
    // CAPZ deleted the VMs it made (its finalizer), not a sweep.
    let requests = clouds.get("/_sim/requests");
    for am in azure_machines {
        let name = am["metadata"]["name"].as_str().unwrap();
        let deleted = requests["requests"].as_array().unwrap().iter().any(|r| {
            r["method"] == "DELETE"
                && r["path"].as_str().is_some_and(|p| p.ends_with(&format!("/virtualMachines/{name}")))
                && r["user_agent"].as_str().is_some_and(|u| u.contains("cluster-api-provider-azure/v1.26.0"))
        });
        assert!(deleted, "CAPZ deleted {name}'s VM");
    }
}

/// The field managers that wrote an object's `status` subresource (its managed fields).
fn status_writers(o: &serde_json::Value) -> Vec<&str> {
    o["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["subresource"] == "status")
        .filter_map(|f| f["manager"].as_str())
        .collect()
}

/// An apply killed while it waits for the pool's Nodes: the waits were never seen to end, so
/// they are not in state and the rerun's plan still has them (`plan` exits 2, not "No changes");
/// it waits for the Nodes in the same apply and exits 0 only with every machine a Ready Node; a
/// third run has nothing to do.
#[test]
fn a_rerun_after_a_kill_while_waiting_for_nodes_waits_for_them() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    kill_when(
        &clouds,
        state,
        |e: &serde_json::Value| {
            e["event"] == "waiting"
                && e["address"].as_str().is_some_and(|a| a.starts_with("k8s_nodes_ready."))
                && e["what"].as_str().is_some_and(|w| w.starts_with("0 of "))
        },
        Duration::ZERO,
    );
    let machines = |clouds: &Clouds| clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
    let joined_now = |clouds: &Clouds| machines(clouds).iter().filter(|m| m["held_at"] == "joined").count();
    assert!(joined_now(&clouds) < 2, "the kill came before both Nodes were Ready: {:#?}", machines(&clouds));

    let (code, text) = plan(&clouds, state);
    assert_eq!(code, Some(2), "a wait for Nodes never seen to end is still to do: {text}");
    assert!(text.contains("+ k8s_nodes_ready.gpu[0] will be created"), "{text}");
    let out = clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap();
    let said = ok(&out);
    assert_eq!(joined_now(&clouds), 2, "apply returned only with both Nodes Ready: {said}");
    let status = clouds.xcsp(state).args(["status", "--json"]).arg(il5()).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let ms = v["machines"].as_array().unwrap();
    assert_eq!(ms.len(), 2, "{v}");
    assert!(ms.iter().all(|m| m["cause"].is_null()), "every machine is a Ready Node: {v}");
    let waits: Vec<String> = recorded(state)["resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(a, r)| a.starts_with("k8s_nodes_ready.") && r["id"].is_string())
        .map(|(a, _)| a.clone())
        .collect();
    assert_eq!(waits.len(), 2, "each finished wait is recorded: {waits:?}");
    let (code, text) = plan(&clouds, state);
    assert_eq!(code, Some(0), "a clean rerun waits for nothing: {text}");
}

/// The pool's machines are made while the VPN gateway builds: the MachineSets finish before the
/// gateway, their VMs wait for the link where a real one waits (in Ignition, which retries its
/// fetch of the machine-config server without end: coreos/ignition `doc/operator-notes.md`), and
/// what needs the link follows it: each MachineSet's wait for its Nodes starts only after every
/// VPN connection on both sides, the MachineHealthCheck after those waits. The apply ends with
/// both Nodes Ready.
#[test]
fn the_machines_are_made_while_the_gateway_builds_and_join_once_the_link_is_up() {
    let clouds = Clouds::start();
    // Durations at a tenth of the other tests' pace (a minute a second: the gateway's build 30-45
    // s), so the order shows against the real Cluster API and CAPZ, which reconcile in real time.
    clouds.configure(&serde_json::json!({"latency": {"time_scale": 1.0 / 60.0}}));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let (mut child, lines) = apply_json(&clouds, state);
    // The link's connections: two on AWS (two tunnels each), four on Azure (one per tunnel).
    const CONNECTIONS: usize = 6;
    let connection =
        |a: &str| a.starts_with("aws_vpn_connection.") || a.starts_with("azure_virtual_network_gateway_connection.");
    let mut events: Vec<(String, String)> = Vec::new();
    let mut connections_done = 0;
    let link_up = std::sync::atomic::AtomicBool::new(false);
    // Where the machines are held while the link is not whole, read from the world throughout.
    let seen: std::sync::Mutex<Vec<String>> = Default::default();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !link_up.load(std::sync::atomic::Ordering::SeqCst) {
                for m in clouds.get("/_sim/machines")["machines"].as_array().into_iter().flatten() {
                    let at = format!(
                        "{}: {}",
                        m["name"].as_str().unwrap_or_default(),
                        m["held_at"].as_str().unwrap_or_default()
                    );
                    let mut seen = seen.lock().unwrap();
                    if !seen.contains(&at) {
                        seen.push(at);
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        for line in lines {
            let Ok(line) = line else { break };
            let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
            let (event, address) = (e["event"].as_str().unwrap_or_default(), e["address"].as_str().unwrap_or_default());
            if matches!(event, "started" | "finished") {
                events.push((event.to_string(), address.to_string()));
                if event == "finished" && connection(address) {
                    connections_done += 1;
                }
            }
            if connections_done == CONNECTIONS {
                link_up.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        link_up.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    // A VM that exists and cannot reach the cluster is held where its boot needs the link: its
    // DNS (the resolver over the link) or the path to the machine-config server.
    let seen = seen.into_inner().unwrap();
    let waited_for_the_link: Vec<&String> =
        seen.iter().filter(|s| s.ends_with(": dns") || s.ends_with(": api_path")).collect();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{events:?}");
    let at = |event: &str, address: &str| {
        events
            .iter()
            .position(|(e, a)| e == event && a == address)
            .unwrap_or_else(|| panic!("no {event} {address} in {events:?}"))
    };
    let last_connection =
        events.iter().rposition(|(e, a)| e == "finished" && connection(a)).expect("the link's connections finished");
    assert_eq!(connections_done, CONNECTIONS, "{events:?}");
    for set in ["k8s_machine_set.gpu[0]", "k8s_machine_set.gpu[1]"] {
        assert!(
            at("finished", set) < at("finished", "azure_virtual_network_gateway.link"),
            "{set} waits for the gateway: {events:?}"
        );
    }
    for wait in ["k8s_nodes_ready.gpu[0]", "k8s_nodes_ready.gpu[1]"] {
        assert!(at("started", wait) > last_connection, "{wait} started before the link was up: {events:?}");
        assert!(at("finished", wait) < at("started", "k8s_machine_health_check.gpu"), "{events:?}");
    }
    assert!(!waited_for_the_link.is_empty(), "no VM was seen waiting for the link: {seen:?}; {events:?}");
    joined(&clouds, 2);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
}

/// Approves the certificate signing request `csr` as `oc adm certificate approve` does: the
/// `Approved` condition written through its `approval` subresource.
fn approve_csr(clouds: &Clouds, csr: &str) {
    let approval = serde_json::json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": csr}, "status": {"conditions": [{"type": "Approved", "status": "True",
        "reason": "KubectlApprove", "message": "This CSR was approved by kubectl certificate approve."}]}});
    clouds.kube_request(
        "PUT",
        &format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{csr}/approval"),
        Some(("application/json", &approval.to_string())),
    );
}

/// `xcsp apply --json` of the IL5 example, running, and the lines of its events.
fn apply_json(clouds: &Clouds, state: &Path) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    apply_json_of(clouds, state, &il5())
}

/// [`apply_json`] of the spec at `spec`.
fn apply_json_of(
    clouds: &Clouds,
    state: &Path,
    spec: &Path,
) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut child = clouds
        .xcsp(state)
        .args(["apply", "--auto-approve", "--json"])
        .arg(spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Runs `xcsp apply --json` until an event matches `when`, waits `linger`, checks the child is
/// still running, kills it (SIGKILL) and clears its lock as an operator would.
fn kill_when(clouds: &Clouds, state: &Path, when: impl Fn(&serde_json::Value) -> bool, linger: Duration) {
    kill_when_of(clouds, state, &il5(), when, linger)
}

/// [`kill_when`] of the spec at `spec`.
fn kill_when_of(
    clouds: &Clouds,
    state: &Path,
    spec: &Path,
    when: impl Fn(&serde_json::Value) -> bool,
    linger: Duration,
) {
    let (mut child, mut lines) = apply_json_of(clouds, state, spec);
    let mut matched = None;
    while let Some(Ok(line)) = lines.next() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if when(&e) {
            matched = Some(e);
            break;
        }
    }
    let matched = matched.expect("the apply reached the chosen instant");
    std::thread::sleep(linger);
    assert!(child.try_wait().unwrap().is_none(), "the apply was still running at {matched}");
    let _ = child.kill();
    let _ = child.wait();
    if state.join("state.lock").exists() {
        clouds.force_unlock(state);
    }
}

/// Every resource xcsp made, in each cloud and the cluster, is exactly one state record, and
/// every record names one that exists: compared by id, so a twin or an orphan shows.
fn assert_one_to_one(clouds: &Clouds, state: &Path) {
    let r = recorded(state);
    let records: Vec<(&String, &serde_json::Value)> = r["resources"].as_object().unwrap().iter().collect();
    let ids = |prefixes: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = records
            .iter()
            .filter(|(a, _)| prefixes.iter().any(|p| a.starts_with(p)))
            .filter_map(|(_, rec)| rec["id"].as_str().map(|i| i.to_ascii_lowercase()))
            .collect();
        v.sort();
        v
    };
    let mut arm: Vec<String> = clouds
        .arm_resources()
        .into_iter()
        // CAPZ's own: the machines' VMs, OS disks, availability sets and NICs.
        .filter(|id| !id.contains("/Microsoft.Compute/") && !id.contains("/networkInterfaces/"))
        .map(|id| id.to_ascii_lowercase())
        .collect();
    arm.sort();
    let azure: Vec<String> = ids(&["azure_"]).into_iter().filter(|i| !i.ends_with("/dnsservers")).collect();
    assert_eq!(arm, azure, "ARM against state");
    assert!(arm.len() >= 20, "the stack's Azure resources are all there: {arm:#?}");
    let ec2 = |action: &str, tag: &str| -> Vec<String> {
        let text = clouds.ec2(action);
        let mut v: Vec<String> =
            text.split(&format!("<{tag}>")).skip(1).filter_map(|s| s.split('<').next()).map(String::from).collect();
        v.sort();
        v.dedup();
        v
    };
    for (action, tag, rtype) in [
        ("DescribeVpnGateways", "vpnGatewayId", "aws_vpn_gateway."),
        ("DescribeCustomerGateways", "customerGatewayId", "aws_customer_gateway."),
        ("DescribeVpnConnections", "vpnConnectionId", "aws_vpn_connection."),
    ] {
        let live = ec2(action, tag);
        assert!(!live.is_empty(), "{action}");
        assert_eq!(live, ids(&[rtype]), "{action} against state");
    }
    let mut kube: Vec<String> = clouds
        .kube_objects()
        .into_iter()
        .map(|(_, name)| format!("xcsp-il5-gpu/{name}").to_ascii_lowercase())
        .collect();
    kube.sort();
    // The objects' records: not the waits for the MachineSets' Nodes, which make none.
    let waits = ids(&["k8s_nodes_ready."]);
    let mut in_ns: Vec<String> = ids(&["k8s_"]).into_iter().filter(|i| i.starts_with("xcsp-il5-gpu/")).collect();
    for w in &waits {
        let at = in_ns.iter().position(|i| i == w).expect("a wait's MachineSet is recorded");
        in_ns.remove(at);
    }
    assert_eq!(kube, in_ns, "the pool's namespace against state");
    assert!(kube.len() >= 8, "the pool's objects are all there: {kube:#?}");
}

#[test]
fn apply_converges_through_throttling_and_server_errors_on_both_clouds() {
    let clouds = Clouds::start();
    let faults = r#"{"faults": {"aws_throttle_rate": 0.3, "aws_error_rate": 0.05, "error_rate": 0.05, "error_status": 500},
        "throttle": {"enabled": true, "writes": {"capacity": 4, "refill_per_sec": 4.0}, "reads": {"capacity": 10, "refill_per_sec": 10.0}}}"#;
    clouds.configure(&serde_json::from_str(faults).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let applied = clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&applied.stdout), String::from_utf8_lossy(&applied.stderr));
    let counters = clouds.get("/_sim/counters");
    assert!(counters["injected_errors"].as_u64().unwrap_or(0) > 10, "faults were injected: {counters}");
    // The providers' retries absorb every fault: one run is enough.
    assert!(applied.status.success() && text.contains("Apply complete!"), "{text}");
    let quiet = r#"{"faults": {"aws_throttle_rate": 0.0, "aws_error_rate": 0.0, "error_rate": 0.0}, "throttle": {"enabled": false}}"#;
    clouds.configure(&serde_json::from_str(quiet).unwrap());
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    assert_eq!(clouds.aws_live(), (1, 2, 2));
    assert_eq!(tunnels_up(&clouds, state), 4);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.arm_count(), 0);
}

#[test]
fn state_in_s3_is_encrypted_locked_and_shared() {
    let clouds = Clouds::start();
    let created =
        Command::new("curl").args(["-sf", "-X", "PUT", &format!("{}/xcsp-state", clouds.moto)]).status().unwrap();
    assert!(created.success(), "bucket created in moto");
    let dir = tempfile::tempdir().unwrap();
    let s3 = |c: &mut Command| {
        c.env("XCSP_BACKEND", "s3")
            .env("XCSP_BACKEND_BUCKET", "xcsp-state")
            .env("XCSP_BACKEND_ENDPOINT", &clouds.moto)
            .env("XCSP_BACKEND_REGION", "us-east-1")
            .env("XCSP_STATE_PASSPHRASE", "correct horse battery staple")
            .env("XCSP_STATE_ENCRYPTION", "enforced");
    };
    let mut apply = clouds.xcsp(dir.path());
    s3(&mut apply);
    ok(&apply.args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());

    // The stored object is an envelope: no attribute, no sensitive marker, readable.
    let raw = Command::new("curl")
        .args(["-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "local:local"])
        .arg(format!("{}/xcsp-state/il5-gpu/state.json", clouds.moto))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&raw.stdout);
    assert!(
        raw.status.success(),
        "GET from moto at {:?}: {:?} {}",
        clouds.moto,
        raw.status,
        String::from_utf8_lossy(&raw.stderr)
    );
    assert!(
        text.contains("xcsp_encrypted") && !text.contains("$sensitive") && !text.contains("xcsp_preshared_key"),
        "{text}"
    );

    // Another machine whose spec names the backend in a `backend "s3"` block (no XCSP_BACKEND*)
    // and has the key sees the same stack: nothing to change.
    let spec_dir = dir.path().join("spec");
    std::fs::create_dir_all(&spec_dir).unwrap();
    let spec = std::fs::read_to_string(il5().join("pool.xcsp.hcl")).unwrap();
    let block = format!(
        "backend \"s3\" {{\n  bucket = \"xcsp-state\"\n  region = \"us-east-1\"\n  endpoint = \"{}\"\n}}\n",
        clouds.moto
    );
    std::fs::write(spec_dir.join("pool.xcsp.hcl"), format!("{spec}\n{block}")).unwrap();
    let out = clouds
        .xcsp(&dir.path().join("elsewhere"))
        .env("XCSP_STATE_PASSPHRASE", "correct horse battery staple")
        .args(["plan", "--detailed-exitcode"])
        .arg(&spec_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // Without the key it is refused with a clear error.
    let mut keyless = clouds.xcsp(dir.path());
    s3(&mut keyless);
    let out = keyless.env_remove("XCSP_STATE_PASSPHRASE").args(["plan"]).arg(il5()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("XCSP_STATE_KEY"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut destroy = clouds.xcsp(dir.path());
    s3(&mut destroy);
    ok(&destroy.args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.arm_count(), 0);
}

#[test]
fn apply_killed_right_after_create_vpn_connection_adopts_it() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let (mut child, mut lines) = apply_json(&clouds, state);
    while let Some(Ok(line)) = lines.next() {
        if line.contains(r#""event":"started""#) && line.contains("aws_vpn_connection.link[0]") {
            break;
        }
    }
    // Wait until the layer has answered CreateVpnConnection, then SIGKILL before state records it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while clouds.aws_live().2 == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(clouds.aws_live().2 >= 1, "the connection was created before the kill");
    let recorded = recorded(state);
    assert!(
        recorded["resources"]["aws_vpn_connection.link[0]"]["id"].is_null(),
        "state holds only the intent: {}",
        recorded["resources"]["aws_vpn_connection.link[0]"]
    );
    clouds.force_unlock(state);
    let resumed = ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert!(resumed.contains("aws_vpn_connection.link[0]: found in the cloud"), "adopted, not re-created: {resumed}");
    assert_eq!(clouds.aws_live(), (1, 2, 2), "no twin");
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
}

/// A copy of the IL5 example in `dir`, with `edit` applied to its text.
fn il5_copy(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let spec = dir.join("spec");
    std::fs::create_dir_all(&spec).unwrap();
    let text = std::fs::read_to_string(il5().join("pool.xcsp.hcl")).unwrap();
    std::fs::write(spec.join("pool.xcsp.hcl"), edit(text)).unwrap();
    spec
}

impl Clouds {
    /// Out-of-band merge patch of an ARM resource's stored body.
    fn patch_resource(&self, id: &str, patch: &serde_json::Value) {
        let out = Command::new("curl")
            .args(["-sf", "-X", "PATCH", "-H", "Content-Type: application/json"])
            .args(["--data", &patch.to_string(), &format!("{}/_sim/resource?id={id}", self.url)])
            .output()
            .expect("curl");
        assert!(out.status.success(), "patch {id}");
    }

    /// Puts xcsp's stack and address tags of every ARM resource back under the keys written
    /// before Azure's tag rules were obeyed (`xcsp.io/stack`, `xcsp.io/address`).
    fn retag_with_old_keys(&self, only: impl Fn(&str) -> bool) -> usize {
        let all = self.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
        let mut n = 0;
        for r in all {
            let id = r["id"].as_str().unwrap_or_default();
            let tags = &r["body"]["tags"];
            if tags["xcsp.io_stack"].is_null() || !only(id) {
                continue;
            }
            self.patch_resource(
                id,
                &serde_json::json!({ "tags": {
                    "xcsp.io_stack": null, "xcsp.io_address": null,
                    "xcsp.io/stack": tags["xcsp.io_stack"], "xcsp.io/address": tags["xcsp.io_address"],
                }}),
            );
            n += 1;
        }
        n
    }
}

/// Azure refuses `/` in tag names; resources and state written with the old `xcsp.io/...` keys
/// (only the local clouds ever took them) are still recognised: refresh finds them, apply moves
/// them to the new keys as a tag update, and a sweep finds one that state forgot.
#[test]
fn azure_resources_and_state_with_the_old_tag_keys_are_adopted_and_swept() {
    let (clouds, dir) = applied();
    let state = dir.path();
    // xcsp's resources; not the VMs and NICs CAPZ made for the pool's machines, which carry the
    // stack's tags through the machine template but are CAPZ's to tag.
    let capz = |id: &str| id.contains("/virtualMachines/") || id.contains("/networkInterfaces/");
    let retagged = clouds.retag_with_old_keys(|id| !capz(id));
    assert!(retagged >= 15, "{retagged} resources retagged");
    // A state file written by the version before: the recorded tags under the old keys too.
    let file = state.join("state.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("xcsp.io_stack", "xcsp.io/stack").replace("xcsp.io_address", "xcsp.io/address"))
        .unwrap();
    // ... and one resource it no longer knows.
    ok(&clouds.xcsp(state).args(["state", "rm", "azure_network_security_group.gpu"]).arg(il5()).output().unwrap());

    let plan = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    let said = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert_eq!(plan.status.code(), Some(2), "{said}");
    assert!(!said.contains("will be created") && !said.contains("must be replaced"), "{said}");
    assert!(said.contains("azure_virtual_network.link will be updated in place"), "{said}");
    assert!(said.contains("xcsp.io_stack"), "{said}");

    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    let arm = clouds.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
    let old: Vec<&str> = arm
        .iter()
        .filter(|r| r["body"]["tags"].as_object().is_some_and(|t| t.keys().any(|k| k.contains('/'))))
        .map(|r| r["id"].as_str().unwrap_or_default())
        .collect();
    assert!(old.is_empty(), "still under the old keys: {old:?}");
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));

    // Forgotten again and under the old keys: destroy --sweep finds it and leaves nothing.
    clouds.retag_with_old_keys(|id| id.contains("/networkSecurityGroups/"));
    ok(&clouds.xcsp(state).args(["state", "rm", "azure_network_security_group.gpu"]).arg(il5()).output().unwrap());
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.arm_count(), 0, "{:?}", clouds.arm_resources());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
}

/// Lifetimes changed in the spec reach every AWS tunnel (ModifyVpnTunnelOptions, one tunnel at
/// a time: the sim refuses a second modification while the connection is `modifying`) and the
/// Azure connections; a new VM size is a new machine template the MachineSets move to, and the
/// old template is deleted, never updated (CAPZ refuses that). One apply converges.
#[test]
fn tunnel_option_and_vm_size_edits_converge_in_one_apply() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let spec = il5_copy(dir.path(), |t| t);
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    let template = |clouds: &Clouds| -> Vec<String> {
        clouds.kube_objects().into_iter().filter(|(k, _)| k == "AzureMachineTemplate").map(|(_, n)| n).collect()
    };
    let before = template(&clouds);
    assert_eq!(before.len(), 1);

    let spec = il5_copy(dir.path(), |t| {
        t.replace("sa_lifetime_seconds  = 3600", "sa_lifetime_seconds  = 1800")
            .replace("ike_lifetime_seconds = 28800", "ike_lifetime_seconds = 14400\n    dpd_timeout_seconds  = 40")
            .replace("\"Standard_ND96asr_v4\"", "\"Standard_ND96amsr_A100_v4\"")
    });
    let plan = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(&spec).output().unwrap();
    let said = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert_eq!(plan.status.code(), Some(2), "{said}");
    assert!(said.contains("aws_vpn_connection.link[0] will be updated in place"), "{said}");
    assert!(said.contains("~ phase2_lifetime_seconds = 3600 -> 1800"), "{said}");
    assert!(said.contains("~ phase1_lifetime_seconds = 28800 -> 14400"), "{said}");
    assert!(said.contains("+ dpd_timeout_seconds = 40"), "{said}");
    assert!(
        said.contains(&format!(
            "k8s_azure_machine_template.{} will be destroyed",
            before[0].trim_start_matches("il5-gpu-x7k2p-")
        )),
        "{said}"
    );
    assert!(!said.contains("must be replaced"), "{said}");

    let applied = ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    assert!(!applied.contains("IncorrectState"), "{applied}");
    let conns = clouds.ec2("DescribeVpnConnections");
    assert_eq!(conns.matches("<phase2LifetimeSeconds>1800</phase2LifetimeSeconds>").count(), 4, "{conns}");
    assert_eq!(conns.matches("<phase1LifetimeSeconds>14400</phase1LifetimeSeconds>").count(), 4, "{conns}");
    let arm = clouds.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
    let lifetimes: Vec<&serde_json::Value> = arm
        .iter()
        .filter(|r| r["type"] == "Microsoft.Network/connections")
        .map(|r| &r["body"]["properties"]["ipsecPolicies"][0]["saLifeTimeSeconds"])
        .collect();
    assert_eq!(lifetimes, vec![&serde_json::json!(1800); 4]);
    assert_eq!(conns.matches("<dpdTimeoutSeconds>40</dpdTimeoutSeconds>").count(), 4, "{conns}");
    let dpd = arm.iter().filter(|r| r["type"] == "Microsoft.Network/connections");
    assert!(dpd.clone().all(|r| r["body"]["properties"]["dpdTimeoutSeconds"] == 40), "{arm:?}");

    // The pool's new template, by a new name; the MachineSets point at it; the old one is gone.
    let after = template(&clouds);
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
    let sets = clouds.kube_get("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machinesets");
    let refs: Vec<&str> = sets["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["spec"]["template"]["spec"]["infrastructureRef"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(refs, vec![after[0].as_str(); 2]);
    let amt = clouds.kube_get(&format!(
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/azuremachinetemplates/{}",
        after[0]
    ));
    assert_eq!(amt["spec"]["template"]["spec"]["vmSize"], "Standard_ND96amsr_A100_v4");

    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(&spec).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    ok(&clouds.xcsp(state).args(["destroy", "--auto-approve"]).arg(&spec).output().unwrap());
}

/// An Azure ASN above 2,147,483,647 reaches EC2 as `BgpAsnExtended` (BgpAsn is a signed 32-bit
/// int), reads back as the same number, and the tunnels come up with it.
#[test]
fn a_32_bit_azure_asn_goes_to_bgp_asn_extended() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let spec = il5_copy(dir.path(), |t| t.replace("azure_asn      = 65010", "azure_asn      = 4200000001"));
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    let cgws = clouds.ec2("DescribeCustomerGateways");
    assert_eq!(cgws.matches("<bgpAsnExtended>4200000001</bgpAsnExtended>").count(), 2, "{cgws}");
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(&spec).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    ok(&clouds.xcsp(state).args(["destroy", "--auto-approve"]).arg(&spec).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
}

impl Clouds {
    /// An ARM PUT as a client makes it: a token from the sim's Entra endpoint, then the call.
    fn arm_put(&self, path: &str, body: &serde_json::Value) -> String {
        let token = self.arm_token();
        let out = Command::new("curl")
            .args(["-s", "-X", "PUT", "-H", &format!("Authorization: Bearer {token}")])
            .args(["-H", "Content-Type: application/json", "--data", &body.to_string()])
            .arg(format!("{}{path}?api-version=2024-03-01", self.url))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A token from the sim's Entra endpoint, as a client gets one for ARM.
    fn arm_token(&self) -> String {
        let token = Command::new("curl")
            .args(["-s", "-X", "POST", &format!("{}/00000000-0000-0000-0000-000000000001/oauth2/v2.0/token", self.url)])
            .args(["--data", "grant_type=client_credentials&client_id=xcsp-e2e&client_secret=local&scope=https://management.usgovcloudapi.net/.default"])
            .output()
            .expect("curl");
        let token: serde_json::Value = serde_json::from_slice(&token.stdout).unwrap_or_default();
        token["access_token"].as_str().unwrap_or_default().to_string()
    }

    /// An ARM DELETE as a client makes it (a token from the sim's Entra endpoint, then the call).
    fn arm_delete(&self, id: &str, api_version: &str) {
        let token = self.arm_token();
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE"])
            .args(["-H", &format!("Authorization: Bearer {token}")])
            .arg(format!("{}{id}?api-version={api_version}", self.url))
            .output()
            .expect("curl");
        let code = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(code.starts_with('2'), "DELETE {id}: {code}");
    }

    /// An EC2 action with parameters, through the fidelity layer (moto behind it for groups).
    fn ec2_with(&self, action: &str, params: &[(&str, &str)]) -> String {
        let mut data = format!("Action={action}&Version=2016-11-15");
        for (k, v) in params {
            data.push_str(&format!("&{k}={}", v.replace('/', "%2F")));
        }
        let out = Command::new("curl")
            .args(["-s", "-X", "POST", &format!("{}/", self.url)])
            .args(["-H", "Authorization: AWS4-HMAC-SHA256 Credential=x/20260101/us-gov-west-1/ec2/aws4_request, SignedHeaders=host, Signature=0"])
            .args(["-H", "Content-Type: application/x-www-form-urlencoded"])
            .args(["--data", &data])
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The boot meets the cluster's own rules: with xcsp's machine-config rule revoked by hand from
/// the internal API load balancer's group (CAPA's `apiserver-lb`, which admits 22623 only from the
/// machine network), a replacement machine's VM is held before Ignition, `xcsp status` shows it
/// without a Node, plan shows the missing rule, and after apply it joins. The same for the
/// subnet's NAT gateway, the pool's only way to its images.
#[test]
fn boot_is_held_where_the_cluster_would_hold_it() {
    // Tokens that live 2 minutes: MSAL asks Entra again for one that has less than 5 minutes left
    // (its `AccessToken.Validate`), so CAPZ's every Azure call starts with a token exchange, as it
    // would an hour after its last, and the audience edit below shows at once.
    let clouds = Clouds::start();
    clouds.configure(&serde_json::json!({"token_lifetime_secs": 120}));
    let dir = tempfile::tempdir().unwrap();
    ok(&clouds.xcsp(dir.path()).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    let state = dir.path();
    joined(&clouds, 2);
    let groups = clouds.ec2_with(
        "DescribeSecurityGroups",
        &[("Filter.1.Name", "tag:sigs.k8s.io/cluster-api-provider-aws/role"), ("Filter.1.Value.1", "apiserver-lb")],
    );
    let lb = groups.split("<groupId>").nth(1).and_then(|g| g.split('<').next()).expect("the group").to_string();
    assert!(groups.contains("[xcsp il5-gpu aws_security_group_ingress.link]"), "xcsp's rules are there: {groups}");
    clouds.revoke_machine_config_rule(&lb);

    // A Machine deleted by hand: its MachineSet makes another, whose VM cannot fetch its config.
    let machines = clouds.kube_get("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machines");
    let victim = machines["items"][0]["metadata"]["name"].as_str().unwrap().to_string();
    let held = replaced_and_held(&clouds, &victim, "api_path");
    let said = held[0]["message"].as_str().unwrap();
    assert!(said.contains(&format!("security group {lb} lets no TCP 22623 in from the VM's subnet")), "{said}");
    let cause = "no Node: the cluster's security groups may refuse its VM (not open in every security group of the cluster: machine-config server: TCP 22623;";
    let text = status_saying(&clouds, state, cause);
    assert_eq!(text.matches(cause).count(), 1, "{text}");
    assert!(text.contains("SecurityGroupRulesInPlace=False (RulesMissing)"), "{text}");

    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("~ aws_security_group_ingress.link will be updated in place"), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    let held = joined(&clouds, 2);
    assert!(held.iter().all(|m| m["name"] != victim.as_str()), "{held:#?}");

    // Without OpenShift's machine approver for Cluster API Machines, a new node's certificate
    // request stays Pending: the next replacement is held at `csr`, and preflight warns.
    let approver = "/apis/apps/v1/namespaces/openshift-cluster-machine-approver/deployments/machine-approver-capi";
    let saved = clouds.kube_get(approver);
    clouds.kube_request("DELETE", approver, None);
    let said = text_of(&clouds.xcsp(state).arg("preflight").arg(il5()).output().unwrap());
    assert!(
        said.contains("xcsp::cluster::no_machine_approver") && said.contains("The cluster can take the pool."),
        "{said}"
    );
    let victim = held[0]["name"].as_str().unwrap().to_string();
    let held = replaced_and_held(&clouds, &victim, "csr");
    let said = held[0]["message"].as_str().unwrap();
    assert!(said.contains("stays Pending"), "{held:#?}");
    let csr = said.split_whitespace().find(|w| w.starts_with("csr-")).expect("the request's name").to_string();
    let found = clouds.kube_get(&format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{csr}"));
    assert_eq!(found["spec"]["signerName"], "kubernetes.io/kube-apiserver-client-kubelet", "{found}");
    let cause = format!("no Node: its kubelet's certificate signing request {csr} is Pending since ");
    let text = status_saying(&clouds, state, &cause);
    assert_eq!(text.matches(&cause).count(), 1, "{text}");
    // Approved by hand: the Node registers without the approver.
    approve_csr(&clouds, &csr);
    joined(&clouds, 2);
    let mut restored = saved.clone();
    for k in ["resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"] {
        restored["metadata"].as_object_mut().unwrap().remove(k);
    }
    let body = restored.to_string();
    let made = clouds.kube_request(
        "POST",
        "/apis/apps/v1/namespaces/openshift-cluster-machine-approver/deployments",
        Some(("application/json", &body)),
    );
    assert_eq!(made["metadata"]["name"], "machine-approver-capi", "{made}");
    joined(&clouds, 2);

    // The Azure half of the path: an outbound Deny added by hand to the network security group on
    // the pool's subnet. The next replacement cannot reach the machine-config server; status
    // names the group, plan shows the rule as drift, and apply takes it out.
    let resources = recorded(state)["resources"].clone();
    let (nsg_address, nsg) = resources
        .as_object()
        .unwrap()
        .iter()
        .find(|(a, _)| a.starts_with("azure_network_security_group."))
        .map(|(a, r)| (a.clone(), r["id"].as_str().unwrap().to_string()))
        .expect("the pool's network security group");
    let said = clouds.arm_put(
        &format!("{nsg}/securityRules/deny-cluster"),
        &serde_json::json!({"properties": {"protocol": "Tcp", "sourceAddressPrefix": "*", "sourcePortRange": "*",
            "destinationAddressPrefix": "10.0.0.0/16", "destinationPortRange": "22623", "access": "Deny",
            "priority": 100, "direction": "Outbound", "description": "blocked by hand"}}),
    );
    assert!(said.contains("deny-cluster"), "{said}");
    let victim = joined(&clouds, 2)[0]["name"].as_str().unwrap().to_string();
    let held = replaced_and_held(&clouds, &victim, "api_path");
    let said = held[0]["message"].as_str().unwrap();
    assert!(said.contains("denies Tcp 22623 out to 10.0.0.") && said.contains("blocked by hand"), "{said}");
    let text = status_saying(&clouds, state, "no Node: the network security group of its subnet differs from the spec");
    assert!(text.contains("NetworkSecurityGroupInPlace=False"), "{text}");
    assert_eq!(
        text.matches("no Node: the network security group of its subnet differs from the spec").count(),
        1,
        "{text}"
    );
    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains(&format!("~ {nsg_address} will be updated in place")), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    joined(&clouds, 2);

    // The pool's way out taken away by hand: its subnet's NAT gateway detached. The subnet is
    // private and the cluster mirrors nothing, so the next replacement cannot pull the release's
    // images; plan shows the subnet's drift, and apply puts the NAT gateway back.
    let subnet = recorded(state)["resources"]["azure_subnet.pool-gpu"]["id"].as_str().unwrap().to_string();
    let said = clouds.arm_put(
        &subnet,
        &serde_json::json!({"properties": {"addressPrefix": "10.200.1.0/24", "defaultOutboundAccess": false,
            "networkSecurityGroup": {"id": nsg}}}),
    );
    assert!(said.contains("\"addressPrefix\""), "{said}");
    let victim = joined(&clouds, 2)[0]["name"].as_str().unwrap().to_string();
    let held = replaced_and_held(&clouds, &victim, "pull");
    let said = held[0]["message"].as_str().unwrap();
    assert!(said.contains("private (defaultOutboundAccess false) with no NAT gateway"), "{said}");
    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("~ azure_subnet.pool-gpu will be updated in place") && said.contains("nat_gateway"),
        "{said}"
    );
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    joined(&clouds, 2);

    // The identity's VM-SKU role at the subscription deleted by hand. CAPZ lists a location's SKUs
    // once per credential and keeps them 24 hours (`azure/services/resourceskus/cache.go`), so the
    // next replacement is made all the same and joins; status says the role is missing, plan
    // assigns it again.
    let assignment =
        recorded(state)["resources"]["azure_role_assignment.capz-skus"]["id"].as_str().unwrap().to_string();
    clouds.arm_delete(&assignment, "2022-04-01");
    let victim = joined(&clouds, 2)[0]["name"].as_str().unwrap().to_string();
    clouds.delete_machine(&victim);
    let joins = clouds.timing().machine_joins();
    let deadline = joins.deadline();
    loop {
        let all = clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
        let joined_now: Vec<&serde_json::Value> =
            all.iter().filter(|m| m["held_at"] == "joined" && m["name"] != victim.as_str()).collect();
        if joined_now.len() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replacement joins despite the missing SKU role within {joins}: {all:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = text_of(&clouds.xcsp(state).arg("status").arg(il5()).output().unwrap());
    assert!(text.contains("identity capz: RoleAssignmentsInPlace=False (AssignmentMissing)"), "{text}");
    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("+ azure_role_assignment.capz-skus will be created"), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    joined(&clouds, 2);

    // A pool config whose unit writes another provider ID (a bug of the kind the lower-casing
    // once was): the replacement registers a Node that CAPI never matches to its Machine.
    let script = "#!/bin/bash\nprintf 'KUBELET_NODE_NAME=%s\\nKUBELET_PROVIDERID=azure:///wrong\\n' \"$(curl -fsS -H 'Metadata: true' 'http://169.254.169.254/metadata/instance/compute/name?api-version=2021-02-01&format=text')\" > /etc/kubernetes/node.env\n";
    let source = {
        use base64::Engine as _;
        format!("data:text/plain;charset=utf-8;base64,{}", base64::engine::general_purpose::STANDARD.encode(script))
    };
    let config = "/apis/machineconfiguration.openshift.io/v1/machineconfigs/99-xcsp-il5-gpu-gpu-azure";
    let path = clouds.kube_get(config)["spec"]["config"]["storage"]["files"][0]["path"].clone();
    let patch = serde_json::json!({"spec": {"config": {"storage": {"files": [
        {"path": path, "mode": 493, "overwrite": true, "contents": {"source": source}}]}}}});
    clouds.kube_request("PATCH", config, Some(("application/merge-patch+json", &patch.to_string())));
    let victim = joined(&clouds, 2)[0]["name"].as_str().unwrap().to_string();
    let held_wrong = replaced_and_held(&clouds, &victim, "node_ref");
    let said = held_wrong[0]["message"].as_str().unwrap();
    assert!(
        said.contains("registered with provider ID \"azure:///wrong\"") && said.contains("CAPI never matches them"),
        "{said}"
    );

    // A wrong audience applied offline (plan did not read the cluster, so nothing refused it),
    // with a third machine: Entra refuses CAPZ's token, while the two machines whose VMs exist
    // stay. CAPZ lists a location's SKUs once per credential (above), so the third machine's first
    // Azure call is its NIC's GET, in a client made for that reconcile, whose token policy asks
    // the credential and MSAL asks Entra for a token with under five minutes left (the world's
    // live two); the refusal fails the service, and CAPZ writes it on the AzureMachine
    // (`azure/reconcile.go` `ReconcileAll`, `UpdatePutStatus`: NetworkInterfacesReady False). The
    // world holds the machine where CAPZ reports it; status names the refusal.
    let before: Vec<String> = clouds.get("/_sim/machines")["machines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str().map(String::from))
        .collect();
    let wrong = il5_copy(state, |t| {
        t.replacen(
            "workload_identity \"capz\" {",
            "workload_identity \"capz\" {\n  audience = \"api://AzureADTokenExchangeUSGov\"",
            1,
        )
        .replacen("replicas = 2", "replicas = 3", 1)
    });
    let args = ["apply", "--auto-approve", "--offline", "--wait-for-nodes", "false"];
    ok(&clouds.xcsp(state).args(args).arg(&wrong).output().unwrap());
    let reports = clouds.timing().capz_reports();
    let deadline = reports.deadline();
    let third = loop {
        let all = clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
        let new: Vec<serde_json::Value> =
            all.iter().filter(|m| !before.iter().any(|b| m["name"] == b.as_str())).cloned().collect();
        let reported = |m: &serde_json::Value| {
            m["held_at"] == "vm" && m["message"].as_str().is_some_and(|t| t.contains("AADSTS70021"))
        };
        if new.iter().any(reported) {
            break new;
        }
        assert!(
            Instant::now() < deadline,
            "CAPZ reports no refused token on the third machine within {reports}: {all:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(third.len(), 1, "{third:#?}");
    let said = third[0]["message"].as_str().unwrap();
    assert!(said.starts_with("Failed: interfaces failed to create or update"), "CAPZ's NIC service says so: {said}");
    let out = clouds.xcsp(state).arg("status").arg(&wrong).output().unwrap();
    let text = text_of(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("identity capz: TokenExchangeAccepted=False (AudienceMismatch)"), "{text}");
    let cause = "no Node: CAPZ gets no Azure token, so it makes no VM: its federated credential expects a token for `api://AzureADTokenExchangeUSGov`, but CAPZ's projected token is for `api://AzureADTokenExchange`";
    assert_eq!(text.matches(cause).count(), 1, "{text}");
    // CAPZ deletes a machine's VM only with a token, so the audience is put right before the
    // destroy (a CAPZ that cannot authenticate leaves its Machines deleting, and the destroy
    // waiting on them).
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve", "--wait-for-nodes", "false"]).arg(il5()).output().unwrap());
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.kube_get("/api/v1/nodes")["items"], serde_json::json!([]), "the Nodes go with their machines");
}

/// The pool's health check on the upstream CAPI, as xcsp writes it (`maxUnhealthy` 1 of the 2
/// machines; its Ready timeouts shortened here to 1 s): a cut link turns both Nodes `Unknown` and
/// CAPI's controller remediates none (more unhealthy than allowed); `xcsp watch --auto-approve`
/// holds it with CAPI's paused annotation while the link is down and releases it once the link is
/// back and the Nodes are Ready; the same two machines join again. A machine that hangs alone is
/// replaced, and only it.
#[test]
fn a_link_outage_deletes_no_machine_and_a_hung_machine_is_replaced_alone() {
    let (clouds, dir) = applied();
    let state = dir.path();
    let names = |held: &[serde_json::Value]| {
        let mut n: Vec<String> = held.iter().filter_map(|m| m["name"].as_str().map(String::from)).collect();
        n.sort();
        n
    };
    let before = names(&joined(&clouds, 2));
    let base = "/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machinehealthchecks";
    let checks = clouds.kube_get(base);
    let check = checks["items"][0]["metadata"]["name"].as_str().expect("the pool's health check").to_string();
    let spec = &checks["items"][0]["spec"];
    assert_eq!(spec["maxUnhealthy"], 1, "{spec}");
    assert_eq!(spec["nodeStartupTimeout"], "45m0s", "{spec}");
    assert_eq!(spec["unhealthyConditions"][0]["timeout"], "15m0s", "{spec}");
    let patch = serde_json::json!({"spec": {"unhealthyConditions": [
        {"type": "Ready", "status": "Unknown", "timeout": "1s"}, {"type": "Ready", "status": "False", "timeout": "1s"}]}});
    let path = format!("{base}/{check}");
    let patched = clouds.kube_request("PATCH", &path, Some(("application/merge-patch+json", &patch.to_string())));
    assert_eq!(patched["spec"]["unhealthyConditions"][0]["timeout"], "1s", "{patched}");

    // The link cut: both Nodes Unknown past the timeout, and CAPI remediates neither.
    clouds.cut_every_tunnel();
    let timing = clouds.timing();
    let judged = timing.node_unknown().then(&timing.capi_reconciles());
    let deadline = judged.deadline();
    let short_circuited = loop {
        let mhc = clouds.kube_get(&path);
        if mhc["status"]["currentHealthy"] == 0 && mhc["status"]["expectedMachines"] == 2 {
            break mhc;
        }
        assert!(Instant::now() < deadline, "both machines unhealthy within {judged}: {mhc}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(short_circuited["status"]["remediationsAllowed"], 0, "{short_circuited}");
    // Given the time to remediate, it does not: five of the check's 1 s unhealthy timeouts, past
    // each of which CAPI's health check controller looks again (it requeues at the nearest
    // timeout, `machinehealthcheck_controller.go` `healthCheckTargets`).
    std::thread::sleep(Duration::from_secs(5));
    let held = clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
    assert_eq!(names(&held), before, "no machine was replaced for the outage: {held:#?}");

    // watch holds it while the link is down, and releases it once the link and the Nodes are back.
    let watch = Watch::start(&clouds, state);
    let wait_for = |what: &str| watch.wait_for(what, 0, Duration::from_secs(90));
    wait_for(&format!("health check {check} held (paused)"));
    let annotations = clouds.kube_get(&path)["metadata"]["annotations"].clone();
    assert_eq!(annotations["cluster.x-k8s.io/paused"], "", "{annotations}");
    assert!(annotations["xcsp.io/remediation-held"].as_str().unwrap().starts_with("link down since "), "{annotations}");
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": []}}));
    wait_for(&format!("health check {check} released"));
    assert!(clouds.kube_get(&path)["metadata"]["annotations"].get("cluster.x-k8s.io/paused").is_none());
    watch.interrupt();
    assert_eq!(names(&joined(&clouds, 2)), before, "the same machines are back");

    // One machine hangs while the link is fine: the health check replaces it, and only it.
    let victim = before[0].clone();
    clouds.configure(&serde_json::json!({"faults": {"hung_vms": [victim.clone()]}}));
    // Its Node Unknown, the health check's remediation (CAPI), CAPZ's delete of its VM and the
    // replacement's VM.
    let replaced = timing.node_unknown().then(&timing.capi_reconciles()).then(&timing.machine_joins());
    let deadline = replaced.deadline();
    let after = loop {
        let held = clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
        let now = names(&held);
        if !now.contains(&victim) && now.len() == 2 {
            break now;
        }
        assert!(Instant::now() < deadline, "the hung machine is not replaced within {replaced}: {held:#?}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(after.contains(&before[1]), "the healthy machine stays: {after:?}");
    clouds.configure(&serde_json::json!({"faults": {"hung_vms": []}}));
    joined(&clouds, 2);
    // The replaced machine's Node goes with it. CAPI drains and deletes a deleted Machine's Node
    // only when `isDeleteNodeAllowed` lets it (cluster-api v1.13
    // `internal/controllers/machine/machine_controller.go`): never in a Cluster without control-plane
    // Machines, unless its control plane is externally managed; AWS's cloud controller cannot
    // look up an `azure://` Node and deletes nothing either.
    let nodes = |clouds: &Clouds| -> Vec<String> {
        let items = clouds.kube_get("/api/v1/nodes")["items"].as_array().cloned().unwrap_or_default();
        items.iter().filter_map(|n| n["metadata"]["name"].as_str().map(String::from)).collect()
    };
    let deleted = timing.capi_reconciles();
    let deadline = deleted.deadline();
    while nodes(&clouds).contains(&victim) {
        assert!(
            Instant::now() < deadline,
            "the replaced machine's Node {victim} stays past {deleted}: {:?}",
            nodes(&clouds)
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // Scaled down by one, as a person would (`oc scale`): the machine goes, and its Node with it,
    // so no NotReady Node is left to count against the pool's MachineConfigPool.
    let sets = clouds.kube_get("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machinesets");
    let set = sets["items"][0]["metadata"]["name"].as_str().expect("a MachineSet").to_string();
    let scale = serde_json::json!({"spec": {"replicas": 0}});
    clouds.kube_request(
        "PATCH",
        &format!("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machinesets/{set}"),
        Some(("application/merge-patch+json", &scale.to_string())),
    );
    let scaled = timing.capi_reconciles().then(&timing.capz_reports()).then(&timing.capi_reconciles());
    let deadline = scaled.deadline();
    while nodes(&clouds).len() > 1 {
        assert!(Instant::now() < deadline, "the scaled-away machine's Node stays past {scaled}: {:?}", nodes(&clouds));
        std::thread::sleep(Duration::from_millis(250));
    }
    joined(&clouds, 1);

    // A change for every worker (an admin's MachineConfig, as an upgrade or a pull-secret change
    // makes one) reaches the pool's remaining Node: no leftover Node holds the pool's
    // `maxUnavailable` (the machine-config operator's node controller counts a NotReady Node
    // against it, `pkg/controller/node/node_controller.go` `getAllCandidateMachines`).
    let pool_path = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/xcsp-il5-gpu-gpu";
    let before = clouds.kube_get(pool_path)["status"]["configuration"]["name"].clone();
    let extra = serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-motd", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/motd", "mode": 420,
            "contents": {"source": "data:,managed%20by%20the%20cluster"}}]}}},
    });
    clouds.kube_request(
        "POST",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
        Some(("application/json", &extra.to_string())),
    );
    let rollout = timing.machine_config_rollout(1);
    let deadline = rollout.deadline();
    let pool = loop {
        let pool = clouds.kube_get(pool_path);
        let status = &pool["status"];
        let updated = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Updated" && c["status"] == "True");
        if status["configuration"]["name"] != before && updated {
            break pool;
        }
        assert!(Instant::now() < deadline, "the pool's new config never rolled out within {rollout}: {status}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(pool["status"]["machineCount"], 1, "{}", pool["status"]);
    assert_eq!(pool["status"]["updatedMachineCount"], 1, "{}", pool["status"]);
    let node = clouds.kube_get(&format!("/api/v1/nodes/{}", nodes(&clouds)[0]));
    assert_eq!(
        node["metadata"]["annotations"]["machineconfiguration.openshift.io/currentConfig"],
        pool["status"]["configuration"]["name"],
        "{node}"
    );

    // A Node of the pool that no Machine carries (its VM removed while the Cluster had no control
    // plane to let CAPI delete Nodes, as before XcspControlPlane): nothing on an AWS cluster
    // deletes it, and, never Ready, it holds the pool's next MachineConfig. Status names it with
    // its remedy and is not healthy until it goes.
    let leftover = serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-left-behind", "labels": {"xcsp.io/pool": "il5-gpu-x7k2p-gpu"}},
        "spec": {"providerID": "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/gone/providers/Microsoft.Compute/virtualMachines/gpu-left-behind"},
    });
    clouds.kube_request("POST", "/api/v1/nodes", Some(("application/json", &leftover.to_string())));
    // (Its exit is 2 either way here: state still asks for the two machines the scale-down took
    // one of; `health::tests` hold a leftover Node against readiness.)
    let said = text_of(&clouds.xcsp(state).arg("status").arg(il5()).output().unwrap());
    assert!(said.contains("Node gpu-left-behind: MachineOwned=False (NoMachine)"), "{said}");
    assert!(said.contains("oc delete node gpu-left-behind"), "{said}");
    clouds.kube_request("DELETE", "/api/v1/nodes/gpu-left-behind", None);
    let said = text_of(&clouds.xcsp(state).arg("status").arg(il5()).output().unwrap());
    assert!(!said.contains("gpu-left-behind"), "{said}");
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
}

/// `xcsp watch --interval 1s --auto-approve` of the IL5 example, its output in a file.
struct Watch {
    child: Child,
    log: tempfile::NamedTempFile,
}

impl Watch {
    fn start(clouds: &Clouds, state: &Path) -> Watch {
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = clouds
            .xcsp(state)
            .args(["watch", "--interval", "1s", "--auto-approve"])
            .arg(il5())
            .stdout(log.reopen().unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Watch { child, log }
    }

    /// What it printed so far.
    fn said(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Waits until it prints `what` after byte `from` of its output.
    fn wait_for(&self, what: &str, from: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.said()[from..].contains(what) {
            assert!(Instant::now() < deadline, "no `{what}` in: {}", self.said());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Ctrl-C: it ends between cycles with exit 0; answers all it said.
    fn interrupt(mut self) -> String {
        let status = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
        assert_eq!(self.child.wait().unwrap().code(), Some(0), "{}", self.said());
        self.said()
    }
}

/// Deletes the IL5 pool's Machine `victim` as a person would; answers the machines the sim
/// holds at `step` of the boot (past CAPZ's VM) once one is (asserting it is the only one, and
/// not `victim`). A step the world decides from the VM CAPZ made, so it is reached once the
/// replacement would have joined.
fn replaced_and_held(clouds: &Clouds, victim: &str, step: &str) -> Vec<serde_json::Value> {
    clouds.delete_machine(victim);
    let bound = clouds.timing().machine_joins();
    let deadline = bound.deadline();
    let held = loop {
        let all = clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
        // The victim itself, while it goes, is no replacement.
        let held: Vec<serde_json::Value> =
            all.iter().filter(|m| m["held_at"] == step && m["name"] != victim).cloned().collect();
        if !held.is_empty() {
            break held;
        }
        assert!(Instant::now() < deadline, "no replacement held at {step} within {bound}: {all:#?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(held.len(), 1, "{held:#?}");
    assert_ne!(held[0]["name"], victim);
    held
}

/// Drift that used to hide behind "No changes": one security-group rule revoked, propagation
/// turned off on one route table, the Azure gateway left `Failed`, a connection's shared key
/// changed. Each is read back member by
/// member, shown attribute by attribute, and one apply repairs them all.
#[test]
fn a_revoked_rule_a_table_without_propagation_and_a_failed_gateway_are_drift_that_apply_repairs() {
    let (clouds, dir) = applied();
    let state = dir.path();
    let recorded = recorded(state);
    let r = &recorded["resources"];
    let group = r["aws_security_group_ingress.link"]["attributes"]["security_group_ids"][0].as_str().unwrap();
    let table = r["aws_vpn_gateway_route_propagation.link"]["attributes"]["route_table_ids"][0].as_str().unwrap();
    let vgw = r["aws_vpn_gateway.link"]["id"].as_str().unwrap();
    let gateway = r["azure_virtual_network_gateway.link"]["id"].as_str().unwrap();
    let marked = |clouds: &Clouds| clouds.marked_rules("il5-gpu", "aws_security_group_ingress.link");
    let complete = marked(&clouds);
    assert!(complete >= 18, "9 rules in each cluster group: {complete}");

    clouds.revoke_machine_config_rule(group);
    assert_eq!(marked(&clouds), complete - 1);
    let disabled = clouds.ec2_with("DisableVgwRoutePropagation", &[("GatewayId", vgw), ("RouteTableId", table)]);
    assert!(disabled.contains("true"), "{disabled}");
    clouds.patch_resource(gateway, &serde_json::json!({ "properties": { "provisioningState": "Failed" } }));
    let connection = r["azure_virtual_network_gateway_connection.link[1]"]["id"].as_str().unwrap();
    let put = clouds.arm_put(&format!("{connection}/sharedkey"), &serde_json::json!({ "value": "changedByHand1" }));
    assert!(put.contains("changedByHand1"), "{put}");

    // One tunnel's inside range changed by hand on the AWS side.
    let aws = &r["aws_vpn_connection.link[1]"];
    let was = aws["attributes"]["tunnel1_inside_cidr"].as_str().unwrap().to_string();
    let modified = clouds.ec2_with(
        "ModifyVpnTunnelOptions",
        &[
            ("VpnConnectionId", aws["id"].as_str().unwrap()),
            ("VpnTunnelOutsideIpAddress", aws["attributes"]["tunnel1_address"].as_str().unwrap()),
            ("TunnelOptions.TunnelInsideCidr", "169.254.30.0/30"),
        ],
    );
    assert!(modified.contains("vpnConnectionId"), "{modified}");

    let plan = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    let said = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert_eq!(plan.status.code(), Some(2), "{said}");
    assert!(said.contains(&format!("~ tunnel1_inside_cidr = \"169.254.30.0/30\" -> \"{was}\"")), "{said}");
    assert!(said.contains("aws_security_group_ingress.link will be updated in place"), "{said}");
    assert!(said.contains("~ rules = ["), "{said}");
    assert!(said.contains("~ every_route_table = false -> true"), "{said}");
    assert!(said.contains("~ provisioning_state = \"Failed\" -> \"Succeeded\""), "{said}");
    assert!(said.contains("~ shared_key = (sensitive value) -> (sensitive value)"), "{said}");
    assert!(!said.contains("changedByHand1"), "a key in the plan: {said}");
    assert!(!said.contains("will be created") && !said.contains("must be replaced"), "{said}");

    let modifies = clouds.ec2_calls("ModifyVpnTunnelOptions");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.ec2_calls("ModifyVpnTunnelOptions") - modifies, 1, "the one tunnel's range is sent back");
    assert_eq!(marked(&clouds), complete, "every rule back, none twice");
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    assert_eq!(tunnels_up(&clouds, state), 4);
    ok(&clouds.xcsp(state).args(["destroy", "--auto-approve"]).arg(il5()).output().unwrap());
}

/// Refresh finds what state records by its id, whatever its tags say: a customer gateway whose
/// stack tag was removed and a VNet whose tags were replaced are tag updates, never creates (a
/// create would have replaced the VPN connection, and an ARM PUT of the VNet without its subnets
/// would be refused), and destroy --sweep still removes the untagged gateway.
#[test]
fn resources_whose_tags_were_removed_are_found_by_id_and_retagged() {
    let (clouds, dir) = applied();
    let state = dir.path();
    let recorded = recorded(state);
    let cgw = recorded["resources"]["aws_customer_gateway.link[0]"]["id"].as_str().unwrap().to_string();
    let vnet = recorded["resources"]["azure_virtual_network.link"]["id"].as_str().unwrap().to_string();
    let untag = |clouds: &Clouds| {
        let r = clouds.ec2_with("DeleteTags", &[("ResourceId.1", &cgw), ("Tag.1.Key", "xcsp.io/stack")]);
        assert!(r.contains("true"), "{r}");
        clouds
            .patch_resource(&vnet, &serde_json::json!({ "tags": { "xcsp.io_stack": null, "xcsp.io_address": null } }));
    };
    untag(&clouds);

    let plan = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    let said = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert_eq!(plan.status.code(), Some(2), "{said}");
    assert!(said.contains("aws_customer_gateway.link[0] will be updated in place"), "{said}");
    assert!(said.contains("azure_virtual_network.link will be updated in place"), "{said}");
    assert!(!said.contains("will be created") && !said.contains("must be replaced"), "{said}");
    assert!(said.contains("Plan: 0 to add, 2 to change, 0 to replace, 0 to destroy."), "{said}");

    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    assert_eq!(clouds.aws_live(), (1, 2, 2), "no twin");

    untag(&clouds);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    assert_eq!(clouds.arm_count(), 0, "{:?}", clouds.arm_resources());
}

impl Clouds {
    /// Cuts the path of every tunnel (a fault of the sim's), as a link that is down.
    fn cut_every_tunnel(&self) {
        let all: Vec<String> = self.get("/_sim/tunnels")["tunnels"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["outside_ip"].as_str().map(String::from))
            .collect();
        self.configure(&serde_json::json!({"faults": {"cut_tunnels": all}}));
    }

    /// Merges `patch` into the sim's configuration (faults, throttling, ...).
    fn configure(&self, patch: &serde_json::Value) {
        let out = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", "-X", "PATCH", "-H", "Content-Type: application/json"])
            .args(["--data", &patch.to_string(), &format!("{}/_sim/config", self.url)])
            .status()
            .expect("curl");
        assert!(out.success(), "configure {patch}");
    }

    /// Clears the lock a killed run left, as an operator would: `force-unlock` with its id.
    fn force_unlock(&self, state: &Path) {
        let lock = std::fs::read_to_string(state.join("state.lock")).unwrap();
        let id = serde_json::from_str::<serde_json::Value>(&lock).unwrap()["id"].as_str().unwrap().to_string();
        ok(&self.xcsp(state).args(["force-unlock", &id]).arg(il5()).output().unwrap());
    }

    /// Revokes, out of band, the rule that lets the Azure network reach the machine-config server.
    fn revoke_machine_config_rule(&self, group: &str) {
        let revoked = self.ec2_with(
            "RevokeSecurityGroupIngress",
            &[
                ("GroupId", group),
                ("IpPermissions.1.IpProtocol", "tcp"),
                ("IpPermissions.1.FromPort", "22623"),
                ("IpPermissions.1.ToPort", "22623"),
                ("IpPermissions.1.IpRanges.1.CidrIp", "10.200.0.0/16"),
            ],
        );
        assert!(revoked.contains("true"), "{revoked}");
    }

    /// Requests the EC2 layer has seen for `action`.
    fn ec2_calls(&self, action: &str) -> u64 {
        self.get("/_sim/aws/counters")["requests"][action].as_u64().unwrap_or(0)
    }

    /// Rules marked as one resource's, counted in every security group EC2 lists.
    fn marked_rules(&self, stack: &str, address: &str) -> usize {
        self.ec2("DescribeSecurityGroups").matches(&format!("[xcsp {stack} {address}]")).count()
    }

    /// Every rule xcsp marked as the stack's: the link's in the cluster groups, and those of the
    /// DNS endpoint's own group (their `AuthorizeSecurityGroupIngress` calls interleave).
    fn all_marked_rules(&self) -> usize {
        self.marked_rules("il5-gpu", "aws_security_group_ingress.link")
            + self.marked_rules("il5-gpu", "aws_security_group.link")
    }

    /// Route tables EC2 lists as propagating `vgw`.
    fn propagating(&self, vgw: &str) -> usize {
        let text = self.ec2("DescribeRouteTables");
        text.split("<propagatingVgwSet>")
            .skip(1)
            .filter(|s| s.split("</propagatingVgwSet>").next().unwrap_or_default().contains(&format!(">{vgw}<")))
            .count()
    }
}

/// The sim's machines once `n` of them have joined (their Node registered and matched), or as
/// they are by the time a new machine joins ([`Timing::machine_joins`]).
fn joined(clouds: &Clouds, n: usize) -> Vec<serde_json::Value> {
    let bound = clouds.timing().machine_joins();
    let deadline = bound.deadline();
    loop {
        let held = clouds.get("/_sim/machines")["machines"].as_array().cloned().unwrap_or_default();
        if held.iter().filter(|m| m["held_at"] == "joined").count() >= n || Instant::now() > deadline {
            assert_eq!(held.iter().filter(|m| m["held_at"] == "joined").count(), n, "within {bound}: {held:#?}");
            return held;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A refresh of the il5 state then `plan --detailed-exitcode`: (exit code, what it said).
fn plan(clouds: &Clouds, state: &Path) -> (Option<i32>, String) {
    plan_of(clouds, state, &il5())
}

/// `plan --detailed-exitcode` of `spec`: (exit code, what it said).
fn plan_of(clouds: &Clouds, state: &Path, spec: &Path) -> (Option<i32>, String) {
    let out = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(spec).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The ARM resources a state records: its Azure ones but the VNet's DNS servers (a property of
/// the VNet).
fn arm_in_state(state: &serde_json::Value) -> usize {
    let azure = state["resources"].as_object().unwrap().keys().filter(|a| a.starts_with("azure_"));
    azure.filter(|a| !a.starts_with("azure_virtual_network_dns_servers.")).count()
}

/// Security-group rules state wants: every rule in every cluster group.
fn rules_wanted(state: &Path) -> usize {
    let r = recorded(state);
    let ingress = &r["resources"]["aws_security_group_ingress.link"]["attributes"];
    ingress["security_group_ids"].as_array().unwrap().len() * ingress["rules"].as_array().unwrap().len()
}

/// The stack is whole: plan clean, every member once in the cloud (counted by listing, so a twin
/// shows), four tunnels up.
fn assert_whole(clouds: &Clouds, state: &Path) {
    let (code, said) = plan(clouds, state);
    assert_eq!(code, Some(0), "{said}");
    let r = recorded(state);
    let r = &r["resources"];
    assert_eq!(clouds.marked_rules("il5-gpu", "aws_security_group_ingress.link"), rules_wanted(state));
    assert_eq!(clouds.marked_rules("il5-gpu", "aws_security_group.link"), 2, "DNS over TCP and UDP");
    let endpoints = clouds.get("/_sim/resolvers")["resolvers"].as_array().map_or(0, Vec::len);
    assert_eq!(endpoints, 1, "no twin Route 53 Resolver endpoint");
    let vgw = r["aws_vpn_gateway.link"]["id"].as_str().unwrap();
    let tables = r["aws_vpn_gateway_route_propagation.link"]["attributes"]["route_table_ids"].as_array().unwrap().len();
    assert_eq!(clouds.propagating(vgw), tables);
    assert_eq!(clouds.aws_live(), (1, 2, 2), "no twin in EC2");
    let azure = arm_in_state(&recorded(state));
    assert_eq!(clouds.arm_xcsp_count(), azure, "no twin in ARM: {:#?}", clouds.arm_resources());
    assert_eq!(tunnels_up(clouds, state), 4);
}

/// A 5xx part-way through two multi-call resources (after 3 security-group rules, after 1 route
/// table's propagation) and the Azure gateway's create ending `Failed`, all in one apply: the next
/// plan shows each (not "No changes"), the next apply completes them, nothing twice.
#[test]
fn rules_and_propagations_cut_short_by_server_errors_and_a_failed_gateway_are_completed_by_the_next_apply() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    clouds.configure(&serde_json::json!({ "faults": {
        "aws_fail_actions": [
            { "action": "AuthorizeSecurityGroupIngress", "after": 3 },
            { "action": "EnableVgwRoutePropagation", "after": 1 }
        ],
        "fail_lros": [{ "resource_type": "virtualNetworkGateways", "count": 1 }]
    }}));
    let failed = clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap();
    let said = String::from_utf8_lossy(&failed.stderr).into_owned() + &String::from_utf8_lossy(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{said}");
    assert_eq!(clouds.all_marked_rules(), 3, "3 rules, then 500s");
    let vgw = clouds.ec2("DescribeVpnGateways");
    let vgw = vgw.split("<vpnGatewayId>").nth(1).and_then(|s| s.split('<').next()).expect("a gateway").to_string();
    assert_eq!(clouds.propagating(&vgw), 1, "1 table, then 500s");
    let gateway = clouds.get("/_sim/resources")["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "Microsoft.Network/virtualNetworkGateways")
        .map(|r| r["body"]["properties"]["provisioningState"].clone());
    assert_eq!(gateway, Some(serde_json::json!("Failed")), "the gateway's create ended Failed");

    clouds.configure(&serde_json::json!({ "faults": { "aws_fail_actions": [] } }));
    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(!said.contains("No changes"), "{said}");
    for address in [
        "aws_security_group_ingress.link",
        "aws_vpn_gateway_route_propagation.link",
        "azure_virtual_network_gateway.link",
    ] {
        assert!(said.lines().any(|l| l.contains(&format!(" {address} will be"))), "{address} in the plan: {said}");
    }
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_whole(&clouds, state);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    assert_eq!(clouds.arm_count(), 0, "{:?}", clouds.arm_resources());
}

/// SIGKILL while the client retries the 6th security-group rule: state holds what the killed run
/// recorded, the next plan shows the rules as a change, and the next apply adds just the missing
/// ones.
#[test]
fn apply_killed_part_way_through_the_rules_is_completed_by_the_next_apply() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    clouds.configure(
        &serde_json::json!({ "faults": { "aws_fail_actions": [{ "action": "AuthorizeSecurityGroupIngress", "after": 5 }] } }),
    );
    let mut child = clouds
        .xcsp(state)
        .args(["apply", "--auto-approve"])
        .arg(il5())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while clouds.ec2_calls("AuthorizeSecurityGroupIngress") < 6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(clouds.ec2_calls("AuthorizeSecurityGroupIngress") >= 6, "the 6th rule was tried before the kill");
    assert_eq!(clouds.all_marked_rules(), 5);
    clouds.configure(&serde_json::json!({ "faults": { "aws_fail_actions": [] } }));
    clouds.force_unlock(state);

    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("~ aws_security_group_ingress.link will be updated in place"), "{said}");
    let before = clouds.ec2_calls("AuthorizeSecurityGroupIngress");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_whole(&clouds, state);
    assert!(
        // The cluster groups' rules and the DNS group's two, less the five there.
        clouds.ec2_calls("AuthorizeSecurityGroupIngress") - before <= (rules_wanted(state) + 2 - 5) as u64,
        "only the missing rules are sent"
    );
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
}

/// A VPN connection deleted out of band (the seeds' recovery case): plan shows it created again
/// and, with it, every resource that takes its tunnels' addresses; apply does what plan showed and
/// the link comes back.
#[test]
fn a_vpn_connection_deleted_out_of_band_is_created_again_with_what_depends_on_it_shown() {
    let (clouds, dir) = applied();
    let state = dir.path();
    let r = recorded(state);
    let conn = r["resources"]["aws_vpn_connection.link[0]"]["id"].as_str().unwrap().to_string();
    let deleted = clouds.ec2_with("DeleteVpnConnection", &[("VpnConnectionId", &conn)]);
    assert!(deleted.contains("true"), "{deleted}");

    let (code, said) = plan(&clouds, state);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("+ aws_vpn_connection.link[0] will be created"), "{said}");
    // The new connection's tunnels get new outside addresses; the two local network gateways that
    // point at them change with it, and the plan says so (apply refuses to do more than it showed).
    for lng in ["azure_local_network_gateway.link[0]", "azure_local_network_gateway.link[1]"] {
        let shown = said
            .split(&format!("~ {lng} will be updated in place\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("{lng}: {said}"));
        assert!(shown.starts_with("      gateway_ip_address = (known after apply)"), "{said}");
    }
    assert!(said.contains("Plan: 1 to add, 2 to change, 0 to replace, 0 to destroy."), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_whole(&clouds, state);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
}

#[test]
fn rotate_keys_one_tunnel_at_a_time_resumes_after_a_failure_and_a_kill_and_never_has_two_tunnels_down() {
    let (clouds, dir) = applied();
    let state = dir.path();
    assert_eq!(tunnels_up(&clouds, state), 4);
    let keys = |r: &serde_json::Value| -> Vec<String> {
        (0..4)
            .map(|i| {
                let value = &r["resources"][format!("xcsp_preshared_key.link[{i}]")]["attributes"]["value"];
                value["$sensitive"].as_str().unwrap_or_else(|| panic!("a sensitive key: {value}")).to_string()
            })
            .collect()
    };
    let before = keys(&recorded(state));
    // The sim's own verdicts, sampled all through the rotation: never fewer than 3 of 4 tunnels up.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (url, stop) = (clouds.url.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let out = Command::new("curl").args(["-sf", &format!("{url}/_sim/tunnels")]).output().unwrap();
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                let tunnels = v["tunnels"].as_array().unwrap();
                samples.push((tunnels.iter().filter(|t| t["up"] == true).count(), tunnels.len()));
                std::thread::sleep(Duration::from_millis(50));
            }
            samples
        })
    };
    // 1. The second key's AWS tunnel refuses its new key (every ModifyVpnTunnelOptions after the
    //    first fails): the rotation stops there, half-done, with the first key finished.
    clouds.configure(
        &serde_json::json!({"faults": {"aws_fail_actions": [{"action": "ModifyVpnTunnelOptions", "after": 1}]}}),
    );
    let out = clouds.xcsp(state).args(["rotate-keys", "--auto-approve", "--link", "link"]).arg(il5()).output().unwrap();
    let said = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("xcsp_preshared_key.link[0]: every tunnel of `link` up"), "{said}");
    assert!(said.contains("the rotation stopped at xcsp_preshared_key.link[1]"), "{said}");
    let first = keys(&recorded(state));
    assert!(first[0] != before[0] && first[1] != before[1] && first[2..] == before[2..], "keys 0 and 1 are new");
    let left = &recorded(state)["rotation"]["keys"];
    assert_eq!(left.as_array().map(Vec::len), Some(3), "state keeps what is left of the rotation: {left}");
    // Plan tells the truth: the tunnel still has the old key, and the rotation is under way.
    let out = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    let shown = text_of(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("aws_vpn_connection.link[0]") && shown.contains("resumes it"), "{shown}");
    // Another link's rotation waits for this one to finish.
    let out =
        clouds.xcsp(state).args(["rotate-keys", "--auto-approve", "--link", "other"]).arg(il5()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("xcsp::stack::rotation_under_way"), "{said}");
    // 2. The fault is gone; the rotation resumes and is killed (SIGKILL) once the third key is
    //    given to its tunnel.
    clouds.configure(&serde_json::json!({"faults": {"aws_fail_actions": []}}));
    let log = dir.path().join("rotate.log");
    let mut rotation = clouds
        .xcsp(state)
        .args(["rotate-keys", "--auto-approve"])
        .arg(il5())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !said().contains("xcsp_preshared_key.link[2]: new key given to") {
        assert!(Instant::now() < deadline && rotation.try_wait().unwrap().is_none(), "{}", said());
        std::thread::sleep(Duration::from_millis(20));
    }
    rotation.kill().unwrap();
    rotation.wait().unwrap();
    let resumed_once = said();
    assert!(resumed_once.contains("Resuming the rotation started"), "{resumed_once}");
    assert!(resumed_once.contains("xcsp_preshared_key.link[1] (already new"), "{resumed_once}");
    let killed = keys(&recorded(state));
    assert_eq!(killed[..2], first[..2], "a key already new is not replaced again");
    clouds.force_unlock(state);
    // 3. Run again: it finishes from where the kill left it.
    let said = ok(&clouds.xcsp(state).args(["rotate-keys", "--auto-approve"]).arg(il5()).output().unwrap());
    assert!(said.contains("Resuming the rotation started"), "{said}");
    assert!(said.contains("Rotated"), "{said}");
    let after = keys(&recorded(state));
    for i in 0..4 {
        assert_ne!(after[i], before[i], "key {i} is new");
        if killed[i] != before[i] {
            assert_eq!(after[i], killed[i], "key {i} was rotated once");
        }
    }
    assert!(recorded(state).get("rotation").is_none(), "the rotation is over");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let samples = sampler.join().unwrap();
    let fewest = samples.iter().map(|(up, _)| *up).min().unwrap();
    eprintln!("rotation: {} samples of the sim's tunnels, at least {fewest} of 4 up in each", samples.len());
    assert!(samples.len() > 20 && samples.iter().all(|(_, n)| *n == 4), "{samples:?}");
    assert!(fewest >= 3, "never two tunnels down at once: {samples:?}");
    assert!(samples.iter().any(|(up, _)| *up == 3), "the sampler saw tunnels go down: {samples:?}");
    let all = [said.as_str(), &resumed_once, &shown];
    assert!(
        after.iter().chain(&before).all(|k| k.len() == 32 && all.iter().all(|s| !s.contains(k.as_str()))),
        "no key in the output"
    );
    // Both clouds hold the new keys (the tunnels negotiate only with matching keys), and nothing is left to do.
    assert_eq!(tunnels_up(&clouds, state), 4);
    let out = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(il5()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
}

/// `xcsp watch --auto-approve`: outlives a lock another command holds and a cloud failing every
/// call (each cycle says why it did not finish, and the next tries again), names a cut tunnel,
/// repairs a VPN connection deleted out of band, and stops on Ctrl-C.
#[test]
fn watch_repairs_a_vpn_connection_deleted_out_of_band_and_stops_on_ctrl_c() {
    let (clouds, dir) = applied();
    let state = dir.path();
    let watch = Watch::start(&clouds, state);
    let said = || watch.said();
    // What the test allows one cycle (a refresh and plan of the IL5 stack against the world) to
    // report in.
    let cycle = Duration::from_secs(60);
    let wait_for = |what: &str, from: usize| watch.wait_for(what, from, cycle);
    wait_for("no drift", 0);
    // The lock held by another command: the cycle says who holds it, and the watch goes on.
    let from = said().len();
    // Taken between two of the watch's cycles: a cycle holds the lock while it runs and lets it go
    // for its `--interval` (1 s) before the next, so the lock is free within one cycle.
    let backend = xcsp_state::local::LocalBackend::new(state);
    let deadline = std::time::Instant::now() + cycle;
    let other = loop {
        match backend.lock("someone else", "apply") {
            Ok(guard) => break guard,
            Err(xcsp_state::StateError::Locked { operation, .. })
                if operation == "watch" && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("the lock, between the watch's cycles: {e}"),
        }
    };
    wait_for("this cycle did not finish", from);
    let cycle = said()[from..].to_string();
    assert!(cycle.contains("someone else") && cycle.contains("trying again"), "{cycle}");
    drop(other);
    let from = said().len();
    wait_for("no drift", from);
    // Resource Manager refusing every call (403, which no retry clears): the cycle says so, and
    // the watch outlives it.
    let from = said().len();
    clouds.configure(&serde_json::json!({"faults": {"error_rate": 1.0, "error_status": 403}}));
    wait_for("this cycle did not finish", from);
    clouds.configure(&serde_json::json!({"faults": {"error_rate": 0.0}}));
    let from = said().len();
    wait_for("no drift", from);
    // A tunnel whose path is cut: named with both clouds' view, and nothing to repair.
    let cut = clouds.get("/_sim/tunnels")["tunnels"][2]["outside_ip"].as_str().unwrap().to_string();
    let from = said().len();
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": [cut.clone()]}}));
    wait_for("no drift, nothing in the spec to change", from);
    let cycle = said()[from..].to_string();
    assert!(cycle.contains(&format!("({cut}): AWS DOWN (the path to {cut} is cut")), "{cycle}");
    assert!(cycle.contains("3 of 4 tunnels up") && !cycle.contains("repairing"), "{cycle}");
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": []}}));
    let from = said().len();
    wait_for("4 of 4 tunnels up; no drift", from);
    let conn = recorded(state)["resources"]["aws_vpn_connection.link[0]"]["id"].as_str().unwrap().to_string();
    let from = said().len();
    let deleted_at = Instant::now();
    assert!(clouds.ec2_with("DeleteVpnConnection", &[("VpnConnectionId", &conn)]).contains("true"));
    wait_for("repaired in", from);
    let repaired_after = deleted_at.elapsed();
    let cycle = &said()[from..];
    assert!(cycle.contains("repairing: a create aws_vpn_connection.link[0]"), "{cycle}");
    eprintln!(
        "watch: a deleted VPN connection was re-created {:.1} s after the deletion",
        repaired_after.as_secs_f64()
    );
    // Ctrl-C ends the watch between cycles, exit 0.
    let said = watch.interrupt();
    assert!(said.contains("stopped"), "{said}");
    assert_whole(&clouds, state);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
}

/// Stack names that would escape the state directory, smuggle terminal escapes or break a cloud's
/// name rules are refused by `apply` before any cloud is called: no request, no resource, no
/// state file anywhere.
#[test]
fn bad_stack_names_are_refused_before_any_cloud_call() {
    let clouds = Clouds::start();
    let long = "x".repeat(300);
    for name in ["../../x", "a/b", r"red\u001b[31m", r"nul\u0000", long.as_str()] {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let spec = il5_copy(dir.path(), |t| t.replace(r#"stack = "il5-gpu""#, &format!("stack = \"{name}\"")));
        let out = clouds.xcsp(&state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("xcsp::stack::name"), "{name}: {stderr}");
        assert!(!stderr.contains("\u{1b}[31m"), "{name}: an escape reached the terminal");
        let mut written = Vec::new();
        for entry in walk(dir.path()) {
            if entry.is_file() && !entry.ends_with("pool.xcsp.hcl") {
                written.push(entry);
            }
        }
        assert!(written.is_empty(), "{name}: {written:?}");
        assert!(!dir.path().parent().unwrap().join("x").exists(), "{name}: state outside its directory");
    }
    let calls = clouds.get("/_sim/aws/counters")["requests"].as_object().map_or(0, |m| m.len());
    assert_eq!(calls, 0, "no EC2 request");
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    assert_eq!(clouds.arm_count(), 0);
}

/// Every path under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// EC2's VPN creates take no idempotency token: when the answer to CreateVpnGateway or
/// CreateVpnConnection is lost (the connection drops after EC2 carried the call out), the SDK's
/// retry makes a second one. Apply keeps the one EC2 answered with and deletes the twin, an
/// attachment whose answer was lost counts as made, and nothing is left untracked (counted by
/// listing).
#[test]
fn answers_lost_after_ec2_created_something_leave_no_twin() {
    let clouds = Clouds::start();
    let lost = |action: &str| serde_json::json!({ "action": action, "times": 1, "lost": true });
    clouds.configure(&serde_json::json!({ "faults": { "aws_fail_actions": [
        lost("CreateVpnGateway"), lost("CreateVpnConnection"), lost("AttachVpnGateway"), lost("AuthorizeSecurityGroupIngress")
    ] } }));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.ec2_calls("CreateVpnGateway"), 2, "the lost answer was retried");
    assert!(clouds.ec2_calls("CreateVpnConnection") >= 3, "two connections, one retried");
    assert_whole(&clouds, state);
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(il5()).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
}

/// A saved plan is what apply carries out: drift that appeared after `plan --out` (a revoked
/// security-group rule) is not done under it; apply refuses that resource as BeyondPlan, and the
/// next plan shows the change.
#[test]
fn applying_a_saved_plan_does_not_do_what_it_did_not_show() {
    let (clouds, dir) = applied();
    let state = dir.path();
    // An edit the saved plan shows: a new tag on the Azure resources (the AWS side stays as it is).
    let spec = il5_copy(dir.path(), |t| {
        t.replacen(
            r#"tags            = { "cost-center" = "gpu-il5", owner = "platform" }"#,
            r#"tags            = { "cost-center" = "gpu-il5", owner = "platform", team = "gpu" }"#,
            1,
        )
    });
    let saved = dir.path().join("tags.plan");
    let planned = clouds.xcsp(state).args(["plan", "--out"]).arg(&saved).arg(&spec).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let r = recorded(state);
    let group = r["resources"]["aws_security_group_ingress.link"]["attributes"]["security_group_ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    clouds.revoke_machine_config_rule(&group);
    let before = clouds.ec2_calls("AuthorizeSecurityGroupIngress");
    let out = clouds.xcsp(state).args(["apply", "--auto-approve", "--plan"]).arg(&saved).arg(&spec).output().unwrap();
    let said = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("aws_security_group_ingress.link") && said.contains("BeyondPlan"), "{said}");
    assert_eq!(clouds.ec2_calls("AuthorizeSecurityGroupIngress"), before, "nothing the saved plan did not show");
    let (code, said) = plan_of(&clouds, state, &spec);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("~ aws_security_group_ingress.link will be updated in place"), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(&spec).output().unwrap());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
}

/// What Azure would refuse the pool's VMs is refused at plan, read from the subscription itself
/// (Resource SKUs, usages and Marketplace images through the Azure SDK): the IL5 size withheld
/// from one of the pool's zones, a family quota below the two machines' 192 vCPUs, and an image
/// the location does not carry, each named with the size, zone, quota or image; nothing is
/// planned. With the offer as it was, the plan goes through.
#[test]
fn a_zone_without_the_size_and_a_quota_below_the_replicas_are_plan_errors() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // Online: the cluster and the subscription are read (the example's issuer is not reachable
    // from here, which is a warning).
    let plan = |clouds: &Clouds| {
        let out = clouds.xcsp(state).env_remove("XCSP_OFFLINE").args(["plan"]).arg(il5()).output().unwrap();
        (out.status.code(), text_of(&out))
    };
    let (code, said) = plan(&clouds);
    assert_eq!(code, Some(0), "{said}");
    clouds.configure(&serde_json::json!({"compute": {
        "zones": {"usgovvirginia/Standard_ND96asr_v4": ["1", "3"]},
        "family_vcpus": {"standardNDASv4_A100Family": 100}}}));
    let (code, said) = plan(&clouds);
    assert_eq!(code, Some(1), "{said}");
    assert!(!said.contains("will be created"), "nothing is planned: {said}");
    let words = said.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("xcsp::azure::zone")
            && words.contains("`Standard_ND96asr_v4` is not offered in zone 2 of `usgovvirginia`"),
        "{said}"
    );
    assert!(words.contains("zones it is offered in: 1, 3"), "{said}");
    assert!(
        words.contains("xcsp::azure::quota") && words.contains("adds 192 vCPUs of quota `standardNDASv4_A100Family`"),
        "{said}"
    );
    assert!(words.contains("limit is 100 with 0 in use") && words.contains("at least 192"), "{said}");
    // An image the location does not carry (another offer than the cluster's, so preflight
    // leaves it to the spec): named, nothing planned.
    let spec = il5_copy(dir.path(), |t| {
        t.replace(r#"publisher = "azureopenshift""#, r#"publisher = "redhat""#)
            .replace(r#"offer     = "aro4""#, r#"offer     = "rh-ocp-worker""#)
            .replace(r#"sku       = "422-v2""#, r#"sku       = "rh-ocp-worker""#)
    });
    let out = clouds.xcsp(state).env_remove("XCSP_OFFLINE").args(["plan"]).arg(&spec).output().unwrap();
    let said = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let words = said.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("xcsp::azure::image")
            && words.contains("`redhat:rh-ocp-worker:rh-ocp-worker` is not in the Marketplace of `usgovvirginia`"),
        "{said}"
    );
    // A merge patch: null takes the entries out.
    clouds.configure(&serde_json::json!({"compute": {
        "zones": {"usgovvirginia/Standard_ND96asr_v4": null},
        "family_vcpus": {"standardNDASv4_A100Family": null}}}));
    let (code, said) = plan(&clouds);
    assert_eq!(code, Some(0), "{said}");
}

/// `xcsp controller run` as a process, as the service account the rendered manifests install
/// (so the manifests' RBAC is what every call of the stack runs under), logging to a file.
struct Controller {
    child: Child,
    log: tempfile::NamedTempFile,
}

impl Controller {
    fn said(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Where it serves its metrics, as its log says (it binds port 0: no port race with the
    /// world's programs).
    fn metrics(&self) -> String {
        let said = self.said();
        let at = said.split("metrics on ").nth(1).unwrap_or_else(|| panic!("no metrics address: {said}"));
        at.chars().take_while(|c| c.is_ascii_alphanumeric() || ":/.".contains(*c)).collect()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Clouds {
    /// Installs what `xcsp controller manifests` renders (all but the volume and the Deployment:
    /// the world runs no Pods of its own) and answers a kubeconfig holding a token of its service
    /// account.
    fn install_controller(&self) -> PathBuf {
        let out = Command::new(bin("xcsp")).args(["controller", "manifests"]).output().unwrap();
        let manifests = ok(&out);
        let kept: String = manifests
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .filter(|d| !d.contains("kind: Deployment") && !d.contains("kind: PersistentVolumeClaim"))
            .map(|d| format!("---\n{d}"))
            .collect();
        let file = self._dir.path().join("controller.yaml");
        std::fs::write(&file, kept).unwrap();
        let applied = self.kubectl(&["apply", "-f", file.to_str().unwrap()]);
        assert!(applied["items"].as_array().is_some_and(|i| i.len() == 7), "{applied}");
        // The API server serves the CRD once it is Established.
        let establishing = Bound::on_event("the API server's establishing controller");
        let deadline = establishing.deadline();
        loop {
            let crd = self.kubectl(&["get", "crd", "xcspstacks.xcsp.io"]);
            let established = crd["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
            if established {
                break;
            }
            assert!(Instant::now() < deadline, "the CRD is not Established within {establishing}: {crd}");
            std::thread::sleep(Duration::from_millis(200));
        }
        let bin = PathBuf::from(std::env::var_os("XCSP_UPSTREAM_BIN").unwrap()).join("kubectl");
        let token = Command::new(bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["create", "token", "xcsp-controller", "-n", "xcsp-system", "--duration", "2h"])
            .output()
            .unwrap();
        let token = ok(&token).trim().to_string();
        let admin = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let mine: String = admin
            .lines()
            .map(|l| match l.split_once("token:") {
                Some((indent, _)) => format!("{indent}token: {token}\n"),
                None => format!("{l}\n"),
            })
            .collect();
        assert!(mine.contains(&token) && mine != admin);
        let path = self._dir.path().join("controller.kubeconfig");
        std::fs::write(&path, mine).unwrap();
        path
    }

    /// A controller replica named `identity`, its state in each resource's namespace (the
    /// `kubernetes` backend).
    fn start_controller(&self, kubeconfig: &Path, identity: &str) -> Controller {
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = self
            .xcsp(self._dir.path())
            .env("KUBECONFIG", kubeconfig)
            .env_remove("XCSP_STATE_DIR")
            .args(["controller", "run"])
            .args(["--metrics-addr", "127.0.0.1:0", "--lease-namespace", "xcsp-system"])
            .args(["--identity", identity])
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        Controller { child, log }
    }

    /// The resource, as the API server holds it.
    fn xstack(&self) -> serde_json::Value {
        self.kube_get("/apis/xcsp.io/v1alpha1/namespaces/gpu/xcspstacks/il5")
    }

    /// Waits until the resource's condition `kind` has `status`; answers the resource.
    fn xstack_until(&self, controller: &Controller, kind: &str, status: &str, within: Duration) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let o = self.xstack();
            let found = o["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == kind).cloned())
                .unwrap_or_default();
            if found["status"] == status {
                return o;
            }
            assert!(
                Instant::now() < deadline,
                "no {kind}={status} within {within:?}: {}\ncontroller said:\n{}",
                serde_json::to_string_pretty(&o["status"]).unwrap(),
                controller.said()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `xcsp` on the stack the controller keeps: its state in namespace `gpu` of the cluster.
    fn xcsp_in_cluster(&self) -> Command {
        let mut c = self.xcsp(self._dir.path());
        c.env_remove("XCSP_STATE_DIR").env("XCSP_BACKEND", "kubernetes").env("XCSP_BACKEND_NAMESPACE", "gpu");
        c
    }

    /// The state the controller keeps, as `xcsp state pull` prints it.
    fn recorded_in_cluster(&self) -> serde_json::Value {
        // The controller takes the lock each reconcile: this waits its turn.
        let out = self.xcsp_in_cluster().args(["state", "pull", "--lock-timeout", "2m"]).arg(il5()).output().unwrap();
        ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn patch_xstack(&self, patch: &serde_json::Value) {
        let patched = self.kube_request(
            "PATCH",
            "/apis/xcsp.io/v1alpha1/namespaces/gpu/xcspstacks/il5",
            Some(("application/merge-patch+json", &patch.to_string())),
        );
        assert!(patched["spec"].is_object(), "{patched}");
    }
}

/// The controller on the world's real API server, running as its service account under the
/// manifests' RBAC, its state in the resource's namespace: the IL5 example in an XcspStack reaches
/// Nodes Ready; its conditions are what `xcsp status --json` says on that state; the CLI is
/// refused while the controller holds the stack's lock; a
/// cut tunnel shows in the conditions, and a deleted VPN connection is restored by the Repair
/// policy; deleting the resource with `onDelete: Destroy` leaves nothing in either cloud.
#[test]
fn the_controller_reconciles_a_stack_resource_to_ready_nodes_repairs_it_and_destroys_it_on_delete() {
    let clouds = Clouds::start();
    let kubeconfig = clouds.install_controller();
    let source = std::fs::read_to_string(il5().join("pool.xcsp.hcl")).unwrap();
    clouds.kube_request("POST", "/api/v1/namespaces", Some(("application/json", r#"{"metadata":{"name":"gpu"}}"#)));
    let resource = serde_json::json!({
        "apiVersion": "xcsp.io/v1alpha1", "kind": "XcspStack", "metadata": { "name": "il5", "namespace": "gpu" },
        "spec": { "source": source, "policy": "Apply", "interval": "3s", "onDelete": "Destroy" },
    });
    let made = clouds.kube_request(
        "POST",
        "/apis/xcsp.io/v1alpha1/namespaces/gpu/xcspstacks",
        Some(("application/json", &resource.to_string())),
    );
    assert_eq!(made["metadata"]["name"], "il5", "{made}");
    let started = Instant::now();
    let controller = clouds.start_controller(&kubeconfig, "controller-e2e");

    // While the first apply runs, the command line is refused the stack's lock (a Lease in the
    // resource's namespace), naming who holds it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let refused = loop {
        if clouds.kube_get("/apis/coordination.k8s.io/v1/namespaces/gpu/leases/xcsp-lock-il5-gpu").is_object() {
            let out = clouds.xcsp_in_cluster().args(["apply", "--auto-approve"]).arg(il5()).output().unwrap();
            if !out.status.success() {
                break text_of(&out);
            }
        }
        assert!(Instant::now() < deadline, "the controller took no lock: {}", controller.said());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(refused.contains("controller-e2e (gpu/il5)") && refused.contains("apply"), "{refused}");

    let o = clouds.xstack_until(&controller, "Ready", "True", Duration::from_secs(600));
    eprintln!("controller: from its start to Ready (Nodes Ready) {:.1} s", started.elapsed().as_secs_f64());
    let status = &o["status"];
    assert_eq!(status["observedGeneration"], o["metadata"]["generation"], "{status}");
    assert_eq!(status["tunnels"], "4/4", "{status}");
    let conditions = status["conditions"].as_array().unwrap();
    let condition = |t: &str| conditions.iter().find(|c| c["type"] == t).cloned().unwrap_or_default();
    assert_eq!(condition("Reconciled")["status"], "True", "{status}");
    assert_eq!(condition("Link.link.TunnelEstablished")["status"], "True", "{status}");
    let machines: Vec<&serde_json::Value> =
        conditions.iter().filter(|c| c["type"].as_str().is_some_and(|t| t.starts_with("Machine."))).collect();
    assert!(!machines.is_empty() && machines.iter().all(|c| c["status"] == "True"), "{status}");
    // The same conditions as `xcsp status --json` on the same state.
    let out = clouds.xcsp_in_cluster().args(["status", "--json"]).arg(il5()).output().unwrap();
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text_of(&out)));
    assert_eq!(out.status.code(), Some(0), "{cli}");
    for group in ["links", "identities", "pools"] {
        assert_eq!(status["health"][group], cli[group], "{group}");
    }
    let causes = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        v["machines"].as_array().unwrap().iter().map(|m| serde_json::json!([m["name"], m["cause"]])).collect()
    };
    assert_eq!(causes(&status["health"]), causes(&cli));
    // Its Events and metrics say the same.
    let events = clouds.kubectl(&["get", "events.events.k8s.io", "-n", "gpu"]);
    assert!(
        events["items"].as_array().unwrap().iter().any(|e| e["reason"] == "Applied" && e["regarding"]["name"] == "il5"),
        "{events}"
    );
    let metrics = Command::new("curl").args(["-sf", &controller.metrics()]).output().unwrap();
    let metrics = ok(&metrics);
    assert!(metrics.contains(r#"xcsp_tunnels_up{namespace="gpu",name="il5"} 4"#), "{metrics}");
    let nodes = machines.len();
    assert!(metrics.contains(&format!(r#"xcsp_nodes_ready{{namespace="gpu",name="il5"}} {nodes}"#)), "{metrics}");

    // A new machine while no xcsp command runs (a deleted Machine's replacement, as a
    // remediation or a scale-up makes one): its Node registers with the cloud provider's
    // uninitialized taint, which nothing on an AWS cluster lifts from an azure:// Node; the
    // controller does (no command line runs, and no stand-in of the world lifts it), and the Node
    // is schedulable with the pool's own taints.
    let before: Vec<String> = joined(&clouds, nodes).iter().map(|m| m["name"].as_str().unwrap().to_string()).collect();
    clouds.delete_machine(&before[0]);
    let bound = clouds.timing().machine_joins().then(&clouds.timing().capi_reconciles());
    let deadline = bound.deadline();
    let fresh = loop {
        let items = clouds.kube_get("/api/v1/nodes")["items"].as_array().cloned().unwrap_or_default();
        let fresh: Vec<serde_json::Value> = items
            .into_iter()
            .filter(|n| !before.iter().any(|b| n["metadata"]["name"] == b.as_str()))
            .filter(|n| {
                let ready = n["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                let uninitialized = n["spec"]["taints"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["key"] == "node.cloudprovider.kubernetes.io/uninitialized");
                ready && !uninitialized
            })
            .collect();
        if let Some(n) = fresh.into_iter().next() {
            break n;
        }
        assert!(Instant::now() < deadline, "no schedulable replacement Node within {bound}\n{}", controller.said());
        std::thread::sleep(Duration::from_millis(500));
    };
    let taints: Vec<&str> =
        fresh["spec"]["taints"].as_array().unwrap().iter().filter_map(|t| t["key"].as_str()).collect();
    assert!(taints.contains(&"nvidia.com/gpu"), "the pool's taint stays: {fresh}");

    // A tunnel whose path is cut: the next reconciles say so in the conditions (nothing to repair).
    clouds.patch_xstack(&serde_json::json!({ "spec": { "policy": "Repair" } }));
    let cut = clouds.get("/_sim/tunnels")["tunnels"][2]["outside_ip"].as_str().unwrap().to_string();
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": [cut.clone()]}}));
    let o = clouds.xstack_until(&controller, "Link.link.TunnelEstablished", "False", Duration::from_secs(60));
    assert_eq!(o["status"]["tunnels"], "3/4", "{}", o["status"]);
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": []}}));
    clouds.xstack_until(&controller, "Ready", "True", Duration::from_secs(120));

    // A VPN connection deleted out of band: drift, which the Repair policy applies.
    let conn =
        clouds.recorded_in_cluster()["resources"]["aws_vpn_connection.link[0]"]["id"].as_str().unwrap().to_string();
    let first = clouds.xstack()["status"]["lastApplied"]["digest"].clone();
    let deleted_at = Instant::now();
    assert!(clouds.ec2_with("DeleteVpnConnection", &[("VpnConnectionId", &conn)]).contains("true"));
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let o = clouds.xstack();
        let plan = &o["status"]["lastApplied"];
        let repaired = plan["digest"] != first
            && plan["changes"].as_array().is_some_and(|c| c.iter().any(|c| c == "create aws_vpn_connection.link[0]"));
        if repaired && plan["outcome"].as_str().is_some_and(|t| t.starts_with("applied")) {
            break;
        }
        assert!(Instant::now() < deadline, "not repaired: {}\n{}", o["status"], controller.said());
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "controller: a deleted VPN connection re-created {:.1} s after the deletion (interval 3 s)",
        deleted_at.elapsed().as_secs_f64()
    );
    clouds.xstack_until(&controller, "Ready", "True", Duration::from_secs(300));
    let now =
        clouds.recorded_in_cluster()["resources"]["aws_vpn_connection.link[0]"]["id"].as_str().unwrap().to_string();
    assert_ne!(now, conn);

    // Policy Plan: the same drift waits for someone to approve its plan by digest, then is applied.
    clouds.patch_xstack(&serde_json::json!({ "spec": { "policy": "Plan" } }));
    let conn =
        clouds.recorded_in_cluster()["resources"]["aws_vpn_connection.link[1]"]["id"].as_str().unwrap().to_string();
    assert!(clouds.ec2_with("DeleteVpnConnection", &[("VpnConnectionId", &conn)]).contains("true"));
    // (A reconcile that met the lock this test's own `state pull` held says `Locked`; the next
    // one plans.)
    let deadline = Instant::now() + Duration::from_secs(120);
    let o = loop {
        let o = clouds.xstack_until(&controller, "Reconciled", "False", Duration::from_secs(120));
        let conditions = o["status"]["conditions"].as_array().unwrap();
        let reason = conditions.iter().find(|c| c["type"] == "Reconciled").unwrap()["reason"].clone();
        if reason != "Locked" || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let status = &o["status"];
    let reconciled = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Reconciled").unwrap();
    assert_eq!(reconciled["reason"], "AwaitingApproval", "{status}");
    let digest = status["lastPlan"]["digest"].as_str().unwrap().to_string();
    assert!(reconciled["message"].as_str().unwrap().contains(&digest), "{status}");
    let changes = status["lastPlan"]["changes"].as_array().unwrap();
    assert!(changes.iter().any(|c| c == "create aws_vpn_connection.link[1]"), "{status}");
    // Nothing is applied while it waits: the next reconciles plan the same plan, and leave it.
    std::thread::sleep(Duration::from_secs(7));
    let o = clouds.xstack();
    assert_eq!(o["status"]["lastPlan"]["digest"], digest, "{}", o["status"]);
    assert_eq!(clouds.aws_live().2, 1, "a VPN connection was made without the approval");
    clouds.patch_xstack(&serde_json::json!({ "spec": { "approvedPlan": digest } }));
    let deadline = Instant::now() + Duration::from_secs(300);
    while clouds.xstack()["status"]["lastApplied"]["digest"] != digest {
        assert!(Instant::now() < deadline, "the approved plan was not applied: {}", clouds.xstack()["status"]);
        std::thread::sleep(Duration::from_millis(500));
    }
    clouds.xstack_until(&controller, "Ready", "True", Duration::from_secs(300));

    // A second replica waits for the Lease; with the leader gone, it takes over (and does the
    // destroy below).
    let standby = clouds.start_controller(&kubeconfig, "controller-standby");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !standby.said().contains("waiting for the Lease xcsp-controller, held by controller-e2e") {
        assert!(Instant::now() < deadline, "the standby does not wait: {}", standby.said());
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(controller);
    let killed_at = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !standby.said().contains("leading") {
        assert!(Instant::now() < deadline, "the standby did not take over: {}", standby.said());
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "controller: the standby led {:.1} s after the leader was killed (Lease 15 s, tried every 2 s)",
        killed_at.elapsed().as_secs_f64()
    );
    let controller = standby;

    // Deleted with `onDelete: Destroy`: the stack goes, then the resource.
    let deleting = Instant::now();
    clouds.kube_request("DELETE", "/apis/xcsp.io/v1alpha1/namespaces/gpu/xcspstacks/il5", None);
    let deadline = Instant::now() + Duration::from_secs(600);
    while !clouds.xstack().is_null() {
        assert!(Instant::now() < deadline, "the resource stayed: {}\n{}", clouds.xstack()["status"], controller.said());
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("controller: the resource deleted, its stack destroyed, in {:.1} s", deleting.elapsed().as_secs_f64());
    assert_eq!(clouds.aws_live(), (0, 0, 0));
    assert_eq!(clouds.arm_resources(), Vec::<String>::new());
    let events = clouds.kubectl(&["get", "events.events.k8s.io", "-n", "gpu"]);
    assert!(events["items"].as_array().unwrap().iter().any(|e| e["reason"] == "Destroyed"), "{events}");
    // Its state stays, recording nothing; its lock is gone.
    assert_eq!(clouds.recorded_in_cluster()["resources"], serde_json::json!({}));
    assert!(clouds.kube_get("/apis/coordination.k8s.io/v1/namespaces/gpu/leases/xcsp-lock-il5-gpu").is_null());
}

/// On the cluster its owners run in production (OpenShift's `Default` feature set: no Cluster API,
/// no CAPZ), xcsp brings both providers and a machine approver from the spec's `cluster_api`
/// block; the VMs are made by the CAPZ xcsp deployed, the Nodes join and are schedulable, a second
/// apply changes nothing, a deleted manager is drift that apply repairs, and destroy leaves no
/// object of xcsp's providers.
#[test]
fn on_a_default_cluster_xcsp_brings_the_providers_and_the_pool_joins() {
    // The cluster's control-plane Nodes: where the scheduler puts the managers' Pods (a world
    // without Nodes runs none, as a cluster without them would).
    let clouds = Clouds::start_with(&[
        "--upstream",
        "--api-host",
        "api-int.il5.example.mil",
        "--feature-set",
        "Default",
        "--control-plane-nodes",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let components =
        PathBuf::from(std::env::var_os("XCSP_UPSTREAM_BIN").expect("XCSP_UPSTREAM_BIN")).join("components");
    let spec = il5_copy(dir.path(), |t| {
        t.replacen(
            "\ncluster {",
            &format!(
                "\ncluster {{\n  cluster_api {{\n    providers = \"xcsp\"\n    core_components = \"{}\"\n    azure_components = \"{}\"\n  }}",
                components.join("core-components.yaml").display(),
                components.join("infrastructure-components.yaml").display()
            ),
            1,
        )
    });
    assert!(clouds.kubectl(&["get", "crds"])["items"].as_array().unwrap().iter().all(|c| {
        let name = c["metadata"]["name"].as_str().unwrap();
        !name.ends_with(".cluster.x-k8s.io") || name.ends_with(".ipam.cluster.x-k8s.io")
    }));
    let started = std::time::Instant::now();
    let applied = ok(&clouds.xcsp(state).args(["apply", "--auto-approve", "--json"]).arg(&spec).output().unwrap());
    // Measured, not asserted (BENCHMARKS.md): the apply's wall time, and each provider's write.
    eprintln!("apply on the Default world: {:.1} s", started.elapsed().as_secs_f64());
    for line in applied.lines().filter(|l| l.contains("k8s_cluster_api_provider")) {
        let e: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        if e["duration_secs"].is_number() || e["elapsed"].is_number() {
            eprintln!("{line}");
        }
    }
    for p in ["core", "azure", "approver"] {
        assert!(applied.contains(&format!("k8s_cluster_api_provider.{p}")), "{p}: {applied}");
    }
    let deployments = clouds.kubectl(&["get", "deployments", "-A"]);
    let capz = deployments["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metadata"]["namespace"] == "xcsp-capz-system")
        .expect("xcsp's CAPZ");
    let env = capz["spec"]["template"]["spec"]["containers"][0]["env"].to_string();
    assert!(env.contains("https://login.microsoftonline.us/"), "the Government authority is CAPZ's: {env}");

    // The CAPZ xcsp deployed made the VMs, under Azure Government's name.
    let requests = clouds.get("/_sim/requests");
    let vms: Vec<&serde_json::Value> = requests["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["method"] == "PUT"
                && r["host"] == "management.usgovcloudapi.net"
                && r["path"].as_str().is_some_and(|p| p.contains("/virtualMachines/"))
                && r["user_agent"].as_str().is_some_and(|u| u.contains("cluster-api-provider-azure/v1.26.0"))
        })
        .collect();
    assert!(vms.len() >= 2, "CAPZ made the two VMs: {}", vms.len());
    let nodes = clouds.kubectl(&["get", "nodes"]);
    let ready: Vec<&serde_json::Value> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["status"]["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .filter(|n| n["spec"]["unschedulable"] != true)
        .filter(|n| n["metadata"]["labels"]["node-role.kubernetes.io/control-plane"].is_null())
        .collect();
    assert_eq!(ready.len(), 2, "{nodes}");
    // The managers run on the control-plane Nodes (on AWS), none on the pool's across the link.
    for ns in ["xcsp-capi-system", "xcsp-capz-system"] {
        for p in clouds.kubectl(&["-n", ns, "get", "pods"])["items"].as_array().unwrap() {
            let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
            assert!(node.contains("-master-"), "{} on {node:?}", p["metadata"]["name"]);
        }
    }
    // Status reads each manager's health from its Deployment and its Pods.
    let status = clouds.xcsp(state).args(["status"]).arg(&spec).output().unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(shown.contains("provider azure: ManagerAvailable=True"), "{shown}");

    let (code, said) = plan_of(&clouds, state, &spec);
    assert_eq!(code, Some(0), "a second apply changes nothing: {said}");

    // A deleted manager is drift: plan shows it, apply puts it back.
    let bin = PathBuf::from(std::env::var_os("XCSP_UPSTREAM_BIN").unwrap()).join("kubectl");
    let deleted = Command::new(bin)
        .arg("--kubeconfig")
        .arg(&clouds.kubeconfig)
        .args(["-n", "xcsp-capz-system", "delete", "deployment", "capz-controller-manager"])
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{}", String::from_utf8_lossy(&deleted.stderr));
    let (code, said) = plan_of(&clouds, state, &spec);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("k8s_cluster_api_provider.azure"), "{said}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    let (code, said) = plan_of(&clouds, state, &spec);
    assert_eq!(code, Some(0), "{said}");
    // The manager made again keeps the Government authority: it is the stack's, not a hand's.
    let capz = clouds.kubectl(&["-n", "xcsp-capz-system", "get", "deployment", "capz-controller-manager"]);
    let env = capz["spec"]["template"]["spec"]["containers"][0]["env"].to_string();
    assert!(env.contains("https://login.microsoftonline.us/"), "{env}");

    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(&spec).output().unwrap());
    let left: Vec<String> = clouds.kubectl(&["get", "crds"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(String::from))
        .filter(|n| n.ends_with("cluster.x-k8s.io") || n.ends_with("xcsp.io"))
        .collect();
    assert_eq!(left, ["ipaddressclaims.ipam.cluster.x-k8s.io", "ipaddresses.ipam.cluster.x-k8s.io"]);
    for kind in [
        "deployments",
        "clusterroles",
        "clusterrolebindings",
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "serviceaccounts",
    ] {
        let found = clouds.kubectl(&["get", kind, "-A", "-l", "xcsp.io/stack"]);
        assert_eq!(found["items"].as_array().unwrap().len(), 0, "no {kind} of xcsp's is left: {found}");
    }
}

/// A cluster running OVN IPsec between nodes, hosting its own DNS and keeping its workers' time
/// from AWS (a worker chrony config naming 169.254.169.123): what an IL5 owner's cluster often
/// is. On it the pool joins only because its config masks `aws-update-dns.service` (which would
/// make AWS's unreachable resolver the node's) and keeps the Azure host's clock; pod traffic to the
/// cluster's nodes passes only because the link lets IKE and ESP through; a rule revoked by hand
/// leaves the Nodes Ready and every pod packet dropped, and `xcsp status` names it. Then the link
/// is cut for longer than the API server's default toleration: a Pod that names the pool's
/// RuntimeClass stays, one that does not is evicted.
#[test]
fn on_an_ipsec_cluster_pod_traffic_crosses_the_link_and_pool_work_rides_out_an_outage() {
    let clouds = Clouds::start_with(&[
        "--upstream",
        "--api-host",
        "api-int.il5.example.mil",
        "--ovn-ipsec",
        "--cluster-hosted-dns",
        "--worker-time-server",
        "169.254.169.123",
        // IPsec's 46 bytes more per packet: the cluster's MTU migrated to what the tunnels carry.
        "--cluster-network-mtu",
        "1254",
        // The cluster's own Nodes on AWS, which keep posting through the outage: without them the
        // node lifecycle controller takes a cut link for its own disconnection and evicts nothing.
        "--control-plane-nodes",
    ]);
    let timing = clouds.timing();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // The pool's work tolerates three times the cluster's default (scaled as the world scales it).
    let tolerance = (timing.default_toleration_secs() * 3.0) as i64;
    let spec = il5_copy(dir.path(), |t| {
        t.replacen("\ncluster {", "\ncluster {\n  ovn_ipsec = true", 1)
            .replacen("overlay_mtu         = 1300", "overlay_mtu         = 1254", 1)
            .replacen(
                "  machine_health_check = true",
                &format!("  machine_health_check = true\n  outage_tolerance_seconds = {tolerance}"),
                1,
            )
    });
    let plan = ok(&clouds.xcsp(state).args(["plan"]).arg(&spec).output().unwrap());
    assert!(plan.contains("ESP (OVN IPsec)") && plan.contains("IKE (OVN IPsec)"), "{plan}");
    assert!(plan.contains("k8s_runtime_class.gpu"), "{plan}");
    let preflight = ok(&clouds.xcsp(state).args(["preflight"]).arg(&spec).output().unwrap());
    assert!(preflight.contains("OVN IPsec:    Full"), "{preflight}");
    assert!(preflight.contains("99-worker-chrony names 169.254.169.123"), "{preflight}");
    assert!(preflight.contains("aws-update-dns.service"), "{preflight}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());

    // Joined: each machine's clock is the Azure host's and its pods reach the cluster's nodes.
    let machines = clouds.get("/_sim/machines")["machines"].as_array().unwrap().clone();
    assert_eq!(machines.len(), 2, "{machines:?}");
    for m in &machines {
        assert_eq!(m["held_at"], "joined", "{m}");
        assert_eq!(m["pod_network"]["passes"], true, "{m}");
        assert_eq!(m["time_source"]["synchronized"], true, "{m}");
        assert!(m["time_source"]["source"].as_str().unwrap().contains("ptp_hyperv"), "{m}");
    }

    // ESP revoked from the worker nodes' group by hand: the Nodes stay Ready, the pods' packets
    // are dropped, and status names the rule.
    let groups = clouds.ec2_with(
        "DescribeSecurityGroups",
        &[("Filter.1.Name", "group-name"), ("Filter.1.Value.1", "il5-gpu-x7k2p-node")],
    );
    let node_group = groups.split("<groupId>").nth(1).and_then(|r| r.split('<').next()).unwrap().to_string();
    let revoked = clouds.ec2_with(
        "RevokeSecurityGroupIngress",
        &[
            ("GroupId", &node_group),
            ("IpPermissions.1.IpProtocol", "50"),
            ("IpPermissions.1.FromPort", "-1"),
            ("IpPermissions.1.ToPort", "-1"),
            ("IpPermissions.1.IpRanges.1.CidrIp", "10.200.0.0/16"),
        ],
    );
    assert!(revoked.contains("true"), "{revoked}");
    let pass = Bound::on_event("the world's stand-ins");
    let deadline = pass.deadline();
    loop {
        let machines = clouds.get("/_sim/machines")["machines"].as_array().unwrap().clone();
        let dropped = machines.iter().all(|m| {
            m["pod_network"]["passes"] == false
                && m["pod_network"]["message"].as_str().is_some_and(|t| t.contains("ESP"))
        });
        if dropped {
            assert!(machines.iter().all(|m| m["held_at"] == "joined"), "the Nodes stay Ready: {machines:?}");
            break;
        }
        assert!(Instant::now() < deadline, "ESP still passes after {pass}: {machines:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = clouds.xcsp(state).args(["status", "--json"]).arg(&spec).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text_of(&out)));
    let rules = status["links"][0]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "SecurityGroupRulesInPlace")
        .cloned()
        .unwrap();
    assert_eq!(rules["status"], "False", "{rules}");
    assert!(rules["message"].as_str().unwrap().contains("ESP (OVN IPsec): protocol 50"), "{rules}");
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    let deadline = pass.deadline();
    while !clouds.get("/_sim/machines")["machines"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["pod_network"]["passes"] == true)
    {
        assert!(Instant::now() < deadline, "apply did not restore ESP");
        std::thread::sleep(Duration::from_millis(500));
    }

    // Two GPU Pods: one names the pool's RuntimeClass and nothing else of the pool, one tolerates
    // the pool's taint by hand. The RuntimeClass admission plugin gives the first the pool's
    // placement, taint and outage tolerations; DefaultTolerationSeconds gives the second 300 s
    // (scaled).
    let classes = clouds.kubectl(&["get", "runtimeclasses", "-l", "xcsp.io/stack=il5-gpu"]);
    let class = classes["items"][0]["metadata"]["name"].as_str().expect("the pool's RuntimeClass").to_string();
    let pod = |name: &str, spec: serde_json::Value| {
        let mut spec = spec;
        spec["containers"] = serde_json::json!([{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubi9",
            "resources": {"requests": {"cpu": "8", "memory": "64Gi"}}}]);
        let path = dir.path().join(format!("{name}.json"));
        let body = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec});
        std::fs::write(&path, body.to_string()).unwrap();
        clouds.kubectl(&["create", "-f", path.to_str().unwrap()]);
    };
    pod("rides-out", serde_json::json!({"runtimeClassName": class}));
    pod(
        "opts-out",
        serde_json::json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    let unreachable = |p: &serde_json::Value| -> Vec<i64> {
        p["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["key"] == "node.kubernetes.io/unreachable")
            .filter_map(|t| t["tolerationSeconds"].as_i64())
            .collect()
    };
    let stays = clouds.kubectl(&["get", "pod", "rides-out", "-n", "default"]);
    assert_eq!(unreachable(&stays), [tolerance], "one toleration, the pool's: {}", stays["spec"]);
    let goes = clouds.kubectl(&["get", "pod", "opts-out", "-n", "default"]);
    assert_eq!(unreachable(&goes), [timing.default_toleration_secs() as i64], "{}", goes["spec"]);
    let scheduling = Bound::on_event("kube-scheduler");
    let deadline = scheduling.deadline();
    let pool_nodes: Vec<String> = machines.iter().filter_map(|m| m["name"].as_str().map(String::from)).collect();
    for name in ["rides-out", "opts-out"] {
        loop {
            let p = clouds.kubectl(&["get", "pod", name, "-n", "default"]);
            if let Some(n) = p["spec"]["nodeName"].as_str() {
                assert!(pool_nodes.iter().any(|m| n.contains(m.as_str()) || m.contains(n)), "{name} on {n}");
                break;
            }
            assert!(Instant::now() < deadline, "{name} is not scheduled within {scheduling}: {}", p["status"]);
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    // The link down for longer than the default toleration: the Pod that opted out is evicted
    // (its deletion waits on a kubelet that cannot hear), the other stays.
    clouds.cut_every_tunnel();
    let cut = Instant::now();
    let eviction = timing.default_eviction();
    let deadline = eviction.deadline();
    loop {
        let p = clouds.kubectl(&["get", "pod", "opts-out", "-n", "default"]);
        if p["metadata"]["deletionTimestamp"].is_string() || p.is_null() {
            break;
        }
        assert!(Instant::now() < deadline, "opts-out is not evicted within {eviction}: {}", p["metadata"]);
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("outage: the default-tolerating Pod evicted {:.1} s after the cut", cut.elapsed().as_secs_f64());
    // Past the default toleration by a monitor period and more, well inside the pool's.
    std::thread::sleep(Duration::from_secs(5));
    let stays = clouds.kubectl(&["get", "pod", "rides-out", "-n", "default"]);
    assert!(
        stays["metadata"]["deletionTimestamp"].is_null(),
        "the pool's work rides out the outage: {}",
        stays["metadata"]
    );
    assert!((cut.elapsed().as_secs_f64()) < tolerance as f64, "the check ran inside the pool's tolerance");
    clouds.configure(&serde_json::json!({"faults": {"cut_tunnels": []}}));
}

/// A location whose Marketplace carries no RHCOS (whether Azure Government publishes
/// `azureopenshift/aro4` is not established): plan refuses the Marketplace image and names the
/// way forward; with `image { vhd = ... }` (the release's `azure-disk`, as coreos-bootimages names
/// it) apply imports the VHD into a storage account and a Compute Gallery of the stack, the
/// machines boot from the gallery's image version and join; a second plan has nothing to do; and
/// destroy removes the account, gallery, definition, version and blob, nothing else left behind.
#[test]
fn without_the_marketplace_offer_the_pool_boots_the_release_vhd_imported_into_a_gallery() {
    let clouds = Clouds::start();
    clouds.configure(&serde_json::json!({"compute": {"without_marketplace": ["usgovvirginia"]}}));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    // The plan-time checks read the clouds (the harness runs offline unless told).
    let marketplace = clouds.xcsp(state).env_remove("XCSP_OFFLINE").args(["plan"]).arg(il5()).output().unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&marketplace.stdout), String::from_utf8_lossy(&marketplace.stderr));
    assert!(!marketplace.status.success(), "the Marketplace image was planned: {said}");
    assert!(said.contains("PlatformImageNotFound") && said.contains("vhd"), "{said}");
    let spec = il5_importing(dir.path());
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    let arm = clouds.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
    let of_type = |t: &str| -> Vec<serde_json::Value> {
        arm.iter().filter(|r| r["type"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(t))).cloned().collect()
    };
    let versions = of_type("Microsoft.Compute/galleries/images/versions");
    assert_eq!(versions.len(), 1, "{versions:?}");
    let version_id = versions[0]["id"].as_str().unwrap().to_string();
    assert!(version_id.ends_with("/images/rhcos-gen2-x64/versions/422.94.20251104"), "{version_id}");
    let images = of_type("Microsoft.Compute/galleries/images");
    assert_eq!(images[0]["body"]["properties"]["hyperVGeneration"], "V2", "{images:?}");
    assert_eq!(of_type("Microsoft.Storage/storageAccounts").len(), 1);
    let vms = of_type("Microsoft.Compute/virtualMachines");
    assert_eq!(vms.len(), 2, "{vms:?}");
    for vm in &vms {
        let booted = vm["body"]["properties"]["storageProfile"]["imageReference"]["id"].as_str().unwrap_or_default();
        assert!(booted.eq_ignore_ascii_case(&version_id), "{} boots {booted}", vm["name"]);
    }
    joined(&clouds, 2);
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(&spec).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    ok(&clouds.xcsp(state).args(["destroy", "--auto-approve"]).arg(&spec).output().unwrap());
    let left = clouds.get("/_sim/resources")["value"].as_array().cloned().unwrap_or_default();
    let imported: Vec<&serde_json::Value> = left
        .iter()
        .filter(|r| {
            let t = r["type"].as_str().unwrap_or_default().to_ascii_lowercase();
            t.starts_with("microsoft.storage/") || t.starts_with("microsoft.compute/galleries")
        })
        .collect();
    assert!(imported.is_empty(), "left after destroy: {imported:?}");
}

/// The IL5 example booting the world's release VHD, imported (`image { vhd = ... }`).
fn il5_importing(dir: &Path) -> PathBuf {
    let vhd = "https://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd";
    il5_copy(dir, |t| booting_vhd(&t, vhd))
}

/// An apply killed while Azure copies the VHD, then again while it makes and replicates the image
/// version, ends on the next run with one of each (the storage account, the blob, the gallery, its
/// definition and version, every one recorded with the id it has), the copy not started twice, the
/// machines booted from the version and joined, and nothing left to plan.
#[test]
fn an_apply_killed_while_the_vhd_copies_and_the_version_replicates_resumes_to_one_of_each() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let spec = il5_importing(dir.path());
    let started = |prefix: &'static str| {
        move |e: &serde_json::Value| {
            e["event"] == "started" && e["address"].as_str().is_some_and(|a| a.starts_with(prefix))
        }
    };
    kill_when_of(&clouds, state, &spec, started("azure_storage_blob."), Duration::from_millis(150));
    kill_when_of(&clouds, state, &spec, started("azure_shared_image_version."), Duration::from_millis(300));
    ok(&clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap());
    let arm = clouds.arm_resources();
    let recorded = recorded(state);
    for (kind, address) in [
        ("/Microsoft.Storage/storageAccounts/", "azure_storage_account.images"),
        ("/Microsoft.Compute/galleries/", "azure_shared_image_gallery.images"),
    ] {
        let live: Vec<&String> = arm.iter().filter(|id| id.contains(kind) && id.matches('/').count() == 8).collect();
        assert_eq!(live.len(), 1, "{kind}: {live:?}");
        assert!(
            recorded["resources"][address]["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(live[0])),
            "{address}"
        );
    }
    let versions: Vec<&String> = arm.iter().filter(|id| id.contains("/versions/")).collect();
    assert_eq!(versions.len(), 1, "{versions:?}");
    let version = &recorded["resources"]["azure_shared_image_version.rhcos_x86_64"];
    assert!(version["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(versions[0])), "{version}");
    let blob = recorded["resources"]["azure_storage_blob.rhcos_x86_64"]["id"].as_str().unwrap_or_default().to_string();
    assert!(blob.ends_with("/vhd/rhcos-422.94.202511041021-0-azure.x86_64.vhd"), "{blob}");
    let copies = clouds.get("/_sim/counters")["requests"]["Copy Blob"].as_u64().unwrap_or(0);
    assert_eq!(copies, 1, "the copy was started {copies} times");
    joined(&clouds, 2);
    let again = clouds.xcsp(state).args(["plan", "--detailed-exitcode"]).arg(&spec).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    ok(&clouds.xcsp(state).args(["destroy", "--auto-approve"]).arg(&spec).output().unwrap());
}

/// The IL5 example's pool text with its `image { ... }` block replaced by `image_id = id`.
fn booting_image_id(pool: &str, id: &str) -> String {
    let start = pool.find("\n  image {").expect("the example's image block") + 1;
    let end = start + pool[start..].find("}\n").expect("its end") + 2;
    format!("{}  image_id = \"{id}\"\n{}", &pool[..start], &pool[end..])
}

/// A pool whose `image_id` names a gallery image version nothing made (issue 63: the public
/// example's did, and its apply waited 30 minutes to say `NodesNotReady`). Plan, reading the
/// subscription, refuses it at the line. Applied anyway (offline, nothing read), CAPZ's VM PUTs
/// are refused `GalleryImageNotFound`, which CAPZ retries for ever: apply stops waiting on the
/// first read of the AzureMachines that says so, naming each machine, the code and the fix
/// (the code is the cloud's, not the timeout's `NodesNotReady`); `xcsp status` names the same
/// cause; and destroy removes the pool, nothing left behind.
#[test]
fn a_missing_gallery_image_is_refused_at_plan_and_stops_apply_at_once() {
    let clouds = Clouds::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let id = "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/images/providers/Microsoft.Compute/galleries/rhcos/images/rhcos/versions/4.19.0";
    let spec = il5_copy(dir.path(), |t| booting_image_id(&t, id));
    let text = std::fs::read_to_string(spec.join("pool.xcsp.hcl")).unwrap();
    let line = text.lines().position(|l| l.contains("image_id =")).expect("the image_id line") + 1;

    let planned = clouds.xcsp(state).env_remove("XCSP_OFFLINE").arg("plan").arg(&spec).output().unwrap();
    let said = text_of(&planned);
    assert!(!planned.status.success(), "a missing image was planned: {said}");
    assert!(said.contains("xcsp::azure::image_id") && said.contains("GalleryImageNotFound"), "{said}");
    assert!(said.contains(&format!("pool.xcsp.hcl:{line}:")), "not at line {line}: {said}");
    assert!(said.contains("vhd"), "the way forward: {said}");

    let applied = clouds.xcsp(state).args(["apply", "--auto-approve"]).arg(&spec).output().unwrap();
    let said = text_of(&applied);
    assert!(!applied.status.success(), "{said}");
    assert!(said.contains("GalleryImageNotFound") && !said.contains("NodesNotReady"), "{said}");
    // The pool's two MachineSets (one a zone), each with its one machine.
    for set in ["k8s_nodes_ready.gpu[0]: GalleryImageNotFound", "k8s_nodes_ready.gpu[1]: GalleryImageNotFound"] {
        assert!(said.contains(set), "{set}: {said}");
    }
    // (Each failure is said as it happens and again in the summary.)
    assert!(said.matches("1 of its machines will never be").count() >= 2, "{said}");
    let machines = clouds.kube_get("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machines");
    for m in machines["items"].as_array().expect("machines") {
        let name = m["metadata"]["name"].as_str().unwrap();
        assert!(said.contains(&format!("Machine xcsp-il5-gpu/{name} ")), "{name} not named: {said}");
    }
    assert!(said.contains("image_id") && said.contains("image { vhd"), "the fix: {said}");
    // Every completed step is kept: the MachineSet is in state, only the wait failed.
    let recorded = recorded(state);
    assert!(recorded.to_string().contains("k8s_machine_set"), "the MachineSet is recorded");

    let status = clouds.xcsp(state).arg("status").arg(&spec).output().unwrap();
    let said = text_of(&status);
    assert_ne!(status.status.code(), Some(0), "{said}");
    assert!(said.contains("Azure will not make its VM: GalleryImageNotFound"), "{said}");

    ok(&clouds.xcsp(state).args(["destroy", "--sweep", "--auto-approve"]).arg(&spec).output().unwrap());
    let left = clouds.kube_get("/apis/cluster.x-k8s.io/v1beta1/namespaces/xcsp-il5-gpu/machines");
    assert!(left["items"].as_array().is_none_or(|i| i.is_empty()), "{left}");
}
