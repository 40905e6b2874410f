//! Expansion: a validated model becomes the resource nodes the pool needs, for the `ipsec`
//! driver with BGP the topology of DOMAIN.md: one AWS VGW, 2 customer gateways and 2 VPN
//! connections (4 tunnels) facing an active-active Azure VPN gateway with 2 public IPs,
//! 4 local network gateways and 4 connections; the workload identity; the CAPZ/CAPI objects.

use indexmap::IndexMap;
use ipnet::Ipv4Net;
use xcsp_core::{Address, ResourceType as T, Value};

use crate::graph::{Input, Node};
use crate::spec::{AzureCloud, Driver, Image, IpsecPolicy, Network, Routing};
use crate::topology::{self, CONNECTIONS, TUNNELS};
use crate::validate::Model;

pub use crate::topology::{CONTROL_PLANE_PORTS, DEFAULT_INSIDE_CIDRS, WORKER_PORTS, machine_sets};

/// The namespace OpenShift runs Cluster API in.
pub const CAPI_NAMESPACE: &str = "openshift-cluster-api";

struct Builder<'m> {
    model: &'m Model,
    nodes: Vec<Node>,
}

impl Builder<'_> {
    fn add(&mut self, rtype: T, name: &str, index: Option<u32>, attrs: Vec<(&str, Value)>) -> usize {
        let address = Address { rtype, name: name.to_string(), index };
        let mut attributes: IndexMap<String, Value> = attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if matches!(rtype.provider(), xcsp_core::ProviderKind::Aws | xcsp_core::ProviderKind::Azure) {
            attributes.insert("tags".into(), self.tags(&address));
        }
        self.nodes.push(Node {
            address,
            attributes,
            inputs: Vec::new(),
            depends_on: Vec::new(),
            prevent_destroy: false,
        });
        self.nodes.len() - 1
    }

    /// Adds an Azure resource that lives in the stack's resource group: its Azure name (the
    /// stack and `parts`), resource group and location come first, then `attrs`.
    fn add_azure(
        &mut self,
        rtype: T,
        name: &str,
        index: Option<u32>,
        parts: &[&str],
        attrs: Vec<(&str, Value)>,
    ) -> usize {
        let az = &self.model.azure;
        let mut all = vec![
            ("name", Value::string(self.azure_name(parts))),
            ("resource_group", Value::string(&az.resource_group.value)),
            ("location", Value::string(&az.location.value)),
        ];
        all.extend(attrs);
        let at = self.add(rtype, name, index, all);
        // Refresh reports a network resource ARM left `Failed`: drift, and apply puts it again.
        if matches!(
            rtype,
            T::AzureVirtualNetwork
                | T::AzureNetworkSecurityGroup
                | T::AzurePublicIp
                | T::AzureVpnGateway
                | T::AzureLocalNetworkGateway
                | T::AzureVpnConnection
        ) {
            self.nodes[at].attributes.insert("provisioning_state".into(), Value::string("Succeeded"));
        }
        at
    }

    /// The spec's tags for the resource's cloud, then xcsp's stack and address tags (which win).
    fn tags(&self, address: &Address) -> Value {
        let mut tags = match address.rtype.provider() {
            xcsp_core::ProviderKind::Aws => self.model.aws.tags.value.clone(),
            _ => self.model.azure.tags.value.clone(),
        };
        let keys = xcsp_core::tags::keys_for(address.rtype.provider());
        tags.insert(keys.stack.to_string(), Value::string(&self.model.stack));
        tags.insert(keys.address.to_string(), Value::string(address.to_string()));
        Value::Map(tags)
    }

    /// `attribute` of node `at` is `output` of `from`, known once `from` exists.
    fn input(&mut self, at: usize, attribute: &str, from: &Address, output: &str) {
        let node = &mut self.nodes[at];
        let sensitive = from.rtype == T::PresharedKey;
        let unknown = if sensitive { Value::sensitive(Value::Unknown) } else { Value::Unknown };
        set_path(&mut node.attributes, attribute, unknown);
        node.inputs.push(Input { attribute: attribute.to_string(), from: from.clone(), output: output.to_string() });
    }

    /// Marks every node added since `start` as protected from destroy, if `protect`.
    fn protect_since(&mut self, start: usize, protect: bool) {
        for n in &mut self.nodes[start..] {
            n.prevent_destroy |= protect;
        }
    }

    fn after(&mut self, at: usize, dep: &Address) {
        self.nodes[at].depends_on.push(dep.clone());
    }

    fn addr(&self, at: usize) -> Address {
        self.nodes[at].address.clone()
    }

    /// An Azure resource name: the stack and the spec's name, as the Azure naming rules allow.
    fn azure_name(&self, parts: &[&str]) -> String {
        topology::azure_name(&self.model.stack, parts)
    }
}

