//! Upstream's operator + real agent scenarios (spec §6.5): the controller runs the real
//! `skyhook-agent` on a full devcluster node, with the `shellscript` package, and the tests read
//! what the agent left in the node's host root (logs, step flags, history, interrupt flags).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use e2e::{Installed, Setup, TEST_NODE_LABEL, TEST_NODE_VALUE};

const NODE: &str = "node-1";
/// The package's name and version in its config.json, which key the agent's host layout.
const PACKAGE_DIRS: &str = "shellscript/1.1.1";

/// One full node labelled for upstream's Skyhooks, the built agent as `AGENT_IMAGE`.
async fn install() -> anyhow::Result<Installed> {
    e2e::install_with(Setup {
        nodes: 1,
        node_labels: BTreeMap::from([(TEST_NODE_LABEL.to_owned(), TEST_NODE_VALUE.to_owned())]),
        ..Setup::default()
    })
    .await
}

/// A Skyhook named `name` with one shellscript package `package` whose configMap is `config_map`
/// (YAML lines indented for the `configMap:` block) and whose remaining fields are `extra`.
fn shellscript_skyhook(name: &str, package: &str, extra: &str, config_map: &str) -> String {
    format!(
        r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: {name}
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  packages:
    {package}:
      version: "1.1.1"
      image: ghcr.io/nvidia/skyhook-packages/shellscript
{extra}      configMap:
{config_map}"#
    )
}

/// Applies `yaml` and waits for the Skyhook `name` to complete.
async fn run_to_completion(installed: &Installed, name: &str, yaml: &str) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    e2e::apply_yaml(&client, yaml).await?;
    e2e::wait_for_skyhook_status(&client, name, "complete", e2e::WAIT)
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    Ok(())
}

/// The node's host root.
fn node_root(installed: &Installed) -> anyhow::Result<PathBuf> {
    installed
        .cluster
        .node(NODE)
        .and_then(|node| node.root())
        .with_context(|| format!("{NODE} has no host root (not a full node?)"))
}

/// The names of the entries of `dir`, sorted; empty if it does not exist.
fn entries(dir: &Path) -> anyhow::Result<Vec<String>> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("listing {}", dir.display())),
    };
    let mut names = Vec::new();
    for entry in read {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// The `*.log` files of the package's log directory for `skyhook`.
fn step_logs(root: &Path, skyhook: &str) -> anyhow::Result<Vec<PathBuf>> {
    let dir = root.join(format!("var/log/skyhook/{skyhook}/{PACKAGE_DIRS}"));
    Ok(entries(&dir)?
        .into_iter()
        .filter(|name| name.ends_with(".log"))
        .map(|name| dir.join(name))
        .collect())
}

/// simple: the config script's output reaches the step logs, and the agent leaves its START
/// flag, the step flags and the package history under `/var/lib/skyhook/<skyhook>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_writes_logs_flags_and_history() -> anyhow::Result<()> {
    const NAME: &str = "simple-agent-operator";
    let installed = install().await?;
    let config_map = r#"        config.sh: |
          #!/bin/bash
          echo "Hello, world!"
          cat $SKYHOOK_DIR/configmaps/extra.txt
        extra.txt: |
          This is a test
"#;
    run_to_completion(
        &installed,
        NAME,
        &shellscript_skyhook(NAME, NAME, "", config_map),
    )
    .await?;

    let root = node_root(&installed)?;
    let mut logs = String::new();
    for log in step_logs(&root, NAME)? {
        logs.push_str(
            &std::fs::read_to_string(&log).with_context(|| format!("reading {}", log.display()))?,
        );
    }
    assert!(logs.contains("Hello, world!"), "step logs: {logs}");
    assert!(logs.contains("This is a test"), "step logs: {logs}");

    let state = root.join(format!("var/lib/skyhook/{NAME}"));
    assert!(entries(&state.join("flags"))?.contains(&"START".to_owned()));
    let step_flags = entries(&state.join("flags").join(PACKAGE_DIRS))?;
    assert!(
        step_flags
            .iter()
            .any(|flag| flag.starts_with("shellscript_run.sh_")),
        "step flags: {step_flags:?}"
    );
    assert!(entries(&state.join("history"))?.contains(&"shellscript.json".to_owned()));
    Ok(())
}

