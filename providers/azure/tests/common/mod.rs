//! What the provider tests share: the ARM emulator in-process (spoken to over HTTP only), a
//! provider pointed at it with the real clients, the emulator's admin API, and the IL5
//! example's Azure side applied and destroyed in dependency order, inputs filled from the
//! producers' outputs the way the engine fills them.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value as Json, json};
use xcsp_azure::{AzureConfig, AzureProvider, Cloud, CredentialSource, SecretString};
use xcsp_core::provider::{Attributes, Observed, Progress, Provider, Request};
use xcsp_core::{Address, ProviderKind, ResourceType, Value};
use xcsp_plans::graph::{Node, ResourceGraph};
use xcsp_plans::plan::Action;
use xcsp_sim::{SimConfig, SimServer};

pub const SUB: &str = "11111111-2222-3333-4444-555555555555";
pub const TENANT: &str = "66666666-7777-8888-9999-000000000000";
pub const RG: &str = "xcsp-test";
pub const STACK: &str = "t1";
pub const GOV: &str = "https://management.usgovcloudapi.net";

/// The emulator, and an HTTP client for its admin API.
pub struct Emulator {
    pub server: SimServer,
    pub base: String,
    http: reqwest::Client,
}

impl Emulator {
    /// `profile`: `instant` (everything done at once) or `fast` (realistic durations / 600).
    pub fn start(profile: &str) -> Emulator {
        let mut config = SimConfig::default();
        config.latency.profile = profile.parse().expect("a latency profile");
        let server = SimServer::start(config, 0).unwrap_or_else(|e| {
            panic!("the ARM emulator (xcsp-sim, in-process) did not start: {e}. It needs a free loopback port.")
        });
        let base = server.base_url.clone();
        Emulator { server, base, http: reqwest::Client::new() }
    }

    pub async fn admin(&self, method: reqwest::Method, path: &str, body: Option<Json>) -> Json {
        let mut r = self.http.request(method, format!("{}/_sim/{path}", self.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.expect("the emulator's admin API answers");
        assert!(r.status().is_success(), "admin {path}: {}", r.status());
        r.json().await.unwrap_or(Json::Null)
    }

    pub async fn configure(&self, patch: Json) {
        self.admin(reqwest::Method::PATCH, "config", Some(patch)).await;
    }

    pub async fn counters(&self) -> Json {
        self.admin(reqwest::Method::GET, "counters", None).await
    }

    pub async fn reset_counters(&self) {
        self.admin(reqwest::Method::DELETE, "counters", None).await;
    }

    /// How often the emulator answered with error `code`.
    pub async fn errors(&self, code: &str) -> u64 {
        self.counters().await["errors"][code].as_u64().unwrap_or(0)
    }

    /// Requests per operation (`GET Microsoft.Network/virtualNetworks (list)`, ...).
    pub async fn requests(&self) -> BTreeMap<String, u64> {
        let c = self.counters().await;
        c["requests"].as_object().into_iter().flatten().map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0))).collect()
    }

    pub async fn tokens(&self) -> Vec<Json> {
        self.admin(reqwest::Method::GET, "tokens", None).await["requests"].as_array().cloned().unwrap_or_default()
    }

    /// Every resource the emulator holds (ids).
    pub async fn resource_ids(&self) -> Vec<String> {
        let all = self.admin(reqwest::Method::GET, "resources", None).await;
        all["value"].as_array().into_iter().flatten().filter_map(|r| r["id"].as_str().map(String::from)).collect()
    }

    /// A resource as the emulator holds it (out of band: no token, no counters).
    pub async fn resource(&self, id: &str) -> Json {
        let r = self.http.get(format!("{}/_sim/resource", self.base)).query(&[("id", id)]).send().await;
        r.expect("the admin API answers").json().await.expect("a resource")
    }

    /// Out-of-band changes, as someone in the portal would make them.
    pub async fn patch_resource(&self, id: &str, patch: Json) {
        let r = self.http.patch(format!("{}/_sim/resource", self.base)).query(&[("id", id)]).json(&patch).send().await;
        assert!(r.expect("the admin API answers").status().is_success());
    }

    pub async fn delete_resource(&self, id: &str) {
        let r = self.http.delete(format!("{}/_sim/resource", self.base)).query(&[("id", id)]).send().await;
        assert!(r.expect("the admin API answers").status().is_success());
    }

    /// A connection's shared key, read as ARM gives it (`GET .../sharedkey`, with a token).
    pub async fn shared_key(&self, connection_id: &str) -> String {
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", "xcsp-test"),
            ("client_secret", "local-secret"),
            ("scope", "https://management.usgovcloudapi.net/.default"),
        ];
        let token: Json = self
            .http
            .post(format!("{}/{TENANT}/oauth2/v2.0/token", self.base))
            .form(&form)
            .send()
            .await
            .expect("the token endpoint answers")
            .json()
            .await
            .expect("a token");
        let url = format!("{}{connection_id}/sharedkey?api-version=2024-03-01", self.base);
        let r = self.http.get(url).bearer_auth(token["access_token"].as_str().unwrap_or_default()).send().await;
        let key: Json = r.expect("ARM answers").json().await.expect("a shared key");
        key["value"].as_str().unwrap_or_default().to_string()
    }

    /// A configuration for this emulator: Azure Government reached through it, a client secret
    /// credential (the emulator takes any), short waits.
    pub fn config(&self) -> AzureConfig {
        self.config_for(SUB, TENANT, RG)
    }

    pub fn config_for(&self, subscription: &str, tenant: &str, resource_group: &str) -> AzureConfig {
        let cloud = Cloud::UsGovernment.through(&self.base, &self.base);
        let mut config = AzureConfig::new(subscription, tenant, resource_group, cloud);
        config.credential =
            CredentialSource::ClientSecret { client_id: "xcsp-test".into(), secret: SecretString::new("local-secret") };
        config.poll_interval = Duration::from_millis(50);
        config.backoff.first = Duration::from_millis(50);
        config.backoff.max = Duration::from_millis(500);
        config
    }

    pub fn provider(&self) -> AzureProvider {
        AzureProvider::new(self.config()).expect("a provider")
    }
}

