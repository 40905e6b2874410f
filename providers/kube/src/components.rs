//! The Cluster API providers xcsp installs where the cluster runs none (docs/src/concepts/cluster-api-on-openshift.md):
//! a provider's release manifests (`core-components.yaml`, `infrastructure-components.yaml`), made
//! into what an OpenShift cluster admits and runs, then applied and removed as one resource
//! (`k8s_cluster_api_provider`).
//!
//! From the release manifests, as `clusterctl init` would install them, these change:
//! - **Variables.** `${VAR:=default}` and `${VAR:-default}` take their default, as clusterctl's
//!   variable processing does, except the feature gates OpenShift's own manifests set
//!   (`EXP_MACHINE_POOL`, CAPZ's `EXP_ASO_API`, `EXP_AKS_RESOURCE_HEALTH`, `EXP_EDGEZONE` off;
//!   `EXP_MACHINE_TAINT_PROPAGATION` on, which the pool's tainted MachineSets need); a
//!   `${VAR}` without a default is an error naming it.
//! - **Certificates.** A plain OpenShift runs no cert-manager: its `Certificate` and `Issuer` go,
//!   and OpenShift's service CA serves the webhooks instead (openshift/service-ca-operator): the
//!   webhook Service asks for its serving certificate (`service.beta.openshift.io/serving-cert-secret-name`,
//!   the Secret the manager mounts), and the webhook configurations and CRDs ask for its CA bundle
//!   (`service.beta.openshift.io/inject-cabundle`), in place of cert-manager's `inject-ca-from`.
//! - **Namespace.** Everything namespaced goes to the provider's own namespace, with the webhook
//!   and conversion Services and the RBAC subjects that name it.
//! - **The manager.** Watches the pool's namespace only (`--namespace`); runs the spec's image if
//!   it names one; keeps no fixed user or group (OpenShift's `restricted-v2` admits only the
//!   namespace's range, and assigns one); CAPZ gets the Government authority
//!   (`AZURE_AUTHORITY_HOST`) and the path of its projected token (`AZURE_FEDERATED_TOKEN_FILE`,
//!   which the Azure workload-identity webhook would set, and OpenShift does not run).
//! - **Placement and diagnosis.** Every Deployment xcsp installs runs on the cluster's control-plane
//!   Nodes (`nodeSelector` `node-role.kubernetes.io/control-plane`, tolerating its `NoSchedule`
//!   taints), as OpenShift places its own Cluster API operator
//!   (openshift/cluster-capi-operator `manifests/0000_30_cluster-api-operator_06_deployment.yaml`):
//!   the release manifests only tolerate those taints, so the scheduler may put a manager on a pool
//!   Node in Azure, where a cut link takes down the manager that would repair it. Every container
//!   reports its log's tail as its termination message (`terminationMessagePolicy:
//!   FallbackToLogsOnError`, which OpenShift sets on every provider container: cluster-capi-operator
//!   `manifests-gen/customizations.go` `customizeDeployments`), so `xcsp status` can name a crashed
//!   manager's last error from its Pod.
//! - **Azure Service Operator**, which CAPZ's release adds and OpenShift's manifests leave out
//!   (its API is switched off): its objects go.
//! - **CRDs another manager owns** are left alone (the IPAM CRDs the cluster-version operator
//!   installs on every OpenShift cluster); preflight refuses one the pool needs.
//!
//! Every object carries the stack's label and the provider's address, so refresh finds it and
//! destroy removes only what xcsp installed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as Json, json};
use xcsp_core::{ADDRESS_TAG, STACK_TAG};

/// The service CA's annotations (openshift/service-ca-operator).
pub const SERVING_CERT: &str = "service.beta.openshift.io/serving-cert-secret-name";
pub const INJECT_CABUNDLE: &str = "service.beta.openshift.io/inject-cabundle";
/// cert-manager's, which the release manifests carry.
const CERT_MANAGER_INJECT: &str = "cert-manager.io/inject-ca-from";
/// On the manager Deployment: the components file's digest it was made from.
pub const DIGEST_ANNOTATION: &str = "xcsp.io/components-digest";
pub const COMPONENTS_ANNOTATION: &str = "xcsp.io/components";
/// Where CAPZ's workload identity reads its token (CAPZ `azure/scope/workload_identity.go`).
pub const AZURE_TOKEN_FILE: &str = "/var/run/secrets/azure/tokens/azure-identity-token";

