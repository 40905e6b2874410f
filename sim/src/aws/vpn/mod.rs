//! The Site-to-Site VPN resources the fidelity layer owns instead of moto: virtual private
//! gateways, customer gateways, VPN connections with per-tunnel options, static routes and route
//! propagation. moto 5.2.5 drops tunnel options, answers 500 to propagation, static routes and
//! tunnel modification, lets an attached gateway or a used customer gateway be deleted, and makes
//! every state final at once; here each behaves as the EC2 API reference documents.
//!
//! This module holds the records and the store; the actions are in [`gateways`] (virtual private
//! and customer gateways, route propagation), [`connections`] (VPN connections and their static
//! routes), [`tunnel_options`] (a tunnel's options, their ranges and AWS's defaults) and
//! [`configuration`] (the `CustomerGatewayConfiguration` document).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::query::Ec2Error;

pub mod configuration;
pub mod connections;
pub mod gateways;
pub mod tunnel_options;

pub(crate) use tunnel_options::host;
pub use tunnel_options::{ENCRYPTION, IKE, INTEGRITY, P1_DH, P2_DH, Tunnel};

/// A lifecycle timed by the latency profile: pending until `ready`, deleting until `gone`.
#[derive(Debug, Clone)]
pub struct Life {
    pub ready: Instant,
    pub gone: Option<Instant>,
}

impl Life {
    pub fn new(now: Instant, takes: Duration) -> Life {
        Life { ready: now + takes, gone: None }
    }

    /// `pending`, `available`, `deleting` or `deleted`.
    pub fn state(&self, now: Instant) -> &'static str {
        match self.gone {
            Some(g) if now >= g => "deleted",
            Some(_) => "deleting",
            None if now >= self.ready => "available",
            None => "pending",
        }
    }

    pub fn live(&self, now: Instant) -> bool {
        matches!(self.state(now), "pending" | "available")
    }
}

#[derive(Debug, Clone)]
pub struct Vgw {
    pub id: String,
    pub asn: i64,
    pub life: Life,
    /// VPC id, and when the attachment completes (`attaching` before, `attached` after) while
    /// attached, or when the detachment does (`detaching` before, `detached` after) once removed.
    pub attachment: Option<(String, Instant, bool)>,
    pub tags: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct Cgw {
    pub id: String,
    pub ip: String,
    pub asn: i64,
    /// The ASN came as `BgpAsnExtended` (and is reported as `bgpAsnExtended`).
    pub extended: bool,
    pub device_name: Option<String>,
    pub life: Life,
    pub tags: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct Conn {
    pub id: String,
    pub cgw: String,
    pub vgw: String,
    pub static_only: bool,
    pub tunnels: [Tunnel; 2],
    pub routes: BTreeSet<String>,
    pub life: Life,
    /// A tunnel modification in progress: `modifying` until then.
    pub modifying_until: Option<Instant>,
    pub tags: Vec<(String, String)>,
}

impl Conn {
    /// The lifecycle state, with `modifying` while a ModifyVpnTunnelOptions is applied.
    pub fn state(&self, now: Instant) -> &'static str {
        match self.life.state(now) {
            "available" if self.modifying_until.is_some_and(|u| now < u) => "modifying",
            s => s,
        }
    }
}

/// What the layer holds.
#[derive(Debug, Default)]
pub struct VpnStore {
    pub vgws: BTreeMap<String, Vgw>,
    pub cgws: BTreeMap<String, Cgw>,
    pub conns: BTreeMap<String, Conn>,
    /// Route table id -> gateways propagating into it.
    pub propagation: BTreeMap<String, BTreeSet<String>>,
    next: u64,
}

/// Tunnel status decided by the world: (UP/DOWN, message) per (connection id, outside ip).
pub type Telemetry = BTreeMap<(String, String), (bool, String)>;

impl VpnStore {
    fn id(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}-{:017x}", 0x0a1b2c3d4e5f6000u64 + self.next)
    }

    /// AWS picks tunnel outside addresses from its public ranges; these come from 203.0.113.0/24
    /// (TEST-NET-3), two per connection, never reused within a run.
    fn outside_ip(&mut self) -> String {
        self.next += 1;
        format!("203.0.113.{}", 10 + (self.next % 240))
    }
}

fn matches_filters(filters: &[(String, Vec<String>)], field: impl Fn(&str) -> Vec<String>) -> bool {
    filters.iter().all(|(name, values)| {
        let have = field(name);
        values.iter().any(|v| have.iter().any(|h| h == v))
    })
}

fn tag_field(tags: &[(String, String)], name: &str) -> Option<Vec<String>> {
    if let Some(k) = name.strip_prefix("tag:") {
        return Some(tags.iter().filter(|(tk, _)| tk == k).map(|(_, v)| v.clone()).collect());
    }
    if name == "tag-key" {
        return Some(tags.iter().map(|(k, _)| k.clone()).collect());
    }
    None
}

fn not_found(kind: &str, id: &str) -> Ec2Error {
    Ec2Error::bad(&format!("Invalid{kind}ID.NotFound"), format!("The {kind} ID '{id}' does not exist"))
}

/// Durations of the real service, in seconds (low, high), scaled by the profile.
pub struct Timing<'a> {
    pub scaled: &'a (dyn Fn(f64, f64) -> Duration + Sync),
    pub now: Instant,
}

impl VpnStore {
    /// Tags on the layer's own resources; returns the ids it does not own.
    pub fn tag(&mut self, ids: &[String], tags: &[(String, String)], add: bool) -> Vec<String> {
        let mut others = Vec::new();
        for id in ids {
            let set = if let Some(g) = self.vgws.get_mut(id) {
                &mut g.tags
            } else if let Some(c) = self.cgws.get_mut(id) {
                &mut c.tags
            } else if let Some(c) = self.conns.get_mut(id) {
                &mut c.tags
            } else {
                others.push(id.clone());
                continue;
            };
            for (k, v) in tags {
                set.retain(|(sk, _)| sk != k);
                if add {
                    set.push((k.clone(), v.clone()));
                }
            }
        }
        others
    }
}