/// Every progress report, to look at afterwards.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<(String, String)>>);

impl Progress for Recorder {
    fn waiting(&self, address: &Address, what: &str) {
        self.0.lock().unwrap().push((address.to_string(), what.to_string()));
    }
}

impl Recorder {
    pub fn said(&self, address: &str, fragment: &str) -> bool {
        self.0.lock().unwrap().iter().any(|(a, w)| a == address && w.contains(fragment))
    }
}

pub fn addr(s: &str) -> Address {
    s.parse().expect("an address")
}

/// Attributes from JSON (with `{"$sensitive": ...}` for secrets).
pub fn attrs(j: Json) -> Attributes {
    match Value::from_json(&j) {
        Value::Map(m) => m,
        other => panic!("attributes must be a map, not {other:?}"),
    }
}

/// The stack and address tags the plan puts on every Azure node.
pub fn tags(address: &str) -> Json {
    json!({ "xcsp.io/stack": STACK, "xcsp.io/address": address })
}

pub async fn create(p: &AzureProvider, address: &str, a: Json) -> Observed {
    let address = addr(address);
    let a = attrs(a);
    let r = Request { stack: STACK, address: &address, id: None, attributes: &a };
    p.write(r, &Recorder::default()).await.unwrap_or_else(|e| panic!("create {address}: {e}"))
}

pub async fn update(p: &AzureProvider, observed: &Observed, a: Json) -> Observed {
    let a = attrs(a);
    let r = Request { stack: STACK, address: &observed.address, id: Some(&observed.id), attributes: &a };
    p.write(r, &Recorder::default()).await.unwrap_or_else(|e| panic!("update {}: {e}", observed.address))
}

pub async fn delete(p: &AzureProvider, observed: &Observed, a: Json) {
    let a = attrs(a);
    let r = Request { stack: STACK, address: &observed.address, id: Some(&observed.id), attributes: &a };
    p.delete(r, &Recorder::default()).await.unwrap_or_else(|e| panic!("delete {}: {e}", observed.address))
}

/// What refresh finds of `rtype` in the stack, by address.
pub async fn refresh(p: &AzureProvider, stack: &str, rtype: ResourceType) -> BTreeMap<Address, Observed> {
    let found = p.refresh(stack, rtype).await.unwrap_or_else(|e| panic!("refresh {rtype}: {e}"));
    found.into_iter().map(|o| (o.address.clone(), o)).collect()
}

/// The IL5 example's Azure side and its generated keys; what the AWS side would give (the
/// tunnels' outside IPs) is filled in as fixed addresses.
pub struct Il5 {
    pub stack: String,
    pub subscription: String,
    pub tenant: String,
    pub resource_group: String,
    pub nodes: Vec<Node>,
}

