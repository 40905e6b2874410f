//! The walker over the example graphs, with an in-memory cloud standing in for every provider.
//! This checks the engine's own rules (ordering, inputs, state after every step, failures,
//! interruption, throttling, destroy order); the end-to-end tests against the local clouds are in
//! tests/, with the real providers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use xcsp_core::provider::{Attributes, BoxFuture, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{Address, ProviderKind, ResourceType, Value};
use xcsp_engine::{
    Action, Adopt, Event, Events, Limits, Order, Providers, Retries, Run, StepError, Summary, apply, destroy, refresh,
};
use xcsp_plans::graph::ResourceGraph;
use xcsp_state::State;

/// One cloud for every provider kind: resources by address, a log of calls, and knobs.
#[derive(Default)]
struct Cloud {
    live: BTreeMap<Address, (String, Attributes)>,
    log: Vec<(Action, Address)>,
    next_id: u64,
    /// Creates of these addresses fail.
    fail: Vec<Address>,
    /// Creates of these types answer "throttled" this many times first.
    throttle: BTreeMap<ResourceType, u32>,
    /// How long a create of this type takes.
    delay: BTreeMap<ResourceType, Duration>,
    /// Types whose operations share one serial key (as an Azure gateway and its connections).
    serial: Vec<ResourceType>,
    /// Creates of serial types running now, and the most that ever ran at once.
    serial_running: usize,
    serial_most: usize,
}

#[derive(Clone)]
struct Fake {
    kind: ProviderKind,
    cloud: Arc<Mutex<Cloud>>,
}

impl Fake {
    fn outputs(address: &Address, id: &str, attrs: &Attributes) -> Attributes {
        let mut out = attrs.clone();
        out.entry("name".into()).or_insert_with(|| Value::string(address.to_string()));
        // What the real providers read back (a blob's `url` feeds its image version).
        for o in ["ip_address", "principal_id", "client_id", "tunnel1_address", "tunnel2_address", "url"] {
            out.entry(o.into()).or_insert_with(|| Value::string(format!("{o}-of-{id}")));
        }
        if address.rtype == ResourceType::AwsResolverEndpoint {
            out.insert("ip_addresses".into(), Value::strings([format!("ip-a-of-{id}"), format!("ip-b-of-{id}")]));
        }
        if out.get("value").is_some_and(Value::has_unknown) {
            out.insert("value".into(), Value::sensitive(Value::string(format!("secret-of-{id}"))));
        }
        out
    }
}

impl Provider for Fake {
    fn kind(&self) -> ProviderKind {
        self.kind
    }

    fn refresh_known<'a>(
        &'a self,
        _: &'a str,
        rtype: ResourceType,
        _: &'a [Observed],
    ) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let cloud = self.cloud.lock().unwrap();
            Ok(cloud
                .live
                .iter()
                .filter(|(a, _)| a.rtype == rtype)
                .map(|(a, (id, attrs))| Observed { address: a.clone(), id: id.clone(), attributes: attrs.clone() })
                .collect())
        })
    }

    fn write<'a>(&'a self, req: Request<'a>, p: &'a dyn Progress) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        if req.is_create() { self.create(req, p) } else { self.update(req, p) }
    }

    fn delete<'a>(&'a self, req: Request<'a>, p: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>> {
        self.remove(req, p)
    }

    fn serial_key(&self, req: &Request<'_>) -> Option<String> {
        self.cloud.lock().unwrap().serial.contains(&req.address.rtype).then(|| "the-gateway".to_string())
    }
}

