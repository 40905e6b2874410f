//! The gateways: a virtual private gateway, its attachment to the cluster's VPC and its route
//! propagation (all three read from the tagged gateway), and a customer gateway. Each type's
//! create or update, delete and list.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{GatewayType, ResourceType as AwsType, RouteTable, VpnGateway};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, Observed, Progress, Request};
use xcsp_core::{Address, ResourceType as T, Value};

use crate::ec2::{self, desired_tags, failed, filter, live, required, sdk_error, tag_map, tag_spec};
use crate::{AwsProvider, Listing, Result, send};

/// Whether `g` is attaching or attached to `vpc`.
fn attached_to(g: &VpnGateway, vpc: &str) -> bool {
    g.vpc_attachments()
        .iter()
        .any(|x| x.vpc_id() == Some(vpc) && matches!(x.state().map(|s| s.as_str()), Some("attached" | "attaching")))
}

impl AwsProvider {
    async fn vgw(&self, address: &Address, id: &str) -> Result<Option<VpnGateway>> {
        let r = send!(address, self.ec2.describe_vpn_gateways().vpn_gateway_ids(id))?;
        Ok(r.vpn_gateways().first().cloned())
    }

    /// The cluster's VPC: the one tagged with the cluster tag.
    pub(crate) async fn cluster_vpc(&self, address: &Address, cluster_tag: &str) -> Result<String> {
        let r = send!(address, self.ec2.describe_vpcs().filters(filter("tag-key", &[cluster_tag])))?;
        match r.vpcs() {
            [one] => Ok(one.vpc_id().unwrap_or_default().to_string()),
            [] => Err(failed(
                address,
                "ClusterVpcNotFound",
                format!("no VPC carries the tag {cluster_tag}: is the cluster in this account and region?"),
            )),
            many => Err(failed(
                address,
                "ClusterVpcAmbiguous",
                format!("{} VPCs carry the tag {cluster_tag}; name one with `vpc_id`", many.len()),
            )),
        }
    }

    pub(crate) async fn vpn_gateway(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let id = match req.id.map(String::from).or(self.existing_id(req.stack, a).await?) {
            Some(id) => id,
            None => {
                let asn = r.opt_int("amazon_side_asn").unwrap_or(64512);
                let made = send!(
                    a,
                    self.ec2
                        .create_vpn_gateway()
                        .r#type(GatewayType::Ipsec1)
                        .amazon_side_asn(asn)
                        .tag_specifications(tag_spec(AwsType::VpnGateway, &desired_tags(req.stack, &r)))
                )?;
                let id = made.vpn_gateway().and_then(|g| g.vpn_gateway_id()).unwrap_or_default().to_string();
                self.reap_twins(req.stack, a, &id, progress).await?;
                id
            }
        };
        self.wait(a, "waiting for the virtual private gateway to become available", progress, || async {
            Ok(self.vgw(a, &id).await?.and_then(|g| g.state().map(|s| s.as_str() == "available")).unwrap_or(false))
        })
        .await?;
        let mut out = match self.vgw(a, &id).await? {
            Some(g) => {
                ec2::vgw_attributes(&g, &self.retag(a, &id, &tag_map(g.tags()), &desired_tags(req.stack, &r)).await?)
            }
            None => Attributes::new(),
        };
        out.insert("id".into(), Value::string(&id));
        Ok(Observed { address: a.clone(), id, attributes: out })
    }

    pub(crate) async fn attachment(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let vgw = required(&r, "vpn_gateway_id")?;
        let vpc = match r.opt_str("vpc_id") {
            Some(v) => v,
            None => self.cluster_vpc(a, &r.str_or_empty("cluster_tag")).await?,
        };
        let current = self.vgw(a, &vgw).await?;
        if !current.as_ref().is_some_and(|g| attached_to(g, &vpc)) {
            let sent = self
                .patient(a, progress, || async {
                    send!(a, self.ec2.attach_vpn_gateway().vpn_gateway_id(&vgw).vpc_id(&vpc))
                })
                .await;
            // A retried call whose first answer was lost finds the attachment made:
            // what counts is whether the gateway is attaching or attached to this VPC.
            if let Err(e) = sent
                && !self.vgw(a, &vgw).await?.is_some_and(|g| attached_to(&g, &vpc))
            {
                return Err(e);
            }
        }
        self.wait(a, "waiting for the gateway to attach to the cluster's VPC", progress, || async {
            Ok(self.vgw(a, &vgw).await?.is_some_and(|g| {
                g.vpc_attachments()
                    .iter()
                    .any(|x| x.vpc_id() == Some(vpc.as_str()) && x.state().map(|s| s.as_str()) == Some("attached"))
            }))
        })
        .await?;
        let mut out = Attributes::new();
        out.insert("vpn_gateway_id".into(), Value::string(&vgw));
        out.insert("vpc_id".into(), Value::string(&vpc));
        out.insert("state".into(), Value::string("attached"));
        Ok(Observed { address: a.clone(), id: format!("{vgw}/{vpc}"), attributes: out })
    }

