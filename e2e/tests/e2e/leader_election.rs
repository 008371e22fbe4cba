//! Two controller replicas with leader election (Lease `3c22c1ae.nvidia.com`): the leader is
//! killed with SIGKILL while a node is cordoned for an interrupt, the standby takes the Lease
//! over once it expires, finishes the rollout and leaves no node cordoned. The budget sampler
//! runs throughout: the takeover must not start a second node while the first is still held.

use std::collections::BTreeMap;

use anyhow::Context;
use e2e::budget::{BudgetSampler, CompartmentBudget, SkyhookBudget};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use serde_json::json;
use skyhook_devcluster::{InstallOptions, SkyhookInstall};

const LEASE: &str = "3c22c1ae.nvidia.com";
const SKYHOOK: &str = "failover";
const NODES: usize = 2;

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_finishes_the_rollout_after_the_leader_is_killed() -> anyhow::Result<()> {
    let leader_election = BTreeMap::from([("LEADER_ELECTION".to_owned(), "true".to_owned())]);
    let mut installed = e2e::install_with(e2e::Setup {
        controller_env: leader_election.clone(),
        ..e2e::Setup::agentless(NODES)
    })
    .await?;
    let client = installed.cluster.client()?;
    let leases: Api<Lease> =
        Api::namespaced(client.clone(), skyhook_devcluster::install::NAMESPACE);
    let first = e2e::within(
        "the first replica to take the Lease",
        e2e::WAIT,
        await_condition(leases.clone(), LEASE, |lease: Option<&Lease>| {
            lease.and_then(holder).is_some()
        }),
    )
    .await?
    .context("the Lease vanished")?;
    let first_holder = holder(&first).unwrap_or_default().to_owned();

    let mut standby = installed
        .cluster
        .start_controller(InstallOptions {
            agent_image: Some(e2e::AGENTLESS_AGENT_IMAGE.to_owned()),
            extra_env: leader_election,
            replica: Some("standby".to_owned()),
            ..InstallOptions::default()
        })
        .await
        .context("starting the standby replica")?;

    let nodes: Vec<String> = (1..=NODES).map(|i| format!("node-{i}")).collect();
    let sampler = BudgetSampler::start(
        &client,
        vec![SkyhookBudget {
            skyhook: SKYHOOK.to_owned(),
            compartments: vec![CompartmentBudget::new(
                "__default__",
                nodes.iter().map(String::as_str),
                1,
            )],
        }],
    )
    .await?;
    let skyhook = json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": SKYHOOK},
        "spec": {
            "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
            "interruptionBudget": {"count": 1},
            "packages": {
                "restarter": {
                    "version": "1.2.3",
                    "image": "ghcr.io/nvidia/skyhook/agentless",
                    "env": [{"name": "SLEEP_LEN", "value": "1"}],
                    "interrupt": {"type": "service", "services": ["cron"]}
                }
            }
        }
    });
    e2e::apply_yaml(&client, &skyhook.to_string()).await?;

    // Mid-rollout: a node cordoned by the Skyhook, nodes still to do.
    let node_api: Api<Node> = Api::all(client.clone());
    let cordon_key = format!("skyhook.nvidia.com/cordon_{SKYHOOK}");
    let cordoned = e2e::within(
        "a node cordoned by the rollout",
        e2e::WAIT,
        await_condition(node_api.clone(), "node-1", |node: Option<&Node>| {
            node.is_some_and(|node| {
                e2e::nodes::is_cordoned(node)
                    && node
                        .metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(&cordon_key))
            })
        }),
    )
    .await?;
    assert!(cordoned.is_some());
    let before = e2e::skyhook_api(&client).get(SKYHOOK).await?;
    assert_ne!(
        e2e::skyhook_status(&before),
        Some("complete"),
        "the leader is killed mid-rollout"
    );

    installed.controller.kill();
    let taken = e2e::within(
        "the standby to take the Lease over",
        e2e::WAIT,
        await_condition(leases.clone(), LEASE, |lease: Option<&Lease>| {
            lease
                .and_then(holder)
                .is_some_and(|holder| holder != first_holder)
        }),
    )
    .await?
    .context("the Lease vanished")?;
    // The identity is `<host>_<pid>_<start>`: the standby's pid names the new holder.
    let standby_pid = format!("_{}_", standby.record().pid);
    assert!(
        holder(&taken).is_some_and(|holder| holder.contains(&standby_pid)),
        "the standby (pid {}) holds the Lease: {taken:?}",
        standby.record().pid
    );
    assert!(
        taken
            .spec
            .as_ref()
            .and_then(|spec| spec.lease_transitions)
            .is_some_and(|transitions| transitions >= 1),
        "a takeover counts as a transition: {taken:?}"
    );

    e2e::wait_for_skyhook_status(&client, SKYHOOK, "complete", e2e::WAIT)
        .await
        .with_context(|| devcluster::controlplane::process::log_tail(&standby.record().log, 40))?;
    for node in node_api.list(&Default::default()).await?.items {
        assert!(
            !e2e::nodes::is_cordoned(&node),
            "no node is left cordoned: {}",
            e2e::nodes::skyhook_keys(&node)
        );
        assert!(
            e2e::nodes::has_status(&node, SKYHOOK, "complete"),
            "every node completes: {}",
            e2e::nodes::skyhook_keys(&node)
        );
    }
    let report = sampler.finish().await?;
    assert_eq!(report.peak(SKYHOOK, "__default__"), 1, "{report:?}");
    standby.stop(std::time::Duration::from_secs(10));
    Ok(())
}
