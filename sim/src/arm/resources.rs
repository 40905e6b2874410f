//! Generic ARM resource handling: resource groups and typed resources (GET, PUT, PATCH, DELETE,
//! lists with tag filters). Their long-running operations are in [`super::lro`].

use super::complete;
use super::kinds::{self, Kind, Patch};
use super::lro::{self, OpAction, busy, op_reply, start_op};
use super::path::{self, Target};
use super::store::{self, ResKind, Resource, Store};
use super::{Ctx, Reply, check_api_version, error::ArmError, matches_tag_filter, parse_filter, rules, tags, validate};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

/// Entry point for resource-group and typed-resource targets.
pub fn handle(store: &mut Store, ctx: &Ctx, target: &Target) -> Result<Reply, ArmError> {
    let m = ctx.method;
    match target {
        Target::ResourceGroups { sub } if m == Method::GET => rg_list(store, ctx, sub),
        Target::ResourceGroup { sub, rg } => match *m {
            Method::GET | Method::HEAD => rg_get(store, ctx, sub, rg),
            Method::PUT => rg_put(store, ctx, sub, rg),
            Method::PATCH => rg_patch(store, ctx, sub, rg),
            Method::DELETE => rg_delete(store, ctx, sub, rg),
            _ => Err(not_allowed(m)),
        },
        Target::GenericList { sub, rg } if m == Method::GET => generic_list(store, ctx, sub, rg.as_deref()),
        Target::List { sub, rg, kind } if m == Method::GET => list(store, ctx, sub, rg.as_deref(), kind),
        Target::Resource { sub, rg, kind, names } => match *m {
            Method::GET => get(store, ctx, sub, rg, kind, names),
            Method::PUT => put(store, ctx, sub, rg, kind, names),
            Method::PATCH => patch(store, ctx, sub, rg, kind, names),
            Method::DELETE => delete(store, ctx, sub, rg, kind, names),
            _ => Err(not_allowed(m)),
        },
        Target::Children { sub, rg, kind, parents } if m == Method::GET => children(store, ctx, sub, rg, kind, parents),
        Target::StorageKeys { sub, rg, account } if m == Method::POST => storage_keys(store, ctx, sub, rg, account),
        Target::SharedKey { sub, rg, connection } => match *m {
            Method::GET => shared_key_get(store, ctx, sub, rg, connection),
            Method::PUT => shared_key_put(store, ctx, sub, rg, connection),
            _ => Err(not_allowed(m)),
        },
        Target::GatewayConnections { sub, rg, gateway } if m == Method::GET => {
            gateway_connections(store, ctx, sub, rg, gateway)
        }
        _ => Err(not_allowed(m)),
    }
}

fn not_allowed(m: &Method) -> ArmError {
    ArmError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("The method '{m}' is not supported for this path by xcsp-sim."),
    )
}

/// Lower-case resource group key.
fn rg_key(sub: &str, rg: &str) -> String {
    path::rg_id(sub, rg).to_ascii_lowercase()
}

/// The resource group (404 `ResourceGroupNotFound` if absent).
fn require_rg<'s>(store: &'s Store, sub: &str, rg: &str) -> Result<&'s Resource, ArmError> {
    store.get(&rg_key(sub, rg)).ok_or_else(|| ArmError::rg_not_found(rg))
}

/// The resource group, refusing writes while it is being deleted.
fn require_rg_writable<'s>(store: &'s Store, sub: &str, rg: &str) -> Result<&'s Resource, ArmError> {
    let r = require_rg(store, sub, rg)?;
    if r.op.is_some() {
        return Err(ArmError::conflict(
            "ResourceGroupBeingDeleted",
            format!("The resource group '{}' is in deprovisioning state and cannot perform this operation.", r.name),
        ));
    }
    Ok(r)
}

fn normalize_location(l: &str) -> String {
    l.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase()
}

// ---------------------------------------------------------------------------------------------
// Resource groups