/// interrupt: a `noop` interrupt completes by writing its flag under the resource ID
/// `<skyhook>-<uid>-<generation>_<package>_<version>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noop_interrupt_leaves_its_flag() -> anyhow::Result<()> {
    const NAME: &str = "interrupt-agent-operator";
    let installed = install().await?;
    let config_map = r#"        config.sh: |
          #!/bin/bash
          echo "Hello, world!"
"#;
    let interrupt = "      interrupt:\n        type: noop\n";
    run_to_completion(
        &installed,
        NAME,
        &shellscript_skyhook(NAME, NAME, interrupt, config_map),
    )
    .await?;

    let client = installed.cluster.client()?;
    let skyhook = e2e::skyhook_api(&client).get(NAME).await?;
    let uid = skyhook.metadata.uid.clone().unwrap_or_default();
    let generation = skyhook.metadata.generation.unwrap_or_default();
    let resource_id = format!("{NAME}-{uid}-{generation}_{NAME}_1.1.1");
    let flags = node_root(&installed)?
        .join(format!("var/lib/skyhook/{NAME}/interrupts/flags"))
        .join(&resource_id);
    assert_eq!(entries(&flags)?, ["no_op.complete"], "{}", flags.display());

    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let node = nodes.get(NODE).await?;
    assert_eq!(
        e2e::nodes::stages(&node, NAME),
        e2e::nodes::expect_stages(&[(&format!("{NAME}|1.1.1"), "post-interrupt", "complete")])
    );
    Ok(())
}

/// The interrupt marker directory of the Skyhook `name`'s package `package` at its current
/// generation (the resource ID `<skyhook>-<uid>-<generation>_<package>_<version>`).
async fn interrupt_flags(
    installed: &Installed,
    name: &str,
    package: &str,
) -> anyhow::Result<PathBuf> {
    let client = installed.cluster.client()?;
    let skyhook = e2e::skyhook_api(&client).get(name).await?;
    let uid = skyhook.metadata.uid.clone().unwrap_or_default();
    let generation = skyhook.metadata.generation.unwrap_or_default();
    Ok(node_root(installed)?
        .join(format!("var/lib/skyhook/{name}/interrupts/flags"))
        .join(format!("{name}-{uid}-{generation}_{package}_1.1.1")))
}

/// The text of every step log of `skyhook`'s package.
fn all_step_logs(root: &Path, skyhook: &str) -> anyhow::Result<String> {
    let mut logs = String::new();
    for log in step_logs(root, skyhook)? {
        logs.push_str(
            &std::fs::read_to_string(&log).with_context(|| format!("reading {}", log.display()))?,
        );
    }
    Ok(logs)
}

/// A reboot by the real agent: `reboot` runs once, the shutdown stops it, and the interrupt pod
/// run again on the new boot confirms it by the changed boot ID (its pending marker becomes
/// `node_restart_0.complete`) instead of rebooting again; the post-interrupt stage then runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reboot_runs_once_and_is_confirmed_by_the_new_boot_id() -> anyhow::Result<()> {
    const NAME: &str = "reboot-agent-operator";
    let installed = install().await?;
    let node = installed.cluster.node(NODE).context("node handle")?;
    let boot_before = node.boot_id()?;
    let config_map = r#"        post_interrupt.sh: |
          #!/bin/bash
          echo "post interrupt ran"
        post_interrupt_check.sh: |
          #!/bin/bash
          echo "post interrupt checked"
"#;
    let interrupt = "      interrupt:\n        type: reboot\n";
    run_to_completion(
        &installed,
        NAME,
        &shellscript_skyhook(NAME, NAME, interrupt, config_map),
    )
    .await?;

    assert_ne!(node.boot_id()?, boot_before, "the node rebooted");
    let journal = node.journal()?;
    let reboots: Vec<&String> = journal
        .iter()
        .filter(|line| line.ends_with(" reboot"))
        .collect();
    assert_eq!(reboots.len(), 1, "exactly one reboot: {journal:?}");
    let flags = interrupt_flags(&installed, NAME, NAME).await?;
    assert_eq!(
        entries(&flags)?,
        ["node_restart_0.complete"],
        "the pending marker was promoted: {}",
        flags.display()
    );
    // Marked complete on the new boot, after the shutdown and the reboot delay (5 s), not
    // before `reboot` ran as the Python agent marked it.
    let rebooted_at: jiff::Timestamp = reboots[0]
        .split_once(' ')
        .map(|(time, _)| time)
        .context("journal line without a time")?
        .parse()?;
    let marked: f64 = std::fs::read_to_string(flags.join("node_restart_0.complete"))?
        .trim()
        .parse()?;
    assert!(
        marked >= rebooted_at.as_second() as f64 + 4.0,
        "marked at {marked}, reboot at {rebooted_at}"
    );
    let logs = all_step_logs(&node_root(&installed)?, NAME)?;
    assert!(logs.contains("post interrupt ran"), "step logs: {logs}");
    assert!(logs.contains("post interrupt checked"), "step logs: {logs}");
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> =
        kube::Api::all(installed.cluster.client()?);
    assert_eq!(
        e2e::nodes::stages(&nodes.get(NODE).await?, NAME),
        e2e::nodes::expect_stages(&[(&format!("{NAME}|1.1.1"), "post-interrupt", "complete")])
    );
    Ok(())
}

