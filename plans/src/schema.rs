//! The spec language's schema: which blocks exist, their labels, attributes, types and defaults
//! documentation, and the attributes each block exports for references.

/// The type an attribute's value must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    String,
    Number,
    Bool,
    ListOfStrings,
    MapOfStrings,
    /// A list of objects (e.g. taints); their fields are checked when decoded.
    ListOfObjects,
    /// A reference to a block of the given kind, written `kind.name` (or the bare name as a string).
    Reference(&'static str),
    /// Anything (outputs, variable defaults).
    Any,
}

impl Ty {
    pub fn describe(self) -> String {
        match self {
            Ty::String => "a string".into(),
            Ty::Number => "a number".into(),
            Ty::Bool => "a bool".into(),
            Ty::ListOfStrings => "a list of strings".into(),
            Ty::MapOfStrings => "a map of strings".into(),
            Ty::ListOfObjects => "a list of objects".into(),
            Ty::Reference(kind) => format!("a reference to a `{kind}` block"),
            Ty::Any => "a value".into(),
        }
    }
}

#[derive(Debug)]
pub struct AttrSpec {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
}

#[derive(Debug)]
pub struct BlockSpec {
    pub kind: &'static str,
    /// Labelled blocks (`network "link" {}`) may appear many times; unlabelled ones once.
    pub labelled: bool,
    pub attrs: &'static [AttrSpec],
    pub blocks: &'static [BlockSpec],
    /// Attributes known only after apply, readable by references.
    pub computed: &'static [&'static str],
}

impl BlockSpec {
    pub fn attr(&self, name: &str) -> Option<&AttrSpec> {
        self.attrs.iter().find(|a| a.name == name)
    }

    pub fn block(&self, kind: &str) -> Option<&BlockSpec> {
        self.blocks.iter().find(|b| b.kind == kind)
    }
}

const fn req(name: &'static str, ty: Ty) -> AttrSpec {
    AttrSpec { name, ty, required: true }
}

const fn opt(name: &'static str, ty: Ty) -> AttrSpec {
    AttrSpec { name, ty, required: false }
}

const fn block(kind: &'static str, attrs: &'static [AttrSpec]) -> BlockSpec {
    BlockSpec { kind, labelled: false, attrs, blocks: &[], computed: &[] }
}

/// Attributes allowed at the top level of a spec file.
pub const ROOT_ATTRS: &[AttrSpec] = &[opt("stack", Ty::String)];

pub const VARIABLE: BlockSpec = BlockSpec {
    kind: "variable",
    labelled: true,
    attrs: &[opt("type", Ty::Any), opt("default", Ty::Any), opt("description", Ty::String), opt("sensitive", Ty::Bool)],
    blocks: &[],
    computed: &[],
};

pub const CLUSTER: BlockSpec = BlockSpec {
    kind: "cluster",
    labelled: false,
    attrs: &[
        req("infrastructure_name", Ty::String),
        req("api_url", Ty::String),
        req("oidc_issuer_url", Ty::String),
        req("machine_network", Ty::String),
        opt("cluster_network", Ty::String),
        opt("service_network", Ty::String),
        req("overlay_mtu", Ty::Number),
        opt("fips", Ty::Bool),
        opt("ovn_ipsec", Ty::Bool),
        opt("kubeconfig", Ty::String),
        opt("kube_context", Ty::String),
        opt("kubernetes_objects", Ty::String),
        opt("namespace", Ty::String),
        opt("ssh_public_key", Ty::String),
    ],
    blocks: &[block(
        "cluster_api",
        &[
            opt("providers", Ty::String),
            opt("core_components", Ty::String),
            opt("core_image", Ty::String),
            opt("azure_components", Ty::String),
            opt("azure_image", Ty::String),
        ],
    )],
    computed: &[],
};

pub const AWS: BlockSpec = BlockSpec {
    kind: "aws",
    labelled: false,
    attrs: &[
        req("region", Ty::String),
        opt("vpc_id", Ty::String),
        opt("route_table_ids", Ty::ListOfStrings),
        opt("security_group_ids", Ty::ListOfStrings),
        opt("asn", Ty::Number),
        opt("fips", Ty::Bool),
        opt("tags", Ty::MapOfStrings),
    ],
    blocks: &[],
    computed: &["partition"],
};

pub const AZURE: BlockSpec = BlockSpec {
    kind: "azure",
    labelled: false,
    attrs: &[
        opt("cloud", Ty::String),
        req("subscription_id", Ty::String),
        req("tenant_id", Ty::String),
        req("location", Ty::String),
        req("resource_group", Ty::String),
        opt("tags", Ty::MapOfStrings),
    ],
    blocks: &[block("endpoints", &[req("resource_manager", Ty::String), req("authority", Ty::String)])],
    computed: &["resource_group_id"],
};

