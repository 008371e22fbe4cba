//! Events leave the reconcile the way client-go's recorder sends them: the reconcile queues them
//! without waiting, into a bounded queue (client-go's 1,000), and one background task publishes
//! them. A reconcile therefore never waits on Event round trips, and a full queue drops Events
//! rather than slowing the rollout, as client-go's broadcaster does.
//!
//! Events about one object are published one after the other, in the order they were queued, so
//! a node's "state complete" never lands before the "Applying" of the same stage; Events about
//! different objects go out concurrently. A publish that fails is logged and not retried (an
//! Event is a report; the next change reports again). While nothing is published, the task still
//! forgets expired series once a minute, so an idle controller does not hold a rollout's Events.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Event;
use tokio::sync::mpsc;
use tracing::{debug, info};

use super::event_series::EventRecorder;

/// client-go's `maxQueuedEvents`.
pub const QUEUE: usize = 1000;
/// How many objects' Events are published at once.
const OBJECTS_IN_FLIGHT: usize = 16;
/// How often expired series are forgotten besides on each publish.
const FORGET_EXPIRED_EVERY: Duration = Duration::from_secs(60);

/// One Event and the object it is about.
pub struct Outgoing {
    /// The Event.
    pub event: Event,
    /// Its object.
    pub regarding: ObjectReference,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("reason", &self.event.reason)
            .field("note", &self.event.note)
            .field("regarding", &self.regarding)
            .finish()
    }
}

/// The sending end: cheap to hold, never waits.
#[derive(Debug, Clone)]
pub struct EventSender {
    queue: mpsc::Sender<Outgoing>,
}

impl EventSender {
    /// Starts the task publishing with `recorder`; it ends when the last sender is dropped.
    pub fn spawn(recorder: EventRecorder) -> Self {
        let (queue, received) = mpsc::channel(QUEUE);
        tokio::spawn(publish_all(recorder, received));
        EventSender { queue }
    }

    /// Queues `events` in order; returns how many did not fit in the queue and were dropped.
    pub fn send(&self, events: impl IntoIterator<Item = Outgoing>) -> usize {
        let mut dropped = 0;
        for event in events {
            if self.queue.try_send(event).is_err() {
                dropped += 1;
            }
        }
        if dropped > 0 {
            info!(
                dropped,
                queue = QUEUE,
                "Events dropped: the queue of Events waiting to be published is full"
            );
        }
        dropped
    }
}

async fn publish_all(recorder: EventRecorder, mut received: mpsc::Receiver<Outgoing>) {
    let mut batch = Vec::with_capacity(QUEUE);
    let mut forget = tokio::time::interval(FORGET_EXPIRED_EVERY);
    forget.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let received = tokio::select! {
            received = received.recv_many(&mut batch, QUEUE) => received,
            _ = forget.tick() => {
                recorder.forget_expired();
                continue;
            }
        };
        if received == 0 {
            return;
        }
        let per_object = by_object(std::mem::take(&mut batch));
        stream::iter(per_object)
            .map(|events| publish_in_order(&recorder, events))
            .buffer_unordered(OBJECTS_IN_FLIGHT)
            .collect::<()>()
            .await;
    }
}

async fn publish_in_order(recorder: &EventRecorder, events: Vec<Outgoing>) {
    for Outgoing { event, regarding } in events {
        if let Err(error) = recorder.publish(&event, &regarding).await {
            debug!(reason = %event.reason, object = ?regarding.name, %error, "event not published");
        }
    }
}

/// The Events grouped by their object (kind and name), each group in queue order.
fn by_object(events: Vec<Outgoing>) -> Vec<Vec<Outgoing>> {
    let mut groups: BTreeMap<(Option<String>, Option<String>), Vec<Outgoing>> = BTreeMap::new();
    for event in events {
        let key = (event.regarding.kind.clone(), event.regarding.name.clone());
        groups.entry(key).or_default().push(event);
    }
    groups.into_values().collect()
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType;

    use super::{Outgoing, by_object};
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::Event;

    fn outgoing(kind: &str, name: &str, note: &str) -> Outgoing {
        Outgoing {
            event: Event {
                type_: EventType::Normal,
                reason: "Apply".into(),
                note: Some(note.into()),
                action: note.into(),
                secondary: None,
            },
            regarding: ObjectReference {
                kind: Some(kind.into()),
                name: Some(name.into()),
                ..ObjectReference::default()
            },
        }
    }

    fn notes(groups: &[Vec<Outgoing>]) -> Vec<Vec<String>> {
        groups
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|o| o.event.note.clone().unwrap_or_default())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn events_of_one_object_stay_in_queue_order() {
        let queued = vec![
            outgoing("Node", "b", "b1"),
            outgoing("Node", "a", "a1"),
            outgoing("Skyhook", "a", "s1"),
            outgoing("Node", "b", "b2"),
            outgoing("Node", "a", "a2"),
        ];
        assert_eq!(
            notes(&by_object(queued)),
            vec![vec!["a1", "a2"], vec!["b1", "b2"], vec!["s1"]]
        );
        assert!(by_object(vec![]).is_empty());
    }
}