impl Fake {
    fn create<'a>(&'a self, req: Request<'a>, _: &'a dyn Progress) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let (delay, serial) = {
                let mut cloud = self.cloud.lock().unwrap();
                let serial = cloud.serial.contains(&req.address.rtype);
                if serial {
                    cloud.serial_running += 1;
                    cloud.serial_most = cloud.serial_most.max(cloud.serial_running);
                }
                (cloud.delay.get(&req.address.rtype).copied(), serial)
            };
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            let mut cloud = self.cloud.lock().unwrap();
            if serial {
                cloud.serial_running -= 1;
            }
            cloud.log.push((Action::Create, req.address.clone()));
            for (k, v) in req.attributes {
                // The engine fills every input before it calls (discovery attributes excepted).
                if v.has_unknown() && !k.ends_with("_ids") && k != "vpc_id" && !v.is_sensitive() {
                    panic!("{} created with unknown {k}", req.address);
                }
            }
            if cloud.fail.contains(req.address) {
                return Err(ProviderError::Failed {
                    address: req.address.to_string(),
                    code: "Injected".into(),
                    message: "injected failure".into(),
                });
            }
            if let Some(n) = cloud.throttle.get_mut(&req.address.rtype).filter(|n| **n > 0) {
                *n -= 1;
                return Err(ProviderError::Throttled {
                    address: req.address.to_string(),
                    detail: "injected".into(),
                    retry_after: None,
                });
            }
            if let Some((id, attrs)) = cloud.live.get(req.address) {
                // Adoption: the same address is never created twice.
                return Ok(Observed { address: req.address.clone(), id: id.clone(), attributes: attrs.clone() });
            }
            cloud.next_id += 1;
            let id = format!("id-{}", cloud.next_id);
            let attrs = Fake::outputs(req.address, &id, req.attributes);
            cloud.live.insert(req.address.clone(), (id.clone(), attrs.clone()));
            Ok(Observed { address: req.address.clone(), id, attributes: attrs })
        })
    }

    fn update<'a>(&'a self, req: Request<'a>, _: &'a dyn Progress) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let mut cloud = self.cloud.lock().unwrap();
            cloud.log.push((Action::Update, req.address.clone()));
            let id = req.id.expect("updates carry the id").to_string();
            let attrs = Fake::outputs(req.address, &id, req.attributes);
            cloud.live.insert(req.address.clone(), (id.clone(), attrs.clone()));
            Ok(Observed { address: req.address.clone(), id, attributes: attrs })
        })
    }

    fn remove<'a>(&'a self, req: Request<'a>, _: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let mut cloud = self.cloud.lock().unwrap();
            let id = req.id.expect("deletes carry the id");
            // In use while another live resource refers to its id.
            let user = cloud.live.iter().find(|(a, (_, attrs))| {
                *a != req.address && attrs.values().any(|v| v.to_json().to_string().contains(&format!("\"{id}\"")))
            });
            if let Some((user, _)) = user {
                return Err(ProviderError::InUse {
                    address: req.address.to_string(),
                    detail: format!("used by {user}"),
                });
            }
            cloud.log.push((Action::Delete, req.address.clone()));
            cloud.live.remove(req.address);
            Ok(())
        })
    }
}

struct Harness {
    cloud: Arc<Mutex<Cloud>>,
    run: Run,
    cancel: watch::Sender<u32>,
    events: mpsc::UnboundedReceiver<Event>,
    /// Every saved state, in order.
    saves: Arc<Mutex<Vec<State>>>,
}

fn example(name: &str) -> ResourceGraph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name);
    match xcsp_plans::load(&path, &Default::default()) {
        Ok(l) => l.graph,
        Err(_) => panic!("the example {name} loads"),
    }
}

fn harness(limits: Limits, order: Order) -> Harness {
    harness_on(Arc::new(Mutex::new(Cloud::default())), limits, order)
}

