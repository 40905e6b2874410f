//! How a run shows itself: a live view on a terminal (one line per running operation with its
//! elapsed time, and an overall bar), timestamped lines at a steady rhythm without one (CI), or one
//! JSON object per line with `--json`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use xcsp_core::Address;
use xcsp_engine::{Action, Event};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Live,
    Lines,
    Json,
}

impl Mode {
    pub fn pick(json: bool) -> Mode {
        if json {
            Mode::Json
        } else if std::io::stdout().is_terminal() {
            Mode::Live
        } else {
            Mode::Lines
        }
    }
}

/// How often plain output repeats what is still running.
const RHYTHM: Duration = Duration::from_secs(10);

fn stamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!("{:02}:{:02}:{:02}", now.hour(), now.minute(), now.second())
}

pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// One running operation as the view tracks it.
struct Running {
    op: Action,
    since: Instant,
    waiting: Option<String>,
    bar: Option<ProgressBar>,
}

/// ", about 3m10s to go": the last estimate less the time since it came.
fn eta_text(eta: Option<(Instant, Duration)>) -> String {
    eta.map(|(at, left)| format!(", about {} to go", elapsed(left.saturating_sub(at.elapsed())))).unwrap_or_default()
}

/// Renders events until the sender side closes. `total` sizes the overall bar.
pub fn spawn(mode: Mode, mut rx: UnboundedReceiver<Event>, total: usize) -> JoinHandle<()> {
    tokio::spawn(async move {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let overall = (mode == Mode::Live).then(|| {
            let bar = multi.add(ProgressBar::new(total as u64));
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} done, {msg} [{elapsed}]").expect("valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        let spinner = ProgressStyle::with_template("{spinner} {msg}").expect("valid template");
        let mut running: BTreeMap<Address, Running> = BTreeMap::new();
        // The engine's last estimate of the time left, and when it came.
        let mut eta: Option<(Instant, Duration)> = None;
        let mut tick = tokio::time::interval(if mode == Mode::Live { Duration::from_secs(1) } else { RHYTHM });
        tick.tick().await;
        let say = |line: String| match &overall {
            Some(_) => multi.println(line).unwrap_or(()),
            None => println!("{} {line}", stamp()),
        };
        loop {
            let event = tokio::select! {
                e = rx.recv() => match e { Some(e) => e, None => break },
                _ = tick.tick() => {
                    for (a, r) in &running {
                        let wait = r.waiting.as_deref().map(|w| format!("; {w}")).unwrap_or_default();
                        let line = format!("{a}: still {}... [{} elapsed{wait}]", r.op.doing().to_lowercase(), elapsed(r.since.elapsed()));
                        match &r.bar {
                            Some(bar) => bar.set_message(format!("{} {a}... {}{wait}", r.op.doing(), elapsed(r.since.elapsed()))),
                            None if mode == Mode::Lines => say(line),
                            None => {}
                        }
                    }
                    match &overall {
                        Some(o) => o.set_message(format!("{} running{}", running.len(), eta_text(eta))),
                        None if mode == Mode::Lines && !running.is_empty() && eta.is_some() => {
                            say(format!("{} running{} (estimate)", running.len(), eta_text(eta)))
                        }
                        None => {}
                    }
                    continue;
                }
            };
            if mode == Mode::Json {
                let mut v = serde_json::to_value(&event).expect("events serialize");
                v["time"] = serde_json::Value::String(
                    time::OffsetDateTime::now_utc()
                        .format(&time::format_description::well_known::Rfc3339)
                        .unwrap_or_default(),
                );
                println!("{v}");
                continue;
            }
            match event {
                Event::Refreshing { .. } => {}
                Event::Adopted { address, id } => {
                    say(format!("{address}: found in the cloud ({id}) from an interrupted run; adopted"))
                }
                Event::Vanished { address } => say(format!("{address}: no longer exists in the cloud")),
                Event::Started { address, op } => {
                    say(format!("{address}: {}...", op.doing()));
                    let bar = overall.as_ref().map(|_| {
                        let bar = multi.insert_from_back(1, ProgressBar::new_spinner());
                        bar.set_style(spinner.clone());
                        bar.set_message(format!("{} {address}...", op.doing()));
                        bar.enable_steady_tick(Duration::from_millis(120));
                        bar
                    });
                    running.insert(address, Running { op, since: Instant::now(), waiting: None, bar });
                }
                Event::Waiting { address, what } => {
                    if let Some(r) = running.get_mut(&address) {
                        r.waiting = Some(what);
                    }
                }
                Event::Throttled { address, limit } => {
                    say(format!("{address}: throttled by the cloud; will run again (at most {limit} at once)"))
                }
                Event::Finished { address, op, elapsed: took } => {
                    if let Some(bar) = running.remove(&address).and_then(|r| r.bar) {
                        bar.finish_and_clear();
                    }
                    say(format!("{address}: {} after {}", op.done(), elapsed(took)));
                    if let Some(o) = &overall {
                        o.inc(1);
                    }
                }
                Event::Failed { address, op, error } => {
                    if let Some(bar) = running.remove(&address).and_then(|r| r.bar) {
                        bar.finish_and_clear();
                    }
                    say(format!("{address}: {} failed: {error}", op.doing().to_lowercase()));
                }
                Event::Skipped { address, because } => say(format!("{address}: skipped ({because})")),
                Event::Estimate { remaining } => eta = Some((Instant::now(), remaining)),
                Event::Stopping { in_flight } => say(format!(
                    "Interrupt: starting nothing new, waiting for {in_flight} running operation(s) to finish (Ctrl-C again to abandon them)"
                )),
                Event::Abandoning { in_flight } => say(format!(
                    "Abandoning {in_flight} running operation(s); they stay recorded as intents and the next apply adopts what they made"
                )),
            }
            if let Some(o) = &overall {
                o.set_message(format!("{} running{}", running.len(), eta_text(eta)));
            }
        }
        if let Some(o) = overall {
            o.finish_and_clear();
        }
    })
}
