//! Values the spec can reference that exist only once resources do (`network.link.tunnels`,
//! `workload_identity.capz.client_id`, ...), read back from what apply recorded. With them the
//! spec is loaded again after apply, and outputs that depended on them become known.
//!
//! Which resource serves which export, and how, is said by `expand` as it makes the resource
//! ([`crate::served`], kept in [`crate::Loaded::exports`]); this module only reads the records.

use std::collections::BTreeMap;

use xcsp_core::provider::Attributes;
use xcsp_core::{Address, Value};

pub use crate::served::{Read, Served, key};

/// Every computed export that `recorded` (cloud id and attributes by address) makes known, of the
/// `exports` the spec's resources serve ([`crate::Loaded::exports`]). A list export is known when
/// every item is.
pub fn computed<'a>(
    exports: &[(Address, Served)],
    recorded: impl Fn(&Address) -> Option<(&'a str, &'a Attributes)>,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut lists: BTreeMap<String, Vec<(usize, Option<Value>)>> = BTreeMap::new();
    for (address, served) in exports.iter().cloned() {
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
