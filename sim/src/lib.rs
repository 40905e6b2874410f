//! The local clouds: one sim world hosting the emulated cloud APIs: the Azure Resource Manager
//! emulator, the AWS EC2 fidelity layer in front of moto, and a Kubernetes API subset.
//!
//! Start one in-process for a test with [`SimServer::start`]; the binary `xcsp-sim` does the same
//! on a port given by `--port` (and the Kubernetes API over TLS on `--kube-port`). See `sim/README.md` for what is and is not emulated.

pub mod admin;
pub mod arm;
pub mod aws;
pub mod child;
pub mod cluster;
pub mod front;
pub mod kube;
pub mod link;
pub mod ports;
pub mod proxy;
pub mod release;
pub mod server;
pub mod whole;
pub mod world;

pub use server::{SimServer, StartError};
pub use whole::Sim;
pub use world::{AWS_CLUSTER_NETWORK_MTU, OpenShift, Profile, SimConfig};
