//! What installs the controller (`xcsp controller manifests`): its namespace, the CRD, a service
//! account with the least privilege the stack's operations need, the leader's Lease role, and the
//! Deployment (state goes to each resource's namespace: the `kubernetes` backend). Cloud
//! credentials come from the Pod's projected service account tokens (AWS IAM roles for service
//! accounts, Azure workload identity) when their ids are given; the command line's credential
//! chains read them.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::XcspStack;

/// What the manifests are rendered with.
#[derive(Debug, Clone)]
pub struct Options {
    pub namespace: String,
    pub image: String,
    /// The AWS IAM role the controller's token is exchanged for (`AWS_ROLE_ARN`).
    pub aws_role_arn: Option<String>,
    /// The Entra application and tenant of the controller's federated credential.
    pub azure_client_id: Option<String>,
    pub azure_tenant_id: Option<String>,
}

const NAME: &str = "xcsp-controller";
const TOKENS: &str = "/var/run/secrets/xcsp";

/// A rule of a ClusterRole or Role.
fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({ "apiGroups": groups, "resources": resources, "verbs": verbs })
}

/// What the controller may do across the cluster: its own resources and Events, and what a
/// stack's operations read and write (`xcsp_kube`), no more. A ClusterRole: the pool's namespaces
/// come from the specs, and refresh lists each kind xcsp writes across namespaces by its stack
/// label (which RBAC cannot narrow, Secrets included).
pub fn cluster_rules() -> Vec<Value> {
    // Server-side apply checks `create` when it makes the object, `patch` otherwise.
    let written = ["get", "list", "create", "patch", "delete"];
    vec![
        rule(&["xcsp.io"], &["xcspstacks"], &["get", "list", "watch", "patch", "update"]),
        rule(&["xcsp.io"], &["xcspstacks/status"], &["get", "patch", "update"]),
        rule(&["xcsp.io"], &["xcspstacks/finalizers"], &["update"]),
        rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
        // The objects a stack writes (xcsp_kube::object), and the status xcsp sets on two of them.
        rule(&[""], &["namespaces", "serviceaccounts", "secrets"], &written),
        // State in the cluster (the `kubernetes` backend): a Secret replaced in place, and a Lease
        // as each stack's lock.
        rule(&[""], &["secrets"], &["update"]),
        rule(&["coordination.k8s.io"], &["leases"], &["get", "create", "delete"]),
        rule(&["rbac.authorization.k8s.io"], &["clusterroles", "clusterrolebindings"], &written),
        rule(&["machineconfiguration.openshift.io"], &["machineconfigs", "machineconfigpools"], &written),
        // Each pool's RuntimeClass (its workloads' placement and outage tolerance).
        rule(&["node.k8s.io"], &["runtimeclasses"], &written),
        rule(
            &["infrastructure.cluster.x-k8s.io"],
            &["azureclusteridentities", "azureclusters", "azuremachinetemplates"],
            &written,
        ),
        rule(&["infrastructure.cluster.x-k8s.io"], &["azureclusters/status"], &["patch"]),
        rule(&["cluster.x-k8s.io"], &["clusters", "machinesets", "machinehealthchecks"], &written),
        rule(&["cluster.x-k8s.io"], &["clusters/status"], &["get", "patch"]),
        // The pool Cluster's externally managed control plane (xcsp_kube::control_plane): its CRD,
        // the object and its status, and what the ClusterRole made for CAPI's manager grants
        // (RBAC lets a subject grant only what it holds).
        rule(&["apiextensions.k8s.io"], &["customresourcedefinitions"], &written),
        rule(
            &["controlplane.xcsp.io"],
            &["xcspcontrolplanes"],
            &["get", "list", "watch", "create", "patch", "update", "delete"],
        ),
        rule(&["controlplane.xcsp.io"], &["xcspcontrolplanes/status"], &["get", "patch", "update"]),
        // The pool's machines and Nodes: read, Nodes initialized (their taint) and deleted with
        // their machines.
        rule(&["cluster.x-k8s.io"], &["machines"], &["list"]),
        // Their AzureMachines: what Azure refused (xcsp_kube::failure).
        rule(&["infrastructure.cluster.x-k8s.io"], &["azuremachines"], &["list"]),
        rule(&[""], &["nodes"], &["get", "list", "watch", "patch", "delete"]),
        rule(&["certificates.k8s.io"], &["certificatesigningrequests"], &["list"]),
        // What preflight and status read of the cluster.
        rule(
            &["config.openshift.io"],
            &["infrastructures", "authentications", "networks", "proxies", "clusteroperators", "featuregates"],
            &["get"],
        ),
        rule(&["config.openshift.io"], &["imagedigestmirrorsets", "imagetagmirrorsets"], &["list"]),
        rule(&["operator.openshift.io"], &["networks"], &["get"]),
        rule(&["operator.openshift.io"], &["imagecontentsourcepolicies"], &["list"]),
        rule(&["apps"], &["deployments", "daemonsets"], &["get"]),
        // Refresh of the Cluster API providers a stack installs reads their managers' Deployments
        // (by the stack's label, across namespaces).
        rule(&["apps"], &["deployments"], &["list"]),
        rule(&[""], &["configmaps"], &["get"]),
        rule(&[""], &["pods"], &["get", "list"]),
        // What the ClusterRole a stack makes for Cluster API grants (xcsp_kube's
        // capi_workload_rules): RBAC lets a subject grant only what it holds itself, and holding
        // these is narrower than the `escalate` and `bind` verbs, which would let it grant anything.
        rule(&[""], &["pods/eviction"], &["create"]),
        rule(&[""], &["namespaces"], &["watch"]),
        rule(&[""], &["persistentvolumes"], &["list"]),
        rule(&["storage.k8s.io"], &["volumeattachments"], &["list"]),
        json!({ "nonResourceURLs": ["/", "/apis", "/openid/v1/jwks"], "verbs": ["get"] }),
    ]
}

