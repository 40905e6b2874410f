"""The Kubernetes Python client against the sim's Kubernetes API, with jsonschema checking every
CAPZ/CAPI object the sim returns against the CRD schemas of the reference set.

kubeconfig from `xcsp-sim --kubeconfig` (https, the server certificate verified against the CA
the kubeconfig carries; refused against the system's roots); CustomObjectsApi create, get, list by label, merge patch,
server-side apply (apply-patch+yaml, field manager, conflicts, force), the status subresource and
MachineSet scale; refusals: an invalid label, schema violations (422 with the API server's Status
as the client's ApiException carries it), a malformed label selector, an AzureMachineTemplate spec
change; deletes.
"""

import glob
import json
import os

import jsonschema
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from harness import Suite, raises, reference_dir, wait_for

CRD_DIR = os.path.join(reference_dir(), "crds")
NS = "default"
INFRA = ("infrastructure.cluster.x-k8s.io", "v1beta1")
CAPI = ("cluster.x-k8s.io", "v1beta1")
CAPI2 = ("cluster.x-k8s.io", "v1beta2")

suite = Suite("kube-capi")
config.load_kube_config(config_file=os.environ["XCSP_SIM_KUBECONFIG"])
custom = client.CustomObjectsApi()
core = client.CoreV1Api()


