//! The Azure Resource Manager emulator: token endpoint, resource providers (Network,
//! ManagedIdentity, Authorization, Resources), long-running operations, throttling and faults.

pub mod auth;
pub mod authz;
pub mod blob;
pub mod clouds;
pub mod complete;
pub mod compute;
pub mod error;
pub mod gallery;
pub mod kinds;
pub mod lro;
pub mod operation;
pub mod path;
pub mod refs;
pub mod resources;
pub mod rules;
pub mod skus;
pub mod spec;
pub mod store;
pub mod tags;
pub mod throttle;
pub mod validate;

use crate::world::{SimConfig, World};
use auth::{TokenInfo, Tokens};
use axum::http::{HeaderMap, Method, StatusCode};
use error::ArmError;
use path::Target;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;
use store::Store;
use throttle::{Buckets, Class};

/// The emulator's state (all behind short-lived mutexes; no lock is held across an await).
#[derive(Debug, Default)]
pub struct Arm {
    pub store: Mutex<Store>,
    pub tokens: Mutex<Tokens>,
    pub buckets: Mutex<Buckets>,
    /// Per client id, how Resource Manager last judged its access: the code and message of a
    /// refusal (401, 403), or `None` after a request it was allowed to make.
    pub access: Mutex<std::collections::HashMap<String, Option<(String, String)>>>,
}

/// A successful ARM answer.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Option<Value>,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn json(status: StatusCode, body: Value) -> Reply {
        Reply { status, body: Some(body), headers: Vec::new() }
    }
    pub fn empty(status: StatusCode) -> Reply {
        Reply { status, body: None, headers: Vec::new() }
    }
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// Everything a provider handler needs about the request.
pub struct Ctx<'a> {
    pub method: &'a Method,
    /// `http://host:port`, for operation URLs.
    pub base: String,
    pub query: HashMap<String, String>,
    pub caller: TokenInfo,
    pub now: Instant,
    pub world: &'a World,
    pub config: SimConfig,
    pub body: &'a [u8],
}

impl Ctx<'_> {
    pub fn api_version(&self) -> &str {
        self.query.get("api-version").map(String::as_str).unwrap_or_default()
    }
    /// Parses the body as JSON (400 InvalidRequestContent otherwise).
    pub fn json(&self) -> Result<Value, ArmError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Err(ArmError::invalid_content(
                "The request content was invalid and could not be deserialized: the body is empty.",
            ));
        }
        serde_json::from_slice(self.body).map_err(|e| {
            ArmError::invalid_content(format!("The request content was invalid and could not be deserialized: {e}"))
        })
    }
}

/// The counter key of a request, e.g. `PUT Microsoft.Network/virtualNetworkGateways`.
pub fn operation_name(method: &Method, target: &Target) -> String {
    let what = match target {
        Target::Token { .. } => "token".to_string(),
        Target::OpenIdConfiguration { .. } => "openid-configuration".to_string(),
        Target::InstanceDiscovery => "instance-discovery".to_string(),
        Target::TagsAtScope { .. } => "Microsoft.Resources/tags".to_string(),
        Target::Operation { .. } => "operations".to_string(),
        Target::ResourceGroups { .. } => "Microsoft.Resources/resourceGroups (list)".to_string(),
        Target::ResourceGroup { .. } => "Microsoft.Resources/resourceGroups".to_string(),
        Target::GenericList { .. } => "Microsoft.Resources/resources (list)".to_string(),
        Target::List { kind, .. } => format!("{} (list)", kind.arm_type),
        Target::Resource { kind, .. } => kind.arm_type.to_string(),
        Target::Children { kind, .. } => format!("{} (list)", kind.arm_type),
        Target::SharedKey { .. } => "Microsoft.Network/connections/sharedkey".to_string(),
        Target::StorageKeys { .. } => "Microsoft.Storage/storageAccounts/listKeys".to_string(),
        Target::GatewayConnections { .. } => "Microsoft.Network/virtualNetworkGateways/connections (list)".to_string(),
        Target::RoleAssignments { .. } => "Microsoft.Authorization/roleAssignments (list)".to_string(),
        Target::RoleAssignment { .. } => "Microsoft.Authorization/roleAssignments".to_string(),
        Target::RoleDefinitions { .. } => "Microsoft.Authorization/roleDefinitions (list)".to_string(),
        Target::RoleDefinition { .. } => "Microsoft.Authorization/roleDefinitions".to_string(),
        Target::ComputeSkus { .. } => "Microsoft.Compute/skus (list)".to_string(),
        Target::ComputeUsages { .. } => "Microsoft.Compute/locations/usages (list)".to_string(),
        Target::ImageVersions { .. } => "Microsoft.Compute/locations/publishers/.../versions (list)".to_string(),
        Target::Unknown => "unknown".to_string(),
    };
    format!("{method} {what}")
}

