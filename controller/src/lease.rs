//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it:
//! a replica reconciles only while it holds the Lease; it renews it every `renew` and takes it over
//! only once the holder has let `duration` pass without renewing. Every write carries the
//! resourceVersion it read, so two replicas cannot both take an expired Lease. A leader that
//! cannot renew within `duration` stops (the Deployment starts it again as a follower).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    renew: Duration,
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
            renew: Duration::from_secs(5),
        }
    }

    /// Returns once this replica holds the Lease, saying (through `waiting`) who holds it meanwhile.
    pub async fn acquire(&self, waiting: impl Fn(&str)) {
        let mut said = String::new();
        loop {
            match self.try_take().await {
                Ok(None) => return,
                Ok(Some(holder)) if holder != said => {
                    waiting(&holder);
                    said = holder;
                }
                Ok(Some(_)) => {}
                Err(e) => waiting(&format!("(the Lease cannot be read: {e})")),
            }
            tokio::time::sleep(self.renew).await;
        }
    }

    /// Renews the Lease until a renewal fails for longer than the Lease lasts.
    pub async fn keep(&self) -> Lost {
        let mut last = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.renew).await;
            match self.try_take().await {
                Ok(None) => last = tokio::time::Instant::now(),
                Ok(Some(holder)) => {
                    return Lost { name: self.name.clone(), why: format!("{holder} holds it now") };
                }
                Err(e) if last.elapsed() > self.duration => {
                    return Lost { name: self.name.clone(), why: format!("not renewed within its duration: {e}") };
                }
                Err(_) => {}
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
        let duration = spec.lease_duration_seconds.unwrap_or(self.duration.as_secs() as i32);
        let renewed = spec.renew_time.as_ref().map(|t| t.0);
        let expired = renewed.is_none_or(|t| t.as_second() + i64::from(duration) < now.as_second());
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