fn rg_get(store: &Store, ctx: &Ctx, sub: &str, rg: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::RESOURCES_API, "resourceGroups")?;
    let r = require_rg(store, sub, rg)?;
    if *ctx.method == Method::HEAD {
        return Ok(Reply::empty(StatusCode::NO_CONTENT));
    }
    Ok(Reply::json(StatusCode::OK, r.body.clone()))
}

fn rg_list(store: &Store, ctx: &Ctx, sub: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::RESOURCES_API, "resourceGroups")?;
    let filter = parse_filter(ctx.query.get("$filter").map(String::as_str).unwrap_or_default())?;
    let prefix = format!("/subscriptions/{}/resourcegroups/", sub.to_ascii_lowercase());
    let value: Vec<Value> = store
        .resources
        .iter()
        .filter(|(k, r)| {
            matches!(r.kind, ResKind::ResourceGroup) && k.starts_with(&prefix) && matches_tag_filter(&r.body, &filter)
        })
        .map(|(_, r)| r.body.clone())
        .collect();
    Ok(Reply::json(StatusCode::OK, json!({ "value": value })))
}

fn rg_put(store: &mut Store, ctx: &Ctx, sub: &str, rg: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::RESOURCES_API, "resourceGroups")?;
    let body = ctx.json()?;
    validate::resource_group(&body, false)?;
    tags::check(&body)?;
    rules::check_name(rg, 1, 90, "resource group")?;
    let location = normalize_location(body["location"].as_str().unwrap_or_default());
    let key = rg_key(sub, rg);
    if let Some(existing) = store.get(&key) {
        if existing.op.is_some() {
            return Err(ArmError::conflict(
                "ResourceGroupBeingDeleted",
                format!(
                    "The resource group '{}' is in deprovisioning state and cannot perform this operation.",
                    existing.name
                ),
            ));
        }
        let had = existing.body["location"].as_str().unwrap_or_default().to_string();
        if had != location {
            return Err(ArmError::conflict(
                "InvalidResourceGroupLocation",
                format!(
                    "Invalid resource group location '{location}'. The Resource group already exists in location '{had}'."
                ),
            ));
        }
    }
    let created = store.get(&key).is_none();
    let (id, name, seq) = match store.get(&key) {
        Some(e) => (e.id.clone(), e.name.clone(), e.seq),
        None => (path::rg_id(sub, rg), rg.to_string(), store.next_seq()),
    };
    let mut out = json!({
        "id": id, "name": name, "type": "Microsoft.Resources/resourceGroups", "location": location,
        "properties": {"provisioningState": "Succeeded"},
    });
    if let Some(t) = body.get("tags").filter(|t| !t.is_null()) {
        out["tags"] = t.clone();
    }
    if let Some(m) = body.get("managedBy").filter(|t| !t.is_null()) {
        out["managedBy"] = m.clone();
    }
    store.insert(Resource {
        id,
        kind: ResKind::ResourceGroup,
        name,
        body: out.clone(),
        created_at: ctx.now,
        changed_at: ctx.now,
        seq,
        op: None,
        secret: None,
    });
    Ok(Reply::json(if created { StatusCode::CREATED } else { StatusCode::OK }, out))
}

fn rg_patch(store: &mut Store, ctx: &Ctx, sub: &str, rg: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::RESOURCES_API, "resourceGroups")?;
    let body = ctx.json()?;
    validate::resource_group(&body, true)?;
    tags::check(&body)?;
    require_rg_writable(store, sub, rg)?;
    let r = store.get_mut(&rg_key(sub, rg)).expect("checked");
    if let Some(t) = body.get("tags").filter(|t| !t.is_null()) {
        r.body["tags"] = t.clone();
    }
    if let Some(m) = body.get("managedBy").filter(|t| !t.is_null()) {
        r.body["managedBy"] = m.clone();
    }
    Ok(Reply::json(StatusCode::OK, r.body.clone()))
}

