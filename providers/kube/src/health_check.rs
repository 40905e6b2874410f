//! Holding the pool's MachineHealthChecks while the link is down.
//!
//! When every tunnel of the link is down, every Node of the pool stops posting its status and
//! turns `Unknown`; the machines are not what is broken, and a replacement could not join either
//! (it fetches its config over the link). Cluster API's way to hold a health check is the paused
//! annotation `cluster.x-k8s.io/paused` on the MachineHealthCheck: its controller then neither
//! evaluates nor remediates (cluster-api `internal/controllers/machinehealthcheck/
//! machinehealthcheck_controller.go`, `paused.EnsurePausedCondition`; `api/core/v1beta2`
//! `PausedAnnotation`). xcsp puts it there with a note of its own, [`HELD_BY`], and takes away
//! only a pause it put there: once the link is back and the pool's Nodes are Ready again, or
//! [`RELEASE_AFTER`] after the link came back (a Node still not Ready then is the machine's own
//! problem, for the health check to remediate).

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use xcsp_core::ResourceType;

/// Cluster API's paused annotation.
pub const PAUSED: &str = "cluster.x-k8s.io/paused";
/// xcsp's note beside it: `link down since <time>`, then `link back since <time>`.
pub const HELD_BY: &str = "xcsp.io/remediation-held";
/// How long after the link came back xcsp keeps holding a health check whose Nodes are not all
/// Ready yet.
pub const RELEASE_AFTER: Duration = Duration::from_secs(10 * 60);

/// What [`hold`] did to one health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Held(String),
    Released(String),
}

/// The link's state as the caller read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// No tunnel is up.
    Down,
    /// Some tunnel is up; `nodes_ready`: every Node of the pool's machines is Ready.
    Up { nodes_ready: bool },
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn stamp(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// Holds or releases the health checks `checks` (namespace, name) as `link` says.
pub async fn hold(
    config: &crate::connect::KubeConfig,
    checks: &[(String, String)],
    link: Link,
) -> Result<Vec<Change>, String> {
    let client = crate::connect::client(config).await?;
    let version = crate::connect::capi_version(&client).await;
    let resource = crate::connect::resource(ResourceType::K8sMachineHealthCheck, version)
        .ok_or("no MachineHealthCheck resource")?;
    let mut out = Vec::new();
    for (ns, name) in checks {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
        let Some(mhc) =
            api.get_opt(name).await.map_err(|e| format!("cannot read MachineHealthCheck {ns}/{name}: {e}"))?
        else {
            continue;
        };
        let annotations = mhc.metadata.annotations.clone().unwrap_or_default();
        let note = annotations.get(HELD_BY).cloned();
        let paused = annotations.contains_key(PAUSED);
        let patch = match (link, note.as_deref()) {
            // Someone else paused it: theirs to release, and nothing to hold.
            (_, None) if paused => None,
            (Link::Down, None) => {
                out.push(Change::Held(name.clone()));
                Some(
                    json!({"metadata": {"annotations": {PAUSED: "", HELD_BY: format!("link down since {}", stamp(now()))}}}),
                )
            }
            (Link::Down, Some(n)) if n.starts_with("link back") => {
                Some(json!({"metadata": {"annotations": {HELD_BY: format!("link down since {}", stamp(now()))}}}))
            }
            (Link::Up { nodes_ready }, Some(n)) => {
                let back = n
                    .strip_prefix("link back since ")
                    .and_then(|t| time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok());
                let settled = nodes_ready || back.is_some_and(|t| now() - t >= RELEASE_AFTER);
                match back {
                    _ if settled => {
                        out.push(Change::Released(name.clone()));
                        Some(json!({"metadata": {"annotations": {PAUSED: null, HELD_BY: null}}}))
                    }
                    Some(_) => None,
                    None => Some(
                        json!({"metadata": {"annotations": {HELD_BY: format!("link back since {}", stamp(now()))}}}),
                    ),
                }
            }
            _ => None,
        };
        if let Some(p) = patch {
            api.patch(name, &PatchParams::default(), &Patch::Merge(&p))
                .await
                .map_err(|e| format!("cannot annotate MachineHealthCheck {ns}/{name}: {e}"))?;
        }
    }
    Ok(out)
}
