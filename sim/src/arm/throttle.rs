//! ARM request throttling: token buckets per subscription and principal for reads, writes, deletes.

use crate::world::{BucketConfig, Throttle};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Which bucket a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    Reads,
    Writes,
    Deletes,
}

impl Class {
    pub fn of(method: &axum::http::Method) -> Class {
        match *method {
            axum::http::Method::GET | axum::http::Method::HEAD => Class::Reads,
            axum::http::Method::DELETE => Class::Deletes,
            _ => Class::Writes,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Class::Reads => "reads",
            Class::Writes => "writes",
            Class::Deletes => "deletes",
        }
    }
    fn config(self, t: &Throttle) -> BucketConfig {
        match self {
            Class::Reads => t.reads,
            Class::Writes => t.writes,
            Class::Deletes => t.deletes,
        }
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// All buckets.
#[derive(Debug, Default)]
pub struct Buckets {
    map: HashMap<(String, String, Class), Bucket>,
}

impl Buckets {
    /// Takes one token: `Ok(remaining)` or `Err(wait until the next token)`.
    pub fn take(
        &mut self,
        sub: &str,
        principal: &str,
        class: Class,
        t: &Throttle,
        now: Instant,
    ) -> Result<u32, Duration> {
        let cfg = class.config(t);
        let b = self
            .map
            .entry((sub.to_ascii_lowercase(), principal.to_string(), class))
            .or_insert(Bucket { tokens: cfg.capacity as f64, last: now });
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * cfg.refill_per_sec).min(cfg.capacity as f64);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(b.tokens.floor() as u32)
        } else if cfg.refill_per_sec <= 0.0 {
            Err(Duration::from_secs(3600))
        } else {
            Err(Duration::from_secs_f64((1.0 - b.tokens) / cfg.refill_per_sec))
        }
    }

    pub fn clear(&mut self) {
        self.map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_empties_then_refills() {
        let t =
            Throttle { enabled: true, reads: BucketConfig { capacity: 2, refill_per_sec: 1.0 }, ..Throttle::default() };
        let mut b = Buckets::default();
        let now = Instant::now();
        assert_eq!(b.take("s", "p", Class::Reads, &t, now), Ok(1));
        assert_eq!(b.take("s", "p", Class::Reads, &t, now), Ok(0));
        let wait = b.take("s", "p", Class::Reads, &t, now).unwrap_err();
        assert!(wait <= Duration::from_secs(1) && wait > Duration::from_millis(900));
        assert!(b.take("other-sub", "p", Class::Reads, &t, now).is_ok(), "buckets are per subscription");
        assert!(b.take("s", "p", Class::Reads, &t, now + Duration::from_secs(1)).is_ok());
    }
}
