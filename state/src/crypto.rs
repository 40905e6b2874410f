//! Client-side encryption of state and plan files: AES-256-GCM (the `aes-gcm` crate), with a key
//! given directly (32 bytes, base64) or derived from a passphrase with Argon2id (random salt per
//! write, parameters recorded). Whoever can read the bucket or the directory sees an envelope,
//! never a pre-shared key.
//!
//! Envelope (JSON): `{"xcsp_encrypted": 1, "kdf": {...} | null, "nonce": b64, "ciphertext": b64}`.
//! Reading tries the current key, then the old one (rotation: read with the old, write with the
//! new). In `enforced` mode plaintext is refused both ways.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::StateError;

/// Where a key comes from.
#[derive(Clone)]
pub enum KeySource {
    /// 32 raw bytes.
    Key([u8; 32]),
    Passphrase(String),
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeySource::Key(_) => "KeySource::Key(<redacted>)",
            KeySource::Passphrase(_) => "KeySource::Passphrase(<redacted>)",
        })
    }
}

impl KeySource {
    /// A base64 key (`XCSP_STATE_KEY`).
    pub fn from_base64(text: &str) -> Result<KeySource, StateError> {
        let bytes = B64.decode(text.trim()).map_err(|_| StateError::Key("the key is not base64".into()))?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| StateError::Key("the key must be 32 bytes (base64 of 32 random bytes)".into()))?;
        Ok(KeySource::Key(key))
    }
}

/// Argon2id parameters, recorded in each envelope so they can change later.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Kdf {
    alg: String,
    salt: String,
    m_kib: u32,
    t: u32,
    p: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Envelope {
    xcsp_encrypted: u32,
    kdf: Option<Kdf>,
    nonce: String,
    ciphertext: String,
}

/// How state bytes are sealed and opened.
#[derive(Debug, Clone, Default)]
pub struct Codec {
    pub key: Option<KeySource>,
    /// The previous key, accepted for reading during a rotation.
    pub old_key: Option<KeySource>,
    /// Refuse to read or write plaintext.
    pub enforced: bool,
}

fn derive(source: &KeySource, kdf: Option<&Kdf>) -> Result<[u8; 32], StateError> {
    match (source, kdf) {
        (KeySource::Key(k), _) => Ok(*k),
        (KeySource::Passphrase(p), Some(kdf)) => {
            let salt = B64.decode(&kdf.salt).map_err(|_| StateError::Key("corrupt salt".into()))?;
            let params =
                argon2::Params::new(kdf.m_kib, kdf.t, kdf.p, Some(32)).map_err(|e| StateError::Key(e.to_string()))?;
            let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
            let mut out = [0u8; 32];
            argon.hash_password_into(p.as_bytes(), &salt, &mut out).map_err(|e| StateError::Key(e.to_string()))?;
            Ok(out)
        }
        (KeySource::Passphrase(_), None) => {
            Err(StateError::Key("this file was sealed with a key, not a passphrase".into()))
        }
    }
}

impl Codec {
    /// From the environment: `XCSP_STATE_KEY` (base64) or `XCSP_STATE_PASSPHRASE`; the same with
    /// `_OLD` for rotation; `XCSP_STATE_ENCRYPTION=enforced`.
    pub fn from_env() -> Result<Codec, StateError> {
        let source = |suffix: &str| -> Result<Option<KeySource>, StateError> {
            if let Ok(k) = std::env::var(format!("XCSP_STATE_KEY{suffix}")) {
                return KeySource::from_base64(&k).map(Some);
            }
            Ok(std::env::var(format!("XCSP_STATE_PASSPHRASE{suffix}")).ok().map(KeySource::Passphrase))
        };
        Ok(Codec {
            key: source("")?,
            old_key: source("_OLD")?,
            enforced: std::env::var("XCSP_STATE_ENCRYPTION").is_ok_and(|v| v == "enforced"),
        })
    }

    pub fn encrypts(&self) -> bool {
        self.key.is_some()
    }

