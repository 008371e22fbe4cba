//! The simulated nodes and kubelet on a real control plane: node objects, host roots, pod
//! lifecycles as the kubelet reports them, eviction, graceful deletion, reboots, the service
//! journal and light nodes.
//!
//! One control plane serves every test of this file; each test uses its own namespace and its own
//! nodes where it changes them (a reboot), so tests do not depend on each other.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use devcluster::controlplane::process::is_alive_running;
use devcluster::images::ImageMap;
use devcluster::kubelet::backoff::BackoffPolicy;
use devcluster::node::{NodeHandle, NodeSimOptions, start_nodes};
use devcluster::{DevCluster, DevClusterOptions};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

mod common;
use common::{WAIT, phase, wait_pod};

/// Full nodes `node-1..7` and light nodes `light-1..6`.
const FULL_NODES: usize = 7;
const LIGHT_NODES: usize = 6;

struct Fixture {
    config: kube::Config,
    full: Vec<NodeHandle>,
    light: Vec<NodeHandle>,
    nodes_state: PathBuf,
    _cluster: DevCluster,
}

/// Starts the shared cluster once. The node simulators run on a runtime of their own that lives
/// as long as the test process.
fn fixture() -> Result<&'static Fixture> {
    static FIXTURE: OnceLock<Result<Fixture, String>> = OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            let (sender, receiver) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = sender.send(Err(format!("failed to build a runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let started = start_fixture().await.map_err(|e| format!("{e:#}"));
                    let failed = started.is_err();
                    let _ = sender.send(started);
                    if !failed {
                        std::future::pending::<()>().await;
                    }
                });
            });
            receiver
                .recv()
                .unwrap_or_else(|_| Err("the fixture thread ended without reporting".to_owned()))
        })
        .as_ref()
        .map_err(|e| anyhow::anyhow!("failed to start the test cluster: {e}"))
}

async fn start_fixture() -> Result<Fixture> {
    // A fixed directory, cleared by the next run: the fixture is never dropped.
    let state_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("devcluster-nodes-test");
    let cluster = DevCluster::start(DevClusterOptions {
        state_dir: Some(state_dir),
        ..DevClusterOptions::default()
    })
    .await?;
    let client = kube::Client::try_from(cluster.config().clone())?;
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let nodes_state = cluster.state_dir().join("nodes");
    let sim_options = |count, light: bool, prefix: &str, dir: PathBuf| -> Result<NodeSimOptions> {
        Ok(NodeSimOptions {
            light,
            name_prefix: prefix.to_owned(),
            labels: BTreeMap::from([("devcluster-test".to_owned(), "nodes".to_owned())]),
            reboot_delay: Duration::from_secs(2),
            backoff: BackoffPolicy {
                initial: Duration::from_secs(2),
                max: Duration::from_secs(10),
            },
            shutdown_grace: Duration::from_secs(3),
            image_map: ImageMap::builtin(&workspace, &skyhook_devcluster::images())?,
            ..NodeSimOptions::new(count, dir, workspace.clone())?
        })
    };
    let full = start_nodes(
        client.clone(),
        sim_options(FULL_NODES, false, "node-", nodes_state.clone())?,
    )
    .await?;
    let light = start_nodes(
        client.clone(),
        sim_options(
            LIGHT_NODES,
            true,
            "light-",
            cluster.state_dir().join("light-nodes"),
        )?,
    )
    .await?;
    tokio::time::timeout(WAIT, full.wait_ready()).await??;
    tokio::time::timeout(WAIT, light.wait_ready()).await??;
    let fixture = Fixture {
        config: cluster.config().clone(),
        full: full.nodes(),
        light: light.nodes(),
        nodes_state,
        _cluster: cluster,
    };
    // The simulators live as long as this runtime's thread, which never returns.
    std::mem::forget(full);
    std::mem::forget(light);
    Ok(fixture)
}

impl Fixture {
    /// A client for the calling test's runtime. kube retries 429 answers by default, for many
    /// minutes; an eviction refused by a budget must come back as the error it is.
    fn client(&self) -> Result<kube::Client> {
        let mut config = self.config.clone();
        config.default_retry = false;
        Ok(kube::Client::try_from(config)?)
    }

    fn node(&self, name: &str) -> Result<&NodeHandle> {
        self.full
            .iter()
            .chain(&self.light)
            .find(|n| n.name() == name)
            .with_context(|| format!("no node {name}"))
    }
}

/// A fresh namespace for one test.
async fn namespace(client: &kube::Client, name: &str) -> Result<Api<Pod>> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    // The service account controller creates `default`; pods need it to be admitted.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), name);
    tokio::time::timeout(
        WAIT,
        await_condition(accounts, "default", conditions::is_created()),
    )
    .await
    .context("waiting for the default service account")??;
    Ok(Api::namespaced(client.clone(), name))
}

