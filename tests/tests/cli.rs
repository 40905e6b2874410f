//! The `xcsp` binary's contract with scripts: exit codes and where output goes.

use std::path::Path;
use std::process::Command;

use xcsp_tests::{bin, root};

/// The binary cargo built next to this test (`cargo test --workspace` builds it).
fn xcsp() -> Command {
    Command::new(bin("xcsp"))
}

#[test]
fn detailed_exitcode_is_2_with_changes_and_1_on_errors() {
    let ok = xcsp().args(["plan", "--detailed-exitcode"]).arg(root().join("examples/public")).output().unwrap();
    assert_eq!(ok.status.code(), Some(2), "{}", String::from_utf8_lossy(&ok.stderr));
    let plain = xcsp().arg("plan").arg(root().join("examples/public")).output().unwrap();
    assert_eq!(plain.status.code(), Some(0));
    let bad = xcsp().args(["plan", "--detailed-exitcode"]).arg(root().join("tests/cases/overlap")).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("xcsp::cidr::overlap") && stderr.contains("overlap/spec.xcsp.hcl:"), "{stderr}");
}

/// The plan states its monthly cost, in its text and in `--json`: the same figures, unknown
/// prices said as such (the arithmetic is pinned by `cost`'s unit tests).
#[test]
fn plan_shows_the_monthly_cost_in_text_and_json() {
    let text = xcsp().args(["plan", "--offline"]).arg(root().join("examples/public")).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains("+ aws_vpn_connection.link[0]") && text.contains("+$36.50  a VPN connection in us-east-1"),
        "{text}"
    );
    assert!(text.contains("no price for a VpnGw2AZ VPN gateway in eastus"), "{text}");
    let json = xcsp().args(["plan", "--offline", "--json"]).arg(root().join("examples/public")).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let cost = &v["cost"];
    let total = cost["delta_cents"].as_i64().unwrap();
    let listed: i64 = cost["items"].as_array().unwrap().iter().filter_map(|i| i["after_cents"].as_i64()).sum();
    assert_eq!(total, listed, "{cost}");
    let dollars = format!("This plan: +${}.{:02} a month", total / 100, total % 100);
    assert!(text.contains(&dollars), "{dollars} in {text}");
    assert_eq!(cost["currency"], "USD");
    assert!(v["changes"].is_array(), "the plan itself is unchanged: {v}");
}

