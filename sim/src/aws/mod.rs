//! The local AWS cloud: moto server (PyPI `moto[ec2,...]==5.2.5`, started as a child process)
//! behind a fidelity layer that speaks the EC2 query protocol on the sim's own port.
//!
//! The layer owns the Site-to-Site VPN resources ([`vpn`]), adds route propagation to moto's
//! DescribeRouteTables, splits CreateTags/DeleteTags between itself and moto, injects
//! `RequestLimitExceeded` and 5xx on demand, counts requests per action, and forwards everything
//! else (VPCs, subnets, route tables, security groups, ...) to moto unchanged. Route 53
//! Resolver's JSON calls go to moto through [`resolver`].

pub mod cluster;
pub mod fixture;
pub mod query;
pub mod resolver;
pub mod vpn;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::world::World;
use query::{Ec2Error, Params};
use vpn::{Timing, VpnStore};

/// A moto server on a loopback port, killed when dropped.
pub struct Moto {
    pub url: String,
    child: Child,
}

/// Why moto could not start.
#[derive(Debug, thiserror::Error)]
pub enum MotoError {
    #[error(
        "moto is not installed at {0}: run scripts/moto-setup (it creates that venv with the pinned moto), or set XCSP_MOTO_VENV"
    )]
    NotInstalled(String),
    #[error("moto did not start: {0}")]
    Start(String),
}

impl Moto {
    /// The venv scripts/moto-setup makes.
    pub fn venv() -> PathBuf {
        match std::env::var_os("XCSP_MOTO_VENV") {
            Some(v) => PathBuf::from(v),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/xcsp-moto"),
        }
    }

    /// Starts moto on a free port and waits until it answers.
    pub fn start() -> Result<Moto, MotoError> {
        Moto::start_with(AWS_RULES_PER_GROUP)
    }

    /// Like [`Moto::start`], for an account whose "inbound rules per security group" quota is
    /// `rules_per_group` (AWS's default is 60, adjustable; moto hard-codes the default, so a
    /// raised quota runs moto with that one check replaced).
    pub fn start_with(rules_per_group: u32) -> Result<Moto, MotoError> {
        let bin = Moto::venv().join("bin/moto_server");
        if !bin.exists() {
            return Err(MotoError::NotInstalled(bin.display().to_string()));
        }
        let port = crate::ports::free_port().map_err(|e| MotoError::Start(e.to_string()))?;
        let mut command = if rules_per_group == AWS_RULES_PER_GROUP {
            Command::new(&bin)
        } else {
            let mut c = Command::new(Moto::venv().join("bin/python3"));
            c.args(["-c", RAISED_QUOTA, &rules_per_group.to_string()]);
            c
        };
        // moto dies with whoever started it (a test binary that panicked or was killed, a sim
        // sent SIGKILL): an orphaned moto would keep its port and any inherited descriptor.
        crate::child::die_with_parent(&mut command, libc::SIGTERM);
        let child = command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| MotoError::Start(format!("{}: {e}", bin.display())))?;
        let mut moto = Moto { url: format!("http://127.0.0.1:{port}"), child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = moto.child.try_wait() {
                return Err(MotoError::Start(format!("moto_server exited with {status}")));
            }
            if Instant::now() > deadline {
                return Err(MotoError::Start("moto_server did not listen within 30 s".into()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(moto)
    }
}

/// AWS's default quota of inbound (and of outbound) rules per VPC security group.
pub const AWS_RULES_PER_GROUP: u32 = 60;

/// moto's server with its rules-per-group check counting against `argv[1]` instead of 60.
const RAISED_QUOTA: &str = r#"
import sys
from moto.ec2.models import security_groups as sg
limit = int(sys.argv.pop(1))
def check(self, group, current_rule_nb, ip_ranges, source_groups=None, egress=False):
    if current_rule_nb + len(ip_ranges or []) + len(source_groups or []) > (limit if group.vpc_id else 100):
        raise sg.RulesPerSecurityGroupLimitExceededError
sg.SecurityGroupBackend._verify_group_will_respect_rule_count_limit = check
from moto.server import main
sys.exit(main(sys.argv[1:]))
"#;

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::fmt::Debug for Moto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Moto({})", self.url)
    }
}

/// What the layer reads of the link it cannot judge alone: each tunnel's status, which depends on
/// the Azure side too (the link's floor, above this one, decides it).
pub trait TunnelTelemetry: Sync {
    fn telemetry(&self) -> vpn::Telemetry;
}

/// One EC2 request's view of the world: the AWS side's own state, the world's clock and faults,
/// and the tunnels' status as the link reports it.
pub struct Ec2<'a> {
    pub aws: &'a Aws,
    pub world: &'a World,
    pub tunnels: &'a dyn TunnelTelemetry,
}