    /// Bytes to store.
    pub fn seal(&self, plaintext: &[u8]) -> Result<Vec<u8>, StateError> {
        let Some(source) = &self.key else {
            if self.enforced {
                return Err(StateError::Key(
                    "encryption is enforced but no key is configured (XCSP_STATE_KEY or XCSP_STATE_PASSPHRASE)".into(),
                ));
            }
            return Ok(plaintext.to_vec());
        };
        let mut rng = rand::rng();
        let kdf = match source {
            KeySource::Key(_) => None,
            KeySource::Passphrase(_) => {
                let mut salt = [0u8; 16];
                rng.fill_bytes(&mut salt);
                Some(Kdf { alg: "argon2id".into(), salt: B64.encode(salt), m_kib: 19 * 1024, t: 2, p: 1 })
            }
        };
        let key = derive(source, kdf.as_ref())?;
        let mut nonce = [0u8; 12];
        rng.fill_bytes(&mut nonce);
        let cipher = Aes256Gcm::new_from_slice(&key).expect("32-byte key");
        let ciphertext = cipher
            .encrypt(Nonce::from_slice(&nonce), plaintext)
            .map_err(|_| StateError::Key("encryption failed".into()))?;
        let env = Envelope { xcsp_encrypted: 1, kdf, nonce: B64.encode(nonce), ciphertext: B64.encode(ciphertext) };
        Ok(serde_json::to_vec(&env).expect("envelopes serialize"))
    }

    /// The plaintext of stored bytes (sealed or not).
    pub fn open(&self, stored: &[u8]) -> Result<Vec<u8>, StateError> {
        let env: Option<Envelope> = serde_json::from_slice::<serde_json::Value>(stored)
            .ok()
            .filter(|v| v.get("xcsp_encrypted").is_some())
            .and_then(|v| serde_json::from_value(v).ok());
        let Some(env) = env else {
            if self.enforced {
                return Err(StateError::Key("encryption is enforced, and this state is plaintext".into()));
            }
            return Ok(stored.to_vec());
        };
        let nonce = B64.decode(&env.nonce).map_err(|_| StateError::Key("corrupt nonce".into()))?;
        let ciphertext = B64.decode(&env.ciphertext).map_err(|_| StateError::Key("corrupt ciphertext".into()))?;
        let candidates: Vec<&KeySource> = self.key.iter().chain(self.old_key.iter()).collect();
        if candidates.is_empty() {
            return Err(StateError::Key("the state is encrypted: set XCSP_STATE_KEY or XCSP_STATE_PASSPHRASE".into()));
        }
        for source in candidates {
            let Ok(key) = derive(source, env.kdf.as_ref()) else { continue };
            let cipher = Aes256Gcm::new_from_slice(&key).expect("32-byte key");
            if let Ok(plain) = cipher.decrypt(Nonce::from_slice(&nonce), ciphertext.as_ref()) {
                return Ok(plain);
            }
        }
        Err(StateError::Key("the state cannot be decrypted with the configured key (wrong key or passphrase?)".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PSK: &str = "Literal_PSK_never_in_bytes_42";

    #[test]
    fn sealed_bytes_hold_no_secret_and_open_with_the_key_only() {
        let text = format!("{{\"psk\": \"{PSK}\"}}");
        for source in [KeySource::Passphrase("correct horse".into()), KeySource::Key([7u8; 32])] {
            let codec = Codec { key: Some(source), ..Codec::default() };
            let sealed = codec.seal(text.as_bytes()).unwrap();
            assert!(!String::from_utf8_lossy(&sealed).contains(PSK));
            assert!(!sealed.windows(PSK.len()).any(|w| w == PSK.as_bytes()));
            assert_eq!(codec.open(&sealed).unwrap(), text.as_bytes());
            let wrong = Codec { key: Some(KeySource::Passphrase("wrong".into())), ..Codec::default() };
            assert!(wrong.open(&sealed).unwrap_err().to_string().contains("cannot be decrypted"));
            assert!(Codec::default().open(&sealed).unwrap_err().to_string().contains("XCSP_STATE_KEY"));
        }
    }

    #[test]
    fn rotation_reads_with_the_old_key_and_writes_with_the_new() {
        let old = Codec { key: Some(KeySource::Passphrase("old".into())), ..Codec::default() };
        let sealed = old.seal(b"state").unwrap();
        let rotating = Codec {
            key: Some(KeySource::Passphrase("new".into())),
            old_key: Some(KeySource::Passphrase("old".into())),
            enforced: false,
        };
        assert_eq!(rotating.open(&sealed).unwrap(), b"state");
        let resealed = rotating.seal(b"state").unwrap();
        assert!(old.open(&resealed).is_err());
        let new_only = Codec { key: Some(KeySource::Passphrase("new".into())), ..Codec::default() };
        assert_eq!(new_only.open(&resealed).unwrap(), b"state");
    }

    #[test]
    fn enforced_mode_refuses_plaintext() {
        let enforced = Codec { enforced: true, ..Codec::default() };
        assert!(enforced.seal(b"{}").is_err());
        assert!(enforced.open(b"{\"version\": 1}").is_err());
        assert!(format!("{:?}", KeySource::Passphrase("hunter2".into())).contains("redacted"));
    }
}
