//! `kubectl-skyhook`: the plugin for Skyhooks, and for NodeWrights when installed (or linked)
//! as `kubectl-nodewright`.

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    kubectl_skyhook::entry::main(std::env::args_os().collect()).await
}