fn rg_delete(store: &mut Store, ctx: &Ctx, sub: &str, rg: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::RESOURCES_API, "resourceGroups")?;
    let r = require_rg(store, sub, rg)?;
    let key = rg_key(sub, rg);
    if let Some(op) = r.op.clone().and_then(|o| store.ops.get(&o).cloned()) {
        return Ok(op_reply(ctx, &op, StatusCode::ACCEPTED, true));
    }
    // The longest delete among the contained resources sets the pace.
    let (lo, hi) = store
        .descendants(&key)
        .filter_map(|(_, r)| match r.kind {
            ResKind::Typed(k) => Some(k.delete_secs),
            _ => None,
        })
        .fold((20.0, 60.0), |(a, b), (c, d)| (f64::max(a, c), f64::max(b, d)));
    let keys: Vec<String> = store.descendants(&key).map(|(k, _)| k.clone()).collect();
    for k in keys {
        if let Some(r) = store.resources.get_mut(&k) {
            lro::set_provisioning_state(r, "Deleting");
        }
    }
    let op = start_op(
        store,
        ctx,
        sub,
        &key,
        OpAction::Delete,
        "Microsoft.Resources",
        "",
        (lo, hi),
        Vec::new(),
        "resourceGroups",
    );
    Ok(op_reply(ctx, &op, StatusCode::ACCEPTED, true))
}

// ---------------------------------------------------------------------------------------------
// Typed resources

struct Addr {
    id: String,
    key: String,
    rg_name: String,
}

fn address(store: &Store, sub: &str, rg: &str, kind: &'static Kind, names: &[String]) -> Result<Addr, ArmError> {
    let rg_res = require_rg(store, sub, rg)?;
    let rg_name = rg_res.name.clone();
    let id = path::resource_id(sub, &rg_name, kind, names);
    let key = id.to_ascii_lowercase();
    let id = store.get(&key).map(|r| r.id.clone()).unwrap_or(id);
    Ok(Addr { id, key, rg_name })
}

fn parent_key(sub: &str, rg: &str, kind: &'static Kind, names: &[String]) -> Option<(String, &'static Kind)> {
    let pk = kinds::by_type(kind.parent?)?;
    Some((path::resource_id(sub, rg, pk, &names[..names.len() - 1]).to_ascii_lowercase(), pk))
}

fn require_parent(store: &Store, sub: &str, rg: &str, kind: &'static Kind, names: &[String]) -> Result<(), ArmError> {
    if let Some((pk, _)) = parent_key(sub, rg, kind, names)
        && store.get(&pk).is_none()
    {
        return Err(ArmError::parent_not_found(&names[names.len() - 2]));
    }
    Ok(())
}

fn get(
    store: &Store,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    kind: &'static Kind,
    names: &[String],
) -> Result<Reply, ArmError> {
    check_api_version(ctx, kind.api_versions, kind.arm_type)?;
    let a = address(store, sub, rg, kind, names)?;
    require_parent(store, sub, &a.rg_name, kind, names)?;
    if store.get(&a.key).is_none() {
        return Err(ArmError::not_found(kind.arm_type, &names.join("/"), &a.rg_name));
    }
    Ok(Reply::json(StatusCode::OK, store.render(&a.key)))
}

