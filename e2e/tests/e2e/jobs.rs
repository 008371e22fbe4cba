//! Package stages as `batch/v1` Jobs (upstream v0.18-v0.20), run by the real Job controller of
//! the devcluster's kube-controller-manager:
//!
//! - each stage's Job carries upstream's labels and annotations, is recorded once, and gets
//!   `JOB_TTL_SUCCEEDED` when its completion is written to the node state;
//! - a failing stage is retried `JOB_BACKOFF_LIMIT` times, the node stays `in_progress` while it
//!   retries and reads `erroring` once the Job has failed, with the first and the last failed
//!   attempts kept (and `kubectl logs` working on them) and the Job kept with `JOB_TTL_FAILED`;
//! - `stageTimeout` kills an attempt still running at its deadline (`DeadlineExceeded`);
//! - pause suspends the running Job (its attempt stops, no retry is spent) and resume runs the
//!   stage to completion;
//! - an interrupt stuck at `FailureTarget` (its pod ignores SIGTERM) gets the stuck container's
//!   log as its `last-logs` annotation. The five-minute rule for a Job that never leaves
//!   `FailureTarget` is too long for a test here: `job_outcome`'s and the planner's tables cover
//!   it.

use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;

use e2e::pods::NAMESPACE;
use e2e::{Kubectl, Setup, WAIT, nodes};

const NODE: &str = "node-1";

fn skyhook(name: &str, package_env: &str) -> String {
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
    dexter:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env: {package_env}
"#
    )
}

/// The Jobs of Skyhook `skyhook`.
async fn jobs_of(client: &kube::Client, skyhook: &str) -> anyhow::Result<Vec<Job>> {
    let api: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = format!("skyhook.nvidia.com/name={skyhook}");
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// The pods of Job `job`.
async fn attempts_of(client: &kube::Client, job: &str) -> anyhow::Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = format!("batch.kubernetes.io/job-name={job}");
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// Waits until `check` finds what it looks for in the Skyhook's Jobs and returns it.
async fn wait_for_jobs<T>(
    client: &kube::Client,
    skyhook: &str,
    what: &str,
    check: impl Fn(&[Job]) -> Option<T>,
) -> anyhow::Result<T> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let jobs = jobs_of(client, skyhook).await?;
        if let Some(found) = check(&jobs) {
            return Ok(found);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}; jobs: {:#?}",
            jobs.iter().map(summary).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn summary(job: &Job) -> serde_json::Value {
    json!({
        "name": job.metadata.name,
        "labels": job.metadata.labels,
        "annotations": job.metadata.annotations.as_ref().map(|a| a.keys().collect::<Vec<_>>()),
        "suspend": job.spec.as_ref().and_then(|s| s.suspend),
        "status": job.status,
    })
}

fn label<'j>(job: &'j Job, key: &str) -> Option<&'j str> {
    job.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'j>(job: &'j Job, key: &str) -> Option<&'j str> {
    job.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn condition(job: &Job, type_: &str) -> Option<String> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_default())
}

/// The node-state entry of dexter 1.2.3; `null` when there is none.
fn entry(state: &serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    state.get("dexter|1.2.3").cloned().unwrap_or_default()
}

/// An entry's `restarts` (left out when zero).
fn restarts(entry: &serde_json::Value) -> u64 {
    entry["restarts"].as_u64().unwrap_or(0)
}

