//! A VPN connection (its tunnels' options as [`crate::tunnel`] translates them) and its static
//! routes: each type's create or update, delete and list.

use aws_sdk_ec2::types::{ResourceType as AwsType, TunnelOption, VpnConnection, VpnConnectionOptionsSpecification};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, Observed, Progress, ProviderError, Request};
use xcsp_core::{Address, Value};

use crate::ec2::{self, desired_tags, live, required, tag_spec};
use crate::{AwsProvider, Listing, Result, send, tunnel};

impl AwsProvider {
    async fn read_connection(
        &self,
        a: &Address,
        id: &str,
        cidrs: [Option<&str>; 2],
    ) -> Result<(Option<String>, Attributes)> {
        let c = self.describe_connection(a, id).await?;
        let out = ec2::connection_attributes(&c, id, None, cidrs);
        Ok((c.state().map(|s| s.as_str().to_string()), out))
    }

    /// One VPN connection as EC2 describes it.
    async fn describe_connection(&self, a: &Address, id: &str) -> Result<VpnConnection> {
        let r = send!(a, self.ec2.describe_vpn_connections().vpn_connection_ids(id))?;
        r.vpn_connections().first().cloned().ok_or_else(|| ProviderError::NotFound { address: a.to_string() })
    }

    /// The connection's tunnels as EC2 reports them, tunnel 1 first, each with its outside
    /// address (the handle ModifyVpnTunnelOptions takes).
    async fn tunnels(
        &self,
        a: &Address,
        id: &str,
        cidrs: [Option<&str>; 2],
    ) -> Result<(Vec<(tunnel::Tunnel, String)>, Option<String>)> {
        let c = self.describe_connection(a, id).await?;
        let mut tunnels: Vec<&TunnelOption> =
            c.options().map(|o| o.tunnel_options().iter().collect()).unwrap_or_default();
        tunnel::order(&mut tunnels, None, cidrs);
        let out = tunnels
            .into_iter()
            .map(|t| (tunnel::Tunnel::read(t), t.outside_ip_address().unwrap_or_default().to_string()))
            .collect();
        Ok((out, c.state().map(|s| s.as_str().to_string())))
    }

    /// Waits until the connection is `available` (not `pending`, not `modifying`).
    async fn connection_available(
        &self,
        a: &Address,
        id: &str,
        cidrs: [Option<&str>; 2],
        what: &str,
        progress: &dyn Progress,
    ) -> Result<()> {
        self.wait(a, what, progress, || async {
            Ok(self.read_connection(a, id, cidrs).await?.0.as_deref() == Some("available"))
        })
        .await
    }

    pub(crate) async fn vpn_connection(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let wanted = [r.opt_str("tunnel1_inside_cidr"), r.opt_str("tunnel2_inside_cidr")];
        let cidrs = [wanted[0].as_deref(), wanted[1].as_deref()];
        let id = match req.id.map(String::from).or(self.existing_id(req.stack, a).await?) {
            Some(id) => id,
            None => {
                let cgw = required(&r, "customer_gateway")?;
                let vgw = required(&r, "vpn_gateway_id")?;
                let options = VpnConnectionOptionsSpecification::builder()
                    .static_routes_only(r.bool("static_routes_only"))
                    .tunnel_options(tunnel::create_spec(&tunnel::Tunnel::wanted(&r, 1)))
                    .tunnel_options(tunnel::create_spec(&tunnel::Tunnel::wanted(&r, 2)))
                    .build();
                let created = self
                    .patient(a, progress, || async {
                        send!(
                            a,
                            self.ec2
                                .create_vpn_connection()
                                .r#type("ipsec.1")
                                .customer_gateway_id(&cgw)
                                .vpn_gateway_id(&vgw)
                                .options(options.clone())
                                .tag_specifications(tag_spec(AwsType::VpnConnection, &desired_tags(req.stack, &r)))
                        )
                    })
                    .await;
                let id = match created {
                    Ok(made) => {
                        made.vpn_connection().and_then(|c| c.vpn_connection_id()).unwrap_or_default().to_string()
                    }
                    // A create EC2 carried out whose answer was lost: the SDK's retry is refused
                    // (the inside CIDRs are taken, by that very connection). It carries this
                    // address's tags, so it is adopted rather than left untracked.
                    Err(e) => match self.existing_id(req.stack, a).await? {
                        Some(id) => {
                            progress.waiting(a, &format!("adopting {id}, created by a call whose answer was lost"));
                            id
                        }
                        None => return Err(e),
                    },
                };
                self.reap_twins(req.stack, a, &id, progress).await?;
                id
            }
        };
        let provisioning = "waiting for AWS to provision the VPN connection (typically 5-10 minutes)";
        self.connection_available(a, &id, cidrs, provisioning, progress).await?;
        // Every option the spec sets and the tunnel does not carry is sent, one tunnel at a time,
        // each modification waited out (the connection is `modifying` until it is applied) so
        // that the other tunnel carries traffic meanwhile and EC2 takes the next one.
        // Tags do not change with a tunnel modification: read once. The tunnels are read again
        // only after a modification (which may change which one matches tunnel 1's range).
        let current = Reader::new(a, &self.read_connection(a, &id, cidrs).await?.1).string_map("tags");
        let (mut tunnels, _) = self.tunnels(a, &id, cidrs).await?;
        for n in 1..=2u8 {
            let Some(have) = tunnels.get(usize::from(n) - 1).cloned() else { continue };
            let want = tunnel::Tunnel::wanted(&r, n);
            let changed = want.changed(&have.0);
            if changed.is_empty() {
                continue;
            }
            let what =
                changed.iter().map(|c| if *c == "psk" { "pre-shared key" } else { c }).collect::<Vec<_>>().join(", ");
            progress.waiting(a, &format!("modifying tunnel {n} ({what})"));
            self.patient(a, progress, || async {
                send!(
                    a,
                    self.ec2
                        .modify_vpn_tunnel_options()
                        .vpn_connection_id(&id)
                        .vpn_tunnel_outside_ip_address(&have.1)
                        .tunnel_options(tunnel::modify_spec(&want, &changed))
                )
            })
            .await?;
            let applying = format!("waiting for AWS to apply the change to tunnel {n}");
            self.connection_available(a, &id, cidrs, &applying, progress).await?;
            tunnels = self.tunnels(a, &id, cidrs).await?.0;
        }
        self.retag(a, &id, &current, &desired_tags(req.stack, &r)).await?;
        let (_, out) = self.read_connection(a, &id, cidrs).await?;
        Ok(Observed { address: a.clone(), id, attributes: out })
    }