fn pod(name: &str, node: &str, spec: serde_json::Value) -> Result<Pod> {
    let mut spec = spec;
    spec["nodeName"] = json!(node);
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"test": name}},
        "spec": spec,
    }))?)
}

async fn create(pods: &Api<Pod>, pod: &Pod) -> Result<()> {
    pods.create(&PostParams::default(), pod).await?;
    Ok(())
}

async fn wait_gone(pods: &Api<Pod>, name: &str, uid: &str) -> Result<()> {
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), name, conditions::is_deleted(uid)),
    )
    .await
    .with_context(|| format!("timed out waiting for pod {name} to be removed"))??;
    Ok(())
}

fn container<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .find(|c| c.name == name)
}

fn waiting_reason<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    container(pod, name)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .as_deref()
}

fn terminated_exit(pod: &Pod, name: &str) -> Option<i32> {
    Some(
        container(pod, name)?
            .state
            .as_ref()?
            .terminated
            .as_ref()?
            .exit_code,
    )
}

fn pod_condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn boot_id(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn nodes_register_ready_with_kubelet_labels_and_leases() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    for handle in fx.full.iter().chain(&fx.light) {
        // Other tests reboot some of these nodes meanwhile: wait until the node is Ready with
        // the boot ID its handle reports, rather than asserting one snapshot.
        let settled = |n: Option<&Node>| {
            n.is_some_and(|n| node_ready(n) && handle.boot_id().is_ok_and(|id| id == boot_id(n)))
        };
        let node =
            tokio::time::timeout(WAIT, await_condition(nodes.clone(), handle.name(), settled))
                .await
                .with_context(|| {
                    format!("{} did not become Ready with its boot ID", handle.name())
                })??
                .with_context(|| format!("node {} vanished", handle.name()))?;
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("kubernetes.io/hostname").map(String::as_str),
            Some(handle.name())
        );
        assert_eq!(
            labels.get("kubernetes.io/os").map(String::as_str),
            Some("linux")
        );
        assert!(labels.contains_key("kubernetes.io/arch"));
        assert_eq!(
            labels.get("devcluster-test").map(String::as_str),
            Some("nodes")
        );
        let lease = leases.get(handle.name()).await?;
        let spec = lease.spec.context("lease without spec")?;
        assert_eq!(spec.holder_identity.as_deref(), Some(handle.name()));
        assert!(spec.renew_time.is_some());
        assert_eq!(handle.is_light(), handle.root().is_none());
    }
    Ok(())
}

#[tokio::test]
async fn a_pod_changes_only_its_own_node_root() -> Result<()> {
    let fx = fixture()?;
    let pods = namespace(&fx.client()?, "isolation").await?;
    let file = format!("etc/devcluster-test-{}", std::process::id());
    let script = format!("echo written-by-node-1 > /{file}");
    create(
        &pods,
        &pod(
            "writer",
            "node-1",
            json!({"restartPolicy": "Never",
                   "containers": [{"name": "sh", "image": "devcluster.local/shell", "args": [script]}]}),
        )?,
    )
    .await?;
    let done = wait_pod(&pods, "writer", "Succeeded", |p| phase(p) == "Succeeded").await?;
    assert_eq!(terminated_exit(&done, "sh"), Some(0));

    let node1 = fx.node("node-1")?.root().context("node-1 has a root")?;
    let node2 = fx.node("node-2")?.root().context("node-2 has a root")?;
    assert_eq!(
        std::fs::read_to_string(node1.join(&file))?,
        "written-by-node-1\n"
    );
    assert!(!node2.join(&file).exists(), "node-2 sees node-1's file");
    assert!(
        !PathBuf::from("/").join(&file).exists(),
        "the machine sees node-1's file"
    );
    Ok(())
}

