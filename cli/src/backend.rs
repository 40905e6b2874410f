//! Which state backend and which keys a command uses: the spec's `backend` block, overridden by
//! the environment (`XCSP_BACKEND*`), overridden by flags (`--backend`, `--backend-config`), as
//! Terraform's `-backend-config` does; and the lock a command holds while it runs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use xcsp_plans::Loaded;
use xcsp_state::backend::Backend;
use xcsp_state::crypto::{Codec, KeySource};
use xcsp_state::local::LocalBackend;
use xcsp_state::s3::{S3Backend, S3Config};
use xcsp_state::{State, StateWarning, Warnings};

use crate::StateArgs;
use crate::run::fail;

/// The settings `--backend-config KEY=VALUE` accepts, and the variable each can also come from.
const SETTINGS: &[(&str, &str)] = &[
    ("bucket", "XCSP_BACKEND_BUCKET"),
    ("key", "XCSP_BACKEND_KEY"),
    ("region", "XCSP_BACKEND_REGION"),
    ("endpoint", "XCSP_BACKEND_ENDPOINT"),
    ("server_side_encryption", "XCSP_BACKEND_SSE"),
    ("path", "XCSP_STATE_DIR"),
    ("encryption", "XCSP_STATE_ENCRYPTION"),
];

/// The backend settings after precedence: flag, then environment, then the spec's block.
struct Settings<'a> {
    flags: Vec<(String, String)>,
    block: Option<&'a xcsp_plans::spec::Backend>,
}

impl<'a> Settings<'a> {
    fn new(l: &'a Loaded, args: &StateArgs) -> Result<Settings<'a>, ExitCode> {
        let mut flags = Vec::new();
        for pair in &args.backend_config {
            let Some((k, v)) = pair.split_once('=').filter(|(k, _)| SETTINGS.iter().any(|(s, _)| s == k)) else {
                let known: Vec<&str> = SETTINGS.iter().map(|(s, _)| *s).collect();
                eprintln!(
                    "Error: --backend-config takes KEY=VALUE with KEY one of {}; got `{pair}`.",
                    known.join(", ")
                );
                return Err(ExitCode::from(1));
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
            _ => None,
        });
        flag.or(env).or(block)
    }

    /// Enforced if any source says so: a spec that enforces encryption is not relaxed by a
    /// variable someone forgot in their shell.
    fn enforced(&self) -> Result<bool, ExitCode> {
        let env = std::env::var("XCSP_STATE_ENCRYPTION").ok();
        let flag = self.flags.iter().rev().find(|(k, _)| k == "encryption").map(|(_, v)| v.clone());
        let block = self.block.and_then(|b| b.encryption.clone());
        let mut enforced = false;
        for mode in [flag, env, block].into_iter().flatten() {
            match mode.as_str() {
                "enforced" => enforced = true,
                "optional" => {}
                other => {
                    eprintln!("Error: unknown encryption mode `{other}`: `enforced` or `optional`.");
                    return Err(ExitCode::from(1));
                }
            }
        }
        Ok(enforced)
    }
}

/// A key from `XCSP_STATE_KEY{suffix}` (base64), `XCSP_STATE_KEY_FILE{suffix}` (a file of 32 raw
/// bytes or their base64) or `XCSP_STATE_PASSPHRASE{suffix}`, in that order.
fn key_from_env(suffix: &str) -> Result<Option<KeySource>, ExitCode> {
    if let Ok(k) = std::env::var(format!("XCSP_STATE_KEY{suffix}")) {
        return KeySource::from_base64(&k).map(Some).map_err(|e| fail(&e));
    }
    if let Ok(path) = std::env::var(format!("XCSP_STATE_KEY_FILE{suffix}")) {
        let content = std::fs::read(&path).map_err(|e| {
            eprintln!("Error: cannot read the state key file {path}: {e}");
            ExitCode::from(1)
        })?;
        return KeySource::from_key_file(&content).map(Some).map_err(|e| fail(&e));
    }
    Ok(std::env::var(format!("XCSP_STATE_PASSPHRASE{suffix}")).ok().map(KeySource::Passphrase))
}

/// How state and plan files are sealed: the key (and, during a rotation, the old key, suffix
/// `_OLD`) from the environment, enforced when the spec, `XCSP_STATE_ENCRYPTION` or
/// `--backend-config encryption=enforced` says so.
pub fn codec(l: &Loaded, args: &StateArgs) -> Result<Codec, ExitCode> {
    let enforced = Settings::new(l, args)?.enforced()?;
    Ok(Codec::new(key_from_env("")?).with_old_key(key_from_env("_OLD")?).enforced(enforced))
}

/// The stack's state store: `local` (the default: `--state-dir`, `path`, or `.xcsp/<stack>`) or
/// `s3` (`bucket`; `key` defaults to `<stack>/state.json`, `region` to the spec's AWS region),
/// sealing state with [`codec`].
pub async fn backend(l: &Loaded, args: &StateArgs) -> Result<Arc<dyn Backend>, ExitCode> {
    let settings = Settings::new(l, args)?;
    let codec = codec(l, args)?;
    let kind =
        args.backend.clone().or_else(|| settings.block.map(|b| b.kind.clone())).unwrap_or_else(|| "local".into());
    match kind.as_str() {
        "s3" => {
            let Some(bucket) = settings.get("bucket") else {
                eprintln!(
                    "Error: the s3 backend needs a bucket: `bucket` in the backend block, XCSP_BACKEND_BUCKET or --backend-config bucket=NAME."
                );
                return Err(ExitCode::from(1));
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
            let warnings: Warnings = Arc::new(|w: &StateWarning| crate::report(w));
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
        other => {
            eprintln!("Error: unknown backend `{other}`: `local` or `s3`.");
            Err(ExitCode::from(1))
        }
    }
}

/// Who asks for the lock; the backend adds the host, the process and the time.
fn holder() -> String {
    std::env::var("XCSP_LOCK_HOLDER").or_else(|_| std::env::var("USER")).unwrap_or_else(|_| "unknown user".into())
}

/// The stack's lock while a command runs; released when dropped (also on early returns).
pub struct Held {
    backend: Arc<dyn Backend>,
    id: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let (backend, id) = (self.backend.clone(), self.id.clone());
        let release = async move { backend.unlock(&id).await };
        if let Err(e) = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(release)) {
            eprintln!("Warning: the state lock {} was not released: {e}", self.id);
        }
    }
}

/// The stack's backend, locked for `operation`, and its state (new if there is none yet).
pub async fn open(l: &Loaded, args: &StateArgs, operation: &str) -> Result<(Arc<dyn Backend>, Held, State), ExitCode> {
    let backend = backend(l, args).await?;
    let lock = backend.lock(&holder(), operation).await.map_err(|e| fail(&e))?;
    let held = Held { backend: backend.clone(), id: lock.id };
    let state = backend.read().await.map_err(|e| fail(&e))?.unwrap_or_else(|| State::new(&l.model.stack));
    Ok((backend, held, state))
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
