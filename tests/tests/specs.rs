//! Spec front end from the outside: the examples are valid; each broken case under
//! `tests/cases/<name>/` yields exactly the diagnostics listed in its `expect` file (code and
//! line, one per line; a problem without a location is its code alone), no more and no fewer; secrets never reach a rendered diagnostic.

use std::path::{Path, PathBuf};

use miette::{GraphicalReportHandler, GraphicalTheme};
use xcsp_plans::{LoadFailure, VarInputs};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn both_examples_validate_and_plan_every_resource() {
    for (ex, expected) in [("examples/il5-govcloud", 57), ("examples/public", 59)] {
        let loaded =
            xcsp_plans::load(&root().join(ex), &VarInputs::default()).unwrap_or_else(|e| panic!("{ex}: {e:?}"));
        assert_eq!(loaded.graph.len(), expected, "{ex}");
        let plan =
            xcsp_plans::plan::diff(&loaded.model.stack, &loaded.model.digest, &loaded.graph, &Default::default());
        let text = xcsp_plans::plan::render(&plan);
        assert!(text.contains(&format!("Plan: {expected} to add, 0 to change")), "{text}");
        for t in [
            "aws_vpn_connection.link[1]",
            "azure_virtual_network_gateway.link",
            "azure_local_network_gateway.link[3]",
            "k8s_machine_set.",
        ] {
            assert!(text.contains(t), "{ex} plan lacks {t}");
        }
        assert!(text.contains("(sensitive value)") && text.contains("(known after apply)"));
    }
}

/// With OVN IPsec between nodes, both clouds' rules let IKE and ESP through (EC2 names ESP by its
/// number, an NSG by name, neither with ports); every link opens ICMP's "fragmentation needed";
/// every pool has a RuntimeClass whose tolerations ride out an outage of the pool's length.
#[test]
fn ipsec_opens_ike_and_esp_on_both_clouds_and_a_pool_rides_out_outages() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("examples/il5-govcloud/pool.xcsp.hcl")).unwrap();
    let rules = |text: String| {
        std::fs::write(dir.path().join("pool.xcsp.hcl"), text).unwrap();
        let loaded = xcsp_plans::load(dir.path(), &VarInputs::default()).unwrap_or_else(|e| panic!("{e:?}"));
        let attr = |rtype: &str, key: &str| -> serde_json::Value {
            let n = loaded.graph.nodes().find(|n| n.address.rtype.as_str() == rtype).unwrap();
            n.attributes.get(key).unwrap().to_json()
        };
        (
            attr("aws_security_group_ingress", "rules"),
            attr("azure_network_security_group", "rules"),
            attr("k8s_runtime_class", "tolerations"),
        )
    };
    let (aws, nsg, _) = rules(text.clone());
    let has = |v: &serde_json::Value, proto: &str| v.as_array().unwrap().iter().any(|r| r["protocol"] == proto);
    assert!(has(&aws, "icmp") && has(&nsg, "icmp") && !has(&aws, "50") && !has(&nsg, "esp"), "{aws}");
    let icmp = aws.as_array().unwrap().iter().find(|r| r["protocol"] == "icmp").unwrap();
    assert_eq!((icmp["from_port"].as_i64(), icmp["to_port"].as_i64()), (Some(3), Some(4)), "type 3, code 4");
    let (aws, nsg, tolerations) = rules(text.replacen("\ncluster {", "\ncluster {\n  ovn_ipsec = true", 1).replacen(
        "  machine_health_check = true",
        "  machine_health_check = true\n  outage_tolerance_seconds = 7200",
        1,
    ));
    let esp = aws.as_array().unwrap().iter().find(|r| r["protocol"] == "50").expect("ESP in the AWS rules");
    assert_eq!((esp["from_port"].as_i64(), esp["to_port"].as_i64()), (Some(-1), Some(-1)));
    assert!(aws.as_array().unwrap().iter().any(|r| r["protocol"] == "udp" && r["from_port"] == 4500), "{aws}");
    let esp = nsg.as_array().unwrap().iter().find(|r| r["protocol"] == "esp").expect("ESP in the NSG rules");
    assert_eq!(esp["ports"], "*");
    let seconds: Vec<i64> = tolerations
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["effect"] == "NoExecute")
        .filter_map(|t| t["toleration_seconds"].as_i64())
        .collect();
    assert_eq!(seconds, [7200, 7200], "unreachable and not-ready: {tolerations}");
    assert!(tolerations.as_array().unwrap().iter().any(|t| t["key"] == "nvidia.com/gpu"), "the pool's taint");
}

#[test]
fn broken_specs_yield_their_diagnostics_at_their_lines() {
    let mut cases: Vec<PathBuf> =
        std::fs::read_dir(root().join("tests/cases")).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(cases.len() >= 5, "case directories missing");
    let mut differ = Vec::new();
    for case in cases {
        let expect = std::fs::read_to_string(case.join("expect")).unwrap();
        let Err(LoadFailure::Problems(problems)) = xcsp_plans::load(&case, &VarInputs::default()) else {
            panic!("{} should fail", case.display());
        };
        // The exact multiset of (code, line): nothing missing, nothing extra, no twin.
        let mut want: Vec<String> =
            expect.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
        let mut got: Vec<String> = problems
            .iter()
            .map(|p| match p.labels.first() {
                Some((s, _)) => format!("{} {}", p.code, s.file.line_col(s.start).0),
                None => p.code.to_string(),
            })
            .collect();
        want.sort();
        got.sort();
        if got != want {
            differ.push(format!("{}:\n  expected {want:?}\n  got      {got:?}", case.display()));
        }
    }
    assert!(differ.is_empty(), "diagnostics differ from the expect files:\n{}", differ.join("\n"));
}

