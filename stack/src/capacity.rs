//! What Azure would refuse the pool's VMs, refused at plan: a size the location does not offer to
//! the subscription, a zone it does not offer it in, a vCPU quota the new machines would exceed.
//! Read from the subscription itself (`xcsp_azure::capacity`: Resource SKUs and usages) by `plan`
//! and `apply` before anything changes, unless `--offline`.
//!
//! Only machines the plan adds count against the quotas: a MachineSet created counts all its
//! replicas, one updated the replicas it gains (the machines already running are in the usage
//! Azure reports). CAPZ would otherwise find out one machine at a time: a size missing from the
//! location's SKUs is a terminal failure of the AzureMachine (CAPZ `azuremachine_controller.go`),
//! a zone or a quota a refused VM PUT (409 `SkuNotAvailable`, `OperationNotAllowed`), and apply
//! would wait for Nodes that never come.

use std::collections::BTreeMap;

use xcsp_azure::capacity::{Quota, REGIONAL_CORES, SizeOffer};
use xcsp_core::{Problem, ResourceType};
use xcsp_plans::plan::{Action, Plan};
use xcsp_plans::validate::Model;

use crate::{Say, StackError};

/// The machines a plan adds, per pool and zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    pub pool: String,
    pub zone: Option<String>,
    pub machines: i64,
}

/// What the plan's MachineSet changes add.
pub fn added(p: &Plan) -> Vec<Added> {
    let replicas = |a: Option<&xcsp_core::provider::Attributes>| {
        a.and_then(|a| a.get("replicas")).and_then(|v| v.as_i64()).unwrap_or(0)
    };
    p.changes
        .iter()
        .filter(|c| c.address.rtype == ResourceType::K8sMachineSet)
        .filter_map(|c| {
            let machines = match c.action {
                Action::Create | Action::Replace => replicas(c.after.as_ref()),
                Action::Update => replicas(c.after.as_ref()) - replicas(c.before.as_ref()),
                _ => 0,
            };
            let zone =
                c.after.as_ref().and_then(|a| a.get("failure_domain")).and_then(|v| v.as_str()).map(String::from);
            (machines > 0).then(|| Added { pool: c.address.name.clone(), zone, machines })
        })
        .collect()
}

/// A pool's Marketplace image against the versions the location carries (`None`: not at all).
pub fn image_problem(model: &Model, pool: &xcsp_plans::spec::Pool, versions: Option<&[String]>) -> Option<Problem> {
    let xcsp_plans::spec::Image::Marketplace { publisher, offer, sku, version } = &pool.image.value else {
        return None;
    };
    let location = &model.azure.location.value;
    let name = format!("{publisher}:{offer}:{sku}");
    let message = match versions {
        None | Some([]) => format!(
            "pool `{}`: image `{name}` is not in the Marketplace of `{location}`, so Azure would refuse its VMs (PlatformImageNotFound)",
            pool.name.value
        ),
        Some(v) if version != "latest" && !v.iter().any(|x| x == version) => format!(
            "pool `{}`: image `{name}` has no version `{version}` in `{location}` (it has {}), so Azure would refuse its VMs (PlatformImageNotFound)",
            pool.name.value,
            v.join(", ")
        ),
        Some(_) => return None,
    };
    Some(
        Problem::error("xcsp::azure::image", message)
            .label(&pool.image.span, "the pool's image")
            .with_help(format!(
                "`az vm image list --location {location} --publisher {publisher} --offer {offer} --all` lists what there is; or import the release's own RHCOS VHD into a gallery of the stack, as the installer does: `image {{ vhd = \"<url>\" }}` with the URL `xcsp preflight` shows (coreos-bootimages `azure-disk`)"
            )),
    )
}

/// A pool's `image_id` that the subscription does not have: CAPZ's VM PUT would be refused
/// (`GalleryImageNotFound`, `ImageNotFound`) for every machine.
pub fn image_id_problem(pool: &xcsp_plans::spec::Pool, id: &str) -> Problem {
    Problem::error(
        "xcsp::azure::image_id",
        format!(
            "pool `{}`: image `{id}` does not exist (Azure answers 404), so Azure would refuse its VMs (GalleryImageNotFound)",
            pool.name.value
        ),
    )
    .label(&pool.image.span, "the pool's image")
    .with_help(
        "name an image version the subscription has (`az sig image-version list --resource-group <rg> --gallery-name <gallery> --gallery-image-definition <image>`), or import the release's own RHCOS VHD into a gallery of the stack: `image { vhd = \"<url>\" }` with the URL `xcsp preflight` shows",
    )
}

