//! CAPZ's making and deleting of a worker's Azure VM, and what it writes on the Machine's AzureMachine
//! ([`reflect`]), once every check before it passes
//! ([`super::joins`]): for a Machine held at `vm`, the network interface `<machine>-nic` in the
//! pool's subnet and the VM `<machine>` in the AzureCluster's resource group, with the size,
//! image, OS disk, zone and SSH key of the Machine's AzureMachine (cloned from its template) and CAPZ's tags; then
//! the Machine's `spec.providerID` as CAPZ sets it (the VM's id with the resource group
//! lower-cased). A VM whose Machine is going or gone is deleted with its NIC (CAPZ's
//! AzureMachine finalizer). Sources: cluster-api-provider-azure (OpenShift's vendoring)
//! `azure/services/networkinterfaces/spec.go` (`<vm>-nic`), `azure/services/virtualmachines/spec.go`
//! and `virtualmachines.go` (`ProviderIDPrefix` + id, `ConvertResourceGroupNameToLower`),
//! `azure/defaults.go` (`ClusterTagKey`, `sigs.k8s.io_cluster-api-provider-azure_role`). The VM
//! appears once a VM's creation time ([`CREATE_SECS`]) has passed since CAPZ first could make
//! it; its boot ([`super::boot`]) takes a boot's.

use serde_json::{Value, json};

/// Seconds an Azure VM takes to be created, before the profile's scale.
pub const CREATE_SECS: (f64, f64) = (240.0, 360.0);

use super::joins::Held;
use super::store::Store;
use crate::arm::kinds;
use crate::arm::store::{ResKind, Resource, Store as ArmStore};

const CAPZ: &str = "infrastructure.cluster.x-k8s.io";
const ROLE_TAG: &str = "sigs.k8s.io_cluster-api-provider-azure_role";

/// The provider ID CAPZ writes for a VM id.
pub fn provider_id(vm_id: &str) -> String {
    let lowered = match vm_id.split_once("/resourceGroups/") {
        Some((head, rest)) => match rest.split_once('/') {
            Some((rg, tail)) => format!("{head}/resourceGroups/{}/{tail}", rg.to_ascii_lowercase()),
            None => vm_id.to_string(),
        },
        None => vm_id.to_string(),
    };
    format!("azure://{lowered}")
}

