//! Route 53 Resolver, as the sim serves it: moto's (`moto[route53resolver]`, JSON 1.1 with
//! `X-Amz-Target: Route53Resolver.*`) passed through unchanged, and a view of its inbound
//! endpoints the Kubernetes side reads when a VM resolves the cluster's names
//! ([`crate::kube::joins`]): each endpoint's VPC, status, addresses, and what its security groups
//! let in on port 53. The view is read from moto again after every call that can change it (an
//! endpoint made or deleted, a rule authorized or revoked or a group deleted where an endpoint
//! uses the group), so a Machine's reflection never waits on moto.

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Aws;

/// One inbound endpoint as a VM's DNS query meets it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct InboundEndpoint {
    pub id: String,
    pub vpc_id: String,
    pub status: String,
    pub ips: Vec<String>,
    pub security_groups: Vec<String>,
    /// The inbound rules of its security groups: (protocol, from port, to port, CIDR).
    pub rules: Vec<(String, i64, i64, String)>,
}

impl InboundEndpoint {
    /// Whether its security groups let DNS over UDP in from every address of `source` (the
    /// VM's subnet: Azure gives a NIC any free address of it). A query goes over UDP first
    /// (RFC 1035 4.2.1; TCP for answers too long for a datagram).
    pub fn admits_dns_from(&self, source: &ipnet::Ipv4Net) -> bool {
        admits(&self.rules, "udp", 53, source)
    }
}

/// Is this request Route 53 Resolver's (JSON 1.1, `X-Amz-Target: Route53Resolver.<Operation>`)?
pub fn is_resolver(headers: &HeaderMap) -> bool {
    target(headers).is_some()
}

fn target(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-amz-target").and_then(|v| v.to_str().ok()).and_then(|t| t.strip_prefix("Route53Resolver."))
}

fn json_error(status: u16, code: &str, message: &str) -> Response {
    let status = axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_REQUEST);
    let body = json!({ "__type": code, "message": message }).to_string();
    (status, [(axum::http::header::CONTENT_TYPE, "application/x-amz-json-1.1")], body).into_response()
}

/// The operations after which the view is read again.
const CHANGES: &[&str] = &[
    "CreateResolverEndpoint",
    "DeleteResolverEndpoint",
    "AssociateResolverEndpointIpAddress",
    "DisassociateResolverEndpointIpAddress",
];

/// Answers one Route 53 Resolver request through moto.
pub async fn serve(aws: &Aws, headers: &HeaderMap, body: &[u8]) -> Response {
    let operation = target(headers).unwrap_or_default().to_string();
    *aws.requests.lock().expect("requests lock").entry(format!("Route53Resolver.{operation}")).or_default() += 1;
    if headers.get(axum::http::header::AUTHORIZATION).is_none() {
        return json_error(400, "MissingAuthenticationTokenException", "Missing Authentication Token");
    }
    let Some(url) = aws.moto_url() else {
        return json_error(503, "ServiceUnavailableException", "the local AWS cloud has no moto behind it");
    };
    let (status, text) = match super::to_moto(aws, &url, headers, body.to_vec()).await {
        Ok(answer) => answer,
        Err(e) => return json_error(503, "ServiceUnavailableException", &format!("moto did not answer: {e}")),
    };
    if status == 200 && CHANGES.contains(&operation.as_str()) {
        refresh(aws, headers).await;
    }
    let status = axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
    (status, [(axum::http::header::CONTENT_TYPE, "application/x-amz-json-1.1")], text).into_response()
}

/// The caller's `Authorization` with its credential scope's service replaced by `service`, so
/// moto routes the call to that service in the caller's account and region.
fn signed_for(headers: &HeaderMap, service: &str, target: Option<&str>, content_type: &str) -> HeaderMap {
    let mut out = HeaderMap::new();
    let auth = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    // `AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request, ...`
    let rewritten = match auth.split_once("Credential=") {
        Some((head, rest)) => {
            let (cred, tail) = rest.split_once(',').unwrap_or((rest, ""));
            let mut parts: Vec<&str> = cred.split('/').collect();
            if parts.len() == 5 {
                parts[3] = service;
            }
            format!("{head}Credential={}{}{tail}", parts.join("/"), if tail.is_empty() { "" } else { "," })
        }
        None => auth.to_string(),
    };
    if let Ok(v) = rewritten.parse() {
        out.insert(axum::http::header::AUTHORIZATION, v);
    }
    if let Ok(v) = content_type.parse() {
        out.insert(axum::http::header::CONTENT_TYPE, v);
    }
    if let Some(t) = target.and_then(|t| t.parse().ok()) {
        out.insert("x-amz-target", t);
    }
    out
}

/// Whether a change to security group `group` (none named: any) can change the view: only a
/// group an inbound endpoint uses can.
pub fn watches_group(aws: &Aws, group: Option<&str>) -> bool {
    let view = aws.resolvers.lock().expect("resolvers lock");
    group.is_none_or(|g| view.iter().any(|e| e.security_groups.iter().any(|s| s == g)))
}

