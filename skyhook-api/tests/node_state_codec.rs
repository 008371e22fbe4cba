//! The node-state annotation codec reads what upstream writes and writes it back byte for byte.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use skyhook_api::node_state::{NodeState, NodeStateError, PackageKey};
use skyhook_api::v1alpha1::{PackageStatus, Stage, State};

fn status(name: &str, version: &str, stage: Stage, state: State) -> PackageStatus {
    PackageStatus {
        name: name.into(),
        version: version.into(),
        image: format!("ghcr.io/nvidia/skyhook/{name}"),
        container_sha: String::new(),
        stage,
        state,
        restarts: 0,
    }
}

/// Annotation values in exactly the form upstream's Go operator writes them. Every escaping case
/// was checked against the output of Go 1.26 `encoding/json.Marshal` on the same data.
#[test]
fn upstream_values_round_trip_byte_for_byte() {
    let cases = [
        ("empty", r#"{}"#),
        (
            "one entry",
            r#"{"dexter|1.2.3":{"name":"dexter","version":"1.2.3","image":"ghcr.io/nvidia/skyhook/agentless","stage":"config","state":"complete"}}"#,
        ),
        (
            "restarts and sha",
            r#"{"spencer|3.3":{"name":"spencer","version":"3.3","image":"ghcr.io/x/spencer","containerSHA":"sha256:0123abcd","stage":"apply","state":"erroring","restarts":4}}"#,
        ),
        (
            "keys sorted as strings: '-' sorts before '|'",
            r#"{"a-b|1":{"name":"a-b","version":"1","image":"i","stage":"apply","state":"in_progress"},"a|1":{"name":"a","version":"1","image":"i","stage":"post-interrupt","state":"skipped"}}"#,
        ),
        (
            "two versions of one package (upgrade in flight)",
            r#"{"dax|1.2.3":{"name":"dax","version":"1.2.3","image":"i","stage":"config","state":"complete"},"dax|2.0.0":{"name":"dax","version":"2.0.0","image":"i","stage":"upgrade","state":"in_progress"}}"#,
        ),
        (
            "uninstall placeholder and every stage/state spelling",
            r#"{"p|1":{"name":"p","version":"1","image":"i","stage":"uninstall","state":"skipped"},"q|1":{"name":"q","version":"1","image":"i","stage":"interrupt","state":"unknown"}}"#,
        ),
        (
            "Go HTML escaping",
            r#"{"x|1":{"name":"x","version":"1","image":"reg\u003c\u003e\u0026\u2028\u2029/x","stage":"apply","state":"complete"}}"#,
        ),
        (
            "control characters as Go escapes them",
            r#"{"x|1":{"name":"x","version":"1","image":"a\"b\\c\n\t\r\b\f\u0001\u001f","stage":"apply","state":"complete"}}"#,
        ),
        (
            "DEL is not escaped",
            "{\"x|1\":{\"name\":\"x\",\"version\":\"1\",\"image\":\"\u{7f}~/\",\"stage\":\"apply\",\"state\":\"complete\"}}",
        ),
        (
            "non-ASCII written raw",
            r#"{"x|1":{"name":"x","version":"1","image":"é/ü/漢","stage":"apply","state":"complete"}}"#,
        ),
    ];
    for (what, value) in cases {
        let state = NodeState::parse(value).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state.to_annotation(), value, "{what}");
    }
}

#[test]
fn escapes_html_characters_like_go() {
    let mut entry = status("x", "1", Stage::Apply, State::Complete);
    entry.image = "a<b>c&d\u{2028}e\u{2029}".into();
    let state: NodeState = [entry].into_iter().collect();
    assert_eq!(
        state.to_annotation(),
        r#"{"x|1":{"name":"x","version":"1","image":"a\u003cb\u003ec\u0026d\u2028e\u2029","stage":"apply","state":"complete"}}"#
    );
}

