//! Timing and the chart's monitoring on a one-node devcluster: a rollout populates the stage
//! duration histogram and stamps each node-state entry with its last transition, and every
//! metric the chart's Grafana dashboard and PrometheusRule query is in the controller's real
//! `/metrics` output.

use std::collections::BTreeSet;

use anyhow::ensure;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use e2e::metrics::{self, find};
use e2e::{Setup, nodes, promql};

const NODE: &str = "node-1";
const NAME: &str = "timed";

const TIMED: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: timed
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  additionalTolerations:
    - key: nvidia.com/gpu
      effect: NoSchedule
  packages:
    tuning:
      version: "1.0.0"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_durations_and_the_charts_metrics() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(&client, TIMED).await?;
    installed.wait_for_status(NAME, "complete").await?;

    let node = Api::<Node>::all(client.clone()).get(NODE).await?;
    let times = nodes::transition_times(&node, NAME)?;
    ensure!(
        times.get("tuning|1.0.0").is_some_and(Option::is_some),
        "the entry has no transition time: {times:?}"
    );
    // Beside a node state that stays exactly upstream's JSON.
    let state =
        (node.metadata.annotations.as_ref()).and_then(|a| a.get(&nodes::node_state_key(NAME)));
    assert_eq!(
        state.map(String::as_str),
        Some(
            r#"{"tuning|1.0.0":{"name":"tuning","version":"1.0.0","image":"ghcr.io/nvidia/skyhook/agentless","stage":"config","state":"complete"}}"#
        )
    );

    let port = installed.metrics_port();
    let labels = |stage| {
        [
            ("skyhook_name", NAME),
            ("package_name", "tuning"),
            ("stage", stage),
        ]
    };
    // Without an interrupt a package runs apply then config, each once.
    for stage in ["apply", "config"] {
        metrics::wait_for_metric(
            port,
            "skyhook_package_stage_duration_seconds_count",
            &labels(stage),
            Some(1.0),
        )
        .await?;
    }
    let samples = metrics::scrape(port).await?;
    for stage in ["apply", "config"] {
        let sum = find(
            &samples,
            "skyhook_package_stage_duration_seconds_sum",
            &labels(stage),
        );
        // The agentless image sleeps SLEEP_LEN seconds in each step.
        ensure!(
            sum.is_some_and(|seconds| seconds >= 1.0),
            "{stage} took {sum:?} s"
        );
    }

    let scraped: BTreeSet<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    let missing: Vec<String> = promql::chart_metric_names()?
        .into_iter()
        .filter(|(name, _)| !scraped.contains(name.as_str()))
        .map(|(name, place)| format!("{name} (in {place})"))
        .collect();
    ensure!(
        missing.is_empty(),
        "the chart queries metrics the controller does not publish: {missing:?}; it publishes {scraped:?}"
    );
    Ok(())
}
