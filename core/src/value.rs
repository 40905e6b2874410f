//! Attribute values: JSON-like data that may be unknown until apply, or marked sensitive.
//!
//! On disk (state, plan files) a value is plain JSON except for two reserved object shapes:
//! `{"$unknown": true}` for a value known only after apply (plans only, never state) and
//! `{"$sensitive": <value>}` for a secret, so that every reader can redact it.

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Number;

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Value>),
    Map(IndexMap<String, Value>),
    /// Known only after apply.
    Unknown,
    /// A secret: shown as `(sensitive value)` and never logged.
    Sensitive(Box<Value>),
}

const UNKNOWN_KEY: &str = "$unknown";
const SENSITIVE_KEY: &str = "$sensitive";

impl Value {
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    pub fn int(i: i64) -> Value {
        Value::Number(Number::from(i))
    }

    pub fn strings<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Value {
        Value::List(items.into_iter().map(|s| Value::String(s.into())).collect())
    }

    pub fn sensitive(v: Value) -> Value {
        match v {
            Value::Sensitive(_) => v,
            other => Value::Sensitive(Box::new(other)),
        }
    }

    /// True if this value or anything inside it is unknown.
    /// What a provider records of a secret it reads back from a cloud (a VPN connection's
    /// shared key): its sha256, marked sensitive, never the secret itself.
    pub fn secret_digest(secret: &str) -> Value {
        use sha2::{Digest, Sha256};
        Value::sensitive(Value::string(format!("sha256:{}", hex::encode(Sha256::digest(secret.as_bytes())))))
    }

    /// Whether `self` (wanted) holds what `recorded` holds: equal, or a secret whose digest
    /// ([`Value::secret_digest`]) is what was recorded.
    pub fn matches_recorded(&self, recorded: &Value) -> bool {
        if self == recorded {
            return true;
        }
        match (self, recorded) {
            (Value::Sensitive(want), Value::Sensitive(have)) => match (want.as_str(), have.as_str()) {
                (Some(w), Some(h)) if h.starts_with("sha256:") => Value::secret_digest(w) == *recorded,
                _ => false,
            },
            _ => false,
        }
    }

    pub fn has_unknown(&self) -> bool {
        match self {
            Value::Unknown => true,
            Value::List(l) => l.iter().any(Value::has_unknown),
            Value::Map(m) => m.values().any(Value::has_unknown),
            Value::Sensitive(v) => v.has_unknown(),
            _ => false,
        }
    }

    /// True if this value or anything inside it is sensitive.
    pub fn is_sensitive(&self) -> bool {
        match self {
            Value::Sensitive(_) => true,
            Value::List(l) => l.iter().any(Value::is_sensitive),
            Value::Map(m) => m.values().any(Value::is_sensitive),
            _ => false,
        }
    }

    /// The value with every sensitive mark removed (for providers, which need the secret itself).
    pub fn unmarked(&self) -> Value {
        match self {
            Value::Sensitive(v) => v.unmarked(),
            Value::List(l) => Value::List(l.iter().map(Value::unmarked).collect()),
            Value::Map(m) => Value::Map(m.iter().map(|(k, v)| (k.clone(), v.unmarked())).collect()),
            other => other.clone(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::Sensitive(v) => v.as_str(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            Value::Sensitive(v) => v.as_i64(),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            Value::Sensitive(v) => v.as_list(),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&IndexMap<String, Value>> {
        match self {
            Value::Map(m) => Some(m),
            Value::Sensitive(v) => v.as_map(),
            _ => None,
        }
    }

    /// The name of this value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Unknown => "unknown",
            Value::Sensitive(v) => v.type_name(),
        }
    }

    /// Converts to plain JSON, keeping the reserved shapes for unknown and sensitive values.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Number(n) => J::Number(n.clone()),
            Value::String(s) => J::String(s.clone()),
            Value::List(l) => J::Array(l.iter().map(Value::to_json).collect()),
            Value::Map(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
            Value::Unknown => J::Object([(UNKNOWN_KEY.to_string(), J::Bool(true))].into_iter().collect()),
            Value::Sensitive(v) => J::Object([(SENSITIVE_KEY.to_string(), v.to_json())].into_iter().collect()),
        }
    }

    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => Value::Number(n.clone()),
            J::String(s) => Value::String(s.clone()),
            J::Array(a) => Value::List(a.iter().map(Value::from_json).collect()),
            J::Object(o) if o.len() == 1 && o.get(UNKNOWN_KEY) == Some(&J::Bool(true)) => Value::Unknown,
            J::Object(o) if o.len() == 1 && o.contains_key(SENSITIVE_KEY) => {
                Value::sensitive(Value::from_json(&o[SENSITIVE_KEY]))
            }
            J::Object(o) => Value::Map(o.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect()),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::int(i)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Value::from_json(&serde_json::Value::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_sensitive_survive_json() {
        let v = Value::Map(
            [
                ("psk".to_string(), Value::sensitive(Value::string("s3cret_key"))),
                ("ip".to_string(), Value::Unknown),
                ("n".to_string(), Value::int(3)),
            ]
            .into_iter()
            .collect(),
        );
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(text, r#"{"psk":{"$sensitive":"s3cret_key"},"ip":{"$unknown":true},"n":3}"#);
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert!(back.is_sensitive() && back.has_unknown());
        assert!(!back.unmarked().is_sensitive());
    }
}