    pub(crate) async fn connection_route(&self, req: &Request<'_>, _progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let conn = required(&r, "vpn_connection_id")?;
        let cidr = required(&r, "destination_cidr")?;
        send!(a, self.ec2.create_vpn_connection_route().vpn_connection_id(&conn).destination_cidr_block(&cidr))?;
        Ok(Observed { address: a.clone(), id: format!("{conn}/{cidr}"), attributes: Attributes::new() })
    }

    pub(crate) async fn delete_vpn_connection(
        &self,
        req: &Request<'_>,
        id: &str,
        progress: &dyn Progress,
    ) -> Result<()> {
        let a = req.address;
        send!(a, self.ec2.delete_vpn_connection().vpn_connection_id(id))?;
        self.wait(a, "waiting for the VPN connection to be deleted", progress, || async {
            Ok(matches!(self.read_connection(a, id, [None, None]).await, Ok((Some(s), _)) if s == "deleted"))
        })
        .await
    }

    pub(crate) async fn delete_connection_route(
        &self,
        req: &Request<'_>,
        id: &str,
        _progress: &dyn Progress,
    ) -> Result<()> {
        let a = req.address;
        let (conn, cidr) = id.split_once('/').unwrap_or((id, ""));
        send!(a, self.ec2.delete_vpn_connection_route().vpn_connection_id(conn).destination_cidr_block(cidr))?;
        Ok(())
    }

    /// `aws_vpn_connection_route` is not listed: state keeps what it records (listing the
    /// connections for it would report each connection as a route to adopt).
    pub(crate) async fn listed_with_state(&self, _l: &Listing<'_>) -> Result<Vec<Observed>> {
        Ok(Vec::new())
    }

    pub(crate) async fn list_vpn_connections(&self, l: &Listing<'_>) -> Result<Vec<Observed>> {
        let conns = crate::tagged_or_recorded!(
            self,
            l,
            describe_vpn_connections,
            vpn_connections,
            vpn_connection_id,
            "vpn-connection-id"
        );
        let mut out = Vec::new();
        for c in conns.iter().filter(|c| live(c.state().map(|s| s.as_str()))) {
            let id = c.vpn_connection_id().unwrap_or_default().to_string();
            let Some(addr) = l.address(c.tags(), &id) else { continue };
            // Tunnel 1 is the one state records as tunnel 1 (by its outside address), or,
            // for a connection state does not know, the one with the lower inside range.
            let recorded = l.known.iter().find(|k| k.address.rtype == l.rtype && k.id == id).map(|k| &k.attributes);
            let had = |k: &str| recorded.and_then(|r| r.get(k)).and_then(Value::as_str);
            let cidrs = [had("tunnel1_inside_cidr"), had("tunnel2_inside_cidr")];
            let attrs = ec2::connection_attributes(c, &id, had("tunnel1_address"), cidrs);
            out.push(Observed { address: addr, id, attributes: attrs });
        }
        Ok(out)
    }
}