fn put(
    store: &mut Store,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    kind: &'static Kind,
    names: &[String],
) -> Result<Reply, ArmError> {
    check_api_version(ctx, kind.api_versions, kind.arm_type)?;
    require_rg_writable(store, sub, rg)?;
    let a = address(store, sub, rg, kind, names)?;
    require_parent(store, sub, &a.rg_name, kind, names)?;
    let name = names.last().expect("a name").clone();
    rules::check_name(&name, 1, 80, kind.segment)?;
    let mut body = ctx.json()?;
    validate::put_body(kind, &body)?;
    tags::check(&body)?;
    // What the type's model does not define, or marks read-only, is dropped, as ARM drops it.
    super::spec::prune_put(kind, &mut body);
    let existing = store.get(&a.key).cloned();
    if existing
        .as_ref()
        .is_some_and(|e| e.op.as_ref().and_then(|o| store.ops.get(o)).is_some_and(|o| o.action == OpAction::Delete))
    {
        return Err(ArmError::conflict(
            "CanceledAndSupersededDueToAnotherOperation",
            format!("Resource '{}' is being deleted.", a.id),
        ));
    }
    let location = if kind.tracked {
        match body["location"].as_str() {
            Some(l) => normalize_location(l),
            None => {
                return Err(ArmError::bad_request(
                    "LocationRequired",
                    "The location property is required for this definition.",
                ));
            }
        }
    } else {
        String::new()
    };
    if let Some(e) = &existing {
        let had = e.body["location"].as_str().unwrap_or_default();
        if kind.tracked && had != location {
            return Err(ArmError::conflict(
                "InvalidResourceLocation",
                format!(
                    "The resource '{name}' already exists in location '{had}' in resource group '{}'. A resource with the same name cannot be created in location '{location}'. Please select a new resource name.",
                    a.rg_name
                ),
            ));
        }
    }
    rules::check_put(store, ctx, kind, &a.id, &body, existing.as_ref(), &location)?;
    let gateways = rules::gateways_of(kind, &a.id, &body);
    for gw in &gateways {
        busy(store, ctx, gw, &a.id)?;
    }
    let mut stored = complete::compose(kind, &a.id, &name, &body, existing.as_ref(), &location);
    complete::complete(store, ctx, kind, &a.id, &body, &mut stored, existing.as_ref());
    let created = existing.is_none();
    let seq = existing.as_ref().map(|e| e.seq).unwrap_or_else(|| store.next_seq());
    let secret = complete::secret_of(kind, &body).or_else(|| existing.as_ref().and_then(|e| e.secret.clone()));
    store.insert(Resource {
        id: a.id.clone(),
        kind: ResKind::Typed(kind),
        name,
        body: stored,
        created_at: existing.as_ref().map(|e| e.created_at).unwrap_or(ctx.now),
        changed_at: ctx.now,
        seq,
        op: None,
        secret,
    });
    super::compute::after_put(store, kind, &a.id, ctx.now);
    // Embedded children: the PUT replaces the whole set.
    for ck in kinds::embedded_children(kind) {
        let items: Vec<Value> =
            body["properties"][ck.embed_as.expect("embedded")].as_array().cloned().unwrap_or_default();
        let wanted: Vec<String> =
            items.iter().filter_map(|i| i["name"].as_str().map(str::to_ascii_lowercase)).collect();
        let gone: Vec<String> = store
            .children(&a.key, ck)
            .iter()
            .filter(|c| !wanted.contains(&c.name.to_ascii_lowercase()))
            .map(|c| c.id.clone())
            .collect();
        for g in gone {
            store.remove_tree(&g);
        }
        for item in items {
            let cname = item["name"].as_str().unwrap_or_default().to_string();
            let cid = format!("{}/{}/{}", a.id, ck.segment, cname);
            let prev = store.get(&cid).cloned();
            let cid = prev.as_ref().map(|p| p.id.clone()).unwrap_or(cid);
            let cbody = complete::compose(ck, &cid, &cname, &item, prev.as_ref(), "");
            let cseq = store.next_seq();
            store.insert(Resource {
                id: cid,
                kind: ResKind::Typed(ck),
                name: cname,
                body: cbody,
                created_at: prev.as_ref().map(|p| p.created_at).unwrap_or(ctx.now),
                changed_at: ctx.now,
                seq: cseq,
                op: None,
                secret: None,
            });
        }
    }
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    if kind.lro_put {
        let keys: Vec<String> = store.descendants(&a.key).map(|(k, _)| k.clone()).collect();
        for k in keys {
            if let Some(r) = store.resources.get_mut(&k) {
                lro::set_provisioning_state(r, "Updating");
            }
        }
        let op = start_op(
            store,
            ctx,
            sub,
            &a.key,
            OpAction::Put,
            kind.namespace,
            &location_of(store, &a.key),
            kind.put_secs,
            gateways,
            kind.arm_type,
        );
        let mut reply = op_reply(ctx, &op, status, false);
        reply.body = Some(store.render(&a.key));
        return Ok(reply);
    }
    Ok(Reply::json(status, store.render(&a.key)))
}