/// The AWS side of the sim world.
#[derive(Debug, Default)]
pub struct Aws {
    pub vpn: Mutex<VpnStore>,
    moto: Mutex<Option<String>>,
    pub requests: Mutex<std::collections::BTreeMap<String, u64>>,
    /// Route 53 Resolver's inbound endpoints, as moto had them after the last change ([`resolver`]).
    pub resolvers: Mutex<Vec<resolver::InboundEndpoint>>,
    /// The clusters the fixture made, with their API load balancer group's rules as moto had
    /// them after the last change ([`cluster::refresh_api_lb`]).
    pub clusters: Mutex<Vec<cluster::ClusterView>>,
    http: reqwest::Client,
}

impl Aws {
    /// Where EC2 calls the layer does not answer itself go.
    pub fn set_moto(&self, url: &str) {
        *self.moto.lock().expect("moto lock") = Some(url.to_string());
    }

    pub fn moto_url(&self) -> Option<String> {
        self.moto.lock().expect("moto lock").clone()
    }

    pub fn reset(&self) {
        *self.vpn.lock().expect("vpn lock") = VpnStore::default();
        self.requests.lock().expect("requests lock").clear();
        self.resolvers.lock().expect("resolvers lock").clear();
    }

    /// Forgets the request counts (a test measuring one phase).
    pub fn reset_counts(&self) {
        self.requests.lock().expect("requests lock").clear();
    }

    /// Requests per EC2 action since the last reset.
    pub fn counts(&self) -> std::collections::BTreeMap<String, u64> {
        self.requests.lock().expect("requests lock").clone()
    }
}

fn xml(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(axum::http::header::CONTENT_TYPE, "text/xml;charset=UTF-8")], body).into_response()
}

/// Is this request EC2's (a form POST to `/`)?
pub fn is_ec2(method: &axum::http::Method, path: &str, headers: &HeaderMap) -> bool {
    method == axum::http::Method::POST
        && path == "/"
        && headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
}

/// The actions the layer answers itself, not moto (`CreateTags`/`DeleteTags` are split between them).
const OWN_ACTIONS: &[&str] = &[
    "CreateVpnGateway",
    "DescribeVpnGateways",
    "DeleteVpnGateway",
    "AttachVpnGateway",
    "DetachVpnGateway",
    "CreateCustomerGateway",
    "DescribeCustomerGateways",
    "DeleteCustomerGateway",
    "CreateVpnConnection",
    "DescribeVpnConnections",
    "DeleteVpnConnection",
    "ModifyVpnTunnelOptions",
    "CreateVpnConnectionRoute",
    "DeleteVpnConnectionRoute",
    "EnableVgwRoutePropagation",
    "DisableVgwRoutePropagation",
];

