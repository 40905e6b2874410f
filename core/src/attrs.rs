//! Reading a resource's attributes as a provider needs them: the values themselves (sensitive
//! marks removed, since a provider sends the secret), and one error for an attribute the engine
//! should have filled in and did not.
//!
//! Every provider reads the plan's attributes through a [`Reader`]; what it does with an absent
//! attribute (a default, its own error) stays with the provider.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::address::Address;
use crate::provider::{Attributes, ProviderError};
use crate::value::Value;

/// The attributes of the resource at `address`.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    pub address: &'a Address,
    pub attrs: &'a Attributes,
}

impl<'a> Reader<'a> {
    pub fn new(address: &'a Address, attrs: &'a Attributes) -> Reader<'a> {
        Reader { address, attrs }
    }

    /// The error for an attribute that is not there (or not known yet): `MissingAttribute`.
    pub fn missing(&self, key: &str) -> ProviderError {
        ProviderError::Failed {
            address: self.address.to_string(),
            code: "MissingAttribute".into(),
            message: format!("`{key}` is not known; the resource that produces it has not been created"),
        }
    }

    /// A string the resource cannot do without.
    pub fn str(&self, key: &str) -> Result<String, ProviderError> {
        self.opt_str(key).ok_or_else(|| self.missing(key))
    }

    /// A string, if there is one (a secret's text unmarked).
    pub fn opt_str(&self, key: &str) -> Option<String> {
        self.attrs.get(key).map(Value::unmarked).and_then(|v| v.as_str().map(String::from))
    }

    /// A string, empty when there is none.
    pub fn str_or_empty(&self, key: &str) -> String {
        self.opt_str(key).unwrap_or_default()
    }

    /// An integer the resource cannot do without.
    pub fn int(&self, key: &str) -> Result<i64, ProviderError> {
        self.opt_int(key).ok_or_else(|| self.missing(key))
    }

    /// An integer, if there is one.
    pub fn opt_int(&self, key: &str) -> Option<i64> {
        self.attrs.get(key).and_then(Value::as_i64)
    }

    /// True only when the attribute is `true`.
    pub fn bool(&self, key: &str) -> bool {
        matches!(self.attrs.get(key), Some(Value::Bool(true)))
    }

    /// A list's strings (numbers as their text; anything else left out), empty when there is no list.
    pub fn strings(&self, key: &str) -> Vec<String> {
        match self.attrs.get(key).map(Value::unmarked) {
            Some(Value::List(l)) => l
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A map's string values (tags), empty when there is no map.
    pub fn string_map(&self, key: &str) -> BTreeMap<String, String> {
        match self.attrs.get(key).map(Value::unmarked) {
            Some(Value::Map(m)) => m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect(),
            _ => BTreeMap::new(),
        }
    }

    /// A value as JSON, when it and everything inside it is known.
    pub fn known(&self, key: &str) -> Option<Json> {
        match self.attrs.get(key) {
            Some(v) if !v.has_unknown() => Some(v.unmarked().to_json()),
            _ => None,
        }
    }

    /// A value as JSON that the resource cannot do without.
    pub fn json(&self, key: &str) -> Result<Json, ProviderError> {
        self.known(key).ok_or_else(|| self.missing(key))
    }

    /// Every secret among the attributes, to be scrubbed from error messages.
    pub fn secrets(&self) -> Vec<String> {
        fn walk(v: &Value, inside: bool, out: &mut Vec<String>) {
            match v {
                Value::Sensitive(v) => walk(v, true, out),
                Value::String(s) if inside && !s.is_empty() => out.push(s.clone()),
                Value::List(l) => l.iter().for_each(|v| walk(v, inside, out)),
                Value::Map(m) => m.values().for_each(|v| walk(v, inside, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        self.attrs.values().for_each(|v| walk(v, false, &mut out));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResourceType;
    use indexmap::IndexMap;
    use serde_json::json;

    fn attrs() -> Attributes {
        let mut a = Attributes::new();
        a.insert("name".into(), Value::string("link"));
        a.insert("key".into(), Value::sensitive(Value::string("s3cret")));
        a.insert("asn".into(), Value::int(65000));
        a.insert("on".into(), Value::Bool(true));
        a.insert("off".into(), Value::Bool(false));
        a.insert("word".into(), Value::string("true"));
        a.insert("groups".into(), Value::List(vec![Value::string("a"), Value::int(20), Value::Null]));
        a.insert("secret_list".into(), Value::sensitive(Value::strings(["x"])));
        let tags: IndexMap<String, Value> =
            [("team".to_string(), Value::string("net")), ("n".to_string(), Value::int(1))].into_iter().collect();
        a.insert("tags".into(), Value::Map(tags));
        a.insert("later".into(), Value::Unknown);
        a.insert("part".into(), Value::List(vec![Value::string("x"), Value::Unknown]));
        a
    }

    fn address() -> Address {
        Address::new(ResourceType::AwsVpnGateway, "link")
    }

    #[test]
    fn strings_and_ints_read_through_sensitive_marks() {
        let (addr, attrs) = (address(), attrs());
        let r = Reader::new(&addr, &attrs);
        assert_eq!(r.str("name"), Ok("link".into()));
        assert_eq!(r.opt_str("key").as_deref(), Some("s3cret"));
        assert_eq!(r.opt_str("asn"), None, "a number is not a string");
        assert_eq!(r.str_or_empty("nothing"), "");
        assert_eq!(r.int("asn"), Ok(65000));
        assert_eq!(r.opt_int("name"), None);
    }

    #[test]
    fn a_missing_attribute_is_one_error() {
        let (addr, attrs) = (address(), attrs());
        let r = Reader::new(&addr, &attrs);
        let want = ProviderError::Failed {
            address: "aws_vpn_gateway.link".into(),
            code: "MissingAttribute".into(),
            message: "`nothing` is not known; the resource that produces it has not been created".into(),
        };
        assert_eq!(r.str("nothing"), Err(want.clone()));
        assert_eq!(r.int("nothing").unwrap_err().to_string(), want.to_string());
        assert_eq!(r.json("later"), Err(r.missing("later")));
        assert_eq!(r.json("part"), Err(r.missing("part")), "unknown inside a list");
    }

    #[test]
    fn bool_is_true_only_for_true() {
        let (addr, attrs) = (address(), attrs());
        let r = Reader::new(&addr, &attrs);
        assert!(r.bool("on"));
        assert!(!r.bool("off"));
        assert!(!r.bool("word"));
        assert!(!r.bool("nothing"));
    }

    #[test]
    fn lists_maps_and_json() {
        let (addr, attrs) = (address(), attrs());
        let r = Reader::new(&addr, &attrs);
        assert_eq!(r.strings("groups"), ["a", "20"]);
        assert_eq!(r.strings("secret_list"), ["x"]);
        assert!(r.strings("name").is_empty());
        assert_eq!(r.string_map("tags"), BTreeMap::from([("team".to_string(), "net".to_string())]));
        assert!(r.string_map("nothing").is_empty());
        assert_eq!(r.json("key"), Ok(json!("s3cret")), "unmarked");
        assert_eq!(r.known("groups"), Some(json!(["a", 20, null])));
    }

    #[test]
    fn secrets_are_the_sensitive_strings() {
        let (addr, attrs) = (address(), attrs());
        assert_eq!(Reader::new(&addr, &attrs).secrets(), ["s3cret", "x"]);
    }
}
