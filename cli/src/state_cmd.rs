//! `xcsp state ...`: look at and repair recorded state, always under the stack's lock.
//!
//! Secrets stay marked (`{"$sensitive": ...}`) in state, sealed or not, so what these commands
//! print can redact them even after decryption: `show` prints a marker unless asked otherwise.

use std::process::ExitCode;

use xcsp_core::{Address, Value};
use xcsp_stack::backend::{codec, open};
use xcsp_stack::{Stack, StackError};

use crate::StateCommand;
use crate::report::CliError;

/// Secrets as a marker: what `show` prints.
fn redact(v: &Value) -> serde_json::Value {
    match v {
        Value::Sensitive(_) => serde_json::Value::String("(sensitive value)".into()),
        Value::List(l) => serde_json::Value::Array(l.iter().map(redact).collect()),
        Value::Map(m) => serde_json::Value::Object(m.iter().map(|(k, x)| (k.clone(), redact(x))).collect()),
        other => other.to_json(),
    }
}

fn address(text: &str) -> Result<Address, StackError> {
    text.parse().map_err(|e| StackError::NotAnAddress { text: text.into(), detail: format!("{e}") })
}

pub async fn run(s: &Stack, command: &StateCommand) -> miette::Result<ExitCode> {
    let l = &s.loaded;
    let (backend, _held, mut state) = open(s, "state").await?;
    match command {
        StateCommand::List { .. } => {
            for (a, r) in &state.resources {
                match &r.id {
                    Some(id) => println!("{a}\t{id}"),
                    None => println!("{a}\t(intent: create not confirmed)"),
                }
            }
        }
        StateCommand::Show { address: text, show_sensitive, .. } => {
            let a = address(text)?;
            let Some(r) = state.resources.get(&a) else {
                return Err(StackError::NotInState(a).into());
            };
            let attrs: serde_json::Map<String, serde_json::Value> = r
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), if *show_sensitive { v.unmarked().to_json() } else { redact(v) }))
                .collect();
            let shown = serde_json::json!({ "address": a.to_string(), "id": r.id, "attributes": attrs, "dependencies": r.dependencies });
            println!("{}", serde_json::to_string_pretty(&shown).expect("json"));
        }
        StateCommand::Rm { address: text, .. } => {
            let a = address(text)?;
            if state.resources.remove(&a).is_none() {
                return Err(StackError::NotInState(a).into());
            }
            backend.write(&mut state).await?;
            println!(
                "Removed {a} from state (the cloud resource itself is untouched; apply will adopt it again by its tags)."
            );
        }
        StateCommand::Pull { .. } => {
            // Sealed with the configured key, so the copy is as safe as the stored one.
            let codec = codec(s)?;
            let bytes = codec.seal(&serde_json::to_vec_pretty(&state).expect("state serializes"))?;
            use std::io::Write;
            let _ = std::io::stdout().write_all(&bytes);
        }
        StateCommand::Reseal { .. } => {
            if !codec(s)?.encrypts() {
                println!(
                    "The state is not encrypted: nothing to re-seal (set XCSP_STATE_KEY, XCSP_STATE_KEY_FILE or XCSP_STATE_PASSPHRASE)."
                );
                return Ok(ExitCode::SUCCESS);
            }
            backend.write(&mut state).await?;
            println!("Re-sealed the state (serial {}) with PBKDF2-HMAC-SHA256 and AES-256-GCM.", state.serial);
        }
        StateCommand::Push { file, force, .. } => {
            let codec = codec(s)?;
            let bytes = std::fs::read(file).map_err(|source| StackError::Read {
                what: "the file",
                path: file.clone(),
                source,
            })?;
            let plain = codec.open(&bytes)?;
            let mut pushed = xcsp_state::decode(&file.display().to_string(), &String::from_utf8_lossy(&plain))?;
            // Another stack's state is never this one's, whatever its lineage: not even with --force.
            if pushed.stack != l.model.stack {
                let (pushed, spec) = (pushed.stack, l.model.stack.clone());
                return Err(CliError::OtherStack { file: file.clone(), pushed, spec }.into());
            }
            if !force && state.serial > 0 && (pushed.lineage != state.lineage || pushed.serial < state.serial) {
                return Err(CliError::Backwards {
                    file: file.clone(),
                    lineage: pushed.lineage,
                    serial: pushed.serial,
                    current_lineage: state.lineage,
                    current_serial: state.serial,
                }
                .into());
            }
            pushed.serial = pushed.serial.max(state.serial);
            backend.write(&mut pushed).await?;
            println!("Pushed {} resources (serial {}).", pushed.resources.len(), pushed.serial);
        }
    }
    Ok(ExitCode::SUCCESS)
}
