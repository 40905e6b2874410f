#!/usr/bin/env python3
"""Writes a large spec for the planner benchmark: LINKS networks x POOLS worker pools each.

usage: gen-bench-spec.py LINKS POOLS OUT_FILE [VPC_ID,VPC_ID,...]
Each link has its own VPC and /16 VNet; each pool a /24 subnet and a MachineHealthCheck.
VPC ids, when given (one per link, e.g. made in the local clouds), replace the made-up ones.
"""
import sys

links, pools, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
vpcs = sys.argv[4].split(",") if len(sys.argv) > 4 else [f"vpc-{l:017x}" for l in range(links)]
assert len(vpcs) >= links
octets = [o for o in range(1, 256) if not (128 <= o <= 131)]
assert links <= len(octets) and pools <= 200
parts = ['''cluster {
  infrastructure_name = "bench-x1"
  api_url             = "https://api.bench:6443"
  oidc_issuer_url     = "https://issuer.bench"
  machine_network     = "10.0.0.0/16"
  overlay_mtu         = 1300
}
aws { region = "us-gov-west-1" }
azure {
  cloud           = "usgovernment"
  subscription_id = "11111111-2222-3333-4444-555555555555"
  tenant_id       = "66666666-7777-8888-9999-000000000000"
  location        = "usgovvirginia"
  resource_group  = "bench"
}
workload_identity "capz" {}
''']
for l in range(links):
    o = octets[l]
    parts.append(f'''network "l{l}" {{
  vnet_cidr      = "10.{o}.0.0/16"
  gateway_subnet = "10.{o}.255.0/27"
  vpc_id         = "{vpcs[l]}"
  azure_asn      = 65010
}}
''')
    for p in range(pools):
        parts.append(f'''worker_pool "l{l}p{p}" {{
  network              = network.l{l}
  vm_size              = "Standard_ND96asr_v4"
  subnet_cidr          = "10.{o}.{p + 1}.0/24"
  image_id             = "rhcos"
  machine_health_check = true
}}
''')
open(out, "w").write("".join(parts))
