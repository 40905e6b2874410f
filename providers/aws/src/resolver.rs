//! `aws_route53_resolver_endpoint`: the inbound endpoint in the cluster's VPC that the Azure
//! VNet's DNS servers point at, through aws-sdk-route53resolver. Its create or update, delete and
//! list.
//!
//! What the Route 53 Resolver API says, and this module relies on (API reference,
//! `CreateResolverEndpoint`, `GetResolverEndpoint`, `ListResolverEndpoints`): a create takes a
//! `CreatorRequestId` that makes a retried request safe, and a second create with one already
//! used is `ResourceExistsException`; an endpoint needs at least two addresses ("Route 53 requires
//! that you create at least two"), in two Availability Zones (Developer Guide, "Values that you
//! specify when you create or edit inbound endpoints"); it is `CREATING` until its network
//! interfaces exist and `OPERATIONAL` after, and there is no waiter, so this polls
//! `GetResolverEndpoint`; a deleted endpoint is `DELETING`, then `ResourceNotFoundException`.
//! `ListResolverEndpoints` filters by `Name`, which xcsp makes unique per stack and network, so a
//! create whose answer was lost (or an apply killed after it) leaves an endpoint found by name
//! and confirmed by its stack tag.

use std::collections::BTreeMap;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_route53resolver::types::{
    Filter, IpAddressRequest, ResolverEndpoint, ResolverEndpointDirection, ResolverEndpointStatus, Tag,
};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, Observed, Progress, ProviderError, Request};
use xcsp_core::{Address, Value};

use crate::ec2::{desired_tags, failed, filter, required, sdk_error, tags_value};
use crate::{AwsProvider, Listing, Result};

/// The subnet tag the installer's private subnets carry (internal load balancers go there).
const PRIVATE_SUBNET_TAG: &str = "kubernetes.io/role/internal-elb";

/// The subnets an endpoint's two addresses go in: among the cluster's subnets (`(id, zone,
/// tag keys)`), the private ones where the cluster has any, one per zone, in the first two zones by
/// name; `None` when they span fewer than two zones.
pub fn endpoint_subnets(subnets: &[(String, String, Vec<String>)]) -> Option<Vec<String>> {
    let private: Vec<&(String, String, Vec<String>)> =
        subnets.iter().filter(|(_, _, tags)| tags.iter().any(|t| t == PRIVATE_SUBNET_TAG)).collect();
    let pool: Vec<&(String, String, Vec<String>)> = if private.is_empty() { subnets.iter().collect() } else { private };
    let mut by_zone: BTreeMap<&str, &str> = BTreeMap::new();
    for (id, zone, _) in pool {
        let slot = by_zone.entry(zone.as_str()).or_insert(id.as_str());
        if id.as_str() < *slot {
            *slot = id.as_str();
        }
    }
    (by_zone.len() >= 2).then(|| by_zone.values().take(2).map(|s| s.to_string()).collect())
}

/// The address an endpoint's tags name, if it is `stack`'s ([`crate::ec2::owner_by`]).
fn ours(tags: &[Tag], stack: &str) -> Option<Address> {
    crate::ec2::owner_by(stack, |k| tags.iter().find(|t| t.key() == k).map(Tag::value))
}

impl AwsProvider {
    /// The cluster's subnets in `vpc`, as [`endpoint_subnets`] chooses among them.
    async fn cluster_subnets(&self, a: &Address, vpc: &str, cluster_tag: &str) -> Result<Vec<String>> {
        let r = crate::send!(
            a,
            self.ec2.describe_subnets().filters(filter("vpc-id", &[vpc])).filters(filter("tag-key", &[cluster_tag]))
        )?;
        let found: Vec<(String, String, Vec<String>)> = r
            .subnets()
            .iter()
            .map(|s| {
                (
                    s.subnet_id().unwrap_or_default().to_string(),
                    s.availability_zone().unwrap_or_default().to_string(),
                    s.tags().iter().filter_map(|t| t.key().map(String::from)).collect(),
                )
            })
            .collect();
        endpoint_subnets(&found).ok_or_else(|| {
            failed(
                a,
                "EndpointSubnetsNotFound",
                format!(
                    "a Route 53 Resolver endpoint needs addresses in two Availability Zones, and the subnets tagged {cluster_tag} in {vpc} are in {} zone(s)",
                    found.iter().map(|s| &s.1).collect::<std::collections::BTreeSet<_>>().len()
                ),
            )
        })
    }

    async fn endpoint(&self, a: &Address, id: &str) -> Result<Option<ResolverEndpoint>> {
        match self.resolver.get_resolver_endpoint().resolver_endpoint_id(id).send().await {
            Ok(r) => Ok(r.resolver_endpoint().cloned()),
            Err(x) => match sdk_error(a, x.into_service_error()) {
                ProviderError::NotFound { .. } => Ok(None),
                e => Err(e),
            },
        }
    }

