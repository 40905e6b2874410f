//! Every diagnostic code xcsp gives, with what it means and what to do about it. The guide's
//! diagnostics reference (`docs/src/reference/diagnostics.md`) is generated from this table, and
//! a test reads the product's sources and fails when a code given there is missing here, or one
//! here is given nowhere.

/// One code.
#[derive(Debug, Clone, Copy)]
pub struct Code {
    pub code: &'static str,
    /// `error`, `warning`, or `error or warning`.
    pub severity: &'static str,
    /// What is wrong, then what to do.
    pub meaning: &'static str,
}

const fn e(code: &'static str, meaning: &'static str) -> Code {
    Code { code, severity: "error", meaning }
}

const fn w(code: &'static str, meaning: &'static str) -> Code {
    Code { code, severity: "warning", meaning }
}

/// An error, or a warning where the check cannot be sure (the cluster out of reach, objects only
/// rendered) or the user chose to go on.
const fn ew(code: &'static str, meaning: &'static str) -> Code {
    Code { code, severity: "error or warning", meaning }
}

/// Every code, sorted.
pub const CODES: &[Code] = &[
    e(
        "xcsp::asn::range",
        "The AWS `asn` is not a private ASN, or a network's `azure_asn` is outside 1-4294967295: use 64512-65534 or 4200000000-4294967294 on AWS and a valid ASN",
    ),
    e(
        "xcsp::asn::reserved",
        "An ASN is reserved by IANA or Azure (65515 on the AWS side, say), or AWS refuses it as a customer gateway ASN in this region: choose another ASN",
    ),
    e(
        "xcsp::asn::same",
        "Both BGP peers of a network use the same ASN (the AWS `asn` equals `azure_asn`): give the two sides different ASNs",
    ),
    e(
        "xcsp::aws::one_vgw_per_vpc",
        "Two IPsec networks would attach VPN gateways to the same VPC: give each link its own `vpc_id`, or use a single link",
    ),
    w(
        "xcsp::aws::security_group_quota",
        "The IPsec links add more inbound rules per cluster security group than AWS's default quota of 60: raise that quota in the region before applying",
    ),
    e(
        "xcsp::azure::guid",
        "The Azure `subscription_id` or `tenant_id` is not a GUID: write it in the form 00000000-0000-0000-0000-000000000000",
    ),
    e(
        "xcsp::azure::image",
        "A pool's Marketplace image, or its pinned version, is not available in the Azure location: pick one the location lists, or import the RHCOS VHD with `vhd`",
    ),
    e(
        "xcsp::azure::image_id",
        "A pool's `image_id` names an image the subscription does not have (Azure answers 404): name an image version that exists, or import the release's RHCOS VHD with `vhd`",
    ),
    e(
        "xcsp::azure::quota",
        "The machines the plan adds would exceed a vCPU quota of the subscription in the location: get the quota raised, or lower the pools' `replicas`",
    ),
    e(
        "xcsp::azure::resource_group",
        "The Azure `resource_group` name is invalid: use 1-90 letters, digits, `-`, `_`, `.`, `(` or `)`, not ending in `.`",
    ),
    e(
        "xcsp::azure::vm_size",
        "A pool's `vm_size` is not offered to the subscription in the Azure location: choose an offered size or another location, or ask Azure support for access",
    ),
    e(
        "xcsp::azure::zone",
        "A pool's `vm_size` is not offered in one of its `zones` in this location: use zones where the size is offered (or drop `zones`), or change size or location",
    ),
    e("xcsp::backend::bucket", "An `s3` backend block has no `bucket`: add `bucket = \"...\"` to the backend block"),
    e("xcsp::backend::duplicate", "The spec has more than one `backend` block: keep only one"),
    e(
        "xcsp::backend::encryption",
        "The backend's `encryption` is not a known mode: set it to `enforced` or `optional`",
    ),
    e("xcsp::backend::kind", "The `backend` block names an unknown backend type: use `local`, `s3` or `kubernetes`"),
    e(
        "xcsp::backend::namespace",
        "A `kubernetes` backend block has no `namespace`: add one for the state Secret and lock Lease, apart from the pool's own namespace",
    ),
    e(
        "xcsp::cidr::gateway_subnet_size",
        "A network's `gateway_subnet` is smaller than /27: give the active-active VPN gateway's GatewaySubnet a /27 or larger range",
    ),
    e(
        "xcsp::cidr::outside_vnet",
        "The GatewaySubnet or a pool's `subnet_cidr` lies outside its network's `vnet_cidr`: pick a subnet range inside the VNet",
    ),
    e(
        "xcsp::cidr::overlap",
        "Address ranges overlap (machine, pod or service networks, VNets, or subnets in one VNet): choose ranges that do not overlap so routes stay unambiguous",
    ),
    e("xcsp::cidr::syntax", "A CIDR attribute is not a valid IPv4 network: write it as `a.b.c.d/len`"),
    e(
        "xcsp::cli::backwards",
        "The state file given to `xcsp state push` has another lineage or an older serial than the stack's: push a newer copy, or pass `--force` to override",
    ),
    e(
        "xcsp::cli::cancelled",
        "The confirmation prompt was answered with something other than `yes`, so nothing changed: run again and type `yes` to go ahead",
    ),
    e(
        "xcsp::cli::no_terminal",
        "A confirmation was needed but stdin is not a terminal: pass `--auto-approve` to proceed without being asked",
    ),
    e(
        "xcsp::cli::other_stack",
        "`xcsp state push` was given a state file of a different stack than the spec names: push that stack's own state; `--force` does not help",
    ),
    e(
        "xcsp::cli::unknown_code",
        "`xcsp explain` was given a code xcsp does not give: check its spelling against the codes of its area, which the error lists",
    ),
    e(
        "xcsp::cli::write",
        "xcsp could not create or write an output file or directory (a saved plan, rendered objects, a kubeconfig): check the path and its permissions",
    ),
    w(
        "xcsp::cloud::boundary",
        "An AWS GovCloud cluster is linked to public Azure: IL5 workloads usually need Azure Government, so consider `cloud = \"usgovernment\"`",
    ),
    e(
        "xcsp::cloud::endpoints",
        "A custom Azure cloud has no `endpoints` block, or `endpoints` is set for a built-in cloud: give `endpoints` only with `cloud = \"custom\"`",
    ),
    e(
        "xcsp::cloud::mismatch",
        "The Azure `location` and `cloud` disagree (a Government region with the public cloud, or the reverse): set `cloud` to match the `location`",
    ),
    e(
        "xcsp::cloud::region",
        "The AWS `region` does not look like an AWS region name: use a region such as us-gov-west-1 or us-east-1",
    ),
    ew(
        "xcsp::cluster::api_version",
        "The cluster serves none of the Cluster API or CAPZ versions xcsp writes: set `kubernetes_objects = \"render\"` and convert the objects, or use another cluster",
    ),
    w(
        "xcsp::cluster::ebs_csi",
        "The AWS EBS CSI node DaemonSet will run and keep failing on the pool's Azure nodes, stalling its rollouts: plan upgrades with its owner or scale the pool to 0",
    ),
    ew(
        "xcsp::cluster::ecr_mirror",
        "The cluster mirrors images only to Amazon ECR, which Azure VMs cannot pull from: add a non-ECR mirror the link reaches, or let the pool reach the source",
    ),
    ew(
        "xcsp::cluster::fips",
        "The spec's `fips` setting differs from the cluster's FIPS mode: set `fips = true` for a FIPS cluster, or remove it for a non-FIPS one",
    ),
    e(
        "xcsp::cluster::infrastructure_name",
        "The `infrastructure_name` is malformed or differs from the cluster's own: use the cluster's status.infrastructureName (lowercase letters, digits, `-`)",
    ),
    ew(
        "xcsp::cluster::kubeconfig",
        "The spec's `kubeconfig` or the KUBECONFIG variable names a path that is not a file: point it at the cluster's kubeconfig, or remove or unset it",
    ),
    ew(
        "xcsp::cluster::mtu",
        "The spec's `overlay_mtu` differs from the cluster's network MTU, or that MTU plus encapsulation overflows the pool's path: match it, or migrate the MTU down",
    ),
    e(
        "xcsp::cluster::namespace",
        "The cluster block's `namespace` is not a valid DNS label, or is `openshift-cluster-api`: leave it out or name a valid namespace of the pool's own",
    ),
    e(
        "xcsp::cluster::no_capi",
        "The cluster serves no Cluster API, so the pool's objects cannot be applied: name `core_components` and `azure_components` in `cluster_api` to have xcsp install it",
    ),
    ew(
        "xcsp::cluster::no_capz",
        "OpenShift's CAPZ does not run in the cluster, so nothing would build the pool's machines: name `azure_components` in `cluster_api`, or render with `xcsp render`",
    ),
    ew(
        "xcsp::cluster::no_kubeconfig",
        "No kubeconfig for the spec's cluster was found: set KUBECONFIG or `kubeconfig`, or set `kubernetes_objects = \"render\"` and use `xcsp render`",
    ),
    w(
        "xcsp::cluster::no_machine_approver",
        "No machine approver for Cluster API Machines runs, so new nodes' CSRs stay Pending: approve them with `oc adm certificate approve`, or use a cluster that runs one",
    ),
    w(
        "xcsp::cluster::not_openshift",
        "The cluster has no OpenShift Infrastructure object, so the infrastructure name and identity token are taken from the spec: make sure those spec values are right",
    ),
    ew(
        "xcsp::cluster::ovn_ipsec",
        "The spec's `ovn_ipsec` differs from whether the cluster runs OVN IPsec between nodes: set or remove `ovn_ipsec = true` to match the cluster",
    ),
    e(
        "xcsp::cluster::platform",
        "The cluster does not run on AWS, and xcsp only adds Azure workers to OpenShift clusters on AWS: use an OpenShift cluster on AWS",
    ),
    w(
        "xcsp::cluster::proxy",
        "The cluster-wide proxy's noProxy does not cover a network's VNet, so control-plane calls to pool kubelets go to the proxy: add the `vnet_cidr` to noProxy",
    ),
    e(
        "xcsp::cluster::ssh_public_key",
        "The cluster's `ssh_public_key` is missing while pools exist, or is not an ssh-rsa key of 2048 bits or more: set the cluster's own ssh-rsa public key",
    ),
    e(
        "xcsp::cluster_api::azure_components",
        "The spec names `azure_components` but the cluster has its own CAPZ, which `providers = \"auto\"` uses: remove `azure_components` or set `providers = \"xcsp\"`",
    ),
    e(
        "xcsp::cluster_api::components",
        "`providers = \"xcsp\"` lacks `core_components` or `azure_components`, or a components file cannot be read: name valid release manifests, or use \"auto\"",
    ),
    e(
        "xcsp::cluster_api::crd_owner",
        "A Cluster API CRD xcsp would install is owned by another manager: use the cluster's provider (`providers = \"auto\"` or `\"cluster\"`), or remove the other install",
    ),
    e(
        "xcsp::cluster_api::image",
        "`core_image` or `azure_image` is set without the matching `core_components` or `azure_components`: name the provider's release manifests as well",
    ),
    w(
        "xcsp::cluster_api::image_mirror",
        "The cluster pulls through mirror sets, but none of the right kind covers a provider image xcsp installs: mirror it and add a mirror set, or set the `*_image`",
    ),
    e(
        "xcsp::cluster_api::other_stack",
        "Cluster API CRDs on the cluster were installed by another xcsp stack: run this pool from that stack, or destroy that stack first",
    ),
    e(
        "xcsp::controller::client",
        "The controller cannot connect to the Kubernetes API: in a Pod check its service account, elsewhere check KUBECONFIG or ~/.kube/config",
    ),
    e(
        "xcsp::controller::lease_lost",
        "The controller lost its leader Lease (another replica took it or it could not be renewed in time): check API server reachability; it stops leading",
    ),
    e(
        "xcsp::controller::metrics",
        "The controller could not listen on the metrics address: choose another `--metrics-addr`, or port 0 for any free port",
    ),
    e(
        "xcsp::controller::no_crd",
        "The cluster does not serve XcspStack resources: install the CRD with `xcsp controller manifests | oc apply -f -` (or `xcsp controller crd`)",
    ),
    e(
        "xcsp::engine::beyond_plan",
        "An apply of a saved plan reached a step the approved plan did not show, as a dependency changed; it was skipped: run `xcsp plan` to review the change",
    ),
    e(
        "xcsp::engine::no_provider",
        "A resource needs a cloud provider that is not configured for this run, so it was not touched: configure that provider and run again",
    ),
    e(
        "xcsp::engine::panic",
        "The task carrying out a resource's operation stopped unexpectedly without an answer: see the detail given, run again, and report it if it recurs",
    ),
    e(
        "xcsp::engine::protected",
        "The step would delete or replace a resource the spec marks `prevent_destroy`: drop the protection or change the spec so it is not destroyed",
    ),
    e("xcsp::expr::division_by_zero", "An expression divides or takes a remainder by zero: change the divisor"),
    e(
        "xcsp::expr::function",
        "A function call is unknown, has the wrong number of arguments, or `cidrsubnet()` failed: call a supported function with valid arguments",
    ),
    e(
        "xcsp::expr::index",
        "An index is out of range, a map key is missing, or the value cannot be indexed with that kind of key: use a valid index or key",
    ),
    e(
        "xcsp::expr::no_attribute",
        "An expression reads an attribute that the map value does not have: use one of the attributes it has",
    ),
    e(
        "xcsp::expr::type",
        "An operator, function, template or traversal got a value of the wrong type: give a value of the expected type",
    ),
    e(
        "xcsp::expr::unknown_reference",
        "A reference names an undeclared variable, block or block attribute, or lacks a name: declare it or fix the reference",
    ),
    e(
        "xcsp::expr::unsupported",
        "The spec uses a `for` expression or a template directive, which xcsp does not support: write the values out, use a variable or a conditional",
    ),
    ew(
        "xcsp::fips::build",
        "The cluster runs in FIPS mode but this xcsp is not a FIPS build (warned at plan, refused at apply): use the FIPS build, or pass `--allow-non-fips-build`",
    ),
    e(
        "xcsp::fips::config",
        "A TLS client configuration could not be built, or is not FIPS-approved in a FIPS build: the latter is an xcsp defect, please report it",
    ),
    e(
        "xcsp::fips::module",
        "The FIPS crypto module failed its start-up self-tests and refused to run: the build or the machine is broken; reinstall or use another machine",
    ),
    e(
        "xcsp::fips::random",
        "The crypto module's random number generator failed (e.g. while making a key or salt): the machine or build is faulty; try again elsewhere",
    ),
    e(
        "xcsp::gateway::sku",
        "A network's `gateway_sku` is unknown, Basic, or a non-AZ VpnGw1-5 SKU: use an AZ SKU such as VpnGw1AZ or larger",
    ),
    e(
        "xcsp::graph::cycle",
        "Blocks or resources depend on each other in a cycle: break it so that one of the values no longer depends on the others",
    ),
    e(
        "xcsp::graph::dangling",
        "A resource depends on an address that is not in the resource graph: fix or remove the reference in the spec",
    ),
    e(
        "xcsp::graph::duplicate",
        "Two resources in the spec share the same address: rename one so every address is unique",
    ),
    e(
        "xcsp::graph::invalid",
        "The resources built from the spec do not form a valid dependency graph (a cycle, a dangling dependency or a duplicate address): see the resources named",
    ),
    e(
        "xcsp::identity::audience",
        "A workload identity's audience does not match that of CAPZ's projected token, so Entra would refuse it: remove `audience` to take the token's",
    ),
    ew(
        "xcsp::identity::authority",
        "OpenShift's CAPZ asks another Entra authority than the spec's Azure cloud uses: set AZURE_AUTHORITY_HOST on CAPZ's manager to the cloud's authority",
    ),
    e(
        "xcsp::identity::issuer",
        "A workload identity's issuer differs from the cluster's service-account issuer: set it to the cluster's (an internal-only issuer cannot work with Entra)",
    ),
    e(
        "xcsp::identity::subject",
        "A workload identity's service account is not the one CAPZ's token presents: remove `namespace` and `service_account`, or set them to CAPZ's",
    ),
    e(
        "xcsp::ipsec::dpd",
        "The IPsec `dpd_timeout_seconds` is outside 30-3600: pick a value both AWS (at least 30) and Azure (at most 3600) accept",
    ),
    e(
        "xcsp::ipsec::fips",
        "A network uses DH or PFS group 2 on a FIPS cluster, which FIPS disallows: use group 20, 19 or 14",
    ),
    e(
        "xcsp::ipsec::lifetime",
        "An IPsec lifetime is out of range (IKE 900-28800 s, SA 900-3600 s), or the SA lifetime is not below the IKE one: adjust the lifetimes",
    ),
    e(
        "xcsp::ipsec::policy",
        "An IPsec policy value is not accepted by both clouds (IKE version, cipher, integrity, DH or PFS group, or sha384 with CBC): choose one both accept",
    ),
    e(
        "xcsp::ipsec::rekey",
        "The IPsec `rekey_margin_seconds` is outside 60 s to half the SA lifetime: set it within that range",
    ),
    e(
        "xcsp::mtu::overlay",
        "The cluster's `overlay_mtu` plus Geneve's 100 bytes exceeds an IPsec network's `tunnel_mtu`: lower the cluster network MTU before adding cross-cloud workers",
    ),
    e(
        "xcsp::mtu::tunnel",
        "A network's `tunnel_mtu` is outside 576-1446: set a value AWS Site-to-Site VPN can carry (Azure recommends 1400)",
    ),
    e(
        "xcsp::network::routing",
        "A network sets static routing, which xcsp does not support: use `routing = \"bgp\"` (the default)",
    ),
    e(
        "xcsp::oidc::issuer_mismatch",
        "The issuer in the OIDC discovery document differs from the spec's issuer: use exactly the document's `issuer`, without a trailing slash",
    ),
    e(
        "xcsp::oidc::jwks",
        "The issuer's signing keys are not listed, cannot be fetched, or lack the cluster's current key: publish the cluster's keys publicly at the `jwks_uri`",
    ),
    w(
        "xcsp::oidc::unreachable",
        "An OIDC issuer's discovery document could not be fetched, so it was not checked: make the issuer serve it publicly (`--offline` skips the check)",
    ),
    e(
        "xcsp::plan::stale",
        "The saved plan no longer fits: the spec, its variables or the state changed since it was made: run `xcsp plan --out FILE` again and apply that",
    ),
    e(
        "xcsp::pool::boot_image",
        "A pool boots a Marketplace SKU other than the boot image the cluster's release publishes: use the cluster's own image block shown in the help",
    ),
    w(
        "xcsp::pool::boot_image_version",
        "A pool pins an image version, or imports a VHD, other than what the cluster's release publishes: consider booting the cluster's own image",
    ),
    ew(
        "xcsp::pool::egress",
        "A pool's `egress` is unknown, is Azure default outbound (a warning), or is `link` with no usable release mirror: use `nat_gateway` or mirror the release in the VPC",
    ),
    e(
        "xcsp::pool::generation",
        "A pool's `vm_size` runs only Generation 2 images but its image is Generation 1: use the Generation 2 image of the same release",
    ),
    ew(
        "xcsp::pool::health_check",
        "A health-check setting is negative (error), or set while `machine_health_check` is off (warning): use values of 0 or more and enable the check, or drop them",
    ),
    e(
        "xcsp::pool::identity",
        "Pools sharing a network use different workload identities: give all pools of one network the same `identity`",
    ),
    e(
        "xcsp::pool::image",
        "A pool's image is missing, set both by `image_id` and an `image` block, or the block mixes `vhd` with Marketplace fields or lacks some: set one complete image",
    ),
    e(
        "xcsp::pool::label",
        "A pool label key is not a valid Kubernetes label key: use 1-63 letters, digits, `-`, `_` and `.` in its name part",
    ),
    e(
        "xcsp::pool::name",
        "A pool's name is not a lowercase DNS label, or the role or MachineSet names built from it pass 63 characters: fix or shorten the pool's name",
    ),
    e("xcsp::pool::os_disk", "A pool's OS disk `size_gb` is outside 30-4095: choose a size in that range"),
    e("xcsp::pool::outage_tolerance", "A pool's `outage_tolerance_seconds` is 0 or less: set it above 0"),
    e("xcsp::pool::replicas", "A pool's `replicas` is negative: set 0 or more"),
    e(
        "xcsp::pool::taint",
        "A taint has an unknown field, lacks `key` or `effect`, or has an invalid effect: write { key, value, effect } with NoSchedule, PreferNoSchedule or NoExecute",
    ),
    e(
        "xcsp::pool::vhd",
        "A pool image's `vhd` is not an https RHCOS azure VHD URL: use the release's URL from the coreos-bootimages ConfigMap (`xcsp preflight` shows it)",
    ),
    e(
        "xcsp::pool::vm_size",
        "A pool's `vm_size` does not start with `Standard_`: give an Azure VM size such as Standard_ND96asr_v4",
    ),
    e(
        "xcsp::pool::zones",
        "A pool lists a zone other than \"1\", \"2\" or \"3\", or the Azure location has no availability zones: fix the zones or leave `zones` out",
    ),
    w(
        "xcsp::pool::zones_unknown",
        "xcsp does not know whether the Azure location has availability zones: make sure it has before setting `zones`, as Azure refuses zonal VMs otherwise",
    ),
    e(
        "xcsp::provider::failed",
        "The cloud API rejected or failed an operation on a resource with its own error code: read the cloud's message and fix the cause",
    ),
    e(
        "xcsp::provider::in_use",
        "The cloud refused to change or delete a resource because something still depends on it: destroy retries once the dependents are gone",
    ),
    e(
        "xcsp::provider::not_found",
        "The cloud reports the resource does not exist (it may have been removed outside xcsp): check the cloud, then plan and apply again",
    ),
    e(
        "xcsp::provider::throttled",
        "The cloud kept throttling a request until xcsp's retry deadline ran out: wait a while and run the command again",
    ),
    e(
        "xcsp::provider::timeout",
        "A cloud operation did not finish within its timeout: raise that resource type's timeout, or run `xcsp apply` again to resume waiting",
    ),
    e(
        "xcsp::psk::count",
        "A network's `preshared_keys` count differs from the link's tunnel count: give one key per tunnel, or leave `preshared_keys` out to have them generated",
    ),
    e(
        "xcsp::psk::format",
        "A pre-shared key is not 8-64 letters, digits, `.` or `_`, or starts with `0`: use a key both clouds accept",
    ),
    e(
        "xcsp::psk::rotation_days",
        "`psk_rotation_days` is outside 1-3650, or is set while the network gives its own `preshared_keys`: fix the value, or drop one of the two",
    ),
    e("xcsp::spec::duplicate_attribute", "An attribute is set twice in one block: keep a single assignment"),
    e(
        "xcsp::spec::duplicate_block",
        "A block is declared twice (same name, a second singleton block, or a repeated nested block): remove or rename the duplicate",
    ),
    e(
        "xcsp::spec::empty",
        "The directory holds no `*.xcsp.hcl` files: name spec files like `pool.xcsp.hcl`, or pass one spec file",
    ),
    e(
        "xcsp::spec::enum",
        "An attribute's value is not one of its allowed options: use one of the values the help lists",
    ),
    e(
        "xcsp::spec::file",
        "The spec path is not a usable spec file (a directory, a FIFO/socket/device, or over 4 MiB): pass a regular spec file or a directory of them",
    ),
    e("xcsp::spec::io", "A spec file or directory could not be read: check that the path exists and is readable"),
    e(
        "xcsp::spec::labels",
        "A block has the wrong number of names (a named kind takes exactly one, others none): write `kind \"NAME\" { ... }` or `kind { ... }`",
    ),
    e(
        "xcsp::spec::missing_attribute",
        "A required attribute is missing (e.g. a network's `gateway_subnet`, or which `network` or `identity` a pool uses): add it",
    ),
    e(
        "xcsp::spec::missing_block",
        "The spec has no `cluster`, `aws` or `azure` block: add the missing block, as every spec needs all three",
    ),
    e(
        "xcsp::spec::name",
        "A block's name is invalid: start it with a letter and use only letters, digits, `_` and `-`",
    ),
    e(
        "xcsp::spec::reference",
        "An attribute that must reference a block of some kind holds something else: write `kind.NAME`",
    ),
    e(
        "xcsp::spec::syntax",
        "A spec file is not valid HCL, so nothing else in it was checked: fix the syntax at the marked place",
    ),
    e(
        "xcsp::spec::type",
        "An attribute's value has the wrong type (e.g. `stack` not a literal string, a number that is not whole): give a value of the expected type",
    ),
    e(
        "xcsp::spec::unknown_at_plan",
        "An attribute that must be known at plan time depends on a value known only after apply: use a literal or a variable",
    ),
    e(
        "xcsp::spec::unknown_attribute",
        "An attribute is not known at the top level or in this block: remove it or use a name the block takes (the help suggests one)",
    ),
    e(
        "xcsp::spec::unknown_block",
        "A block, top-level or nested, is of an unknown kind: remove it or use a block kind the schema accepts",
    ),
    e(
        "xcsp::stack::address",
        "A resource address given (e.g. to `--replace` or `xcsp state`) does not parse: write it as TYPE.NAME or TYPE.NAME[N] with a known resource type",
    ),
    e("xcsp::stack::backend", "The backend kind is unknown: use `local`, `s3` or `kubernetes`"),
    e(
        "xcsp::stack::backend_config",
        "A `--backend-config` value is not KEY=VALUE with a known key: use one of the keys the message lists",
    ),
    e(
        "xcsp::stack::capacity",
        "The Azure capacity check (quotas, VM sizes, images for new pools) found errors: fix the problems listed with it, then run again",
    ),
    e(
        "xcsp::stack::cluster",
        "The cluster preflight check found errors (listed with it): fix them in the cluster or the spec, then run again",
    ),
    e("xcsp::stack::encryption_mode", "The state encryption mode is unknown: set it to `enforced` or `optional`"),
    e(
        "xcsp::stack::events",
        "The file given to `xcsp timeline` is not the JSON-lines event output of `--json`: pass a file recorded with `--json`",
    ),
    e(
        "xcsp::stack::issuer",
        "The OIDC issuer check found errors (listed with it): fix the issuer's discovery document or keys, then run again",
    ),
    e(
        "xcsp::stack::kubeconfig",
        "The cluster could not be read with the kubeconfig that was found: check the kubeconfig named in the message and that the cluster is reachable",
    ),
    e(
        "xcsp::stack::name",
        "The stack name cannot be a Kubernetes label value or Azure name, or makes an Azure name too long: use letters, digits, `-` and `_`, and shorten it",
    ),
    e(
        "xcsp::stack::no_bucket",
        "The `s3` backend has no bucket: set `bucket` in the backend block, XCSP_BACKEND_BUCKET, or `--backend-config bucket=NAME`",
    ),
    e(
        "xcsp::stack::no_keys",
        "No generated pre-shared key is recorded to rotate: run `xcsp apply` first; keys set in the spec are rotated by editing `pre_shared_keys`",
    ),
    e(
        "xcsp::stack::no_namespace",
        "The `kubernetes` backend has no namespace: set `namespace` in the backend block, XCSP_BACKEND_NAMESPACE, or `--backend-config namespace=NAME`",
    ),
    e(
        "xcsp::stack::not_a_plan",
        "The file given to `xcsp apply --plan` is not a saved plan: pass a file written by `xcsp plan --out`",
    ),
    e(
        "xcsp::stack::not_approved",
        "The change was not approved, so nothing changed (e.g. `xcsp watch` without `--auto-approve`, or a controller plan not yet approved): approve it",
    ),
    e("xcsp::stack::not_in_spec", "A `--replace` address names no resource in the spec: check it against `xcsp graph`"),
    e(
        "xcsp::stack::not_in_state",
        "The address names a resource that state does not record: check it against `xcsp state list`",
    ),
    e(
        "xcsp::stack::pending",
        "Key rotation refused because the stack has other changes pending: run `xcsp apply` first, then `xcsp rotate-keys`",
    ),
    e(
        "xcsp::stack::read",
        "xcsp cannot read a file it was given (a saved plan, an events file, a state key file, a state file to push): check the path and its permissions",
    ),
    e(
        "xcsp::stack::remaining",
        "After destroy, resources tagged with the stack still exist in the cloud: see the failures above, fix them, and destroy again",
    ),
    e(
        "xcsp::stack::render",
        "A Kubernetes object of the spec could not be rendered by `xcsp render`: fix the resource named in the message",
    ),
    e(
        "xcsp::stack::rotation",
        "A key rotation stopped partway (interrupted, or a tunnel did not come back up): once the tunnel is up (`xcsp status`), run `xcsp rotate-keys` to resume",
    ),
    e(
        "xcsp::stack::rotation_under_way",
        "A rotation covering other links is unfinished, so one link cannot be rotated: run `xcsp rotate-keys` without `--link` first, then that link",
    ),
    e(
        "xcsp::state::conflict",
        "State changed since it was read (another run wrote it without the lock), so nothing was overwritten: check `xcsp state list` and run again",
    ),
    e(
        "xcsp::state::corrupt",
        "The state file cannot be parsed: restore the `.backup` copy next to it, or repair it by hand",
    ),
    e("xcsp::state::io", "The local state file or its lock could not be accessed: check the path and its permissions"),
    e(
        "xcsp::state::key",
        "The state encryption key is unusable (bad base64, wrong length, bad key file): set XCSP_STATE_KEY (base64 of 32 bytes) or XCSP_STATE_PASSPHRASE",
    ),
    e(
        "xcsp::state::key_sources",
        "More than one of XCSP_STATE_KEY, XCSP_STATE_KEY_FILE and XCSP_STATE_PASSPHRASE is set: unset all but the one holding the key",
    ),
    e(
        "xcsp::state::lock_mismatch",
        "The lock id given to `xcsp force-unlock` is not the one held now: make sure the current holder is dead, then unlock with its id",
    ),
    e(
        "xcsp::state::locked",
        "The state is locked by another command: wait for it to finish, or if its holder died run `xcsp force-unlock <id>`",
    ),
    e("xcsp::state::not_locked", "`xcsp force-unlock` was run but the state holds no lock: nothing to unlock"),
    e(
        "xcsp::state::not_s3",
        "The S3 backend's endpoint answered with something that is not S3: point `endpoint` at an S3 API, which xcsp addresses path-style",
    ),
    w(
        "xcsp::state::plaintext_versions",
        "State is now encrypted but the versioned bucket keeps older plaintext copies: delete old versions with `aws s3api delete-object` or expire them by lifecycle rule",
    ),
    e(
        "xcsp::state::remote",
        "A call to the remote state backend (S3 bucket or Kubernetes) failed: check the location, credentials and reachability named in the message",
    ),
    e("xcsp::state::too_new", "The state was written in a newer format than this xcsp understands: upgrade xcsp"),
    e("xcsp::tags::count", "A cloud's tags plus the 2 xcsp adds exceed 50 per resource: keep at most 48 tags"),
    e(
        "xcsp::tags::invalid",
        "A tag uses a key reserved by xcsp or the cloud, a refused character, or a bad length: rename or shorten the tag",
    ),
    e(
        "xcsp::tunnel::apipa",
        "With BGP, a tunnel inside CIDR lies outside Azure's APIPA range for custom BGP addresses: pick /30s inside that range",
    ),
    e(
        "xcsp::tunnel::count",
        "The number of `tunnel_inside_cidrs` differs from the link's tunnel count: give one /30 per tunnel, or leave it out so xcsp allocates them",
    ),
    e("xcsp::tunnel::duplicate", "Two tunnels' inside CIDRs overlap: give each tunnel its own /30"),
    e(
        "xcsp::tunnel::inside_cidr",
        "A tunnel inside CIDR is not a /30, is outside 169.254.0.0/16, or is one AWS reserves: choose another link-local /30",
    ),
    e(
        "xcsp::url::https",
        "The cluster's `api_url` or an OIDC issuer is not an https:// URL: use a public https:// URL",
    ),
    w(
        "xcsp::url::trailing_slash",
        "An OIDC issuer ends with `/`: make it equal the cluster's serviceAccountIssuer exactly, since Entra refuses any difference",
    ),
    e(
        "xcsp::var::file",
        "A `--var-file` cannot be read, or holds blocks instead of `name = value` lines: fix the path or keep only assignments",
    ),
    e("xcsp::var::flag", "A `--var` flag is not of the form NAME=VALUE: write `--var name=value`"),
    e(
        "xcsp::var::missing",
        "A variable without a default got no value: pass `-var`, a `--var-file`, or set XCSP_VAR_<name>",
    ),
    e(
        "xcsp::var::syntax",
        "A value from `--var` or XCSP_VAR_<name> for a non-string variable does not parse: write a valid HCL value",
    ),
    e("xcsp::var::type", "A variable's value or default does not match its declared `type`: give a value of that type"),
    e(
        "xcsp::var::type_expr",
        "A variable's `type` is not recognised: use string, number, bool, list(...), map(...) or any",
    ),
    e(
        "xcsp::var::undeclared",
        "A `--var` flag or var file sets a variable that no `variable` block declares: declare it or fix the name",
    ),
];

