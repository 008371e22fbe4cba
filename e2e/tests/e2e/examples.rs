//! Every manifest in `examples/` rolls out to the nodes it selects: each top-level `examples/*.yaml`
//! (found by listing the directory, so a new example is covered without touching this test) is
//! applied, its DeploymentPolicy first as the file lists it, to one devcluster of light nodes;
//! each Skyhook completes on exactly the nodes its selector targets, reports them all in
//! `status.completeNodes`, places each of them in exactly one rollout compartment, and leaves
//! every other node without any of its keys.
//!
//! The nodes targeted are computed here from the nodes' labels with `skyhook_api`'s one rule
//! ([`skyhook_api::v1alpha1::SkyhookSpec::target_selector`]), not read from the controller. The
//! examples name real package images; the test maps each of them to devcluster's `agentless`
//! stand-in (the scripts are not what is tested here, and `sysctl -p` must not reach the machine)
//! and sets `SLEEP_LEN` in every package's env on the parsed documents, so the files stay as
//! they are. `examples/invalid/` is `webhook_admission.rs`'s: each must be refused at admission.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, ensure};
use e2e::{Setup, checks, nodes};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde::Deserialize;
use serde_json::{Value, json};
use skyhook_api::image::ImageRef;
use skyhook_api::keys::{NodeKeyKind, SKYHOOK};
use skyhook_api::v1alpha1::Skyhook;

/// The labels of `node-1`, `node-2`, ... Each example with a selector must pick some of these
/// nodes but not all (the test checks it, so a new example with a new selector names the
/// labels to add here); `node-1` sits in both overlapping compartments of
/// policy-overlapping-compartments.yaml, `node-5` in none and is picked only by the example
/// without a selector.
const NODE_LABELS: [&[(&str, &str)]; 5] = [
    &[
        ("skyhook.nvidia.com/test-node", "demo"),
        ("agentpool", "gpu"),
        ("pool", "gpu"),
        ("canary", "true"),
    ],
    &[
        ("skyhook.nvidia.com/test-node", "demo"),
        ("skyhook.nvidia.com/node-type", "worker"),
    ],
    &[
        ("skyhook.nvidia.com/test-node", "policy"),
        ("skyhook.nvidia.com/node-type", "worker"),
        ("pool", "gpu"),
    ],
    &[
        ("skyhook.nvidia.com/test-node", "policy"),
        ("agentpool", "gpu"),
        ("canary", "true"),
    ],
    &[],
];

/// Seconds the `agentless` stand-in sleeps per container: none, the rollout is what is tested.
const SLEEP_LEN: &str = "0";

/// One file of `examples/`, ready to apply.
struct Example {
    file: PathBuf,
    /// Its documents in file order, with [`SLEEP_LEN`] in every package's env.
    documents: Vec<Value>,
    /// Its Skyhooks, as the file has them.
    skyhooks: Vec<Skyhook>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_rolls_out_to_the_nodes_it_selects() -> anyhow::Result<()> {
    let mut examples = read_examples(&e2e::workspace().join("examples"))?;
    examples.extend(read_examples(&e2e::workspace().join("examples/drain"))?);
    let map_dir = tempfile::tempdir()?;
    let image_map = write_image_map(&examples, map_dir.path())?;
    let installed = e2e::install_with(Setup {
        node_labels: BTreeMap::new(),
        image_map: Some(image_map),
        ..Setup::agentless(NODE_LABELS.len())
    })
    .await?;
    let client = installed.cluster.client()?;
    let node_labels = label_nodes(&client).await?;

    let mut targets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for example in &examples {
        for skyhook in &example.skyhooks {
            let name = skyhook.metadata.name.clone().unwrap_or_default();
            let targeted = targeted_nodes(skyhook, &node_labels);
            check_selection_is_telling(&example.file, skyhook, &targeted, node_labels.len())?;
            targets.insert(name, targeted);
        }
    }
    for example in &examples {
        for document in &example.documents {
            e2e::apply_yaml(&client, &document.to_string())
                .await
                .with_context(|| format!("applying {}", example.file.display()))?;
        }
    }

    let completions = targets
        .keys()
        .map(|name| installed.wait_for_status(name, "complete"));
    let completed = futures::future::try_join_all(completions).await?;
    for ((name, targeted), skyhook) in targets.iter().zip(&completed) {
        let count = targeted.len();
        assert_eq!(
            skyhook.data["status"]["completeNodes"],
            json!(format!("{count}/{count}")),
            "{name}, which targets {targeted:?}: {}",
            skyhook.data["status"]
        );
        let compartments = skyhook.data["status"]["compartmentStatuses"].as_object();
        let matched: i64 = compartments
            .into_iter()
            .flat_map(|compartments| compartments.values())
            .map(|compartment| compartment["matched"].as_i64().unwrap_or_default())
            .sum();
        assert_eq!(
            usize::try_from(matched).ok(),
            Some(count),
            "{name}: every targeted node is in exactly one compartment: {}",
            skyhook.data["status"]
        );
    }
    for (name, targeted) in &targets {
        for node in node_labels.keys() {
            if targeted.contains(node) {
                checks::wait_for_complete_node(&client, node, name)
                    .await
                    .with_context(|| format!("{name} targets {node}"))?;
            } else {
                check_untouched(&client, node, name).await?;
            }
        }
    }
    Ok(())
}

/// Every top-level `*.yaml` of `dir`, in name order.
fn read_examples(dir: &Path) -> anyhow::Result<Vec<Example>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("listing {}", dir.display()))?;
    files.retain(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "yaml"));
    files.sort();
    ensure!(!files.is_empty(), "no examples in {}", dir.display());
    files.into_iter().map(read_example).collect()
}