/// Every object, in the order to apply them.
pub fn objects(o: &Options) -> Vec<Value> {
    let ns = &o.namespace;
    let meta = |name: &str| json!({ "name": name, "namespace": ns, "labels": { "app.kubernetes.io/name": NAME } });
    let mut env = vec![
        json!({ "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }),
        json!({ "name": "POD_NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } }),
    ];
    let mut sources = Vec::new();
    if let Some(arn) = &o.aws_role_arn {
        env.push(json!({ "name": "AWS_ROLE_ARN", "value": arn }));
        env.push(json!({ "name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": format!("{TOKENS}/aws/token") }));
        sources.push(json!({ "serviceAccountToken": { "audience": "sts.amazonaws.com", "expirationSeconds": 3600, "path": "aws/token" } }));
    }
    if let (Some(client), Some(tenant)) = (&o.azure_client_id, &o.azure_tenant_id) {
        env.push(json!({ "name": "AZURE_CLIENT_ID", "value": client }));
        env.push(json!({ "name": "AZURE_TENANT_ID", "value": tenant }));
        env.push(json!({ "name": "AZURE_FEDERATED_TOKEN_FILE", "value": format!("{TOKENS}/azure/token") }));
        sources.push(json!({ "serviceAccountToken": { "audience": "api://AzureADTokenExchange", "expirationSeconds": 3600, "path": "azure/token" } }));
    }
    let mut volumes = vec![json!({ "name": "tmp", "emptyDir": {} })];
    let mut mounts = vec![json!({ "name": "tmp", "mountPath": "/tmp" })];
    if !sources.is_empty() {
        volumes.push(json!({ "name": "cloud-tokens", "projected": { "sources": sources } }));
        mounts.push(json!({ "name": "cloud-tokens", "mountPath": TOKENS, "readOnly": true }));
    }
    vec![
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        serde_json::to_value(XcspStack::crd()).expect("the CRD serializes"),
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME) }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": NAME }, "rules": cluster_rules(),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": NAME },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME },
            "subjects": [{ "kind": "ServiceAccount", "name": NAME, "namespace": ns }],
        }),
        // The leader's Lease is renewed (updated) in its own namespace only.
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("xcsp-controller-lease"),
            "rules": [rule(&["coordination.k8s.io"], &["leases"], &["get", "create", "update"])],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("xcsp-controller-lease"),
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "xcsp-controller-lease" },
            "subjects": [{ "kind": "ServiceAccount", "name": NAME, "namespace": ns }],
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(NAME),
            "spec": {
                // Two replicas: one leads (the Lease), the other takes over when it goes.
                "replicas": 2,
                "selector": { "matchLabels": { "app.kubernetes.io/name": NAME } },
                "template": {
                    // Which build the image holds: the FIPS one (xcsp-crypto), or said otherwise.
                    "metadata": {
                        "labels": { "app.kubernetes.io/name": NAME },
                        "annotations": { "xcsp.io/crypto": xcsp_crypto::module() },
                    },
                    "spec": {
                        "serviceAccountName": NAME,
                        // A VPN gateway's operation runs for tens of minutes: on SIGTERM the
                        // controller starts nothing more and waits for what runs.
                        "terminationGracePeriodSeconds": 3600,
                        "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
                        "containers": [{
                            "name": "controller",
                            "image": o.image,
                            "args": ["controller", "run", "--metrics-addr", "0.0.0.0:9464"],
                            "env": env,
                            "ports": [{ "name": "metrics", "containerPort": 9464 }],
                            "livenessProbe": { "httpGet": { "path": "/healthz", "port": "metrics" }, "periodSeconds": 20 },
                            "securityContext": {
                                "allowPrivilegeEscalation": false,
                                "readOnlyRootFilesystem": true,
                                "capabilities": { "drop": ["ALL"] },
                            },
                            "resources": { "requests": { "cpu": "50m", "memory": "128Mi" }, "limits": { "memory": "512Mi" } },
                            "volumeMounts": mounts,
                        }],
                        "volumes": volumes,
                    },
                },
            },
        }),
    ]
}

