//! No input panics the spec front end: the examples, mutated at random (bytes deleted,
//! duplicated, replaced with HCL punctuation), go through parse, decode, validate and expand.
//! A seeded generator keeps failures reproducible; `XCSP_MUTATIONS` sets the count.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xcsp_core::SourceFile;
use xcsp_plans::VarInputs;

const NOISE: &[&str] = &[
    "{", "}", "[", "]", "(", ")", "\"", "=", ".", ",", "${", "%{", "\n", "-", "0", "/", "#", "*", "<<EOF\n", "var.",
    "network.",
];

#[test]
fn mutated_examples_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let count: usize = std::env::var("XCSP_MUTATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(3000);
    let seeds: Vec<String> = ["examples/il5-govcloud/pool.xcsp.hcl", "examples/public/pool.xcsp.hcl"]
        .iter()
        .map(|p| std::fs::read_to_string(root.join(p)).unwrap())
        .collect();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut rejected = 0;
    for i in 0..count {
        let mut text: Vec<u8> = seeds[i % seeds.len()].clone().into_bytes();
        for _ in 0..rng.random_range(1..6) {
            let at = rng.random_range(0..text.len());
            match rng.random_range(0..3) {
                0 => {
                    let end = (at + rng.random_range(1..12)).min(text.len());
                    text.drain(at..end);
                }
                1 => {
                    let noise = NOISE[rng.random_range(0..NOISE.len())].as_bytes();
                    text.splice(at..at, noise.iter().copied());
                }
                _ => {
                    let end = (at + rng.random_range(1..40)).min(text.len());
                    let chunk: Vec<u8> = text[at..end].to_vec();
                    text.splice(at..at, chunk);
                }
            }
            if text.is_empty() {
                text.push(b'x');
            }
        }
        let source = String::from_utf8_lossy(&text).into_owned();
        let file = SourceFile::new(format!("mutant-{i}.xcsp.hcl"), source.clone());
        let result = std::panic::catch_unwind(|| xcsp_plans::check_sources(vec![file], &VarInputs::default()).is_err());
        match result {
            Ok(failed) => rejected += usize::from(failed),
            Err(_) => panic!("the front end panicked on mutant {i}:\n{source}"),
        }
    }
    // Most mutants must be refused with problems, proving the mutations reach the checks.
    assert!(rejected > count / 2, "only {rejected} of {count} mutants were refused");
}
