//! The cluster as OpenShift's install leaves it, for the world's `openshift` config: the store's
//! constructor, above the store and the stand-ins whose objects it seeds.

use std::collections::BTreeMap;

use super::store::{DEFAULT_NAMESPACES, Store, timestamp};
use crate::world::World;

impl Store {
    /// What OpenShift's install leaves in the cluster for the world's `openshift` config
    /// ([`super::openshift::seed`], [`super::mco::seed`]); nothing but the pool's namespace for a
    /// plain cluster.
    pub fn new(world: &World, ca_pem: &str) -> Store {
        let mut s = Store {
            objects: BTreeMap::new(),
            ca_pem: ca_pem.to_string(),
            boots: BTreeMap::new(),
            kubelets: BTreeMap::new(),
            registered: BTreeMap::new(),
            heartbeats: BTreeMap::new(),
            csrs: BTreeMap::new(),
            booted: BTreeMap::new(),
            updates: BTreeMap::new(),
            rebootstrapping: Default::default(),
            renewed: Default::default(),
        };
        // cluster-capi-operator makes `openshift-cluster-api`, on TechPreviewNoUpgrade only.
        if world.config().openshift.is_none_or(|o| o.feature_set.runs_capi()) {
            for name in DEFAULT_NAMESPACES {
                s.add_namespace(name);
            }
        }
        if let Some(o) = world.config().openshift {
            super::openshift::seed(&mut s, &o, &timestamp(world));
            super::mco::seed(&mut s, &o);
        }
        s
    }
}
