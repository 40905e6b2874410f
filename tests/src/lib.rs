//! What the tests in `tests/` share: where the checkout is and where cargo put the binaries. The
//! tests themselves exercise the workspace from outside.

use std::path::{Path, PathBuf};

/// The checkout's root (examples, cases, scripts).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the checkout")
}

/// A binary cargo built next to the calling test (`cargo test --workspace` builds every one).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let bin = exe.parent().and_then(Path::parent).expect("target/<profile>/deps").join(name);
    assert!(bin.exists(), "{} is missing: run `cargo test --workspace` (it builds every binary) first", bin.display());
    bin
}
