//! ARM error responses: `{"error": {"code", "message"}}` with the HTTP status ARM uses for each code.

use axum::http::StatusCode;
use serde_json::{Value, json};

/// An error answered to an ARM caller.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ArmError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// Extra headers (e.g. `Retry-After` on 429).
    pub headers: Vec<(String, String)>,
    /// Inner errors (`error.details[]`: code, message), as ARM nests them under a generic code.
    pub details: Vec<(String, String)>,
}

impl ArmError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ArmError {
        ArmError { status, code: code.to_string(), message: message.into(), headers: Vec::new(), details: Vec::new() }
    }
    pub fn bad_request(code: &str, message: impl Into<String>) -> ArmError {
        ArmError::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn invalid_content(message: impl Into<String>) -> ArmError {
        ArmError::bad_request("InvalidRequestContent", message)
    }
    pub fn conflict(code: &str, message: impl Into<String>) -> ArmError {
        ArmError::new(StatusCode::CONFLICT, code, message)
    }
    pub fn not_found(arm_type: &str, name: &str, rg: &str) -> ArmError {
        ArmError::new(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            format!(
                "The Resource '{arm_type}/{name}' under resource group '{rg}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
            ),
        )
    }
    pub fn rg_not_found(rg: &str) -> ArmError {
        ArmError::new(
            StatusCode::NOT_FOUND,
            "ResourceGroupNotFound",
            format!("Resource group '{rg}' could not be found."),
        )
    }
    pub fn parent_not_found(parent: &str) -> ArmError {
        ArmError::new(
            StatusCode::NOT_FOUND,
            "ParentResourceNotFound",
            format!("Can not perform requested operation on nested resource. Parent resource '{parent}' not found."),
        )
    }
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> ArmError {
        self.headers.push((name.to_string(), value.into()));
        self
    }
    pub fn with_detail(mut self, code: &str, message: impl Into<String>) -> ArmError {
        self.details.push((code.to_string(), message.into()));
        self
    }
    pub fn body(&self) -> Value {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if !self.details.is_empty() {
            body["error"]["details"] =
                self.details.iter().map(|(code, message)| json!({"code": code, "message": message})).collect();
        }
        body
    }
}
