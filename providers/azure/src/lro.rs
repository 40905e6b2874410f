//! Long-running operations: what an answer to a write or a delete says to wait for, and the
//! waiting itself, with progress.
//!
//! azure_mgmt 0.21 polls creates only through `Azure-AsyncOperation`, reports nothing while it
//! waits and drops the operation's error ("Long running operation failed"); its deletes do not
//! poll at all. So every write and delete here is sent with `send()` and its operation followed
//! to the end by [`Session::wait`]: the status resource of `Azure-AsyncOperation`, else the
//! `Location` that answers 202 until done. An answer with neither is complete, as azure_mgmt
//! takes it too.

use std::sync::Arc;
use std::time::Duration;

use azure_core::auth::TokenCredential;
use azure_core::headers::{HeaderName, Headers, LOCATION};
use azure_core::{Method, Request, Url};
use serde_json::Value as Json;
use xcsp_core::Address;
use xcsp_core::provider::{Progress, ProviderError};

use crate::transport::{self, Transport};

/// What to poll until an operation ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Wait {
    /// A status resource answering `{"status": "InProgress" | "Succeeded" | "Failed" | "Canceled"}`.
    AsyncOperation(Url),
    /// A URL answering 202 while the operation runs, then 200 or 204 (or its error).
    Location(Url),
}

impl Wait {
    /// The operation an answer started, if it started one.
    pub fn of(status: u16, headers: &Headers) -> Option<Wait> {
        let header = |name: &'static str| {
            headers.get_optional_str(&HeaderName::from_static(name)).and_then(|v| Url::parse(v).ok())
        };
        if let Some(url) = header("azure-asyncoperation") {
            return Some(Wait::AsyncOperation(url));
        }
        match (status, headers.get_optional_str(&LOCATION).and_then(|v| Url::parse(v).ok())) {
            (202, Some(url)) => Some(Wait::Location(url)),
            _ => None,
        }
    }

    fn url(&self) -> &Url {
        match self {
            Wait::AsyncOperation(u) | Wait::Location(u) => u,
        }
    }
}

/// Resource Manager as the provider reaches it outside the typed clients: its address, the
/// token for it, and the same transport the clients use.
#[derive(Debug)]
pub(crate) struct Session {
    pub endpoint: Url,
    pub scope: String,
    pub credential: Arc<dyn TokenCredential>,
    pub transport: Arc<Transport>,
    pub poll_interval: Duration,
}

impl Session {
    /// Polls `wait` until the operation succeeds, fails, or the operation's deadline passes.
    /// `activity` says what Azure is doing, for the progress report.
    pub async fn wait(
        &self,
        wait: &Wait,
        address: &Address,
        progress: &dyn Progress,
        activity: &str,
    ) -> Result<(), ProviderError> {
        let failed = |code: &str, message: String| ProviderError::Failed {
            address: address.to_string(),
            code: code.to_string(),
            message,
        };
        let url = wait.url();
        // The poll carries our token: only ever to the Resource Manager we talk to.
        if url.host_str() != self.endpoint.host_str()
            || url.port_or_known_default() != self.endpoint.port_or_known_default()
        {
            return Err(failed("UntrustedOperationUrl", format!("Azure asked to poll {}, not {}", url, self.endpoint)));
        }
        progress.waiting(address, activity);
        let mut reported = String::from("InProgress");
        loop {
            let budget = transport::budget();
            let token = self
                .credential
                .get_token(&[&self.scope])
                .await
                .map_err(|e| failed("Credential", e.to_string().lines().next().unwrap_or_default().to_string()))?;
            let mut request = Request::new(url.clone(), Method::Get);
            request.insert_header(azure_core::headers::AUTHORIZATION, format!("Bearer {}", token.token.secret()));
            let response = self.transport.execute(&request).await;
            let mut interval = self.poll_interval;
            match response {
                Ok(r) => {
                    let status = u16::from(r.status());
                    if let Some(asked) = transport::retry_after(r.headers()) {
                        interval = asked;
                    }
                    let body = r.into_body().collect().await.ok();
                    let json: Json = body.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Json::Null);
                    let error = || {
                        let e = if json["error"].is_object() { &json["error"] } else { &json };
                        (
                            e["code"].as_str().unwrap_or("OperationFailed").to_string(),
                            e["message"].as_str().unwrap_or("the operation failed").to_string(),
                        )
                    };
                    match (wait, status) {
                        // A status document without a status: 202 means "not yet", any other
                        // success means done (never poll forever on an answer we cannot read).
                        (Wait::AsyncOperation(_), 200..=299) => match json["status"]
                            .as_str()
                            .unwrap_or(if status == 202 { "InProgress" } else { "Succeeded" })
                        {
                            "Succeeded" => return Ok(()),
                            "Failed" | "Canceled" => {
                                let (code, message) = error();
                                return Err(failed(&code, message));
                            }
                            other => {
                                if other != reported {
                                    reported = other.to_string();
                                    progress.waiting(address, &format!("{activity} ({other})"));
                                }
                            }
                        },
                        (Wait::Location(_), 202) => {}
                        (Wait::Location(_), 200..=299) => return Ok(()),
                        // The transport already retried what is worth retrying.
                        (_, _) => {
                            let (code, message) = error();
                            return Err(failed(
                                &code,
                                format!("polling the operation answered HTTP {status}: {message}"),
                            ));
                        }
                    }
                }
                // A connection that kept failing until the deadline.
                Err(e) => {
                    if budget.exceeded_after(interval) {
                        return Err(failed("Connection", e.to_string().lines().next().unwrap_or_default().to_string()));
                    }
                }
            }
            if budget.exceeded_after(interval) {
                return Err(ProviderError::Timeout {
                    address: address.to_string(),
                    operation: budget.operation,
                    timeout: budget.timeout,
                });
            }
            tokio::time::sleep(interval).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_async_operation_header_wins_and_location_needs_a_202() {
        let mut h = Headers::new();
        h.insert("location", "https://management.azure.com/op/1");
        assert_eq!(Wait::of(200, &h), None);
        assert_eq!(Wait::of(202, &h), Some(Wait::Location(Url::parse("https://management.azure.com/op/1").unwrap())));
        h.insert("azure-asyncoperation", "https://management.azure.com/op/2");
        assert_eq!(
            Wait::of(201, &h),
            Some(Wait::AsyncOperation(Url::parse("https://management.azure.com/op/2").unwrap()))
        );
    }
}
