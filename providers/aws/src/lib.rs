//! The AWS provider: the VPN side of the link in the cluster's VPC, through aws-sdk-ec2, and the
//! DNS endpoint the Azure side resolves the cluster's names through.
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
//!
//! The modules: `ec2` translates between attributes and EC2's requests and answers, `tunnel`
//! and `ingress` do the same for tunnel options and security-group rules (no IO in any of the
//! three); each family module makes, updates, deletes and lists its types: `gateways` (virtual
//! private and customer gateways, attachments, route propagation), `connection` (VPN
//! connections and their static routes), `security_groups` (`aws_security_group_ingress` and
//! `aws_security_group`) and `resolver` (`aws_route53_resolver_endpoint`, through
//! aws-sdk-route53resolver).
//! This file keeps the configuration, the shared waits and `kinds!`, the one table from a type to
//! its family's calls.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{Filter, Tag};
use xcsp_core::provider::{BoxFuture, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{ADDRESS_TAG, Address, ProviderKind, ResourceType as T, STACK_TAG};

use ec2::{failed, filter, live, owner, sdk_error};

mod connection;
mod ec2;
mod gateways;
mod ingress;
mod resolver;
mod security_groups;
mod tunnel;

/// What the provider's operations answer.
type Result<T> = std::result::Result<T, ProviderError>;

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
    resolver: aws_sdk_route53resolver::Client,
    config: AwsConfig,
}

/// What one refresh of a type works from: the stack, what state records of the type (`known`:
/// address, id and attributes), and the address its errors are reported against.
struct Listing<'a> {
    stack: &'a str,
    rtype: T,
    known: &'a [Observed],
    probe: Address,
    /// The recorded id of each known resource, by the cloud object it names (an attachment's
    /// and a propagation's id begin with their gateway's).
    known_ids: Vec<(&'a Address, String)>,
}

impl<'a> Listing<'a> {
    fn new(stack: &'a str, rtype: T, known: &'a [Observed]) -> Listing<'a> {
        let known_ids = known
            .iter()
            .filter(|k| k.address.rtype == rtype)
            .map(|k| (&k.address, k.id.split('/').next().unwrap_or_default().to_string()))
            .collect();
        Listing { stack, rtype, known, probe: Address::new(rtype, "refresh"), known_ids }
    }

    fn by_stack(&self) -> Vec<Filter> {
        vec![filter(&format!("tag:{STACK_TAG}"), &[self.stack])]
    }

    /// The address a cloud object answers to: its tags, else the state record of its id.
    fn address(&self, tags: &[Tag], id: &str) -> Option<Address> {
        let by_id = || self.known_ids.iter().find(|(_, k)| k == id).map(|(a, _)| (*a).clone());
        owner(self.stack, tags).map(|a| Address { rtype: self.rtype, name: a.name, index: a.index }).or_else(by_id)
    }

    /// The recorded ids the describe by tag did not find among `found`.
    fn missing(&self, found: &[String]) -> Vec<String> {
        let mut m: Vec<String> =
            self.known_ids.iter().map(|(_, id)| id.clone()).filter(|id| !found.contains(id)).collect();
        m.sort();
        m.dedup();
        m
    }
}

/// Sends an EC2 request: its answer, or its error as the engine needs it ([`ec2::sdk_error`] of
/// the service error, reported against `$address`). The SDK's request builders have `send` but
/// no trait in common, hence a macro.
macro_rules! send {
    ($address:expr, $request:expr) => {
        $request.send().await.map_err(|x| $crate::ec2::sdk_error($address, x.into_service_error()))
    };
}
pub(crate) use send;

