//! The cluster read before anything changes (`xcsp preflight`, and plan and apply when a
//! kubeconfig is in reach): what the spec says against what the cluster is. A value the cluster
//! contradicts stops the command with both values and where each comes from; a cluster where
//! CAPZ cannot run gets a verdict saying what is missing. Without a kubeconfig the values come
//! from the spec, as they always did.

use std::collections::BTreeSet;

use miette::Severity;
use xcsp_core::Problem;
use xcsp_kube::Survey;
use xcsp_kube::survey::{CAPZ_DEPLOYMENT, OPENSHIFT_CAPI_NAMESPACE};
use xcsp_plans::spec::KubernetesObjects;
use xcsp_plans::validate::Model;

use crate::cluster::Kubeconfig;
use crate::{Say, StackError};

/// Reads the cluster `found` names.
pub async fn survey(found: &Kubeconfig) -> Result<Survey, String> {
    xcsp_kube::survey(&found.client_config()).await
}

fn with_severity(severity: Severity, p: Problem) -> Problem {
    Problem { severity, ..p }
}

/// An error at `severity` (a warning where the objects are only rendered); a warning as it is.
fn errors_at(severity: Severity, p: Problem) -> Problem {
    if p.is_error() { with_severity(severity, p) } else { p }
}

/// The spec against the cluster. Errors stop plan and apply; warnings are said and the run goes on.
pub fn check(model: &Model, s: &Survey) -> Vec<Problem> {
    let chosen = providers(model, s);
    // xcsp's CAPZ is the one that will present the identity's tokens.
    let with_ours;
    let s = if chosen.azure == Source::Xcsp {
        with_ours = Survey { capz: Some(xcsp_capz(model)), ..s.clone() };
        &with_ours
    } else {
        s
    };
    let mut problems = crd_owner_problems(model, s, &chosen);
    problems.extend(provider_image_problems(model, &chosen, &s.mirrors));
    // The identities' default subject is xcsp's CAPZ when the spec names CAPZ's components.
    let auto = model.cluster.cluster_api.providers.value == xcsp_plans::spec::ProvidersMode::Auto;
    if let (true, Source::Cluster(owner), Some(azure)) = (auto, &chosen.azure, &model.cluster.cluster_api.azure) {
        problems.push(
            Problem::error(
                "xcsp::cluster_api::azure_components",
                format!(
                    "the spec names CAPZ's components, but the cluster has CAPZ of its own (installed by {owner}), which xcsp uses with providers = \"auto\"; the workload identities would trust xcsp's CAPZ, which does not run"
                ),
            )
            .label(&azure.components.span, "CAPZ's components")
            .with_help("remove `azure_components` to use the cluster's CAPZ, or set providers = \"xcsp\" to install xcsp's"),
        );
        return problems;
    }
    problems.extend(check_with(model, s, &chosen));
    problems
}

fn check_with(model: &Model, s: &Survey, chosen: &Chosen) -> Vec<Problem> {
    let applying = model.cluster.kubernetes_objects.value == KubernetesObjects::Apply;
    // What the cluster would refuse stops an apply of the objects; with "render" it is said.
    let stop = if applying { Severity::Error } else { Severity::Warning };
    let mut problems = Vec::new();
    let cluster = &model.cluster;
    if applying && s.capi_versions.is_empty() && chosen.core != Source::Xcsp {
        problems.push(
            Problem::error("xcsp::cluster::no_capi", format!("the cluster serves no Cluster API (`cluster.x-k8s.io`){}", no_capi_why(s)))
                .label(&cluster.kubernetes_objects.span, "the pool's objects are applied to it")
                .with_help("name Cluster API's and CAPZ's release manifests in `cluster { cluster_api { core_components, azure_components } }` and xcsp installs them; on OpenShift, TechPreviewNoUpgrade would install Cluster API instead, but it can never be turned off and blocks every minor upgrade (docs/src/concepts/cluster-api-on-openshift.md)"),
        );
    }
    // xcsp writes Cluster API's objects in the first version the cluster prefers among those it
    // can write (`CAPI_VERSIONS`: v1beta1, v1beta2), and CAPZ's in `RENDERED_VERSION`; a cluster
    // that serves none of them would answer every write 404.
    let writable: [(&str, &Vec<String>, &[&str]); 2] = [
        ("cluster.x-k8s.io", &s.capi_versions, &xcsp_kube::CAPI_VERSIONS),
        ("infrastructure.cluster.x-k8s.io", &s.capz_versions, &[xcsp_kube::RENDERED_VERSION]),
    ];
    for (group, served, ours) in writable {
        // What xcsp installs, it writes in.
        let installed = if group == "cluster.x-k8s.io" { &chosen.core } else { &chosen.azure };
        if !served.is_empty() && *installed != Source::Xcsp && !served.iter().any(|v| ours.contains(&v.as_str())) {
            problems.push(with_severity(
                stop,
                Problem::error(
                    "xcsp::cluster::api_version",
                    format!(
                        "the cluster serves {group} {}; xcsp writes the pool's objects as {}",
                        served.join(", "),
                        ours.join(" or ")
                    ),
                )
                .label(&cluster.kubernetes_objects.span, "the pool's objects go to this cluster (kubernetes_objects)")
                .with_help("set kubernetes_objects = \"render\" and convert the written objects, or use a cluster that serves that version"),
            ));
        }
    }
    let Some(infra) = &s.openshift else {
        problems.push(
            Problem::warning(
                "xcsp::cluster::not_openshift",
                "the cluster has no OpenShift `Infrastructure` object (config.openshift.io/v1, `cluster`): it is not OpenShift, so the infrastructure name and the identity's token are taken from the spec",
            )
            .label(&cluster.span, "the cluster"),
        );
        return problems;
    };
    if infra.name != cluster.infrastructure_name.value {
        problems.push(
            Problem::error(
                "xcsp::cluster::infrastructure_name",
                format!(
                    "the cluster's infrastructure name is `{}` (its Infrastructure object, status.infrastructureName), the spec says `{}`",
                    infra.name, cluster.infrastructure_name.value
                ),
            )
            .label(&cluster.infrastructure_name.span, "the spec's value")
            .with_help("the spec names another cluster than the kubeconfig reaches: fix the one that is wrong"),
        );
    }
    if infra.platform != "AWS" {
        problems.push(
            Problem::error(
                "xcsp::cluster::platform",
                format!(
                    "the cluster runs on `{}`; xcsp adds Azure workers to an OpenShift cluster on AWS",
                    infra.platform
                ),
            )
            .label(&cluster.span, "the cluster"),
        );
    }
    if let Some(mtu) = s.cluster_network_mtu {
        problems.extend(mtu_problem(model, mtu, s.ovn_ipsec).map(|p| with_severity(stop, p)));
        problems.extend(ipsec_problem(model, s.ovn_ipsec).map(|p| with_severity(stop, p)));
    }
    if let Some(fips) = s.fips {
        problems.extend(fips_problem(model, fips).map(|p| with_severity(stop, p)));
    }
    if let Some((https, no_proxy)) = &s.proxy {
        problems.extend(proxy_problems(model, https, no_proxy));
    }
    problems.extend(image_pull_problems(model, &s.mirrors).into_iter().map(|p| errors_at(stop, p)));
    if s.ebs_csi_node {
        problems.extend(ebs_csi_problem(model, s.boot_images.as_ref().map(|b| b.release.as_str())));
    }
    if let Some(images) = &s.boot_images {
        // A pinned version is a warning either way.
        problems.extend(boot_image_problems(model, images).into_iter().map(|p| errors_at(stop, p)));
    }
    match &s.capz {
        None if chosen.azure == Source::Xcsp => {}
        None => problems.push(with_severity(
            stop,
            Problem::error(
                "xcsp::cluster::no_capz",
                format!(
                    "OpenShift's CAPZ does not run in this cluster (no Deployment {OPENSHIFT_CAPI_NAMESPACE}/{CAPZ_DEPLOYMENT}): OpenShift installs only the platform's infrastructure provider, so on AWS nothing would turn the pool's CAPZ objects into machines"
                ),
            )
            .label(&cluster.kubernetes_objects.span, "the pool's objects go to this cluster (kubernetes_objects)")
            .with_help(
                "name CAPZ's release manifests (infrastructure-components.yaml) in `cluster { cluster_api { azure_components } }` and xcsp installs it; or set kubernetes_objects = \"render\" and write the objects with `xcsp render DIR`",
            ),
        )),
        Some(capz) => {
            if !s.machine_approver && chosen.approver != Source::Xcsp {
                use xcsp_kube::survey::{MACHINE_APPROVER_CAPI, MACHINE_APPROVER_NAMESPACE};
                problems.push(
                    Problem::warning(
                        "xcsp::cluster::no_machine_approver",
                        format!(
                            "no machine approver for Cluster API Machines runs (no Deployment {MACHINE_APPROVER_NAMESPACE}/{MACHINE_APPROVER_CAPI}; OpenShift deploys it only with the TechPreviewNoUpgrade feature set): the pool's nodes' certificate signing requests would stay Pending and no node would register"
                        ),
                    )
                    .label(&cluster.kubernetes_objects.span, "the pool's machines join this cluster")
                    .with_help("approve each new node's requests with `oc adm certificate approve`, or run a cluster with the machine approver for Cluster API"),
                );
            }
            if let Some(p) = authority_problem(model, capz) {
                problems.push(with_severity(stop, p));
            }
            for id in &model.identities {
                let audiences = [id.audience.value.clone()];
                for r in s.exchange_refusals(&id.issuer.value, &id.subject(), &audiences) {
                    let message = format!("workload identity `{}` {}", id.name.value, r.describe(s));
                    let problem = match r.field {
                        "subject" => Problem::error("xcsp::identity::subject", message)
                            .label(&id.service_account.span, "the spec's service account")
                            .with_help(format!(
                                "remove namespace and service_account to take CAPZ's, or set them to `{}` and `{}`",
                                capz.namespace, capz.service_account
                            )),
                        "issuer" => {
                            let help = if r.presented == xcsp_kube::survey::INTERNAL_ISSUER {
                                "the cluster's tokens carry its internal issuer, which Entra cannot reach: workload identity needs a cluster whose service-account issuer is a public OIDC endpoint (an STS-mode install sets Authentication.spec.serviceAccountIssuer)".to_string()
                            } else {
                                format!("set the issuer (cluster.oidc_issuer_url, or `issuer` in the block) to `{}`", r.presented)
                            };
                            Problem::error("xcsp::identity::issuer", message)
                                .label(&id.issuer.span, "the spec's issuer")
                                .with_help(help)
                        }
                        _ => Problem::error("xcsp::identity::audience", message)
                            .label(&id.audience.span, "the spec's audience")
                            .with_help("remove `audience` to take the token's"),
                    };
                    problems.push(problem);
                }
            }
        }
    }
    problems
}

