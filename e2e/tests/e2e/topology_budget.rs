//! A budget's `topology` on a devcluster: four nodes in two racks, a budget of four nodes but
//! `maxDomains: 1`, a package that restarts a service (each node cordoned, drained and
//! interrupted). The budget sampler checks after every Node and pod event that the busy nodes
//! never span both racks; the Skyhook says which nodes wait for their rack, and the second rack
//! starts once the first is done.

use std::collections::BTreeMap;

use anyhow::Context;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;
use skyhook_api::keys;
use skyhook_api::v1alpha1::Skyhook;

use e2e::budget::{BudgetSampler, CompartmentBudget, SkyhookBudget};
use e2e::{Kubectl, Recorder, Setup};

const SKYHOOK: &str = "racked";
const RACKS: [(&str, &str); 4] = [
    ("node-1", "rack-a"),
    ("node-2", "rack-b"),
    ("node-3", "rack-a"),
    ("node-4", "rack-b"),
];

fn skyhook() -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {"skyhook.nvidia.com/test-node": "skyhooke2e"}},
        "interruptionBudget": {
            "count": 4,
            "topology": {"key": "example.com/rack", "maxDomains": 1}
        },
        "packages": {
            "restarter": {
                "version": "1.0.0",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "env": [{"name": "SLEEP_LEN", "value": "1"}],
                "interrupt": {"type": "service", "services": ["cron"]}
            }
        }
    });
    e2e::skyhook_manifest(SKYHOOK, spec, json!({}))
}

fn held(skyhook: &Skyhook) -> Option<String> {
    crate::skyhook_reads::true_condition_message(
        skyhook,
        keys::SKYHOOK.condition_topology_budget_held,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_of_both_racks_are_never_disrupted_at_once() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(RACKS.len())).await?;
    let client = installed.cluster.client()?;
    for (node, rack) in RACKS {
        e2e::nodes::label_nodes(&client, &[node.to_owned()], &[("example.com/rack", rack)]).await?;
    }
    let racks: BTreeMap<String, String> = RACKS
        .iter()
        .map(|(n, r)| ((*n).to_owned(), (*r).to_owned()))
        .collect();
    let budget = SkyhookBudget {
        skyhook: SKYHOOK.to_owned(),
        compartments: vec![
            CompartmentBudget::new("__default__", RACKS.iter().map(|(n, _)| *n), 4)
                .with_domains(racks, 1),
        ],
    };
    let sampler = BudgetSampler::start(&client, vec![budget]).await?;
    let skyhooks = Recorder::start(
        Api::<Skyhook>::all(client.clone()),
        watcher::Config::default(),
    )
    .await?;
    e2e::apply_yaml(&client, &skyhook()).await?;

    let seen = skyhooks
        .wait_until("the topology holding the second rack", |seen| {
            seen.iter().any(|s| held(s).is_some())
        })
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let message = seen.iter().find_map(held).unwrap_or_default();
    assert!(
        message.contains("wait for their example.com/rack domain: disrupted now rack-")
            && message.contains("allows maxDomains 1"),
        "{message}"
    );
    let kubectl = Kubectl::with_plugin(&installed)?;
    let manifest =
        std::env::temp_dir().join(format!("topology-budget-{}.yaml", std::process::id()));
    std::fs::write(&manifest, skyhook())?;
    let plan = kubectl
        .skyhook(&["plan", "-f", &manifest.to_string_lossy()])
        .await?;
    std::fs::remove_file(&manifest)?;
    assert!(
        plan.contains("DOMAIN") && plan.contains("rack-a") && plan.contains("rack-b"),
        "{plan}"
    );

    e2e::wait_for_skyhook_status(&client, SKYHOOK, "complete", e2e::WAIT)
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let report = sampler.finish().await?;
    assert!(
        report.peak(SKYHOOK, "__default__") >= 2,
        "both nodes of a rack went together: {report:?}"
    );
    assert_eq!(
        report.cordoned(SKYHOOK).len(),
        RACKS.len(),
        "every node was cordoned in turn: {report:?}"
    );
    Ok(())
}
