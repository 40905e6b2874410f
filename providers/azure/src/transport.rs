//! HTTP beneath the SDK clients: the retries of throttled, failed and dropped exchanges, bounded
//! by the deadline of the operation they serve, and secrets kept out of azure_core's logging.
//!
//! The SDK clients are built with azure_core's own retry turned off and [`Transport`] as their
//! transport, so every request (typed calls, list pages, and our own polls of long-running
//! operations) passes through one loop that:
//! - answers 429 and 503 after the `Retry-After` (`retry-after-ms`, `x-ms-retry-after-ms`) Azure
//!   sends, and 408/500/502/504, dropped connections and hung exchanges after exponential
//!   backoff with jitter;
//! - stops retrying at the deadline of the operation ([`Budget`], set per operation with
//!   [`within`]) and hands the last answer to the caller;
//! - reads each body whole, so a connection dropped mid-body is retried like any other drop;
//! - logs every exchange at debug level: method, path, status, attempt; never headers or bodies.
//!
//! azure_core 0.21 logs every request at debug level before its transport stage, bearer token
//! and body included (its `Headers` debug output redacts every header *but* `Authorization`),
//! and the body of a connection carries its shared key. [`Seal`], the first policy of each
//! pipeline, moves both out of the request into the pipeline context; only [`Transport`] puts
//! them back, on its own copy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use azure_core::error::{Error, ErrorKind};
use azure_core::headers::{AUTHORIZATION, HeaderName, Headers};
use azure_core::{Body, BytesStream, Context, HttpClient, Policy, PolicyResult, Request, Response, StatusCode};
use rand::Rng;

use crate::config::Backoff;

/// How long one operation may keep trying, and what to call it in a timeout error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub deadline: Instant,
    pub timeout: Duration,
    pub operation: &'static str,
}

impl Budget {
    pub fn starting_now(timeout: Duration, operation: &'static str) -> Budget {
        Budget { deadline: Instant::now() + timeout, timeout, operation }
    }

    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// True if waiting `wait` more would pass the deadline.
    pub fn exceeded_after(&self, wait: Duration) -> bool {
        Instant::now() + wait > self.deadline
    }
}

tokio::task_local! {
    static BUDGET: Budget;
}

/// Runs `f` (one provider operation, on the current task) under `budget`.
pub(crate) async fn within<F: Future>(budget: Budget, f: F) -> F::Output {
    BUDGET.scope(budget, f).await
}

/// The budget of the operation running on this task; outside any, a few minutes.
pub(crate) fn budget() -> Budget {
    BUDGET.try_with(|b| *b).unwrap_or_else(|_| Budget::starting_now(Duration::from_secs(300), "request"))
}

/// Exponential backoff with jitter: between half and all of `first * 2^(attempt-1)`, at most `max`.
pub(crate) fn backoff(settings: &Backoff, attempt: u32) -> Duration {
    let exp = settings.first.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let full = exp.min(settings.max);
    full.mul_f64(rand::rng().random_range(0.5..=1.0))
}

