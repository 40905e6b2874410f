//! Test harness: an in-process sim plus a raw HTTP client that validates every request body it
//! sends and every response body it receives against the reference Swagger specs.

#![allow(dead_code)]

/// The tests' deadlines for upstream controllers' actions, derived from the world's timing: the
/// workspace tests' own module, shared by path (no dependency between the two test crates).
#[path = "../../../tests/src/bounds.rs"]
pub mod bounds;
pub mod kube_client;
pub mod swagger;

/// The world's timing as `GET /_sim/timing` reports it.
pub async fn timing(base: &str) -> bounds::Timing {
    let json: Value = reqwest::get(format!("{base}/_sim/timing")).await.unwrap().json().await.unwrap();
    bounds::Timing::new(json)
}

use serde_json::{Value, json};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use swagger::Specs;
use xcsp_sim::{SimConfig, SimServer};

pub const SUB: &str = "00000000-0000-0000-0000-0000000000aa";
pub const TENANT: &str = "tenant-1";

static SPECS: OnceLock<Arc<Specs>> = OnceLock::new();

pub fn specs() -> Arc<Specs> {
    SPECS.get_or_init(|| Arc::new(Specs::load())).clone()
}

/// A response as seen by the harness.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Option<Value>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(String::from)
    }
    pub fn code(&self) -> String {
        self.body.as_ref().and_then(|b| b["error"]["code"].as_str()).unwrap_or_default().to_string()
    }
    pub fn json(&self) -> &Value {
        self.body.as_ref().expect("a JSON body")
    }
}

/// The harness.
pub struct Harness {
    pub server: SimServer,
    pub base: String,
    pub http: reqwest::Client,
    pub specs: Arc<Specs>,
    token: Mutex<String>,
    pub violations: Mutex<Vec<String>>,
    /// (request bodies validated, response bodies validated)
    pub checked: Mutex<(usize, usize)>,
}

/// A sim with the world's cluster (the upstream programs in `XCSP_UPSTREAM_BIN`, which
/// `scripts/test` sets) and a client of its API server as its admin. Fails, never skips, when the
/// cluster cannot start.
pub async fn with_cluster(config: SimConfig) -> (SimServer, kube::Client) {
    let server = SimServer::start_with_cluster_async(config)
        .await
        .unwrap_or_else(|e| panic!("the sim and its cluster start: {e}"));
    let client = server.client().await.expect("a client of the cluster");
    (server, client)
}

impl Harness {
    pub async fn new(config: SimConfig) -> Harness {
        Harness::on(SimServer::start(config, 0).expect("sim starts")).await
    }

    /// The harness on a sim with the world's cluster ([`with_cluster`]) and its admin client.
    pub async fn with_cluster(config: SimConfig) -> (Harness, kube::Client) {
        let (server, client) = with_cluster(config).await;
        (Harness::on(server).await, client)
    }

    /// The harness on a sim whose cluster is started with `cluster` (CAPZ's manager, say).
    pub async fn with_cluster_config(
        config: SimConfig,
        cluster: xcsp_sim::cluster::ClusterConfig,
    ) -> (Harness, kube::Client) {
        let server = tokio::task::spawn_blocking(move || SimServer::start_with_cluster(config, 0, cluster))
            .await
            .expect("the start's task")
            .unwrap_or_else(|e| panic!("the sim and its cluster start: {e}"));
        let client = server.client().await.expect("a client of the cluster");
        (Harness::on(server).await, client)
    }

    async fn on(server: SimServer) -> Harness {
        let h = Harness {
            base: server.base_url.clone(),
            server,
            http: reqwest::Client::new(),
            specs: specs(),
            token: Mutex::new(String::new()),
            violations: Mutex::new(Vec::new()),
            checked: Mutex::new((0, 0)),
        };
        h.login().await;
        h
    }

    /// Instant profile, no throttling: for tests about shapes rather than timing.
    pub async fn instant() -> Harness {
        let mut c = SimConfig::default();
        c.latency.profile = xcsp_sim::Profile::Instant;
        c.throttle.enabled = false;
        Harness::new(c).await
    }

