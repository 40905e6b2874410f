#!/usr/bin/env python3
"""How long apply waits on a pool Azure will never make, on the local clouds.

Starts xcsp-sim for an example's cluster with the realistic durations scaled (default: 1 real
minute = 1 s), gives the example's pool an `image_id` no gallery holds, and runs
`xcsp apply --json` (offline: plan reads nothing, so CAPZ meets the refusal). Reports, from the
run's own events, the seconds from the start of each wait for Nodes (`k8s_nodes_ready`) to its
failure, the cloud code it failed with, and that wait against `machine_timeout` (1800 s), which
it would otherwise have run to. The first is real seconds, whatever the scale: the wait polls
every 5 s and CAPZ reports the refused PUT on its first reconcile.

usage: scripts/bench-fail-fast.py [EXAMPLE] [--scale 0.0166]
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time

import local_clouds

p = argparse.ArgumentParser()
p.add_argument("example", nargs="?", default="examples/public")
p.add_argument("--scale", type=float, default=1 / 60)
a = p.parse_args()

MACHINE_TIMEOUT = 1800.0
spec_dir = tempfile.mkdtemp()
for name in os.listdir(a.example):
    text = open(os.path.join(a.example, name)).read()
    sub = re.search(r'subscription_id\s*=\s*"([0-9a-f-]{36})"', text)
    missing = f"/subscriptions/{sub.group(1) if sub else '00000000-0000-0000-0000-000000000000'}/resourceGroups/images/providers/Microsoft.Compute/galleries/none/images/rhcos/versions/1.0.0"
    # The pool's image (a block or an id) replaced by an id nothing made.
    text = re.sub(r'(?ms)^  image \{.*?^  \}\n|^  image \{[^\n]*\}\n|^  image_id\s*=.*\n', f'  image_id = "{missing}"\n', text)
    open(os.path.join(spec_dir, name), "w").write(text)

sim, url, kubeconfig = local_clouds.start(a.scale, local_clouds.fixture_of(a.example),
                                          issuer=local_clouds.issuer_of(a.example),
                                          api_host=local_clouds.api_int_of(a.example),
                                          authority=local_clouds.authority_of(a.example),
                                          fips=local_clouds.fips_of(a.example))
try:
    env = local_clouds.env(url, tempfile.mkdtemp(), kubeconfig)
    started = time.monotonic()
    proc = subprocess.Popen([f"{local_clouds.BIN}/xcsp", "apply", "--auto-approve", "--json", spec_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # Each wait's start and end, as the events arrive.
    begun, waits, lines = {}, [], []
    first_event = None
    for line in proc.stdout:
        lines.append(line)
        first_event = time.monotonic() - started if first_event is None else first_event
        if not line.startswith("{"):
            continue
        e = json.loads(line)
        address = str(e.get("address", ""))
        if not address.startswith("k8s_nodes_ready."):
            continue
        if e["event"] == "started":
            begun[address] = time.monotonic()
        if e["event"] in ("failed", "finished") and address in begun:
            code = re.search(r": (\w+): ", e.get("error", ""))
            waits.append({"wait": address, "event": e["event"], "code": code.group(1) if code else None,
                          "waited_s": round(time.monotonic() - begun[address], 1)})
    stderr = proc.stderr.read()
    proc.wait()
    wall = time.monotonic() - started
    if proc.returncode == 0 or not any(w["event"] == "failed" for w in waits):
        sys.exit(f"apply did not fail on its Nodes wait:\n{''.join(lines)[-4000:]}\n{stderr[-4000:]}")
    longest = max(w["waited_s"] for w in waits)
    print(json.dumps({"example": a.example, "apply_wall_s": round(wall, 1),
                      "first_event_s": round(first_event, 1), "waits": waits,
                      "longest_wait_over_machine_timeout": round(longest / MACHINE_TIMEOUT, 4)}))
finally:
    sim.terminate()
    sim.wait()
    shutil.rmtree(spec_dir, ignore_errors=True)
