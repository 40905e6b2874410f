//! The shape of what xcsp builds, stated once: for an `ipsec` network the link of docs/src/reference/cloud-facts.md (how
//! many AWS VPN connections and tunnels, how they are numbered, their default inside CIDRs and
//! BGP addresses, the ports it opens, the names of its nodes and Azure resources), and a pool's
//! MachineSets. `expand` builds from it, `validate` checks specs against it, and `exports` reads
//! back what expand made from it.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::spec::Pool;

/// AWS VPN connections per link. Connection c has its own customer gateway, which is public IP
/// c of the active-active Azure VPN gateway, answered by gateway instance c.
pub const CONNECTIONS: usize = 2;

/// Tunnels per AWS VPN connection.
pub const TUNNELS_PER_CONNECTION: usize = 2;

/// Tunnels per link. Each has its own inside CIDR, pre-shared key, local network gateway and
/// Azure connection.
pub const TUNNELS: usize = CONNECTIONS * TUNNELS_PER_CONNECTION;

/// Tunnel inside CIDRs when the spec gives none: the Microsoft tutorial's plan. Tunnels 0 and 1
/// belong to VPN connection 0 (Azure instance 0), tunnels 2 and 3 to connection 1.
pub const DEFAULT_INSIDE_CIDRS: [&str; TUNNELS] =
    ["169.254.21.0/30", "169.254.22.0/30", "169.254.21.4/30", "169.254.22.4/30"];

/// The first and last address Azure takes as a custom BGP (APIPA) address.
pub const AZURE_APIPA: (Ipv4Addr, Ipv4Addr) = (Ipv4Addr::new(169, 254, 21, 0), Ipv4Addr::new(169, 254, 22, 255));

/// One tunnel of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// 0 to `TUNNELS - 1`: the place of its inside CIDR and pre-shared key in the spec, and the
    /// index of its pre-shared key, local network gateway and Azure connection nodes.
    pub index: usize,
    /// The AWS VPN connection it belongs to (and so the Azure public IP and gateway instance).
    pub connection: usize,
    /// Its number in the connection, from 1, as AWS numbers a connection's tunnel attributes.
    pub number: usize,
}

impl Tunnel {
    pub fn new(index: usize) -> Tunnel {
        Tunnel { index, connection: index / TUNNELS_PER_CONNECTION, number: index % TUNNELS_PER_CONNECTION + 1 }
    }

    /// The tunnel numbered `number` (from 1) of connection `connection`.
    pub fn of(connection: usize, number: usize) -> Tunnel {
        Tunnel::new(connection * TUNNELS_PER_CONNECTION + number - 1)
    }

    /// The attribute of its AWS VPN connection that says `what` of it: `tunnel<number>_<what>`,
    /// e.g. `tunnel2_address`, `tunnel1_inside_cidr`, `tunnel1_psk`.
    pub fn attribute(&self, what: &str) -> String {
        format!("tunnel{}_{what}", self.number)
    }

    /// Its part of the Azure names of its local network gateway and connection: `aws<index>`.
    pub fn azure_part(&self) -> String {
        format!("aws{}", self.index)
    }
}

/// Every tunnel of a link, in index order.
pub fn tunnels() -> impl Iterator<Item = Tunnel> {
    (0..TUNNELS).map(Tunnel::new)
}

/// The tunnels of AWS VPN connection `connection`, in index order.
pub fn tunnels_of(connection: usize) -> impl Iterator<Item = Tunnel> {
    (1..=TUNNELS_PER_CONNECTION).map(move |number| Tunnel::of(connection, number))
}

/// The inside CIDRs the spec gives none: [`DEFAULT_INSIDE_CIDRS`].
pub fn default_inside_cidrs() -> Vec<Ipv4Net> {
    DEFAULT_INSIDE_CIDRS.iter().map(|c| c.parse().expect("valid")).collect()
}

fn host(net: &Ipv4Net, offset: u32) -> String {
    Ipv4Addr::from(u32::from(net.network()) + offset).to_string()
}

/// The AWS end of a tunnel with inside CIDR `inside`: the first usable address of the /30 (the
/// BGP peer address of the tunnel's local network gateway).
pub fn aws_inside_address(inside: &Ipv4Net) -> String {
    host(inside, 1)
}

/// The Azure end of a tunnel with inside CIDR `inside`: the second usable address of the /30.
pub fn azure_inside_address(inside: &Ipv4Net) -> String {
    host(inside, 2)
}

/// The custom BGP addresses of Azure gateway instance `instance`: it answers the tunnels of
/// connection `instance` with the Azure end of each (`inside` by tunnel index).
pub fn instance_bgp_addresses(inside: &[Ipv4Net], instance: usize) -> Vec<String> {
    tunnels_of(instance).map(|t| azure_inside_address(&inside[t.index])).collect()
}

