//! Timing and the chart's monitoring on a one-node devcluster: a rollout populates the stage
//! duration histogram and stamps each node-state entry with its last transition, and every
//! metric the chart's Grafana dashboard and PrometheusRule query is in the controller's real
//! `/metrics` output; and the secure `/metrics` (HTTPS, TokenReview and SubjectAccessReview)
//! answering 200 to a reader bound to the chart's metrics-reader role, 401 without a token and
//! 403 to an account not bound, with a NodeWright's `nodewright_*` series beside the Skyhooks'.

use std::collections::BTreeSet;

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, PostParams};

use e2e::metrics::{self, find};
use e2e::{Setup, nodes, promql};
use skyhook_api::nodewright_v1alpha1::NodeWright;

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

/// The ServiceAccount bound to the chart's metrics-reader ClusterRole, and one bound to nothing.
const NODEWRIGHT: &str = r#"
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata:
  name: watched
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  packages:
    tuning:
      version: "1.0.0"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

const READER: &str = "metrics-reader";
const STRANGER: &str = "metrics-stranger";
const ACCOUNTS_NAMESPACE: &str = "default";
/// The chart's ClusterRole granting get on /metrics, for a release named `skyhook-operator`.
const CHART_METRICS_READER: &str = "skyhook-operator-metrics-reader";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_metrics_answer_only_readers_allowed_to_get_them() -> anyhow::Result<()> {
    let installed = e2e::install_serving_both_groups(Setup::agentless(1).secure_metrics()).await?;
    let client = installed.cluster.client()?;
    // A NodeWright publishes its own `nodewright_*` series through the same endpoint.
    e2e::apply_yaml(&client, NODEWRIGHT).await?;
    let nodewrights: Api<NodeWright> = Api::all(client.clone());
    e2e::wait_for_nodewright_status(&nodewrights, "watched", "complete")
        .await
        .with_context(|| installed.controller_log_tail(40))?;

    // The chart's own role, so that the test holds what the chart ships.
    let rendered = e2e::helm::render(&[], &[])?;
    let reader_role = rendered
        .iter()
        .find(|doc| doc["kind"] == "ClusterRole" && doc["metadata"]["name"] == CHART_METRICS_READER)
        .with_context(|| format!("the chart renders no ClusterRole {CHART_METRICS_READER}"))?;
    e2e::apply_yaml(&client, &serde_json::to_string(reader_role)?).await?;
    e2e::apply_yaml(
        &client,
        &format!(
            r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {READER}, namespace: {ACCOUNTS_NAMESPACE}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {STRANGER}, namespace: {ACCOUNTS_NAMESPACE}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {READER}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {CHART_METRICS_READER}}}
subjects: [{{kind: ServiceAccount, name: {READER}, namespace: {ACCOUNTS_NAMESPACE}}}]
"#
        ),
    )
    .await?;
    // The controller caches a 403 for a minute: scrape only once the binding is in effect.
    wait_until_allowed(&client, READER).await?;

    let port = installed.metrics_port();
    let reader_token = service_account_token(&client, READER).await?;
    let answer = metrics::scrape_https(port, Some(&reader_token)).await?;
    ensure!(
        answer.status == 200,
        "the reader's scrape answered {}: {:.300}",
        answer.status,
        answer.body
    );
    let samples = metrics::parse(&answer.body);
    ensure!(
        samples
            .iter()
            .any(|sample| sample.name.starts_with("skyhook_")),
        "no skyhook_ metric in {:.300}",
        answer.body
    );
    ensure!(
        samples
            .iter()
            .any(|sample| sample.name == "nodewright_status"
                && sample.labels.get("nodewright_name").map(String::as_str) == Some("watched")),
        "no nodewright_status of the NodeWright in {:.300}",
        answer.body
    );

    let anonymous = metrics::scrape_https(port, None).await?;
    ensure!(
        anonymous.status == 401,
        "a scrape without a token answered {}: {:.300}",
        anonymous.status,
        anonymous.body
    );

    let stranger_token = service_account_token(&client, STRANGER).await?;
    let stranger = metrics::scrape_https(port, Some(&stranger_token)).await?;
    ensure!(
        stranger.status == 403,
        "the unbound account's scrape answered {}: {:.300}",
        stranger.status,
        stranger.body
    );

    let forged = metrics::scrape_https(port, Some("not-a-token")).await?;
    ensure!(
        forged.status == 401,
        "a scrape with a forged token answered {}",
        forged.status
    );

    // And the reader's cached decision still serves.
    let again = metrics::scrape_https(port, Some(&reader_token)).await?;
    ensure!(
        again.status == 200,
        "the reader's second scrape answered {}",
        again.status
    );
    Ok(())
}

/// A short-lived token of the ServiceAccount (TokenRequest API), as a projected volume gives
/// Prometheus.
async fn service_account_token(client: &kube::Client, account: &str) -> anyhow::Result<String> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answered = Api::<ServiceAccount>::namespaced(client.clone(), ACCOUNTS_NAMESPACE)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .with_context(|| {
            format!("requesting a token of ServiceAccount {ACCOUNTS_NAMESPACE}/{account}")
        })?;
    answered
        .status
        .map(|status| status.token)
        .with_context(|| format!("the TokenRequest of {account} has no status"))
}

/// Waits until the API server's authorizer lets the ServiceAccount get /metrics.
async fn wait_until_allowed(client: &kube::Client, account: &str) -> anyhow::Result<()> {
    let reviews = Api::<SubjectAccessReview>::all(client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!(
                "system:serviceaccount:{ACCOUNTS_NAMESPACE}:{account}"
            )),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/metrics".to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let deadline = tokio::time::Instant::now() + e2e::WAIT;
    loop {
        let answer = reviews.create(&PostParams::default(), &review).await?;
        if answer.status.is_some_and(|status| status.allowed) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{account} may still not get /metrics after {:?}", e2e::WAIT);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