/// The subscription a target belongs to (for throttling).
pub fn subscription_of(target: &Target) -> Option<String> {
    match target {
        Target::Operation { sub, .. }
        | Target::ResourceGroups { sub }
        | Target::ResourceGroup { sub, .. }
        | Target::GenericList { sub, .. }
        | Target::List { sub, .. }
        | Target::Resource { sub, .. }
        | Target::Children { sub, .. }
        | Target::SharedKey { sub, .. }
        | Target::StorageKeys { sub, .. }
        | Target::GatewayConnections { sub, .. }
        | Target::ComputeSkus { sub }
        | Target::TagsAtScope { sub, .. }
        | Target::ComputeUsages { sub, .. }
        | Target::ImageVersions { sub, .. } => Some(sub.clone()),
        Target::RoleAssignments { scope }
        | Target::RoleAssignment { scope, .. }
        | Target::RoleDefinitions { scope }
        | Target::RoleDefinition { scope, .. } => {
            let segs: Vec<&str> = scope.split('/').filter(|s| !s.is_empty()).collect();
            match segs.as_slice() {
                [s, sub, ..] if s.eq_ignore_ascii_case("subscriptions") => Some(sub.to_string()),
                _ => None,
            }
        }
        Target::Token { .. } | Target::OpenIdConfiguration { .. } | Target::InstanceDiscovery | Target::Unknown => None,
    }
}

impl Arm {
    /// Throttling: Ok(remaining) or the 429.
    pub fn throttle(
        &self,
        config: &SimConfig,
        sub: &str,
        principal: &str,
        method: &Method,
        now: Instant,
    ) -> Result<Option<(Class, u32)>, ArmError> {
        if !config.throttle.enabled {
            return Ok(None);
        }
        let class = Class::of(method);
        let mut b = self.buckets.lock().expect("buckets lock");
        match b.take(sub, principal, class, &config.throttle, now) {
            Ok(rem) => Ok(Some((class, rem))),
            Err(wait) => {
                let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
                Err(ArmError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "SubscriptionRequestsThrottled",
                    format!("Number of '{}' requests for subscription '{sub}' actor '{principal}' exceeded. Please try again after '{secs}' seconds after the last request. See https://aka.ms/ARMThrottling for more information.", class.name().trim_end_matches('s')),
                )
                .with_header("Retry-After", secs.to_string())
                .with_header(&format!("x-ms-ratelimit-remaining-subscription-{}", class.name()), "0"))
            }
        }
    }

    /// Serves one ARM request (authenticated, not throttled) against the store.
    pub fn dispatch(&self, target: &Target, ctx: &Ctx) -> Result<Reply, ArmError> {
        let mut store = self.store.lock().expect("store lock");
        store.settle(ctx.now);
        match target {
            Target::Operation { id, location_style, .. } => lro::operation(&store, ctx, id, *location_style),
            Target::ResourceGroups { .. }
            | Target::ResourceGroup { .. }
            | Target::GenericList { .. }
            | Target::List { .. }
            | Target::Resource { .. }
            | Target::Children { .. }
            | Target::SharedKey { .. }
            | Target::StorageKeys { .. }
            | Target::GatewayConnections { .. } => resources::handle(&mut store, ctx, target),
            Target::RoleAssignments { .. }
            | Target::RoleAssignment { .. }
            | Target::RoleDefinitions { .. }
            | Target::RoleDefinition { .. } => authz::handle(&mut store, ctx, target),
            Target::TagsAtScope { scope, .. } => tags::at_scope(&mut store, ctx, scope),
            Target::ComputeSkus { .. } if *ctx.method == Method::GET => skus::list(ctx),
            Target::ComputeUsages { location, .. } if *ctx.method == Method::GET => skus::usages(ctx, &store, location),
            Target::ImageVersions { sub, location, publisher, offer, sku } if *ctx.method == Method::GET => {
                skus::image_list(ctx, sub, location, (publisher, offer, sku))
            }
            Target::ComputeSkus { .. } | Target::ComputeUsages { .. } | Target::ImageVersions { .. } => {
                Err(ArmError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    "The requested resource does not support the method: only GET is served.",
                ))
            }
            Target::Token { .. } | Target::OpenIdConfiguration { .. } | Target::InstanceDiscovery | Target::Unknown => {
                Err(ArmError::bad_request(
                    "InvalidResourceType",
                    "The resource type could not be found in the namespace, or this path is not emulated by xcsp-sim.",
                ))
            }
        }
    }

    /// Forgets everything.
    pub fn reset(&self) {
        *self.store.lock().expect("store lock") = Store::default();
        *self.tokens.lock().expect("tokens lock") = Tokens::default();
        self.buckets.lock().expect("buckets lock").clear();
    }
}

