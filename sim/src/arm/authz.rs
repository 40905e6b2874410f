//! Microsoft.Authorization: role assignments (with the principal replication lag) and the
//! built-in role definitions xcsp looks up.

use super::error::ArmError;
use super::kinds;
use super::path::Target;
use super::store::{ResKind, Resource, Store};
use super::{Ctx, Reply, check_api_version, parse_filter};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

/// Built-in roles: (name, GUID, description, actions).
pub const BUILT_IN_ROLES: &[(&str, &str, &str, &[&str])] = &[
    (
        "Owner",
        "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
        "Grants full access to manage all resources, including the ability to assign roles in Azure RBAC.",
        &["*"],
    ),
    (
        "Contributor",
        "b24988ac-6180-42a0-ab88-20f7382dd24c",
        "Grants full access to manage all resources, but does not allow you to assign roles in Azure RBAC.",
        &["*"],
    ),
    (
        "Reader",
        "acdd72a7-3385-48ef-bd42-f606fba81ae7",
        "View all resources, but does not allow you to make any changes.",
        &["*/read"],
    ),
    (
        "User Access Administrator",
        "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
        "Lets you manage user access to Azure resources.",
        &["*/read", "Microsoft.Authorization/*"],
    ),
    (
        "Network Contributor",
        "4d97b98b-1d4f-4787-a291-c67834d212e7",
        "Lets you manage networks, but not access to them.",
        &["Microsoft.Network/*", "Microsoft.Resources/subscriptions/resourceGroups/read"],
    ),
    (
        "Managed Identity Operator",
        "f1a07417-d97a-45cb-824c-7a7467783830",
        "Read and Assign User Assigned Identity",
        &[
            "Microsoft.ManagedIdentity/userAssignedIdentities/*/read",
            "Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action",
        ],
    ),
];

fn role_definition(scope: &str, role: &(&str, &str, &str, &[&str])) -> Value {
    let (name, guid, description, actions) = role;
    let not_actions: Vec<&str> = match *name {
        "Contributor" => vec![
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
        ],
        _ => vec![],
    };
    json!({
        "id": format!("{}/providers/Microsoft.Authorization/roleDefinitions/{guid}", scope.trim_end_matches('/')),
        "name": guid,
        "type": "Microsoft.Authorization/roleDefinitions",
        "properties": {
            "roleName": name,
            "type": "BuiltInRole",
            "description": description,
            "assignableScopes": ["/"],
            "permissions": [{"actions": actions, "notActions": not_actions, "dataActions": [], "notDataActions": []}],
            "createdOn": "2015-02-02T21:55:09.8806423Z",
            "updatedOn": "2021-11-11T20:13:47.8628684Z",
            "createdBy": null,
            "updatedBy": null,
        }
    })
}

