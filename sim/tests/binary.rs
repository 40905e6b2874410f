//! The `xcsp-sim` binary: prints its address on one machine-readable line and serves there;
//! `--kubeconfig` writes a kubeconfig whose token the Kubernetes API accepts.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn the_binary_prints_its_address_and_serves_with_the_requested_profile() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xcsp-sim"))
        .args(["--port", "0", "--latency", "instant", "--no-throttle"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("xcsp-sim starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let result = std::panic::catch_unwind(|| {
        let base = line
            .trim()
            .strip_prefix("xcsp-sim listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let health = reqwest::get(format!("{base}/_sim/health")).await.unwrap().text().await.unwrap();
            assert_eq!(health, "ok");
            let config: serde_json::Value =
                reqwest::get(format!("{base}/_sim/config")).await.unwrap().json().await.unwrap();
            assert_eq!(config["latency"]["profile"], "instant");
            assert_eq!(config["throttle"]["enabled"], false);
        });
    });
    child.kill().unwrap();
    child.wait().unwrap();
    result.unwrap();
}

#[test]
fn a_bad_profile_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_xcsp-sim")).args(["--latency", "warp"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown latency profile"));
}

#[test]
fn the_binary_writes_a_kubeconfig_whose_token_the_kubernetes_api_accepts() {
    let path = std::env::temp_dir().join(format!("xcsp-sim-kubeconfig-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_xcsp-sim"))
        .args(["--port", "0", "--latency", "instant", "--kube-token", "t0ken"])
        .arg("--kubeconfig")
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("xcsp-sim starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let result = std::panic::catch_unwind(|| {
        let base = line.trim().strip_prefix("xcsp-sim listening on ").expect("the address line").to_string();
        let kubeconfig = std::fs::read_to_string(&path).expect("the kubeconfig is written before the address line");
        assert!(kubeconfig.contains(&format!("server: {base}\n")), "{kubeconfig}");
        assert!(kubeconfig.contains("token: t0ken\n") && kubeconfig.contains("current-context: xcsp-sim"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let http = reqwest::Client::new();
            let url = format!("{base}/api/v1/namespaces");
            assert_eq!(http.get(&url).send().await.unwrap().status(), 401);
            let ok = http.get(&url).bearer_auth("t0ken").send().await.unwrap();
            assert_eq!(ok.status(), 200);
            let list: serde_json::Value = ok.json().await.unwrap();
            assert_eq!(list["kind"], "NamespaceList");
        });
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_file(&path);
    result.unwrap();
}

#[test]
fn time_scale_takes_a_fraction_and_is_refused_where_it_cannot_apply() {
    let run = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xcsp-sim"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("xcsp-sim starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        (line, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // As BENCHMARKS.md writes it: served, with the scale it says.
    let (line, _) = run(&["--latency", "fast", "--time-scale", "1/60", "--no-throttle"]);
    let base = line.trim().strip_prefix("xcsp-sim listening on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    for (args, says) in [
        (&["--latency", "realistic", "--time-scale", "0.1"][..], "--latency fast only"),
        (&["--latency", "instant", "--time-scale", "1/60"][..], "--latency fast only"),
        (&["--time-scale", "0"][..], "not above 0"),
        (&["--time-scale", "2"][..], "at most 1"),
        (&["--time-scale", "one/60"][..], "not a number"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_xcsp-sim")).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