pub fn il5() -> Il5 {
    il5_at(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud"))
}

/// The IL5 example as another stack in its own resource group (a copy of the spec in `dir`).
pub fn il5_as(stack: &str, resource_group: &str, dir: &Path) -> Il5 {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud/pool.xcsp.hcl");
    let text = std::fs::read_to_string(example).expect("the IL5 example");
    let text = text
        .replace("stack = \"il5-gpu\"", &format!("stack = \"{stack}\""))
        .replace("\"il5-gpu-workers\"", &format!("\"{resource_group}\""));
    std::fs::write(dir.join("pool.xcsp.hcl"), text).expect("a copy of the spec");
    il5_at(dir)
}

fn il5_at(path: &Path) -> Il5 {
    let loaded =
        xcsp_plans::load(path, &Default::default()).unwrap_or_else(|e| panic!("{} loads: {e}", path.display()));
    let mut nodes = Vec::new();
    for node in loaded.graph.nodes() {
        if !matches!(node.address.rtype.provider(), ProviderKind::Azure | ProviderKind::Local) {
            continue;
        }
        let mut node = node.clone();
        let from_aws: Vec<_> =
            node.inputs.iter().filter(|i| i.from.rtype.provider() == ProviderKind::Aws).cloned().collect();
        for input in from_aws {
            let t = node.address.index.unwrap_or(0);
            let stand_in = match input.output.as_str() {
                // The Route 53 Resolver endpoint's two addresses in the cluster's private subnets.
                "ip_addresses" => Value::strings(["10.0.0.10", "10.0.32.10"]),
                _ => Value::string(format!("203.0.113.{}", 10 + t)),
            };
            node.attributes.insert(input.attribute.clone(), stand_in);
            node.inputs.retain(|i| i.attribute != input.attribute);
        }
        node.depends_on.retain(|d| d.rtype.provider() != ProviderKind::Aws);
        nodes.push(node);
    }
    let az = &loaded.model.azure;
    Il5 {
        stack: loaded.model.stack.clone(),
        subscription: az.subscription_id.value.clone(),
        tenant: az.tenant_id.value.clone(),
        resource_group: az.resource_group.value.clone(),
        nodes,
    }
}

/// What an apply recorded: per resource, its desired attributes (inputs filled) with what the
/// provider read back laid over them, and its id.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    pub attributes: BTreeMap<Address, Attributes>,
    pub ids: BTreeMap<Address, String>,
}

impl Recorded {
    pub fn record(&mut self, desired: Attributes, observed: Observed) {
        let mut a = desired;
        for (k, v) in observed.attributes {
            a.insert(k, v);
        }
        self.attributes.insert(observed.address.clone(), a);
        self.ids.insert(observed.address, observed.id);
    }

    pub fn get(&self, address: &str) -> &Attributes {
        &self.attributes[&addr(address)]
    }
}

/// A generated pre-shared key, as xcsp's local provider makes them (AWS's rules: letters,
/// digits, `.` and `_`, not starting with `0`).
pub fn preshared_key(address: &Address) -> Value {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    Value::sensitive(Value::string(format!("K{nanos:x}_{}", address.index.unwrap_or(0))))
}

/// Creates `nodes` in dependency order, each round of ready resources at once, and returns
/// what was recorded.
pub async fn apply_in_order(p: &AzureProvider, stack: &str, nodes: &[Node], progress: &Recorder) -> Recorded {
    let mut recorded = Recorded::default();
    let ours: BTreeSet<&Address> = nodes.iter().map(|n| &n.address).collect();
    let mut left: Vec<&Node> = nodes.iter().collect();
    while !left.is_empty() {
        let (ready, waiting): (Vec<&Node>, Vec<&Node>) = left
            .into_iter()
            .partition(|n| n.dependencies().iter().all(|d| !ours.contains(d) || recorded.attributes.contains_key(d)));
        assert!(!ready.is_empty(), "nothing is ready: {:?}", waiting.iter().map(|n| &n.address).collect::<Vec<_>>());
        let filled: Vec<(&Node, Attributes)> = ready
            .iter()
            .map(|n| (*n, n.filled(|from, output| recorded.attributes.get(from).and_then(|a| a.get(output)).cloned())))
            .collect();
        for (n, a) in filled.iter().filter(|(n, _)| n.address.rtype.provider() == ProviderKind::Azure) {
            assert!(!a.values().any(Value::has_unknown), "{} has unknown inputs: {a:?}", n.address);
        }
        let turns = &Turns::default();
        let results = futures::future::join_all(filled.iter().map(|(n, a)| async move {
            if n.address.rtype == ResourceType::PresharedKey {
                let mut out = a.clone();
                out.insert("value".into(), preshared_key(&n.address));
                return Observed { address: n.address.clone(), id: n.address.to_string(), attributes: out };
            }
            let r = Request { stack, address: &n.address, id: None, attributes: a };
            let _turn = turns.take(p, &r).await;
            p.write(r, progress).await.unwrap_or_else(|e| panic!("create {}: {e}", n.address))
        }))
        .await;
        for ((_, a), observed) in filled.into_iter().zip(results) {
            recorded.record(a, observed);
        }
        left = waiting;
    }
    recorded
}