/// The variables xcsp sets; every other one takes its default.
pub fn variables(provider: &str) -> BTreeMap<&'static str, &'static str> {
    let mut v = BTreeMap::from([("EXP_MACHINE_POOL", "false")]);
    if provider == "cluster-api" {
        // The pool's MachineSets carry its taints (`nvidia.com/gpu`), which Cluster API's MachineSet
        // webhook refuses unless this alpha gate is on (`internal/webhooks/machineset.go`: "taints
        // are not allowed to be set when the feature gate MachineTaintPropagation is disabled");
        // OpenShift's own manifests turn it on from its main branch.
        v.insert("EXP_MACHINE_TAINT_PROPAGATION", "true");
        // As OpenShift's manifests set it (openshift/cluster-api main,
        // `openshift/capi-operator-manifests/default/manifests.yaml`).
        v.insert("EXP_MACHINE_SET_PREFLIGHT_CHECKS", "false");
    }
    if provider == "infrastructure-azure" {
        v.extend([("EXP_ASO_API", "false"), ("EXP_AKS_RESOURCE_HEALTH", "false"), ("EXP_EDGEZONE", "false")]);
    }
    v
}

/// clusterctl's variable syntax over `text`: `${NAME}`, `${NAME:=default}`, `${NAME:-default}`
/// (a quoted empty default `""` is the empty string's YAML).
pub fn envsubst(text: &str, vars: &BTreeMap<&str, &str>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut missing = BTreeSet::new();
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        let (name, default) = match inner.find(":=").or_else(|| inner.find(":-")) {
            Some(i) => (&inner[..i], Some(&inner[i + 2..])),
            None => (inner, None),
        };
        match (vars.get(name), default) {
            (Some(v), _) => out.push_str(v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                missing.insert(name.to_string());
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "the components need variables xcsp does not set: {}",
            missing.into_iter().collect::<Vec<_>>().join(", ")
        ))
    }
}

/// The YAML documents of `text`.
pub fn documents(text: &str) -> Result<Vec<Json>, String> {
    let mut docs = Vec::new();
    for doc in serde_norway::Deserializer::from_str(text) {
        let v: Json = serde::Deserialize::deserialize(doc).map_err(|e| format!("not YAML documents: {e}"))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

/// How one provider is installed.
#[derive(Debug, Clone)]
pub struct Install<'a> {
    pub stack: &'a str,
    pub address: &'a str,
    pub provider: &'a str,
    pub namespace: &'a str,
    pub watch_namespace: &'a str,
    pub image: &'a str,
    /// `AZURE_AUTHORITY_HOST` for CAPZ (empty: the SDK's default, the public cloud).
    pub authority_host: &'a str,
    pub components: &'a str,
    pub digest: &'a str,
}

/// Kinds that live in no namespace.
fn cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "CustomResourceDefinition"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "ValidatingWebhookConfiguration"
            | "MutatingWebhookConfiguration"
            | "Namespace"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
    )
}

/// Azure Service Operator's objects in CAPZ's release manifests.
fn is_aso(doc: &Json) -> bool {
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    let group = doc["spec"]["group"].as_str().unwrap_or_default();
    name.starts_with("azureserviceoperator-")
        || name == "aso-controller-settings"
        || (doc["kind"] == "CustomResourceDefinition" && group.ends_with(".azure.com"))
}

