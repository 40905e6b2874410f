//! Client-side encryption of state and plan files: AES-256-GCM, with a key given directly (32
//! bytes) or derived from a passphrase with PBKDF2-HMAC-SHA256 (600,000 iterations; parameters and
//! salt recorded in the envelope), both through the crypto module ([`xcsp_crypto::sealing`]: the
//! FIPS module in the FIPS build, with its generator for salts and nonces). Whoever can read the
//! bucket or the directory sees an envelope, never a pre-shared key.
//!
//! Envelope (JSON): `{"xcsp_encrypted": 2, "kdf": {"alg": "pbkdf2-sha256", "salt", "iterations"}
//! | null, "nonce": b64, "ciphertext": b64}`; `xcsp_encrypted` is the format version. Format 1
//! derived passphrase keys with Argon2id, which FIPS 140 does not approve: a non-FIPS build still
//! opens it (and every write re-seals with PBKDF2), a FIPS build refuses it and names
//! `xcsp state reseal`, run once with a non-FIPS build. Reading tries the current key, then the
//! old one (rotation: read with the old, write with the new). In `enforced` mode plaintext is
//! refused both ways.
//!
//! A derivation is deliberately slow and state is written after every operation of an apply, so a
//! codec derives each key once: it seals with one salt for its whole life (a fresh random nonce
//! per write, as AES-GCM requires) and remembers the keys it derived to open envelopes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use xcsp_crypto::sealing;

use crate::StateError;

/// The envelope format this build writes: 2, PBKDF2 for passphrases. It reads 1 (Argon2id) too,
/// outside the FIPS build.
const ENVELOPE_VERSION: u32 = 2;

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

    /// A key file's content: exactly 32 raw bytes, or their base64 (`head -c32 /dev/urandom`
    /// and `... | base64` both work).
    pub fn from_key_file(content: &[u8]) -> Result<KeySource, StateError> {
        if let Ok(key) = <[u8; 32]>::try_from(content) {
            return Ok(KeySource::Key(key));
        }
        let text = std::str::from_utf8(content)
            .map_err(|_| StateError::Key("a key file holds 32 raw bytes or their base64".into()))?;
        KeySource::from_base64(text)
    }
}

/// How a passphrase became the key, recorded in each envelope so that it can change later.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "alg")]
enum Kdf {
    /// SP 800-132, FIPS-approved: what this build seals with.
    #[serde(rename = "pbkdf2-sha256")]
    Pbkdf2 { salt: String, iterations: u32 },
    /// Format 1's derivation (OWASP's minimum: 19 MiB, 2 passes, 1 lane), not FIPS-approved.
    #[serde(rename = "argon2id")]
    Argon2id { salt: String, m_kib: u32, t: u32, p: u32 },
}

impl Kdf {
    /// PBKDF2-HMAC-SHA256 with a fresh 128-bit salt from the module.
    fn fresh() -> Result<Kdf, StateError> {
        let salt: [u8; 16] = xcsp_crypto::random_bytes().map_err(|e| StateError::Key(e.to_string()))?;
        Ok(Kdf::Pbkdf2 { salt: B64.encode(salt), iterations: sealing::PBKDF2_ITERATIONS })
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Envelope {
    xcsp_encrypted: u32,
    kdf: Option<Kdf>,
    nonce: String,
    ciphertext: String,
}

/// Which configured key a derived key came from.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Current,
    Old,
}

/// How state bytes are sealed and opened. `Codec::default()` neither seals nor requires a key.
#[derive(Debug, Clone, Default)]
pub struct Codec {
    key: Option<KeySource>,
    /// The previous key, accepted for reading during a rotation.
    old_key: Option<KeySource>,
    /// Refuse to read or write plaintext.
    enforced: bool,
    derived: Arc<Mutex<Derived>>,
}

/// Keys derived from passphrases so far, and the parameters this codec seals with.
#[derive(Default)]
struct Derived {
    sealing: Option<Kdf>,
    keys: HashMap<(Slot, Kdf), [u8; 32]>,
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Derived({} keys)", self.keys.len())
    }
}

