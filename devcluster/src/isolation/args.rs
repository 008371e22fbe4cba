//! The command lines of the hidden entry points: one place names them, for the code that starts
//! them and the code that recognises them.

use std::ffi::OsString;
use std::path::Path;

pub(super) const HOLD_NS: &str = "__hold-ns";
pub(super) const HOLD_NETNS: &str = "__hold-netns";
pub(super) const NODE_ROOT: &str = "__node-root";
pub(super) const CONTAINER: &str = "__container";
pub(super) const KEEP_NS: &str = "__keep-ns";
pub(super) const DETACHED: &str = "--detached";
/// Run by the kubelet API server (`devcluster/controlplane/kubelet.go` names them too).
pub(super) const POD_EXEC: &str = "__pod-exec";
pub(super) const KUBELET_LOGS: &str = "__kubelet-logs";

/// The argument list that runs a hidden entry point.
pub(crate) fn hold_namespace_args() -> [&'static str; 1] {
    [HOLD_NS]
}

pub(crate) fn hold_network_namespace_args() -> [&'static str; 1] {
    [HOLD_NETNS]
}

pub(crate) fn node_root_args(spec: &Path) -> [OsString; 2] {
    [NODE_ROOT.into(), spec.as_os_str().to_owned()]
}

pub(crate) fn container_args(spec: &Path) -> [OsString; 2] {
    [CONTAINER.into(), spec.as_os_str().to_owned()]
}

/// The spec path is only there so `devcluster down` finds a keeper left behind by its cluster.
pub(super) fn keep_namespace_args(spec: &Path, detached: bool) -> Vec<OsString> {
    let mut args = vec![KEEP_NS.into(), spec.as_os_str().to_owned()];
    if detached {
        args.push(DETACHED.into());
    }
    args
}
