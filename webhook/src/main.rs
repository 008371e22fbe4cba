//! `skyhook-webhook`: parses flags, sets up logging and the TLS provider, then runs the
//! webhook (see the `webhook` library).

use anyhow::Context as _;
use clap::Parser as _;
use webhook::run::{Args, run};

fn main() -> anyhow::Result<()> {
    // Before anything can build a TLS configuration: kube's client and our server must agree
    // on one provider, and rustls refuses to guess when several are compiled in.
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("another TLS provider was installed before ours"))?;
    let args = Args::parse();
    webhook::telemetry::init(args.log_format).context("failed to set up logging")?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?
        .block_on(run(args))
}