/// Inputs upstream (or an older operator) may write that differ from our canonical output.
#[test]
fn tolerates_upstream_variations() {
    let cases = [
        (
            "unknown fields are ignored",
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete","future":{"x":1}}}"#,
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete"}}"#,
        ),
        (
            "explicit zero restarts and empty sha are omitted on write",
            r#"{"a|1":{"name":"a","version":"1","image":"i","containerSHA":"","stage":"apply","state":"complete","restarts":0}}"#,
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete"}}"#,
        ),
        (
            "whitespace and key order are normalised",
            "{ \"b|1\" : {\"state\":\"complete\",\"stage\":\"config\",\"image\":\"i\",\"version\":\"1\",\"name\":\"b\"},\n \"a|1\": {\"name\":\"a\",\"version\":\"1\",\"image\":\"i\",\"stage\":\"apply\",\"state\":\"in_progress\",\"restarts\":2} }",
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"in_progress","restarts":2},"b|1":{"name":"b","version":"1","image":"i","stage":"config","state":"complete"}}"#,
        ),
        (
            "unescaped HTML characters are read and escaped on write",
            r#"{"a|1":{"name":"a","version":"1","image":"<&>","stage":"apply","state":"complete"}}"#,
            r#"{"a|1":{"name":"a","version":"1","image":"\u003c\u0026\u003e","stage":"apply","state":"complete"}}"#,
        ),
        (
            "a key given twice: the last value counts, as in any JSON map",
            r#"{"b|1":{"name":"b","version":"1","image":"i","stage":"apply","state":"in_progress"},"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete"},"b|1":{"name":"b","version":"1","image":"i","stage":"config","state":"complete"}}"#,
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete"},"b|1":{"name":"b","version":"1","image":"i","stage":"config","state":"complete"}}"#,
        ),
        ("empty annotation is an empty state", "", "{}"),
    ];
    for (what, input, canonical) in cases {
        let state = NodeState::parse(input).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state.to_annotation(), canonical, "{what}");
    }
}

#[test]
fn rejects_malformed_values() {
    let cases = [
        ("not JSON", "nodeState"),
        ("an array", r#"[]"#),
        ("truncated", r#"{"a|1":{"name":"a""#),
        (
            "missing state",
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply"}}"#,
        ),
        (
            "missing image",
            r#"{"a|1":{"name":"a","version":"1","stage":"apply","state":"complete"}}"#,
        ),
        (
            "unknown stage",
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"install","state":"complete"}}"#,
        ),
        (
            "unknown state",
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"done"}}"#,
        ),
        (
            "restarts as a string",
            r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete","restarts":"2"}}"#,
        ),
        (
            "key without a separator",
            r#"{"a-1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete"}}"#,
        ),
    ];
    for (what, input) in cases {
        let error = NodeState::parse(input).expect_err(what);
        assert!(
            matches!(error, NodeStateError::Malformed { .. }),
            "{what}: {error:?}"
        );
    }
}