fn read_example(file: PathBuf) -> anyhow::Result<Example> {
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut documents = Vec::new();
    let mut skyhooks = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let mut value =
            Value::deserialize(document).with_context(|| format!("parsing {}", file.display()))?;
        if value.is_null() {
            continue;
        }
        if value["kind"] == "Skyhook" {
            let skyhook: Skyhook = serde_json::from_value(value.clone())
                .with_context(|| format!("reading a Skyhook of {}", file.display()))?;
            skyhooks.push(skyhook);
            set_sleep_len(&mut value);
        }
        documents.push(value);
    }
    ensure!(
        !skyhooks.is_empty(),
        "{} holds no Skyhook: an example shows one rolling out",
        file.display()
    );
    Ok(Example {
        file,
        documents,
        skyhooks,
    })
}

/// Adds `SLEEP_LEN` to the env of every package of the Skyhook document `skyhook`.
fn set_sleep_len(skyhook: &mut Value) {
    let packages = skyhook["spec"]["packages"].as_object_mut().into_iter();
    for package in packages.flatten().map(|(_, package)| package) {
        let sleep = json!({"name": "SLEEP_LEN", "value": SLEEP_LEN});
        match package["env"].as_array_mut() {
            Some(env) => env.push(sleep),
            None => package["env"] = json!([sleep]),
        }
    }
}

/// Writes an image map sending every package image of the examples to the `agentless`
/// stand-in; returns its path.
fn write_image_map(examples: &[Example], dir: &Path) -> anyhow::Result<PathBuf> {
    let mut repositories = BTreeSet::new();
    for skyhook in examples.iter().flat_map(|example| &example.skyhooks) {
        for package in skyhook.spec.packages.values() {
            let image = ImageRef::parse(&package.image)
                .with_context(|| format!("the package image {:?}", package.image))?;
            repositories.insert(image.repository());
        }
    }
    let images: Vec<Value> = repositories
        .into_iter()
        .map(|repository| {
            json!({
                "name": repository,
                "runtime": "played",
                "program": "agentless",
                "contents": {"from": "examples/packages/agentless", "at": "/skyhook-package"},
            })
        })
        .collect();
    let path = dir.join("images.yaml");
    std::fs::write(&path, json!({ "images": images }).to_string())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Gives `node-<i>` the labels of [`NODE_LABELS`]; returns every node's labels as the API
/// server then has them.
async fn label_nodes(
    client: &kube::Client,
) -> anyhow::Result<BTreeMap<String, BTreeMap<String, String>>> {
    for (index, labels) in NODE_LABELS.iter().enumerate() {
        nodes::label_nodes(client, [format!("node-{}", index + 1)], labels).await?;
    }
    let listed = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(listed
        .items
        .into_iter()
        .map(|node| {
            let labels = node.metadata.labels.unwrap_or_default();
            (node.metadata.name.unwrap_or_default(), labels)
        })
        .collect())
}

/// The nodes `skyhook` targets, by `skyhook_api`'s rule.
fn targeted_nodes(
    skyhook: &Skyhook,
    node_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> BTreeSet<String> {
    let selector = skyhook.spec.target_selector();
    node_labels
        .iter()
        .filter(|(_, labels)| selector.matches(labels))
        .map(|(node, _)| node.clone())
        .collect()
}

/// A Skyhook with a selector must pick some nodes but not all, or a rollout to the wrong nodes
/// could pass unseen; one without must pick every node.
fn check_selection_is_telling(
    file: &Path,
    skyhook: &Skyhook,
    targeted: &BTreeSet<String>,
    node_count: usize,
) -> anyhow::Result<()> {
    let name = skyhook.metadata.name.as_deref().unwrap_or_default();
    let has_selector = skyhook
        .spec
        .node_selectors
        .as_ref()
        .is_some_and(|selector| !skyhook_api::selector::is_empty(selector));
    if has_selector {
        ensure!(
            !targeted.is_empty() && targeted.len() < node_count,
            "{name} in {} selects {targeted:?} of {node_count} nodes: give NODE_LABELS labels \
             so that it selects some nodes but not all",
            file.display()
        );
    } else {
        ensure!(
            targeted.len() == node_count,
            "{name} in {} has no nodeSelectors but selects only {targeted:?}",
            file.display()
        );
    }
    Ok(())
}

/// Fails if node `node` carries any annotation, label or condition of Skyhook `skyhook`, or is
/// cordoned.
async fn check_untouched(client: &kube::Client, node: &str, skyhook: &str) -> anyhow::Result<()> {
    let found = Api::<Node>::all(client.clone()).get(node).await?;
    let annotations = found.metadata.annotations.clone().unwrap_or_default();
    let labels = found.metadata.labels.clone().unwrap_or_default();
    let conditions: BTreeSet<String> = found
        .status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .map(|condition| condition.type_.clone())
        .collect();
    for key in SKYHOOK.per_skyhook_node_keys(skyhook) {
        let present = match key.kind {
            NodeKeyKind::Annotation => annotations.contains_key(&key.key),
            NodeKeyKind::AnnotationAndLabel => {
                annotations.contains_key(&key.key) || labels.contains_key(&key.key)
            }
            NodeKeyKind::ConditionType => conditions.contains(&key.key),
        };
        ensure!(
            !present,
            "{skyhook} does not target {node} but wrote {} there: {}",
            key.key,
            nodes::skyhook_keys(&found)
        );
    }
    ensure!(
        !nodes::is_cordoned(&found),
        "{node} was left cordoned: {}",
        nodes::skyhook_keys(&found)
    );
    Ok(())
}
