//! What a refresh costs in Resource Manager calls: one list per type in the stack's resource
//! group (and, for role assignments and custom roles, at the subscription), whatever else the
//! subscription holds. Ten IL5 stacks side by side, each refreshed:
//! every stack costs the same calls as one alone (the figures in BENCHMARKS.md come from here).

mod common;

use std::collections::BTreeMap;

use common::*;
use xcsp_azure::AzureProvider;
use xcsp_core::ProviderKind;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_of_ten_stacks_refreshes_in_the_same_twenty_six_calls() {
    let emu = Emulator::start("instant");
    // Counting calls, not surviving throttling: a retried 429 would count twice.
    emu.configure(serde_json::json!({ "throttle": { "enabled": false } })).await;
    let dir = tempfile::tempdir().unwrap();
    let mut stacks = Vec::new();
    for i in 0..10 {
        let d = dir.path().join(format!("s{i}"));
        std::fs::create_dir(&d).unwrap();
        let il5 = il5_as(&format!("gpu-{i}"), &format!("gpu-{i}-workers"), &d);
        let p = AzureProvider::new(emu.config_for(&il5.subscription, &il5.tenant, &il5.resource_group)).unwrap();
        let recorded = apply_in_order(&p, &il5.stack, &il5.nodes, &Recorder::default()).await;
        stacks.push((il5, p, recorded));
    }
    let mut per_stack = Vec::new();
    for (il5, p, recorded) in &mut stacks {
        emu.reset_counters().await;
        let found = refresh_all(p, &il5.stack, recorded).await;
        let azure = il5.nodes.iter().filter(|n| n.address.rtype.provider() == ProviderKind::Azure).count();
        assert_eq!(found.len(), azure, "{} finds its own resources only", il5.stack);
        let calls: BTreeMap<String, u64> =
            emu.requests().await.into_iter().filter(|(k, _)| !k.contains("token")).collect();
        // Lists only, but for each connection's shared key (ARM lists none).
        assert!(
            calls.iter().all(|(k, n)| k.ends_with("(list)") || (k.ends_with("/sharedkey") && *n == 4)),
            "lists only, no GET per resource: {calls:?}"
        );
        per_stack.push(calls.values().sum::<u64>());
    }
    eprintln!(
        "ARM calls per stack refresh, 10 stacks of 24 resources: {per_stack:?} (total {})",
        per_stack.iter().sum::<u64>()
    );
    // 21 for the stack's own types, 5 for an imported boot image's (storage accounts twice,
    // galleries three times), which find nothing here.
    assert_eq!(per_stack, vec![26; 10]);
}