/// The provider's objects as xcsp installs them (see the module documentation), the CRDs in
/// `skip` left out; the Namespace first, then CRDs, then the rest in the file's order.
pub fn transform(docs: Vec<Json>, i: &Install, skip: &BTreeSet<String>) -> Vec<Json> {
    // The Secret the manager mounts for its webhook server's certificate.
    let cert_secret = docs
        .iter()
        .filter(|d| d["kind"] == "Deployment" && !is_aso(d))
        .flat_map(|d| d["spec"]["template"]["spec"]["volumes"].as_array().cloned().unwrap_or_default())
        .find_map(|v| v["secret"]["secretName"].as_str().filter(|n| n.contains("webhook")).map(String::from));
    let mut crds = Vec::new();
    let mut rest = Vec::new();
    for mut doc in docs {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
        if kind == "Namespace"
            || doc["apiVersion"].as_str().is_some_and(|v| v.starts_with("cert-manager.io/"))
            || is_aso(&doc)
            || (kind == "CustomResourceDefinition" && skip.contains(&name))
        {
            continue;
        }
        let meta = &mut doc["metadata"];
        meta["labels"][STACK_TAG] = json!(i.stack);
        meta["annotations"][ADDRESS_TAG] = json!(i.address);
        if let Some(a) = meta["annotations"].as_object_mut()
            && a.remove(CERT_MANAGER_INJECT).is_some()
        {
            a.insert(INJECT_CABUNDLE.into(), json!("true"));
        }
        if !cluster_scoped(&kind) {
            meta["namespace"] = json!(i.namespace);
        }
        match kind.as_str() {
            "CustomResourceDefinition" => {
                if doc["spec"]["conversion"]["webhook"]["clientConfig"]["service"].is_object() {
                    doc["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"] = json!(i.namespace);
                }
            }
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                for w in doc["webhooks"].as_array_mut().into_iter().flatten() {
                    if w["clientConfig"]["service"].is_object() {
                        w["clientConfig"]["service"]["namespace"] = json!(i.namespace);
                    }
                }
            }
            "ClusterRoleBinding" | "RoleBinding" => {
                for s in doc["subjects"].as_array_mut().into_iter().flatten() {
                    if s["kind"] == "ServiceAccount" {
                        s["namespace"] = json!(i.namespace);
                    }
                }
            }
            "Service" => {
                if let Some(secret) = &cert_secret
                    && name.contains("webhook")
                {
                    doc["metadata"]["annotations"][SERVING_CERT] = json!(secret);
                }
            }
            "Deployment" => manager(&mut doc, i),
            _ => {}
        }
        if kind == "CustomResourceDefinition" { crds.push(doc) } else { rest.push(doc) }
    }
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": i.namespace, "labels": {STACK_TAG: i.stack}, "annotations": {ADDRESS_TAG: i.address}}});
    std::iter::once(namespace).chain(crds).chain(rest).collect()
}

/// The label of the cluster's control-plane Nodes, and the taints they carry (OpenShift keeps the
/// older `master` one beside it).
pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
const CONTROL_PLANE_TAINTS: [&str; 2] = ["node-role.kubernetes.io/master", CONTROL_PLANE];

