//! The stand-ins for what cannot run in the local cluster, as clients of its upstream API server
//! ([`crate::cluster`]): OpenShift's install ([`openshift`], [`mco`]), each VM's boot and kubelet
//! ([`boot`]) and machine-config daemon ([`rollout`], with the operator's node controller) from the VM the real CAPZ made through the ARM emulator, and where a Machine's join
//! is held ([`joins`]), run each pass by the [`bridge`] over a snapshot of the cluster's objects
//! ([`store`]). See `sim/README.md` ("The cluster").

pub mod boot;
pub mod bridge;
pub mod joins;
pub mod kinds;
pub mod mco;
pub mod openshift;
pub mod pods;
pub mod rollout;
pub mod seed;
pub mod store;
