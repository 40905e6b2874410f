//! Reaching the clouds: builds each provider from the spec and the environment (the Kubernetes
//! one from the kubeconfig found).

use std::collections::BTreeSet;
use std::sync::Arc;

use xcsp_aws::{AwsConfig, AwsProvider};
use xcsp_azure::{AzureConfig, AzureProvider, Cloud};
use xcsp_core::ProviderKind;
use xcsp_engine::Providers;
use xcsp_kube::KubeProvider;
use xcsp_local::LocalProvider;
use xcsp_plans::spec::AzureCloud;
use xcsp_plans::validate::Model;

use crate::StackError;
use crate::cluster::Kubeconfig;

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
) -> crate::Result<Providers> {
    let mut providers = Providers::new().with(Arc::new(LocalProvider));
    if kinds.contains(&ProviderKind::Aws) {
        let mut config = AwsConfig::new(&model.aws.region.value);
        config.use_fips = model.aws.fips;
        providers = providers.with(Arc::new(AwsProvider::new(config).await));
    }
    if kinds.contains(&ProviderKind::Azure) {
        providers = providers.with(Arc::new(azure(model)?));
    }
    if kinds.contains(&ProviderKind::Kubernetes)
        && let Some(found) = cluster
    {
        let p = KubeProvider::new(found.client_config())
            .await
            .map_err(|e| StackError::Kubeconfig { detail: e.to_string(), from: found.from.to_string() })?;
        providers = providers.with(Arc::new(p));
    }
    Ok(providers)
}

/// The Azure provider of the spec's subscription, with the environment's overrides (see
/// [`providers`]).
pub fn azure(model: &Model) -> crate::Result<AzureProvider> {
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
    Ok(AzureProvider::new(config)?)
}
