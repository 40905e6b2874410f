//! The resource group the pool's resources live in. Each type's handler: its write, delete and
//! list.

use serde_json::Value as Json;
use xcsp_core::provider::{Observed, ProviderError};
use xcsp_core::{Address, ProviderKind, tags};

use super::{Listing, Put, Remove, to_json};
use crate::{Quiet, arm};

/// `azure_resource_group`.
pub(super) mod resource_group {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, .. } = *w;
        let stack = req.stack;
        let name = d.str("name")?;
        let c = p.resources.resource_groups_client();
        w.send(
            "resource group",
            arm::read_resource_group,
            arm::resource_group_body(&d, stack)?,
            |m: azure_mgmt_resources::models::ResourceGroup| raw!(c.create_or_update(&name, m, sub).send()),
            || as_json!(c.get(&name, sub)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, .. } = *r;
        let name = r.name();
        let c = p.resources.resource_groups_client();
        r.delete("resource group", || raw!(c.delete(&name, sub).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
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
    }
}
