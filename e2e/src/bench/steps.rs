//! Step latency: how long a node waits between a package pod's completion and its next step (the
//! next pod created on it, or the node marked complete). Two watches started before the Skyhook
//! is applied time what they see on the benchmark's clock: its pods, and the nodes whose
//! `status_<skyhook>` label says `complete`. A pod counts as completed when the watch first shows
//! its last init container terminated with exit code 0 (the status the simulated kubelet
//! reports; the container's own `finishedAt` has only second resolution). Watch delays fall on
//! both ends alike.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinHandle;

/// What a watch showed about one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// A package pod's last init container succeeded.
    Completed { node: String, pod: String },
    /// A pod appeared on the node.
    Created { node: String, pod: String },
    /// The node's status label for the Skyhook became `complete`.
    NodeComplete { node: String },
}

/// A [`Seen`] at `at` seconds after the watches started.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub at: f64,
    pub seen: Seen,
}

/// The step latencies, in seconds, in `observations`: for each pod completion, the time to the
/// node's next step after it. A completion without a next step (the case ended first) has none.
pub fn step_latencies(observations: &[Observation]) -> Vec<f64> {
    let mut ordered: Vec<&Observation> = observations.iter().collect();
    ordered.sort_by(|a, b| a.at.total_cmp(&b.at));
    let mut waiting_since: BTreeMap<&str, f64> = BTreeMap::new();
    let mut latencies = Vec::new();
    for observation in ordered {
        let node = match &observation.seen {
            Seen::Completed { node, .. } => {
                waiting_since.entry(node.as_str()).or_insert(observation.at);
                continue;
            }
            Seen::Created { node, .. } | Seen::NodeComplete { node } => node.as_str(),
        };
        if let Some(since) = waiting_since.remove(node) {
            latencies.push(observation.at - since);
        }
    }
    latencies
}

/// The watches of one rollout.
#[derive(Debug)]
pub struct StepWatch {
    observations: Arc<Mutex<Vec<Observation>>>,
    tasks: [JoinHandle<()>; 2],
}

impl StepWatch {
    /// Starts watching the pods of `skyhook` in `namespace` and its complete nodes.
    pub fn start(client: &kube::Client, namespace: &str, skyhook: &str) -> Self {
        let observations = Arc::new(Mutex::new(Vec::new()));
        let started = Instant::now();
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let pods_config =
            watcher::Config::default().labels(&format!("skyhook.nvidia.com/name={skyhook}"));
        let nodes: Api<Node> = Api::all(client.clone());
        // The keys of `skyhook_api::keys` (a dev-dependency only): the pods' Skyhook label and
        // the node status label.
        let nodes_config = watcher::Config::default()
            .labels(&format!("skyhook.nvidia.com/status_{skyhook}=complete"));
        let pod_task = {
            let observations = Arc::clone(&observations);
            tokio::spawn(async move {
                let mut created = BTreeSet::new();
                let mut completed = BTreeSet::new();
                let mut events = watcher(pods, pods_config)
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(Ok(pod)) = events.next().await {
                    let at = started.elapsed().as_secs_f64();
                    for seen in pod_news(&pod, &mut created, &mut completed) {
                        record(&observations, Observation { at, seen });
                    }
                }
            })
        };
        let node_task = {
            let observations = Arc::clone(&observations);
            tokio::spawn(async move {
                let mut complete = BTreeSet::new();
                let mut events = watcher(nodes, nodes_config)
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(Ok(node)) = events.next().await {
                    let at = started.elapsed().as_secs_f64();
                    let name = node.metadata.name.unwrap_or_default();
                    if complete.insert(name.clone()) {
                        record(
                            &observations,
                            Observation {
                                at,
                                seen: Seen::NodeComplete { node: name },
                            },
                        );
                    }
                }
            })
        };
        StepWatch {
            observations,
            tasks: [pod_task, node_task],
        }
    }

    /// Stops the watches and returns the step latencies seen.
    pub fn finish(self) -> Vec<f64> {
        for task in &self.tasks {
            task.abort();
        }
        let observations = self
            .observations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        step_latencies(&observations)
    }
}

fn record(observations: &Mutex<Vec<Observation>>, observation: Observation) {
    observations
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(observation);
}