/// A pod template's spec placed on the control-plane Nodes, its containers' termination message
/// their log's tail (the module documentation says why).
fn place_and_diagnose(spec: &mut Json) {
    spec["nodeSelector"][CONTROL_PLANE] = json!("");
    let mut tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
    for key in CONTROL_PLANE_TAINTS {
        if !tolerations.iter().any(|t| t["key"] == key && t["effect"] == "NoSchedule") {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoSchedule"}));
        }
    }
    spec["tolerations"] = json!(tolerations);
    for c in spec["containers"].as_array_mut().into_iter().flatten() {
        c["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    }
}

/// The manager Deployment as xcsp runs it.
fn manager(doc: &mut Json, i: &Install) {
    doc["metadata"]["annotations"][DIGEST_ANNOTATION] = json!(i.digest);
    doc["metadata"]["annotations"][COMPONENTS_ANNOTATION] = json!(i.components);
    let spec = &mut doc["spec"]["template"]["spec"];
    place_and_diagnose(spec);
    if let Some(ctx) = spec["securityContext"].as_object_mut() {
        ctx.remove("runAsUser");
        ctx.remove("runAsGroup");
    }
    for c in spec["containers"].as_array_mut().into_iter().flatten() {
        if let Some(ctx) = c["securityContext"].as_object_mut() {
            ctx.remove("runAsUser");
            ctx.remove("runAsGroup");
        }
        if c["name"] != "manager" {
            continue;
        }
        c["image"] = json!(i.image);
        let mut args: Vec<Json> = c["args"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|a| !a.as_str().is_some_and(|a| a.starts_with("--namespace=")))
            .collect();
        args.push(json!(format!("--namespace={}", i.watch_namespace)));
        c["args"] = json!(args);
        if i.provider == "infrastructure-azure" {
            let mut env: Vec<Json> = c["env"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|e| e["name"] != "AZURE_AUTHORITY_HOST" && e["name"] != "AZURE_FEDERATED_TOKEN_FILE")
                .collect();
            env.push(json!({"name": "AZURE_FEDERATED_TOKEN_FILE", "value": AZURE_TOKEN_FILE}));
            if !i.authority_host.is_empty() {
                env.push(json!({"name": "AZURE_AUTHORITY_HOST", "value": i.authority_host}));
            }
            c["env"] = json!(env);
        }
    }
}

/// A machine approver for the pool's Cluster API Machines, as OpenShift's own
/// `machine-approver-capi` runs (openshift/cluster-machine-approver `manifests/04-deployment-capi.yaml`,
/// `01-rbac.yaml`, `01-rbac-capi.yaml`), with `image` (the cluster's approver's), restricted to
/// `watch_namespace` (`--machine-namespace`), without the host network and metrics proxy, and with
/// its roles named for xcsp: OpenShift's rules but the Machine API's machines and the
/// ClusterOperator (its status controller is off, as in `machine-approver-capi`).
pub fn approver(i: &Install, image: &str) -> Vec<Json> {
    let meta = |name: &str, ns: Option<&str>| {
        let mut m = json!({"name": name, "labels": {STACK_TAG: i.stack}, "annotations": {ADDRESS_TAG: i.address}});
        if let Some(ns) = ns {
            m["namespace"] = json!(ns);
        }
        m
    };
    let account = "xcsp-machine-approver";
    let cluster_role = format!("xcsp:machine-approver-capi:{}", i.watch_namespace);
    let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": i.namespace}]);
    let rbac = "rbac.authorization.k8s.io/v1";
    // The namespace is the core provider's, which the approver comes after.
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(account, Some(i.namespace))}),
        json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": meta(&cluster_role, None), "rules": [
            {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]},
            {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                "resourceNames": ["kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"], "verbs": ["approve"]},
            {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            // Its controller watches ConfigMaps across the cluster (the CSR signer's CA in
            // openshift-config-managed among them: `pkg/controller/controller.go`).
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["config.openshift.io"], "resources": ["networks"], "verbs": ["get"]},
            {"apiGroups": ["network.openshift.io"], "resources": ["hostsubnets"], "verbs": ["get"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ]}),
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": meta(&cluster_role, None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role}, "subjects": subject}),
        json!({"apiVersion": rbac, "kind": "Role", "metadata": meta(account, Some(i.namespace)), "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "delete"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        ]}),
        json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": meta(account, Some(i.namespace)),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account}, "subjects": subject}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": i.provider, "namespace": i.namespace,
            "labels": {STACK_TAG: i.stack, "app": i.provider},
            "annotations": {ADDRESS_TAG: i.address, COMPONENTS_ANNOTATION: i.components}},
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": i.provider}},
            "template": {"metadata": {"labels": {"app": i.provider}}, "spec": {
                "serviceAccountName": account,
                "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{
                    "name": "machine-approver-controller",
                    "image": image,
                    "command": ["/usr/bin/machine-approver"],
                    "args": [
                        "--logtostderr", "-v=2",
                        "--leader-elect=true",
                        format!("--leader-elect-resource-namespace={}", i.namespace),
                        "--leader-elect-resource-name=xcsp-machine-approver-capi-leader",
                        "--api-group-version=cluster.x-k8s.io/v1beta1",
                        format!("--machine-namespace={}", i.watch_namespace),
                        "--disable-status-controller=true",
                    ],
                    "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                }],
            }},
        }}),
    ];
    if let Some(d) = objects.iter_mut().find(|o| o["kind"] == "Deployment") {
        place_and_diagnose(&mut d["spec"]["template"]["spec"]);
    }
    objects
}

