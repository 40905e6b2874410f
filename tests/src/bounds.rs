//! How long a test may wait for an upstream controller's action, derived from the settings the
//! world started that controller with (`GET /_sim/timing`), never guessed.
//!
//! Each controller acts on a watch event at once; what bounds it when it does not is its own
//! period: the interval after which it looks again whatever happened (a `--sync-period`
//! resync, a `--reconciler-requeue` after a transient error, the node lifecycle controller's
//! `--node-monitor-period`). A bound is the sum of the periods of the controllers an outcome
//! passes through, each named, and the world's own durations (a VM's creation, its boot) as the
//! world reports them, plus one allowance for the machine ([`MACHINE_ALLOWANCE`]).

use std::time::{Duration, Instant};

use serde_json::Value;

/// What a two-core machine may add to any outcome, whatever the controllers' settings: the
/// world's processes (API server, etcd, the managers, the stand-ins' pass over the cluster)
/// held off their cores by the suite's other tests or a build. Not a controller's setting: the
/// one allowance every bound carries, said in each.
pub const MACHINE_ALLOWANCE: f64 = 30.0;

/// A deadline for an outcome upstream controllers decide, with how it was derived.
#[derive(Debug, Clone)]
pub struct Bound {
    secs: f64,
    why: String,
}

impl Bound {
    fn of(terms: &[(f64, String)]) -> Bound {
        let sum: f64 = terms.iter().map(|(s, _)| s).sum();
        let why = terms.iter().map(|(s, w)| format!("{s} s {w}")).collect::<Vec<_>>().join(" + ");
        Bound { secs: sum, why }
    }

    /// An outcome a controller decides on the watch event itself, with no period of its own: the
    /// scheduler binding a Pod that fits, the API server's establishing controller marking a
    /// CRD, the DaemonSet controller placing its Pods. Only the machine's allowance bounds it.
    pub fn on_event(who: &str) -> Bound {
        Bound { secs: 0.0, why: format!("{who} on the watch event (no period)") }
    }

    /// The kubelet restarting a crashed container: its first crash back-off, 10 s, a constant of
    /// the kubelet (kubernetes v1.35 `pkg/kubelet/kubelet.go` `backOffPeriod`), which the world's
    /// kubelet keeps.
    pub fn kubelet_restart() -> Bound {
        Bound { secs: 10.0, why: "the kubelet's first crash back-off".into() }
    }

    /// This bound and another outcome's after it.
    pub fn then(&self, next: &Bound) -> Bound {
        Bound { secs: self.secs + next.secs, why: format!("{} + {}", self.why, next.why) }
    }

    fn total(&self) -> f64 {
        self.secs + MACHINE_ALLOWANCE
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.total())
    }

    /// From now.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.duration()
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.0} s = {} + {MACHINE_ALLOWANCE} s the machine's allowance", self.total(), self.why)
    }
}

/// The world's timing: its controllers' flags and its own durations, in seconds.
#[derive(Debug, Clone)]
pub struct Timing(Value);

impl Timing {
    /// From the JSON of `GET /_sim/timing`. Panics, naming the key, if the world reports no
    /// value a bound needs (a world without a cluster has none of them).
    pub fn new(json: Value) -> Timing {
        Timing(json)
    }

    fn secs(&self, path: &str) -> f64 {
        let mut v = &self.0;
        for k in path.split('.') {
            v = &v[k];
        }
        v.as_f64().unwrap_or_else(|| panic!("the world reports no {path} in /_sim/timing: {}", self.0))
    }

    fn term(&self, path: &str, what: &str) -> (f64, String) {
        (self.secs(path), format!("{what} ({path})"))
    }

    /// A Node's Ready turning `Unknown` once its kubelet stops posting: the node lifecycle
    /// controller marks it when its Lease is older than the grace period, looking every monitor
    /// period (kubernetes `pkg/controller/nodelifecycle`, `monitorNodeHealth`).
    pub fn node_unknown(&self) -> Bound {
        Bound::of(&[
            self.term("kube_controller_manager.node_monitor_grace_period", "the node lifecycle controller's grace"),
            self.term("kube_controller_manager.node_monitor_period", "its monitor period"),
        ])
    }

