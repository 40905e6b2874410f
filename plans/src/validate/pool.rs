//! Rules on worker pools: identities, VM sizes and images, zones, labels and taints.

use xcsp_core::{Problem, Problems};

use super::err;
use crate::spec::*;
use crate::topology::machine_set_name;

/// One AzureCluster per network carries one identity reference, so its pools must agree.
pub(super) fn check_pool_identities(spec: &Spec, problems: &mut Problems) {
    for n in &spec.networks {
        let mut pools = spec.pools.iter().filter(|p| p.network.value == n.name.value);
        let Some(first) = pools.next() else { continue };
        for p in pools.filter(|p| p.identity.value != first.identity.value) {
            problems.push(
                err(
                    "xcsp::pool::identity",
                    format!("pools `{}` and `{}` share network `{}` but use different identities", first.name.value, p.name.value, n.name.value),
                    &p.identity.span,
                    "",
                )
                .label(&first.identity.span, "first pool's identity")
                .with_help("the network's AzureCluster references one AzureClusterIdentity; use the same workload_identity for its pools"),
            );
        }
    }
}

/// A pool's machine-config role, `<namespace>-<pool>`, names its MachineConfigPool and is the name
/// of its nodes' `node-role.kubernetes.io/<role>` label, whose name part Kubernetes limits to 63
/// characters of letters, digits, `-`, `_` and `.` (apimachinery `validation.IsQualifiedName`);
/// a pool's name must also be a DNS label, as the role is an object name.
pub(super) fn check_pool_roles(stack: &str, cluster: &Cluster, pools: &[Pool], problems: &mut Problems) {
    let ns = pool_namespace(stack, cluster);
    for p in pools {
        let name = &p.name.value;
        let label = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        let role = format!("{ns}-{name}");
        let why = if !label {
            "a pool's name becomes a Kubernetes object name: lowercase letters, digits and `-`".to_string()
        } else if role.len() > 63 {
            format!("its machine-config role `{role}` is {} characters long; a node label name allows 63", role.len())
        } else {
            continue;
        };
        problems.push(
            err("xcsp::pool::name", format!("the pool name `{name}` cannot be used"), &p.name.span, "")
                .with_help(format!("{why}; shorten the pool's label or set a shorter cluster.namespace")),
        );
    }
}

pub(super) fn check_pool(p: &Pool, problems: &mut Problems) {
    if p.replicas.value < 0 {
        problems.push(err("xcsp::pool::replicas", "replicas cannot be negative", &p.replicas.span, ""));
    }
    let settings = [
        ("max_unhealthy", p.max_unhealthy.as_ref()),
        ("node_startup_timeout_seconds", Some(&p.node_startup_timeout_seconds)),
        ("unhealthy_timeout_seconds", Some(&p.unhealthy_timeout_seconds)),
    ];
    for (name, v) in settings.into_iter().filter_map(|(n, v)| Some((n, v?))) {
        if v.value < 0 {
            problems.push(err("xcsp::pool::health_check", format!("`{name}` cannot be negative"), &v.span, ""));
        } else if !p.machine_health_check && v.span != p.span {
            problems.push(
                Problem::warning(
                    "xcsp::pool::health_check",
                    format!("`{name}` is set, but the pool has no health check"),
                )
                .label(&v.span, "")
                .with_help("set `machine_health_check = true`, or leave it out"),
            );
        }
    }
    // The API server takes a toleration's seconds as an int64 and the taint eviction controller
    // counts from the taint's time: zero or less evicts at once (kubernetes
    // `pkg/controller/tainteviction/taint_eviction.go` `getMinTolerationTime`).
    if p.outage_tolerance_seconds.value <= 0 {
        problems.push(err(
            "xcsp::pool::outage_tolerance",
            "`outage_tolerance_seconds` must be more than 0",
            &p.outage_tolerance_seconds.span,
            "",
        ));
    }
    if p.egress.value == Egress::DefaultOutbound {
        problems.push(
            Problem::warning(
                "xcsp::pool::egress",
                "the pool's VMs reach images through Azure's default outbound access: an address Microsoft owns and may change, which nothing of the stack shows or logs",
            )
            .label(&p.egress.span, "")
            .with_help(
                "Microsoft is retiring it (subnets of VNets made at network api-version 2025-07-01 or later are private; Microsoft Learn, \"Default outbound access in Azure\"), and regulated baselines ask for an explicit path: prefer egress = \"nat_gateway\", or \"link\" with the cluster's mirrors",
            ),
        );
    }
    if !p.vm_size.value.starts_with("Standard_") {
        problems.push(
            err("xcsp::pool::vm_size", format!("`{}` is not an Azure VM size", p.vm_size.value), &p.vm_size.span, "")
                .with_help("e.g. Standard_ND96asr_v4"),
        );
    }
    for z in &p.zones.value {
        if !["1", "2", "3"].contains(&z.as_str()) {
            problems.push(
                err("xcsp::pool::zones", format!("zone `{z}` does not exist"), &p.zones.span, "")
                    .with_help("Azure zones are \"1\", \"2\" and \"3\""),
            );
        }
    }
    check_generation(p, problems);
    for t in &p.taints.value {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str()) {
            problems.push(
                err("xcsp::pool::taint", format!("taint effect `{}` is not valid", t.effect), &p.taints.span, "")
                    .with_help("NoSchedule, PreferNoSchedule or NoExecute"),
            );
        }
    }
    if !(30..=4095).contains(&p.os_disk_size_gb.value) {
        problems.push(err(
            "xcsp::pool::os_disk",
            format!("OS disk of {} GB is outside 30-4095", p.os_disk_size_gb.value),
            &p.os_disk_size_gb.span,
            "",
        ));
    }
    for key in p.labels.value.keys() {
        let name = key.rsplit('/').next().unwrap_or("");
        let ok = !name.is_empty()
            && name.len() <= 63
            && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok {
            problems.push(err(
                "xcsp::pool::label",
                format!("`{key}` is not a valid Kubernetes label key"),
                &p.labels.span,
                "",
            ));
        }
    }
}

