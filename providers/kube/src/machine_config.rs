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

use base64::Engine as _;
use serde_json::{Value, json};

/// The label that ties a MachineConfig to a pool's role.
pub const ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";

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
    let source = format!(
        "data:text/plain;charset=utf-8;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(script(kubelet_labels))
    );
    let unit = format!(
        "[Unit]\nDescription=Kubelet node name and provider ID from Azure IMDS (xcsp)\nWants=network-online.target\nAfter=network-online.target\nBefore=kubelet-dependencies.target\n\n[Service]\nType=oneshot\nExecStart={SCRIPT}\nRemainAfterExit=yes\n\n[Install]\nRequiredBy=kubelet-dependencies.target\n"
    );
    json!({
        "ignition": { "version": "3.2.0" },
        "systemd": { "units": [
            { "name": "aws-kubelet-nodename.service", "mask": true },
            { "name": "aws-kubelet-providerid.service", "mask": true },
            { "name": UNIT, "enabled": true, "contents": unit },
        ] },
        "storage": { "files": [
            { "path": SCRIPT, "mode": 493, "overwrite": true, "contents": { "source": source } },
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
        for aws in ["aws-kubelet-nodename.service", "aws-kubelet-providerid.service"] {
            assert!(units.iter().any(|u| u["name"] == aws && u["mask"] == true), "{aws}");
        }
        let src = c["storage"]["files"][0]["contents"]["source"].as_str().unwrap();
        let b64 = src.split_once("base64,").unwrap().1;
        let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap();
        assert!(text.contains("CUSTOM_KUBELET_LABELS=node.openshift.io/cloud-provider=azure,gpu=true\n"), "{text}");
        assert!(text.contains("KUBELET_PROVIDERID=azure://$id"));
    }
}
