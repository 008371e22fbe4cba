//! `migrate`: the I/O around [`crate::migrate`]. It reads the source, the nodes and the target
//! until the operator reports the takeover done; what to create, what to check and when the
//! source may go are the pure module's.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use skyhook_api::generation::Group;
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::v1alpha1::Skyhook;

use super::console::Console;
use super::error::RunError;
use super::kube_io::{get_skyhook, get_skyhook_opt, list, send};
use crate::cli::{GlobalArgs, MigrateArgs, binary_name};
use crate::migrate::{
    MigrateError, Progress, check_existing_target, check_settled, handoff_patch, progress,
    target_manifest,
};
use crate::patches::{Patch, Target};

/// How often the takeover is read again while the operator works on it.
const POLL: Duration = Duration::from_secs(1);
/// The most node names printed in one line.
const NAMES_SHOWN: usize = 10;

/// `migrate <name> [--to skyhook|nodewright]`.
pub(super) async fn migrate(
    client: &Client,
    global: &GlobalArgs,
    console: &mut Console<'_>,
    args: MigrateArgs,
) -> Result<(), RunError> {
    let to = args.to.group();
    let from = to.other();
    let name = args.skyhook.as_str();
    check_served(client).await?;
    let source = get_skyhook(client, from, name).await?;
    check_settled(&source, from)?;
    let manifest = target_manifest(&source, from, to)?;
    let existing = get_skyhook_opt(client, to, name)
        .await
        .map_err(|source| read_error(format!("get {} {name:?}", to.kind()), source))?;
    if let Some(existing) = &existing {
        check_existing_target(existing, name, from, to)?;
    }
    let nodes = list(Api::<Node>::all(client.clone()), "list nodes").await?;
    let carriers = progress(&nodes, Some(&source), (from, to), name, "").pending_nodes;
    console.line(&format!(
        "{} {name:?} -> {} {name:?}",
        from.kind(),
        to.kind()
    ))?;
    console.line(&format!(
        "Nodes with its state ({}): {}",
        carriers.len(),
        names(&carriers)
    ))?;
    if global.dry_run {
        let yaml = serde_yaml::to_string(&manifest).unwrap_or_default();
        console.print(&yaml)?;
        return console.line("Dry run: nothing was changed");
    }
    if !args.confirm && !console.confirm()? {
        return Err(RunError::Aborted);
    }
    let handoff = Patch {
        target: Target::Skyhook(name.to_owned()),
        body: handoff_patch(from, to),
        description: format!("mark {} {name:?} as handing its work over", from.kind()),
    };
    send(client, from, &handoff).await?;
    let target_uid = match existing {
        Some(existing) => {
            console.line(&format!(
                "{} {name:?} exists: taking it as the target",
                to.kind()
            ))?;
            existing.metadata.uid.unwrap_or_default()
        }
        None => {
            let uid = create(client, global.group, to, manifest).await?;
            console.line(&format!("{} {name:?} created", to.kind()))?;
            uid
        }
    };
    let deadline = Instant::now() + args.timeout;
    let mut shown: Option<(usize, usize)> = None;
    loop {
        let nodes = list(Api::<Node>::all(client.clone()), "list nodes").await?;
        let source = get_skyhook_opt(client, from, name)
            .await
            .map_err(|source| read_error(format!("get {} {name:?}", from.kind()), source))?;
        let now = progress(&nodes, source.as_ref(), (from, to), name, &target_uid);
        let counts = (now.adopted, now.adopted + now.pending_nodes.len());
        if shown != Some(counts) {
            console.line(&format!(
                "{} {name:?} adopted {} of {} node(s)",
                to.kind(),
                counts.0,
                counts.1
            ))?;
            shown = Some(counts);
        }
        if now.done() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(timeout(&now, (from, to), name, args.timeout).into());
        }
        tokio::time::sleep(POLL).await;
    }
    delete_source(client, from, name).await?;
    // The operator lets an inert object go by removing its finalizer: wait for it, so that a
    // finished migrate leaves one object of the name.
    while get_skyhook_opt(client, from, name)
        .await
        .map_err(|source| read_error(format!("get {} {name:?}", from.kind()), source))?
        .is_some()
    {
        if Instant::now() >= deadline {
            return Err(MigrateError::SourceNotGone {
                kind: from.kind(),
                plural: from.plural(),
                name: name.to_owned(),
                target_kind: to.kind(),
                timeout: format!("{}s", args.timeout.as_secs()),
            }
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
    console.line(&format!(
        "{} {name:?} deleted: {} {name:?} does its work; the old keys stay on the nodes for the operator's LEGACY_CLEANUP_DELAY",
        from.kind(),
        to.kind()
    ))
}

/// Refuses a cluster that does not serve both groups, before anything is written.
async fn check_served(client: &Client) -> Result<(), RunError> {
    let groups = client
        .list_api_groups()
        .await
        .map_err(|source| read_error("list the API groups the cluster serves".into(), source))?;
    for group in Group::ALL {
        if !groups.groups.iter().any(|g| g.name == group.name()) {
            return Err(MigrateError::NotServed { group }.into());
        }
    }
    Ok(())
}

/// Creates the target from its manifest; returns its uid.
async fn create(
    client: &Client,
    plugin: Group,
    to: Group,
    manifest: Value,
) -> Result<String, RunError> {
    let name = manifest["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let params = PostParams {
        field_manager: Some(binary_name(plugin).to_owned()),
        ..PostParams::default()
    };
    let action = format!("create {} {name:?}", to.kind());
    let write_error = |source| RunError::Write {
        action: action.clone(),
        source,
    };
    let decode_error = |error: serde_json::Error| RunError::Write {
        action: action.clone(),
        source: kube::Error::SerdeError(error),
    };
    let created = match to {
        Group::Skyhook => {
            let object: Skyhook = serde_json::from_value(manifest).map_err(decode_error)?;
            let created = Api::<Skyhook>::all(client.clone())
                .create(&params, &object)
                .await;
            created.map_err(write_error)?.metadata.uid
        }
        Group::NodeWright => {
            let object: NodeWright = serde_json::from_value(manifest).map_err(decode_error)?;
            let created = Api::<NodeWright>::all(client.clone())
                .create(&params, &object)
                .await;
            created.map_err(write_error)?.metadata.uid
        }
    };
    Ok(created.unwrap_or_default())
}

/// Deletes the source, which the operator lets go once it is inert (its finalizer only).
async fn delete_source(client: &Client, from: Group, name: &str) -> Result<(), RunError> {
    let params = DeleteParams::default();
    let result = match from {
        Group::Skyhook => Api::<Skyhook>::all(client.clone())
            .delete(name, &params)
            .await
            .map(drop),
        Group::NodeWright => Api::<NodeWright>::all(client.clone())
            .delete(name, &params)
            .await
            .map(drop),
    };
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map_err(|source| RunError::Write {
            action: format!("delete {} {name:?}", from.kind()),
            source,
        }),
    }
}

/// The timeout error, with what is still missing.
fn timeout(
    now: &Progress,
    (from, to): (Group, Group),
    name: &str,
    waited: Duration,
) -> MigrateError {
    MigrateError::Timeout {
        kind: to.kind(),
        name: name.to_owned(),
        source_kind: from.kind(),
        timeout: format!("{}s", waited.as_secs()),
        pending: now.pending(from),
    }
}

fn read_error(action: String, source: kube::Error) -> RunError {
    RunError::Read { action, source }
}

/// At most [`NAMES_SHOWN`] names, then how many more.
fn names(nodes: &[String]) -> String {
    if nodes.is_empty() {
        return "none".to_owned();
    }
    let mut text = nodes
        .iter()
        .take(NAMES_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if nodes.len() > NAMES_SHOWN {
        text.push_str(&format!(" and {} more", nodes.len() - NAMES_SHOWN));
    }
    text
}
