//! Which state backend and which keys a command uses: the spec's `backend` block, overridden by
//! the environment (`XCSP_BACKEND*`), overridden by flags (`--backend`, `--backend-config`), as
//! Terraform's `-backend-config` does; and the lock a command holds while it runs.

use std::path::PathBuf;
use std::sync::Arc;

use xcsp_plans::Loaded;
use xcsp_state::backend::Backend;
use xcsp_state::crypto::{Codec, KeySource};
use xcsp_state::local::LocalBackend;
use xcsp_state::s3::{S3Backend, S3Config};
use xcsp_state::{State, StateWarning, Warnings};

use crate::{KeySources, Say, Stack, StackError, StateSettings};

/// The settings `--backend-config KEY=VALUE` accepts, and the variable each can also come from.
const SETTINGS: &[(&str, &str)] = &[
    ("bucket", "XCSP_BACKEND_BUCKET"),
    ("key", "XCSP_BACKEND_KEY"),
    ("region", "XCSP_BACKEND_REGION"),
    ("endpoint", "XCSP_BACKEND_ENDPOINT"),
    ("server_side_encryption", "XCSP_BACKEND_SSE"),
    ("path", "XCSP_STATE_DIR"),
    ("encryption", "XCSP_STATE_ENCRYPTION"),
    ("namespace", "XCSP_BACKEND_NAMESPACE"),
];

/// The backend settings after precedence: flag, then environment, then the spec's block.
struct Settings<'a> {
    flags: Vec<(String, String)>,
    block: Option<&'a xcsp_plans::spec::Backend>,
}

