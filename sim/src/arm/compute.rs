//! What Compute and Network do with the resources CAPZ makes for a worker (CAPZ v1.26.0's calls,
//! `shared/reference/README.md` "What CAPZ v1.26.0 calls"): a network interface in an existing
//! subnet (`networkInterface.json` 2023-05-01), a virtual machine (`virtualMachine.json`
//! 2024-03-01) with the OS disk its PUT creates (`disk.json` 2023-10-02), and the availability set
//! CAPZ makes for a machine without a failure domain (`availabilitySet.json` 2024-03-01).
//!
//! - A NIC's IP configurations must name a subnet that exists (400 `InvalidResourceReference`, the
//!   Network resource provider's wording, as seen in MicrosoftDocs/azure-docs#81734); each gets a
//!   private address from its subnet, the first after the five Azure reserves (Microsoft Learn,
//!   "Azure Virtual Network FAQ": the network address, `.1` to `.3`, and the broadcast address).
//! - A VM's size, zone, image and quota are judged as [`super::skus::create_refusal`] judges them
//!   (409 with Compute's codes), a Generation 1 image on a size that boots only Generation 2 is 400
//!   `BadRequest` ([`generation_refusal`]), and its NICs and availability set must exist.
//! - `osProfile.customData` and `osProfile.adminPassword` are write-only: kept for the VM's boot
//!   (the resource's secret), never answered (`adminPassword` is `x-ms-secret` in
//!   `computeRPCommon.json`; Resource Manager leaves `customData` out of every GET,
//!   Azure/azure-cli#5866 and #20870, "also visible ... when issuing raw requests").
//! - The VM's PUT creates its OS disk (`storageProfile.osDisk.name`, managed by the VM, without the
//!   VM's tags: the VM PUT's `osDisk` has no `tags`, and CAPZ finds the disk by name to delete it,
//!   `azure/services/disks`); its delete removes the NICs and disks whose `deleteOption` is `Delete` and detaches the others
//!   (`DiskDeleteOptionTypes`, `DeleteOptions` in the spec; the OS disk's default is `Detach`).
//! - A disk still attached to a VM and a NIC still used by one cannot be deleted.
//! - An availability set lists the VMs in it (`properties.virtualMachines`, read-only).

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::Ctx;
use super::error::ArmError;
use super::kinds::{self, Kind};
use super::refs::{self, is};
use super::store::{ResKind, Resource, Store};

/// The Hyper-V generation of a Marketplace image, as the RHCOS stream names OpenShift's
/// (openshift/enhancements `enhancements/rhcos/marketplace-images.md`: `azureopenshift:aro4` SKUs
/// `aro_<XY>` are `hyperVGen1`, `<XY>-v2` and `<XY>-arm` `hyperVGen2`; `redhat:rh-ocp-worker` and
/// `redhat:rh-oke-worker` have a `-gen1` SKU beside the Generation 2 one). None: not known here.
pub fn image_generation(publisher: &str, offer: &str, sku: &str) -> Option<u8> {
    match (publisher, offer) {
        ("azureopenshift", "aro4") if sku.starts_with("aro_") => Some(1),
        ("azureopenshift", "aro4") if sku.ends_with("-v2") || sku.ends_with("-arm") => Some(2),
        ("redhat", "rh-ocp-worker" | "rh-oke-worker") => Some(if sku.ends_with("-gen1") { 1 } else { 2 }),
        _ => None,
    }
}

/// Compute's refusal of a Generation 1 image on a size that boots Generation 2 only, worded as
/// Azure answers it (400 `BadRequest`; the message as clients print it, e.g. loft-sh/devpod#731
/// for `Standard_NC24ads_A100_v4`, gardener/gardener-extension-provider-azure#972).
pub fn generation_refusal(size: &str, publisher: &str, offer: &str, sku: &str) -> Option<String> {
    // The size's `HyperVGenerations` (crate::arm::skus); a size the world does not know boots either.
    let gen2_only = super::skus::find(size).is_some_and(|s| s.gen2_only());
    if !gen2_only || image_generation(publisher, offer, sku) != Some(1) {
        return None;
    }
    Some(format!(
        "The selected VM size '{size}' cannot boot Hypervisor Generation '1'. If this was a Create operation please check that the Hypervisor Generation of the Image matches the Hypervisor Generation of the selected VM Size. If this was an Update operation please select a Hypervisor Generation '1' VM Size. For more information, see https://aka.ms/azuregen2vm"
    ))
}

fn sub_of(id: &str) -> &str {
    id.split('/').nth(2).unwrap_or_default()
}

/// The resource-group path (`/subscriptions/{s}/resourceGroups/{rg}`) of a resource id.
fn rg_path(id: &str) -> String {
    id.split('/').take(5).collect::<Vec<_>>().join("/")
}