#[test]
fn variables_come_from_flags_over_the_environment() {
    // The IL5 example with its resource group and VNet range taken from variables.
    let dir = tempfile::tempdir().unwrap();
    let spec = std::fs::read_to_string(root().join("examples/il5-govcloud/pool.xcsp.hcl")).unwrap();
    let spec = spec
        .replace(r#"resource_group  = "il5-gpu-workers""#, "resource_group  = var.rg")
        .replace(r#"vnet_cidr      = "10.200.0.0/16""#, "vnet_cidr      = var.vnet");
    let spec = format!("variable \"rg\" {{ type = string }}\nvariable \"vnet\" {{ type = string }}\n{spec}");
    std::fs::write(dir.path().join("pool.xcsp.hcl"), spec).unwrap();
    let out = xcsp()
        .args(["plan", "--offline", "--json", "--var", "rg=rg-from-flag"])
        .arg(dir.path())
        .env("XCSP_VAR_rg", "rg-from-env")
        .env("XCSP_VAR_vnet", "10.200.0.0/16")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("rg-from-flag"), "the flag wins");
    assert!(!text.contains("rg-from-env"));
    assert!(text.contains("10.200.0.0/16"), "the environment fills what no flag sets");
}

#[test]
fn graph_is_dot_with_cross_cloud_edges() {
    let out = xcsp().arg("graph").arg(root().join("examples/il5-govcloud")).output().unwrap();
    assert!(out.status.success());
    let dot = String::from_utf8_lossy(&out.stdout);
    assert!(dot.starts_with("digraph xcsp {"));
    assert!(dot.contains("\"azure_public_ip.link[0]\" -> \"aws_customer_gateway.link[0]\""), "{dot}");
    assert!(dot.contains("\"aws_vpn_connection.link[1]\" -> \"azure_local_network_gateway.link[3]\""));
}

#[test]
fn plan_refuses_a_locked_state_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let backend = xcsp_state::local::LocalBackend::new(dir.path());
    let guard = backend.lock("ci-job-42", "apply").unwrap();
    let out =
        xcsp().arg("plan").arg(root().join("examples/public")).arg("--state-dir").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ci-job-42") && stderr.contains(&guard.info.id), "{stderr}");
    drop(guard);
    let out =
        xcsp().arg("plan").arg(root().join("examples/public")).arg("--state-dir").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn preshared_keys_never_reach_plan_output_or_plan_files() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.xcsp.hcl");
    let text = std::fs::read_to_string(root().join("examples/public/pool.xcsp.hcl")).unwrap().replace(
        "azure_asn      = 65020",
        "azure_asn      = 65020\n  preshared_keys = [\"Key.one_SECRET1\", \"Key.two_SECRET2\", \"Key.three_SECRET3\", \"Key.four_SECRET4\"]",
    );
    std::fs::write(&spec, text).unwrap();
    let plan_file = dir.path().join("plan.json");
    for args in [vec!["plan"], vec!["plan", "--json"]] {
        let out = xcsp()
            .args(&args)
            .arg(&spec)
            .arg("--out")
            .arg(&plan_file)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let all = [out.stdout, out.stderr, std::fs::read(&plan_file).unwrap()].concat();
        let all = String::from_utf8_lossy(&all);
        assert!(all.contains("shared_key"), "the keys' attributes should be listed");
        for key in ["SECRET1", "SECRET2", "SECRET3", "SECRET4"] {
            assert!(!all.contains(key), "a pre-shared key leaked with {args:?}");
        }
    }
}

#[test]
fn state_commands_list_show_redacted_remove_and_refuse_going_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.json");
    std::fs::write(
        &file,
        r#"{"version":1,"serial":3,"lineage":"abc","stack":"il5-gpu","resources":{"xcsp_preshared_key.link[0]":{"id":"k","attributes":{"value":{"$sensitive":"Secret_PSK_value_1"}},"dependencies":[]}}}"#,
    )
    .unwrap();
    let state = dir.path().join("state");
    let run = |args: &[&str]| {
        xcsp()
            .args(["state"])
            .args(args)
            .arg(root().join("examples/il5-govcloud"))
            .arg("--state-dir")
            .arg(&state)
            .output()
            .unwrap()
    };
    assert!(run(&["push", file.to_str().unwrap()]).status.success());
    let listed = String::from_utf8_lossy(&run(&["list"]).stdout).to_string();
    assert!(listed.contains("xcsp_preshared_key.link[0]\tk"), "{listed}");
    let shown = run(&["show", "xcsp_preshared_key.link[0]"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("(sensitive value)") && !shown.contains("Secret_PSK_value_1"), "{shown}");
    // An older copy is not pushed over a newer state.
    let older = dir.path().join("older.json");
    std::fs::write(&older, std::fs::read_to_string(&file).unwrap().replace("\"serial\":3", "\"serial\":1")).unwrap();
    assert_eq!(run(&["push", older.to_str().unwrap()]).status.code(), Some(1));
    assert!(run(&["rm", "xcsp_preshared_key.link[0]"]).status.success());
    assert!(String::from_utf8_lossy(&run(&["list"]).stdout).trim().is_empty());
}

