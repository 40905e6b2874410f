//! The link between the clouds, as the world judges it from both sides: whether each tunnel
//! negotiates ([`tunnels`]), and what a VM in the VNet reaches of the AWS side through it
//! ([`view`]). It reads both clouds through [`clouds::Clouds`] and is read by the cluster's
//! stand-ins and the front; neither cloud reads it except through
//! [`crate::aws::TunnelTelemetry`].

pub mod clouds;
pub mod tunnels;
pub mod view;
