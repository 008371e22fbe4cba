//! A node whose `nodeState_<skyhook>` annotation does not parse (upstream's newest release,
//! §2.9): the Skyhook skips it, reports it in `NodeStateMalformed` and keeps rolling on the
//! other node; deleting the annotation brings the node back and the Skyhook becomes Ready.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use e2e::{Setup, checks};

const NAME: &str = "malformed-skyhook";
const CORRUPT: &str = "node-2";
const BAD_STATE: &str = "{not json";

const SKYHOOK: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: malformed-skyhook
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  packages:
    spencer:
      version: "3.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

/// `(status, reason, message)` of the Skyhook's condition `type_`.
fn condition(skyhook: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let found = skyhook.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let text = |field: &str| found[field].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason"), text("message")))
}

fn triple(status: &str, reason: &str, message: &str) -> Option<(String, String, String)> {
    Some((status.into(), reason.into(), message.into()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_an_unreadable_state_is_skipped_until_the_annotation_is_deleted()
-> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(3)).await?;
    let client = installed.cluster.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let key = e2e::nodes::node_state_key(NAME);
    let annotate = |value: serde_json::Value| {
        let patch = json!({"metadata": {"annotations": {key.clone(): value}}});
        Patch::Merge(patch)
    };
    nodes
        .patch(
            CORRUPT,
            &PatchParams::default(),
            &annotate(json!(BAD_STATE)),
        )
        .await?;
    e2e::apply_yaml(&client, SKYHOOK).await?;

    // The other two nodes roll on while node-2 is skipped.
    checks::wait_for_complete_node(&client, "node-1", NAME).await?;
    checks::wait_for_complete_node(&client, "node-3", NAME).await?;
    let malformed = triple(
        "True",
        "ParseError",
        "nodeState annotation cannot be parsed on 1 node(s): node-2",
    );
    let not_ready = triple(
        "False",
        "Unknown",
        "2/3 nodes complete (node-1, node-3), 1 unknown (node-2)",
    );
    e2e::wait_for_skyhook(&client, NAME, "NodeStateMalformed and Ready False", |s| {
        condition(s, "NodeStateMalformed") == malformed && condition(s, "Ready") == not_ready
    })
    .await?;
    let corrupt = nodes.get(CORRUPT).await?;
    let annotations = corrupt.metadata.annotations.unwrap_or_default();
    anyhow::ensure!(
        annotations.get(&key).map(String::as_str) == Some(BAD_STATE),
        "the unreadable annotation is left as it is: {annotations:?}"
    );

    nodes
        .patch(CORRUPT, &PatchParams::default(), &annotate(json!(null)))
        .await?;
    checks::wait_for_complete_node(&client, CORRUPT, NAME).await?;
    let ready = triple(
        "True",
        "NodesConverged",
        "3/3 nodes complete (node-1, node-2, node-3)",
    );
    e2e::wait_for_skyhook(&client, NAME, "Ready and no NodeStateMalformed", |s| {
        condition(s, "NodeStateMalformed").is_none() && condition(s, "Ready") == ready
    })
    .await?;
    Ok(())
}
