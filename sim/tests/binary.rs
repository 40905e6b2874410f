//! The `xcsp-sim` binary: prints its address on one machine-readable line and serves there.

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
