//! The per-package history file, `<state>/history/<package>.json`:
//! `{"current-version": "1.2.0", "history": [{"version": "1.2.0", "time": "..."}, ...]}`,
//! newest first, written in Python's `json.dump` layout so both agents produce the same bytes.

use jiff::Timestamp;
use serde_json::{Map, Value};

use crate::timefmt;

/// The version recorded when `uninstall-check` succeeds.
pub const UNINSTALLED: &str = "uninstalled";
/// The previous version reported to upgrade steps when there is no usable history.
pub const UNKNOWN: &str = "unknown";

/// What the history file held when the agent looked.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryState {
    Missing,
    /// A JSON object with a string `current-version` and a `history` array; other keys are kept.
    Valid(Map<String, Value>),
    /// Anything else: upstream moves such a file to `<file>.backup` and starts over.
    Corrupt,
}

impl HistoryState {
    pub fn read(contents: Option<&[u8]>) -> Self {
        let Some(contents) = contents else {
            return HistoryState::Missing;
        };
        match serde_json::from_slice::<Value>(contents) {
            Ok(Value::Object(map))
                if map.get("current-version").is_some_and(Value::is_string)
                    && map.get("history").is_some_and(Value::is_array) =>
            {
                HistoryState::Valid(map)
            }
            _ => HistoryState::Corrupt,
        }
    }

    /// The installed version as upgrade steps see it (`PREVIOUS_VERSION`).
    pub fn current_version(&self) -> &str {
        match self {
            HistoryState::Valid(map) => map
                .get("current-version")
                .and_then(Value::as_str)
                .unwrap_or(UNKNOWN),
            HistoryState::Missing | HistoryState::Corrupt => UNKNOWN,
        }
    }

    /// The file contents after recording `version` at `now` (newest first).
    pub fn record(&self, version: &str, now: Timestamp) -> String {
        let mut map = match self {
            HistoryState::Valid(map) => map.clone(),
            HistoryState::Missing | HistoryState::Corrupt => Map::new(),
        };
        let mut entry = Map::new();
        entry.insert("version".into(), Value::String(version.to_string()));
        entry.insert("time".into(), Value::String(timefmt::utc_offset(now)));
        let mut entries = match map.remove("history") {
            Some(Value::Array(entries)) => entries,
            _ => Vec::new(),
        };
        entries.insert(0, Value::Object(entry));
        map.insert("current-version".into(), Value::String(version.to_string()));
        map.insert("history".into(), Value::Array(entries));
        let mut out = String::new();
        write_python_json(
            &Value::Object(map),
            &["current-version", "history"],
            &mut out,
        );
        out
    }
}

/// Python's `json.dump` layout: `", "` and `": "` separators, ASCII-only strings. Keys listed
/// in `first` come first (Python keeps insertion order); history entries put `version` before
/// `time`.
fn write_python_json(value: &Value, first: &[&str], out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_python_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(item, &["version", "time"], out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let ordered = first
                .iter()
                .filter_map(|key| map.get_key_value(*key))
                .chain(map.iter().filter(|(key, _)| !first.contains(&key.as_str())));
            for (i, (key, item)) in ordered.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_string(key, out);
                out.push_str(": ");
                write_python_json(item, &["version", "time"], out);
            }
            out.push('}');
        }
    }
}

fn write_python_string(text: &str, out: &mut String) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(ch),
            _ => {
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_missing_file_starts_a_history() {
        let state = HistoryState::read(None);
        assert_eq!(state, HistoryState::Missing);
        assert_eq!(state.current_version(), "unknown");
        assert_eq!(
            state.record("1.1.1", at("2025-06-01T12:00:00.5Z")),
            r#"{"current-version": "1.1.1", "history": [{"version": "1.1.1", "time": "2025-06-01T12:00:00.500000+00:00"}]}"#
        );
    }

    #[test]
    fn an_update_puts_the_newest_entry_first_and_keeps_unknown_keys() {
        let existing = br#"{"current-version": "1.0.0", "history": [{"version": "1.0.0", "time": "2025-01-01T00:00:00+00:00", "by": "ops"}], "note": "x"}"#;
        let state = HistoryState::read(Some(existing));
        assert_eq!(state.current_version(), "1.0.0");
        assert_eq!(
            state.record("1.1.0", at("2025-06-01T12:00:00Z")),
            r#"{"current-version": "1.1.0", "history": [{"version": "1.1.0", "time": "2025-06-01T12:00:00+00:00"}, {"version": "1.0.0", "time": "2025-01-01T00:00:00+00:00", "by": "ops"}], "note": "x"}"#
        );
    }

    #[test]
    fn uninstall_records_the_uninstalled_marker() {
        let state = HistoryState::read(Some(
            br#"{"current-version": "1.0.0", "history": [{"version": "1.0.0", "time": "t"}]}"#,
        ));
        let text = state.record(UNINSTALLED, at("2025-06-01T12:00:00Z"));
        assert!(text.starts_with(
            r#"{"current-version": "uninstalled", "history": [{"version": "uninstalled""#
        ));
        assert_eq!(
            HistoryState::read(Some(text.as_bytes())).current_version(),
            "uninstalled"
        );
    }

    #[test]
    fn corrupt_files_are_detected() {
        for contents in [
            &b"{not json"[..],
            b"[]",
            b"{}",
            br#"{"current-version": 1, "history": []}"#,
            br#"{"current-version": "1.0.0", "history": {}}"#,
            b"",
        ] {
            let state = HistoryState::read(Some(contents));
            assert_eq!(state, HistoryState::Corrupt, "{contents:?}");
            assert_eq!(state.current_version(), "unknown");
            assert!(
                state
                    .record("2.0.0", at("2025-06-01T12:00:00Z"))
                    .starts_with(r#"{"current-version": "2.0.0", "history": [{"version": "2.0.0""#)
            );
        }
    }

    #[test]
    fn strings_are_escaped_like_python_ensure_ascii() {
        let mut out = String::new();
        write_python_string("a\"b\\c\nd\u{7f}é😀\u{1}", &mut out);
        assert_eq!(out, r#""a\"b\\c\nd\u007f\u00e9\ud83d\ude00\u0001""#);
    }
}