/// What a FIPS build says of state sealed with a key derived by Argon2id.
pub const ARGON2_IN_FIPS: &str = "this was sealed by an older xcsp with a key derived from the passphrase by Argon2id, which FIPS 140 does not approve, and this is a FIPS build: re-seal it once with a non-FIPS build of xcsp (`xcsp state reseal`, same key settings; it writes PBKDF2-HMAC-SHA256 and AES-256-GCM), then use this one";

/// The key `kdf` derives from `passphrase` ([`Codec::open`] refuses Argon2id in a FIPS build
/// before it gets here).
fn derive_key(passphrase: &str, kdf: &Kdf) -> Result<[u8; 32], StateError> {
    let salt_of = |salt: &str| B64.decode(salt).map_err(|_| StateError::Key("corrupt salt".into()));
    match kdf {
        Kdf::Pbkdf2 { salt, iterations } => {
            sealing::pbkdf2_sha256(passphrase.as_bytes(), &salt_of(salt)?, *iterations).map_err(StateError::Key)
        }
        Kdf::Argon2id { salt, m_kib, t, p } => {
            let params = argon2::Params::new(*m_kib, *t, *p, Some(32)).map_err(|e| StateError::Key(e.to_string()))?;
            let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
            let mut out = [0u8; 32];
            argon
                .hash_password_into(passphrase.as_bytes(), &salt_of(salt)?, &mut out)
                .map_err(|e| StateError::Key(e.to_string()))?;
            Ok(out)
        }
    }
}

impl Codec {
    /// Seals with `key` (when given); opens what it sealed.
    pub fn new(key: Option<KeySource>) -> Codec {
        Codec { key, ..Codec::default() }
    }

    /// Also opens what `old` sealed: a rotation reads with the old key and writes with the new.
    pub fn with_old_key(mut self, old: Option<KeySource>) -> Codec {
        self.old_key = old;
        self
    }

    /// Refuses plaintext both ways: nothing is written unsealed, nothing unsealed is read.
    pub fn enforced(mut self, enforced: bool) -> Codec {
        self.enforced = enforced;
        self
    }

    pub fn encrypts(&self) -> bool {
        self.key.is_some()
    }

    pub fn is_enforced(&self) -> bool {
        self.enforced
    }

    /// The AES key for `slot` under `kdf` (none: the raw key), derived at most once.
    fn derive(&self, slot: Slot, kdf: Option<&Kdf>) -> Result<[u8; 32], StateError> {
        let source = match slot {
            Slot::Current => self.key.as_ref(),
            Slot::Old => self.old_key.as_ref(),
        };
        match (source, kdf) {
            (None, _) => Err(StateError::Key("no key".into())),
            (Some(KeySource::Key(k)), _) => Ok(*k),
            (Some(KeySource::Passphrase(_)), None) => {
                Err(StateError::Key("this was sealed with a key, not a passphrase".into()))
            }
            (Some(KeySource::Passphrase(p)), Some(kdf)) => {
                let cached = self.derived.lock().expect("key cache").keys.get(&(slot, kdf.clone())).copied();
                if let Some(key) = cached {
                    return Ok(key);
                }
                let key = derive_key(p, kdf)?;
                self.derived.lock().expect("key cache").keys.insert((slot, kdf.clone()), key);
                Ok(key)
            }
        }
    }

    /// Bytes to store: an envelope when a key is configured, the plaintext otherwise (refused
    /// when enforced).
    pub fn seal(&self, plaintext: &[u8]) -> Result<Vec<u8>, StateError> {
        let Some(source) = &self.key else {
            if self.enforced {
                return Err(StateError::Key(
                    "encryption is enforced but no key is configured (XCSP_STATE_KEY, XCSP_STATE_KEY_FILE or XCSP_STATE_PASSPHRASE)".into(),
                ));
            }
            return Ok(plaintext.to_vec());
        };
        let kdf = match source {
            KeySource::Key(_) => None,
            KeySource::Passphrase(_) => {
                let mut derived = self.derived.lock().expect("key cache");
                if derived.sealing.is_none() {
                    derived.sealing = Some(Kdf::fresh()?);
                }
                derived.sealing.clone()
            }
        };
        let key = self.derive(Slot::Current, kdf.as_ref())?;
        let (nonce, ciphertext) =
            sealing::seal(&key, plaintext).map_err(|e| StateError::Key(format!("encryption failed: {e}")))?;
        let env = Envelope {
            xcsp_encrypted: ENVELOPE_VERSION,
            kdf,
            nonce: B64.encode(nonce),
            ciphertext: B64.encode(ciphertext),
        };
        Ok(serde_json::to_vec(&env).expect("envelopes serialize"))
    }