#[cfg(unix)]
#[test]
fn state_and_plan_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let plan_file = dir.path().join("plan.json");
    // A plan file already there and world-readable is narrowed when overwritten.
    std::fs::write(&plan_file, "old").unwrap();
    std::fs::set_permissions(&plan_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = xcsp()
        .arg("plan")
        .arg(root().join("examples/il5-govcloud"))
        .arg("--out")
        .arg(&plan_file)
        .arg("--state-dir")
        .arg(&state)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(mode(&plan_file), 0o600);
    let file = dir.path().join("backup.json");
    std::fs::write(&file, r#"{"version":1,"serial":3,"lineage":"abc","stack":"il5-gpu","resources":{}}"#).unwrap();
    // The second push makes state.json.backup.
    for force in [&[][..], &["--force"][..]] {
        let out = push(&file, &state, force);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!((mode(&state.join("state.json")), mode(&state.join("state.json.backup"))), (0o600, 0o600));
}

/// `xcsp state push [FLAGS] FILE` into the IL5 example's stack, state kept in `state`.
fn push(file: &Path, state: &Path, flags: &[&str]) -> std::process::Output {
    xcsp()
        .args(["state", "push"])
        .args(flags)
        .arg(file)
        .arg(root().join("examples/il5-govcloud"))
        .arg("--state-dir")
        .arg(state)
        .output()
        .unwrap()
}

#[test]
fn state_push_refuses_another_stacks_state_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("other.json");
    std::fs::write(&file, r#"{"version":1,"serial":3,"lineage":"abc","stack":"web-prod","resources":{}}"#).unwrap();
    for force in [&[][..], &["--force"][..]] {
        let out = push(&file, &state, force);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{force:?}: {stderr}");
        assert!(stderr.contains("`web-prod`") && stderr.contains("`il5-gpu`"), "{stderr}");
        assert!(!state.join("state.json").exists(), "nothing was written with {force:?}");
    }
}

/// `xcsp` with no state key, backend or encryption setting from the caller's environment.
fn xcsp_env(env: &[(&str, &str)]) -> Command {
    let mut c = xcsp();
    for var in [
        "XCSP_STATE_KEY",
        "XCSP_STATE_KEY_FILE",
        "XCSP_STATE_PASSPHRASE",
        "XCSP_STATE_KEY_OLD",
        "XCSP_STATE_KEY_FILE_OLD",
        "XCSP_STATE_PASSPHRASE_OLD",
        "XCSP_STATE_ENCRYPTION",
        "XCSP_STATE_DIR",
        "XCSP_BACKEND",
    ] {
        c.env_remove(var);
    }
    c.envs(env.iter().copied());
    c
}

#[test]
fn more_than_one_key_variable_is_an_error_naming_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, [2u8; 32]).unwrap();
    let key_file = key_file.to_str().unwrap();
    let cases: [(&[(&str, &str)], &[&str]); 2] = [
        (&[("XCSP_STATE_KEY", key), ("XCSP_STATE_PASSPHRASE", "pass")], &["XCSP_STATE_KEY and XCSP_STATE_PASSPHRASE"]),
        (
            &[("XCSP_STATE_KEY_OLD", key), ("XCSP_STATE_KEY_FILE_OLD", key_file), ("XCSP_STATE_PASSPHRASE_OLD", "old")],
            &["XCSP_STATE_KEY_OLD, XCSP_STATE_KEY_FILE_OLD and XCSP_STATE_PASSPHRASE_OLD"],
        ),
    ];
    for (env, named) in cases {
        let out = xcsp_env(env)
            .arg("plan")
            .arg(root().join("examples/public"))
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("xcsp::state::key_sources") && stderr.contains("unset"), "{stderr}");
        for n in named {
            assert!(stderr.contains(n), "{n} in {stderr}");
        }
    }
    // One variable alone is fine.
    let out = xcsp_env(&[("XCSP_STATE_KEY", key)])
        .arg("plan")
        .arg(root().join("examples/public"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn sealed_state_and_plan_files_hold_no_psk_need_the_key_and_rotate() {
    use xcsp_state::crypto::Codec;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let spec = dir.path().join("spec.xcsp.hcl");
    let text = std::fs::read_to_string(root().join("examples/public/pool.xcsp.hcl")).unwrap().replace(
        "azure_asn      = 65020",
        "azure_asn      = 65020\n  preshared_keys = [\"Key.one_SECRET1\", \"Key.two_SECRET2\", \"Key.three_SECRET3\", \"Key.four_SECRET4\"]",
    );
    std::fs::write(&spec, format!("{text}\nbackend \"local\" {{\n  path = \"{}\"\n}}\n", state.display())).unwrap();
    let backup = dir.path().join("backup.json");
    std::fs::write(
        &backup,
        r#"{"version":1,"serial":3,"lineage":"abc","stack":"demo-k8x2q","resources":{
            "xcsp_preshared_key.link[0]":{"id":"k0","attributes":{"value":{"$sensitive":"Key.one_SECRET1"}},"dependencies":[]},
            "xcsp_preshared_key.link[1]":{"id":"k1","attributes":{"value":{"$sensitive":"Key.two_SECRET2"}},"dependencies":[]}}}"#,
    )
    .unwrap();
    let key_a = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="; // 32 bytes of 1
    let key_b_file = dir.path().join("key-b");
    std::fs::write(&key_b_file, [2u8; 32]).unwrap();
    let key_b_file = key_b_file.to_str().unwrap();
    let with_a = [("XCSP_STATE_KEY", key_a)];
    let with_b = [("XCSP_STATE_KEY_FILE", key_b_file)];
    let state_cmd =
        |env: &[(&str, &str)], args: &[&str]| xcsp_env(env).arg("state").args(args).arg(&spec).output().unwrap();
    let ok = |out: std::process::Output| {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let no_secret = |bytes: &[u8], what: &str| {
        assert!(!bytes.windows(6).any(|w| w == b"SECRET"), "a pre-shared key is in the bytes of {what}");
        assert!(Codec::is_sealed(bytes), "{what} is not sealed");
    };

    // Stored sealed: no pre-shared key in any byte of the state file.
    ok(state_cmd(&with_a, &["push", backup.to_str().unwrap()]));
    no_secret(&std::fs::read(state.join("state.json")).unwrap(), "the state");
    // Decrypted, secrets are still marked: `show` redacts them unless asked.
    let shown = ok(state_cmd(&with_a, &["show", "xcsp_preshared_key.link[0]"]));
    assert!(shown.contains("(sensitive value)") && !shown.contains("SECRET"), "{shown}");
    let clear = ok(state_cmd(&with_a, &["show", "--show-sensitive", "xcsp_preshared_key.link[0]"]));
    assert!(clear.contains("Key.one_SECRET1"), "{clear}");
    // The plan file is sealed the same way.
    let plan_file = dir.path().join("plan.bin");
    let plan = xcsp_env(&with_a)
        .args(["plan", "--offline", "--refresh=false", "--out"])
        .arg(&plan_file)
        .arg(&spec)
        .output()
        .unwrap();
    assert!(plan.status.success(), "{}", String::from_utf8_lossy(&plan.stderr));
    no_secret(&std::fs::read(&plan_file).unwrap(), "the plan file");

    // A wrong key, or none: a clear error.
    let wrong = state_cmd(&with_b, &["list"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("cannot be decrypted"), "{wrong:?}");
    let keyless = state_cmd(&[], &["list"]);
    assert!(String::from_utf8_lossy(&keyless.stderr).contains("XCSP_STATE_KEY"), "{keyless:?}");

    // Rotation: read with the old key, write with the new (here from a key file).
    ok(state_cmd(
        &[("XCSP_STATE_KEY_FILE", key_b_file), ("XCSP_STATE_KEY_OLD", key_a)],
        &["rm", "xcsp_preshared_key.link[1]"],
    ));
    assert_eq!(state_cmd(&with_a, &["list"]).status.code(), Some(1), "the old key no longer opens it");
    assert_eq!(ok(state_cmd(&with_b, &["list"])).trim(), "xcsp_preshared_key.link[0]\tk0");
    no_secret(&std::fs::read(state.join("state.json")).unwrap(), "the rotated state");

    // Enforced (by the spec's backend block or the environment): plaintext is neither read nor written.
    let plain = dir.path().join("plain");
    ok(xcsp_env(&[]).args(["state", "push"]).arg(&backup).arg(&spec).arg("--state-dir").arg(&plain).output().unwrap());
    let enforced_spec = dir.path().join("enforced.xcsp.hcl");
    std::fs::write(&enforced_spec, format!("{text}\nbackend \"local\" {{\n  encryption = \"enforced\"\n}}\n")).unwrap();
    for (spec, env) in [(&enforced_spec, vec![]), (&spec, vec![("XCSP_STATE_ENCRYPTION", "enforced")])] {
        let mut env = env;
        env.push(("XCSP_STATE_KEY", key_a));
        let out = xcsp_env(&env).args(["state", "list"]).arg(spec).arg("--state-dir").arg(&plain).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("enforced"), "{out:?}");
    }
    let unsealed_plan = dir.path().join("unsealed.bin");
    let out = xcsp_env(&[])
        .args(["plan", "--offline", "--out"])
        .arg(&unsealed_plan)
        .arg(&enforced_spec)
        .arg("--state-dir")
        .arg(dir.path().join("empty"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!unsealed_plan.exists(), "no plaintext plan file is written when encryption is enforced");
}

/// moto's S3 on a loopback port (scripts/moto-setup installs it), killed when dropped.
struct MotoS3 {
    url: String,
    child: std::process::Child,
}

impl MotoS3 {
    fn start() -> MotoS3 {
        let venv = std::env::var("XCSP_MOTO_VENV")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/xcsp-moto"));
        let bin = venv.join("bin/moto_server");
        assert!(bin.exists(), "moto is not installed at {}: run scripts/moto-setup", bin.display());
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "moto did not listen within 30 s");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        MotoS3 { url: format!("http://127.0.0.1:{port}"), child }
    }

    /// A bucket, with versioning on if asked.
    fn bucket(&self, name: &str, versioned: bool) {
        let put = |path: &str, body: &str| {
            let url = format!("{}{path}", self.url);
            let ok = Command::new("curl")
                .args(["-sf", "-X", "PUT", "-H", "Content-Type: application/xml", "--data", body, &url])
                .status()
                .unwrap();
            assert!(ok.success(), "PUT {path} to moto");
        };
        put(&format!("/{name}"), "");
        if versioned {
            put(
                &format!("/{name}?versioning"),
                r#"<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>"#,
            );
        }
    }
}

impl Drop for MotoS3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `xcsp` with the S3 backend at `endpoint` (no state key unless `env` sets one).
fn xcsp_s3(endpoint: &str, bucket: &str, env: &[(&str, &str)]) -> Command {
    let mut c = xcsp_env(env);
    c.envs([
        ("XCSP_BACKEND", "s3"),
        ("XCSP_BACKEND_BUCKET", bucket),
        ("XCSP_BACKEND_ENDPOINT", endpoint),
        ("XCSP_BACKEND_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "local"),
        ("AWS_SECRET_ACCESS_KEY", "local"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]);
    c
}

#[test]
fn sealing_a_plaintext_state_in_a_versioned_bucket_warns_once_how_to_purge_the_old_versions() {
    let moto = MotoS3::start();
    moto.bucket("teams", true);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.json");
    std::fs::write(
        &file,
        r#"{"version":1,"serial":3,"lineage":"abc","stack":"il5-gpu","resources":{
            "xcsp_preshared_key.link[0]":{"id":"k0","attributes":{"value":{"$sensitive":"Secret_PSK_value_0"}},"dependencies":[]},
            "xcsp_preshared_key.link[1]":{"id":"k1","attributes":{"value":{"$sensitive":"Secret_PSK_value_1"}},"dependencies":[]}}}"#,
    )
    .unwrap();
    let key = [("XCSP_STATE_KEY", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=")];
    let state = |env: &[(&str, &str)], args: &[&str]| {
        let out = xcsp_s3(&moto.url, "teams", env)
            .arg("state")
            .args(args)
            .arg(root().join("examples/il5-govcloud"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    // Plaintext first (no key).
    let quiet = state(&[], &["push", file.to_str().unwrap()]);
    assert!(!quiet.contains("plaintext_versions"), "{quiet}");
    // The first write with a key seals the state, and says the older version stays plaintext.
    let warned = state(&key, &["rm", "xcsp_preshared_key.link[1]"]);
    for part in [
        "xcsp::state::plaintext_versions",
        "s3://teams/il5-gpu/state.json",
        "keeps an older version of il5-gpu/state.json",
        "aws s3api list-object-versions --bucket teams --prefix il5-gpu/state.json",
        "--version-id",
    ] {
        assert!(warned.contains(part), "`{part}` missing from: {warned}");
    }
    // Once: sealed over sealed is no news.
    let again = state(&key, &["rm", "xcsp_preshared_key.link[0]"]);
    assert!(!again.contains("plaintext_versions"), "{again}");
}

/// A web server that answers every request with a 404 page, as an endpoint that is not S3 would
/// (a website, a proxy); its URL.
fn web_server_404() -> String {
    use std::io::{Read, Write};
    const PAGE: &str = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n";
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let (mut seen, mut buf) = (Vec::new(), [0u8; 4096]);
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 404 Not Found\r\nServer: nginx/1.25.3\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    PAGE.len()
                );
                let _ = stream.write_all(format!("{head}{PAGE}").as_bytes());
                let _ = stream.shutdown(std::net::Shutdown::Write);
                // Drain what the client still sends, so closing does not reset the answer.
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    url
}

#[test]
fn plan_over_an_s3_endpoint_that_is_a_web_server_fails_in_one_line_naming_it() {
    let url = web_server_404();
    let out = xcsp_s3(&url, "teams", &[])
        .args(["plan", "--offline", "--detailed-exitcode"])
        .arg(root().join("examples/il5-govcloud"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "an error, not a plan");
    assert!(out.stdout.is_empty(), "no plan is shown: {}", String::from_utf8_lossy(&out.stdout));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("xcsp::state::not_s3"), "{stderr}");
    // miette wraps long lines: compare the words.
    let words = stderr.split_whitespace().filter(|w| *w != "│").collect::<Vec<_>>().join(" ");
    let expected = format!(
        "taking the lock at s3://teams/il5-gpu/state.json.lock: {url} answered HTTP 404 from nginx/1.25.3 (text/html: \"404 Not Found nginx/1.25.3\"), which is not S3"
    );
    assert!(words.contains(&expected), "{stderr}");
    for dump in ["ServiceError", "ErrorMetadata", "SdkBody", "<html>"] {
        assert!(!stderr.contains(dump), "`{dump}` in {stderr}");
    }
}

#[test]
fn version_names_the_commit_and_completions_come_from_the_command_definition() {
    let out = xcsp().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let (first, crypto) = text.trim().split_once('\n').unwrap_or_else(|| panic!("{text}"));
    // The workspace builds the default features: the FIPS build, which names its module.
    assert!(crypto.starts_with("crypto: FIPS build: AWS-LC FIPS module") && crypto.contains("FIPS 140-3"), "{text}");
    let version = first.strip_prefix("xcsp ").unwrap_or_else(|| panic!("{text}"));
    let (number, commit) = version.split_once(" (").unwrap_or_else(|| panic!("{text}"));
    assert_eq!(number, env!("CARGO_PKG_VERSION"));
    let commit = commit.trim_end_matches(')');
    assert!(commit == "unknown" || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())), "{text}");
    for (shell, marker) in [("bash", "complete -F"), ("zsh", "#compdef xcsp"), ("fish", "complete -c xcsp")] {
        let out = xcsp().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: {}", &script[..script.len().min(200)]);
        assert!(script.contains("force-unlock"), "{shell}: the subcommands are in it");
    }
    assert!(!xcsp().args(["completions", "tcsh"]).output().unwrap().status.success());
}

/// A TLS listener whose certificate is `localhost`'s (its CA PEM returned) and whose only suites
/// are ChaCha20-Poly1305's, which FIPS 140 does not approve; every handshake is served on a thread.
fn chacha_only_cluster() -> (u16, String) {
    use std::sync::Arc;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = rustls::pki_types::CertificateDer::from(certified.cert.der().to_vec());
    let key = rustls::pki_types::PrivateKeyDer::try_from(certified.signing_key.serialize_der()).unwrap();
    let config = Arc::new(xcsp_crypto::chacha_only_server_config(cert, key).unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut conn = rustls::ServerConnection::new(config).unwrap();
                let _ = conn.complete_io(&mut stream);
            });
        }
    });
    (port, certified.cert.pem())
}

