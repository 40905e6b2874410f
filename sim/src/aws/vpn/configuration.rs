//! The `CustomerGatewayConfiguration` document of a VPN connection.

use super::tunnel_options::{host, network};
use super::{Conn, Tunnel, VpnStore};

impl VpnStore {
    /// The configuration document a customer downloads (`CustomerGatewayConfiguration`), generated
    /// from this connection (moto returns one fixed template for every connection). It has the
    /// shape its readers parse (terraform-provider-aws reads, per `ipsec_tunnel`, `vpn_gateway` and
    /// `customer_gateway` `tunnel_outside_address/ip_address` and `tunnel_inside_address/ip_address`,
    /// `vpn_gateway/bgp/asn` and `hold_time`, and `ike/pre_shared_key`): the inside addresses are
    /// the /30's first two hosts (AWS's end first), `network_cidr` is the prefix length and
    /// `network_mask` the dotted mask, and BGP (hold time 30 s) appears only on dynamic
    /// connections. The generic document's algorithm names and device hints are not emulated.
    pub(super) fn config_document(&self, c: &Conn, tunnels: &[Tunnel]) -> String {
        let cgw = self.cgws.get(&c.cgw);
        let vgw_asn = self.vgws.get(&c.vgw).map(|g| g.asn).unwrap_or_default();
        let end = |outside: &str, cidr: &str, n: u32, asn: i64| {
            let net = network(cidr).unwrap_or_else(|| "169.254.0.0/30".parse().expect("a network"));
            let address = host(&net.to_string(), n).unwrap_or_default();
            let (mask, prefix) = (net.netmask(), net.prefix_len());
            let bgp = if c.static_only {
                String::new()
            } else {
                format!("<bgp><asn>{asn}</asn><hold_time>30</hold_time></bgp>")
            };
            format!(
                "<tunnel_outside_address><ip_address>{outside}</ip_address></tunnel_outside_address><tunnel_inside_address><ip_address>{address}</ip_address><network_mask>{mask}</network_mask><network_cidr>{prefix}</network_cidr></tunnel_inside_address>{bgp}"
            )
        };
        let mut doc = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<vpn_connection id=\"{}\"><customer_gateway_id>{}</customer_gateway_id><vpn_gateway_id>{}</vpn_gateway_id><vpn_connection_type>ipsec.1</vpn_connection_type>",
            c.id, c.cgw, c.vgw
        );
        for t in tunnels {
            doc.push_str(&format!(
                "<ipsec_tunnel><customer_gateway>{}</customer_gateway><vpn_gateway>{}</vpn_gateway><ike><lifetime>{}</lifetime><pre_shared_key>{}</pre_shared_key></ike><ipsec><protocol>esp</protocol><lifetime>{}</lifetime><mode>tunnel</mode></ipsec></ipsec_tunnel>",
                end(cgw.map(|g| g.ip.as_str()).unwrap_or_default(), &t.inside_cidr, 2, cgw.map(|g| g.asn).unwrap_or_default()),
                end(&t.outside_ip, &t.inside_cidr, 1, vgw_asn),
                t.p1_lifetime.unwrap_or_default(),
                t.psk,
                t.p2_lifetime.unwrap_or_default(),
            ));
        }
        doc.push_str("</vpn_connection>");
        doc
    }
}