/// Sets `a` or `a[i]` in an attribute map.
fn set_path(attrs: &mut IndexMap<String, Value>, path: &str, v: Value) {
    match path.split_once('[') {
        None => {
            attrs.insert(path.to_string(), v);
        }
        Some((key, rest)) => {
            let i: usize = rest.trim_end_matches(']').parse().expect("paths are written by expand");
            if let Some(Value::List(items)) = attrs.get_mut(key)
                && i < items.len()
            {
                items[i] = v;
            }
        }
    }
}

fn unknowns(n: usize) -> Value {
    Value::List(vec![Value::Unknown; n])
}

/// Expands a validated model into resource nodes, in a stable order.
pub fn expand(model: &Model) -> Vec<Node> {
    let mut b = Builder { model, nodes: Vec::new() };
    let az = &model.azure;
    let rg = b.add(
        T::AzureResourceGroup,
        topology::RESOURCE_GROUP_NODE,
        None,
        vec![("name", Value::string(&az.resource_group.value)), ("location", Value::string(&az.location.value))],
    );
    let rg_addr = b.addr(rg);

    let mut vnets = IndexMap::new();
    for n in &model.networks {
        let start = b.nodes.len();
        let vnet = expand_network(&mut b, n, &rg_addr);
        b.protect_since(start, n.prevent_destroy);
        vnets.insert(n.name.value.clone(), vnet);
    }

    let mut identities = IndexMap::new();
    for id in &model.identities {
        let start = b.nodes.len();
        let name = &id.name.value;
        let uai = b.add_azure(T::AzureUserAssignedIdentity, name, None, &[name], vec![]);
        b.after(uai, &rg_addr);
        let uai_addr = b.addr(uai);
        let fic = b.add(
            T::AzureFederatedCredential,
            name,
            None,
            vec![
                ("identity", Value::Unknown),
                ("issuer", Value::string(&id.issuer.value)),
                ("subject", Value::string(id.subject())),
                ("audiences", Value::strings([id.audience.value.as_str()])),
            ],
        );
        b.input(fic, "identity", &uai_addr, "name");
        let ra = b.add(
            T::AzureRoleAssignment,
            name,
            None,
            vec![
                ("scope", Value::Unknown),
                ("role", Value::string(&id.role.value)),
                ("principal", Value::Unknown),
                ("principal_type", Value::string("ServicePrincipal")),
            ],
        );
        b.input(ra, "scope", &rg_addr, "id");
        b.input(ra, "principal", &uai_addr, "principal_id");
        let aci = b.add(
            T::K8sAzureClusterIdentity,
            name,
            None,
            vec![
                ("namespace", Value::string(CAPI_NAMESPACE)),
                ("name", Value::string(format!("{}-{name}", model.cluster.infrastructure_name.value))),
                ("type", Value::string("WorkloadIdentity")),
                ("tenant_id", Value::string(&az.tenant_id.value)),
                ("client_id", Value::Unknown),
                ("allowed_namespaces", Value::strings([CAPI_NAMESPACE])),
            ],
        );
        b.input(aci, "client_id", &uai_addr, "client_id");
        // The controller can use the identity only once the federation and the role exist.
        let (fic_addr, ra_addr) = (b.addr(fic), b.addr(ra));
        b.after(aci, &fic_addr);
        b.after(aci, &ra_addr);
        identities.insert(name.clone(), b.addr(aci));
        b.protect_since(start, id.prevent_destroy);
    }

    // One AzureCluster + Cluster per network that carries pools.
    let mut clusters = IndexMap::new();
    for n in &model.networks {
        let Some(first) = model.pools.iter().find(|p| p.network.value == n.name.value) else { continue };
        let name = &n.name.value;
        let vnet_addr = vnets[name].clone();
        let infra = &model.cluster.infrastructure_name.value;
        let environment = match az.cloud.value {
            AzureCloud::UsGovernment => "AzureUSGovernmentCloud",
            AzureCloud::Public | AzureCloud::Custom => "AzurePublicCloud",
        };
        let mut attrs = vec![
            ("namespace", Value::string(CAPI_NAMESPACE)),
            ("name", Value::string(format!("{infra}-{name}"))),
            ("location", Value::string(&az.location.value)),
            ("resource_group", Value::string(&az.resource_group.value)),
            ("subscription_id", Value::string(&az.subscription_id.value)),
            ("azure_environment", Value::string(environment)),
            ("vnet", Value::Unknown),
            ("identity", Value::string(format!("{infra}-{}", first.identity.value))),
            ("externally_managed", Value::Bool(true)),
        ];
        if n.driver.value == Driver::External {
            attrs.push(("network_managed_externally", Value::Bool(true)));
        }
        let ac = b.add(T::K8sAzureCluster, name, None, attrs);
        b.input(ac, "vnet", &vnet_addr, "name");
        let ident = identities[&first.identity.value].clone();
        b.after(ac, &ident);
        let ac_addr = b.addr(ac);
        let cl = b.add(
            T::K8sCluster,
            name,
            None,
            vec![
                ("namespace", Value::string(CAPI_NAMESPACE)),
                ("name", Value::string(format!("{infra}-{name}"))),
                ("infrastructure_ref", Value::string(format!("{infra}-{name}"))),
            ],
        );
        b.after(cl, &ac_addr);
        clusters.insert(name.clone(), b.addr(cl));
    }

    for p in &model.pools {
        let start = b.nodes.len();
        expand_pool(&mut b, p, &vnets[&p.network.value], &clusters[&p.network.value], &rg_addr);
        b.protect_since(start, p.prevent_destroy);
    }
    b.nodes
}