/// The NIC and VM CAPZ would make for a Machine held at `vm` (ids and bodies), or why it could not.
pub fn plan_vm(
    kube: &Store,
    arm: &ArmStore,
    machine: &Value,
    compute: &crate::world::Compute,
) -> Result<Vec<(String, &'static crate::arm::kinds::Kind, Value)>, Held> {
    let ns = machine["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = machine["metadata"]["name"].as_str().unwrap_or_default();
    let refused = |message: String| Held {
        step: "vm",
        message,
        source: "cluster-api-provider-azure azure/services/networkinterfaces, virtualmachines",
    };
    let cluster = machine["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"].as_str().unwrap_or_default();
    let ac_name = kube
        .value("cluster.x-k8s.io", "clusters", ns, cluster)
        .and_then(|c| c["spec"]["infrastructureRef"]["name"].as_str())
        .unwrap_or_default();
    let ac = kube.value(CAPZ, "azureclusters", ns, ac_name).cloned().unwrap_or_default();
    let spec = super::joins::machine_spec(kube, machine).map_err(refused)?;
    let (sub, rg, location) = (
        ac["spec"]["subscriptionID"].as_str().unwrap_or_default(),
        ac["spec"]["resourceGroup"].as_str().unwrap_or_default(),
        ac["spec"]["location"].as_str().unwrap_or_default(),
    );
    let subnet_name = spec["networkInterfaces"][0]["subnetName"].as_str().unwrap_or_default();
    let subnet_id = format!("{}/subnets/{subnet_name}", super::joins::vnet_id(&ac));
    if arm.get(&subnet_id.to_ascii_lowercase()).is_none() {
        return Err(refused(format!(
            "failed to reconcile network interface: subnet {subnet_id} not found (ResourceNotFound)"
        )));
    }
    // CAPZ reads the size's resource SKU first (`azure/scope/machine.go` `InitMachineCache`,
    // `azure/services/resourceskus/cache.go` `Get`): a size the location does not list is an error
    // it does not retry (`azuremachine_controller.go`, a terminal failure).
    let size = spec["vmSize"].as_str().unwrap_or_default();
    let known = crate::arm::skus::find(size);
    if known.is_none_or(|s| crate::arm::skus::offered_zones(compute, location, s).is_none()) {
        return Err(refused(format!(
            "failed to get VM SKU {size} in compute api: reconcile error that cannot be recovered occurred: resource sku with name '{size}' and category 'virtualMachines' not found in location '{location}'"
        )));
    }
    // Compute refuses the VM's PUT a zone it may not use, or past a quota.
    let zone = machine["spec"]["failureDomain"].as_str();
    let m = &spec["image"]["marketplace"];
    let image = match (m["publisher"].as_str(), m["offer"].as_str(), m["sku"].as_str()) {
        (Some(p), Some(o), Some(k)) => Some((p, o, k, m["version"].as_str().unwrap_or("latest"))),
        _ => None,
    };
    if let Some((code, message)) = crate::arm::skus::create_refusal(compute, arm, location, zone, size, image, sub) {
        return Err(Held {
            step: "vm",
            message: format!("{}RESPONSE 409: 409 Conflict ERROR CODE: {code}: {message}", super::joins::VM_FAILED),
            source: "cluster-api-provider-azure azure/scope/machine.go UpdatePutStatus; Microsoft Learn, Resolve errors for SKU not available; Resolve quota errors",
        });
    }
    if let Some(refused) = generation_refusal(spec) {
        return Err(Held {
            step: "vm",
            message: format!(
                "{}RESPONSE 400: 400 Bad Request ERROR CODE: BadRequest: {refused}",
                super::joins::VM_FAILED
            ),
            source: "cluster-api-provider-azure azure/scope/machine.go UpdatePutStatus; Azure Compute (BadRequest, https://aka.ms/azuregen2vm)",
        });
    }
    let mut tags = json!({
        format!("sigs.k8s.io_cluster-api-provider-azure_cluster_{cluster}"): "owned",
        ROLE_TAG: "node",
        "Name": name,
    });
    if let Some(extra) = spec["additionalTags"].as_object() {
        for (k, v) in extra {
            tags[k] = v.clone();
        }
    }
    let rg_path = format!("/subscriptions/{sub}/resourceGroups/{rg}");
    let nic_id = format!("{rg_path}/providers/Microsoft.Network/networkInterfaces/{name}-nic");
    let vm_id = format!("{rg_path}/providers/Microsoft.Compute/virtualMachines/{name}");
    let nic = json!({
        "id": nic_id, "name": format!("{name}-nic"), "type": kinds::NIC.arm_type, "location": location, "tags": tags,
        "properties": {
            "provisioningState": "Succeeded",
            "enableAcceleratedNetworking": spec["networkInterfaces"][0]["acceleratedNetworking"],
            "ipConfigurations": [{
                "id": format!("{nic_id}/ipConfigurations/pipConfig"), "name": "pipConfig",
                "properties": {"primary": true, "privateIPAllocationMethod": "Dynamic", "subnet": {"id": subnet_id}},
            }],
            "virtualMachine": {"id": vm_id},
        },
    });
    let mut vm = json!({
        "id": vm_id, "name": name, "type": kinds::VM.arm_type, "location": location, "tags": tags,
        "properties": {
            "provisioningState": "Succeeded",
            "hardwareProfile": {"vmSize": spec["vmSize"]},
            "storageProfile": {
                "imageReference": spec["image"]["marketplace"].clone(),
                "osDisk": {"name": format!("{name}_OSDisk"), "osType": "Linux", "createOption": "FromImage",
                    "diskSizeGB": spec["osDisk"]["diskSizeGB"], "managedDisk": spec["osDisk"]["managedDisk"]},
            },
            "osProfile": {"computerName": name, "adminUsername": "capi"},
            "networkProfile": {"networkInterfaces": [{"id": nic_id, "properties": {"primary": true}}]},
            "diagnosticsProfile": {"bootDiagnostics": {"enabled": true}},
        },
    });
    if let Some(id) = spec["image"]["id"].as_str() {
        vm["properties"]["storageProfile"]["imageReference"] = json!({"id": id});
    }
    if let Some(zone) = machine["spec"]["failureDomain"].as_str() {
        vm["zones"] = json!([zone]);
    }
    Ok(vec![(nic_id, &kinds::NIC, nic), (vm_id, &kinds::VM, vm)])
}

/// Compute's refusal of the template's Generation 1 image on a size that boots Generation 2 only
/// ([`crate::arm::compute::generation_refusal`]).
fn generation_refusal(template_spec: &Value) -> Option<String> {
    let m = &template_spec["image"]["marketplace"];
    crate::arm::compute::generation_refusal(
        template_spec["vmSize"].as_str()?,
        m["publisher"].as_str()?,
        m["offer"].as_str()?,
        m["sku"].as_str()?,
    )
}

/// Makes the VM of a Machine held at `vm` ([`plan_vm`]); answers its provider ID, or why CAPZ
/// could not.
pub fn make_vm(
    kube: &Store,
    arm: &mut ArmStore,
    machine: &Value,
    compute: &crate::world::Compute,
    now: std::time::Instant,
) -> Result<String, Held> {
    let planned = plan_vm(kube, arm, machine, compute)?;
    let vm_id = planned.last().map(|p| p.0.clone()).unwrap_or_default();
    for (id, kind, body) in planned {
        if arm.get(&id.to_ascii_lowercase()).is_some() {
            continue;
        }
        let seq = arm.next_seq();
        arm.insert(Resource {
            id,
            kind: ResKind::Typed(kind),
            name: body["name"].as_str().unwrap_or_default().to_string(),
            body,
            created_at: now,
            changed_at: now,
            seq,
            op: None,
            secret: None,
        });
    }
    Ok(provider_id(&vm_id))
}

/// Deletes the VMs CAPZ made (and their NICs) whose Machine is not in `live` (names of Machines
/// not being deleted).
pub fn reap(arm: &mut ArmStore, live: &[String]) {
    let gone: Vec<String> = arm
        .of_kind(&kinds::VM)
        .filter(|r| r.body["tags"][ROLE_TAG].is_string() && !live.contains(&r.name))
        .map(|r| r.id.clone())
        .collect();
    for id in gone {
        let nic = id.replace("/Microsoft.Compute/virtualMachines/", "/Microsoft.Network/networkInterfaces/") + "-nic";
        arm.remove_tree(&id.to_ascii_lowercase());
        arm.remove_tree(&nic.to_ascii_lowercase());
    }
}

/// What CAPZ writes on the Machine's AzureMachine, which CAPI mirrors as the Machine's
/// `InfrastructureReady` (`infra`): `VMRunning` and its summary `Ready` (cluster-api-provider-azure
/// `api/v1beta1/consts.go` `VMRunningCondition`, `azuremachine_controller.go` `reconcileNormal`:
/// `WaitingForClusterInfrastructure`, `WaitingForBootstrapData`; the VM service's `Failed` with its
/// error), none while CAPZ returns before its conditions (the cluster, the identity, its Azure calls
/// refused: CAPI's fallback `WaitingForInfrastructure` on the Machine); once the VM exists
/// `spec.providerID`, `status.ready`, `status.vmState` `Succeeded` and its `InternalDNS` address
/// (`azure/scope/machine.go` `SetProviderID`, `SetReady`, `SetVMState`, `SetAddresses`).
pub fn reflect(s: &mut Store, machine: &Value, infra: &(&'static str, bool, &'static str, String), now: &str) {
    let r = &machine["spec"]["infrastructureRef"];
    if r["kind"] != "AzureMachine" {
        return;
    }
    let Some(kind) = super::kinds::Kind::served(CAPZ, "azuremachines") else { return };
    let key = super::store::key(
        kind,
        machine["metadata"]["namespace"].as_str().unwrap_or_default(),
        r["name"].as_str().unwrap_or_default(),
    );
    let Some(mut am) = s.objects.get(&key).cloned() else { return };
    if am.value["metadata"].get("deletionTimestamp").is_some() {
        return;
    }
    let (_, ok, reason, message) = infra;
    let wanted: Vec<(&'static str, bool, &'static str, String)> = match (ok, *reason) {
        (true, _) => vec![("Ready", true, "", String::new()), ("VMRunning", true, "", String::new())],
        (false, "WaitingForClusterInfrastructure" | "WaitingForBootstrapData" | "Failed") => {
            vec![("Ready", false, reason, message.clone()), ("VMRunning", false, reason, message.clone())]
        }
        _ => Vec::new(),
    };
    let before = am.value.clone();
    let conditions = super::conditions_json(&wanted, &am.value["status"]["conditions"], now);
    am.value["status"]["conditions"] = json!(conditions);
    am.value["status"]["ready"] = json!(ok);
    match machine["spec"]["providerID"].as_str() {
        Some(pid) => {
            am.value["spec"]["providerID"] = json!(pid);
            am.value["status"]["vmState"] = json!("Succeeded");
            am.value["status"]["addresses"] = machine["status"]["addresses"].clone();
        }
        None => {
            if let Some(st) = am.value["status"].as_object_mut() {
                st.remove("vmState");
                st.remove("addresses");
            }
        }
    }
    if am.value != before {
        s.put(am);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_provider_id_lower_cases_the_resource_group_only() {
        assert_eq!(
            super::provider_id(
                "/subscriptions/S/resourceGroups/My-RG/providers/Microsoft.Compute/virtualMachines/Vm-1"
            ),
            "azure:///subscriptions/S/resourceGroups/my-rg/providers/Microsoft.Compute/virtualMachines/Vm-1"
        );
    }
}
