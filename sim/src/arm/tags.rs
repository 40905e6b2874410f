//! ARM's tag rules, applied to every write that carries `tags` (resource groups and resources,
//! PUT and PATCH): at most 50 tags, names without `< > % & \ ? /` or control characters, names of
//! at most 512 and values of at most 256 characters, and no names starting with the prefixes
//! Azure reserves (`microsoft`, `azure`, `windows`). Sources and codes: the rule table in
//! `sim/README.md` ("Tag rules").

use super::error::ArmError;
use super::store::Store;
use super::{Ctx, Reply};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

/// Tags per resource or resource group.
pub const MAX_TAGS: usize = 50;
/// Characters in a tag name.
pub const MAX_NAME: usize = 512;
/// Characters in a tag value.
pub const MAX_VALUE: usize = 256;
/// Characters ARM refuses in a tag name (besides control characters).
const RESERVED_CHARS: &[char] = &['<', '>', '%', '&', '\\', '?', '/'];
/// Name prefixes Azure keeps for its own tags (compared case-insensitively).
const RESERVED_PREFIXES: &[&str] = &["microsoft", "azure", "windows"];

/// Checks the `tags` of a request body (absent or null: nothing to check). The body's JSON shape
/// (an object of strings) is checked before, by `validate`.
pub fn check(body: &Value) -> Result<(), ArmError> {
    let Some(tags) = body.get("tags").and_then(Value::as_object) else { return Ok(()) };
    if tags.len() > MAX_TAGS {
        return Err(ArmError::bad_request(
            "InvalidTags",
            format!(
                "Too many tags specified. Requested tag count - '{}'. Maximum number of tags allowed - '{MAX_TAGS}'.",
                tags.len()
            ),
        ));
    }
    let bad_chars: Vec<&str> = tags
        .keys()
        .filter(|k| k.chars().any(|c| RESERVED_CHARS.contains(&c) || c.is_control()))
        .map(String::as_str)
        .collect();
    if !bad_chars.is_empty() {
        return Err(ArmError::bad_request(
            "InvalidTagNameCharacters",
            format!(
                "The tag names '{}' have reserved characters '<,>,%,&,\\,?,/' or control characters.",
                bad_chars.join(",")
            ),
        ));
    }
    for (name, value) in tags {
        if name.trim().is_empty() {
            return Err(ArmError::bad_request(
                "InvalidTagName",
                "The tag name must be non-null, non-empty and non-whitespace only.",
            ));
        }
        if name.chars().count() > MAX_NAME {
            return Err(ArmError::bad_request(
                "InvalidTagName",
                format!(
                    "Tag key too large. The tag name '{name}' exceeds the maximum length of '{MAX_NAME}' characters."
                ),
            ));
        }
        let lower = name.to_lowercase();
        if let Some(prefix) = RESERVED_PREFIXES.iter().find(|p| lower.starts_with(*p)) {
            return Err(ArmError::bad_request(
                "InvalidTagName",
                format!("The tag name '{name}' starts with '{prefix}', a prefix reserved for Azure's own tags."),
            ));
        }
        let value = value.as_str().unwrap_or_default();
        if value.chars().count() > MAX_VALUE {
            return Err(ArmError::bad_request(
                "InvalidTagValueLength",
                format!(
                    "Tag value too large. The value of tag '{name}' exceeds the maximum length of '{MAX_VALUE}' characters."
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(tags: Value) -> String {
        check(&json!({ "tags": tags })).err().map(|e| e.code).unwrap_or_default()
    }

    #[test]
    fn names_values_and_counts() {
        assert_eq!(code(json!({"xcsp-stack": "il5", "kubernetes.io_cluster.x": "owned"})), "");
        assert_eq!(code(json!({"xcsp.io/stack": "il5"})), "InvalidTagNameCharacters");
        assert_eq!(code(json!({"a%b": ""})), "InvalidTagNameCharacters");
        assert_eq!(code(json!({"tab\there": ""})), "InvalidTagNameCharacters");
        assert_eq!(code(json!({"Microsoft.owner": "x"})), "InvalidTagName");
        assert_eq!(code(json!({"AZUREthing": "x"})), "InvalidTagName");
        assert_eq!(code(json!({"my-azure": "x"})), "");
        assert_eq!(code(json!({ "n".repeat(512): "x" })), "");
        assert_eq!(code(json!({ "n".repeat(513): "x" })), "InvalidTagName");
        assert_eq!(code(json!({"k": "v".repeat(256)})), "");
        assert_eq!(code(json!({"k": "v".repeat(257)})), "InvalidTagValueLength");
        let fifty: serde_json::Map<String, Value> = (0..50).map(|i| (format!("t{i}"), json!("v"))).collect();
        assert_eq!(code(Value::Object(fifty.clone())), "");
        let mut fifty_one = fifty;
        fifty_one.insert("t50".into(), json!("v"));
        assert_eq!(code(Value::Object(fifty_one)), "InvalidTags");
        assert!(check(&json!({})).is_ok() && check(&json!({"tags": null})).is_ok());
    }
}

/// The tags of the resource at `scope` as their own resource (`resources.json` 2021-04-01,
/// `Tags_GetAtScope`, `Tags_CreateOrUpdateAtScope`, `Tags_UpdateAtScope`; CAPZ's
/// `azure/services/tags` reads them on every reconcile of a VM and merges its own):
/// `GET` answers `{id, name: "default", type, properties: {tags}}`; `PUT` replaces them; `PATCH`
/// takes `operation` `Merge` (add or overwrite), `Replace` or `Delete` (remove the names given,
/// those whose value is given only when it matches) with `properties.tags`.
pub fn at_scope(store: &mut Store, ctx: &Ctx, scope: &str) -> Result<Reply, ArmError> {
    super::check_api_version(ctx, super::kinds::RESOURCES_API, "tags")?;
    let Some(r) = store.get(scope) else {
        return Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            format!("The Resource '{scope}' was not found."),
        ));
    };
    let current = r.body["tags"].as_object().cloned().unwrap_or_default();
    let id = format!("{}/providers/Microsoft.Resources/tags/default", r.id);
    let tags = match *ctx.method {
        Method::GET => current,
        Method::PUT | Method::PATCH => {
            let body = ctx.json()?;
            let given = body["properties"]["tags"].as_object().cloned().unwrap_or_default();
            check(&json!({"tags": given}))?;
            let operation =
                if *ctx.method == Method::PUT { "Replace" } else { body["operation"].as_str().unwrap_or_default() };
            let mut next = current;
            match operation {
                "Replace" => next = given,
                "Merge" => next.extend(given),
                "Delete" => {
                    for (k, v) in given {
                        let matches = v.as_str().is_none_or(str::is_empty) || next.get(&k) == Some(&v);
                        if matches {
                            next.remove(&k);
                        }
                    }
                }
                other => {
                    return Err(ArmError::invalid_content(format!(
                        "The value '{other}' of 'operation' is not valid: it must be 'Merge', 'Replace' or 'Delete'."
                    )));
                }
            }
            check(&json!({"tags": next}))?;
            if let Some(r) = store.get_mut(scope) {
                r.body["tags"] = Value::Object(next.clone());
                r.changed_at = ctx.now;
            }
            next
        }
        _ => {
            return Err(ArmError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "The requested resource does not support the method.",
            ));
        }
    };
    Ok(Reply::json(
        StatusCode::OK,
        json!({"id": id, "name": "default", "type": "Microsoft.Resources/tags", "properties": {"tags": tags}}),
    ))
}
