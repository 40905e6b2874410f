//! `xcsp-sim`: serves the sim world on 127.0.0.1 and prints its address on one line.

use clap::Parser;
use std::io::Write;
use xcsp_sim::{Profile, SimConfig, SimServer};

/// Local clouds for xcsp (Azure Resource Manager emulator).
#[derive(Parser, Debug)]
#[command(name = "xcsp-sim", version)]
struct Args {
    /// Port on 127.0.0.1 (0 = a free port).
    #[arg(long, default_value_t = 0, env = "XCSP_SIM_PORT")]
    port: u16,
    /// Latency profile: instant, fast or realistic.
    #[arg(long, default_value = "fast", env = "XCSP_SIM_LATENCY")]
    latency: Profile,
    /// Multiplier of realistic durations in the fast profile (default 1/600).
    #[arg(long)]
    time_scale: Option<f64>,
    /// Turn ARM throttling off.
    #[arg(long)]
    no_throttle: bool,
    /// Refuse tokens for another audience (e.g. https://management.usgovcloudapi.net).
    #[arg(long)]
    expected_audience: Option<String>,
}

fn main() {
    let args = Args::parse();
    let mut config = SimConfig::default();
    config.latency.profile = args.latency;
    if let Some(s) = args.time_scale {
        config.latency.time_scale = s;
    }
    config.throttle.enabled = !args.no_throttle;
    config.expected_audience = args.expected_audience;
    let server = match SimServer::start(config, args.port) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xcsp-sim: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "xcsp-sim listening on {}", server.base_url);
    let _ = out.flush();
    drop(out);
    // Serve until killed (SIGINT/SIGTERM end the process).
    loop {
        std::thread::park();
    }
}