/// VM size series that run Generation 2 images only (Microsoft Learn, the series' pages under
/// virtual-machines/sizes/gpu-accelerated, "Feature support": Generation 1 VMs "Not supported").
/// Matched as prefixes of the size name, case-insensitively.
const GEN2_ONLY_SIZES: &[(&str, &str)] = &[
    ("standard_nd96asr_v4", "ND A100 v4"),
    ("standard_nd96amsr_a100_v4", "NDm A100 v4"),
    ("standard_nd96isr_h100_v5", "ND H100 v5"),
    ("standard_nc24ads_a100_v4", "NC A100 v4"),
    ("standard_nc48ads_a100_v4", "NC A100 v4"),
    ("standard_nc96ads_a100_v4", "NC A100 v4"),
    ("standard_nd40rs_v2", "NDv2"),
];

/// The Hyper-V generation of a marketplace image, where its SKU's naming says so: RHCOS in
/// `azureopenshift/aro4` is `aro_<XY>` for Generation 1 and `<XY>-v2` (or `<XY>-arm`) for
/// Generation 2 (openshift/enhancements `enhancements/rhcos/marketplace-images.md`); the paid
/// `redhat/rh-ocp-worker` offer has `rh-ocp-worker-gen1` and `rh-ocp-worker`. None when unknown.
fn image_generation(image: &Image) -> Option<u8> {
    let Image::Marketplace { publisher, offer, sku, .. } = image else { return None };
    match (publisher.to_ascii_lowercase().as_str(), offer.to_ascii_lowercase().as_str()) {
        ("azureopenshift", "aro4") if sku.starts_with("aro_") && !sku.ends_with("-v2") => Some(1),
        ("azureopenshift", "aro4") if sku.ends_with("-v2") || sku.ends_with("-arm") => Some(2),
        ("redhat", "rh-ocp-worker") if sku == "rh-ocp-worker-gen1" => Some(1),
        ("redhat", "rh-ocp-worker") if sku == "rh-ocp-worker" => Some(2),
        _ => None,
    }
}

/// A Generation 1 image on a size that runs Generation 2 only never boots (Azure refuses the
/// VM); refused when both are known.
fn check_generation(p: &Pool, problems: &mut Problems) {
    let size = p.vm_size.value.to_ascii_lowercase();
    let Some((_, series)) = GEN2_ONLY_SIZES.iter().find(|(prefix, _)| size.starts_with(prefix)) else { return };
    if image_generation(&p.image.value) != Some(1) {
        return;
    }
    let hint = match &p.image.value {
        Image::Marketplace { sku, .. } if sku.starts_with("aro_") => {
            format!("use the Generation 2 SKU `{}-v2`", sku.trim_start_matches("aro_"))
        }
        _ => "use the Generation 2 image of the same release".to_string(),
    };
    problems.push(
        err(
            "xcsp::pool::generation",
            format!("`{}` ({series}) runs Generation 2 images only, and this image is Generation 1", p.vm_size.value),
            &p.image.span,
            "a Generation 1 image",
        )
        .label(&p.vm_size.span, "Generation 2 only")
        .with_help(hint),
    );
}

/// A pool's zones place its machines (one MachineSet per zone, `topology::machine_sets`):
/// a region without zones refuses zonal VMs (`LocationNotSupportAvailabilityZones`), and each
/// MachineSet's name, `<infra>-<pool>-<location><zone>`, is also the `cluster.x-k8s.io/set-name`
/// label value of its machines, so at most 63 characters.
pub(super) fn check_zones(spec: &Spec, problems: &mut Problems) {
    let (Some(az), Some(cluster)) = (&spec.azure, &spec.cluster) else { return };
    let location = &az.location.value;
    for p in spec.pools.iter().filter(|p| !p.zones.value.is_empty()) {
        match crate::regions::has_zones(location) {
            Some(false) => problems.push(
                err("xcsp::pool::zones", format!("`{location}` has no availability zones"), &p.zones.span, "")
                    .label(&az.location.span, "location")
                    .with_help("leave `zones` out for a regional pool, or choose a region with zones (e.g. usgovvirginia, eastus)"),
            ),
            None => problems.push(
                Problem::warning("xcsp::pool::zones_unknown", format!("xcsp does not know whether `{location}` has availability zones"))
                    .label(&p.zones.span, "")
                    .with_help("Azure refuses zonal VMs in a region without zones; the link's public IPs are made regional there"),
            ),
            Some(true) => {}
        }
        let infra = &cluster.infrastructure_name.value;
        let name_len = p
            .zones
            .value
            .iter()
            .map(|z| machine_set_name(infra, &p.name.value, location, Some(z)).len())
            .max()
            .unwrap_or(0);
        if name_len > 63 {
            problems.push(
                err(
                    "xcsp::pool::name",
                    format!("the MachineSet names of pool `{}` would be {name_len} characters long; 63 at most", p.name.value),
                    &p.name.span,
                    "",
                )
                .with_help("the name `<infra>-<pool>-<location><zone>` is also its machines' `cluster.x-k8s.io/set-name` label value; shorten the pool's label"),
            );
        }
    }
}
