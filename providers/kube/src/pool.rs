//! The pool's machines as Cluster API and the cluster report them, for `xcsp status`: each
//! Machine of the pool's MachineSets (phase, provider ID, the conditions that are not true), and
//! the Node whose provider ID is the Machine's (CAPI's machine controller matches them the same
//! way before it sets `status.nodeRef`), Ready or not and since when.

use kube::api::{Api, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::Value as Json;

use crate::provider::KubeConfig;
use crate::survey::resource;

/// One Machine and its Node, if one registered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub namespace: String,
    pub name: String,
    pub machine_set: String,
    /// `status.phase` (Pending, Provisioning, Provisioned, Running, Deleting, Failed).
    pub phase: String,
    pub provider_id: Option<String>,
    pub created: Option<String>,
    /// Conditions that are not `True`: type, reason and message.
    pub not_true: Vec<(String, String, String)>,
    pub node: Option<Node>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    pub name: String,
    /// The `Ready` condition's status ("True", "False", "Unknown") and when it last changed.
    pub ready: String,
    pub since: Option<String>,
}

fn text(v: &Json) -> Option<String> {
    v.as_str().map(String::from)
}

/// The Machines of `machine_sets` (namespace, name) and their Nodes.
pub async fn machines(config: &KubeConfig, machine_sets: &[(String, String)]) -> Result<Vec<Machine>, String> {
    let client = crate::provider::client(config).await?;
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &resource("", "v1", "Node", "nodes"));
    let nodes = nodes.list(&ListParams::default()).await.map_err(|e| format!("cannot list the Nodes: {e}"))?.items;
    let version = crate::provider::capi_version(&client).await;
    let mut out = Vec::new();
    for (ns, set) in machine_sets {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &crate::provider::machines(version));
        let selector = ListParams::default().labels(&format!("cluster.x-k8s.io/set-name={set}"));
        let list = api.list(&selector).await.map_err(|e| format!("cannot list the Machines of {ns}/{set}: {e}"))?;
        for m in list.items {
            let provider_id = text(&m.data["spec"]["providerID"]);
            let node = provider_id.as_ref().and_then(|id| {
                let n = nodes.iter().find(|n| n.data["spec"]["providerID"].as_str() == Some(id.as_str()))?;
                let ready = n.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready").cloned();
                Some(Node {
                    name: n.metadata.name.clone().unwrap_or_default(),
                    ready: ready.as_ref().and_then(|c| text(&c["status"])).unwrap_or_else(|| "Unknown".into()),
                    since: ready.as_ref().and_then(|c| text(&c["lastTransitionTime"])),
                })
            });
            // Through v1beta2 the Machine's own conditions are v1beta2's; a cluster that sets
            // only the v1beta1 ones shows them under `deprecated.v1beta1`.
            let status = &m.data["status"];
            let conditions = [&status["conditions"], &status["deprecated"]["v1beta1"]["conditions"]]
                .into_iter()
                .find(|c| c.as_array().is_some_and(|c| !c.is_empty()))
                .unwrap_or(&Json::Null);
            let not_true = conditions
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["status"] != "True")
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                    (s("type"), s("reason"), s("message"))
                })
                .collect();
            out.push(Machine {
                namespace: ns.clone(),
                name: m.metadata.name.clone().unwrap_or_default(),
                machine_set: set.clone(),
                phase: text(&m.data["status"]["phase"]).unwrap_or_else(|| "Pending".into()),
                provider_id,
                created: m.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
                not_true,
                node,
            });
        }
    }
    Ok(out)
}
