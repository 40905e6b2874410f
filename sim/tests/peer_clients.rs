//! The peer-client conformance suite: the sim driven by clients this project did not write,
//! from PyPI at pinned versions (`scripts/peers-setup` makes the venv): boto3 against the EC2 VPN
//! layer, and the Azure SDK for Python (azure-identity, azure-mgmt-resource, azure-mgmt-network)
//! against Entra and ARM. (The world's Kubernetes cluster is upstream's own, so no peer client
//! checks it.) The scripts are in `sim/peers/`; each starts from
//! a fresh `xcsp-sim` binary and prints `peer-clients SUITE passed=N differ=M failed=K` last.
//! A missing venv fails the test; it never skips.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

fn venv() -> PathBuf {
    let dir = match std::env::var_os("XCSP_PEERS_VENV") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/xcsp-peers"),
    };
    let python = dir.join("bin/python");
    assert!(
        python.exists() && dir.join(".xcsp-pin").exists(),
        "the peer-client venv is missing at {}: run scripts/peers-setup (scripts/test does) and run the tests again",
        dir.display()
    );
    dir
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// A running `xcsp-sim` binary, killed on drop.
struct Sim {
    child: Child,
    url: String,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_sim(aws: bool) -> Sim {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xcsp-sim"));
    cmd.args(["--port", "0", "--latency", "fast", "--no-throttle"]);
    if aws {
        // moto runs behind the layer for the VPC; scripts/moto-setup installs it.
        cmd.arg("--aws");
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("xcsp-sim starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the address line");
    // `xcsp-sim listening on http://127.0.0.1:PORT kubernetes none`
    let url = line
        .trim()
        .strip_prefix("xcsp-sim listening on ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    if aws {
        let mut second = String::new();
        out.read_line(&mut second).expect("the aws line");
        assert!(second.starts_with("xcsp-sim aws: EC2 on"), "moto did not start (run scripts/moto-setup): {second:?}");
    }
    // Keep reading stdout so the sim never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    Sim { child, url }
}

/// Runs one script against a fresh sim; asserts it passed and returns (passed, differ).
fn run(suite: &str, script: &str, aws: bool) -> (u32, u32) {
    let venv = venv();
    let sim = start_sim(aws);
    let started = Instant::now();
    let out = Command::new(venv.join("bin/python"))
        .arg(repo().join("sim/peers").join(script))
        .current_dir(repo().join("sim/peers"))
        .env("XCSP_SIM_URL", &sim.url)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("AWS_PROFILE")
        .env_remove("KUBECONFIG")
        .output()
        .expect("the venv's python runs");
    drop(sim);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    let summary = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(&format!("peer-clients {suite} ")))
        .unwrap_or_else(|| panic!("{script} printed no summary (exit {:?}):\n{stdout}\n{stderr}", out.status));
    let count = |key: &str| -> u32 {
        summary
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {summary:?}"))
    };
    let (passed, differ, failed) = (count("passed"), count("differ"), count("failed"));
    println!("{suite}: {passed} passed, {differ} known divergences, {failed} failed in {:?}", started.elapsed());
    assert!(out.status.success() && failed == 0, "{script}: {failed} checks failed (see above)");
    (passed, differ)
}

#[test]
fn boto3_drives_the_ec2_vpn_layer() {
    let (passed, differ) = run("aws-ec2", "aws_ec2.py", true);
    assert_eq!((passed, differ), (14, 1), "the check counts recorded in sim/README.md changed");
}

#[test]
fn the_azure_sdk_for_python_drives_entra_and_arm() {
    let (passed, differ) = run("azure-arm", "azure_arm.py", false);
    assert_eq!((passed, differ), (15, 1), "the check counts recorded in sim/README.md changed");
}
