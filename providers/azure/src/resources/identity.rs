//! Workload identity: the user-assigned identities, their federated credentials, and the role
//! definitions and assignments. Each type's handler: its write, delete and list.

use serde_json::{Value as Json, json};
use xcsp_core::Value;
use xcsp_core::provider::{Attributes, Observed, ProviderError};

use super::{Listing, Put, Remove, model, to_json};
use crate::{arm, identify};

/// `azure_user_assigned_identity`.
pub(super) mod user_assigned_identity {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let stack = req.stack;
        let name = d.str("name")?;
        let c = p.msi.user_assigned_identities_client();
        w.send(
            "managed identity",
            arm::read_identity,
            arm::identity_body(&d, stack)?,
            |m: azure_mgmt_msi::models::Identity| raw!(c.create_or_update(sub, rg, &name, m).send()),
            || as_json!(c.get(sub, rg, &name)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, rg, .. } = *r;
        let (name, c) = (r.name(), p.msi.user_assigned_identities_client());
        r.delete("managed identity", || raw!(c.delete(sub, rg, &name).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        let c = p.msi.user_assigned_identities_client();
        Ok(l.tagged(p.list_all(rtype, || all_pages!(c.list_by_resource_group(sub, rg))).await?, arm::read_identity))
    }
}

/// `azure_federated_credential`.
pub(super) mod federated_credential {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, d, sub, rg, .. } = *w;
        let address = req.address;
        let identity = d.str("identity")?;
        let name = identify::federated_credential_name(address);
        let c = p.msi.federated_identity_credentials_client();
        w.send(
            "federated identity credential",
            arm::read_federated,
            arm::federated_body(&d)?,
            |m: azure_mgmt_msi::models::FederatedIdentityCredential| {
                raw!(c.create_or_update(sub, rg, &identity, &name, m).send())
            },
            || as_json!(c.get(sub, rg, &identity, &name)),
        )
        .await
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, req, d, sub, rg, .. } = *r;
        let address = req.address;
        let name = r.segment(0).map(str::to_string).unwrap_or_else(|| identify::federated_credential_name(address));
        let identity = r.segment(2).map(str::to_string).or_else(|| d.opt_str("identity")).unwrap_or_default();
        let c = p.msi.federated_identity_credentials_client();
        r.delete("federated identity credential", || raw!(c.delete(sub, rg, &identity, &name).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, rtype, sub, rg, .. } = *l;
        // One list per identity of the stack.
        let identities = p.msi.user_assigned_identities_client();
        let items = p.list_all(rtype, || all_pages!(identities.list_by_resource_group(sub, rg))).await?;
        let c = p.msi.federated_identity_credentials_client();
        let mut out = Vec::new();
        for identity in items.iter().filter(|j| l.ours(j)) {
            let identity = identity["name"].as_str().unwrap_or_default();
            for f in p.list_all(rtype, || all_pages!(c.list(sub, rg, identity))).await? {
                let Some(address) = identify::federated_credential_address(f["name"].as_str().unwrap_or_default())
                else {
                    continue;
                };
                let id = f["id"].as_str().unwrap_or_default().to_string();
                out.push(Observed { address, id, attributes: arm::read_federated(&f) });
            }
        }
        Ok(out)
    }
}

