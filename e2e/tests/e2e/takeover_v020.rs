//! Taking over a cluster upstream's v0.20 operator ran (upstream-delta-v0.20 §2.2, §2.3): its
//! operator is gone and ours starts on what it left, written here as upstream writes it (the
//! keys, labels, annotations and Job bodies spelled out, not made by our builders):
//! - a legacy Skyhook `fleet`, frozen by the migration at `complete`, whose
//!   `skyhook.nvidia.com/*` node keys upstream keeps for its rollback window;
//! - the NodeWright `fleet` mirrored from it (`mirrored-from`, `mirrored-generation`, and
//!   `legacy-migrated-at` two days ago, past the 24 h window), with a package added since:
//!   `base` complete on every node, `tools` complete on node-1, mid-apply on node-2 with the
//!   stage Job upstream created still running (agent `ghcr.io/nvidia/nodewright/agent:v7.0.0`),
//!   and erroring on node-3 with its terminally failed config Job kept, as upstream keeps it.
//!
//! Each node is continued where it stands: no stage of a complete package runs again (the
//! packages' scripts log every run to the node's host root), the running Job is kept (same uid,
//! never marked invalid) and its completion recorded once, node-2 then runs `tools`' config and
//! completes, node-3 stays erroring with its failed Job and no new one, and the legacy keys are
//! pruned since the window is over.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use skyhook_api::keys::{self, NODEWRIGHT};
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::v1alpha1::Skyhook;

const NAME: &str = "fleet";
const NAMESPACE: &str = e2e::pods::NAMESPACE;
const VERSION: &str = "1.1.1";
const IMAGE: &str = "ghcr.io/nvidia/skyhook-packages/shellscript";
/// The agent of upstream's v0.20 chart (its digest left out: the devcluster has no registry).
const UPSTREAM_AGENT: &str = "ghcr.io/nvidia/nodewright/agent:v7.0.0";
/// Every stage a package's script runs appends `<package>-<stage>` here, on the node's host.
const RUNS: &str = "var/lib/takeover-runs";
/// `tools`' apply waits for this host file, so that its Job is in flight when ours starts.
const GO: &str = "etc/takeover-go";
/// `tools`' config fails while this host file exists (on node-3 only).
const FAIL: &str = "etc/takeover-fail";
const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

/// The configMap of a package whose scripts log each run, `extra` after the log line of the
/// stage it names.
fn scripts(package: &str, apply_extra: &str, config_extra: &str) -> Value {
    json!({
        "apply.sh": format!("echo {package}-apply >> /{RUNS}\n{apply_extra}"),
        "config.sh": format!("echo {package}-config >> /{RUNS}\n{config_extra}"),
    })
}

fn base_package() -> Value {
    json!({"version": VERSION, "image": IMAGE, "configMap": scripts("base", "", "")})
}

fn tools_package() -> Value {
    json!({
        "version": VERSION,
        "image": IMAGE,
        "configMap": scripts(
            "tools",
            &format!("while [ ! -e /{GO} ]; do sleep 1; done"),
            &format!("if [ -e /{FAIL} ]; then exit 1; fi"),
        ),
    })
}