    pub(crate) async fn route_propagation(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let vgw = required(&r, "vpn_gateway_id")?;
        let tables = match r.strings("route_table_ids") {
            t if !t.is_empty() => t,
            _ => {
                let g = self.vgw(a, &vgw).await?;
                let vpc = g.and_then(|g| g.vpc_attachments().iter().find_map(|x| x.vpc_id().map(String::from)));
                let vpc = vpc.ok_or_else(|| failed(a, "NotAttached", format!("{vgw} is not attached to a VPC")))?;
                let found = send!(a, self.ec2.describe_route_tables().filters(filter("vpc-id", &[&vpc])))?;
                found.route_tables().iter().filter_map(|t| t.route_table_id().map(String::from)).collect()
            }
        };
        for rt in &tables {
            self.patient(a, progress, || async {
                send!(a, self.ec2.enable_vgw_route_propagation().gateway_id(&vgw).route_table_id(rt))
            })
            .await?;
        }
        let mut out = Attributes::new();
        out.insert("vpn_gateway_id".into(), Value::string(&vgw));
        out.insert("route_table_ids".into(), Value::strings(tables.iter()));
        if req.attributes.contains_key("every_route_table") {
            out.insert("every_route_table".into(), Value::Bool(true));
        }
        Ok(Observed { address: a.clone(), id: vgw, attributes: out })
    }

