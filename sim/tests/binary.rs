//! The `xcsp-sim` binary: prints its addresses on one machine-readable line (the plain port, the
//! world's cluster's API server or `none`) and serves there; with `--upstream`, `--kubeconfig`
//! writes a kubeconfig for the cluster's API server, with the CA that signed its certificate and
//! a token it accepts. The cluster's programs are in `XCSP_UPSTREAM_BIN` (`scripts/test` sets it).

use base64::Engine as _;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// `xcsp-sim listening on http://127.0.0.1:PORT kubernetes https://127.0.0.1:PORT|none`: (plain, kube).
fn addresses(line: &str) -> (String, String) {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["xcsp-sim", "listening", "on", base, "kubernetes", kube] => (base.to_string(), kube.to_string()),
        _ => panic!("unexpected first line {line:?}"),
    }
}

#[test]
fn the_binary_prints_its_addresses_and_serves_with_the_requested_profile() {
    // This process's reqwest takes its TLS from the process-wide provider (the product's module).
    xcsp_crypto::install().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xcsp-sim"))
        .args(["--port", "0", "--latency", "instant", "--no-throttle"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("xcsp-sim starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let result = std::panic::catch_unwind(|| {
        let (base, kube) = addresses(&line);
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        assert_eq!(kube, "none", "no cluster without --upstream");
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
fn with_upstream_the_binary_writes_a_kubeconfig_whose_token_the_api_server_accepts() {
    // This process's reqwest takes its TLS from the process-wide provider (the product's module).
    xcsp_crypto::install().unwrap();
    let path = std::env::temp_dir().join(format!("xcsp-sim-kubeconfig-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_xcsp-sim"))
        .args(["--port", "0", "--latency", "instant", "--upstream"])
        .arg("--kubeconfig")
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("xcsp-sim starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let result = std::panic::catch_unwind(|| {
        let (_, kube) = addresses(&line);
        let kubeconfig = std::fs::read_to_string(&path).expect("the kubeconfig is written before the address line");
        assert!(kubeconfig.contains(&format!("server: {kube}\n")), "{kubeconfig}");
        assert!(kubeconfig.contains("current-context: xcsp-world"), "{kubeconfig}");
        let token = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .expect("the token is in the kubeconfig")
            .to_string();
        let ca = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
            .expect("the CA is in the kubeconfig");
        let ca = base64::engine::general_purpose::STANDARD.decode(ca).expect("base64");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let http = reqwest::Client::builder()
                .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("the CA is PEM"))
                .build()
                .unwrap();
            let url = format!("{kube}/api/v1/namespaces");
            let anonymous = http.get(&url).send().await.unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(anonymous.status(), 403, "an anonymous request may list nothing");
            let ok = http.get(&url).bearer_auth(&token).send().await.unwrap();
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
    let (base, _) = addresses(&line);
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