/// Whose manager a provider of the pool is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The cluster's own: its CRDs are installed, by the owner said.
    Cluster(String),
    /// xcsp's, from the spec's components.
    Xcsp,
    /// Nobody's: the cluster has none and the spec names no components.
    Missing,
}

/// Whose each provider is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub core: Source,
    pub azure: Source,
    /// The machine approver for the pool's Cluster API Machines: OpenShift's `machine-approver-capi`
    /// where it runs, else xcsp's, which comes with xcsp's core provider.
    pub approver: Source,
}

/// The CRD that says a provider is installed: Cluster API's Cluster, CAPZ's AzureMachine.
const CORE_CRD: &str = "clusters.cluster.x-k8s.io";
const AZURE_CRD: &str = "azuremachines.infrastructure.cluster.x-k8s.io";

/// The CRDs the pool's objects are of: another manager's at another version than xcsp's
/// components would leave the pool's objects to a manager xcsp does not run.
const POOL_CRDS: &[&str] = &[
    "clusters.cluster.x-k8s.io",
    "machines.cluster.x-k8s.io",
    "machinesets.cluster.x-k8s.io",
    "machinehealthchecks.cluster.x-k8s.io",
    "azureclusters.infrastructure.cluster.x-k8s.io",
    "azureclusteridentities.infrastructure.cluster.x-k8s.io",
    "azuremachines.infrastructure.cluster.x-k8s.io",
    "azuremachinetemplates.infrastructure.cluster.x-k8s.io",
];

/// Whose each provider is, by the spec's `cluster_api` block and the cluster's CRDs: with
/// `providers = "auto"`, the cluster's where its CRD is installed by someone other than this
/// stack, else xcsp's where the spec names its components.
pub fn providers(model: &Model, s: &Survey) -> Chosen {
    use xcsp_plans::spec::ProvidersMode;
    let api = &model.cluster.cluster_api;
    let one = |crd: &str, named: bool| {
        let found = s.capi_crds.iter().find(|c| c.name == crd);
        let theirs = found.filter(|c| c.xcsp_stack.as_deref() != Some(model.stack.as_str()));
        match (api.providers.value, theirs, named) {
            (ProvidersMode::Cluster, Some(c), _) => Source::Cluster(c.owner.clone()),
            (ProvidersMode::Cluster, None, _) => Source::Missing,
            (ProvidersMode::Xcsp, _, true) => Source::Xcsp,
            (ProvidersMode::Auto, Some(c), _) => Source::Cluster(c.owner.clone()),
            (_, _, true) => Source::Xcsp,
            (_, _, false) => Source::Missing,
        }
    };
    let core = one(CORE_CRD, api.core.as_ref().is_some_and(|c| c.read.is_some()));
    let approver = if s.machine_approver {
        use xcsp_kube::survey::{MACHINE_APPROVER_CAPI, MACHINE_APPROVER_NAMESPACE};
        Source::Cluster(format!("OpenShift (Deployment {MACHINE_APPROVER_NAMESPACE}/{MACHINE_APPROVER_CAPI})"))
    } else if core == Source::Xcsp {
        Source::Xcsp
    } else {
        Source::Missing
    };
    Chosen { core, azure: one(AZURE_CRD, api.azure.as_ref().is_some_and(|c| c.read.is_some())), approver }
}

/// Whose a provider is, for a person.
pub fn source_text(s: &Source) -> String {
    match s {
        Source::Cluster(owner) => format!("the cluster's (installed by {owner})"),
        Source::Xcsp => "xcsp's (installed from the spec's cluster_api components)".into(),
        Source::Missing => "none (the cluster has none and the spec's cluster_api names no components)".into(),
    }
}

/// CAPZ as xcsp installs it: its release manifests' service account and projected token
/// (CAPZ `config/capz`: `capz-manager`, audience `api://AzureADTokenExchange`), in xcsp's namespace,
/// asking the spec's cloud's authority.
fn xcsp_capz(model: &Model) -> xcsp_kube::survey::Capz {
    let authority = spec_authority(model);
    xcsp_kube::survey::Capz {
        namespace: xcsp_plans::spec::XCSP_CAPZ_NAMESPACE.into(),
        deployment: CAPZ_DEPLOYMENT.into(),
        service_account: xcsp_plans::spec::CAPZ_SERVICE_ACCOUNT.into(),
        audiences: vec!["api://AzureADTokenExchange".into()],
        authority_host: (authority != PUBLIC_AUTHORITY).then(|| format!("{authority}/")),
    }
}

/// A CRD the pool needs that another manager owns, where xcsp installs the provider: xcsp would
/// not overwrite it, and the pool's objects would be served at that manager's versions.
fn crd_owner_problems(model: &Model, s: &Survey, chosen: &Chosen) -> Vec<Problem> {
    let api = &model.cluster.cluster_api;
    let mut out = Vec::new();
    // Another stack's providers watch only that stack's namespace (and go with its destroy):
    // one stack's install per cluster.
    if let Some(other) = s
        .capi_crds
        .iter()
        .find(|c| c.xcsp_stack.as_deref().is_some_and(|o| o != model.stack) && POOL_CRDS.contains(&c.name.as_str()))
    {
        let at = api.core.as_ref().or(api.azure.as_ref()).map(|p| p.components.span.clone());
        let mut p = Problem::error(
            "xcsp::cluster_api::other_stack",
            format!(
                "CRD {} is installed by {}: its managers watch only that stack's namespace, and its destroy removes them; xcsp installs Cluster API once per cluster",
                other.name, other.owner
            ),
        )
        .with_help("run this pool from that stack, or destroy it first");
        p = match at {
            Some(span) => p.label(&span, "this stack's providers"),
            None => p.label(&model.cluster.span, "the cluster"),
        };
        out.push(p);
        return out;
    }
    for (source, provider, group_of) in
        [(&chosen.core, &api.core, "cluster.x-k8s.io"), (&chosen.azure, &api.azure, "infrastructure.cluster.x-k8s.io")]
    {
        let (Source::Xcsp, Some(p)) = (source, provider) else { continue };
        let Some(read) = &p.read else { continue };
        for crd in s.capi_crds.iter().filter(|c| c.name.ends_with(&format!(".{group_of}")) || c.name == group_of) {
            let ours = crd.xcsp_stack.as_deref() == Some(model.stack.as_str());
            if ours || !POOL_CRDS.contains(&crd.name.as_str()) || !read.crds.contains(&crd.name) {
                continue;
            }
            out.push(
                Problem::error(
                    "xcsp::cluster_api::crd_owner",
                    format!(
                        "CRD {} is installed by {} (versions {}); xcsp would install {} {} and never overwrites another manager's CRD",
                        crd.name,
                        crd.owner,
                        crd.versions.join(", "),
                        read.provider,
                        read.version
                    ),
                )
                .label(&p.components.span, "xcsp installs this provider")
                .with_help("use the cluster's provider (providers = \"auto\" or \"cluster\"), or remove the other installation first"),
            );
        }
    }
    out
}