    pub async fn login(&self) {
        let r = self
            .http
            .post(format!("{}/{TENANT}/oauth2/v2.0/token", self.base))
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", "harness"),
                ("client_secret", "secret"),
                ("scope", "https://management.azure.com/.default"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let v: Value = r.json().await.unwrap();
        assert!(v["ext_expires_in"].is_u64(), "azure_identity 0.21 needs ext_expires_in: {v}");
        *self.token.lock().unwrap() = v["access_token"].as_str().unwrap().to_string();
    }

    /// Sends one ARM request, validating its body and the response against the specs.
    pub async fn call(&self, method: &str, path_and_query: &str, body: Option<&Value>) -> Resp {
        let url = if path_and_query.starts_with("http") {
            path_and_query.to_string()
        } else {
            format!("{}{path_and_query}", self.base)
        };
        let path = reqwest::Url::parse(&url).unwrap().path().to_string();
        let op = self.specs.find(method, &path).cloned();
        if let (Some(op), Some(b)) = (&op, body) {
            let errs = self.specs.check_request(op, b);
            self.checked.lock().unwrap().0 += 1;
            self.violations.lock().unwrap().extend(errs.into_iter().map(|e| format!("request {method} {path}: {e}")));
        }
        let token = self.token.lock().unwrap().clone();
        let mut req = self.http.request(method.parse().unwrap(), &url).bearer_auth(token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let r = req.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap_or_default();
        let body: Option<Value> = if text.trim().is_empty() {
            None
        } else {
            Some(
                serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{method} {url} answered non-JSON ({e}): {text}")),
            )
        };
        let mut v = self.violations.lock().unwrap();
        if headers.get("x-ms-request-id").is_none() {
            v.push(format!("{method} {path}: no x-ms-request-id"));
        }
        if let Some(op) = &op
            && method != "HEAD"
        {
            v.extend(
                self.specs
                    .check_response(op, status, body.as_ref())
                    .into_iter()
                    .map(|e| format!("response {method} {path}: {e}")),
            );
            if body.is_some() {
                self.checked.lock().unwrap().1 += 1;
            }
        }
        Resp { status, headers, body }
    }

    pub async fn get(&self, p: &str) -> Resp {
        self.call("GET", p, None).await
    }
    pub async fn put(&self, p: &str, b: Value) -> Resp {
        self.call("PUT", p, Some(&b)).await
    }
    pub async fn patch(&self, p: &str, b: Value) -> Resp {
        self.call("PATCH", p, Some(&b)).await
    }
    pub async fn delete(&self, p: &str) -> Resp {
        self.call("DELETE", p, None).await
    }

    /// Follows Azure-AsyncOperation until a terminal status; returns it.
    pub async fn wait(&self, r: &Resp) -> String {
        let Some(url) = r.header("azure-asyncoperation") else { return "Succeeded".into() };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.call("GET", &url, None).await;
            assert_eq!(s.status, 200, "operation status: {:?}", s.body);
            let status = s.json()["status"].as_str().unwrap().to_string();
            if status != "InProgress" {
                return status;
            }
            let ms: u64 = s.header("retry-after-ms").and_then(|v| v.parse().ok()).unwrap_or(50);
            tokio::time::sleep(Duration::from_millis(ms.min(200))).await;
            assert!(Instant::now() < deadline, "operation did not finish");
        }
    }

    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> reqwest::Response {
        let mut req = self.http.request(method.parse().unwrap(), format!("{}/_sim{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        req.send().await.unwrap()
    }

    pub async fn config(&self, patch: Value) {
        let r = self.admin("PATCH", "/config", Some(patch)).await;
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap_or_default());
    }

    pub fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut *self.violations.lock().unwrap())
    }

    /// Panics if any body violated the specs.
    pub fn assert_conformant(&self) {
        let v = self.take_violations();
        assert!(v.is_empty(), "{} spec violations:\n{}", v.len(), v.join("\n"));
    }
}

/// Ids under the test subscription.
pub fn rg_path(rg: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}")
}

pub fn net(rg: &str, rest: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Network/{rest}")
}

pub const NET_API: &str = "?api-version=2024-03-01";
pub const RG_API: &str = "?api-version=2021-04-01";
pub const MSI_API: &str = "?api-version=2023-01-31";
pub const AUTH_API: &str = "?api-version=2022-04-01";

pub fn location(l: &str) -> Value {
    json!({ "location": l })
}