#[tokio::test]
async fn exit_codes_restart_counts_and_crash_loops_are_reported() -> Result<()> {
    let fx = fixture()?;
    let pods = namespace(&fx.client()?, "exits").await?;
    let shell = |name: &str, policy: &str, script: &str| {
        pod(
            name,
            "node-2",
            json!({"restartPolicy": policy,
                   "containers": [{"name": "main", "image": "devcluster.local/shell", "args": [script]}]}),
        )
    };
    create(&pods, &shell("fails-once", "Never", "exit 3")?).await?;
    create(&pods, &shell("succeeds", "Never", "exit 0")?).await?;
    create(&pods, &shell("crashes", "OnFailure", "exit 4")?).await?;

    let failed = wait_pod(&pods, "fails-once", "Failed", |p| phase(p) == "Failed").await?;
    let term = container(&failed, "main")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .context("terminated state")?;
    assert_eq!((term.exit_code, term.reason.as_deref()), (3, Some("Error")));

    let ok = wait_pod(&pods, "succeeds", "Succeeded", |p| phase(p) == "Succeeded").await?;
    let term = container(&ok, "main")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .context("terminated state")?;
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (0, Some("Completed"))
    );
    assert!(term.started_at.is_some() && term.finished_at.is_some());

    let looping = wait_pod(&pods, "crashes", "in CrashLoopBackOff", |p| {
        waiting_reason(p, "main") == Some("CrashLoopBackOff")
    })
    .await?;
    let status = container(&looping, "main").context("status")?;
    assert!(
        status.restart_count >= 1,
        "restart count {}",
        status.restart_count
    );
    let last = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .context("last state")?;
    assert_eq!(last.exit_code, 4);
    assert_eq!(phase(&looping), "Running");
    assert_eq!(pod_condition(&looping, "Ready").as_deref(), Some("False"));
    Ok(())
}

#[tokio::test]
async fn init_containers_env_and_volumes_run_like_kubernetes() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let pods = namespace(&client, "env-volumes").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "env-volumes");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "settings"},
        "data": {"greeting": "hello", "file.txt": "from-configmap"}
    }))?;
    config_maps.create(&PostParams::default(), &cm).await?;
    let spec = json!({
        "restartPolicy": "Never",
        "volumes": [
            {"name": "settings", "configMap": {"name": "settings"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": "/var/lib/devcluster-test"}}
        ],
        "initContainers": [{
            "name": "first", "image": "devcluster.local/shell",
            "args": ["echo init > /scratch/order"],
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]
        }],
        "containers": [{
            "name": "main", "image": "devcluster.local/shell",
            "env": [
                {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "MESSAGE", "value": "$(GREETING) from $(NODE)"}
            ],
            "command": ["/bin/sh", "-c"],
            "args": ["cat /scratch/order /config/file.txt; echo \"$MESSAGE $POD\" > /host/out"],
            "volumeMounts": [
                {"name": "settings", "mountPath": "/config"},
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "host", "mountPath": "/host"}
            ]
        }]
    });
    create(&pods, &pod("envvol", "node-2", spec)?).await?;
    let done = wait_pod(&pods, "envvol", "Succeeded", |p| phase(p) == "Succeeded").await?;
    assert_eq!(terminated_exit(&done, "first"), Some(0));
    assert_eq!(pod_condition(&done, "Initialized").as_deref(), Some("True"));

    let root = fx.node("node-2")?.root().context("node-2 root")?;
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/devcluster-test/out"))?,
        "hello from node-2 envvol\n"
    );
    let uid = done.metadata.uid.clone().unwrap_or_default();
    let log = fx
        .nodes_state
        .join("node-2/logs")
        .join(format!("env-volumes_envvol_{uid}"))
        .join("main/0.log");
    // The log is in the CRI format: one line per output line, the last one without a newline.
    let content = std::fs::read(&log)?;
    let texts: Vec<String> = content
        .split(|&byte| byte == b'\n')
        .filter_map(devcluster::kubelet::container_log::parse_line)
        .map(|line| String::from_utf8_lossy(line.text).into_owned())
        .collect();
    assert_eq!(texts, ["init", "from-configmap"]);
    Ok(())
}

#[tokio::test]
async fn unmapped_images_back_off() -> Result<()> {
    let fx = fixture()?;
    let pods = namespace(&fx.client()?, "pulls").await?;
    create(
        &pods,
        &pod(
            "unknown",
            "light-1",
            json!({"containers": [{"name": "main", "image": "example.com/not/mapped:1"}]}),
        )?,
    )
    .await?;
    let pod = wait_pod(&pods, "unknown", "in ImagePullBackOff", |p| {
        waiting_reason(p, "main") == Some("ImagePullBackOff")
    })
    .await?;
    let message = container(&pod, "main")
        .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("not in devcluster's image map"),
        "{message}"
    );
    assert_eq!(phase(&pod), "Pending");
    Ok(())
}