/// The problems of `added` against the location's offer and quotas.
pub fn check(model: &Model, added: &[Added], sizes: &[SizeOffer], quotas: &[Quota]) -> Vec<Problem> {
    let location = &model.azure.location.value;
    let mut problems = Vec::new();
    // vCPUs the plan adds per quota, with what adds them (for the message).
    let mut need: BTreeMap<String, (i64, Vec<String>)> = BTreeMap::new();
    let mut reported_size = Vec::new();
    for a in added {
        let Some(pool) = model.pools.iter().find(|p| p.name.value == a.pool) else { continue };
        let size = &pool.vm_size.value;
        let offer = sizes.iter().find(|s| s.name.eq_ignore_ascii_case(size) && !s.restricted);
        let Some(offer) = offer else {
            if !reported_size.contains(&a.pool) {
                reported_size.push(a.pool.clone());
                problems.push(
                    Problem::error(
                        "xcsp::azure::vm_size",
                        format!(
                            "pool `{}`: `{size}` is not offered in `{location}` to subscription {} (its Resource SKUs list no such size there for it), so CAPZ would make no VM",
                            a.pool, model.azure.subscription_id.value
                        ),
                    )
                    .label(&pool.vm_size.span, "the pool's size")
                    .with_help(format!(
                        "choose a size the location offers (`az vm list-skus --location {location} --resource-type virtualMachines`), another location, or ask Azure support for access to it"
                    )),
                );
            }
            continue;
        };
        if let Some(z) = &a.zone
            && !offer.zones.contains(z)
        {
            let offered = if offer.zones.is_empty() { "none".to_string() } else { offer.zones.join(", ") };
            problems.push(
                Problem::error(
                    "xcsp::azure::zone",
                    format!(
                        "pool `{}`: `{size}` is not offered in zone {z} of `{location}` to this subscription (zones it is offered in: {offered}), so Azure would refuse its VMs there (SkuNotAvailable)",
                        a.pool
                    ),
                )
                .label(&pool.zones.span, "the pool's zones")
                .with_help(if offer.zones.is_empty() {
                    "leave `zones` out, or choose another size or location".to_string()
                } else {
                    format!("use zones the size is offered in ({offered}), or ask Azure support to lift the restriction")
                }),
            );
        }
        let vcpus = offer.vcpus * a.machines;
        let what = format!("{} × {size} ({} vCPUs each) for pool `{}`", a.machines, offer.vcpus, a.pool);
        for quota in [offer.family.clone(), REGIONAL_CORES.to_string()] {
            let e = need.entry(quota).or_default();
            e.0 += vcpus;
            e.1.push(what.clone());
        }
    }
    for (name, (vcpus, what)) in need {
        let Some(q) = quotas.iter().find(|q| q.name.eq_ignore_ascii_case(&name)) else { continue };
        if q.current + vcpus <= q.limit {
            continue;
        }
        let label = if q.localized.is_empty() { name.clone() } else { q.localized.clone() };
        let pools: Vec<&xcsp_plans::spec::Pool> = model
            .pools
            .iter()
            .filter(|p| what.iter().any(|w| w.ends_with(&format!("pool `{}`", p.name.value))))
            .collect();
        let mut problem = Problem::error(
            "xcsp::azure::quota",
            format!(
                "the plan adds {vcpus} vCPUs of quota `{name}` ({label}) in `{location}`: {}; the subscription's limit is {} with {} in use",
                what.join(", "),
                q.limit,
                q.current
            ),
        )
        .with_help(format!(
            "ask for the quota to be raised to at least {} (Azure portal, Quotas: Compute; Microsoft Learn, \"Increase VM-family vCPU quotas\"), or lower the replicas",
            q.current + vcpus
        ));
        for p in pools {
            problem = problem.label(&p.replicas.span, "replicas");
        }
        problems.push(problem);
    }
    problems
}

