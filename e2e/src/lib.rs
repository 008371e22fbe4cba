//! Shared set-up of the end-to-end tests in `tests/e2e/` (one test executable, so a change here
//! links once): the binaries they run (built on demand in the test's own cargo target
//! directory), a devcluster with skyhook installed, the real `kubectl` and `helm`, and helpers to
//! apply manifests, wait for states, read node bookkeeping, record pods and scrape metrics.

mod apply;
pub mod bench;
mod binaries;
mod both_groups;
pub mod budget;
pub mod checks;
mod cluster;
pub mod devcluster_cli;
pub mod helm;
pub mod host;
mod kubectl;
pub mod metrics;
pub mod nodes;
pub mod pods;
pub mod promql;
pub mod rbac;
mod recorder;
mod wait;

pub use apply::{
    apply_nodewright_crds, apply_yaml, merge_patch_skyhook, policy_manifest, skyhook_manifest,
};
pub use binaries::{binary_dir, build_binaries, workspace};
pub use both_groups::{install_serving_both_groups, start_serving_both_groups};
pub use cluster::{
    AGENTLESS_AGENT_IMAGE, Installed, Setup, TEST_NODE_LABEL, TEST_NODE_VALUE, apply_manifest,
    install, install_built, install_controller, install_with, install_with_env, skyhook_api,
    skyhook_status, wait_for_nodewright_status, wait_for_skyhook, wait_for_skyhook_status,
};
pub use kubectl::Kubectl;
pub use recorder::{Recorder, record_node};
pub use wait::{WAIT, wait_for, within};
