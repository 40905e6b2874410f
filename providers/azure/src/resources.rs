//! Each resource type through its typed client: the write (create and update are both a PUT in
//! ARM), the delete, and the bulk list refresh makes.

use futures::StreamExt;
use serde_json::{Value as Json, json};
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, Observed, Progress, ProviderError, Request};
use xcsp_core::{Address, ProviderKind, ResourceType as T, Value, tags};

use crate::arm;
use crate::lro::Wait;
use crate::{AzureProvider, Quiet, identify};

/// An SDK request model from ARM JSON we built (a misfit is our bug, reported as such).
fn model<M: serde::de::DeserializeOwned>(address: &Address, body: Json) -> Result<M, ProviderError> {
    serde_json::from_value(body).map_err(|e| ProviderError::Failed {
        address: address.to_string(),
        code: "InvalidBody".into(),
        message: format!("the request body does not fit the API model: {e}"),
    })
}

fn to_json<M: serde::Serialize>(m: &M) -> Json {
    serde_json::to_value(m).unwrap_or(Json::Null)
}

/// A sent request's raw answer (status, headers, body), out of the SDK's per-operation wrapper.
macro_rules! raw {
    ($send:expr) => {{
        let sent = $send;
        async move { sent.await.map(|r| r.into_raw_response()) }
    }};
}

/// A typed GET's answer, as JSON.
macro_rules! as_json {
    ($get:expr) => {{
        let get = $get;
        async move { get.await.map(|m| to_json(&m)) }
    }};
}

/// The items of every page of a typed list, as JSON.
macro_rules! all_pages {
    ($list:expr) => {{
        let mut pages = $list.into_stream();
        async move {
            let mut items = Vec::new();
            while let Some(page) = pages.next().await {
                items.extend(page?.value.iter().map(to_json));
            }
            Ok(items)
        }
    }};
}

/// A delete whose operation failed because something still uses the resource.
fn in_use(e: ProviderError) -> ProviderError {
    match e {
        ProviderError::Failed { address, code, message }
            // A gallery or definition still holding children answers `CannotDeleteResource`,
            // for a while even after its last child's delete returned (azure-sdk-for-net#30258).
            if code.contains("InUse") || code.ends_with("CannotBeDeleted") || code == "CannotDeleteResource" =>
        {
            ProviderError::InUse { address, detail: format!("{code}: {message}") }
        }
        other => other,
    }
}

impl AzureProvider {
    /// Sends a write, waits for the operation it started, and returns the resource as Azure
    /// then has it (from `get` after a long-running operation, else from the answer itself).
    async fn write<S, SF, G, GF>(
        &self,
        address: &Address,
        progress: &dyn Progress,
        activity: &str,
        send: S,
        get: G,
    ) -> Result<Json, ProviderError>
    where
        S: Fn() -> SF,
        SF: Future<Output = azure_core::Result<azure_core::Response>>,
        G: Fn() -> GF,
        GF: Future<Output = azure_core::Result<Json>>,
    {
        let response = self.retry(address, progress, send).await?;
        match Wait::of(u16::from(response.status()), response.headers()) {
            Some(wait) => {
                self.session.wait(&wait, address, progress, activity).await?;
                self.retry(address, progress, get).await
            }
            None => {
                // The transport read the body whole already: this cannot fail on the network.
                let body = response.into_body().collect().await.unwrap_or_default();
                Ok(serde_json::from_slice(&body).unwrap_or(Json::Null))
            }
        }
    }

