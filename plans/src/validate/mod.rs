//! Semantic checks on a decoded spec, before any cloud call. Each rule is a function that adds
//! problems; all of them run, so the user sees every mistake at once. The cloud documentation
//! behind each limit is cited beside its rule and in docs/src/reference/cloud-facts.md.
//!
//! The rules by concern: `cluster` (the stack's name, the cluster block), `clouds` (regions,
//! accounts, tags), `network` (address space, ASNs, each link's gateway, tunnels and IPsec
//! policy, AWS's limits per VPC and security group) and `pool` (worker pools).

mod clouds;
mod cluster;
mod network;
mod pool;

use xcsp_core::{Problem, Problems, Span};

use crate::spec::*;
use clouds::{check_regions, check_tags};
use cluster::{check_cluster, check_stack};
pub use network::AWS_RULES_PER_GROUP;
use network::{check_address_space, check_asns, check_fips, check_network, check_rule_quota, check_shared_vpcs};
use pool::{check_pool, check_pool_identities, check_zones};

/// A spec that passed every check: all singleton blocks present, all rules satisfied.
#[derive(Debug, Clone)]
pub struct Model {
    pub stack: String,
    pub cluster: Cluster,
    pub aws: Aws,
    pub azure: Azure,
    pub networks: Vec<Network>,
    pub identities: Vec<Identity>,
    pub pools: Vec<Pool>,
    pub outputs: Vec<Output>,
    pub references: Vec<(String, String)>,
    pub digest: String,
    pub backend: Option<crate::spec::Backend>,
}

/// Runs every rule. Returns the model if no rule found an error (warnings are allowed).
pub fn validate(spec: Spec, problems: &mut Problems) -> Option<Model> {
    check_stack(&spec, problems);
    check_cluster(&spec, problems);
    check_address_space(&spec, problems);
    check_asns(&spec, problems);
    check_regions(&spec, problems);
    for n in &spec.networks {
        check_network(n, problems);
    }
    check_pool_identities(&spec, problems);
    check_shared_vpcs(&spec, problems);
    check_fips(&spec, problems);
    check_rule_quota(&spec, problems);
    check_tags(&spec, problems);
    for id in &spec.identities {
        check_https(&id.issuer, "the OIDC issuer", problems);
    }
    for p in &spec.pools {
        check_pool(p, problems);
    }
    check_zones(&spec, problems);
    if let Some(c) = &spec.cluster {
        pool::check_pool_roles(&spec.stack, c, &spec.pools, problems);
    }
    if problems.has_errors() {
        return None;
    }
    Some(Model {
        stack: spec.stack,
        cluster: spec.cluster?,
        aws: spec.aws?,
        azure: spec.azure?,
        networks: spec.networks,
        identities: spec.identities,
        pools: spec.pools,
        outputs: spec.outputs,
        references: spec.references,
        digest: spec.digest,
        backend: spec.backend,
    })
}

fn err(code: &'static str, message: impl Into<String>, span: &Span, label: &str) -> Problem {
    Problem::error(code, message).label(span, label)
}

fn check_https(url: &Sp<String>, what: &str, problems: &mut Problems) {
    let ok = url.value.strip_prefix("https://").is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'));
    if !ok {
        problems.push(
            err("xcsp::url::https", format!("{what} must be an https:// URL"), &url.span, "")
                .with_help("Azure fetches the issuer's discovery document over public HTTPS"),
        );
    } else if url.value.ends_with('/') && what.contains("issuer") {
        problems.push(
            Problem::warning("xcsp::url::trailing_slash", "the issuer ends with `/`")
                .label(&url.span, "")
                .with_help("the federated credential's issuer must equal the cluster's serviceAccountIssuer exactly (AADSTS70021 otherwise)"),
        );
    }
}
