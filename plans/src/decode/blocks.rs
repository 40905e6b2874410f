//! Each block kind's decoder: evaluated fields to the typed spec, with the defaults.

use xcsp_core::{Problem, Problems, Span, Value};

use super::fields::{Fields, cidr_at, evaluate_block};
use super::{Env, VarInputs};
use crate::eval::Scope;
use crate::schema;
use crate::spec::*;
use crate::syntax::RawBlock;

/// The referenceable blocks, decoded (those that could be).
pub(super) struct Decoded {
    pub(super) cluster: Option<Cluster>,
    pub(super) aws: Option<Aws>,
    pub(super) azure: Option<Azure>,
    pub(super) networks: Vec<Network>,
    pub(super) identities: Vec<Identity>,
    pub(super) pools: Vec<Pool>,
}

/// Decodes `entities` in `order`, each block seeing in `env` the exports of those decoded before
/// it; its own exports (with the computed ones `inputs` knows from state) go into `env` after it.
pub(super) fn decode_in_order(
    entities: &[&RawBlock],
    order: &[usize],
    env: &mut Env,
    inputs: &VarInputs,
    problems: &mut Problems,
) -> Decoded {
    let mut cluster = None;
    let mut aws = None;
    let mut azure = None;
    let mut networks = Vec::new();
    let mut identities = Vec::new();
    let mut pools = Vec::new();
    let network_names = env.block_names("network");
    let identity_names = env.block_names("workload_identity");
    for &i in order {
        let b = entities[i];
        let spec = schema::top_level(&b.kind).expect("entities are known kinds");
        let fields = evaluate_block(b, spec, env, problems);
        let exports = match b.kind.as_str() {
            "cluster" => {
                cluster = decode_cluster(&fields, problems);
                fields.exports(spec)
            }
            "aws" => {
                aws = decode_aws(&fields, problems);
                let mut e = fields.exports(spec);
                if let Some(a) = &aws {
                    e.insert("partition".into(), Value::string(a.partition()));
                    e.entry("asn".into()).or_insert(Value::int(a.asn.value));
                }
                e
            }
            "azure" => {
                azure = decode_azure(&fields, problems);
                fields.exports(spec)
            }
            "network" => {
                if let Some(n) = decode_network(&fields, problems) {
                    networks.push(n);
                }
                fields.exports(spec)
            }
            "workload_identity" => {
                let mut e = fields.exports(spec);
                if let Some(id) = decode_identity(&fields, cluster.as_ref(), azure.as_ref(), problems) {
                    e.insert("issuer".into(), Value::string(&id.issuer.value));
                    e.insert("audience".into(), Value::string(&id.audience.value));
                    e.insert("subject".into(), Value::string(id.subject()));
                    identities.push(id);
                }
                e
            }
            "worker_pool" => {
                if let Some(p) = decode_pool(&fields, &network_names, &identity_names, problems) {
                    pools.push(p);
                }
                fields.exports(spec)
            }
            other => unreachable!("{other} is not referenceable"),
        };
        let name = b.labels.first().map(|l| l.0.clone());
        let mut exports = exports;
        for c in spec.computed {
            if let Some(v) = inputs.computed.get(&crate::served::key(&b.kind, name.as_deref(), c)) {
                exports.insert(c.to_string(), v.clone());
            }
        }
        env.blocks.insert((b.kind.clone(), name), exports);
    }
    Decoded { cluster, aws, azure, networks, identities, pools }
}

/// The `output` blocks.
pub(super) fn decode_outputs(blocks: &[&RawBlock], env: &Env, problems: &mut Problems) -> Vec<Output> {
    let mut outputs = Vec::new();
    for b in blocks {
        let fields = evaluate_block(b, &schema::OUTPUT, env, problems);
        if let Some((value, _)) = fields.attrs.get("value") {
            outputs.push(Output {
                name: b.labels[0].0.clone(),
                value: value.clone(),
                sensitive: fields.bool_or("sensitive", false, problems),
                description: fields.get_string("description", problems).map(|s| s.value),
            });
        }
    }
    outputs
}

