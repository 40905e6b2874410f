//! The machine configuration of an Azure pool joining an OpenShift cluster on AWS.
//!
//! Every worker config of an AWS cluster carries the AWS units that write the kubelet's node name
//! and provider ID into `/etc/kubernetes/node.env` from the EC2 metadata service
//! (machine-config-operator `templates/common/aws/units/aws-kubelet-nodename.service.yaml`,
//! `aws-kubelet-providerid.service.yaml`; the kubelet's drop-in `20-node-env.conf` requires that
//! file). On an Azure VM they would fail, and a node registered under an `aws://` provider ID never
//! matches its Machine. The pool's config masks them and writes `node.env` from the Azure
//! Instance Metadata Service instead:
//! - `KUBELET_PROVIDERID`: `azure://` and the VM's resource ID with the resource-group segment
//!   lower-cased, byte for byte what CAPZ puts on the Machine (`azure/services/virtualmachines`
//!   `ConvertResourceGroupNameToLower(ProviderIDPrefix + vm.ID)`), which CAPI matches exactly
//!   against the Node's (`machine_controller_noderef.go` `getNode`);
//! - `KUBELET_NODE_NAME`: the VM's name;
//! - `CUSTOM_KUBELET_LABELS`: labels the kubelet sets on its Node at registration (the worker
//!   kubelet unit's `--node-labels=...,${CUSTOM_KUBELET_LABELS}`).
//!
//! IMDS: `GET http://169.254.169.254/metadata/instance/compute/{resourceId,name}?api-version=2021-02-01&format=text`
//! with header `Metadata: true`, never through a proxy (Microsoft Learn, "Azure Instance Metadata
//! Service for virtual machines"; `resourceId` needs api-version 2019-03-11 or later).
//!
//! The other AWS-only units and the clock:
//! - `aws-update-dns.service` (enabled where the cluster hosts its load balancers' DNS,
//!   `dnsType: ClusterHosted`) points the node's resolver at 169.254.169.253, AWS's VPC resolver,
//!   which no Azure VM reaches: the node would resolve nothing, `api-int` included. Every unit of
//!   the MCO's AWS templates is masked ([`AWS_UNITS`]), and so is any `aws-` unit a later release
//!   adds, found in the cluster's own worker configs at apply ([`mask`]).
//! - Time: RHCOS picks its platform's clock (the Hyper-V PTP clock on Azure) only while
//!   `/etc/chrony.conf` is the OS's default (fedora-coreos-config `coreos-platform-chrony-config`:
//!   it exits when the file was changed), and a cluster's worker chrony MachineConfig, which the
//!   pool inherits, commonly names AWS's Time Sync Service at 169.254.169.123, a link-local address
//!   no Azure VM reaches. The pool's config writes `/etc/chrony.conf` with the host's PTP clock as
//!   Microsoft documents it for Linux VMs (Microsoft Learn, "Time sync for Linux VMs in Azure",
//!   chrony: `refclock PHC /dev/ptp_hyperv poll 3 dpoll -2 offset 0`); MCO merges a custom pool's
//!   configs after the worker's, so the file replaces theirs.

use base64::Engine as _;
use serde_json::{Value, json};

/// The label that ties a MachineConfig to a pool's role.
pub const ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";

/// The units of the machine-config operator's AWS templates (`templates/common/aws/units`: the
/// same three on release-4.20, 4.21, 4.22, 4.23 and main), rendered into every AWS cluster's
/// `00-worker`; the fourth file there, `kubelet-node-env.dropin.yaml`, is the kubelet's
/// `20-node-env.conf`, which the pool needs (it reads `node.env`).
pub const AWS_UNITS: [&str; 3] =
    ["aws-kubelet-nodename.service", "aws-kubelet-providerid.service", "aws-update-dns.service"];

/// Where chrony reads its configuration, and what the pool writes there.
pub const CHRONY_CONF: &str = "/etc/chrony.conf";
const CHRONY: &str = "# Written by xcsp: the Azure host's clock (Hyper-V PTP), as Microsoft documents for Linux VMs.
refclock PHC /dev/ptp_hyperv poll 3 dpoll -2 offset 0 stratum 2
driftfile /var/lib/chrony/drift
makestep 1.0 3
rtcsync
logdir /var/log/chrony
";

/// `text` as an Ignition file's `data:` URL, base64-encoded.
fn data_url(text: &str) -> String {
    format!("data:text/plain;charset=utf-8;base64,{}", base64::engine::general_purpose::STANDARD.encode(text))
}