def load_schemas():
    """(group, kind, version) -> a jsonschema validator of the CRD's openAPIV3Schema of that version
    (v1beta1; v1beta2 too where the CRD serves it, as CAPI 1.13's do)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(CRD_DIR, "*", "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for v in spec["versions"]:
                    if v["name"] in ("v1beta1", "v1beta2") and v.get("served", True):
                        schema = v["schema"]["openAPIV3Schema"]
                        out[(spec["group"], spec["names"]["kind"], v["name"])] = jsonschema.Draft4Validator(schema)
    assert ("infrastructure.cluster.x-k8s.io", "AzureMachineTemplate", "v1beta1") in out, f"no CAPZ CRDs in {CRD_DIR}"
    assert ("cluster.x-k8s.io", "MachineSet", "v1beta1") in out, f"no CAPI CRDs in {CRD_DIR}"
    assert ("cluster.x-k8s.io", "MachineHealthCheck", "v1beta2") in out, f"no CAPI v1beta2 in {CRD_DIR}"
    return out


SCHEMAS = {}
validated = {"objects": 0}


def valid(obj):
    """The object as the sim returned it obeys its CRD schema; returns it."""
    group, version = obj["apiVersion"].split("/")
    validator = SCHEMAS[(group, obj["kind"], version)]
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    assert not errors, "; ".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
    validated["objects"] += 1
    return obj


def status_of(e):
    """The Kubernetes Status an ApiException carries."""
    body = json.loads(e.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure", body
    assert body["code"] == e.status, body
    return body


def api_error(status, reason, fn, *args, **kwargs):
    e = raises(ApiException, fn, *args, **kwargs)
    s = status_of(e)
    assert (e.status, s["reason"]) == (status, reason), f"expected {status} {reason}, got {e.status} {s}"
    return s


def template(name, vm_size="Standard_D4s_v3", disk=128, labels=None):
    spec = {"osDisk": {"osType": "Linux", "diskSizeGB": disk}, "image": {"id": "/subscriptions/s/img"}}
    if vm_size is not None:
        spec["vmSize"] = vm_size
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "AzureMachineTemplate",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {"pool": "peers"}},
        "spec": {"template": {"spec": spec}},
    }


def azure_cluster(name):
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "AzureCluster",
        "metadata": {"name": name, "namespace": NS, "labels": {"pool": "peers"}},
        "spec": {"location": "eastus", "resourceGroup": "peers-rg", "subscriptionID": "s",
                 "additionalTags": {"xcsp-stack": "peers"}},
    }


def machine_set(name, replicas):
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachineSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "clusterName": "peers",
            "replicas": replicas,
            "selector": {"matchLabels": {"pool": name}},
            "template": {
                "metadata": {"labels": {"pool": name}},
                "spec": {
                    "clusterName": "peers",
                    "bootstrap": {"dataSecretName": "worker-user-data"},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                          "kind": "AzureMachineTemplate", "name": "peers-amt"},
                },
            },
        },
    }


def apply(group_version, plural, name, body, manager="peers", force=None):
    """Server-side apply; returns the object the server answered."""
    kwargs = {"field_manager": manager, "_content_type": "application/apply-patch+yaml"}
    if force is not None:
        kwargs["force"] = force
    # The client deserializes only a 200 for this call; an apply that creates the object is
    # answered 201 (as the API server answers it), so the raw response is read instead.
    r = custom.patch_namespaced_custom_object(*group_version, NS, plural, name, body, _preload_content=False,
                                              **kwargs)
    assert r.status in (200, 201), r.status
    return json.loads(r.data)


def schemas():
    SCHEMAS.update(load_schemas())


def over_tls():
    """The kubeconfig names an https server and carries a CA; the client verifies the server's
    certificate against it, and a client that trusts only the usual roots (certifi) is refused."""
    conf = client.Configuration.get_default_copy()
    assert conf.host.startswith("https://127.0.0.1:"), conf.host
    assert conf.verify_ssl and conf.ssl_ca_cert, (conf.verify_ssl, conf.ssl_ca_cert)
    untrusting = client.Configuration.get_default_copy()
    untrusting.ssl_ca_cert = None
    untrusting.retries = 0
    e = raises(Exception, client.VersionApi(client.ApiClient(untrusting)).get_code)
    assert "CERTIFICATE_VERIFY_FAILED" in str(e), e


def version_and_discovery():
    v = client.VersionApi().get_code()
    assert v.major == "1" and v.git_version.startswith("v1."), v
    groups = {g.name: g for g in client.ApisApi().get_api_versions().groups}
    assert "cluster.x-k8s.io" in groups and "infrastructure.cluster.x-k8s.io" in groups, list(groups)
    res = client.CustomObjectsApi().get_api_resources(*INFRA)
    names = {r.name: r for r in res.resources}
    assert names["azuremachinetemplates"].kind == "AzureMachineTemplate" and names["azuremachinetemplates"].namespaced


def create_get_list():
    c = custom.create_namespaced_custom_object(*INFRA, NS, "azureclusters", azure_cluster("peers-ac"))
    valid(c)
    md = c["metadata"]
    assert md["uid"] and md["resourceVersion"] and md["generation"] == 1 and md["creationTimestamp"], md
    got = valid(custom.get_namespaced_custom_object(*INFRA, NS, "azureclusters", "peers-ac"))
    assert got["metadata"]["resourceVersion"] == md["resourceVersion"], got
    listed = custom.list_namespaced_custom_object(*INFRA, NS, "azureclusters", label_selector="pool=peers")
    assert listed["kind"] == "AzureClusterList" and listed["metadata"]["resourceVersion"], listed
    assert [valid(i)["metadata"]["name"] for i in listed["items"]] == ["peers-ac"], listed
    none = custom.list_namespaced_custom_object(*INFRA, NS, "azureclusters", label_selector="pool notin (peers)")
    assert none["items"] == [], none
    api_error(409, "AlreadyExists", custom.create_namespaced_custom_object, *INFRA, NS, "azureclusters",
              azure_cluster("peers-ac"))


def merge_patch():
    before = custom.get_namespaced_custom_object(*INFRA, NS, "azureclusters", "peers-ac")
    p = custom.patch_namespaced_custom_object(*INFRA, NS, "azureclusters", "peers-ac",
                                              {"metadata": {"labels": {"tier": "a"}},
                                               "spec": {"additionalTags": {"owner": "peers"}}})
    valid(p)
    assert p["metadata"]["labels"] == {"pool": "peers", "tier": "a"}, p["metadata"]
    assert p["spec"]["additionalTags"] == {"xcsp-stack": "peers", "owner": "peers"}, p["spec"]
    assert p["metadata"]["generation"] == before["metadata"]["generation"] + 1, "a spec change bumps generation"
    assert p["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]


def status_subresource():
    s = custom.patch_namespaced_custom_object_status(*INFRA, NS, "azureclusters", "peers-ac",
                                                     {"status": {"ready": True}})
    valid(s)
    assert s["status"]["ready"] is True
    # A write to the object itself ignores status.
    p = custom.patch_namespaced_custom_object(*INFRA, NS, "azureclusters", "peers-ac", {"status": {"ready": False}})
    assert p["status"]["ready"] is True, p["status"]


def server_side_apply():
    t = template("peers-amt")
    a = valid(apply(INFRA, "azuremachinetemplates", "peers-amt", t))
    assert a["spec"]["template"]["spec"]["osDisk"]["cachingType"] == "None", "the CRD default is filled in"
    mf = a["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in mf] == [("peers", "Apply")], mf
    assert "f:vmSize" in mf[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"], mf[0]["fieldsV1"]
    again = valid(apply(INFRA, "azuremachinetemplates", "peers-amt", t))
    assert again["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"], "a no-op apply changes nothing"
    api_error(400, "BadRequest", custom.patch_namespaced_custom_object, *INFRA, NS, "azuremachinetemplates",
              "peers-amt", t, _content_type="application/apply-patch+yaml")


def apply_conflicts():
    ac = azure_cluster("peers-ac")
    ac["spec"]["additionalTags"] = {"xcsp-stack": "peers"}
    valid(apply(INFRA, "azureclusters", "peers-ac", ac, manager="xcsp"))
    ac2 = azure_cluster("peers-ac")
    ac2["spec"]["additionalTags"] = {"xcsp-stack": "other"}
    s = api_error(409, "Conflict", apply, INFRA, "azureclusters", "peers-ac", ac2, manager="ops")
    # Two owners of the field: the create's updater (named by the client's User-Agent) and the
    # applier xcsp, grouped and sorted as the API server's getConflictMessage prints them.
    assert s["message"] == (
        'Apply failed with 2 conflicts: conflicts with "OpenAPI-Generator" using infrastructure.cluster.x-k8s.io/v1beta1:'
        '\n- .spec.additionalTags.xcsp-stack\nconflicts with "xcsp":\n- .spec.additionalTags.xcsp-stack'
    ), s["message"]
    causes = s["details"]["causes"]
    assert {(c["reason"], c["field"]) for c in causes} == {("FieldManagerConflict", ".spec.additionalTags.xcsp-stack")}
    assert sorted(c["message"] for c in causes) == [
        'conflict with "OpenAPI-Generator" using infrastructure.cluster.x-k8s.io/v1beta1', 'conflict with "xcsp"'], causes
    forced = valid(apply(INFRA, "azureclusters", "peers-ac", ac2, manager="ops", force=True))
    assert forced["spec"]["additionalTags"]["xcsp-stack"] == "other", forced["spec"]


def map_list_merge():
    """AzureCluster spec.networkSpec.subnets is a list-type map keyed by name in CAPZ's CRD: two
    appliers each own their own item, and a change inside another's item conflicts at that item."""
    def with_subnets(subnets):
        ac = azure_cluster("peers-subnets")
        ac["spec"]["networkSpec"] = {"subnets": subnets}
        return ac
    valid(apply(INFRA, "azureclusters", "peers-subnets", with_subnets([{"name": "gpu", "role": "node"}]), manager="xcsp"))
    both = valid(apply(INFRA, "azureclusters", "peers-subnets",
                       with_subnets([{"name": "bastion", "role": "bastion"}]), manager="ops"))
    assert [s["name"] for s in both["spec"]["networkSpec"]["subnets"]] == ["gpu", "bastion"], both["spec"]
    owned = {m["manager"]: m["fieldsV1"]["f:spec"]["f:networkSpec"]["f:subnets"] for m in both["metadata"]["managedFields"]
             if m["operation"] == "Apply"}
    assert set(owned["xcsp"]) == {'k:{"name":"gpu"}'} and set(owned["ops"]) == {'k:{"name":"bastion"}'}, owned
    assert owned["xcsp"]['k:{"name":"gpu"}'] == {".": {}, "f:name": {}, "f:role": {}}, owned
    s = api_error(409, "Conflict", apply, INFRA, "azureclusters", "peers-subnets",
                  with_subnets([{"name": "bastion", "role": "bastion"}, {"name": "gpu", "role": "controlplane"}]),
                  manager="ops")
    assert s["message"] == ('Apply failed with 1 conflict: conflict with "xcsp": '
                            '.spec.networkSpec.subnets[name="gpu"].role'), s["message"]
    custom.delete_namespaced_custom_object(*INFRA, NS, "azureclusters", "peers-subnets")