/// The `backend` block (a second one is refused).
pub(super) fn decode_backend(blocks: &[&RawBlock], env: &Env, problems: &mut Problems) -> Option<Backend> {
    let mut backend = None;
    for (i, b) in blocks.iter().enumerate() {
        let fields = evaluate_block(b, &schema::BACKEND, env, problems);
        let (kind, span) = b.labels[0].clone();
        if i > 0 {
            problems.push(
                Problem::error("xcsp::backend::duplicate", "a stack has one state backend")
                    .label(&b.head_span(), "a second `backend` block")
                    .with_help("keep one `backend` block"),
            );
            continue;
        }
        if !["local", "s3", "kubernetes"].contains(&kind.as_str()) {
            problems.push(
                Problem::error("xcsp::backend::kind", format!("unknown backend `{kind}`"))
                    .label(&span, "")
                    .with_help("backends are `local`, `s3` and `kubernetes`"),
            );
            continue;
        }
        let get = |k: &str, problems: &mut Problems| fields.get_string(k, problems).map(|s| s.value);
        let decoded = Backend {
            path: get("path", problems),
            bucket: get("bucket", problems),
            key: get("key", problems),
            region: get("region", problems),
            endpoint: get("endpoint", problems),
            server_side_encryption: get("server_side_encryption", problems),
            encryption: get("encryption", problems),
            namespace: get("namespace", problems),
            kind,
        };
        if let Some(e) = decoded.encryption.as_deref().filter(|e| !["enforced", "optional"].contains(e)) {
            problems.push(
                Problem::error("xcsp::backend::encryption", format!("unknown encryption mode `{e}`"))
                    .label(&b.head_span(), "")
                    .with_help("`enforced` (plaintext state and plans are refused) or `optional` (the default)"),
            );
        }
        if decoded.kind == "s3" && decoded.bucket.is_none() {
            problems.push(
                Problem::error("xcsp::backend::bucket", "an `s3` backend needs `bucket`")
                    .label(&b.head_span(), "")
                    .with_help("add `bucket = \"...\"` (the key defaults to `<stack>/state.json`)"),
            );
        }
        if decoded.kind == "kubernetes" && decoded.namespace.is_none() {
            problems.push(
                Problem::error("xcsp::backend::namespace", "a `kubernetes` backend needs `namespace`")
                    .label(&b.head_span(), "")
                    .with_help("add `namespace = \"...\"`: the state's Secret and the lock's Lease go there (not the pool's own namespace, which destroy deletes)"),
            );
        }
        backend = Some(decoded);
    }
    backend
}

fn decode_cluster(f: &Fields, problems: &mut Problems) -> Option<Cluster> {
    Some(Cluster {
        infrastructure_name: f.get_string("infrastructure_name", problems)?,
        api_url: f.get_string("api_url", problems)?,
        oidc_issuer_url: f.get_string("oidc_issuer_url", problems)?,
        machine_network: f.cidr("machine_network", problems)?,
        cluster_network: f.cidr_or("cluster_network", "10.128.0.0/14", problems)?,
        service_network: f.cidr_or("service_network", "172.30.0.0/16", problems)?,
        overlay_mtu: f.get_number("overlay_mtu", problems)?,
        fips: f.spanned_bool_or("fips", false, problems),
        ovn_ipsec: f.spanned_bool_or("ovn_ipsec", false, problems),
        kubeconfig: f.get_string("kubeconfig", problems),
        kube_context: f.get_string("kube_context", problems),
        kubernetes_objects: f.choice(
            "kubernetes_objects",
            &[("apply", KubernetesObjects::Apply), ("render", KubernetesObjects::Render)],
            KubernetesObjects::Apply,
            problems,
        ),
        namespace: f.get_string("namespace", problems),
        ssh_public_key: f.get_string("ssh_public_key", problems),
        cluster_api: decode_cluster_api(f, problems),
        span: f.head(),
    })
}

fn decode_cluster_api(f: &Fields, problems: &mut Problems) -> ClusterApi {
    let Some(c) = f.nested("cluster_api") else {
        return ClusterApi { providers: Sp::new(ProvidersMode::Auto, f.head()), core: None, azure: None };
    };
    let source = |prefix: &str, problems: &mut Problems| {
        let components = c.get_string(&format!("{prefix}_components"), problems);
        let image = c.get_string(&format!("{prefix}_image"), problems);
        if components.is_none()
            && let Some(i) = &image
        {
            problems.push(
                Problem::error("xcsp::cluster_api::image", format!("`{prefix}_image` without `{prefix}_components`"))
                    .label(&i.span, "the image of which components?")
                    .with_help(format!("name the provider's release manifests in `{prefix}_components`")),
            );
        }
        components.map(|components| ProviderSource { components, image, read: None })
    };
    ClusterApi {
        providers: c.choice(
            "providers",
            &[("auto", ProvidersMode::Auto), ("cluster", ProvidersMode::Cluster), ("xcsp", ProvidersMode::Xcsp)],
            ProvidersMode::Auto,
            problems,
        ),
        core: source("core", problems),
        azure: source("azure", problems),
    }
}

