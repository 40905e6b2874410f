//! The table of emulated resource types: path shape, api-versions, LRO behaviour and durations.

/// How PATCH behaves for a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patch {
    /// The spec has no PATCH.
    None,
    /// `UpdateTags`: only `tags` may change; synchronous.
    Tags,
    /// `UpdateTags` as a long-running operation (gateways, connections).
    TagsLro,
    /// A merge of the body (user-assigned identities).
    Merge,
}

/// One emulated resource type.
#[derive(Debug)]
pub struct Kind {
    /// `Microsoft.Network/virtualNetworks` or `Microsoft.Network/virtualNetworks/subnets`.
    pub arm_type: &'static str,
    /// Provider namespace, e.g. `Microsoft.Network`.
    pub namespace: &'static str,
    /// Path segment of the type (the last one for children), e.g. `subnets`.
    pub segment: &'static str,
    /// For a child type: the parent's `arm_type`.
    pub parent: Option<&'static str>,
    /// For a child type listed inside its parent's `properties`, the property name.
    pub embed_as: Option<&'static str>,
    /// Tracked resources carry `location` and `tags`.
    pub tracked: bool,
    pub api_versions: &'static [&'static str],
    /// PUT is a long-running operation (Azure-AsyncOperation).
    pub lro_put: bool,
    /// DELETE answers 202 and is polled.
    pub lro_delete: bool,
    pub patch: Patch,
    /// Realistic create/update duration range, seconds.
    pub put_secs: (f64, f64),
    /// Realistic delete duration range, seconds.
    pub delete_secs: (f64, f64),
    /// Has `properties.provisioningState`.
    pub provisioning_state: bool,
    /// Has `etag`.
    pub etag: bool,
}

pub const NETWORK_API: &[&str] = &["2024-03-01"];
pub const MSI_API: &[&str] = &["2023-01-31"];
pub const AUTHORIZATION_API: &[&str] = &["2022-04-01"];
/// azure_mgmt_resources 0.21 sends 2021-04-01 (tag package-resources-2021-04); the reference spec is 2024-03-01.
pub const RESOURCES_API: &[&str] = &["2021-04-01", "2024-03-01"];

const fn net(
    arm_type: &'static str,
    segment: &'static str,
    parent: Option<&'static str>,
    embed_as: Option<&'static str>,
    patch: Patch,
    put_secs: (f64, f64),
    delete_secs: (f64, f64),
) -> Kind {
    Kind {
        arm_type,
        namespace: "Microsoft.Network",
        segment,
        parent,
        embed_as,
        tracked: parent.is_none(),
        api_versions: NETWORK_API,
        lro_put: true,
        lro_delete: true,
        patch,
        put_secs,
        delete_secs,
        provisioning_state: true,
        etag: true,
    }
}

pub static VNET: Kind =
    net("Microsoft.Network/virtualNetworks", "virtualNetworks", None, None, Patch::Tags, (5.0, 10.0), (5.0, 15.0));
pub static SUBNET: Kind = net(
    "Microsoft.Network/virtualNetworks/subnets",
    "subnets",
    Some("Microsoft.Network/virtualNetworks"),
    Some("subnets"),
    Patch::None,
    (3.0, 6.0),
    (3.0, 6.0),
);
pub static NSG: Kind = net(
    "Microsoft.Network/networkSecurityGroups",
    "networkSecurityGroups",
    None,
    None,
    Patch::Tags,
    (3.0, 6.0),
    (3.0, 10.0),
);
pub static SECURITY_RULE: Kind = net(
    "Microsoft.Network/networkSecurityGroups/securityRules",
    "securityRules",
    Some("Microsoft.Network/networkSecurityGroups"),
    Some("securityRules"),
    Patch::None,
    (3.0, 6.0),
    (3.0, 6.0),
);
pub static PUBLIC_IP: Kind =
    net("Microsoft.Network/publicIPAddresses", "publicIPAddresses", None, None, Patch::Tags, (2.0, 4.0), (5.0, 10.0));
/// A NAT gateway (`natGateway.json` 2024-03-01): a PUT of a few seconds, as for a public IP.
pub static NAT_GATEWAY: Kind =
    net("Microsoft.Network/natGateways", "natGateways", None, None, Patch::Tags, (3.0, 8.0), (5.0, 10.0));
pub static VNG: Kind = net(
    "Microsoft.Network/virtualNetworkGateways",
    "virtualNetworkGateways",
    None,
    None,
    Patch::TagsLro,
    (1800.0, 2700.0),
    (600.0, 1200.0),
);
pub static LNG: Kind = net(
    "Microsoft.Network/localNetworkGateways",
    "localNetworkGateways",
    None,
    None,
    Patch::Tags,
    (10.0, 20.0),
    (10.0, 20.0),
);
pub static CONNECTION: Kind =
    net("Microsoft.Network/connections", "connections", None, None, Patch::TagsLro, (60.0, 120.0), (30.0, 60.0));
