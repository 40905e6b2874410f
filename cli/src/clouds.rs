//! Reaching the clouds: builds each provider from the spec and the environment, and reads the
//! tunnels' state out of refreshed resources for `xcsp status`.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Serialize;
use xcsp_aws::{AwsConfig, AwsProvider};
use xcsp_azure::{AzureConfig, AzureProvider, Cloud};
use xcsp_core::{Address, ProviderKind, ResourceType, Value};
use xcsp_engine::Providers;
use xcsp_kube::{KubeConfig, KubeProvider};
use xcsp_local::LocalProvider;
use xcsp_plans::spec::AzureCloud;
use xcsp_plans::validate::Model;
use xcsp_state::State;

use crate::cluster::Kubeconfig;
use crate::report::CliError;

/// The providers for `kinds`, configured from the spec, with the usual environment overrides:
/// AWS reads its default credential chain and `AWS_ENDPOINT_URL`; Azure its credential chain
/// (`AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`,
/// managed identity, Azure CLI), with `XCSP_AZURE_ENDPOINT` and `AZURE_AUTHORITY_HOST` pointing
/// it at another Resource Manager (the local clouds) while keeping the spec's cloud audience;
/// Kubernetes the kubeconfig [`crate::cluster::find`] found, if any.
pub async fn providers(
    model: &Model,
    kinds: &BTreeSet<ProviderKind>,
    cluster: Option<&Kubeconfig>,
) -> miette::Result<Providers> {
    let mut providers = Providers::new().with(Arc::new(LocalProvider));
    if kinds.contains(&ProviderKind::Aws) {
        let mut config = AwsConfig::new(&model.aws.region.value);
        config.use_fips = model.aws.fips;
        providers = providers.with(Arc::new(AwsProvider::new(config).await));
    }
    if kinds.contains(&ProviderKind::Azure) {
        let az = &model.azure;
        let spec_cloud = match (az.cloud.value, &az.endpoints) {
            (AzureCloud::Public, _) => Cloud::Public,
            (AzureCloud::UsGovernment, _) => Cloud::UsGovernment,
            (AzureCloud::Custom, Some(e)) => Cloud::Custom {
                resource_manager: e.resource_manager.value.clone(),
                authority_host: e.authority.value.clone(),
                audience: e.resource_manager.value.clone(),
            },
            (AzureCloud::Custom, None) => Cloud::Public,
        };
        let cloud = match std::env::var("XCSP_AZURE_ENDPOINT") {
            Ok(endpoint) => Cloud::Custom {
                authority_host: std::env::var("AZURE_AUTHORITY_HOST").unwrap_or_else(|_| endpoint.clone()),
                resource_manager: endpoint,
                audience: spec_cloud.scope().trim_end_matches("/.default").to_string(),
            },
            Err(_) => spec_cloud,
        };
        let config = AzureConfig::new(&az.subscription_id.value, &az.tenant_id.value, &az.resource_group.value, cloud);
        providers = providers.with(Arc::new(AzureProvider::new(config)?));
    }
    if kinds.contains(&ProviderKind::Kubernetes)
        && let Some(found) = cluster
    {
        let mut config = KubeConfig::new(&found.path);
        config.context = found.context.clone();
        let p = KubeProvider::new(config)
            .await
            .map_err(|e| CliError::Kubeconfig { detail: e.to_string(), from: found.from.to_string() })?;
        providers = providers.with(Arc::new(p));
    }
    Ok(providers)
}

/// One IPsec tunnel as both clouds see it.
#[derive(Debug, Serialize)]
pub struct Tunnel {
    /// e.g. `aws_vpn_connection.link[0] tunnel 1`.
    pub tunnel: String,
    pub outside_ip: String,
    /// From the AWS VGW telemetry: UP or DOWN.
    pub aws_status: String,
    pub aws_detail: String,
    pub azure_connection: Option<Address>,
    /// Azure's connectionStatus: Connected, Connecting, NotConnected, Unknown.
    pub azure_status: String,
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(Value::Sensitive(_)) => "(sensitive)".into(),
        Some(other) => other.to_json().to_string(),
    }
}

/// Joins each AWS tunnel to the Azure connection whose local network gateway points at its
/// outside address.
pub fn tunnels(state: &State) -> Vec<Tunnel> {
    let of = |t: ResourceType| state.resources.iter().filter(move |(a, r)| a.rtype == t && r.id.is_some());
    let mut out = Vec::new();
    for (addr, conn) in of(ResourceType::AwsVpnConnection) {
        for t in 1..=2 {
            let ip = text(conn.attributes.get(&format!("tunnel{t}_address")));
            let lng = of(ResourceType::AzureLocalNetworkGateway)
                .find(|(_, l)| l.attributes.get("gateway_ip_address").and_then(Value::as_str) == Some(ip.as_str()));
            let azure = lng.and_then(|(_, l)| {
                of(ResourceType::AzureVpnConnection)
                    .find(|(_, c)| c.attributes.get("local_network_gateway").and_then(Value::as_str) == l.id.as_deref())
            });
            out.push(Tunnel {
                tunnel: format!("{addr} tunnel {t}"),
                outside_ip: ip,
                aws_status: text(conn.attributes.get(&format!("tunnel{t}_status"))),
                aws_detail: text(conn.attributes.get(&format!("tunnel{t}_status_message"))),
                azure_connection: azure.map(|(a, _)| a.clone()),
                azure_status: azure.map_or("-".into(), |(_, c)| text(c.attributes.get("connection_status"))),
            });
        }
    }
    out
}