fn decode_aws(f: &Fields, problems: &mut Problems) -> Option<Aws> {
    Some(Aws {
        region: f.get_string("region", problems)?,
        vpc_id: f.get_string("vpc_id", problems),
        route_table_ids: f.strings("route_table_ids", problems),
        security_group_ids: f.strings("security_group_ids", problems),
        asn: f.number_or("asn", 64512, problems),
        fips: f.bool_or("fips", false, problems),
        tags: f.tags(),
        span: f.head(),
    })
}

fn decode_azure(f: &Fields, problems: &mut Problems) -> Option<Azure> {
    let cloud = f.choice(
        "cloud",
        &[("public", AzureCloud::Public), ("usgovernment", AzureCloud::UsGovernment), ("custom", AzureCloud::Custom)],
        AzureCloud::Public,
        problems,
    );
    let endpoints = f.nested("endpoints").and_then(|e| {
        Some(Endpoints {
            resource_manager: e.get_string("resource_manager", problems)?,
            authority: e.get_string("authority", problems)?,
        })
    });
    Some(Azure {
        cloud,
        endpoints,
        subscription_id: f.get_string("subscription_id", problems)?,
        tenant_id: f.get_string("tenant_id", problems)?,
        location: f.get_string("location", problems)?,
        resource_group: f.get_string("resource_group", problems)?,
        tags: f.tags(),
        span: f.head(),
    })
}

fn decode_network(f: &Fields, problems: &mut Problems) -> Option<Network> {
    let policy = f.nested("ipsec_policy");
    let policy_spec = schema::NETWORK.block("ipsec_policy").expect("the schema has ipsec_policy");
    let p_str = |name: &str, default: &str, problems: &mut Problems| match policy {
        Some(p) => p.string_or(name, default, problems),
        None => {
            super::fields::check_default(policy_spec, name, default);
            Sp::new(default.to_string(), f.head())
        }
    };
    let p_num = |name: &str, default: i64, problems: &mut Problems| match policy {
        Some(p) => p.number_or(name, default, problems),
        None => {
            super::fields::check_default(policy_spec, name, &default.to_string());
            Sp::new(default, f.head())
        }
    };
    let ipsec = IpsecPolicy {
        ike_version: p_str("ike_version", "ikev2", problems),
        encryption: p_str("encryption", "aes256", problems),
        integrity: p_str("integrity", "sha256", problems),
        dh_group: p_num("dh_group", 14, problems),
        pfs_group: p_num("pfs_group", 14, problems),
        ike_lifetime_seconds: p_num("ike_lifetime_seconds", 28800, problems),
        sa_lifetime_seconds: p_num("sa_lifetime_seconds", 3600, problems),
        dpd_timeout_seconds: policy.and_then(|p| p.get_number("dpd_timeout_seconds", problems)),
        rekey_margin_seconds: policy.and_then(|p| p.get_number("rekey_margin_seconds", problems)),
    };
    let tunnel_inside_cidrs = f.elements("tunnel_inside_cidrs", problems).map(|items| {
        items.iter().filter_map(|it| cidr_at(it.value.as_str().unwrap_or_default(), &it.span, problems)).collect()
    });
    Some(Network {
        name: Sp::new(f.block.labels[0].0.clone(), f.block.labels[0].1.clone()),
        driver: f.choice(
            "driver",
            &[("ipsec", Driver::Ipsec), ("external", Driver::External)],
            Driver::Ipsec,
            problems,
        ),
        vnet_cidr: f.cidr("vnet_cidr", problems)?,
        gateway_subnet: f.cidr("gateway_subnet", problems),
        gateway_sku: f.string_or("gateway_sku", "VpnGw2AZ", problems),
        routing: f.choice("routing", &[("bgp", Routing::Bgp), ("static", Routing::Static)], Routing::Bgp, problems),
        azure_asn: f.number_or("azure_asn", 65515, problems),
        vpc_id: f.get_string("vpc_id", problems),
        tunnel_inside_cidrs,
        preshared_keys: f.elements("preshared_keys", problems),
        psk_rotation_days: f.get_number("psk_rotation_days", problems),
        tunnel_mtu: f.number_or("tunnel_mtu", 1400, problems),
        ipsec,
        prevent_destroy: f.bool_or("prevent_destroy", false, problems),
        span: f.head(),
    })
}

