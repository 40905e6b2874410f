//! The S3 backend against moto over HTTP with the real aws-sdk-s3: one lock holder at a time
//! (the other is told who), a dead holder's lock cleared by force-unlock with its id only, a
//! racing write refused by If-Match, and encrypted state whose stored bytes hold no secret.

use xcsp_core::{Address, Value};
use xcsp_sim::aws::Moto;
use xcsp_state::backend::Backend;
use xcsp_state::crypto::{Codec, KeySource};
use xcsp_state::s3::{S3Backend, S3Config};
use xcsp_state::{ResourceState, State, StateError};

const PSK: &str = "Psk_literal_that_must_not_leak_77";

async fn bucket(moto: &Moto, name: &str) -> aws_sdk_s3::Client {
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-gov-west-1"))
        .endpoint_url(&moto.url)
        .force_path_style(true)
        .credentials_provider(aws_sdk_s3::config::Credentials::new("local", "local", None, None, "test"))
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(conf);
    s3.create_bucket()
        .bucket(name)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from("us-gov-west-1"))
                .build(),
        )
        .send()
        .await
        .unwrap();
    s3
}

async fn backend(moto: &Moto, bucket: &str, codec: Codec) -> S3Backend {
    let config = S3Config {
        bucket: bucket.into(),
        key: "stacks/il5-gpu/state.json".into(),
        region: "us-gov-west-1".into(),
        endpoint: Some(moto.url.clone()),
        server_side_encryption: None,
        static_credentials: Some(("local".into(), "local".into())),
    };
    S3Backend::new(config, codec).await
}

fn with_psk(stack: &str) -> State {
    let mut s = State::new(stack);
    let a: Address = "xcsp_preshared_key.link[0]".parse().unwrap();
    let attrs = [("value".to_string(), Value::sensitive(Value::string(PSK)))].into_iter().collect();
    s.resources.insert(
        a,
        ResourceState { id: Some("xcsp_preshared_key.link[0]".into()), attributes: attrs, dependencies: vec![] },
    );
    s
}

fn moto() -> Moto {
    Moto::start().unwrap_or_else(|e| panic!("the S3 tests need moto: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_at_a_time_and_force_unlock_needs_the_id() {
    let moto = moto();
    bucket(&moto, "locks").await;
    let first = backend(&moto, "locks", Codec::default()).await;
    let second = backend(&moto, "locks", Codec::default()).await;
    // Two applies race for the lock: exactly one gets it.
    let (a, b) = tokio::join!(first.lock("ci-job-1", "apply"), second.lock("ci-job-2", "apply"));
    let (held, refused) = match (a, b) {
        (Ok(h), Err(e)) | (Err(e), Ok(h)) => (h, e),
        other => panic!("exactly one must hold the lock: {other:?}"),
    };
    match &refused {
        StateError::Locked { holder, operation, id, .. } => {
            assert_eq!(holder, &held.holder);
            assert_eq!(operation, "apply");
            assert_eq!(id, &held.id);
        }
        other => panic!("{other:?}"),
    }
    // The holder dies without unlocking; a wrong id is refused, the right one clears the lock.
    assert!(matches!(second.force_unlock("not-the-id").await, Err(StateError::LockMismatch { .. })));
    assert_eq!(second.force_unlock(&held.id).await.unwrap().holder, held.holder);
    let again = second.lock("ci-job-3", "apply").await.unwrap();
    second.unlock(&again.id).await.unwrap();
    assert!(matches!(second.force_unlock(&again.id).await, Err(StateError::NotLocked)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_racing_another_is_refused_not_lost() {
    let moto = moto();
    bucket(&moto, "race").await;
    let a = backend(&moto, "race", Codec::default()).await;
    let b = backend(&moto, "race", Codec::default()).await;
    let mut s = State::new("il5-gpu");
    a.write(&mut s).await.unwrap();
    let mut sa = a.read().await.unwrap().unwrap();
    let mut sb = b.read().await.unwrap().unwrap();
    a.write(&mut sa).await.unwrap();
    let err = b.write(&mut sb).await.unwrap_err();
    assert!(matches!(err, StateError::Conflict { .. }), "{err:?}");
    assert!(err.to_string().contains("changed since it was read"));
    // What a wrote is intact.
    assert_eq!(b.read().await.unwrap().unwrap().serial, sa.serial);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_state_holds_no_secret_and_rotates() {
    let moto = moto();
    let raw = bucket(&moto, "sealed").await;
    let old = Codec { key: Some(KeySource::Passphrase("first passphrase".into())), ..Codec::default() };
    let b = backend(&moto, "sealed", old.clone()).await;
    let mut s = with_psk("il5-gpu");
    b.write(&mut s).await.unwrap();
    let stored = raw.get_object().bucket("sealed").key("stacks/il5-gpu/state.json").send().await.unwrap();
    let bytes = stored.body.collect().await.unwrap().into_bytes();
    assert!(!bytes.windows(PSK.len()).any(|w| w == PSK.as_bytes()), "the PSK is in the stored bytes");
    assert_eq!(b.read().await.unwrap().unwrap().resources.len(), 1);

    // A wrong key: a clear error, nothing read.
    let wrong =
        backend(&moto, "sealed", Codec { key: Some(KeySource::Passphrase("guess".into())), ..Codec::default() }).await;
    let err = wrong.read().await.unwrap_err();
    assert!(err.to_string().contains("cannot be decrypted"), "{err}");

    // Rotation: read with the old passphrase, write with the new; the old no longer opens it.
    let rotating = Codec {
        key: Some(KeySource::Passphrase("second passphrase".into())),
        old_key: Some(KeySource::Passphrase("first passphrase".into())),
        enforced: true,
    };
    let r = backend(&moto, "sealed", rotating).await;
    let mut s = r.read().await.unwrap().unwrap();
    r.write(&mut s).await.unwrap();
    let old_reader = backend(&moto, "sealed", old).await;
    assert!(old_reader.read().await.is_err());

    // Enforced without a key refuses to write plaintext.
    let plain = backend(&moto, "sealed", Codec { enforced: true, ..Codec::default() }).await;
    assert!(matches!(plain.write(&mut State::new("x")).await, Err(StateError::Key(_))));
}
