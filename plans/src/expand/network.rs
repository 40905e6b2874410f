//! A network's resources: its VNet and, for the `ipsec` driver, the link of docs/src/reference/cloud-facts.md in three
//! parts: Azure's gateway, AWS's gateway, and the tunnels between them (AWS's connections, then
//! Azure's).

use ipnet::Ipv4Net;
use xcsp_core::{Address, ResourceType as T, Value};

use super::{Builder, set_path, unknowns};
use crate::served::Read;
use crate::spec::{Driver, IpsecPolicy, Network, Routing};
use crate::topology::{self, CONNECTIONS, TUNNELS};

/// What the parts of one link share.
struct Link<'n> {
    n: &'n Network,
    name: &'n str,
    bgp: bool,
    /// The tunnels' inside CIDRs, by tunnel index.
    inside: Vec<Ipv4Net>,
    /// By tunnel index: the node of its generated pre-shared key (none when the spec gives keys).
    psk_from: Vec<Option<Address>>,
    /// The spec's pre-shared keys, by tunnel index (empty when generated).
    user_keys: Vec<Value>,
}

impl Link<'_> {
    /// Tunnel `t`'s pre-shared key into `attribute` of node `at`.
    fn psk(&self, b: &mut Builder, at: usize, attribute: &str, t: usize) {
        match &self.psk_from[t] {
            Some(from) => b.input(at, attribute, from, "value"),
            None => set_path(&mut b.nodes[at].attributes, attribute, self.user_keys[t].clone()),
        }
    }
}

/// A network's VNet and, for the `ipsec` driver, its link. Returns the VNet.
pub(super) fn expand_network(b: &mut Builder, n: &Network, rg: &Address) -> Address {
    let name = n.name.value.as_str();
    let vnet = b.add_azure(
        T::AzureVirtualNetwork,
        name,
        None,
        &[name],
        vec![("address_space", Value::strings([n.vnet_cidr.value.to_string()]))],
    );
    b.after(vnet, rg);
    b.serves(vnet, "network", Some(name), "vnet_id", None, Read::Id);
    let vnet_addr = b.addr(vnet);
    if n.driver.value == Driver::External {
        return vnet_addr;
    }
    let gw_subnet = n.gateway_subnet.as_ref().expect("validated: ipsec networks have a gateway subnet");
    let gws = b.add(
        T::AzureSubnet,
        &topology::gateway_subnet_node(name),
        None,
        vec![
            ("name", Value::string("GatewaySubnet")),
            ("virtual_network", Value::Unknown),
            ("address_prefix", Value::string(gw_subnet.value.to_string())),
        ],
    );
    b.input(gws, "virtual_network", &vnet_addr, "name");
    let gws_addr = b.addr(gws);

    // Pre-shared keys: the user's, or generated at apply time and kept (sensitive) in state.
    let mut psk_from: Vec<Option<Address>> = vec![None; TUNNELS];
    let user_keys: Vec<Value> =
        n.preshared_keys.iter().flatten().map(|k| Value::sensitive(k.value.unmarked())).collect();
    if user_keys.is_empty() {
        for (t, slot) in psk_from.iter_mut().enumerate() {
            let k = b.add(
                T::PresharedKey,
                name,
                Some(t as u32),
                vec![("length", Value::int(32)), ("value", Value::sensitive(Value::Unknown))],
            );
            *slot = Some(b.addr(k));
        }
    }
    let inside: Vec<Ipv4Net> = match &n.tunnel_inside_cidrs {
        Some(c) => c.iter().map(|c| c.value).collect(),
        None => topology::default_inside_cidrs(),
    };

    let link = Link { n, name, bgp: n.routing.value == Routing::Bgp, inside, psk_from, user_keys };
    let (pips, vng_addr) = azure_gateway(b, &link, &gws_addr, rg);
    let (vgw_addr, attach_addr) = aws_gateway(b, &link);
    let conns = aws_connections(b, &link, &pips, &vgw_addr, &attach_addr);
    azure_connections(b, &link, &conns, &vng_addr, rg);
    dns_over_link(b, &link, &vnet_addr);
    vnet_addr
}