/// The OS disk's id a VM's PUT names or gets.
fn os_disk_id(vm_id: &str, body: &Value) -> String {
    let vm = vm_id.rsplit('/').next().unwrap_or_default();
    let name = body["properties"]["storageProfile"]["osDisk"]["name"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| format!("{vm}_OsDisk_1_{}", uuid::Uuid::new_v4().simple()));
    format!("{}/providers/Microsoft.Compute/disks/{name}", rg_path(vm_id))
}

/// Checks a PUT of a NIC, VM or availability set.
pub fn check_put(
    store: &Store,
    ctx: &Ctx,
    kind: &'static Kind,
    id: &str,
    body: &Value,
    location: &str,
) -> Result<(), ArmError> {
    let props = &body["properties"];
    if is(kind, &kinds::NIC) {
        let configs = props["ipConfigurations"].as_array().cloned().unwrap_or_default();
        if configs.is_empty() {
            return Err(ArmError::bad_request(
                "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
                format!("Network interface {id} must have at least one IP configuration."),
            ));
        }
        for (i, c) in configs.iter().enumerate() {
            if c["name"].as_str().is_none_or(str::is_empty) {
                return Err(ArmError::invalid_content(format!("properties.ipConfigurations[{i}].name is required.")));
            }
            if let Some(subnet) = c["properties"]["subnet"]["id"].as_str() {
                refs::resolve(store, subnet, id, &kinds::SUBNET)?;
            }
        }
    } else if is(kind, &kinds::VM) {
        let size = props["hardwareProfile"]["vmSize"].as_str().unwrap_or_default();
        if size.is_empty() {
            return Err(ArmError::invalid_content("properties.hardwareProfile.vmSize is required."));
        }
        let image = &props["storageProfile"]["imageReference"];
        let marketplace = match (image["publisher"].as_str(), image["offer"].as_str(), image["sku"].as_str()) {
            (Some(p), Some(o), Some(s)) => Some((p, o, s, image["version"].as_str().unwrap_or("latest"))),
            _ => None,
        };
        if let Some(gallery_image) = image["id"].as_str() {
            super::gallery::vm_image(store, size, gallery_image)?;
        }
        let zone = body["zones"][0].as_str();
        if let Some((code, message)) =
            super::skus::create_refusal(&ctx.config.compute, store, location, zone, size, marketplace, sub_of(id))
        {
            return Err(ArmError::conflict(code, message));
        }
        if let Some((p, o, s, _)) = marketplace
            && let Some(refused) = generation_refusal(size, p, o, s)
        {
            return Err(ArmError::bad_request("BadRequest", refused));
        }
        let nics = props["networkProfile"]["networkInterfaces"].as_array().cloned().unwrap_or_default();
        if nics.is_empty() {
            return Err(ArmError::invalid_content(
                "properties.networkProfile.networkInterfaces must name at least one network interface.",
            ));
        }
        for n in &nics {
            let nic = n["id"].as_str().unwrap_or_default();
            refs::resolve(store, nic, id, &kinds::NIC)?;
            if let Some(other) = store.vm_using_nic(nic).filter(|v| !v.eq_ignore_ascii_case(id)) {
                return Err(ArmError::bad_request(
                    "NicInUse",
                    format!(
                        "Network Interface {nic} is used by existing resource {other}. In order to attach it to another resource, it must be dissociated first."
                    ),
                ));
            }
        }
        if let Some(set) = props["availabilitySet"]["id"].as_str() {
            refs::resolve(store, set, id, &kinds::AVAILABILITY_SET)?;
        }
    }
    Ok(())
}

