//! The AWS provider: the VPN side of the link in the cluster's VPC, through aws-sdk-ec2.
//!
//! - Credentials and endpoints the AWS way (aws-config's default chain: environment, profile,
//!   SSO, web identity; `AWS_ENDPOINT_URL` or [`AwsConfig::endpoint_url`] for the local clouds;
//!   FIPS endpoints on request). The SDK's standard retry mode (exponential backoff with jitter,
//!   8 attempts) absorbs `RequestLimitExceeded` and 5xx; the provider adds its own waits for
//!   states (pending -> available, deleting -> deleted) and for eventual consistency.
//! - Every taggable resource is created with the stack and address tags; a create first looks
//!   for a live resource with the same address tag, so an apply that died before recording one
//!   never makes a twin. Attachments and route propagation are read from their (tagged) gateway;
//!   security-group rules carry the address in their description.
//! - Refresh is one paginated Describe per type, filtered by the stack tag.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_ec2::Client;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    Filter, GatewayType, IpPermission, IpRange, ResourceType as AwsType, Tag, TagSpecification,
    VpnConnectionOptionsSpecification,
};
use xcsp_core::provider::{Attributes, BoxFuture, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{ADDRESS_TAG, Address, ProviderKind, ResourceType as T, STACK_TAG, Value};

mod ingress;
mod tunnel;

/// Where and how to reach AWS.
#[derive(Debug, Clone)]
pub struct AwsConfig {
    pub region: String,
    /// For the local clouds; `AWS_ENDPOINT_URL` works too.
    pub endpoint_url: Option<String>,
    pub profile: Option<String>,
    pub use_fips: bool,
    /// Explicit access key and secret (the local clouds); otherwise the default chain.
    pub static_credentials: Option<(String, String)>,
    /// How long any wait for a state may take.
    pub timeout: Duration,
    /// The first pause between polls of a state.
    pub poll_interval: Duration,
}

impl AwsConfig {
    pub fn new(region: &str) -> AwsConfig {
        AwsConfig {
            region: region.to_string(),
            endpoint_url: None,
            profile: None,
            use_fips: false,
            static_credentials: None,
            timeout: Duration::from_secs(30 * 60),
            poll_interval: Duration::from_secs(5),
        }
    }
}

pub struct AwsProvider {
    ec2: Client,
    config: AwsConfig,
}

/// A state in which the resource exists and is (or will be) usable: not `deleting`/`deleted`.
/// A VPN connection is `modifying` while a tunnel change is applied, a state aws-sdk-ec2's
/// `VpnState` does not list (terraform-provider-aws waits it out as `vpnStateModifying`).
fn live(state: Option<&str>) -> bool {
    matches!(state, Some("pending" | "available" | "modifying"))
}

fn failed(address: &Address, code: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::Failed { address: address.to_string(), code: code.into(), message: message.into() }
}

/// An SDK error as the engine needs it.
fn sdk_error<E: ProvideErrorMetadata + std::fmt::Display>(address: &Address, e: E) -> ProviderError {
    let code = e.code().unwrap_or("Unknown").to_string();
    let message = e.message().map(String::from).unwrap_or_else(|| e.to_string());
    // Only "this resource is gone" is NotFound; another's absence (a VPC, a route table) is a failure.
    let own = match address.rtype {
        T::AwsVpnGateway | T::AwsVpnGatewayAttachment | T::AwsRoutePropagation => "InvalidVpnGatewayID.NotFound",
        T::AwsCustomerGateway => "InvalidCustomerGatewayID.NotFound",
        T::AwsVpnConnection | T::AwsVpnConnectionRoute => "InvalidVpnConnectionID.NotFound",
        _ => "-",
    };
    match code.as_str() {
        c if c == own => ProviderError::NotFound { address: address.to_string() },
        "IncorrectState" | "DependencyViolation" | "InvalidGatewayID.InUse" => {
            ProviderError::InUse { address: address.to_string(), detail: format!("{code}: {message}") }
        }
        "RequestLimitExceeded" | "Throttling" => {
            ProviderError::Throttled { address: address.to_string(), detail: message, retry_after: None }
        }
        _ => ProviderError::Failed { address: address.to_string(), code, message },
    }
}

/// The tags a resource should carry: the plan's `tags` (the spec's, for the user), with the
/// stack and address tags always xcsp's own (adoption and sweeps find resources by them).
fn desired_tags(stack: &str, address: &Address, attrs: &Attributes) -> BTreeMap<String, String> {
    let mut tags = tags_in(attrs);
    tags.insert(STACK_TAG.into(), stack.into());
    tags.insert(ADDRESS_TAG.into(), address.to_string());
    tags
}

/// The `tags` attribute as a map of strings (empty when there is none).
fn tags_in(attrs: &Attributes) -> BTreeMap<String, String> {
    match attrs.get("tags").map(Value::unmarked) {
        Some(Value::Map(m)) => m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect(),
        _ => BTreeMap::new(),
    }
}

fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

fn tags_value(tags: &BTreeMap<String, String>) -> Value {
    Value::Map(tags.iter().map(|(k, v)| (k.clone(), Value::string(v))).collect())
}

fn tag_spec(kind: AwsType, tags: &BTreeMap<String, String>) -> TagSpecification {
    let tags = tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
    TagSpecification::builder().resource_type(kind).set_tags(Some(tags)).build()
}

fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder().name(name).set_values(Some(values.iter().map(|v| v.to_string()).collect())).build()
}

/// The address a resource's tags name, if it is this stack's.
fn owner(stack: &str, tags: &[Tag]) -> Option<Address> {
    let get = |k: &str| tags.iter().find(|t| t.key() == Some(k)).and_then(|t| t.value());
    (get(STACK_TAG) == Some(stack)).then(|| get(ADDRESS_TAG)?.parse().ok()).flatten()
}

fn str_attr(attrs: &Attributes, key: &str) -> Option<String> {
    attrs.get(key).map(Value::unmarked).and_then(|v| v.as_str().map(String::from))
}