/// The name of the cluster's private zone for the Azure network: the VNet's DNS servers are a
/// Route 53 Resolver inbound endpoint in the cluster's VPC, reached over the link. Route 53
/// answers a private hosted zone (`api-int.<domain>`) only inside the VPCs associated with it,
/// or to queries arriving at an inbound endpoint in such a VPC (Route 53 Developer Guide,
/// "Forwarding inbound DNS queries to your VPCs"); a VNet that names DNS servers hands them to
/// its VMs by DHCP (ARM `virtualNetworks` `dhcpOptions.dnsServers`). ARCHITECTURE.md says why this
/// and not an Azure DNS Private Resolver. Three resources: the endpoint's own security group
/// (DNS, TCP and UDP 53, from the VNet only: "Inbound rules must allow TCP and UDP access on port
/// 53", Developer Guide, "Values that you specify when you create or edit inbound endpoints"), the
/// endpoint with two addresses in two zones of the cluster's private subnets, and the VNet's DNS
/// servers, set apart from the VNet as Terraform's `azurerm_virtual_network_dns_servers` is, so
/// the VNet (and the 40-minute gateway after it) need not wait for the endpoint.
fn dns_over_link(b: &mut Builder, link: &Link, vnet_addr: &Address) {
    let model = b.model;
    let (n, name) = (link.n, link.name);
    let infra = &model.cluster.infrastructure_name.value;
    let vpc = n.vpc_id.as_ref().or(model.aws.vpc_id.as_ref()).map_or(Value::Unknown, |v| Value::string(&v.value));
    let cluster_tag = Value::string(format!("kubernetes.io/cluster/{infra}"));
    let aws_name = format!("xcsp-{}-{name}-dns", model.stack);
    let rules: Vec<Value> =
        ["tcp", "udp"].into_iter().map(|proto| ingress_rule(proto, 53, 53, &n.vnet_cidr.value, "DNS", name)).collect();
    let sg = b.add(
        T::AwsSecurityGroup,
        name,
        None,
        vec![
            ("name", Value::string(&aws_name)),
            (
                "description",
                Value::string(format!(
                    "Route 53 Resolver inbound endpoint for Azure network {name} (xcsp {})",
                    model.stack
                )),
            ),
            ("vpc_id", vpc.clone()),
            ("cluster_tag", cluster_tag.clone()),
            ("rules", Value::List(rules)),
        ],
    );
    let sg_addr = b.addr(sg);
    let endpoint = b.add(
        T::AwsResolverEndpoint,
        name,
        None,
        vec![
            ("name", Value::string(&aws_name)),
            ("direction", Value::string("INBOUND")),
            ("security_group_ids", unknowns(1)),
            // Unknown: the cluster's private subnets in two zones, found by the cluster's tag.
            ("subnet_ids", Value::Unknown),
            ("vpc_id", vpc),
            ("cluster_tag", cluster_tag),
            // Refresh reports the endpoint's status as it is (ACTION_NEEDED is drift).
            ("status", Value::string("OPERATIONAL")),
        ],
    );
    b.input(endpoint, "security_group_ids[0]", &sg_addr, "id");
    b.serves(endpoint, "network", Some(name), "dns_servers", None, Read::Attribute("ip_addresses".into()));
    let endpoint_addr = b.addr(endpoint);
    let servers = b.add(
        T::AzureVnetDnsServers,
        name,
        None,
        vec![
            ("resource_group", Value::string(&model.azure.resource_group.value)),
            ("virtual_network", Value::Unknown),
            ("dns_servers", Value::Unknown),
        ],
    );
    b.input(servers, "virtual_network", vnet_addr, "name");
    b.input(servers, "dns_servers", &endpoint_addr, "ip_addresses");
}