fn ttl(job: &Job) -> Option<i32> {
    job.spec.as_ref()?.ttl_seconds_after_finished
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_jobs_carry_upstreams_labels_and_are_recorded_once() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(
        &client,
        &skyhook("jobs-ok", r#"[{name: SLEEP_LEN, value: "1"}]"#),
    )
    .await?;
    installed.wait_for_status("jobs-ok", "complete").await?;

    let jobs = wait_for_jobs(
        &client,
        "jobs-ok",
        "every Job recorded with its TTL",
        |jobs| {
            let recorded = |job: &Job| {
                annotation(job, "skyhook.nvidia.com/state-recorded") == Some("true")
                    && ttl(job) == Some(3600)
                    && condition(job, "Complete").is_some()
            };
            (!jobs.is_empty() && jobs.iter().all(recorded)).then(|| jobs.to_vec())
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;

    let mut stages: Vec<&str> = jobs
        .iter()
        .filter_map(|job| label(job, "skyhook.nvidia.com/stage"))
        .collect();
    stages.sort_unstable();
    assert_eq!(
        stages,
        ["apply", "config"],
        "{:#?}",
        jobs.iter().map(summary).collect::<Vec<_>>()
    );
    for job in &jobs {
        let name = job.metadata.name.as_deref().unwrap_or_default();
        assert_eq!(
            label(job, "skyhook.nvidia.com/name"),
            Some("jobs-ok"),
            "{name}"
        );
        assert_eq!(
            label(job, "skyhook.nvidia.com/package"),
            Some("dexter-1.2.3"),
            "{name}"
        );
        assert_eq!(label(job, "skyhook.nvidia.com/node"), Some(NODE), "{name}");
        assert_eq!(
            label(job, "skyhook.nvidia.com/generation"),
            Some("1"),
            "{name}"
        );
        let package = annotation(job, "skyhook.nvidia.com/package").context("package")?;
        let package: serde_json::Value = serde_json::from_str(package)?;
        assert_eq!(package["name"], "dexter", "{name}");
        let id = annotation(job, "skyhook.nvidia.com/resource-id").context("resource-id")?;
        assert!(
            id.starts_with("jobs-ok-") && id.ends_with("_dexter_1.2.3"),
            "{id}"
        );
        let spec = job.spec.as_ref().context("spec")?;
        assert_eq!(spec.backoff_limit, Some(3), "{name}");
        assert_eq!(
            spec.pod_replacement_policy.as_deref(),
            Some("Failed"),
            "{name}"
        );
        let owner = &job.metadata.owner_references.as_ref().context("owner")?[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Skyhook", "jobs-ok")
        );
        // One attempt each, left by the Job controller until the TTL collects the Job.
        let attempts = attempts_of(&client, name).await?;
        assert_eq!(attempts.len(), 1, "{name}");
    }
    let node = nodes::wait_for_node(&client, NODE, "complete", |node| {
        nodes::has_status(node, "jobs-ok", "complete")
    })
    .await?;
    let state = nodes::node_state(&node, "jobs-ok")?;
    assert_eq!(restarts(&entry(&state)), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_stage_is_retried_then_erroring_with_first_and_last_attempts_kept()
-> anyhow::Result<()> {
    // A full node: its kubelet serves the attempts' logs.
    let installed = e2e::install_with(Setup {
        light: false,
        ..Setup::agentless(1)
    })
    .await?;
    let client = installed.cluster.client()?;
    let env = r#"[{name: EXIT_CODE, value: "2"}, {name: SLEEP_LEN, value: "0"}]"#;
    e2e::apply_yaml(&client, &skyhook("jobs-failing", env)).await?;

    // While the Job retries, the package reads erroring and the node stays in_progress.
    nodes::wait_for_node(
        &client,
        NODE,
        "the package erroring while retrying",
        |node| {
            let state = nodes::node_state(node, "jobs-failing").unwrap_or_default();
            entry(&state)["state"] == "erroring"
                && nodes::has_status(node, "jobs-failing", "in_progress")
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;

    let job = wait_for_jobs(
        &client,
        "jobs-failing",
        "the apply Job failed for good",
        |jobs| {
            jobs.iter()
                .find(|job| {
                    condition(job, "Failed").as_deref() == Some("BackoffLimitExceeded")
                        && annotation(job, "skyhook.nvidia.com/state-recorded") == Some("true")
                })
                .cloned()
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(60))?;
    let name = job.metadata.name.clone().unwrap_or_default();
    assert_eq!(
        job.status.as_ref().and_then(|s| s.failed),
        Some(4),
        "{name}"
    );
    assert_eq!(ttl(&job), Some(86400), "{name}");
    assert_eq!(label(&job, "skyhook.nvidia.com/stage"), Some("apply"));

    let node = nodes::wait_for_node(&client, NODE, "the node erroring", |node| {
        let state = nodes::node_state(node, "jobs-failing").unwrap_or_default();
        nodes::has_status(node, "jobs-failing", "erroring")
            && entry(&state)["state"] == "erroring"
            && restarts(&entry(&state)) == 4
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    drop(node);

    // The first and the last failed attempts stay; the two between are pruned.
    let deadline = tokio::time::Instant::now() + WAIT;
    let attempts = loop {
        let attempts = attempts_of(&client, &name).await?;
        let live: Vec<Pod> = attempts
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .collect();
        if live.len() == 2 || tokio::time::Instant::now() >= deadline {
            break live;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut created: Vec<_> = attempts
        .iter()
        .map(|pod| pod.metadata.creation_timestamp.clone().map(|t| t.0))
        .collect();
    created.sort();
    assert_eq!(attempts.len(), 2, "attempts kept: {created:?}");

    // Their logs are there for `kubectl logs`.
    let kubectl = Kubectl::new(installed.cluster.kubeconfig_path());
    for pod in &attempts {
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        let output = kubectl
            .run(&["logs", "-n", NAMESPACE, pod_name, "-c", "dexter-apply"])
            .await?;
        ensure!(
            output.status.success(),
            "kubectl logs {pod_name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // The Job stays: the stage does not run again until the package changes.
    let again = jobs_of(&client, "jobs-failing").await?;
    assert!(
        again
            .iter()
            .any(|job| job.metadata.name.as_deref() == Some(name.as_str()))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_suspends_the_running_job_and_resume_runs_it_to_completion() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let env = r#"[{name: SLEEP_LEN, value: "20"}]"#;
    e2e::apply_yaml(&client, &skyhook("jobs-pause", env)).await?;

    let running = wait_for_jobs(&client, "jobs-pause", "a running apply Job", |jobs| {
        jobs.iter()
            .find(|job| job.status.as_ref().and_then(|s| s.active) == Some(1))
            .cloned()
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let name = running.metadata.name.clone().unwrap_or_default();

    e2e::merge_patch_skyhook(
        &client,
        "jobs-pause",
        &json!({"metadata": {"annotations": {"skyhook.nvidia.com/pause": "true"}}}),
    )
    .await?;
    wait_for_jobs(
        &client,
        "jobs-pause",
        "the Job suspended and stopped",
        |jobs| {
            jobs.iter()
                .find(|job| job.metadata.name.as_deref() == Some(name.as_str()))
                .filter(|job| {
                    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
                        && job.status.as_ref().and_then(|s| s.active).unwrap_or(0) == 0
                })
                .map(|_| ())
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    // The node reads paused; its package entry stays in_progress (a stopped attempt is no
    // failure).
    let node = nodes::wait_for_node(&client, NODE, "paused, the stage in progress", |node| {
        nodes::has_status(node, "jobs-pause", "paused")
    })
    .await?;
    let state = nodes::node_state(&node, "jobs-pause")?;
    assert_eq!(entry(&state)["state"], "in_progress");

    e2e::merge_patch_skyhook(
        &client,
        "jobs-pause",
        &json!({"metadata": {"annotations": {"skyhook.nvidia.com/pause": null}}}),
    )
    .await?;
    installed.wait_for_status("jobs-pause", "complete").await?;
    let jobs = jobs_of(&client, "jobs-pause").await?;
    let resumed = jobs
        .iter()
        .find(|job| job.metadata.name.as_deref() == Some(name.as_str()))
        .context("the suspended Job")?;
    assert_eq!(resumed.spec.as_ref().and_then(|s| s.suspend), Some(false));
    assert!(condition(resumed, "Complete").is_some());
    // Suspension spent no retry.
    assert_eq!(
        resumed.status.as_ref().and_then(|s| s.failed).unwrap_or(0),
        0
    );
    Ok(())
}

/// A rollout the release before Jobs left mid-stage: node-1's apply runs in a bare pod that
/// release made (the same builder, `restartPolicy: OnFailure`, no Job), its node state reads
/// `apply/in_progress`. This release finishes that pod (recording it and deleting it as the
/// earlier release would), never runs node-1's apply again in a Job, runs every later stage and
/// node-2's whole rollout as Jobs, and leaves no node cordoned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_started_with_bare_pods_finishes_under_jobs() -> anyhow::Result<()> {
    use clap::Parser;
    use controller::names::OwnerSkyhook;
    use controller::pods::{PodNode, package_pod};
    use kube::api::{Patch, PatchParams, PostParams};
    use skyhook_api::v1alpha1::{Skyhook, Stage};
    use skyhook_devcluster::SkyhookInstall;

    const NAME: &str = "jobs-upgrade";
    let mut installed = e2e::install_with(Setup::agentless(2)).await?;
    let client = installed.cluster.client()?;
    // The earlier release, stopped mid-rollout: its controller is gone, what it made stays.
    installed.controller.kill();
    e2e::apply_yaml(
        &client,
        &skyhook(NAME, r#"[{name: SLEEP_LEN, value: "8"}]"#),
    )
    .await?;
    let skyhooks: Api<Skyhook> = Api::all(client.clone());
    let created = skyhooks.get(NAME).await?;

    let args = controller::config::Args::try_parse_from([
        "skyhook-controller",
        "--agent-image",
        e2e::AGENTLESS_AGENT_IMAGE,
    ])?;
    let config = controller::config::Config::from_args(&args)?;
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &created)?;
    let package = created
        .spec
        .packages
        .get("dexter")
        .context("package dexter")?;
    let pod = package_pod(
        &config.pods,
        &owner,
        package,
        &PodNode::new(NODE, None),
        Stage::Apply,
    )?;
    let bare_name = pod.metadata.name.clone().context("pod name")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pods.create(&PostParams::default(), &pod).await?;
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let state = json!({"dexter|1.2.3": {"name": "dexter", "version": "1.2.3",
        "image": "ghcr.io/nvidia/skyhook/agentless", "stage": "apply", "state": "in_progress"}});
    nodes_api
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "annotations": {
                    nodes::node_state_key(NAME): state.to_string(),
                    nodes::status_key(NAME): "in_progress",
                },
                "labels": {nodes::status_key(NAME): "in_progress"},
            }})),
        )
        .await?;

    installed.controller = installed
        .cluster
        .start_controller(skyhook_devcluster::InstallOptions {
            agent_image: Some(e2e::AGENTLESS_AGENT_IMAGE.to_owned()),
            ..skyhook_devcluster::InstallOptions::default()
        })
        .await
        .context("starting this release's controller")?;
    installed.wait_for_status(NAME, "complete").await?;

    // The bare pod ran node-1's apply and is gone; no Job ran it again.
    let jobs = jobs_of(&client, NAME).await?;
    let stages_on = |node: &str| -> Vec<String> {
        let mut stages: Vec<String> = jobs
            .iter()
            .filter(|job| label(job, "skyhook.nvidia.com/node") == Some(node))
            .filter_map(|job| label(job, "skyhook.nvidia.com/stage").map(str::to_owned))
            .collect();
        stages.sort();
        stages
    };
    assert_eq!(
        stages_on(NODE),
        ["config"],
        "{:#?}",
        jobs.iter().map(summary).collect::<Vec<_>>()
    );
    assert_eq!(stages_on("node-2"), ["apply", "config"]);
    let leftover = pods.get_opt(&bare_name).await?;
    assert!(
        leftover.is_none_or(|pod| pod.metadata.deletion_timestamp.is_some()),
        "the bare pod {bare_name} is left"
    );
    for node in [NODE, "node-2"] {
        let node = nodes_api.get(node).await?;
        assert!(
            !nodes::is_cordoned(&node),
            "{:?} is cordoned",
            node.metadata.name
        );
        let state = nodes::node_state(&node, NAME)?;
        assert_eq!(entry(&state)["state"], "complete");
        assert_eq!(restarts(&entry(&state)), 0);
    }
    Ok(())
}

/// `packages.*.stageTimeout` bounds each attempt of a package stage: an attempt still running
/// at the deadline is killed (`DeadlineExceeded`), counts as a genuine failure, and with
/// `JOB_BACKOFF_LIMIT=0` (one attempt) the Job fails and the node reads `erroring`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_past_its_stage_timeout_is_killed_and_fails() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1).single_attempt()).await?;
    let client = installed.cluster.client()?;
    let yaml = skyhook("jobs-timeout", r#"[{name: SLEEP_LEN, value: "600"}]"#)
        .replace("      env:", "      stageTimeout: 5s\n      env:");
    e2e::apply_yaml(&client, &yaml).await?;

    let job = wait_for_jobs(&client, "jobs-timeout", "the apply Job failed", |jobs| {
        jobs.iter()
            .find(|job| {
                condition(job, "Failed").is_some()
                    && annotation(job, "skyhook.nvidia.com/state-recorded") == Some("true")
            })
            .cloned()
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let name = job.metadata.name.clone().unwrap_or_default();
    let spec = job.spec.as_ref().context("spec")?;
    assert_eq!(spec.backoff_limit, Some(0));
    let template = spec.template.spec.as_ref().context("template")?;
    assert_eq!(template.active_deadline_seconds, Some(5));
    let attempts = attempts_of(&client, &name).await?;
    let reasons: Vec<Option<&str>> = attempts
        .iter()
        .map(|pod| pod.status.as_ref().and_then(|s| s.reason.as_deref()))
        .collect();
    assert_eq!(reasons, [Some("DeadlineExceeded")], "{name}");

    nodes::wait_for_node(&client, NODE, "the node erroring", |node| {
        let state = nodes::node_state(node, "jobs-timeout").unwrap_or_default();
        nodes::has_status(node, "jobs-timeout", "erroring")
            && entry(&state)["state"] == "erroring"
            && entry(&state)["stage"] == "apply"
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    Ok(())
}

/// The agent stand-in of [`an_interrupt_stuck_at_failure_target_keeps_its_last_logs`]: every
/// package step succeeds; the interrupt says what it does, ignores SIGTERM (as a process that
/// traps it, or a shell as PID 1, does) and hangs.
const STUCK_AGENT: &str = r#"if [ "$1" = interrupt ]; then
  trap '' TERM
  echo "restarting rsyslog"
  echo "rsyslog does not answer"
  sleep 600
fi"#;

/// An interrupt past its `stageTimeout` (the Job's own `activeDeadlineSeconds`): the Job
/// controller sets `FailureTarget` and deletes the pod, which stays terminating for its grace
/// period because its container ignores SIGTERM. While the Job sits there, with no failed
/// attempt kept for `kubectl logs`, the controller copies the stuck container's log onto the
/// Job (`last-logs`); the node stays `in_progress` (the Job has not failed yet, and has not sat
/// there for five minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_stuck_at_failure_target_keeps_its_last_logs() -> anyhow::Result<()> {
    const NAME: &str = "jobs-stuck";
    let map_dir = tempfile::tempdir()?;
    let image_map = map_dir.path().join("images.yaml");
    let stand_in = json!({"images": [{
        "name": "e2e.local/stuck-agent",
        "runtime": "container",
        "entrypoint": ["/bin/sh", "-c", STUCK_AGENT, "stuck-agent"],
    }]});
    std::fs::write(&image_map, stand_in.to_string())?;
    // A full node: the stand-in runs as a process and its kubelet serves its log.
    let installed = e2e::install_with(Setup {
        light: false,
        image_map: Some(image_map),
        ..Setup::agentless(1)
    })
    .await?;
    let client = installed.cluster.client()?;
    let yaml = skyhook(NAME, r#"[{name: SLEEP_LEN, value: "0"}]"#).replace(
        "      env:",
        "      agentImageOverride: e2e.local/stuck-agent:1\n      \
         interrupt: {type: service, services: [rsyslog]}\n      \
         stageTimeout: 4s\n      env:",
    );
    e2e::apply_yaml(&client, &yaml).await?;

    let name = controller::names::interrupt_pod_name(NAME, "service", NODE);
    let api: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let job = e2e::wait_for(&api, &name, "the interrupt Job's last-logs", |job| {
        annotation(job, "skyhook.nvidia.com/last-logs").is_some()
    })
    .await
    .with_context(|| installed.controller_log_tail(60))?;
    let spec = job.spec.as_ref().context("spec")?;
    assert_eq!(spec.active_deadline_seconds, Some(4), "{name}");
    assert_eq!(
        condition(&job, "FailureTarget").as_deref(),
        Some("DeadlineExceeded"),
        "{:#}",
        summary(&job)
    );
    // Written while the attempt was still terminating: the Job had not failed yet.
    assert_eq!(condition(&job, "Failed"), None, "{:#}", summary(&job));
    let logs = annotation(&job, "skyhook.nvidia.com/last-logs").unwrap_or_default();
    assert_eq!(
        logs,
        "interrupt:\nrestarting rsyslog\nrsyslog does not answer\n"
    );

    let node = nodes::wait_for_node(&client, NODE, "the node still in progress", |node| {
        nodes::node_state(node, NAME).is_ok_and(|state| entry(&state)["stage"] == "interrupt")
    })
    .await?;
    assert!(nodes::has_status(&node, NAME, "in_progress"));
    let state = nodes::node_state(&node, NAME)?;
    assert_eq!(entry(&state)["state"], "in_progress", "{state:?}");
    Ok(())
}