pub static ROUTE_TABLE: Kind =
    net("Microsoft.Network/routeTables", "routeTables", None, None, Patch::Tags, (2.0, 5.0), (2.0, 5.0));
pub static ROUTE: Kind = net(
    "Microsoft.Network/routeTables/routes",
    "routes",
    Some("Microsoft.Network/routeTables"),
    Some("routes"),
    Patch::None,
    (2.0, 5.0),
    (2.0, 5.0),
);
pub static IDENTITY: Kind = Kind {
    arm_type: "Microsoft.ManagedIdentity/userAssignedIdentities",
    namespace: "Microsoft.ManagedIdentity",
    segment: "userAssignedIdentities",
    parent: None,
    embed_as: None,
    tracked: true,
    api_versions: MSI_API,
    lro_put: false,
    lro_delete: false,
    patch: Patch::Merge,
    put_secs: (0.0, 0.0),
    delete_secs: (0.0, 0.0),
    provisioning_state: false,
    etag: false,
};
pub static FEDERATED_CREDENTIAL: Kind = Kind {
    arm_type: "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials",
    namespace: "Microsoft.ManagedIdentity",
    segment: "federatedIdentityCredentials",
    parent: Some("Microsoft.ManagedIdentity/userAssignedIdentities"),
    embed_as: None,
    tracked: false,
    api_versions: MSI_API,
    lro_put: false,
    lro_delete: false,
    patch: Patch::None,
    put_secs: (0.0, 0.0),
    delete_secs: (0.0, 0.0),
    provisioning_state: false,
    etag: false,
};

/// The api-versions of the Network types CAPZ calls: `armnetwork/v4` v4.3.0 sends 2023-05-01
/// (`shared/reference/README.md`, "What CAPZ v1.26.0 calls").
pub const CAPZ_NETWORK_API: &[&str] = &["2023-05-01", "2024-03-01"];
/// `armcompute/v5` v5.7.0: ComputeRP 2024-03-01, DiskRP 2023-10-02.
pub const COMPUTE_API: &[&str] = &["2024-03-01"];
pub const DISK_API: &[&str] = &["2023-10-02"];

/// A network interface (`networkInterface.json`), which CAPZ makes for each worker
/// ([`super::compute`]).
pub static NIC: Kind = Kind {
    api_versions: CAPZ_NETWORK_API,
    ..net("Microsoft.Network/networkInterfaces", "networkInterfaces", None, None, Patch::Tags, (2.0, 5.0), (2.0, 5.0))
};

const fn compute(
    arm_type: &'static str,
    segment: &'static str,
    api_versions: &'static [&'static str],
    lro: bool,
    put_secs: (f64, f64),
    delete_secs: (f64, f64),
) -> Kind {
    Kind {
        arm_type,
        namespace: "Microsoft.Compute",
        segment,
        parent: None,
        embed_as: None,
        tracked: true,
        api_versions,
        lro_put: lro,
        lro_delete: lro,
        patch: Patch::None,
        put_secs,
        delete_secs,
        provisioning_state: lro,
        etag: false,
    }
}

/// A virtual machine (`virtualMachine.json` 2024-03-01): a PUT of minutes, polled.
pub static VM: Kind =
    compute("Microsoft.Compute/virtualMachines", "virtualMachines", COMPUTE_API, true, (60.0, 180.0), (60.0, 120.0));
/// A managed disk (`disk.json` 2023-10-02): made by its VM's PUT; CAPZ deletes it.
pub static DISK: Kind = compute("Microsoft.Compute/disks", "disks", DISK_API, true, (5.0, 15.0), (5.0, 15.0));
/// An availability set (`availabilitySet.json` 2024-03-01): synchronous, no provisioning state.
pub static AVAILABILITY_SET: Kind =
    compute("Microsoft.Compute/availabilitySets", "availabilitySets", COMPUTE_API, false, (0.0, 0.0), (0.0, 0.0));

/// Microsoft.Storage 2023-05-01 (`storage.json`), the version azure_mgmt_storage 0.21's
/// `package-2023-05` sends.
pub const STORAGE_API: &[&str] = &["2023-05-01"];
/// Compute's GalleryRP 2023-07-03 (`gallery.json`), what azure_mgmt_compute 0.21 sends for galleries.
pub const GALLERY_API: &[&str] = &["2023-07-03"];

/// A storage account: its create is long-running (202 and a `Location` to poll; `storage.json`
/// `StorageAccounts_Create`), its delete synchronous (200, or 204 when there is none).
pub static STORAGE_ACCOUNT: Kind = Kind {
    arm_type: "Microsoft.Storage/storageAccounts",
    namespace: "Microsoft.Storage",
    segment: "storageAccounts",
    parent: None,
    embed_as: None,
    tracked: true,
    api_versions: STORAGE_API,
    lro_put: true,
    lro_delete: false,
    patch: Patch::None,
    put_secs: (15.0, 30.0),
    delete_secs: (0.0, 0.0),
    provisioning_state: true,
    etag: false,
};

