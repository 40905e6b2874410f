//! The Azure side's network: the VNet, its DNS servers and subnets, the network security group,
//! public IPs and the NAT gateway. Each type's handler: its write, delete and list.

use serde_json::{Value as Json, json};
use xcsp_core::provider::{Attributes, BoxFuture, Observed, ProviderError};
use xcsp_core::{Address, ResourceType as T};

use super::{Kind, Listing, Put, Remove, model, to_json};
use crate::{arm, identify};

/// `azure_virtual_network`.
pub(crate) struct VirtualNetworkKind;

impl Kind for VirtualNetworkKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let n = &p.network;
            let read: fn(&Json) -> Attributes = arm::read_vnet;
            let name = d.str("name")?;
            let c = n.virtual_networks_client();
            // A PUT replaces the subnets and DNS servers: send the ones the VNet has now.
            let current = match p.retry(address, progress, || as_json!(c.get(rg, &name, sub))).await {
                Ok(v) => v,
                Err(ProviderError::NotFound { .. }) => Json::Null,
                Err(e) => return Err(e),
            };
            let m: azure_mgmt_network::models::VirtualNetwork = model(address, arm::vnet_body(&d, stack, &current)?)?;
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("virtual network"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, sub, rg, .. } = *r;
            let address = req.address;
            let n = &p.network;
            let (name, c) = (r.name(), n.virtual_networks_client());
            p.delete_with(address, progress, &r.deleting("virtual network"), || raw!(c.delete(rg, &name, sub).send()))
                .await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, rtype, sub, rg, .. } = *l;
            let n = &p.network;
            let c = n.virtual_networks_client();
            Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_vnet))
        })
    }
}

/// `azure_vnet_dns_servers`.
pub(crate) struct VnetDnsServersKind;

impl Kind for VnetDnsServersKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let address = req.address;
            let n = &p.network;
            let read: fn(&Json) -> Attributes = arm::read_dns_servers;
            let name = d.str("virtual_network")?;
            let c = n.virtual_networks_client();
            let current = p.retry(address, progress, || as_json!(c.get(rg, &name, sub))).await?;
            let m: azure_mgmt_network::models::VirtualNetwork =
                model(address, arm::vnet_with_dns(&current, d.json("dns_servers")?))?;
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("virtual network's DNS servers"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?;
            let mut o = w.observed(&body, read);
            o.id = arm::dns_servers_id(&o.id);
            Ok(o)
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, d, sub, rg, .. } = *r;
            let address = req.address;
            let n = &p.network;
            // The VNet goes back to Azure's own resolver; a VNet already gone has none.
            let vnet = r.segment(1).map(str::to_string).or_else(|| d.opt_str("virtual_network")).unwrap_or_default();
            let c = n.virtual_networks_client();
            let current = match p.retry(address, progress, || as_json!(c.get(rg, &vnet, sub))).await {
                Ok(v) => v,
                Err(e) if arm::gone(&e) => return Ok(()),
                Err(e) => return Err(e),
            };
            let m: azure_mgmt_network::models::VirtualNetwork =
                model(address, arm::vnet_with_dns(&current, json!([])))?;
            p.write(
                address,
                progress,
                "Azure is removing the virtual network's DNS servers",
                || raw!(c.create_or_update(rg, &vnet, m.clone(), sub).send()),
                || as_json!(c.get(rg, &vnet, sub)),
            )
            .await
            .map(|_| ())
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, rtype, known, sub, rg, .. } = *l;
            let n = &p.network;
            // Read from the VNet: the one state records them on, else a VNet of the stack
            // that has DNS servers (an apply killed after the PUT).
            let c = n.virtual_networks_client();
            let vnets = p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?;
            let mut out = Vec::new();
            for vnet in &vnets {
                let id = arm::dns_servers_id(vnet["id"].as_str().unwrap_or_default());
                let recorded = known
                    .iter()
                    .find(|k| k.address.rtype == rtype && k.id.eq_ignore_ascii_case(&id))
                    .map(|k| k.address.clone());
                let has = vnet["properties"]["dhcpOptions"]["dnsServers"].as_array().is_some_and(|s| !s.is_empty());
                let adopted = || {
                    let vnet_address = l.ours(vnet).then(|| l.address_of(vnet)).flatten()?;
                    has.then(|| Address { rtype, name: vnet_address.name, index: vnet_address.index })
                };
                if let Some(address) = recorded.or_else(adopted) {
                    out.push(Observed { address, id, attributes: arm::read_dns_servers(vnet) });
                }
            }
            Ok(out)
        })
    }
}

/// `azure_subnet`.
pub(crate) struct SubnetKind;