#[tokio::test]
async fn eviction_honours_pod_disruption_budgets() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let pods = namespace(&client, "eviction").await?;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "eviction");
    for (name, node) in [("web-1", "light-2"), ("web-2", "light-3")] {
        let mut p = pod(
            name,
            node,
            json!({"containers": [{"name": "main", "image": "devcluster.local/sleep"}]}),
        )?;
        p.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "web".to_owned())]));
        create(&pods, &p).await?;
        wait_pod(&pods, name, "Ready", |p| {
            pod_condition(p, "Ready").as_deref() == Some("True")
        })
        .await?;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    }))?;
    pdbs.create(&PostParams::default(), &pdb).await?;
    let observed = |generation: i64, healthy: i32| {
        move |p: Option<&PodDisruptionBudget>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.observed_generation == Some(generation) && s.current_healthy == healthy
            })
        }
    };
    tokio::time::timeout(WAIT, await_condition(pdbs.clone(), "web", observed(1, 2))).await??;

    let refused = pods.evict("web-1", &EvictParams::default()).await;
    match refused {
        Err(kube::Error::Api(e)) if e.code == 429 => {}
        other => bail!("eviction should be refused by the budget, got {other:?}"),
    }

    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await?;
    tokio::time::timeout(WAIT, await_condition(pdbs.clone(), "web", observed(2, 2))).await??;
    let uid = pods.get("web-1").await?.metadata.uid.unwrap_or_default();
    pods.evict("web-1", &EvictParams::default()).await?;
    wait_gone(&pods, "web-1", &uid).await?;
    Ok(())
}

#[tokio::test]
async fn graceful_deletion_delivers_sigterm() -> Result<()> {
    let fx = fixture()?;
    let pods = namespace(&fx.client()?, "graceful").await?;
    let marker = format!("var/tmp/sigterm-{}", std::process::id());
    let script = format!(
        "trap 'echo terminated > /{marker}; exit 0' TERM; echo started; while true; do sleep 0.2; done"
    );
    create(
        &pods,
        &pod(
            "trapper",
            "node-1",
            json!({"terminationGracePeriodSeconds": 20,
                   "containers": [{"name": "main", "image": "devcluster.local/shell", "args": [script]}]}),
        )?,
    )
    .await?;
    let running = wait_pod(&pods, "trapper", "Running", |p| phase(p) == "Running").await?;
    let uid = running.metadata.uid.clone().unwrap_or_default();
    pods.delete("trapper", &DeleteParams::default()).await?;
    wait_gone(&pods, "trapper", &uid).await?;
    let root = fx.node("node-1")?.root().context("node-1 root")?;
    assert_eq!(std::fs::read_to_string(root.join(&marker))?, "terminated\n");
    Ok(())
}