/// `azure_role_definition`.
pub(super) mod role_definition {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, progress, d, .. } = *w;
        let (address, stack) = (req.address, req.stack);
        let read: fn(&Json) -> Attributes = arm::read_role_definition;
        let scope = d.str("scope")?;
        let guid = identify::role_assignment_name(stack, address);
        let body = json!({ "properties": {
            "roleName": d.str("name")?,
            "description": identify::role_description(stack, address),
            "type": "CustomRole",
            "permissions": [{ "actions": d.strings("actions"), "notActions": [], "dataActions": [], "notDataActions": [] }],
            "assignableScopes": [scope],
        }});
        let m: azure_mgmt_authorization::models::RoleDefinition = model(address, body)?;
        let c = p.authz.role_definitions_client();
        let body = p
            .write(
                address,
                progress,
                "Azure is defining the role",
                || raw!(c.create_or_update(&scope, &guid, m.clone()).send()),
                || as_json!(c.get(&scope, &guid)),
            )
            .await?;
        Ok(w.observed(&body, read))
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, sub, .. } = *r;
        let (scope, guid) = r.authorization("roleDefinitions", || format!("/subscriptions/{sub}"));
        let c = p.authz.role_definitions_client();
        r.delete("role definition", || raw!(c.delete(&scope, &guid).send())).await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, stack, rtype, sub, .. } = *l;
        let scope = format!("/subscriptions/{sub}");
        let c = p.authz.role_definitions_client();
        let items = p.list_all(rtype, || all_pages!(c.list(&scope).filter("type eq 'CustomRole'"))).await?;
        let mut out = Vec::new();
        for j in &items {
            let name = j["name"].as_str().unwrap_or_default();
            let description = j["properties"]["description"].as_str().unwrap_or_default();
            let Some(address) = identify::role_owner(stack, rtype, name, description) else { continue };
            let id = j["id"].as_str().unwrap_or_default().to_string();
            out.push(Observed { address, id, attributes: arm::read_role_definition(j) });
        }
        Ok(out)
    }
}

/// `azure_role_assignment`.
pub(super) mod role_assignment {
    use super::*;

    pub async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
        let Put { p, req, progress, d, .. } = *w;
        let (address, stack) = (req.address, req.stack);
        let read: fn(&Json) -> Attributes = arm::read_role_assignment;
        let (scope, principal, role) = (d.str("scope")?, d.str("principal")?, d.str("role")?);
        let definition = p.role_definition(address, &scope, &role, progress).await?;
        let name = identify::role_assignment_name(stack, address);
        let body = json!({ "properties": {
            "roleDefinitionId": definition,
            "principalId": principal,
            // Set, so that Azure need not look the principal up (Microsoft's advice for new
            // principals); PrincipalNotFound can still come, and is retried.
            "principalType": d.opt_str("principal_type").unwrap_or_else(|| "ServicePrincipal".into()),
            "description": identify::role_description(stack, address),
        }});
        let m: azure_mgmt_authorization::models::RoleAssignmentCreateParameters = model(address, body)?;
        let c = p.authz.role_assignments_client();
        progress.waiting(address, "Azure is assigning the role");
        let body = p
            .write(
                address,
                progress,
                "Azure is assigning the role",
                || raw!(c.create(&scope, &name, m.clone()).send()),
                || as_json!(c.get(&scope, &name)),
            )
            .await?;
        let mut o = w.observed(&body, read);
        o.attributes.insert("role".into(), Value::string(d.str("role")?));
        Ok(o)
    }

    pub async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
        let Remove { p, req, progress, sub, .. } = *r;
        let (scope, name) = r.authorization("roleAssignments", || {
            format!("/subscriptions/{sub}/resourceGroups/{}", p.config.resource_group)
        });
        let c = p.authz.role_assignments_client();
        p.delete_with(req.address, progress, "Azure is removing the role assignment", || {
            raw!(c.delete(&scope, &name).send())
        })
        .await
    }

    pub async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
        let Listing { p, stack, rtype, sub, rg, .. } = *l;
        // At the resource group, and at the subscription (the SKU list's role).
        let c = p.authz.role_assignments_client();
        let mut items = Vec::new();
        for scope in [format!("/subscriptions/{sub}/resourceGroups/{rg}"), format!("/subscriptions/{sub}")] {
            items.extend(p.list_all(rtype, || all_pages!(c.list_for_scope(&scope).filter("atScope()"))).await?);
        }
        let mut out = Vec::new();
        for j in &items {
            let name = j["name"].as_str().unwrap_or_default();
            let description = j["properties"]["description"].as_str().unwrap_or_default();
            let Some(address) = identify::role_owner(stack, rtype, name, description) else { continue };
            let mut attributes = arm::read_role_assignment(j);
            let definition = j["properties"]["roleDefinitionId"].as_str().unwrap_or_default();
            if let Some(role) = p.role_name(definition).await {
                attributes.insert("role".into(), Value::string(role));
            }
            let id = j["id"].as_str().unwrap_or_default().to_string();
            out.push(Observed { address, id, attributes });
        }
        Ok(out)
    }
}
