//! Shared Key authorization of the blob service's requests, signed through the crypto module
//! (HMAC-SHA256 of AWS-LC, the FIPS module in the FIPS build) rather than azure_storage's own
//! signer, whose HMAC is RustCrypto's.
//!
//! The string to sign is Microsoft's for the Blob service since version 2009-09-19 (Microsoft
//! Learn, "Authorize with Shared Key"): the verb, eleven standard headers (Content-Length empty
//! when 0), the `x-ms-` headers by name, then the resource: `/account/path`, and each query
//! parameter (name lower-cased, by name) with its values sorted and comma-joined.

use std::sync::Arc;

use azure_core::headers::{HeaderName, Headers};
use azure_core::{Context, Policy, PolicyResult, Request, Url};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

/// Signs every try of a request with the account's key; the last policy before [`Seal`](crate::transport::Seal).
pub(crate) struct SharedKey {
    account: String,
    /// The decoded account key.
    key: Vec<u8>,
}

impl std::fmt::Debug for SharedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedKey").field("account", &self.account).finish_non_exhaustive()
    }
}

impl SharedKey {
    /// For `account` with `key` as List Keys returns it (base64).
    pub fn new(account: &str, key: &str) -> Result<SharedKey, String> {
        let key = B64.decode(key.trim()).map_err(|_| format!("the key of storage account {account} is not base64"))?;
        Ok(SharedKey { account: account.to_string(), key })
    }

    fn authorization(&self, request: &Request) -> String {
        let text = string_to_sign(request.method().as_ref(), request.headers(), request.url(), &self.account);
        let signature = xcsp_crypto::sealing::hmac_sha256(&self.key, text.as_bytes());
        format!("SharedKey {}:{}", self.account, B64.encode(signature))
    }
}

#[async_trait::async_trait]
impl Policy for SharedKey {
    async fn send(&self, ctx: &Context, request: &mut Request, next: &[Arc<dyn Policy>]) -> PolicyResult {
        let authorization = self.authorization(request);
        request.insert_header(azure_core::headers::AUTHORIZATION, authorization);
        next[0].send(ctx, request, &next[1..]).await
    }
}

const STANDARD: [&str; 11] = [
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
];

fn string_to_sign(verb: &str, headers: &Headers, url: &Url, account: &str) -> String {
    let get = |name: &'static str| headers.get_optional_str(&HeaderName::from_static(name)).unwrap_or_default();
    let mut out = format!("{verb}\n");
    for name in STANDARD {
        let value = get(name);
        out.push_str(if name == "content-length" && value == "0" { "" } else { value });
        out.push('\n');
    }
    let mut ms: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_ascii_lowercase(), v.as_str().trim().to_string()))
        .filter(|(k, _)| k.starts_with("x-ms-"))
        .collect();
    ms.sort();
    for (k, v) in ms {
        out.push_str(&format!("{k}:{v}\n"));
    }
    out.push_str(&format!("/{account}{}", url.path()));
    let mut params: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (k, v) in url.query_pairs() {
        params.entry(k.to_lowercase()).or_default().push(v.into_owned());
    }
    for (k, mut values) in params {
        values.sort();
        out.push_str(&format!("\n{k}:{}", values.join(",")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_to_sign_is_microsofts() {
        let mut h = Headers::new();
        h.insert("x-ms-version", "2023-11-03");
        h.insert("x-ms-date", "Tue, 02 Dec 2026 10:00:00 GMT");
        h.insert("content-length", "0");
        h.insert("x-ms-copy-source", " https://rhcos.example/rhcos.vhd ");
        let url: Url = "https://xcspabc.blob.core.usgovcloudapi.net/images/rhcos.vhd?restype=container&comp=list&Include=metadata&include=copy"
            .parse()
            .unwrap();
        let text = string_to_sign("PUT", &h, &url, "xcspabc");
        assert_eq!(
            text,
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-copy-source:https://rhcos.example/rhcos.vhd\nx-ms-date:Tue, 02 Dec 2026 10:00:00 GMT\nx-ms-version:2023-11-03\n/xcspabc/images/rhcos.vhd\ncomp:list\ninclude:copy,metadata\nrestype:container"
        );
        let signer = SharedKey::new("xcspabc", &B64.encode([7u8; 64])).unwrap();
        assert!(format!("{signer:?}").contains("xcspabc") && !format!("{signer:?}").contains("key"));
    }
}
