//! Shared set-up of the end-to-end tests in `tests/`: the binaries they run (built on demand in
//! the test's own cargo target directory), a devcluster with skyhook installed, and helpers to
//! apply manifests and wait for Skyhook states.

mod binaries;
mod cluster;

pub use binaries::build_binaries;
pub use cluster::{
    Installed, apply_manifest, install, install_with_env, skyhook_api, skyhook_status,
    wait_for_skyhook_status,
};