fn selector() -> Value {
    json!({"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}})
}

/// A node-state entry as upstream writes it.
fn entry(package: &str, stage: &str, state: &str) -> (String, Value) {
    (
        format!("{package}|{VERSION}"),
        json!({"name": package, "version": VERSION, "image": IMAGE, "stage": stage,
               "state": state, "restarts": 0}),
    )
}

/// The NodeWright as the Job builder needs it.
struct Owner {
    uid: String,
    generation: i64,
}

impl Owner {
    fn copy_dir(&self, package: &str) -> String {
        format!(
            "/var/lib/skyhook/{NAME}/{package}-{VERSION}-{}-{}",
            self.uid, self.generation
        )
    }

    fn resource_id(&self, package: &str) -> String {
        format!(
            "{NAME}-{}-{}_{package}_{VERSION}",
            self.uid, self.generation
        )
    }
}

/// The stage Job upstream v0.20 creates for `package`'s `stage` on `node` (delta §2.3, §2.15;
/// spec §2.8 for the pod it wraps), with `backoff_limit` (its `JOB_BACKOFF_LIMIT`).
fn upstream_stage_job(
    owner: &Owner,
    package: &str,
    config_keys: &[&str],
    stage: &str,
    node: &str,
    backoff_limit: i32,
) -> anyhow::Result<Job> {
    let name = controller::names::safe_name(63, &[NAME, package, VERSION, stage, node]);
    let labels = json!({
        "nodewright.nvidia.com/name": NAME,
        "nodewright.nvidia.com/package": format!("{package}-{VERSION}"),
        "nodewright.nvidia.com/stage": stage,
        "nodewright.nvidia.com/node": node,
        "nodewright.nvidia.com/generation": owner.generation.to_string(),
    });
    let package_annotation = json!({"name": package, "version": VERSION, "skyhook": NAME,
                                    "stage": stage, "image": IMAGE})
    .to_string();
    let metadata_volume = controller::names::safe_name(63, &["metadata", node]);
    let metadata_configmap = controller::names::safe_name(253, &[NAME, node, "metadata"]);
    let mut mounts = vec![
        json!({"name": "root-mount", "mountPath": "/root", "mountPropagation": "HostToContainer"}),
        json!({"name": metadata_volume, "mountPath": "/skyhook-package/node-metadata"}),
    ];
    mounts.extend(config_keys.iter().map(|key| {
        json!({"name": package, "mountPath": format!("/skyhook-package/configmaps/{key}"),
               "subPath": key, "readOnly": true})
    }));
    let copy_dir = owner.copy_dir(package);
    let agent_env = json!([
        {"name": "SKYHOOK_LOG_DIR", "value": format!("/var/log/skyhook/{NAME}")},
        {"name": "SKYHOOK_ROOT_DIR", "value": format!("/var/lib/skyhook/{NAME}")},
        {"name": "COPY_RESOLV", "value": "false"},
        {"name": "SKYHOOK_RESOURCE_ID", "value": owner.resource_id(package)},
        {"name": "SKYHOOK_NODE_ORDER", "value": "0"},
    ]);
    let agent = |container: String, mode: String| {
        json!({
            "name": container,
            "image": UPSTREAM_AGENT,
            "imagePullPolicy": "Always",
            "args": [mode, "/root", copy_dir],
            "env": agent_env,
            "securityContext": {"privileged": true},
            "volumeMounts": mounts,
        })
    };
    let lifecycle = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute"});
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels,
            "annotations": {
                "nodewright.nvidia.com/resource-id": owner.resource_id(package),
                "nodewright.nvidia.com/package": package_annotation,
            },
            "ownerReferences": [{
                "apiVersion": "nodewright.nvidia.com/v1alpha1",
                "kind": "NodeWright",
                "name": NAME,
                "uid": owner.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "podReplacementPolicy": "Failed",
            "backoffLimit": backoff_limit,
            "podFailurePolicy": {"rules": [{
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }]},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"nodewright.nvidia.com/package": package_annotation},
                },
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "hostPID": true,
                    "hostNetwork": true,
                    "tolerations": [
                        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
                        {"key": "nodewright.nvidia.com", "operator": "Equal",
                         "value": "runtime-required", "effect": "NoSchedule"},
                        lifecycle("node.kubernetes.io/not-ready"),
                        lifecycle("node.kubernetes.io/unreachable"),
                    ],
                    "volumes": [
                        {"name": "root-mount", "hostPath": {"path": "/"}},
                        {"name": metadata_volume, "configMap": {"name": metadata_configmap}},
                        {"name": package, "configMap": {
                            "name": format!("{NAME}-{package}-{VERSION}")}},
                    ],
                    "initContainers": [
                        {
                            "name": format!("{package}-init"),
                            "image": format!("{IMAGE}:{VERSION}"),
                            "imagePullPolicy": "Always",
                            "command": ["/bin/sh"],
                            "args": ["-c", "mkdir -p /root/${SKYHOOK_DIR} && cp -r /skyhook-package/* /root/${SKYHOOK_DIR}"],
                            "env": [{"name": "SKYHOOK_DIR", "value": copy_dir}],
                            "securityContext": {"privileged": true},
                            "volumeMounts": mounts,
                        },
                        agent(format!("{package}-{stage}"), stage.to_owned()),
                        agent(format!("{package}-{stage}check"), format!("{stage}-check")),
                    ],
                    "containers": [{
                        "name": "done",
                        "image": format!("{IMAGE}:{VERSION}"),
                        "command": ["/bin/sh", "-c", "exit 0"],
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "20Mi"},
                            "limits": {"cpu": "100m", "memory": "20Mi"},
                        },
                    }],
                },
            },
        },
    });
    serde_json::from_value(job).context("the upstream Job fixture")
}

