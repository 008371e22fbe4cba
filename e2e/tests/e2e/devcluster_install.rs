//! `devcluster install` through the command, as the demo runs it: the controller runs in the
//! background with its log in the state directory, `status` shows it, a second `install`
//! restarts it, `down` stops it.

use std::path::Path;

use e2e::devcluster_cli::{DevclusterCli, runs};
use k8s_openapi::api::core::v1::LimitRange;
use kube::Api;

const CONTROLLER: &str = "skyhook-controller";

#[tokio::test]
async fn install_runs_the_controller_until_down() -> anyhow::Result<()> {
    let cli = DevclusterCli::new()?;
    let (kubeconfig, _) = cli.succeed(&["up", "--nodes", "0"])?;

    let (log, stderr) = cli.succeed(&["install"])?;
    assert_eq!(
        Path::new(&log),
        cli.state_dir().join("logs/skyhook-controller.log")
    );
    assert!(Path::new(&log).is_file(), "{log}");
    assert!(stderr.contains("skyhook-controller ready"), "{stderr}");
    let first = cli.recorded_pid(CONTROLLER)?;
    assert!(
        runs(first, CONTROLLER),
        "pid {first} does not run skyhook-controller"
    );

    let ranges: Api<LimitRange> = Api::namespaced(
        devcluster::cli::client_for(Path::new(&kubeconfig)).await?,
        "skyhook",
    );
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
    let second = cli.recorded_pid(CONTROLLER)?;
    assert_ne!(first, second);
    assert!(!runs(first, CONTROLLER), "the first controller still runs");
    assert!(runs(second, CONTROLLER));

    cli.succeed(&["down"])?;
    assert!(
        !runs(second, CONTROLLER),
        "down left the controller running"
    );
    Ok(())
}
