//! Between xcsp attributes and EC2's requests and answers: tags and filters, the address a
//! resource's tags name, the attributes each type reads back as (same names and shapes as the
//! plan's, so that a refreshed resource diffs cleanly against the spec), and what an SDK error
//! means to the engine. No IO here: the calls are in the family modules.

use std::collections::BTreeMap;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    CustomerGateway, Filter, ResourceType as AwsType, Tag, TagSpecification, VpnConnection, VpnGateway,
};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, ProviderError};
use xcsp_core::{ADDRESS_TAG, Address, ResourceType as T, STACK_TAG, Value};

use crate::{Result, tunnel};

/// A state in which the resource exists and is (or will be) usable: not `deleting`/`deleted`.
/// A VPN connection is `modifying` while a tunnel change is applied, a state aws-sdk-ec2's
/// `VpnState` does not list (terraform-provider-aws waits it out as `vpnStateModifying`).
pub fn live(state: Option<&str>) -> bool {
    matches!(state, Some("pending" | "available" | "modifying"))
}

pub fn failed(address: &Address, code: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::Failed { address: address.to_string(), code: code.into(), message: message.into() }
}

/// A string attribute a create cannot do without: `MissingAttribute`, naming it.
pub fn required(r: &Reader, key: &str) -> Result<String> {
    r.opt_str(key).ok_or_else(|| failed(r.address, "MissingAttribute", key))
}

/// An SDK error as the engine needs it.
pub fn sdk_error<E: ProvideErrorMetadata + std::fmt::Display>(address: &Address, e: E) -> ProviderError {
    let code = e.code().unwrap_or("Unknown").to_string();
    let message = e.message().map(String::from).unwrap_or_else(|| e.to_string());
    // Only "this resource is gone" is NotFound; another's absence (a VPC, a route table) is a failure.
    let own = match address.rtype {
        T::AwsVpnGateway | T::AwsVpnGatewayAttachment | T::AwsRoutePropagation => "InvalidVpnGatewayID.NotFound",
        T::AwsCustomerGateway => "InvalidCustomerGatewayID.NotFound",
        T::AwsVpnConnection | T::AwsVpnConnectionRoute => "InvalidVpnConnectionID.NotFound",
        T::AwsSecurityGroup => "InvalidGroup.NotFound",
        T::AwsResolverEndpoint => "ResourceNotFoundException",
        _ => "-",
    };
    match code.as_str() {
        c if c == own => ProviderError::NotFound { address: address.to_string() },
        "IncorrectState" | "DependencyViolation" | "InvalidGatewayID.InUse" => {
            ProviderError::InUse { address: address.to_string(), detail: format!("{code}: {message}") }
        }
        "RequestLimitExceeded" | "Throttling" | "ThrottlingException" => {
            ProviderError::Throttled { address: address.to_string(), detail: message, retry_after: None }
        }
        _ => ProviderError::Failed { address: address.to_string(), code, message },
    }
}

/// The tags a resource should carry: the plan's `tags` (the spec's, for the user), with the
/// stack and address tags always xcsp's own (adoption and sweeps find resources by them).
pub fn desired_tags(stack: &str, r: &Reader) -> BTreeMap<String, String> {
    let mut tags = r.string_map("tags");
    tags.insert(STACK_TAG.into(), stack.into());
    tags.insert(ADDRESS_TAG.into(), r.address.to_string());
    tags
}

pub fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

pub fn tags_value(tags: &BTreeMap<String, String>) -> Value {
    Value::Map(tags.iter().map(|(k, v)| (k.clone(), Value::string(v))).collect())
}

pub fn tag_spec(kind: AwsType, tags: &BTreeMap<String, String>) -> TagSpecification {
    let tags = tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
    TagSpecification::builder().resource_type(kind).set_tags(Some(tags)).build()
}

pub fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder().name(name).set_values(Some(values.iter().map(|v| v.to_string()).collect())).build()
}

/// The address a resource's tags name, if it is this stack's.
pub fn owner(stack: &str, tags: &[Tag]) -> Option<Address> {
    owner_by(stack, |k| tags.iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()))
}

/// The address the tags `get` reads name (by key), if it is this stack's: for any AWS API's tags.
pub fn owner_by<'a>(stack: &str, get: impl Fn(&str) -> Option<&'a str>) -> Option<Address> {
    (get(STACK_TAG) == Some(stack)).then(|| get(ADDRESS_TAG)?.parse().ok()).flatten()
}

/// A virtual private gateway's attributes (but its id), with the `tags` it carries.
pub fn vgw_attributes(g: &VpnGateway, tags: &BTreeMap<String, String>) -> Attributes {
    let mut out = Attributes::new();
    out.insert("amazon_side_asn".into(), Value::int(g.amazon_side_asn().unwrap_or_default()));
    out.insert("type".into(), Value::string("ipsec.1"));
    out.insert("tags".into(), tags_value(tags));
    out
}

/// A customer gateway's ASN: `bgpAsnExtended` when it was created with one, else `bgpAsn`.
fn cgw_asn(g: &CustomerGateway) -> i64 {
    g.bgp_asn_extended().or(g.bgp_asn()).and_then(|s| s.parse().ok()).unwrap_or_default()
}

