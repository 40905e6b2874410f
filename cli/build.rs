//! Names the commit the binary is built from, for `xcsp --version`: `git rev-parse` in the
//! checkout, or `XCSP_COMMIT` when set (a release build outside git), else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=XCSP_COMMIT");
    let commit = std::env::var("XCSP_COMMIT").ok().filter(|c| !c.is_empty()).or_else(|| {
        let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    });
    println!("cargo:rustc-env=XCSP_COMMIT={}", commit.unwrap_or_else(|| "unknown".into()));
    // Rebuilt when HEAD moves: the HEAD file, the branch it names, and the packed refs.
    // (A worktree keeps its HEAD in its own git dir and the branches in the common one.)
    let dir = |flag: &str| {
        let out = Command::new("git").args(["rev-parse", flag]).output().ok()?;
        out.status.success().then(|| Path::new(String::from_utf8_lossy(&out.stdout).trim()).to_path_buf())
    };
    if let (Some(own), Some(common)) = (dir("--git-dir"), dir("--git-common-dir")) {
        println!("cargo:rerun-if-changed={}", own.join("HEAD").display());
        println!("cargo:rerun-if-changed={}", common.join("packed-refs").display());
        if let Ok(head) = std::fs::read_to_string(own.join("HEAD"))
            && let Some(branch) = head.trim().strip_prefix("ref: ")
        {
            println!("cargo:rerun-if-changed={}", common.join(branch).display());
        }
    }
}