/// The text of an Ignition `data:` URL (base64 or percent-encoded; RFC 2397), empty if unreadable.
pub fn data_url_text(source: &str) -> String {
    let Some((head, data)) = source.strip_prefix("data:").and_then(|s| s.split_once(',')) else { return String::new() };
    let bytes = if head.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD.decode(data).unwrap_or_default()
    } else {
        percent_decode(data)
    };
    String::from_utf8_lossy(&bytes).into_owned()
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Whether a unit of the cluster's worker configs is one of AWS's own (the MCO's AWS templates
/// name every one of theirs `aws-*`).
pub fn aws_only(unit: &str) -> bool {
    unit.starts_with("aws-") && unit.ends_with(".service")
}

/// Adds a mask for each of `found` (units of the cluster's worker configs that [`aws_only`]
/// names) the config does not mask yet.
pub fn mask(config: &mut Value, found: &[String]) {
    let Some(units) = config["systemd"]["units"].as_array_mut() else { return };
    for name in found {
        if !units.iter().any(|u| u["name"] == name.as_str()) {
            units.insert(0, json!({ "name": name, "mask": true }));
        }
    }
}

/// The script's path on the node, and its unit.
const SCRIPT: &str = "/usr/local/bin/xcsp-azure-node-env";
const UNIT: &str = "xcsp-azure-node-env.service";

fn script(labels: &[String]) -> String {
    format!(
        r#"#!/bin/bash
# Written by xcsp: the kubelet's node name and provider ID from the Azure Instance Metadata Service.
set -euo pipefail
imds() {{
  curl -fsS --retry 10 --retry-delay 3 --noproxy '*' -H 'Metadata: true' \
    "http://169.254.169.254/metadata/instance/compute/$1?api-version=2021-02-01&format=text"
}}
id="$(imds resourceId)"
name="$(imds name)"
# CAPZ lower-cases the resource group segment of the provider ID it puts on the Machine.
rg="$(sed -E 's#^/subscriptions/[^/]+/resourceGroups/([^/]+)/.*#\1#' <<<"$id")"
id="${{id/\/resourceGroups\/$rg\//\/resourceGroups\/${{rg,,}}\/}}"
cat > /etc/kubernetes/node.env <<ENV
KUBELET_NODE_NAME=$name
KUBELET_PROVIDERID=azure://$id
CUSTOM_KUBELET_LABELS={labels}
ENV
"#,
        labels = labels.join(",")
    )
}

/// The Ignition config of the pool's MachineConfig (spec 3.2.0, which every supported release
/// of the machine-config operator reads).
pub fn azure_node(kubelet_labels: &[String]) -> Value {
    let source = data_url(&script(kubelet_labels));
    let unit = format!(
        "[Unit]\nDescription=Kubelet node name and provider ID from Azure IMDS (xcsp)\nWants=network-online.target\nAfter=network-online.target\nBefore=kubelet-dependencies.target\n\n[Service]\nType=oneshot\nExecStart={SCRIPT}\nRemainAfterExit=yes\n\n[Install]\nRequiredBy=kubelet-dependencies.target\n"
    );
    let chrony = data_url(CHRONY);
    let mut units: Vec<Value> = AWS_UNITS.iter().map(|u| json!({ "name": u, "mask": true })).collect();
    units.push(json!({ "name": UNIT, "enabled": true, "contents": unit }));
    json!({
        "ignition": { "version": "3.2.0" },
        "systemd": { "units": units },
        "storage": { "files": [
            { "path": SCRIPT, "mode": 493, "overwrite": true, "contents": { "source": source } },
            { "path": CHRONY_CONF, "mode": 420, "overwrite": true, "contents": { "source": chrony } },
        ] },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_masks_the_aws_units_and_writes_the_labels() {
        let c = azure_node(&["node.openshift.io/cloud-provider=azure".into(), "gpu=true".into()]);
        let units = c["systemd"]["units"].as_array().unwrap();
        for aws in ["aws-kubelet-nodename.service", "aws-kubelet-providerid.service", "aws-update-dns.service"] {
            assert!(units.iter().any(|u| u["name"] == aws && u["mask"] == true), "{aws}");
        }
        let chrony = c["storage"]["files"].as_array().unwrap().iter().find(|f| f["path"] == CHRONY_CONF).unwrap();
        let b64 = chrony["contents"]["source"].as_str().unwrap().split_once("base64,").unwrap().1;
        let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap();
        assert!(text.contains("refclock PHC /dev/ptp_hyperv") && !text.contains("169.254.169.123"), "{text}");
        let src = c["storage"]["files"][0]["contents"]["source"].as_str().unwrap();
        let b64 = src.split_once("base64,").unwrap().1;
        let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap();
        assert!(text.contains("CUSTOM_KUBELET_LABELS=node.openshift.io/cloud-provider=azure,gpu=true\n"), "{text}");
        assert!(text.contains("KUBELET_PROVIDERID=azure://$id"));
    }

    #[test]
    fn data_urls_read_in_both_encodings() {
        assert_eq!(data_url_text("data:,server%20169.254.169.123%20iburst%0A"), "server 169.254.169.123 iburst\n");
        assert_eq!(data_url_text("data:text/plain;charset=utf-8;base64,c2VydmVyIHg="), "server x");
        assert_eq!(data_url_text("https://example"), "");
    }

    #[test]
    fn a_later_releases_aws_unit_is_masked_once() {
        let mut c = azure_node(&[]);
        let found: Vec<String> =
            ["aws-new-thing.service", "aws-update-dns.service"].iter().map(|s| s.to_string()).collect();
        assert!(found.iter().all(|u| aws_only(u)) && !aws_only("kubelet.service"));
        mask(&mut c, &found);
        let units = c["systemd"]["units"].as_array().unwrap();
        assert_eq!(units.iter().filter(|u| u["name"] == "aws-update-dns.service").count(), 1);
        assert!(units.iter().any(|u| u["name"] == "aws-new-thing.service" && u["mask"] == true));
    }
}