type Role = (&'static str, &'static str, &'static str, &'static [&'static str]);

fn find_role(id_or_guid: &str) -> Option<&'static Role> {
    let guid = id_or_guid.rsplit('/').next().unwrap_or_default();
    BUILT_IN_ROLES.iter().find(|r| r.1.eq_ignore_ascii_case(guid))
}

/// A built-in role, a custom role made through the API, or one registered in the configuration:
/// (guid, definition body).
fn lookup_role(store: &Store, ctx: &Ctx, scope: &str, id_or_guid: &str) -> Option<(String, Value)> {
    let guid = id_or_guid.rsplit('/').next().unwrap_or_default();
    if let Some(r) = find_role(guid) {
        return Some((r.1.to_string(), role_definition(scope, r)));
    }
    if let Some(r) = custom_definition(store, guid) {
        return Some((r.name.clone(), r.body.clone()));
    }
    let (g, name) = ctx.config.custom_roles.iter().find(|(g, _)| g.eq_ignore_ascii_case(guid))?;
    let mut body = role_definition(scope, &("", "", "", &[]));
    body["id"] =
        json!(format!("{}/providers/Microsoft.Authorization/roleDefinitions/{g}", scope.trim_end_matches('/')));
    body["name"] = json!(g);
    body["properties"]["roleName"] = json!(name);
    body["properties"]["type"] = json!("CustomRole");
    body["properties"]["description"] = json!("Custom role registered with xcsp-sim.");
    Some((g.clone(), body))
}

/// Entry point.
pub fn handle(store: &mut Store, ctx: &Ctx, target: &Target) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::AUTHORIZATION_API, "roleAssignments")?;
    let m = ctx.method;
    match target {
        Target::RoleDefinition { scope, id } if m == Method::PUT => put_definition(store, ctx, scope, id),
        Target::RoleDefinition { id, .. } if m == Method::DELETE => delete_definition(store, id),
        Target::RoleDefinition { scope, id } if m == Method::GET => match lookup_role(store, ctx, scope, id) {
            Some((_, body)) => Ok(Reply::json(StatusCode::OK, body)),
            None => Err(ArmError::new(
                StatusCode::NOT_FOUND,
                "RoleDefinitionDoesNotExist",
                format!("The specified role definition with ID '{id}' does not exist."),
            )),
        },
        Target::RoleDefinitions { scope } if m == Method::GET => {
            let filter = parse_filter(ctx.query.get("$filter").map(String::as_str).unwrap_or_default())?;
            let name = filter.iter().find(|(k, _)| k == "rolename").map(|(_, v)| v.clone());
            let kind = filter.iter().find(|(k, _)| k == "type").map(|(_, v)| v.clone());
            let built_in = BUILT_IN_ROLES.iter().map(|r| role_definition(scope, r));
            let custom = store
                .resources
                .values()
                .filter(|r| matches!(r.kind, ResKind::RoleDefinition))
                .filter(|r| assignable_at(&r.body, scope))
                .map(|r| r.body.clone());
            let value: Vec<Value> = built_in
                .chain(custom)
                .filter(|d| {
                    name.as_ref()
                        .is_none_or(|n| d["properties"]["roleName"].as_str().is_some_and(|r| r.eq_ignore_ascii_case(n)))
                })
                .filter(|d| {
                    kind.as_ref()
                        .is_none_or(|k| d["properties"]["type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case(k)))
                })
                .collect();
            Ok(Reply::json(StatusCode::OK, json!({ "value": value })))
        }
        Target::RoleAssignment { scope, name } => match *m {
            Method::GET => get(store, scope, name),
            Method::PUT => put(store, ctx, scope, name),
            Method::DELETE => delete(store, scope, name),
            _ => Err(ArmError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "Method not allowed.")),
        },
        Target::RoleAssignments { scope } if m == Method::GET => list(store, ctx, scope),
        _ => Err(ArmError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "Method not allowed.")),
    }
}

fn assignment_id(scope: &str, name: &str) -> String {
    format!("{}/providers/Microsoft.Authorization/roleAssignments/{name}", scope.trim_end_matches('/'))
}

fn not_found(name: &str) -> ArmError {
    ArmError::new(
        StatusCode::NOT_FOUND,
        "RoleAssignmentNotFound",
        format!("The role assignment '{name}' is not found."),
    )
}

fn get(store: &Store, scope: &str, name: &str) -> Result<Reply, ArmError> {
    match store.get(&assignment_id(scope, name)) {
        Some(r) => Ok(Reply::json(StatusCode::OK, r.body.clone())),
        None => Err(not_found(name)),
    }
}

