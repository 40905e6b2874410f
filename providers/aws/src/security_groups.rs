//! `aws_security_group_ingress`: a link's rules in every cluster security group (found by the
//! cluster tag), each marked as the resource's in its description ([`crate::ingress`] builds and
//! reads them); and `aws_security_group`, a group of xcsp's own with its rules marked the same
//! way. Their creates or updates, deletes and lists.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{IpPermission, ResourceType as AwsType, SecurityGroup};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, Observed, Progress, ProviderError, Request};
use xcsp_core::{Address, Value};

use crate::ec2::{desired_tags, failed, filter, required, sdk_error, tag_map, tag_spec, tags_value};
use crate::{AwsProvider, Listing, Result, ingress, send, tagged_or_recorded};

/// A group of xcsp's own as the plan writes it: name, description, VPC, its marked rules
/// (member by member, [`ingress::observe`]), tags and id.
fn group_attributes(stack: &str, a: &Address, g: &SecurityGroup) -> Attributes {
    let mut out = Attributes::new();
    out.insert("name".into(), Value::string(g.group_name().unwrap_or_default()));
    out.insert("description".into(), Value::string(g.description().unwrap_or_default()));
    out.insert("vpc_id".into(), Value::string(g.vpc_id().unwrap_or_default()));
    let rules = ingress::observe(stack, std::slice::from_ref(g))
        .into_iter()
        .find(|(found, _)| found == a)
        .and_then(|(_, mut attrs)| attrs.shift_remove("rules"))
        .unwrap_or(Value::List(vec![]));
    out.insert("rules".into(), rules);
    out.insert("tags".into(), tags_value(&tag_map(g.tags())));
    out.insert("id".into(), Value::string(g.group_id().unwrap_or_default()));
    out
}

impl AwsProvider {
    async fn cluster_groups(&self, r: &Reader<'_>) -> Result<Vec<String>> {
        let a = r.address;
        let given = r.strings("security_group_ids");
        if !given.is_empty() {
            return Ok(given);
        }
        // Every group of the cluster: by the cloud provider's tag or by CAPA's ([`ingress::CLUSTER_TAG_PREFIXES`]).
        let tag = r.str_or_empty("cluster_tag");
        let keys = ingress::cluster_tag_keys(&tag);
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let found = send!(a, self.ec2.describe_security_groups().filters(filter("tag-key", &keys)))?;
        let ids: Vec<String> = found.security_groups().iter().filter_map(|g| g.group_id().map(String::from)).collect();
        if ids.is_empty() {
            return Err(failed(
                a,
                "ClusterSecurityGroupsNotFound",
                format!("no security group carries the tag {}", keys.join(" or ")),
            ));
        }
        Ok(ids)
    }

    pub(crate) async fn ingress(&self, req: &Request<'_>, _progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let groups = self.cluster_groups(&Reader::new(a, req.attributes)).await?;
        let now = self.converge_rules(req, &groups).await?;
        let mut out = ingress::observe(req.stack, &now)
            .into_iter()
            .find(|(found, _)| found == a)
            .map(|(_, attrs)| attrs)
            .unwrap_or_default();
        out.insert("security_group_ids".into(), Value::strings(groups.iter()));
        Ok(Observed { address: a.clone(), id: groups.join(","), attributes: out })
    }