pub const NETWORK: BlockSpec = BlockSpec {
    kind: "network",
    labelled: true,
    attrs: &[
        opt("driver", Ty::String),
        req("vnet_cidr", Ty::String),
        opt("gateway_subnet", Ty::String),
        opt("gateway_sku", Ty::String),
        opt("routing", Ty::String),
        opt("azure_asn", Ty::Number),
        opt("vpc_id", Ty::String),
        opt("tunnel_inside_cidrs", Ty::ListOfStrings),
        opt("preshared_keys", Ty::ListOfStrings),
        opt("psk_rotation_days", Ty::Number),
        opt("tunnel_mtu", Ty::Number),
        opt("prevent_destroy", Ty::Bool),
    ],
    blocks: &[block(
        "ipsec_policy",
        &[
            opt("ike_version", Ty::String),
            opt("encryption", Ty::String),
            opt("integrity", Ty::String),
            opt("dh_group", Ty::Number),
            opt("pfs_group", Ty::Number),
            opt("ike_lifetime_seconds", Ty::Number),
            opt("sa_lifetime_seconds", Ty::Number),
            opt("dpd_timeout_seconds", Ty::Number),
            opt("rekey_margin_seconds", Ty::Number),
        ],
    )],
    computed: &["tunnels", "vnet_id", "gateway_public_ips", "vpn_gateway_id", "dns_servers"],
};

pub const WORKLOAD_IDENTITY: BlockSpec = BlockSpec {
    kind: "workload_identity",
    labelled: true,
    attrs: &[
        opt("issuer", Ty::String),
        opt("audience", Ty::String),
        opt("namespace", Ty::String),
        opt("service_account", Ty::String),
        opt("role", Ty::String),
        opt("prevent_destroy", Ty::Bool),
    ],
    blocks: &[],
    computed: &["client_id", "principal_id", "subject"],
};

pub const WORKER_POOL: BlockSpec = BlockSpec {
    kind: "worker_pool",
    labelled: true,
    attrs: &[
        opt("network", Ty::Reference("network")),
        opt("identity", Ty::Reference("workload_identity")),
        req("vm_size", Ty::String),
        opt("replicas", Ty::Number),
        req("subnet_cidr", Ty::String),
        opt("image_id", Ty::String),
        opt("zones", Ty::ListOfStrings),
        opt("labels", Ty::MapOfStrings),
        opt("taints", Ty::ListOfObjects),
        opt("accelerated_networking", Ty::Bool),
        opt("egress", Ty::String),
        opt("machine_health_check", Ty::Bool),
        opt("max_unhealthy", Ty::Number),
        opt("node_startup_timeout_seconds", Ty::Number),
        opt("unhealthy_timeout_seconds", Ty::Number),
        opt("outage_tolerance_seconds", Ty::Number),
        opt("prevent_destroy", Ty::Bool),
    ],
    blocks: &[
        block(
            "image",
            &[
                opt("publisher", Ty::String),
                opt("offer", Ty::String),
                opt("sku", Ty::String),
                opt("version", Ty::String),
                opt("vhd", Ty::String),
            ],
        ),
        block("os_disk", &[opt("size_gb", Ty::Number), opt("storage_account_type", Ty::String)]),
    ],
    computed: &["subnet_id"],
};

pub const OUTPUT: BlockSpec = BlockSpec {
    kind: "output",
    labelled: true,
    attrs: &[req("value", Ty::Any), opt("description", Ty::String), opt("sensitive", Ty::Bool)],
    blocks: &[],
    computed: &[],
};

/// Where state lives: `backend "local" { path = ... }`, `backend "s3" { bucket = ... }` or
/// `backend "kubernetes" { namespace = ... }`.
pub const BACKEND: BlockSpec = BlockSpec {
    kind: "backend",
    labelled: true,
    attrs: &[
        opt("path", Ty::String),
        opt("bucket", Ty::String),
        opt("key", Ty::String),
        opt("region", Ty::String),
        opt("endpoint", Ty::String),
        opt("server_side_encryption", Ty::String),
        opt("encryption", Ty::String),
        opt("namespace", Ty::String),
    ],
    blocks: &[],
    computed: &[],
};

/// Every top-level block kind.
pub const TOP_LEVEL: &[&BlockSpec] =
    &[&VARIABLE, &CLUSTER, &AWS, &AZURE, &NETWORK, &WORKLOAD_IDENTITY, &WORKER_POOL, &OUTPUT, &BACKEND];

/// Block kinds an expression may refer to.
pub const REFERENCEABLE: &[&str] = &["cluster", "aws", "azure", "network", "workload_identity", "worker_pool"];

pub fn top_level(kind: &str) -> Option<&'static BlockSpec> {
    TOP_LEVEL.iter().copied().find(|b| b.kind == kind)
}

pub fn is_block_kind(kind: &str) -> bool {
    REFERENCEABLE.contains(&kind)
}

pub fn is_labelled_block(kind: &str) -> bool {
    is_block_kind(kind) && top_level(kind).is_some_and(|b| b.labelled)
}

/// "did you mean `x`?" for the closest candidate, if any is close enough.
pub fn suggest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(wanted, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            suggest("vnet_cdir", NETWORK.attrs.iter().map(|a| a.name)).as_deref(),
            Some("did you mean `vnet_cidr`?")
        );
        assert_eq!(suggest("zzz", NETWORK.attrs.iter().map(|a| a.name)), None);
    }
}