/// The items of a describe call by the stack's tag, then, by id, the recorded ones the tag
/// filter missed (their tags were changed): [`Listing::missing`] of the ids seen.
macro_rules! tagged_or_recorded {
    ($self:ident, $listing:expr, $describe:ident, $items:ident, $id:ident, $id_filter:literal) => {{
        let listing: &$crate::Listing = $listing;
        let r = $crate::send!(&listing.probe, $self.ec2.$describe().set_filters(Some(listing.by_stack())))?;
        let mut items = r.$items().to_vec();
        let seen: Vec<String> = items.iter().filter_map(|x| x.$id().map(String::from)).collect();
        let gone: Vec<String> = listing.missing(&seen);
        if !gone.is_empty() {
            let ids: Vec<&str> = gone.iter().map(String::as_str).collect();
            let r =
                $crate::send!(&listing.probe, $self.ec2.$describe().filters($crate::ec2::filter($id_filter, &ids)))?;
            items.extend(r.$items().iter().cloned());
        }
        items
    }};
}
pub(crate) use tagged_or_recorded;

impl AwsProvider {
    pub async fn new(config: AwsConfig) -> AwsProvider {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(xcsp_crypto::aws_http_client())
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
        AwsProvider { ec2: Client::new(&shared), resolver: aws_sdk_route53resolver::Client::new(&shared), config }
    }

    /// Polls `check` until it says done, with backoff, reporting `what`.
    async fn wait<F, Fut>(&self, address: &Address, what: &str, progress: &dyn Progress, check: F) -> Result<()>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<bool>>,
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
    async fn patient<R, F, Fut>(&self, address: &Address, progress: &dyn Progress, call: F) -> Result<R>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<R>>,
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

    /// A live resource of this stack with this address tag, found by `describe`.
    async fn existing_id(&self, stack: &str, address: &Address) -> Result<Option<String>> {
        Ok(self.live_ids(stack, address).await?.into_iter().next())
    }

