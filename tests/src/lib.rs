//! What the tests in `tests/` share: where the checkout is and where cargo put the binaries. The
//! tests themselves exercise the workspace from outside.

use std::path::{Path, PathBuf};

pub mod bounds;

/// The checkout's root (examples, cases, scripts).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the checkout")
}

/// The IL5 example's pool text with its Marketplace image block replaced by `image { vhd = url }`
/// (the release's VHD, imported).
pub fn booting_vhd(pool: &str, url: &str) -> String {
    let start = pool.find("\n  image {").expect("the example's image block") + 1;
    let end = start + pool[start..].find("}\n").expect("its end") + 2;
    format!("{}  image {{\n    vhd = \"{url}\"\n  }}\n{}", &pool[..start], &pool[end..])
}

/// A binary cargo built next to the calling test (`cargo test --workspace` builds every one).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let bin = exe.parent().and_then(Path::parent).expect("target/<profile>/deps").join(name);
    assert!(bin.exists(), "{} is missing: run `cargo test --workspace` (it builds every binary) first", bin.display());
    bin
}

#[cfg(test)]
mod bounds_tests {
    // Here, not in bounds.rs: the sim's tests include that file by path.
    use crate::bounds::*;
    use serde_json::Value;
    use std::time::Duration;

    fn json() -> Value {
        serde_json::json!({
            "kube_controller_manager": {"node_monitor_grace_period": 8, "node_monitor_period": 1},
            "capi": {"sync_period": 60},
            "capz": {"sync_period": 60, "debouncing_timer": 1, "reconciler_requeue": 2},
            "entra": {"token_lifetime": 120},
            "boot": {"min": 0.25, "max": 0.5},
            "arm": {"vm_create_max": 0.5},
            "stand_ins": {"pass": 0.5},
        })
    }

    fn world() -> Timing {
        Timing::new(json())
    }

    #[test]
    fn a_bound_is_the_periods_it_passes_through_and_says_which() {
        let t = world();
        let unknown = t.node_unknown();
        assert_eq!(unknown.duration(), Duration::from_secs(9 + 30));
        let said = unknown.to_string();
        assert!(said.contains("node_monitor_grace_period") && said.contains("node_monitor_period"), "{said}");
        assert!(said.ends_with("+ 30 s the machine's allowance"), "{said}");
        assert_eq!(t.capz_reports().duration(), Duration::from_secs(180 + 30));
        let joins = t.machine_joins();
        assert_eq!(joins.duration(), Duration::from_secs(180 + 6 + 1 + 1 + 60 + 30));
        assert_eq!(joins.to_string().matches("allowance").count(), 1, "{joins}");
    }

    #[test]
    #[should_panic(expected = "the world reports no capz.sync_period")]
    fn a_world_without_capz_has_no_bound_for_it() {
        let mut json = json();
        json["capz"] = Value::Null;
        Timing::new(json).capz_reports();
    }
}