/// What a container leaves running in its mount namespace (a `setsid` daemon, the namespace's
/// keeper) is killed once its main process exits, and the container's stdin is `/dev/null`, not
/// the keeper's pipe.
#[tokio::test]
async fn processes_left_in_a_container_are_killed_when_it_exits() -> Result<()> {
    let fx = fixture()?;
    let pods = namespace(&fx.client()?, "leftovers").await?;
    let dir = format!("var/tmp/leftovers-{}", std::process::id());
    let script = format!(
        r#"mkdir -p /{dir}
setsid sleep 600 </dev/null >/dev/null 2>&1 &
me=$(readlink /proc/self/ns/mnt)
echo "$me" > /{dir}/namespace
readlink /proc/self/fd/0 > /{dir}/stdin
for p in /proc/[0-9]*; do
  [ "$(readlink $p/ns/mnt 2>/dev/null)" = "$me" ] || continue
  echo "${{p#/proc/}} $(tr '\0\n' '  ' < $p/cmdline 2>/dev/null)"
done > /{dir}/members"#
    );
    create(
        &pods,
        &pod(
            "daemonizer",
            "node-2",
            json!({"restartPolicy": "Never",
                   "containers": [{"name": "sh", "image": "devcluster.local/shell", "args": [script]}]}),
        )?,
    )
    .await?;
    let done = wait_pod(&pods, "daemonizer", "Succeeded", |p| {
        phase(p) == "Succeeded"
    })
    .await?;
    assert_eq!(terminated_exit(&done, "sh"), Some(0));

    let root = fx.node("node-2")?.root().context("node-2 has a root")?;
    let read = |name: &str| std::fs::read_to_string(root.join(&dir).join(name));
    assert_eq!(read("stdin")?.trim(), "/dev/null");
    let namespace = read("namespace")?.trim().to_owned();
    let members = read("members")?;
    let pid_of = |command: &str| -> Result<u32> {
        members
            .lines()
            .filter_map(|line| line.split_once(' '))
            .find(|(_, cmdline)| cmdline.starts_with(command))
            .and_then(|(pid, _)| pid.parse().ok())
            .with_context(|| format!("no {command:?} in the container's namespace: {members}"))
    };
    let left = [pid_of("sleep 600")?, pid_of("/proc/self/exe __keep-ns")?];
    let still_there = || {
        left.iter()
            .copied()
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/ns/mnt"))
                    .is_ok_and(|ns| ns.to_string_lossy() == namespace)
            })
            .collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while !still_there().is_empty() {
        if tokio::time::Instant::now() > deadline {
            bail!(
                "{:?} still run in {namespace} after the container exited",
                still_there()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

#[tokio::test]
async fn reboot_inside_a_node_changes_boot_id_and_reruns_pods() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let pods = namespace(&client, "reboot").await?;
    let nodes: Api<Node> = Api::all(client);
    let before = nodes.get("node-3").await?;
    // As skyhook's interrupt pod does: an init container reboots the node once, then succeeds
    // when the kubelet re-runs it after the boot.
    let marker = format!("/var/lib/rebooted-{}", std::process::id());
    let script =
        format!("test -f {marker} && exit 0; touch {marker}; reboot; echo unreachable; exit 1");
    create(
        &pods,
        &pod(
            "rebooter",
            "node-3",
            json!({"restartPolicy": "OnFailure",
                   "initContainers": [{"name": "interrupt", "image": "devcluster.local/shell", "args": [script]}],
                   "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}),
        )?,
    )
    .await?;
    let old_boot = boot_id(&before);
    let changed =
        move |n: Option<&Node>| n.is_some_and(|n| boot_id(n) != old_boot && node_ready(n));
    tokio::time::timeout(WAIT, await_condition(nodes.clone(), "node-3", changed))
        .await
        .context("node-3 did not come back with a new boot ID")??;
    assert_ne!(fx.node("node-3")?.boot_id()?, boot_id(&before));

    let rerun = wait_pod(&pods, "rebooter", "Running after the reboot", |p| {
        phase(p) == "Running"
    })
    .await?;
    let init = container(&rerun, "interrupt").context("init status")?;
    assert_eq!(init.restart_count, 1);
    let last = init.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    assert_eq!(last.map(|t| t.exit_code), Some(255), "{init:?}");
    assert_eq!(terminated_exit(&rerun, "interrupt"), Some(0));
    Ok(())
}

#[tokio::test]
async fn service_commands_land_in_the_journal() -> Result<()> {
    let fx = fixture()?;
    let pods = namespace(&fx.client()?, "journal").await?;
    let script = "systemctl daemon-reload && systemctl restart containerd && \
                  test \"$(systemctl is-active containerd)\" = active && service procps force-reload";
    create(
        &pods,
        &pod(
            "services",
            "node-4",
            json!({"restartPolicy": "Never",
                   "containers": [{"name": "main", "image": "devcluster.local/shell", "args": [script]}]}),
        )?,
    )
    .await?;
    let done = wait_pod(&pods, "services", "finished", |p| {
        matches!(phase(p), "Succeeded" | "Failed")
    })
    .await?;
    assert_eq!(phase(&done), "Succeeded");
    let journal = fx.node("node-4")?.journal()?;
    for expected in [
        "systemctl daemon-reload",
        "systemctl restart containerd",
        "systemctl is-active containerd",
        "service procps force-reload",
    ] {
        assert!(
            journal.iter().any(|line| line.ends_with(expected)),
            "{expected:?} not in {journal:?}"
        );
    }
    let root = fx.node("node-4")?.root().context("node-4 root")?;
    let in_root = std::fs::read_to_string(root.join("var/log/devcluster-journal"))?;
    assert!(in_root.contains("systemctl restart containerd"));

    let output = fx
        .node("node-4")?
        .exec(&["systemctl", "is-enabled", "kubelet"])
        .await?;
    assert_eq!(String::from_utf8_lossy(&output.stdout), "enabled\n");
    Ok(())
}

#[tokio::test]
async fn nothing_in_a_node_can_reboot_the_machine() -> Result<()> {
    const CAP_SYS_BOOT: u32 = 22;
    let fx = fixture()?;
    let node = fx.node("node-4")?;
    let status = node.exec(&["cat", "/proc/self/status"]).await?;
    let text = String::from_utf8_lossy(&status.stdout);
    let bounding = text
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .context("no CapBnd line")?;
    let bounding = u64::from_str_radix(bounding.trim(), 16)?;
    assert_eq!(
        bounding & (1 << CAP_SYS_BOOT),
        0,
        "CAP_SYS_BOOT is still in {bounding:x}"
    );
    for command in [
        "reboot",
        "shutdown",
        "halt",
        "poweroff",
        "systemctl",
        "service",
    ] {
        for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
            let path = format!("{dir}/{command}");
            let link = node.exec(&["readlink", "-f", &path]).await?;
            assert_eq!(
                String::from_utf8_lossy(&link.stdout).trim(),
                "/usr/lib/devcluster/node-shim",
                "{path} is not the shim"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn light_nodes_run_pause_and_agentless_only() -> Result<()> {
    let fx = fixture()?;
    let pods = namespace(&fx.client()?, "light").await?;
    create(
        &pods,
        &pod(
            "package",
            "light-1",
            json!({"restartPolicy": "OnFailure",
                   "initContainers": [
                       {"name": "copy", "image": "ghcr.io/nvidia/skyhook/agentless:6.2.0",
                        "command": ["/bin/sh", "-c", "mkdir -p /root/x && cp -r /skyhook-package/* /root/x"]},
                       {"name": "apply", "image": "ghcr.io/nvidia/skyhook/agentless:6.2.0",
                        "args": ["apply", "/root", "/x"],
                        "env": [{"name": "SLEEP_LEN", "value": "1"}]}
                   ],
                   "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}),
        )?,
    )
    .await?;
    let running = wait_pod(&pods, "package", "Running", |p| phase(p) == "Running").await?;
    assert_eq!(terminated_exit(&running, "copy"), Some(0));
    assert_eq!(terminated_exit(&running, "apply"), Some(0));

    create(
        &pods,
        &pod(
            "failing",
            "light-1",
            json!({"restartPolicy": "OnFailure",
                   "initContainers": [{"name": "apply", "image": "ghcr.io/nvidia/skyhook/agentless:6.2.0",
                                       "env": [{"name": "EXIT_CODE", "value": "2"},
                                               {"name": "SLEEP_LEN", "value": "0"}]}],
                   "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}),
        )?,
    )
    .await?;
    let failing = wait_pod(&pods, "failing", "restarting", |p| {
        container(p, "apply").is_some_and(|c| c.restart_count >= 1)
    })
    .await?;
    let last = container(&failing, "apply").and_then(|c| {
        c.last_state
            .as_ref()?
            .terminated
            .as_ref()
            .map(|t| t.exit_code)
    });
    assert_eq!(last, Some(2));

    create(
        &pods,
        &pod(
            "shell",
            "light-2",
            json!({"containers": [{"name": "main", "image": "devcluster.local/shell", "args": ["true"]}]}),
        )?,
    )
    .await?;
    let refused = wait_pod(&pods, "shell", "refused", |p| {
        waiting_reason(p, "main") == Some("CreateContainerError")
    })
    .await?;
    let message = container(&refused, "main")
        .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("needs a full (non-light) node"),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn skyhook_package_pods_copy_the_package_onto_the_node() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let pods = namespace(&client, "package").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "package");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "demo-agentless-1.0.0"},
        "data": {"game.properties": "lives=3"}
    }))?;
    config_maps.create(&PostParams::default(), &cm).await?;
    // The shape of the operator's package pod (spec §2.8), with agentless as the agent image as
    // upstream's e2e tests use it.
    let copy_dir = format!(
        "/var/lib/skyhook/demo/agentless-1.0.0-{}-1",
        std::process::id()
    );
    let mounts = json!([
        {"name": "root-mount", "mountPath": "/root", "mountPropagation": "HostToContainer"},
        {"name": "configmaps", "mountPath": "/skyhook-package/configmaps"}
    ]);
    let agent = |name: &str, stage: &str| {
        json!({"name": name, "image": "ghcr.io/nvidia/skyhook/agentless:6.2.0",
               "args": [stage, "/root", copy_dir], "volumeMounts": mounts,
               "env": [{"name": "SLEEP_LEN", "value": "0"}, {"name": "SKYHOOK_RESOURCE_ID", "value": "demo_agentless_1.0.0"}],
               "securityContext": {"privileged": true}})
    };
    let spec = json!({
        "restartPolicy": "OnFailure", "hostNetwork": true, "hostPID": true,
        "volumes": [
            {"name": "root-mount", "hostPath": {"path": "/"}},
            {"name": "configmaps", "configMap": {"name": "demo-agentless-1.0.0"}}
        ],
        "initContainers": [
            {"name": "agentless-init", "image": "ghcr.io/nvidia/skyhook/agentless:6.2.0",
             "command": ["/bin/sh"],
             "args": ["-c", "mkdir -p /root/${SKYHOOK_DIR} && cp -r /skyhook-package/* /root/${SKYHOOK_DIR}"],
             "env": [{"name": "SKYHOOK_DIR", "value": copy_dir}],
             "volumeMounts": mounts, "securityContext": {"privileged": true}},
            agent("agentless-apply", "apply"),
            agent("agentless-applycheck", "apply-check")
        ],
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]
    });
    create(&pods, &pod("agentless-apply", "node-4", spec)?).await?;
    let running = wait_pod(&pods, "agentless-apply", "Running", |p| {
        phase(p) == "Running"
    })
    .await?;
    for name in ["agentless-init", "agentless-apply", "agentless-applycheck"] {
        assert_eq!(terminated_exit(&running, name), Some(0), "{name}");
    }
    let copied = fx
        .node("node-4")?
        .root()
        .context("node-4 root")?
        .join(copy_dir.trim_start_matches('/'));
    assert!(
        copied.join("config.json").is_file(),
        "package not copied to {}",
        copied.display()
    );
    assert!(copied.join("skyhook_dir/agentless.sh").is_file());
    assert_eq!(
        std::fs::read_to_string(copied.join("configmaps/game.properties"))?,
        "lives=3"
    );
    Ok(())
}

/// Waits until the node is Ready with a boot ID other than `old`.
async fn wait_rebooted(nodes: &Api<Node>, name: &str, old: String) -> Result<Node> {
    let changed = move |n: Option<&Node>| n.is_some_and(|n| boot_id(n) != old && node_ready(n));
    let node = tokio::time::timeout(WAIT, await_condition(nodes.clone(), name, changed))
        .await
        .with_context(|| format!("{name} did not come back with a new boot ID"))??;
    node.with_context(|| format!("node {name} vanished"))
}

#[tokio::test]
async fn a_handle_from_another_process_reboots_through_the_fifo() -> Result<()> {
    let fx = fixture()?;
    let nodes: Api<Node> = Api::all(fx.client()?);
    // As `devcluster` commands do: a handle built from the state directory alone.
    let handle = NodeHandle::open(&fx.nodes_state, "node-5")?;
    let before = handle.boot_id()?;
    assert_eq!(boot_id(&nodes.get("node-5").await?), before);
    assert!(handle.root().is_some());
    handle.reboot().await?;
    let after = wait_rebooted(&nodes, "node-5", before.clone()).await?;
    assert_eq!(handle.boot_id()?, boot_id(&after));
    let journal = handle.journal()?;
    assert!(
        journal.is_empty(),
        "a reboot by handle runs no command: {journal:?}"
    );
    assert!(NodeHandle::open(&fx.nodes_state, "node-99").is_err());
    Ok(())
}

#[tokio::test]
async fn light_nodes_reboot_and_rerun_their_pods() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let pods = namespace(&client, "light-reboot").await?;
    let nodes: Api<Node> = Api::all(client);
    create(
        &pods,
        &pod(
            "workload",
            "light-4",
            json!({"containers": [{"name": "main", "image": "devcluster.local/sleep"}]}),
        )?,
    )
    .await?;
    wait_pod(&pods, "workload", "Running", |p| phase(p) == "Running").await?;
    let handle = fx.node("light-4")?;
    let before = handle.boot_id()?;
    handle.reboot().await?;
    wait_rebooted(&nodes, "light-4", before).await?;
    let rerun = wait_pod(&pods, "workload", "restarted", |p| {
        container(p, "main").is_some_and(|c| c.restart_count == 1)
            && pod_condition(p, "Ready").as_deref() == Some("True")
    })
    .await?;
    let last = container(&rerun, "main")
        .and_then(|c| c.last_state.as_ref()?.terminated.as_ref())
        .map(|t| (t.exit_code, t.reason.clone()));
    assert_eq!(last, Some((255, Some("Unknown".to_owned()))));
    Ok(())
}

/// A dead machine: its container processes are gone at once, yet the API still shows what the
/// kubelet last reported (the pod Running); once it boots, it has a new boot ID and re-runs the pod.
#[tokio::test]
async fn a_node_taken_down_loses_its_processes_and_reports_nothing() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let pods = namespace(&client, "node-down").await?;
    let nodes: Api<Node> = Api::all(client);
    // A duration no other process sleeps for, to find the container's process on this machine
    // (the container has a pid namespace of its own).
    let duration = format!("7200.{}", std::process::id());
    create(
        &pods,
        &pod(
            "victim",
            "node-6",
            json!({"containers": [{"name": "sh", "image": "devcluster.local/shell",
                                   "args": [format!("exec sleep {duration}")]}]}),
        )?,
    )
    .await?;
    wait_pod(&pods, "victim", "Running", |p| phase(p) == "Running").await?;
    let handle = fx.node("node-6")?;
    let needle = format!("sleep\0{duration}");
    let sleeping = || -> Vec<u32> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&needle))
            })
            .collect()
    };
    let pid = {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            // Running may be reported before the shell has exec'd sleep.
            if let Some(pid) = sleeping().first() {
                break *pid;
            }
            if tokio::time::Instant::now() > deadline {
                bail!("no process runs `sleep {duration}`");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    assert!(is_alive_running(pid, "sleep"), "the container's sleep runs");
    let before = handle.boot_id()?;

    handle.down().await?;
    assert!(
        !is_alive_running(pid, "sleep"),
        "the container's process {pid} survived its node going down"
    );
    assert!(!handle.is_up()?);
    let pod = pods.get("victim").await?;
    assert_eq!(phase(&pod), "Running", "a dead kubelet reports nothing");
    assert_eq!(pod_condition(&pod, "Ready").as_deref(), Some("True"));
    let node = nodes.get("node-6").await?;
    assert_eq!(boot_id(&node), before);

    handle.up().await?;
    wait_rebooted(&nodes, "node-6", before).await?;
    let rerun = wait_pod(&pods, "victim", "re-run after the boot", |p| {
        container(p, "sh").is_some_and(|c| c.restart_count == 1)
            && pod_condition(p, "Ready").as_deref() == Some("True")
    })
    .await?;
    let last = container(&rerun, "sh")
        .and_then(|c| c.last_state.as_ref()?.terminated.as_ref())
        .map(|t| t.exit_code);
    assert_eq!(last, Some(255), "lost with the machine, as after a reboot");
    Ok(())
}

/// `down` while the node reboots: the reboot ends without bringing the node back.
#[tokio::test]
async fn a_node_taken_down_during_its_reboot_stays_down() -> Result<()> {
    let fx = fixture()?;
    let nodes: Api<Node> = Api::all(fx.client()?);
    let handle = fx.node("node-7")?;
    let before = handle.boot_id()?;
    handle.reboot().await?;
    // The reboot has begun once the node reports its shutdown.
    tokio::time::timeout(
        WAIT,
        await_condition(nodes.clone(), "node-7", |n: Option<&Node>| {
            n.is_some_and(|n| !node_ready(n))
        }),
    )
    .await
    .context("node-7 never reported its shutdown")??;
    // Returns once the reboot in flight has ended.
    handle.down().await?;
    assert!(!handle.is_up()?, "the reboot brought the downed node back");
    let node = nodes.get("node-7").await?;
    assert!(
        !node_ready(&node),
        "the reboot posted Ready for a dead node"
    );

    handle.up().await?;
    wait_rebooted(&nodes, "node-7", before).await?;
    assert!(handle.is_up()?);
    Ok(())
}

/// kube-controller-manager sets Ready to Unknown when it misses a node's heartbeats (an API
/// outage, a stalled etcd); a running kubelet notices at its next status update (10 s) and posts
/// Ready again, without waiting for its 5-minute report.
#[tokio::test]
async fn a_running_kubelet_corrects_a_ready_unknown_status() -> Result<()> {
    let fx = fixture()?;
    let nodes: Api<Node> = Api::all(fx.client()?);
    tokio::time::timeout(
        WAIT,
        await_condition(nodes.clone(), "light-6", |n: Option<&Node>| {
            n.is_some_and(node_ready)
        }),
    )
    .await
    .context("light-6 is not Ready")??;
    let unknown = json!({"status": {"conditions": [{
        "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status."
    }]}});
    nodes
        .patch_status(
            "light-6",
            &PatchParams::default(),
            &Patch::Strategic(unknown),
        )
        .await?;
    assert!(!node_ready(&nodes.get("light-6").await?));
    tokio::time::timeout(
        WAIT,
        await_condition(nodes.clone(), "light-6", |n: Option<&Node>| {
            n.is_some_and(node_ready)
        }),
    )
    .await
    .context("light-6 stayed Ready=Unknown")??;
    Ok(())
}

/// The kubelet admits a pod against the node's labels as they are now, not as it registered
/// them: a label added afterwards satisfies a nodeSelector.
#[tokio::test]
async fn a_pod_selecting_a_label_added_after_registration_runs() -> Result<()> {
    let fx = fixture()?;
    let client = fx.client()?;
    let pods = namespace(&client, "late-label").await?;
    let nodes: Api<Node> = Api::all(client);
    let label = json!({"metadata": {"labels": {"devcluster-test/added-later": "yes"}}});
    nodes
        .patch("light-5", &PatchParams::default(), &Patch::Merge(label))
        .await?;
    create(
        &pods,
        &pod(
            "selective",
            "light-5",
            json!({"nodeSelector": {"devcluster-test/added-later": "yes"},
                   "containers": [{"name": "main", "image": "devcluster.local/sleep"}]}),
        )?,
    )
    .await?;
    let selective = wait_pod(&pods, "selective", "Running or rejected", |p| {
        matches!(phase(p), "Running" | "Failed")
    })
    .await?;
    let reason = selective.status.as_ref().and_then(|s| s.reason.clone());
    assert_eq!(phase(&selective), "Running", "rejected: {reason:?}");

    create(
        &pods,
        &pod(
            "mismatched",
            "light-5",
            json!({"nodeSelector": {"devcluster-test/added-later": "no"},
                   "containers": [{"name": "main", "image": "devcluster.local/sleep"}]}),
        )?,
    )
    .await?;
    let rejected = wait_pod(&pods, "mismatched", "rejected", |p| phase(p) == "Failed").await?;
    let reason = rejected.status.as_ref().and_then(|s| s.reason.clone());
    assert_eq!(reason.as_deref(), Some("NodeAffinity"));
    Ok(())
}
