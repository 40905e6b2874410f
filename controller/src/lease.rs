//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it:
//! a replica reconciles only while it holds the Lease; it renews it every `renew` and takes it over
//! only once it has seen the Lease unchanged for `duration` by its own clock (the holder's
//! `renewTime` is another machine's clock, and skew must not make a live Lease look expired).
//! Every write carries the resourceVersion it read, so two replicas cannot both take an expired
//! Lease. Each call is bounded by a timeout, and a leader that has not renewed within
//! `renew_deadline` (shorter than `duration`) stops leading before any follower may take over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    renew: Duration,
    renew_deadline: Duration,
    /// The Lease's resourceVersion as last seen, and when this replica saw it change.
    observed: std::sync::Mutex<Option<(String, Instant)>>,
}

/// Why the leader stopped leading.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("lost the lease {name}: {why}")]
#[diagnostic(code(xcsp::controller::lease_lost))]
pub struct Lost {
    pub name: String,
    pub why: String,
}

impl Elector {
    pub fn new(api: Api<Lease>, name: &str, identity: &str) -> Elector {
        Elector {
            api,
            name: name.into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            renew: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(10),
            observed: std::sync::Mutex::new(None),
        }
    }

    /// Returns once this replica holds the Lease, saying (through `waiting`) who holds it meanwhile.
    pub async fn acquire(&self, waiting: impl Fn(&str)) {
        let mut said = String::new();
        loop {
            match tokio::time::timeout(self.renew, self.try_take()).await {
                Ok(Ok(None)) => return,
                Ok(Ok(Some(holder))) if holder != said => {
                    waiting(&holder);
                    said = holder;
                }
                Ok(Ok(Some(_))) => {}
                Ok(Err(e)) => waiting(&format!("(the Lease cannot be read: {e})")),
                Err(_) => waiting("(the API server did not answer)"),
            }
            tokio::time::sleep(self.renew).await;
        }
    }

    /// Renews the Lease until it has not been renewed for `renew_deadline` (or another replica
    /// holds it); then returns, before any follower may take it over.
    pub async fn keep(&self) -> Lost {
        let mut last = Instant::now();
        loop {
            tokio::time::sleep(self.renew).await;
            match tokio::time::timeout(self.renew, self.try_take()).await {
                Ok(Ok(None)) => last = Instant::now(),
                Ok(Ok(Some(holder))) => {
                    return Lost { name: self.name.clone(), why: format!("{holder} holds it now") };
                }
                Ok(Err(e)) if last.elapsed() >= self.renew_deadline => {
                    return Lost {
                        name: self.name.clone(),
                        why: format!("not renewed for {}s: {e}", self.renew_deadline.as_secs()),
                    };
                }
                Err(_) if last.elapsed() >= self.renew_deadline => {
                    return Lost {
                        name: self.name.clone(),
                        why: format!(
                            "not renewed for {}s: the API server did not answer",
                            self.renew_deadline.as_secs()
                        ),
                    };
                }
                Ok(Err(_)) | Err(_) => {}
            }
        }
    }

    /// Takes or renews the Lease; `Some(holder)` when another replica holds it and it has not
    /// expired.
    async fn try_take(&self) -> Result<Option<String>, kube::Error> {
        let now = Timestamp::now();
        let ours = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs() as i32),
            acquire_time: acquired.or(Some(MicroTime(now))),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(ours(0, None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(None),
                // Another replica made it first: it holds it.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Some("another replica".into())),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let duration = spec.lease_duration_seconds.map_or(self.duration, |d| Duration::from_secs(d.max(0) as u64));
        // Expired: unchanged for its duration, as this replica has watched it.
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let seen = {
            let mut observed = self.observed.lock().expect("not poisoned");
            match observed.as_ref() {
                Some((v, at)) if *v == version => *at,
                _ => {
                    *observed = Some((version, Instant::now()));
                    Instant::now()
                }
            }
        };
        let expired = seen.elapsed() >= duration;
        let transitions = spec.lease_transitions.unwrap_or(0);
        let next = if holder == self.identity {
            ours(transitions, spec.acquire_time)
        } else if holder.is_empty() || expired {
            ours(transitions + 1, None)
        } else {
            return Ok(Some(holder));
        };
        lease.spec = Some(next);
        // The resourceVersion read is sent back: a replica that took it meanwhile wins (409).
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Some("another replica".into())),
            Err(e) => Err(e),
        }
    }
}