#[test]
fn package_keys_parse_and_split() {
    let cases = [
        ("dexter|1.2.3", Some(("dexter", "1.2.3"))),
        ("a|2024.7.7-test", Some(("a", "2024.7.7-test"))),
        ("a|", Some(("a", ""))),
        ("a|b|c", Some(("a", "b|c"))),
        ("dexter", None),
        ("", None),
    ];
    for (input, want) in cases {
        match (PackageKey::parse(input), want) {
            (Ok(key), Some((name, version))) => {
                assert_eq!(
                    (key.name(), key.version(), key.as_str()),
                    (name, version, input)
                );
                assert_eq!(key.to_string(), input);
            }
            (Err(NodeStateError::InvalidKey { key }), None) => assert_eq!(key, input),
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }
    assert_eq!(
        PackageKey::new("dax", "2.0.0"),
        PackageKey::parse("dax|2.0.0").unwrap()
    );
    let error = PackageKey::parse("dexter").unwrap_err().to_string();
    assert!(
        error.contains("\"dexter\"") && error.contains("<package>|<version>"),
        "{error}"
    );
}

#[test]
fn get_upsert_remove_and_entries_of_a_package() {
    let mut state = NodeState::new();
    assert!(state.is_empty());
    assert!(
        state
            .upsert(status("dax", "1.0.0", Stage::Config, State::Complete))
            .is_none()
    );
    assert!(
        state
            .upsert(status("dax", "2.0.0", Stage::Upgrade, State::InProgress))
            .is_none()
    );
    assert!(
        state
            .upsert(status("dexter", "1.0.0", Stage::Apply, State::Complete))
            .is_none()
    );
    assert!(
        state
            .upsert(status("da", "1.0.0", Stage::Apply, State::Complete))
            .is_none()
    );
    assert_eq!(state.len(), 4);

    let replaced = state.upsert(status("dax", "2.0.0", Stage::Upgrade, State::Complete));
    assert_eq!(replaced.map(|s| s.state), Some(State::InProgress));
    assert_eq!(state.len(), 4);
    assert_eq!(
        state.get_version("dax", "2.0.0").map(|s| s.state),
        Some(State::Complete)
    );
    assert_eq!(
        state
            .get(&PackageKey::new("dexter", "1.0.0"))
            .map(|s| s.stage),
        Some(Stage::Apply)
    );
    assert!(state.get_version("dax", "3.0.0").is_none());

    let dax: Vec<&str> = state
        .entries_of("dax")
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(
        dax,
        ["dax|1.0.0", "dax|2.0.0"],
        "a prefix of another name must not match"
    );
    assert_eq!(state.entries_of("nothing").count(), 0);

    let removed = state.remove(&PackageKey::new("dax", "1.0.0"));
    assert_eq!(removed.map(|s| s.version), Some("1.0.0".to_owned()));
    assert!(state.remove(&PackageKey::new("dax", "1.0.0")).is_none());

    state.retain(|key, _| key.name() != "da");
    let keys: Vec<String> = state.iter().map(|(key, _)| key.to_string()).collect();
    assert_eq!(keys, ["dax|2.0.0", "dexter|1.0.0"]);
    assert_eq!((&state).into_iter().count(), 2);
}

#[test]
fn status_key_uses_name_and_version() {
    let entry = status("tuning", "1.1.0", Stage::Apply, State::Complete);
    assert_eq!(entry.key().as_str(), "tuning|1.1.0");
}

/// The status mirror `status.nodeState` uses the same map shape as the annotation.
#[test]
fn status_mirror_serialises_like_the_annotation() {
    let state: NodeState = [status("a", "1", Stage::Apply, State::Complete)]
        .into_iter()
        .collect();
    let via_serde = serde_json::to_string(&state).unwrap();
    assert_eq!(via_serde, state.to_annotation());
}

fn arb_stage() -> impl Strategy<Value = Stage> {
    prop::sample::select(Stage::ALL)
}

fn arb_state() -> impl Strategy<Value = State> {
    prop::sample::select(State::ALL)
}

fn arb_status() -> impl Strategy<Value = PackageStatus> {
    (
        "[a-z][-a-z0-9]{0,8}[a-z]",
        "[0-9]{1,4}(\\.[0-9]{1,3}){0,2}(-[a-z0-9.]{1,6})?",
        // Any text, so escaping of quotes, control characters, HTML characters, U+2028/9 and
        // non-ASCII is exercised.
        any::<String>(),
        prop_oneof![Just(String::new()), "sha256:[0-9a-f]{8}"],
        arb_stage(),
        arb_state(),
        prop_oneof![Just(0), 0..i32::MAX],
    )
        .prop_map(
            |(name, version, image, container_sha, stage, state, restarts)| PackageStatus {
                name,
                version,
                image,
                container_sha,
                stage,
                state,
                restarts,
            },
        )
}

proptest! {
    #[test]
    fn encode_then_decode_is_lossless(statuses in prop::collection::vec(arb_status(), 0..8)) {
        let state: NodeState = statuses.into_iter().collect();
        let encoded = state.to_annotation();
        let decoded = NodeState::parse(&encoded).unwrap();
        prop_assert_eq!(&decoded, &state);
        prop_assert_eq!(decoded.to_annotation(), encoded.clone());
        // Go's encoder never emits these raw, so neither may we.
        for forbidden in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
            prop_assert!(!encoded.contains(forbidden), "raw {:?} in {}", forbidden, encoded);
        }
        // Keys come out sorted as strings.
        let keys: Vec<String> = decoded.iter().map(|(key, _)| key.to_string()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        prop_assert_eq!(keys, sorted);
    }

    #[test]
    fn decoding_any_valid_json_object_is_stable(statuses in prop::collection::vec(arb_status(), 0..8)) {
        // Pretty-printed, unescaped JSON (as another writer might produce) decodes to the same
        // state and re-encodes canonically.
        let state: NodeState = statuses.into_iter().collect();
        let pretty = serde_json::to_string_pretty(&state).unwrap();
        let decoded = NodeState::parse(&pretty).unwrap();
        prop_assert_eq!(decoded.to_annotation(), state.to_annotation());
    }
}

/// What upstream writes for the states the controller leaves at every step of a package's life,
/// byte for byte: exactly `name, version, image, containerSHA?, stage, state, restarts?`. Our
/// earlier releases added `lastTransitionTime` to every entry (now kept in its own annotation):
/// read, and never written.
#[test]
fn the_controllers_states_are_written_as_upstream_writes_them() {
    use skyhook_api::stage::entry_for;
    use skyhook_api::v1alpha1::Package;
    let package = Package {
        name: "tuning".into(),
        version: "1.0.0".into(),
        image: "ghcr.io/nvidia/skyhook/tuning".into(),
        ..Package::default()
    };
    let pinned = Package {
        container_sha: Some("sha256:0123abcd".into()),
        ..package.clone()
    };
    let upstream = |rest: &str| {
        format!(
            r#"{{"tuning|1.0.0":{{"name":"tuning","version":"1.0.0","image":"ghcr.io/nvidia/skyhook/tuning",{rest}}}}}"#
        )
    };
    let with_restarts = |mut entry: PackageStatus, restarts| {
        entry.restarts = restarts;
        entry
    };
    let cases = [
        (
            entry_for(&package, Stage::Apply, State::InProgress),
            upstream(r#""stage":"apply","state":"in_progress""#),
        ),
        (
            with_restarts(entry_for(&package, Stage::Apply, State::Erroring), 3),
            upstream(r#""stage":"apply","state":"erroring","restarts":3"#),
        ),
        (
            entry_for(&package, Stage::Config, State::Complete),
            upstream(r#""stage":"config","state":"complete""#),
        ),
        (
            entry_for(&package, Stage::Interrupt, State::Skipped),
            upstream(r#""stage":"interrupt","state":"skipped""#),
        ),
        (
            entry_for(&package, Stage::PostInterrupt, State::Complete),
            upstream(r#""stage":"post-interrupt","state":"complete""#),
        ),
        (
            entry_for(&package, Stage::UninstallInterrupt, State::InProgress),
            upstream(r#""stage":"uninstall-interrupt","state":"in_progress""#),
        ),
        (
            with_restarts(entry_for(&pinned, Stage::Upgrade, State::Erroring), 1),
            upstream(
                r#""containerSHA":"sha256:0123abcd","stage":"upgrade","state":"erroring","restarts":1"#,
            ),
        ),
    ];
    for (entry, expected) in cases {
        let state: NodeState = [entry.clone()].into_iter().collect();
        assert_eq!(state.to_annotation(), expected, "{entry:?}");
    }
    let ours_before = upstream(
        r#""stage":"apply","state":"complete","restarts":2,"lastTransitionTime":"2027-01-15T08:00:00Z""#,
    );
    assert_eq!(
        NodeState::parse(&ours_before).unwrap().to_annotation(),
        upstream(r#""stage":"apply","state":"complete","restarts":2"#)
    );
}
