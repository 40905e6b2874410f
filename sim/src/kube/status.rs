//! Kubernetes API errors as the API server answers them: a `Status` object (`kind: Status`,
//! `status: Failure`, `reason`, `code`, `details`) with the matching HTTP status.

use super::schema::Cause;
use axum::http::StatusCode;
use serde_json::{Value, json};

/// An error answer: HTTP status, `reason`, message and optional details.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct KubeError {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl KubeError {
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> KubeError {
        KubeError { code, reason, message: message.into(), details: None }
    }

    pub fn with_details(mut self, details: Value) -> KubeError {
        self.details = Some(details);
        self
    }

    /// 403 Forbidden, as an admission webhook's plain denial is relayed.
    pub fn forbidden(message: &str) -> KubeError {
        KubeError::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    pub fn bad_request(message: impl Into<String>) -> KubeError {
        KubeError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn unauthorized() -> KubeError {
        KubeError::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// `azureclusters.infrastructure.cluster.x-k8s.io "name" not found` (`resource` is plural.group).
    pub fn not_found(resource: &str, name: &str) -> KubeError {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        KubeError::new(StatusCode::NOT_FOUND, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    pub fn already_exists(resource: &str, name: &str) -> KubeError {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        KubeError::new(StatusCode::CONFLICT, "AlreadyExists", format!("{resource} \"{name}\" already exists"))
            .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// The optimistic-concurrency refusal of a write naming a stale `resourceVersion`.
    pub fn modified(resource: &str, name: &str) -> KubeError {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        KubeError::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply \
                 your changes to the latest version and try again"
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 422 Invalid: `<Kind>.<group> "name" is invalid: ...` with one cause per problem.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: &[Cause]) -> KubeError {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let list: Vec<String> = causes.iter().map(Cause::to_string).collect();
        let joined = if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
        KubeError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {joined}"),
        )
        .with_details(json!({
            "name": name, "group": group, "kind": kind,
            "causes": causes.iter().map(Cause::to_json).collect::<Vec<_>>(),
        }))
    }

    /// The answer's body.
    pub fn body(&self) -> Value {
        let mut v = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code.as_u16(),
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

/// A `Status` reporting success (the answer to a DELETE of a built-in object that is gone at once).
pub fn success(kind: &str, group: &str, name: &str, uid: &Value) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "group": group, "kind": kind, "uid": uid},
    })
}
