//! Rules on the cloud blocks: regions, clouds and accounts, tags.

use xcsp_core::{Problem, Problems};

use super::err;
use crate::spec::*;

pub(super) fn check_regions(spec: &Spec, problems: &mut Problems) {
    if let Some(aws) = &spec.aws {
        let r = &aws.region.value;
        let parts: Vec<&str> = r.split('-').collect();
        let shaped = parts.len() >= 3
            && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
            && parts.last().is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()));
        if !shaped {
            problems.push(
                err("xcsp::cloud::region", format!("`{r}` is not an AWS region"), &aws.region.span, "")
                    .with_help("e.g. us-gov-west-1, us-east-1"),
            );
        }
    }
    let Some(az) = &spec.azure else { return };
    let loc = &az.location.value;
    let gov_location = loc.starts_with("usgov") || loc.starts_with("usdod");
    match az.cloud.value {
        AzureCloud::Public if gov_location => problems.push(
            err(
                "xcsp::cloud::mismatch",
                format!("location `{loc}` is in Azure Government, but the cloud is public"),
                &az.location.span,
                "",
            )
            .label(&az.cloud.span, "cloud")
            .with_help("set `cloud = \"usgovernment\"`"),
        ),
        AzureCloud::UsGovernment if !gov_location => problems.push(
            err(
                "xcsp::cloud::mismatch",
                format!("location `{loc}` is not an Azure Government region"),
                &az.location.span,
                "",
            )
            .label(&az.cloud.span, "cloud")
            .with_help("Azure Government regions: usgovvirginia, usgovarizona, usgovtexas"),
        ),
        _ => {}
    }
    match (az.cloud.value, &az.endpoints) {
        (AzureCloud::Custom, None) => problems.push(
            err("xcsp::cloud::endpoints", "a custom cloud needs an `endpoints` block", &az.cloud.span, "")
                .with_help("add endpoints { resource_manager = \"https://...\", authority = \"https://...\" }"),
        ),
        (AzureCloud::Public | AzureCloud::UsGovernment, Some(e)) => problems.push(
            err("xcsp::cloud::endpoints", "`endpoints` is only for `cloud = \"custom\"`", &e.resource_manager.span, "")
                .with_help("public and US Government endpoints are built in"),
        ),
        _ => {}
    }
    for (v, what) in [(&az.subscription_id, "subscription id"), (&az.tenant_id, "tenant id")] {
        if !is_guid(&v.value) {
            problems.push(
                err("xcsp::azure::guid", format!("the {what} is not a GUID"), &v.span, "")
                    .with_help("e.g. 00000000-0000-0000-0000-000000000000"),
            );
        }
    }
    let rg = &az.resource_group.value;
    let rg_ok = !rg.is_empty()
        && rg.len() <= 90
        && !rg.ends_with('.')
        && rg.chars().all(|c| c.is_alphanumeric() || "-_.()".contains(c));
    if !rg_ok {
        problems.push(
            err(
                "xcsp::azure::resource_group",
                format!("`{rg}` is not a valid resource group name"),
                &az.resource_group.span,
                "",
            )
            .with_help("1-90 letters, digits, `-`, `_`, `.`, `(`, `)`; not ending in `.`"),
        );
    }
    if let Some(aws) = &spec.aws
        && aws.partition() == "aws-us-gov"
        && az.cloud.value == AzureCloud::Public
    {
        problems.push(
            Problem::warning("xcsp::cloud::boundary", "a GovCloud cluster is linked to public Azure")
                .label(&az.cloud.span, "")
                .with_help("IL5 workloads usually require Azure Government (`cloud = \"usgovernment\"`)"),
        );
    }
}

fn is_guid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}
/// Characters Azure refuses in tag names (Microsoft Learn, "Use tags to organize your Azure
/// resources", Limitations: `InvalidTagNameCharacters`).
const AZURE_TAG_NAME_REFUSED: &str = "<>%&\\?/";
/// Tags per resource: Azure allows 50 tag name/value pairs; AWS 50 user tags (Microsoft Learn,
/// tag limitations; AWS "Tag your Amazon EC2 resources", tag restrictions). xcsp's own two count.
const TAGS_PER_RESOURCE: usize = 50;

/// User tags may not take xcsp's own keys (adoption and sweeps find resources by them) nor what
/// the clouds refuse: AWS keys 1-128 characters, values 256, the `aws:` prefix reserved; Azure
/// names 1-512 characters without `< > % & \ ? /`, values 256, the prefixes `microsoft`, `azure`
/// and `windows` reserved (Az.Resources `Tags_CreateOrUpdate`); 50 tags a resource on both.
pub(super) fn check_tags(spec: &Spec, problems: &mut Problems) {
    let blocks = [
        spec.aws.as_ref().map(|a| (&a.tags, "AWS", &["aws:"][..], 128usize, "")),
        spec.azure
            .as_ref()
            .map(|a| (&a.tags, "Azure", &["microsoft", "azure", "windows"][..], 512usize, AZURE_TAG_NAME_REFUSED)),
    ];
    for (tags, cloud, reserved, key_max, refused_chars) in blocks.into_iter().flatten() {
        for (k, v) in &tags.value {
            let value_len = v.as_str().map_or(0, |s| s.chars().count());
            let lower = k.to_ascii_lowercase();
            let why = if xcsp_core::tags::is_reserved(k) {
                Some(format!("`{k}`: the `xcsp.io/` and `xcsp.io_` keys are xcsp's own"))
            } else if let Some(prefix) = reserved.iter().find(|p| lower.starts_with(*p)) {
                Some(format!("`{k}`: {cloud} reserves names beginning with `{prefix}`"))
            } else if let Some(c) = k.chars().find(|c| refused_chars.contains(*c)) {
                Some(format!(
                    "`{k}`: {cloud} refuses `{c}` in tag names (any of {})",
                    refused_chars.chars().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" ")
                ))
            } else if k.is_empty() || k.chars().count() > key_max || value_len > 256 {
                Some(format!("`{k}`: {cloud} tag names take 1-{key_max} characters and values at most 256"))
            } else {
                None
            };
            if let Some(why) = why {
                problems.push(
                    err("xcsp::tags::invalid", format!("tag {why}"), &tags.span, "in these tags")
                        .with_help("rename the tag; xcsp adds its stack and address tags by itself"),
                );
            }
        }
        if tags.value.len() + 2 > TAGS_PER_RESOURCE {
            problems.push(
                err(
                    "xcsp::tags::count",
                    format!(
                        "{} {cloud} tags, and xcsp adds 2: a resource takes at most {TAGS_PER_RESOURCE}",
                        tags.value.len()
                    ),
                    &tags.span,
                    "",
                )
                .with_help(format!("keep at most {} tags", TAGS_PER_RESOURCE - 2)),
            );
        }
    }
}
