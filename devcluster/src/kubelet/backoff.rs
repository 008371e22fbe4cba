//! The kubelet's restart back-off: the first restart is immediate, then the wait starts at
//! `initial` and doubles up to `max`; an entry idle for twice `max` starts over.

use std::time::Duration;

use jiff::Timestamp;

/// Back-off settings (the kubelet's are 10 s and 5 min; tests scale them down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
        }
    }
}

/// The back-off state of one container (or one image pull).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backoff {
    entry: Option<Entry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    current: Duration,
    last_update: Timestamp,
}

impl Backoff {
    /// When the next attempt may start after a failure at `failed_at`, or `None` if it may
    /// start now.
    pub fn wait_until(&self, failed_at: Timestamp, now: Timestamp) -> Option<Timestamp> {
        let entry = self.entry?;
        let until = failed_at.saturating_add(entry.current).ok()?;
        (now < until).then_some(until)
    }

    /// The current back-off period (for messages such as "back-off 20s").
    pub fn current(&self) -> Option<Duration> {
        self.entry.map(|e| e.current)
    }

    /// Records an attempt made after the failure at `failed_at`, growing the back-off.
    pub fn record_attempt(&mut self, failed_at: Timestamp, policy: BackoffPolicy) {
        let current = match self.entry {
            Some(e) if !expired(e, failed_at, policy) => (e.current * 2).min(policy.max),
            _ => policy.initial,
        };
        self.entry = Some(Entry {
            current,
            last_update: failed_at,
        });
    }
}

fn expired(entry: Entry, at: Timestamp, policy: BackoffPolicy) -> bool {
    let idle = at.duration_since(entry.last_update);
    idle.is_positive() && idle.unsigned_abs() > policy.max * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn follows_the_kubelet_schedule() {
        let policy = BackoffPolicy::default();
        let mut backoff = Backoff::default();
        // (failure time, now, expected wait-until, then attempt recorded)
        let steps: &[(i64, i64, Option<i64>)] = &[
            (0, 0, None),       // first failure: restart at once
            (5, 5, Some(15)),   // second: wait 10 s
            (5, 15, None),      // ... then go
            (20, 21, Some(40)), // third: 20 s
            (20, 40, None),
            (45, 45, Some(85)), // fourth: 40 s
        ];
        for &(failed, now, expected) in steps {
            let wait = backoff.wait_until(t(failed), t(now));
            assert_eq!(wait, expected.map(t), "failure at {failed}, now {now}");
            if wait.is_none() {
                backoff.record_attempt(t(failed), policy);
            }
        }
    }

    #[test]
    fn caps_at_max_and_resets_after_idle() {
        let policy = BackoffPolicy {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(30),
        };
        let mut backoff = Backoff::default();
        for _ in 0..5 {
            backoff.record_attempt(t(0), policy);
        }
        assert_eq!(backoff.current(), Some(Duration::from_secs(30)));
        backoff.record_attempt(t(61), policy);
        assert_eq!(backoff.current(), Some(Duration::from_secs(10)));
    }
}
