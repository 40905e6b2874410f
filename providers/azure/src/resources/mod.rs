//! Each resource type through its typed client: the write (create and update are both a PUT in
//! ARM), the delete, and the bulk list refresh makes. A type's handler (a module with its `put`,
//! `remove` and `list`) lives in its family's file (`group`, `network`, `vpn`, `identity`,
//! `image`); this module keeps what they share (the contexts [`Put`], [`Remove`] and
//! [`Listing`], the waits for ARM's operations) and `kinds!`, the one table from a type to its
//! handler. Adding a type is its handler and a row of that table.

use futures::StreamExt;
use serde_json::Value as Json;
use xcsp_core::attrs::Reader;
use xcsp_core::provider::{Attributes, Observed, Progress, ProviderError, Request};
use xcsp_core::{Address, ProviderKind, ResourceType as T, tags};

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
            while let Some(page) = futures::StreamExt::next(&mut pages).await {
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
}

mod group;
mod identity;
mod image;
mod network;
mod vpn;

/// The one table from a resource type to its handler: a module, in its family's file, with the
/// type's `put`, `remove` and `list`. Adding a type is its module and a row here.
macro_rules! kinds {
    ($($t:ident => $family:ident :: $handler:ident,)*) => {
        /// Every Azure resource type the table names.
        #[cfg(test)]
        const KINDS: &[T] = &[$(T::$t),*];

        /// Creates or updates the resource (both a PUT in ARM) and reads back what Azure made of it.
        async fn put(w: &Put<'_>) -> Result<Observed, ProviderError> {
            match w.req.address.rtype {
                $(T::$t => $family::$handler::put(w).await,)*
                _ => Err(ProviderError::Failed {
                    address: w.req.address.to_string(),
                    code: "NotAzure".into(),
                    message: format!("{} is not an Azure resource type", w.req.address.rtype.as_str()),
                }),
            }
        }

        /// Deletes the resource and waits until it is gone; gone already is success.
        async fn remove(r: &Remove<'_>) -> Result<(), ProviderError> {
            match r.req.address.rtype {
                $(T::$t => $family::$handler::remove(r).await,)*
                _ => Ok(()),
            }
        }

        /// Every live resource of the type that state records or that carries the stack's tags.
        async fn list(l: &Listing<'_>) -> Result<Vec<Observed>, ProviderError> {
            match l.rtype {
                $(T::$t => $family::$handler::list(l).await,)*
                _ => Ok(Vec::new()),
            }
        }
    };
}

kinds! {
    AzureResourceGroup => group::resource_group,
    AzureVirtualNetwork => network::virtual_network,
    AzureVnetDnsServers => network::vnet_dns_servers,
    AzureSubnet => network::subnet,
    AzureNetworkSecurityGroup => network::network_security_group,
    AzurePublicIp => network::public_ip,
    AzureNatGateway => network::nat_gateway,
    AzureVpnGateway => vpn::vpn_gateway,
    AzureLocalNetworkGateway => vpn::local_network_gateway,
    AzureVpnConnection => vpn::vpn_connection,
    AzureUserAssignedIdentity => identity::user_assigned_identity,
    AzureFederatedCredential => identity::federated_credential,
    AzureRoleDefinition => identity::role_definition,
    AzureRoleAssignment => identity::role_assignment,
    AzureStorageAccount => image::storage_account,
    AzureStorageBlob => image::storage_blob,
    AzureGallery => image::gallery,
    AzureGalleryImage => image::gallery_image,
    AzureGalleryImageVersion => image::gallery_image_version,
}

/// What a write works from: the request, its attributes, where it goes.
#[derive(Clone, Copy)]
pub(crate) struct Put<'a> {
    pub p: &'a AzureProvider,
    pub req: &'a Request<'a>,
    pub progress: &'a dyn Progress,
    /// `create` or `update`.
    pub operation: &'static str,
    pub d: Reader<'a>,
    pub sub: &'a str,
    pub rg: &'a str,
}

impl Put<'_> {
    /// What Azure is doing, as progress says it.
    fn doing(&self, what: &str) -> String {
        let verb = if self.operation == "create" { "creating" } else { "updating" };
        format!("Azure is {verb} the {what}")
    }

    /// The write most types make: `body` (the ARM JSON of the attributes) as the SDK's model,
    /// sent by `send`, then the resource as Azure has it once ARM's operation ends (from `get`
    /// after a long-running operation), read by `read`; `what` names it as progress says it.
    async fn send<M, S, SF, G, GF>(
        &self,
        what: &str,
        read: fn(&Json) -> Attributes,
        body: Json,
        send: S,
        get: G,
    ) -> Result<Observed, ProviderError>
    where
        M: serde::de::DeserializeOwned + Clone,
        S: Fn(M) -> SF,
        SF: Future<Output = azure_core::Result<azure_core::Response>>,
        G: Fn() -> GF,
        GF: Future<Output = azure_core::Result<Json>>,
    {
        let m: M = model(self.req.address, body)?;
        let doing = self.doing(what);
        let body = self.p.write(self.req.address, self.progress, &doing, || send(m.clone()), get).await?;
        Ok(self.observed(&body, read))
    }

    /// The resource as Azure answered it (`body`), read into attributes by `read`.
    fn observed(&self, body: &Json, read: fn(&Json) -> Attributes) -> Observed {
        let id = body["id"].as_str().unwrap_or_default().to_string();
        Observed { address: self.req.address.clone(), id, attributes: read(body) }
    }
}

/// What a delete works from: the request and the id state records (the cloud's truth; the
/// attributes stand in when it is missing).
#[derive(Clone, Copy)]
pub(crate) struct Remove<'a> {
    pub p: &'a AzureProvider,
    pub req: &'a Request<'a>,
    pub progress: &'a dyn Progress,
    pub d: Reader<'a>,
    pub id: &'a str,
    pub sub: &'a str,
    pub rg: &'a str,
}