/// The images of the managers xcsp installs, against the cluster's mirrors: a cluster that pulls
/// through mirror sets is taken to be one that cannot reach every registry, so a manager image
/// no mirror set applies to is named before apply leaves its pod pulling. An ImageDigestMirrorSet
/// applies only to pulls by digest and an ImageTagMirrorSet only to pulls by tag (openshift/api
/// `config/v1/types_image_digest_mirror_set.go`, `types_image_tag_mirror_set.go`), so a mirror of
/// the other kind does not count. A cluster with no mirror set pulls from the source: nothing to say.
fn provider_image_problems(model: &Model, chosen: &Chosen, mirrors: &[xcsp_kube::survey::Mirror]) -> Vec<Problem> {
    if mirrors.is_empty() {
        return Vec::new();
    }
    let api = &model.cluster.cluster_api;
    let mut out = Vec::new();
    for (source, provider, field) in [(&chosen.core, &api.core, "core"), (&chosen.azure, &api.azure, "azure")] {
        let (Source::Xcsp, Some(p)) = (source, provider) else { continue };
        let image = match (&p.image, &p.read) {
            (Some(i), _) => i.value.clone(),
            (None, Some(read)) => read.image.clone(),
            (None, None) => continue,
        };
        let (repo, by_digest) = xcsp_plans::components::image_repository(&image);
        let (kind, other) = if by_digest {
            ("ImageDigestMirrorSet", "ImageTagMirrorSet")
        } else {
            ("ImageTagMirrorSet", "ImageDigestMirrorSet")
        };
        let covering: Vec<&xcsp_kube::survey::Mirror> =
            mirrors.iter().filter(|m| !m.mirrors.is_empty() && covers(&m.source, repo)).collect();
        if covering.iter().any(|m| m.object.starts_with(&format!("{kind}/"))) {
            continue;
        }
        let host = repo.split('/').next().unwrap_or(repo);
        let objects = |ms: &[&xcsp_kube::survey::Mirror]| {
            ms.iter().map(|m| m.object.as_str()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(", ")
        };
        let (message, help) = if covering.is_empty() {
            (
                format!(
                    "xcsp's {field} provider runs image {image}, and none of the cluster's mirror sets ({}) is for {repo}: its nodes would pull it from {host}, which a cluster that pulls through mirrors may not reach",
                    objects(&mirrors.iter().collect::<Vec<_>>())
                ),
                format!(
                    "mirror the image (`oc image mirror {image} <mirror>/<repository>`) and add an {kind} for {repo}, or set `{field}_image` in `cluster_api` to the mirrored reference"
                ),
            )
        } else {
            let how = if by_digest { "by digest" } else { "by tag" };
            (
                format!(
                    "xcsp's {field} provider runs image {image}, pulled {how}, and the cluster mirrors {repo} only in {} ({}), which applies to pulls {}: its nodes would pull it from {host}",
                    other,
                    objects(&covering),
                    if by_digest { "by tag" } else { "by digest" }
                ),
                if by_digest {
                    format!("add an ImageDigestMirrorSet for {repo}")
                } else {
                    format!(
                        "name the image by its digest (`{repo}@sha256:...`) as `{field}_image` in `cluster_api`, or add an ImageTagMirrorSet for {repo}"
                    )
                },
            )
        };
        let span = p.image.as_ref().map_or(&p.components.span, |i| &i.span);
        out.push(
            Problem::warning("xcsp::cluster_api::image_mirror", message)
                .label(span, "the manager's image")
                .with_help(help),
        );
    }
    out
}

/// Why an OpenShift cluster serves no Cluster API, as its feature set and ClusterOperators say
/// (docs/src/concepts/cluster-api-on-openshift.md); empty when the cluster says nothing of it.
fn no_capi_why(s: &Survey) -> String {
    match s.feature_set.as_deref() {
        Some("Default") if !s.capi_operator => ": it runs OpenShift's Default feature set, under which no release installs Cluster API on AWS (no `cluster-api` ClusterOperator, no Cluster API CRDs but the IPAM ones)".into(),
        Some(set) if !s.capi_operator => format!(": it runs OpenShift's {set} feature set, but no `cluster-api` ClusterOperator"),
        Some(set) => format!(": it runs OpenShift's {set} feature set and the `cluster-api` ClusterOperator, whose CRDs are not installed yet"),
        None => String::new(),
    }
}

/// Which Cluster API the pool's objects meet, and why (the preflight report's line).
fn capi_source(s: &Survey) -> String {
    let set = s.feature_set.as_deref().map(|f| format!("feature set {f}, ")).unwrap_or_default();
    if s.capi_operator {
        format!("OpenShift's ({set}ClusterOperator cluster-api)")
    } else if s.capi_versions.is_empty() {
        format!("none ({set}no ClusterOperator cluster-api, no core CRDs)")
    } else {
        format!("not OpenShift's ({set}no ClusterOperator cluster-api)")
    }
}

/// The public cloud's Entra authority, where the Azure SDK for Go asks when nothing says otherwise.
const PUBLIC_AUTHORITY: &str = "https://login.microsoftonline.com";

/// The Entra authority the spec's Azure cloud answers at (Microsoft Learn, "Azure Government
/// developer guide": `login.microsoftonline.us`; a custom cloud's `endpoints.authority`).
fn spec_authority(model: &Model) -> String {
    use xcsp_plans::spec::AzureCloud;
    let host = match model.azure.cloud.value {
        AzureCloud::Public => PUBLIC_AUTHORITY.to_string(),
        AzureCloud::UsGovernment => "https://login.microsoftonline.us".to_string(),
        AzureCloud::Custom => model.azure.endpoints.as_ref().map(|e| e.authority.value.clone()).unwrap_or_default(),
    };
    host.trim_end_matches('/').to_string()
}

/// Where OpenShift's CAPZ asks Entra for the pool's tokens against where the spec's tenant lives.
/// CAPZ builds its workload-identity credential without the cloud's authority
/// (cluster-api-provider-azure v1.26.0 `azure/scope/identity.go`, the `WorkloadIdentity` case; the
/// service-principal case sets it), so the Azure SDK for Go takes `AZURE_AUTHORITY_HOST` from its
/// environment, else the public cloud's (azidentity `setAuthorityHost`), and OpenShift's CAPZ
/// Deployment sets none (openshift/cluster-api-provider-azure
/// `openshift/capi-operator-manifests/default/manifests.yaml`). A tenant of another cloud is not
/// found there (Entra `AADSTS90002`), so no token, no VM.
fn authority_problem(model: &Model, capz: &xcsp_kube::survey::Capz) -> Option<Problem> {
    if model.identities.is_empty() {
        return None;
    }
    let wanted = spec_authority(model);
    let asks = capz.authority_host.as_deref().unwrap_or(PUBLIC_AUTHORITY).trim_end_matches('/').to_string();
    if asks == wanted {
        return None;
    }
    let why = match &capz.authority_host {
        Some(v) => format!("its manager's AZURE_AUTHORITY_HOST is `{v}`"),
        None => "its Deployment sets no AZURE_AUTHORITY_HOST, so the Azure SDK takes the public cloud's".to_string(),
    };
    let cloud = model.azure.cloud.value.as_str();
    Some(
        Problem::error(
            "xcsp::identity::authority",
            format!(
                "OpenShift's CAPZ asks Entra at `{asks}` for the pool's tokens ({why}; CAPZ builds its workload-identity credential without the cloud's authority), and the spec's tenant is in the `{cloud}` cloud, whose authority is `{wanted}`: Entra would not find the tenant there, so CAPZ would get no token and make no VM"
            ),
        )
        .label(&model.azure.cloud.span, "the spec's Azure cloud")
        .with_help(format!(
            "the cluster's owner sets it on CAPZ's manager container: `oc -n {ns} set env deployment/{dep} -c manager AZURE_AUTHORITY_HOST={wanted}/` (OpenShift's cluster-capi-operator owns that Deployment and may put it back on an upgrade: check it after each)",
            ns = capz.namespace,
            dep = capz.deployment
        )),
    )
}

/// The spec's `ovn_ipsec` against the network operator's `ipsecConfig.mode`: with IPsec between
/// nodes and the link closed to IKE and ESP, the pool's Nodes are Ready while every pod packet
/// between them and the cluster's nodes is dropped; the other way round the link opens what
/// nothing uses.
fn ipsec_problem(model: &Model, cluster_ipsec: bool) -> Option<Problem> {
    let spec = &model.cluster.ovn_ipsec;
    if spec.value == cluster_ipsec {
        return None;
    }
    let (message, help) = if cluster_ipsec {
        (
            "OVN-Kubernetes encrypts traffic between the cluster's nodes with IPsec (the network operator's Network cluster: ipsecConfig.mode Full); the spec's cluster says nothing of it",
            "set ovn_ipsec = true in the cluster block: the link then lets IKE (UDP 500, 4500) and ESP through to the pool's nodes, without which their pods cannot reach the cluster's",
        )
    } else {
        (
            "the spec's cluster says ovn_ipsec = true, but the network operator's Network cluster does not run IPsec between nodes (ipsecConfig.mode is not Full)",
            "remove ovn_ipsec = true, or turn IPsec on in the cluster first (oc patch networks.operator.openshift.io cluster)",
        )
    };
    Some(
        Problem::error("xcsp::cluster::ovn_ipsec", message)
            .label(&spec.span, "the spec's IPsec between nodes")
            .with_help(help),
    )
}

/// The spec's `fips` against the cluster's mode (its install-config): a pool of the other mode
/// would be nodes the cluster's compliance does not cover (FIPS on), or FIPS nodes among others
/// (FIPS off, which OpenShift supports only from install); and the spec's mode is what the link's
/// IPsec is checked against.
fn fips_problem(model: &Model, cluster_fips: bool) -> Option<Problem> {
    let spec = &model.cluster.fips;
    if spec.value == cluster_fips {
        return None;
    }
    let (message, help) = if cluster_fips {
        (
            "the cluster runs in FIPS mode (install-config `fips: true`, ConfigMap kube-system/cluster-config-v1); the spec's cluster says nothing of it",
            "set fips = true in the cluster block: the pool's nodes boot in FIPS mode and the link's IPsec is held to what FIPS allows",
        )
    } else {
        (
            "the spec's cluster says fips = true, but the cluster does not run in FIPS mode (its install-config, ConfigMap kube-system/cluster-config-v1)",
            "remove fips = true: OpenShift turns FIPS on only at install, so FIPS nodes would join a cluster whose others are not",
        )
    };
    Some(Problem::error("xcsp::cluster::fips", message).label(&spec.span, "the spec's FIPS mode").with_help(help))
}

/// The cluster-wide proxy against the pool's networks: the cluster's own components (the API
/// server reaching a kubelet for logs, exec and port-forward; operators reading the Nodes' metrics)
/// take the proxy for every address its `noProxy` does not hold (OpenShift, "Configuring the
/// cluster-wide proxy": `noProxy`, hostnames, domains, IP addresses or CIDRs to exclude), and the
/// proxy cannot reach the Azure VNet behind the link. A warning: the pool joins either way, and
/// the owner changes the Proxy.
fn proxy_problems(model: &Model, https: &str, no_proxy: &[String]) -> Vec<Problem> {
    let mut out = Vec::new();
    for n in &model.networks {
        let vnet = n.vnet_cidr.value;
        let held = no_proxy.iter().any(|e| e.parse::<ipnet::Ipv4Net>().is_ok_and(|c| c.contains(&vnet)));
        if held {
            continue;
        }
        let mut entries: Vec<&str> = no_proxy.iter().map(String::as_str).collect();
        let v = vnet.to_string();
        entries.push(&v);
        out.push(
            Problem::warning(
                "xcsp::cluster::proxy",
                format!(
                    "the cluster-wide proxy ({https}) does not exclude network `{}`'s VNet {vnet}: the control plane would send its calls to the pool's kubelets (logs, exec, metrics) to the proxy, which cannot reach them",
                    n.name.value
                ),
            )
            .label(&n.vnet_cidr.span, "the pool's VNet")
            .with_help(format!(
                "add the VNet to the Proxy's noProxy: `oc patch proxy/cluster --type=merge -p '{{\"spec\":{{\"noProxy\":\"<spec.noProxy>,{vnet}\"}}}}'` (keep what spec.noProxy holds; status shows it with the cluster's own entries: {})",
                entries.join(",")
            )),
        );
    }
    out
}

/// The repository OpenShift's release payload names its component images in (every node pulls
/// from it: the machine-config daemon, the network and DNS pods); the release image itself is in
/// `ocp-release` beside it.
const RELEASE_COMPONENTS: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev";

/// Whether a mirror source covers `repo`: a repository or a namespace prefix of it, or a
/// `*.domain` wildcard of its host (ImageDigestMirrorSet `source`).
fn covers(source: &str, repo: &str) -> bool {
    match source.strip_prefix("*.") {
        Some(domain) => repo.split('/').next().is_some_and(|h| h.ends_with(&format!(".{domain}"))),
        None => repo == source || repo.starts_with(&format!("{source}/")),
    }
}

/// How each pool's VMs will pull images, against the cluster's mirrors. A pool whose only way
/// out is the link (`egress = "link"`) pulls from the cluster's mirrors or not at all: AWS routes
/// nothing from a VPN connection on to the internet (Amazon VPC, "edge to edge routing" through a
/// VPN connection is not supported). An Amazon ECR mirror answers only with credentials the
/// kubelet's ECR credential provider takes from its EC2 instance role, which an Azure VM does not
/// have: where a source's only mirrors are in ECR and it may not fall back to the source
/// (`NeverContactSource`), or the pool has no way to the source, the pull fails.
fn image_pull_problems(model: &Model, mirrors: &[xcsp_kube::survey::Mirror]) -> Vec<Problem> {
    use xcsp_kube::survey::is_ecr;
    use xcsp_plans::spec::Egress;
    let mut out = Vec::new();
    let usable = |m: &xcsp_kube::survey::Mirror| m.hosts().any(|h| !is_ecr(h));
    let ecr_only: Vec<&xcsp_kube::survey::Mirror> =
        mirrors.iter().filter(|m| !m.mirrors.is_empty() && !usable(m)).collect();
    for p in &model.pools {
        let egress = &p.egress;
        let over_link = egress.value == Egress::Link;
        if over_link && !mirrors.iter().any(|m| usable(m) && covers(&m.source, RELEASE_COMPONENTS)) {
            let what = if mirrors.iter().any(|m| covers(&m.source, RELEASE_COMPONENTS)) {
                "the cluster mirrors its release only to Amazon ECR, which an Azure VM cannot pull from"
            } else {
                "the cluster mirrors no release image"
            };
            out.push(
                Problem::error(
                    "xcsp::pool::egress",
                    format!(
                        "pool `{}` pulls images only over the link (egress = \"link\"), and {what}: its nodes would pull {RELEASE_COMPONENTS} from the internet, which no VPN connection reaches",
                        p.name.value
                    ),
                )
                .label(&egress.span, "the pool's only way out")
                .with_help(
                    "mirror the release to a registry inside the VPC (`oc adm release mirror` or oc-mirror) and add its ImageDigestMirrorSet, or set egress = \"nat_gateway\"",
                ),
            );
            continue;
        }
        for m in &ecr_only {
            let fails = m.never_contact_source || over_link;
            let why = if m.never_contact_source {
                "and `mirrorSourcePolicy: NeverContactSource` forbids the source"
            } else if over_link {
                "and the pool reaches no source over the link"
            } else {
                "so each pull is refused by the mirror before it falls back to the source"
            };
            let message = format!(
                "{} mirrors {} only to Amazon ECR ({}): the kubelet's ECR credential provider takes credentials from its EC2 instance role, which pool `{}`'s Azure VMs have not, {why}",
                m.object,
                m.source,
                m.mirrors.join(", "),
                p.name.value
            );
            let problem = if fails {
                Problem::error("xcsp::cluster::ecr_mirror", message)
            } else {
                Problem::warning("xcsp::cluster::ecr_mirror", message)
            };
            out.push(problem.label(&egress.span, "how the pool pulls").with_help(
                "add a mirror outside ECR for this source (a registry in the VPC the link reaches), or let the pool reach the source (egress = \"nat_gateway\" and AllowContactingSource)",
            ));
        }
    }
    out
}

/// The AWS EBS CSI driver's node DaemonSet runs on every Linux node and tolerates every taint
/// (openshift/csi-operator `assets/overlays/aws-ebs/generated/standalone/node.yaml`), so the pool's
/// Nodes run it too. On an Azure VM its driver finds no EC2 instance metadata and exits at start
/// ("Failed to initialize metadata when it is required", kubernetes-sigs/aws-ebs-csi-driver
/// `cmd/main.go`), and its Pods restart for as long as the pool exists. The `storage`
/// ClusterOperator reports the DaemonSet's rollout (openshift/library-go
/// `csidrivernodeservicecontroller` `isProgressing`): before 4.21 Progressing while any Pod is
/// unavailable, so for as long as the pool exists; from 4.21 only while a new generation rolls out,
/// which with the pool's Pods never finishes, so from the driver's next rollout (an upgrade) on.
/// The rollout uses `maxUnavailable: 10%`, and every unavailable Pod counts against it (kubernetes
/// `pkg/controller/daemon/update.go` `rollingUpdate`): the pool's Pods stall the rollout on the
/// cluster's own AWS nodes too. The DaemonSet is the driver operator's: xcsp changes nothing of it
/// (the operator would undo it).
fn ebs_csi_problem(model: &Model, release: Option<&str>) -> Option<Problem> {
    let first = model.pools.first()?;
    let names: Vec<&str> = model.pools.iter().map(|p| p.name.value.as_str()).collect();
    let minor = release.and_then(|r| r.strip_prefix("4.")?.split('.').next()?.parse::<u32>().ok());
    let storage = match minor {
        Some(m) if m < 21 => "the `storage` ClusterOperator stays Progressing while the pool exists".to_string(),
        _ => format!(
            "from the driver's next rollout (an upgrade) on, the `storage` ClusterOperator stays Progressing (\"Waiting for DaemonSet to deploy node pods\"){}",
            release.map(|r| format!(" on this {r} cluster")).unwrap_or_default()
        ),
    };
    Some(
        Problem::warning(
            "xcsp::cluster::ebs_csi",
            format!(
                "the AWS EBS CSI driver's node DaemonSet ({}/{}) tolerates every taint and will run on pool {}'s Azure Nodes, where its driver finds no EC2 instance metadata and exits, restarting for as long as the pool exists; {storage}",
                xcsp_kube::survey::EBS_CSI_NAMESPACE,
                xcsp_kube::survey::EBS_CSI_NODE,
                names.join(", ")
            ),
        )
        .label(&first.span, "Azure Nodes")
        .with_help(
            "not harmless: the DaemonSet rolls out with maxUnavailable 10% (openshift/csi-operator assets), and the DaemonSet controller counts the pool's unavailable Pods against it (kubernetes pkg/controller/daemon/update.go), so at the driver's next rollout (an upgrade) no Pod on the cluster's own AWS nodes is replaced while the pool exists; the DaemonSet belongs to the driver's operator, which would undo any change, so before an upgrade plan for it with the driver's owner (or scale the pool to 0); the pool's Nodes cannot attach EBS volumes anyway (give their Pods Azure storage); `xcsp status` shows its Pods on the pool's Nodes and the operator's condition",
        ),
    )
}

/// A pool's marketplace image against the boot images the cluster's release publishes
/// (`coreos-bootimages`): OpenShift boots its new machines from its own release's image and
/// updates them from there, and an image of another release (the examples once booted 4.19 for a
/// 4.22 cluster) starts from an Ignition and an OS the release does not test. Only an image of
/// the cluster's own offer is compared (same publisher and offer: another release of the same
/// product); another image is the spec's override, left alone. The Hyper-V generation is the
/// spec's (`aro_<XY>` Generation 1, else 2). A SKU of another release is an error, a pinned
/// version other than the cluster's a warning (`latest` takes the newest of the release's SKU).
fn boot_image_problems(model: &Model, images: &xcsp_kube::survey::BootImages) -> Vec<Problem> {
    let mut out = Vec::new();
    for pool in &model.pools {
        if let xcsp_plans::spec::Image::Vhd(vhd) = &pool.image.value {
            out.extend(vhd_problem(pool, vhd, images));
            continue;
        }
        let xcsp_plans::spec::Image::Marketplace { publisher, offer, sku, version } = &pool.image.value else {
            continue;
        };
        let gen2 = !sku.starts_with("aro_");
        let Some(wanted) = (if gen2 { &images.gen2 } else { &images.gen1 }) else { continue };
        if !publisher.eq_ignore_ascii_case(&wanted.publisher) || !offer.eq_ignore_ascii_case(&wanted.offer) {
            continue;
        }
        let block = format!(
            "image {{ publisher = \"{}\", offer = \"{}\", sku = \"{}\", version = \"{}\" }}",
            wanted.publisher, wanted.offer, wanted.sku, wanted.version
        );
        let generation = if gen2 { "Generation 2" } else { "Generation 1" };
        if !sku.eq_ignore_ascii_case(&wanted.sku) {
            out.push(
                Problem::error(
                    "xcsp::pool::boot_image",
                    format!(
                        "pool `{}` boots `{offer}` SKU `{sku}`, but the cluster's release {} publishes `{}` as its {generation} boot image (ConfigMap openshift-machine-config-operator/coreos-bootimages)",
                        pool.name.value, images.release, wanted.sku
                    ),
                )
                .label(&pool.image.span, "the pool's image")
                .with_help(format!("boot the cluster's own: {block}")),
            );
        } else if version != "latest" && version != &wanted.version {
            out.push(older_boot_image(
                pool,
                format!(
                    "pool `{}` pins version `{version}` of `{sku}`; the cluster's release {} publishes `{}`",
                    pool.name.value, images.release, wanted.version
                ),
                &block,
            ));
        }
    }
    out
}

/// A pool importing a VHD other than the release's own (`azure-disk` in `coreos-bootimages`): a
/// warning, as for a pinned Marketplace version; the machines boot it and the machine-config
/// daemon moves them to the release's OS on their first boot, as OpenShift's own machines do from
/// an older boot image.
fn vhd_problem(
    pool: &xcsp_plans::spec::Pool,
    vhd: &xcsp_plans::spec::RhcosVhd,
    images: &xcsp_kube::survey::BootImages,
) -> Option<Problem> {
    let theirs = images.vhd.as_deref()?;
    if theirs == vhd.url || vhd.arch != "x86_64" {
        return None;
    }
    Some(older_boot_image(
        pool,
        format!(
            "pool `{}` imports RHCOS {}; the cluster's release {} publishes {theirs}",
            pool.name.value, vhd.build, images.release
        ),
        &format!("image {{ vhd = \"{theirs}\" }}"),
    ))
}

/// A pool booting another build of the release's image than the release publishes: a warning
/// (the machine-config daemon brings the OS to the release's), with the block of the cluster's own.
fn older_boot_image(pool: &xcsp_plans::spec::Pool, message: String, block: &str) -> Problem {
    Problem::warning("xcsp::pool::boot_image_version", message)
        .label(&pool.image.span, "the pool's image")
        .with_help(format!("boot the cluster's own: {block}"))
}

/// What an Azure VM's network interface carries: Azure's default MTU for a VM's NIC, 1500 bytes
/// (Microsoft Learn, "Configure the maximum transmission unit (MTU) for virtual machines in
/// Azure": 1,500 by default; larger only between VMs of one virtual network, never through a VPN
/// gateway).
const AZURE_NIC_MTU: i64 = 1500;
/// What OpenShift's network operator reserves per packet for OVN-Kubernetes' encapsulation:
/// Geneve's 100 bytes, 46 more with IPsec (cluster-network-operator `pkg/network/ovn_kubernetes.go`,
/// `getOVNEncapOverhead`); on AWS the cluster's MTU is the uplink's 9001 less that (8901).
const GENEVE_OVERHEAD: i64 = 100;
const IPSEC_OVERHEAD: i64 = 46;

/// The cluster's overlay MTU against the pool's path: the spec's `overlay_mtu` must be the
/// cluster's (every node runs OVN-Kubernetes at it), and it must fit the Azure NIC and every
/// IPsec tunnel with the encapsulation's overhead: ovnkube-node refuses to start on a node whose
/// interface cannot carry the overlay MTU plus the Geneve header (ovn-kubernetes
/// `go-controller/pkg/node/default_node_network_controller.go` `validateVTEPInterfaceMTU`), so
/// the Node never turns Ready, and a tunnel drops what exceeds its MTU.
fn mtu_problem(model: &Model, mtu: i64, ipsec: bool) -> Option<Problem> {
    let cluster = &model.cluster;
    let overhead = GENEVE_OVERHEAD + if ipsec { IPSEC_OVERHEAD } else { 0 };
    let tunnels = model.networks.iter().filter(|n| n.driver.value == xcsp_plans::spec::Driver::Ipsec);
    let path = tunnels.map(|n| n.tunnel_mtu.value).chain([AZURE_NIC_MTU]).min().unwrap_or(AZURE_NIC_MTU);
    let fits = path - overhead;
    let spec = cluster.overlay_mtu.value;
    if mtu + overhead <= path {
        if mtu == spec {
            return None;
        }
        return Some(
            Problem::error(
                "xcsp::cluster::mtu",
                format!(
                    "the cluster's network runs at MTU {mtu} (Network `cluster`, status.clusterNetworkMTU); the spec's overlay_mtu is {spec}"
                ),
            )
            .label(&cluster.overlay_mtu.span, "the spec's value")
            .with_help(format!("set overlay_mtu = {mtu}: every node of the cluster runs its overlay at it")),
        );
    }
    let encapsulation = if ipsec { "Geneve and IPsec's" } else { "Geneve's" };
    Some(
        Problem::error(
            "xcsp::cluster::mtu",
            format!(
                "the cluster's network runs at MTU {mtu} (Network `cluster`, status.clusterNetworkMTU): with {encapsulation} {overhead} bytes that is {} per packet, and the pool's path carries {path} (an Azure VM's NIC 1500, and each IPsec tunnel's tunnel_mtu): OVN-Kubernetes on an Azure node would refuse to start and the Node would never be Ready",
                mtu + overhead
            ),
        )
        .label(&cluster.overlay_mtu.span, "the pool's overlay MTU")
        .with_help(format!(
            "migrate the cluster's MTU to {fits} before adding the pool (OpenShift, \"Changing the MTU for the cluster network\"): `oc patch Network.operator.openshift.io cluster --type=merge --patch '{{\"spec\":{{\"migration\":{{\"mtu\":{{\"network\":{{\"from\":{mtu},\"to\":{fits}}},\"machine\":{{\"to\":{}}}}}}}}}}}'`, wait for the machine config pools to roll out, finish with `oc patch Network.operator.openshift.io cluster --type=merge --patch '{{\"spec\":{{\"migration\":null,\"defaultNetwork\":{{\"ovnKubernetesConfig\":{{\"mtu\":{fits}}}}}}}}}'`, then set overlay_mtu = {fits}",
            mtu + overhead
        )),
    )
}

/// Plan and apply: reads the cluster when a kubeconfig is in reach (and not `--offline`); says
/// the warnings; stops on errors. Without a kubeconfig, nothing is read.
/// Answers whose each provider is, when the cluster could be read.
pub async fn before_changes(s: &crate::Stack) -> crate::Result<Option<Chosen>> {
    let (model, say) = (&s.loaded.model, &s.say);
    if s.options.offline {
        return Ok(None);
    }
    let Ok(found) = s.cluster() else { return Ok(None) };
    let survey = match survey(found).await {
        Ok(s) => s,
        Err(e) => {
            say.warn(format_args!("cannot read the cluster ({e}); its values are taken from the spec"));
            return Ok(None);
        }
    };
    stop_on_errors(check(model, &survey), say)?;
    Ok(Some(providers(model, &survey)))
}

/// Says the warnings; the errors become the command's error.
pub fn stop_on_errors(problems: Vec<Problem>, say: &Say) -> crate::Result<()> {
    let (errors, warnings): (Vec<_>, Vec<_>) = problems.into_iter().partition(Problem::is_error);
    for w in warnings {
        say.diag(w);
    }
    if errors.is_empty() { Ok(()) } else { Err(StackError::Cluster { problems: errors }.into()) }
}

/// `xcsp preflight`: the cluster as read, and what it says of the pool (errors stop it).
pub async fn read(s: &crate::Stack) -> crate::Result<(Survey, Vec<Problem>)> {
    let found = s.cluster().map_err(|p| StackError::NoCluster(p.clone()))?;
    let survey = survey(found).await.map_err(|detail| StackError::Kubeconfig { detail, from: found.from.into() })?;
    let problems = check(&s.loaded.model, &survey);
    Ok((survey, problems))
}

/// What each pool boots, and why: a Marketplace image (the plan checks the location carries it),
/// the release's VHD imported into the stack's gallery, or an image of the spec's own; each
/// against what the cluster's release publishes (`coreos-bootimages`), where it could be read.
pub fn boots(model: &Model, s: &Survey) -> Vec<String> {
    use xcsp_plans::spec::Image;
    let location = &model.azure.location.value;
    let theirs = s.boot_images.as_ref();
    let vhd = theirs.and_then(|b| b.vhd.as_deref());
    model
        .pools
        .iter()
        .map(|pool| {
            let name = &pool.name.value;
            match &pool.image.value {
                Image::Marketplace { publisher, offer, sku, version } => format!(
                    "pool `{name}`: Marketplace image {publisher}:{offer}:{sku}:{version}; plan checks that {location} carries it{}",
                    vhd.map(|u| format!(" (where it does not, import the release's VHD: image {{ vhd = \"{u}\" }})"))
                        .unwrap_or_default()
                ),
                Image::Vhd(v) => format!(
                    "pool `{name}`: RHCOS {} imported from {} into the stack's Compute Gallery (Generation 2, {}){}",
                    v.build,
                    v.url,
                    v.gallery_architecture(),
                    match vhd {
                        Some(u) if u == v.url => ", the release's own VHD".to_string(),
                        Some(u) => format!("; the cluster's release publishes {u}"),
                        None => String::new(),
                    }
                ),
                Image::Id(id) => format!("pool `{name}`: image {id}, the spec's own"),
            }
        })
        .collect()
}

/// What the survey found, one line per fact.
pub fn describe(s: &Survey) -> String {
    let versions = |v: &[String]| if v.is_empty() { "not served".to_string() } else { v.join(", ") };
    let mut out = match &s.openshift {
        Some(i) => format!(
            "Cluster:      OpenShift, infrastructure `{}` on {} (internal API {})\n",
            i.name, i.platform, i.api_internal_url
        ),
        None => "Cluster:      not OpenShift (no Infrastructure object)\n".to_string(),
    };
    out += &format!("Cluster API:  cluster.x-k8s.io {}, {}\n", versions(&s.capi_versions), capi_source(s));
    for c in &s.capi_crds {
        out += &format!("CRD:          {} {} by {}\n", c.name, c.versions.join(","), c.owner);
    }
    out += &format!("CAPZ API:     infrastructure.cluster.x-k8s.io {}\n", versions(&s.capz_versions));
    out += &match &s.capz {
        Some(c) => {
            format!(
                "CAPZ:         Deployment {}/{} as system:serviceaccount:{}:{}, token audience {}\n",
                c.namespace,
                c.deployment,
                c.namespace,
                c.service_account,
                c.audiences.join(", ")
            ) + &format!(
                "Entra:        CAPZ asks {}\n",
                c.authority_host
                    .as_deref()
                    .unwrap_or("https://login.microsoftonline.com (the SDK's default: no AZURE_AUTHORITY_HOST)")
            )
        }
        None => format!("CAPZ:         not running (no Deployment {OPENSHIFT_CAPI_NAMESPACE}/{CAPZ_DEPLOYMENT})\n"),
    };
    out += if s.machine_approver {
        "Approver:     machine-approver-capi approves Cluster API machines' node certificates\n"
    } else {
        "Approver:     none for Cluster API machines (node certificates wait for a person)\n"
    };
    for (name, kind) in &s.clusters {
        out += &format!("Cluster API Cluster {OPENSHIFT_CAPI_NAMESPACE}/{name} ({kind})\n");
    }
    if let Some(issuer) = &s.service_account_issuer {
        out += &format!("Token issuer: {issuer} (Authentication cluster)\n");
    }
    if let Some(mtu) = s.cluster_network_mtu {
        let ipsec = if s.ovn_ipsec { ", IPsec between nodes" } else { "" };
        out += &format!("Network MTU:  {mtu} (Network cluster{ipsec})\n");
        out += &format!(
            "OVN IPsec:    {} (networks.operator.openshift.io cluster, ipsecConfig.mode)\n",
            if s.ovn_ipsec { "Full: the link lets IKE and ESP through" } else { "not between nodes" }
        );
    }
    if let Some(fips) = s.fips {
        out += &format!("FIPS:         {} (install-config)\n", if fips { "on" } else { "off" });
    }
    let w = &s.worker_configs;
    if !w.aws_units.is_empty() {
        out += &format!("AWS units:    {} (worker MachineConfigs): the pool masks them\n", w.aws_units.join(", "));
    }
    for (mc, sources) in &w.chrony {
        out += &format!(
            "Time:         {mc} names {}: the pool keeps the Azure host's clock instead (its own /etc/chrony.conf)\n",
            if sources.is_empty() { "no source".to_string() } else { sources.join(", ") }
        );
    }
    if let Some((https, no_proxy)) = &s.proxy {
        out += &format!("Proxy:        {https}, noProxy {}\n", no_proxy.join(","));
    }
    for m in &s.mirrors {
        out += &format!("Mirror:       {} -> {} ({})\n", m.source, m.mirrors.join(", "), m.object);
    }
    if s.ebs_csi_node {
        out += &format!(
            "EBS CSI:      node DaemonSet {}/{} runs on every Linux node\n",
            xcsp_kube::survey::EBS_CSI_NAMESPACE,
            xcsp_kube::survey::EBS_CSI_NODE
        );
    }
    if let Some(b) = &s.boot_images {
        let image = |i: &Option<xcsp_kube::survey::MarketplaceImage>| {
            i.as_ref().map_or("-".to_string(), |i| format!("{}:{}:{}:{}", i.publisher, i.offer, i.sku, i.version))
        };
        out += &format!(
            "Boot images:  OpenShift {}: Generation 2 {}, Generation 1 {}, VHD {} (coreos-bootimages)\n",
            b.release,
            image(&b.gen2),
            image(&b.gen1),
            b.vhd.as_deref().unwrap_or("-")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use xcsp_kube::survey::{Capz, Infrastructure};

    fn il5() -> Model {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/il5-govcloud");
        xcsp_plans::load(&dir, &Default::default()).unwrap_or_else(|_| panic!("the example loads")).model
    }

    fn survey(capi: &[&str], capz: &[&str]) -> Survey {
        Survey {
            openshift: Some(Infrastructure {
                name: "il5-gpu-x7k2p".into(),
                platform: "AWS".into(),
                api_internal_url: "https://api-int.il5.example.mil:6443".into(),
            }),
            capi_versions: capi.iter().map(|v| v.to_string()).collect(),
            capz_versions: capz.iter().map(|v| v.to_string()).collect(),
            capz: Some(Capz {
                namespace: OPENSHIFT_CAPI_NAMESPACE.into(),
                deployment: CAPZ_DEPLOYMENT.into(),
                service_account: "capz-manager".into(),
                audiences: vec!["api://AzureADTokenExchange".into()],
                authority_host: Some("https://login.microsoftonline.us/".into()),
            }),
            clusters: vec![],
            service_account_issuer: Some("https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com".into()),
            machine_approver: true,
            cluster_network_mtu: Some(1300),
            ovn_ipsec: false,
            fips: Some(true),
            worker_configs: Default::default(),
            proxy: None,
            mirrors: vec![],
            ebs_csi_node: false,
            feature_set: Some("TechPreviewNoUpgrade".into()),
            capi_operator: true,
            capi_crds: vec![],
            boot_images: Some(xcsp_kube::survey::BootImages {
                release: "4.22.3".into(),
                gen1: Some(image("aro_422")),
                gen2: Some(image("422-v2")),
                vhd: Some(
                    "https://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd"
                        .into(),
                ),
            }),
        }
    }

    fn image(sku: &str) -> xcsp_kube::survey::MarketplaceImage {
        xcsp_kube::survey::MarketplaceImage {
            publisher: "azureopenshift".into(),
            offer: "aro4".into(),
            sku: sku.into(),
            version: "422.94.20251104".into(),
        }
    }

    #[test]
    fn a_default_feature_set_is_named_as_why_no_cluster_api_is_served() {
        let model = il5();
        let mut s = survey(&[], &[]);
        s.feature_set = Some("Default".into());
        s.capi_operator = false;
        s.capz = None;
        let problems = check(&model, &s);
        let no_capi = problems.iter().find(|p| p.code == "xcsp::cluster::no_capi").expect("no_capi");
        assert!(no_capi.message.contains("Default feature set"), "{}", no_capi.message);
        assert!(no_capi.help.as_deref().unwrap_or_default().contains("TechPreviewNoUpgrade"));
        assert!(describe(&s).contains("Cluster API:  cluster.x-k8s.io not served, none (feature set Default"));
        s.feature_set = Some("TechPreviewNoUpgrade".into());
        s.capi_operator = true;
        s.capi_versions = vec!["v1beta1".into()];
        let problems = check(&model, &s);
        assert!(problems.iter().all(|p| p.code != "xcsp::cluster::no_capi"));
        assert!(describe(&s).contains("OpenShift's (feature set TechPreviewNoUpgrade, ClusterOperator cluster-api)"));
    }

    #[test]
    fn a_proxy_that_does_not_exclude_the_vnet_is_named_with_the_patch() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        let vnet = model.networks[0].vnet_cidr.value.to_string();
        s.proxy = Some(("http://proxy.example.mil:3128".into(), vec![".svc".into(), "10.0.0.0/16".into()]));
        let problems = check(&model, &s);
        assert_eq!(
            problems.iter().map(|p| (p.code, p.is_error())).collect::<Vec<_>>(),
            [("xcsp::cluster::proxy", false)]
        );
        assert!(problems[0].message.contains(&vnet), "{}", problems[0].message);
        assert!(problems[0].help.as_deref().unwrap().contains("oc patch proxy/cluster"), "{:?}", problems[0].help);
        // A wider CIDR that holds the VNet is enough.
        s.proxy = Some(("http://proxy.example.mil:3128".into(), vec!["10.0.0.0/8".into()]));
        assert!(check(&model, &s).is_empty());
    }

    fn mirror(source: &str, mirrors: &[&str], never: bool) -> xcsp_kube::survey::Mirror {
        xcsp_kube::survey::Mirror {
            object: "ImageDigestMirrorSet/release".into(),
            source: source.into(),
            mirrors: mirrors.iter().map(|m| m.to_string()).collect(),
            never_contact_source: never,
        }
    }

    fn codes(problems: &[Problem]) -> Vec<(&'static str, bool)> {
        problems.iter().map(|p| (p.code, p.is_error())).collect()
    }

    /// A pool that pulls only over the link needs the cluster's release mirrored inside the VPC;
    /// an ECR mirror is no mirror to an Azure VM: a warning where the pool can fall back to the
    /// source through its NAT gateway, an error where it cannot.
    #[test]
    fn a_pool_with_no_way_to_its_images_is_refused_and_an_ecr_mirror_is_named() {
        use xcsp_plans::spec::Egress;
        let mut model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        let release = "quay.io/openshift-release-dev/ocp-v4.0-art-dev";
        // The default, a NAT gateway, pulls from the source: nothing to say.
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
        model.pools[0].egress.value = Egress::Link;
        let problems = check(&model, &s);
        assert_eq!(codes(&problems), [("xcsp::pool::egress", true)]);
        assert!(problems[0].message.contains("mirrors no release image"), "{}", problems[0].message);
        // Mirrored in the VPC (a namespace prefix covers the repository): it pulls over the link.
        s.mirrors = vec![mirror("quay.io/openshift-release-dev", &["registry.il5.example.mil:5000/ocp"], false)];
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
        // Mirrored to ECR only: refused over the link, named with the NAT gateway.
        let ecr = "123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/ocp";
        s.mirrors = vec![mirror(release, &[ecr], false)];
        let problems = check(&model, &s);
        assert_eq!(codes(&problems), [("xcsp::pool::egress", true)]);
        assert!(problems[0].message.contains("only to Amazon ECR"), "{}", problems[0].message);
        model.pools[0].egress.value = Egress::NatGateway;
        let problems = check(&model, &s);
        assert_eq!(codes(&problems), [("xcsp::cluster::ecr_mirror", false)]);
        assert!(
            problems[0].message.contains(ecr) && problems[0].message.contains("EC2 instance role"),
            "{}",
            problems[0].message
        );
        s.mirrors = vec![mirror(release, &[ecr], true)];
        assert_eq!(codes(&check(&model, &s)), [("xcsp::cluster::ecr_mirror", true)]);
        // A mirror outside ECR beside it is enough.
        s.mirrors = vec![mirror(release, &[ecr, "registry.il5.example.mil:5000/ocp"], true)];
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
    }

    #[test]
    fn the_ebs_csi_daemon_set_on_the_pools_nodes_is_named() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        s.ebs_csi_node = true;
        let problems = check(&model, &s);
        assert_eq!(codes(&problems), [("xcsp::cluster::ebs_csi", false)]);
        assert!(problems[0].message.contains("aws-ebs-csi-driver-node") && problems[0].message.contains("`storage`"));
        assert!(problems[0].message.contains("next rollout (an upgrade) on") && problems[0].message.contains("4.22.3"));
        // Before 4.21 every unavailable Pod keeps it Progressing.
        s.boot_images.as_mut().unwrap().release = "4.20.8".into();
        let problems = check(&model, &s);
        assert!(problems[0].message.contains("stays Progressing while the pool exists"), "{}", problems[0].message);
        assert!(describe(&s).contains("EBS CSI:"), "{}", describe(&s));
    }

    #[test]
    fn mirror_sources_cover_repositories_by_prefix_and_wildcard() {
        assert!(covers("quay.io/openshift-release-dev", RELEASE_COMPONENTS));
        assert!(covers(RELEASE_COMPONENTS, RELEASE_COMPONENTS));
        assert!(covers("*.quay.io", "mirror.quay.io/a/b"));
        assert!(!covers("quay.io/openshift-release", RELEASE_COMPONENTS), "a prefix is whole segments");
        assert!(!covers("*.quay.io", RELEASE_COMPONENTS));
        assert!(xcsp_kube::survey::is_ecr("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com"));
        assert!(!xcsp_kube::survey::is_ecr("registry.il5.example.mil:5000"));
    }

    #[test]
    fn a_pool_boots_the_clusters_own_release() {
        let mut model = il5();
        let s = survey(&["v1beta1"], &["v1beta1"]);
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
        let marketplace = |sku: &str, version: &str| xcsp_plans::spec::Image::Marketplace {
            publisher: "azureopenshift".into(),
            offer: "aro4".into(),
            sku: sku.into(),
            version: version.into(),
        };
        model.pools[0].image.value = marketplace("419-v2", "latest");
        let problems = check(&model, &s);
        assert_eq!(problems.iter().map(|p| p.code).collect::<Vec<_>>(), ["xcsp::pool::boot_image"]);
        assert!(
            problems[0].message.contains("`419-v2`")
                && problems[0].message.contains("release 4.22.3 publishes `422-v2`")
        );
        assert!(problems[0].help.as_deref().unwrap().contains(r#"sku = "422-v2", version = "422.94.20251104""#));
        model.pools[0].image.value = marketplace("422-v2", "422.94.1");
        let problems = check(&model, &s);
        assert_eq!(
            problems.iter().map(|p| (p.code, p.is_error())).collect::<Vec<_>>(),
            [("xcsp::pool::boot_image_version", false)]
        );
        // Another image is the spec's own choice.
        model.pools[0].image.value = xcsp_plans::spec::Image::Marketplace {
            publisher: "redhat".into(),
            offer: "rh-ocp-worker".into(),
            sku: "rh-ocp-worker".into(),
            version: "latest".into(),
        };
        assert!(check(&model, &s).is_empty());
    }

    #[test]
    fn the_spec_follows_the_clusters_fips_mode() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
        s.fips = Some(false);
        let problems = check(&model, &s);
        assert_eq!(problems.iter().map(|p| p.code).collect::<Vec<_>>(), ["xcsp::cluster::fips"]);
        assert!(problems[0].message.contains("does not run in FIPS mode"), "{}", problems[0].message);
        let mut plain = model.clone();
        plain.cluster.fips.value = false;
        s.fips = Some(true);
        let problems = check(&plain, &s);
        assert_eq!(problems.iter().map(|p| p.code).collect::<Vec<_>>(), ["xcsp::cluster::fips"]);
        assert!(problems[0].help.as_deref().unwrap_or_default().contains("fips = true"), "{:?}", problems[0].help);
    }

    #[test]
    fn the_spec_follows_the_clusters_ipsec_between_nodes() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        s.cluster_network_mtu = Some(model.cluster.overlay_mtu.value);
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
        s.ovn_ipsec = true;
        s.cluster_network_mtu = Some(model.cluster.overlay_mtu.value - 46);
        let problems = check(&model, &s);
        let ipsec: Vec<_> = problems.iter().filter(|p| p.code == "xcsp::cluster::ovn_ipsec").collect();
        assert_eq!(ipsec.len(), 1, "{problems:?}");
        assert!(ipsec[0].is_error() && ipsec[0].help.as_deref().unwrap_or_default().contains("ovn_ipsec = true"));
        let mut with = model.clone();
        with.cluster.ovn_ipsec.value = true;
        assert!(check(&with, &s).iter().all(|p| p.code != "xcsp::cluster::ovn_ipsec"), "{:?}", check(&with, &s));
        s.ovn_ipsec = false;
        assert!(check(&with, &s).iter().any(|p| p.code == "xcsp::cluster::ovn_ipsec"));
    }

    #[test]
    fn a_government_tenant_behind_capzs_public_authority_is_refused_with_the_change_to_make() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
        s.capz.as_mut().unwrap().authority_host = None;
        let problems = check(&model, &s);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!(p.code, "xcsp::identity::authority");
        assert!(p.is_error());
        assert!(
            p.message.contains("`https://login.microsoftonline.com`")
                && p.message.contains("`https://login.microsoftonline.us`"),
            "{}",
            p.message
        );
        let help = p.help.clone().unwrap_or_default();
        assert!(help.contains("set env deployment/capz-controller-manager -c manager AZURE_AUTHORITY_HOST=https://login.microsoftonline.us/"), "{help}");
    }

    #[test]
    fn an_aws_clusters_mtu_is_refused_with_the_migration_and_a_migrated_one_must_be_the_specs() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        s.cluster_network_mtu = Some(8901);
        let problems = check(&model, &s);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!(p.code, "xcsp::cluster::mtu");
        assert!(p.is_error());
        assert!(p.message.contains("MTU 8901") && p.message.contains("9001 per packet"), "{}", p.message);
        // The path: the IL5 example's tunnels (tunnel_mtu 1400) are narrower than the NIC.
        let help = p.help.clone().unwrap_or_default();
        assert!(help.contains("\"from\":8901,\"to\":1300") && help.contains("\"machine\":{\"to\":9001}"), "{help}");
        // With IPsec between nodes the overhead is 146.
        s.ovn_ipsec = true;
        s.cluster_network_mtu = Some(1300);
        let problems = check(&model, &s);
        assert!(problems[0].message.contains("146 bytes") && problems[0].message.contains("1446"), "{problems:?}");
        // Migrated, but not to the spec's value: the spec is told the cluster's.
        s.ovn_ipsec = false;
        s.cluster_network_mtu = Some(1200);
        let problems = check(&model, &s);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].message.contains("runs at MTU 1200") && problems[0].message.contains("overlay_mtu is 1300")
        );
    }

    #[test]
    fn a_cluster_without_a_machine_approver_for_capi_is_warned_of_not_stopped() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        assert!(check(&model, &s).is_empty(), "{:?}", check(&model, &s));
        s.machine_approver = false;
        let problems = check(&model, &s);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].code, "xcsp::cluster::no_machine_approver");
        assert!(!problems[0].is_error());
    }

    #[test]
    fn a_cluster_that_serves_no_version_xcsp_writes_is_refused_naming_what_it_serves() {
        let model = il5();
        let codes = |s: &Survey| check(&model, s).iter().map(|p| p.code.to_string()).collect::<Vec<_>>();
        assert_eq!(codes(&survey(&["v1beta2", "v1beta1"], &["v1beta1"])), Vec::<String>::new());
        // CAPI once v1beta1 is dropped: xcsp writes v1beta2.
        assert_eq!(codes(&survey(&["v1beta2"], &["v1beta1"])), Vec::<String>::new());
        let newer = check(&model, &survey(&["v1beta3"], &["v1beta1"]));
        assert_eq!(newer.len(), 1, "{newer:?}");
        assert_eq!(newer[0].code, "xcsp::cluster::api_version");
        assert!(newer[0].is_error());
        assert!(
            newer[0].message.contains("cluster.x-k8s.io v1beta3; xcsp writes the pool's objects as v1beta1 or v1beta2"),
            "{}",
            newer[0].message
        );
        assert_eq!(codes(&survey(&["v1beta1"], &["v1beta2"])), ["xcsp::cluster::api_version"]);
    }

    #[test]
    fn an_issuer_the_cluster_does_not_use_is_refused_naming_both() {
        let model = il5();
        let mut s = survey(&["v1beta1"], &["v1beta1"]);
        assert!(check(&model, &s).is_empty());
        s.service_account_issuer = Some("https://other-oidc.example.mil".into());
        let found = check(&model, &s);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].code, "xcsp::identity::issuer");
        assert!(
            found[0].message.contains("`https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com`"),
            "{}",
            found[0].message
        );
        assert!(found[0].message.contains("`https://other-oidc.example.mil`"), "{}", found[0].message);
        // A cluster on its internal issuer: Entra could never fetch its keys.
        s.service_account_issuer = Some(xcsp_kube::survey::INTERNAL_ISSUER.into());
        let found = check(&model, &s);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].help.as_deref().unwrap_or_default().contains("public OIDC endpoint"), "{:?}", found[0].help);
    }

    /// The IL5 model with xcsp's CAPZ from a release's components, running `image` unless the
    /// spec overrides it with `over`.
    fn with_xcsp_capz(image: &str, over: Option<&str>) -> Model {
        let mut model = il5();
        let span = model.cluster.infrastructure_name.span.clone();
        model.cluster.cluster_api.azure = Some(xcsp_plans::spec::ProviderSource {
            components: xcsp_plans::spec::Sp::new("capz/infrastructure-components.yaml".into(), span.clone()),
            image: over.map(|o| xcsp_plans::spec::Sp::new(o.to_string(), span.clone())),
            read: Some(xcsp_plans::components::Components {
                path: "capz/infrastructure-components.yaml".into(),
                digest: "0".repeat(64),
                provider: "infrastructure-azure".into(),
                image: image.into(),
                version: xcsp_plans::components::image_version(image),
                crds: vec!["azuremachines.infrastructure.cluster.x-k8s.io".into()],
            }),
        });
        model
    }

    fn tag_mirror(source: &str, mirrors: &[&str]) -> xcsp_kube::survey::Mirror {
        xcsp_kube::survey::Mirror { object: "ImageTagMirrorSet/providers".into(), ..mirror(source, mirrors, false) }
    }

    fn image_mirror_messages(model: &Model, s: &Survey) -> Vec<String> {
        check(model, s).into_iter().filter(|p| p.code == "xcsp::cluster_api::image_mirror").map(|p| p.message).collect()
    }

    /// A mirrored cluster's nodes pull xcsp's manager images through a mirror set of the kind
    /// the reference needs (by tag: ImageTagMirrorSet; by digest: ImageDigestMirrorSet), or the
    /// image is named before its pod is left pulling.
    #[test]
    fn a_manager_image_no_mirror_set_applies_to_is_named_on_a_mirrored_cluster() {
        let capz = "registry.k8s.io/cluster-api-azure/cluster-api-azure-controller:v1.26.0";
        let model = with_xcsp_capz(capz, None);
        let mut s = survey(&[], &[]);
        s.capz = None;
        assert_eq!(providers(&model, &s).azure, Source::Xcsp);
        // No mirror set: the cluster pulls from the source.
        assert!(image_mirror_messages(&model, &s).is_empty());
        // Only the release mirrored.
        s.mirrors = vec![mirror("quay.io/openshift-release-dev", &["mirror.example.mil/ocp"], true)];
        let said = image_mirror_messages(&model, &s);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains(capz)
                && said[0].contains("registry.k8s.io/cluster-api-azure/cluster-api-azure-controller")
                && said[0].contains("ImageDigestMirrorSet/release"),
            "{}",
            said[0]
        );
        // Its registry mirrored by digest only: a pull by tag does not use it.
        s.mirrors.push(mirror("registry.k8s.io", &["mirror.example.mil/k8s"], false));
        let said = image_mirror_messages(&model, &s);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("pulled by tag") && said[0].contains("only in ImageDigestMirrorSet"), "{}", said[0]);
        // Named by digest, the same mirror serves it.
        let digest =
            "registry.k8s.io/cluster-api-azure/cluster-api-azure-controller@sha256:".to_string() + &"a".repeat(64);
        let by_digest = with_xcsp_capz(capz, Some(&digest));
        assert!(image_mirror_messages(&by_digest, &s).is_empty());
        // By tag, with a tag mirror set for its repository.
        s.mirrors.push(tag_mirror("registry.k8s.io/cluster-api-azure", &["mirror.example.mil/capz"]));
        assert!(image_mirror_messages(&model, &s).is_empty());
        // The cluster's own CAPZ runs what the cluster chose: nothing of xcsp's to check.
        s.mirrors.truncate(1);
        let mut theirs = survey(&["v1beta1"], &["v1beta1"]);
        theirs.mirrors = s.mirrors.clone();
        theirs.capi_crds = vec![xcsp_kube::survey::CrdOwner {
            name: "azuremachines.infrastructure.cluster.x-k8s.io".into(),
            owner: "OpenShift".into(),
            versions: vec!["v1beta1".into()],
            xcsp_stack: None,
        }];
        assert_ne!(providers(&model, &theirs).azure, Source::Xcsp);
        assert!(image_mirror_messages(&model, &theirs).is_empty());
    }
}
