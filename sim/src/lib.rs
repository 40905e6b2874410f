//! The local clouds: one sim world hosting the emulated cloud APIs (today the Azure Resource
//! Manager emulator; the AWS fidelity layer and a Kubernetes API are to join it).
//!
//! Start one in-process for a test with [`SimServer::start`]; the binary `xcsp-sim` does the same
//! on a port given by `--port`. See `sim/README.md` for what is and is not emulated.

pub mod admin;
pub mod arm;
pub mod aws;
pub mod server;
pub mod world;

pub use server::{Sim, SimServer, StartError};
pub use world::{Profile, SimConfig};