fn decode_identity(
    f: &Fields,
    cluster: Option<&Cluster>,
    azure: Option<&Azure>,
    problems: &mut Problems,
) -> Option<Identity> {
    let issuer = match (f.get_string("issuer", problems), cluster) {
        (Some(s), _) => s,
        (None, Some(c)) => c.oidc_issuer_url.clone(),
        (None, None) => return None,
    };
    let audience = match (f.get_string("audience", problems), azure) {
        (Some(s), _) => s,
        (None, Some(_)) => Sp::new(CAPZ_TOKEN_AUDIENCE.to_string(), f.head()),
        (None, None) => return None,
    };
    Some(Identity {
        name: Sp::new(f.block.labels[0].0.clone(), f.block.labels[0].1.clone()),
        issuer,
        audience,
        // The CAPZ that takes the identity's tokens: xcsp's, when the spec gives its components.
        namespace: f.string_or(
            "namespace",
            match cluster {
                Some(c) if c.cluster_api.azure.is_some() && c.cluster_api.providers.value != ProvidersMode::Cluster => {
                    XCSP_CAPZ_NAMESPACE
                }
                _ => CAPZ_NAMESPACE,
            },
            problems,
        ),
        service_account: f.string_or("service_account", CAPZ_SERVICE_ACCOUNT, problems),
        role: f.string_or("role", "Contributor", problems),
        prevent_destroy: f.bool_or("prevent_destroy", false, problems),
        span: f.head(),
    })
}

fn decode_pool(f: &Fields, networks: &[String], identities: &[String], problems: &mut Problems) -> Option<Pool> {
    let only = |attr: &str, kind: &str, names: &[String], problems: &mut Problems| -> Option<Sp<String>> {
        if let Some(s) = f.get_string(attr, problems) {
            return Some(s);
        }
        if f.attrs.contains_key(attr) {
            return None; // reported already
        }
        match names {
            [one] => Some(Sp::new(one.clone(), f.head())),
            _ => {
                problems.push(
                    Problem::error(
                        "xcsp::spec::missing_attribute",
                        format!("this pool must say which `{kind}` it uses"),
                    )
                    .label(&f.head(), "")
                    .with_help(if names.is_empty() {
                        format!("declare a `{kind}` block")
                    } else {
                        format!("add `{attr} = {kind}.NAME` (one of: {})", names.join(", "))
                    }),
                );
                None
            }
        }
    };
    let network = only("network", "network", networks, problems);
    let identity = only("identity", "workload_identity", identities, problems);
    let image = match (f.nested("image"), f.get_string("image_id", problems)) {
        (Some(_), Some(id)) => {
            problems.push(
                Problem::error("xcsp::pool::image", "set either `image_id` or an `image` block, not both")
                    .label(&id.span, ""),
            );
            None
        }
        (None, Some(id)) => Some(Sp::new(Image::Id(id.value), id.span)),
        (Some(img), None) => image_block(&img, problems),
        (None, None) => {
            problems.push(
                Problem::error("xcsp::pool::image", "a worker pool needs an image").label(&f.head(), "").with_help(
                    "add `image { publisher, offer, sku, version }` (the RHCOS marketplace image), `image { vhd = URL }` (the release's RHCOS VHD, imported) or `image_id`",
                ),
            );
            None
        }
    };
    let disk = f.nested("os_disk");
    let taints = match f.known("taints", problems) {
        Some((v, span)) => Sp::new(decode_taints(&v, &span, problems), span),
        None => Sp::new(Vec::new(), f.head()),
    };
    let labels = f.string_map("labels");
    let egress = match f.get_string("egress", problems) {
        None => Sp::new(Egress::NatGateway, f.head()),
        Some(e) => match Egress::parse(&e.value) {
            Some(x) => Sp::new(x, e.span),
            None => {
                problems.push(
                    Problem::error("xcsp::pool::egress", format!("`{}` is no way out for a pool's VMs", e.value))
                        .label(&e.span, "")
                        .with_help(format!(
                            "one of: {} (a NAT gateway xcsp makes; only the cluster's mirrors over the link; Azure's default outbound access)",
                            Egress::NAMES.map(|n| format!("\"{n}\"")).join(", ")
                        )),
                );
                Sp::new(Egress::NatGateway, e.span)
            }
        },
    };
    Some(Pool {
        name: Sp::new(f.block.labels[0].0.clone(), f.block.labels[0].1.clone()),
        network: network?,
        identity: identity?,
        vm_size: f.get_string("vm_size", problems)?,
        replicas: f.number_or("replicas", 1, problems),
        subnet_cidr: f.cidr("subnet_cidr", problems)?,
        image: image?,
        os_disk_size_gb: disk.map_or_else(|| Sp::new(128, f.head()), |d| d.number_or("size_gb", 128, problems)),
        os_disk_type: disk.map_or_else(
            || Sp::new("Premium_LRS".into(), f.head()),
            |d| d.string_or("storage_account_type", "Premium_LRS", problems),
        ),
        zones: f.strings("zones", problems).unwrap_or_else(|| Sp::new(Vec::new(), f.head())),
        labels,
        taints,
        accelerated_networking: f.bool_or("accelerated_networking", true, problems),
        egress,
        machine_health_check: f.bool_or("machine_health_check", false, problems),
        max_unhealthy: f.get_number("max_unhealthy", problems),
        node_startup_timeout_seconds: f.number_or(
            "node_startup_timeout_seconds",
            crate::spec::DEFAULT_NODE_STARTUP_TIMEOUT_SECONDS,
            problems,
        ),
        unhealthy_timeout_seconds: f.number_or(
            "unhealthy_timeout_seconds",
            crate::spec::DEFAULT_UNHEALTHY_TIMEOUT_SECONDS,
            problems,
        ),
        outage_tolerance_seconds: f.number_or(
            "outage_tolerance_seconds",
            crate::spec::DEFAULT_OUTAGE_TOLERANCE_SECONDS,
            problems,
        ),
        prevent_destroy: f.bool_or("prevent_destroy", false, problems),
        span: f.head(),
    })
}