/// What a NIC, VM or availability set's PUT fills in (`stored` is the body to keep).
pub fn complete(
    store: &mut Store,
    kind: &'static Kind,
    id: &str,
    stored: &mut Value,
    existing: Option<&Resource>,
    now: &str,
) {
    if is(kind, &kinds::NIC) {
        let prior = existing.map(|e| e.body["properties"]["ipConfigurations"].clone()).unwrap_or(Value::Null);
        let props = &mut stored["properties"];
        if props["enableAcceleratedNetworking"].is_null() {
            props["enableAcceleratedNetworking"] = json!(false);
        }
        if props["enableIPForwarding"].is_null() {
            props["enableIPForwarding"] = json!(false);
        }
        props["nicType"] = json!("Standard");
        let mut configs = props["ipConfigurations"].as_array().cloned().unwrap_or_default();
        let taken = taken_addresses(store, id);
        let mut mine: Vec<Ipv4Addr> = Vec::new();
        for (i, c) in configs.iter_mut().enumerate() {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            c["id"] = json!(format!("{id}/ipConfigurations/{name}"));
            c["etag"] = json!(super::store::new_etag());
            if !c["properties"].is_object() {
                c["properties"] = json!({});
            }
            let p = &mut c["properties"];
            p["provisioningState"] = json!("Succeeded");
            if p["primary"].is_null() {
                p["primary"] = json!(i == 0);
            }
            if p["privateIPAllocationMethod"].is_null() {
                p["privateIPAllocationMethod"] = json!("Dynamic");
            }
            p["privateIPAddressVersion"] = json!("IPv4");
            let kept = prior
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["name"] == c["name"])
                .and_then(|x| x["properties"]["privateIPAddress"].as_str().map(String::from));
            let p = &mut c["properties"];
            if p["privateIPAddress"].is_null() || p["privateIPAllocationMethod"] == "Dynamic" {
                let prefix = p["subnet"]["id"]
                    .as_str()
                    .and_then(|s| store.get(s))
                    .and_then(|s| s.body["properties"]["addressPrefix"].as_str())
                    .and_then(|x| x.parse::<ipnet::Ipv4Net>().ok());
                let address = kept.or_else(|| {
                    let net = prefix?;
                    let (first, last) = (u32::from(net.network()) + 4, u32::from(net.broadcast()));
                    (first..last)
                        .map(Ipv4Addr::from)
                        .find(|a| !taken.contains(a) && !mine.contains(a))
                        .map(|a| a.to_string())
                });
                if let Some(a) = address {
                    if let Ok(ip) = a.parse() {
                        mine.push(ip);
                    }
                    p["privateIPAddress"] = json!(a);
                }
            }
        }
        stored["properties"]["ipConfigurations"] = Value::Array(configs);
    } else if is(kind, &kinds::VM) {
        let prior = existing.map(|e| e.body["properties"].clone()).unwrap_or(Value::Null);
        let props = &mut stored["properties"];
        props["vmId"] = prior.get("vmId").cloned().unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
        props["timeCreated"] = prior.get("timeCreated").cloned().unwrap_or_else(|| json!(now));
        if let Some(os) = props["osProfile"].as_object_mut() {
            os.remove("customData");
            os.remove("adminPassword");
        }
        let disk = prior["storageProfile"]["osDisk"]["managedDisk"]["id"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| os_disk_id(id, stored));
        let os = &mut stored["properties"]["storageProfile"]["osDisk"];
        if os.is_object() {
            os["managedDisk"]["id"] = json!(disk);
            if os["name"].is_null() {
                os["name"] = json!(disk.rsplit('/').next().unwrap_or_default());
            }
            if os["osType"].is_null() {
                os["osType"] = json!("Linux");
            }
            if os["deleteOption"].is_null() {
                os["deleteOption"] = json!("Detach");
            }
        }
    } else if is(kind, &kinds::AVAILABILITY_SET) {
        if stored["sku"].is_null() {
            stored["sku"] = json!({"name": "Classic"});
        }
        let props = &mut stored["properties"];
        if props["platformFaultDomainCount"].is_null() {
            props["platformFaultDomainCount"] = json!(2);
        }
        if props["platformUpdateDomainCount"].is_null() {
            props["platformUpdateDomainCount"] = json!(5);
        }
    }
}