const fn gallery(
    arm_type: &'static str,
    segment: &'static str,
    parent: Option<&'static str>,
    put_secs: (f64, f64),
    delete_secs: (f64, f64),
) -> Kind {
    // Galleries, image definitions and image versions are all tracked (location and tags), and
    // every write and delete is long-running (`gallery.json`: `x-ms-long-running-operation`).
    Kind {
        arm_type,
        namespace: "Microsoft.Compute",
        segment,
        parent,
        embed_as: None,
        tracked: true,
        api_versions: GALLERY_API,
        lro_put: true,
        lro_delete: true,
        patch: Patch::None,
        put_secs,
        delete_secs,
        provisioning_state: true,
        etag: false,
    }
}

pub static GALLERY: Kind = gallery("Microsoft.Compute/galleries", "galleries", None, (5.0, 15.0), (5.0, 15.0));
pub static GALLERY_IMAGE: Kind = gallery(
    "Microsoft.Compute/galleries/images",
    "images",
    Some("Microsoft.Compute/galleries"),
    (5.0, 15.0),
    (5.0, 15.0),
);
/// An image version: made from the blob and replicated to each target region before it answers
/// `Succeeded` (10-30 minutes for an OS disk of this size).
pub static GALLERY_IMAGE_VERSION: Kind = gallery(
    "Microsoft.Compute/galleries/images/versions",
    "versions",
    Some("Microsoft.Compute/galleries/images"),
    (600.0, 1800.0),
    (60.0, 180.0),
);

/// What a subnet references in its `properties`: the field, the type it names, and what ARM says
/// when one still in use is deleted (its code and the resource's name in the message). One table for
/// the reference check, the delete check and the `subnets` back-reference GET shows.
pub struct SubnetReference {
    pub field: &'static str,
    pub kind: &'static Kind,
    pub in_use_code: &'static str,
    pub what: &'static str,
}

pub static SUBNET_REFERENCES: &[SubnetReference] = &[
    SubnetReference {
        field: "networkSecurityGroup",
        kind: &NSG,
        in_use_code: "InUseNetworkSecurityGroupCannotBeDeleted",
        what: "Network security group",
    },
    SubnetReference {
        field: "routeTable",
        kind: &ROUTE_TABLE,
        in_use_code: "InUseRouteTableCannotBeDeleted",
        what: "Route table",
    },
    SubnetReference {
        field: "natGateway",
        kind: &NAT_GATEWAY,
        in_use_code: "InUseNatGatewayCannotBeDeleted",
        what: "Nat gateway",
    },
];

/// The subnet reference naming a resource of `kind`, if subnets reference that type.
pub fn subnet_reference(kind: &Kind) -> Option<&'static SubnetReference> {
    SUBNET_REFERENCES.iter().find(|r| std::ptr::eq(r.kind, kind))
}

/// Every type addressed as `/subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{type}/{name}[/{child}/{name}]`.
pub static KINDS: &[&Kind] = &[
    &VNET,
    &SUBNET,
    &NSG,
    &SECURITY_RULE,
    &PUBLIC_IP,
    &NAT_GATEWAY,
    &VNG,
    &LNG,
    &CONNECTION,
    &ROUTE_TABLE,
    &ROUTE,
    &IDENTITY,
    &FEDERATED_CREDENTIAL,
    &NIC,
    &VM,
    &DISK,
    &AVAILABILITY_SET,
    &STORAGE_ACCOUNT,
    &GALLERY,
    &GALLERY_IMAGE,
    &GALLERY_IMAGE_VERSION,
];

/// Finds a top-level type by namespace and segment (case-insensitive).
pub fn top_level(namespace: &str, segment: &str) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| {
        k.parent.is_none() && k.namespace.eq_ignore_ascii_case(namespace) && k.segment.eq_ignore_ascii_case(segment)
    })
}

/// Finds a child type of `parent` by segment (case-insensitive).
pub fn child(parent: &Kind, segment: &str) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| k.parent == Some(parent.arm_type) && k.segment.eq_ignore_ascii_case(segment))
}

/// The child types of `parent` that are embedded in its `properties`.
pub fn embedded_children(parent: &Kind) -> impl Iterator<Item = &'static Kind> + '_ {
    KINDS.iter().copied().filter(move |k| k.parent == Some(parent.arm_type) && k.embed_as.is_some())
}

/// Finds a type by its full ARM type name (case-insensitive).
pub fn by_type(arm_type: &str) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| k.arm_type.eq_ignore_ascii_case(arm_type))
}