/// One operation at a time per serial key ([`Provider::serial_key`]: a VPN gateway and its
/// connections), as the engine starts them; the provider itself does not serialise its callers.
#[derive(Default)]
pub struct Turns(Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>);

impl Turns {
    pub async fn take(&self, p: &AzureProvider, r: &Request<'_>) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        let key = p.serial_key(r)?;
        let lock = self.0.lock().unwrap().entry(key).or_default().clone();
        Some(lock.lock_owned().await)
    }
}

/// Deletes what `recorded` holds, dependents first, each round at once (one at a time per
/// serial key).
pub async fn destroy_in_order(p: &AzureProvider, stack: &str, nodes: &[Node], recorded: &Recorded) {
    let mut left: Vec<&Node> = nodes.iter().filter(|n| n.address.rtype.provider() == ProviderKind::Azure).collect();
    let mut gone: BTreeSet<Address> = BTreeSet::new();
    while !left.is_empty() {
        let still: BTreeSet<&Address> = left.iter().map(|n| &n.address).collect();
        let (ready, waiting): (Vec<&Node>, Vec<&Node>) = left.iter().copied().partition(|n| {
            !left.iter().any(|other| other.address != n.address && other.dependencies().contains(&n.address))
        });
        assert!(!ready.is_empty(), "a cycle among {still:?}");
        let turns = &Turns::default();
        futures::future::join_all(ready.iter().map(|n| async move {
            let a = recorded.attributes.get(&n.address).cloned().unwrap_or_default();
            let id = recorded.ids.get(&n.address).cloned();
            let r = Request { stack, address: &n.address, id: id.as_deref(), attributes: &a };
            let _turn = turns.take(p, &r).await;
            p.delete(r, &Recorder::default()).await.unwrap_or_else(|e| panic!("delete {}: {e}", n.address));
        }))
        .await;
        gone.extend(ready.iter().map(|n| n.address.clone()));
        left = waiting;
    }
}

/// Refreshes every Azure type and lays what was found over what was recorded (as the engine
/// does: what a provider cannot read back keeps its recorded value); returns the addresses found.
pub async fn refresh_all(p: &AzureProvider, stack: &str, recorded: &mut Recorded) -> Vec<Address> {
    let mut found = Vec::new();
    for t in azure_types() {
        for (address, observed) in refresh(p, stack, t).await {
            let mut a = recorded.attributes.get(&address).cloned().unwrap_or_default();
            for (k, v) in observed.attributes {
                a.insert(k, v);
            }
            recorded.attributes.insert(address.clone(), a);
            recorded.ids.insert(address.clone(), observed.id);
            found.push(address);
        }
    }
    found
}

/// The changes a plan would make to the Azure side.
pub fn changes(il5: &Il5, recorded: &Recorded) -> Vec<(String, Action)> {
    let graph = ResourceGraph::new(il5.nodes.clone()).expect("the Azure side is a graph");
    let plan = xcsp_plans::plan::diff(&il5.stack, "test", &graph, &recorded.attributes);
    let mut changes: Vec<(String, Action)> =
        plan.changes.iter().filter(|c| c.action != Action::NoOp).map(|c| (c.address.to_string(), c.action)).collect();
    changes.sort_by(|a, b| a.0.cmp(&b.0));
    changes
}

/// The Azure resource types, in the order a refresh of the stack lists them.
/// Every Azure resource type (from the one list, so a new type cannot be missed).
pub fn azure_types() -> impl Iterator<Item = ResourceType> {
    ResourceType::ALL.iter().copied().filter(|t| t.provider() == xcsp_core::ProviderKind::Azure)
}
