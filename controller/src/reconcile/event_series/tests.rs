use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Event, EventType, Reporter};

use super::{Publication, SERIES_TTL, SeriesCache, SeriesKey};

fn reporter() -> Reporter {
    Reporter {
        controller: "skyhook-controller".into(),
        instance: Some("pod-a_1".into()),
    }
}

fn node(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

fn event(reason: &str, note: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note.into()),
        action: reason.into(),
        secondary: None,
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("a valid test time")
}

fn ttl() -> i64 {
    SERIES_TTL.as_secs()
}

/// What `cache` decides for an Event about node `name` at `seconds`, recorded as accepted:
/// "create <note>" or "patch <the series' note> #<count>".
fn publish(cache: &mut SeriesCache, seconds: i64, name: &str, reason: &str, note: &str) -> String {
    let (key, publication) =
        cache.next(&reporter(), &event(reason, note), &node(name), at(seconds));
    let shown = match &publication {
        Publication::Create(sent) => format!("create {}", sent.note.clone().unwrap_or_default()),
        Publication::PatchSeries(sent) => format!(
            "patch {} #{}",
            sent.note.clone().unwrap_or_default(),
            sent.series.as_ref().map_or(0, |series| series.count)
        ),
    };
    cache.published(key, publication);
    shown
}

/// A case: its name, the Events published (seconds, node, reason, note), what was sent.
type SeriesCase<'a> = (&'a str, Vec<(i64, &'a str, &'a str, &'a str)>, Vec<&'a str>);

#[test]
fn repeats_within_six_minutes_continue_the_series_and_later_ones_start_anew() {
    let ttl = ttl();
    let cases: Vec<SeriesCase> = vec![
        (
            "different reasons are different Events",
            vec![
                (0, "a", "Apply", "applying"),
                (1, "a", "Applied", "applied"),
            ],
            vec!["create applying", "create applied"],
        ),
        (
            "different objects are different Events",
            vec![(0, "a", "Apply", "x"), (1, "b", "Apply", "y")],
            vec!["create x", "create y"],
        ),
        (
            "a repeat patches the first Event's series",
            vec![
                (0, "a", "Apply", "first"),
                (10, "a", "Apply", "first"),
                (20, "a", "Apply", "first"),
            ],
            vec!["create first", "patch first #2", "patch first #3"],
        ),
        (
            "different notes are different Events: a series never hides a message",
            vec![
                (0, "a", "Apply", "first"),
                (10, "a", "Apply", "second"),
                (20, "a", "Apply", "first"),
            ],
            vec!["create first", "create second", "patch first #2"],
        ),
        (
            "a repeat six minutes later is a new Event",
            vec![(0, "a", "Apply", "first"), (ttl, "a", "Apply", "first")],
            vec!["create first", "create first"],
        ),
        (
            "a series lives six minutes from its last occurrence, not its first",
            vec![
                (0, "a", "Apply", "first"),
                (ttl - 1, "a", "Apply", "first"),
                (2 * ttl - 2, "a", "Apply", "first"),
                (3 * ttl, "a", "Apply", "first"),
            ],
            vec![
                "create first",
                "patch first #2",
                "patch first #3",
                "create first",
            ],
        ),
    ];
    for (case, steps, expected) in cases {
        let mut cache = SeriesCache::default();
        let sent: Vec<String> = steps
            .iter()
            .map(|&(seconds, name, reason, note)| publish(&mut cache, seconds, name, reason, note))
            .collect();
        assert_eq!(sent, expected, "{case}");
    }
}