    /// The id of this stack's endpoint named `name`, if one exists.
    async fn endpoint_named(&self, a: &Address, stack: &str, name: &str) -> Result<Option<String>> {
        let r = self
            .resolver
            .list_resolver_endpoints()
            .filters(Filter::builder().name("Name").values(name).build())
            .send()
            .await
            .map_err(|x| sdk_error(a, x.into_service_error()))?;
        for e in r.resolver_endpoints() {
            if ours(&self.endpoint_tags(a, e.arn().unwrap_or_default()).await?, stack).is_some() {
                return Ok(e.id().map(String::from));
            }
        }
        Ok(None)
    }

    async fn endpoint_tags(&self, a: &Address, arn: &str) -> Result<Vec<Tag>> {
        let r = self
            .resolver
            .list_tags_for_resource()
            .resource_arn(arn)
            .send()
            .await
            .map_err(|x| sdk_error(a, x.into_service_error()))?;
        Ok(r.tags().to_vec())
    }

    pub(crate) async fn resolver_endpoint(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let name = required(&r, "name")?;
        let tags: Vec<Tag> = desired_tags(req.stack, &r)
            .iter()
            .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
            .collect();
        let id = match req.id.map(String::from).or(self.endpoint_named(a, req.stack, &name).await?) {
            Some(id) => id,
            None => {
                let vpc = match r.opt_str("vpc_id") {
                    Some(v) => v,
                    None => self.cluster_vpc(a, &r.str_or_empty("cluster_tag")).await?,
                };
                let subnets = self.cluster_subnets(a, &vpc, &r.str_or_empty("cluster_tag")).await?;
                let mut create = self
                    .resolver
                    .create_resolver_endpoint()
                    // Unique per attempt; the SDK's own retries of this request reuse it.
                    .creator_request_id(format!("{name}-{}", rand::random::<u64>()))
                    .name(&name)
                    .direction(ResolverEndpointDirection::Inbound)
                    .set_security_group_ids(Some(r.strings("security_group_ids")))
                    .set_tags(Some(tags.clone()));
                for s in &subnets {
                    let ip = IpAddressRequest::builder()
                        .subnet_id(s)
                        .build()
                        .map_err(|e| failed(a, "InvalidRequest", e.to_string()))?;
                    create = create.ip_addresses(ip);
                }
                match create.send().await {
                    Ok(made) => made.resolver_endpoint().and_then(|e| e.id()).unwrap_or_default().to_string(),
                    Err(x) => {
                        let x = x.into_service_error();
                        // A retry whose first answer was lost: the endpoint is there, by its name.
                        match (x.code(), self.endpoint_named(a, req.stack, &name).await?) {
                            (Some("ResourceExistsException"), Some(id)) => id,
                            _ => return Err(sdk_error(a, x)),
                        }
                    }
                }
            }
        };
        self.wait(a, "waiting for Route 53 Resolver to make the endpoint's network interfaces", progress, || async {
            Ok(self.endpoint(a, &id).await?.is_some_and(|e| e.status() == Some(&ResolverEndpointStatus::Operational)))
        })
        .await?;
        let Some(endpoint) = self.endpoint(a, &id).await? else {
            return Err(ProviderError::NotFound { address: a.to_string() });
        };
        // Tags: those the plan wants and the endpoint lacks, then those it should not have.
        let arn = endpoint.arn().unwrap_or_default().to_string();
        let have = self.endpoint_tags(a, &arn).await?;
        let add: Vec<Tag> = tags.iter().filter(|t| !have.contains(t)).cloned().collect();
        let drop: Vec<String> =
            have.iter().filter(|h| !tags.iter().any(|t| t.key() == h.key())).map(|h| h.key().to_string()).collect();
        if !add.is_empty() {
            let sent = self.resolver.tag_resource().resource_arn(&arn).set_tags(Some(add)).send().await;
            sent.map_err(|x| sdk_error(a, x.into_service_error()))?;
        }
        if !drop.is_empty() {
            let sent = self.resolver.untag_resource().resource_arn(&arn).set_tag_keys(Some(drop)).send().await;
            sent.map_err(|x| sdk_error(a, x.into_service_error()))?;
        }
        let attributes = self.endpoint_attributes(a, &endpoint, &tags).await?;
        Ok(Observed { address: a.clone(), id, attributes })
    }