/// service_restart: `systemctl daemon-reload`, then the unit's restart, each once, each marked
/// complete after it succeeded; the post-interrupt stage runs after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_interrupt_reloads_then_restarts_once() -> anyhow::Result<()> {
    const NAME: &str = "service-restart-agent-operator";
    let installed = install().await?;
    let config_map = r#"        post_interrupt.sh: |
          #!/bin/bash
          echo "post interrupt ran"
"#;
    let interrupt = "      interrupt:\n        type: service\n        services: [cron]\n";
    run_to_completion(
        &installed,
        NAME,
        &shellscript_skyhook(NAME, NAME, interrupt, config_map),
    )
    .await?;

    let journal = installed
        .cluster
        .node(NODE)
        .context("node handle")?
        .journal()?;
    let systemctl: Vec<&str> = journal
        .iter()
        .filter_map(|line| line.split_once(' ').map(|(_, command)| command))
        .filter(|command| command.starts_with("systemctl"))
        .collect();
    assert_eq!(
        systemctl,
        ["systemctl daemon-reload", "systemctl restart cron"],
        "{journal:?}"
    );
    let flags = interrupt_flags(&installed, NAME, NAME).await?;
    assert_eq!(
        entries(&flags)?,
        ["service_restart_0.complete", "service_restart_1.complete"],
        "{}",
        flags.display()
    );
    let logs = all_step_logs(&node_root(&installed)?, NAME)?;
    assert!(logs.contains("post interrupt ran"), "step logs: {logs}");
    Ok(())
}

/// dont_write_logs: `SKYHOOK_AGENT_WRITE_LOGS=false` in the package env: no log directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_can_be_turned_off() -> anyhow::Result<()> {
    const NAME: &str = "dont-write-logs-agent-operator";
    let installed = install().await?;
    let env = "      env:\n        - {name: SKYHOOK_AGENT_WRITE_LOGS, value: \"false\"}\n";
    let config_map = r#"        apply.sh: |
          #!/bin/bash
          echo "Hello, world!"
          cat $SKYHOOK_DIR/configmaps/extra.txt
        extra.txt: |
          This is a test
"#;
    run_to_completion(
        &installed,
        NAME,
        &shellscript_skyhook(NAME, "shellscript", env, config_map),
    )
    .await?;
    let root = node_root(&installed)?;
    let logs = entries(&root.join("var/log/skyhook"))?;
    assert!(
        !logs.contains(&NAME.to_owned()),
        "log directories: {logs:?}"
    );
    assert!(
        entries(&root.join(format!("var/lib/skyhook/{NAME}/flags")))?.contains(&"START".to_owned()),
        "the agent ran"
    );
    Ok(())
}

/// reap_old_logs: the config script fails until the step has 5 logs; every failed attempt adds
/// one, and the agent keeps only the newest 5, so exactly 5 remain after the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_newest_five_logs_are_kept() -> anyhow::Result<()> {
    const NAME: &str = "reap-old-logs-agent-operator";
    let installed = install().await?;
    let config_map = r#"        config.sh: |
          #!/bin/bash
          logs=$(ls /var/log/skyhook/reap-old-logs-agent-operator/shellscript/1.1.1/*.log | wc -l)
          if [ "$logs" -ge 5 ]; then
            echo "$logs logs found. After this there should still be 5."
            exit 0
          fi
          echo "Only $logs logs yet. Erroring to produce more."
          exit 1
"#;
    run_to_completion(
        &installed,
        NAME,
        &shellscript_skyhook(NAME, "shellscript", "", config_map),
    )
    .await?;
    let logs = step_logs(&node_root(&installed)?, NAME)?;
    assert_eq!(logs.len(), 5, "{logs:?}");
    Ok(())
}