/// Azure's side of the link: two zone-redundant public IPs and the active-active VPN gateway in
/// the GatewaySubnet. Returns the public IPs and the gateway.
fn azure_gateway(b: &mut Builder, link: &Link, gws_addr: &Address, rg: &Address) -> (Vec<Address>, Address) {
    let model = b.model;
    let (n, name, bgp, inside) = (link.n, link.name, link.bgp, &link.inside);
    let mut pips = Vec::new();
    for i in 0..CONNECTIONS {
        let pip = b.add_azure(
            T::AzurePublicIp,
            name,
            Some(i as u32),
            &[name, &topology::public_ip_part(i)],
            vec![("sku", Value::string("Standard")), ("allocation", Value::string("Static"))],
        );
        // Zone-redundant where the region has zones; regional elsewhere (ARM refuses zones there).
        if crate::regions::has_zones(&model.azure.location.value) == Some(true) {
            b.nodes[pip].attributes.insert("zones".into(), Value::strings(["1", "2", "3"]));
        }
        b.after(pip, rg);
        b.serves(pip, "network", Some(name), "gateway_public_ips", Some(i), Read::Attribute("ip_address".into()));
        pips.push(b.addr(pip));
    }
    // Azure instance i answers the tunnels of connection i with the second usable address of each /30.
    let apipa: Vec<Value> =
        (0..CONNECTIONS).map(|i| Value::strings(topology::instance_bgp_addresses(inside, i))).collect();
    let mut vng_attrs = vec![
        ("sku", Value::string(&n.gateway_sku.value)),
        ("vpn_type", Value::string("RouteBased")),
        ("active_active", Value::Bool(true)),
        ("enable_bgp", Value::Bool(bgp)),
        ("public_ips", unknowns(CONNECTIONS)),
        ("subnet", Value::Unknown),
    ];
    if bgp {
        vng_attrs.push(("asn", Value::int(n.azure_asn.value)));
        vng_attrs.push(("custom_bgp_addresses", Value::List(apipa)));
    }
    let vng = b.add_azure(T::AzureVpnGateway, name, None, &[name, topology::VPN_GATEWAY_PART], vng_attrs);
    for (i, pip) in pips.iter().enumerate() {
        b.input(vng, &format!("public_ips[{i}]"), pip, "id");
    }
    b.input(vng, "subnet", gws_addr, "id");
    b.serves(vng, "network", Some(name), "vpn_gateway_id", None, Read::Id);
    (pips, b.addr(vng))
}

