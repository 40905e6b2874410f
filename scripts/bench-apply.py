#!/usr/bin/env python3
"""Apply wall time against the critical path, on the local clouds.

Starts xcsp-sim with the realistic durations scaled (default: 1 real minute = 1 s), applies an
example with `xcsp apply --json`, and compares the wall time of the run with its critical path:
the longest chain of the graph (from `xcsp graph`) weighted by how long each operation took in
this very run. A ratio of 1.00 means the run took no longer than its slowest chain.

While the apply runs, the sim's own view of the pool's machines (`/_sim/machines`, read every
0.1 s) gives when the first machine joined (its Node registered, Ready and matched to its Machine)
and when all had, counted from the apply's start: what the cluster saw, not xcsp's polling.

With --compare-ordering it runs twice, each on fresh clouds: as xcsp orders the apply (the
machines made while the gateway builds), then with the MachineSets held until the link's VPN
connections are up, as before (XCSP_BENCH_MACHINES_AFTER_LINK); `link_up_s` is when the last
of them finished.

usage: scripts/bench-apply.py EXAMPLE [--scale 0.0166] [--parallelism N] [--order critical-path|fifo] [--compare-ordering]
       scripts/bench-apply.py EXAMPLE --xcsp PATH     (time another build of xcsp)
       scripts/bench-apply.py --links 10 --pools 5 --rules-per-group 100 [...]
                                          (a generated stack, one local VPC per link)
"""
import argparse, json, os, re, ssl, subprocess, sys, tempfile, threading, time, urllib.request

import local_clouds

p = argparse.ArgumentParser()
p.add_argument("example", nargs="?")
p.add_argument("--links", type=int, default=0)
p.add_argument("--pools", type=int, default=5)
p.add_argument("--scale", type=float, default=1 / 60)
p.add_argument("--parallelism", type=int, default=32)
p.add_argument("--order", default="critical-path")
p.add_argument("--fixture", default="il5-gpu-x7k2p:us-gov-west-1")
# The account's inbound-rules-per-security-group quota: AWS's default 60 holds 7 links' rules
# (8 each) on the cluster's groups; a 10-link stack needs it raised, as a real account would.
p.add_argument("--rules-per-group", type=int, default=60)
p.add_argument("--compare-ordering", action="store_true")
# Another build of xcsp to time (e.g. one built with --no-default-features, not FIPS: it then
# needs XCSP_ALLOW_NON_FIPS_BUILD=true for a FIPS cluster's example).
p.add_argument("--xcsp", default=None)
a = p.parse_args()
if a.links:
    a.fixture = "bench-x1:us-gov-west-1"

