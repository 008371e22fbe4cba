//! The control plane on real processes: the API answers, controllers run, clusters are isolated,
//! and the `devcluster` command starts, reports and stops a cluster with nodes.
//!
//! Needs the control-plane binary (`scripts/setup.sh` builds it).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use devcluster::controlplane::process::{is_alive, is_stopped};
use devcluster::node::Heartbeat;
use devcluster::state::ClusterRecord;
use devcluster::{Component, DevCluster, DevClusterOptions};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Resource, ResourceExt};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Generous: several clusters start at once on a loaded two-core machine.
const WAIT: Duration = Duration::from_secs(300);

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn the_api_server_serves_create_read_update_delete() -> TestResult {
    let cluster = DevCluster::start(DevClusterOptions::default()).await?;
    let client = cluster.client()?;

    let version = client.apiserver_version().await?;
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "36")
    );

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    config_maps
        .create(&PostParams::default(), &config_map("crud", &[("a", "1")]))
        .await?;
    let patch = serde_json::json!({ "data": { "a": "2", "b": "3" } });
    config_maps
        .patch("crud", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let read = config_maps.get("crud").await?;
    let expected: BTreeMap<String, String> = [("a", "2"), ("b", "3")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(read.data, Some(expected));

    // A stale update is refused: the real API server's optimistic concurrency, not a mock's.
    let mut stale = read.clone();
    config_maps
        .patch(
            "crud",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "data": { "a": "4" } })),
        )
        .await?;
    stale.data = Some(BTreeMap::new());
    let conflict = config_maps
        .replace("crud", &PostParams::default(), &stale)
        .await;
    assert!(
        matches!(&conflict, Err(kube::Error::Api(status)) if status.code == 409),
        "{conflict:?}"
    );

    config_maps.delete("crud", &DeleteParams::default()).await?;
    let names: Vec<String> = config_maps
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|cm| cm.name_any())
        .collect();
    assert!(!names.contains(&"crud".to_string()), "{names:?}");
    // The root CA publisher ran before start returned.
    assert!(names.contains(&"kube-root-ca.crt".to_string()), "{names:?}");
    Ok(())
}

#[tokio::test]
async fn two_clusters_run_side_by_side() -> TestResult {
    let (first, second) = tokio::join!(
        DevCluster::start(DevClusterOptions::default()),
        DevCluster::start(DevClusterOptions::default())
    );
    let (first, second) = (first?, second?);
    assert_ne!(first.server(), second.server());
    assert_ne!(first.state_dir(), second.state_dir());

    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some("only-in-first".to_string()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(first.client()?)
        .create(&PostParams::default(), &namespace)
        .await?;
    let in_first = Api::<Namespace>::all(first.client()?)
        .get_opt("only-in-first")
        .await?;
    let in_second = Api::<Namespace>::all(second.client()?)
        .get_opt("only-in-first")
        .await?;
    assert!(in_first.is_some());
    assert!(in_second.is_none(), "clusters share a store");

    // Each cluster has its own CA: the first cluster's credentials are refused by the second.
    let mut crossed = first.config().clone();
    crossed.cluster_url = second.server().parse()?;
    let crossed = kube::Client::try_from(crossed)?;
    assert!(
        crossed.apiserver_version().await.is_err(),
        "a foreign CA was accepted"
    );
    Ok(())
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_pod() -> TestResult {
    let cluster = DevCluster::start(DevClusterOptions::default()).await?;
    let client = cluster.client()?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    let owner = config_maps
        .create(&PostParams::default(), &config_map("owner", &[]))
        .await?;
    let owner_ref = OwnerReference {
        api_version: ConfigMap::api_version(&()).to_string(),
        kind: ConfigMap::kind(&()).to_string(),
        name: owner.name_any(),
        uid: owner.uid().ok_or("owner has no uid")?,
        ..OwnerReference::default()
    };
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "owned", "ownerReferences": [owner_ref] },
        "spec": { "containers": [{ "name": "main", "image": "devcluster.local/sleep" }] }
    }))?;
    let pod = pods.create(&PostParams::default(), &pod).await?;
    let pod_uid = pod.uid().ok_or("pod has no uid")?;

    config_maps
        .delete("owner", &DeleteParams::background())
        .await?;
    let deleted = await_condition(pods, "owned", conditions::is_deleted(&pod_uid));
    tokio::time::timeout(WAIT, deleted)
        .await
        .map_err(|_| "the garbage collector did not delete the owned pod")??;
    Ok(())
}

