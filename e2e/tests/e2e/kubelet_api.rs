//! The kubelet API of full devcluster nodes, through the real `kubectl` and API server (which
//! verifies each node's serving certificate against the cluster CA):
//!
//! - a package whose apply step fails: `kubectl skyhook package logs` shows (and follows) the
//!   failing stage's output, and `kubectl logs` reads the package pod's init containers by name;
//! - `kubectl exec` into a running pod: the command runs in the pod (its hostname), gets stdin,
//!   and its exit code comes back; `kubectl logs -f` of it ends when the pod is deleted.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use e2e::nodes::{has_status, wait_for_node};
use e2e::{Kubectl, Setup, TEST_NODE_LABEL, TEST_NODE_VALUE};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

const NODE: &str = "node-1";
const SKYHOOK: &str = "failing-stage";
const PACKAGE: &str = "shellscript";
const FAILURE_LINE: &str = "apply is about to fail";

fn failing_skyhook() -> String {
    format!(
        r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: {SKYHOOK}
spec:
  nodeSelectors:
    matchLabels:
      {TEST_NODE_LABEL}: {TEST_NODE_VALUE}
  packages:
    {PACKAGE}:
      version: "1.1.1"
      image: ghcr.io/nvidia/skyhook-packages/shellscript
      configMap:
        apply.sh: |
          #!/bin/bash
          echo "{FAILURE_LINE}"
          exit 7
"#
    )
}

const SHELL_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: shell
  namespace: default
spec:
  nodeName: node-1
  containers:
  - name: main
    image: devcluster.local/shell
    command: ["/bin/sh", "-c", "echo shell is up; exec sleep 3600"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_exec_through_the_kubelet_api() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup {
        nodes: 1,
        node_labels: BTreeMap::from([(TEST_NODE_LABEL.to_owned(), TEST_NODE_VALUE.to_owned())]),
        ..Setup::default()
    })
    .await?;
    let client = installed.cluster.client()?;
    let kubectl = Kubectl::with_plugin(&installed)?;

    e2e::apply_yaml(&client, &failing_skyhook()).await?;
    wait_for_node(&client, NODE, "the package to be erroring", |node| {
        has_status(node, SKYHOOK, "erroring")
    })
    .await
    .with_context(|| installed.controller_log_tail(30))?;
    package_logs_show_the_failing_stage(&kubectl).await?;
    kubectl_logs_reads_init_containers(&kubectl, &client).await?;

    e2e::apply_yaml(&client, SHELL_POD).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    e2e::wait_for(&pods, "shell", "the shell pod to run", |pod| {
        pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await?;
    exec_runs_in_the_pod(&kubectl).await?;
    following_ends_with_the_container(&installed.cluster.kubeconfig_path(), &kubectl).await
}

/// The failing container restarts with a back-off, so its current log can be a run that has
/// only just started: ask again until a run's output is there.
async fn package_logs_show_the_failing_stage(kubectl: &Kubectl) -> anyhow::Result<()> {
    let args = [
        "skyhook",
        "package",
        "logs",
        PACKAGE,
        "--skyhook",
        SKYHOOK,
        "--stage",
        "apply",
    ];
    let stdout = until_output_contains(kubectl, &args, FAILURE_LINE).await?;
    let header = stdout.lines().next().unwrap_or_default();
    ensure!(
        header.starts_with(&format!("==> Pod: {SKYHOOK}-{PACKAGE}-"))
            && header.contains(&format!(", Container: {PACKAGE}-apply ["))
            && header.ends_with(&format!(", Node: {NODE} <==")),
        "package logs header: {header:?}\n{stdout}"
    );
    // Following ends with the run of the container it reads, which fails at once.
    let mut follow = args.to_vec();
    follow.push("-f");
    until_output_contains(kubectl, &follow, FAILURE_LINE).await?;
    Ok(())
}

async fn kubectl_logs_reads_init_containers(
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), e2e::pods::NAMESPACE);
    let listed = pods
        .list(&ListParams::default().labels(&format!("skyhook.nvidia.com/name={SKYHOOK}")))
        .await?;
    let pod = listed
        .items
        .iter()
        .filter_map(|pod| pod.metadata.name.as_deref())
        .find(|name| name.starts_with(&format!("{SKYHOOK}-{PACKAGE}-")))
        .context("no package pod of the failing Skyhook")?;
    let namespace = e2e::pods::NAMESPACE;
    let container = format!("{PACKAGE}-apply");
    let logs = [
        "logs",
        "-n",
        namespace,
        pod,
        "-c",
        &container,
        "--timestamps",
    ];
    let stdout = until_output_contains(kubectl, &logs, FAILURE_LINE).await?;
    let line = stdout
        .lines()
        .find(|line| line.contains(FAILURE_LINE))
        .unwrap_or_default();
    let (time, _) = line.split_once(' ').unwrap_or_default();
    ensure!(
        time.parse::<jiff::Timestamp>().is_ok(),
        "--timestamps: no time before the line {line:?}"
    );
    // The package's first init container copies the package and ends: its log is complete.
    let init = format!("{PACKAGE}-init");
    kubectl
        .succeed(&["logs", "-n", namespace, pod, "-c", &init])
        .await?;
    let missing = kubectl
        .refused(&["logs", "-n", namespace, pod, "-c", "no-such-container"])
        .await?;
    ensure!(missing.contains("no-such-container"), "{missing}");
    Ok(())
}