/// The manifests as one YAML stream.
pub fn yaml(objects: &[Value]) -> String {
    objects.iter().map(|o| format!("---\n{}", serde_norway::to_string(o).expect("YAML"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            namespace: "xcsp-system".into(),
            image: "registry.example/xcsp:1".into(),
            aws_role_arn: Some("arn:aws-us-gov:iam::123456789012:role/xcsp".into()),
            azure_client_id: Some("11111111-1111-1111-1111-111111111111".into()),
            azure_tenant_id: Some("22222222-2222-2222-2222-222222222222".into()),
        }
    }

    #[test]
    fn the_controller_runs_as_its_service_account_with_both_clouds_tokens() {
        let all = objects(&options());
        let kinds: Vec<&str> = all.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "CustomResourceDefinition",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "Deployment"
            ]
        );
        let pod = &all[7]["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], NAME);
        let sources = &pod["volumes"][1]["projected"]["sources"];
        let audiences: Vec<&str> = sources
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["serviceAccountToken"]["audience"].as_str().unwrap())
            .collect();
        assert_eq!(audiences, ["sts.amazonaws.com", "api://AzureADTokenExchange"]);
        let env: Vec<&str> =
            pod["containers"][0]["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert!(env.contains(&"AWS_WEB_IDENTITY_TOKEN_FILE") && env.contains(&"AZURE_FEDERATED_TOKEN_FILE"), "{env:?}");
        // Leases are renewed only in the controller's namespace (the leader's); elsewhere a
        // stack's lock is made and removed, never taken over.
        let rules = cluster_rules();
        let leases: Vec<&Value> = rules.iter().filter(|r| r["apiGroups"] == json!(["coordination.k8s.io"])).collect();
        assert_eq!(leases.len(), 1);
        assert_eq!(leases[0]["verbs"], json!(["get", "create", "delete"]));
        // No wildcard in any rule.
        for r in cluster_rules() {
            assert!(!r.to_string().contains('*'), "{r}");
        }
    }
}