    /// An update of a resource on which Azure still runs an operation that an interrupted run
    /// started (`provisioningState` not yet `Succeeded`, `Failed` or `Canceled`, the terminal
    /// states of the resource provider contract, Azure/azure-resource-manager-rpc
    /// `v1.0/async-api-reference.md`): waits for that operation, as the run that started it would
    /// have, rather than meeting it with a PUT, which ARM answers 409 `AnotherOperationInProgress`
    /// until it ends and which, for a VPN gateway, would start a second operation of tens of
    /// minutes. Answers the resource when the operation ended with it as the write asks (the write
    /// is then done); else `None`, and the write goes on.
    async fn adopt_in_flight<G, GF>(
        &self,
        req: &Request<'_>,
        progress: &dyn Progress,
        activity: &str,
        get: G,
        read: fn(&Json) -> Attributes,
    ) -> Result<Option<Json>, ProviderError>
    where
        G: Fn() -> GF,
        GF: Future<Output = azure_core::Result<Json>>,
    {
        let address = req.address;
        if req.is_create() {
            return Ok(None);
        }
        let state = |j: &Json| j["properties"]["provisioningState"].as_str().unwrap_or("Succeeded").to_string();
        let terminal = |s: &str| matches!(s, "Succeeded" | "Failed" | "Canceled");
        let mut got = match self.retry(address, progress, &get).await {
            Ok(j) => j,
            Err(e) if arm::gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        if terminal(&state(&got)) {
            return Ok(None);
        }
        while !terminal(&state(&got)) {
            progress.waiting(
                address,
                &format!(
                    "{activity}: the operation an interrupted run started is still running (provisioningState {}); waiting for it",
                    state(&got)
                ),
            );
            tokio::time::sleep(self.session.poll_interval).await;
            got = self.retry(address, progress, &get).await?;
        }
        if state(&got) != "Succeeded" {
            return Ok(None);
        }
        let have = read(&got);
        let same = req
            .attributes
            .iter()
            .filter(|(k, _)| k.as_str() != "provisioning_state")
            .all(|(k, want)| have.get(k).is_some_and(|h| want.matches_recorded(h)));
        Ok(same.then_some(got))
    }

    /// Sends a delete and waits until the resource is gone; gone already is fine.
    async fn delete_with<S, SF>(
        &self,
        address: &Address,
        progress: &dyn Progress,
        activity: &str,
        send: S,
    ) -> Result<(), ProviderError>
    where
        S: Fn() -> SF,
        SF: Future<Output = azure_core::Result<azure_core::Response>>,
    {
        let response = match self.retry(address, progress, send).await {
            Ok(r) => r,
            Err(e) if arm::gone(&e) => return Ok(()),
            Err(e) => return Err(in_use(e)),
        };
        match Wait::of(u16::from(response.status()), response.headers()) {
            Some(wait) => self.session.wait(&wait, address, progress, activity).await.map_err(in_use),
            None => Ok(()),
        }
    }

    /// The id of the built-in or custom role named `role`, as seen from `scope`.
    async fn role_definition(
        &self,
        address: &Address,
        scope: &str,
        role: &str,
        progress: &dyn Progress,
    ) -> Result<String, ProviderError> {
        if let Some(id) = self.roles.lock().await.get(role) {
            return Ok(id.clone());
        }
        let filter = format!("roleName eq '{}'", role.replace('\'', "''"));
        let found = self
            .retry(address, progress, || {
                let mut pages = self.authz.role_definitions_client().list(scope).filter(&filter).into_stream();
                async move {
                    match pages.next().await {
                        Some(page) => page.map(|p| p.value.first().and_then(|d| d.id.clone())),
                        None => Ok(None),
                    }
                }
            })
            .await?;
        let id = found.ok_or_else(|| ProviderError::Failed {
            address: address.to_string(),
            code: "RoleNotFound".into(),
            message: format!("no role definition named `{role}` at {scope}"),
        })?;
        self.roles.lock().await.insert(role.to_string(), id.clone());
        Ok(id)
    }

    /// The role name of a definition id looked up before, if it was.
    async fn role_name(&self, definition: &str) -> Option<String> {
        let roles = self.roles.lock().await;
        roles.iter().find(|(_, id)| id.eq_ignore_ascii_case(definition)).map(|(name, _)| name.clone())
    }

    /// Creates or updates the resource and reads back what Azure made of it.
    pub(crate) async fn put(
        &self,
        req: &Request<'_>,
        progress: &dyn Progress,
        operation: &'static str,
    ) -> Result<Observed, ProviderError> {
        let (address, stack) = (req.address, req.stack);
        let d = Reader::new(address, req.attributes);
        let sub = self.config.subscription_id.as_str();
        let rg = self.resource_group(&d);
        let rg = rg.as_str();
        let verb = if operation == "create" { "creating" } else { "updating" };
        let doing = |what: &str| format!("Azure is {verb} the {what}");
        let n = &self.network;
        let read: fn(&Json) -> Attributes;
        let body = match address.rtype {
            T::AzureResourceGroup => {
                read = arm::read_resource_group;
                let name = d.str("name")?;
                let m: azure_mgmt_resources::models::ResourceGroup =
                    model(address, arm::resource_group_body(&d, stack)?)?;
                let c = self.resources.resource_groups_client();
                self.write(
                    address,
                    progress,
                    &doing("resource group"),
                    || raw!(c.create_or_update(&name, m.clone(), sub).send()),
                    || as_json!(c.get(&name, sub)),
                )
                .await?
            }
            T::AzureVirtualNetwork => {
                read = arm::read_vnet;
                let name = d.str("name")?;
                let c = n.virtual_networks_client();
                // A PUT replaces the subnets and DNS servers: send the ones the VNet has now.
                let current = match self.retry(address, progress, || as_json!(c.get(rg, &name, sub))).await {
                    Ok(v) => v,
                    Err(ProviderError::NotFound { .. }) => Json::Null,
                    Err(e) => return Err(e),
                };
                let m: azure_mgmt_network::models::VirtualNetwork =
                    model(address, arm::vnet_body(&d, stack, &current)?)?;
                self.write(
                    address,
                    progress,
                    &doing("virtual network"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?
            }
            T::AzureVnetDnsServers => {
                read = arm::read_dns_servers;
                let name = d.str("virtual_network")?;
                let c = n.virtual_networks_client();
                let current = self.retry(address, progress, || as_json!(c.get(rg, &name, sub))).await?;
                let m: azure_mgmt_network::models::VirtualNetwork =
                    model(address, arm::vnet_with_dns(&current, d.json("dns_servers")?))?;
                self.write(
                    address,
                    progress,
                    &doing("virtual network's DNS servers"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?
            }
            T::AzureSubnet => {
                read = arm::read_subnet;
                let (name, vnet) = (d.str("name")?, d.str("virtual_network")?);
                let m: azure_mgmt_network::models::Subnet = model(address, arm::subnet_body(&d)?)?;
                let c = n.subnets_client();
                self.write(
                    address,
                    progress,
                    &doing("subnet"),
                    || raw!(c.create_or_update(rg, &vnet, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &vnet, &name, sub)),
                )
                .await?
            }
            T::AzureNetworkSecurityGroup => {
                read = arm::read_nsg;
                let name = d.str("name")?;
                let m: azure_mgmt_network::models::NetworkSecurityGroup = model(address, arm::nsg_body(&d, stack)?)?;
                let c = n.network_security_groups_client();
                self.write(
                    address,
                    progress,
                    &doing("network security group"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?
            }
            T::AzurePublicIp => {
                read = arm::read_public_ip;
                let name = d.str("name")?;
                let m: azure_mgmt_network::models::PublicIpAddress = model(address, arm::public_ip_body(&d, stack)?)?;
                let c = n.public_ip_addresses_client();
                self.write(
                    address,
                    progress,
                    &doing("public IP"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?
            }
            T::AzureNatGateway => {
                read = arm::read_nat_gateway;
                let name = d.str("name")?;
                let m: azure_mgmt_network::models::NatGateway = model(address, arm::nat_gateway_body(&d, stack)?)?;
                let c = n.nat_gateways_client();
                self.write(
                    address,
                    progress,
                    &doing("NAT gateway"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?
            }
            T::AzureVpnGateway => {
                read = arm::read_gateway;
                let name = d.str("name")?;
                let id = self.arm_id(&d, "Microsoft.Network/virtualNetworkGateways")?;
                let m: azure_mgmt_network::models::VirtualNetworkGateway =
                    model(address, arm::gateway_body(&d, stack, &id)?)?;
                let c = n.virtual_network_gateways_client();
                let activity = if operation == "create" {
                    "Azure is creating the VPN gateway (typically 30-45 minutes)".to_string()
                } else {
                    doing("VPN gateway")
                };
                let get = || as_json!(c.get(rg, &name, sub));
                match self.adopt_in_flight(req, progress, "Azure is making the VPN gateway", get, read).await? {
                    Some(done) => done,
                    None => {
                        self.write(
                            address,
                            progress,
                            &activity,
                            || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                            get,
                        )
                        .await?
                    }
                }
            }
            T::AzureLocalNetworkGateway => {
                read = arm::read_local_gateway;
                let name = d.str("name")?;
                let m: azure_mgmt_network::models::LocalNetworkGateway =
                    model(address, arm::local_gateway_body(&d, stack)?)?;
                let c = n.local_network_gateways_client();
                self.write(
                    address,
                    progress,
                    &doing("local network gateway"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?
            }
            T::AzureVpnConnection => {
                read = arm::read_connection;
                let name = d.str("name")?;
                let m: azure_mgmt_network::models::VirtualNetworkGatewayConnection =
                    model(address, arm::connection_body(&d, stack)?)?;
                let c = n.virtual_network_gateway_connections_client();
                self.write(
                    address,
                    progress,
                    &doing("connection"),
                    || raw!(c.create_or_update(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &name, sub)),
                )
                .await?
            }
            T::AzureUserAssignedIdentity => {
                read = arm::read_identity;
                let name = d.str("name")?;
                let m: azure_mgmt_msi::models::Identity = model(address, arm::identity_body(&d, stack)?)?;
                let c = self.msi.user_assigned_identities_client();
                self.write(
                    address,
                    progress,
                    &doing("managed identity"),
                    || raw!(c.create_or_update(sub, rg, &name, m.clone()).send()),
                    || as_json!(c.get(sub, rg, &name)),
                )
                .await?
            }
            T::AzureFederatedCredential => {
                read = arm::read_federated;
                let identity = d.str("identity")?;
                let name = identify::federated_credential_name(address);
                let m: azure_mgmt_msi::models::FederatedIdentityCredential = model(address, arm::federated_body(&d)?)?;
                let c = self.msi.federated_identity_credentials_client();
                self.write(
                    address,
                    progress,
                    &doing("federated identity credential"),
                    || raw!(c.create_or_update(sub, rg, &identity, &name, m.clone()).send()),
                    || as_json!(c.get(sub, rg, &identity, &name)),
                )
                .await?
            }
            T::AzureRoleAssignment => {
                read = arm::read_role_assignment;
                let (scope, principal, role) = (d.str("scope")?, d.str("principal")?, d.str("role")?);
                let definition = self.role_definition(address, &scope, &role, progress).await?;
                let name = identify::role_assignment_name(stack, address);
                let body = json!({ "properties": {
                    "roleDefinitionId": definition,
                    "principalId": principal,
                    // Set, so that Azure need not look the principal up (Microsoft's advice for new
                    // principals); PrincipalNotFound can still come, and is retried.
                    "principalType": d.opt_str("principal_type").unwrap_or_else(|| "ServicePrincipal".into()),
                    "description": identify::role_description(stack, address),
                }});
                let m: azure_mgmt_authorization::models::RoleAssignmentCreateParameters = model(address, body)?;
                let c = self.authz.role_assignments_client();
                progress.waiting(address, "Azure is assigning the role");
                self.write(
                    address,
                    progress,
                    "Azure is assigning the role",
                    || raw!(c.create(&scope, &name, m.clone()).send()),
                    || as_json!(c.get(&scope, &name)),
                )
                .await?
            }
            T::AzureRoleDefinition => {
                read = arm::read_role_definition;
                let scope = d.str("scope")?;
                let guid = identify::role_assignment_name(stack, address);
                let body = json!({ "properties": {
                    "roleName": d.str("name")?,
                    "description": identify::role_description(stack, address),
                    "type": "CustomRole",
                    "permissions": [{ "actions": d.strings("actions"), "notActions": [], "dataActions": [], "notDataActions": [] }],
                    "assignableScopes": [scope],
                }});
                let m: azure_mgmt_authorization::models::RoleDefinition = model(address, body)?;
                let c = self.authz.role_definitions_client();
                self.write(
                    address,
                    progress,
                    "Azure is defining the role",
                    || raw!(c.create_or_update(&scope, &guid, m.clone()).send()),
                    || as_json!(c.get(&scope, &guid)),
                )
                .await?
            }
            T::AzureStorageAccount => {
                read = crate::images::read_storage_account;
                let name = d.str("name")?;
                let m: azure_mgmt_storage::package_2023_05::models::StorageAccountCreateParameters =
                    model(address, crate::images::storage_account_body(&d, stack)?)?;
                let c = self.storage.storage_accounts_client();
                self.write(
                    address,
                    progress,
                    &doing("storage account"),
                    || raw!(c.create(rg, &name, m.clone(), sub).send()),
                    || as_json!(c.get_properties(rg, &name, sub)),
                )
                .await?
            }
            T::AzureStorageBlob => return self.put_blob(req, progress).await,
            T::AzureGallery => {
                read = crate::images::read_gallery;
                let name = d.str("name")?;
                let m: azure_mgmt_compute::package_2024_03_01::models::Gallery =
                    model(address, crate::images::gallery_body(&d, stack)?)?;
                let c = self.compute.galleries_client();
                self.write(
                    address,
                    progress,
                    &doing("compute gallery"),
                    || raw!(c.create_or_update(sub, rg, &name, m.clone()).send()),
                    || as_json!(c.get(sub, rg, &name)),
                )
                .await?
            }
            T::AzureGalleryImage => {
                read = crate::images::read_gallery_image;
                let (name, gallery) = (d.str("name")?, d.str("gallery")?);
                let m: azure_mgmt_compute::package_2024_03_01::models::GalleryImage =
                    model(address, crate::images::gallery_image_body(&d, stack)?)?;
                let c = self.compute.gallery_images_client();
                self.write(
                    address,
                    progress,
                    &doing("image definition"),
                    || raw!(c.create_or_update(sub, rg, &gallery, &name, m.clone()).send()),
                    || as_json!(c.get(sub, rg, &gallery, &name)),
                )
                .await?
            }
            T::AzureGalleryImageVersion => {
                read = crate::images::read_gallery_image_version;
                let (name, gallery, image) = (d.str("name")?, d.str("gallery")?, d.str("image")?);
                let m: azure_mgmt_compute::package_2024_03_01::models::GalleryImageVersion =
                    model(address, crate::images::gallery_image_version_body(&d, stack)?)?;
                let c = self.compute.gallery_image_versions_client();
                let get = || as_json!(c.get(sub, rg, &gallery, &image, &name));
                match self.adopt_in_flight(req, progress, "Azure is making the image version", get, read).await? {
                    Some(done) => done,
                    None => {
                        self.write(
                            address,
                            progress,
                            "Azure is making the image version from the VHD and replicating it (typically 10-30 minutes)",
                            || raw!(c.create_or_update(sub, rg, &gallery, &image, &name, m.clone()).send()),
                            get,
                        )
                        .await?
                    }
                }
            }
            other => {
                return Err(ProviderError::Failed {
                    address: address.to_string(),
                    code: "NotAzure".into(),
                    message: format!("{} is not an Azure resource type", other.as_str()),
                });
            }
        };
        let mut attributes = read(&body);
        if address.rtype == T::AzureRoleAssignment {
            attributes.insert("role".into(), Value::string(d.str("role")?));
        }
        let mut id = body["id"].as_str().unwrap_or_default().to_string();
        if address.rtype == T::AzureVnetDnsServers {
            id = arm::dns_servers_id(&id);
        }
        Ok(Observed { address: address.clone(), id, attributes })
    }

    /// Deletes the resource and waits until it is gone.
    pub(crate) async fn remove(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<(), ProviderError> {
        let address = req.address;
        let d = Reader::new(address, req.attributes);
        let id = req.id.unwrap_or_default();
        // The id is the cloud's truth; the attributes stand in when it is missing.
        let segment = |from_end: usize| id.rsplit('/').nth(from_end).filter(|s| !s.is_empty() && id.contains('/'));
        let name = || segment(0).map(str::to_string).or_else(|| d.opt_str("name")).unwrap_or_default();
        let rg = arm::resource_group_of(id).map(str::to_string).unwrap_or_else(|| self.resource_group(&d));
        let (rg, sub) = (rg.as_str(), self.config.subscription_id.as_str());
        let n = &self.network;
        let deleting = |what: &str| format!("Azure is deleting the {what}");
        match address.rtype {
            T::AzureResourceGroup => {
                let name = name();
                let c = self.resources.resource_groups_client();
                self.delete_with(address, progress, &deleting("resource group"), || raw!(c.delete(&name, sub).send()))
                    .await
            }
            T::AzureVirtualNetwork => {
                let (name, c) = (name(), n.virtual_networks_client());
                self.delete_with(address, progress, &deleting("virtual network"), || {
                    raw!(c.delete(rg, &name, sub).send())
                })
                .await
            }
            T::AzureVnetDnsServers => {
                // The VNet goes back to Azure's own resolver; a VNet already gone has none.
                let vnet = segment(1).map(str::to_string).or_else(|| d.opt_str("virtual_network")).unwrap_or_default();
                let c = n.virtual_networks_client();
                let current = match self.retry(address, progress, || as_json!(c.get(rg, &vnet, sub))).await {
                    Ok(v) => v,
                    Err(e) if arm::gone(&e) => return Ok(()),
                    Err(e) => return Err(e),
                };
                let m: azure_mgmt_network::models::VirtualNetwork =
                    model(address, arm::vnet_with_dns(&current, json!([])))?;
                self.write(
                    address,
                    progress,
                    "Azure is removing the virtual network's DNS servers",
                    || raw!(c.create_or_update(rg, &vnet, m.clone(), sub).send()),
                    || as_json!(c.get(rg, &vnet, sub)),
                )
                .await
                .map(|_| ())
            }
            T::AzureSubnet => {
                let name = name();
                let vnet = segment(2).map(str::to_string).or_else(|| d.opt_str("virtual_network")).unwrap_or_default();
                let c = n.subnets_client();
                self.delete_with(address, progress, &deleting("subnet"), || {
                    raw!(c.delete(rg, &vnet, &name, sub).send())
                })
                .await
            }
            T::AzureNetworkSecurityGroup => {
                let (name, c) = (name(), n.network_security_groups_client());
                self.delete_with(address, progress, &deleting("network security group"), || {
                    raw!(c.delete(rg, &name, sub).send())
                })
                .await
            }
            T::AzurePublicIp => {
                let (name, c) = (name(), n.public_ip_addresses_client());
                self.delete_with(address, progress, &deleting("public IP"), || raw!(c.delete(rg, &name, sub).send()))
                    .await
            }
            T::AzureNatGateway => {
                let (name, c) = (name(), n.nat_gateways_client());
                self.delete_with(address, progress, &deleting("NAT gateway"), || raw!(c.delete(rg, &name, sub).send()))
                    .await
            }
            T::AzureVpnGateway => {
                let (name, c) = (name(), n.virtual_network_gateways_client());
                self.delete_with(
                    address,
                    progress,
                    "Azure is deleting the VPN gateway (typically 10-20 minutes)",
                    || raw!(c.delete(rg, &name, sub).send()),
                )
                .await
            }
            T::AzureLocalNetworkGateway => {
                let (name, c) = (name(), n.local_network_gateways_client());
                self.delete_with(address, progress, &deleting("local network gateway"), || {
                    raw!(c.delete(rg, &name, sub).send())
                })
                .await
            }
            T::AzureVpnConnection => {
                let (name, c) = (name(), n.virtual_network_gateway_connections_client());
                self.delete_with(address, progress, &deleting("connection"), || raw!(c.delete(rg, &name, sub).send()))
                    .await
            }
            T::AzureUserAssignedIdentity => {
                let (name, c) = (name(), self.msi.user_assigned_identities_client());
                self.delete_with(address, progress, &deleting("managed identity"), || {
                    raw!(c.delete(sub, rg, &name).send())
                })
                .await
            }
            T::AzureFederatedCredential => {
                let name =
                    segment(0).map(str::to_string).unwrap_or_else(|| identify::federated_credential_name(address));
                let identity = segment(2).map(str::to_string).or_else(|| d.opt_str("identity")).unwrap_or_default();
                let c = self.msi.federated_identity_credentials_client();
                self.delete_with(address, progress, &deleting("federated identity credential"), || {
                    raw!(c.delete(sub, rg, &identity, &name).send())
                })
                .await
            }
            T::AzureRoleDefinition => {
                const MARK: &str = "/providers/Microsoft.Authorization/roleDefinitions/";
                let scope = match id.find(MARK) {
                    Some(at) => id[..at].to_string(),
                    None => d.opt_str("scope").unwrap_or_else(|| format!("/subscriptions/{sub}")),
                };
                let guid = segment(0)
                    .map(str::to_string)
                    .unwrap_or_else(|| identify::role_assignment_name(req.stack, address));
                let c = self.authz.role_definitions_client();
                self.delete_with(address, progress, "Azure is deleting the role definition", || {
                    raw!(c.delete(&scope, &guid).send())
                })
                .await
            }
            T::AzureRoleAssignment => {
                const MARK: &str = "/providers/Microsoft.Authorization/roleAssignments/";
                let scope = match id.find(MARK) {
                    Some(at) => id[..at].to_string(),
                    None => d.opt_str("scope").unwrap_or_else(|| {
                        format!("/subscriptions/{sub}/resourceGroups/{}", self.config.resource_group)
                    }),
                };
                let name = segment(0)
                    .map(str::to_string)
                    .unwrap_or_else(|| identify::role_assignment_name(req.stack, address));
                let c = self.authz.role_assignments_client();
                self.delete_with(address, progress, "Azure is removing the role assignment", || {
                    raw!(c.delete(&scope, &name).send())
                })
                .await
            }
            T::AzureStorageAccount => {
                let (name, c) = (name(), self.storage.storage_accounts_client());
                self.delete_with(address, progress, &deleting("storage account"), || {
                    raw!(c.delete(rg, &name, sub).send())
                })
                .await
            }
            T::AzureStorageBlob => self.remove_blob(req, progress).await,
            T::AzureGallery => {
                let (name, c) = (name(), self.compute.galleries_client());
                self.delete_with(address, progress, &deleting("compute gallery"), || {
                    raw!(c.delete(sub, rg, &name).send())
                })
                .await
            }
            T::AzureGalleryImage => {
                let name = name();
                let gallery = segment(2).map(str::to_string).or_else(|| d.opt_str("gallery")).unwrap_or_default();
                let c = self.compute.gallery_images_client();
                self.delete_with(address, progress, &deleting("image definition"), || {
                    raw!(c.delete(sub, rg, &gallery, &name).send())
                })
                .await
            }
            T::AzureGalleryImageVersion => {
                let name = name();
                let image = segment(2).map(str::to_string).or_else(|| d.opt_str("image")).unwrap_or_default();
                let gallery = segment(4).map(str::to_string).or_else(|| d.opt_str("gallery")).unwrap_or_default();
                let c = self.compute.gallery_image_versions_client();
                self.delete_with(address, progress, &deleting("image version"), || {
                    raw!(c.delete(sub, rg, &gallery, &image, &name).send())
                })
                .await
            }
            _ => Ok(()),
        }
    }

    /// The items of a list, retried like any call; a missing resource group lists nothing.
    async fn list_all<F, Fut>(&self, rtype: T, list: F) -> Result<Vec<Json>, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = azure_core::Result<Vec<Json>>>,
    {
        match self.retry(&Address::new(rtype, "refresh"), &Quiet, list).await {
            Ok(items) => Ok(items),
            Err(e) if arm::gone(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Every live resource of `rtype` that belongs to `stack`, in one list call per type where
    /// Azure allows (see [`identify`] for the untaggable ones).
    /// Every live resource of `rtype` that state records (`known`, matched by id whatever its
    /// tags say now) or that is tagged with `stack`, in one list call per type where Azure allows.
    pub(crate) async fn list(&self, stack: &str, rtype: T, known: &[Observed]) -> Result<Vec<Observed>, ProviderError> {
        let rg = self.config.resource_group.as_str();
        let sub = self.config.subscription_id.as_str();
        let n = &self.network;
        // The stack and address tags, under today's keys or the ones written before them.
        fn owner(j: &Json) -> Option<(&str, &str)> {
            tags::owner(ProviderKind::Azure, |k| j["tags"][k].as_str())
        }
        let ours = |j: &Json| owner(j).is_some_and(|(s, _)| s == stack);
        let address_of = |j: &Json| owner(j).and_then(|(_, a)| a.parse::<Address>().ok());
        // ARM ids compare case-insensitively (resource group names, provider namespaces).
        let recorded = |j: &Json| -> Option<Address> {
            let id = j["id"].as_str()?;
            known.iter().find(|k| k.address.rtype == rtype && k.id.eq_ignore_ascii_case(id)).map(|k| k.address.clone())
        };
        let tagged = |items: Vec<Json>, read: fn(&Json) -> Attributes| -> Vec<Observed> {
            items
                .iter()
                .filter_map(|j| {
                    let address = recorded(j)
                        .or_else(|| ours(j).then(|| address_of(j)).flatten())
                        .filter(|a| a.rtype == rtype)?;
                    let id = j["id"].as_str().unwrap_or_default().to_string();
                    Some(Observed { address, id, attributes: read(j) })
                })
                .collect()
        };
        Ok(match rtype {
            T::AzureResourceGroup => {
                // ARM filters resource groups by one tag at a time: one list per key that may
                // carry the stack, merged by id.
                let c = self.resources.resource_groups_client();
                let mut groups: Vec<Json> = Vec::new();
                for keys in tags::read_keys(ProviderKind::Azure) {
                    let filter = format!("tagName eq '{}' and tagValue eq '{}'", keys.stack, stack.replace('\'', "''"));
                    for g in self.list_all(rtype, || all_pages!(c.list(sub).filter(&filter))).await? {
                        if !groups.iter().any(|seen| seen["id"] == g["id"]) {
                            groups.push(g);
                        }
                    }
                }
                // A group state records that the tag filter missed (its tags were changed): by name.
                for id in known.iter().filter(|k| k.address.rtype == rtype).map(|k| &k.id) {
                    let listed = groups.iter().any(|g| g["id"].as_str().is_some_and(|g| g.eq_ignore_ascii_case(id)));
                    let name = arm::leaf(id);
                    if listed || name.is_empty() {
                        continue;
                    }
                    match self.retry(&Address::new(rtype, "refresh"), &Quiet, || as_json!(c.get(name, sub))).await {
                        Ok(g) => groups.push(g),
                        Err(e) if arm::gone(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
                tagged(groups, arm::read_resource_group)
            }
            T::AzureVirtualNetwork => {
                let c = n.virtual_networks_client();
                tagged(self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_vnet)
            }
            T::AzureVnetDnsServers => {
                // Read from the VNet: the one state records them on, else a VNet of the stack
                // that has DNS servers (an apply killed after the PUT).
                let c = n.virtual_networks_client();
                let vnets = self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?;
                let mut out = Vec::new();
                for vnet in &vnets {
                    let id = arm::dns_servers_id(vnet["id"].as_str().unwrap_or_default());
                    let recorded = known
                        .iter()
                        .find(|k| k.address.rtype == rtype && k.id.eq_ignore_ascii_case(&id))
                        .map(|k| k.address.clone());
                    let has = vnet["properties"]["dhcpOptions"]["dnsServers"].as_array().is_some_and(|s| !s.is_empty());
                    let adopted = || {
                        let vnet_address = ours(vnet).then(|| address_of(vnet)).flatten()?;
                        has.then(|| Address { rtype, name: vnet_address.name, index: vnet_address.index })
                    };
                    if let Some(address) = recorded.or_else(adopted) {
                        out.push(Observed { address, id, attributes: arm::read_dns_servers(vnet) });
                    }
                }
                out
            }
            T::AzureSubnet => {
                // Subnets come inside their VNet: one list of VNets covers them all.
                let c = n.virtual_networks_client();
                let vnets = self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?;
                let mut out = Vec::new();
                for vnet in &vnets {
                    // The VNet state records (by id), else one tagged with the stack.
                    let id = vnet["id"].as_str().unwrap_or_default();
                    let recorded_vnet = known
                        .iter()
                        .find(|k| k.address.rtype == T::AzureVirtualNetwork && k.id.eq_ignore_ascii_case(id))
                        .map(|k| k.address.clone());
                    let Some(vnet_address) = recorded_vnet.or_else(|| ours(vnet).then(|| address_of(vnet)).flatten())
                    else {
                        continue;
                    };
                    for s in vnet["properties"]["subnets"].as_array().into_iter().flatten() {
                        let Some(address) =
                            identify::subnet_address(stack, &vnet_address, s["name"].as_str().unwrap_or_default())
                        else {
                            continue;
                        };
                        let id = s["id"].as_str().unwrap_or_default().to_string();
                        out.push(Observed { address, id, attributes: arm::read_subnet(s) });
                    }
                }
                out
            }
            T::AzureNetworkSecurityGroup => {
                let c = n.network_security_groups_client();
                tagged(self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_nsg)
            }
            T::AzurePublicIp => {
                let c = n.public_ip_addresses_client();
                tagged(self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_public_ip)
            }
            T::AzureNatGateway => {
                let c = n.nat_gateways_client();
                tagged(self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_nat_gateway)
            }
            T::AzureVpnGateway => {
                let c = n.virtual_network_gateways_client();
                tagged(self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_gateway)
            }
            T::AzureLocalNetworkGateway => {
                let c = n.local_network_gateways_client();
                tagged(self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_local_gateway)
            }
            T::AzureVpnConnection => {
                let c = n.virtual_network_gateway_connections_client();
                let mut found =
                    tagged(self.list_all(rtype, || all_pages!(c.list(rg, sub))).await?, arm::read_connection);
                // The shared key is not in the connection's body: one GET each (ARM has no list
                // of them). Recorded as a digest, never in clear (Value::secret_digest).
                for o in &mut found {
                    let name = arm::leaf(&o.id).to_string();
                    match self.retry(&o.address, &Quiet, || as_json!(c.get_shared_key(rg, &name, sub))).await {
                        Ok(k) => {
                            if let Some(key) = k["value"].as_str() {
                                o.attributes.insert("shared_key".into(), Value::secret_digest(key));
                            }
                        }
                        Err(e) if arm::gone(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
                found
            }
            T::AzureUserAssignedIdentity => {
                let c = self.msi.user_assigned_identities_client();
                tagged(
                    self.list_all(rtype, || all_pages!(c.list_by_resource_group(sub, rg))).await?,
                    arm::read_identity,
                )
            }
            T::AzureFederatedCredential => {
                // One list per identity of the stack.
                let identities = self.msi.user_assigned_identities_client();
                let items = self.list_all(rtype, || all_pages!(identities.list_by_resource_group(sub, rg))).await?;
                let c = self.msi.federated_identity_credentials_client();
                let mut out = Vec::new();
                for identity in items.iter().filter(|j| ours(j)) {
                    let identity = identity["name"].as_str().unwrap_or_default();
                    for f in self.list_all(rtype, || all_pages!(c.list(sub, rg, identity))).await? {
                        let Some(address) =
                            identify::federated_credential_address(f["name"].as_str().unwrap_or_default())
                        else {
                            continue;
                        };
                        let id = f["id"].as_str().unwrap_or_default().to_string();
                        out.push(Observed { address, id, attributes: arm::read_federated(&f) });
                    }
                }
                out
            }
            T::AzureRoleDefinition => {
                let scope = format!("/subscriptions/{sub}");
                let c = self.authz.role_definitions_client();
                let items = self.list_all(rtype, || all_pages!(c.list(&scope).filter("type eq 'CustomRole'"))).await?;
                let mut out = Vec::new();
                for j in &items {
                    let name = j["name"].as_str().unwrap_or_default();
                    let description = j["properties"]["description"].as_str().unwrap_or_default();
                    let Some(address) = identify::role_owner(stack, rtype, name, description) else { continue };
                    let id = j["id"].as_str().unwrap_or_default().to_string();
                    out.push(Observed { address, id, attributes: arm::read_role_definition(j) });
                }
                out
            }
            T::AzureRoleAssignment => {
                // At the resource group, and at the subscription (the SKU list's role).
                let c = self.authz.role_assignments_client();
                let mut items = Vec::new();
                for scope in [format!("/subscriptions/{sub}/resourceGroups/{rg}"), format!("/subscriptions/{sub}")] {
                    items.extend(
                        self.list_all(rtype, || all_pages!(c.list_for_scope(&scope).filter("atScope()"))).await?,
                    );
                }
                let mut out = Vec::new();
                for j in &items {
                    let name = j["name"].as_str().unwrap_or_default();
                    let description = j["properties"]["description"].as_str().unwrap_or_default();
                    let Some(address) = identify::role_owner(stack, rtype, name, description) else { continue };
                    let mut attributes = arm::read_role_assignment(j);
                    let definition = j["properties"]["roleDefinitionId"].as_str().unwrap_or_default();
                    if let Some(role) = self.role_name(definition).await {
                        attributes.insert("role".into(), Value::string(role));
                    }
                    let id = j["id"].as_str().unwrap_or_default().to_string();
                    out.push(Observed { address, id, attributes });
                }
                out
            }
            T::AzureStorageAccount => {
                let c = self.storage.storage_accounts_client();
                tagged(
                    self.list_all(rtype, || all_pages!(c.list_by_resource_group(rg, sub))).await?,
                    crate::images::read_storage_account,
                )
            }
            T::AzureStorageBlob => {
                // In the container of each storage account of the stack.
                let c = self.storage.storage_accounts_client();
                let accounts: Vec<String> = self
                    .list_all(rtype, || all_pages!(c.list_by_resource_group(rg, sub)))
                    .await?
                    .iter()
                    .filter(|j| ours(j))
                    .filter_map(|j| j["name"].as_str().map(str::to_string))
                    .collect();
                self.list_blobs(stack, known, &accounts).await?
            }
            T::AzureGallery => {
                let c = self.compute.galleries_client();
                tagged(
                    self.list_all(rtype, || all_pages!(c.list_by_resource_group(sub, rg))).await?,
                    crate::images::read_gallery,
                )
            }
            T::AzureGalleryImage | T::AzureGalleryImageVersion => {
                // One list per gallery of the stack (and per definition, for versions).
                let galleries = self.compute.galleries_client();
                let mut out = Vec::new();
                for g in self.list_all(rtype, || all_pages!(galleries.list_by_resource_group(sub, rg))).await? {
                    if !ours(&g)
                        && !known.iter().any(|k| {
                            k.id.to_ascii_lowercase().starts_with(&g["id"].as_str().unwrap_or("-").to_ascii_lowercase())
                        })
                    {
                        continue;
                    }
                    let gallery = g["name"].as_str().unwrap_or_default().to_string();
                    let c = self.compute.gallery_images_client();
                    let images = self.list_all(rtype, || all_pages!(c.list_by_gallery(sub, rg, &gallery))).await?;
                    if rtype == T::AzureGalleryImage {
                        out.extend(tagged(images, crate::images::read_gallery_image));
                        continue;
                    }
                    let v = self.compute.gallery_image_versions_client();
                    for image in images {
                        let image = image["name"].as_str().unwrap_or_default().to_string();
                        let versions = self
                            .list_all(rtype, || all_pages!(v.list_by_gallery_image(sub, rg, &gallery, &image)))
                            .await?;
                        out.extend(tagged(versions, crate::images::read_gallery_image_version));
                    }
                }
                out
            }
            _ => Vec::new(),
        })
    }
}