pub(crate) fn strings(attrs: &Attributes, key: &str) -> Vec<String> {
    match attrs.get(key).map(Value::unmarked) {
        Some(Value::List(l)) => l
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The items of a describe call by the stack's tag, then, by id, the recorded ones the tag
/// filter missed (their tags were changed): `missing` maps the ids seen to those to look up.
macro_rules! tagged_or_recorded {
    ($self:ident, $describe:ident, $items:ident, $id:ident, $id_filter:literal, $probe:expr, $by_stack:expr, $missing:expr) => {{
        let r = $self
            .ec2
            .$describe()
            .set_filters(Some($by_stack))
            .send()
            .await
            .map_err(|x| sdk_error($probe, x.into_service_error()))?;
        let mut items = r.$items().to_vec();
        let seen: Vec<String> = items.iter().filter_map(|x| x.$id().map(String::from)).collect();
        let gone: Vec<String> = $missing(&seen);
        if !gone.is_empty() {
            let ids: Vec<&str> = gone.iter().map(String::as_str).collect();
            let r = $self
                .ec2
                .$describe()
                .filters(filter($id_filter, &ids))
                .send()
                .await
                .map_err(|x| sdk_error($probe, x.into_service_error()))?;
            items.extend(r.$items().iter().cloned());
        }
        items
    }};
}

/// A customer gateway's ASN: `bgpAsnExtended` when it was created with one, else `bgpAsn`.
fn cgw_asn(g: &aws_sdk_ec2::types::CustomerGateway) -> i64 {
    g.bgp_asn_extended().or(g.bgp_asn()).and_then(|s| s.parse().ok()).unwrap_or_default()
}

fn tunnel_outputs(
    out: &mut Attributes,
    options: Option<&aws_sdk_ec2::types::VpnConnectionOptions>,
    telemetry: &[aws_sdk_ec2::types::VgwTelemetry],
    first_ip: Option<&str>,
    cidrs: [Option<&str>; 2],
) {
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
        }
    }
}