#[test]
fn expired_series_are_forgotten_and_live_ones_kept() {
    let ttl = ttl();
    let mut cache = SeriesCache::default();
    publish(&mut cache, 0, "a", "Apply", "a");
    publish(&mut cache, 1, "b", "Apply", "b");
    publish(&mut cache, ttl - 10, "a", "Apply", "a");
    publish(&mut cache, ttl - 5, "c", "Apply", "c");
    assert_eq!(cache.len(), 3);
    // At ttl + 1, b (last seen at 1) has expired; a (seen again at ttl - 10) and c have not.
    assert_eq!(publish(&mut cache, ttl + 1, "d", "Apply", "d"), "create d");
    assert_eq!(cache.len(), 3, "b forgotten, d added");
    assert_eq!(
        publish(&mut cache, ttl + 2, "a", "Apply", "a"),
        "patch a #3",
        "a's series is alive"
    );
    assert_eq!(
        publish(&mut cache, ttl + 3, "b", "Apply", "b"),
        "create b",
        "b's series expired"
    );
    let (_, _) = cache.next(&reporter(), &event("Apply", "e"), &node("e"), at(3 * ttl));
    assert!(cache.is_empty(), "every series has expired");
}

#[test]
fn an_event_not_accepted_starts_no_series() {
    let mut cache = SeriesCache::default();
    let (_, refused) = cache.next(&reporter(), &event("Apply", "x"), &node("a"), at(0));
    assert!(matches!(refused, Publication::Create(_)));
    let (_, again) = cache.next(&reporter(), &event("Apply", "x"), &node("a"), at(1));
    assert!(matches!(again, Publication::Create(_)));
}