/// The package and node-metadata ConfigMaps upstream keeps for `fleet`.
fn upstream_configmaps(owner: &Owner) -> anyhow::Result<Vec<ConfigMap>> {
    let owner_reference = json!([{
        "apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "NodeWright", "name": NAME,
        "uid": owner.uid, "controller": true, "blockOwnerDeletion": true,
    }]);
    let mut maps = Vec::new();
    for (package, data) in [("base", base_package()), ("tools", tools_package())] {
        maps.push(json!({
            "metadata": {
                "name": format!("{NAME}-{package}-{VERSION}"),
                "namespace": NAMESPACE,
                "labels": {"nodewright.nvidia.com/name": NAME},
                "annotations": {
                    "nodewright.nvidia.com/name": NAME,
                    "nodewright.nvidia.com/Package.Name": package,
                    "nodewright.nvidia.com/Package.Version": VERSION,
                },
                "ownerReferences": owner_reference,
            },
            "data": data["configMap"],
        }));
    }
    let packages = json!({
        "agentVersion": "v7.0.0",
        "packages": {
            "base": {"name": "base", "version": VERSION, "image": IMAGE},
            "tools": {"name": "tools", "version": VERSION, "image": IMAGE},
        },
    });
    for node in NODES {
        maps.push(json!({
            "metadata": {
                "name": controller::names::safe_name(253, &[NAME, node, "metadata"]),
                "namespace": NAMESPACE,
                "labels": {"nodewright.nvidia.com/skyhook-node-meta": NAME},
                "annotations": {
                    "nodewright.nvidia.com/name": NAME,
                    "nodewright.nvidia.com/Node.name": node,
                },
                "ownerReferences": owner_reference,
            },
            "data": {
                "annotations.json": "{}",
                "labels.json": "{}",
                "packages.json": packages.to_string(),
            },
        }));
    }
    maps.into_iter()
        .map(|map| serde_json::from_value(map).context("a ConfigMap fixture"))
        .collect()
}

/// The node keys upstream v0.20 leaves on `node`: the NodeWright's state, and the legacy
/// Skyhook's, kept from before the migration.
fn upstream_node_keys(tools: (&str, &str), status: &str) -> Value {
    let nodewright_state: serde_json::Map<String, Value> = [
        entry("base", "config", "complete"),
        entry("tools", tools.0, tools.1),
    ]
    .into_iter()
    .collect();
    let legacy_state: serde_json::Map<String, Value> =
        [entry("base", "config", "complete")].into_iter().collect();
    json!({"metadata": {
        "annotations": {
            format!("nodewright.nvidia.com/nodeState_{NAME}"): Value::Object(nodewright_state).to_string(),
            format!("nodewright.nvidia.com/status_{NAME}"): status,
            format!("nodewright.nvidia.com/version_{NAME}"): "v0.20.0",
            format!("skyhook.nvidia.com/nodeState_{NAME}"): Value::Object(legacy_state).to_string(),
            format!("skyhook.nvidia.com/status_{NAME}"): "complete",
            format!("skyhook.nvidia.com/version_{NAME}"): "v0.17.0",
        },
        "labels": {
            format!("nodewright.nvidia.com/status_{NAME}"): status,
            format!("skyhook.nvidia.com/status_{NAME}"): "complete",
        },
    }})
}