impl<'a> Settings<'a> {
    fn new(l: &'a Loaded, args: &StateSettings) -> crate::Result<Settings<'a>> {
        let mut flags = Vec::new();
        for pair in &args.backend_config {
            let Some((k, v)) = pair.split_once('=').filter(|(k, _)| SETTINGS.iter().any(|(s, _)| s == k)) else {
                let known: Vec<&str> = SETTINGS.iter().map(|(s, _)| *s).collect();
                return Err(StackError::BackendConfig { pair: pair.clone(), known: known.join(", ") }.into());
            };
            flags.push((k.to_string(), v.to_string()));
        }
        Ok(Settings { flags, block: l.model.backend.as_ref() })
    }

    fn get(&self, name: &str) -> Option<String> {
        let flag = self.flags.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let env = SETTINGS.iter().find(|(s, _)| *s == name).and_then(|(_, var)| std::env::var(var).ok());
        let block = self.block.and_then(|b| match name {
            "bucket" => b.bucket.clone(),
            "key" => b.key.clone(),
            "region" => b.region.clone(),
            "endpoint" => b.endpoint.clone(),
            "server_side_encryption" => b.server_side_encryption.clone(),
            "path" => b.path.clone(),
            "encryption" => b.encryption.clone(),
            "namespace" => b.namespace.clone(),
            _ => None,
        });
        flag.or(env).or(block)
    }

    /// Enforced if any source says so: a spec that enforces encryption is not relaxed by a
    /// variable someone forgot in their shell.
    fn enforced(&self) -> crate::Result<bool> {
        let env = std::env::var("XCSP_STATE_ENCRYPTION").ok();
        let flag = self.flags.iter().rev().find(|(k, _)| k == "encryption").map(|(_, v)| v.clone());
        let block = self.block.and_then(|b| b.encryption.clone());
        let mut enforced = false;
        for mode in [flag, env, block].into_iter().flatten() {
            match mode.as_str() {
                "enforced" => enforced = true,
                "optional" => {}
                other => return Err(StackError::EncryptionMode(other.into()).into()),
            }
        }
        Ok(enforced)
    }
}

/// A key from `XCSP_STATE_KEY{suffix}` (base64), `XCSP_STATE_KEY_FILE{suffix}` (a file of 32 raw
/// bytes or their base64) or `XCSP_STATE_PASSPHRASE{suffix}`; more than one of them set is an
/// error ([`KeySources`]), never a silent choice.
fn key_from_env(suffix: &str) -> crate::Result<Option<KeySource>> {
    let names = ["XCSP_STATE_KEY", "XCSP_STATE_KEY_FILE", "XCSP_STATE_PASSPHRASE"].map(|n| format!("{n}{suffix}"));
    let values = names.clone().map(|n| std::env::var(n).ok());
    let set: Vec<String> = names.iter().zip(&values).filter(|(_, v)| v.is_some()).map(|(n, _)| n.clone()).collect();
    if set.len() > 1 {
        return Err(StackError::KeySources(KeySources { set }));
    }
    match values {
        [Some(k), _, _] => Ok(Some(KeySource::from_base64(&k)?)),
        [_, Some(path), _] => {
            let content = std::fs::read(&path).map_err(|source| StackError::Read {
                what: "the state key file",
                path: path.into(),
                source,
            })?;
            Ok(Some(KeySource::from_key_file(&content)?))
        }
        [_, _, passphrase] => Ok(passphrase.map(KeySource::Passphrase)),
    }
}

/// How state and plan files are sealed: the key (and, during a rotation, the old key, suffix
/// `_OLD`) from the environment, enforced when the spec, `XCSP_STATE_ENCRYPTION` or
/// `--backend-config encryption=enforced` says so.
pub fn codec(s: &Stack) -> crate::Result<Codec> {
    let enforced = Settings::new(&s.loaded, &s.state)?.enforced()?;
    Ok(Codec::new(key_from_env("")?).with_old_key(key_from_env("_OLD")?).enforced(enforced))
}

/// The stack's state store: `local` (the default: `--state-dir`, `path`, or `.xcsp/<stack>`),
/// `s3` (`bucket`; `key` defaults to `<stack>/state.json`, `region` to the spec's AWS region) or
/// `kubernetes` (`namespace`: a Secret and a Lease in the cluster the spec's kubeconfig reaches),
/// sealing state with [`codec`].
pub async fn backend(s: &Stack) -> crate::Result<Arc<dyn Backend>> {
    let (l, args) = (&s.loaded, &s.state);
    let settings = Settings::new(l, args)?;
    let codec = codec(s)?;
    let kind =
        args.backend.clone().or_else(|| settings.block.map(|b| b.kind.clone())).unwrap_or_else(|| "local".into());
    match kind.as_str() {
        "s3" => {
            let Some(bucket) = settings.get("bucket") else {
                return Err(StackError::NoBucket.into());
            };
            let config = S3Config {
                bucket,
                key: settings.get("key").unwrap_or_else(|| format!("{}/state.json", l.model.stack)),
                region: settings.get("region").unwrap_or_else(|| l.model.aws.region.value.clone()),
                endpoint: settings.get("endpoint"),
                server_side_encryption: settings.get("server_side_encryption"),
                static_credentials: None,
            };
            // Warnings (older plaintext versions left behind) are shown as they come.
            let say = s.say.clone();
            let warnings: Warnings = Arc::new(move |w: &StateWarning| say.diag_ref(w));
            Ok(Arc::new(S3Backend::new(config, codec).await.with_warnings(warnings)))
        }
        "local" => {
            // --state-dir and XCSP_STATE_DIR arrive through clap as args.state_dir.
            let dir = args
                .state_dir
                .clone()
                .or_else(|| settings.flags.iter().rev().find(|(k, _)| k == "path").map(|(_, v)| PathBuf::from(v)))
                .or_else(|| settings.block.and_then(|b| b.path.clone()).map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from(".xcsp").join(&l.model.stack));
            Ok(Arc::new(LocalBackend::new(dir).with_codec(codec)))
        }
        "kubernetes" => {
            let Some(namespace) = settings.get("namespace") else {
                return Err(StackError::NoNamespace.into());
            };
            let found = s.cluster().map_err(|p| StackError::NoCluster(p.clone()))?;
            let backend =
                xcsp_kube::state::KubeBackend::new(&found.client_config(), &namespace, &l.model.stack, codec).await?;
            Ok(Arc::new(backend))
        }
        other => Err(StackError::UnknownBackend(other.into()).into()),
    }
}

/// Who asks for the lock; the backend adds the host, the process and the time.
fn holder() -> String {
    let var = |name| std::env::var(name).ok();
    holder_from(var("XCSP_LOCK_HOLDER"), var("USER"), os_user)
}

/// `XCSP_LOCK_HOLDER`, else `USER`, else the user the process runs as (for a CI job or a
/// container without `USER`), else "unknown user". An empty value counts as unset.
fn holder_from(lock_holder: Option<String>, user: Option<String>, os_user: impl FnOnce() -> Option<String>) -> String {
    let given = |v: Option<String>| v.filter(|v| !v.is_empty());
    given(lock_holder).or_else(|| given(user)).or_else(|| given(os_user())).unwrap_or_else(|| "unknown user".into())
}

/// The name of the effective user in the system's user database (NSS included), if it has one.
#[cfg(unix)]
fn os_user() -> Option<String> {
    // SAFETY: geteuid cannot fail; getpwuid_r writes only into `pwd` and `buf` (whose length it
    // is given), and on success `pw_name` points into `buf`, which outlives the CStr read below.
    let uid = unsafe { libc::geteuid() };
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        return Some(unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }.to_string_lossy().into_owned());
    }
}