/// The location of a resource or, for a child, of its top-level ancestor.
fn location_of(store: &Store, key: &str) -> String {
    let mut k = key.to_ascii_lowercase();
    loop {
        if let Some(l) = store.get(&k).and_then(|r| r.body["location"].as_str()) {
            return l.to_string();
        }
        match k.rfind('/') {
            Some(i) if k[..i].contains("/providers/") => {
                k.truncate(i);
                if let Some(j) = k.rfind('/') {
                    k.truncate(j);
                }
            }
            _ => return String::new(),
        }
    }
}

fn patch(
    store: &mut Store,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    kind: &'static Kind,
    names: &[String],
) -> Result<Reply, ArmError> {
    check_api_version(ctx, kind.api_versions, kind.arm_type)?;
    if kind.patch == Patch::None {
        return Err(not_allowed(ctx.method));
    }
    require_rg_writable(store, sub, rg)?;
    let a = address(store, sub, rg, kind, names)?;
    let body = ctx.json()?;
    validate::tags_body(&body)?;
    tags::check(&body)?;
    let Some(existing) = store.get(&a.key).cloned() else {
        return Err(ArmError::not_found(kind.arm_type, &names.join("/"), &a.rg_name));
    };
    let gateways =
        if kind.patch == Patch::TagsLro { rules::gateways_of(kind, &a.id, &existing.body) } else { Vec::new() };
    for gw in &gateways {
        busy(store, ctx, gw, &a.id)?;
    }
    let r = store.get_mut(&a.key).expect("exists");
    if let Some(t) = body.get("tags") {
        if t.is_null() {
            r.body.as_object_mut().expect("object").remove("tags");
        } else {
            r.body["tags"] = t.clone();
        }
    }
    if kind.patch == Patch::Merge
        && let Some(p) = body.get("properties").filter(|p| p.is_object())
    {
        crate::world::merge_patch(&mut r.body["properties"], p);
    }
    if kind.etag {
        r.body["etag"] = json!(store::new_etag());
    }
    if kind.patch == Patch::TagsLro {
        let op = start_op(
            store,
            ctx,
            sub,
            &a.key,
            OpAction::Put,
            kind.namespace,
            &location_of(store, &a.key),
            (30.0, 60.0),
            gateways,
            kind.arm_type,
        );
        let mut reply = op_reply(ctx, &op, StatusCode::OK, false);
        reply.body = Some(store.render(&a.key));
        return Ok(reply);
    }
    Ok(Reply::json(StatusCode::OK, store.render(&a.key)))
}

fn delete(
    store: &mut Store,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    kind: &'static Kind,
    names: &[String],
) -> Result<Reply, ArmError> {
    check_api_version(ctx, kind.api_versions, kind.arm_type)?;
    let a = address(store, sub, rg, kind, names)?;
    require_parent(store, sub, &a.rg_name, kind, names)?;
    let Some(existing) = store.get(&a.key).cloned() else {
        return Ok(Reply::empty(StatusCode::NO_CONTENT));
    };
    if let Some(op) = existing.op.as_ref().and_then(|o| store.ops.get(o)).filter(|o| o.action == OpAction::Delete) {
        return Ok(op_reply(ctx, op, StatusCode::ACCEPTED, true));
    }
    rules::check_delete(store, kind, &existing)?;
    let gateways = rules::gateways_of(kind, &a.id, &existing.body);
    for gw in &gateways {
        busy(store, ctx, gw, &a.id)?;
    }
    if kind.lro_delete {
        let loc = location_of(store, &a.key);
        let op = start_op(
            store,
            ctx,
            sub,
            &a.key,
            OpAction::Delete,
            kind.namespace,
            &loc,
            kind.delete_secs,
            gateways,
            kind.arm_type,
        );
        return Ok(op_reply(ctx, &op, StatusCode::ACCEPTED, true));
    }
    for gone in store.remove_tree(&a.key) {
        super::compute::after_delete(store, &gone);
    }
    Ok(Reply::empty(StatusCode::OK))
}