    /// Makes the rules marked as `req`'s in `groups` the planned ones, and answers the groups as
    /// they are then.
    async fn converge_rules(&self, req: &Request<'_>, groups: &[String]) -> Result<Vec<SecurityGroup>> {
        let a = req.address;
        let wanted = ingress::permissions(req.stack, a, req.attributes);
        let same = |x: &IpPermission, y: &IpPermission| {
            let cidr = |p: &IpPermission| p.ip_ranges().first().and_then(|r| r.cidr_ip()).map(String::from);
            (x.ip_protocol(), x.from_port(), x.to_port(), cidr(x))
                == (y.ip_protocol(), y.from_port(), y.to_port(), cidr(y))
        };
        // Read first, member by member, so that only the missing rules are sent (a run cut short
        // after some of them is completed, not repeated) and only ours the spec dropped are revoked.
        let have = self.marked_rules(a, groups, req.stack).await?;
        for g in groups {
            for p in wanted.iter().filter(|p| !have.iter().any(|(hg, h)| hg == g && same(p, h))) {
                match self.ec2.authorize_security_group_ingress().group_id(g).ip_permissions(p.clone()).send().await {
                    Ok(_) => {}
                    Err(x) => {
                        let x = x.into_service_error();
                        // Already there (added since the read, or a retried call whose answer was lost): fine.
                        if x.code() != Some("InvalidPermission.Duplicate") {
                            return Err(sdk_error(a, x));
                        }
                    }
                }
            }
        }
        for (g, h) in have {
            if !wanted.iter().any(|w| same(w, &h)) {
                self.revoke(a, &g, h).await?;
            }
        }
        // What is there now, read back member by member as refresh reads it.
        self.groups(a, groups).await
    }

    /// `aws_security_group`: a group of xcsp's own in the cluster's VPC (found by the cluster tag
    /// unless the plan names it), with exactly the planned rules. A group is made with its tags
    /// (`TagSpecifications`), so a create whose answer was lost leaves a group this finds by its
    /// address tag; EC2 refuses a second group of the same name in a VPC (`InvalidGroup.Duplicate`,
    /// CreateSecurityGroup, EC2 API reference).
    pub(crate) async fn security_group(&self, req: &Request<'_>, _progress: &dyn Progress) -> Result<Observed> {
        let a = req.address;
        let r = Reader::new(a, req.attributes);
        let id = match req.id.map(String::from).or(self.existing_id(req.stack, a).await?) {
            Some(id) => id,
            None => {
                let vpc = match r.opt_str("vpc_id") {
                    Some(v) => v,
                    None => self.cluster_vpc(a, &r.str_or_empty("cluster_tag")).await?,
                };
                let made = self
                    .ec2
                    .create_security_group()
                    .group_name(required(&r, "name")?)
                    .description(required(&r, "description")?)
                    .vpc_id(&vpc)
                    .tag_specifications(tag_spec(AwsType::SecurityGroup, &desired_tags(req.stack, &r)))
                    .send()
                    .await;
                match made {
                    Ok(m) => m.group_id().unwrap_or_default().to_string(),
                    Err(x) => {
                        let x = x.into_service_error();
                        // A retried create whose first answer was lost: the group is there, tagged.
                        match (x.code(), self.existing_id(req.stack, a).await?) {
                            (Some("InvalidGroup.Duplicate"), Some(id)) => id,
                            _ => return Err(sdk_error(a, x)),
                        }
                    }
                }
            }
        };
        let now = self.converge_rules(req, std::slice::from_ref(&id)).await?;
        let Some(group) = now.first() else {
            return Err(ProviderError::NotFound { address: a.to_string() });
        };
        // The group as the rules left it, with the tags the retag leaves on it (no second read).
        let tags = self.retag(a, &id, &tag_map(group.tags()), &desired_tags(req.stack, &r)).await?;
        let mut attributes = group_attributes(req.stack, a, group);
        attributes.insert("tags".into(), tags_value(&tags));
        Ok(Observed { address: a.clone(), id, attributes })
    }

    /// Deletes a group of xcsp's own; EC2 refuses while a network interface uses it
    /// (`DependencyViolation`: the engine waits and tries again).
    pub(crate) async fn delete_security_group(
        &self,
        req: &Request<'_>,
        id: &str,
        _progress: &dyn Progress,
    ) -> Result<()> {
        let a = req.address;
        match self.ec2.delete_security_group().group_id(id).send().await {
            Ok(_) => Ok(()),
            Err(x) => Err(sdk_error(a, x.into_service_error())),
        }
    }