#[cfg(not(unix))]
fn os_user() -> Option<String> {
    None
}

/// The stack's lock while a command runs; released when dropped (also on early returns).
pub struct Held {
    backend: Arc<dyn Backend>,
    id: String,
    say: Say,
}

impl Drop for Held {
    fn drop(&mut self) {
        let (backend, id) = (self.backend.clone(), self.id.clone());
        let release = async move { backend.unlock(&id).await };
        if let Err(e) = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(release)) {
            self.say.warn(format_args!("the state lock {} was not released: {e}", self.id));
        }
    }
}

/// The stack's backend, locked for `operation`, and its state (new if there is none yet).
pub async fn open(s: &Stack, operation: &str) -> crate::Result<(Arc<dyn Backend>, Held, State)> {
    let backend = backend(s).await?;
    let (held, state) = locked(s, &backend, operation).await?;
    Ok((backend, held, state))
}

/// `backend` locked for `operation`, and its state (new if there is none yet).
pub async fn locked(s: &Stack, backend: &Arc<dyn Backend>, operation: &str) -> crate::Result<(Held, State)> {
    let who = s.state.holder.clone().unwrap_or_else(holder);
    let started = std::time::Instant::now();
    let mut said = false;
    // A lock another run holds is waited for up to the lock timeout, never taken over.
    let lock = loop {
        match backend.lock(&who, operation).await {
            Ok(lock) => break lock,
            Err(e @ xcsp_state::StateError::Locked { .. }) if started.elapsed() < s.state.lock_timeout => {
                if !said {
                    s.say.note(format_args!("{e}; waiting up to {}s for it", s.state.lock_timeout.as_secs()));
                    said = true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let held = Held { backend: backend.clone(), id: lock.id, say: s.say.clone() };
    let state = backend.read().await?.unwrap_or_else(|| State::new(s.name()));
    Ok((held, state))
}

/// Saves through the backend after every step of a run.
pub struct Saver(pub Arc<dyn Backend>);

impl xcsp_engine::Store for Saver {
    fn save<'a>(
        &'a mut self,
        state: &'a mut State,
    ) -> xcsp_core::provider::BoxFuture<'a, Result<(), xcsp_state::StateError>> {
        self.0.write(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_the_variable_then_user_then_the_os_user_then_unknown() {
        let some = |s: &str| Some(s.to_string());
        assert_eq!(holder_from(some("ci-job-42"), some("alice"), || some("root")), "ci-job-42");
        assert_eq!(holder_from(None, some("alice"), || some("root")), "alice");
        assert_eq!(holder_from(None, None, || some("svc-xcsp")), "svc-xcsp");
        assert_eq!(holder_from(some(""), some(""), || some("svc-xcsp")), "svc-xcsp");
        assert_eq!(holder_from(None, None, || None), "unknown user");
    }

    #[cfg(unix)]
    #[test]
    fn the_os_user_is_the_one_id_names() {
        // `id -un` reads the same user database; skip where it is missing.
        let Ok(out) = std::process::Command::new("id").arg("-un").output() else { return };
        if out.status.success() {
            assert_eq!(os_user().as_deref(), Some(String::from_utf8_lossy(&out.stdout).trim()));
        }
    }

    #[test]
    fn key_sources_names_every_variable_set() {
        let two = KeySources { set: vec!["XCSP_STATE_KEY".into(), "XCSP_STATE_PASSPHRASE".into()] };
        assert_eq!(
            two.to_string(),
            "XCSP_STATE_KEY and XCSP_STATE_PASSPHRASE are both set: the state key would be ambiguous"
        );
        let names = ["XCSP_STATE_KEY_OLD", "XCSP_STATE_KEY_FILE_OLD", "XCSP_STATE_PASSPHRASE_OLD"];
        let three = KeySources { set: names.iter().map(|n| n.to_string()).collect() };
        assert!(
            three
                .to_string()
                .starts_with("XCSP_STATE_KEY_OLD, XCSP_STATE_KEY_FILE_OLD and XCSP_STATE_PASSPHRASE_OLD are all set")
        );
        use miette::Diagnostic;
        assert_eq!(three.code().unwrap().to_string(), "xcsp::state::key_sources");
        assert!(three.help().is_some());
    }
}
