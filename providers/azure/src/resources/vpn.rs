//! The Azure end of the link: the VPN gateway, the local network gateway (AWS's tunnels as Azure
//! sees them) and the connections. Each type's handler: its write, delete and list.

use serde_json::Value as Json;
use xcsp_core::Value;
use xcsp_core::provider::{Attributes, Observed, ProviderError};

use super::{Listing, Put, Remove, model, to_json};
use crate::{Quiet, arm};

/// `azure_vpn_gateway`.
pub(super) mod vpn_gateway {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, progress, operation, d, sub, rg, .. } = *w;
        let (address, stack) = (req.address, req.stack);
        let n = &p.network;
        let read: fn(&Json) -> Attributes = arm::read_gateway;
        let name = d.str("name")?;
        let id = p.arm_id(&d, "Microsoft.Network/virtualNetworkGateways")?;
        let m: azure_mgmt_network::models::VirtualNetworkGateway = model(address, arm::gateway_body(&d, stack, &id)?)?;
        let c = n.virtual_network_gateways_client();
        let activity = if operation == "create" {
            "Azure is creating the VPN gateway (typically 30-45 minutes)".to_string()
        } else {
            w.doing("VPN gateway")
        };
        let get = || as_json!(c.get(rg, &name, sub));
        let body = match p.adopt_in_flight(req, progress, "Azure is making the VPN gateway", get, read).await? {
            Some(done) => done,
            None => {
                p.write(
                    address,
                    progress,
                    &activity,
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    get,
                )
                .await?
            }
        };
        Ok(w.observed(&body, read))
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, req, progress, sub, rg, .. } = *r;
        let address = req.address;
        let n = &p.network;
        let (name, c) = (r.name(), n.virtual_network_gateways_client());
        p.delete_with(address, progress, "Azure is deleting the VPN gateway (typically 10-20 minutes)", || {
            raw!(c.delete(rg, &name, sub).send())
        })
        .await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let n = &p.network;
        let c = n.virtual_network_gateways_client();
        Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_gateway))
    }
}

/// `azure_local_network_gateway`.
pub(super) mod local_network_gateway {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let n = &p.network;
        let name = d.str("name")?;
        let c = n.local_network_gateways_client();
        w.send(
            "local network gateway",
            arm::read_local_gateway,
            arm::local_gateway_body(&d, stack)?,
            |m: azure_mgmt_network::models::LocalNetworkGateway| raw!(c.create_or_update(rg, &name, m, sub).send()),
            || as_json!(c.get(rg, &name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let n = &p.network;
        let (name, c) = (r.name(), n.local_network_gateways_client());
        r.delete("local network gateway", || raw!(c.delete(rg, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let n = &p.network;
        let c = n.local_network_gateways_client();
        Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_local_gateway))
    }
}

/// `azure_vpn_connection`.
pub(super) mod vpn_connection {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let n = &p.network;
        let name = d.str("name")?;
        let c = n.virtual_network_gateway_connections_client();
        w.send(
            "connection",
            arm::read_connection,
            arm::connection_body(&d, stack)?,
            |m: azure_mgmt_network::models::VirtualNetworkGatewayConnection| {
                raw!(c.create_or_update(rg, &name, m, sub).send())
            },
            || as_json!(c.get(rg, &name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let n = &p.network;
        let (name, c) = (r.name(), n.virtual_network_gateway_connections_client());
        r.delete("connection", || raw!(c.delete(rg, &name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let n = &p.network;
        let c = n.virtual_network_gateway_connections_client();
        let mut found = l.tagged(p.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_connection);
        // The shared key is not in the connection's body: one GET each (ARM has no list
        // of them). Recorded as a digest, never in clear (Value::secret_digest).
        for o in &mut found {
            let name = arm::leaf(&o.id).to_string();
            match p.retry(&o.address, &Quiet, || as_json!(c.get_shared_key(rg, &name, sub))).await {
                Ok(k) => {
                    if let Some(key) = k["value"].as_str() {
                        o.attributes.insert("shared_key".into(), Value::secret_digest(key));
                    }
                }
                Err(e) if arm::gone(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(found)
    }
}