/// Checks that a scope exists: `/subscriptions/{s}`, a resource group, or a resource in one.
fn check_scope(store: &Store, scope: &str) -> Result<(), ArmError> {
    let segs: Vec<&str> = scope.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [s, _] if s.eq_ignore_ascii_case("subscriptions") => Ok(()),
        [s, sub, r, rg, rest @ ..]
            if s.eq_ignore_ascii_case("subscriptions") && r.eq_ignore_ascii_case("resourceGroups") =>
        {
            if store.get(&format!("/subscriptions/{sub}/resourcegroups/{rg}")).is_none() {
                return Err(ArmError::rg_not_found(rg));
            }
            if !rest.is_empty() && store.get(scope).is_none() {
                return Err(ArmError::new(
                    StatusCode::NOT_FOUND,
                    "ResourceNotFound",
                    format!("The scope '{scope}' does not exist."),
                ));
            }
            Ok(())
        }
        _ => Err(ArmError::bad_request(
            "InvalidScope",
            format!(
                "The scope '{scope}' is not valid (xcsp-sim emulates subscription, resource group and resource scopes)."
            ),
        )),
    }
}

fn put(store: &mut Store, ctx: &Ctx, scope: &str, name: &str) -> Result<Reply, ArmError> {
    if uuid::Uuid::parse_str(name).is_err() {
        return Err(ArmError::bad_request(
            "InvalidRoleAssignmentId",
            format!("The role assignment ID '{name}' is not valid. The role assignment ID must be a GUID."),
        ));
    }
    let body = ctx.json()?;
    super::validate::role_assignment(&body)?;
    check_scope(store, scope)?;
    let props = &body["properties"];
    let role_id = props["roleDefinitionId"].as_str().unwrap_or_default();
    let principal = props["principalId"].as_str().unwrap_or_default();
    let Some((role_guid, _)) = lookup_role(store, ctx, scope, role_id) else {
        return Err(ArmError::bad_request(
            "RoleDefinitionDoesNotExist",
            format!(
                "The specified role definition with ID '{}' does not exist.",
                role_id.rsplit('/').next().unwrap_or_default()
            ),
        ));
    };
    if uuid::Uuid::parse_str(principal).is_err() {
        return Err(ArmError::bad_request(
            "InvalidPrincipalId",
            format!(
                "A valid principal ID must be provided for role assignment. The principal ID '{principal}' is not valid."
            ),
        ));
    }
    // Replication lag: a just-created identity is not yet visible to the authorization service.
    let lag = ctx.config.principal_lag();
    let bypass = ctx.config.principal_type_bypasses_lag && props["principalType"].as_str().is_some();
    let young = store
        .of_kind(&kinds::IDENTITY)
        .find(|r| r.body["properties"]["principalId"].as_str().is_some_and(|p| p.eq_ignore_ascii_case(principal)))
        .is_some_and(|r| ctx.now.saturating_duration_since(r.created_at) < lag);
    if young && !bypass {
        let tenant = super::complete::tenant_guid(&ctx.caller.tenant);
        return Err(ArmError::bad_request(
            "PrincipalNotFound",
            format!(
                "Principal {} does not exist in the directory {tenant}. Check that you have the correct principal ID. If you are creating this principal and then immediately assigning a role, this error might be related to a replication delay. In this case, set the role assignment principalType property to a value, such as ServicePrincipal, User, or Group.  See https://aka.ms/docs-principaltype",
                principal.replace('-', "")
            ),
        ));
    }
    let sub = scope.split('/').filter(|s| !s.is_empty()).nth(1).unwrap_or_default().to_string();
    let role_def_id = format!("/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{role_guid}");
    let id = assignment_id(scope, name);
    // The same principal, role and scope under another name.
    if let Some(other) = store.resources.values().find(|r| {
        matches!(r.kind, ResKind::RoleAssignment)
            && !r.id.eq_ignore_ascii_case(&id)
            && r.body["properties"]["principalId"].as_str().is_some_and(|p| p.eq_ignore_ascii_case(principal))
            && r.body["properties"]["roleDefinitionId"].as_str().is_some_and(|d| d.eq_ignore_ascii_case(&role_def_id))
            && r.body["properties"]["scope"]
                .as_str()
                .is_some_and(|s| s.eq_ignore_ascii_case(scope.trim_end_matches('/')))
    }) {
        return Err(ArmError::conflict(
            "RoleAssignmentExists",
            format!("The role assignment already exists. The ID of the existing role assignment is {}.", other.name),
        ));
    }
    if let Some(existing) = store.get(&id) {
        let p = &existing.body["properties"];
        let same = p["principalId"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(principal))
            && p["roleDefinitionId"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(&role_def_id));
        if !same {
            return Err(ArmError::bad_request(
                "RoleAssignmentUpdateNotPermitted",
                "Tenant ID, application ID, principal ID, and scope are not allowed to be updated.",
            ));
        }
        return Ok(Reply::json(StatusCode::CREATED, existing.body.clone()));
    }
    let now = super::now_rfc3339();
    let out = json!({
        "id": id, "name": name, "type": "Microsoft.Authorization/roleAssignments",
        "properties": {
            "roleDefinitionId": role_def_id,
            "principalId": principal,
            "principalType": props["principalType"].as_str().unwrap_or("ServicePrincipal"),
            "scope": scope.trim_end_matches('/'),
            "description": props["description"].clone(),
            "condition": props["condition"].clone(),
            "conditionVersion": props["conditionVersion"].clone(),
            "createdOn": now, "updatedOn": now,
            "createdBy": ctx.caller.client_id, "updatedBy": ctx.caller.client_id,
            "delegatedManagedIdentityResourceId": null,
        }
    });
    let mut out = out;
    if let Some(p) = out["properties"].as_object_mut() {
        p.retain(|_, v| !v.is_null());
    }
    let seq = store.next_seq();
    store.insert(Resource {
        id,
        kind: ResKind::RoleAssignment,
        name: name.to_string(),
        body: out.clone(),
        created_at: ctx.now,
        changed_at: ctx.now,
        seq,
        op: None,
        secret: None,
    });
    Ok(Reply::json(StatusCode::CREATED, out))
}