fn harness_on(cloud: Arc<Mutex<Cloud>>, limits: Limits, order: Order) -> Harness {
    let mut providers = Providers::new();
    for kind in [ProviderKind::Local, ProviderKind::Aws, ProviderKind::Azure, ProviderKind::Kubernetes] {
        providers = providers.with(Arc::new(Fake { kind, cloud: cloud.clone() }));
    }
    let (tx, events) = mpsc::unbounded_channel();
    let (cancel, cancel_rx) = watch::channel(0);
    let run = Run {
        stack: "test".into(),
        providers,
        limits,
        order,
        retries: Retries { in_use_wait: Duration::from_millis(5), ..Retries::default() },
        events: Events::new(tx),
        cancel: cancel_rx,
        protected: Default::default(),
        approved: None,
        replace: Default::default(),
    };
    Harness { cloud, run, cancel, events, saves: Arc::new(Mutex::new(Vec::new())) }
}

impl Harness {
    async fn apply(&self, graph: &ResourceGraph, state: &mut State) -> Summary {
        let saves = self.saves.clone();
        let mut store = move |s: &mut State| {
            s.serial += 1;
            saves.lock().unwrap().push(s.clone());
            Ok(())
        };
        apply(&self.run, graph, state, &mut store).await.expect("state saves")
    }

    async fn destroy(&self, state: &mut State) -> Summary {
        let mut store = |s: &mut State| {
            s.serial += 1;
            Ok(())
        };
        destroy(&self.run, state, &mut store).await.expect("state saves")
    }

    fn log(&self) -> Vec<(Action, Address)> {
        self.cloud.lock().unwrap().log.clone()
    }
}

fn position(log: &[(Action, Address)], op: Action, a: &Address) -> usize {
    log.iter().position(|(o, x)| *o == op && x == a).unwrap_or_else(|| panic!("{a} was not {op:?}d"))
}

#[tokio::test]
async fn apply_creates_everything_in_dependency_order_and_records_each_step() {
    let graph = example("il5-govcloud");
    let h = harness(Limits::default(), Order::CriticalPath);
    let mut state = State::new("test");
    let summary = h.apply(&graph, &mut state).await;
    assert!(summary.succeeded(), "{summary:?}");
    assert_eq!(summary.done.len(), graph.len());

    let log = h.log();
    assert_eq!(log.len(), graph.len(), "each resource created exactly once");
    for node in graph.nodes() {
        for dep in node.dependencies() {
            assert!(position(&log, Action::Create, &dep) < position(&log, Action::Create, &node.address));
        }
    }
    // Every resource is in state with its cloud id and its producers' outputs filled in.
    for node in graph.nodes() {
        let r = &state.resources[&node.address];
        assert!(r.id.is_some());
        assert!(
            !r.attributes.values().any(|v| v.has_unknown() && !v.is_sensitive())
                || node.address.rtype.provider() == ProviderKind::Aws
        );
    }
    let gw: Address = "azure_virtual_network_gateway.link".parse().unwrap();
    let pip0 = state.resources[&"azure_public_ip.link[0]".parse::<Address>().unwrap()].id.clone().unwrap();
    let ips = state.resources[&gw].attributes["public_ips"].clone();
    assert_eq!(ips.as_list().unwrap()[0], Value::string(pip0));

    // State was saved after every operation, and no save records a resource before its dependencies.
    let saves = h.saves.lock().unwrap().clone();
    assert!(saves.len() > graph.len());
    for s in saves.iter() {
        for (a, r) in &s.resources {
            if r.id.is_some() {
                for d in &graph.get(a).unwrap().dependencies() {
                    assert!(s.resources.get(d).is_some_and(|r| r.id.is_some()), "{a} recorded before {d}");
                }
            }
        }
    }

    // Nothing left to do: a second apply calls nothing.
    let again = h.apply(&graph, &mut state).await;
    assert!(again.done.is_empty(), "{:?}", again.done);
    assert_eq!(again.unchanged, graph.len());
    assert_eq!(h.log().len(), graph.len());
}

