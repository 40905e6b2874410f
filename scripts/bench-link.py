#!/usr/bin/env python3
"""The link on the local clouds, as the sim sees it: time to every tunnel up, and a key rotation.

Starts xcsp-sim with the realistic durations scaled (default: 1 real minute = 1 s) and samples the
sim's own tunnel verdicts (`GET /_sim/tunnels`) every 20 ms, never xcsp's output.
1. Applies an example (`--json`) and prints how long after the apply started every tunnel was up,
   against the Azure VPN gateway's own create (from the apply's events): the link's overhead
   beyond the gateway.
2. Runs `xcsp rotate-keys` and prints, per tunnel, how long it was down, the fewest tunnels up in
   any sample, and the rotation's wall time.
Each figure is also scaled back to the real durations the profile models (divided by the scale).

usage: scripts/bench-link.py [EXAMPLE] [--scale 0.0166] [--events FILE]
"""
import argparse, json, os, subprocess, sys, tempfile, threading, time, urllib.request

import local_clouds

p = argparse.ArgumentParser()
p.add_argument("example", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "examples", "il5-govcloud"))
p.add_argument("--scale", type=float, default=1 / 60)
p.add_argument("--fixture", default="il5-gpu-x7k2p:us-gov-west-1")
p.add_argument("--events", help="write the apply's --json events here (for `xcsp timeline`)")
a = p.parse_args()

sim, url, kubeconfig = local_clouds.start(a.scale, a.fixture, issuer=local_clouds.issuer_of(a.example),
                                         api_host=local_clouds.api_int_of(a.example),
                                         authority=local_clouds.authority_of(a.example),
                                         fips=local_clouds.fips_of(a.example))
bin_dir = local_clouds.BIN
try:
    state = tempfile.mkdtemp()
    env = local_clouds.env(url, state, kubeconfig)
    xcsp = lambda *args: subprocess.run([f"{bin_dir}/xcsp", *args], capture_output=True, text=True, env=env)
    def verdicts():
        return json.load(urllib.request.urlopen(f"{url}/_sim/tunnels"))["tunnels"]

    def all_up(v):
        return len(v) == 4 and all(t["up"] for t in v)

    started = time.monotonic()
    apply = subprocess.Popen([f"{bin_dir}/xcsp", "apply", "--auto-approve", "--json", a.example],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    up_at = None
    deadline = started + 600
    while up_at is None:
        if all_up(verdicts()):
            up_at = time.monotonic() - started
        elif time.monotonic() > deadline:
            sys.exit(f"the tunnels never came up: {verdicts()}")
        else:
            time.sleep(0.02)
    out, err = apply.communicate()
    applied = time.monotonic() - started
    if a.events:
        with open(a.events, "w") as f:
            f.write(out)
    if apply.returncode != 0:
        sys.exit(f"apply failed:\n{out}\n{err}")
    gateway = max(json.loads(l)["elapsed"] / 1000 for l in out.splitlines()
                  if l.startswith("{") and '"finished"' in l and "azure_virtual_network_gateway." in l)
    m = lambda s: s / a.scale / 60
    print(f"apply: every tunnel up {up_at:.2f} s after the start (modelled {m(up_at):.1f} min); the Azure VPN "
          f"gateway's own create {gateway:.2f} s (modelled {m(gateway):.1f} min); beyond it {up_at - gateway:.2f} s "
          f"(modelled {m(up_at - gateway):.1f} min); apply ended at {applied:.2f} s")
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