/// Reads the inbound endpoints and their groups' rules from moto into the view.
pub async fn refresh(aws: &Aws, headers: &HeaderMap) {
    let Some(url) = aws.moto_url() else { return };
    let json_call = |op: &str, body: Value| {
        let h = signed_for(
            headers,
            "route53resolver",
            Some(&format!("Route53Resolver.{op}")),
            "application/x-amz-json-1.1",
        );
        let url = url.clone();
        async move {
            let (status, text) = super::to_moto(aws, &url, &h, body.to_string().into_bytes()).await.ok()?;
            (status == 200).then(|| serde_json::from_str::<Value>(&text).ok()).flatten()
        }
    };
    let Some(listed) = json_call("ListResolverEndpoints", json!({ "MaxResults": 100 })).await else { return };
    let mut view = Vec::new();
    for e in listed["ResolverEndpoints"].as_array().into_iter().flatten() {
        if e["Direction"] != "INBOUND" {
            continue;
        }
        let id = e["Id"].as_str().unwrap_or_default().to_string();
        let ips = json_call("ListResolverEndpointIpAddresses", json!({ "ResolverEndpointId": id })).await;
        let ips: Vec<String> = ips
            .as_ref()
            .and_then(|i| i["IpAddresses"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|i| i["Ip"].as_str().map(String::from))
            .collect();
        let security_groups: Vec<String> = e["SecurityGroupIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect();
        let mut rules = Vec::new();
        for sg in &security_groups {
            rules.extend(group_rules(aws, &url, headers, sg).await);
        }
        view.push(InboundEndpoint {
            id,
            vpc_id: e["HostVPCId"].as_str().unwrap_or_default().to_string(),
            status: e["Status"].as_str().unwrap_or_default().to_string(),
            ips,
            security_groups,
            rules,
        });
    }
    *aws.resolvers.lock().expect("resolvers lock") = view;
}

/// Whether inbound `rules` (protocol, from port, to port, CIDR) let `protocol` to `port` in
/// from every address of `source` (`-1`: every protocol and port).
pub fn admits(rules: &[(String, i64, i64, String)], protocol: &str, port: i64, source: &ipnet::Ipv4Net) -> bool {
    // A protocol other than TCP, UDP and ICMP (ESP, `50`) has no ports: its rule admits all of it
    // (EC2 API Reference, `IpPermission`).
    let ported = matches!(protocol, "tcp" | "udp" | "icmp");
    rules.iter().any(|(proto, from, to, cidr)| {
        (proto == "-1" || (proto == protocol && (!ported || (*from <= port && port <= *to))))
            && cidr.parse::<ipnet::Ipv4Net>().is_ok_and(|n| n.contains(source))
    })
}

/// A group's inbound rules, from EC2's `DescribeSecurityGroupRules` (one flat item per rule).
pub(super) async fn group_rules(
    aws: &Aws,
    url: &str,
    headers: &HeaderMap,
    group: &str,
) -> Vec<(String, i64, i64, String)> {
    let h = signed_for(headers, "ec2", None, "application/x-www-form-urlencoded; charset=utf-8");
    let form = [
        ("Action", "DescribeSecurityGroupRules"),
        ("Version", "2016-11-15"),
        ("Filter.1.Name", "group-id"),
        ("Filter.1.Value.1", group),
    ];
    let body = serde_urlencoded::to_string(form).unwrap_or_default();
    let Ok((200, text)) = super::to_moto(aws, url, &h, body.into_bytes()).await else { return Vec::new() };
    let field = |chunk: &str, tag: &str| -> Option<String> {
        let open = format!("<{tag}>");
        let start = chunk.find(&open)? + open.len();
        Some(chunk[start..start + chunk[start..].find('<')?].to_string())
    };
    text.split("<securityGroupRuleId>")
        .skip(1)
        .filter(|chunk| field(chunk, "isEgress").as_deref() == Some("false"))
        .filter_map(|chunk| {
            let port = |tag| field(chunk, tag).and_then(|p| p.parse().ok()).unwrap_or(-1);
            Some((field(chunk, "ipProtocol")?, port("fromPort"), port("toPort"), field(chunk, "cidrIpv4")?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_needs_udp_53_from_the_source() {
        let e = |rules: Vec<(&str, i64, i64, &str)>| InboundEndpoint {
            rules: rules.into_iter().map(|(p, f, t, c)| (p.to_string(), f, t, c.to_string())).collect(),
            ..Default::default()
        };
        let vm: ipnet::Ipv4Net = "10.200.1.0/24".parse().unwrap();
        assert!(e(vec![("udp", 53, 53, "10.200.0.0/16")]).admits_dns_from(&vm));
        assert!(e(vec![("-1", -1, -1, "10.0.0.0/8")]).admits_dns_from(&vm));
        assert!(!e(vec![("tcp", 53, 53, "10.200.0.0/16")]).admits_dns_from(&vm), "TCP alone");
        assert!(!e(vec![("udp", 53, 53, "10.0.0.0/16")]).admits_dns_from(&vm), "another network");
        assert!(!e(vec![("udp", 53, 53, "10.200.1.0/25")]).admits_dns_from(&vm), "half the subnet");
        assert!(!e(vec![("udp", 5353, 5353, "10.200.0.0/16")]).admits_dns_from(&vm));
    }

    #[test]
    fn the_credential_scope_names_the_service_asked() {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            "AWS4-HMAC-SHA256 Credential=AKID/20261124/us-gov-west-1/ec2/aws4_request, SignedHeaders=host, Signature=ab"
                .parse()
                .unwrap(),
        );
        let out = signed_for(
            &h,
            "route53resolver",
            Some("Route53Resolver.ListResolverEndpoints"),
            "application/x-amz-json-1.1",
        );
        assert_eq!(
            out[axum::http::header::AUTHORIZATION],
            "AWS4-HMAC-SHA256 Credential=AKID/20261124/us-gov-west-1/route53resolver/aws4_request, SignedHeaders=host, Signature=ab"
        );
        assert_eq!(out["x-amz-target"], "Route53Resolver.ListResolverEndpoints");
    }
}
