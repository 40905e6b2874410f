//! Values the spec can reference that exist only once resources do (`network.link.tunnels`,
//! `workload_identity.capz.client_id`, ...), read back from what apply recorded. With them the
//! spec is loaded again after apply, and outputs that depended on them become known.
//!
//! Which resource serves which export, and how, is said by `expand` as it makes the resource
//! ([`crate::expand::expanded`]); this module only reads the records.

use std::collections::BTreeMap;

use xcsp_core::provider::Attributes;
use xcsp_core::{Address, Value};

use crate::validate::Model;

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
    fn from(&self, id: &str, attrs: &Attributes) -> Option<Value> {
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

/// Every computed export that `recorded` (cloud id and attributes by address) makes known. A list
/// export is known when every item is.
pub fn computed<'a>(
    model: &Model,
    recorded: impl Fn(&Address) -> Option<(&'a str, &'a Attributes)>,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut lists: BTreeMap<String, Vec<(usize, Option<Value>)>> = BTreeMap::new();
    for (address, served) in crate::expand::expanded(model).exports {
        let value = recorded(&address).and_then(|(id, attrs)| served.read.from(id, attrs));
        match served.item {
            None => {
                if let Some(v) = value {
                    out.insert(served.key, v);
                }
            }
            Some(i) => lists.entry(served.key).or_default().push((i, value)),
        }
    }
    for (key, mut items) in lists {
        items.sort_by_key(|(i, _)| *i);
        if let Some(list) = items.into_iter().map(|(_, v)| v).collect::<Option<Vec<Value>>>() {
            out.insert(key, Value::List(list));
        }
    }
    out
}
