//! Ports for the programs the world starts (etcd, the API server, the managers, moto), which bind
//! them themselves a moment after the world chose them.
//!
//! A port the kernel hands out for `bind(127.0.0.1:0)` comes from the ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 by default), the same range every
//! outgoing connection on the machine takes its source port from. Once the world closes its probe,
//! any connection of any process may take that port before the program binds it, and the program
//! dies with `address already in use` (CAPI's manager did so in CI, its webhook port taken while
//! tests ran side by side). So the world chooses below the ephemeral range, where no connection is
//! given a port, at random, checks that nothing listens there, and never hands the same port twice
//! in one process.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};
use std::sync::Mutex;

/// The lowest port chosen: above the registered services most machines run.
const FLOOR: u16 = 10_000;

static HANDED: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// The first port of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32_768)
}

/// A port no program listens on, on every address, outside the ephemeral range; the kernel's
/// choice when that range leaves no room below it.
pub fn free_port() -> std::io::Result<u16> {
    let mut handed = HANDED.lock().unwrap_or_else(|e| e.into_inner());
    let below = FLOOR..ephemeral_start();
    let range = if below.len() >= 1_000 { below } else { 0..0 };
    choose(handed.get_or_insert_with(HashSet::new), range)
}

/// A port of `range` that is neither in `handed` nor listened on, else the kernel's; added to
/// `handed`.
fn choose(handed: &mut HashSet<u16>, range: std::ops::Range<u16>) -> std::io::Result<u16> {
    if !range.is_empty() {
        for _ in 0..200 {
            let port = rand::random_range(range.clone());
            if handed.contains(&port) {
                continue;
            }
            // The wildcards (Go's `:port` is `[::]:port`, dual stack) and loopback must be free;
            // a machine without IPv6 refuses `[::]` for another reason than a listener.
            let v6_free = match TcpListener::bind((Ipv6Addr::UNSPECIFIED, port)) {
                Ok(_) => true,
                Err(e) => e.kind() != std::io::ErrorKind::AddrInUse,
            };
            if v6_free
                && TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
                && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
            {
                handed.insert(port);
                return Ok(port);
            }
        }
    }
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
    handed.insert(port);
    Ok(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_in_the_range_and_never_handed_twice() {
        let mut handed = HashSet::new();
        let ports: Vec<u16> = (0..50).map(|_| choose(&mut handed, FLOOR..32_768).unwrap()).collect();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        assert!(ports.iter().all(|p| (FLOOR..32_768).contains(p)), "{ports:?}");
    }

    #[test]
    fn a_port_something_listens_on_is_not_chosen() {
        // Ten ports, six of them held by listeners: four picks all land on the other four.
        let base = choose(&mut HashSet::new(), 20_000..30_000).unwrap() / 10 * 10;
        let range = base..base + 10;
        let mut probe = HashSet::new();
        let held: Vec<TcpListener> = (0..6)
            .filter_map(|_| TcpListener::bind((Ipv4Addr::UNSPECIFIED, choose(&mut probe, range.clone()).ok()?)).ok())
            .collect();
        let busy: HashSet<u16> = held.iter().map(|l| l.local_addr().unwrap().port()).collect();
        assert!(busy.len() >= 5, "{busy:?}");
        let mut handed = HashSet::new();
        for _ in 0..4 {
            let port = choose(&mut handed, range.clone()).unwrap();
            assert!(!busy.contains(&port), "{port} is listened on");
        }
    }

    #[test]
    fn an_empty_range_leaves_the_choice_to_the_kernel() {
        let mut handed = HashSet::new();
        let port = choose(&mut handed, 0..0).unwrap();
        assert!(port > 0 && handed.contains(&port));
    }
}