    pub(crate) async fn list_security_groups(&self, l: &Listing<'_>) -> Result<Vec<Observed>> {
        let groups = tagged_or_recorded!(self, l, describe_security_groups, security_groups, group_id, "group-id");
        let mut out = Vec::new();
        for g in &groups {
            let id = g.group_id().unwrap_or_default().to_string();
            let Some(address) = l.address(g.tags(), &id).filter(|x| x.rtype == l.rtype) else { continue };
            let attributes = group_attributes(l.stack, &address, g);
            out.push(Observed { address, id, attributes });
        }
        Ok(out)
    }

    /// The security groups with these ids.
    async fn groups(&self, a: &Address, ids: &[String]) -> Result<Vec<SecurityGroup>> {
        let r = send!(a, self.ec2.describe_security_groups().set_group_ids(Some(ids.to_vec())))?;
        Ok(r.security_groups().to_vec())
    }

    /// The rules in `groups` that carry the marker of `a`, one IP range each, by group.
    async fn marked_rules(&self, a: &Address, groups: &[String], stack: &str) -> Result<Vec<(String, IpPermission)>> {
        let marker = ingress::marker(stack, a);
        let mut out = Vec::new();
        for g in self.groups(a, groups).await? {
            for p in g.ip_permissions() {
                for range in p.ip_ranges().iter().filter(|r| r.description().is_some_and(|d| d.contains(&marker))) {
                    let rule = IpPermission::builder()
                        .set_ip_protocol(p.ip_protocol().map(String::from))
                        .set_from_port(p.from_port())
                        .set_to_port(p.to_port())
                        .ip_ranges(range.clone())
                        .build();
                    out.push((g.group_id().unwrap_or_default().to_string(), rule));
                }
            }
        }
        Ok(out)
    }

    /// Revokes one rule; one already gone is fine.
    async fn revoke(&self, a: &Address, group: &str, rule: IpPermission) -> Result<()> {
        match self.ec2.revoke_security_group_ingress().group_id(group).ip_permissions(rule).send().await {
            Ok(_) => Ok(()),
            Err(x) => {
                let x = x.into_service_error();
                if matches!(x.code(), Some("InvalidPermission.NotFound" | "InvalidGroup.NotFound")) {
                    Ok(())
                } else {
                    Err(sdk_error(a, x))
                }
            }
        }
    }

    /// Revokes every rule marked as this resource's, whatever state recorded of them.
    pub(crate) async fn revoke_ingress(&self, req: &Request<'_>, id: &str, _progress: &dyn Progress) -> Result<()> {
        let groups: Vec<String> = id.split(',').filter(|g| !g.is_empty()).map(String::from).collect();
        if groups.is_empty() {
            return Ok(());
        }
        for (g, rule) in self.marked_rules(req.address, &groups, req.stack).await? {
            self.revoke(req.address, &g, rule).await?;
        }
        Ok(())
    }

    pub(crate) async fn list_ingress(&self, l: &Listing<'_>) -> Result<Vec<Observed>> {
        let mut pages = self.ec2.describe_security_groups().into_paginator().send();
        let mut groups: Vec<SecurityGroup> = Vec::new();
        while let Some(page) = pages.next().await {
            groups.extend(page.map_err(|x| sdk_error(&l.probe, x.into_service_error()))?.security_groups().to_vec());
        }
        let mut out = Vec::new();
        // Only the rules of `aws_security_group_ingress` resources: a group of xcsp's own marks its rules too.
        for (addr, observed_attrs) in ingress::observe(l.stack, &groups).into_iter().filter(|(x, _)| x.rtype == l.rtype)
        {
            let id = Reader::new(&addr, &observed_attrs).strings("security_group_ids").join(",");
            out.push(Observed { address: addr, id, attributes: observed_attrs });
        }
        Ok(out)
    }
}
