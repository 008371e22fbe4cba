//! How many Normal Events one object may get: client-go's per-object spam filter, which
//! upstream's controller inherits from its event recorder. Each object has a bucket of 25 Events
//! that refills by one every five minutes; Normal Events beyond it are dropped. A rollout over
//! thousands of nodes would otherwise write two Events per node and stage on its Skyhook alone
//! (a quarter of all its writes), which nobody reads past the first screen. Warnings are never
//! dropped: they are rare and each one asks for attention.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;

use super::plan::{EventTarget, PlannedEvent};

/// client-go's `defaultSpamBurst`.
pub const BURST: u32 = 25;
/// client-go's `defaultSpamQPS` (1/300): one more Event per object every five minutes.
pub const REFILL_EVERY: Duration = Duration::from_secs(300);

/// The buckets of the objects that had Normal Events lately.
#[derive(Debug, Default)]
pub struct EventBudget {
    buckets: HashMap<EventTarget, Bucket>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: u32,
    /// When the bucket last gained a token (or was created full).
    refilled_at: Timestamp,
}

impl Bucket {
    /// The bucket as it stands at `now`.
    fn refilled(self, now: Timestamp) -> Self {
        let elapsed = now.duration_since(self.refilled_at).unsigned_abs();
        let gained = elapsed.as_secs() / REFILL_EVERY.as_secs();
        if gained == 0 {
            return self;
        }
        let tokens = u64::from(self.tokens)
            .saturating_add(gained)
            .min(u64::from(BURST));
        let tokens = u32::try_from(tokens).unwrap_or(BURST);
        // A partial refill carries over; a full bucket does not save up.
        let refilled_at = match u32::try_from(gained) {
            Ok(gained) if tokens < BURST => self
                .refilled_at
                .checked_add(REFILL_EVERY * gained)
                .unwrap_or(now),
            _ => now,
        };
        Self {
            tokens,
            refilled_at,
        }
    }
}

impl EventBudget {
    /// Keeps the Events of `events` their objects' buckets allow at `now`, in order, and returns
    /// how many were dropped. Buckets that are full again are forgotten, so the map holds only
    /// the objects with Events in the last two hours.
    pub fn admit(&mut self, events: &mut Vec<PlannedEvent>, now: Timestamp) -> usize {
        let before = events.len();
        events.retain(|event| event.warning || self.take(&event.target, now));
        self.buckets
            .retain(|_, bucket| bucket.refilled(now).tokens < BURST);
        before - events.len()
    }

    fn take(&mut self, target: &EventTarget, now: Timestamp) -> bool {
        let bucket = self.buckets.entry(target.clone()).or_insert(Bucket {
            tokens: BURST,
            refilled_at: now,
        });
        *bucket = bucket.refilled(now);
        if bucket.tokens == 0 {
            return false;
        }
        bucket.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(target: EventTarget, message: &str) -> PlannedEvent {
        PlannedEvent {
            target,
            warning: false,
            reason: "Apply",
            action: "ApplyPackage",
            message: message.to_owned(),
        }
    }

    fn skyhook() -> EventTarget {
        EventTarget::Skyhook("gpu".to_owned())
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn events(count: usize, target: &EventTarget) -> Vec<PlannedEvent> {
        (0..count)
            .map(|i| normal(target.clone(), &format!("event {i}")))
            .collect()
    }

    #[test]
    fn each_object_gets_a_burst_then_one_event_per_refill() {
        // (seconds since the first plan, Events planned on the Skyhook, Events kept)
        let cases: [(i64, usize, usize); 6] = [
            (0, 20, 20),
            (1, 10, 5),
            (2, 3, 0),
            (299, 1, 0),
            (300, 3, 1),
            // Two refills since the last one.
            (900, 3, 2),
        ];
        let mut budget = EventBudget::default();
        for (seconds, planned, kept) in cases {
            let mut planned_events = events(planned, &skyhook());
            let dropped = budget.admit(&mut planned_events, at(seconds));
            assert_eq!(
                (planned_events.len(), dropped),
                (kept, planned - kept),
                "at {seconds} s"
            );
        }
    }

    #[test]
    fn objects_have_their_own_buckets_and_warnings_always_pass() {
        let mut budget = EventBudget::default();
        let mut first = events(BURST as usize, &skyhook());
        assert_eq!(budget.admit(&mut first, at(0)), 0);

        let node = EventTarget::Node("node-1".to_owned());
        let mut warning = normal(skyhook(), "drain blocked");
        warning.warning = true;
        let mut mixed = vec![
            normal(skyhook(), "dropped"),
            normal(node.clone(), "kept"),
            warning.clone(),
        ];
        assert_eq!(budget.admit(&mut mixed, at(1)), 1);
        assert_eq!(mixed, vec![normal(node, "kept"), warning]);
    }

    #[test]
    fn full_buckets_are_forgotten() {
        let mut budget = EventBudget::default();
        let mut planned = events(3, &skyhook());
        budget.admit(&mut planned, at(0));
        assert_eq!(budget.buckets.len(), 1);
        let mut none = Vec::new();
        budget.admit(&mut none, at(2 * 300));
        assert_eq!(budget.buckets.len(), 1, "one token still missing");
        budget.admit(&mut none, at(3 * 300));
        assert!(budget.buckets.is_empty());
    }
}
