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

/// What an attribute is when the spec leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrDefault {
    /// Nothing: the attribute is required, or its absence means something the doc says.
    None,
    /// This value, as the spec would write it. The decoder's own default is checked against it
    /// each time it is taken (`decode::fields`), so the reference cannot drift from the decoder.
    Literal(&'static str),
    /// A value computed from the rest of the spec or the cluster, as described.
    Described(&'static str),
}

#[derive(Debug)]
pub struct AttrSpec {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
    pub default: AttrDefault,
    /// One line for the reference (`docs/src/reference/spec-schema.md`).
    pub doc: &'static str,
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
    /// What the block describes, for the reference.
    pub doc: &'static str,
}

impl BlockSpec {
    pub fn attr(&self, name: &str) -> Option<&AttrSpec> {
        self.attrs.iter().find(|a| a.name == name)
    }

    pub fn block(&self, kind: &str) -> Option<&BlockSpec> {
        self.blocks.iter().find(|b| b.kind == kind)
    }
}

const fn req(name: &'static str, ty: Ty, doc: &'static str) -> AttrSpec {
    AttrSpec { name, ty, required: true, default: AttrDefault::None, doc }
}

const fn opt(name: &'static str, ty: Ty, doc: &'static str) -> AttrSpec {
    AttrSpec { name, ty, required: false, default: AttrDefault::None, doc }
}

/// Optional, with the decoder's default.
const fn def(name: &'static str, ty: Ty, default: &'static str, doc: &'static str) -> AttrSpec {
    AttrSpec { name, ty, required: false, default: AttrDefault::Literal(default), doc }
}

/// Optional, with a default computed as `how` says.
const fn computed_default(name: &'static str, ty: Ty, how: &'static str, doc: &'static str) -> AttrSpec {
    AttrSpec { name, ty, required: false, default: AttrDefault::Described(how), doc }
}

const fn block(kind: &'static str, doc: &'static str, attrs: &'static [AttrSpec]) -> BlockSpec {
    BlockSpec { kind, labelled: false, attrs, blocks: &[], computed: &[], doc }
}

/// Attributes allowed at the top level of a spec file.
pub const ROOT_ATTRS: &[AttrSpec] = &[computed_default(
    "stack",
    Ty::String,
    "`cluster.infrastructure_name`",
    "The stack's name: in state paths, tags, labels and Azure names. 1-63 letters, digits, `-`, `_`.",
)];

pub const VARIABLE: BlockSpec = BlockSpec {
    kind: "variable",
    labelled: true,
    attrs: &[
        opt("type", Ty::Any, "The value's type (`string`, `number`, `bool`, a list or map of them)."),
        opt("default", Ty::Any, "Its value when neither `--var`, a var file nor `XCSP_VAR_<NAME>` sets one."),
        opt("description", Ty::String, "What it is for."),
        def("sensitive", Ty::Bool, "false", "Mask its value in plans, diagnostics and logs."),
    ],
    blocks: &[],
    computed: &[],
    doc: "An input, referred to as `var.NAME`.",
};

pub const CLUSTER: BlockSpec = BlockSpec {
    kind: "cluster",
    labelled: false,
    attrs: &[
        req(
            "infrastructure_name",
            Ty::String,
            "The cluster's infrastructure name (`oc get infrastructure cluster`); finds its VPC by tag.",
        ),
        req("api_url", Ty::String, "The cluster's API URL; the kubeconfig's server must be it."),
        req(
            "oidc_issuer_url",
            Ty::String,
            "The issuer of the cluster's service-account tokens, which Entra must reach and match byte for byte.",
        ),
        req("machine_network", Ty::String, "The cluster's machine CIDR, routed over the link."),
        def("cluster_network", Ty::String, "10.128.0.0/14", "The cluster's pod CIDR."),
        def("service_network", Ty::String, "172.30.0.0/16", "The cluster's service CIDR."),
        req(
            "overlay_mtu",
            Ty::Number,
            "The cluster's overlay MTU; preflight checks it against the cluster and the tunnels' path.",
        ),
        def(
            "fips",
            Ty::Bool,
            "false",
            "The cluster runs in FIPS mode: the pool follows it and the link keeps to FIPS-approved IPsec.",
        ),
        def(
            "ovn_ipsec",
            Ty::Bool,
            "false",
            "The cluster encrypts node traffic with IPsec: the link lets IKE and ESP through.",
        ),
        computed_default(
            "kubeconfig",
            Ty::String,
            "`KUBECONFIG`, then `~/.kube/config`",
            "The kubeconfig that reaches the cluster.",
        ),
        opt("kube_context", Ty::String, "The kubeconfig context to use (its current one otherwise)."),
        def(
            "kubernetes_objects",
            Ty::String,
            "apply",
            "`apply` the pool's objects to the cluster, or only `render` them for GitOps.",
        ),
        computed_default(
            "namespace",
            Ty::String,
            "`xcsp-<stack>`",
            "The namespace of the pool's Cluster API objects (never `openshift-cluster-api`).",
        ),
        opt("ssh_public_key", Ty::String, "The VMs' SSH key: `ssh-rsa`, 2048 bits or more. Required with a pool."),
    ],
    blocks: &[BlockSpec {
        kind: "cluster_api",
        labelled: false,
        attrs: &[
            def(
                "providers",
                Ty::String,
                "auto",
                "Whose Cluster API managers: `auto`, `cluster` (OpenShift's) or `xcsp` (installed by xcsp).",
            ),
            opt(
                "core_components",
                Ty::String,
                "Path to Cluster API's release `core-components.yaml`, for xcsp to install.",
            ),
            opt("core_image", Ty::String, "The core manager's image, in place of the manifest's."),
            opt(
                "azure_components",
                Ty::String,
                "Path to CAPZ's release `infrastructure-components.yaml`, for xcsp to install.",
            ),
            opt("azure_image", Ty::String, "CAPZ's manager image, in place of the manifest's."),
        ],
        blocks: &[],
        computed: &[],
        doc: "Which Cluster API providers the pool uses, and where xcsp's come from.",
    }],
    computed: &[],
    doc: "The OpenShift cluster on AWS the pool joins. Exactly one.",
};

pub const AWS: BlockSpec = BlockSpec {
    kind: "aws",
    labelled: false,
    attrs: &[
        req("region", Ty::String, "The cluster's region (GovCloud regions use the `aws-us-gov` partition)."),
        computed_default("vpc_id", Ty::String, "the VPC tagged `kubernetes.io/cluster/<infra>`", "The cluster's VPC."),
        computed_default(
            "route_table_ids",
            Ty::ListOfStrings,
            "every route table of the VPC",
            "Route tables the link's routes propagate to.",
        ),
        computed_default(
            "security_group_ids",
            Ty::ListOfStrings,
            "the cluster's tagged groups",
            "Security groups the link's rules go into.",
        ),
        def("asn", Ty::Number, "64512", "The AWS side's BGP ASN (the virtual private gateway's)."),
        def("fips", Ty::Bool, "false", "Use AWS's FIPS endpoints."),
        opt("tags", Ty::MapOfStrings, "Tags on every AWS resource xcsp makes (with its own two)."),
    ],
    blocks: &[],
    computed: &["partition"],
    doc: "The AWS side. Exactly one.",
};

pub const AZURE: BlockSpec = BlockSpec {
    kind: "azure",
    labelled: false,
    attrs: &[
        def("cloud", Ty::String, "public", "`public`, `usgovernment`, or `custom` with an `endpoints` block."),
        req("subscription_id", Ty::String, "The subscription the pool is made in."),
        req("tenant_id", Ty::String, "The Entra tenant of the subscription."),
        req("location", Ty::String, "The region of the pool (`usgovvirginia`, `eastus`, ...)."),
        req("resource_group", Ty::String, "The resource group xcsp makes and keeps everything in."),
        opt("tags", Ty::MapOfStrings, "Tags on every taggable Azure resource (with xcsp's own two)."),
    ],
    blocks: &[block(
        "endpoints",
        "A sovereign cloud's endpoints, with `cloud = \"custom\"`.",
        &[
            req("resource_manager", Ty::String, "Its Resource Manager URL."),
            req("authority", Ty::String, "Its Entra authority URL."),
        ],
    )],
    computed: &["resource_group_id"],
    doc: "The Azure side. Exactly one.",
};

pub const NETWORK: BlockSpec = BlockSpec {
    kind: "network",
    labelled: true,
    attrs: &[
        def(
            "driver",
            Ty::String,
            "ipsec",
            "`ipsec`: xcsp builds the VPN; `external`: the VNet is reached another way.",
        ),
        req("vnet_cidr", Ty::String, "The Azure VNet's CIDR; must not overlap the cluster's."),
        opt("gateway_subnet", Ty::String, "The `GatewaySubnet` CIDR, inside the VNet (/27 or larger)."),
        def("gateway_sku", Ty::String, "VpnGw2AZ", "The Azure VPN gateway's SKU."),
        def("routing", Ty::String, "bgp", "`bgp` (`static` is refused: failover between the four tunnels needs BGP)."),
        def("azure_asn", Ty::Number, "65515", "The Azure gateway's BGP ASN."),
        computed_default("vpc_id", Ty::String, "`aws.vpc_id`", "The VPC the link attaches to."),
        computed_default(
            "tunnel_inside_cidrs",
            Ty::ListOfStrings,
            "169.254.21.0/30, 169.254.22.0/30, 169.254.21.4/30, 169.254.22.4/30",
            "Four /30s, one per tunnel, within Azure's APIPA range 169.254.21.0-169.254.22.255.",
        ),
        opt(
            "preshared_keys",
            Ty::ListOfStrings,
            "Four tunnel keys; generated at apply and kept sensitive in state when left out.",
        ),
        opt(
            "psk_rotation_days",
            Ty::Number,
            "Replace the oldest generated key once it is older than this, one per run.",
        ),
        def(
            "tunnel_mtu",
            Ty::Number,
            "1400",
            "The MTU the tunnels carry; the overlay MTU plus Geneve's overhead must fit.",
        ),
        def("prevent_destroy", Ty::Bool, "false", "Refuse to destroy or replace this link."),
    ],
    blocks: &[block(
        "ipsec_policy",
        "The IPsec proposal both clouds negotiate; checked against both at plan time.",
        &[
            def("ike_version", Ty::String, "ikev2", "`ikev1` or `ikev2`."),
            def("encryption", Ty::String, "aes256", "The cipher (`aes256`, `gcm-aes256`, ...)."),
            def("integrity", Ty::String, "sha256", "The integrity algorithm (`sha384` only with a GCM cipher)."),
            def("dh_group", Ty::Number, "14", "The IKE Diffie-Hellman group (2 is refused with `fips`)."),
            def("pfs_group", Ty::Number, "14", "The child SA's PFS group."),
            def("ike_lifetime_seconds", Ty::Number, "28800", "Phase 1 lifetime, 900-28800 s."),
            def("sa_lifetime_seconds", Ty::Number, "3600", "Phase 2 lifetime, 900-3600 s and below phase 1."),
            opt("dpd_timeout_seconds", Ty::Number, "Dead-peer detection timeout, 30-3600 s."),
            opt("rekey_margin_seconds", Ty::Number, "AWS's rekey margin, 60 s to half the phase 2 lifetime."),
        ],
    )],
    computed: &["tunnels", "vnet_id", "gateway_public_ips", "vpn_gateway_id", "dns_servers"],
    doc: "A link: the Azure VNet, its VPN gateway and four IPsec/BGP tunnels to the cluster's VPC, DNS over it.",
};

pub const WORKLOAD_IDENTITY: BlockSpec = BlockSpec {
    kind: "workload_identity",
    labelled: true,
    attrs: &[
        computed_default(
            "issuer",
            Ty::String,
            "`cluster.oidc_issuer_url`",
            "The token issuer the federated credential trusts.",
        ),
        computed_default("audience", Ty::String, "`api://AzureADTokenExchange`", "The token audience it trusts."),
        computed_default(
            "namespace",
            Ty::String,
            "CAPZ's: `openshift-cluster-api`, or `xcsp-capz-system` when xcsp installs it",
            "The namespace of the service account it trusts.",
        ),
        def("service_account", Ty::String, "capz-manager", "The service account it trusts."),
        def("role", Ty::String, "Contributor", "The role assigned on the resource group."),
        def("prevent_destroy", Ty::Bool, "false", "Refuse to destroy or replace this identity."),
    ],
    blocks: &[],
    computed: &["client_id", "principal_id", "subject"],
    doc: "A managed identity with a federated credential that trusts CAPZ's service-account token.",
};

pub const WORKER_POOL: BlockSpec = BlockSpec {
    kind: "worker_pool",
    labelled: true,
    attrs: &[
        computed_default(
            "network",
            Ty::Reference("network"),
            "the only `network`",
            "The link the pool's VMs reach the cluster over.",
        ),
        computed_default(
            "identity",
            Ty::Reference("workload_identity"),
            "the only `workload_identity`",
            "The identity CAPZ makes the VMs with.",
        ),
        req("vm_size", Ty::String, "The Azure VM size (checked against what the location offers the subscription)."),
        def("replicas", Ty::Number, "1", "The number of machines, spread over `zones`."),
        req("subnet_cidr", Ty::String, "The pool's subnet, inside the VNet."),
        opt("image_id", Ty::String, "A gallery image version's ARM id, in place of an `image` block."),
        opt("zones", Ty::ListOfStrings, "Availability zones: one MachineSet per zone."),
        opt("labels", Ty::MapOfStrings, "Labels on the pool's Nodes."),
        opt("taints", Ty::ListOfObjects, "Taints on the pool's Nodes: `{ key, value, effect }`."),
        def("accelerated_networking", Ty::Bool, "true", "Accelerated networking on the VMs' NICs."),
        def(
            "egress",
            Ty::String,
            "nat_gateway",
            "How VMs reach registries: `nat_gateway`, `link` or `default_outbound`.",
        ),
        def("machine_health_check", Ty::Bool, "false", "A MachineHealthCheck fit for a pool on a link."),
        computed_default(
            "max_unhealthy",
            Ty::Number,
            "40% of the replicas, at least 1",
            "Past it the health check remediates none.",
        ),
        def("node_startup_timeout_seconds", Ty::Number, "2700", "How long a first boot may take before remediation."),
        def("unhealthy_timeout_seconds", Ty::Number, "900", "How long a Node may be not Ready before remediation."),
        def(
            "outage_tolerance_seconds",
            Ty::Number,
            "3600",
            "How long Pods on the pool's RuntimeClass stay through a link outage.",
        ),
        def("prevent_destroy", Ty::Bool, "false", "Refuse to destroy or replace this pool."),
    ],
    blocks: &[
        block(
            "image",
            "The boot image: a Marketplace image, or the release's RHCOS VHD to import.",
            &[
                opt("publisher", Ty::String, "Marketplace publisher (`azureopenshift`)."),
                opt("offer", Ty::String, "Marketplace offer (`aro4`)."),
                opt("sku", Ty::String, "Marketplace SKU: the cluster's release (`422-v2`)."),
                opt("version", Ty::String, "Marketplace version, or `latest`."),
                opt("vhd", Ty::String, "An RHCOS `azure` VHD URL (https), imported into a gallery."),
            ],
        ),
        block(
            "os_disk",
            "The VMs' OS disk.",
            &[
                def("size_gb", Ty::Number, "128", "Its size in GiB."),
                def("storage_account_type", Ty::String, "Premium_LRS", "Its storage type."),
            ],
        ),
    ],
    computed: &["subnet_id"],
    doc: "A pool of Azure VMs joined to the cluster as Nodes, through Cluster API and CAPZ.",
};

pub const OUTPUT: BlockSpec = BlockSpec {
    kind: "output",
    labelled: true,
    attrs: &[
        req("value", Ty::Any, "What to print after apply (references to computed attributes among them)."),
        opt("description", Ty::String, "What it is."),
        def("sensitive", Ty::Bool, "false", "Print it as a marker only."),
    ],
    blocks: &[],
    computed: &[],
    doc: "A value shown after apply.",
};

/// Where state lives: `backend "local" { path = ... }`, `backend "s3" { bucket = ... }` or
/// `backend "kubernetes" { namespace = ... }`.
pub const BACKEND: BlockSpec = BlockSpec {
    kind: "backend",
    labelled: true,
    attrs: &[
        computed_default("path", Ty::String, "`.xcsp/<stack>/state.json`", "`local`: the state file."),
        opt("bucket", Ty::String, "`s3`: the bucket."),
        computed_default("key", Ty::String, "`<stack>/state.json`", "`s3`: the object key."),
        opt("region", Ty::String, "`s3`: the bucket's region."),
        opt("endpoint", Ty::String, "`s3`: another S3 endpoint."),
        opt("server_side_encryption", Ty::String, "`s3`: server-side encryption to ask for."),
        computed_default(
            "encryption",
            Ty::String,
            "`optional`",
            "`enforced`: refuse state and plans that are not sealed.",
        ),
        opt("namespace", Ty::String, "`kubernetes`: the namespace of the state Secret and lock Lease."),
    ],
    blocks: &[],
    computed: &[],
    doc: "Where state lives: `local` (the default), `s3` or `kubernetes`. At most one.",
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

/// The spec reference of the guide (`docs/src/reference/spec-schema.md`), generated from this
/// schema: the blocks the decoder accepts, their attributes' types, whether each is required, its
/// default (the decoder's own, checked against this schema whenever it is taken) and what it is.
pub fn reference() -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# Spec reference\n\n\
         Generated from the schema the decoder checks every spec against (`plans/src/schema.rs`); do not\n\
         edit by hand. What the blocks mean together is in [The spec in detail](spec.md). A spec is one file, or\n\
         every `*.xcsp.hcl` file of a directory. Each block below can refer to another's attributes\n\
         (`network.link.tunnels`, `var.NAME`), the computed ones after apply.\n",
    );
    let _ = write!(out, "\n## Top level\n\n");
    attributes(&mut out, ROOT_ATTRS);
    for b in TOP_LEVEL {
        let form = if b.labelled { format!("{} \"NAME\" {{ ... }}", b.kind) } else { format!("{} {{ ... }}", b.kind) };
        let _ = write!(out, "\n## `{}`\n\n`{form}`: {}\n", b.kind, b.doc);
        block_body(&mut out, b, &[b.kind]);
    }
    out
}