fn delete(store: &mut Store, scope: &str, name: &str) -> Result<Reply, ArmError> {
    let id = assignment_id(scope, name);
    match store.get(&id).cloned() {
        Some(r) => {
            store.remove_tree(&id);
            Ok(Reply::json(StatusCode::OK, r.body))
        }
        None => Ok(Reply::empty(StatusCode::NO_CONTENT)),
    }
}

fn list(store: &Store, ctx: &Ctx, scope: &str) -> Result<Reply, ArmError> {
    let filter = parse_filter(ctx.query.get("$filter").map(String::as_str).unwrap_or_default())?;
    let at_scope = filter.iter().any(|(k, _)| k == "atscope()");
    let principal = filter.iter().find(|(k, _)| k == "principalid").map(|(_, v)| v.to_ascii_lowercase());
    let scope_l = scope.trim_end_matches('/').to_ascii_lowercase();
    let value: Vec<Value> = store
        .resources
        .values()
        .filter(|r| matches!(r.kind, ResKind::RoleAssignment))
        .filter(|r| {
            let s = r.body["properties"]["scope"].as_str().unwrap_or_default().to_ascii_lowercase();
            let above_or_at = scope_l == s || scope_l.starts_with(&format!("{s}/"));
            let below = s.starts_with(&format!("{scope_l}/"));
            above_or_at || (!at_scope && below)
        })
        .filter(|r| {
            principal
                .as_ref()
                .is_none_or(|p| r.body["properties"]["principalId"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(p)))
        })
        .map(|r| r.body.clone())
        .collect();
    Ok(Reply::json(StatusCode::OK, json!({ "value": value })))
}

/// An action pattern of a role (`*`, `Microsoft.Compute/*`, `*/read`), matched as Azure RBAC
/// matches them: case-insensitively, `*` standing for any run of characters.
fn action_matches(pattern: &str, action: &str) -> bool {
    let (p, a) = (pattern.to_ascii_lowercase(), action.to_ascii_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    let mut rest = a.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(at) = rest.find(part) else { return false };
            rest = &rest[at + part.len()..];
        }
    }
    rest.is_empty()
}