#[test]
fn a_bad_preshared_key_is_reported_without_showing_it() {
    let Err(LoadFailure::Problems(problems)) = xcsp_plans::load(&root().join("tests/cases/psk"), &VarInputs::default())
    else {
        panic!("psk case should fail");
    };
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_context_lines(0);
    let mut out = String::new();
    for p in problems.iter() {
        handler.render_report(&mut out, p).unwrap();
    }
    assert!(out.contains("xcsp::psk::format"));
    assert!(!out.contains("0leaky_SECRET"), "{out}");
}

#[test]
fn keys_on_a_line_next_to_an_error_are_masked_in_its_context() {
    let Err(LoadFailure::Problems(problems)) =
        xcsp_plans::load(&root().join("tests/cases/psk-nearby"), &VarInputs::default())
    else {
        panic!("psk-nearby case should fail");
    };
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_context_lines(3);
    let mut out = String::new();
    for p in problems.iter() {
        handler.render_report(&mut out, p).unwrap();
    }
    assert!(out.contains("preshared_keys = [\"***************\""), "the line is shown, masked: {out}");
    assert!(!out.contains("Hidden_Key"), "{out}");
}

#[test]
fn outputs_become_known_from_what_apply_recorded() {
    use std::collections::BTreeMap;
    use xcsp_core::provider::Attributes;
    use xcsp_core::{Address, Value};

    let path = root().join("examples/il5-govcloud");
    let first = xcsp_plans::load(&path, &VarInputs::default()).unwrap_or_else(|e| panic!("{e:?}"));
    let client_id =
        |l: &xcsp_plans::Loaded| l.model.outputs.iter().find(|o| o.name == "identity_client_id").unwrap().value.clone();
    assert_eq!(client_id(&first), Value::Unknown);

    let mut recorded: BTreeMap<Address, (String, Attributes)> = BTreeMap::new();
    let uai: Address = "azure_user_assigned_identity.capz".parse().unwrap();
    recorded.insert(uai, ("uai-id".into(), [("client_id".to_string(), Value::string("c-123"))].into_iter().collect()));
    for c in 0..2u32 {
        let a: Address = format!("aws_vpn_connection.link[{c}]").parse().unwrap();
        let attrs: Attributes = (1..=2)
            .flat_map(|k| {
                [
                    (format!("tunnel{k}_address"), Value::string(format!("203.0.113.{}", c * 2 + k))),
                    (format!("tunnel{k}_inside_cidr"), Value::string(format!("169.254.2{k}.{}/30", c * 4))),
                ]
            })
            .collect();
        recorded.insert(a, (format!("vpn-{c}"), attrs));
    }
    let computed = xcsp_plans::exports::computed(&first.exports, |a| recorded.get(a).map(|(id, at)| (id.as_str(), at)));
    let again =
        xcsp_plans::load(&path, &VarInputs { computed, ..VarInputs::default() }).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(client_id(&again), Value::string("c-123"));
    let tunnels = again.model.outputs.iter().find(|o| o.name == "tunnels").unwrap().value.clone();
    let tunnels = tunnels.as_list().expect("a list of tunnels");
    assert_eq!(tunnels.len(), 4);
    assert_eq!(tunnels[3].as_map().unwrap()["aws_outside_ip"], Value::string("203.0.113.4"));
    assert_eq!(tunnels[3].as_map().unwrap()["vpn_connection_id"], Value::string("vpn-1"));
}

/// Links in their own VPCs but rules on the one cluster's security groups: the plan warns once
/// the rules pass AWS's default quota, and names the first link that passes it (regression:
/// 10 links failed halfway through an apply with `RulesPerSecurityGroupLimitExceeded`).
#[test]
fn more_links_than_the_security_group_quota_allows_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |links: usize| {
        let mut s = std::fs::read_to_string(root().join("tests/cases/overlap/spec.xcsp.hcl")).unwrap();
        s.truncate(s.find("network \"link\"").unwrap());
        for l in 0..links {
            s.push_str(&format!(
                "network \"l{l}\" {{\n  vnet_cidr      = \"10.{o}.0.0/16\"\n  gateway_subnet = \"10.{o}.255.0/27\"\n  vpc_id         = \"vpc-{l:017x}\"\n}}\n",
                o = 200 + l
            ));
        }
        std::fs::write(dir.path().join("spec.xcsp.hcl"), s).unwrap();
        xcsp_plans::load(dir.path(), &VarInputs::default()).unwrap_or_else(|e| panic!("{links} links load: {e:?}"))
    };
    let quota =
        |l: &xcsp_plans::Loaded| l.warnings.iter().filter(|p| p.code == "xcsp::aws::security_group_quota").count();
    assert_eq!(quota(&spec(6)), 0, "6 links x 9 rules = 54 fit in 60");
    let ten = spec(10);
    assert_eq!(quota(&ten), 1);
    let w = ten.warnings.iter().find(|p| p.code == "xcsp::aws::security_group_quota").unwrap();
    assert!(w.to_string().contains("90 inbound rules"), "{w}");
    let line = w.labels.first().map(|(s, _)| s.file.line_col(s.start).0);
    let text = std::fs::read_to_string(dir.path().join("spec.xcsp.hcl")).unwrap();
    let l6 = text.lines().position(|l| l.starts_with("network \"l6\"")).unwrap() + 1;
    assert_eq!(line, Some(l6), "the label is on the seventh link");
}