def cel_rule():
    """CAPI 1.13's CRD puts a CEL rule on unhealthyMachineConditions[].type: Ready is refused."""
    mhc = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineHealthCheck",
           "metadata": {"name": "peers-mhc", "namespace": NS},
           "spec": {"clusterName": "peers", "selector": {"matchLabels": {"pool": "peers"}},
                    "unhealthyMachineConditions": [{"type": "Ready", "status": "False", "timeout": "5m"}]}}
    s = api_error(422, "Invalid", custom.create_namespaced_custom_object, *CAPI, NS, "machinehealthchecks", mhc)
    assert s["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.unhealthyMachineConditions[0].type",
        "message": 'Invalid value: "Ready": type must not be one of: Ready, Available, HealthCheckSucceeded, '
                   'OwnerRemediated, ExternallyRemediated'}], s["details"]
    mhc["spec"]["unhealthyMachineConditions"][0]["type"] = "GPUHealthy"
    valid(custom.create_namespaced_custom_object(*CAPI, NS, "machinehealthchecks", mhc))
    custom.delete_namespaced_custom_object(*CAPI, NS, "machinehealthchecks", "peers-mhc")


def invalid_label():
    bad = template("peers-bad", labels={"pool": "-no-"})
    s = api_error(422, "Invalid", custom.create_namespaced_custom_object, *INFRA, NS, "azuremachinetemplates", bad)
    assert s["message"].startswith('AzureMachineTemplate.infrastructure.cluster.x-k8s.io "peers-bad" is invalid: '
                                   'metadata.labels: Invalid value: "-no-"'), s["message"]
    cause = s["details"]["causes"][0]
    assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "metadata.labels"), cause
    assert s["details"]["kind"] == "AzureMachineTemplate" and s["details"]["group"] == INFRA[0], s["details"]
    api_error(404, "NotFound", custom.get_namespaced_custom_object, *INFRA, NS, "azuremachinetemplates", "peers-bad")