#[tokio::test]
async fn a_failure_skips_its_descendants_once_and_independent_branches_go_on() {
    let graph = example("il5-govcloud");
    let h = harness(Limits::default(), Order::CriticalPath);
    let gw: Address = "azure_virtual_network_gateway.link".parse().unwrap();
    h.cloud.lock().unwrap().fail.push(gw.clone());
    let mut state = State::new("test");
    let summary = h.apply(&graph, &mut state).await;
    assert_eq!(summary.failed.len(), 1);
    assert_eq!(summary.failed[0].0, gw);
    // The connections hang off the gateway: skipped, naming it.
    let conn: Address = "azure_virtual_network_gateway_connection.link[0]".parse().unwrap();
    let skipped: BTreeMap<_, _> = summary.skipped.iter().cloned().collect();
    assert_eq!(skipped[&conn], format!("{gw} failed"));
    // The identity branch does not depend on the gateway: done.
    let uai: Address = "azure_user_assigned_identity.capz".parse().unwrap();
    assert!(summary.done.iter().any(|(a, _)| *a == uai));
    assert_eq!(summary.done.len() + summary.failed.len() + summary.skipped.len(), graph.len());

    // The next apply resumes: only what did not happen happens, once.
    h.cloud.lock().unwrap().fail.clear();
    let before = h.log().len();
    let resumed = h.apply(&graph, &mut state).await;
    assert!(resumed.succeeded(), "{resumed:?}");
    assert_eq!(resumed.done.len(), 1 + skipped.len());
    assert_eq!(h.log().len() - before, 1 + skipped.len());
}

#[tokio::test]
async fn critical_path_first_starts_the_gateway_chain_before_quick_resources() {
    let graph = example("il5-govcloud");
    let gw: Address = "azure_virtual_network_gateway.link".parse().unwrap();
    let uai: Address = "azure_user_assigned_identity.capz".parse().unwrap();
    for (order, gateway_first) in [(Order::CriticalPath, true), (Order::Fifo, false)] {
        let h = harness(Limits::default().capped(1), order);
        let mut state = State::new("test");
        assert!(h.apply(&graph, &mut state).await.succeeded());
        let log = h.log();
        assert_eq!(
            position(&log, Action::Create, &gw) < position(&log, Action::Create, &uai),
            gateway_first,
            "{order:?}"
        );
    }
}

/// An Azure gateway and its four connections run one at a time, and a connection waiting for
/// its turn is not started (holds no slot): the identity, keys and the rest go on beside it.
#[tokio::test]
async fn operations_sharing_a_serial_key_run_one_at_a_time_without_holding_slots() {
    let graph = example("il5-govcloud");
    let mut limits = Limits::default();
    limits.per_provider.insert(ProviderKind::Azure, 2);
    let h = harness(limits, Order::CriticalPath);
    {
        let mut cloud = h.cloud.lock().unwrap();
        cloud.serial = vec![ResourceType::AzureVpnGateway, ResourceType::AzureVpnConnection];
        cloud.delay.insert(ResourceType::AzureVpnGateway, Duration::from_millis(30));
        cloud.delay.insert(ResourceType::AzureVpnConnection, Duration::from_millis(10));
    }
    let mut state = State::new("test");
    assert!(h.apply(&graph, &mut state).await.succeeded());
    assert_eq!(h.cloud.lock().unwrap().serial_most, 1, "never two operations on one gateway at once");
    // Every connection started only after the previous one on the gateway finished.
    let mut rx = h.events;
    let (mut running, mut most) = (0usize, 0usize);
    let serial = |a: &Address| matches!(a.rtype, ResourceType::AzureVpnGateway | ResourceType::AzureVpnConnection);
    let mut connections = 0;
    while let Ok(e) = rx.try_recv() {
        match e {
            Event::Started { address, .. } if serial(&address) => {
                running += 1;
                most = most.max(running);
                connections += usize::from(address.rtype == ResourceType::AzureVpnConnection);
            }
            Event::Finished { address, .. } if serial(&address) => running -= 1,
            _ => {}
        }
    }
    assert_eq!(connections, 4);
    assert_eq!(most, 1, "a connection waiting for the gateway was started (and held a slot)");
}