/// Answers one EC2 request, or drops its connection (`aws_drop_rate`): before applying it, or,
/// with `drop_after_apply`, after (the SDK then retries a call EC2 already carried out).
pub async fn serve(sim: &Ec2<'_>, headers: &HeaderMap, body: &[u8]) -> Response {
    let faults = sim.world.config().faults;
    let p = Params::parse(body);
    let action = p.action().to_string();
    // A test's fault on this action: Some(lost) when this call fails.
    let targeted = sim.world.with_config(|c| {
        let f = c.faults.aws_fail_actions.iter_mut().find(|f| f.action == action)?;
        if f.passed < f.after {
            f.passed += 1;
            return None;
        }
        match &mut f.times {
            Some(0) => return None,
            Some(n) => *n -= 1,
            None => {}
        }
        Some(f.lost)
    });
    let drop = targeted == Some(true) || (targeted.is_none() && sim.world.chance(faults.aws_drop_rate));
    if drop && !faults.drop_after_apply && targeted.is_none() {
        return crate::world::dropped(&sim.world);
    }
    *sim.aws.requests.lock().expect("requests lock").entry(action.clone()).or_default() += 1;
    let request_id = uuid::Uuid::new_v4().to_string();
    if targeted == Some(false) {
        sim.world.count(|c| c.injected_errors += 1);
        return xml(500, Ec2Error::new(500, "InternalError", "An internal error has occurred.").body(&request_id));
    }
    let answer = answer(sim, headers, body, &p, &action, &faults, &request_id).await;
    if drop { crate::world::dropped(&sim.world) } else { answer }
}