fn decode_taints(v: &Value, span: &Span, problems: &mut Problems) -> Vec<Taint> {
    let mut out = Vec::new();
    for item in v.as_list().unwrap_or_default() {
        let Some(m) = item.as_map() else { continue };
        let get = |k: &str| m.get(k).and_then(Value::as_str).map(String::from);
        let unknown: Vec<&String> = m.keys().filter(|k| !["key", "value", "effect"].contains(&k.as_str())).collect();
        if !unknown.is_empty() {
            problems.push(
                Problem::error("xcsp::pool::taint", format!("a taint has no field `{}`", unknown[0]))
                    .label(span, "")
                    .with_help("a taint is { key, value, effect }"),
            );
        }
        match (get("key"), get("effect")) {
            (Some(key), Some(effect)) => out.push(Taint { key, value: get("value").unwrap_or_default(), effect }),
            _ => problems.push(
                Problem::error("xcsp::pool::taint", "every taint needs a `key` and an `effect`")
                    .label(span, "")
                    .with_help("a taint is { key, value, effect }"),
            ),
        }
    }
    out
}

/// A pool's `image` block: a Marketplace image (`publisher`, `offer`, `sku`, `version`, all four)
/// or the release's RHCOS VHD to import (`vhd`, alone).
fn image_block(img: &Fields, problems: &mut Problems) -> Option<Sp<Image>> {
    const MARKETPLACE: [&str; 4] = ["publisher", "offer", "sku", "version"];
    let written: Vec<&str> = MARKETPLACE.into_iter().filter(|k| img.attrs.contains_key(*k)).collect();
    if let Some(vhd) = img.get_string("vhd", problems) {
        if !written.is_empty() {
            problems.push(
                Problem::error(
                    "xcsp::pool::image",
                    format!("`vhd` imports an image; it goes with no Marketplace field ({})", written.join(", ")),
                )
                .label(&vhd.span, "the VHD to import")
                .with_help("keep either `vhd` or `publisher`, `offer`, `sku` and `version`"),
            );
            return None;
        }
        let Some(parsed) = RhcosVhd::parse(&vhd.value).filter(|_| vhd.value.starts_with("https://")) else {
            problems.push(
                Problem::error("xcsp::pool::vhd", "`vhd` must be an RHCOS VHD URL: https://…/rhcos-<build>-azure.<x86_64|aarch64>.vhd")
                    .label(&vhd.span, "not an RHCOS azure-disk URL")
                    .with_help("the cluster publishes its own in ConfigMap openshift-machine-config-operator/coreos-bootimages (`xcsp preflight` shows it)"),
            );
            return None;
        };
        return Some(Sp::new(Image::Vhd(parsed), img.head()));
    }
    let missing: Vec<&str> = MARKETPLACE.into_iter().filter(|k| !img.attrs.contains_key(*k)).collect();
    if !missing.is_empty() {
        problems.push(
            Problem::error("xcsp::pool::image", format!("a Marketplace image needs {}", missing.join(", ")))
                .label(&img.head(), "this image")
                .with_help(
                    "write `publisher`, `offer`, `sku` and `version`, or `vhd = URL` to import the release's RHCOS VHD",
                ),
        );
        return None;
    }
    Some(Sp::new(
        Image::Marketplace {
            publisher: img.get_string("publisher", problems)?.value,
            offer: img.get_string("offer", problems)?.value,
            sku: img.get_string("sku", problems)?.value,
            version: img.get_string("version", problems)?.value,
        },
        img.head(),
    ))
}