def bench(extra_env):
    issuer = "https://issuer.bench" if a.links else local_clouds.issuer_of(a.example)
    sim, url, kubeconfig = local_clouds.start(a.scale, a.fixture, "--aws-rules-per-group", str(a.rules_per_group),
                                              issuer=issuer, api_host=None if a.links else local_clouds.api_int_of(a.example),
                                              authority=None if a.links else local_clouds.authority_of(a.example),
                                              fips=not a.links and local_clouds.fips_of(a.example))
    bin_dir = local_clouds.BIN
    xcsp = a.xcsp or f"{bin_dir}/xcsp"
    try:
        state = tempfile.mkdtemp()
        if a.links:
            # One VPC per link (AWS allows one virtual private gateway per VPC), made through the
            # sim's EC2 front; the generated spec names them.
            vpcs = []
            for _ in range(a.links):
                req = urllib.request.Request(f"{url}/", data=b"Action=CreateVpc&CidrBlock=10.0.0.0/16&Version=2016-11-15",
                    headers={"Content-Type": "application/x-www-form-urlencoded",
                             "Authorization": "AWS4-HMAC-SHA256 Credential=x/20260101/us-gov-west-1/ec2/aws4_request, SignedHeaders=host, Signature=0"})
                vpcs.append(re.search(r"<vpcId>([^<]+)</vpcId>", urllib.request.urlopen(req).read().decode()).group(1))
            a.example = os.path.join(state, "bench.xcsp.hcl")
            here = os.path.dirname(os.path.abspath(__file__))
            subprocess.run([sys.executable, os.path.join(here, "gen-bench-spec.py"), str(a.links), str(a.pools), a.example,
                            ",".join(vpcs)], check=True)
        env = local_clouds.env(url, state, kubeconfig)
        env.update(extra_env)
        dot = subprocess.run([xcsp, "graph", a.example], capture_output=True, text=True, env=env).stdout
        edges = re.findall(r'"([^"]+)" -> "([^"]+)"', dot)
        joined = []  # (seconds since the apply started, machines joined), at each change
        done = threading.Event()
        def watch_machines(since):
            insecure = ssl._create_unverified_context()
            while not done.wait(0.1):
                try:
                    body = json.load(urllib.request.urlopen(f"{url}/_sim/machines", context=insecure))
                except OSError:
                    continue
                n = sum(1 for m in body.get("machines", []) if m.get("held_at") == "joined")
                if not joined or joined[-1][1] != n:
                    joined.append((time.monotonic() - since, n))
        started = time.monotonic()
        watcher = threading.Thread(target=watch_machines, args=(started,), daemon=True)
        watcher.start()
        proc = subprocess.Popen([xcsp, "apply", "--auto-approve", "--json", "--parallelism", str(a.parallelism),
                                 "--order", a.order, a.example], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines, finished_at = [], {}
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("{") and '"finished"' in line:
                finished_at[json.loads(line)["address"]] = time.monotonic() - started
        stderr = proc.stderr.read()
        proc.wait()
        wall = time.monotonic() - started
        links = [t for ad, t in finished_at.items()
                 if ad.startswith(("aws_vpn_connection.", "azure_virtual_network_gateway_connection."))]
        done.set()
        watcher.join()
        nodes = joined[-1][1] if joined else 0
        first_node = next((t for t, n in joined if n >= 1), None)
        all_nodes = next((t for t, n in joined if n >= nodes), None) if nodes else None
        if proc.returncode != 0:
            sys.exit(f"apply failed:\n{''.join(lines)}\n{stderr}")
        took = {}
        started = []
        for line in lines:
            if not line.startswith("{"):
                continue
            e = json.loads(line)
            if e["event"] == "started":
                started.append(e["address"])
            if e["event"] == "finished":
                took[e["address"]] = e["elapsed"] / 1000
        # Longest chain through the nodes that ran, weighted by their own durations.
        deps = {}
        for src, dst in edges:
            deps.setdefault(dst, []).append(src)
        # Azure runs one operation at a time per VPN gateway, so its connections form a chain too,
        # in the order this run started them (the engine starts one per gateway at a time).
        gateways = {}
        for src, dst in edges:
            if src.startswith("azure_virtual_network_gateway.") and dst.startswith("azure_virtual_network_gateway_connection."):
                gateways.setdefault(src, []).append(dst)
        for conns in gateways.values():
            ran = sorted((c for c in conns if c in started), key=started.index)
            for before, after in zip(ran, ran[1:]):
                deps.setdefault(after, []).append(before)
        memo = {}
        def longest(n):
            if n not in memo:
                memo[n] = took.get(n, 0) + max((longest(d) for d in deps.get(n, [])), default=0)
            return memo[n]
        critical = max(longest(n) for n in took)
        return {"example": a.example if not a.links else f"{a.links} links x {a.pools} pools", "scale": a.scale, "parallelism": a.parallelism, "order": a.order,
                          "machines": "after the link" if extra_env else "under the gateway",
                          "operations": len(took), "wall_s": round(wall, 2), "critical_path_s": round(critical, 2),
                          "ratio": round(wall / critical, 3), "nodes_ready": nodes,
                          "first_node_ready_s": first_node and round(first_node, 2),
                          "all_nodes_ready_s": all_nodes and round(all_nodes, 2),
                          "link_up_s": links and round(max(links), 2)}
    finally:
        sim.terminate()
        sim.wait()


print(json.dumps(bench({})))
if a.compare_ordering:
    print(json.dumps(bench({"XCSP_BENCH_MACHINES_AFTER_LINK": "1"})))