    /// Whether stored bytes are an envelope (as opposed to plaintext state).
    pub fn is_sealed(stored: &[u8]) -> bool {
        serde_json::from_slice::<serde_json::Value>(stored).is_ok_and(|v| v.get("xcsp_encrypted").is_some())
    }

    /// The plaintext of stored bytes (sealed or not).
    pub fn open(&self, stored: &[u8]) -> Result<Vec<u8>, StateError> {
        if !Codec::is_sealed(stored) {
            if self.enforced {
                return Err(StateError::Key("encryption is enforced, and this is plaintext".into()));
            }
            return Ok(stored.to_vec());
        }
        let env: Envelope =
            serde_json::from_slice(stored).map_err(|e| StateError::Key(format!("corrupt envelope: {e}")))?;
        if env.xcsp_encrypted > ENVELOPE_VERSION {
            return Err(StateError::Key(format!(
                "envelope format {} is newer than this xcsp understands ({ENVELOPE_VERSION}): upgrade xcsp",
                env.xcsp_encrypted
            )));
        }
        let nonce = B64.decode(&env.nonce).map_err(|_| StateError::Key("corrupt nonce".into()))?;
        let ciphertext = B64.decode(&env.ciphertext).map_err(|_| StateError::Key("corrupt ciphertext".into()))?;
        if nonce.len() != 12 {
            return Err(StateError::Key("corrupt nonce".into()));
        }
        if self.key.is_none() && self.old_key.is_none() {
            return Err(StateError::Key(
                "this is encrypted: set XCSP_STATE_KEY, XCSP_STATE_KEY_FILE or XCSP_STATE_PASSPHRASE".into(),
            ));
        }
        if xcsp_crypto::FIPS && matches!(env.kdf, Some(Kdf::Argon2id { .. })) {
            return Err(StateError::Key(ARGON2_IN_FIPS.into()));
        }
        for slot in [Slot::Current, Slot::Old] {
            let Ok(key) = self.derive(slot, env.kdf.as_ref()) else { continue };
            if let Some(plain) = sealing::open(&key, &nonce, &ciphertext) {
                return Ok(plain);
            }
        }
        let how = if env.kdf.is_some() { "a passphrase" } else { "a key" };
        Err(StateError::Key(format!(
            "this was sealed with {how} and cannot be decrypted with the configured one (wrong key or passphrase?)"
        )))
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
            let codec = Codec::new(Some(source));
            let sealed = codec.seal(text.as_bytes()).unwrap();
            assert!(!String::from_utf8_lossy(&sealed).contains(PSK));
            assert!(!sealed.windows(PSK.len()).any(|w| w == PSK.as_bytes()));
            assert_eq!(codec.open(&sealed).unwrap(), text.as_bytes());
            let wrong = Codec::new(Some(KeySource::Passphrase("wrong".into())));
            assert!(wrong.open(&sealed).unwrap_err().to_string().contains("cannot be decrypted"));
            assert!(Codec::default().open(&sealed).unwrap_err().to_string().contains("XCSP_STATE_KEY"));
        }
    }

    #[test]
    fn rotation_reads_with_the_old_key_and_writes_with_the_new() {
        let old = Codec::new(Some(KeySource::Passphrase("old".into())));
        let sealed = old.seal(b"state").unwrap();
        let rotating = Codec::new(Some(KeySource::Passphrase("new".into())))
            .with_old_key(Some(KeySource::Passphrase("old".into())));
        assert_eq!(rotating.open(&sealed).unwrap(), b"state");
        let resealed = rotating.seal(b"state").unwrap();
        assert!(old.open(&resealed).is_err());
        let new_only = Codec::new(Some(KeySource::Passphrase("new".into())));
        assert_eq!(new_only.open(&resealed).unwrap(), b"state");
    }

    #[test]
    fn enforced_mode_refuses_plaintext() {
        let enforced = Codec::default().enforced(true);
        assert!(enforced.seal(b"{}").is_err());
        assert!(enforced.open(b"{\"version\": 1}").is_err());
        assert!(format!("{:?}", KeySource::Passphrase("hunter2".into())).contains("redacted"));
    }

    /// A format-1 envelope as the previous xcsp wrote it: Argon2id's key, AES-256-GCM.
    fn format_one(passphrase: &str, plaintext: &[u8]) -> Vec<u8> {
        let (salt, m_kib, t, p) = ([5u8; 16], 19 * 1024, 2, 1);
        let params = argon2::Params::new(m_kib, t, p, Some(32)).unwrap();
        let mut key = [0u8; 32];
        argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
            .hash_password_into(passphrase.as_bytes(), &salt, &mut key)
            .unwrap();
        let (nonce, ciphertext) = sealing::seal(&key, plaintext).unwrap();
        serde_json::to_vec(&serde_json::json!({
            "xcsp_encrypted": 1,
            "kdf": { "alg": "argon2id", "salt": B64.encode(salt), "m_kib": m_kib, "t": t, "p": p },
            "nonce": B64.encode(nonce),
            "ciphertext": B64.encode(ciphertext),
        }))
        .unwrap()
    }

    #[test]
    fn passphrases_derive_by_pbkdf2_and_argon2id_state_is_refused_by_the_fips_build() {
        let codec = Codec::new(Some(KeySource::Passphrase("correct horse".into())));
        let sealed: serde_json::Value = serde_json::from_slice(&codec.seal(b"state").unwrap()).unwrap();
        assert_eq!(sealed["xcsp_encrypted"], 2);
        assert_eq!(sealed["kdf"]["alg"], "pbkdf2-sha256");
        assert_eq!(sealed["kdf"]["iterations"], sealing::PBKDF2_ITERATIONS);

        let old = format_one("correct horse", b"state");
        let opened = codec.open(&old);
        if xcsp_crypto::FIPS {
            let err = opened.unwrap_err().to_string();
            assert!(err.contains("Argon2id") && err.contains("xcsp state reseal"), "{err}");
        } else {
            // A non-FIPS build opens it, and what it writes back is PBKDF2's.
            assert_eq!(opened.unwrap(), b"state");
        }
    }

    #[test]
    fn key_files_hold_raw_bytes_or_base64() {
        let raw = [9u8; 32];
        let sealed = Codec::new(Some(KeySource::from_key_file(&raw).unwrap())).seal(b"s").unwrap();
        let b64 = format!("{}\n", B64.encode(raw));
        assert_eq!(Codec::new(Some(KeySource::from_key_file(b64.as_bytes()).unwrap())).open(&sealed).unwrap(), b"s");
        let short = KeySource::from_key_file(b"too short").unwrap_err().to_string();
        assert!(short.contains("base64") || short.contains("32 bytes"), "{short}");
    }

    #[test]
    fn every_seal_has_its_own_nonce_and_a_newer_envelope_is_refused() {
        let codec = Codec::new(Some(KeySource::Passphrase("p".into())));
        let (a, b) = (codec.seal(b"same").unwrap(), codec.seal(b"same").unwrap());
        assert_ne!(a, b);
        assert_eq!(codec.open(&b).unwrap(), b"same");
        // Rotating from a passphrase to a raw key.
        let rotated = Codec::new(Some(KeySource::Key([1u8; 32]))).with_old_key(Some(KeySource::Passphrase("p".into())));
        assert_eq!(rotated.open(&a).unwrap(), b"same");
        let mut env: serde_json::Value = serde_json::from_slice(&a).unwrap();
        env["xcsp_encrypted"] = 3.into();
        let err = codec.open(&serde_json::to_vec(&env).unwrap()).unwrap_err().to_string();
        assert!(err.contains("upgrade xcsp"), "{err}");
    }
}