def schema_violations():
    s = api_error(422, "Invalid", custom.create_namespaced_custom_object, *INFRA, NS, "azuremachinetemplates",
                  template("peers-bad", vm_size=None))
    causes = {(c["reason"], c["field"]) for c in s["details"]["causes"]}
    assert ("FieldValueRequired", "spec.template.spec.vmSize") in causes, s
    s = api_error(422, "Invalid", apply, INFRA, "azuremachinetemplates", "peers-bad", template("peers-bad", disk="big"))
    cause = s["details"]["causes"][0]
    assert (cause["reason"], cause["field"]) == ("FieldValueTypeInvalid", "spec.template.spec.osDisk.diskSizeGB"), s
    bad_ms = machine_set("peers-ms-bad", 1)
    bad_ms["spec"]["replicas"] = "two"
    api_error(422, "Invalid", custom.create_namespaced_custom_object, *CAPI, NS, "machinesets", bad_ms)


def amt_is_immutable():
    t = template("peers-amt", vm_size="Standard_D8s_v3")
    s = api_error(422, "Invalid", apply, INFRA, "azuremachinetemplates", "peers-amt", t)
    assert s["message"].startswith('admission webhook "validation.azuremachinetemplate.infrastructure.cluster.'
                                   'x-k8s.io" denied the request'), s["message"]
    assert "field is immutable" in s["message"], s["message"]


