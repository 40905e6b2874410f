//! The real kube client against the sim's Kubernetes API, for the tests that drive it.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

/// A served type by group, version, kind and plural.
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The API of a CAPI/CAPZ (`v1beta1`) or core (`v1`) kind in `ns` (cluster-wide for a Namespace).
pub fn api(client: &kube::Client, ns: &str, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let version = if group.is_empty() { "v1" } else { "v1beta1" };
    let ar = resource(group, version, kind, plural);
    if kind == "Namespace" { Api::all_with(client.clone(), &ar) } else { Api::namespaced_with(client.clone(), ns, &ar) }
}

/// Creates `v` through `api`, failing the test with the API's answer if it is refused.
pub async fn create(api: &Api<DynamicObject>, v: Value) {
    let o: DynamicObject = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap_or_else(|e| panic!("create {:?}: {e}", o.metadata.name));
}