/// In the FIPS build, a cluster whose API server offers only a suite FIPS does not approve is
/// refused, and the error says it is the FIPS build that refused and what it offers.
#[test]
fn a_fips_build_refuses_a_cluster_offering_only_chacha20_and_says_why() {
    let (port, ca) = chacha_only_cluster();
    let dir = tempfile::tempdir().unwrap();
    let ca_b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca);
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: https://localhost:{port}\n    certificate-authority-data: {ca_b64}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    let out =
        xcsp().arg("preflight").arg(root().join("examples/public")).env("KUBECONFIG", &kubeconfig).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The diagnostic is wrapped to the terminal's width: its words, in order.
    let words: Vec<&str> = stderr.split_whitespace().filter(|w| !w.chars().all(|c| "│×╭╰─".contains(c))).collect();
    let flat = words.join(" ");
    assert!(flat.contains("HandshakeFailure") && flat.contains("this xcsp is a FIPS build"), "{stderr}");
}

/// `xcsp state reseal` writes the state back sealed with the configured key and this build's
/// derivation (format 2, PBKDF2-HMAC-SHA256), which the same key then opens; without a key it
/// says there is nothing to seal and writes nothing.
#[test]
fn state_reseal_writes_the_state_back_sealed_with_pbkdf2() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("plain.json");
    std::fs::write(&file, r#"{"version":1,"serial":4,"lineage":"abc","stack":"il5-gpu","resources":{}}"#).unwrap();
    let spec = root().join("examples/il5-govcloud");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        xcsp_env(env).args(args).arg(&spec).arg("--state-dir").arg(&state).output().unwrap()
    };
    let pushed = run(&["state", "push", file.to_str().unwrap()], &[]);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    let none = run(&["state", "reseal"], &[]);
    assert!(String::from_utf8_lossy(&none.stdout).contains("nothing to re-seal"), "{none:?}");
    assert!(!String::from_utf8_lossy(&std::fs::read(state.join("state.json")).unwrap()).contains("xcsp_encrypted"));

    let pass = [("XCSP_STATE_PASSPHRASE", "correct horse battery")];
    let resealed = run(&["state", "reseal"], &pass);
    assert!(resealed.status.success(), "{}", String::from_utf8_lossy(&resealed.stderr));
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(state.join("state.json")).unwrap()).unwrap();
    assert_eq!(stored["xcsp_encrypted"], 2, "{stored}");
    assert_eq!(stored["kdf"]["alg"], "pbkdf2-sha256", "{stored}");
    let listed = run(&["state", "list"], &pass);
    assert!(listed.status.success(), "the same passphrase opens it: {}", String::from_utf8_lossy(&listed.stderr));
    let refused = run(&["state", "list"], &[("XCSP_STATE_PASSPHRASE", "wrong")]);
    assert_eq!(refused.status.code(), Some(1));
}