#[tokio::test]
async fn throttling_lowers_concurrency_and_the_operation_runs_again() {
    let graph = example("public");
    let h = harness(Limits::default(), Order::CriticalPath);
    h.cloud.lock().unwrap().throttle.insert(ResourceType::AzurePublicIp, 3);
    let mut state = State::new("test");
    let summary = h.apply(&graph, &mut state).await;
    assert!(summary.succeeded(), "{summary:?}");
    let mut rx = h.events;
    let mut throttled = 0;
    while let Ok(e) = rx.try_recv() {
        if let Event::Throttled { limit, .. } = e {
            throttled += 1;
            assert!(limit < Limits::default().per_provider[&ProviderKind::Azure]);
        }
    }
    assert_eq!(throttled, 3);
}

#[tokio::test]
async fn interrupting_awaits_what_runs_then_the_next_apply_resumes() {
    let graph = example("il5-govcloud");
    let h = harness(Limits::default(), Order::CriticalPath);
    h.cloud.lock().unwrap().delay.insert(ResourceType::AzureVpnGateway, Duration::from_millis(300));
    let mut state = State::new("test");
    let cancel = h.cancel.clone();
    let mut rx = h.events;
    let gw: Address = "azure_virtual_network_gateway.link".parse().unwrap();
    let run = h.run.clone();
    let watcher = tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if matches!(&e, Event::Started { address, .. } if *address == gw) {
                cancel.send(1).unwrap();
            }
        }
    });
    let mut store = |_: &mut State| Ok(());
    let summary = apply(&run, &graph, &mut state, &mut store).await.unwrap();
    drop(run);
    assert!(summary.interrupted);
    // The gateway that was running when Ctrl-C came finished and is recorded.
    let gw: Address = "azure_virtual_network_gateway.link".parse().unwrap();
    assert!(state.resources[&gw].id.is_some());
    assert!(!summary.skipped.is_empty());
    assert!(summary.skipped.iter().all(|(_, why)| why == "the run was interrupted"));
    watcher.abort();

    let h2 = harness_on(h.cloud.clone(), Limits::default(), Order::CriticalPath);
    let before = h2.log().len();
    let resumed = h2.apply(&graph, &mut state).await;
    assert!(resumed.succeeded());
    assert_eq!(h2.log().len() - before, summary.skipped.len());
    assert_eq!(h2.cloud.lock().unwrap().live.len(), graph.len());
}

#[tokio::test]
async fn abandoned_creates_leave_intents_that_refresh_adopts() {
    let graph = example("il5-govcloud");
    let h = harness(Limits::default(), Order::CriticalPath);
    h.cloud.lock().unwrap().delay.insert(ResourceType::AzureVpnGateway, Duration::from_millis(200));
    let gw: Address = "azure_virtual_network_gateway.link".parse().unwrap();
    let mut state = State::new("test");
    let cancel = h.cancel.clone();
    let mut rx = h.events;
    let watch_gw = gw.clone();
    tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if matches!(&e, Event::Started { address, .. } if *address == watch_gw) {
                cancel.send(2).unwrap();
            }
        }
    });
    let mut store = |_: &mut State| Ok(());
    let summary = apply(&h.run, &graph, &mut state, &mut store).await.unwrap();
    assert!(summary.interrupted);
    assert_eq!(state.resources[&gw].id, None, "the abandoned create is still an intent");

    // The abandoned create went on in the cloud after all (as a real cloud would).
    let mut cloud_side = State::new("test");
    cloud_side.resources.insert(gw.clone(), state.resources[&gw].clone());
    let h2 = harness(Limits::default(), Order::CriticalPath);
    {
        let mut c = h2.cloud.lock().unwrap();
        *c = Cloud { live: h.cloud.lock().unwrap().live.clone(), next_id: 1000, ..Cloud::default() };
        let attrs = state.resources[&gw].attributes.clone();
        c.live.insert(gw.clone(), ("id-gw".into(), attrs));
    }
    let intents: Vec<Address> =
        state.resources.iter().filter(|(_, r)| r.id.is_none()).map(|(a, _)| a.clone()).collect();
    let found = refresh(&h2.run.providers, "test", &mut state, Adopt::All, &Events::none()).await.unwrap();
    assert!(found.adopted.contains(&gw));
    assert!(found.adopted.iter().all(|a| intents.contains(a)), "only interrupted creates are adopted");
    assert_eq!(state.resources[&gw].id.as_deref(), Some("id-gw"));
    let resumed = h2.apply(&graph, &mut state).await;
    assert!(resumed.succeeded(), "{resumed:?}");
    assert!(!h2.log().iter().any(|(op, a)| *op == Action::Create && *a == gw), "no twin of the gateway");
    assert_eq!(h2.cloud.lock().unwrap().live.len(), graph.len());
}

