//! The local provider: resources that exist only in state, made by xcsp itself. Today that is
//! `xcsp_preshared_key`, a generated tunnel key that both clouds are given.

use xcsp_core::provider::{BoxFuture, Observed, Progress, Provider, ProviderError, Request};
use xcsp_core::{ProviderKind, ResourceType, Value};

/// Generates what local resources hold. Nothing here can be refreshed: state is the truth.
pub struct LocalProvider;

const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A key both clouds accept: AWS wants 8-64 characters of letters, digits, `.` and `_`, not starting
/// with `0`; Azure's shared keys take the same. Starting with a letter satisfies both.
///
/// Every character is drawn from the crypto module's generator (its DRBG in the FIPS build), by
/// rejection so that each of the alphabet's characters is equally likely.
fn preshared_key(length: usize) -> Result<String, xcsp_crypto::CryptoError> {
    let mut out = String::with_capacity(length);
    let mut pool = [0u8; 64];
    while out.len() < length {
        xcsp_crypto::fill_random(&mut pool)?;
        for b in pool {
            let alphabet = if out.is_empty() { LETTERS } else { ALPHANUMERIC };
            // The largest multiple of the alphabet's size below 256: beyond it, a byte is redrawn.
            let limit = 256 - 256 % alphabet.len();
            if (b as usize) < limit && out.len() < length {
                out.push(alphabet[b as usize % alphabet.len()] as char);
            }
        }
    }
    Ok(out)
}

impl Provider for LocalProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    fn refresh_known<'a>(
        &'a self,
        _: &'a str,
        _: ResourceType,
        _: &'a [Observed],
    ) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// A key's only attribute is its length, which forces a new key: every write makes one.
    fn write<'a>(&'a self, req: Request<'a>, _: &'a dyn Progress) -> BoxFuture<'a, Result<Observed, ProviderError>> {
        Box::pin(async move {
            let length = req.attributes.get("length").and_then(Value::as_i64).unwrap_or(32).clamp(8, 64) as usize;
            let mut attributes = req.attributes.clone();
            let key = preshared_key(length).map_err(|e| ProviderError::Failed {
                address: req.address.to_string(),
                code: "Random".into(),
                message: e.to_string(),
            })?;
            attributes.insert("value".into(), Value::sensitive(Value::string(key)));
            // When the key was made, so that its age can be told without it (`xcsp status`, rotation).
            let now = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339);
            attributes.insert("created".into(), Value::string(now.unwrap_or_default()));
            Ok(Observed { address: req.address.clone(), id: req.address.to_string(), attributes })
        })
    }

    fn delete<'a>(&'a self, _: Request<'a>, _: &'a dyn Progress) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_suit_both_clouds() {
        for _ in 0..200 {
            let k = preshared_key(32).unwrap();
            assert_eq!(k.len(), 32);
            assert!(k.chars().next().unwrap().is_ascii_alphabetic(), "{k}");
            assert!(k.chars().all(|c| c.is_ascii_alphanumeric()), "{k}");
        }
        assert_ne!(preshared_key(32).unwrap(), preshared_key(32).unwrap());
    }
}
