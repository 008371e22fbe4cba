//! No two files of one crate import each other, except the circles listed in
//! `known-circles.txt`, which are being taken apart: a new circle fails, and so does a listed
//! one that is gone (take it off the list, so that it cannot come back).

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use layering::{circles, crate_graph, read_crate, workspace_members};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<crate>: <file>, <file>, ...` per circle, files relative to the crate's `src/`.
fn circle_lines() -> BTreeSet<String> {
    let manifest = workspace().join("Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|error| panic!("reading {}: {error}", manifest.display()));
    let members = workspace_members(&manifest);
    assert!(
        !members.is_empty(),
        "no workspace members in the root Cargo.toml"
    );
    let mut lines = BTreeSet::new();
    for name in &members {
        let sources = read_crate(&workspace().join(name))
            .unwrap_or_else(|error| panic!("reading the sources of {name}: {error}"));
        for circle in circles(&crate_graph(&sources)) {
            let files: Vec<String> = circle
                .iter()
                .map(|file| file.to_string_lossy().into_owned())
                .collect();
            lines.insert(format!("{name}: {}", files.join(", ")));
        }
    }
    lines
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("known-circles.txt");
    let text = std::fs::read_to_string(&list)
        .unwrap_or_else(|error| panic!("reading {}: {error}", list.display()));
    let known: BTreeSet<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let found = circle_lines();
    let new: Vec<&String> = found.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&found).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "files of one crate import each other:\n  {}\n\
         (move what both need into a module below both, or have one hand the other typed values)\n\
         circles listed in {} that are gone (take them off the list):\n  {}",
        new.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
        list.display(),
        gone.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
    );
}