    pub(crate) async fn customer_gateway(&self, req: &Request<'_>, _progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let id = match req.id.map(String::from).or(self.existing_id(req.stack, a).await?) {
            Some(id) => id,
            None => {
                let ip = required(&r, "ip_address")?;
                let asn = r.opt_int("bgp_asn").unwrap_or(65000);
                // BgpAsn is a signed 32-bit int (1-2,147,483,647); larger ASNs go in
                // BgpAsnExtended (2,147,483,648-4,294,967,295), never both (EC2 API,
                // CreateCustomerGateway).
                let create = self.ec2.create_customer_gateway();
                let create = match i32::try_from(asn) {
                    Ok(small) => create.bgp_asn(small),
                    Err(_) => create.bgp_asn_extended(asn),
                };
                let made = send!(
                    a,
                    create
                        .r#type(GatewayType::Ipsec1)
                        .ip_address(ip)
                        .tag_specifications(tag_spec(AwsType::CustomerGateway, &desired_tags(req.stack, &r)))
                )?;
                made.customer_gateway().and_then(|g| g.customer_gateway_id()).unwrap_or_default().to_string()
            }
        };
        let found = send!(a, self.ec2.describe_customer_gateways().customer_gateway_ids(&id))?;
        let mut out = match found.customer_gateways().first() {
            Some(g) => {
                ec2::cgw_attributes(g, &self.retag(a, &id, &tag_map(g.tags()), &desired_tags(req.stack, &r)).await?)
            }
            None => Attributes::new(),
        };
        out.insert("id".into(), Value::string(&id));
        Ok(Observed { address: a.clone(), id, attributes: out })
    }

    pub(crate) async fn delete_vpn_gateway(&self, req: &Request<'_>, id: &str, progress: &dyn Progress) -> Result<()> {
        let a = req.address;
        send!(a, self.ec2.delete_vpn_gateway().vpn_gateway_id(id))?;
        self.wait(a, "waiting for the gateway to be deleted", progress, || async {
            Ok(self.vgw(a, id).await?.is_none_or(|g| g.state().map(|s| s.as_str()) == Some("deleted")))
        })
        .await
    }

    pub(crate) async fn detach(&self, req: &Request<'_>, id: &str, progress: &dyn Progress) -> Result<()> {
        let a = req.address;
        let (vgw, vpc) = id.split_once('/').unwrap_or((id, ""));
        match self.ec2.detach_vpn_gateway().vpn_gateway_id(vgw).vpc_id(vpc).send().await {
            Ok(_) => {}
            Err(x) => {
                let x = x.into_service_error();
                if !x.code().is_some_and(|c| c.contains("NotFound")) {
                    return Err(sdk_error(a, x));
                }
            }
        }
        // The attachment is `detaching` for a while; the gateway cannot be deleted (nor
        // attached again) until it is `detached` (EC2 `VpcAttachment.State`;
        // terraform-provider-aws waits for it the same way after DetachVpnGateway).
        self.wait(a, "waiting for the gateway to detach from the VPC", progress, || async {
            let g = self.vgw(a, vgw).await?;
            Ok(g.is_none_or(|g| {
                !g.vpc_attachments().iter().any(|v| {
                    v.vpc_id() == Some(vpc)
                        && matches!(v.state().map(|s| s.as_str()), Some("attaching" | "attached" | "detaching"))
                })
            }))
        })
        .await
    }

    pub(crate) async fn stop_propagation(&self, req: &Request<'_>, id: &str, _progress: &dyn Progress) -> Result<()> {
        for rt in Reader::new(req.address, req.attributes).strings("route_table_ids") {
            let _ = self.ec2.disable_vgw_route_propagation().gateway_id(id).route_table_id(rt).send().await;
        }
        Ok(())
    }

    pub(crate) async fn delete_customer_gateway(
        &self,
        req: &Request<'_>,
        id: &str,
        _progress: &dyn Progress,
    ) -> Result<()> {
        let a = req.address;
        send!(a, self.ec2.delete_customer_gateway().customer_gateway_id(id))?;
        Ok(())
    }

    /// The virtual private gateways of the stack, their attachments or their route propagation
    /// (as `l.rtype` asks): all three from one describe of the gateways.
    pub(crate) async fn list_vpn_gateways(&self, l: &Listing<'_>) -> Result<Vec<Observed>> {
        let gateways =
            crate::tagged_or_recorded!(self, l, describe_vpn_gateways, vpn_gateways, vpn_gateway_id, "vpn-gateway-id");
        let tables = if l.rtype == T::AwsRoutePropagation {
            let mut all = Vec::new();
            let mut pages = self.ec2.describe_route_tables().into_paginator().send();
            while let Some(page) = pages.next().await {
                all.extend(page.map_err(|x| sdk_error(&l.probe, x.into_service_error()))?.route_tables().to_vec());
            }
            all
        } else {
            Vec::new()
        };
        let mut out = Vec::new();
        for g in gateways.iter().filter(|g| live(g.state().map(|s| s.as_str()))) {
            let id = g.vpn_gateway_id().unwrap_or_default().to_string();
            let Some(addr) = l.address(g.tags(), &id) else { continue };
            let sibling = |t: T| Address { rtype: t, name: addr.name.clone(), index: addr.index };
            match l.rtype {
                T::AwsVpnGateway => {
                    let mut attrs = ec2::vgw_attributes(g, &tag_map(g.tags()));
                    attrs.insert("id".into(), Value::string(&id));
                    out.push(Observed { address: addr, id, attributes: attrs });
                }
                T::AwsVpnGatewayAttachment => {
                    for att in g
                        .vpc_attachments()
                        .iter()
                        .filter(|x| matches!(x.state().map(|s| s.as_str()), Some("attached" | "attaching")))
                    {
                        let vpc = att.vpc_id().unwrap_or_default();
                        let mut attrs = Attributes::new();
                        attrs.insert("vpn_gateway_id".into(), Value::string(&id));
                        attrs.insert("vpc_id".into(), Value::string(vpc));
                        let state = att.state().map(|s| s.as_str()).unwrap_or("attaching");
                        attrs.insert("state".into(), Value::string(state));
                        out.push(Observed {
                            address: sibling(T::AwsVpnGatewayAttachment),
                            id: format!("{id}/{vpc}"),
                            attributes: attrs,
                        });
                    }
                }
                _ => {
                    let propagates =
                        |t: &&RouteTable| t.propagating_vgws().iter().any(|p| p.gateway_id() == Some(id.as_str()));
                    let ids: Vec<String> =
                        tables.iter().filter(propagates).filter_map(|t| t.route_table_id().map(String::from)).collect();
                    if !ids.is_empty() {
                        // Member by member: does every table of the VPC the gateway is
                        // attached to propagate its routes?
                        let vpc = g.vpc_attachments().iter().find_map(|x| x.vpc_id());
                        let every =
                            tables.iter().filter(|t| t.vpc_id().is_some() && t.vpc_id() == vpc).all(|t| propagates(&t));
                        let mut attrs = Attributes::new();
                        attrs.insert("vpn_gateway_id".into(), Value::string(&id));
                        attrs.insert("route_table_ids".into(), Value::strings(ids.iter()));
                        attrs.insert("every_route_table".into(), Value::Bool(every));
                        out.push(Observed {
                            address: sibling(T::AwsRoutePropagation),
                            id: id.clone(),
                            attributes: attrs,
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    pub(crate) async fn list_customer_gateways(&self, l: &Listing<'_>) -> Result<Vec<Observed>> {
        let gateways = crate::tagged_or_recorded!(
            self,
            l,
            describe_customer_gateways,
            customer_gateways,
            customer_gateway_id,
            "customer-gateway-id"
        );
        let mut out = Vec::new();
        for g in gateways.iter().filter(|g| live(g.state())) {
            let id = g.customer_gateway_id().unwrap_or_default().to_string();
            let Some(addr) = l.address(g.tags(), &id) else { continue };
            let mut attrs = ec2::cgw_attributes(g, &tag_map(g.tags()));
            attrs.insert("id".into(), Value::string(&id));
            out.push(Observed { address: addr, id, attributes: attrs });
        }
        Ok(out)
    }
}
