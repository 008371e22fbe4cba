//! `devcluster install --webhook` through the command, as a user runs it: the webhook runs in
//! the background and refuses an invalid Skyhook, `status` shows it, an `install` without
//! `--webhook` stops it and removes its configurations (so writes are no longer refused by a
//! webhook that is gone), and `down` stops everything.

use std::path::PathBuf;
use std::process::{Command, Output};

use anyhow::{Context, ensure};

struct Cli {
    binary: PathBuf,
    state: tempfile::TempDir,
}

impl Cli {
    fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        Command::new(&self.binary)
            .arg("--state-dir")
            .arg(self.state.path())
            .args(args)
            .output()
            .with_context(|| format!("running devcluster {args:?}"))
    }

    fn succeed(&self, args: &[&str]) -> anyhow::Result<(String, String)> {
        let output = self.run(args)?;
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        ensure!(
            output.status.success(),
            "devcluster {args:?} failed ({}):\n{stdout}\n{stderr}",
            output.status
        );
        Ok((stdout, stderr))
    }

    fn kubectl(&self, args: &[&str]) -> anyhow::Result<Output> {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.state.path().join("kubeconfig"))
            .args(args)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .with_context(|| format!("running kubectl {args:?} (is kubectl installed?)"))
    }

    fn webhook_pid(&self) -> anyhow::Result<u32> {
        let path = self.state.path().join("skyhook-webhook.json");
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?,
        )?;
        record["pid"]
            .as_u64()
            .and_then(|pid| u32::try_from(pid).ok())
            .with_context(|| format!("no pid in {record}"))
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        // Whatever the test did, nothing it started may outlive it.
        let _stopped = self.run(&["down"]);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.contains("skyhook-webhook"))
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| !stat.contains(") Z "))
}

#[test]
fn install_webhook_refuses_invalid_objects_until_installed_without_it() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let cli = Cli {
        binary: devcluster::shim::devcluster_binary()?,
        state: tempfile::tempdir()?,
    };
    cli.succeed(&["up", "--nodes", "0"])?;

    let (_, stderr) = cli.succeed(&["install", "--webhook"])?;
    ensure!(
        stderr.contains("skyhook-webhook serving the API server"),
        "{stderr}"
    );
    let pid = cli.webhook_pid()?;
    ensure!(running(pid), "pid {pid} does not run skyhook-webhook");
    let (status, _) = cli.succeed(&["status"])?;
    ensure!(
        status.lines().any(|line| line.contains("skyhook-webhook")
            && line.contains(&format!("pid {pid}"))
            && line.contains("running")),
        "{status}"
    );

    let refused = cli.kubectl(&["apply", "-f", "examples/invalid/bad-semver.yaml"])?;
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
    ensure!(!running(pid), "install without --webhook left it running");
    let configurations = cli.kubectl(&[
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
    let accepted = cli.kubectl(&["apply", "-f", "examples/invalid/bad-semver.yaml"])?;
    ensure!(accepted.status.success(), "{}", text(&accepted.stderr));
    let (status, _) = cli.succeed(&["status"])?;
    ensure!(
        status.contains("skyhook-webhook") && status.contains("not installed"),
        "{status}"
    );

    // And down stops a webhook that runs.
    cli.succeed(&["install", "--webhook"])?;
    let pid = cli.webhook_pid()?;
    cli.succeed(&["down"])?;
    ensure!(!running(pid), "down left the webhook running");
    Ok(())
}
