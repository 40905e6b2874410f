//! The Kubernetes API over TLS: the kubeconfig `/_sim/kubeconfig` answers names the TLS port and
//! carries the sim's CA, and the real `kube` client lists through it (by IP and by `localhost`);
//! the token is still required; plain HTTP to the TLS port gets Go's answer and reaches nothing,
//! and the plain port refuses Kubernetes paths naming the TLS one; a client that does not trust
//! the sim's CA is refused before any request is served; kubectl (or, where it is not installed,
//! the Kubernetes Python client of the peers venv) lists namespaces with the kubeconfig.

use base64::Engine as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Command;
use xcsp_sim::{SimConfig, SimServer};

fn start() -> SimServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = SimServer::start(SimConfig::default(), 0).expect("sim starts");
    server.sim.world.patch_config(&serde_json::json!({"latency": {"profile": "instant"}})).expect("profile");
    server
}

async fn client_for(kubeconfig: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config");
    kube::Client::try_from(config).expect("client")
}

async fn namespaces(kubeconfig: &str) -> Result<Vec<String>, kube::Error> {
    let api: Api<Namespace> = Api::all(client_for(kubeconfig).await);
    Ok(api.list(&ListParams::default()).await?.items.into_iter().filter_map(|n| n.metadata.name).collect())
}

/// The error and all its sources, one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Kubernetes requests the sim counted (`kube <verb> <resource>`).
async fn kube_requests(server: &SimServer) -> Vec<String> {
    let counters: Value =
        reqwest::get(format!("{}/_sim/counters", server.base_url)).await.unwrap().json().await.unwrap();
    counters["requests"].as_object().unwrap().keys().filter(|k| k.starts_with("kube ")).cloned().collect()
}

/// `kubeconfig` with its `certificate-authority-data` replaced by `ca_pem`'s (or dropped).
fn with_ca(kubeconfig: &str, ca_pem: Option<&str>) -> String {
    kubeconfig
        .lines()
        .filter_map(|l| match l.trim_start().strip_prefix("certificate-authority-data:") {
            None => Some(l.to_string()),
            Some(_) => ca_pem.map(|pem| {
                format!("    certificate-authority-data: {}", base64::engine::general_purpose::STANDARD.encode(pem))
            }),
        })
        .map(|l| l + "\n")
        .collect()
}

#[tokio::test]
async fn the_served_kubeconfig_names_the_tls_port_and_its_ca_and_the_kube_client_lists_through_it() {
    let server = start();
    let text = reqwest::get(format!("{}/_sim/kubeconfig", server.base_url)).await.unwrap().text().await.unwrap();
    assert_eq!(text, server.kubeconfig());
    let kc = Kubeconfig::from_yaml(&text).unwrap();
    let cluster = kc.clusters[0].cluster.as_ref().unwrap();
    assert!(
        server.kube_url.starts_with("https://127.0.0.1:") && server.kube_addr != server.addr,
        "{}",
        server.kube_url
    );
    assert_eq!(cluster.server.as_deref(), Some(server.kube_url.as_str()));
    assert_ne!(cluster.insecure_skip_tls_verify, Some(true));
    let ca = base64::engine::general_purpose::STANDARD.decode(cluster.certificate_authority_data.as_ref().unwrap());
    let ca = String::from_utf8(ca.unwrap()).unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert_eq!(ca, server.sim.kube.endpoint.ca_pem);

    // The server certificate names IP 127.0.0.1 and DNS localhost: both verify.
    for kubeconfig in [text.clone(), text.replace("https://127.0.0.1:", "https://localhost:")] {
        let names = namespaces(&kubeconfig).await.unwrap_or_else(|e| panic!("{}", chain(&e)));
        assert!(
            names.iter().any(|n| n == "default") && names.iter().any(|n| n == "openshift-cluster-api"),
            "{names:?}"
        );
    }
    assert!(kube_requests(&server).await.contains(&"kube list namespaces".to_string()));

    // Over TLS the bearer token is still what lets a request in.
    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap();
    let url = format!("{}/api/v1/namespaces", server.kube_url);
    assert_eq!(trusting.get(&url).send().await.unwrap().status(), 401);
    let ok = trusting.get(&url).bearer_auth(&server.sim.kube.token).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.json::<Value>().await.unwrap()["kind"], "NamespaceList");
    // The TLS port serves the Kubernetes API only: the admin API is not there.
    let admin = trusting.get(format!("{}/_sim/health", server.kube_url)).bearer_auth(&server.sim.kube.token);
    assert_eq!(admin.send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn plain_http_to_the_tls_port_gets_gos_answer_and_the_plain_port_names_the_tls_one() {
    let server = start();
    let token = server.sim.kube.token.clone();
    let addr = server.kube_addr;
    let raw = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let request =
            format!("GET /api/v1/namespaces HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n");
        s.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    })
    .await
    .unwrap();
    assert_eq!(raw, xcsp_sim::tls::PLAIN_HTTP_ANSWER);
    let plain = reqwest::get(format!("http://{addr}/version")).await.unwrap();
    assert_eq!(plain.status(), 400);
    assert_eq!(plain.text().await.unwrap(), "Client sent an HTTP request to an HTTPS server.\n");
    // The kube client told to speak http to the TLS port gets nothing it can use.
    let http = server.kubeconfig().replace("https://", "http://");
    let e = namespaces(&http).await.expect_err("plain http to the TLS port must fail");
    assert!(chain(&e).contains("400") || chain(&e).contains("Client sent an HTTP request"), "{}", chain(&e));

    // The plain port answers Kubernetes paths with where the API is, never as an (empty) cluster.
    let refused = reqwest::Client::new()
        .get(format!("{}/api/v1/namespaces", server.base_url))
        .bearer_auth(&server.sim.kube.token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let status: Value = refused.json().await.unwrap();
    assert_eq!((status["kind"].as_str(), status["reason"].as_str()), (Some("Status"), Some("BadRequest")));
    assert!(status["message"].as_str().unwrap().contains(&server.kube_url), "{status}");
    assert_eq!(kube_requests(&server).await, vec!["kube plain-http".to_string()], "nothing reached the API");
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_sims_ca_is_refused_before_any_request_is_served() {
    let server = start();
    let other = start();
    // Another sim's CA (each start makes its own), and none (the system's roots only).
    for ca in [Some(other.sim.kube.endpoint.ca_pem.as_str()), None] {
        let kubeconfig = with_ca(&server.kubeconfig(), ca);
        let ours = base64::engine::general_purpose::STANDARD.encode(&server.sim.kube.endpoint.ca_pem);
        assert!(!kubeconfig.contains(&ours) && kubeconfig.contains("token:"), "{kubeconfig}");
        let e = namespaces(&kubeconfig).await.expect_err("an untrusted server certificate must be refused");
        let said = chain(&e);
        assert!(said.contains("UnknownIssuer") || said.contains("certificate"), "{said}");
    }
    assert!(kube_requests(&server).await.is_empty(), "a request got through: {:?}", kube_requests(&server).await);
    // The same kubeconfig with the sim's own CA back in works: the refusal was the CA's doing.
    let restored = with_ca(&server.kubeconfig(), Some(&server.sim.kube.endpoint.ca_pem));
    assert!(namespaces(&restored).await.unwrap().contains(&"default".to_string()));
}

/// `kubectl` on PATH, if any.
fn kubectl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("kubectl")).find(|p| p.is_file())
}