/// What a version of `pod` shows for the first time: its creation, its completion.
fn pod_news(
    pod: &Pod,
    created: &mut BTreeSet<String>,
    completed: &mut BTreeSet<String>,
) -> Vec<Seen> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let Some(node) = pod.spec.as_ref().and_then(|spec| spec.node_name.clone()) else {
        return vec![];
    };
    let mut news = Vec::new();
    if created.insert(name.clone()) {
        news.push(Seen::Created {
            node: node.clone(),
            pod: name.clone(),
        });
    }
    if last_init_container_succeeded(pod) && completed.insert(name.clone()) {
        news.push(Seen::Completed { node, pod: name });
    }
    news
}

fn last_init_container_succeeded(pod: &Pod) -> bool {
    let Some(last) = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_ref())
        .and_then(|containers| containers.last())
    else {
        return false;
    };
    pod.status
        .as_ref()
        .and_then(|status| status.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find(|status| status.name == last.name)
        .and_then(|status| status.state.as_ref())
        .and_then(|state| state.terminated.as_ref())
        .is_some_and(|terminated| terminated.exit_code == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at: f64, seen: Seen) -> Observation {
        Observation { at, seen }
    }

    fn completed(node: &str, pod: &str) -> Seen {
        Seen::Completed {
            node: node.into(),
            pod: pod.into(),
        }
    }

    fn created(node: &str, pod: &str) -> Seen {
        Seen::Created {
            node: node.into(),
            pod: pod.into(),
        }
    }

    fn done(node: &str) -> Seen {
        Seen::NodeComplete { node: node.into() }
    }

    #[test]
    fn each_completion_waits_for_its_nodes_next_step() {
        let cases: [(&str, Vec<Observation>, Vec<f64>); 5] = [
            ("nothing", vec![], vec![]),
            (
                "apply then config then complete",
                vec![
                    at(1.0, created("n1", "apply")),
                    at(3.0, completed("n1", "apply")),
                    at(3.5, created("n1", "config")),
                    at(6.0, completed("n1", "config")),
                    at(8.0, done("n1")),
                ],
                vec![0.5, 2.0],
            ),
            (
                "nodes are independent, and the order seen is the clock's",
                vec![
                    at(4.0, created("n2", "b")),
                    at(2.0, completed("n1", "a")),
                    at(3.0, completed("n2", "x")),
                    at(2.25, created("n1", "b")),
                ],
                vec![0.25, 1.0],
            ),
            (
                "a completion without a next step has no latency",
                vec![at(1.0, completed("n1", "a"))],
                vec![],
            ),
            (
                "a step before any completion is no latency; the first completion waits",
                vec![
                    at(1.0, created("n1", "a")),
                    at(2.0, completed("n1", "a")),
                    at(2.5, completed("n1", "b")),
                    at(4.0, done("n1")),
                ],
                vec![2.0],
            ),
        ];
        for (name, observations, expected) in cases {
            assert_eq!(step_latencies(&observations), expected, "{name}");
        }
    }

    #[test]
    fn pods_are_news_once_created_and_once_completed() {
        let pod = |exit: Option<i32>| -> Pod {
            let state = exit.map_or_else(
                || serde_json::json!({"running": {}}),
                |code| serde_json::json!({"terminated": {"exitCode": code}}),
            );
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p"},
                "spec": {
                    "nodeName": "n1",
                    "containers": [],
                    "initContainers": [{"name": "stage"}, {"name": "check"}],
                },
                "status": {"initContainerStatuses": [
                    {"name": "stage", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0}}},
                    {"name": "check", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                     "state": state},
                ]},
            }))
            .unwrap()
        };
        let (mut created_set, mut completed_set) = (BTreeSet::new(), BTreeSet::new());
        let mut news = |pod: &Pod| pod_news(pod, &mut created_set, &mut completed_set);
        assert_eq!(news(&pod(None)), vec![created("n1", "p")]);
        assert_eq!(news(&pod(Some(1))), vec![]);
        assert_eq!(news(&pod(Some(0))), vec![completed("n1", "p")]);
        assert_eq!(news(&pod(Some(0))), vec![]);
    }
}
