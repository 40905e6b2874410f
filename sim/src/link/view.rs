//! The AWS side as a booting VM's packets meet it: read once per pass of the stand-ins.

use super::clouds::Clouds;

/// The AWS side as a VM in the VNet reaches it: Route 53 Resolver's inbound endpoints, and the
/// VPCs a tunnel that is UP leads to (a VGW attached to the VPC with a connection whose tunnel
/// negotiated, [`super::tunnels::verdicts`]).
#[derive(Debug, Clone, Default)]
pub struct Link {
    pub resolvers: Vec<crate::aws::resolver::InboundEndpoint>,
    pub up_vpcs: Vec<String>,
    /// The VGWs those tunnels end on.
    pub up_vgws: Vec<String>,
    /// Route table id -> the VGWs propagating routes into it.
    pub propagation: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    /// The clusters the fixture made, with their API load balancer's rules.
    pub clusters: Vec<crate::aws::cluster::ClusterView>,
}

impl Link {
    /// Read from the sim now. Takes the VPN and ARM locks in turn: call it holding neither.
    pub fn of(sim: &Clouds<'_>) -> Link {
        let up: Vec<String> =
            super::tunnels::verdicts(sim).into_iter().filter(|v| v.up).map(|v| v.vpn_connection).collect();
        let now = sim.world.clock.now();
        let vpn = sim.aws.vpn.lock().expect("vpn lock");
        let attached: Vec<(String, String)> = up
            .iter()
            .filter_map(|c| vpn.conns.get(c))
            .filter_map(|c| Some((c.vgw.clone(), vpn.vgws.get(&c.vgw)?.attachment.clone()?)))
            .filter(|(_, (_, at, attached))| *attached && now >= *at)
            .map(|(vgw, (vpc, _, _))| (vgw, vpc))
            .collect();
        let mut up_vpcs: Vec<String> = attached.iter().map(|(_, vpc)| vpc.clone()).collect();
        up_vpcs.sort();
        up_vpcs.dedup();
        let mut up_vgws: Vec<String> = attached.into_iter().map(|(vgw, _)| vgw).collect();
        up_vgws.sort();
        up_vgws.dedup();
        let propagation = vpn.propagation.clone();
        drop(vpn);
        Link {
            resolvers: sim.aws.resolvers.lock().expect("resolvers lock").clone(),
            up_vpcs,
            up_vgws,
            propagation,
            clusters: sim.aws.clusters.lock().expect("clusters lock").clone(),
        }
    }
}
