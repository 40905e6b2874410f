//! Which kubeconfig a run uses, through the built binary and without a cluster: the spec's
//! `cluster.kubeconfig`, then `KUBECONFIG`, then `~/.kube/config` only when it is for the spec's
//! `cluster.api_url`; with none, apply stops before changing anything and says what it tried,
//! plan warns; `kubernetes_objects = "render"` needs no cluster. A kubeconfig's token is never shown.
//!
//! Apply is run without `--auto-approve` off a terminal: once the cluster is settled it shows the
//! plan and refuses to go on, so no cloud is ever called (state is empty: nothing to refresh).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use xcsp_tests::root;

const TOKEN: &str = "sha256~NEVER-SHOWN-TOKEN";

/// A home directory, a state directory and the IL5 spec, with `cluster_extra` added to its
/// cluster block.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new(cluster_extra: &str) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home/.kube")).unwrap();
        std::fs::create_dir_all(dir.path().join("spec")).unwrap();
        let spec = std::fs::read_to_string(root().join("examples/il5-govcloud/pool.xcsp.hcl")).unwrap();
        let line = "  overlay_mtu         = 1300\n";
        assert!(spec.contains(line), "the IL5 example's cluster block changed");
        let spec = spec.replacen(line, &format!("{line}{cluster_extra}"), 1);
        std::fs::write(dir.path().join("spec/pool.xcsp.hcl"), spec).unwrap();
        Workspace { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// A kubeconfig with two contexts: `other` (current) and `il5` (the spec's api_url).
    fn kubeconfig(&self, rel: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: other\n\
                 contexts:\n- name: other\n  context: {{cluster: other, user: me}}\n- name: il5\n  context: {{cluster: il5, user: me}}\n\
                 clusters:\n- name: other\n  cluster: {{server: \"https://api.other.example.com:6443\"}}\n\
                 - name: il5\n  cluster: {{server: \"https://api.il5.example.mil:6443/\"}}\n\
                 users:\n- name: me\n  user: {{token: \"{TOKEN}\"}}\n"
            ),
        )
        .unwrap();
        path
    }

    /// `xcsp ARGS spec/` with this home, no KUBECONFIG and placeholder cloud credentials.
    fn xcsp(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let exe = std::env::current_exe().unwrap();
        let bin = exe.parent().and_then(Path::parent).unwrap().join("xcsp");
        assert!(bin.exists(), "{} is missing: build -p xcsp-cli first", bin.display());
        let mut c = Command::new(bin);
        c.args(args)
            .arg(self.path("spec"))
            .env_remove("KUBECONFIG")
            .env_remove("XCSP_KUBE_CONTEXT")
            .env("HOME", self.path("home"))
            .env("XCSP_STATE_DIR", self.path("state"))
            .env("XCSP_OFFLINE", "1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AZURE_CLIENT_ID", "local")
            .env("AZURE_CLIENT_SECRET", "local")
            .env("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000001")
            .stdin(std::process::Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }
}

/// Both outputs, with diagnostics' wrapped lines joined again (miette wraps at a width).
fn text(out: &Output) -> String {
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    all.lines().map(|l| l.trim_start_matches([' ', '│'])).collect::<Vec<_>>().join(" ")
}

/// Apply got past the cluster: it showed the plan and stopped only for want of a confirmation.
fn reached_confirmation(out: &Output, planned: usize) {
    let said = text(out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("Plan: {planned} to add")), "{said}");
    assert!(said.contains("not on a terminal, so nobody can confirm"), "{said}");
    assert!(!said.contains(TOKEN), "the kubeconfig's token was shown: {said}");
}

#[test]
fn apply_without_a_kubeconfig_stops_before_changing_anything_and_says_what_it_tried() {
    let w = Workspace::new("");
    let out = w.xcsp(&["apply", "--auto-approve"], &[]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for part in [
        "xcsp::cluster::no_kubeconfig",
        "no kubeconfig for the cluster https://api.il5.example.mil:6443",
        "cluster.kubeconfig (not set in the spec)",
        "KUBECONFIG (not set)",
        ".kube/config (no such file)",
        "kubernetes_objects = \"render\"",
    ] {
        assert!(said.contains(part), "lacks {part:?}: {said}");
    }
    assert!(!said.contains("Plan:"), "it went on to plan: {said}");
    assert!(!w.path("state/state.json").exists(), "state was written");

    // Plan shows the objects and warns that apply will need the cluster.
    let out = w.xcsp(&["plan"], &[]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("Plan: 57 to add") && said.contains("k8s_machine_set.gpu"), "{said}");
    assert!(said.contains("apply and destroy stop before changing anything until one is found"), "{said}");
}

#[test]
fn the_default_kubeconfig_is_used_only_when_its_context_is_the_spec_cluster() {
    let w = Workspace::new("");
    w.kubeconfig("home/.kube/config");
    let out = w.xcsp(&["apply"], &[]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("context `other` is for https://api.other.example.com:6443, not the spec's cluster.api_url"),
        "{said}"
    );
    assert!(!said.contains("Plan:") && !said.contains(TOKEN), "{said}");

    // Its context for the spec's cluster (a trailing slash aside) is taken.
    let w = Workspace::new("  kube_context        = \"il5\"\n");
    w.kubeconfig("home/.kube/config");
    reached_confirmation(&w.xcsp(&["apply"], &[]), 57);
}

#[test]
fn the_spec_kubeconfig_comes_first_and_a_missing_one_is_an_error_not_a_fall_through() {
    let w = Workspace::new("  kubeconfig          = \"~/cluster.kubeconfig\"\n");
    w.kubeconfig("home/cluster.kubeconfig");
    let broken = w.path("nowhere/kubeconfig");
    // KUBECONFIG names no file, so reaching the plan shows it was not looked at.
    reached_confirmation(&w.xcsp(&["apply"], &[("KUBECONFIG", &broken)]), 57);

    let w = Workspace::new("  kubeconfig          = \"/nowhere/kubeconfig\"\n");
    let good = w.kubeconfig("good.kubeconfig");
    let out = w.xcsp(&["apply"], &[("KUBECONFIG", &good)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("xcsp::cluster::kubeconfig") && said.contains("/nowhere/kubeconfig"), "{said}");
    assert!(said.contains("pool.xcsp.hcl:"), "the error points at the spec's line: {said}");

    // KUBECONFIG naming a missing file is an error too, not a reason to try ~/.kube/config.
    let w = Workspace::new("");
    w.kubeconfig("home/.kube/config");
    let out = w.xcsp(&["apply"], &[("KUBECONFIG", &w.path("missing"))]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("KUBECONFIG names") && said.contains("which is not a file"), "{said}");
}

#[test]
fn render_leaves_the_objects_out_and_needs_no_cluster() {
    let w = Workspace::new("  kubernetes_objects  = \"render\"\n");
    let out = w.xcsp(&["apply"], &[]);
    reached_confirmation(&out, 38);
    let said = text(&out);
    assert!(
        said.contains(
            "the 17 Kubernetes objects of the spec (the CAPZ/CAPI objects, the pool's machine configuration, CAPI's access to the cluster, and their namespace) are left out of this run"
        ),
        "{said}"
    );
    assert!(!said.contains("k8s_machine_set.gpu will be created"), "{said}");
}