impl Kind for SubnetKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let address = req.address;
            let n = &p.network;
            let read: fn(&Json) -> Attributes = arm::read_subnet;
            let (name, vnet) = (d.str("name")?, d.str("virtual_network")?);
            let m: azure_mgmt_network::models::Subnet = model(address, arm::subnet_body(&d)?)?;
            let c = n.subnets_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("subnet"),
                    || raw!(c.create_or_update(rg, &vnet, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &vnet, &name, sub)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, d, sub, rg, .. } = *r;
            let address = req.address;
            let n = &p.network;
            let name = r.name();
            let vnet = r.segment(2).map(str::to_string).or_else(|| d.opt_str("virtual_network")).unwrap_or_default();
            let c = n.subnets_client();
            p.delete_with(address, progress, &r.deleting("subnet"), || raw!(c.delete(rg, &vnet, &name, sub).send()))
                .await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, stack, rtype, known, sub, rg, .. } = *l;
            let n = &p.network;
            // Subnets come inside their VNet: one list of VNets covers them all.
            let c = n.virtual_networks_client();
            let vnets = p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?;
            let mut out = Vec::new();
            for vnet in &vnets {
                // The VNet state records (by id), else one tagged with the stack.
                let id = vnet["id"].as_str().unwrap_or_default();
                let recorded_vnet = known
                    .iter()
                    .find(|k| k.address.rtype == T::AzureVirtualNetwork && k.id.eq_ignore_ascii_case(id))
                    .map(|k| k.address.clone());
                let Some(vnet_address) = recorded_vnet.or_else(|| l.ours(vnet).then(|| l.address_of(vnet)).flatten())
                else {
                    continue;
                };
                for s in vnet["properties"]["subnets"].as_array().into_iter().flatten() {
                    let Some(address) =
                        identify::subnet_address(stack, &vnet_address, s["name"].as_str().unwrap_or_default())
                    else {
                        continue;
                    };
                    let id = s["id"].as_str().unwrap_or_default().to_string();
                    out.push(Observed { address, id, attributes: arm::read_subnet(s) });
                }
            }
            Ok(out)
        })
    }
}

/// `azure_network_security_group`.
pub(crate) struct NetworkSecurityGroupKind;

impl Kind for NetworkSecurityGroupKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let n = &p.network;
            let read: fn(&Json) -> Attributes = arm::read_nsg;
            let name = d.str("name")?;
            let m: azure_mgmt_network::models::NetworkSecurityGroup = model(address, arm::nsg_body(&d, stack)?)?;
            let c = n.network_security_groups_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("network security group"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, sub, rg, .. } = *r;
            let address = req.address;
            let n = &p.network;
            let (name, c) = (r.name(), n.network_security_groups_client());
            p.delete_with(address, progress, &r.deleting("network security group"), || {
                raw!(c.delete(rg, &name, sub).send())
            })
            .await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, rtype, sub, rg, .. } = *l;
            let n = &p.network;
            let c = n.network_security_groups_client();
            Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_nsg))
        })
    }
}

/// `azure_public_ip`.
pub(crate) struct PublicIpKind;

impl Kind for PublicIpKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let n = &p.network;
            let read: fn(&Json) -> Attributes = arm::read_public_ip;
            let name = d.str("name")?;
            let m: azure_mgmt_network::models::PublicIpAddress = model(address, arm::public_ip_body(&d, stack)?)?;
            let c = n.public_ip_addresses_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("public IP"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, sub, rg, .. } = *r;
            let address = req.address;
            let n = &p.network;
            let (name, c) = (r.name(), n.public_ip_addresses_client());
            p.delete_with(address, progress, &r.deleting("public IP"), || raw!(c.delete(rg, &name, sub).send())).await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, rtype, sub, rg, .. } = *l;
            let n = &p.network;
            let c = n.public_ip_addresses_client();
            Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_public_ip))
        })
    }
}

/// `azure_nat_gateway`.
pub(crate) struct NatGatewayKind;

impl Kind for NatGatewayKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, rg, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let n = &p.network;
            let read: fn(&Json) -> Attributes = arm::read_nat_gateway;
            let name = d.str("name")?;
            let m: azure_mgmt_network::models::NatGateway = model(address, arm::nat_gateway_body(&d, stack)?)?;
            let c = n.nat_gateways_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("NAT gateway"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, sub, rg, .. } = *r;
            let address = req.address;
            let n = &p.network;
            let (name, c) = (r.name(), n.nat_gateways_client());
            p.delete_with(address, progress, &r.deleting("NAT gateway"), || raw!(c.delete(rg, &name, sub).send())).await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, rtype, sub, rg, .. } = *l;
            let n = &p.network;
            let c = n.nat_gateways_client();
            Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_nat_gateway))
        })
    }
}
