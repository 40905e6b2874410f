#!/usr/bin/env python3
"""Key rotation on the local clouds: per-tunnel downtime and the fewest tunnels up, as the sim sees them.

Starts xcsp-sim with the realistic durations scaled (default: 1 real minute = 1 s), applies an
example, then runs `xcsp rotate-keys` while a thread samples the sim's own tunnel verdicts
(`GET /_sim/tunnels`) every 20 ms. Prints, per tunnel, how long it was down during the rotation,
the fewest tunnels up in any sample, and the rotation's wall time; each figure also scaled back
to the real durations the profile models (divided by the scale).

usage: scripts/bench-rotation.py [EXAMPLE] [--scale 0.0166]
"""
import argparse, json, os, subprocess, sys, tempfile, threading, time, urllib.request

p = argparse.ArgumentParser()
p.add_argument("example", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "examples", "il5-govcloud"))
p.add_argument("--scale", type=float, default=1 / 60)
p.add_argument("--fixture", default="il5-gpu-x7k2p:us-gov-west-1")
a = p.parse_args()

scratch = tempfile.mkdtemp()
target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/xcsp-target"))
bin_dir = os.path.join(target, os.environ.get("XCSP_PROFILE", "debug"))
kubeconfig = os.path.join(scratch, "kubeconfig")
sim = subprocess.Popen([f"{bin_dir}/xcsp-sim", "--latency", "fast", "--time-scale", str(a.scale), "--no-throttle",
                        "--fixture", a.fixture, "--kubeconfig", kubeconfig], stdout=subprocess.PIPE, text=True)
try:
    url = sim.stdout.readline().split()[3]
    while not sim.stdout.readline().startswith("xcsp-sim fixture"):
        pass
    state = tempfile.mkdtemp()
    env = dict(os.environ, AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local",
               XCSP_AZURE_ENDPOINT=url, AZURE_AUTHORITY_HOST=url, AZURE_CLIENT_ID="bench", AZURE_CLIENT_SECRET="local",
               AZURE_TENANT_ID="00000000-0000-0000-0000-000000000001", XCSP_OFFLINE="1", XCSP_STATE_DIR=state,
               KUBECONFIG=kubeconfig)
    xcsp = lambda *args: subprocess.run([f"{bin_dir}/xcsp", *args], capture_output=True, text=True, env=env)
    out = xcsp("apply", "--auto-approve", a.example)
    if out.returncode != 0:
        sys.exit(f"apply failed:\n{out.stdout}\n{out.stderr}")

    def verdicts():
        return json.load(urllib.request.urlopen(f"{url}/_sim/tunnels"))["tunnels"]

    # Wait for every tunnel to be up before the rotation starts.
    deadline = time.monotonic() + 120
    while not (len(v := verdicts()) == 4 and all(t["up"] for t in v)):
        if time.monotonic() > deadline:
            sys.exit(f"the tunnels never came up: {v}")
        time.sleep(0.1)
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((time.monotonic(), {t["outside_ip"]: t["up"] for t in verdicts()}))
            time.sleep(0.02)

    thread = threading.Thread(target=sample)
    thread.start()
    started = time.monotonic()
    out = xcsp("rotate-keys", "--auto-approve", a.example)
    wall = time.monotonic() - started
    stop.set()
    thread.join()
    if out.returncode != 0:
        sys.exit(f"rotate-keys failed:\n{out.stdout}\n{out.stderr}")
    down = {}
    for (t0, seen), (t1, _) in zip(samples, samples[1:]):
        for ip, up in seen.items():
            down[ip] = down.get(ip, 0.0) + (0.0 if up else t1 - t0)
    fewest = min(sum(seen.values()) for _, seen in samples)
    print(f"scale {a.scale:.4f}: {len(samples)} samples over {wall:.2f} s; fewest tunnels up in a sample: {fewest} of 4")
    for i, (ip, d) in enumerate(sorted(down.items())):
        print(f"  tunnel {i} ({ip}): down {d:.2f} s (modelled real time {d / a.scale / 60:.1f} min)")
    print(f"rotation wall time {wall:.2f} s (modelled real time {wall / a.scale / 60:.1f} min)")
finally:
    sim.terminate()
    sim.wait()
