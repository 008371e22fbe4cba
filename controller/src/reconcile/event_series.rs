//! Publishes Events exactly as kube's `Recorder` does (events.k8s.io/v1; an Event that repeats
//! the type, action, reason and objects of one published in the last six minutes patches that
//! Event's series instead of creating another), but forgets expired Events in the order they
//! expire. kube's `Recorder` walks its whole cache on every publish: a rollout sends Events per
//! node and stage, so a 5,000-node rollout kept about 20,000 of them and every publish scanned
//! them all.
//!
//! [`SeriesCache`] decides, without I/O, whether an Event is new or the next of a series;
//! [`EventRecorder`] sends what it decides.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Client, ResourceExt};

use crate::cache::answer::{self, Answer};

/// How long a published Event can be continued as a series (kube's `CACHE_TTL`).
pub const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// What makes two Events of one reporter the same series: type, action, reason, note and every
/// field of the objects it regards and relates to. kube's `Recorder` leaves the note out, so a
/// series shows only its first note: with upstream's actions (one per kind of Event, such as
/// `ApplyPackage`) every stage of every package on a node would fold into its first message.
/// With the note in the key, distinct messages stay distinct Events and true repeats still
/// fold. Kept as one string,
/// each field written as `<length>:<text>`, or `-` when absent, so that two keys are equal
/// exactly when their fields are: the cache holds thousands, and the fields as Kubernetes types
/// took a kilobyte each. A repeat is sent with its own fields, which its key says are the same.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey(Box<str>);

impl SeriesKey {
    fn of(event: &Event, regarding: &ObjectReference) -> Self {
        let mut key = String::new();
        for field in [type_name(event.type_), &event.action, &event.reason] {
            push_field(&mut key, Some(field));
        }
        push_field(&mut key, event.note.as_deref());
        push_object(&mut key, Some(regarding));
        push_object(&mut key, event.secondary.as_ref());
        SeriesKey(key.into_boxed_str())
    }
}

/// Appends every field of `object`, or `-` for none.
fn push_object(key: &mut String, object: Option<&ObjectReference>) {
    let Some(object) = object else {
        key.push('-');
        return;
    };
    let ObjectReference {
        api_version,
        field_path,
        kind,
        name,
        namespace,
        resource_version,
        uid,
    } = object;
    key.push('+');
    for field in [
        api_version,
        field_path,
        kind,
        name,
        namespace,
        resource_version,
        uid,
    ] {
        push_field(key, field.as_deref());
    }
}

/// Appends `field` as `<length>:<text>`, or `-` when absent.
fn push_field(key: &mut String, field: Option<&str>) {
    match field {
        Some(text) => {
            // Writing to a String cannot fail.
            let _ = write!(key, "{}:{text}", text.len());
        }
        None => key.push('-'),
    }
}

/// What to send for one Event.
#[derive(Debug, Clone, PartialEq)]
pub enum Publication {
    /// A new Event.
    Create(K8sEvent),
    /// The next occurrence of a published Event: the same object with its series counted on.
    PatchSeries(K8sEvent),
}

/// How many series are kept at most, as client-go's recorder remembers at most 4,096 Events
/// (`maxLruCacheEntries`) to count their repeats: a rollout publishes about five Events per
/// node and package, so without a bound a 5,000-node rollout kept 25,000 for six minutes. The
/// least recently published is forgotten first; an Event repeating it later starts anew.
pub const MAX_SERIES: usize = 4096;

/// The Events published in the last [`SERIES_TTL`], by series, and when each may be forgotten.
///
/// A rollout publishes about five Events per node, so this holds thousands: each is kept as
/// what its key does not say ([`Sent`]), and its key is shared with its expiry entries.
#[derive(Debug)]
pub struct SeriesCache {
    latest: HashMap<Arc<SeriesKey>, Sent>,
    /// (last seen, key) in publish order: a key appears once per publish, and only its last
    /// entry matches the Event kept in `latest`.
    expiries: VecDeque<(Timestamp, Arc<SeriesKey>)>,
    /// At most this many series are kept ([`MAX_SERIES`] but in tests).
    limit: usize,
}

impl Default for SeriesCache {
    fn default() -> Self {
        SeriesCache::with_limit(MAX_SERIES)
    }
}

/// What a published Event holds besides its series key and its reporter: with them,
/// [`event_of`] sends it again exactly as it was.
#[derive(Debug, Clone, PartialEq)]
struct Sent {
    name: Option<String>,
    note: Option<String>,
    event_time: Option<MicroTime>,
    series: Option<EventSeries>,
}

impl Sent {
    fn of(event: K8sEvent) -> Self {
        Sent {
            name: event.metadata.name,
            note: event.note,
            event_time: event.event_time,
            series: event.series,
        }
    }

    /// When the Event was last seen: its series' last observation, or its own time.
    fn last_seen(&self) -> Option<Timestamp> {
        match (&self.series, &self.event_time) {
            (Some(series), _) => Some(series.last_observed_time.0),
            (None, Some(time)) => Some(time.0),
            (None, None) => None,
        }
    }
}

impl SeriesCache {
    /// An empty cache keeping at most `limit` series.
    pub fn with_limit(limit: usize) -> Self {
        SeriesCache {
            latest: HashMap::new(),
            expiries: VecDeque::new(),
            limit,
        }
    }

