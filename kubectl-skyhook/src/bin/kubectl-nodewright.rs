//! `kubectl-nodewright`: the plugin for NodeWrights. The same program as `kubectl-skyhook`,
//! which picks the API group from the name it is started under.

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    kubectl_skyhook::entry::main(std::env::args_os().collect()).await
}