/// A customer gateway's attributes (but its id), with the `tags` it carries.
pub fn cgw_attributes(g: &CustomerGateway, tags: &BTreeMap<String, String>) -> Attributes {
    let mut out = Attributes::new();
    out.insert("ip_address".into(), Value::string(g.ip_address().unwrap_or_default()));
    out.insert("bgp_asn".into(), Value::int(cgw_asn(g)));
    out.insert("type".into(), Value::string(g.r#type().unwrap_or("ipsec.1")));
    out.insert("tags".into(), tags_value(tags));
    out
}

/// A VPN connection's attributes: its gateways, its tunnels (tunnel 1 at `first_ip`, else as
/// [`tunnel::order`] finds it from the inside ranges `cidrs`), tags and id.
pub fn connection_attributes(
    c: &VpnConnection,
    id: &str,
    first_ip: Option<&str>,
    cidrs: [Option<&str>; 2],
) -> Attributes {
    let mut out = Attributes::new();
    out.insert("customer_gateway".into(), Value::string(c.customer_gateway_id().unwrap_or_default()));
    out.insert("vpn_gateway_id".into(), Value::string(c.vpn_gateway_id().unwrap_or_default()));
    tunnel_outputs(&mut out, c, first_ip, cidrs);
    out.insert("tags".into(), tags_value(&tag_map(c.tags())));
    out.insert("id".into(), Value::string(id));
    out
}

fn tunnel_outputs(out: &mut Attributes, c: &VpnConnection, first_ip: Option<&str>, cidrs: [Option<&str>; 2]) {
    let (options, telemetry) = (c.options(), c.vgw_telemetry());
    let mut tunnels: Vec<&aws_sdk_ec2::types::TunnelOption> =
        options.map(|o| o.tunnel_options().iter().collect()).unwrap_or_default();
    tunnel::order(&mut tunnels, first_ip, cidrs);
    if let Some(o) = options {
        out.insert("static_routes_only".into(), Value::Bool(o.static_routes_only().unwrap_or(false)));
    }
    let read: Vec<tunnel::Tunnel> = tunnels.iter().map(|t| tunnel::Tunnel::read(t)).collect();
    tunnel::outputs(out, &read);
    for (i, t) in tunnels.iter().enumerate().take(2) {
        let n = i + 1;
        let ip = t.outside_ip_address().unwrap_or_default().to_string();
        out.insert(format!("tunnel{n}_address"), Value::string(&ip));
        if let Some(tel) = telemetry.iter().find(|x| x.outside_ip_address() == Some(ip.as_str())) {
            out.insert(format!("tunnel{n}_status"), Value::string(tel.status().map(|s| s.as_str()).unwrap_or("DOWN")));
            out.insert(format!("tunnel{n}_status_message"), Value::string(tel.status_message().unwrap_or_default()));
            // What `xcsp status` shows beside the state: the routes BGP accepted, and since when
            // the tunnel is in its state (VgwTelemetry, EC2 API reference).
            if let Some(routes) = tel.accepted_route_count() {
                out.insert(format!("tunnel{n}_accepted_routes"), Value::int(i64::from(routes)));
            }
            if let Some(when) = tel.last_status_change() {
                let when = when.fmt(aws_smithy_types::date_time::Format::DateTime).unwrap_or_default();
                out.insert(format!("tunnel{n}_last_status_change"), Value::string(when));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_types::error::ErrorMetadata;

    fn error(code: &str) -> ErrorMetadata {
        ErrorMetadata::builder().code(code).message("said EC2").build()
    }

    #[test]
    fn only_the_resources_own_absence_is_not_found() {
        let vgw = Address::new(T::AwsVpnGatewayAttachment, "link");
        assert_eq!(
            sdk_error(&vgw, error("InvalidVpnGatewayID.NotFound")),
            ProviderError::NotFound { address: "aws_vpn_gateway_attachment.link".into() }
        );
        assert_eq!(
            sdk_error(&vgw, error("InvalidVpcID.NotFound")),
            failed(&vgw, "InvalidVpcID.NotFound", "said EC2"),
            "another's absence"
        );
        assert!(matches!(sdk_error(&vgw, error("IncorrectState")), ProviderError::InUse { detail, .. }
            if detail == "IncorrectState: said EC2"));
        assert!(matches!(sdk_error(&vgw, error("RequestLimitExceeded")), ProviderError::Throttled { .. }));
    }

    #[test]
    fn the_stack_and_address_tags_are_xcsps_own() {
        let address = Address::new(T::AwsCustomerGateway, "peer");
        let mut attrs = Attributes::new();
        let tags = [("team", "net"), (STACK_TAG, "someone else")].map(|(k, v)| (k.to_string(), Value::string(v)));
        attrs.insert("tags".into(), Value::Map(tags.into_iter().collect()));
        let want = desired_tags("il5", &Reader::new(&address, &attrs));
        assert_eq!(want["team"], "net");
        assert_eq!(want[STACK_TAG], "il5");
        assert_eq!(want[ADDRESS_TAG], "aws_customer_gateway.peer");
        let tags: Vec<Tag> = want.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
        assert_eq!(owner("il5", &tags), Some(address));
        assert_eq!(owner("other", &tags), None);
        assert_eq!(tag_map(&tags), want);
    }
}