def bad_selector():
    s = api_error(400, "BadRequest", custom.list_namespaced_custom_object, *INFRA, NS, "azureclusters",
                  label_selector="pool in (a")
    assert "unable to parse requirement" in s["message"] or "expected" in s["message"], s


def machine_sets_and_scale():
    ms = valid(apply(CAPI, "machinesets", "peers-ms", machine_set("peers-ms", 2)))
    assert ms["spec"]["replicas"] == 2

    def two_machines():
        m = custom.list_namespaced_custom_object(*CAPI, NS, "machines", label_selector="pool=peers-ms")["items"]
        return len(m) == 2 and m

    machines = wait_for("two Machines", two_machines, timeout=30)
    for m in machines:
        assert m["metadata"]["ownerReferences"][0]["name"] == "peers-ms", m["metadata"]
        assert m["spec"]["clusterName"] == "peers", m["spec"]
        # CAPI cloned the template into the Machine's AzureMachine; it obeys CAPZ's CRD.
        ref = m["spec"]["infrastructureRef"]
        assert (ref["kind"], ref["name"]) == ("AzureMachine", m["metadata"]["name"]), ref
        am = valid(custom.get_namespaced_custom_object(*INFRA, NS, "azuremachines", ref["name"]))
        assert am["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"] == "peers-amt", am["metadata"]
        assert am["spec"]["vmSize"] == "Standard_D4s_v3", am["spec"]
    scale = custom.get_namespaced_custom_object_scale(*CAPI, NS, "machinesets", "peers-ms")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2, scale
    st = valid(custom.get_namespaced_custom_object(*CAPI, NS, "machinesets", "peers-ms"))
    assert st["status"]["replicas"] == 2, st["status"]


def capi_at_v1beta2():
    """CAPI 1.13 serves v1beta2 and prefers it: an object written at v1beta1 reads at v1beta2 as
    CAPI's conversion gives it, obeying the v1beta2 schema, and one written at v1beta2 reads back
    at v1beta1 (Go durations for whole seconds)."""
    group = next(g for g in client.ApisApi().get_api_versions().groups if g.name == CAPI[0])
    assert group.preferred_version.version == "v1beta2", group
    assert {v.version for v in group.versions} == {"v1beta1", "v1beta2"}, group.versions
    apply(CAPI, "machinesets", "peers-ms2", machine_set("peers-ms2", 0))
    # CAPI 1.13's CRDs mark v1beta1 deprecated: every request there carries the API server's
    # warning (apiextensions-apiserver defaultDeprecationWarning), none at v1beta2.
    old = custom.get_namespaced_custom_object(*CAPI, NS, "machinesets", "peers-ms2", _preload_content=False)
    assert old.headers.get("Warning") == \
        '299 - "cluster.x-k8s.io/v1beta1 MachineSet is deprecated; use cluster.x-k8s.io/v1beta2 MachineSet"', \
        dict(old.headers)
    new = custom.get_namespaced_custom_object(*CAPI2, NS, "machinesets", "peers-ms2", _preload_content=False)
    assert "Warning" not in new.headers, dict(new.headers)
    got = valid(custom.get_namespaced_custom_object(*CAPI2, NS, "machinesets", "peers-ms2"))
    ref = got["spec"]["template"]["spec"]["infrastructureRef"]
    assert ref == {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureMachineTemplate", "name": "peers-amt"}, ref
    mhc = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
           "metadata": {"name": "peers-mhc", "namespace": NS},
           "spec": {"clusterName": "peers", "selector": {"matchLabels": {"pool": "peers-ms2"}},
                    "checks": {"nodeStartupTimeoutSeconds": 600, "unhealthyNodeConditions": [
                        {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300}]}}}
    valid(mhc)
    made = valid(custom.create_namespaced_custom_object(*CAPI2, NS, "machinehealthchecks", mhc))
    assert made["spec"]["checks"] == mhc["spec"]["checks"], made["spec"]
    old = valid(custom.get_namespaced_custom_object(*CAPI, NS, "machinehealthchecks", "peers-mhc"))
    assert old["spec"]["unhealthyConditions"] == [{"type": "Ready", "status": "Unknown", "timeout": "5m0s"}], old["spec"]
    assert old["spec"]["nodeStartupTimeout"] == "10m0s", old["spec"]
    for item in custom.list_namespaced_custom_object(*CAPI2, NS, "machinehealthchecks")["items"]:
        valid(item)
    custom.delete_namespaced_custom_object(*CAPI2, NS, "machinehealthchecks", "peers-mhc")
    custom.delete_namespaced_custom_object(*CAPI, NS, "machinesets", "peers-ms2")


