//! The control plane on real processes: the API answers, controllers run, clusters are isolated,
//! and the `devcluster` command starts, reports and stops a cluster with nodes.
//!
//! Needs the control-plane binary (`scripts/setup.sh` builds it).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use devcluster::state::ClusterRecord;
use devcluster::{DevCluster, DevClusterOptions};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
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
