//! The CRDs committed under `chart/crds/` are exactly what `crdgen` generates from the types.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use skyhook_api::crd;

#[test]
fn committed_crds_match_the_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../chart/crds");
    for generated in crd::crds() {
        let path = dir.join(generated.file_name);
        let want = generated.to_yaml().unwrap();
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale or missing: run `cargo run -p skyhook-api --bin crdgen -- --write` and commit",
            path.display()
        );
    }
}

#[test]
fn the_committed_nodewright_crd_template_matches_the_types() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crd::NODEWRIGHT_CRDS_TEMPLATE);
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == crd::nodewright_crds_template().unwrap(),
        "{} is stale or missing: run `cargo run -p skyhook-api --bin crdgen -- --write` and commit",
        path.display()
    );
    assert!(
        !have.contains("{{"),
        "a template: Helm would read a description's braces as an action"
    );
}

#[test]
fn both_kinds_are_cluster_scoped_in_the_api_group() {
    for generated in crd::crds() {
        let spec = &generated.crd.spec;
        assert_eq!(spec.group, "skyhook.nvidia.com");
        assert_eq!(spec.scope, "Cluster", "{}", generated.file_name);
        assert_eq!(spec.versions.len(), 1);
        assert_eq!(spec.versions[0].name, "v1alpha1");
    }
}

#[test]
fn skyhook_has_status_subresource_short_name_and_printer_columns() {
    let [skyhook, policy] = crd::crds();
    let version = &skyhook.crd.spec.versions[0];
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    assert_eq!(
        skyhook.crd.spec.names.short_names.as_deref(),
        Some(&["sky".to_owned()][..])
    );
    let columns: Vec<(&str, &str)> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Status", ".status.status"),
            ("Priority", ".spec.priority"),
            ("Age", ".metadata.creationTimestamp"),
            ("Nodes In-Progress", ".status.nodesInProgress"),
            ("Complete Nodes", ".status.completeNodes"),
            ("Packages", ".status.packageList"),
            ("Policy", ".spec.deploymentPolicy"),
        ]
    );

    let version = &policy.crd.spec.versions[0];
    assert!(
        version.subresources.is_none(),
        "DeploymentPolicy has no status"
    );
    assert_eq!(
        policy.crd.spec.names.short_names.as_deref(),
        Some(&["dp".to_owned()][..])
    );
}