/// Sync callers (no tokio runtime) get a working cluster and clients too.
#[test]
fn works_from_sync_code() -> TestResult {
    let cluster = DevCluster::start_blocking(DevClusterOptions::default())?;
    let client = cluster.client()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let namespaces =
        runtime.block_on(Api::<Namespace>::all(client).list(&ListParams::default()))?;
    let names: Vec<String> = namespaces.items.iter().map(|ns| ns.name_any()).collect();
    assert!(names.contains(&"kube-system".to_string()), "{names:?}");
    let state_dir = cluster.state_dir().to_path_buf();
    drop(cluster);
    assert!(
        !state_dir.exists(),
        "a temporary state directory outlived its cluster"
    );
    Ok(())
}

fn devcluster(state_dir: &Path, args: &[&str]) -> Result<Output, std::io::Error> {
    Command::new(env!("CARGO_BIN_EXE_devcluster"))
        .arg("--state-dir")
        .arg(state_dir)
        .args(args)
        .output()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

/// The README's promise: `devcluster up --nodes 3 && kubectl --kubeconfig "$(devcluster
/// kubeconfig)" get nodes` shows three Ready nodes; `status` and `down` manage the daemon.
#[test]
fn the_command_starts_three_ready_nodes_and_stops_them() -> TestResult {
    let state = tempfile::tempdir()?;
    let up = devcluster(state.path(), &["up", "--nodes", "3"])?;
    assert!(up.status.success(), "up failed:\n{}", text(&up.stderr));
    let kubeconfig = text(&up.stdout);
    assert!(
        text(&up.stderr).contains("3/3 nodes Ready"),
        "{}",
        text(&up.stderr)
    );

    let printed = devcluster(state.path(), &["kubeconfig"])?;
    assert_eq!(text(&printed.stdout), kubeconfig);

    let again = devcluster(state.path(), &["up"])?;
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already running"),
        "{}",
        text(&again.stderr)
    );

    let nodes = Command::new("kubectl")
        .args(["--kubeconfig", &kubeconfig, "get", "nodes", "--no-headers"])
        .output()?;
    assert!(nodes.status.success(), "kubectl: {}", text(&nodes.stderr));
    let listing = text(&nodes.stdout);
    let ready: Vec<&str> = listing
        .lines()
        .filter(|line| line.split_whitespace().nth(1) == Some("Ready"))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(ready, ["node-1", "node-2", "node-3"], "{listing}");

    // exec runs inside the node's own root: a file written there is not the machine's.
    let written = devcluster(
        state.path(),
        &[
            "exec",
            "node-2",
            "--",
            "sh",
            "-c",
            "echo node-2 > /etc/devcluster-exec-test && cat /etc/devcluster-exec-test; exit 7",
        ],
    )?;
    assert_eq!(written.status.code(), Some(7), "{}", text(&written.stderr));
    assert_eq!(text(&written.stdout), "node-2");
    assert!(
        !Path::new("/etc/devcluster-exec-test").exists(),
        "exec wrote to the machine's /etc"
    );
    let unknown = devcluster(state.path(), &["exec", "node-9", "--", "true"])?;
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("node-9"),
        "{}",
        text(&unknown.stderr)
    );

    let status = devcluster(state.path(), &["status"])?;
    assert!(
        status.status.success(),
        "{}\n{}",
        text(&status.stdout),
        text(&status.stderr)
    );
    assert!(
        text(&status.stdout).contains("kube-apiserver"),
        "{}",
        text(&status.stdout)
    );

    // Faults through the daemon: a restarted component, a node down and booted again.
    let record_path = state.path().join("cluster.json");
    let scheduler_pid = |record: Option<ClusterRecord>| {
        record.and_then(|r| r.components.get("kube-scheduler").copied())
    };
    let before = scheduler_pid(ClusterRecord::read(&record_path)?);
    let restart = devcluster(state.path(), &["restart", "scheduler"])?;
    assert!(restart.status.success(), "{}", text(&restart.stderr));
    let after = scheduler_pid(ClusterRecord::read(&record_path)?);
    assert!(
        before.is_some() && after.is_some() && before != after,
        "{before:?} {after:?}"
    );
    let wrong = devcluster(state.path(), &["restart", "kubelet"])?;
    assert!(!wrong.status.success());
    let node_field = |path: &str| -> Result<String, Box<dyn std::error::Error>> {
        let output = Command::new("kubectl")
            .args(["--kubeconfig", &kubeconfig, "get", "node", "node-3", "-o"])
            .arg(format!("jsonpath={path}"))
            .output()?;
        assert!(output.status.success(), "kubectl: {}", text(&output.stderr));
        Ok(text(&output.stdout))
    };
    let boot_before = node_field("{.status.nodeInfo.bootID}")?;
    let node_down = devcluster(state.path(), &["node", "down", "node-3"])?;
    assert!(node_down.status.success(), "{}", text(&node_down.stderr));
    let node_up = devcluster(state.path(), &["node", "up", "node-3"])?;
    assert!(node_up.status.success(), "{}", text(&node_up.stderr));
    // `node up` returns once the booted node has posted its status.
    assert_ne!(node_field("{.status.nodeInfo.bootID}")?, boot_before);
    assert_eq!(
        node_field("{.status.conditions[?(@.type==\"Ready\")].status}")?,
        "True"
    );

    let down = devcluster(state.path(), &["down"])?;
    assert!(down.status.success(), "{}", text(&down.stderr));
    let status = devcluster(state.path(), &["status"])?;
    assert_eq!(status.status.code(), Some(1), "{}", text(&status.stdout));
    Ok(())
}

