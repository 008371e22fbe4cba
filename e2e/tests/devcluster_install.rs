//! `devcluster install` through the command, as the demo runs it: the controller runs in the
//! background with its log in the state directory, `status` shows it, a second `install`
//! restarts it, `down` stops it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::LimitRange;
use kube::Api;

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

    fn controller_pid(&self) -> anyhow::Result<u32> {
        let path = self.state.path().join("skyhook-controller.json");
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
        .is_ok_and(|cmdline| cmdline.contains("skyhook-controller"))
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| !stat.contains(") Z "))
}

async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let parsed = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(parsed, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

#[tokio::test]
async fn install_runs_the_controller_until_down() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let cli = Cli {
        binary: devcluster::shim::devcluster_binary()?,
        state: tempfile::tempdir()?,
    };
    let (kubeconfig, _) = cli.succeed(&["up", "--nodes", "0"])?;

    let (log, stderr) = cli.succeed(&["install"])?;
    assert_eq!(
        Path::new(&log),
        cli.state.path().join("logs/skyhook-controller.log")
    );
    assert!(Path::new(&log).is_file(), "{log}");
    assert!(stderr.contains("skyhook-controller ready"), "{stderr}");
    let first = cli.controller_pid()?;
    assert!(
        running(first),
        "pid {first} does not run skyhook-controller"
    );

    let ranges: Api<LimitRange> = Api::namespaced(client(Path::new(&kubeconfig)).await?, "skyhook");
    let range = ranges.get("skyhook-limit-range").await?;
    let limits = range.spec.map(|spec| spec.limits).unwrap_or_default();
    let default_cpu = limits
        .first()
        .and_then(|item| item.default.as_ref())
        .and_then(|default| default.get("cpu"))
        .map(|quantity| quantity.0.clone());
    assert_eq!(default_cpu.as_deref(), Some("500m"));

    let (status, _) = cli.succeed(&["status"])?;
    assert!(
        status
            .lines()
            .any(|line| line.contains("skyhook-controller")
                && line.contains(&format!("pid {first}"))
                && line.contains("running")),
        "{status}"
    );

    let (_, stderr) = cli.succeed(&["install"])?;
    assert!(stderr.contains(&format!("pid {first}")), "{stderr}");
    let second = cli.controller_pid()?;
    assert_ne!(first, second);
    assert!(!running(first), "the first controller still runs");
    assert!(running(second));

    cli.succeed(&["down"])?;
    assert!(!running(second), "down left the controller running");
    Ok(())
}
