//! What a resource serves of the spec's computed exports (`network.link.tunnels`,
//! `workload_identity.capz.client_id`, ...), said by `expand` as it makes the resource and read by
//! `exports` from what apply recorded. A leaf: it imports neither.

use xcsp_core::Value;
use xcsp_core::provider::Attributes;

/// Key of one computed export: `kind.name.attribute` (`kind.attribute` for unlabelled blocks).
pub fn key(kind: &str, name: Option<&str>, attribute: &str) -> String {
    match name {
        Some(n) => format!("{kind}.{n}.{attribute}"),
        None => format!("{kind}.{attribute}"),
    }
}

/// How a value is read from what apply recorded of a resource.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// Its cloud id.
    Id,
    /// One of its attributes.
    Attribute(String),
    /// A map of these fields, in order.
    Map(Vec<(&'static str, Read)>),
}

impl Read {
    /// The value, if the record has all of it.
    pub(crate) fn from(&self, id: &str, attrs: &Attributes) -> Option<Value> {
        match self {
            Read::Id => Some(Value::string(id)),
            Read::Attribute(a) => attrs.get(a).cloned(),
            Read::Map(fields) => fields
                .iter()
                .map(|(k, r)| Some((k.to_string(), r.from(id, attrs)?)))
                .collect::<Option<_>>()
                .map(Value::Map),
        }
    }
}

/// What one resource serves of a computed export.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// The export's [`key`].
    pub key: String,
    /// For a list export, the place of this resource's item; `None` when the value is its alone.
    pub item: Option<usize>,
    pub read: Read,
}