/// A killed daemon takes its control plane with it (parent-death signal), and `down` clears
/// what is left.
#[test]
fn a_killed_daemon_leaves_no_control_plane_behind() -> TestResult {
    let state = tempfile::tempdir()?;
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_devcluster"))
        .arg("--state-dir")
        .arg(state.path())
        .arg("serve")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let record_path = state.path().join("cluster.json");
    let started = Instant::now();
    let record = loop {
        if let Some(record) = ClusterRecord::read(&record_path)? {
            break record;
        }
        if let Some(status) = daemon.try_wait()? {
            return Err(
                format!("the daemon exited ({status}) before the cluster was ready").into(),
            );
        }
        assert!(started.elapsed() < WAIT, "no cluster after {WAIT:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(record.components.len(), 4, "{record:?}");

    daemon.kill()?;
    daemon.wait()?;
    let started = Instant::now();
    for (component, pid) in &record.components {
        while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(*pid) {
            assert!(
                started.elapsed() < WAIT,
                "{component} (pid {pid}) survived its supervisor"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    let down = devcluster(state.path(), &["down"])?;
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(!record_path.exists(), "down left the stale record");
    Ok(())
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        })
        .is_some_and(|state| state == 'Z')
}

/// The pid the cluster record names for `component`.
fn recorded_pid(
    cluster: &DevCluster,
    component: Component,
) -> Result<u32, Box<dyn std::error::Error>> {
    let record = ClusterRecord::read(&cluster.state_dir().join("cluster.json"))?
        .ok_or("no cluster record")?;
    Ok(*record
        .components
        .get(component.name())
        .ok_or_else(|| format!("{} missing from {record:?}", component.name()))?)
}

/// One letter of `/proc/<pid>/stat`: R, S, T (stopped), Z, ...
fn process_state(pid: u32) -> Option<char> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()?
        .rsplit_once(") ")?
        .1
        .chars()
        .next()
}

fn node_ready(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn boot_id(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|info| info.boot_id.clone())
        .unwrap_or_default()
}

async fn await_node(
    nodes: &Api<Node>,
    what: &str,
    check: impl Fn(&Node) -> bool,
) -> Result<Node, Box<dyn std::error::Error>> {
    let condition = move |node: Option<&Node>| node.is_some_and(&check);
    let node = tokio::time::timeout(WAIT, await_condition(nodes.clone(), "node-1", condition))
        .await
        .map_err(|_| format!("node-1 never became {what}"))??;
    Ok(node.ok_or("node-1 vanished")?)
}

/// Faults a fault-injection suite needs, each followed by proof that the cluster works: every
/// component restarted in place (new process, same ports, certificates and data), a stopped API
/// server reaped and started again, etcd frozen and thawed, and a node taken down (kube-controller-
/// manager marks it unreachable) and booted again. The nodes' kubelets post Ready again at their
/// status cadence after the API server comes back, however kube-controller-manager had marked
/// them.
#[tokio::test]
async fn components_restart_stall_and_nodes_die_as_in_a_real_cluster() -> TestResult {
    let cluster = DevCluster::start(DevClusterOptions {
        nodes: 1,
        light: true,
        // kube-controller-manager notices a dead node within seconds rather than a minute.
        heartbeat: Heartbeat {
            lease_renew_interval: Duration::from_secs(2),
            node_monitor_grace_period: Duration::from_secs(12),
        },
        ..DevClusterOptions::default()
    })
    .await?;
    let client = cluster.client()?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    let ports = cluster.ports();
    config_maps
        .create(
            &PostParams::default(),
            &config_map("before", &[("kept", "yes")]),
        )
        .await?;

    for component in [
        Component::KubeScheduler,
        Component::KubeControllerManager,
        Component::KubeApiserver,
        Component::Etcd,
    ] {
        let before = recorded_pid(&cluster, component)?;
        cluster.restart(component).await?;
        let after = recorded_pid(&cluster, component)?;
        assert_ne!(before, after, "{component:?} was not restarted");
        assert!(
            !is_alive(before),
            "the old {component:?} (pid {before}) lingers"
        );
        assert_eq!(cluster.ports(), ports);
        // Usable at once, with the data it had.
        let name = format!("after-{}", component.short_name());
        config_maps
            .create(&PostParams::default(), &config_map(&name, &[]))
            .await?;
        assert_eq!(
            config_maps.get("before").await?.data,
            Some(BTreeMap::from([("kept".to_string(), "yes".to_string())]))
        );
        if component == Component::KubeScheduler {
            // The restarted scheduler binds a new pod.
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "scheduled"},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
            }))?;
            pods.create(&PostParams::default(), &pod).await?;
            let running = |pod: Option<&Pod>| {
                pod.and_then(|p| p.status.as_ref()?.phase.clone())
                    .as_deref()
                    == Some("Running")
            };
            tokio::time::timeout(WAIT, await_condition(pods.clone(), "scheduled", running))
                .await
                .map_err(|_| "the pod never ran after the scheduler restarted")??;
        }
        if component == Component::KubeApiserver {
            // As kube-controller-manager does after missing heartbeats during an outage: the
            // kubelet posts Ready again at its next status update.
            let unknown = serde_json::json!({"status": {"conditions": [{
                "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status."
            }]}});
            nodes
                .patch_status(
                    "node-1",
                    &PatchParams::default(),
                    &Patch::Strategic(unknown),
                )
                .await?;
            await_node(&nodes, "Ready again", |n| {
                node_ready(n).as_deref() == Some("True")
            })
            .await?;
        }
    }

    // A stopped API server is reaped, not left a zombie, and comes back.
    let apiserver = recorded_pid(&cluster, Component::KubeApiserver)?;
    cluster.stop_component(Component::KubeApiserver).await?;
    assert!(
        !Path::new(&format!("/proc/{apiserver}")).exists(),
        "the stopped API server (pid {apiserver}) was not reaped: {:?}",
        process_state(apiserver)
    );
    cluster.start_component(Component::KubeApiserver).await?;
    config_maps
        .create(&PostParams::default(), &config_map("after-outage", &[]))
        .await?;

    // etcd frozen: the process is stopped, not gone; thawed, it serves again.
    let etcd = recorded_pid(&cluster, Component::Etcd)?;
    cluster.pause(Component::Etcd).await?;
    assert!(
        is_stopped(etcd),
        "etcd is not stopped: {:?}",
        process_state(etcd)
    );
    cluster.resume(Component::Etcd).await?;
    assert!(!is_stopped(etcd), "etcd is still stopped");
    cluster
        .stall(Component::Etcd, Duration::from_secs(2))
        .await?;
    config_maps
        .create(&PostParams::default(), &config_map("after-stall", &[]))
        .await?;

    // A dead node: kube-controller-manager marks it unreachable, the pod object is untouched.
    let before = boot_id(&nodes.get("node-1").await?);
    cluster.node_down("node-1").await?;
    let unreachable = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|taints| {
                taints
                    .iter()
                    .any(|t| t.key == "node.kubernetes.io/unreachable")
            })
    };
    let down = await_node(&nodes, "unreachable", |n| {
        node_ready(n).as_deref() == Some("Unknown") && unreachable(n)
    })
    .await?;
    assert_eq!(boot_id(&down), before);
    let phase = pods.get("scheduled").await?.status.and_then(|s| s.phase);
    assert_eq!(
        phase.as_deref(),
        Some("Running"),
        "a dead kubelet reports nothing"
    );
    cluster.node_up("node-1").await?;
    let up = await_node(&nodes, "Ready with a new boot ID", |n| {
        node_ready(n).as_deref() == Some("True") && boot_id(n) != before
    })
    .await?;
    assert_ne!(boot_id(&up), before);
    assert!(cluster.node_down("node-9").await.is_err());

    // A component that dies by itself is started again, as the kubelet restarts a static pod.
    let scheduler = recorded_pid(&cluster, Component::KubeScheduler)?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(scheduler)?),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    let started = Instant::now();
    while recorded_pid(&cluster, Component::KubeScheduler)? == scheduler {
        assert!(
            started.elapsed() < WAIT,
            "the killed scheduler was not started again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