/// What a manager's Pods say of its health, as `kubectl describe pod` shows it: how many times its
/// containers restarted (the kubelet's `restartCount`, summed over the Pods), and the newest
/// error: a container's last termination (`lastState.terminated`: exit code, reason and, with
/// `FallbackToLogsOnError`, its log's tail) or why it is waiting (`CrashLoopBackOff`,
/// `CreateContainerConfigError`, `ImagePullBackOff`), or why its Pod is not scheduled.
pub fn pod_health(pods: &[Json]) -> (i64, Option<String>) {
    let mut restarts = 0;
    // (when, text): the newest termination wins; a waiting reason is now.
    let mut newest: Option<(String, String)> = None;
    let mut waiting = None;
    for p in pods {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        for c in p["status"]["containerStatuses"].as_array().into_iter().flatten() {
            restarts += c["restartCount"].as_i64().unwrap_or(0);
            let t = &c["lastState"]["terminated"];
            if t.is_object() {
                let when = t["finishedAt"].as_str().unwrap_or_default().to_string();
                let message = t["message"].as_str().map(str::trim).filter(|m| !m.is_empty());
                let text = format!(
                    "container {} of Pod {name} exited with code {} ({}) at {when}{}",
                    c["name"].as_str().unwrap_or_default(),
                    t["exitCode"].as_i64().unwrap_or_default(),
                    t["reason"].as_str().unwrap_or("Error"),
                    message.map(|m| format!(": {}", last_line(m))).unwrap_or_default()
                );
                if newest.as_ref().is_none_or(|(w, _)| when > *w) {
                    newest = Some((when, text));
                }
            }
            let w = &c["state"]["waiting"];
            if let Some(reason) = w["reason"].as_str().filter(|r| *r != "ContainerCreating") {
                let message = w["message"].as_str().map(|m| format!(": {m}")).unwrap_or_default();
                waiting = Some(format!("Pod {name} is waiting ({reason}){message}"));
            }
        }
        let scheduled =
            p["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "PodScheduled");
        if let Some(c) = scheduled.filter(|c| c["status"] == "False") {
            waiting = Some(format!(
                "Pod {name} is not scheduled ({}): {}",
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            ));
        }
    }
    let last = match (waiting, newest) {
        (Some(w), Some((_, t))) => Some(format!("{w}; last exit: {t}")),
        (Some(w), None) => Some(w),
        (None, t) => t.map(|(_, t)| t),
    };
    (restarts, last)
}

/// The last line of a termination message that names an error (a manager's log ends with the
/// error it exits on), else its last line.
fn last_line(message: &str) -> &str {
    let lines: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines.iter().rev().find(|l| l.contains("error") || l.starts_with('E')).or(lines.last()).copied().unwrap_or(message)
}

/// The manager Deployment among `objects`.
pub fn deployment(objects: &[Json]) -> Option<&Json> {
    objects.iter().find(|o| o["kind"] == "Deployment")
}

/// What refresh records of a provider, from its manager Deployment.
pub fn observe(d: &Json) -> BTreeMap<&'static str, Json> {
    let meta = &d["metadata"];
    let containers = d["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
    let manager = containers
        .iter()
        .find(|c| c["name"] == "manager" || c["name"] == "machine-approver-controller")
        .cloned()
        .unwrap_or(Json::Null);
    let image = manager["image"].as_str().unwrap_or_default().to_string();
    let args: Vec<&str> = manager["args"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
    let watch = args.iter().find_map(|a| a.strip_prefix("--namespace=")).unwrap_or_default();
    let env = |name: &str| {
        manager["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    // Available as the Deployment's controller says it, for the template it was given: a
    // rollout not observed yet, or whose new pod is not up, is not (one replica keeps the old pod
    // Available while the new one fails).
    let status = &d["status"];
    let wanted = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let observed = status["observedGeneration"].as_i64().unwrap_or(0) >= meta["generation"].as_i64().unwrap_or(0);
    let rolled = status["updatedReplicas"].as_i64().unwrap_or(0) >= wanted
        && status["availableReplicas"].as_i64().unwrap_or(0) >= wanted;
    let available = observed
        && rolled
        && status["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Available" && c["status"] == "True"));
    let mut out = BTreeMap::from([
        ("namespace", json!(meta["namespace"])),
        ("image", json!(image)),
        ("version", json!(xcsp_plans_version(&image))),
        ("watch_namespace", json!(watch)),
        ("components", json!(meta["annotations"][COMPONENTS_ANNOTATION])),
        ("components_digest", json!(meta["annotations"][DIGEST_ANNOTATION])),
        ("available", json!(available)),
        ("name", json!(meta["labels"]["cluster.x-k8s.io/provider"])),
    ]);
    if out["name"] == "infrastructure-azure" {
        out.insert("authority_host", json!(env("AZURE_AUTHORITY_HOST")));
    }
    if !available {
        // Why, for `xcsp status` (not compared by plan: the spec asks for `available`).
        out.insert("condition", json!(unavailable_because(d)));
    }
    if manager["name"] == "machine-approver-controller" {
        // The approver's image is the cluster's approver's, read at apply: what the plan names
        // is where it comes from, and its namespace is the Machines' it approves.
        let machines = args.iter().find_map(|a| a.strip_prefix("--machine-namespace=")).unwrap_or_default();
        for k in ["image", "version", "components", "components_digest"] {
            out.remove(k);
        }
        out.insert("name", json!(meta["name"]));
        out.insert("image_from", json!(meta["annotations"][COMPONENTS_ANNOTATION]));
        out.insert("watch_namespace", json!(machines));
    }
    out
}

/// The version an image's tag says (as the plan computes it).
fn xcsp_plans_version(image: &str) -> String {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.split_once(':').map_or("unknown".to_string(), |(_, tag)| tag.to_string())
}

/// Why a Deployment is not available, as its conditions say (the replica-set controller's
/// `FailedCreate`, an admission refusal among them), or that its controller has not rolled the
/// current template out yet.
pub fn unavailable_because(d: &Json) -> String {
    let status = &d["status"];
    if status["observedGeneration"].as_i64().unwrap_or(0) < d["metadata"]["generation"].as_i64().unwrap_or(0) {
        return "its controller has not observed the current template yet".into();
    }
    let conditions = d["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let failure = conditions.iter().find(|c| c["type"] == "ReplicaFailure" && c["status"] == "True");
    let available = conditions.iter().find(|c| c["type"] == "Available");
    failure
        .or(available)
        .and_then(|c| c["message"].as_str())
        .unwrap_or("no status yet (no controller has looked at it)")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install() -> Install<'static> {
        Install {
            stack: "il5",
            address: "k8s_cluster_api_provider.azure",
            provider: "infrastructure-azure",
            namespace: "xcsp-capz-system",
            watch_namespace: "xcsp-il5",
            image: "mirror.example.mil/capz:v1.26.0",
            authority_host: "https://login.microsoftonline.us/",
            components: "/specs/capz.yaml",
            digest: "abc",
        }
    }

    #[test]
    fn variables_take_their_defaults_and_xcsps_values() {
        let vars = variables("infrastructure-azure");
        let text = "a: ${EXP_ASO_API:=true}\nb: ${CAPZ_DIAGNOSTICS_ADDRESS:=:8443}\nc: ${X:-\"\"}\n";
        assert_eq!(envsubst(text, &vars).unwrap(), "a: false\nb: :8443\nc: \"\"\n");
        assert!(envsubst("${AZURE_SUBSCRIPTION_ID}", &vars).unwrap_err().contains("AZURE_SUBSCRIPTION_ID"));
    }

    #[test]
    fn azure_service_operators_deployment_before_capzs_is_left_out() {
        // `kustomize build config/default` sorts ASO's Deployment before CAPZ's.
        let docs = documents(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: azureserviceoperator-controller-manager, namespace: capz-system}
spec:
  template:
    spec:
      containers: [{name: manager, image: mcr.microsoft.com/k8s/azureserviceoperator:v2.18.0}]
      volumes: [{name: cert, secret: {secretName: webhook-server-cert}}]
---
apiVersion: v1
kind: Service
metadata: {name: capz-webhook-service, namespace: capz-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: capz-controller-manager, namespace: capz-system}
spec:
  template:
    spec:
      containers: [{name: manager, image: registry.k8s.io/cluster-api-azure/cluster-api-azure-controller:v1.26.0}]
      volumes: [{name: cert, secret: {secretName: capz-webhook-service-cert}}]
"#,
        )
        .unwrap();
        let out = transform(docs, &install(), &BTreeSet::new());
        let deployments: Vec<&Json> = out.iter().filter(|o| o["kind"] == "Deployment").collect();
        assert_eq!(deployments.len(), 1);
        assert_eq!(deployments[0]["metadata"]["name"], "capz-controller-manager");
        let service = out.iter().find(|o| o["kind"] == "Service").unwrap();
        assert_eq!(service["metadata"]["annotations"][SERVING_CERT], "capz-webhook-service-cert");
    }

    #[test]
    fn a_managers_pods_give_its_restarts_and_newest_error() {
        let pod = |name: &str, restarts: i64, finished: &str, message: &str, waiting: Option<&str>| {
            let mut c = json!({"name": "manager", "restartCount": restarts, "state": {"running": {}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": finished, "message": message}}});
            if let Some(w) = waiting {
                c["state"] = json!({"waiting": {"reason": w, "message": "back-off 20s restarting failed container"}});
            }
            json!({"metadata": {"name": name}, "status": {"containerStatuses": [c]}})
        };
        assert_eq!(pod_health(&[]), (0, None));
        let log = "I1203 starting\nE1203 setup.go:90] \"unable to create controller\" err=\"no kind\"\nI1203 exiting\n";
        let (n, e) = pod_health(&[
            pod("a", 1, "2026-12-03T10:00:00Z", "old", None),
            pod("b", 2, "2026-12-03T11:00:00Z", log, None),
        ]);
        assert_eq!(n, 3);
        assert_eq!(
            e.as_deref(),
            Some(
                "container manager of Pod b exited with code 1 (Error) at 2026-12-03T11:00:00Z: E1203 setup.go:90] \"unable to create controller\" err=\"no kind\""
            )
        );
        let (_, e) = pod_health(&[pod("c", 4, "2026-12-03T12:00:00Z", "", Some("CrashLoopBackOff"))]);
        let e = e.unwrap();
        assert!(e.starts_with("Pod c is waiting (CrashLoopBackOff): back-off 20s"), "{e}");
        assert!(
            e.ends_with("last exit: container manager of Pod c exited with code 1 (Error) at 2026-12-03T12:00:00Z"),
            "{e}"
        );
        let pending = json!({"metadata": {"name": "d"}, "status": {"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/3 nodes are available"}]}});
        assert_eq!(
            pod_health(&[pending]).1.as_deref(),
            Some("Pod d is not scheduled (Unschedulable): 0/3 nodes are available")
        );
    }

    #[test]
    fn a_rollout_not_yet_observed_or_done_is_not_available() {
        let d = |generation: i64, observed: i64, updated: i64| {
            json!({"metadata": {"generation": generation}, "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "manager", "image": "x:v1"}]}}},
                "status": {"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": 1,
                    "conditions": [{"type": "Available", "status": "True"}]}})
        };
        assert_eq!(observe(&d(2, 2, 1))["available"], true);
        assert_eq!(observe(&d(3, 2, 1))["available"], false);
        assert!(unavailable_because(&d(3, 2, 1)).contains("not observed"));
        assert_eq!(observe(&d(3, 3, 0))["available"], false);
    }

    #[test]
    fn the_release_manifests_become_what_openshift_admits() {
        let docs = documents(
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: capz-system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: azuremachines.infrastructure.cluster.x-k8s.io
  annotations: {cert-manager.io/inject-ca-from: capz-system/capz-serving-cert}
spec:
  group: infrastructure.cluster.x-k8s.io
  conversion: {strategy: Webhook, webhook: {clientConfig: {service: {name: capz-webhook-service, namespace: capz-system}}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: resourcegroups.resources.azure.com}
spec: {group: resources.azure.com}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ipaddresses.ipam.cluster.x-k8s.io}
spec: {group: ipam.cluster.x-k8s.io}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: capz-serving-cert, namespace: capz-system}
---
apiVersion: v1
kind: Service
metadata: {name: capz-webhook-service, namespace: capz-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: capz-manager-rolebinding}
subjects: [{kind: ServiceAccount, name: capz-manager, namespace: capz-system}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: capz-validating-webhook-configuration
  annotations: {cert-manager.io/inject-ca-from: capz-system/capz-serving-cert}
webhooks: [{name: v.azuremachine, clientConfig: {service: {name: capz-webhook-service, namespace: capz-system}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: capz-controller-manager, namespace: capz-system}
spec:
  template:
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
      - name: manager
        image: registry.k8s.io/cluster-api-azure/cluster-api-azure-controller:v1.26.0
        args: [--leader-elect, --namespace=other]
        env: [{name: AZURE_AUTHORITY_HOST, value: x}]
        securityContext: {runAsUser: 65532, runAsGroup: 65532, allowPrivilegeEscalation: false}
      volumes: [{name: cert, secret: {secretName: capz-webhook-service-cert}}]
"#,
        )
        .unwrap();
        let skip = BTreeSet::from(["ipaddresses.ipam.cluster.x-k8s.io".to_string()]);
        let out = transform(docs, &install(), &skip);
        let kinds: Vec<&str> = out.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "CustomResourceDefinition",
                "Service",
                "ClusterRoleBinding",
                "ValidatingWebhookConfiguration",
                "Deployment"
            ]
        );
        assert_eq!(out[0]["metadata"]["name"], "xcsp-capz-system");
        let crd = &out[1];
        assert_eq!(crd["metadata"]["annotations"][INJECT_CABUNDLE], "true");
        assert!(crd["metadata"]["annotations"].get(CERT_MANAGER_INJECT).is_none());
        assert_eq!(crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"], "xcsp-capz-system");
        assert_eq!(out[2]["metadata"]["annotations"][SERVING_CERT], "capz-webhook-service-cert");
        assert_eq!(out[2]["metadata"]["namespace"], "xcsp-capz-system");
        assert_eq!(out[3]["subjects"][0]["namespace"], "xcsp-capz-system");
        assert_eq!(out[4]["webhooks"][0]["clientConfig"]["service"]["namespace"], "xcsp-capz-system");
        let d = &out[5];
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "mirror.example.mil/capz:v1.26.0");
        assert_eq!(c["args"], json!(["--leader-elect", "--namespace=xcsp-il5"]));
        assert!(c["securityContext"].get("runAsUser").is_none());
        assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"], json!({CONTROL_PLANE: ""}));
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
                {"key": CONTROL_PLANE, "operator": "Exists", "effect": "NoSchedule"}])
        );
        assert_eq!(
            c["env"],
            json!([{"name": "AZURE_FEDERATED_TOKEN_FILE", "value": AZURE_TOKEN_FILE},
                {"name": "AZURE_AUTHORITY_HOST", "value": "https://login.microsoftonline.us/"}])
        );
        for o in &out {
            assert_eq!(o["metadata"]["labels"][STACK_TAG], "il5");
        }
        let seen = observe(d);
        assert_eq!(seen["watch_namespace"], "xcsp-il5");
        assert_eq!(seen["version"], "v1.26.0");
        assert_eq!(seen["components_digest"], "abc");
        assert_eq!(seen["available"], false);
    }
}
