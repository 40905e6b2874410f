//! What the pool's objects select its Nodes by, against what its kubelet registers them with.

use std::path::Path;

/// The pool's MachineConfigPool and RuntimeClass select its Nodes by a label the pool's kubelet
/// registers with (in its MachineConfig's kubelet labels), so a Node is the pool's from its first
/// registration, never the worker pool's while it waits for CAPI's label sync.
#[test]
fn the_pools_nodes_are_its_machine_config_pools_from_their_registration() {
    let loaded = xcsp_plans::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/il5-govcloud"),
        &Default::default(),
    )
    .unwrap();
    let attrs = |rtype: &str| {
        let n = loaded.graph.nodes().find(|n| n.address.rtype.as_str() == rtype).unwrap();
        (n.address.clone(), n.attributes.clone())
    };
    let (_, mc) = attrs("k8s_machine_config");
    let kubelet = mc["kubelet_labels"].to_json();
    for rtype in ["k8s_machine_config_pool", "k8s_runtime_class"] {
        let (address, a) = attrs(rtype);
        let object = xcsp_kube::object("il5-gpu", &address, &a).unwrap();
        let selector = if rtype == "k8s_runtime_class" {
            object["scheduling"]["nodeSelector"].clone()
        } else {
            object["spec"]["nodeSelector"]["matchLabels"].clone()
        };
        let selector = selector.as_object().unwrap();
        assert!(!selector.is_empty(), "{object}");
        for (k, v) in selector {
            let label = format!("{k}={}", v.as_str().unwrap());
            assert!(kubelet.as_array().unwrap().iter().any(|l| l == &label), "{rtype}: {label} not in {kubelet}");
        }
    }
}