/// AWS's side of the link: the VGW attached to the cluster VPC, propagating routes to the
/// cluster's route tables, and the ingress rules for the Azure network on the cluster's security
/// groups. Returns the VGW and its attachment.
fn aws_gateway(b: &mut Builder, link: &Link) -> (Address, Address) {
    let model = b.model;
    let (n, name) = (link.n, link.name);
    let aws = &model.aws;
    let infra = &model.cluster.infrastructure_name.value;
    let vpc = n.vpc_id.as_ref().or(aws.vpc_id.as_ref()).map(|v| Value::string(&v.value));
    let vgw = b.add(
        T::AwsVpnGateway,
        name,
        None,
        vec![("amazon_side_asn", Value::int(aws.asn.value)), ("type", Value::string("ipsec.1"))],
    );
    let vgw_addr = b.addr(vgw);
    let attach = b.add(
        T::AwsVpnGatewayAttachment,
        name,
        None,
        vec![
            ("vpn_gateway_id", Value::Unknown),
            // Unknown here means: discovered by the tag kubernetes.io/cluster/<infra> at refresh.
            ("vpc_id", vpc.unwrap_or(Value::Unknown)),
            ("cluster_tag", Value::string(format!("kubernetes.io/cluster/{infra}"))),
            // Refresh reports `attaching` as it is: apply then waits for it.
            ("state", Value::string("attached")),
        ],
    );
    b.input(attach, "vpn_gateway_id", &vgw_addr, "id");
    let attach_addr = b.addr(attach);
    let rts = aws.route_table_ids.as_ref().map_or(Value::Unknown, |r| Value::strings(r.value.iter()));
    let mut prop_attrs = vec![
        ("vpn_gateway_id", Value::Unknown),
        ("cluster_tag", Value::string(format!("kubernetes.io/cluster/{infra}"))),
    ];
    if rts == Value::Unknown {
        // The route tables of the cluster's VPC, discovered: refresh says whether every one of
        // them propagates, so a table left out (a partial apply, a hand edit) is drift.
        prop_attrs.push(("route_table_ids", rts));
        prop_attrs.push(("every_route_table", Value::Bool(true)));
    } else {
        prop_attrs.push(("route_table_ids", rts));
    }
    let prop = b.add(T::AwsRoutePropagation, name, None, prop_attrs);
    b.input(prop, "vpn_gateway_id", &vgw_addr, "id");
    b.after(prop, &attach_addr);

    let sgs = aws.security_group_ids.as_ref().map_or(Value::Unknown, |s| Value::strings(s.value.iter()));
    // In a canonical order (ports, then protocol): refresh reads the rules back in it.
    let rules: Vec<Value> = topology::aws_ingress_ports(b.model.cluster.ovn_ipsec.value)
        .into_iter()
        .map(|(proto, from, to, what)| ingress_rule(proto, *from, *to, &n.vnet_cidr.value, what, name))
        .collect();
    b.add(
        T::AwsSecurityGroupIngress,
        name,
        None,
        vec![
            // Unknown: every group of the cluster, found by its tags (the cloud provider's and CAPA's).
            ("security_group_ids", sgs),
            ("rules", Value::List(rules)),
            ("cluster_tag", Value::string(format!("kubernetes.io/cluster/{infra}"))),
        ],
    );
    (vgw_addr, attach_addr)
}

/// One inbound security-group rule as the plan writes it: `what` from the Azure network `network`
/// (its VNet `cidr`) on ports `from`..=`to` (ICMP: type and code), the protocol as EC2 names it.
fn ingress_rule(protocol: &str, from: i32, to: i32, cidr: &Ipv4Net, what: &str, network: &str) -> Value {
    Value::Map(
        [
            ("protocol".to_string(), Value::string(topology::aws_protocol(protocol))),
            ("from_port".to_string(), Value::int(i64::from(from))),
            ("to_port".to_string(), Value::int(i64::from(to))),
            ("cidr".to_string(), Value::string(cidr.to_string())),
            ("description".to_string(), Value::string(format!("{what} from Azure network {network}"))),
        ]
        .into_iter()
        .collect(),
    )
}