fn is_finished(job: &Job, condition: &str) -> bool {
    (job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten()))
    .any(|c| c.type_ == condition && c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_v020_state_is_continued_where_it_stands() -> anyhow::Result<()> {
    let (cluster, options) = e2e::start_serving_both_groups(e2e::Setup {
        nodes: NODES.len(),
        node_labels: BTreeMap::from([(
            e2e::TEST_NODE_LABEL.to_owned(),
            e2e::TEST_NODE_VALUE.to_owned(),
        )]),
        ..e2e::Setup::default()
    })
    .await?;
    let client = cluster.client()?;
    let roots = e2e::host::roots(&cluster, &NODES)?;
    skyhook_devcluster::install::apply_crds(
        &client,
        &skyhook_devcluster::install::default_crds_dir(),
    )
    .await?;
    skyhook_devcluster::install::apply_namespace(&client).await?;

    // What upstream v0.20 left: the frozen legacy Skyhook, its mirrored NodeWright.
    let skyhooks: Api<Skyhook> = Api::all(client.clone());
    let legacy: Skyhook = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "Skyhook",
        "metadata": {"name": NAME},
        "spec": {"nodeSelectors": selector(), "packages": {"base": base_package()}},
    }))?;
    skyhooks.create(&PostParams::default(), &legacy).await?;
    skyhooks
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"status": "complete"}})),
        )
        .await?;
    let nodewrights: Api<NodeWright> = Api::all(client.clone());
    let two_days_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(48);
    let nodewright: NodeWright = serde_json::from_value(json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "NodeWright",
        "metadata": {"name": NAME, "annotations": {
            "nodewright.nvidia.com/mirrored-from": NAME,
            "nodewright.nvidia.com/mirrored-generation": "1",
            "nodewright.nvidia.com/legacy-migrated-at": two_days_ago.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        }},
        "spec": {"nodeSelectors": selector(),
                 "packages": {"base": base_package(), "tools": tools_package()}},
    }))?;
    let nodewright = nodewrights
        .create(&PostParams::default(), &nodewright)
        .await?;
    let owner = Owner {
        uid: nodewright
            .metadata
            .uid
            .clone()
            .context("the NodeWright's uid")?,
        generation: nodewright.metadata.generation.context("its generation")?,
    };
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    for map in upstream_configmaps(&owner)? {
        configmaps.create(&PostParams::default(), &map).await?;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for (node, tools, status) in [
        ("node-1", ("config", "complete"), "complete"),
        ("node-2", ("apply", "in_progress"), "in_progress"),
        ("node-3", ("config", "erroring"), "erroring"),
    ] {
        nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(upstream_node_keys(tools, status)),
            )
            .await?;
    }

    // node-3's config Job failed once (JOB_BACKOFF_LIMIT=0 upstream) and was recorded: upstream
    // keeps it, with the failed TTL, as the marker that the stage is not to run again.
    e2e::host::touch(&roots[2], FAIL)?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let config_keys = ["apply.sh", "config.sh"];
    let failed = jobs
        .create(
            &PostParams::default(),
            &upstream_stage_job(&owner, "tools", &config_keys, "config", "node-3", 0)?,
        )
        .await?;
    let failed_name = failed.metadata.name.clone().context("a Job name")?;
    e2e::wait_for(
        &jobs,
        &failed_name,
        "node-3's upstream Job to fail",
        |job| is_finished(job, "Failed"),
    )
    .await?;
    jobs.patch(
        &failed_name,
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"annotations": {"nodewright.nvidia.com/state-recorded": "true"}},
            "spec": {"ttlSecondsAfterFinished": 86400},
        })),
    )
    .await?;
    // node-2's apply Job is in flight: its script logged the run and waits.
    let running = jobs
        .create(
            &PostParams::default(),
            &upstream_stage_job(&owner, "tools", &config_keys, "apply", "node-2", 3)?,
        )
        .await?;
    let running_name = running.metadata.name.clone().context("a Job name")?;
    e2e::host::wait_for_lines(
        &roots[1],
        RUNS,
        "node-2's upstream apply to start",
        |runs| runs.contains(&"tools-apply".to_owned()),
    )
    .await?;

    // Our operator starts; every version of the NodeWright's Jobs is recorded from here on.
    let job_versions = e2e::Recorder::start(
        jobs.clone(),
        watcher::Config::default().labels(&format!("{}={NAME}", NODEWRIGHT.name_label)),
    )
    .await?;
    let node_versions = e2e::Recorder::start(nodes.clone(), watcher::Config::default()).await?;
    let installed = e2e::install_controller(cluster, options).await?;
    let log = || installed.controller_log_tail(80);
    // Ours has read the cluster once it has written the NodeWright's status.
    e2e::wait_for(&nodewrights, NAME, "the NodeWright's first status", |n| {
        n.status.as_ref().and_then(|s| s.status).is_some()
    })
    .await
    .with_context(log)?;
    let still_running = jobs.get(&running_name).await?;
    ensure!(
        still_running.metadata.uid == running.metadata.uid
            && !is_finished(&still_running, "Complete"),
        "node-2's upstream Job is kept running: {:?}",
        still_running.status
    );
    e2e::host::touch(&roots[1], GO)?;

    e2e::wait_for(&nodes, "node-2", "node-2 to complete", |node| {
        (node.metadata.annotations.iter().flatten())
            .any(|(k, v)| *k == NODEWRIGHT.node_status_key(NAME) && v == "complete")
    })
    .await
    .with_context(log)?;
    let pruned = node_versions
        .wait_until("the legacy keys to be pruned on every node", |seen| {
            NODES.iter().all(|name| {
                (seen
                    .iter()
                    .rev()
                    .find(|n| n.metadata.name.as_deref() == Some(name)))
                .is_some_and(|node| {
                    !(node.metadata.annotations.iter().flatten())
                        .chain(node.metadata.labels.iter().flatten())
                        .any(|(key, _)| keys::SKYHOOK.is_skyhook_node_key(key, NAME))
                })
            })
        })
        .await
        .with_context(log)?;

    // The apply upstream started ran once, and was recorded on the Job it ran in.
    let recorded = jobs.get(&running_name).await?;
    let annotations = recorded.metadata.annotations.clone().unwrap_or_default();
    ensure!(
        recorded.metadata.uid == running.metadata.uid
            && is_finished(&recorded, "Complete")
            && annotations
                .get(NODEWRIGHT.state_recorded_annotation)
                .map(String::as_str)
                == Some("true")
            && recorded
                .spec
                .as_ref()
                .and_then(|s| s.ttl_seconds_after_finished)
                == Some(3600),
        "node-2's Job recorded once with the succeeded TTL: {:?} {:?}",
        recorded.metadata,
        recorded.spec.as_ref().map(|s| s.ttl_seconds_after_finished)
    );
    let seen = job_versions.seen();
    let package_annotation = |job: &Job| {
        (job.metadata.annotations.as_ref())
            .and_then(|a| a.get(NODEWRIGHT.package_annotation))
            .cloned()
            .unwrap_or_default()
    };
    ensure!(
        seen.iter()
            .filter(|job| job.metadata.name.as_deref() == Some(&running_name))
            .all(|job| job.metadata.uid == running.metadata.uid
                && !package_annotation(job).contains("\"invalid\"")),
        "node-2's upstream Job was never replaced nor marked invalid"
    );
    let label = |job: &Job, key: &str| {
        (job.metadata.labels.as_ref())
            .and_then(|labels| labels.get(key))
            .cloned()
            .unwrap_or_default()
    };
    let created: BTreeMap<String, (String, String, String)> = seen
        .iter()
        .filter(|job| {
            job.metadata.uid != running.metadata.uid && job.metadata.uid != failed.metadata.uid
        })
        .map(|job| {
            (
                job.metadata.name.clone().unwrap_or_default(),
                (
                    label(job, NODEWRIGHT.node_label),
                    label(job, NODEWRIGHT.package_label),
                    label(job, NODEWRIGHT.stage_label),
                ),
            )
        })
        .collect();
    ensure!(
        created.values().cloned().collect::<Vec<_>>()
            == [(
                "node-2".to_owned(),
                format!("tools-{VERSION}"),
                "config".to_owned()
            )],
        "ours created only node-2's config Job of tools: {created:?}"
    );
    let failed_now = jobs.get(&failed_name).await?;
    ensure!(
        failed_now.metadata.uid == failed.metadata.uid,
        "node-3's failed Job is kept"
    );

    let ran = (roots.iter())
        .map(|root| e2e::host::lines(root, RUNS))
        .collect::<anyhow::Result<Vec<_>>>()?;
    ensure!(
        ran == [
            Vec::<String>::new(),
            vec!["tools-apply".to_owned(), "tools-config".to_owned()],
            vec!["tools-config".to_owned()],
        ],
        "stages run per node since the fixture (none again): {ran:?}"
    );
    let node3 = pruned
        .iter()
        .rev()
        .find(|n| n.metadata.name.as_deref() == Some("node-3"))
        .context("node-3")?;
    let annotation = |key: String| {
        (node3.metadata.annotations.as_ref())
            .and_then(|a| a.get(&key))
            .cloned()
            .unwrap_or_default()
    };
    let state: Value = serde_json::from_str(&annotation(NODEWRIGHT.node_state_annotation(NAME)))
        .context("node-3's node state")?;
    let tools = &state[format!("tools|{VERSION}")];
    ensure!(
        (tools["stage"].as_str(), tools["state"].as_str()) == (Some("config"), Some("erroring"))
            && annotation(NODEWRIGHT.node_status_key(NAME)) == "erroring",
        "node-3 stays erroring: {:?}",
        node3.metadata.annotations
    );
    let inert = skyhooks.get(NAME).await?;
    ensure!(
        (inert.status.iter().flat_map(|s| &s.conditions))
            .any(|c| c.type_ == keys::CONDITION_MIGRATED
                && c.status == "True"
                && c.reason == keys::MIGRATED_REASON_OWNED_BY_TWIN),
        "the frozen Skyhook is inert: {:?}",
        inert.status
    );
    Ok(())
}