    /// An endpoint as the plan writes it, with its addresses (one call) and `tags`.
    async fn endpoint_attributes(&self, a: &Address, e: &ResolverEndpoint, tags: &[Tag]) -> Result<Attributes> {
        let id = e.id().unwrap_or_default();
        let ips = self
            .resolver
            .list_resolver_endpoint_ip_addresses()
            .resolver_endpoint_id(id)
            .send()
            .await
            .map_err(|x| sdk_error(a, x.into_service_error()))?;
        let mut pairs: Vec<(String, String)> = ips
            .ip_addresses()
            .iter()
            .map(|ip| (ip.subnet_id().unwrap_or_default().to_string(), ip.ip().unwrap_or_default().to_string()))
            .collect();
        pairs.sort();
        let mut out = Attributes::new();
        out.insert("name".into(), Value::string(e.name().unwrap_or_default()));
        out.insert("direction".into(), Value::string(e.direction().map(|d| d.as_str()).unwrap_or_default()));
        out.insert("security_group_ids".into(), Value::strings(e.security_group_ids()));
        out.insert("subnet_ids".into(), Value::strings(pairs.iter().map(|p| &p.0)));
        out.insert("vpc_id".into(), Value::string(e.host_vpc_id().unwrap_or_default()));
        out.insert("status".into(), Value::string(e.status().map(|s| s.as_str()).unwrap_or_default()));
        out.insert("ip_addresses".into(), Value::strings(pairs.iter().map(|p| &p.1)));
        let tags: BTreeMap<String, String> =
            tags.iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
        out.insert("tags".into(), tags_value(&tags));
        out.insert("id".into(), Value::string(id));
        Ok(out)
    }

    /// Deletes the endpoint and waits until Route 53 Resolver no longer has it (its network
    /// interfaces are gone then, and the security group can go).
    pub(crate) async fn delete_resolver_endpoint(
        &self,
        req: &Request<'_>,
        id: &str,
        progress: &dyn Progress,
    ) -> Result<()> {
        let a = req.address;
        if let Err(x) = self.resolver.delete_resolver_endpoint().resolver_endpoint_id(id).send().await {
            return Err(sdk_error(a, x.into_service_error()));
        }
        self.wait(a, "waiting for Route 53 Resolver to delete the endpoint", progress, || async {
            Ok(self.endpoint(a, id).await?.is_none())
        })
        .await
    }

    /// Every endpoint state records (by id), and every other one of this stack (by its name's
    /// prefix, then its tags).
    pub(crate) async fn list_resolver_endpoints(&self, l: &Listing<'_>) -> Result<Vec<Observed>> {
        let prefix = format!("xcsp-{}-", l.stack);
        let mut pages = self.resolver.list_resolver_endpoints().into_paginator().send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|x| sdk_error(&l.probe, x.into_service_error()))?;
            for e in page.resolver_endpoints() {
                let id = e.id().unwrap_or_default().to_string();
                let recorded = l.known_ids.iter().find(|(_, k)| *k == id).map(|(a, _)| (*a).clone());
                if recorded.is_none() && !e.name().unwrap_or_default().starts_with(&prefix) {
                    continue;
                }
                let tags = self.endpoint_tags(&l.probe, e.arn().unwrap_or_default()).await?;
                let Some(address) = ours(&tags, l.stack).filter(|x| x.rtype == l.rtype).or(recorded) else {
                    continue;
                };
                let attributes = self.endpoint_attributes(&address, e, &tags).await?;
                out.push(Observed { address, id, attributes });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, zone: &str, private: bool) -> (String, String, Vec<String>) {
        let role = if private { PRIVATE_SUBNET_TAG } else { "kubernetes.io/role/elb" };
        (id.into(), zone.into(), vec!["kubernetes.io/cluster/infra".into(), role.into()])
    }

    #[test]
    fn two_private_subnets_in_two_zones() {
        let found = [
            subnet("subnet-pub-a", "us-gov-west-1a", false),
            subnet("subnet-priv-b", "us-gov-west-1b", true),
            subnet("subnet-priv-a", "us-gov-west-1a", true),
            subnet("subnet-priv-c", "us-gov-west-1c", true),
        ];
        assert_eq!(endpoint_subnets(&found), Some(vec!["subnet-priv-a".to_string(), "subnet-priv-b".to_string()]));
    }

    #[test]
    fn one_zone_is_not_enough() {
        let found = [subnet("subnet-1", "us-gov-west-1a", true), subnet("subnet-2", "us-gov-west-1a", true)];
        assert_eq!(endpoint_subnets(&found), None);
    }

    #[test]
    fn without_private_subnets_any_cluster_subnet_serves() {
        let found = [subnet("subnet-1", "z1", false), subnet("subnet-2", "z2", false)];
        assert_eq!(endpoint_subnets(&found).map(|s| s.len()), Some(2));
    }
}