def deletes():
    d = custom.delete_namespaced_custom_object(*CAPI, NS, "machinesets", "peers-ms")
    assert d["kind"] in ("MachineSet", "Status"), d
    api_error(404, "NotFound", custom.get_namespaced_custom_object, *CAPI, NS, "machinesets", "peers-ms")
    for plural, name in [("azuremachinetemplates", "peers-amt"), ("azureclusters", "peers-ac")]:
        custom.delete_namespaced_custom_object(*INFRA, NS, plural, name)
        api_error(404, "NotFound", custom.get_namespaced_custom_object, *INFRA, NS, plural, name)
    api_error(404, "NotFound", custom.delete_namespaced_custom_object, *INFRA, NS, "azureclusters", "peers-ac")


def namespaces_missing():
    api_error(404, "NotFound", custom.create_namespaced_custom_object, *INFRA, "no-such-ns", "azureclusters",
              azure_cluster("x") | {"metadata": {"name": "x", "namespace": "no-such-ns"}})
    names = [n.metadata.name for n in core.list_namespace().items]
    assert "default" in names, names


def schema_check_catches_a_bad_object():
    # The jsonschema check fails when it should: an object with a wrong type is refused.
    bad = template("x", disk="big")
    try:
        valid(bad)
    except AssertionError:
        return
    raise AssertionError("the CRD schema check accepted a string diskSizeGB")


suite.check("the CRD schemas of the reference set load into jsonschema", schemas)
suite.check("the jsonschema check flags a wrong type", schema_check_catches_a_bad_object)
suite.check("over TLS: https, the kubeconfig's CA trusted, the usual roots refused", over_tls)
suite.check("version and discovery", version_and_discovery)
suite.check("AzureCluster: create, get, list by label selector, AlreadyExists", create_get_list)
suite.check("merge patch of labels and spec", merge_patch)
suite.check("status subresource", status_subresource)
suite.check("server-side apply: defaults, managedFields, no-op re-apply, no field manager", server_side_apply)
suite.check("server-side apply conflict between managers, then force", apply_conflicts)
suite.check("server-side apply merges a list-type map item by item; a conflict names the item by its key", map_list_merge)
suite.check("a CRD's CEL rule (x-kubernetes-validations) refuses what it forbids with 422", cel_rule)
suite.check("an invalid label value is 422 Invalid on metadata.labels", invalid_label)
suite.check("schema violations are 422 with FieldValueRequired / FieldValueTypeInvalid", schema_violations)
suite.check("an AzureMachineTemplate spec change is refused by CAPZ's webhook", amt_is_immutable)
suite.check("a malformed label selector is 400 BadRequest", bad_selector)
suite.check("MachineSet apply, its Machines and their AzureMachines, the scale subresource", machine_sets_and_scale)
suite.check("CAPI at v1beta2 (preferred): converted both ways, each answer obeying its version's schema", capi_at_v1beta2)
suite.check("deletes and 404 NotFound after", deletes)
suite.check("a missing namespace is 404; namespaces list", namespaces_missing)
print(f"kube-capi: {validated['objects']} returned objects validated against the CRD schemas", flush=True)
suite.finish()