fn expand_network(b: &mut Builder, n: &Network, rg: &Address) -> Address {
    let model = b.model;
    let name = n.name.value.as_str();
    let vnet = b.add_azure(
        T::AzureVirtualNetwork,
        name,
        None,
        &[name],
        vec![("address_space", Value::strings([n.vnet_cidr.value.to_string()]))],
    );
    b.after(vnet, rg);
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
    let psk = |b: &mut Builder, at: usize, attribute: &str, t: usize| match &psk_from[t] {
        Some(from) => b.input(at, attribute, from, "value"),
        None => set_path(&mut b.nodes[at].attributes, attribute, user_keys[t].clone()),
    };
    let inside: Vec<Ipv4Net> = match &n.tunnel_inside_cidrs {
        Some(c) => c.iter().map(|c| c.value).collect(),
        None => topology::default_inside_cidrs(),
    };

    // Azure: two zone-redundant public IPs and the active-active gateway.
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
        pips.push(b.addr(pip));
    }
    let bgp = n.routing.value == Routing::Bgp;
    // Azure instance i answers the tunnels of connection i with the second usable address of each /30.
    let apipa: Vec<Value> =
        (0..CONNECTIONS).map(|i| Value::strings(topology::instance_bgp_addresses(&inside, i))).collect();
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
    b.input(vng, "subnet", &gws_addr, "id");
    let vng_addr = b.addr(vng);

    // AWS: the VGW on the cluster VPC, propagating routes to the cluster's route tables.
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
    let rules: Vec<Value> = topology::aws_ingress_ports()
        .into_iter()
        .map(|(proto, from, to, what)| {
            Value::Map(
                [
                    ("protocol".to_string(), Value::string(*proto)),
                    ("from_port".to_string(), Value::int(i64::from(*from))),
                    ("to_port".to_string(), Value::int(i64::from(*to))),
                    ("cidr".to_string(), Value::string(n.vnet_cidr.value.to_string())),
                    ("description".to_string(), Value::string(format!("{what} from Azure network {name}"))),
                ]
                .into_iter()
                .collect(),
            )
        })
        .collect();
    b.add(
        T::AwsSecurityGroupIngress,
        name,
        None,
        vec![
            // Unknown: the cluster's node and control-plane groups, found by the cluster's tag.
            ("security_group_ids", sgs),
            ("rules", Value::List(rules)),
            ("cluster_tag", Value::string(format!("kubernetes.io/cluster/{infra}"))),
        ],
    );

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
        b.input(conn, "vpn_gateway_id", &vgw_addr, "id");
        // The VGW must be attached before its tunnels can carry the VPC's routes.
        b.after(conn, &attach_addr);
        for t in topology::tunnels_of(i) {
            set_path(
                &mut b.nodes[conn].attributes,
                &t.attribute("inside_cidr"),
                Value::string(inside[t.index].to_string()),
            );
            psk(b, conn, &t.attribute("psk"), t.index);
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

    // Azure: one local network gateway and connection per AWS tunnel.
    for tunnel in topology::tunnels() {
        let t = tunnel.index;
        let mut lng_attrs = vec![("gateway_ip_address", Value::Unknown)];
        if bgp {
            lng_attrs.push(("bgp_peering_address", Value::string(topology::aws_inside_address(&inside[t]))));
            lng_attrs.push(("asn", Value::int(aws.asn.value)));
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
                .push(("custom_bgp_addresses", Value::strings(topology::connection_bgp_addresses(&inside, tunnel))));
        }
        let conn = b.add_azure(T::AzureVpnConnection, name, Some(t as u32), &[name, &tunnel.azure_part()], conn_attrs);
        b.input(conn, "virtual_network_gateway", &vng_addr, "id");
        b.input(conn, "local_network_gateway", &lng_addr, "id");
        psk(b, conn, "shared_key", t);
    }
    vnet_addr
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

fn expand_pool(b: &mut Builder, p: &crate::spec::Pool, vnet: &Address, cluster: &Address, rg: &Address) {
    let model = b.model;
    let name = p.name.value.as_str();
    let infra = &model.cluster.infrastructure_name.value;
    let c = &model.cluster;
    let mut rules = Vec::new();
    for (proto, from, to, what) in WORKER_PORTS {
        for (src, which) in [(c.machine_network.value, "cluster nodes"), (c.cluster_network.value, "cluster pods")] {
            rules.push(Value::Map(
                [
                    ("protocol".to_string(), Value::string(*proto)),
                    (
                        "ports".to_string(),
                        Value::string(if from == to { from.to_string() } else { format!("{from}-{to}") }),
                    ),
                    ("source".to_string(), Value::string(src.to_string())),
                    ("description".to_string(), Value::string(format!("{what} from {which}"))),
                ]
                .into_iter()
                .collect(),
            ));
        }
    }
    let nsg = b.add_azure(
        T::AzureNetworkSecurityGroup,
        name,
        None,
        &[name, topology::NSG_PART],
        vec![("rules", Value::List(rules))],
    );
    b.after(nsg, rg);
    let nsg_addr = b.addr(nsg);
    let subnet_name = b.azure_name(&[name]);
    let subnet = b.add(
        T::AzureSubnet,
        &topology::pool_subnet_node(name),
        None,
        vec![
            ("name", Value::string(&subnet_name)),
            ("virtual_network", Value::Unknown),
            ("address_prefix", Value::string(p.subnet_cidr.value.to_string())),
            ("network_security_group", Value::Unknown),
        ],
    );
    b.input(subnet, "virtual_network", vnet, "name");
    b.input(subnet, "network_security_group", &nsg_addr, "id");
    let subnet_addr = b.addr(subnet);
    let image = match &p.image.value {
        Image::Marketplace { publisher, offer, sku, version } => Value::Map(
            [("publisher", publisher), ("offer", offer), ("sku", sku), ("version", version)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::string(v)))
                .collect(),
        ),
        Image::Id(id) => Value::Map([("id".to_string(), Value::string(id))].into_iter().collect()),
    };
    // CAPZ refuses any change to an AzureMachineTemplate's `spec.template.spec`
    // (`internal/webhooks/azuremachinetemplate_webhook.go`, ValidateUpdate: "field is
    // immutable. Please create new resource instead"). The template's name and address carry a
    // digest of what it renders, so a change of size, image, disk or subnet is a new template;
    // the MachineSets move to it, and the old one goes only after them (engine::walk::apply).
    let template_attrs: Vec<(&str, Value)> = vec![
        ("vm_size", Value::string(&p.vm_size.value)),
        ("image", image),
        ("os_disk_size_gb", Value::int(p.os_disk_size_gb.value)),
        ("os_disk_type", Value::string(&p.os_disk_type.value)),
        ("subnet", Value::string(&subnet_name)),
        ("accelerated_networking", Value::Bool(p.accelerated_networking)),
    ];
    let digest = template_digest(&template_attrs);
    let template_name = format!("{infra}-{name}-{digest}");
    let mut attrs = vec![("namespace", Value::string(CAPI_NAMESPACE)), ("name", Value::string(&template_name))];
    attrs.extend(template_attrs);
    let amt = b.add(T::K8sAzureMachineTemplate, &format!("{name}-{digest}"), None, attrs);
    b.after(amt, &subnet_addr);
    let amt_addr = b.addr(amt);
    let mut labels: IndexMap<String, Value> = p.labels.value.clone();
    labels.insert("node.openshift.io/cloud-provider".into(), Value::string("azure"));
    let taints: Vec<Value> = p
        .taints
        .value
        .iter()
        .map(|t| {
            Value::Map(
                [("key", &t.key), ("value", &t.value), ("effect", &t.effect)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Value::string(v)))
                    .collect(),
            )
        })
        .collect();
    labels.insert(xcsp_core::tags::POOL_LABEL.into(), Value::string(format!("{infra}-{name}")));
    // Machines come up only over a working link (ignition from the machine-config server, the
    // API server), and their nodes drain over it when they go: the MachineSets wait for the
    // link's tunnels on apply, and destroy removes them (and their machines) before the tunnels.
    let tunnels: Vec<Address> = b
        .nodes
        .iter()
        .map(|n| &n.address)
        .filter(|a| matches!(a.rtype, T::AzureVpnConnection | T::AwsVpnConnection) && a.name == p.network.value)
        .cloned()
        .collect();
    for (index, zone, replicas) in machine_sets(p) {
        let ms_name = topology::machine_set_name(infra, name, &model.azure.location.value, zone.as_deref());
        let mut attrs = vec![
            ("namespace", Value::string(CAPI_NAMESPACE)),
            ("name", Value::string(ms_name)),
            ("cluster_name", Value::string(format!("{infra}-{}", p.network.value))),
            ("replicas", Value::int(replicas)),
            ("bootstrap_secret", Value::string("worker-user-data")),
            ("infrastructure_template", Value::string(&template_name)),
            ("labels", Value::Map(labels.clone())),
            ("taints", Value::List(taints.clone())),
        ];
        if let Some(z) = zone {
            attrs.push(("failure_domain", Value::string(z)));
        }
        let ms = b.add(T::K8sMachineSet, name, index, attrs);
        b.after(ms, &amt_addr);
        b.after(ms, cluster);
        for t in &tunnels {
            b.after(ms, t);
        }
    }
    if p.machine_health_check {
        let sets: Vec<Address> = b
            .nodes
            .iter()
            .map(|n| &n.address)
            .filter(|a| a.rtype == T::K8sMachineSet && a.name == name)
            .cloned()
            .collect();
        let mhc = b.add(
            T::K8sMachineHealthCheck,
            name,
            None,
            vec![
                ("namespace", Value::string(CAPI_NAMESPACE)),
                ("name", Value::string(format!("{infra}-{name}"))),
                ("cluster_name", Value::string(format!("{infra}-{}", p.network.value))),
                ("selector", Value::string(format!("{infra}-{name}"))),
            ],
        );
        for ms in &sets {
            b.after(mhc, ms);
        }
    }
}

/// The first 8 hex digits of the sha256 of a template's rendered attributes.
fn template_digest(attrs: &[(&str, Value)]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (k, v) in attrs {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.to_json().to_string().as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())[..8].to_string()
}
