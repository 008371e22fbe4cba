//! `package logs`: which containers of which package pods to print (pure), newest pod first.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use skyhook_api::keys::{self, Keys};
use skyhook_api::v1alpha1::Stage;

use crate::cluster::{name_of, pod_label, pod_node};
use crate::pattern::{NodePattern, matches_any};

/// One container whose log is printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTarget {
    /// Pod name.
    pub pod: String,
    /// Pod namespace.
    pub namespace: String,
    /// Container name.
    pub container: String,
    /// The container's state in a few words.
    pub status: String,
    /// The node the pod runs on.
    pub node: String,
}

impl LogTarget {
    /// The line printed before the container's log.
    pub fn header(&self) -> String {
        format!(
            "==> Pod: {}, Container: {} [{}], Node: {} <==",
            self.pod, self.container, self.status, self.node
        )
    }
}

/// The containers to print for `package` of `skyhook`: pods labelled with the Skyhook whose
/// package label starts with `<package>-`, on nodes matching `nodes`, newest first. With
/// `stage`, the container `<package>-<stage>`; otherwise every started init container except
/// `<package>-init` (which only copies files).
pub fn log_targets(
    pods: &[Pod],
    skyhook: &str,
    package: &str,
    nodes: &[NodePattern],
    stage: Option<Stage>,
) -> Vec<LogTarget> {
    log_targets_in(&keys::SKYHOOK, pods, skyhook, package, nodes, stage)
}