    /// A Pod that tolerates an unreachable Node only for the API server's default seconds being
    /// evicted once its Node's kubelet stops posting: the Node turns `Unknown` and is tainted
    /// `unreachable:NoExecute` ([`Timing::node_unknown`]), then the taint eviction controller
    /// deletes the Pod when its toleration runs out (kubernetes
    /// `pkg/controller/tainteviction/taint_eviction.go`), on the taint's event.
    pub fn default_eviction(&self) -> Bound {
        self.node_unknown().then(&Bound::of(&[self.term(
            "kube_apiserver.default_unreachable_toleration_seconds",
            "the default toleration DefaultTolerationSeconds gives every Pod",
        )]))
    }

    /// The default toleration's seconds (`--default-unreachable-toleration-seconds`).
    pub fn default_toleration_secs(&self) -> f64 {
        self.secs("kube_apiserver.default_unreachable_toleration_seconds")
    }

    /// A Node's Ready back to `True` once its kubelet reaches the API again: the kubelet's next
    /// status post (the world's stand-in kubelet posts once a pass).
    pub fn node_ready_again(&self) -> Bound {
        Bound::of(&[self.term("stand_ins.pass", "the kubelet's next status post")])
    }

    /// A MachineConfig change on every one of a pool's `nodes` Nodes, one at a time as
    /// `maxUnavailable: 1` lets the machine-config operator's node controller point them
    /// (the world's stand-in looks once a pass), each machine's daemon's update (drain, write,
    /// reboot) as the world reports it, and the pool's status written on the next pass.
    pub fn machine_config_rollout(&self, nodes: usize) -> Bound {
        let mut b = Bound::of(&[self.term("stand_ins.pass", "the render controller's new config")]);
        for _ in 0..nodes {
            b = b.then(&Bound::of(&[
                self.term("stand_ins.pass", "the node controller's next Node"),
                self.term("machine_config_update.max", "the world's slowest daemon update"),
                self.term("stand_ins.pass", "the daemon's Done"),
            ]));
        }
        b.then(&Bound::of(&[self.term("stand_ins.pass", "the pool's status")]))
    }

    /// A CAPI controller's next reconcile of an object whose change it may have missed (a
    /// Machine's provider ID copied from its AzureMachine, a MachineSet's new Machine, a health
    /// check's remediation): at the latest its manager's resync.
    pub fn capi_reconciles(&self) -> Bound {
        Bound::of(&[self.term("capi.sync_period", "CAPI's resync")])
    }

    /// CAPZ's first report on a new Machine's AzureMachine (a condition it writes, or the VM it
    /// makes): the MachineSet controller makes the Machine and clones the AzureMachine, the
    /// Machine controller sets itself as the AzureMachine's owner (which CAPZ waits for), CAPZ
    /// reconciles it; each on the watch event, at the latest on its manager's resync.
    pub fn capz_reports(&self) -> Bound {
        Bound::of(&[
            self.term("capi.sync_period", "CAPI's resync: the MachineSet's Machine"),
            self.term("capi.sync_period", "CAPI's resync: the Machine's owner reference on its AzureMachine"),
            self.term("capz.sync_period", "CAPZ's resync: its first reconcile"),
        ])
    }

    /// A new Machine's Node registered and matched: CAPZ's first report, then its long-running
    /// operations (the NIC's PUT answers at once; the availability set, the VM and its disk are
    /// polled every requeue), the world's VM creation and boot, then CAPI's Machine controller
    /// matching the Node (on the Node's watch event, at the latest on its resync).
    pub fn machine_joins(&self) -> Bound {
        let requeue = self.secs("capz.reconciler_requeue");
        self.capz_reports().then(&Bound::of(&[
            (3.0 * requeue, "CAPZ's requeue for each of 3 long-running operations (capz.reconciler_requeue)".into()),
            self.term("capz.debouncing_timer", "CAPZ's next reconcile after the VM"),
            self.term("arm.vm_create_max", "the world's slowest VM creation"),
            self.term("boot.max", "the world's slowest boot"),
            self.term("capi.sync_period", "CAPI's resync: the Machine's node reference"),
        ]))
    }
}
