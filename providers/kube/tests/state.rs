//! The `kubernetes` state backend against the world's upstream kube-apiserver (`XCSP_UPSTREAM_BIN`,
//! which `scripts/test` sets), through the real kube client: two runs on one stack, as the command
//! line and the controller are. One holds the lock (a Lease) and the other is refused with its
//! record; a write over a state another run wrote since it was read is refused and changes nothing;
//! state is sealed in the Secret when a key is set; a lock goes only with its id.

use serde_json::json;
use xcsp_core::{Address, Value};
use xcsp_kube::KubeConfig;
use xcsp_kube::state::KubeBackend;
use xcsp_sim::{SimConfig, SimServer};
use xcsp_state::backend::Backend;
use xcsp_state::crypto::{Codec, KeySource};
use xcsp_state::{ResourceState, State, StateError};

/// A key anyone can see: the test looks for the secret it seals, not at the key.
const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const PSK: &str = "psk-that-must-not-show-in-the-secret";

fn codec() -> Codec {
    Codec::new(Some(KeySource::from_base64(KEY).unwrap()))
}

async fn backend(kubeconfig: &std::path::Path) -> KubeBackend {
    KubeBackend::new(&KubeConfig::new(kubeconfig), "pool-state", "il5-gpu", codec()).await.unwrap()
}

fn with_key(state: &mut State) {
    let a: Address = "xcsp_preshared_key.link[0]".parse().unwrap();
    let attributes = [("value".to_string(), Value::sensitive(Value::string(PSK)))].into_iter().collect();
    state.resources.insert(a, ResourceState { id: Some("k0".into()), attributes, dependencies: vec![] });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_take_turns_and_neither_overwrites_the_other() {
    let sim = SimServer::start_with_cluster_async(SimConfig::default())
        .await
        .unwrap_or_else(|e| panic!("the sim and its cluster start: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig().unwrap()).unwrap();
    let _ = xcsp_crypto::install();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let ns = serde_json::from_value(json!({ "metadata": { "name": "pool-state" } })).unwrap();
    namespaces.create(&Default::default(), &ns).await.unwrap();

    let (cli, controller) = (backend(&kubeconfig).await, backend(&kubeconfig).await);
    assert_eq!(cli.location(), "kubernetes://pool-state/secrets/xcsp-state-il5-gpu");
    assert!(cli.read().await.unwrap().is_none());

    // One lock at a time; the refusal names the holder and what it does.
    let held = controller.lock("xcsp-controller (gpu/il5)", "apply").await.unwrap();
    match cli.lock("alice", "apply").await {
        Err(StateError::Locked { holder, operation, id, .. }) => {
            assert_eq!(
                (holder.as_str(), operation.as_str(), id.as_str()),
                ("xcsp-controller (gpu/il5)", "apply", held.id.as_str())
            );
        }
        other => panic!("not refused: {other:?}"),
    }
    // Only its id removes it.
    assert!(matches!(cli.unlock("not-the-id").await, Err(StateError::LockMismatch { .. })));

    // The first write makes the Secret, sealed: the key's value is not in it.
    let mut state = State::new("il5-gpu");
    with_key(&mut state);
    controller.write(&mut state).await.unwrap();
    assert_eq!(state.serial, 1);
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(client.clone(), "pool-state");
    let stored = secrets.get("xcsp-state-il5-gpu").await.unwrap();
    let bytes = stored.data.unwrap()["state"].0.clone();
    assert!(Codec::is_sealed(&bytes));
    assert!(!String::from_utf8_lossy(&bytes).contains(PSK));
    controller.unlock(&held.id).await.unwrap();
    assert!(matches!(controller.unlock(&held.id).await, Err(StateError::NotLocked)));

    // Both read serial 1; the CLI writes 2; the controller's write from serial 1 is refused and
    // leaves the CLI's state and its own serial as they were.
    let mut theirs = cli.read().await.unwrap().unwrap();
    let mut ours = controller.read().await.unwrap().unwrap();
    assert_eq!((theirs.serial, ours.serial), (1, 1));
    theirs.resources.clear();
    cli.write(&mut theirs).await.unwrap();
    ours.resources.remove(&"xcsp_preshared_key.link[0]".parse::<Address>().unwrap());
    with_key(&mut ours);
    match controller.write(&mut ours).await {
        Err(StateError::Conflict { location }) => assert!(location.contains("xcsp-state-il5-gpu"), "{location}"),
        other => panic!("not refused: {other:?}"),
    }
    assert_eq!(ours.serial, 1);
    let now = controller.read().await.unwrap().unwrap();
    assert_eq!((now.serial, now.resources.len()), (2, 0));
    // Read again, the controller writes on top.
    let mut ours = now;
    with_key(&mut ours);
    controller.write(&mut ours).await.unwrap();
    assert_eq!(cli.read().await.unwrap().unwrap().serial, 3);

    // A dead holder's lock goes with force-unlock and its id, and the stack can be locked again.
    let dead = cli.lock("alice", "apply").await.unwrap();
    let removed = controller.force_unlock(&dead.id).await.unwrap();
    assert_eq!(removed.holder, "alice");
    let again = controller.lock("xcsp-controller (gpu/il5)", "apply").await.unwrap();
    controller.unlock(&again.id).await.unwrap();
}