#[tokio::test]
async fn destroy_removes_dependents_first_and_leaves_nothing() {
    let graph = example("il5-govcloud");
    let h = harness(Limits::default(), Order::CriticalPath);
    let mut state = State::new("test");
    assert!(h.apply(&graph, &mut state).await.succeeded());
    let summary = h.destroy(&mut state).await;
    assert!(summary.succeeded(), "{summary:?}");
    assert!(state.resources.is_empty());
    assert!(h.cloud.lock().unwrap().live.is_empty());
    let log = h.log();
    for node in graph.nodes() {
        for dep in node.dependencies() {
            assert!(position(&log, Action::Delete, &node.address) < position(&log, Action::Delete, &dep));
        }
    }
    // The cluster's objects all go before any cloud resource.
    let deletes: Vec<&Address> = log.iter().filter(|(o, _)| *o == Action::Delete).map(|(_, a)| a).collect();
    let last_k8s = deletes.iter().rposition(|a| a.rtype.provider() == ProviderKind::Kubernetes).unwrap();
    let first_cloud =
        deletes.iter().position(|a| matches!(a.rtype.provider(), ProviderKind::Aws | ProviderKind::Azure)).unwrap();
    assert!(last_k8s < first_cloud, "{deletes:?}");
}

#[tokio::test]
async fn protected_resources_and_what_they_need_survive_destroy() {
    let graph = example("il5-govcloud");
    let mut h = harness(Limits::default(), Order::CriticalPath);
    let mut state = State::new("test");
    assert!(h.apply(&graph, &mut state).await.succeeded());
    let uai: Address = "azure_user_assigned_identity.capz".parse().unwrap();
    h.run.protected.insert(uai.clone());
    let summary = h.destroy(&mut state).await;
    assert!(!summary.succeeded());
    assert_eq!(summary.failed.len(), 1);
    assert!(summary.failed[0].2.to_string().contains("prevent_destroy"), "{}", summary.failed[0].2);
    let rg: Address = "azure_resource_group.main".parse().unwrap();
    assert!(summary.skipped.iter().any(|(a, why)| *a == rg && *why == format!("{uai} failed")));
    assert!(state.resources.contains_key(&uai) && state.resources.contains_key(&rg));
    let cloud = h.cloud.lock().unwrap();
    assert!(cloud.live.contains_key(&uai));
    // Everything that depended on the identity (and nothing it needs) is gone.
    assert!(!cloud.live.contains_key(&"azure_role_assignment.capz".parse::<Address>().unwrap()));
}

#[tokio::test]
async fn refresh_drops_what_vanished_and_apply_recreates_it() {
    let graph = example("public");
    let h = harness(Limits::default(), Order::CriticalPath);
    let mut state = State::new("test");
    assert!(h.apply(&graph, &mut state).await.succeeded());
    let uai: Address = "azure_user_assigned_identity.capz".parse().unwrap();
    h.cloud.lock().unwrap().live.remove(&uai);
    let r = refresh(&h.run.providers, "test", &mut state, Adopt::All, &Events::none()).await.unwrap();
    assert_eq!(r.vanished, vec![uai.clone()]);
    let summary = h.apply(&graph, &mut state).await;
    assert!(summary.done.contains(&(uai, Action::Create)), "{summary:?}");
}