/// The request's answer, once `serve` has parsed and counted it and decided the test's faults.
async fn answer(
    sim: &Ec2<'_>,
    headers: &HeaderMap,
    body: &[u8],
    p: &Params,
    action: &str,
    faults: &crate::world::Faults,
    request_id: &str,
) -> Response {
    if headers.get(axum::http::header::AUTHORIZATION).is_none() {
        return xml(
            401,
            Ec2Error::new(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
                .body(request_id),
        );
    }
    if sim.world.chance(faults.aws_throttle_rate) {
        sim.world.count(|c| c.injected_errors += 1);
        return xml(503, Ec2Error::new(503, "RequestLimitExceeded", "Request limit exceeded.").body(request_id));
    }
    if sim.world.chance(faults.aws_error_rate) {
        sim.world.count(|c| c.injected_errors += 1);
        return xml(500, Ec2Error::new(500, "InternalError", "An internal error has occurred.").body(request_id));
    }
    if OWN_ACTIONS.contains(&action) && p.get("DryRun").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        // Every caller may do everything here (no IAM), so a dry run is always "would have succeeded".
        return xml(
            412,
            Ec2Error::new(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
                .body(request_id),
        );
    }
    let now = sim.world.clock.now();
    let scaled = |lo: f64, hi: f64| sim.world.lro_duration(lo, hi);
    let t = Timing { scaled: &scaled, now };
    let own = |r: Result<String, Ec2Error>| match r {
        Ok(inner) => xml(200, query::response(action, request_id, &inner)),
        Err(e) => xml(e.status, e.body(request_id)),
    };
    match action {
        "CreateVpnGateway" => own(sim.aws.vpn.lock().expect("vpn").create_vgw(p, &t)),
        "DescribeVpnGateways" => own(sim.aws.vpn.lock().expect("vpn").describe_vgws(p, now)),
        "DeleteVpnGateway" => own(sim.aws.vpn.lock().expect("vpn").delete_vgw(p, &t)),
        "AttachVpnGateway" => {
            let vpc = p.get("VpcId").unwrap_or_default().to_string();
            let exists = moto_has(sim, headers, &[("Action", "DescribeVpcs"), ("VpcId.1", &vpc)], "<vpcId>").await;
            own(sim.aws.vpn.lock().expect("vpn").attach(p, &t, exists))
        }
        "DetachVpnGateway" => own(sim.aws.vpn.lock().expect("vpn").detach(p, &t)),
        "CreateCustomerGateway" => own(sim.aws.vpn.lock().expect("vpn").create_cgw(p, &t)),
        "DescribeCustomerGateways" => own(sim.aws.vpn.lock().expect("vpn").describe_cgws(p, now)),
        "DeleteCustomerGateway" => own(sim.aws.vpn.lock().expect("vpn").delete_cgw(p, &t)),
        "CreateVpnConnection" => own(sim.aws.vpn.lock().expect("vpn").create_conn(p, &t)),
        "DescribeVpnConnections" => {
            let telemetry = sim.tunnels.telemetry();
            own(sim.aws.vpn.lock().expect("vpn").describe_conns(p, now, &telemetry))
        }
        "DeleteVpnConnection" => own(sim.aws.vpn.lock().expect("vpn").delete_conn(p, &t)),
        "ModifyVpnTunnelOptions" => {
            let telemetry = sim.tunnels.telemetry();
            own(sim.aws.vpn.lock().expect("vpn").modify_tunnel(p, &t, &telemetry))
        }
        "CreateVpnConnectionRoute" => own(sim.aws.vpn.lock().expect("vpn").route(p, true, now)),
        "DeleteVpnConnectionRoute" => own(sim.aws.vpn.lock().expect("vpn").route(p, false, now)),
        "EnableVgwRoutePropagation" | "DisableVgwRoutePropagation" => {
            let rt = p.get("RouteTableId").unwrap_or_default().to_string();
            let exists =
                moto_has(sim, headers, &[("Action", "DescribeRouteTables"), ("RouteTableId.1", &rt)], "<routeTableId>")
                    .await;
            let enable = action == "EnableVgwRoutePropagation";
            own(sim.aws.vpn.lock().expect("vpn").propagate(p, enable, now, exists))
        }
        "CreateTags" | "DeleteTags" => {
            let ids = p.list("ResourceId");
            let tags: Vec<(String, String)> = p
                .members("Tag")
                .into_iter()
                .filter_map(|t| Some((t.get("Key")?.to_string(), t.get("Value").unwrap_or_default().to_string())))
                .collect();
            let others = sim.aws.vpn.lock().expect("vpn").tag(&ids, &tags, action == "CreateTags");
            if others.is_empty() {
                return own(Ok("<return>true</return>".into()));
            }
            // The rest are moto's: forward with only those ids.
            let mut form: Vec<(String, String)> =
                p.0.iter()
                    .filter(|(k, _)| !k.starts_with("ResourceId."))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
            form.extend(others.iter().enumerate().map(|(i, id)| (format!("ResourceId.{}", i + 1), id.clone())));
            let body = serde_urlencoded::to_string(&form).unwrap_or_default();
            forward(sim, headers, body.into_bytes(), request_id).await.0
        }
        "DescribeRouteTables" => {
            let (resp, text) = forward(sim, headers, body.to_vec(), request_id).await;
            match text {
                Some(text) => xml(200, with_propagation(&text, &sim.aws.vpn.lock().expect("vpn").propagation)),
                None => resp,
            }
        }
        // What a Route 53 Resolver endpoint's groups let in: read the view again after a change
        // to one of them (an endpoint made later reads its groups' rules then).
        "AuthorizeSecurityGroupIngress" | "RevokeSecurityGroupIngress" | "DeleteSecurityGroup" => {
            let (resp, text) = forward(sim, headers, body.to_vec(), request_id).await;
            if text.is_some() && resolver::watches_group(sim.aws, p.get("GroupId")) {
                resolver::refresh(sim.aws, headers).await;
            }
            if text.is_some() {
                cluster::refresh_api_lb(sim.aws, headers, p.get("GroupId")).await;
            }
            resp
        }
        _ => forward(sim, headers, body.to_vec(), request_id).await.0,
    }
}

/// Sends the request to moto; the response, and its text when it was a 200.
async fn forward(sim: &Ec2<'_>, headers: &HeaderMap, body: Vec<u8>, request_id: &str) -> (Response, Option<String>) {
    let Some(url) = sim.aws.moto_url() else {
        let e = Ec2Error::new(503, "Unavailable", "the local AWS cloud has no moto behind it (start it with moto)");
        return (xml(503, e.body(request_id)), None);
    };
    match to_moto(sim.aws, &url, headers, body).await {
        Ok((status, text)) => {
            let ok = (status == 200).then(|| text.clone());
            (xml(status, text), ok)
        }
        Err(e) => {
            let e = Ec2Error::new(503, "Unavailable", format!("moto did not answer: {e}"));
            (xml(503, e.body(request_id)), None)
        }
    }
}

/// One request to moto at `url` with the caller's signing headers (EC2's query calls and
/// Route 53 Resolver's JSON ones alike): its status and body.
pub(crate) async fn to_moto(aws: &Aws, url: &str, headers: &HeaderMap, body: Vec<u8>) -> Result<(u16, String), String> {
    let mut req = aws.http.post(format!("{url}/")).body(body);
    for (k, v) in headers {
        if matches!(
            k.as_str(),
            "authorization"
                | "x-amz-date"
                | "content-type"
                | "x-amz-target"
                | "x-amz-security-token"
                | "x-moto-account-id"
        ) {
            req = req.header(k.as_str(), v.as_bytes());
        }
    }
    let r = req.send().await.map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    Ok((status, r.text().await.unwrap_or_default()))
}

/// Asks moto a yes/no question: does its answer to `form` contain `needle`?
async fn moto_has(sim: &Ec2<'_>, headers: &HeaderMap, form: &[(&str, &str)], needle: &str) -> bool {
    let mut form: Vec<(&str, &str)> = form.to_vec();
    form.push(("Version", "2016-11-15"));
    let body = serde_urlencoded::to_string(&form).unwrap_or_default();
    let (_, text) = forward(sim, headers, body.into_bytes(), "check").await;
    text.is_some_and(|t| t.contains(needle))
}

/// Adds `propagatingVgwSet` items to moto's route tables (moto never has any).
fn with_propagation(
    text: &str,
    propagation: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> String {
    let mut out = text.to_string();
    for (rt, gws) in propagation.iter().filter(|(_, g)| !g.is_empty()) {
        let anchor = format!("<routeTableId>{rt}</routeTableId>");
        let items: String = gws.iter().map(|g| format!("<item><gatewayId>{g}</gatewayId></item>")).collect();
        let set = format!("<propagatingVgwSet>{items}</propagatingVgwSet>");
        // The table's own id (not the one repeated inside its associations) follows the end of
        // its association set, or opens its item when it has none.
        let own = out.match_indices(&anchor).map(|(i, _)| i).find(|&i| {
            let before = &out[..i];
            before.ends_with("</associationSet>")
                || before.ends_with("<associationSet/>")
                || before.ends_with("<item>") && !before.ends_with("<associationSet><item>")
        });
        if let Some(start) = own {
            out.insert_str(start + anchor.len(), &set);
        }
    }
    out
}

impl IntoResponse for Ec2Error {
    fn into_response(self) -> Response {
        let body = self.body("error");
        let mut r = Response::new(Body::from(body));
        *r.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn propagation_goes_to_the_table_not_its_association() {
        let moto = "<routeTableSet><item><associationSet><item><main>false</main><routeTableId>rtb-1</routeTableId><subnetId>s</subnetId></item></associationSet><routeTableId>rtb-1</routeTableId><routeSet/></item></routeTableSet>";
        let mut p = std::collections::BTreeMap::new();
        p.insert("rtb-1".to_string(), ["vgw-9".to_string()].into_iter().collect());
        let out = with_propagation(moto, &p);
        assert!(out.contains("</associationSet><routeTableId>rtb-1</routeTableId><propagatingVgwSet><item><gatewayId>vgw-9</gatewayId></item></propagatingVgwSet><routeSet/>"), "{out}");
        assert_eq!(out.matches("propagatingVgwSet>").count(), 2);
    }
}