/// The private addresses the subnets' other NICs hold (beside the NIC `except`).
fn taken_addresses(store: &Store, except: &str) -> Vec<Ipv4Addr> {
    store
        .of_kind(&kinds::NIC)
        .filter(|n| !n.id.eq_ignore_ascii_case(except))
        .flat_map(|n| {
            n.body["properties"]["ipConfigurations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| c["properties"]["privateIPAddress"].as_str().and_then(|a| a.parse().ok()))
        })
        .collect()
}

/// The write-only part of a VM's PUT: its custom data (base64), which the VM's boot reads.
pub fn secret_of(kind: &'static Kind, body: &Value) -> Option<String> {
    if is(kind, &kinds::VM) { body["properties"]["osProfile"]["customData"].as_str().map(String::from) } else { None }
}

/// After a VM's PUT is stored: its OS disk exists, managed by it.
pub fn after_put(store: &mut Store, kind: &'static Kind, id: &str, now: std::time::Instant) {
    if !is(kind, &kinds::VM) {
        return;
    }
    let Some(vm) = store.get(id).cloned() else { return };
    let os = &vm.body["properties"]["storageProfile"]["osDisk"];
    let Some(disk_id) = os["managedDisk"]["id"].as_str() else { return };
    if store.get(disk_id).is_some() {
        return;
    }
    let name = disk_id.rsplit('/').next().unwrap_or_default().to_string();
    let size = vm.body["properties"]["hardwareProfile"]["vmSize"].as_str().unwrap_or_default();
    let generation = if super::skus::find(size).is_some_and(|s| s.gen2_only()) { "V2" } else { "V1" };
    let body = json!({
        "id": disk_id, "name": name, "type": kinds::DISK.arm_type, "location": vm.body["location"],
        "managedBy": vm.id,
        "sku": {"name": os["managedDisk"]["storageAccountType"].as_str().unwrap_or("Premium_LRS")},
        "zones": vm.body["zones"],
        "properties": {
            "osType": os["osType"], "hyperVGeneration": generation,
            "creationData": {"createOption": "FromImage",
                "imageReference": {"id": vm.body["properties"]["storageProfile"]["imageReference"]["id"]}},
            "diskSizeGB": os["diskSizeGB"], "diskState": "Attached", "provisioningState": "Succeeded",
            "timeCreated": vm.body["properties"]["timeCreated"],
        },
    });
    let seq = store.next_seq();
    store.insert(Resource {
        id: disk_id.to_string(),
        kind: ResKind::Typed(&kinds::DISK),
        name,
        body,
        created_at: now,
        changed_at: now,
        seq,
        op: None,
        secret: None,
    });
}

/// After a VM is deleted: its NICs and disks whose `deleteOption` is `Delete` go with it; the
/// others are detached.
pub fn after_delete(store: &mut Store, gone: &Resource) {
    if !matches!(gone.kind, ResKind::Typed(k) if is(k, &kinds::VM)) {
        return;
    }
    let props = &gone.body["properties"];
    let mut disks: Vec<(String, bool)> = Vec::new();
    let os = &props["storageProfile"]["osDisk"];
    if let Some(d) = os["managedDisk"]["id"].as_str() {
        disks.push((d.to_string(), os["deleteOption"] == "Delete"));
    }
    for d in props["storageProfile"]["dataDisks"].as_array().into_iter().flatten() {
        if let Some(id) = d["managedDisk"]["id"].as_str() {
            disks.push((id.to_string(), d["deleteOption"] == "Delete"));
        }
    }
    for (id, delete) in disks {
        if delete {
            store.remove_tree(&id.to_ascii_lowercase());
        } else if let Some(d) = store.get_mut(&id) {
            if let Some(o) = d.body.as_object_mut() {
                o.remove("managedBy");
            }
            d.body["properties"]["diskState"] = json!("Unattached");
        }
    }
    for n in props["networkProfile"]["networkInterfaces"].as_array().into_iter().flatten() {
        if n["properties"]["deleteOption"] == "Delete"
            && let Some(id) = n["id"].as_str()
        {
            store.remove_tree(&id.to_ascii_lowercase());
        }
    }
}

/// A NIC a VM still uses, or a disk a VM still manages, cannot be deleted.
pub fn check_delete(store: &Store, kind: &'static Kind, r: &Resource) -> Result<(), ArmError> {
    if is(kind, &kinds::NIC)
        && let Some(vm) = store.vm_using_nic(&r.id)
    {
        return Err(ArmError::bad_request(
            "NicInUse",
            format!(
                "Network Interface {} is used by existing resource {vm}. In order to delete the network interface, it must be dissociated from the resource. To learn more, see aka.ms/deletenic.",
                r.id
            ),
        ));
    }
    if is(kind, &kinds::DISK)
        && let Some(vm) = r.body["managedBy"].as_str()
    {
        return Err(ArmError::conflict("OperationNotAllowed", format!("Disk {} is attached to VM {vm}.", r.name)));
    }
    if is(kind, &kinds::AVAILABILITY_SET) {
        let mut body = r.body.clone();
        store.render_users(kind, &r.id, &mut body);
        if body["properties"]["virtualMachines"].as_array().is_some_and(|v| !v.is_empty()) {
            return Err(ArmError::conflict(
                "OperationNotAllowed",
                format!("Availability set {} cannot be deleted while it contains virtual machines.", r.name),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_one_images_are_refused_on_generation_two_sizes() {
        assert!(generation_refusal("Standard_NC24ads_A100_v4", "azureopenshift", "aro4", "aro_419").is_some());
        assert!(generation_refusal("Standard_NC24ads_A100_v4", "azureopenshift", "aro4", "419-v2").is_none());
        assert_eq!(image_generation("redhat", "rh-ocp-worker", "rh-ocp-worker-gen1"), Some(1));
        assert_eq!(image_generation("someone", "else", "x"), None);
    }

    #[test]
    fn ids_split_into_their_parts() {
        let vm = "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/w-1";
        assert_eq!(sub_of(vm), "s1");
        assert_eq!(rg_path(vm), "/subscriptions/s1/resourceGroups/rg");
        let named = json!({"properties": {"storageProfile": {"osDisk": {"name": "w-1_OSDisk"}}}});
        assert_eq!(
            os_disk_id(vm, &named),
            "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/disks/w-1_OSDisk"
        );
    }
}
