//! Snapshots of what users read: the plan text of the public example and the rendered
//! diagnostics of broken specs. A change to either shows up as a reviewed diff
//! (`cargo insta review`, or `INSTA_UPDATE=always` then read the `.snap` diff in git).

use std::path::{Path, PathBuf};

use miette::{GraphicalReportHandler, GraphicalTheme};
use xcsp_plans::{LoadFailure, VarInputs};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn plan_text_of_the_public_example() {
    let loaded = xcsp_plans::load(&root().join("examples/public"), &VarInputs::default()).expect("the example loads");
    let plan = xcsp_plans::plan::diff(&loaded.model.stack, &loaded.model.digest, &loaded.graph, &Default::default());
    insta::assert_snapshot!(xcsp_plans::plan::render(&plan));
}

/// The diagnostics of one case directory, rendered as a terminal without colour shows them,
/// with the absolute path of the checkout taken out.
fn rendered(case: &str) -> String {
    let dir = root().join("tests/cases").join(case);
    let Err(LoadFailure::Problems(problems)) = xcsp_plans::load(&dir, &VarInputs::default()) else {
        panic!("{case} must fail with problems");
    };
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_context_lines(1);
    let mut out = String::new();
    for p in problems.iter() {
        handler.render_report(&mut out, p).unwrap();
    }
    out.replace(&root().display().to_string(), "<root>")
}

/// Every broken case, rendered: one snapshot per case directory.
#[test]
fn diagnostics_of_every_broken_case() {
    let mut cases: Vec<String> = std::fs::read_dir(root().join("tests/cases"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "the cases directory is there");
    for case in cases {
        insta::assert_snapshot!(format!("case-{case}"), rendered(&case));
    }
}
