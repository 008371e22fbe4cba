//! `devcluster install --webhook` through the command, as a user runs it: the webhook runs in
//! the background and refuses an invalid Skyhook, `status` shows it, an `install` without
//! `--webhook` stops it and removes its configurations (so writes are no longer refused by a
//! webhook that is gone), and `down` stops everything.

use anyhow::ensure;
use e2e::devcluster_cli::{DevclusterCli, runs, text};

const WEBHOOK: &str = "skyhook-webhook";

#[test]
fn install_webhook_refuses_invalid_objects_until_installed_without_it() -> anyhow::Result<()> {
    let cli = DevclusterCli::new()?;
    cli.succeed(&["up", "--nodes", "0"])?;

    let (_, stderr) = cli.succeed(&["install", "--webhook"])?;
    ensure!(
        stderr.contains("skyhook-webhook serving the API server"),
        "{stderr}"
    );
    let pid = cli.recorded_pid(WEBHOOK)?;
    ensure!(runs(pid, WEBHOOK), "pid {pid} does not run skyhook-webhook");
    let (status, _) = cli.succeed(&["status"])?;
    ensure!(
        status.lines().any(|line| line.contains("skyhook-webhook")
            && line.contains(&format!("pid {pid}"))
            && line.contains("running")),
        "{status}"
    );

    let refused =
        cli.kubectl()
            .run_blocking(&["apply", "-f", "examples/invalid/bad-semver.yaml"])?;
    ensure!(!refused.status.success(), "an invalid Skyhook was accepted");
    ensure!(
        text(&refused.stderr).contains("spec.packages.tuning.version"),
        "{}",
        text(&refused.stderr)
    );

    // Without --webhook: the webhook stops and its configurations go, so the same manifest
    // passes (the CRD schema alone does not check versions).
    let (_, stderr) = cli.succeed(&["install"])?;
    ensure!(
        stderr.contains(&format!("stopped the running skyhook-webhook (pid {pid})")),
        "{stderr}"
    );
    ensure!(
        !runs(pid, WEBHOOK),
        "install without --webhook left it running"
    );
    let configurations = cli.kubectl().run_blocking(&[
        "get",
        "validatingwebhookconfigurations,mutatingwebhookconfigurations",
        "-o",
        "name",
    ])?;
    ensure!(
        !text(&configurations.stdout).contains("skyhook-operator"),
        "{}",
        text(&configurations.stdout)
    );
    let accepted =
        cli.kubectl()
            .run_blocking(&["apply", "-f", "examples/invalid/bad-semver.yaml"])?;
    ensure!(accepted.status.success(), "{}", text(&accepted.stderr));
    let (status, _) = cli.succeed(&["status"])?;
    ensure!(
        status.contains("skyhook-webhook") && status.contains("not installed"),
        "{status}"
    );

    // And down stops a webhook that runs.
    cli.succeed(&["install", "--webhook"])?;
    let pid = cli.recorded_pid(WEBHOOK)?;
    cli.succeed(&["down"])?;
    ensure!(!runs(pid, WEBHOOK), "down left the webhook running");
    Ok(())
}
