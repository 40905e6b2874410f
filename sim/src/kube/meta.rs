//! ObjectMeta rules the API server applies to every object (apimachinery `ValidateObjectMeta`):
//! label keys and values, annotation keys and the annotations' total size, each problem a
//! [`Cause`] worded as apimachinery v0.31 words it. The same key and value rules serve label
//! selectors ([`super::selector`]). Object names are checked in [`super::schema`].

use super::schema::{Cause, CauseReason};
use serde_json::Value;

/// The most bytes all annotation keys and values of one object may take together (256 KiB).
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

const QUALIFIED_NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_REGEX: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
                               or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_REGEX: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
                             '.', and must start and end with an alphanumeric character";

/// apimachinery's wording of a pattern failure: the message, examples, then the pattern.
fn regex_error(msg: &str, pattern: &str, examples: &[&str]) -> String {
    let shown: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    if shown.is_empty() {
        format!("{msg} (regex used for validation is '{pattern}')")
    } else {
        // Examples are joined with " or " after their trailing ", " (hence the double space).
        format!("{msg} (e.g. {}regex used for validation is '{pattern}')", shown.join(" or "))
    }
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// The problems of a DNS-1123 subdomain (empty when there are none).
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 253 {
        out.push(max_len_error(253));
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !s.split('.').all(label_ok) {
        out.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_REGEX, &["example.com"]));
    }
    out
}

/// The problems of a qualified name (`[prefix/]name`, a label key), in apimachinery's order.
pub fn qualified_name_errors(s: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let parts: Vec<&str> = s.split('/').collect();
    let mut out = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".to_string());
            } else {
                out.extend(dns1123_subdomain_errors(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_REGEX, &examples)
            )];
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        out.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_name_part(name) {
        out.push(format!("name part {}", regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_REGEX, &examples)));
    }
    out
}

/// The problems of a label value (empty when there are none).
pub fn label_value_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push(max_len_error(63));
    }
    if !s.is_empty() && !is_qualified_name_part(s) {
        out.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_REGEX, &["MyValue", "my_value", "12345"]));
    }
    out
}

/// A string as Go's `%q` prints it (JSON's escaping, which agrees for the printable ASCII of keys).
pub fn go_quote(s: &str) -> String {
    Value::from(s).to_string()
}

fn invalid(field: &str, bad: &str, msg: String) -> Cause {
    Cause {
        reason: CauseReason::FieldValueInvalid,
        field: field.into(),
        message: format!("Invalid value: {}: {msg}", go_quote(bad)),
    }
}

/// `metadata.labels`: one cause per problem of each key and each value. Values that are not
/// strings are left to the caller.
pub fn label_causes(labels: &Value, field: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    for (k, v) in labels.as_object().into_iter().flatten() {
        out.extend(qualified_name_errors(k).into_iter().map(|m| invalid(field, k, m)));
        if let Some(v) = v.as_str() {
            out.extend(label_value_errors(v).into_iter().map(|m| invalid(field, v, m)));
        }
    }
    out
}

/// `metadata.annotations`: keys are qualified names (case does not matter), and keys and values
/// together take at most [`ANNOTATIONS_MAX_BYTES`].
pub fn annotation_causes(annotations: &Value, field: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut size = 0usize;
    for (k, v) in annotations.as_object().into_iter().flatten() {
        out.extend(qualified_name_errors(&k.to_lowercase()).into_iter().map(|m| invalid(field, k, m)));
        size += k.len() + v.as_str().map_or(0, str::len);
    }
    if size > ANNOTATIONS_MAX_BYTES {
        out.push(Cause {
            reason: CauseReason::FieldValueTooLong,
            field: field.into(),
            message: format!("Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_follow_apimachinery() {
        for ok in ["a", "xcsp.io/stack", "A-b_c.D", "node.openshift.io/cloud-provider", &"k".repeat(63)] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}");
        }
        assert_eq!(qualified_name_errors("-a").len(), 1);
        assert_eq!(qualified_name_errors("/a"), ["prefix part must be non-empty"]);
        assert_eq!(
            qualified_name_errors("a/"),
            ["name part must be non-empty", qualified_name_errors("-")[0].as_str()]
        );
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(qualified_name_errors("Xcsp.io/a")[0].starts_with("prefix part a lowercase RFC 1123 subdomain"));
        assert_eq!(qualified_name_errors(&"k".repeat(64)), ["name part must be no more than 63 characters"]);
        assert!(label_value_errors("").is_empty() && label_value_errors("a.b_c-D").is_empty());
        assert_eq!(label_value_errors("a b").len(), 1);
        assert_eq!(label_value_errors(&format!("-{}", "v".repeat(63))).len(), 2);
        assert!(
            label_value_errors("_")[0].ends_with(
                "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
                 '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ),
            "{:?}",
            label_value_errors("_")
        );
    }
}
