//! Refresh: reads what the clouds hold for the stack, in bulk (one listing per resource type),
//! and brings state up to date with it.
//!
//! - A recorded resource is found by the id state records (providers that can read by id), and
//!   takes the attributes its cloud reports (drift, tags included, then shows in the plan).
//! - A recorded resource its cloud no longer has is dropped (the plan creates it again).
//! - A resource carrying the stack's tags that state does not know — left by an apply that died
//!   between the cloud's answer and the state write — is adopted under its address, so the next
//!   step updates it instead of creating a twin. Which ones are adopted is the caller's choice:
//!   apply adopts everything of its stack; destroy without `--sweep` only what state expected.

use std::collections::BTreeSet;

use futures::future::join_all;
use xcsp_core::provider::{Observed, ProviderError};
use xcsp_core::{Address, ProviderKind, ResourceType};
use xcsp_state::{ResourceState, State};

use crate::events::{Event, Events};
use crate::walk::Providers;

/// Which unknown tagged resources to take into state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adopt {
    /// Every resource tagged with the stack.
    All,
    /// Only addresses state already names (as a resource or an intent).
    Known,
}

#[derive(Debug, Default)]
pub struct Refreshed {
    pub adopted: Vec<Address>,
    pub vanished: Vec<Address>,
    /// Providers that were not configured, so their recorded resources were taken as they are.
    pub not_refreshed: Vec<ProviderKind>,
}

/// Whether refresh reads this type: one of a configured cloud provider (what lives only in state
/// is never read back).
fn readable(providers: &Providers, t: ResourceType) -> bool {
    t.provider() != ProviderKind::Local && providers.get(t.provider()).is_some()
}

/// Reads every resource of the stack and updates `state` (in memory; the caller saves).
pub async fn refresh(
    providers: &Providers,
    stack: &str,
    state: &mut State,
    adopt: Adopt,
    events: &Events,
) -> Result<Refreshed, ProviderError> {
    refresh_only(providers, stack, state, ResourceType::ALL, adopt, events).await
}

/// [`refresh`] of the resources of `types` alone (those of a configured provider): what a
/// caller polling a few of them needs (`xcsp rotate-keys` waiting for tunnels), without reading
/// the rest of the stack each time. Only records of the types read can vanish.
pub async fn refresh_only(
    providers: &Providers,
    stack: &str,
    state: &mut State,
    types: &[ResourceType],
    adopt: Adopt,
    events: &Events,
) -> Result<Refreshed, ProviderError> {
    let types: Vec<ResourceType> = types.iter().copied().filter(|t| readable(providers, *t)).collect();
    // Identity by id first: every recorded resource is looked up by the id state holds.
    let known: Vec<Observed> = state
        .resources
        .iter()
        .filter_map(|(a, r)| Some(Observed { address: a.clone(), id: r.id.clone()?, attributes: r.attributes.clone() }))
        .collect();
    let known = &known;
    let reads = types.iter().map(|t| {
        let provider = providers.get(t.provider()).expect("only configured providers").clone();
        events.send(Event::Refreshing { rtype: t.as_str().to_string() });
        async move { provider.refresh_known(stack, *t, known).await }
    });
    let results = join_all(reads).await;
    let mut observed: Vec<Observed> = Vec::new();
    for r in results {
        observed.extend(r?);
    }

    let mut out = Refreshed::default();
    let refreshed_types: BTreeSet<ResourceType> = types.into_iter().collect();
    let seen: BTreeSet<Address> = observed.iter().map(|o| o.address.clone()).collect();
    for o in observed {
        match state.resources.get_mut(&o.address) {
            Some(r) if r.id.is_some() => {
                r.id = Some(o.id);
                for (k, v) in o.attributes {
                    r.attributes.insert(k, v);
                }
            }
            known => {
                if known.is_none() && adopt == Adopt::Known {
                    continue;
                }
                let (mut attributes, dependencies) = match known {
                    Some(intent) => (intent.attributes.clone(), intent.dependencies.clone()),
                    None => Default::default(),
                };
                attributes.extend(o.attributes);
                events.send(Event::Adopted { address: o.address.clone(), id: o.id.clone() });
                out.adopted.push(o.address.clone());
                state.resources.insert(o.address, ResourceState { id: Some(o.id), attributes, dependencies });
            }
        }
    }
    let vanished: Vec<Address> = state
        .resources
        .iter()
        .filter(|(a, r)| r.id.is_some() && refreshed_types.contains(&a.rtype) && !seen.contains(*a))
        .map(|(a, _)| a.clone())
        .collect();
    for a in vanished {
        state.resources.remove(&a);
        events.send(Event::Vanished { address: a.clone() });
        out.vanished.push(a);
    }
    let mut missing: Vec<ProviderKind> = state
        .resources
        .keys()
        .map(|a| a.rtype.provider())
        .filter(|k| *k != ProviderKind::Local && providers.get(*k).is_none())
        .collect();
    missing.sort();
    missing.dedup();
    out.not_refreshed = missing;
    Ok(out)
}