fn list(store: &Store, ctx: &Ctx, sub: &str, rg: Option<&str>, kind: &'static Kind) -> Result<Reply, ArmError> {
    check_api_version(ctx, kind.api_versions, kind.arm_type)?;
    let prefix = match rg {
        Some(rg) => format!("{}/", require_rg(store, sub, rg)?.id.to_ascii_lowercase()),
        None => format!("/subscriptions/{}/", sub.to_ascii_lowercase()),
    };
    let filter = parse_filter(ctx.query.get("$filter").map(String::as_str).unwrap_or_default())?;
    let value: Vec<Value> = store
        .of_kind(kind)
        .filter(|r| r.id.to_ascii_lowercase().starts_with(&prefix) && matches_tag_filter(&r.body, &filter))
        .map(|r| store.render(&r.id))
        .collect();
    Ok(Reply::json(StatusCode::OK, json!({ "value": value })))
}

fn children(
    store: &Store,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    kind: &'static Kind,
    parents: &[String],
) -> Result<Reply, ArmError> {
    check_api_version(ctx, kind.api_versions, kind.arm_type)?;
    let pk = kinds::by_type(kind.parent.expect("child kind")).expect("parent kind");
    let a = address(store, sub, rg, pk, parents)?;
    if store.get(&a.key).is_none() {
        return Err(ArmError::not_found(pk.arm_type, &parents.join("/"), &a.rg_name));
    }
    let value: Vec<Value> = store.children(&a.key, kind).iter().map(|c| store.render(&c.id)).collect();
    Ok(Reply::json(StatusCode::OK, json!({ "value": value })))
}

fn gateway_connections(store: &Store, ctx: &Ctx, sub: &str, rg: &str, gateway: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::NETWORK_API, "virtualNetworkGateways")?;
    let a = address(store, sub, rg, &kinds::VNG, &[gateway.to_string()])?;
    if store.get(&a.key).is_none() {
        return Err(ArmError::not_found(kinds::VNG.arm_type, gateway, &a.rg_name));
    }
    let value: Vec<Value> = store
        .of_kind(&kinds::CONNECTION)
        .filter(|c| {
            c.body["properties"]["virtualNetworkGateway1"]["id"]
                .as_str()
                .is_some_and(|i| i.eq_ignore_ascii_case(&a.key))
        })
        .map(|c| {
            // VirtualNetworkGatewayConnectionListEntity: gateway references are plain `{id}`.
            let mut v = store.render(&c.id);
            for f in ["virtualNetworkGateway1", "virtualNetworkGateway2", "localNetworkGateway2"] {
                if let Some(id) = v["properties"][f]["id"].as_str().map(String::from) {
                    v["properties"][f] = json!({ "id": id });
                }
            }
            v
        })
        .collect();
    Ok(Reply::json(StatusCode::OK, json!({ "value": value })))
}

fn shared_key_get(store: &Store, ctx: &Ctx, sub: &str, rg: &str, connection: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::NETWORK_API, "connections/sharedkey")?;
    let a = address(store, sub, rg, &kinds::CONNECTION, &[connection.to_string()])?;
    let Some(c) = store.get(&a.key) else {
        return Err(ArmError::not_found(kinds::CONNECTION.arm_type, connection, &a.rg_name));
    };
    Ok(Reply::json(
        StatusCode::OK,
        json!({"id": format!("{}/sharedkey", c.id), "value": c.secret.clone().unwrap_or_default()}),
    ))
}

