//! What plan and apply know of key rotation, apart from `rotate-keys` itself: which generated keys
//! are due (`psk_rotation_days`), and that a rotation is under way. `run` and `rotate` both use
//! it; neither imports the other's module for it.

use std::collections::BTreeMap;

use time::format_description::well_known::Rfc3339;
use xcsp_core::{Address, ResourceType};
use xcsp_plans::Loaded;

use crate::Stack;

/// Said by plan and apply while a rotation is under way: they finish what a stopped rotation left
/// half-done (a key not yet given to its tunnel), but only `rotate-keys` goes on to the next key.
pub fn note_under_way(s: &Stack, state: &xcsp_state::State) {
    if let Some(r) = state.rotation.as_ref().filter(|r| !r.keys.is_empty()) {
        s.say.note(format_args!(
            "a key rotation started {} has {} keys left ({}): `xcsp rotate-keys` resumes it.",
            r.started,
            r.keys.len(),
            r.keys.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
}

/// When state records `key` was made.
pub(crate) fn created(state: &xcsp_state::State, key: &Address) -> Option<String> {
    state.resources.get(key)?.attributes.get("created")?.as_str().map(String::from)
}

/// Per link with `psk_rotation_days`, its oldest generated key older than that, with the reason
/// the plan shows: one key per link and run, so a run takes one tunnel down at a time (`xcsp watch
/// --auto-approve` or the next apply rotates the next).
pub fn overdue(l: &Loaded, state: &xcsp_state::State) -> BTreeMap<Address, String> {
    let now = time::OffsetDateTime::now_utc();
    let mut out = BTreeMap::new();
    for n in &l.model.networks {
        let Some(days) = &n.psk_rotation_days else { continue };
        let mut due: Vec<(time::OffsetDateTime, &Address)> = state
            .resources
            .iter()
            .filter(|(a, r)| a.rtype == ResourceType::PresharedKey && a.name == n.name.value && r.id.is_some())
            .filter_map(|(a, _)| {
                let made = time::OffsetDateTime::parse(&created(state, a)?, &Rfc3339).ok()?;
                ((now - made).whole_days() >= days.value).then_some((made, a))
            })
            .collect();
        due.sort();
        if let Some((made, a)) = due.first() {
            let more = due.len() - 1;
            let later =
                if more > 0 { format!("; {more} more of this link are due, one per run") } else { String::new() };
            let why = format!("older than psk_rotation_days = {} (made {}){later}", days.value, made.date());
            out.insert((*a).clone(), why);
        }
    }
    out
}
