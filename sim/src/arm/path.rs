//! Parsing of ARM request paths (case-insensitive, tolerant of `//`) into what they address.

use super::kinds::{self, Kind};

/// What a request path addresses.
#[derive(Debug, Clone)]
pub enum Target {
    Token {
        tenant: String,
    },
    /// `GET /{tenant}/v2.0/.well-known/openid-configuration`: Entra's OpenID Connect metadata.
    OpenIdConfiguration {
        tenant: String,
    },
    /// `GET /common/discovery/instance`: Entra's instance discovery (which MSAL asks for the
    /// aliases of the authority it caches tokens under).
    InstanceDiscovery,
    /// `.../operations/{id}` (Azure-AsyncOperation) or `.../operationResults/{id}` (Location).
    Operation {
        sub: String,
        id: String,
        location_style: bool,
    },
    ResourceGroups {
        sub: String,
    },
    ResourceGroup {
        sub: String,
        rg: String,
    },
    /// `GET /subscriptions/{s}[/resourceGroups/{rg}]/resources`.
    GenericList {
        sub: String,
        rg: Option<String>,
    },
    /// List of a top-level type in a subscription or resource group.
    List {
        sub: String,
        rg: Option<String>,
        kind: &'static Kind,
    },
    /// A typed resource; `names` has one entry per level (1 top-level, 2 child).
    Resource {
        sub: String,
        rg: String,
        kind: &'static Kind,
        names: Vec<String>,
    },
    /// List of child resources of a parent (`parents`: the names down to it).
    Children {
        sub: String,
        rg: String,
        kind: &'static Kind,
        parents: Vec<String>,
    },
    /// `POST .../Microsoft.Storage/storageAccounts/{a}/listKeys`.
    StorageKeys {
        sub: String,
        rg: String,
        account: String,
    },
    SharedKey {
        sub: String,
        rg: String,
        connection: String,
    },
    GatewayConnections {
        sub: String,
        rg: String,
        gateway: String,
    },
    RoleAssignments {
        scope: String,
    },
    RoleAssignment {
        scope: String,
        name: String,
    },
    RoleDefinitions {
        scope: String,
    },
    RoleDefinition {
        scope: String,
        id: String,
    },
    /// `GET /subscriptions/{s}/providers/Microsoft.Compute/skus`: the VM sizes offered.
    ComputeSkus {
        sub: String,
    },
    /// `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages`: vCPU quotas.
    ComputeUsages {
        sub: String,
        location: String,
    },
    /// `GET .../Microsoft.Compute/locations/{l}/publishers/{p}/artifacttypes/vmimage/offers/{o}/skus/{k}/versions`.
    ImageVersions {
        sub: String,
        location: String,
        publisher: String,
        offer: String,
        sku: String,
    },
    /// `{scope}/providers/Microsoft.Resources/tags/default`: the tags of the resource at `scope`
    /// (`resources.json` `Tags_GetAtScope`, `Tags_CreateOrUpdateAtScope`, `Tags_UpdateAtScope`).
    TagsAtScope {
        sub: String,
        scope: String,
    },
    Unknown,
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Parses a path (without query).
pub fn parse(path: &str) -> Target {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if let [head @ .., p, ns, t, d] = segs.as_slice()
        && eq(p, "providers")
        && eq(ns, "Microsoft.Resources")
        && eq(t, "tags")
        && eq(d, "default")
        && head.len() >= 2
        && eq(head[0], "subscriptions")
    {
        return Target::TagsAtScope { sub: head[1].to_string(), scope: format!("/{}", head.join("/")) };
    }
    // Authorization: `{scope}/providers/Microsoft.Authorization/{roleAssignments|roleDefinitions}[/{name}]`.
    if let Some(p) = (0..segs.len().saturating_sub(2))
        .rev()
        .find(|&i| eq(segs[i], "providers") && eq(segs[i + 1], "Microsoft.Authorization"))
    {
        let scope = format!("/{}", segs[..p].join("/"));
        let rest = &segs[p + 2..];
        return match rest {
            [t] if eq(t, "roleAssignments") => Target::RoleAssignments { scope },
            [t, n] if eq(t, "roleAssignments") => Target::RoleAssignment { scope, name: n.to_string() },
            [t] if eq(t, "roleDefinitions") => Target::RoleDefinitions { scope },
            [t, n] if eq(t, "roleDefinitions") => Target::RoleDefinition { scope, id: n.to_string() },
            _ => Target::Unknown,
        };
    }
    match segs.as_slice() {
        [tenant, o, v, t] if eq(o, "oauth2") && eq(v, "v2.0") && eq(t, "token") => {
            Target::Token { tenant: tenant.to_string() }
        }
        [c, d, i] if eq(c, "common") && eq(d, "discovery") && eq(i, "instance") => Target::InstanceDiscovery,
        [tenant, v, w, o] if eq(v, "v2.0") && eq(w, ".well-known") && eq(o, "openid-configuration") => {
            Target::OpenIdConfiguration { tenant: tenant.to_string() }
        }
        [s, sub, rest @ ..] if eq(s, "subscriptions") => parse_sub(sub.to_string(), rest),
        _ => Target::Unknown,
    }
}

fn parse_sub(sub: String, rest: &[&str]) -> Target {
    match rest {
        [o, id] if eq(o, "operationresults") => Target::Operation { sub, id: id.to_string(), location_style: true },
        [r] if eq(r, "resources") => Target::GenericList { sub, rg: None },
        [p, _ns, l, _loc, o, id] if eq(p, "providers") && eq(l, "locations") => {
            if eq(o, "operations") {
                Target::Operation { sub, id: id.to_string(), location_style: false }
            } else if eq(o, "operationResults") {
                Target::Operation { sub, id: id.to_string(), location_style: true }
            } else {
                Target::Unknown
            }
        }
        [p, ns, ty] if eq(p, "providers") && eq(ns, "Microsoft.Compute") && eq(ty, "skus") => {
            Target::ComputeSkus { sub }
        }
        [p, ns, l, location, pubs, publisher, at, vmimage, offers, offer, skus, sku, versions]
            if eq(p, "providers")
                && eq(ns, "Microsoft.Compute")
                && eq(l, "locations")
                && eq(pubs, "publishers")
                && eq(at, "artifacttypes")
                && eq(vmimage, "vmimage")
                && eq(offers, "offers")
                && eq(skus, "skus")
                && eq(versions, "versions") =>
        {
            Target::ImageVersions {
                sub,
                location: location.to_string(),
                publisher: publisher.to_string(),
                offer: offer.to_string(),
                sku: sku.to_string(),
            }
        }
        [p, ns, l, location, u]
            if eq(p, "providers") && eq(ns, "Microsoft.Compute") && eq(l, "locations") && eq(u, "usages") =>
        {
            Target::ComputeUsages { sub, location: location.to_string() }
        }
        [p, ns, ty] if eq(p, "providers") => match kinds::top_level(ns, ty) {
            Some(kind) => Target::List { sub, rg: None, kind },
            None => Target::Unknown,
        },
        [r] if eq(r, "resourcegroups") => Target::ResourceGroups { sub },
        [r, rg] if eq(r, "resourcegroups") => Target::ResourceGroup { sub, rg: rg.to_string() },
        [r, rg, x] if eq(r, "resourcegroups") && eq(x, "resources") => {
            Target::GenericList { sub, rg: Some(rg.to_string()) }
        }
        [r, rg, p, ns, ty, tail @ ..] if eq(r, "resourcegroups") && eq(p, "providers") => {
            let rg = rg.to_string();
            let Some(kind) = kinds::top_level(ns, ty) else { return Target::Unknown };
            match tail {
                [] => Target::List { sub, rg: Some(rg), kind },
                [name] => Target::Resource { sub, rg, kind, names: vec![name.to_string()] },
                [name, x] if std::ptr::eq(kind, &kinds::CONNECTION) && eq(x, "sharedkey") => {
                    Target::SharedKey { sub, rg, connection: name.to_string() }
                }
                [name, x] if std::ptr::eq(kind, &kinds::VNG) && eq(x, "connections") => {
                    Target::GatewayConnections { sub, rg, gateway: name.to_string() }
                }
                [name, x] if std::ptr::eq(kind, &kinds::STORAGE_ACCOUNT) && eq(x, "listKeys") => {
                    Target::StorageKeys { sub, rg, account: name.to_string() }
                }
                [name, cty] => match kinds::child(kind, cty) {
                    Some(ck) => Target::Children { sub, rg, kind: ck, parents: vec![name.to_string()] },
                    None => Target::Unknown,
                },
                [name, cty, cname, gty] => match kinds::child(kind, cty).and_then(|ck| kinds::child(ck, gty)) {
                    Some(gk) => {
                        Target::Children { sub, rg, kind: gk, parents: vec![name.to_string(), cname.to_string()] }
                    }
                    None => Target::Unknown,
                },
                [name, cty, cname, gty, gname] => match kinds::child(kind, cty).and_then(|ck| kinds::child(ck, gty)) {
                    Some(gk) => Target::Resource {
                        sub,
                        rg,
                        kind: gk,
                        names: vec![name.to_string(), cname.to_string(), gname.to_string()],
                    },
                    None => Target::Unknown,
                },
                [name, cty, cname] => match kinds::child(kind, cty) {
                    Some(ck) => {
                        Target::Resource { sub, rg, kind: ck, names: vec![name.to_string(), cname.to_string()] }
                    }
                    None => Target::Unknown,
                },
                _ => Target::Unknown,
            }
        }
        _ => Target::Unknown,
    }
}

/// The canonical id of a typed resource.
pub fn resource_id(sub: &str, rg: &str, kind: &Kind, names: &[String]) -> String {
    let mut id = format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/{}", kind.namespace);
    let mut chain: Vec<&Kind> = vec![kind];
    while let Some(p) = chain.last().and_then(|k| k.parent).and_then(kinds::by_type) {
        chain.push(p);
    }
    chain.reverse();
    for (k, n) in chain.iter().zip(names) {
        id.push('/');
        id.push_str(k.segment);
        id.push('/');
        id.push_str(n);
    }
    id
}

pub fn rg_id(sub: &str, rg: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_shapes_the_clients_send() {
        assert!(matches!(parse("/t1/oauth2/v2.0/token"), Target::Token { tenant } if tenant == "t1"));
        assert!(matches!(
            parse("/t1/v2.0/.well-known/openid-configuration"),
            Target::OpenIdConfiguration { tenant } if tenant == "t1"
        ));
        assert!(matches!(
            parse("/subscriptions/s/resourcegroups/rg/providers/microsoft.network/virtualnetworks/v/subnets/GatewaySubnet"),
            Target::Resource { kind, names, .. } if std::ptr::eq(kind, &kinds::SUBNET) && names[1] == "GatewaySubnet"
        ));
        assert!(matches!(
            parse("//subscriptions/s/resourceGroups/rg/providers/Microsoft.Authorization/roleAssignments/abc"),
            Target::RoleAssignment { scope, name } if scope == "/subscriptions/s/resourceGroups/rg" && name == "abc"
        ));
        assert!(matches!(
            parse("/subscriptions/s/providers/Microsoft.Network/locations/eastus/operations/op1"),
            Target::Operation { location_style: false, .. }
        ));
        assert!(matches!(
            parse("/subscriptions/s/providers/Microsoft.Network/virtualNetworks"),
            Target::List { rg: None, .. }
        ));
        assert!(matches!(
            parse("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/bogus/x"),
            Target::Unknown
        ));
    }

    #[test]
    fn builds_child_ids() {
        let id = resource_id("s", "rg", &kinds::SUBNET, &["v".into(), "GatewaySubnet".into()]);
        assert_eq!(
            id,
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/GatewaySubnet"
        );
    }
}
