//! The resource group the pool's resources live in. Each type's handler: its write, delete and
//! list.

use serde_json::Value as Json;
use xcsp_core::provider::{Attributes, BoxFuture, Observed, ProviderError};
use xcsp_core::{Address, ProviderKind, tags};

use super::{Kind, Listing, Put, Remove, model, to_json};
use crate::{Quiet, arm};

/// `azure_resource_group`.
pub(crate) struct ResourceGroupKind;

impl Kind for ResourceGroupKind {
    fn put<'a>(&self, w: &'a Put<'a>) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let Put { p, req, progress, d, sub, .. } = *w;
            let (address, stack) = (req.address, req.stack);
            let read: fn(&Json) -> Attributes = arm::read_resource_group;
            let name = d.str("name")?;
            let m: azure_mgmt_resources::models::ResourceGroup = model(address, arm::resource_group_body(&d, stack)?)?;
            let c = p.resources.resource_groups_client();
            let body = p
                .write(
                    address,
                    progress,
                    &w.doing("resource group"),
                    || raw!(c.create_or_update(&name, m.clone(), sub).send()),
                    || as_json!(c.get(&name, sub)),
                )
                .await?;
            Ok(w.observed(&body, read))
        })
    }

    fn remove<'a>(&self, r: &'a Remove<'a>) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let Remove { p, req, progress, sub, .. } = *r;
            let address = req.address;
            let name = r.name();
            let c = p.resources.resource_groups_client();
            p.delete_with(address, progress, &r.deleting("resource group"), || raw!(c.delete(&name, sub).send())).await
        })
    }

    fn list<'a>(&self, l: &'a Listing<'a>) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let Listing { p, stack, rtype, known, sub, .. } = *l;
            // ARM filters resource groups by one tag at a time: one list per key that may
            // carry the stack, merged by id.
            let c = p.resources.resource_groups_client();
            let mut groups: Vec<Json> = Vec::new();
            for keys in tags::read_keys(ProviderKind::Azure) {
                let filter = format!("tagName eq '{}' and tagValue eq '{}'", keys.stack, stack.replace('\'', "''"));
                for g in p.list_all(rtype, || all_pages!(c.list(sub).filter(&filter))).await? {
                    if !groups.iter().any(|seen| seen["id"] == g["id"]) {
                        groups.push(g);
                    }
                }
            }
            // A group state records that the tag filter missed (its tags were changed): by name.
            for id in known.iter().filter(|k| k.address.rtype == rtype).map(|k| &k.id) {
                let listed = groups.iter().any(|g| g["id"].as_str().is_some_and(|g| g.eq_ignore_ascii_case(id)));
                let name = arm::leaf(id);
                if listed || name.is_empty() {
                    continue;
                }
                match p.retry(&Address::new(rtype, "refresh"), &Quiet, || as_json!(c.get(name, sub))).await {
                    Ok(g) => groups.push(g),
                    Err(e) if arm::gone(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(l.tagged(groups, arm::read_resource_group))
        })
    }
}
