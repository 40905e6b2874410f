//! The cluster read before anything changes, through the built binaries: `xcsp preflight` and
//! `xcsp plan` against `xcsp-sim` playing an OpenShift cluster on AWS (`--openshift`), today's
//! (no CAPZ) and the seed's proposal (`--capz`): what the cluster contradicts in the spec is
//! refused naming both values, and a cluster where CAPZ cannot run gets a verdict before any change.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use xcsp_tests::{bin, booting_vhd, root};

/// The upstream cluster (`xcsp-sim --upstream`: kube-apiserver, kube-controller-manager, CAPI's
/// manager) playing OpenShift (no AWS or moto: nothing here reaches a cloud).
struct Cluster {
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cluster {
    fn start(extra: &[&str]) -> Cluster {
        assert!(
            std::env::var_os("XCSP_UPSTREAM_BIN").is_some(),
            "the upstream cluster is not built: set XCSP_UPSTREAM_BIN=$(scripts/upstream-setup) (scripts/test does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(bin("xcsp-sim"))
            .args(["--latency", "instant", "--openshift", "il5-gpu-x7k2p:us-gov-west-1"])
            .args(["--service-account-issuer", "https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com", "--kubeconfig"])
            .arg(dir.path().join("kubeconfig"))
            .arg("--upstream")
            // A cluster whose MTU was migrated to the examples' overlay_mtu, unless a test says.
            .args(if extra.contains(&"--cluster-network-mtu") {
                &[][..]
            } else {
                &["--cluster-network-mtu", "1300"][..]
            })
            // CAPZ pointed at Azure Government's authority by the cluster's owner, unless a test says.
            .args(if !extra.contains(&"--capz") || extra.contains(&"--capz-authority-host") {
                &[][..]
            } else {
                &["--capz-authority-host", "https://login.microsoftonline.us/"][..]
            })
            // Installed in FIPS mode, as the IL5 example says, unless a test says `--no-fips`.
            .args(if extra.contains(&"--no-fips") { &[][..] } else { &["--fips"][..] })
            .args(extra.iter().filter(|a| **a != "--no-fips"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("xcsp-sim starts");
        let first = BufReader::new(child.stdout.take().unwrap()).lines().next().expect("a first line").unwrap();
        assert!(first.starts_with("xcsp-sim listening on"), "{first}");
        Cluster { child, dir }
    }

    /// `xcsp ARGS SPEC` with this cluster's kubeconfig and nothing else of the machine's.
    fn xcsp(&self, args: &[&str], spec: &Path) -> Output {
        Command::new(bin("xcsp"))
            .args(args)
            .arg(spec)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("HOME", self.dir.path())
            .env("XCSP_STATE_DIR", self.dir.path().join("state"))
            .env_remove("XCSP_OFFLINE")
            .env_remove("XCSP_KUBE_CONTEXT")
            .output()
            .unwrap()
    }
}

/// The IL5 example (one file) in a directory of its own, with `edit` applied to it.
fn il5_with(edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(root().join("examples/il5-govcloud")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap();
        let text = if name == "pool.xcsp.hcl" { edit(text) } else { text };
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// A diagnostic's text as one line of words, without miette's frame.
fn one_line(stderr: &str) -> String {
    stderr.split_whitespace().filter(|w| *w != "│").collect::<Vec<_>>().join(" ")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn on_todays_openshift_preflight_and_plan_say_capz_is_missing_before_any_change() {
    let cluster = Cluster::start(&[]);
    let spec = root().join("examples/il5-govcloud");
    let out = cluster.xcsp(&["preflight"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("OpenShift, infrastructure `il5-gpu-x7k2p` on AWS"), "{stdout}");
    assert!(stdout.contains("CAPZ:         not running"), "{stdout}");
    assert!(stderr.contains("xcsp::cluster::no_capz"), "{stderr}");
    // The pool's objects live in a namespace of their own, beside OpenShift's Cluster.
    assert!(stdout.contains("Pool objects: namespace xcsp-il5-gpu"), "{stdout}");
    assert!(!stderr.contains("second_cluster"), "{stderr}");
    // What the pool boots, and the way forward where the location has no Marketplace RHCOS: the
    // release's VHD, as the cluster's coreos-bootimages names it.
    let vhd = "https://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd";
    assert!(
        stdout.contains("Boots:        pool `gpu`: Marketplace image azureopenshift:aro4:422-v2:latest")
            && stdout.contains(&format!("image {{ vhd = \"{vhd}\" }}")),
        "{stdout}"
    );
    let importing = il5_with(|t| booting_vhd(&t, vhd));
    let (stdout, _) = text(&cluster.xcsp(&["preflight"], importing.path()));
    assert!(stdout.contains(&format!("imported from {vhd}")) && stdout.contains("the release's own VHD"), "{stdout}");
    let older = il5_with(|t| booting_vhd(&t, &vhd.replace("202511041021", "202510010000")));
    let (stdout, stderr) = text(&cluster.xcsp(&["preflight"], older.path()));
    assert!(stdout.contains(&format!("the cluster's release publishes {vhd}")), "{stdout}");
    assert!(stderr.contains("xcsp::pool::boot_image_version"), "{stderr}");

    // Plan stops before any change, with the same verdict (and no state is written).
    let out = cluster.xcsp(&["plan"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("xcsp::cluster::no_capz"), "{stderr}");
    assert!(!stdout.contains("will be created"), "{stdout}");

    // With the objects rendered instead of applied, the verdict is a warning and the plan goes on.
    let render = il5_with(|t| t.replacen("\ncluster {", "\ncluster {\n  kubernetes_objects = \"render\"", 1));
    let out = cluster.xcsp(&["plan"], render.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stderr.contains("xcsp::cluster::no_capz"), "{stderr}");
    assert!(stdout.contains("azure_virtual_network_gateway.link will be created"), "{stdout}");
}

#[test]
fn with_capz_installed_a_wrong_audience_or_infrastructure_name_is_refused_naming_the_clusters_value() {
    let cluster = Cluster::start(&["--capz"]);
    let out = cluster.xcsp(&["preflight", "--json"], &root().join("examples/il5-govcloud"));
    let (stdout, stderr) = text(&out);
    let found: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    assert_eq!(found["cluster"]["capz"]["service_account"], "capz-manager");
    assert_eq!(found["cluster"]["capz"]["audiences"], serde_json::json!(["api://AzureADTokenExchange"]));
    let codes: Vec<&str> = found["problems"].as_array().unwrap().iter().filter_map(|p| p["code"].as_str()).collect();
    // The identity's defaults match the token CAPZ presents, and the pool's Cluster is not in
    // openshift-cluster-api: nothing stops the pool.
    assert_eq!(codes, Vec::<&str>::new(), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");

    let wrong = il5_with(|t| {
        t.replacen(
            "workload_identity \"capz\" {",
            "workload_identity \"capz\" {\n  audience = \"api://AzureADTokenExchangeUSGov\"",
            1,
        )
        .replace("\"il5-gpu-x7k2p\"", "\"il5-gpu-other\"")
    });
    let out = cluster.xcsp(&["preflight"], wrong.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let words = one_line(&stderr);
    assert!(words.contains("xcsp::identity::audience"), "{stderr}");
    assert!(
        words.contains("`api://AzureADTokenExchangeUSGov`") && words.contains("`api://AzureADTokenExchange`"),
        "{stderr}"
    );
    assert!(words.contains("xcsp::cluster::infrastructure_name"), "{stderr}");
    assert!(words.contains("`il5-gpu-x7k2p`") && words.contains("`il5-gpu-other`"), "{stderr}");

    // An issuer the cluster's tokens do not carry: refused naming the cluster's.
    let wrong =
        il5_with(|t| t.replace("https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com", "https://elsewhere.example.mil"));
    let out = cluster.xcsp(&["preflight"], wrong.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let words = one_line(&stderr);
    assert!(words.contains("xcsp::identity::issuer"), "{stderr}");
    assert!(
        words.contains("`https://elsewhere.example.mil`")
            && words.contains("`https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com`"),
        "{stderr}"
    );
    assert!(stdout.contains("Token issuer: https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com"), "{stdout}");
}

#[test]
fn an_aws_clusters_mtu_is_refused_at_plan_with_the_numbers_and_the_migration() {
    // As installed on AWS: the uplink's 9001 less Geneve's 100.
    let cluster = Cluster::start(&["--capz", "--cluster-network-mtu", "8901"]);
    let spec = root().join("examples/il5-govcloud");
    let out = cluster.xcsp(&["preflight"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("Network MTU:  8901 (Network cluster)"), "{stdout}");
    let out = cluster.xcsp(&["plan"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains("will be created"), "nothing is planned: {stdout}");
    let words = one_line(&stderr);
    assert!(words.contains("xcsp::cluster::mtu"), "{stderr}");
    assert!(
        words.contains("runs at MTU 8901") && words.contains("9001 per packet") && words.contains("carries 1400"),
        "{stderr}"
    );
    // The way out: the cluster's MTU migration to what the tunnel carries less Geneve's 100.
    assert!(
        words.contains(r#""network":{"from":8901,"to":1300}"#) && words.contains(r#""machine":{"to":9001}"#),
        "{stderr}"
    );
    assert!(words.contains("set overlay_mtu = 1300"), "{stderr}");
}

#[test]
fn capz_asking_the_public_authority_for_a_government_tenant_is_refused_with_the_change_to_make() {
    // As OpenShift installs CAPZ: no AZURE_AUTHORITY_HOST (an empty value is none), so the Azure
    // SDK asks the public cloud.
    let cluster = Cluster::start(&["--capz", "--capz-authority-host", ""]);
    let spec = root().join("examples/il5-govcloud");
    let out = cluster.xcsp(&["preflight"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("Entra:        CAPZ asks https://login.microsoftonline.com (the SDK's default"),
        "{stdout}"
    );
    let out = cluster.xcsp(&["plan"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let words = one_line(&stderr);
    assert!(words.contains("xcsp::identity::authority"), "{stderr}");
    // (miette wraps the long help line; the words without spaces hold the command whole)
    let joined: String = words.split_whitespace().collect();
    assert!(joined.contains("-cmanagerAZURE_AUTHORITY_HOST=https://login.microsoftonline.us/"), "{stderr}");
    // The public example's tenant is the public cloud's: CAPZ's default is right for it.
    let out = cluster.xcsp(&["preflight"], &root().join("examples/public"));
    let (stdout, stderr) = text(&out);
    assert!(!stderr.contains("xcsp::identity::authority"), "{stdout}{stderr}");
}

#[test]
fn the_pool_follows_the_clusters_fips_mode_read_from_its_install_config() {
    // The IL5 example says fips = true; on a cluster installed in FIPS mode preflight agrees.
    let spec = root().join("examples/il5-govcloud");
    let fips = Cluster::start(&["--capz"]);
    let out = fips.xcsp(&["preflight"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("FIPS:         on (install-config)"), "{stdout}");
    drop(fips);
    // A cluster installed without it: the spec contradicts the cluster, and nothing is planned.
    let plain = Cluster::start(&["--capz", "--no-fips"]);
    let out = plain.xcsp(&["plan"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains("will be created"), "nothing is planned: {stdout}");
    let words = one_line(&stderr);
    assert!(words.contains("xcsp::cluster::fips") && words.contains("does not run in FIPS mode"), "{stderr}");
}

#[test]
fn a_cluster_wide_proxy_that_does_not_exclude_the_vnet_is_a_warning_with_the_patch() {
    let spec = root().join("examples/il5-govcloud");
    let cluster = Cluster::start(&["--capz", "--proxy", "http://proxy.example.mil:3128;.example.mil"]);
    let out = cluster.xcsp(&["preflight"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "a warning stops nothing: {stdout}{stderr}");
    assert!(stdout.contains("Proxy:        http://proxy.example.mil:3128, noProxy "), "{stdout}");
    let words = one_line(&format!("{stdout}{stderr}"));
    assert!(
        words.contains("xcsp::cluster::proxy")
            && words.contains("does not exclude network `link`'s VNet 10.200.0.0/16"),
        "{words}"
    );
    assert!(words.contains("oc patch proxy/cluster"), "{words}");
}

/// A cluster with a proxy that does not exclude the VNet, its release mirrored only to Amazon ECR
/// and the EBS CSI driver: preflight names each effect on the pool, with what the owner can do;
/// a pool that pulls only over the link from that mirror is refused, and nothing is planned.
#[test]
fn preflight_names_the_proxy_the_ecr_mirror_and_the_ebs_csi_driver_and_refuses_a_pool_with_no_way_to_pull() {
    let ecr = "123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/ocp";
    let mirror = format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev={ecr}");
    let cluster =
        Cluster::start(&["--capz", "--proxy", "http://proxy.example.mil:3128", "--mirror", &mirror, "--ebs-csi"]);
    let spec = root().join("examples/il5-govcloud");
    let out = cluster.xcsp(&["preflight"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "warnings stop nothing: {stdout}{stderr}");
    assert!(
        stdout.contains(&format!("Mirror:       quay.io/openshift-release-dev/ocp-v4.0-art-dev -> {ecr}")),
        "{stdout}"
    );
    assert!(
        stdout.contains("EBS CSI:      node DaemonSet openshift-cluster-csi-drivers/aws-ebs-csi-driver-node"),
        "{stdout}"
    );
    let words = one_line(&format!("{stdout}{stderr}"));
    for code in ["xcsp::cluster::proxy", "xcsp::cluster::ecr_mirror", "xcsp::cluster::ebs_csi"] {
        assert!(words.contains(code), "{code}: {words}");
    }
    assert!(words.contains("EC2 instance role") && words.contains("`storage` ClusterOperator"), "{words}");
    // The same pool pulling only over the link has no way to its images: refused at plan.
    let dir =
        il5_with(|s| s.replace("  zones    = [\"1\", \"2\"]", "  zones    = [\"1\", \"2\"]\n  egress   = \"link\""));
    let out = cluster.xcsp(&["plan"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains("will be created"), "nothing is planned: {stdout}");
    let words = one_line(&stderr);
    assert!(words.contains("xcsp::pool::egress") && words.contains("only to Amazon ECR"), "{stderr}");
}

/// The IL5 example whose `cluster` block names the providers' release manifests the world built
/// (`$XCSP_UPSTREAM_BIN/components`), with `providers` as given.
fn il5_with_components(providers: &str) -> tempfile::TempDir {
    il5_with_some_components(providers, true)
}

/// [`il5_with_components`], CAPZ's named only when `azure`.
fn il5_with_some_components(providers: &str, azure: bool) -> tempfile::TempDir {
    let bin = std::env::var("XCSP_UPSTREAM_BIN").expect("XCSP_UPSTREAM_BIN is set (scripts/test sets it)");
    let components = Path::new(&bin).join("components");
    let azure = if azure {
        format!("\n    azure_components = \"{}\"", components.join("infrastructure-components.yaml").display())
    } else {
        String::new()
    };
    il5_with(|t| {
        t.replacen(
            "\ncluster {",
            &format!(
                "\ncluster {{\n  cluster_api {{\n    providers = \"{providers}\"\n    core_components = \"{}\"{azure}\n  }}",
                components.join("core-components.yaml").display(),
            ),
            1,
        )
    })
}

#[test]
fn on_a_default_cluster_preflight_says_why_no_cluster_api_runs_and_plan_installs_xcsps() {
    let cluster = Cluster::start(&["--feature-set", "Default"]);
    let spec = root().join("examples/il5-govcloud");
    let out = cluster.xcsp(&["preflight"], &spec);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("Cluster API:  cluster.x-k8s.io not served, none (feature set Default"), "{stdout}");
    // The cluster-version operator's IPAM CRDs are the only ones of Cluster API there.
    assert!(
        stdout.contains("CRD:          ipaddresses.ipam.cluster.x-k8s.io")
            && stdout.contains("by the cluster-version operator (a release manifest)"),
        "{stdout}"
    );
    assert!(stdout.contains("Providers:    Cluster API's core none"), "{stdout}");
    let said = one_line(&stderr);
    assert!(said.contains("xcsp::cluster::no_capi"), "{said}");
    assert!(said.contains("it runs OpenShift's Default feature set"), "{said}");
    assert!(
        said.contains("TechPreviewNoUpgrade would install Cluster API instead, but it can never be turned off"),
        "{said}"
    );

    // With the providers' release manifests named, xcsp installs both, and plan says so.
    let with = il5_with_components("auto");
    let out = cluster.xcsp(&["preflight"], with.path());
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("Providers:    Cluster API's core xcsp's"), "{stdout}{stderr}");
    assert!(stdout.contains("CAPZ xcsp's"), "{stdout}");
    assert!(!stderr.contains("no_capi") && !stderr.contains("no_capz"), "{stderr}");
    let out = cluster.xcsp(&["plan"], with.path());
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("k8s_cluster_api_provider.core will be created"), "{stdout}{stderr}");
    assert!(stdout.contains("k8s_cluster_api_provider.azure will be created"), "{stdout}");
    assert!(stdout.contains("v1.13.6") && stdout.contains("v1.26.0"), "the versions show: {stdout}");
}

#[test]
fn where_another_manager_owns_cluster_apis_crds_xcsps_providers_are_refused_naming_it() {
    // A TechPreviewNoUpgrade cluster: OpenShift's Cluster API, its CRDs another manager's.
    let cluster = Cluster::start(&[]);
    let with = il5_with_components("xcsp");
    let out = cluster.xcsp(&["preflight"], with.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let said = one_line(&stderr);
    assert!(said.contains("xcsp::cluster_api::crd_owner"), "{said}");
    assert!(
        said.contains(
            "CRD clusters.cluster.x-k8s.io is installed by field manager `xcsp-world` (versions v1beta2, v1beta1)"
        ),
        "{said}"
    );
    assert!(said.contains("xcsp would install cluster-api v1.13.6"), "{said}");
    // With `auto`, the cluster's own is used and nothing is refused for it.
    let auto = il5_with_components("auto");
    let out = cluster.xcsp(&["preflight"], auto.path());
    let (stdout, stderr) = text(&out);
    assert!(!stderr.contains("crd_owner"), "{stderr}");
    assert!(
        stdout.contains("Providers:    Cluster API's core the cluster's (installed by field manager `xcsp-world`)"),
        "{stdout}"
    );
}

#[test]
fn on_a_techpreview_cluster_with_capz_xcsp_installs_no_provider() {
    let cluster = Cluster::start(&["--capz"]);
    // CAPZ's components named where the cluster runs its own CAPZ: a contradiction, said plainly.
    let both = il5_with_components("auto");
    let out = cluster.xcsp(&["preflight"], both.path());
    let said = one_line(&text(&out).1);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("xcsp::cluster_api::azure_components"), "{said}");
    let auto = il5_with_some_components("auto", false);
    let out = cluster.xcsp(&["plan"], auto.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stdout.contains("k8s_cluster_api_provider"), "{stdout}");
    assert!(stdout.contains("k8s_machine_set.gpu[0] will be created"), "{stdout}");
    for p in ["core", "approver"] {
        assert!(
            stderr.contains(&format!("k8s_cluster_api_provider.{p}: the cluster has this provider of its own")),
            "{p}: {stderr}"
        );
    }
}
