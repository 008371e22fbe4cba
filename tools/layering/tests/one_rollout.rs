//! The budget rules are put together in one place, `skyhook_api::rollout`: assigning nodes to
//! compartments, classifying them, evaluating a finished batch and selecting. A crate that
//! calls these pieces itself is a second copy of the rollout, which drifts from the first (the
//! plugin's `plan` once predicted batches the controller never made); it fails here.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::panic)]

use std::path::{Path, PathBuf};

use layering::{code_only, read_crate, without_test_modules, workspace_members};

/// The pieces only the rollout may combine.
const PIECES: [&str; 4] = [
    "assign_nodes",
    "CompartmentNodes",
    "evaluate_batch",
    "select_gated",
];

/// Where the pieces are defined, and the one place that combines them.
const ALLOWED: [&str; 2] = ["skyhook-api/src/budget/", "skyhook-api/src/rollout.rs"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn only_the_rollout_combines_the_budget_rules() {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml"))
        .unwrap_or_else(|error| panic!("reading the workspace Cargo.toml: {error}"));
    let members = workspace_members(&manifest);
    assert!(members.contains(&"controller".to_owned()), "{members:?}");
    let mut copies = Vec::new();
    for member in members {
        let sources = read_crate(&workspace().join(&member))
            .unwrap_or_else(|error| panic!("reading the sources of {member}: {error}"));
        for (file, text) in sources {
            let path = format!("{member}/src/{}", file.display());
            if ALLOWED.iter().any(|allowed| path.starts_with(allowed)) {
                continue;
            }
            let (code, _) = without_test_modules(&code_only(&text));
            for piece in PIECES.iter().filter(|piece| code.contains(*piece)) {
                copies.push(format!("{path} uses {piece}"));
            }
        }
    }
    assert!(
        copies.is_empty(),
        "the budget rules are combined outside skyhook_api::rollout (call `rollout` or \
         `batch_numbers` instead):\n  {}",
        copies.join("\n  ")
    );
}
