//! The `devcluster` command: devcluster's general verbs and Skyhook's; see [`skyhook_devcluster::cli`].
fn main() -> std::process::ExitCode {
    // The node simulator's namespace and mount helpers (`__container`, ...) must run before any
    // thread starts; see devcluster::isolation.
    if let Some(code) = devcluster::isolation::run_if_requested() {
        return code;
    }
    devcluster::cli::main(&skyhook_devcluster::cli::SkyhookVerbs)
}