/// Whether `principal` may do `action` at `scope`: a role assignment of the principal at that
/// scope or one above it (a subscription's covers its resource groups, not the other way) whose
/// built-in role's actions match and whose not-actions do not (Microsoft Learn, "Understand scope
/// for Azure RBAC" and "Understand Azure role definitions"). A custom role registered with the sim
/// has no actions the sim knows, so an assignment of one counts as permitting (sim/README.md).
pub fn permits(store: &Store, config: &crate::world::SimConfig, principal: &str, scope: &str, action: &str) -> bool {
    let scope = scope.trim_end_matches('/').to_ascii_lowercase();
    store.resources.values().filter(|r| matches!(r.kind, ResKind::RoleAssignment)).any(|r| {
        let p = &r.body["properties"];
        let at = p["scope"].as_str().unwrap_or_default().trim_end_matches('/').to_ascii_lowercase();
        let covers = scope == at || scope.starts_with(&format!("{at}/"));
        if !covers || !p["principalId"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(principal)) {
            return false;
        }
        let guid = p["roleDefinitionId"].as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default();
        let definition = find_role(guid)
            .map(|r| role_definition("", r))
            .or_else(|| custom_definition(store, guid).map(|d| d.body.clone()));
        match definition {
            Some(d) => allows(&d, action),
            None => config.custom_roles.keys().any(|g| g.eq_ignore_ascii_case(guid)),
        }
    })
}

/// Whether a role definition's permissions grant `action`: one of its `actions` matches and none
/// of its `notActions` does.
fn allows(definition: &Value, action: &str) -> bool {
    let perms = definition["properties"]["permissions"].as_array().cloned().unwrap_or_default();
    let any = |k: &str| {
        perms
            .iter()
            .any(|p| p[k].as_array().into_iter().flatten().filter_map(Value::as_str).any(|x| action_matches(x, action)))
    };
    any("actions") && !any("notActions")
}

#[cfg(test)]
mod permit_tests {
    use super::action_matches;

    #[test]
    fn actions_match_with_wildcards_and_no_case() {
        assert!(action_matches("*", "Microsoft.Compute/skus/read"));
        assert!(action_matches("*/read", "Microsoft.Compute/skus/read"));
        assert!(!action_matches("*/read", "Microsoft.Compute/virtualMachines/write"));
        assert!(action_matches("Microsoft.Network/*", "microsoft.network/networkInterfaces/write"));
        assert!(!action_matches("Microsoft.Network/*", "Microsoft.Compute/skus/read"));
        assert!(action_matches("Microsoft.Authorization/*/Write", "Microsoft.Authorization/roleAssignments/write"));
    }
}

/// The custom role definition made through the API with this GUID.
fn custom_definition<'a>(store: &'a Store, guid: &str) -> Option<&'a super::store::Resource> {
    store.resources.values().find(|r| matches!(r.kind, ResKind::RoleDefinition) && r.name.eq_ignore_ascii_case(guid))
}

/// Whether a definition can be assigned at (and so is listed at) `scope`: one of its assignable
/// scopes is `scope` or above it.
fn assignable_at(body: &Value, scope: &str) -> bool {
    let scope = scope.trim_end_matches('/').to_ascii_lowercase();
    body["properties"]["assignableScopes"].as_array().into_iter().flatten().filter_map(Value::as_str).any(|a| {
        let a = a.trim_end_matches('/').to_ascii_lowercase();
        scope == a || scope.starts_with(&format!("{a}/"))
    })
}