#[tokio::test]
async fn apply_does_no_more_than_the_approved_plan_showed() {
    let graph = example("public");
    let mut h = harness(Limits::default(), Order::CriticalPath);
    let mut state = State::new("test");
    assert!(h.apply(&graph, &mut state).await.succeeded());
    let calls = h.log().len();
    // The cloud drifted after the user approved a plan with no changes.
    let uai: Address = "azure_user_assigned_identity.capz".parse().unwrap();
    state.resources.get_mut(&uai).unwrap().attributes.insert("tags".into(), Value::string("drifted"));
    h.run.approved = Some(Default::default());
    let summary = h.apply(&graph, &mut state).await;
    assert_eq!(h.log().len(), calls, "nothing was called: {:?}", &h.log()[calls..]);
    assert_eq!(summary.failed.len(), 1, "{:?}", summary.failed);
    let (a, _, e) = &summary.failed[0];
    assert_eq!(*a, uai);
    assert!(matches!(e, StepError::BeyondPlan { planned: "no change", needed: "an in-place update", .. }), "{e:?}");
    assert!(e.to_string().contains("the approved plan showed no change, but it now needs an in-place update"), "{e}");
    // Approved, the same update goes through.
    h.run.approved = Some([(uai.clone(), xcsp_plans::plan::Action::Update)].into_iter().collect());
    let summary = h.apply(&graph, &mut state).await;
    assert!(summary.done.contains(&(uai, Action::Update)), "{summary:?}");
}

#[tokio::test]
async fn a_resource_asked_to_be_replaced_is_and_what_uses_it_changes_with_it() {
    let graph = example("public");
    let mut h = harness(Limits::default(), Order::CriticalPath);
    let mut state = State::new("test");
    assert!(h.apply(&graph, &mut state).await.succeeded());
    let key: Address = "xcsp_preshared_key.link[0]".parse().unwrap();
    let before = state.resources[&key].clone();
    let calls = h.log().len();
    h.run.replace = [key.clone()].into_iter().collect();
    let summary = h.apply(&graph, &mut state).await;
    assert!(summary.succeeded(), "{summary:?}");
    assert!(summary.done.contains(&(key.clone(), Action::Replace)), "{summary:?}");
    // The key's consumers took the new value; nothing else was touched.
    let users: Vec<&Address> = graph.nodes().filter(|n| n.dependencies().contains(&key)).map(|n| &n.address).collect();
    assert!(!users.is_empty());
    for u in &users {
        assert!(summary.done.contains(&((*u).clone(), Action::Update)), "{u}: {summary:?}");
    }
    assert_eq!(summary.done.len(), 1 + users.len(), "{summary:?}");
    assert_eq!(&h.log()[calls..calls + 2], &[(Action::Delete, key.clone()), (Action::Create, key.clone())]);
    assert_ne!(state.resources[&key].id, before.id);
}

#[tokio::test]
async fn the_estimate_starts_at_the_critical_path_and_ends_at_zero() {
    let graph = example("public");
    let h = harness(Limits::default(), Order::CriticalPath);
    let mut state = State::new("test");
    let summary = h.apply(&graph, &mut state).await;
    assert!(summary.succeeded());
    let mut rx = h.events;
    let mut estimates = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::Estimate { remaining } = e {
            estimates.push(remaining);
        }
    }
    // Before anything ran: the gateway's typical 40 minutes and what follows it.
    assert!(estimates[0] >= Duration::from_secs(40 * 60), "{estimates:?}");
    // One after each operation, and nothing left at the end.
    assert_eq!(estimates.len(), 1 + summary.done.len(), "{estimates:?}");
    assert_eq!(*estimates.last().unwrap(), Duration::ZERO);
}