impl Remove<'_> {
    /// The id's segment `from_end` places from its end, when there is an id.
    fn segment(&self, from_end: usize) -> Option<&str> {
        self.id.rsplit('/').nth(from_end).filter(|s| !s.is_empty() && self.id.contains('/'))
    }

    /// The resource's name: the id's last segment, else the `name` attribute.
    fn name(&self) -> String {
        self.segment(0).map(str::to_string).or_else(|| self.d.opt_str("name")).unwrap_or_default()
    }

    /// The scope and name of an authorization object (`kind`: `roleDefinitions`,
    /// `roleAssignments`): from its id, else from the `scope` attribute (or `default`) and the
    /// name xcsp gives it.
    fn authorization(&self, kind: &str, default: impl FnOnce() -> String) -> (String, String) {
        let mark = format!("/providers/Microsoft.Authorization/{kind}/");
        let scope = match self.id.find(&mark) {
            Some(at) => self.id[..at].to_string(),
            None => self.d.opt_str("scope").unwrap_or_else(default),
        };
        let name = self
            .segment(0)
            .map(str::to_string)
            .unwrap_or_else(|| identify::role_assignment_name(self.req.stack, self.req.address));
        (scope, name)
    }

    /// The delete most types make: `send`, then a wait until the resource is gone; `what` names
    /// it as progress says it.
    async fn delete<S, SF>(&self, what: &str, send: S) -> Result<(), ProviderError>
    where
        S: Fn() -> SF,
        SF: Future<Output = azure_core::Result<azure_core::Response>>,
    {
        let deleting = format!("Azure is deleting the {what}");
        self.p.delete_with(self.req.address, self.progress, &deleting, send).await
    }
}

/// What one refresh of a type works from: the stack, what state records (`known`, matched by id
/// whatever its tags say now), and where it lists.
#[derive(Clone, Copy)]
pub(crate) struct Listing<'a> {
    pub p: &'a AzureProvider,
    pub stack: &'a str,
    pub rtype: T,
    pub known: &'a [Observed],
    pub sub: &'a str,
    pub rg: &'a str,
}

impl Listing<'_> {
    /// The stack and address tags, under today's keys or the ones written before them.
    fn owner(j: &Json) -> Option<(&str, &str)> {
        tags::owner(ProviderKind::Azure, |k| j["tags"][k].as_str())
    }

    /// Whether `j` carries this stack's tag.
    fn ours(&self, j: &Json) -> bool {
        Self::owner(j).is_some_and(|(s, _)| s == self.stack)
    }

    /// The address `j`'s tag names.
    fn address_of(&self, j: &Json) -> Option<Address> {
        Self::owner(j).and_then(|(_, a)| a.parse::<Address>().ok())
    }

    /// The address state records for `j`'s id (ARM ids compare case-insensitively: resource
    /// group names, provider namespaces).
    fn recorded(&self, j: &Json) -> Option<Address> {
        let id = j["id"].as_str()?;
        self.known
            .iter()
            .find(|k| k.address.rtype == self.rtype && k.id.eq_ignore_ascii_case(id))
            .map(|k| k.address.clone())
    }

    /// The items state records or the stack's tags claim, each read by `read`.
    fn tagged(&self, items: Vec<Json>, read: fn(&Json) -> Attributes) -> Vec<Observed> {
        items
            .iter()
            .filter_map(|j| {
                let address = self
                    .recorded(j)
                    .or_else(|| self.ours(j).then(|| self.address_of(j)).flatten())
                    .filter(|a| a.rtype == self.rtype)?;
                let id = j["id"].as_str().unwrap_or_default().to_string();
                Some(Observed { address, id, attributes: read(j) })
            })
            .collect()
    }
}

impl AzureProvider {
    /// Creates or updates the resource through its type's handler.
    pub(crate) async fn put(
        &self,
        req: &Request<'_>,
        progress: &dyn Progress,
        operation: &'static str,
    ) -> Result<Observed, ProviderError> {
        let d = Reader::new(req.address, req.attributes);
        let rg = self.resource_group(&d);
        put(&Put { p: self, req, progress, operation, d, sub: &self.config.subscription_id, rg: &rg }).await
    }

    /// Deletes the resource through its type's handler and waits until it is gone.
    pub(crate) async fn remove(&self, req: &Request<'_>, progress: &dyn Progress) -> Result<(), ProviderError> {
        let d = Reader::new(req.address, req.attributes);
        let id = req.id.unwrap_or_default();
        let rg = arm::resource_group_of(id).map(str::to_string).unwrap_or_else(|| self.resource_group(&d));
        remove(&Remove { p: self, req, progress, d, id, sub: &self.config.subscription_id, rg: &rg }).await
    }

    /// Every live resource of `rtype` that state records (`known`, matched by id whatever its
    /// tags say now) or that is tagged with `stack`, in one list call per type where Azure allows
    /// (see [`identify`] for the untaggable ones).
    pub(crate) async fn list(&self, stack: &str, rtype: T, known: &[Observed]) -> Result<Vec<Observed>, ProviderError> {
        let (sub, rg) = (&self.config.subscription_id, &self.config.resource_group);
        list(&Listing { p: self, stack, rtype, known, sub, rg }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_azure_type_has_one_handler() {
        for t in T::ALL.iter().filter(|t| t.provider() == ProviderKind::Azure) {
            assert_eq!(KINDS.iter().filter(|k| *k == t).count(), 1, "{}", t.as_str());
        }
        assert!(KINDS.iter().all(|t| t.provider() == ProviderKind::Azure));
    }
}