    /// What to send for `event` about `regarding` at `now`, and the key to record it under once
    /// the API server took it.
    pub fn next(
        &mut self,
        reporter: &Reporter,
        event: &Event,
        regarding: &ObjectReference,
        now: Timestamp,
    ) -> (SeriesKey, Publication) {
        self.forget_expired(now);
        let key = SeriesKey::of(event, regarding);
        let publication = match self.latest.get(&key) {
            Some(earlier) => {
                let next = Sent {
                    series: Some(EventSeries {
                        count: earlier.series.as_ref().map_or(2, |series| series.count + 1),
                        last_observed_time: MicroTime(now),
                    }),
                    ..earlier.clone()
                };
                Publication::PatchSeries(event_of(reporter, event, regarding, next))
            }
            None => {
                let object_name = regarding.name.as_deref().unwrap_or(&reporter.controller);
                let first = Sent {
                    name: Some(format!("{object_name}.{:x}", now.as_nanosecond())),
                    note: event.note.clone(),
                    event_time: Some(MicroTime(now)),
                    series: None,
                };
                Publication::Create(event_of(reporter, event, regarding, first))
            }
        };
        (key, publication)
    }

    /// Records that `publication` was accepted, so an Event repeating it continues its series.
    pub fn published(&mut self, key: SeriesKey, publication: Publication) {
        let event = match publication {
            Publication::Create(event) | Publication::PatchSeries(event) => event,
        };
        let sent = Sent::of(event);
        let key = Arc::new(key);
        if let Some(seen) = sent.last_seen() {
            self.expiries.push_back((seen, Arc::clone(&key)));
        }
        self.latest.insert(key, sent);
        self.forget_beyond_limit();
    }

    /// Forgets the least recently published series until at most `limit` are kept.
    fn forget_beyond_limit(&mut self) {
        while self.latest.len() > self.limit {
            let Some((seen, key)) = self.expiries.pop_front() else {
                return;
            };
            // An older entry of a key published again since is not the key's last one.
            let last = self.latest.get(&key).and_then(Sent::last_seen) == Some(seen);
            if last {
                self.latest.remove(&key);
            }
        }
    }

    /// How many series are kept.
    pub fn len(&self) -> usize {
        self.latest.len()
    }

    /// Whether no series is kept.
    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// Forgets the series whose last Event is older than [`SERIES_TTL`] at `now`.
    pub fn forget_expired(&mut self, now: Timestamp) {
        while let Some((_, key)) = self
            .expiries
            .pop_front_if(|(seen, _)| *seen + SERIES_TTL <= now)
        {
            let expired = self
                .latest
                .get(&key)
                .and_then(Sent::last_seen)
                .is_some_and(|latest| latest + SERIES_TTL <= now);
            if expired {
                self.latest.remove(&key);
            }
        }
    }
}

/// The Event of the series of `event` about `regarding` that `sent` describes, named and filled
/// in as kube's `Recorder` names and fills it (a repeat sends the first occurrence again with its
/// series counted on: the fields of its key are the repeat's own, its note the first's).
fn event_of(
    reporter: &Reporter,
    event: &Event,
    regarding: &ObjectReference,
    sent: Sent,
) -> K8sEvent {
    K8sEvent {
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        event_time: sent.event_time,
        regarding: Some(regarding.clone()),
        note: sent.note,
        series: sent.series,
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: sent.name,
            ..ObjectMeta::default()
        },
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        type_: Some(type_name(event.type_).to_owned()),
        related: event.secondary.clone(),
        ..K8sEvent::default()
    }
}

/// An Event type as the API spells it.
fn type_name(event_type: EventType) -> &'static str {
    match event_type {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// Sends Events as [`SeriesCache`] decides; shared by the tasks publishing them.
pub struct EventRecorder {
    client: Client,
    reporter: Reporter,
    cache: Mutex<SeriesCache>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("reporter", &self.reporter)
            .field("series", &self.lock().len())
            .finish()
    }
}

impl EventRecorder {
    /// A recorder reporting as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        EventRecorder {
            client,
            reporter,
            cache: Mutex::new(SeriesCache::default()),
        }
    }

    /// Publishes `event` about `regarding` (in its namespace, or `default` for a cluster-scoped
    /// object).
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let (key, publication) =
            self.lock()
                .next(&self.reporter, event, regarding, Timestamp::now());
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        // The answers are read for nothing: `Answer` decodes them without allocating.
        match &publication {
            Publication::Create(event) => {
                answer::create(&self.client, Some(namespace), event).await?;
            }
            Publication::PatchSeries(event) => {
                Api::<Answer<K8sEvent>>::namespaced(self.client.clone(), namespace)
                    .patch(
                        &event.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(event),
                    )
                    .await?;
            }
        }
        self.lock().published(key, publication);
        Ok(())
    }

    /// Forgets the series that expired by now: publishing does too, but a controller with
    /// nothing to do publishes nothing, and would keep a rollout's last Events for good.
    pub fn forget_expired(&self) {
        self.lock().forget_expired(Timestamp::now());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SeriesCache> {
        // The cache holds no invariant a panicking holder could break half-way.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