/// The custom BGP addresses of the Azure connection of tunnel `t`, one per gateway instance.
/// Both instances' custom APIPA addresses on every connection of the active-active gateway, as
/// Microsoft's AWS tutorial does (vpn-gateway-howto-aws-bgp): the one facing this tunnel (AWS
/// connection c ends on public IP c, instance c) is the tunnel's customer-side address; the other
/// instance names its address in the same position.
pub fn connection_bgp_addresses(inside: &[Ipv4Net], t: Tunnel) -> Vec<String> {
    (0..CONNECTIONS).map(|c| azure_inside_address(&inside[Tunnel::of(c, t.number).index])).collect()
}

/// A port range the link opens: (protocol, from, to, what). The protocol is `tcp`, `udp`,
/// `icmp` (then from and to are the ICMP type and code, as EC2 takes them) or `esp` (no ports:
/// -1, -1).
pub type Port = (&'static str, i32, i32, &'static str);

/// Worker ports the cluster side must reach on Azure nodes, and Azure nodes on the cluster:
/// (protocol, from, to, what) from OpenShift's network port matrix.
pub const WORKER_PORTS: &[Port] = &[
    ("tcp", 10250, 10250, "kubelet"),
    ("udp", 6081, 6081, "Geneve overlay"),
    ("tcp", 9000, 9999, "host services"),
    ("udp", 9000, 9999, "host services"),
    ("tcp", 30000, 32767, "NodePorts"),
    ("udp", 30000, 32767, "NodePorts"),
];

/// ICMP destination unreachable, fragmentation needed (type 3, code 4): path MTU discovery
/// through the tunnels, which AWS asks customer gateways' networks to let through (AWS
/// Site-to-Site VPN User Guide, "Best practices for your customer gateway device": allow ICMP
/// "fragmentation needed" messages), and which neither gateway replaces by clamping TCP's MSS for
/// the pods' packets. Every link opens it.
pub const PATH_MTU: Port = ("icmp", 3, 4, "path MTU discovery (ICMP fragmentation needed)");

/// What OVN-Kubernetes's IPsec between nodes (`ipsecConfig.mode: Full`) sends between every two
/// nodes: IKE, its NAT traversal, and ESP carrying the Geneve packets. The installer opens the
/// same between the cluster's own nodes (openshift/installer `pkg/asset/manifests/aws/cluster.go`,
/// `CNIIngressRules`: "Port 500 (UDP) for IKE", "Port 4500 (UDP) for IKE NAT", "ESP").
pub const IPSEC_PORTS: &[Port] = &[
    ("udp", 500, 500, "IKE (OVN IPsec)"),
    ("udp", 4500, 4500, "IKE NAT traversal (OVN IPsec)"),
    ("esp", -1, -1, "ESP (OVN IPsec)"),
];

/// What Azure workers must reach on the cluster side, beyond the worker ports.
pub const CONTROL_PLANE_PORTS: &[Port] =
    &[("tcp", 6443, 6443, "Kubernetes API"), ("tcp", 22623, 22623, "machine-config server")];

/// The ports between the pool's nodes and the cluster's, both ways: the worker ports, path MTU
/// discovery and, when the cluster runs OVN IPsec, IKE and ESP.
pub fn node_ports(ovn_ipsec: bool) -> Vec<&'static Port> {
    let ipsec: &[Port] = if ovn_ipsec { IPSEC_PORTS } else { &[] };
    WORKER_PORTS.iter().chain(std::iter::once(&PATH_MTU)).chain(ipsec).collect()
}

/// The port ranges a link opens to its Azure network on the cluster's AWS security groups, one
/// inbound rule each, in a canonical order (ports, then protocol): refresh reads the rules back
/// in it.
pub fn aws_ingress_ports(ovn_ipsec: bool) -> Vec<&'static Port> {
    let mut ports: Vec<&Port> = CONTROL_PLANE_PORTS.iter().chain(node_ports(ovn_ipsec)).collect();
    ports.sort_by_key(|(proto, from, to, _)| (*from, *to, aws_protocol(*proto)));
    ports
}

/// A protocol as EC2 names it: by name for TCP, UDP and ICMP, by number for the others (ESP is
/// 50; EC2 API Reference, `IpPermission.IpProtocol`).
pub fn aws_protocol(protocol: &str) -> &str {
    match protocol {
        "esp" => "50",
        other => other,
    }
}

/// The node name of the stack's one resource group.
pub const RESOURCE_GROUP_NODE: &str = "main";

/// The node name of a network's GatewaySubnet.
pub fn gateway_subnet_node(network: &str) -> String {
    format!("gateway-{network}")
}

/// The node name of a pool's subnet.
pub fn pool_subnet_node(pool: &str) -> String {
    format!("pool-{pool}")
}

/// An Azure resource name: the stack and `parts` (the spec's name, then what the resource is),
/// joined by `-`, as the Azure naming rules allow.
pub fn azure_name(stack: &str, parts: &[&str]) -> String {
    let mut name = stack.to_string();
    for p in parts {
        name.push('-');
        name.push_str(p);
    }
    name
}

/// The Azure name part of a network's VPN gateway.
pub const VPN_GATEWAY_PART: &str = "vpngw";

/// The Azure name part of a pool's network security group.
pub const NSG_PART: &str = "nsg";

/// The Azure name part of a pool's NAT gateway (its public IP adds `ip`).
pub const NAT_PART: &str = "nat";

