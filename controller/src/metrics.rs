//! What the controller measures, in Prometheus' text format at `/metrics` (`/healthz` answers
//! while it runs): per stack, the tunnels up and expected, the BGP routes AWS accepted against its
//! limit of 100 per VPN connection, the pool's machines and Ready Nodes; and per reconcile, its
//! duration and its errors.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// One stack: the resource's namespace and name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StackLabels {
    pub namespace: String,
    pub name: String,
}

/// One tunnel of a stack.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TunnelLabels {
    pub namespace: String,
    pub name: String,
    pub tunnel: String,
}

pub struct Metrics {
    registry: Registry,
    pub tunnels_up: Family<StackLabels, Gauge>,
    pub tunnels_expected: Family<StackLabels, Gauge>,
    pub bgp_routes_accepted: Family<TunnelLabels, Gauge>,
    pub machines: Family<StackLabels, Gauge>,
    pub nodes_ready: Family<StackLabels, Gauge>,
    pub reconcile_seconds: Family<StackLabels, Histogram>,
    pub reconcile_errors: Family<StackLabels, Counter>,
    /// The tunnels each stack has series for, so that a stack's go with it.
    tunnels: std::sync::Mutex<std::collections::BTreeMap<(String, String), Vec<String>>>,
}

/// AWS accepts at most 100 routes over one VPN connection's BGP session (Site-to-Site VPN quotas).
pub const AWS_BGP_ROUTE_LIMIT: i64 = 100;

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("xcsp");
        let tunnels_up = Family::<StackLabels, Gauge>::default();
        registry.register("tunnels_up", "Tunnels up on both sides", tunnels_up.clone());
        let tunnels_expected = Family::<StackLabels, Gauge>::default();
        registry.register("tunnels_expected", "Tunnels the spec's IPsec links have", tunnels_expected.clone());
        let bgp_routes_accepted = Family::<TunnelLabels, Gauge>::default();
        registry.register(
            "bgp_routes_accepted",
            "Routes AWS accepted over the tunnel's BGP session (AWS accepts at most 100 per VPN connection)",
            bgp_routes_accepted.clone(),
        );
        let machines = Family::<StackLabels, Gauge>::default();
        registry.register("machines", "The pool's Machines", machines.clone());
        let nodes_ready = Family::<StackLabels, Gauge>::default();
        registry.register("nodes_ready", "The pool's Machines whose Node is Ready", nodes_ready.clone());
        let reconcile_seconds = Family::<StackLabels, Histogram>::new_with_constructor(|| {
            // One second to an hour: a reconcile with nothing to do, or a VPN gateway's creation.
            Histogram::new([1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0])
        });
        registry.register("reconcile_seconds", "How long a reconcile took", reconcile_seconds.clone());
        let reconcile_errors = Family::<StackLabels, Counter>::default();
        registry.register("reconcile_errors", "Reconciles that ended in an error", reconcile_errors.clone());
        Arc::new(Metrics {
            registry,
            tunnels_up,
            tunnels_expected,
            bgp_routes_accepted,
            machines,
            nodes_ready,
            reconcile_seconds,
            reconcile_errors,
            tunnels: Default::default(),
        })
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }

    /// What a stack's health says.
    pub fn record(&self, stack: &StackLabels, h: &xcsp_stack::health::Health) {
        self.tunnels_up.get_or_create(stack).set(h.up as i64);
        self.tunnels_expected.get_or_create(stack).set(h.expected as i64);
        let mut seen = Vec::new();
        for t in &h.tunnels {
            if let Some(routes) = t.aws_accepted_routes {
                let labels = TunnelLabels {
                    namespace: stack.namespace.clone(),
                    name: stack.name.clone(),
                    tunnel: t.tunnel.clone(),
                };
                self.bgp_routes_accepted.get_or_create(&labels).set(routes);
                seen.push(t.tunnel.clone());
            }
        }
        let key = (stack.namespace.clone(), stack.name.clone());
        self.tunnels.lock().expect("not poisoned").entry(key).or_default().extend(seen);
        self.machines.get_or_create(stack).set(h.machines.len() as i64);
        let ready = h.machines.iter().filter(|m| m.node.as_ref().is_some_and(|n| n.ready == "True")).count();
        self.nodes_ready.get_or_create(stack).set(ready as i64);
    }

    /// A stack whose resource is gone: its series go with it.
    pub fn forget(&self, stack: &StackLabels) {
        self.tunnels_up.remove(stack);
        self.tunnels_expected.remove(stack);
        self.machines.remove(stack);
        self.nodes_ready.remove(stack);
        let key = (stack.namespace.clone(), stack.name.clone());
        for tunnel in self.tunnels.lock().expect("not poisoned").remove(&key).unwrap_or_default() {
            let labels = TunnelLabels { namespace: key.0.clone(), name: key.1.clone(), tunnel };
            self.bgp_routes_accepted.remove(&labels);
        }
    }
}

/// Serves `/metrics` and `/healthz` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) -> std::io::Result<()> {
    use axum::routing::get;
    let app =
        axum::Router::new()
            .route(
                "/metrics",
                get(move || {
                    let m = metrics.clone();
                    async move {
                        ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], m.encode())
                    }
                }),
            )
            .route("/healthz", get(|| async { "ok" }));
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_s_health_is_exposed_by_its_labels() {
        let m = Metrics::new();
        let stack = StackLabels { namespace: "gpu".into(), name: "il5".into() };
        m.tunnels_up.get_or_create(&stack).set(3);
        m.tunnels_expected.get_or_create(&stack).set(4);
        m.reconcile_errors.get_or_create(&stack).inc();
        m.reconcile_seconds.get_or_create(&stack).observe(42.0);
        let text = m.encode();
        assert!(text.contains(r#"xcsp_tunnels_up{namespace="gpu",name="il5"} 3"#), "{text}");
        assert!(text.contains(r#"xcsp_tunnels_expected{namespace="gpu",name="il5"} 4"#), "{text}");
        assert!(text.contains(r#"xcsp_reconcile_errors_total{namespace="gpu",name="il5"} 1"#), "{text}");
        assert!(text.contains(r#"xcsp_reconcile_seconds_bucket{le="60.0",namespace="gpu",name="il5"} 1"#), "{text}");
        let other = StackLabels { namespace: "gpu".into(), name: "other".into() };
        for (labels, routes) in [(&stack, 7), (&other, 9)] {
            let tunnel =
                TunnelLabels { namespace: labels.namespace.clone(), name: labels.name.clone(), tunnel: "t1".into() };
            m.bgp_routes_accepted.get_or_create(&tunnel).set(routes);
            m.tunnels
                .lock()
                .unwrap()
                .entry((labels.namespace.clone(), labels.name.clone()))
                .or_default()
                .push("t1".into());
        }
        m.forget(&stack);
        let text = m.encode();
        assert!(!text.contains("xcsp_tunnels_up{"), "{text}");
        // Another stack's series stay.
        assert!(
            !text.contains(r#"name="il5",tunnel="t1""#) && text.contains(r#"name="other",tunnel="t1"} 9"#),
            "{text}"
        );
    }
}