/// [`log_targets`] for the pods of a workload object whose keys are `keys`.
pub fn log_targets_in(
    keys: &Keys,
    pods: &[Pod],
    skyhook: &str,
    package: &str,
    nodes: &[NodePattern],
    stage: Option<Stage>,
) -> Vec<LogTarget> {
    let prefix = format!("{package}-");
    let mut matching: Vec<&Pod> = pods
        .iter()
        .filter(|pod| pod_label(pod, keys.name_label) == Some(skyhook))
        .filter(|pod| pod_label(pod, keys.package_label).is_some_and(|p| p.starts_with(&prefix)))
        .filter(|pod| matches_any(nodes, pod_node(pod).unwrap_or_default()))
        .collect();
    matching.sort_by(|a, b| {
        let created = |pod: &Pod| pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(b)
            .cmp(&created(a))
            .then_with(|| name_of(&a.metadata).cmp(name_of(&b.metadata)))
    });
    let init = format!("{package}-init");
    let wanted = stage.map(|stage| format!("{package}-{stage}"));
    matching
        .into_iter()
        .flat_map(|pod| {
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.init_container_statuses.as_deref())
                .unwrap_or_default();
            let chosen: Vec<&ContainerStatus> = match &wanted {
                Some(name) => statuses.iter().filter(|s| &s.name == name).collect(),
                None => statuses
                    .iter()
                    .filter(|s| s.name != init && started(s))
                    .collect(),
            };
            chosen.into_iter().map(move |status| LogTarget {
                pod: name_of(&pod.metadata).to_owned(),
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                container: status.name.clone(),
                status: describe(status),
                node: pod_node(pod).unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

fn started(status: &ContainerStatus) -> bool {
    status
        .state
        .as_ref()
        .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        || status
            .last_state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some())
}

/// `running`, `completed`, `failed: exit code N`, or `waiting: Reason`.
fn describe(status: &ContainerStatus) -> String {
    let state = status.state.as_ref();
    if let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) {
        return if terminated.exit_code == 0 {
            "completed".to_owned()
        } else {
            format!("failed: exit code {}", terminated.exit_code)
        };
    }
    if state.is_some_and(|s| s.running.is_some()) {
        return "running".to_owned();
    }
    let mut text = match state
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.as_deref())
    {
        Some(reason) => format!("waiting: {reason}"),
        None => "waiting".to_owned(),
    };
    // A container waiting to restart printed the log of its last run: say how that ended.
    if let Some(last) = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
    {
        text.push_str(&format!(", last exit code {}", last.exit_code));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::parse_all;
    use serde_json::json;

    fn pod(name: &str, node: &str, package: &str, minute: u32, statuses: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "skyhook",
                         "creationTimestamp": format!("2026-01-01T10:{minute:02}:00Z"),
                         "labels": {"skyhook.nvidia.com/name": "demo", "skyhook.nvidia.com/package": package}},
            "spec": {"nodeName": node, "containers": [{"name": "pause"}]},
            "status": {"initContainerStatuses": statuses},
        }))
        .unwrap()
    }

    fn status(name: &str, state: serde_json::Value) -> serde_json::Value {
        json!({"name": name, "ready": false, "restartCount": 0, "image": "i", "imageID": "", "state": state})
    }

    fn pods() -> Vec<Pod> {
        let done = json!({"terminated": {"exitCode": 0}});
        vec![
            pod(
                "old",
                "node-1",
                "tuning-1.0.0",
                1,
                json!([
                    status("tuning-init", done.clone()),
                    status("tuning-apply", done.clone()),
                    status("tuning-applycheck", json!({"terminated": {"exitCode": 2}})),
                ]),
            ),
            pod(
                "new",
                "node-2",
                "tuning-1.1.0",
                5,
                json!([
                    status("tuning-init", done.clone()),
                    status("tuning-config", json!({"running": {}})),
                    status(
                        "tuning-configcheck",
                        json!({"waiting": {"reason": "PodInitializing"}})
                    ),
                ]),
            ),
            pod(
                "other-package",
                "node-1",
                "tuningx-1.0.0",
                9,
                json!([status("tuningx-apply", done.clone())]),
            ),
            pod(
                "tuning-2",
                "node-1",
                "tuning2-1.0.0",
                9,
                json!([status("tuning2-apply", done)]),
            ),
        ]
    }

    #[test]
    fn container_states_in_a_few_words() {
        let cases = [
            (
                json!({"terminated": {"exitCode": 0}}),
                json!(null),
                "completed",
            ),
            (
                json!({"terminated": {"exitCode": 2}}),
                json!(null),
                "failed: exit code 2",
            ),
            (
                json!({"running": {}}),
                json!({"terminated": {"exitCode": 2}}),
                "running",
            ),
            (
                json!({"waiting": {"reason": "PodInitializing"}}),
                json!(null),
                "waiting: PodInitializing",
            ),
            (json!({"waiting": {}}), json!(null), "waiting"),
            (
                json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                json!({"terminated": {"exitCode": 2}}),
                "waiting: CrashLoopBackOff, last exit code 2",
            ),
        ];
        for (state, last_state, expected) in cases {
            let mut value = status("c", state);
            value["lastState"] = last_state;
            let container: ContainerStatus = serde_json::from_value(value).unwrap();
            assert_eq!(describe(&container), expected, "{container:?}");
        }
    }

    fn headers(targets: &[LogTarget]) -> Vec<String> {
        targets.iter().map(LogTarget::header).collect()
    }

    #[test]
    fn started_containers_of_the_package_newest_pod_first() {
        assert_eq!(
            headers(&log_targets(&pods(), "demo", "tuning", &[], None)),
            [
                "==> Pod: new, Container: tuning-config [running], Node: node-2 <==",
                "==> Pod: old, Container: tuning-apply [completed], Node: node-1 <==",
                "==> Pod: old, Container: tuning-applycheck [failed: exit code 2], Node: node-1 <==",
            ]
        );
    }

    #[test]
    fn a_stage_picks_its_container_and_nodes_filter_pods() {
        assert_eq!(
            headers(&log_targets(
                &pods(),
                "demo",
                "tuning",
                &[],
                Some(Stage::Apply)
            )),
            ["==> Pod: old, Container: tuning-apply [completed], Node: node-1 <=="]
        );
        let node_2 = parse_all(&["node-2".into()]).unwrap();
        assert_eq!(
            headers(&log_targets(
                &pods(),
                "demo",
                "tuning",
                &node_2,
                Some(Stage::Apply)
            )),
            Vec::<String>::new()
        );
        assert!(log_targets(&pods(), "other", "tuning", &[], None).is_empty());
    }
}