impl AwsProvider {
    pub async fn new(config: AwsConfig) -> AwsProvider {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(config.region.clone()))
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(8));
        if let Some(url) = &config.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some(p) = &config.profile {
            loader = loader.profile_name(p);
        }
        if config.use_fips {
            loader = loader.use_fips(true);
        }
        if let Some((key, secret)) = &config.static_credentials {
            loader = loader.credentials_provider(aws_sdk_ec2::config::Credentials::new(
                key,
                secret,
                None,
                None,
                "xcsp-static",
            ));
        }
        let shared = loader.load().await;
        AwsProvider { ec2: Client::new(&shared), config }
    }

    /// Polls `check` until it says done, with backoff, reporting `what`.
    async fn wait<F, Fut>(
        &self,
        address: &Address,
        what: &str,
        progress: &dyn Progress,
        check: F,
    ) -> Result<(), ProviderError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<bool, ProviderError>>,
    {
        let deadline = Instant::now() + self.config.timeout;
        let mut pause = self.config.poll_interval.min(Duration::from_millis(200));
        progress.waiting(address, what);
        loop {
            match check().await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // Eventual consistency: a resource just made may not be visible yet.
                Err(ProviderError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            if Instant::now() + pause > deadline {
                return Err(ProviderError::Timeout {
                    address: address.to_string(),
                    operation: "wait",
                    timeout: self.config.timeout,
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.config.poll_interval.max(Duration::from_millis(200)));
        }
    }

    /// Runs `call` again while AWS says the state is not right yet (a gateway still pending,
    /// an attachment still attaching), up to the timeout.
    async fn patient<R, F, Fut>(&self, address: &Address, progress: &dyn Progress, call: F) -> Result<R, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<R, ProviderError>>,
    {
        let deadline = Instant::now() + self.config.timeout;
        let mut pause = Duration::from_millis(200);
        loop {
            match call().await {
                Err(ProviderError::InUse { detail, .. } | ProviderError::Failed { message: detail, .. })
                    if (detail.contains("IncorrectState")
                        || detail.contains("NotAttached")
                        || detail.contains("is pending")
                        || detail.contains("attaching"))
                        && Instant::now() + pause < deadline =>
                {
                    progress.waiting(address, &format!("AWS: {detail}; trying again"));
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(self.config.poll_interval.max(Duration::from_millis(200)));
                }
                other => return other,
            }
        }
    }

    async fn vgw(&self, address: &Address, id: &str) -> Result<Option<aws_sdk_ec2::types::VpnGateway>, ProviderError> {
        let r = self
            .ec2
            .describe_vpn_gateways()
            .vpn_gateway_ids(id)
            .send()
            .await
            .map_err(|e| sdk_error(address, e.into_service_error()))?;
        Ok(r.vpn_gateways().first().cloned())
    }

    /// A live resource of this stack with this address tag, found by `describe`.
    async fn existing_id(&self, stack: &str, address: &Address) -> Result<Option<String>, ProviderError> {
        Ok(self.live_ids(stack, address).await?.into_iter().next())
    }

    /// Every live resource of this stack with this address tag.
    async fn live_ids(&self, stack: &str, address: &Address) -> Result<Vec<String>, ProviderError> {
        let filters = vec![
            filter(&format!("tag:{STACK_TAG}"), &[stack]),
            filter(&format!("tag:{ADDRESS_TAG}"), &[&address.to_string()]),
        ];
        Ok(match address.rtype {
            T::AwsVpnGateway => self
                .ec2
                .describe_vpn_gateways()
                .set_filters(Some(filters))
                .send()
                .await
                .map_err(|x| sdk_error(address, x.into_service_error()))?
                .vpn_gateways()
                .iter()
                .filter(|g| live(g.state().map(|s| s.as_str())))
                .filter_map(|g| g.vpn_gateway_id().map(String::from))
                .collect(),
            T::AwsCustomerGateway => self
                .ec2
                .describe_customer_gateways()
                .set_filters(Some(filters))
                .send()
                .await
                .map_err(|x| sdk_error(address, x.into_service_error()))?
                .customer_gateways()
                .iter()
                .filter(|g| live(g.state()))
                .filter_map(|g| g.customer_gateway_id().map(String::from))
                .collect(),
            T::AwsVpnConnection => self
                .ec2
                .describe_vpn_connections()
                .set_filters(Some(filters))
                .send()
                .await
                .map_err(|x| sdk_error(address, x.into_service_error()))?
                .vpn_connections()
                .iter()
                .filter(|c| live(c.state().map(|s| s.as_str())))
                .filter_map(|c| c.vpn_connection_id().map(String::from))
                .collect(),
            _ => Vec::new(),
        })
    }

    /// Deletes the twins of `keep`: live resources with its address tag that a create made
    /// besides it. EC2's VPN creates take no idempotency token, and the SDK retries a call whose
    /// answer was lost (a dropped connection), so one create can leave two; the one EC2 answered
    /// with is kept and recorded, the others go, so nothing is left untracked.
    async fn reap_twins(
        &self,
        stack: &str,
        a: &Address,
        keep: &str,
        progress: &dyn Progress,
    ) -> Result<(), ProviderError> {
        for twin in self.live_ids(stack, a).await?.into_iter().filter(|id| id != keep) {
            progress.waiting(a, &format!("deleting {twin}, a twin a retried create left"));
            self.patient(a, progress, || async {
                let sent = match a.rtype {
                    T::AwsVpnGateway => self
                        .ec2
                        .delete_vpn_gateway()
                        .vpn_gateway_id(&twin)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|x| x.into_service_error().into()),
                    T::AwsVpnConnection => self
                        .ec2
                        .delete_vpn_connection()
                        .vpn_connection_id(&twin)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|x| x.into_service_error().into()),
                    _ => Ok(()),
                };
                sent.map_err(|e: aws_sdk_ec2::Error| sdk_error(a, e))
            })
            .await?;
        }
        Ok(())
    }

    /// The cluster's VPC: the one tagged with the cluster tag.
    async fn cluster_vpc(&self, address: &Address, cluster_tag: &str) -> Result<String, ProviderError> {
        let r = self
            .ec2
            .describe_vpcs()
            .filters(filter("tag-key", &[cluster_tag]))
            .send()
            .await
            .map_err(|e| sdk_error(address, e.into_service_error()))?;
        match r.vpcs() {
            [one] => Ok(one.vpc_id().unwrap_or_default().to_string()),
            [] => Err(failed(
                address,
                "ClusterVpcNotFound",
                format!("no VPC carries the tag {cluster_tag}: is the cluster in this account and region?"),
            )),
            many => Err(failed(
                address,
                "ClusterVpcAmbiguous",
                format!("{} VPCs carry the tag {cluster_tag}; name one with `vpc_id`", many.len()),
            )),
        }
    }

    async fn create_or_update(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed, ProviderError> {
        let a = req.address;
        let attrs = req.attributes;
        let observed = |id: String, attributes: Attributes| Observed { address: a.clone(), id, attributes };
        match a.rtype {
            T::AwsVpnGateway => {
                let id = match req.id.map(String::from).or(self.existing_id(req.stack, a).await?) {
                    Some(id) => id,
                    None => {
                        let asn = attrs.get("amazon_side_asn").and_then(Value::as_i64).unwrap_or(64512);
                        let r = self
                            .ec2
                            .create_vpn_gateway()
                            .r#type(GatewayType::Ipsec1)
                            .amazon_side_asn(asn)
                            .tag_specifications(tag_spec(AwsType::VpnGateway, &desired_tags(req.stack, a, attrs)))
                            .send()
                            .await
                            .map_err(|x| sdk_error(a, x.into_service_error()))?;
                        let id = r.vpn_gateway().and_then(|g| g.vpn_gateway_id()).unwrap_or_default().to_string();
                        self.reap_twins(req.stack, a, &id, progress).await?;
                        id
                    }
                };
                self.wait(a, "waiting for the virtual private gateway to become available", progress, || async {
                    Ok(self
                        .vgw(a, &id)
                        .await?
                        .and_then(|g| g.state().map(|s| s.as_str() == "available"))
                        .unwrap_or(false))
                })
                .await?;
                let mut out = Attributes::new();
                if let Some(g) = self.vgw(a, &id).await? {
                    out.insert("amazon_side_asn".into(), Value::int(g.amazon_side_asn().unwrap_or_default()));
                    out.insert("type".into(), Value::string("ipsec.1"));
                    let tags = self.retag(a, &id, &tag_map(g.tags()), &desired_tags(req.stack, a, attrs)).await?;
                    out.insert("tags".into(), tags_value(&tags));
                }
                out.insert("id".into(), Value::string(&id));
                Ok(observed(id, out))
            }
            T::AwsVpnGatewayAttachment => {
                let vgw =
                    str_attr(attrs, "vpn_gateway_id").ok_or_else(|| failed(a, "MissingAttribute", "vpn_gateway_id"))?;
                let vpc = match str_attr(attrs, "vpc_id") {
                    Some(v) => v,
                    None => self.cluster_vpc(a, &str_attr(attrs, "cluster_tag").unwrap_or_default()).await?,
                };
                let current = self.vgw(a, &vgw).await?;
                let attached = current.as_ref().is_some_and(|g| {
                    g.vpc_attachments().iter().any(|x| {
                        x.vpc_id() == Some(vpc.as_str())
                            && matches!(x.state().map(|s| s.as_str()), Some("attached" | "attaching"))
                    })
                });
                if !attached {
                    let sent = self
                        .patient(a, progress, || async {
                            self.ec2
                                .attach_vpn_gateway()
                                .vpn_gateway_id(&vgw)
                                .vpc_id(&vpc)
                                .send()
                                .await
                                .map_err(|x| sdk_error(a, x.into_service_error()))
                        })
                        .await;
                    // A retried call whose first answer was lost finds the attachment made:
                    // what counts is whether the gateway is attaching or attached to this VPC.
                    if let Err(e) = sent {
                        let made = self.vgw(a, &vgw).await?.is_some_and(|g| {
                            g.vpc_attachments().iter().any(|x| {
                                x.vpc_id() == Some(vpc.as_str())
                                    && matches!(x.state().map(|s| s.as_str()), Some("attached" | "attaching"))
                            })
                        });
                        if !made {
                            return Err(e);
                        }
                    }
                }
                self.wait(a, "waiting for the gateway to attach to the cluster's VPC", progress, || async {
                    Ok(self.vgw(a, &vgw).await?.is_some_and(|g| {
                        g.vpc_attachments().iter().any(|x| {
                            x.vpc_id() == Some(vpc.as_str()) && x.state().map(|s| s.as_str()) == Some("attached")
                        })
                    }))
                })
                .await?;
                let mut out = Attributes::new();
                out.insert("vpn_gateway_id".into(), Value::string(&vgw));
                out.insert("vpc_id".into(), Value::string(&vpc));
                out.insert("state".into(), Value::string("attached"));
                Ok(observed(format!("{vgw}/{vpc}"), out))
            }
            T::AwsRoutePropagation => {
                let vgw =
                    str_attr(attrs, "vpn_gateway_id").ok_or_else(|| failed(a, "MissingAttribute", "vpn_gateway_id"))?;
                let tables = match strings(attrs, "route_table_ids") {
                    t if !t.is_empty() => t,
                    _ => {
                        let g = self.vgw(a, &vgw).await?;
                        let vpc = g.and_then(|g| g.vpc_attachments().iter().find_map(|x| x.vpc_id().map(String::from)));
                        let vpc =
                            vpc.ok_or_else(|| failed(a, "NotAttached", format!("{vgw} is not attached to a VPC")))?;
                        let r = self
                            .ec2
                            .describe_route_tables()
                            .filters(filter("vpc-id", &[&vpc]))
                            .send()
                            .await
                            .map_err(|x| sdk_error(a, x.into_service_error()))?;
                        r.route_tables().iter().filter_map(|t| t.route_table_id().map(String::from)).collect()
                    }
                };
                for rt in &tables {
                    self.patient(a, progress, || async {
                        self.ec2
                            .enable_vgw_route_propagation()
                            .gateway_id(&vgw)
                            .route_table_id(rt)
                            .send()
                            .await
                            .map_err(|x| sdk_error(a, x.into_service_error()))
                    })
                    .await?;
                }
                let mut out = Attributes::new();
                out.insert("vpn_gateway_id".into(), Value::string(&vgw));
                out.insert("route_table_ids".into(), Value::strings(tables.iter()));
                if attrs.contains_key("every_route_table") {
                    out.insert("every_route_table".into(), Value::Bool(true));
                }
                Ok(observed(vgw, out))
            }
            T::AwsCustomerGateway => {
                let id = match req.id.map(String::from).or(self.existing_id(req.stack, a).await?) {
                    Some(id) => id,
                    None => {
                        let ip =
                            str_attr(attrs, "ip_address").ok_or_else(|| failed(a, "MissingAttribute", "ip_address"))?;
                        let asn = attrs.get("bgp_asn").and_then(Value::as_i64).unwrap_or(65000);
                        // BgpAsn is a signed 32-bit int (1-2,147,483,647); larger ASNs go in
                        // BgpAsnExtended (2,147,483,648-4,294,967,295), never both (EC2 API,
                        // CreateCustomerGateway).
                        let create = self.ec2.create_customer_gateway();
                        let create = match i32::try_from(asn) {
                            Ok(small) => create.bgp_asn(small),
                            Err(_) => create.bgp_asn_extended(asn),
                        };
                        let r = create
                            .r#type(GatewayType::Ipsec1)
                            .ip_address(ip)
                            .tag_specifications(tag_spec(AwsType::CustomerGateway, &desired_tags(req.stack, a, attrs)))
                            .send()
                            .await
                            .map_err(|x| sdk_error(a, x.into_service_error()))?;
                        r.customer_gateway().and_then(|g| g.customer_gateway_id()).unwrap_or_default().to_string()
                    }
                };
                let r = self
                    .ec2
                    .describe_customer_gateways()
                    .customer_gateway_ids(&id)
                    .send()
                    .await
                    .map_err(|x| sdk_error(a, x.into_service_error()))?;
                let mut out = Attributes::new();
                if let Some(g) = r.customer_gateways().first() {
                    out.insert("ip_address".into(), Value::string(g.ip_address().unwrap_or_default()));
                    out.insert("bgp_asn".into(), Value::int(cgw_asn(g)));
                    out.insert("type".into(), Value::string(g.r#type().unwrap_or("ipsec.1")));
                    let tags = self.retag(a, &id, &tag_map(g.tags()), &desired_tags(req.stack, a, attrs)).await?;
                    out.insert("tags".into(), tags_value(&tags));
                }
                out.insert("id".into(), Value::string(&id));
                Ok(observed(id, out))
            }
            T::AwsVpnConnection => self.vpn_connection(req, progress).await,
            T::AwsVpnConnectionRoute => {
                let conn = str_attr(attrs, "vpn_connection_id")
                    .ok_or_else(|| failed(a, "MissingAttribute", "vpn_connection_id"))?;
                let cidr = str_attr(attrs, "destination_cidr")
                    .ok_or_else(|| failed(a, "MissingAttribute", "destination_cidr"))?;
                self.ec2
                    .create_vpn_connection_route()
                    .vpn_connection_id(&conn)
                    .destination_cidr_block(&cidr)
                    .send()
                    .await
                    .map_err(|x| sdk_error(a, x.into_service_error()))?;
                Ok(observed(format!("{conn}/{cidr}"), Attributes::new()))
            }
            T::AwsSecurityGroupIngress => self.ingress(req).await,
            _ => Err(failed(a, "NotAws", format!("{} is not an AWS resource type", a.rtype.as_str()))),
        }
    }

    /// Makes the tags of `id` the `want`ed ones (CreateTags for new and changed values,
    /// DeleteTags for the rest) and returns them; calls nothing when they already are.
    async fn retag(
        &self,
        a: &Address,
        id: &str,
        have: &BTreeMap<String, String>,
        want: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        let set: Vec<Tag> = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let gone: Vec<Tag> =
            have.keys().filter(|k| !want.contains_key(*k)).map(|k| Tag::builder().key(k).build()).collect();
        if !set.is_empty() {
            self.ec2
                .create_tags()
                .resources(id)
                .set_tags(Some(set))
                .send()
                .await
                .map_err(|x| sdk_error(a, x.into_service_error()))?;
        }
        if !gone.is_empty() {
            self.ec2
                .delete_tags()
                .resources(id)
                .set_tags(Some(gone))
                .send()
                .await
                .map_err(|x| sdk_error(a, x.into_service_error()))?;
        }
        Ok(want.clone())
    }

    async fn read_connection(
        &self,
        a: &Address,
        id: &str,
        cidrs: [Option<&str>; 2],
    ) -> Result<(Option<String>, Attributes), ProviderError> {
        let c = self.describe_connection(a, id).await?;
        let mut out = Attributes::new();
        out.insert("customer_gateway".into(), Value::string(c.customer_gateway_id().unwrap_or_default()));
        out.insert("vpn_gateway_id".into(), Value::string(c.vpn_gateway_id().unwrap_or_default()));
        tunnel_outputs(&mut out, c.options(), c.vgw_telemetry(), None, cidrs);
        out.insert("tags".into(), tags_value(&tag_map(c.tags())));
        out.insert("id".into(), Value::string(id));
        Ok((c.state().map(|s| s.as_str().to_string()), out))
    }

    /// One VPN connection as EC2 describes it.
    async fn describe_connection(
        &self,
        a: &Address,
        id: &str,
    ) -> Result<aws_sdk_ec2::types::VpnConnection, ProviderError> {
        let r = self
            .ec2
            .describe_vpn_connections()
            .vpn_connection_ids(id)
            .send()
            .await
            .map_err(|x| sdk_error(a, x.into_service_error()))?;
        r.vpn_connections().first().cloned().ok_or_else(|| ProviderError::NotFound { address: a.to_string() })
    }

    /// The connection's tunnels as EC2 reports them, tunnel 1 first, each with its outside
    /// address (the handle ModifyVpnTunnelOptions takes).
    async fn tunnels(
        &self,
        a: &Address,
        id: &str,
        cidrs: [Option<&str>; 2],
    ) -> Result<(Vec<(tunnel::Tunnel, String)>, Option<String>), ProviderError> {
        let c = self.describe_connection(a, id).await?;
        let mut tunnels: Vec<&aws_sdk_ec2::types::TunnelOption> =
            c.options().map(|o| o.tunnel_options().iter().collect()).unwrap_or_default();
        tunnel::order(&mut tunnels, None, cidrs);
        let out = tunnels
            .into_iter()
            .map(|t| (tunnel::Tunnel::read(t), t.outside_ip_address().unwrap_or_default().to_string()))
            .collect();
        Ok((out, c.state().map(|s| s.as_str().to_string())))
    }

    async fn vpn_connection(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed, ProviderError> {
        let a = req.address;
        let attrs = req.attributes;
        let wanted = [str_attr(attrs, "tunnel1_inside_cidr"), str_attr(attrs, "tunnel2_inside_cidr")];
        let cidrs = [wanted[0].as_deref(), wanted[1].as_deref()];
        let id = match req.id.map(String::from).or(self.existing_id(req.stack, a).await?) {
            Some(id) => id,
            None => {
                let cgw = str_attr(attrs, "customer_gateway")
                    .ok_or_else(|| failed(a, "MissingAttribute", "customer_gateway"))?;
                let vgw =
                    str_attr(attrs, "vpn_gateway_id").ok_or_else(|| failed(a, "MissingAttribute", "vpn_gateway_id"))?;
                let options = VpnConnectionOptionsSpecification::builder()
                    .static_routes_only(matches!(attrs.get("static_routes_only"), Some(Value::Bool(true))))
                    .tunnel_options(tunnel::create_spec(&tunnel::Tunnel::wanted(attrs, 1)))
                    .tunnel_options(tunnel::create_spec(&tunnel::Tunnel::wanted(attrs, 2)))
                    .build();
                let created = self
                    .patient(a, progress, || async {
                        self.ec2
                            .create_vpn_connection()
                            .r#type("ipsec.1")
                            .customer_gateway_id(&cgw)
                            .vpn_gateway_id(&vgw)
                            .options(options.clone())
                            .tag_specifications(tag_spec(AwsType::VpnConnection, &desired_tags(req.stack, a, attrs)))
                            .send()
                            .await
                            .map_err(|x| sdk_error(a, x.into_service_error()))
                    })
                    .await;
                let id = match created {
                    Ok(r) => r.vpn_connection().and_then(|c| c.vpn_connection_id()).unwrap_or_default().to_string(),
                    // A create EC2 carried out whose answer was lost: the SDK's retry is refused
                    // (the inside CIDRs are taken, by that very connection). It carries this
                    // address's tags, so it is adopted rather than left untracked.
                    Err(e) => match self.existing_id(req.stack, a).await? {
                        Some(id) => {
                            progress.waiting(a, &format!("adopting {id}, created by a call whose answer was lost"));
                            id
                        }
                        None => return Err(e),
                    },
                };
                self.reap_twins(req.stack, a, &id, progress).await?;
                id
            }
        };
        self.wait(a, "waiting for AWS to provision the VPN connection (typically 5-10 minutes)", progress, || async {
            Ok(self.read_connection(a, &id, cidrs).await?.0.as_deref() == Some("available"))
        })
        .await?;
        // Every option the spec sets and the tunnel does not carry is sent, one tunnel at a time,
        // each modification waited out (the connection is `modifying` until it is applied) so
        // that the other tunnel carries traffic meanwhile and EC2 takes the next one.
        // Tags do not change with a tunnel modification: read once. The tunnels are read again
        // only after a modification (which may change which one matches tunnel 1's range).
        let current = tags_in(&self.read_connection(a, &id, cidrs).await?.1);
        let (mut tunnels, _) = self.tunnels(a, &id, cidrs).await?;
        for n in 1..=2u8 {
            let Some(have) = tunnels.get(usize::from(n) - 1).cloned() else { continue };
            let want = tunnel::Tunnel::wanted(attrs, n);
            let changed = want.changed(&have.0);
            if changed.is_empty() {
                continue;
            }
            let what =
                changed.iter().map(|c| if *c == "psk" { "pre-shared key" } else { c }).collect::<Vec<_>>().join(", ");
            progress.waiting(a, &format!("modifying tunnel {n} ({what})"));
            self.patient(a, progress, || async {
                self.ec2
                    .modify_vpn_tunnel_options()
                    .vpn_connection_id(&id)
                    .vpn_tunnel_outside_ip_address(&have.1)
                    .tunnel_options(tunnel::modify_spec(&want, &changed))
                    .send()
                    .await
                    .map_err(|x| sdk_error(a, x.into_service_error()))
            })
            .await?;
            self.wait(a, &format!("waiting for AWS to apply the change to tunnel {n}"), progress, || async {
                Ok(self.read_connection(a, &id, cidrs).await?.0.as_deref() == Some("available"))
            })
            .await?;
            tunnels = self.tunnels(a, &id, cidrs).await?.0;
        }
        self.retag(a, &id, &current, &desired_tags(req.stack, a, attrs)).await?;
        let (_, out) = self.read_connection(a, &id, cidrs).await?;
        Ok(Observed { address: a.clone(), id, attributes: out })
    }

    /// The marker in a rule's description that says whose it is.
    fn marker(stack: &str, address: &Address) -> String {
        format!("[xcsp {stack} {address}]")
    }

    fn permissions(stack: &str, address: &Address, attrs: &Attributes) -> Vec<IpPermission> {
        let rules = match attrs.get("rules") {
            Some(Value::List(l)) => l.clone(),
            _ => vec![],
        };
        rules
            .iter()
            .filter_map(Value::as_map)
            .map(|r| {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                let n = |k: &str| r.get(k).and_then(Value::as_i64).unwrap_or_default() as i32;
                let description = format!("{} {}", s("description"), Self::marker(stack, address));
                IpPermission::builder()
                    .ip_protocol(s("protocol"))
                    .from_port(n("from_port"))
                    .to_port(n("to_port"))
                    .ip_ranges(IpRange::builder().cidr_ip(s("cidr")).description(description).build())
                    .build()
            })
            .collect()
    }

    async fn cluster_groups(&self, a: &Address, attrs: &Attributes) -> Result<Vec<String>, ProviderError> {
        let given = strings(attrs, "security_group_ids");
        if !given.is_empty() {
            return Ok(given);
        }
        let tag = str_attr(attrs, "cluster_tag").unwrap_or_default();
        let r = self
            .ec2
            .describe_security_groups()
            .filters(filter("tag-key", &[&tag]))
            .send()
            .await
            .map_err(|x| sdk_error(a, x.into_service_error()))?;
        let ids: Vec<String> = r.security_groups().iter().filter_map(|g| g.group_id().map(String::from)).collect();
        if ids.is_empty() {
            return Err(failed(a, "ClusterSecurityGroupsNotFound", format!("no security group carries the tag {tag}")));
        }
        Ok(ids)
    }

    async fn ingress(&self, req: &Request<'_>) -> Result<Observed, ProviderError> {
        let a = req.address;
        let groups = self.cluster_groups(a, req.attributes).await?;
        let wanted = Self::permissions(req.stack, a, req.attributes);
        let same = |x: &IpPermission, y: &IpPermission| {
            let cidr = |p: &IpPermission| p.ip_ranges().first().and_then(|r| r.cidr_ip()).map(String::from);
            (x.ip_protocol(), x.from_port(), x.to_port(), cidr(x))
                == (y.ip_protocol(), y.from_port(), y.to_port(), cidr(y))
        };
        // Read first, member by member, so that only the missing rules are sent (a run cut short
        // after some of them is completed, not repeated) and only ours the spec dropped are revoked.
        let have = self.marked_rules(a, &groups, req.stack).await?;
        for g in &groups {
            for p in wanted.iter().filter(|p| !have.iter().any(|(hg, h)| hg == g && same(p, h))) {
                match self.ec2.authorize_security_group_ingress().group_id(g).ip_permissions(p.clone()).send().await {
                    Ok(_) => {}
                    Err(x) => {
                        let x = x.into_service_error();
                        // Already there (added since the read, or a retried call whose answer was lost): fine.
                        if x.code() != Some("InvalidPermission.Duplicate") {
                            return Err(sdk_error(a, x));
                        }
                    }
                }
            }
        }
        for (g, h) in have {
            if !wanted.iter().any(|w| same(w, &h)) {
                self.revoke(a, &g, h).await?;
            }
        }
        // What is there now, read back member by member as refresh reads it.
        let r = self
            .ec2
            .describe_security_groups()
            .set_group_ids(Some(groups.clone()))
            .send()
            .await
            .map_err(|x| sdk_error(a, x.into_service_error()))?;
        let mut out = ingress::observe(req.stack, r.security_groups())
            .into_iter()
            .find(|(found, _)| found == a)
            .map(|(_, attrs)| attrs)
            .unwrap_or_default();
        out.insert("security_group_ids".into(), Value::strings(groups.iter()));
        Ok(Observed { address: a.clone(), id: groups.join(","), attributes: out })
    }

    /// The rules in `groups` that carry the marker of `a`, one IP range each, by group.
    async fn marked_rules(
        &self,
        a: &Address,
        groups: &[String],
        stack: &str,
    ) -> Result<Vec<(String, IpPermission)>, ProviderError> {
        let marker = Self::marker(stack, a);
        let r = self
            .ec2
            .describe_security_groups()
            .set_group_ids(Some(groups.to_vec()))
            .send()
            .await
            .map_err(|x| sdk_error(a, x.into_service_error()))?;
        let mut out = Vec::new();
        for g in r.security_groups() {
            for p in g.ip_permissions() {
                for range in p.ip_ranges().iter().filter(|r| r.description().is_some_and(|d| d.contains(&marker))) {
                    let rule = IpPermission::builder()
                        .set_ip_protocol(p.ip_protocol().map(String::from))
                        .set_from_port(p.from_port())
                        .set_to_port(p.to_port())
                        .ip_ranges(range.clone())
                        .build();
                    out.push((g.group_id().unwrap_or_default().to_string(), rule));
                }
            }
        }
        Ok(out)
    }

    /// Revokes one rule; one already gone is fine.
    async fn revoke(&self, a: &Address, group: &str, rule: IpPermission) -> Result<(), ProviderError> {
        match self.ec2.revoke_security_group_ingress().group_id(group).ip_permissions(rule).send().await {
            Ok(_) => Ok(()),
            Err(x) => {
                let x = x.into_service_error();
                if matches!(x.code(), Some("InvalidPermission.NotFound" | "InvalidGroup.NotFound")) {
                    Ok(())
                } else {
                    Err(sdk_error(a, x))
                }
            }
        }
    }

    async fn remove(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<(), ProviderError> {
        let a = req.address;
        let id = req.id.unwrap_or_default().to_string();
        match a.rtype {
            T::AwsVpnGateway => {
                self.ec2
                    .delete_vpn_gateway()
                    .vpn_gateway_id(&id)
                    .send()
                    .await
                    .map_err(|x| sdk_error(a, x.into_service_error()))?;
                self.wait(a, "waiting for the gateway to be deleted", progress, || async {
                    Ok(self.vgw(a, &id).await?.is_none_or(|g| g.state().map(|s| s.as_str()) == Some("deleted")))
                })
                .await
            }
            T::AwsVpnGatewayAttachment => {
                let (vgw, vpc) = id.split_once('/').unwrap_or((id.as_str(), ""));
                match self.ec2.detach_vpn_gateway().vpn_gateway_id(vgw).vpc_id(vpc).send().await {
                    Ok(_) => {}
                    Err(x) => {
                        let x = x.into_service_error();
                        if !x.code().is_some_and(|c| c.contains("NotFound")) {
                            return Err(sdk_error(a, x));
                        }
                    }
                }
                // The attachment is `detaching` for a while; the gateway cannot be deleted (nor
                // attached again) until it is `detached` (EC2 `VpcAttachment.State`;
                // terraform-provider-aws waits for it the same way after DetachVpnGateway).
                self.wait(a, "waiting for the gateway to detach from the VPC", progress, || async {
                    let g = self.vgw(a, vgw).await?;
                    Ok(g.is_none_or(|g| {
                        !g.vpc_attachments().iter().any(|v| {
                            v.vpc_id() == Some(vpc)
                                && matches!(v.state().map(|s| s.as_str()), Some("attaching" | "attached" | "detaching"))
                        })
                    }))
                })
                .await
            }
            T::AwsRoutePropagation => {
                for rt in strings(req.attributes, "route_table_ids") {
                    let _ = self.ec2.disable_vgw_route_propagation().gateway_id(&id).route_table_id(rt).send().await;
                }
                Ok(())
            }
            T::AwsCustomerGateway => {
                self.ec2
                    .delete_customer_gateway()
                    .customer_gateway_id(&id)
                    .send()
                    .await
                    .map_err(|x| sdk_error(a, x.into_service_error()))?;
                Ok(())
            }
            T::AwsVpnConnection => {
                self.ec2
                    .delete_vpn_connection()
                    .vpn_connection_id(&id)
                    .send()
                    .await
                    .map_err(|x| sdk_error(a, x.into_service_error()))?;
                self.wait(a, "waiting for the VPN connection to be deleted", progress, || async {
                    Ok(matches!(self.read_connection(a, &id, [None, None]).await, Ok((Some(s), _)) if s == "deleted"))
                })
                .await
            }
            T::AwsVpnConnectionRoute => {
                let (conn, cidr) = id.split_once('/').unwrap_or((id.as_str(), ""));
                self.ec2
                    .delete_vpn_connection_route()
                    .vpn_connection_id(conn)
                    .destination_cidr_block(cidr)
                    .send()
                    .await
                    .map_err(|x| sdk_error(a, x.into_service_error()))?;
                Ok(())
            }
            T::AwsSecurityGroupIngress => {
                // Every rule marked as this resource's, whatever state recorded of them.
                let groups: Vec<String> = id.split(',').filter(|g| !g.is_empty()).map(String::from).collect();
                if groups.is_empty() {
                    return Ok(());
                }
                for (g, rule) in self.marked_rules(a, &groups, req.stack).await? {
                    self.revoke(a, &g, rule).await?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Every live resource of `rtype` tagged with `stack`, and those state records (`known`:
    /// address and id) whatever their tags say now: a second describe with the ids as a filter
    /// (filters, unlike id lists, do not fail on an id that is gone).
    async fn list(&self, stack: &str, rtype: T, known: &[Observed]) -> Result<Vec<Observed>, ProviderError> {
        let probe = Address::new(rtype, "refresh");
        let by_stack = || vec![filter(&format!("tag:{STACK_TAG}"), &[stack])];
        // The recorded id of each known resource, by the cloud object it names (an attachment's
        // and a propagation's id begin with their gateway's).
        let known_ids: Vec<(&Address, String)> = known
            .iter()
            .filter(|k| k.address.rtype == rtype)
            .map(|k| (&k.address, k.id.split('/').next().unwrap_or_default().to_string()))
            .collect();
        let by_id = |id: &str| known_ids.iter().find(|(_, k)| k == id).map(|(a, _)| (*a).clone());
        // The address a cloud object answers to: its tags, else the state record of its id.
        let address = |tags: &[Tag], id: &str| -> Option<Address> {
            owner(stack, tags).map(|a| Address { rtype, name: a.name, index: a.index }).or_else(|| by_id(id))
        };
        let missing = |found: &[String]| -> Vec<String> {
            let mut m: Vec<String> =
                known_ids.iter().map(|(_, id)| id.clone()).filter(|id| !found.contains(id)).collect();
            m.sort();
            m.dedup();
            m
        };
        let mut out = Vec::new();
        match rtype {
            T::AwsVpnGateway | T::AwsVpnGatewayAttachment | T::AwsRoutePropagation => {
                let gateways = tagged_or_recorded!(
                    self,
                    describe_vpn_gateways,
                    vpn_gateways,
                    vpn_gateway_id,
                    "vpn-gateway-id",
                    &probe,
                    by_stack(),
                    missing
                );
                let tables = if rtype == T::AwsRoutePropagation {
                    let mut all = Vec::new();
                    let mut pages = self.ec2.describe_route_tables().into_paginator().send();
                    while let Some(page) = pages.next().await {
                        all.extend(
                            page.map_err(|x| sdk_error(&probe, x.into_service_error()))?.route_tables().to_vec(),
                        );
                    }
                    all
                } else {
                    Vec::new()
                };
                for g in gateways.iter().filter(|g| live(g.state().map(|s| s.as_str()))) {
                    let id = g.vpn_gateway_id().unwrap_or_default().to_string();
                    let Some(addr) = address(g.tags(), &id) else { continue };
                    let sibling = |t: T| Address { rtype: t, name: addr.name.clone(), index: addr.index };
                    match rtype {
                        T::AwsVpnGateway => {
                            let mut attrs = Attributes::new();
                            attrs.insert("amazon_side_asn".into(), Value::int(g.amazon_side_asn().unwrap_or_default()));
                            attrs.insert("type".into(), Value::string("ipsec.1"));
                            attrs.insert("tags".into(), tags_value(&tag_map(g.tags())));
                            attrs.insert("id".into(), Value::string(&id));
                            out.push(Observed { address: addr, id, attributes: attrs });
                        }
                        T::AwsVpnGatewayAttachment => {
                            for att in g
                                .vpc_attachments()
                                .iter()
                                .filter(|x| matches!(x.state().map(|s| s.as_str()), Some("attached" | "attaching")))
                            {
                                let vpc = att.vpc_id().unwrap_or_default();
                                let mut attrs = Attributes::new();
                                attrs.insert("vpn_gateway_id".into(), Value::string(&id));
                                attrs.insert("vpc_id".into(), Value::string(vpc));
                                let state = att.state().map(|s| s.as_str()).unwrap_or("attaching");
                                attrs.insert("state".into(), Value::string(state));
                                out.push(Observed {
                                    address: sibling(T::AwsVpnGatewayAttachment),
                                    id: format!("{id}/{vpc}"),
                                    attributes: attrs,
                                });
                            }
                        }
                        _ => {
                            let propagates = |t: &&aws_sdk_ec2::types::RouteTable| {
                                t.propagating_vgws().iter().any(|p| p.gateway_id() == Some(id.as_str()))
                            };
                            let ids: Vec<String> = tables
                                .iter()
                                .filter(propagates)
                                .filter_map(|t| t.route_table_id().map(String::from))
                                .collect();
                            if !ids.is_empty() {
                                // Member by member: does every table of the VPC the gateway is
                                // attached to propagate its routes?
                                let vpc = g.vpc_attachments().iter().find_map(|x| x.vpc_id());
                                let every = tables
                                    .iter()
                                    .filter(|t| t.vpc_id().is_some() && t.vpc_id() == vpc)
                                    .all(|t| propagates(&t));
                                let mut attrs = Attributes::new();
                                attrs.insert("vpn_gateway_id".into(), Value::string(&id));
                                attrs.insert("route_table_ids".into(), Value::strings(ids.iter()));
                                attrs.insert("every_route_table".into(), Value::Bool(every));
                                out.push(Observed {
                                    address: sibling(T::AwsRoutePropagation),
                                    id: id.clone(),
                                    attributes: attrs,
                                });
                            }
                        }
                    }
                }
            }
            T::AwsCustomerGateway => {
                let gateways = tagged_or_recorded!(
                    self,
                    describe_customer_gateways,
                    customer_gateways,
                    customer_gateway_id,
                    "customer-gateway-id",
                    &probe,
                    by_stack(),
                    missing
                );
                for g in gateways.iter().filter(|g| live(g.state())) {
                    let id = g.customer_gateway_id().unwrap_or_default().to_string();
                    let Some(addr) = address(g.tags(), &id) else { continue };
                    let mut attrs = Attributes::new();
                    attrs.insert("ip_address".into(), Value::string(g.ip_address().unwrap_or_default()));
                    attrs.insert("bgp_asn".into(), Value::int(cgw_asn(g)));
                    attrs.insert("type".into(), Value::string(g.r#type().unwrap_or("ipsec.1")));
                    attrs.insert("tags".into(), tags_value(&tag_map(g.tags())));
                    attrs.insert("id".into(), Value::string(&id));
                    out.push(Observed { address: addr, id, attributes: attrs });
                }
            }
            T::AwsVpnConnection => {
                let conns = tagged_or_recorded!(
                    self,
                    describe_vpn_connections,
                    vpn_connections,
                    vpn_connection_id,
                    "vpn-connection-id",
                    &probe,
                    by_stack(),
                    missing
                );
                for c in conns.iter().filter(|c| live(c.state().map(|s| s.as_str()))) {
                    let id = c.vpn_connection_id().unwrap_or_default().to_string();
                    let Some(addr) = address(c.tags(), &id) else { continue };
                    let mut attrs = Attributes::new();
                    attrs.insert("customer_gateway".into(), Value::string(c.customer_gateway_id().unwrap_or_default()));
                    attrs.insert("vpn_gateway_id".into(), Value::string(c.vpn_gateway_id().unwrap_or_default()));
                    // Tunnel 1 is the one state records as tunnel 1 (by its outside address), or,
                    // for a connection state does not know, the one with the lower inside range.
                    let recorded = known.iter().find(|k| k.address.rtype == rtype && k.id == id).map(|k| &k.attributes);
                    let had = |k: &str| recorded.and_then(|r| r.get(k)).and_then(Value::as_str);
                    let cidrs = [had("tunnel1_inside_cidr"), had("tunnel2_inside_cidr")];
                    tunnel_outputs(&mut attrs, c.options(), c.vgw_telemetry(), had("tunnel1_address"), cidrs);
                    attrs.insert("tags".into(), tags_value(&tag_map(c.tags())));
                    attrs.insert("id".into(), Value::string(&id));
                    out.push(Observed { address: addr, id, attributes: attrs });
                }
            }
            T::AwsSecurityGroupIngress => {
                let mut pages = self.ec2.describe_security_groups().into_paginator().send();
                let mut groups: Vec<aws_sdk_ec2::types::SecurityGroup> = Vec::new();
                while let Some(page) = pages.next().await {
                    groups.extend(
                        page.map_err(|x| sdk_error(&probe, x.into_service_error()))?.security_groups().to_vec(),
                    );
                }
                for (addr, observed_attrs) in ingress::observe(stack, &groups) {
                    let id = strings(&observed_attrs, "security_group_ids").join(",");
                    out.push(Observed { address: addr, id, attributes: observed_attrs });
                }
            }
            _ => {}
        }
        Ok(out)
    }
}

impl Provider for AwsProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Aws
    }

    fn refresh_known<'a>(
        &'a self,
        stack: &'a str,
        rtype: T,
        known: &'a [Observed],
    ) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(self.list(stack, rtype, known))
    }

    fn create<'a>(
        &'a self,
        req: Request<'a>,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move { self.create_or_update(&req, progress).await })
    }

    fn update<'a>(
        &'a self,
        req: Request<'a>,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move { self.create_or_update(&req, progress).await })
    }

    fn delete<'a>(&'a self, req: Request<'a>, progress: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            match self.remove(&req, progress).await {
                Err(ProviderError::NotFound { .. }) => Ok(()),
                other => other,
            }
        })
    }
}