/// The wait Azure asks for, if it does.
pub(crate) fn retry_after(headers: &Headers) -> Option<Duration> {
    let ms = |name: &'static str| {
        headers.get_optional_str(&HeaderName::from_static(name)).and_then(|v| v.trim().parse::<u64>().ok())
    };
    if let Some(ms) = ms("retry-after-ms").or_else(|| ms("x-ms-retry-after-ms")) {
        return Some(Duration::from_millis(ms));
    }
    headers
        .get_optional_str(&HeaderName::from_static("retry-after"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Statuses that mean "the same request may succeed later".
fn retryable(status: StatusCode) -> bool {
    matches!(u16::from(status), 408 | 429 | 500 | 502 | 503 | 504)
}

/// The secrets of one request while it travels through azure_core's policies.
struct Sealed {
    authorization: Option<String>,
    body: Body,
}

/// The first policy: takes the bearer token and the body out of the request (see the module docs).
#[derive(Debug)]
pub(crate) struct Seal;

#[async_trait::async_trait]
impl Policy for Seal {
    async fn send(&self, ctx: &Context, request: &mut Request, next: &[Arc<dyn Policy>]) -> PolicyResult {
        let sealed = Sealed {
            authorization: request.headers().get_optional_string(&AUTHORIZATION),
            body: request.body().clone(),
        };
        request.insert_header(AUTHORIZATION, "<sealed>");
        request.set_body(Vec::<u8>::new());
        let mut ctx = ctx.clone();
        ctx.insert(sealed);
        next[0].send(&ctx, request, &next[1..]).await
    }
}

/// The last policy: sends, and retries as the module docs say.
#[derive(Debug)]
pub(crate) struct Transport {
    http: Arc<dyn HttpClient>,
    backoff: Backoff,
}

impl Transport {
    /// Over the TLS of [`xcsp_crypto`] (Resource Manager's, which the blob service shares).
    pub fn new(backoff: Backoff) -> Result<Transport, xcsp_crypto::CryptoError> {
        Ok(Transport { http: xcsp_crypto::AzureHttp::for_peer(xcsp_crypto::Peer::AzureResourceManager)?, backoff })
    }

    /// Sends `request` until it gets an answer that is not worth retrying, or the operation's
    /// deadline is near; then returns that answer (an error status is an answer, not an `Err`).
    pub async fn execute(&self, request: &Request) -> azure_core::Result<Response> {
        let budget = budget();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let exchange = tokio::time::timeout(self.backoff.attempt_timeout, self.exchange(request)).await;
            let (wait, failure) = match exchange {
                Ok(Ok(response)) => {
                    let status = response.status();
                    tracing::debug!(
                        method = %request.method(),
                        path = request.url().path(),
                        status = u16::from(status),
                        attempt,
                        "ARM call"
                    );
                    if !retryable(status) {
                        return Ok(response);
                    }
                    let asked =
                        if matches!(u16::from(status), 429 | 503) { retry_after(response.headers()) } else { None };
                    let wait = match asked {
                        // What Azure asks for, and a little more so that callers spread out.
                        Some(d) => d + Duration::from_millis(rand::rng().random_range(0..250)),
                        None => backoff(&self.backoff, attempt),
                    };
                    if budget.exceeded_after(wait) {
                        return Ok(response);
                    }
                    (wait, format!("HTTP {}", u16::from(status)))
                }
                Ok(Err(e)) if *e.kind() == ErrorKind::Io => {
                    let wait = backoff(&self.backoff, attempt);
                    if budget.exceeded_after(wait) {
                        return Err(e);
                    }
                    (wait, format!("connection: {}", e.to_string().lines().next().unwrap_or_default()))
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    let wait = backoff(&self.backoff, attempt);
                    if budget.exceeded_after(wait) {
                        return Err(Error::with_message(ErrorKind::Io, || {
                            format!("no answer within {:?}", self.backoff.attempt_timeout)
                        }));
                    }
                    (wait, "no answer".to_string())
                }
            };
            tracing::debug!(
                method = %request.method(),
                path = request.url().path(),
                attempt,
                wait_ms = wait.as_millis() as u64,
                failure,
                "ARM call retried"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// One request and its whole answer, read into memory.
    async fn exchange(&self, request: &Request) -> azure_core::Result<Response> {
        let response = self.http.execute_request(request).await?;
        let (status, headers, body) = response.deconstruct();
        let body = body.collect().await?;
        Ok(Response::new(status, headers, Box::pin(BytesStream::new(body))))
    }
}

#[async_trait::async_trait]
impl Policy for Transport {
    async fn send(&self, ctx: &Context, request: &mut Request, _next: &[Arc<dyn Policy>]) -> PolicyResult {
        match ctx.get::<Sealed>() {
            Some(sealed) => {
                let mut unsealed = request.clone();
                match &sealed.authorization {
                    Some(a) => unsealed.insert_header(AUTHORIZATION, a.clone()),
                    None => unsealed.insert_header(AUTHORIZATION, ""),
                }
                unsealed.set_body(sealed.body.clone());
                self.execute(&unsealed).await
            }
            None => self.execute(request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_prefers_milliseconds() {
        let mut h = Headers::new();
        h.insert("retry-after", "3");
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "120");
        assert_eq!(retry_after(&h), Some(Duration::from_millis(120)));
        assert_eq!(retry_after(&Headers::new()), None);
    }

    #[test]
    fn backoff_grows_with_jitter_up_to_the_cap() {
        let b = Backoff { first: Duration::from_millis(100), max: Duration::from_secs(1), ..Backoff::default() };
        for attempt in 1..20 {
            let d = backoff(&b, attempt);
            let full = (Duration::from_millis(100) * 2u32.pow(attempt.min(16) - 1)).min(Duration::from_secs(1));
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?}");
        }
    }
}