/// The tunnels, AWS's end: per Azure public IP a customer gateway and a VPN connection to the VGW
/// (two tunnels each, with their inside CIDRs and keys), and its static route without BGP.
/// Returns the VPN connections.
fn aws_connections(
    b: &mut Builder,
    link: &Link,
    pips: &[Address],
    vgw_addr: &Address,
    attach_addr: &Address,
) -> Vec<Address> {
    let (n, name, bgp, inside) = (link.n, link.name, link.bgp, &link.inside);
    // Cross-cloud: Azure public IPs -> AWS customer gateways -> VPN connections.
    let mut conns = Vec::new();
    for (i, pip) in pips.iter().enumerate() {
        let cgw = b.add(
            T::AwsCustomerGateway,
            name,
            Some(i as u32),
            vec![
                ("ip_address", Value::Unknown),
                ("bgp_asn", Value::int(if bgp { n.azure_asn.value } else { 65000 })),
                ("type", Value::string("ipsec.1")),
            ],
        );
        b.input(cgw, "ip_address", pip, "ip_address");
        let cgw_addr = b.addr(cgw);
        let mut attrs = vec![
            ("customer_gateway", Value::Unknown),
            ("vpn_gateway_id", Value::Unknown),
            ("static_routes_only", Value::Bool(!bgp)),
        ];
        attrs.extend(aws_tunnel_policy(&n.ipsec));
        let conn = b.add(T::AwsVpnConnection, name, Some(i as u32), attrs);
        b.input(conn, "customer_gateway", &cgw_addr, "id");
        b.input(conn, "vpn_gateway_id", vgw_addr, "id");
        // The VGW must be attached before its tunnels can carry the VPC's routes.
        b.after(conn, attach_addr);
        for t in topology::tunnels_of(i) {
            set_path(
                &mut b.nodes[conn].attributes,
                &t.attribute("inside_cidr"),
                Value::string(inside[t.index].to_string()),
            );
            link.psk(b, conn, &t.attribute("psk"), t.index);
            let tunnel = Read::Map(vec![
                ("vpn_connection_id", Read::Id),
                ("aws_outside_ip", Read::Attribute(t.attribute("address"))),
                ("inside_cidr", Read::Attribute(t.attribute("inside_cidr"))),
            ]);
            b.serves(conn, "network", Some(name), "tunnels", Some(t.index), tunnel);
        }
        let conn_addr = b.addr(conn);
        if !bgp {
            let route = b.add(
                T::AwsVpnConnectionRoute,
                name,
                Some(i as u32),
                vec![
                    ("vpn_connection_id", Value::Unknown),
                    ("destination_cidr", Value::string(n.vnet_cidr.value.to_string())),
                ],
            );
            b.input(route, "vpn_connection_id", &conn_addr, "id");
        }
        conns.push(conn_addr);
    }
    conns
}

/// The tunnels, Azure's end: per AWS tunnel a local network gateway (its AWS outside address and
/// BGP peer) and a connection from the VPN gateway with the tunnel's key.
fn azure_connections(b: &mut Builder, link: &Link, conns: &[Address], vng_addr: &Address, rg: &Address) {
    let model = b.model;
    let (n, name, bgp, inside) = (link.n, link.name, link.bgp, &link.inside);
    // Azure: one local network gateway and connection per AWS tunnel.
    for tunnel in topology::tunnels() {
        let t = tunnel.index;
        let mut lng_attrs = vec![("gateway_ip_address", Value::Unknown)];
        if bgp {
            lng_attrs.push(("bgp_peering_address", Value::string(topology::aws_inside_address(&inside[t]))));
            lng_attrs.push(("asn", Value::int(model.aws.asn.value)));
        } else {
            lng_attrs.push(("address_space", Value::strings([model.cluster.machine_network.value.to_string()])));
        }
        let lng =
            b.add_azure(T::AzureLocalNetworkGateway, name, Some(t as u32), &[name, &tunnel.azure_part()], lng_attrs);
        b.input(lng, "gateway_ip_address", &conns[tunnel.connection], &tunnel.attribute("address"));
        b.after(lng, rg);
        let lng_addr = b.addr(lng);
        let mut conn_attrs = vec![
            ("virtual_network_gateway", Value::Unknown),
            ("local_network_gateway", Value::Unknown),
            (
                "connection_protocol",
                Value::string(if n.ipsec.ike_version.value == "ikev1" { "IKEv1" } else { "IKEv2" }),
            ),
            ("enable_bgp", Value::Bool(bgp)),
            ("shared_key", Value::Unknown),
            ("ipsec_policy", azure_ipsec_policy(&n.ipsec)),
        ];
        if let Some(d) = &n.ipsec.dpd_timeout_seconds {
            conn_attrs.push(("dpd_timeout_seconds", Value::int(d.value)));
        }
        if bgp {
            // Both instances' custom APIPA addresses (topology::connection_bgp_addresses).
            conn_attrs
                .push(("custom_bgp_addresses", Value::strings(topology::connection_bgp_addresses(inside, tunnel))));
        }
        let conn = b.add_azure(T::AzureVpnConnection, name, Some(t as u32), &[name, &tunnel.azure_part()], conn_attrs);
        b.input(conn, "virtual_network_gateway", vng_addr, "id");
        b.input(conn, "local_network_gateway", &lng_addr, "id");
        link.psk(b, conn, "shared_key", t);
    }
}