/// Plan and apply: reads the location's offer and quotas when the plan adds machines (and not
/// `--offline`); stops on what Azure would refuse. A failed read is a warning: the check is
/// skipped, never guessed.
pub async fn before_changes(model: &Model, p: &Plan, offline: bool, say: &Say) -> crate::Result<()> {
    let added = added(p);
    if offline || added.is_empty() {
        return Ok(());
    }
    let azure = crate::clouds::azure(model)?;
    let location = &model.azure.location.value;
    let read = async {
        Ok::<_, xcsp_core::provider::ProviderError>((azure.vm_sizes(location).await?, azure.quotas(location).await?))
    };
    let (sizes, quotas) = match read.await {
        Ok(r) => r,
        Err(e) => {
            say.warn(format_args!(
                "cannot read what the subscription may run in {location} ({e}); the VM sizes, zones and quotas are not checked"
            ));
            return Ok(());
        }
    };
    let mut problems = check(model, &added, &sizes, &quotas);
    let mut pools: Vec<&str> = added.iter().map(|a| a.pool.as_str()).collect();
    pools.dedup();
    for pool in model.pools.iter().filter(|p| pools.contains(&p.name.value.as_str())) {
        let read = match &pool.image.value {
            xcsp_plans::spec::Image::Marketplace { publisher, offer, sku, .. } => azure
                .image_versions(location, publisher, offer, sku)
                .await
                .map(|versions| image_problem(model, pool, versions.as_deref())),
            xcsp_plans::spec::Image::Id(id) => match azure.image_exists(id).await {
                Ok(None) => {
                    say.warn(format_args!(
                        "pool `{}`: image `{id}` is not a gallery image version, gallery image or managed image id; it is not checked",
                        pool.name.value
                    ));
                    continue;
                }
                read => read.map(|exists| (exists == Some(false)).then(|| image_id_problem(pool, id))),
            },
            // Imported by the stack itself, before its machines.
            xcsp_plans::spec::Image::Vhd(_) => continue,
        };
        match read {
            Ok(problem) => problems.extend(problem),
            Err(e) => {
                say.warn(format_args!("cannot read the image of pool `{}` ({e}); it is not checked", pool.name.value))
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(StackError::Capacity { problems }.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn il5() -> Model {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/il5-govcloud");
        xcsp_plans::load(&dir, &Default::default()).unwrap_or_else(|_| panic!("the example loads")).model
    }

    fn offer(zones: &[&str], restricted: bool) -> SizeOffer {
        SizeOffer {
            name: "Standard_ND96asr_v4".into(),
            family: "standardNDASv4_A100Family".into(),
            vcpus: 96,
            zones: zones.iter().map(|z| z.to_string()).collect(),
            restricted_zones: vec![],
            restricted,
        }
    }

    fn quota(name: &str, current: i64, limit: i64) -> Quota {
        Quota { name: name.into(), localized: String::new(), current, limit }
    }

    fn both_zones() -> Vec<Added> {
        ["1", "2"].iter().map(|z| Added { pool: "gpu".into(), zone: Some(z.to_string()), machines: 1 }).collect()
    }

    #[test]
    fn an_image_the_location_lacks_is_named() {
        let m = il5();
        let pool = &m.pools[0];
        assert!(image_problem(&m, pool, Some(&["422.94.1".to_string()])).is_none(), "latest of a listed image");
        let p = image_problem(&m, pool, None).expect("not there");
        assert_eq!(p.code, "xcsp::azure::image");
        assert!(
            p.message.contains("`azureopenshift:aro4:422-v2` is not in the Marketplace of `usgovvirginia`"),
            "{}",
            p.message
        );
    }

    #[test]
    fn what_the_subscription_runs_passes() {
        let q = [quota("standardNDASv4_A100Family", 0, 192), quota("cores", 10, 1000)];
        assert!(check(&il5(), &both_zones(), &[offer(&["1", "2", "3"], false)], &q).is_empty());
    }

    #[test]
    fn a_size_absent_a_zone_withheld_and_a_quota_short_are_named() {
        let m = il5();
        let q = [quota("standardNDASv4_A100Family", 0, 100), quota("cores", 0, 1000)];
        let codes = |p: Vec<Problem>| p.iter().map(|p| p.code).collect::<Vec<_>>();
        assert_eq!(codes(check(&m, &both_zones(), &[], &q)), ["xcsp::azure::vm_size"]);
        assert_eq!(codes(check(&m, &both_zones(), &[offer(&[], true)], &q)), ["xcsp::azure::vm_size"]);
        let zone = check(&m, &both_zones(), &[offer(&["1", "3"], false)], &[]);
        assert_eq!(codes(zone.clone()), ["xcsp::azure::zone"]);
        assert!(zone[0].message.contains("zone 2") && zone[0].message.contains("1, 3"), "{}", zone[0].message);
        let quota = check(&m, &both_zones(), &[offer(&["1", "2"], false)], &q);
        assert_eq!(codes(quota.clone()), ["xcsp::azure::quota"]);
        assert!(
            quota[0].message.contains("adds 192 vCPUs") && quota[0].message.contains("limit is 100"),
            "{}",
            quota[0].message
        );
        assert!(quota[0].help.as_deref().unwrap().contains("at least 192"));
    }
}
