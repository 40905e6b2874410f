//! The S3 backend against moto over HTTP with the real aws-sdk-s3: one lock holder at a time
//! (the other is told who), a killed holder's lock cleared by force-unlock with its id only, a
//! racing write refused by If-Match, versioned buckets keeping every previous state, and
//! encrypted state whose stored bytes hold no secret (and a warning when sealing a plaintext state
//! leaves plaintext versions behind).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use aws_sdk_s3::primitives::ByteStream;
use xcsp_core::{Address, Value};
use xcsp_sim::aws::Moto;
use xcsp_state::backend::{Backend, LockInfo};
use xcsp_state::crypto::{Codec, KeySource};
use xcsp_state::s3::{S3Backend, S3Config};
use xcsp_state::{ResourceState, State, StateError, StateWarning, Warnings};

const PSK: &str = "Psk_literal_that_must_not_leak_77";
const KEY: &str = "stacks/il5-gpu/state.json";

fn raw_client(url: &str) -> aws_sdk_s3::Client {
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .http_client(xcsp_crypto::aws_http_client())
        .region(aws_sdk_s3::config::Region::new("us-gov-west-1"))
        .endpoint_url(url)
        .force_path_style(true)
        .credentials_provider(aws_sdk_s3::config::Credentials::new("local", "local", None, None, "test"))
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// A new bucket, and a client that reads its raw bytes (what anyone with bucket access sees).
async fn bucket(moto: &Moto, name: &str) -> aws_sdk_s3::Client {
    let s3 = raw_client(&moto.url);
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

async fn backend_at(url: &str, bucket: &str, codec: Codec) -> S3Backend {
    let config = S3Config {
        bucket: bucket.into(),
        key: KEY.into(),
        region: "us-gov-west-1".into(),
        endpoint: Some(url.to_string()),
        server_side_encryption: None,
        static_credentials: Some(("local".into(), "local".into())),
    };
    S3Backend::new(config, codec).await
}

async fn backend(moto: &Moto, bucket: &str, codec: Codec) -> S3Backend {
    backend_at(&moto.url, bucket, codec).await
}

async fn stored(raw: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<u8> {
    let o = raw.get_object().bucket(bucket).key(key).send().await.unwrap();
    o.body.collect().await.unwrap().to_vec()
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

fn passphrase(p: &str) -> Option<KeySource> {
    Some(KeySource::Passphrase(p.into()))
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
    // Two applies race for the lock: exactly one gets it, the other is told who has it.
    let (a, b) = tokio::join!(first.lock("ci-job-1", "apply"), second.lock("ci-job-2", "apply"));
    let (held, refused) = match (a, b) {
        (Ok(h), Err(e)) | (Err(e), Ok(h)) => (h, e),
        other => panic!("exactly one must hold the lock: {other:?}"),
    };
    match &refused {
        StateError::Locked { holder, operation, id, process, .. } => {
            assert_eq!((holder, operation.as_str(), id), (&held.holder, "apply", &held.id));
            assert_eq!(process, &format!("pid {} on {}", held.pid, held.host));
        }
        other => panic!("{other:?}"),
    }
    // However often it is asked, a live lock stays with its holder.
    assert!(matches!(second.lock("ci-job-3", "apply").await, Err(StateError::Locked { .. })));
    assert!(matches!(second.force_unlock("not-the-id").await, Err(StateError::LockMismatch { .. })));
    assert_eq!(second.force_unlock(&held.id).await.unwrap().holder, held.holder);
    let again = second.lock("ci-job-3", "apply").await.unwrap();
    // The first holder, force-unlocked meanwhile, cannot release the lock someone took since.
    assert!(matches!(first.unlock(&held.id).await, Err(StateError::LockMismatch { .. })));
    second.unlock(&again.id).await.unwrap();
    assert!(matches!(second.force_unlock(&again.id).await, Err(StateError::NotLocked)));
}

/// Not a test of its own: the lock holder that `a_killed_holders_lock_stays_until_force_unlock`
/// starts as a separate process and kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of a_killed_holders_lock_stays_until_force_unlock"]
async fn lock_holder_process() {
    let url = std::env::var("XCSP_TEST_MOTO_URL")
        .expect("run by a_killed_holders_lock_stays_until_force_unlock, which sets XCSP_TEST_MOTO_URL");
    let b = backend_at(&url, "killed", Codec::default()).await;
    let info = b.lock("doomed-apply", "apply").await.unwrap();
    println!("LOCKED {}", info.id);
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_lock_stays_until_force_unlock() {
    let moto = moto();
    bucket(&moto, "killed").await;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["lock_holder_process", "--exact", "--ignored", "--nocapture"])
        .env("XCSP_TEST_MOTO_URL", &moto.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let id = lines
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("LOCKED ").map(String::from))
        .expect("the holder process reports its lock");
    child.kill().unwrap();
    child.wait().unwrap();

    let next = backend(&moto, "killed", Codec::default()).await;
    let Err(StateError::Locked { id: held, holder, process, .. }) = next.lock("next-apply", "apply").await else {
        panic!("a dead holder's lock still holds");
    };
    assert_eq!((held.as_str(), holder.as_str()), (id.as_str(), "doomed-apply"));
    assert!(process.starts_with(&format!("pid {} on ", child.id())), "{process}");
    let wrong = next.force_unlock("00000000-0000-0000-0000-000000000000").await.unwrap_err();
    assert!(matches!(wrong, StateError::LockMismatch { .. }), "{wrong:?}");
    assert!(wrong.to_string().contains("doomed-apply"), "{wrong}");
    assert_eq!(next.force_unlock(&id).await.unwrap().holder, "doomed-apply");
    next.lock("next-apply", "apply").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_lock_is_reported_with_its_age_and_an_unreadable_one_by_a_fixed_id() {
    let moto = moto();
    let raw = bucket(&moto, "stale").await;
    let mut old = LockInfo::new("nightly-ci", "destroy");
    old.since -= 2 * 3600 + 5 * 60;
    let body = serde_json::to_vec(&old).unwrap();
    let lock_key = format!("{KEY}.lock");
    raw.put_object().bucket("stale").key(&lock_key).body(ByteStream::from(body)).send().await.unwrap();
    let b = backend(&moto, "stale", Codec::default()).await;
    let text = b.lock("me", "apply").await.unwrap_err().to_string();
    assert!(text.contains("nightly-ci") && text.contains("`destroy`") && text.contains("2h05m ago"), "{text}");

    raw.put_object().bucket("stale").key(&lock_key).body(ByteStream::from_static(b"garbage")).send().await.unwrap();
    let Err(StateError::Locked { id, .. }) = b.lock("me", "apply").await else { panic!("an unreadable lock holds") };
    b.force_unlock(&id).await.unwrap();
    b.lock("me", "apply").await.unwrap();
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
    // b read the same state and records something else.
    let mut sb = b.read().await.unwrap().unwrap();
    sb.resources = with_psk("il5-gpu").resources;
    a.write(&mut sa).await.unwrap();
    let err = b.write(&mut sb).await.unwrap_err();
    assert!(matches!(err, StateError::Conflict { .. }), "{err:?}");
    assert!(err.to_string().contains("changed since it was read"), "{err}");
    assert_eq!(sb.serial, 1, "a refused write leaves the serial as it was");
    // What a wrote is intact.
    let now = b.read().await.unwrap().unwrap();
    assert_eq!((now.serial, now.resources.len()), (sa.serial, 0));
    // The first write of a new stack races too (If-None-Match: *): only one creates the object.
    bucket(&moto, "race-first").await;
    let c = backend(&moto, "race-first", Codec::default()).await;
    let d = backend(&moto, "race-first", Codec::default()).await;
    let (mut sc, mut sd) = (State::new("other"), with_psk("other"));
    assert!(c.read().await.unwrap().is_none() && d.read().await.unwrap().is_none());
    c.write(&mut sc).await.unwrap();
    assert!(matches!(d.write(&mut sd).await, Err(StateError::Conflict { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_versioned_bucket_keeps_every_previous_state() {
    let moto = moto();
    let raw = bucket(&moto, "versioned").await;
    raw.put_bucket_versioning()
        .bucket("versioned")
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let codec = Codec::new(Some(KeySource::Key([3u8; 32])));
    let b = backend(&moto, "versioned", codec.clone()).await;
    let mut s = State::new("il5-gpu");
    for _ in 0..3 {
        // Locks come and go on a versioned bucket: the delete markers do not hold the lock.
        let lock = b.lock("ci", "apply").await.unwrap();
        b.read().await.unwrap();
        b.write(&mut s).await.unwrap();
        b.unlock(&lock.id).await.unwrap();
    }
    let versions = raw.list_object_versions().bucket("versioned").prefix(KEY).send().await.unwrap();
    let of_state: Vec<_> = versions.versions().iter().filter(|v| v.key() == Some(KEY)).collect();
    assert_eq!(of_state.len(), 3, "{versions:?}");
    // Any earlier version opens with the key: serials 1, 2 and 3 are all there.
    let mut serials = Vec::new();
    for v in of_state {
        let o = raw.get_object().bucket("versioned").key(KEY).version_id(v.version_id().unwrap()).send().await.unwrap();
        let plain = codec.open(&o.body.collect().await.unwrap().to_vec()).unwrap();
        serials.push(xcsp_state::decode("version", &String::from_utf8(plain).unwrap()).unwrap().serial);
    }
    serials.sort();
    assert_eq!(serials, [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_state_holds_no_secret_and_rotates() {
    let moto = moto();
    let raw = bucket(&moto, "sealed").await;
    let old = Codec::new(passphrase("first passphrase"));
    let b = backend(&moto, "sealed", old.clone()).await;
    let mut s = with_psk("il5-gpu");
    b.write(&mut s).await.unwrap();
    let bytes = stored(&raw, "sealed", KEY).await;
    assert!(!bytes.windows(PSK.len()).any(|w| w == PSK.as_bytes()), "the PSK is in the stored bytes");
    assert!(Codec::is_sealed(&bytes));
    let back = b.read().await.unwrap().unwrap();
    let value = &back.resources.values().next().unwrap().attributes["value"];
    assert!(value.is_sensitive(), "decrypted, the PSK is still marked sensitive: {value:?}");

    // A wrong key: a clear error, nothing read.
    let wrong = backend(&moto, "sealed", Codec::new(passphrase("guess"))).await;
    let err = wrong.read().await.unwrap_err();
    assert!(err.to_string().contains("cannot be decrypted"), "{err}");
    let keyless = backend(&moto, "sealed", Codec::default()).await;
    assert!(keyless.read().await.unwrap_err().to_string().contains("XCSP_STATE_PASSPHRASE"));

    // Rotation: read with the old passphrase, write with the new; the old no longer opens it.
    let rotating = Codec::new(passphrase("second passphrase")).with_old_key(passphrase("first passphrase"));
    let r = backend(&moto, "sealed", rotating.enforced(true)).await;
    let mut s = r.read().await.unwrap().unwrap();
    r.write(&mut s).await.unwrap();
    assert!(backend(&moto, "sealed", old).await.read().await.is_err());
    let new_only = backend(&moto, "sealed", Codec::new(passphrase("second passphrase"))).await;
    assert_eq!(new_only.read().await.unwrap().unwrap().serial, 2);
    let bytes = stored(&raw, "sealed", KEY).await;
    assert!(!bytes.windows(PSK.len()).any(|w| w == PSK.as_bytes()), "the PSK is in the rotated bytes");

    // Enforced: without a key nothing is written; plaintext state is not read.
    let plain = backend(&moto, "sealed", Codec::default().enforced(true)).await;
    assert!(matches!(plain.write(&mut State::new("x")).await, Err(StateError::Key(_))));
    bucket(&moto, "plain").await;
    let unsealed = backend(&moto, "plain", Codec::default()).await;
    unsealed.write(&mut State::new("x")).await.unwrap();
    let enforced = backend(&moto, "plain", Codec::new(passphrase("p")).enforced(true)).await;
    let err = enforced.read().await.unwrap_err();
    assert!(err.to_string().contains("enforced"), "{err}");
}

/// A backend whose warnings are collected.
async fn watched(moto: &Moto, bucket: &str, codec: Codec) -> (S3Backend, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let warnings: Warnings = Arc::new(move |w: &StateWarning| {
        let help = miette::Diagnostic::help(w).map(|h| h.to_string()).unwrap_or_default();
        sink.lock().unwrap().push(format!("{w} | {help}"));
    });
    (backend(moto, bucket, codec).await.with_warnings(warnings), seen)
}

async fn versioning(raw: &aws_sdk_s3::Client, bucket: &str, status: aws_sdk_s3::types::BucketVersioningStatus) {
    raw.put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(aws_sdk_s3::types::VersioningConfiguration::builder().status(status).build())
        .send()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealing_a_plaintext_state_in_a_versioned_bucket_warns_once_that_old_versions_stay_plaintext() {
    use aws_sdk_s3::types::BucketVersioningStatus::Enabled;
    let moto = moto();
    let key = || Codec::new(Some(KeySource::Key([5u8; 32])));
    // Versioning on, or never on. (A bucket whose versioning was suspended after the plaintext
    // was written keeps those versions on S3; moto drops them on the next write, so it cannot
    // show that case: the warning asks for the key's versions, not the bucket's setting.)
    for (name, older) in [("kept", Some(2)), ("unversioned", None)] {
        let raw = bucket(&moto, name).await;
        if older.is_some() {
            versioning(&raw, name, Enabled).await;
        }
        // Plaintext at first, written twice: the plaintext versions pile up.
        let (plain, seen) = watched(&moto, name, Codec::default()).await;
        let mut s = with_psk("il5-gpu");
        plain.write(&mut s).await.unwrap();
        plain.write(&mut s).await.unwrap();
        assert!(seen.lock().unwrap().is_empty(), "{name}: writing plaintext is not warned about here");
        // A key is configured: the first sealed write over the plaintext warns, the next ones do not.
        let (sealed, seen) = watched(&moto, name, key()).await;
        let mut s = sealed.read().await.unwrap().unwrap();
        sealed.write(&mut s).await.unwrap();
        sealed.write(&mut s).await.unwrap();
        let (again, seen_again) = watched(&moto, name, key()).await;
        let mut s = again.read().await.unwrap().unwrap();
        again.write(&mut s).await.unwrap();
        assert!(seen_again.lock().unwrap().is_empty(), "{name}: a sealed state sealed again is no news");
        let seen = seen.lock().unwrap().clone();
        let Some(older) = older else {
            assert!(seen.is_empty(), "{name}: without versions nothing plaintext is left: {seen:?}");
            continue;
        };
        assert_eq!(seen.len(), 1, "{name}: {seen:?}");
        let text = &seen[0];
        for part in [
            format!("s3://{name}/{KEY}"),
            format!("keeps {older} older versions of {KEY}"),
            "stay plaintext".into(),
            format!("aws s3api list-object-versions --bucket {name} --prefix {KEY}"),
            format!("aws s3api delete-object --bucket {name} --key {KEY} --version-id VERSION_ID"),
        ] {
            assert!(text.contains(&part), "{name}: `{part}` missing from {text}");
        }
        // What it warns about is true: the older versions hold the PSK in the clear.
        let versions = raw.list_object_versions().bucket(name).prefix(KEY).send().await.unwrap();
        let mut plaintext = 0;
        for v in versions.versions().iter().filter(|v| v.key() == Some(KEY)) {
            let o = raw.get_object().bucket(name).key(KEY).version_id(v.version_id().unwrap()).send().await.unwrap();
            let bytes = o.body.collect().await.unwrap().to_vec();
            plaintext += usize::from(bytes.windows(PSK.len()).any(|w| w == PSK.as_bytes()));
        }
        assert_eq!(plaintext, older, "{name}: the older versions are plaintext");
    }
    // A new stack's first state, sealed: there never was plaintext.
    let raw = bucket(&moto, "fresh").await;
    versioning(&raw, "fresh", Enabled).await;
    let (fresh, seen) = watched(&moto, "fresh", key()).await;
    assert!(fresh.read().await.unwrap().is_none());
    fresh.write(&mut with_psk("il5-gpu")).await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
}

/// A web server that answers every request with `status` and an HTML page, as an endpoint that is
/// not S3 would (a website, a proxy's error page); its URL.
fn web_server(status: &'static str, page: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 {status}\r\nServer: nginx/1.25.3\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(response.as_bytes());
                let _ = stream.shutdown(std::net::Shutdown::Write);
                // Drain what the client still sends (a body), so closing does not reset the answer.
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    url
}

const NOT_FOUND_PAGE: &str = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_is_not_s3_is_one_line_naming_it_and_its_answer_never_an_empty_state() {
    let url = web_server("404 Not Found", NOT_FOUND_PAGE);
    let b = backend_at(&url, "teams", Codec::default()).await;
    let lock = b.lock("me", "apply").await.unwrap_err();
    let read = b.read().await.unwrap_err();
    let write = b.write(&mut State::new("il5-gpu")).await.unwrap_err();
    for (what, e) in [("taking the lock", lock), ("reading state", read), ("writing state", write)] {
        assert!(matches!(e, StateError::NotS3 { .. }), "{what}: {e:?}");
        let text = e.to_string();
        let expected = format!(
            "{what} at s3://teams/{KEY}{}: {url} answered HTTP 404 from nginx/1.25.3 (text/html: \"404 Not Found nginx/1.25.3\"), which is not S3",
            if what == "taking the lock" { ".lock" } else { "" }
        );
        assert_eq!(text, expected);
        assert_eq!(miette::Diagnostic::code(&e).unwrap().to_string(), "xcsp::state::not_s3");
    }

    // A server that says 200 to everything: its page is not taken for state.
    let url = web_server("200 OK", "<!DOCTYPE html><html><head><title>Welcome</title></head><body></body></html>");
    let b = backend_at(&url, "teams", Codec::default()).await;
    let read = b.read().await.unwrap_err();
    assert!(matches!(read, StateError::NotS3 { .. }), "{read:?}");
    assert!(read.to_string().contains("answered HTTP 200 (text/html: \"Welcome\"), which is not S3"), "{read}");

    // S3 itself, without the bucket: an error, not a stack with no state.
    let moto = moto();
    let missing = backend(&moto, "no-such-bucket", Codec::default()).await;
    let err = missing.read().await.unwrap_err();
    assert!(matches!(err, StateError::Remote { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "reading state at s3://no-such-bucket/{KEY}: S3 answered HTTP 404 NoSuchBucket: The specified bucket does not exist"
        )
    );
    // Nothing answers at all: the causes on one line, no dump.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let nobody = backend_at(&format!("http://{closed}"), "teams", Codec::default()).await;
    let err = nobody.read().await.unwrap_err().to_string();
    assert!(!err.contains('\n') && !err.contains("ServiceError") && !err.contains("DispatchFailure"), "{err}");
    assert!(err.contains("onnect"), "{err}");
}
