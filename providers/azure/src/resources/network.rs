//! The Azure side's network: the VNet, its DNS servers and subnets, the network security group,
//! public IPs and the NAT gateway. Each type's handler: its write, delete and list.

use serde_json::{Value as Json, json};
use xcsp_core::provider::{Attributes, Observed, ProviderError};
use xcsp_core::{Address, ResourceType as T};

use super::{Listing, Put, Remove, model, to_json};
use crate::{arm, identify};

/// `azure_virtual_network`.
pub(super) mod virtual_network {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
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
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let n = &p.network;
        let (name, c) = (r.name(), n.virtual_networks_client());
        r.delete("virtual network", || raw!(c.delete(rg, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let n = &p.network;
        let c = n.virtual_networks_client();
        Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_vnet))
    }
}

/// `azure_vnet_dns_servers`.
pub(super) mod vnet_dns_servers {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
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
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
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
        let m: azure_mgmt_network::models::VirtualNetwork = model(address, arm::vnet_with_dns(&current, json!([])))?;
        p.write(
            address,
            progress,
            "Azure is removing the virtual network's DNS servers",
            || raw!(c.create_or_update(rg, &vnet, m.clone(), sub).send()),
            || as_json!(c.get(rg, &vnet, sub)),
        )
        .await
        .map(|_| ())
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
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
    }
}

/// `azure_subnet`.
pub(super) mod subnet {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, d, sub, rg, .. } = *w;
        let n = &p.network;
        let (name, vnet) = (d.str("name")?, d.str("virtual_network")?);
        let c = n.subnets_client();
        w.send(
            "subnet",
            arm::read_subnet,
            arm::subnet_body(&d)?,
            |m: azure_mgmt_network::models::Subnet| raw!(c.create_or_update(rg, &vnet, &name, m, sub).send()),
            || as_json!(c.get(rg, &vnet, &name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, d, sub, rg, .. } = *r;
        let n = &p.network;
        let name = r.name();
        let vnet = r.segment(2).map(str::to_string).or_else(|| d.opt_str("virtual_network")).unwrap_or_default();
        let c = n.subnets_client();
        r.delete("subnet", || raw!(c.delete(rg, &vnet, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
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
    }
}

/// `azure_network_security_group`.
pub(super) mod network_security_group {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let n = &p.network;
        let name = d.str("name")?;
        let c = n.network_security_groups_client();
        w.send(
            "network security group",
            arm::read_nsg,
            arm::nsg_body(&d, stack)?,
            |m: azure_mgmt_network::models::NetworkSecurityGroup| raw!(c.create_or_update(rg, &name, m, sub).send()),
            || as_json!(c.get(rg, &name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let n = &p.network;
        let (name, c) = (r.name(), n.network_security_groups_client());
        r.delete("network security group", || raw!(c.delete(rg, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let n = &p.network;
        let c = n.network_security_groups_client();
        Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_nsg))
    }
}

/// `azure_public_ip`.
pub(super) mod public_ip {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let n = &p.network;
        let name = d.str("name")?;
        let c = n.public_ip_addresses_client();
        w.send(
            "public IP",
            arm::read_public_ip,
            arm::public_ip_body(&d, stack)?,
            |m: azure_mgmt_network::models::PublicIpAddress| raw!(c.create_or_update(rg, &name, m, sub).send()),
            || as_json!(c.get(rg, &name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let n = &p.network;
        let (name, c) = (r.name(), n.public_ip_addresses_client());
        r.delete("public IP", || raw!(c.delete(rg, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let n = &p.network;
        let c = n.public_ip_addresses_client();
        Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_public_ip))
    }
}

/// `azure_nat_gateway`.
pub(super) mod nat_gateway {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let n = &p.network;
        let name = d.str("name")?;
        let c = n.nat_gateways_client();
        w.send(
            "NAT gateway",
            arm::read_nat_gateway,
            arm::nat_gateway_body(&d, stack)?,
            |m: azure_mgmt_network::models::NatGateway| raw!(c.create_or_update(rg, &name, m, sub).send()),
            || as_json!(c.get(rg, &name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let n = &p.network;
        let (name, c) = (r.name(), n.nat_gateways_client());
        r.delete("NAT gateway", || raw!(c.delete(rg, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let n = &p.network;
        let c = n.nat_gateways_client();
        Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_nat_gateway))
    }
}
