//! Spec front end from the outside: the examples are valid; each broken case under
//! `tests/cases/<name>/` yields exactly the diagnostic codes listed in its `expect` file,
//! each pointing at the line given there; secrets never reach a rendered diagnostic.

use std::path::{Path, PathBuf};

use miette::{GraphicalReportHandler, GraphicalTheme};
use xcsp_plans::{LoadFailure, VarInputs};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn both_examples_validate_and_plan_every_resource() {
    for (ex, expected) in [("examples/il5-govcloud", 37), ("examples/public", 36)] {
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

#[test]
fn broken_specs_yield_their_diagnostics_at_their_lines() {
    let mut cases: Vec<PathBuf> =
        std::fs::read_dir(root().join("tests/cases")).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(cases.len() >= 5, "case directories missing");
    for case in cases {
        let expect = std::fs::read_to_string(case.join("expect")).unwrap();
        let Err(LoadFailure::Problems(problems)) = xcsp_plans::load(&case, &VarInputs::default()) else {
            panic!("{} should fail", case.display());
        };
        for line in expect.lines().filter(|l| !l.trim().is_empty()) {
            let (code, at) = line.split_once(' ').unwrap_or((line, ""));
            let found = problems.iter().any(|p| {
                p.code == code
                    && (at.is_empty()
                        || p.labels.first().is_some_and(|(s, _)| s.file.line_col(s.start).0.to_string() == at))
            });
            assert!(
                found,
                "{}: no {code} at line {at}; got {:#?}",
                case.display(),
                problems.iter().map(|p| (p.code, p.labels.first().map(|l| l.0.location()))).collect::<Vec<_>>()
            );
        }
    }
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