/// PUT of a custom role (Microsoft Learn, REST "Role Definitions - Create Or Update" and "Azure
/// custom roles"): its id a GUID; `roleName`, `permissions` and `assignableScopes` required;
/// a role name unique among the directory's custom roles. Answers 201 with the definition, its
/// id under the subscription of its first assignable scope.
fn put_definition(store: &mut Store, ctx: &Ctx, scope: &str, guid: &str) -> Result<Reply, ArmError> {
    if uuid::Uuid::parse_str(guid).is_err() {
        return Err(ArmError::bad_request(
            "InvalidRoleDefinitionId",
            format!("The role definition ID '{guid}' is not valid. The role definition ID must be a GUID."),
        ));
    }
    let body = ctx.json()?;
    let p = &body["properties"];
    let role_name = p["roleName"].as_str().unwrap_or_default();
    let scopes: Vec<&str> = p["assignableScopes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if role_name.is_empty() || scopes.is_empty() || !p["permissions"].is_array() {
        return Err(ArmError::bad_request(
            "InvalidRoleDefinition",
            "A role definition needs properties.roleName, properties.permissions and properties.assignableScopes.",
        ));
    }
    if find_role(guid).is_some() {
        return Err(ArmError::new(
            StatusCode::FORBIDDEN,
            "RoleDefinitionUpdateNotPermitted",
            "Built-in role definitions cannot be changed.",
        ));
    }
    let same_name = store.resources.values().any(|r| {
        matches!(r.kind, ResKind::RoleDefinition)
            && !r.name.eq_ignore_ascii_case(guid)
            && r.body["properties"]["roleName"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(role_name))
    }) || BUILT_IN_ROLES.iter().any(|r| r.0.eq_ignore_ascii_case(role_name));
    if same_name {
        return Err(ArmError::conflict(
            "RoleDefinitionWithSameNameExists",
            format!(
                "A custom role with the same name '{role_name}' already exists in this directory. Use a different name."
            ),
        ));
    }
    let sub = scope.split('/').filter(|s| !s.is_empty()).nth(1).unwrap_or_default().to_string();
    let id = format!("/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{guid}");
    let now = super::now_rfc3339();
    let prev = custom_definition(store, guid).cloned();
    let out = json!({
        "id": id, "name": guid, "type": "Microsoft.Authorization/roleDefinitions",
        "properties": {
            "roleName": role_name,
            "type": "CustomRole",
            "description": p["description"].clone(),
            "assignableScopes": scopes,
            "permissions": p["permissions"].clone(),
            "createdOn": prev.as_ref().map(|r| r.body["properties"]["createdOn"].clone()).unwrap_or(json!(now)),
            "updatedOn": now,
        }
    });
    let seq = prev.as_ref().map(|p| p.seq).unwrap_or_else(|| store.next_seq());
    store.insert(super::store::Resource {
        id: id.clone(),
        kind: ResKind::RoleDefinition,
        name: guid.to_string(),
        body: out.clone(),
        created_at: prev.as_ref().map(|p| p.created_at).unwrap_or(ctx.now),
        changed_at: ctx.now,
        seq,
        op: None,
        secret: None,
    });
    Ok(Reply::json(StatusCode::CREATED, out))
}

/// DELETE of a custom role: refused while a role assignment uses it (Microsoft Learn,
/// `Remove-AzRoleDefinition`: "Delete will fail if there are existing role assignments made to the
/// custom role"; the error code is the sim's, not verified); 204 when it is gone already.
fn delete_definition(store: &mut Store, guid: &str) -> Result<Reply, ArmError> {
    let Some(def) = custom_definition(store, guid).cloned() else {
        return Ok(Reply::empty(StatusCode::NO_CONTENT));
    };
    let used = store.resources.values().any(|r| {
        matches!(r.kind, ResKind::RoleAssignment)
            && r.body["properties"]["roleDefinitionId"]
                .as_str()
                .is_some_and(|d| d.rsplit('/').next().is_some_and(|g| g.eq_ignore_ascii_case(guid)))
    });
    if used {
        return Err(ArmError::conflict(
            "RoleDefinitionHasAssignments",
            format!(
                "There are existing role assignments referencing role '{}'.",
                def.body["properties"]["roleName"].as_str().unwrap_or_default()
            ),
        ));
    }
    store.remove_tree(&def.id);
    Ok(Reply::json(StatusCode::OK, def.body))
}

