//! The world whole: its clock and faults, both clouds, and the cluster's stand-ins, held together
//! for the floors above (the HTTP front and the admin API) and handed to the floors below only as
//! the narrow views they read ([`Clouds`] and the EC2 layer's view made from it, [`crate::kube::bridge::Floors`]).

use crate::arm::Arm;
use crate::link::clouds::Clouds;
use crate::world::{SimConfig, World};
use std::sync::Arc;

/// The whole simulated world: shared settings plus the emulated clouds.
#[derive(Debug)]
pub struct Sim {
    pub world: World,
    pub arm: Arm,
    pub aws: crate::aws::Aws,
    /// The configuration to return to on `/_sim/reset`.
    pub initial: SimConfig,
    /// The stand-ins as clients of the world's cluster, when it runs one.
    pub bridge: std::sync::OnceLock<Arc<crate::kube::bridge::Bridge>>,
    /// A kubeconfig for the world's cluster, when it runs one.
    pub kubeconfig: std::sync::OnceLock<String>,
    /// A CAPZ manager runs in the world's cluster (the world's own, [`crate::cluster::Capz`], or
    /// the pod of a CAPZ Deployment someone applied, [`crate::kube::pods`]): only it makes and
    /// deletes the workers' VMs; without one, a machine's join is held at its VM.
    pub real_capz: std::sync::atomic::AtomicBool,
    /// The timing flags its cluster's controllers run with, when it runs one (`GET /_sim/timing`).
    pub timing: std::sync::OnceLock<crate::cluster::Timing>,
}

impl Sim {
    pub fn new(config: SimConfig) -> Sim {
        let world = World::new(config.clone());
        Sim {
            world,
            arm: Arm::default(),
            aws: Default::default(),
            initial: config,
            bridge: Default::default(),
            kubeconfig: Default::default(),
            real_capz: Default::default(),
            timing: Default::default(),
        }
    }

    /// Forgets all cloud resources, tokens, counters and the journal; restores the initial
    /// configuration. The cluster's objects stay: a reset of the world does not reinstall it.
    pub fn reset(&self) {
        self.world.reset(self.initial.clone());
        self.arm.reset();
        self.aws.reset();
    }

    /// Both clouds, for one reading of the link.
    pub fn clouds(&self) -> Clouds<'_> {
        Clouds { world: &self.world, arm: &self.arm, aws: &self.aws }
    }
}

impl crate::kube::bridge::Floors for Sim {
    fn clouds(&self) -> Clouds<'_> {
        Sim::clouds(self)
    }

    fn real_capz(&self) -> bool {
        self.real_capz.load(std::sync::atomic::Ordering::SeqCst)
    }
}