/// The Python of the pinned peers venv (`scripts/peers-setup`), which has the Kubernetes client.
fn peers_python() -> PathBuf {
    let dir = match std::env::var_os("XCSP_PEERS_VENV") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/xcsp-peers"),
    };
    let python = dir.join("bin/python");
    assert!(
        python.exists(),
        "kubectl is not on PATH and the peer-client venv is missing at {}: run scripts/peers-setup \
         (scripts/test does) or install kubectl, and run the tests again",
        dir.display()
    );
    python
}

/// Lists namespaces with `kubeconfig` through kubectl, or the Kubernetes Python client without it:
/// (success, stdout, stderr, which tool).
fn list_namespaces_with_a_peer_client(
    kubeconfig: &std::path::Path,
    scratch: &std::path::Path,
) -> (bool, String, String, String) {
    let (mut cmd, tool) = match kubectl() {
        Some(kubectl) => {
            let mut c = Command::new(&kubectl);
            c.arg("--kubeconfig").arg(kubeconfig).arg("--cache-dir").arg(scratch.join("cache"));
            c.args(["get", "namespaces", "-o", "name", "--request-timeout", "20s"]);
            (c, kubectl.display().to_string())
        }
        None => {
            let mut c = Command::new(peers_python());
            c.args([
                "-c",
                "import sys\nfrom kubernetes import client, config\nconfig.load_kube_config(config_file=sys.argv[1])\n\
                 for n in client.CoreV1Api().list_namespace(_request_timeout=20).items:\n    print('namespace/' + n.metadata.name)\n",
            ]);
            c.arg(kubeconfig);
            (c, "the Kubernetes Python client (peers venv)".to_string())
        }
    };
    let out = cmd
        .env("HOME", scratch)
        .env_remove("KUBECONFIG")
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("SSL_CERT_FILE")
        .output()
        .expect("the peer client runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        tool,
    )
}

#[test]
fn kubectl_or_the_python_client_lists_namespaces_over_tls_with_the_kubeconfig_and_refuses_another_ca() {
    let server = start();
    let other = start();
    let scratch = std::env::temp_dir().join(format!("xcsp-sim-kube-tls-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let good = scratch.join("kubeconfig");
    std::fs::write(&good, server.kubeconfig()).unwrap();
    let bad = scratch.join("kubeconfig-other-ca");
    std::fs::write(&bad, with_ca(&server.kubeconfig(), Some(&other.sim.kube.endpoint.ca_pem))).unwrap();

    let (ok, stdout, stderr, tool) = list_namespaces_with_a_peer_client(&good, &scratch);
    println!("listed with {tool}:\n{stdout}");
    assert!(ok, "{tool} failed:\n{stdout}\n{stderr}");
    let names: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(
        names.contains(&"namespace/default") && names.contains(&"namespace/openshift-cluster-api"),
        "{tool}: {stdout}\n{stderr}"
    );

    let (ok, stdout, stderr, tool) = list_namespaces_with_a_peer_client(&bad, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(!ok, "{tool} listed with a CA that did not sign the server certificate:\n{stdout}");
    assert!(stderr.to_ascii_lowercase().contains("certificate"), "{tool}: {stderr}");
}