#[test]
fn a_new_event_is_named_and_filled_in_as_kube_names_it() {
    let mut cache = SeriesCache::default();
    let mut regarding = node("gpu-1");
    regarding.namespace = Some("ns".into());
    let warning = Event {
        type_: EventType::Warning,
        reason: "Failed".into(),
        note: Some("it failed".into()),
        action: "Apply".into(),
        secondary: None,
    };
    let (_, publication) = cache.next(&reporter(), &warning, &regarding, at(0));
    let Publication::Create(sent) = publication else {
        panic!("a first Event is created");
    };
    let nanos = at(0).as_nanosecond();
    assert_eq!(sent.metadata.name, Some(format!("gpu-1.{nanos:x}")));
    assert_eq!(sent.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(sent.type_.as_deref(), Some("Warning"));
    assert_eq!(sent.reason.as_deref(), Some("Failed"));
    assert_eq!(sent.action.as_deref(), Some("Apply"));
    assert_eq!(sent.note.as_deref(), Some("it failed"));
    assert_eq!(
        sent.reporting_controller.as_deref(),
        Some("skyhook-controller")
    );
    assert_eq!(sent.reporting_instance.as_deref(), Some("pod-a_1"));
    assert_eq!(sent.regarding, Some(regarding));
    assert_eq!(sent.event_time.map(|time| time.0), Some(at(0)));
    assert!(sent.series.is_none());
}

/// kube's `Recorder` patches a repeat with the first occurrence whole (name, note, time, objects,
/// reporter), its series counted on; the cache keeps less of it and must send the same.
#[test]
fn a_repeat_sends_the_first_event_again_with_its_series() {
    let mut cache = SeriesCache::default();
    let mut regarding = node("gpu-1");
    regarding.namespace = Some("ns".into());
    let mut related = node("pod-1");
    related.kind = Some("Pod".into());
    let warning = |note: &str| Event {
        type_: EventType::Warning,
        reason: "Failed".into(),
        note: Some(note.into()),
        action: "Apply".into(),
        secondary: Some(related.clone()),
    };
    let (key, first) = cache.next(&reporter(), &warning("first"), &regarding, at(0));
    let Publication::Create(created) = first.clone() else {
        panic!("a first Event is created");
    };
    assert_eq!(created.related, Some(related.clone()));
    assert_eq!(created.note.as_deref(), Some("first"));
    cache.published(key, first);
    for (seconds, count) in [(10, 2), (20, 3)] {
        let (key, repeat) = cache.next(&reporter(), &warning("first"), &regarding, at(seconds));
        let Publication::PatchSeries(patched) = repeat.clone() else {
            panic!("a repeat patches the series");
        };
        let expected = K8sEvent {
            series: Some(EventSeries {
                count,
                last_observed_time: MicroTime(at(seconds)),
            }),
            ..created.clone()
        };
        assert_eq!(patched, expected);
        cache.published(key, repeat);
    }
}

/// A change to an Event and the object it regards.
type Edit = fn(&mut Event, &mut ObjectReference);

/// The packed key is equal exactly when every field is: no two different field lists write the
/// same text.
#[test]
fn series_keys_are_equal_exactly_when_their_fields_are() {
    let base = || Event {
        type_: EventType::Normal,
        reason: "b:c".into(),
        note: Some("one".into()),
        action: "a".into(),
        secondary: None,
    };
    let edited = |edit: Edit| {
        let (mut event, mut regarding) = (base(), node("n"));
        edit(&mut event, &mut regarding);
        SeriesKey::of(&event, &regarding)
    };
    let same = SeriesKey::of(&base(), &node("n"));
    let cases: [(&str, Edit); 11] = [
        ("the note", |e, _| e.note = Some("two".into())),
        ("no note", |e, _| e.note = None),
        ("type", |e, _| e.type_ = EventType::Warning),
        ("a separator moved from reason to action", |e, _| {
            e.action = "a:b".into();
            e.reason = "c".into();
        }),
        ("regarding name", |_, r| r.name = Some("m".into())),
        ("regarding resourceVersion", |_, r| {
            r.resource_version = Some("7".into())
        }),
        ("regarding fieldPath", |_, r| {
            r.field_path = Some("spec".into())
        }),
        ("an empty field is not an absent one", |_, r| {
            r.namespace = Some(String::new())
        }),
        ("a related object", |e, _| e.secondary = Some(node("p"))),
        ("a related object with nothing set", |e, _| {
            e.secondary = Some(ObjectReference::default())
        }),
        ("a field holding what the next would write", |_, r| {
            r.api_version = Some("v1".into());
            r.kind = None;
            r.field_path = Some("4:Node".into());
        }),
    ];
    for (case, edit) in cases {
        assert_ne!(edited(edit), same, "{case}");
    }
}

#[test]
fn beyond_the_limit_the_least_recently_published_series_is_forgotten() {
    let mut cache = SeriesCache::with_limit(2);
    assert_eq!(publish(&mut cache, 0, "a", "Apply", "a1"), "create a1");
    assert_eq!(publish(&mut cache, 1, "b", "Apply", "b1"), "create b1");
    // a's series is published again (a repeat sends the first Event's note): b is now the
    // least recently published.
    assert_eq!(publish(&mut cache, 2, "a", "Apply", "a1"), "patch a1 #2");
    assert_eq!(publish(&mut cache, 3, "c", "Apply", "c1"), "create c1");
    assert_eq!(cache.len(), 2);
    assert_eq!(publish(&mut cache, 4, "a", "Apply", "a1"), "patch a1 #3");
    // b was forgotten: its repeat starts a new Event, which pushes c out (a was published later).
    assert_eq!(publish(&mut cache, 5, "b", "Apply", "b1"), "create b1");
    assert_eq!(cache.len(), 2);
    assert_eq!(publish(&mut cache, 6, "a", "Apply", "a1"), "patch a1 #4");
    assert_eq!(publish(&mut cache, 7, "c", "Apply", "c1"), "create c1");
}

#[test]
fn the_default_limit_is_client_gos() {
    let mut cache = SeriesCache::default();
    for index in 0..super::MAX_SERIES + 10 {
        let name = format!("node-{index}");
        assert!(publish(&mut cache, 0, &name, "Apply", "x").starts_with("create"));
    }
    assert_eq!(cache.len(), super::MAX_SERIES);
    // The first ten were forgotten, the eleventh is kept.
    assert_eq!(publish(&mut cache, 1, "node-0", "Apply", "x"), "create x");
    assert_eq!(
        publish(&mut cache, 1, "node-11", "Apply", "x"),
        "patch x #2"
    );
}