async fn exec_runs_in_the_pod(kubectl: &Kubectl) -> anyhow::Result<()> {
    let hostname = kubectl
        .succeed(&["exec", "shell", "--", "hostname"])
        .await?;
    ensure!(
        hostname.trim() == "shell",
        "hostname in the pod: {hostname:?}"
    );

    let echoed = kubectl
        .run_with_input(&["exec", "-i", "shell", "--", "cat"], b"through stdin\n")
        .await?;
    ensure!(
        echoed.status.success() && echoed.stdout == b"through stdin\n",
        "exec -i: {echoed:?}"
    );

    let failed = kubectl
        .run(&[
            "exec",
            "shell",
            "--",
            "sh",
            "-c",
            "echo to-stderr >&2; exit 3",
        ])
        .await?;
    let stderr = String::from_utf8_lossy(&failed.stderr);
    ensure!(
        failed.status.code() == Some(3)
            && stderr.contains("to-stderr")
            && stderr.contains("command terminated with exit code 3"),
        "exec of a failing command: {failed:?}"
    );

    let missing = kubectl
        .refused(&["exec", "shell", "--", "no-such-command"])
        .await?;
    ensure!(
        missing.contains("executable file not found"),
        "exec of a missing command: {missing}"
    );
    Ok(())
}

/// `kubectl logs -f` streams the running container and ends once the pod is force-deleted.
async fn following_ends_with_the_container(
    kubeconfig: &std::path::Path,
    kubectl: &Kubectl,
) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let mut follow = tokio::process::Command::new("kubectl")
        .args(["logs", "-f", "shell"])
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running kubectl logs -f")?;
    let stdout = follow.stdout.take().context("kubectl's stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let first = tokio::time::timeout(e2e::WAIT, lines.next_line())
        .await
        .context("kubectl logs -f printed nothing")?
        .context("reading kubectl logs -f")?;
    ensure!(
        first.as_deref() == Some("shell is up"),
        "first line: {first:?}"
    );
    kubectl
        .succeed(&["delete", "pod", "shell", "--grace-period=0", "--force"])
        .await?;
    let status = tokio::time::timeout(e2e::WAIT, follow.wait())
        .await
        .context("kubectl logs -f did not end with the pod")?
        .context("waiting for kubectl logs -f")?;
    ensure!(status.success(), "kubectl logs -f ended with {status}");
    Ok(())
}

/// Runs `kubectl args` until it succeeds with `needle` in its output; returns that output.
async fn until_output_contains(
    kubectl: &Kubectl,
    args: &[&str],
    needle: &str,
) -> anyhow::Result<String> {
    let started = Instant::now();
    loop {
        let output = kubectl.run(args).await?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() && stdout.contains(needle) {
            return Ok(stdout);
        }
        if started.elapsed() > e2e::WAIT {
            bail!(
                "`kubectl {}` never showed {needle:?}; last stdout:\n{stdout}\nstderr:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