fn shared_key_put(store: &mut Store, ctx: &Ctx, sub: &str, rg: &str, connection: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::NETWORK_API, "connections/sharedkey")?;
    require_rg_writable(store, sub, rg)?;
    let a = address(store, sub, rg, &kinds::CONNECTION, &[connection.to_string()])?;
    let body = ctx.json()?;
    validate::shared_key(&body)?;
    let value = body["value"].as_str().unwrap_or_default().to_string();
    rules::check_shared_key(&value)?;
    let Some(c) = store.get(&a.key).cloned() else {
        return Err(ArmError::not_found(kinds::CONNECTION.arm_type, connection, &a.rg_name));
    };
    let gateways = rules::gateways_of(&kinds::CONNECTION, &a.id, &c.body);
    for gw in &gateways {
        busy(store, ctx, gw, &a.id)?;
    }
    let stored = store.get_mut(&a.key).expect("exists");
    stored.secret = Some(value.clone());
    stored.changed_at = ctx.now;
    let loc = location_of(store, &a.key);
    let op = start_op(
        store,
        ctx,
        sub,
        &a.key,
        OpAction::Put,
        "Microsoft.Network",
        &loc,
        (30.0, 60.0),
        gateways,
        "Microsoft.Network/connections/sharedkey",
    );
    let mut reply = op_reply(ctx, &op, StatusCode::OK, false);
    reply.body = Some(json!({"id": format!("{}/sharedkey", c.id), "value": value}));
    Ok(reply)
}

fn generic_list(store: &Store, ctx: &Ctx, sub: &str, rg: Option<&str>) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::RESOURCES_API, "resources")?;
    let prefix = match rg {
        Some(rg) => format!("{}/", require_rg(store, sub, rg)?.id.to_ascii_lowercase()),
        None => format!("/subscriptions/{}/", sub.to_ascii_lowercase()),
    };
    let filter = parse_filter(ctx.query.get("$filter").map(String::as_str).unwrap_or_default())?;
    let value: Vec<Value> = store
        .resources
        .iter()
        .filter(|(k, r)| {
            matches!(r.kind, ResKind::Typed(kind) if kind.parent.is_none())
                && k.starts_with(&prefix)
                && matches_tag_filter(&r.body, &filter)
        })
        .map(|(_, r)| {
            let mut v = json!({"id": r.id, "name": r.name, "type": r.kind.arm_type(), "location": r.body["location"]});
            if let Some(t) = r.body.get("tags") {
                v["tags"] = t.clone();
            }
            if let Some(s) = r.body.get("sku") {
                v["sku"] = s.clone();
            }
            v
        })
        .collect();
    Ok(Reply::json(StatusCode::OK, json!({ "value": value })))
}

/// `StorageAccounts_ListKeys` (`storage.json` 2023-05-01): the account's two keys, full access.
fn storage_keys(store: &Store, ctx: &Ctx, sub: &str, rg: &str, account: &str) -> Result<Reply, ArmError> {
    check_api_version(ctx, kinds::STORAGE_API, "Microsoft.Storage/storageAccounts/listKeys")?;
    let a = address(store, sub, rg, &kinds::STORAGE_ACCOUNT, &[account.to_string()])?;
    if store.get(&a.key).is_none() {
        return Err(ArmError::not_found(kinds::STORAGE_ACCOUNT.arm_type, account, &a.rg_name));
    }
    let key = super::blob::account_key(&a.id);
    let key2 = super::blob::account_key(&format!("{}#2", a.id));
    Ok(Reply::json(
        StatusCode::OK,
        json!({"keys": [
            {"keyName": "key1", "value": key, "permissions": "Full", "creationTime": super::now_rfc3339()},
            {"keyName": "key2", "value": key2, "permissions": "Full", "creationTime": super::now_rfc3339()},
        ]}),
    ))
}