/// The page of the guide: the codes by area, each a heading of its own (so a reader can be sent
/// to `diagnostics.md#xcsppoolegress`).
pub fn reference() -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# Diagnostics\n\n\
         Every problem xcsp reports carries a stable code. This page is generated from the table in\n\
         `core/src/codes.rs`; do not edit it by hand. Errors stop the command; warnings are shown and\n\
         the command goes on. What `xcsp status` reports is in [Troubleshooting](../troubleshooting.md).\n",
    );
    let mut area = "";
    for c in CODES {
        let this = c.code.split("::").nth(1).unwrap_or_default();
        if this != area {
            area = this;
            let _ = write!(out, "\n## {area}\n");
        }
        let _ = write!(out, "\n### `{}`\n\n{} ({}).\n", c.code, c.meaning, c.severity);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::*;

    /// The crates of the product (not the local world, not the tests).
    const PRODUCT: &[&str] = &[
        "core",
        "crypto",
        "plans",
        "state",
        "engine",
        "providers/aws",
        "providers/azure",
        "providers/kube",
        "providers/local",
        "stack",
        "cli",
        "controller",
    ];

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// The codes the sources give: string literals of a code, and codes in miette's `code(...)`.
    fn given() -> BTreeSet<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("core/ sits in the checkout");
        let mut files = Vec::new();
        for c in PRODUCT {
            sources(&root.join(c).join("src"), &mut files);
        }
        let mut out = BTreeSet::new();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (start, _) in text.match_indices("xcsp::") {
                let before = &text[..start];
                if !(before.ends_with('"') || before.ends_with("code(")) {
                    continue;
                }
                let code: String = text[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':')
                    .collect();
                let code = code.trim_end_matches(':').to_string();
                let closed = text[start + code.len()..].starts_with(['"', ')']);
                if code.matches("::").count() >= 2 && closed {
                    out.insert(code);
                }
            }
        }
        out
    }

    #[test]
    fn every_code_given_is_documented_and_every_documented_code_is_given() {
        let given = given();
        let documented: BTreeSet<String> = CODES.iter().map(|c| c.code.to_string()).collect();
        let missing: Vec<&String> = given.difference(&documented).collect();
        let stale: Vec<&String> = documented.difference(&given).collect();
        assert!(
            missing.is_empty(),
            "codes the sources give that CODES (core/src/codes.rs) does not document: {missing:?}"
        );
        assert!(stale.is_empty(), "codes documented that no source gives: {stale:?}");
        assert!(given.len() > 150, "the scan finds the codes: {}", given.len());
    }

    #[test]
    fn the_table_is_sorted_once_and_short() {
        for pair in CODES.windows(2) {
            assert!(pair[0].code < pair[1].code, "{} before {}", pair[0].code, pair[1].code);
        }
        for c in CODES {
            assert!(c.meaning.len() <= 200 && !c.meaning.ends_with('.'), "{}: {:?}", c.code, c.meaning);
        }
    }
}
