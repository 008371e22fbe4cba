//! The `devcluster` command; see [`devcluster::cli`].
fn main() -> std::process::ExitCode {
    // The node simulator's namespace and mount helpers (`__container`, ...) must run before any
    // thread starts; see devcluster::shim.
    if let Some(code) = devcluster::shim::run_if_requested() {
        return code;
    }
    devcluster::cli::main()
}