/// The AWS tunnel options for the spec's policy (AWS names).
fn aws_tunnel_policy(p: &IpsecPolicy) -> Vec<(&'static str, Value)> {
    let enc = match p.encryption.value.as_str() {
        "aes128" => "AES128",
        "gcm-aes128" => "AES128-GCM-16",
        "gcm-aes256" => "AES256-GCM-16",
        _ => "AES256",
    };
    let integrity = match p.integrity.value.as_str() {
        "sha1" => "SHA1",
        "sha384" => "SHA2-384",
        _ => "SHA2-256",
    };
    let mut out = vec![
        ("ike_versions", Value::strings([p.ike_version.value.as_str()])),
        ("phase1_encryption", Value::strings([enc])),
        ("phase1_integrity", Value::strings([integrity])),
        ("phase1_dh_group", Value::List(vec![Value::int(p.dh_group.value)])),
        ("phase2_encryption", Value::strings([enc])),
        ("phase2_integrity", Value::strings([integrity])),
        ("phase2_dh_group", Value::List(vec![Value::int(p.pfs_group.value)])),
        ("phase1_lifetime_seconds", Value::int(p.ike_lifetime_seconds.value)),
        ("phase2_lifetime_seconds", Value::int(p.sa_lifetime_seconds.value)),
    ];
    if let Some(d) = &p.dpd_timeout_seconds {
        out.push(("dpd_timeout_seconds", Value::int(d.value)));
    }
    if let Some(m) = &p.rekey_margin_seconds {
        out.push(("rekey_margin_seconds", Value::int(m.value)));
    }
    out
}

/// The same policy in Azure's names (custom IPsec/IKE policy: every field set).
fn azure_ipsec_policy(p: &IpsecPolicy) -> Value {
    let (ike_enc, ipsec_enc) = match p.encryption.value.as_str() {
        "aes128" => ("AES128", "AES128"),
        "gcm-aes128" => ("GCMAES128", "GCMAES128"),
        "gcm-aes256" => ("GCMAES256", "GCMAES256"),
        _ => ("AES256", "AES256"),
    };
    let gcm = p.encryption.value.starts_with("gcm-");
    let ike_int = match p.integrity.value.as_str() {
        "sha1" => "SHA1",
        "sha384" => "SHA384",
        _ => "SHA256",
    };
    let ipsec_int = if gcm {
        ipsec_enc
    } else if ike_int == "SHA1" {
        "SHA1"
    } else {
        "SHA256"
    };
    let dh = |g: i64| match g {
        2 => "DHGroup2",
        19 => "ECP256",
        20 => "ECP384",
        24 => "DHGroup24",
        _ => "DHGroup14",
    };
    let pfs = |g: i64| match g {
        2 => "PFS2",
        19 => "ECP256",
        20 => "ECP384",
        24 => "PFS24",
        _ => "PFS14",
    };
    Value::Map(
        [
            ("ike_encryption", Value::string(ike_enc)),
            ("ike_integrity", Value::string(ike_int)),
            ("dh_group", Value::string(dh(p.dh_group.value))),
            ("ipsec_encryption", Value::string(ipsec_enc)),
            ("ipsec_integrity", Value::string(ipsec_int)),
            ("pfs_group", Value::string(pfs(p.pfs_group.value))),
            ("sa_lifetime_seconds", Value::int(p.sa_lifetime_seconds.value)),
            ("sa_data_size_kilobytes", Value::int(102_400_000)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    )
}