fn block_body(out: &mut String, b: &BlockSpec, path: &[&str]) {
    use std::fmt::Write as _;
    if !b.attrs.is_empty() {
        out.push('\n');
        attributes(out, b.attrs);
    }
    if !b.computed.is_empty() {
        let names: Vec<String> = b.computed.iter().map(|c| format!("`{c}`")).collect();
        let _ = write!(out, "\nKnown after apply, for references: {}.\n", names.join(", "));
    }
    for inner in b.blocks {
        let mut p = path.to_vec();
        p.push(inner.kind);
        let _ = write!(
            out,
            "\n### `{}`\n\nA `{} {{ ... }}` block in `{}` (at most one): {}\n",
            p.join("."),
            inner.kind,
            path.join("."),
            inner.doc
        );
        block_body(out, inner, &p);
    }
}

fn attributes(out: &mut String, attrs: &[AttrSpec]) {
    use std::fmt::Write as _;
    out.push_str("| attribute | type | default | what it is |\n| --- | --- | --- | --- |\n");
    for a in attrs {
        let default = match (a.required, a.default) {
            (true, _) => "required".to_string(),
            (false, AttrDefault::Literal(d)) => format!("`{d}`"),
            (false, AttrDefault::Described(d)) => d.to_string(),
            (false, AttrDefault::None) => "none".to_string(),
        };
        let _ = writeln!(out, "| `{}` | {} | {default} | {} |", a.name, a.ty.describe(), a.doc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attribute_is_documented_and_its_cells_stay_short() {
        fn walk(b: &BlockSpec) {
            assert!(!b.doc.is_empty(), "{}", b.kind);
            for a in b.attrs {
                assert!(!a.doc.is_empty() && a.doc.len() <= 160, "{}.{}: {:?}", b.kind, a.name, a.doc);
                assert!(
                    !(a.required && a.default != AttrDefault::None),
                    "{}.{} required with a default",
                    b.kind,
                    a.name
                );
            }
            b.blocks.iter().for_each(walk);
        }
        TOP_LEVEL.iter().copied().for_each(walk);
    }

    #[test]
    fn the_described_inside_cidrs_are_the_topologys() {
        let a = NETWORK.attr("tunnel_inside_cidrs").unwrap();
        assert_eq!(
            a.default,
            AttrDefault::Described(Box::leak(crate::topology::DEFAULT_INSIDE_CIDRS.join(", ").into_boxed_str()))
        );
    }

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            suggest("vnet_cdir", NETWORK.attrs.iter().map(|a| a.name)).as_deref(),
            Some("did you mean `vnet_cidr`?")
        );
        assert_eq!(suggest("zzz", NETWORK.attrs.iter().map(|a| a.name)), None);
    }
}
