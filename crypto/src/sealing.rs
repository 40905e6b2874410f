//! Sealing at rest through the module: AES-256-GCM (SP 800-38D) with a random 96-bit nonce, and
//! keys from passphrases by PBKDF2-HMAC-SHA256 (SP 800-132), both FIPS-approved.

use std::num::NonZeroU32;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use crate::{CryptoError, fill_random};

/// PBKDF2 iterations for a new passphrase key: OWASP's figure for PBKDF2-HMAC-SHA256 (600,000).
pub const PBKDF2_ITERATIONS: u32 = 600_000;

/// HMAC-SHA256 of `data` under `key` (a Shared Key signature).
pub fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key);
    let tag = aws_lc_rs::hmac::sign(&key, data);
    let mut out = [0u8; 32];
    out.copy_from_slice(tag.as_ref());
    out
}

/// A 32-byte key from `passphrase` and `salt`.
pub fn pbkdf2_sha256(passphrase: &[u8], salt: &[u8], iterations: u32) -> Result<[u8; 32], String> {
    let rounds = NonZeroU32::new(iterations).ok_or("zero PBKDF2 iterations")?;
    let mut out = [0u8; 32];
    aws_lc_rs::pbkdf2::derive(aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA256, rounds, salt, passphrase, &mut out);
    Ok(out)
}

fn key(key: &[u8; 32]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte AES-256 key"))
}

/// `(nonce, ciphertext with its tag)` of `plaintext` under `key`, with a fresh random nonce.
pub fn seal(k: &[u8; 32], plaintext: &[u8]) -> Result<([u8; NONCE_LEN], Vec<u8>), CryptoError> {
    let mut nonce = [0u8; NONCE_LEN];
    fill_random(&mut nonce)?;
    let mut data = plaintext.to_vec();
    key(k)
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
        .map_err(|_| CryptoError::Random)?;
    Ok((nonce, data))
}

/// The plaintext, if `ciphertext` (with its tag) was sealed under `key` with `nonce`.
pub fn open(k: &[u8; 32], nonce: &[u8], ciphertext: &[u8]) -> Option<Vec<u8>> {
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut data = ciphertext.to_vec();
    let plain = key(k).open_in_place(nonce, Aad::empty(), &mut data).ok()?;
    Some(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_sealed_opens_with_its_key_only() {
        let (nonce, sealed) = seal(&[3u8; 32], b"state").unwrap();
        assert_eq!(open(&[3u8; 32], &nonce, &sealed).unwrap(), b"state");
        assert!(open(&[4u8; 32], &nonce, &sealed).is_none());
        let (again, _) = seal(&[3u8; 32], b"state").unwrap();
        assert_ne!(nonce, again, "every seal draws its own nonce");
    }

    #[test]
    fn pbkdf2_matches_the_rfc_vector() {
        // RFC 7914 section 11, PBKDF2-HMAC-SHA256 ("passwd", "salt", 1 iteration), first 32 bytes.
        let k = pbkdf2_sha256(b"passwd", b"salt", 1).unwrap();
        assert_eq!(k[..8], [0x55, 0xac, 0x04, 0x6e, 0x56, 0xe3, 0x08, 0x9f], "{:02x?}", k);
        assert!(pbkdf2_sha256(b"p", b"s", 0).is_err());
    }

    #[test]
    fn hmac_matches_the_rfc_vector() {
        // RFC 4231 test case 2.
        let tag = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }
}
