//! The computed exports come from what expand says each node serves: every one is declared by
//! its block's schema, and `exports::computed` reads exactly them from the records.

use std::collections::BTreeMap;
use std::path::Path;

use xcsp_core::provider::Attributes;
use xcsp_core::{Address, Value};
use xcsp_plans::{Loaded, VarInputs};

fn example(name: &str) -> Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name);
    xcsp_plans::load(&path, &VarInputs::default()).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// Every node recorded with id `id:<address>` and each attribute named as `<address>/<attribute>`.
fn recorded(l: &Loaded) -> BTreeMap<Address, (String, Attributes)> {
    let attrs = |a: &Address| -> Attributes {
        let names = ["ip_address", "tunnel1_address", "tunnel2_address", "tunnel1_inside_cidr", "tunnel2_inside_cidr"];
        names
            .into_iter()
            .chain(["client_id", "principal_id"])
            .map(|k| (k.to_string(), Value::string(format!("{a}/{k}"))))
            .collect()
    };
    l.graph.nodes().map(|n| (n.address.clone(), (format!("id:{}", n.address), attrs(&n.address)))).collect()
}

#[test]
fn every_served_export_is_a_computed_attribute_of_its_block_and_a_node_of_the_graph() {
    for ex in ["il5-govcloud", "public"] {
        let l = example(ex);
        let served = xcsp_plans::expand::expanded(&l.model).exports;
        assert!(!served.is_empty());
        for (address, s) in served {
            assert!(l.graph.get(&address).is_some(), "{ex}: {address} serves {} but is not in the graph", s.key);
            let (kind, attribute) = (s.key.split('.').next().unwrap(), s.key.rsplit('.').next().unwrap());
            let spec = xcsp_plans::schema::top_level(kind).unwrap_or_else(|| panic!("{}: no block kind", s.key));
            assert!(spec.computed.contains(&attribute), "{ex}: {} is not a computed attribute of `{kind}`", s.key);
        }
    }
}

#[test]
fn computed_reads_each_export_from_the_nodes_that_serve_it() {
    let l = example("il5-govcloud");
    let mut records = recorded(&l);
    let computed = xcsp_plans::exports::computed(&l.exports, |a| records.get(a).map(|(id, at)| (id.as_str(), at)));
    let keys: Vec<&str> = computed.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "azure.resource_group_id",
            "network.link.gateway_public_ips",
            "network.link.tunnels",
            "network.link.vnet_id",
            "network.link.vpn_gateway_id",
            "worker_pool.gpu.subnet_id",
            "workload_identity.capz.client_id",
            "workload_identity.capz.principal_id",
        ]
    );
    assert_eq!(computed["azure.resource_group_id"], Value::string("id:azure_resource_group.main"));
    assert_eq!(computed["worker_pool.gpu.subnet_id"], Value::string("id:azure_subnet.pool-gpu"));
    assert_eq!(
        computed["network.link.gateway_public_ips"],
        Value::strings(["azure_public_ip.link[0]/ip_address", "azure_public_ip.link[1]/ip_address"])
    );
    let tunnels = computed["network.link.tunnels"].as_list().expect("a list").to_vec();
    let shown: Vec<String> = tunnels
        .iter()
        .map(|t| {
            let m = t.as_map().expect("a map");
            let fields: Vec<&str> = m.keys().map(String::as_str).collect();
            assert_eq!(fields, ["vpn_connection_id", "aws_outside_ip", "inside_cidr"]);
            format!("{} {}", m["vpn_connection_id"].as_str().unwrap(), m["inside_cidr"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        shown,
        [
            "id:aws_vpn_connection.link[0] aws_vpn_connection.link[0]/tunnel1_inside_cidr",
            "id:aws_vpn_connection.link[0] aws_vpn_connection.link[0]/tunnel2_inside_cidr",
            "id:aws_vpn_connection.link[1] aws_vpn_connection.link[1]/tunnel1_inside_cidr",
            "id:aws_vpn_connection.link[1] aws_vpn_connection.link[1]/tunnel2_inside_cidr",
        ]
    );

    // A list is known only when every item is.
    let conn: Address = "aws_vpn_connection.link[1]".parse().unwrap();
    records.get_mut(&conn).unwrap().1.shift_remove("tunnel2_address");
    let pip: Address = "azure_public_ip.link[0]".parse().unwrap();
    records.remove(&pip);
    let computed = xcsp_plans::exports::computed(&l.exports, |a| records.get(a).map(|(id, at)| (id.as_str(), at)));
    assert!(!computed.contains_key("network.link.tunnels"));
    assert!(!computed.contains_key("network.link.gateway_public_ips"));
    assert!(computed.contains_key("network.link.vpn_gateway_id"));
}