/// What a call by a user-assigned identity needs: each `(action, scope)` Azure RBAC checks it
/// against. The operation's own (`<type>/read`, `/write`, `/delete` at the resource, or at the
/// list's scope; the SKU list's `Microsoft.Compute/skus/read` at the subscription; the tags at a
/// scope, `Microsoft.Resources/tags/*`), and for a NIC's PUT the linked access of joining each
/// subnet it names (`Microsoft.Network/virtualNetworks/subnets/join/action` at the subnet;
/// Microsoft Learn, "Azure permissions for Networking" and "Linked access check"). Polls of an
/// operation and Entra's paths need none here.
pub fn required(method: &axum::http::Method, target: &super::path::Target, body: &[u8]) -> Vec<(String, String)> {
    use super::path::Target as T;
    let verb = match *method {
        axum::http::Method::GET | axum::http::Method::HEAD => "read",
        axum::http::Method::DELETE => "delete",
        _ => "write",
    };
    match target {
        T::Resource { sub, rg, kind, names } => {
            let mut id = format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/{}", kind.namespace);
            let types: Vec<&str> = kind.arm_type.split('/').skip(1).collect();
            for (t, n) in types.iter().zip(names) {
                id.push_str(&format!("/{t}/{n}"));
            }
            let mut need = vec![(format!("{}/{verb}", kind.arm_type), id.clone())];
            if verb == "write" && std::ptr::eq(*kind, &super::kinds::NIC) {
                let body: Value = serde_json::from_slice(body).unwrap_or_default();
                for c in body["properties"]["ipConfigurations"].as_array().into_iter().flatten() {
                    if let Some(subnet) = c["properties"]["subnet"]["id"].as_str() {
                        need.push(("Microsoft.Network/virtualNetworks/subnets/join/action".into(), subnet.to_string()));
                    }
                }
            }
            need
        }
        T::List { sub, rg, kind } => {
            let scope = match rg {
                Some(rg) => format!("/subscriptions/{sub}/resourceGroups/{rg}"),
                None => format!("/subscriptions/{sub}"),
            };
            vec![(format!("{}/read", kind.arm_type), scope)]
        }
        T::ComputeSkus { sub } => vec![("Microsoft.Compute/skus/read".into(), format!("/subscriptions/{sub}"))],
        T::TagsAtScope { scope, .. } => vec![(format!("Microsoft.Resources/tags/{verb}"), scope.clone())],
        T::ResourceGroup { sub, rg } => vec![(
            format!("Microsoft.Resources/subscriptions/resourceGroups/{verb}"),
            format!("/subscriptions/{sub}/resourceGroups/{rg}"),
        )],
        _ => Vec::new(),
    }
}

/// Azure RBAC for a caller that is one of the world's user-assigned identities (a workload-identity
/// token of its client id, as CAPZ holds): every action [`required`] names must be permitted at its
/// scope ([`permits`]), else 403 `AuthorizationFailed` worded as ARM words it (Microsoft Learn,
/// "Troubleshoot Azure RBAC"). Other callers (the clients a test or xcsp signs in with a secret)
/// are not judged.
pub fn authorize(
    store: &Store,
    config: &crate::world::SimConfig,
    client_id: &str,
    need: &[(String, String)],
) -> Result<(), ArmError> {
    let Some(principal) = store
        .of_kind(&kinds::IDENTITY)
        .find(|r| r.body["properties"]["clientId"].as_str() == Some(client_id))
        .and_then(|r| r.body["properties"]["principalId"].as_str().map(String::from))
    else {
        return Ok(());
    };
    for (action, scope) in need {
        if !permits(store, config, &principal, scope, action) {
            return Err(ArmError::new(
                StatusCode::FORBIDDEN,
                "AuthorizationFailed",
                format!(
                    "The client '{client_id}' with object id '{principal}' does not have authorization to perform action '{action}' over scope '{scope}' or the scope is invalid. If access was recently granted, please refresh your credentials."
                ),
            ));
        }
    }
    Ok(())
}
