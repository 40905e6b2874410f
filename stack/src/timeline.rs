//! `xcsp timeline EVENTS.jsonl [PATH] > run.svg`: the bars of a picture of an apply or destroy
//! from its `--json` events, which the CLI draws (`cli/src/views/timeline.rs`). Each operation is a
//! bar from its start to its end; the critical path is the chain from the operation that ended
//! last back through the dependency that ended last before it started, by the spec's graph; waits
//! (a gateway's turn, a resource still in use, throttling) are moments on their bar.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use xcsp_core::Address;
use xcsp_plans::graph::ResourceGraph;

/// One operation of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub address: Address,
    pub op: String,
    /// Seconds from the first event.
    pub start: f64,
    pub end: f64,
    pub failed: bool,
    /// Seconds at which it reported waiting or being throttled.
    pub waits: Vec<f64>,
    pub critical: bool,
}

/// The bars of a run's events (JSON lines with `event`, `address`, `op` and `time`). Lines that
/// are not events are skipped; an operation without an end (the run was killed) ends at the last event.
pub fn bars(events: &str) -> Result<Vec<Bar>, String> {
    let mut t0: Option<OffsetDateTime> = None;
    let mut last = 0.0f64;
    let mut open: BTreeMap<Address, Bar> = BTreeMap::new();
    let mut done: Vec<Bar> = Vec::new();
    for (n, line) in events.lines().enumerate().filter(|(_, l)| l.trim_start().starts_with('{')) {
        let v: Json = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        let Some(at) = v["time"].as_str().and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok()) else { continue };
        let t0 = *t0.get_or_insert(at);
        let secs = (at - t0).as_seconds_f64();
        last = last.max(secs);
        let Some(address) = v["address"].as_str().and_then(|a| a.parse::<Address>().ok()) else { continue };
        match v["event"].as_str().unwrap_or_default() {
            "started" => {
                let op = v["op"].as_str().unwrap_or_default().to_string();
                let bar = Bar {
                    address: address.clone(),
                    op,
                    start: secs,
                    end: secs,
                    failed: false,
                    waits: vec![],
                    critical: false,
                };
                open.insert(address, bar);
            }
            "waiting" | "throttled" => {
                if let Some(b) = open.get_mut(&address) {
                    b.waits.push(secs);
                }
            }
            kind @ ("finished" | "failed") => {
                if let Some(mut b) = open.remove(&address) {
                    b.end = secs;
                    b.failed = kind == "failed";
                    done.push(b);
                }
            }
            _ => {}
        }
    }
    for (_, mut b) in open {
        b.end = last;
        done.push(b);
    }
    done.sort_by(|a, b| a.start.total_cmp(&b.start).then_with(|| a.address.cmp(&b.address)));
    Ok(done)
}

/// Marks the critical path: from the bar that ended last, back through the dependency (in
/// `graph`) that ended last before it started.
pub fn mark_critical(bars: &mut [Bar], graph: &ResourceGraph) {
    let Some(mut at) = (0..bars.len()).max_by(|a, b| bars[*a].end.total_cmp(&bars[*b].end)) else { return };
    loop {
        bars[at].critical = true;
        let deps = graph.get(&bars[at].address).map(|n| n.dependencies()).unwrap_or_default();
        let start = bars[at].start;
        let before = (0..bars.len())
            .filter(|i| deps.contains(&bars[*i].address) && bars[*i].end <= start + 0.001)
            .max_by(|a, b| bars[*a].end.total_cmp(&bars[*b].end));
        match before {
            Some(i) => at = i,
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(event: &str, address: &str, secs: u32) -> String {
        format!(r#"{{"event":"{event}","address":"{address}","op":"create","time":"2026-11-24T10:00:{secs:02}Z"}}"#)
    }

    #[test]
    fn events_make_bars_and_the_critical_path_follows_dependencies() {
        let events = [
            line("started", "azure_resource_group.main", 0),
            line("finished", "azure_resource_group.main", 1),
            line("started", "azure_virtual_network.link", 1),
            line("started", "azure_user_assigned_identity.capz", 1),
            line("finished", "azure_user_assigned_identity.capz", 2),
            line("waiting", "azure_virtual_network.link", 3),
            line("finished", "azure_virtual_network.link", 5),
            "not an event".to_string(),
        ]
        .join("\n");
        let mut bars = bars(&events).unwrap();
        assert_eq!(bars.len(), 3);
        let vnet = bars.iter().find(|b| b.address.to_string() == "azure_virtual_network.link").unwrap();
        assert_eq!((vnet.start, vnet.end, vnet.waits.clone()), (1.0, 5.0, vec![3.0]));
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/public");
        let graph = xcsp_plans::load(&path, &Default::default()).unwrap_or_else(|_| panic!("the example loads")).graph;
        mark_critical(&mut bars, &graph);
        let critical: Vec<String> = bars.iter().filter(|b| b.critical).map(|b| b.address.to_string()).collect();
        assert_eq!(critical, ["azure_resource_group.main", "azure_virtual_network.link"]);
    }
}