/// The Azure name part of the public IP of gateway instance `instance`.
pub fn public_ip_part(instance: usize) -> String {
    format!("gw{instance}")
}

/// The pool's MachineSets: one per zone, each with the zone as its machines' failure domain, the
/// replicas spread evenly (the first zones take one more when they do not divide). A MachineSet
/// does not spread its machines: the MachineSet controller copies `spec.template.spec.failureDomain`
/// onto every Machine it makes (kubernetes-sigs/cluster-api, machineset controller), and CAPZ
/// takes a Machine's failure domain as the VM's zone (`azure/scope/machine.go` AvailabilityZone).
/// Without zones, one regional MachineSet. Returns (index, zone, replicas).
pub fn machine_sets(p: &Pool) -> Vec<(Option<u32>, Option<String>, i64)> {
    let zones = &p.zones.value;
    if zones.is_empty() {
        return vec![(None, None, p.replicas.value)];
    }
    let n = zones.len() as i64;
    zones
        .iter()
        .enumerate()
        .map(|(i, z)| {
            let extra = i64::from((i as i64) < p.replicas.value % n);
            (Some(i as u32), Some(z.clone()), p.replicas.value / n + extra)
        })
        .collect()
}

/// A MachineSet's name: `<infra>-<pool>` for a regional one, and OpenShift's naming for a zonal
/// MachineSet, `<infra>-<pool>-<location><zone>`.
pub fn machine_set_name(infra: &str, pool: &str, location: &str, zone: Option<&str>) -> String {
    match zone {
        Some(z) => format!("{infra}-{pool}-{location}{z}"),
        None => format!("{infra}-{pool}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnels_are_numbered_within_their_connection() {
        let all: Vec<(usize, usize, usize)> = tunnels().map(|t| (t.index, t.connection, t.number)).collect();
        assert_eq!(all, [(0, 0, 1), (1, 0, 2), (2, 1, 1), (3, 1, 2)]);
        let of_second: Vec<usize> = tunnels_of(1).map(|t| t.index).collect();
        assert_eq!(of_second, [2, 3]);
        assert_eq!(Tunnel::new(3).attribute("address"), "tunnel2_address");
        assert_eq!(Tunnel::new(2).azure_part(), "aws2");
        assert_eq!(Tunnel::of(1, 2), Tunnel::new(3));
    }

    #[test]
    fn default_inside_cidrs_are_distinct_apipa_slash_30s() {
        let nets = default_inside_cidrs();
        assert_eq!(nets.len(), TUNNELS);
        for (i, n) in nets.iter().enumerate() {
            assert_eq!(n.prefix_len(), 30, "{n}");
            assert!(n.network() >= AZURE_APIPA.0 && n.broadcast() <= AZURE_APIPA.1, "{n}");
            assert!(nets[..i].iter().all(|m| !crate::net::overlaps(m, n)), "{n} twice");
        }
    }

    #[test]
    fn each_gateway_instance_answers_its_connections_tunnels() {
        let inside = default_inside_cidrs();
        assert_eq!(aws_inside_address(&inside[1]), "169.254.22.1");
        assert_eq!(instance_bgp_addresses(&inside, 0), ["169.254.21.2", "169.254.22.2"]);
        assert_eq!(instance_bgp_addresses(&inside, 1), ["169.254.21.6", "169.254.22.6"]);
        // Tunnel 3 (connection 1, number 2): instance 0's address in the same position, then its own.
        assert_eq!(connection_bgp_addresses(&inside, Tunnel::new(3)), ["169.254.22.2", "169.254.22.6"]);
        assert_eq!(connection_bgp_addresses(&inside, Tunnel::new(0)), ["169.254.21.2", "169.254.21.6"]);
    }

    #[test]
    fn ingress_ports_are_every_port_once_in_canonical_order() {
        let ports = aws_ingress_ports(false);
        assert_eq!(ports.len(), WORKER_PORTS.len() + CONTROL_PLANE_PORTS.len() + 1);
        assert_eq!(ports.first().map(|p| p.0), Some("icmp"));
        let key = |p: &Port| (p.1, p.2, aws_protocol(p.0).to_string());
        assert!(ports.windows(2).all(|w| key(w[0]) < key(w[1])));
        let ipsec = aws_ingress_ports(true);
        assert_eq!(ipsec.len(), ports.len() + IPSEC_PORTS.len());
        assert_eq!(ipsec.first().map(|p| p.0), Some("esp"), "ESP has no ports (-1) and comes first");
        assert!(ipsec.windows(2).all(|w| key(w[0]) < key(w[1])));
    }

    #[test]
    fn names() {
        assert_eq!(azure_name("il5", &["link", VPN_GATEWAY_PART]), "il5-link-vpngw");
        assert_eq!(azure_name("il5", &[]), "il5");
        assert_eq!(machine_set_name("infra", "gpu", "usgovvirginia", Some("2")), "infra-gpu-usgovvirginia2");
        assert_eq!(machine_set_name("infra", "gpu", "usgovvirginia", None), "infra-gpu");
    }
}
