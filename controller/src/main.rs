//! `skyhook-controller`: parses and checks the configuration, sets up logging and TLS, then runs
//! the controller (see the `controller` library).

use anyhow::Context as _;
use clap::Parser as _;
use controller::config::{Args, Config};
use tracing::info;

/// Every reconcile builds and drops a view of each node, and every watch event is decoded into
/// fresh allocations: at 5,000 nodes glibc's malloc took a third of the controller's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = Config::from_args(&args)?;
    controller::telemetry::init(config.log)
        .map_err(|error| anyhow::anyhow!(error).context("failed to set up logging"))?;
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("another TLS provider was installed before ours"))?;
    info!(
        version = env!("CARGO_PKG_VERSION"),
        namespace = %config.pods.namespace,
        agent_image = %config.pods.agent_image,
        leader_election = config.leader_election,
        "starting skyhook-controller"
    );
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?
        .block_on(controller::run::run(config))
}