    /// Every live resource of this stack with this address tag.
    async fn live_ids(&self, stack: &str, address: &Address) -> Result<Vec<String>> {
        let filters = vec![
            filter(&format!("tag:{STACK_TAG}"), &[stack]),
            filter(&format!("tag:{ADDRESS_TAG}"), &[&address.to_string()]),
        ];
        Ok(match address.rtype {
            T::AwsVpnGateway => send!(address, self.ec2.describe_vpn_gateways().set_filters(Some(filters)))?
                .vpn_gateways()
                .iter()
                .filter(|g| live(g.state().map(|s| s.as_str())))
                .filter_map(|g| g.vpn_gateway_id().map(String::from))
                .collect(),
            T::AwsCustomerGateway => send!(address, self.ec2.describe_customer_gateways().set_filters(Some(filters)))?
                .customer_gateways()
                .iter()
                .filter(|g| live(g.state()))
                .filter_map(|g| g.customer_gateway_id().map(String::from))
                .collect(),
            T::AwsVpnConnection => send!(address, self.ec2.describe_vpn_connections().set_filters(Some(filters)))?
                .vpn_connections()
                .iter()
                .filter(|c| live(c.state().map(|s| s.as_str())))
                .filter_map(|c| c.vpn_connection_id().map(String::from))
                .collect(),
            T::AwsSecurityGroup => send!(address, self.ec2.describe_security_groups().set_filters(Some(filters)))?
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id().map(String::from))
                .collect(),
            _ => Vec::new(),
        })
    }

    /// Deletes the twins of `keep`: live resources with its address tag that a create made
    /// besides it. EC2's VPN creates take no idempotency token, and the SDK retries a call whose
    /// answer was lost (a dropped connection), so one create can leave two; the one EC2 answered
    /// with is kept and recorded, the others go, so nothing is left untracked.
    async fn reap_twins(&self, stack: &str, a: &Address, keep: &str, progress: &dyn Progress) -> Result<()> {
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

    /// Makes the tags of `id` the `want`ed ones (CreateTags for new and changed values,
    /// DeleteTags for the rest) and returns them; calls nothing when they already are.
    async fn retag(
        &self,
        a: &Address,
        id: &str,
        have: &BTreeMap<String, String>,
        want: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>> {
        let set: Vec<Tag> = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let gone: Vec<Tag> =
            have.keys().filter(|k| !want.contains_key(*k)).map(|k| Tag::builder().key(k).build()).collect();
        if !set.is_empty() {
            send!(a, self.ec2.create_tags().resources(id).set_tags(Some(set)))?;
        }
        if !gone.is_empty() {
            send!(a, self.ec2.delete_tags().resources(id).set_tags(Some(gone)))?;
        }
        Ok(want.clone())
    }
}

/// The one table from a resource type to its handler: the calls in its family's module that
/// create or update it, delete it, and list it (a type read with another lists nothing of its
/// own). Adding a type is its calls and a row here.
macro_rules! kinds {
    ($($t:ident => $write:ident, $delete:ident, $list:ident;)*) => {
        /// Every AWS resource type the table names.
        #[cfg(test)]
        const KINDS: &[T] = &[$(T::$t),*];

        impl AwsProvider {
            /// Creates or updates one resource, through its type's handler.
            async fn create_or_update(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<Observed> {
                let a = req.address;
                match a.rtype {
                    $(T::$t => self.$write(req, progress).await,)*
                    _ => Err(failed(a, "NotAws", format!("{} is not an AWS resource type", a.rtype.as_str()))),
                }
            }

            /// Deletes one resource, likewise.
            async fn remove(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<()> {
                let id = req.id.unwrap_or_default();
                match req.address.rtype {
                    $(T::$t => self.$delete(req, id, progress).await,)*
                    _ => Ok(()),
                }
            }

            /// Every live resource of `rtype` tagged with `stack`, and those state records
            /// (`known`: address and id) whatever their tags say now: a second describe with the
            /// ids as a filter (filters, unlike id lists, do not fail on an id that is gone).
            async fn list(&self, stack: &str, rtype: T, known: &[Observed]) -> Result<Vec<Observed>> {
                let l = Listing::new(stack, rtype, known);
                match rtype {
                    $(T::$t => self.$list(&l).await,)*
                    _ => Ok(Vec::new()),
                }
            }
        }
    };
}

kinds! {
    AwsVpnGateway => vpn_gateway, delete_vpn_gateway, list_vpn_gateways;
    AwsVpnGatewayAttachment => attachment, detach, list_vpn_gateways;
    AwsRoutePropagation => route_propagation, stop_propagation, list_vpn_gateways;
    AwsCustomerGateway => customer_gateway, delete_customer_gateway, list_customer_gateways;
    AwsVpnConnection => vpn_connection, delete_vpn_connection, list_vpn_connections;
    AwsVpnConnectionRoute => connection_route, delete_connection_route, listed_with_state;
    AwsSecurityGroupIngress => ingress, revoke_ingress, list_ingress;
    AwsSecurityGroup => security_group, delete_security_group, list_security_groups;
    AwsResolverEndpoint => resolver_endpoint, delete_resolver_endpoint, list_resolver_endpoints;
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
    ) -> BoxFuture<'a, Result<Vec<Observed>>> {
        Box::pin(self.list(stack, rtype, known))
    }

    fn write<'a>(&'a self, req: Request<'a>, progress: &'a dyn Progress) -> BoxFuture<'a, Result<Observed>> {
        Box::pin(async move { self.create_or_update(&req, progress).await })
    }

    fn delete<'a>(&'a self, req: Request<'a>, progress: &'a dyn Progress) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match self.remove(&req, progress).await {
                Err(ProviderError::NotFound { .. }) => Ok(()),
                other => other,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_aws_type_has_one_handler() {
        for t in T::ALL.iter().filter(|t| t.provider() == ProviderKind::Aws) {
            assert_eq!(KINDS.iter().filter(|k| *k == t).count(), 1, "{}", t.as_str());
        }
        assert!(KINDS.iter().all(|t| t.provider() == ProviderKind::Aws));
    }
}