/// Checks the api-version query parameter against the versions a type supports.
pub fn check_api_version(ctx: &Ctx, supported: &[&str], what: &str) -> Result<(), ArmError> {
    let v = ctx.api_version();
    if v.is_empty() {
        return Err(ArmError::bad_request(
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    }
    if !supported.contains(&v) {
        return Err(ArmError::bad_request(
            "NoRegisteredProviderFound",
            format!(
                "No registered resource provider found for location 'global' and API version '{v}' for type '{what}'. The supported api-versions are '{}'.",
                supported.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Now as RFC 3339 (UTC).
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// Parses `$filter` clauses `a eq 'b' and c eq 'd'` (and `atScope()`), keys lower-cased.
pub fn parse_filter(filter: &str) -> Result<Vec<(String, String)>, ArmError> {
    let mut out = Vec::new();
    for clause in split_and(filter) {
        let clause = clause.trim();
        if clause.is_empty() {
            continue;
        }
        if clause.eq_ignore_ascii_case("atScope()") {
            out.push(("atscope()".to_string(), String::new()));
            continue;
        }
        let mut parts = clause.splitn(3, ' ');
        let (Some(k), Some(op), Some(v)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(ArmError::bad_request(
                "InvalidFilterInQueryString",
                format!("Invalid $filter clause '{clause}'."),
            ));
        };
        let v = v.trim();
        if !(op.eq_ignore_ascii_case("eq") && v.starts_with('\'') && v.ends_with('\'') && v.len() >= 2) {
            return Err(ArmError::bad_request(
                "InvalidFilterInQueryString",
                format!("Invalid $filter clause '{clause}'; only \"name eq 'value'\" is supported."),
            ));
        }
        out.push((k.to_ascii_lowercase(), v[1..v.len() - 1].replace("''", "'")));
    }
    Ok(out)
}

fn split_and(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let words: Vec<&str> = s.split(' ').collect();
    for w in words {
        if !in_quote && w.eq_ignore_ascii_case("and") {
            parts.push(std::mem::take(&mut cur));
            continue;
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
        in_quote ^= w.matches('\'').count() % 2 == 1;
    }
    parts.push(cur);
    parts
}

/// Whether a resource body matches a tag filter (`tagName`/`tagValue`).
pub fn matches_tag_filter(body: &Value, filter: &[(String, String)]) -> bool {
    let name = filter.iter().find(|(k, _)| k == "tagname").map(|(_, v)| v);
    let value = filter.iter().find(|(k, _)| k == "tagvalue").map(|(_, v)| v);
    let Some(name) = name else { return true };
    let tags = body["tags"].as_object();
    let Some((_, v)) = tags.into_iter().flatten().find(|(k, _)| k.eq_ignore_ascii_case(name)) else { return false };
    match value {
        Some(want) => v.as_str() == Some(want.as_str()),
        None => true,
    }
}

/// Reads the `Authorization` header.
pub fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tag_filters_parse_and_match() {
        let f = parse_filter("tagName eq 'xcsp-stack' and tagValue eq 'it''s'").unwrap();
        assert_eq!(f, vec![("tagname".into(), "xcsp-stack".into()), ("tagvalue".into(), "it's".into())]);
        assert!(matches_tag_filter(&json!({"tags": {"XCSP-stack": "it's"}}), &f));
        assert!(!matches_tag_filter(&json!({"tags": {"xcsp-stack": "other"}}), &f));
        assert!(!matches_tag_filter(&json!({}), &f));
        let f = parse_filter("roleName eq 'Contributor and more'").unwrap();
        assert_eq!(f[0].1, "Contributor and more");
        assert!(parse_filter("tagName ne 'x'").is_err());
    }
}
