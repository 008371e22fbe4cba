//! Every node key, label, finalizer, condition type and pod label is spelled from its API
//! group's prefix in one place, `skyhook_api::keys::Keys`, so that a second API group gets
//! its keys from the same type. A key spelled out anywhere else in the operator's code (its
//! tests may spell upstream's keys on purpose) fails here.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::panic)]

use std::path::{Path, PathBuf};

use layering::{read_crate, without_test_modules, workspace_members};

const PREFIX: &str = "skyhook.nvidia.com/";

/// Files that may spell the prefix, and why.
const ALLOWED: [&str; 2] = [
    // The one place.
    "skyhook-api/src/keys.rs",
    // The webhook's own serving-certificate Secret, not a key of any Skyhook object.
    "webhook/src/cert_sync.rs",
];

/// Crates that are tests, which spell upstream's keys on purpose to check ours against them.
const TEST_CRATES: [&str; 2] = ["e2e", "tools/layering"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The prefixed keys spelled in `code` outside comments; an API version
/// (`skyhook.nvidia.com/v1alpha1`) is no key.
fn spelled_keys(code: &str) -> Vec<String> {
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .flat_map(|line| line.match_indices(PREFIX).map(move |(at, _)| &line[at..]))
        .filter(|rest| !rest[PREFIX.len()..].starts_with("v1alpha1"))
        .map(|rest| {
            rest.split(['"', ' ', ',', ')'])
                .next()
                .unwrap_or(rest)
                .to_owned()
        })
        .collect()
}

#[test]
fn keys_are_spelled_in_one_place() {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml"))
        .unwrap_or_else(|error| panic!("reading the workspace Cargo.toml: {error}"));
    let mut spelled = Vec::new();
    for member in workspace_members(&manifest) {
        if TEST_CRATES.contains(&member.as_str()) {
            continue;
        }
        let sources = read_crate(&workspace().join(&member))
            .unwrap_or_else(|error| panic!("reading the sources of {member}: {error}"));
        for (file, text) in sources {
            let path = format!("{member}/src/{}", file.display());
            let is_test = path.ends_with("tests.rs") || path.contains("/tests/");
            if is_test || ALLOWED.contains(&path.as_str()) {
                continue;
            }
            let (code, _) = without_test_modules(&text);
            for key in spelled_keys(&code) {
                spelled.push(format!("{path}: {key}"));
            }
        }
    }
    assert!(
        spelled.is_empty(),
        "keys spelled outside skyhook_api::keys (use keys::SKYHOOK.<key>, or add the key to \
         `Keys`):\n  {}",
        spelled.join("\n  ")
    );
}

#[test]
fn comments_and_api_versions_are_no_keys() {
    let code = "// skyhook.nvidia.com/pause\nlet v = \"skyhook.nvidia.com/v1alpha1\";\nlet k = \"skyhook.nvidia.com/pause\";";
    assert_eq!(spelled_keys(code), ["skyhook.nvidia.com/pause"]);
}
