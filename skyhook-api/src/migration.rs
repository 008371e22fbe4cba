//! Moving a workload between the two API groups (pure): converting the object, adopting the
//! node state its twin left, and the rollback window after which that state is pruned.
//!
//! A Skyhook and a NodeWright of one name are one workload ([`crate::generation`]). Moving it
//! from one group to the other must not re-run a single package step: the new object has to
//! find every node exactly where the old one left it. So the conversion keeps the name, the
//! spec and the status, and the adoption copies the old object's per-name node keys to the new
//! prefix before the new object reads them. The old keys stay for `LEGACY_CLEANUP_DELAY`, so
//! that a rollback to an older operator still finds them, and are pruned after it.
//!
//! Every function here takes plain data and returns an edit; the controller and the plugin
//! turn the edits into patches (conditional on `resourceVersion`).

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::generation::{Group, handoff_annotation, migrated_at_annotation};
use crate::image::{ImageError, ImageRef};
use crate::keys::NodeKeyKind;
use crate::string_map::StringMap;
use crate::v1alpha1::{DeploymentPolicy, Package, Skyhook, SkyhookStatus};

// ---- Object conversion (design §3.1) ------------------------------------------------------

/// Annotation on an object created by converting another group's object: the source's name.
/// Upstream's mirror controller stamps `nodewright.nvidia.com/mirrored-from` so that it only
/// ever re-syncs a target it created itself and backs off from one a user or GitOps owns; the
/// reverse direction's `skyhook.nvidia.com/mirrored-from` is ours and serves `migrate` the
/// same way.
pub fn mirrored_from_annotation(group: Group) -> String {
    format!("{}/mirrored-from", group.name())
}

/// Annotation beside [`mirrored_from_annotation`]: the source's `metadata.generation` when it
/// was converted, so that a later look can tell a target in step with its source from a stale
/// one without comparing specs (upstream's `mirrored-generation`).
pub fn mirrored_generation_annotation(group: Group) -> String {
    format!("{}/mirrored-generation", group.name())
}

/// An object converted to the other group, ready to be created there.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted<T = Skyhook> {
    /// The converted object. Its annotations already hold [`Converted::stamps`]. A NodeWright
    /// comes out as a [`Skyhook`] (one type carries either group's workload) and is turned into
    /// a [`crate::nodewright_v1alpha1::NodeWright`] with `From`.
    pub object: T,
    /// The stamps written on the object ([`mirrored_from_annotation`],
    /// [`mirrored_generation_annotation`]), apart so that a caller re-syncing an existing
    /// target, or checking one it found, knows which annotations are the stamp.
    pub stamps: BTreeMap<String, String>,
}

/// Why an object cannot be converted. Each message names the object and says how to fix it,
/// because the plugin prints it as is and stops the migration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The source and the target group are the same: there is nothing to convert, and the
    /// stamps would claim a migration that did not happen.
    #[error(
        "cannot convert a {kind} to its own API group {group}; name the other group as the target"
    )]
    SameGroup {
        /// The kind of the group given twice.
        kind: &'static str,
        /// The group given twice.
        group: Group,
    },
    /// The source has no `metadata.name`, which the target keeps and the stamp records.
    #[error(
        "cannot convert a {kind} without metadata.name; read the object from the cluster (or give it a name) and retry"
    )]
    MissingName {
        /// The source's kind.
        kind: &'static str,
    },
    /// A package image that does not parse, so its inline tag or digest cannot be moved out.
    #[error(
        "cannot convert {kind} {name:?}: package {package:?} has image {image:?}, which does not parse ({source}); fix the image in the {kind} and retry"
    )]
    BadImage {
        /// The source's kind.
        kind: &'static str,
        /// The source's name.
        name: String,
        /// The package (its key in `spec.packages`).
        package: String,
        /// The image as written.
        image: String,
        /// What is wrong with it.
        source: ImageError,
    },
    /// An inline image digest and a different `containerSHA`: the two pins disagree, so the
    /// conversion cannot tell which bytes the package is meant to pull.
    #[error(
        "cannot convert {kind} {name:?}: package {package:?} pins digest {image_digest} in its image but its containerSHA is {container_sha}; set containerSHA to the digest the package must pull, remove the digest from the image, and retry"
    )]
    ConflictingDigest {
        /// The source's kind.
        kind: &'static str,
        /// The source's name.
        name: String,
        /// The package (its key in `spec.packages`).
        package: String,
        /// The digest written in the image.
        image_digest: String,
        /// The package's `containerSHA`.
        container_sha: String,
    },
}

/// Converts a workload object of group `from` to group `to`, for `migrate` (and for a check
/// that a target is what the source would give).
///
/// The target must continue the source's work unchanged, so it keeps the name, the spec, the
/// status (the adopter's status is seeded from it) and every annotation and label, those under
/// `<from>/` moved to `<to>/` (pause, disable and version keep their meaning). What belongs to
/// the stored source and not to the workload is dropped: uid, resourceVersion, managedFields,
/// finalizers (each group's own is added by its controller), creation and deletion stamps,
/// generation, and the source's own migration annotations ([`mirrored_from_annotation`],
/// [`mirrored_generation_annotation`], [`migrated_at_annotation`], [`handoff_annotation`]) of
/// either group, which describe the source's history and would make the new object skip its
/// adoption. A package image loses its inline tag (the version supplies it: that is what is
/// pulled already) and its inline digest, moved to an empty `containerSHA`; the nodewright group
/// rejects both inline forms.
pub fn convert(source: &Skyhook, from: Group, to: Group) -> Result<Converted, ConvertError> {
    let (metadata, stamps) = convert_metadata(&source.metadata, from, to)?;
    let name = metadata.name.clone().unwrap_or_default();
    let mut object = source.clone();
    object.metadata = metadata;
    for (package, spec) in &mut object.spec.packages {
        bare_image(from.kind(), &name, package, spec)?;
    }
    Ok(Converted { object, stamps })
}

/// Converts a DeploymentPolicy of group `from` to group `to` (its spec is the same in both
/// groups), so that a migrated workload finds its policy in the target group, where the policy
/// is looked up. Metadata is handled as [`convert`] does.
pub fn convert_policy(
    source: &DeploymentPolicy,
    from: Group,
    to: Group,
) -> Result<Converted<DeploymentPolicy>, ConvertError> {
    let (metadata, stamps) = convert_metadata(&source.metadata, from, to)?;
    let mut object = source.clone();
    object.metadata = metadata;
    Ok(Converted { object, stamps })
}

/// The target's metadata and stamps (see [`convert`]).
fn convert_metadata(
    source: &ObjectMeta,
    from: Group,
    to: Group,
) -> Result<(ObjectMeta, BTreeMap<String, String>), ConvertError> {
    if from == to {
        return Err(ConvertError::SameGroup {
            kind: from.kind(),
            group: from,
        });
    }
    let name = source
        .name
        .clone()
        .filter(|name| !name.is_empty())
        .ok_or(ConvertError::MissingName { kind: from.kind() })?;
    let mut stamps = BTreeMap::from([(mirrored_from_annotation(to), name.clone())]);
    // A source never stored has no generation to record; the stamp then says nothing rather
    // than a made-up number.
    if let Some(generation) = source.generation {
        stamps.insert(mirrored_generation_annotation(to), generation.to_string());
    }
    let mut annotations = rekey(source.annotations.as_ref(), from, to);
    annotations.extend(stamps.clone());
    let labels = rekey(source.labels.as_ref(), from, to);
    let metadata = ObjectMeta {
        name: Some(name),
        annotations: Some(annotations),
        labels: (!labels.is_empty()).then_some(labels),
        uid: None,
        resource_version: None,
        managed_fields: None,
        finalizers: None,
        creation_timestamp: None,
        deletion_timestamp: None,
        deletion_grace_period_seconds: None,
        generation: None,
        self_link: None,
        ..source.clone()
    };
    Ok((metadata, stamps))
}

/// The migration's own object annotations, of both groups: never carried to a target.
fn migration_annotations() -> [String; 8] {
    let [a, b] = Group::ALL;
    [
        mirrored_from_annotation(a),
        mirrored_generation_annotation(a),
        migrated_at_annotation(a),
        handoff_annotation(a),
        mirrored_from_annotation(b),
        mirrored_generation_annotation(b),
        migrated_at_annotation(b),
        handoff_annotation(b),
    ]
}

/// `map` with every key under `<from>/` moved to `<to>/`, others kept as they are, and the
/// migration's own annotations left out. A moved key wins over a `<to>/` key the source also
/// carries, because the `<from>/` one is what governed the source.
fn rekey(
    map: Option<&BTreeMap<String, String>>,
    from: Group,
    to: Group,
) -> BTreeMap<String, String> {
    let from_prefix = format!("{}/", from.name());
    let to_prefix = format!("{}/", to.name());
    let skipped = migration_annotations();
    let mut kept = BTreeMap::new();
    let mut moved = BTreeMap::new();
    for (key, value) in map.into_iter().flatten() {
        if skipped.contains(key) {
            continue;
        }
        match key.strip_prefix(&from_prefix) {
            Some(rest) => moved.insert(format!("{to_prefix}{rest}"), value.clone()),
            None => kept.insert(key.clone(), value.clone()),
        };
    }
    kept.extend(moved);
    kept
}

/// Moves `package`'s inline tag and digest out of its image (see [`convert`]).
fn bare_image(
    kind: &'static str,
    name: &str,
    key: &str,
    package: &mut Package,
) -> Result<(), ConvertError> {
    let parsed = ImageRef::parse(&package.image).map_err(|source| ConvertError::BadImage {
        kind,
        name: name.to_owned(),
        package: key.to_owned(),
        image: package.image.clone(),
        source,
    })?;
    if parsed.tag.is_none() && parsed.digest.is_none() {
        return Ok(());
    }
    if let Some(digest) = &parsed.digest {
        match package
            .container_sha
            .as_deref()
            .filter(|sha| !sha.is_empty())
        {
            None => package.container_sha = Some(digest.clone()),
            Some(sha) if sha == digest => {}
            Some(sha) => {
                return Err(ConvertError::ConflictingDigest {
                    kind,
                    name: name.to_owned(),
                    package: key.to_owned(),
                    image_digest: digest.clone(),
                    container_sha: sha.to_owned(),
                });
            }
        }
    }
    package.image = parsed.repository();
    Ok(())
}

// ---- Node adoption (design §3.2) ----------------------------------------------------------

/// Which rule settles a key present under both prefixes when a node is adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdoptionKind {
    /// Upstream's takeover (the adopter carries `mirrored-from` or `legacy-migrated-at` and no
    /// marker): an existing `<to>` key wins, as upstream's copy rule has it, because an
    /// upstream operator may already have moved the node on under the new prefix. A node with
    /// `<to>/version_<n>` was migrated by upstream and only gets the marker.
    Upstream,
    /// Our `migrate`: the source is the truth up to the handoff, so it wins, and `<to>` keys of
    /// the name the source lacks are removed (stale shadows of an earlier round trip, which
    /// would otherwise re-run or skip steps).
    Handoff,
}

/// The adoption rule for `to` taking a name over from its twin of group `from`, whose
/// annotations are `source`: [`AdoptionKind::Handoff`] when the twin hands the name to `to`
/// itself ([`handoff_annotation`], which our `migrate` writes on the object it migrates), and
/// [`AdoptionKind::Upstream`] otherwise (a NodeWright created beside a Skyhook by upstream's
/// mirror, by GitOps or by hand, on nodes an upstream operator may already have moved on).
pub fn adoption_kind(source: &dyn StringMap, from: Group, to: Group) -> AdoptionKind {
    if source.value(&handoff_annotation(from)) == Some(to.name()) {
        AdoptionKind::Handoff
    } else {
        AdoptionKind::Upstream
    }
}

/// The label edit that moves an operator object (a package or node-metadata ConfigMap) of
/// group `from` to group `to`: each `<from>/` label removed (`None`) and set under `<to>/`
/// (upstream rewrites the ConfigMaps' label keys the same way), or `None` when it carries no
/// `<from>/` label. Other labels stay.
pub fn moved_labels(
    labels: &BTreeMap<String, String>,
    from: Group,
    to: Group,
) -> Option<BTreeMap<String, Option<String>>> {
    let from_prefix = format!("{}/", from.name());
    let mut edit = BTreeMap::new();
    for (key, value) in labels {
        if let Some(rest) = key.strip_prefix(&from_prefix) {
            edit.insert(key.clone(), None);
            edit.insert(format!("{}/{rest}", to.name()), Some(value.clone()));
        }
    }
    (!edit.is_empty()).then_some(edit)
}

/// One node metadata edit, for one merge patch of the node (and the conditions for a status
/// patch, which metadata edits cannot reach).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeEdit {
    /// Annotations to set.
    pub set_annotations: BTreeMap<String, String>,
    /// Annotations to remove.
    pub remove_annotations: BTreeSet<String>,
    /// Labels to set.
    pub set_labels: BTreeMap<String, String>,
    /// Labels to remove.
    pub remove_labels: BTreeSet<String>,
    /// Node condition types to drop from `status.conditions`. They are node status, so they
    /// go in a separate status patch; the caller drops those of them the node has.
    pub remove_conditions: BTreeSet<String>,
}

impl NodeEdit {
    /// Whether the edit changes nothing, so that no patch is sent for it.
    pub fn is_empty(&self) -> bool {
        self.set_annotations.is_empty()
            && self.remove_annotations.is_empty()
            && self.set_labels.is_empty()
            && self.remove_labels.is_empty()
            && self.remove_conditions.is_empty()
    }
}

/// One per-name node key under both prefixes, and where it lives.
struct KeyPair {
    from: String,
    to: String,
    kind: NodeKeyKind,
}

/// The per-name node metadata keys of `name` that adoption copies, under `from` and `to`:
/// every annotation and label of [`crate::keys::Keys::per_skyhook_node_keys`] but the
/// adoption marker itself (the adopter writes its own) and the node conditions (recomputed by
/// the adopter in the same pass).
fn copied_keys(from: Group, to: Group, name: &str) -> Vec<KeyPair> {
    let marker = from.keys().adopted_by_annotation(name);
    from.keys()
        .per_skyhook_node_keys(name)
        .into_iter()
        .zip(to.keys().per_skyhook_node_keys(name))
        .filter(|(source, _)| source.kind != NodeKeyKind::ConditionType && source.key != marker)
        .map(|(source, target)| KeyPair {
            from: source.key,
            to: target.key,
            kind: source.kind,
        })
        .collect()
}

/// The annotations and labels of a node, as adoption reads and edits them.
struct Node<'a> {
    annotations: &'a dyn StringMap,
    labels: &'a dyn StringMap,
}

/// Records in `set`/`remove` what makes `target` hold `value` (`None`: be absent) in
/// `current`, and nothing when it already does, so that an adopted node patches nothing.
fn settle(
    current: &dyn StringMap,
    set: &mut BTreeMap<String, String>,
    remove: &mut BTreeSet<String>,
    target: &str,
    value: Option<&str>,
) {
    match value {
        Some(value) if current.value(target) != Some(value) => {
            set.insert(target.to_owned(), value.to_owned());
        }
        None if current.has(target) => {
            remove.insert(target.to_owned());
        }
        _ => {}
    }
}

/// The edit that lets object `adopter_uid` of group `to` take over the node state its twin of
/// group `from` left on a node for `name`, or `None` when there is nothing to do: the node
/// carries no key of `name` under `<from>/`, or it is already marked as adopted by this very
/// object (`<to>/adoptedBy_<name>`), so that a pass never copies twice and a re-created
/// adopter (a new uid) adopts again.
///
/// Only `name`'s keys move, every per-name annotation and label the controller writes (also
/// ours, such as `bootId_` and `pickedAt_`, whose loss would re-run packages or break batch
/// stickiness), plus the node-scoped `autoTaint_*` annotations and the `ignore` label. Upstream
/// copies every name's keys, which with two writable groups would create phantom state for
/// other names. The node-scoped keys are copied only where `<to>` lacks them, whatever the
/// kind: other objects of the `to` group share them. `<from>` keys are never touched: they are
/// the rollback path until [`prune_node`]. Node conditions are not copied; the adopter
/// recomputes its own from the copied state in the same pass. A node state that does not
/// parse is copied as it is, so that the adopter reports it as its twin did.
pub fn adopt_node(
    from: Group,
    to: Group,
    name: &str,
    adopter_uid: &str,
    kind: AdoptionKind,
    annotations: &dyn StringMap,
    labels: &dyn StringMap,
) -> Option<NodeEdit> {
    if from == to {
        return None;
    }
    let node = Node {
        annotations,
        labels,
    };
    let marker = to.keys().adopted_by_annotation(name);
    if node.annotations.value(&marker) == Some(adopter_uid) {
        return None;
    }
    let pairs = copied_keys(from, to, name);
    let has_source = pairs.iter().any(|pair| {
        node.annotations.has(&pair.from)
            || (pair.kind == NodeKeyKind::AnnotationAndLabel && node.labels.has(&pair.from))
    });
    if !has_source {
        return None;
    }
    let mut edit = NodeEdit::default();
    let migrated_upstream = node
        .annotations
        .has(&to.keys().node_version_annotation(name));
    if !(kind == AdoptionKind::Upstream && migrated_upstream) {
        copy_name_keys(&node, &pairs, kind, &mut edit);
        copy_node_scoped_keys(&node, from, to, &mut edit);
    }
    edit.set_annotations.insert(marker, adopter_uid.to_owned());
    Some(edit)
}

/// The per-name part of [`adopt_node`].
fn copy_name_keys(node: &Node<'_>, pairs: &[KeyPair], kind: AdoptionKind, edit: &mut NodeEdit) {
    for pair in pairs {
        let mut sides = vec![(
            node.annotations,
            &mut edit.set_annotations,
            &mut edit.remove_annotations,
        )];
        if pair.kind == NodeKeyKind::AnnotationAndLabel {
            sides.push((node.labels, &mut edit.set_labels, &mut edit.remove_labels));
        }
        for (map, set, remove) in sides {
            let source = map.value(&pair.from);
            match kind {
                AdoptionKind::Upstream => {
                    if let Some(value) = source
                        && !map.has(&pair.to)
                    {
                        set.insert(pair.to.clone(), value.to_owned());
                    }
                }
                AdoptionKind::Handoff => settle(map, set, remove, &pair.to, source),
            }
        }
    }
}

/// The node-scoped part of [`adopt_node`]: `autoTaint_*` and `ignore`, where `<to>` lacks them.
fn copy_node_scoped_keys(node: &Node<'_>, from: Group, to: Group, edit: &mut NodeEdit) {
    let auto_taint_prefix = from.keys().auto_taint_annotation("");
    let mut auto_taints = Vec::new();
    node.annotations.any_key(&mut |key| {
        if let Some(taint_key) = key.strip_prefix(&auto_taint_prefix) {
            auto_taints.push(taint_key.to_owned());
        }
        false
    });
    for taint_key in auto_taints {
        let source = from.keys().auto_taint_annotation(&taint_key);
        let target = to.keys().auto_taint_annotation(&taint_key);
        if let Some(value) = node.annotations.value(&source)
            && !node.annotations.has(&target)
        {
            edit.set_annotations.insert(target, value.to_owned());
        }
    }
    let (source, target) = (from.keys().ignore_label, to.keys().ignore_label);
    if let Some(value) = node.labels.value(source)
        && !node.labels.has(target)
    {
        edit.set_labels.insert(target.to_owned(), value.to_owned());
    }
}

/// The edit that removes what object `name` of `group` keeps on a node, once the rollback
/// window is over (or when the live twin's deletion cleanup runs, so that no shadow outlives
/// both objects and reads as an orphan holding a cordon), or `None` when the node carries none
/// of its annotations or labels.
///
/// Only keys owned by the name go: every per-name annotation and the `status_<name>` label of
/// [`crate::keys::Keys::per_skyhook_node_keys`], and its two node conditions
/// (in [`NodeEdit::remove_conditions`], always both: the caller drops those the node has). The
/// node-scoped `autoTaint_*` annotations and `ignore` label stay, because other objects share
/// them, and the runtime-required taint is not touched.
pub fn prune_node(
    group: Group,
    name: &str,
    annotations: &dyn StringMap,
    labels: &dyn StringMap,
) -> Option<NodeEdit> {
    let mut edit = NodeEdit::default();
    for key in group.keys().per_skyhook_node_keys(name) {
        match key.kind {
            NodeKeyKind::Annotation => {
                if annotations.has(&key.key) {
                    edit.remove_annotations.insert(key.key);
                }
            }
            NodeKeyKind::AnnotationAndLabel => {
                if labels.has(&key.key) {
                    edit.remove_labels.insert(key.key.clone());
                }
                if annotations.has(&key.key) {
                    edit.remove_annotations.insert(key.key);
                }
            }
            NodeKeyKind::ConditionType => {
                edit.remove_conditions.insert(key.key);
            }
        }
    }
    if edit.remove_annotations.is_empty() && edit.remove_labels.is_empty() {
        return None;
    }
    Some(edit)
}

// ---- The adopter's first status (design §3.3 step 3) ---------------------------------------

/// The status an object taking a name over starts its first pass from, or `None` to start from
/// its own: while it has written no status yet (the API server drops the status of a created
/// object, so a converted copy arrives without it), it takes its twin's rollout bookkeeping,
/// the compartments' batch state, the batch picks and order offset and the recorded
/// configuration updates, so that a DeploymentPolicy rollout goes on at the batch it reached
/// (upstream's converter copies the status whole). Its overall status and counts stay unset,
/// so that the first pass computes and writes them; after that write it is never seeded again.
/// Boot IDs are not taken: the adopted `bootId_<name>` node keys hold them, and a stale status
/// copy must not read as a reboot.
pub fn seed_status(twin: &SkyhookStatus, adopter: Option<&SkyhookStatus>) -> Option<SkyhookStatus> {
    if adopter.is_some_and(|status| status.status.is_some()) {
        return None;
    }
    let nothing_to_seed = twin.compartment_statuses.is_empty()
        && twin.node_priority.is_empty()
        && twin.node_order_offset == 0
        && twin.config_updates.is_empty();
    if nothing_to_seed {
        return None;
    }
    let mut seeded = adopter.cloned().unwrap_or_default();
    seeded.compartment_statuses = twin.compartment_statuses.clone();
    seeded.node_priority = twin.node_priority.clone();
    seeded.node_order_offset = twin.node_order_offset;
    seeded.config_updates = twin.config_updates.clone();
    Some(seeded)
}

// ---- The rollback window (design §3.2, delta §2.2) -----------------------------------------

/// What to do with the twin's leftovers of an adopted name in this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// No stamp yet: adopt (copy) and write [`migrated_at_annotation`] now
    /// ([`migrated_at_value`]). The window starts only once the copy is done, so nothing is
    /// pruned before it is adopted.
    Converge,
    /// Keep the leftovers: an older operator rolled back to before `until` still finds them.
    Keep {
        /// When the window closes; the caller requeues for it.
        until: Timestamp,
    },
    /// Prune the leftovers ([`prune_node`], legacy pods and ConfigMap labels).
    Prune,
    /// Nothing is left: remove the stamp, if present.
    Done,
}

/// Where an adopter stands in the rollback window, from its [`migrated_at_annotation`]
/// (`stamp`), `LEGACY_CLEANUP_DELAY` (`delay`) and whether any leftover of the twin remains
/// (node keys, pods, ConfigMaps), as upstream's operator decides it.
///
/// Nothing left is [`Window::Done`], whatever the stamp. Otherwise a missing stamp converges
/// first, whatever the delay, so that a zero delay never prunes keys not yet copied. With a
/// stamp, a delay of zero or less prunes at once, and so does a stamp that does not parse (as
/// upstream: a broken stamp must not keep stale keys forever). The caller must count a twin
/// object that still exists as a leftover while removing the stamp would hand it the name back
/// ([`crate::generation::liveness`] holds an adopter without a stamp behind a busy twin).
pub fn window(
    stamp: Option<&str>,
    delay: SignedDuration,
    legacy_left: bool,
    now: Timestamp,
) -> Window {
    if !legacy_left {
        return Window::Done;
    }
    let Some(stamp) = stamp else {
        return Window::Converge;
    };
    if delay <= SignedDuration::ZERO {
        return Window::Prune;
    }
    let Ok(stamped) = stamp.parse::<Timestamp>() else {
        return Window::Prune;
    };
    let until = stamped.checked_add(delay).unwrap_or(Timestamp::MAX);
    if now < until {
        Window::Keep { until }
    } else {
        Window::Prune
    }
}

/// The value of [`migrated_at_annotation`] written at `now`: RFC 3339 in whole seconds, as
/// upstream writes it, so that upstream's operator (after a rollback) parses it too.
pub fn migrated_at_value(now: Timestamp) -> String {
    Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodewright_v1alpha1::NodeWright;
    use crate::v1alpha1::{DeploymentPolicySpec, SkyhookStatus, Status};

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const OTHER_SHA: &str =
        "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    use crate::test_support::labels as map;

    fn set(keys: &[&str]) -> BTreeSet<String> {
        keys.iter().map(|k| (*k).to_owned()).collect()
    }

    // ---- convert ----------------------------------------------------------------------

    /// The Skyhook manifests of the seeds (`/work/shared/seeds`): upstream's README examples,
    /// two of them with inline image tags, verbatim but for the demo's `configMap`, cut to one
    /// script.
    const SEED_SKYHOOK_EXAMPLE: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: skyhook-example
spec:
  additionalTolerations:
    - key: nvidia.com/gpu
      operator: Exists
  nodeSelectors:
    matchLabels:
      agentpool: gpu
  podNonInterruptLabels:
    matchLabels:
      key: value
  interruptionBudget: 
    percent: 33
  packages:
    nvssh:
      version: 2024.05.10
      image: nvcr.io/nvidian/swgpu-baseos/nvssh:2024.05.10
      configInterrupts:
        nvssh_vars.sh:
          type: service
          services: [cron]
      configMap:
        nvssh_vars.sh: |-
          #!/bin/bash
          nvssh_allowed_roles=access-azure-nv-ngc-prod-dgxc-admin
          nvssh_allowed_sudo_roles=access-azure-nv-ngc-prod-dgxc-admin
          echo $0
    bcp:
      version: 2024.05.13
      image: nvcr.io/nvidian/swgpu-baseos/bcp:2024.05.13
      env:
        - name: CSP
          value: azure
      interrupt: 
        type: service
        services: [containerd]
"#;

    const SEED_EXAMPLE_PACKAGE: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: example-package
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/node-type: worker
  packages:
    my-package:
      version: 1.1.1
      image: ghcr.io/nvidia/skyhook-packages/shellscript:1.1.1
      configMap:
        apply.sh: |
          #!/bin/bash
          echo "Package applied successfully"
        apply_check.sh: |
          #!/bin/bash
          echo "Package installation verified"
"#;

    const SEED_DEMO: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  labels:
    app.kubernetes.io/part-of: skyhook-operator
    app.kubernetes.io/created-by: skyhook-operator
  name: demo
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: demo
  packages:
    tuning:
      version: 1.1.0
      image: ghcr.io/nvidia/skyhook-packages/shellscript
      configMap:
        apply.sh: |-
            #!/bin/bash
            echo "hello world" > /skyhook-hello-world
            sleep 5
"#;

    fn skyhook(name: &str, packages: &[(&str, &str, Option<&str>)]) -> Skyhook {
        let mut skyhook: Skyhook = serde_yaml::from_str(SEED_DEMO).unwrap();
        skyhook.metadata.name = Some(name.to_owned());
        skyhook.spec.packages = packages
            .iter()
            .map(|(key, image, sha)| {
                let package = Package {
                    name: (*key).to_owned(),
                    version: "1.2.3".to_owned(),
                    image: (*image).to_owned(),
                    container_sha: sha.map(str::to_owned),
                    ..Package::default()
                };
                ((*key).to_owned(), package)
            })
            .collect();
        skyhook
    }

    #[test]
    fn seed_manifests_convert_and_lose_their_inline_tags() {
        // seed, package, image after the conversion
        let cases = [
            (
                SEED_SKYHOOK_EXAMPLE,
                vec![
                    ("nvssh", "nvcr.io/nvidian/swgpu-baseos/nvssh"),
                    ("bcp", "nvcr.io/nvidian/swgpu-baseos/bcp"),
                ],
            ),
            (
                SEED_EXAMPLE_PACKAGE,
                vec![("my-package", "ghcr.io/nvidia/skyhook-packages/shellscript")],
            ),
            (
                SEED_DEMO,
                vec![("tuning", "ghcr.io/nvidia/skyhook-packages/shellscript")],
            ),
        ];
        for (seed, images) in cases {
            let source: Skyhook = serde_yaml::from_str(seed).unwrap();
            let name = source.metadata.name.clone().unwrap();
            let converted = convert(&source, Group::Skyhook, Group::NodeWright)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let object = &converted.object;
            assert_eq!(object.metadata.name.as_deref(), Some(name.as_str()));
            for (package, image) in images {
                let got = &object.spec.packages[package];
                let was = &source.spec.packages[package];
                assert_eq!(got.image, image, "{name}/{package}");
                assert_eq!(ImageRef::parse(&got.image).unwrap().tag, None);
                assert_eq!(got.version, was.version, "the version supplies the tag");
                assert_eq!(got.container_sha, None, "a tag is no digest");
            }
            // Nothing else of the spec changes: the user's node label keys in selectors stay
            // (seed `example-package` selects `skyhook.nvidia.com/node-type`).
            let mut expected = source.spec.clone();
            for package in expected.packages.values_mut() {
                package.image = crate::image::stored_image(&package.image);
            }
            assert_eq!(object.spec, expected, "{name}");
            assert_eq!(
                converted.stamps,
                map(&[("nodewright.nvidia.com/mirrored-from", &name)]),
                "a manifest never stored has no generation to stamp"
            );
            assert_eq!(
                object.metadata.annotations.as_ref().unwrap()["nodewright.nvidia.com/mirrored-from"],
                name
            );
            // The converted object reads as a NodeWright manifest upstream's webhook accepts.
            let written = serde_json::to_value(NodeWright::from(object.clone())).unwrap();
            assert_eq!(written["apiVersion"], "nodewright.nvidia.com/v1alpha1");
        }
        let demo: Skyhook = serde_yaml::from_str(SEED_DEMO).unwrap();
        let converted = convert(&demo, Group::Skyhook, Group::NodeWright).unwrap();
        assert_eq!(
            converted.object.metadata.labels, demo.metadata.labels,
            "the user's labels are untouched"
        );
    }

    #[test]
    fn inline_digests_move_to_container_sha() {
        // image, containerSHA, image after, containerSHA after
        let sha = Some(SHA);
        let cases: [(String, Option<&str>, &str, Option<&str>); 7] = [
            (format!("busybox@{SHA}"), None, "busybox", sha),
            (format!("busybox@{SHA}"), Some(""), "busybox", sha),
            (format!("busybox@{SHA}"), sha, "busybox", sha),
            (format!("host:5000/x:1.2.3@{SHA}"), None, "host:5000/x", sha),
            ("host:5000/x:1.2.3".to_owned(), sha, "host:5000/x", sha),
            ("host:5000/x".to_owned(), sha, "host:5000/x", sha),
            ("host:5000/x".to_owned(), None, "host:5000/x", None),
        ];
        for (image, container_sha, want_image, want_sha) in cases {
            let source = skyhook("gpu", &[("pkg", &image, container_sha)]);
            let converted = convert(&source, Group::Skyhook, Group::NodeWright).unwrap();
            let package = &converted.object.spec.packages["pkg"];
            assert_eq!(package.image, want_image, "{image} {container_sha:?}");
            let got_sha = package.container_sha.as_deref().filter(|s| !s.is_empty());
            assert_eq!(got_sha, want_sha, "{image} {container_sha:?}");
            // What is pulled does not change.
            let was = &source.spec.packages["pkg"];
            let pulled_before = crate::image::pull_reference(
                &was.image,
                &was.version,
                was.container_sha.as_deref(),
            );
            let pulled_after = crate::image::pull_reference(
                &package.image,
                &package.version,
                package.container_sha.as_deref(),
            );
            if container_sha.is_some_and(|s| !s.is_empty()) || !image.contains('@') {
                assert_eq!(pulled_after, pulled_before, "{image}");
            } else {
                // `repo:version@digest` becomes `repo@digest`: the same bytes.
                assert_eq!(pulled_after, format!("{want_image}@{SHA}"), "{image}");
            }
        }
    }

    #[test]
    fn a_digest_differing_from_container_sha_is_refused_with_the_fix() {
        let source = skyhook(
            "gpu",
            &[
                ("fine", "busybox:1.2.3", None),
                (
                    "driver",
                    &format!("ghcr.io/x/driver@{SHA}"),
                    Some(OTHER_SHA),
                ),
            ],
        );
        let error = convert(&source, Group::Skyhook, Group::NodeWright).unwrap_err();
        assert!(
            matches!(&error, ConvertError::ConflictingDigest { package, name, .. } if package == "driver" && name == "gpu"),
            "{error:?}"
        );
        let message = error.to_string();
        for part in [
            "Skyhook \"gpu\"",
            "package \"driver\"",
            SHA,
            OTHER_SHA,
            "set containerSHA",
            "remove the digest from the image",
        ] {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
    }

    #[test]
    fn conversion_errors_name_the_object_and_the_fix() {
        let bad = skyhook("gpu", &[("pkg", "busybox:", None)]);
        let error = convert(&bad, Group::Skyhook, Group::NodeWright).unwrap_err();
        assert!(
            matches!(&error, ConvertError::BadImage { package, image, .. } if package == "pkg" && image == "busybox:"),
            "{error:?}"
        );
        assert!(error.to_string().contains("fix the image"), "{error}");
        let bad = skyhook("gpu", &[("pkg", "busybox@", None)]);
        assert!(matches!(
            convert(&bad, Group::Skyhook, Group::NodeWright),
            Err(ConvertError::BadImage { .. })
        ));

        let mut unnamed = skyhook("gpu", &[]);
        unnamed.metadata.name = None;
        let error = convert(&unnamed, Group::NodeWright, Group::Skyhook).unwrap_err();
        assert_eq!(error, ConvertError::MissingName { kind: "NodeWright" });
        assert!(error.to_string().contains("metadata.name"), "{error}");

        let error = convert(&skyhook("gpu", &[]), Group::Skyhook, Group::Skyhook).unwrap_err();
        assert!(matches!(error, ConvertError::SameGroup { .. }));
        assert!(error.to_string().contains("other group"), "{error}");
    }

    /// A stored Skyhook with every kind of metadata conversion cares about.
    fn stored_skyhook() -> Skyhook {
        let mut source = skyhook("gpu", &[("pkg", "busybox", None)]);
        source.metadata.uid = Some("uid-1".to_owned());
        source.metadata.resource_version = Some("42".to_owned());
        source.metadata.generation = Some(7);
        source.metadata.finalizers = Some(vec!["skyhook.nvidia.com/skyhook".to_owned()]);
        source.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        source.metadata.managed_fields = Some(vec![Default::default()]);
        source.metadata.annotations = Some(map(&[
            ("skyhook.nvidia.com/pause", "true"),
            ("skyhook.nvidia.com/disable", "false"),
            ("skyhook.nvidia.com/version", "v0.13.0"),
            (
                "skyhook.nvidia.com/legacy-migrated-at",
                "2026-01-01T00:00:00Z",
            ),
            ("nodewright.nvidia.com/handoff-to", "skyhook.nvidia.com"),
            ("nodewright.nvidia.com/disable", "true"),
            (
                "argocd.argoproj.io/tracking-id",
                "app:skyhook.nvidia.com/Skyhook:gpu",
            ),
            ("example.com/owner", "team-gpu"),
        ]));
        source.metadata.labels = Some(map(&[
            ("skyhook.nvidia.com/tier", "gpu"),
            ("app.kubernetes.io/name", "gpu"),
        ]));
        source.status = Some(SkyhookStatus {
            status: Some(Status::Complete),
            ..SkyhookStatus::default()
        });
        source
    }

    #[test]
    fn metadata_is_rekeyed_and_the_stored_objects_own_fields_dropped() {
        let source = stored_skyhook();
        let converted = convert(&source, Group::Skyhook, Group::NodeWright).unwrap();
        let meta = &converted.object.metadata;
        assert_eq!(meta.name.as_deref(), Some("gpu"));
        assert_eq!(meta.uid, None);
        assert_eq!(meta.resource_version, None);
        assert_eq!(meta.generation, None);
        assert_eq!(
            meta.finalizers, None,
            "each group's controller adds its own"
        );
        assert_eq!(meta.creation_timestamp, None);
        assert_eq!(meta.managed_fields, None);
        assert_eq!(
            meta.annotations.as_ref().unwrap(),
            &map(&[
                ("nodewright.nvidia.com/pause", "true"),
                // The source's own key governed it, and wins over a target-prefixed one.
                ("nodewright.nvidia.com/disable", "false"),
                ("nodewright.nvidia.com/version", "v0.13.0"),
                ("nodewright.nvidia.com/mirrored-from", "gpu"),
                ("nodewright.nvidia.com/mirrored-generation", "7"),
                // The user's keys, untouched, even where the value names the group.
                (
                    "argocd.argoproj.io/tracking-id",
                    "app:skyhook.nvidia.com/Skyhook:gpu"
                ),
                ("example.com/owner", "team-gpu"),
            ]),
            "the source's migration annotations are not carried"
        );
        assert_eq!(
            meta.labels.as_ref().unwrap(),
            &map(&[
                ("nodewright.nvidia.com/tier", "gpu"),
                ("app.kubernetes.io/name", "gpu"),
            ])
        );
        assert_eq!(
            converted.stamps,
            map(&[
                ("nodewright.nvidia.com/mirrored-from", "gpu"),
                ("nodewright.nvidia.com/mirrored-generation", "7"),
            ])
        );
        assert_eq!(converted.object.status, source.status, "status is kept");
        assert_eq!(converted.object.spec, source.spec);
    }

    #[test]
    fn pause_and_disable_keep_their_meaning_both_ways() {
        let cases = [
            (
                "skyhook.nvidia.com/pause",
                Group::Skyhook,
                Group::NodeWright,
            ),
            (
                "skyhook.nvidia.com/disable",
                Group::Skyhook,
                Group::NodeWright,
            ),
            (
                "nodewright.nvidia.com/pause",
                Group::NodeWright,
                Group::Skyhook,
            ),
            (
                "nodewright.nvidia.com/disable",
                Group::NodeWright,
                Group::Skyhook,
            ),
        ];
        for (key, from, to) in cases {
            let mut source = skyhook("gpu", &[]);
            source.metadata.annotations = Some(map(&[(key, "true")]));
            let converted = convert(&source, from, to).unwrap();
            let annotations = converted.object.metadata.annotations.unwrap();
            let moved = key.replace(from.name(), to.name());
            assert_eq!(
                annotations.get(&moved).map(String::as_str),
                Some("true"),
                "{key}"
            );
            assert!(!annotations.contains_key(key), "{key}");
        }
        // The skyhook group's rules read their own keys: a NodeWright's pause still pauses.
        let mut nodewright = skyhook("gpu", &[]);
        nodewright.metadata.annotations = Some(map(&[("nodewright.nvidia.com/pause", "true")]));
        let back = convert(&nodewright, Group::NodeWright, Group::Skyhook).unwrap();
        assert!(back.object.is_paused());
        assert!(!back.object.is_disabled());
    }

    #[test]
    fn the_reverse_direction_stamps_under_the_skyhook_group() {
        let mut source = stored_skyhook();
        source.metadata.annotations = Some(map(&[
            ("nodewright.nvidia.com/pause", "true"),
            ("nodewright.nvidia.com/mirrored-from", "gpu"),
            ("nodewright.nvidia.com/mirrored-generation", "3"),
            (
                "nodewright.nvidia.com/legacy-migrated-at",
                "2026-01-01T00:00:00Z",
            ),
            ("nodewright.nvidia.com/handoff-to", "skyhook.nvidia.com"),
            ("example.com/owner", "team-gpu"),
        ]));
        source.metadata.finalizers = Some(vec!["nodewright.nvidia.com/nodewright".to_owned()]);
        source.spec.packages.get_mut("pkg").unwrap().image = format!("busybox:1.2.3@{SHA}");
        let converted = convert(&source, Group::NodeWright, Group::Skyhook).unwrap();
        assert_eq!(
            converted.object.metadata.annotations.as_ref().unwrap(),
            &map(&[
                ("skyhook.nvidia.com/pause", "true"),
                ("skyhook.nvidia.com/mirrored-from", "gpu"),
                ("skyhook.nvidia.com/mirrored-generation", "7"),
                ("example.com/owner", "team-gpu"),
            ]),
            "the NodeWright's own history (an earlier adoption, the handoff) is not carried"
        );
        assert_eq!(
            converted.stamps.keys().collect::<Vec<_>>(),
            [
                "skyhook.nvidia.com/mirrored-from",
                "skyhook.nvidia.com/mirrored-generation"
            ]
        );
        assert_eq!(
            converted.object.metadata.labels.as_ref().unwrap(),
            &map(&[
                ("skyhook.nvidia.com/tier", "gpu"),
                ("app.kubernetes.io/name", "gpu"),
            ]),
            "a label under neither prefix stays; skyhook-prefixed ones were never the source's"
        );
        assert_eq!(converted.object.metadata.finalizers, None);
        let package = &converted.object.spec.packages["pkg"];
        assert_eq!(package.image, "busybox");
        assert_eq!(package.container_sha.as_deref(), Some(SHA));
        // And forth again: the round trip gives the first conversion's object.
        let forth = convert(&converted.object, Group::Skyhook, Group::NodeWright).unwrap();
        assert_eq!(
            forth.object.metadata.annotations.as_ref().unwrap()["nodewright.nvidia.com/pause"],
            "true"
        );
        assert_eq!(forth.object.spec, converted.object.spec);
    }

    #[test]
    fn a_policy_converts_with_its_spec_unchanged() {
        let spec: DeploymentPolicySpec = serde_json::from_str(
            r#"{"default": {"budget": {"count": 1}, "strategy": {"fixed": {}}}}"#,
        )
        .unwrap();
        let mut source = DeploymentPolicy::new("rollout", spec.clone());
        source.metadata.uid = Some("uid-p".to_owned());
        source.metadata.generation = Some(2);
        source.metadata.annotations = Some(map(&[
            ("skyhook.nvidia.com/note", "x"),
            ("example.com/owner", "team-gpu"),
        ]));
        let converted = convert_policy(&source, Group::Skyhook, Group::NodeWright).unwrap();
        assert_eq!(converted.object.spec, spec);
        assert_eq!(converted.object.metadata.name.as_deref(), Some("rollout"));
        assert_eq!(converted.object.metadata.uid, None);
        assert_eq!(
            converted.object.metadata.annotations.as_ref().unwrap(),
            &map(&[
                ("nodewright.nvidia.com/note", "x"),
                ("example.com/owner", "team-gpu"),
                ("nodewright.nvidia.com/mirrored-from", "rollout"),
                ("nodewright.nvidia.com/mirrored-generation", "2"),
            ])
        );
        let nodewright = crate::nodewright_v1alpha1::DeploymentPolicy::from(converted.object);
        let back = DeploymentPolicy::from(nodewright);
        let reverse = convert_policy(&back, Group::NodeWright, Group::Skyhook).unwrap();
        assert_eq!(reverse.object.spec, spec);
        assert_eq!(
            reverse.stamps,
            map(&[("skyhook.nvidia.com/mirrored-from", "rollout")])
        );
        assert!(matches!(
            convert_policy(&source, Group::NodeWright, Group::NodeWright),
            Err(ConvertError::SameGroup { .. })
        ));
    }

    // ---- adopt_node / prune_node --------------------------------------------------------

    const STATE_COMPLETE: &str = r#"{"tuning|1.1.0":{"name":"tuning","version":"1.1.0","image":"ghcr.io/nvidia/skyhook-packages/shellscript","stage":"config","state":"complete"}}"#;
    const STATE_INTERRUPT: &str = r#"{"driver|2.0":{"name":"driver","version":"2.0","image":"ghcr.io/x/driver","stage":"interrupt","state":"in_progress"}}"#;
    const STATE_ERRORING: &str = r#"{"driver|2.0":{"name":"driver","version":"2.0","image":"ghcr.io/x/driver","stage":"apply","state":"erroring","restarts":4}}"#;
    const STATE_MALFORMED: &str = r#"{"driver|2.0": {"name": "#;

    /// `pairs` with `S/` and `N/` spelled out as the two groups' prefixes.
    fn node(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (spell(k), (*v).to_owned()))
            .collect()
    }

    fn spell(key: &str) -> String {
        if let Some(rest) = key.strip_prefix("S/") {
            format!("skyhook.nvidia.com/{rest}")
        } else if let Some(rest) = key.strip_prefix("N/") {
            format!("nodewright.nvidia.com/{rest}")
        } else {
            key.to_owned()
        }
    }

    fn edit(
        set_annotations: &[(&str, &str)],
        remove_annotations: &[&str],
        set_labels: &[(&str, &str)],
        remove_labels: &[&str],
    ) -> NodeEdit {
        let spelled = |keys: &[&str]| keys.iter().map(|k| spell(k)).collect();
        NodeEdit {
            set_annotations: node(set_annotations),
            remove_annotations: spelled(remove_annotations),
            set_labels: node(set_labels),
            remove_labels: spelled(remove_labels),
            remove_conditions: BTreeSet::new(),
        }
    }

    /// The node after `edit`.
    fn apply(
        edit: &NodeEdit,
        annotations: &BTreeMap<String, String>,
        labels: &BTreeMap<String, String>,
    ) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let mut annotations = annotations.clone();
        let mut labels = labels.clone();
        annotations.retain(|k, _| !edit.remove_annotations.contains(k));
        labels.retain(|k, _| !edit.remove_labels.contains(k));
        annotations.extend(edit.set_annotations.clone());
        labels.extend(edit.set_labels.clone());
        (annotations, labels)
    }

    const UID: &str = "nw-uid-1";

    #[test]
    fn adopt_node_table() {
        use AdoptionKind::{Handoff, Upstream};
        use Group::{NodeWright as N, Skyhook as S};
        type Case<'a> = (
            &'a str,
            (Group, Group, AdoptionKind),
            Vec<(&'a str, &'a str)>,
            Vec<(&'a str, &'a str)>,
            Option<NodeEdit>,
        );
        let marker = ("N/adoptedBy_gpu", UID);
        let cases: Vec<Case<'_>> = vec![
            (
                "a complete node",
                (S, N, Upstream),
                vec![
                    ("S/nodeState_gpu", STATE_COMPLETE),
                    ("S/status_gpu", "complete"),
                    ("S/version_gpu", "v0.13.0"),
                    ("S/bootId_gpu", "boot-1"),
                    ("S/stageTimes_gpu", "{}"),
                    ("kubernetes.io/hostname", "node-1"),
                ],
                vec![("S/status_gpu", "complete"), ("kubernetes.io/os", "linux")],
                Some(edit(
                    &[
                        ("N/nodeState_gpu", STATE_COMPLETE),
                        ("N/status_gpu", "complete"),
                        ("N/version_gpu", "v0.13.0"),
                        ("N/bootId_gpu", "boot-1"),
                        ("N/stageTimes_gpu", "{}"),
                        marker,
                    ],
                    &[],
                    &[("N/status_gpu", "complete")],
                    &[],
                )),
            ),
            (
                "mid-rollout: at interrupt, cordoned and draining",
                (S, N, Handoff),
                vec![
                    ("S/nodeState_gpu", STATE_INTERRUPT),
                    ("S/status_gpu", "in_progress"),
                    ("S/cordon_gpu", "true"),
                    ("S/cordonedAt_gpu", "2026-12-01T10:00:00Z"),
                    ("S/drainStart_gpu", "2026-12-01T10:00:01.5Z"),
                    ("S/drainBlocked_gpu", "[]"),
                    ("S/pickedAt_gpu", "2026-12-01T09:59:00Z"),
                ],
                vec![("S/status_gpu", "in_progress")],
                Some(edit(
                    &[
                        ("N/nodeState_gpu", STATE_INTERRUPT),
                        ("N/status_gpu", "in_progress"),
                        ("N/cordon_gpu", "true"),
                        ("N/cordonedAt_gpu", "2026-12-01T10:00:00Z"),
                        ("N/drainStart_gpu", "2026-12-01T10:00:01.5Z"),
                        ("N/drainBlocked_gpu", "[]"),
                        ("N/pickedAt_gpu", "2026-12-01T09:59:00Z"),
                        marker,
                    ],
                    &[],
                    &[("N/status_gpu", "in_progress")],
                    &[],
                )),
            ),
            (
                "erroring (and a failed drain)",
                (S, N, Upstream),
                vec![
                    ("S/nodeState_gpu", STATE_ERRORING),
                    ("S/status_gpu", "erroring"),
                    ("S/drainFail_gpu", "2026-12-01T10:00:00Z"),
                ],
                vec![("S/status_gpu", "erroring")],
                Some(edit(
                    &[
                        ("N/nodeState_gpu", STATE_ERRORING),
                        ("N/status_gpu", "erroring"),
                        ("N/drainFail_gpu", "2026-12-01T10:00:00Z"),
                        marker,
                    ],
                    &[],
                    &[("N/status_gpu", "erroring")],
                    &[],
                )),
            ),
            (
                "already marked by this object",
                (S, N, Handoff),
                vec![("S/status_gpu", "complete"), ("N/adoptedBy_gpu", UID)],
                vec![],
                None,
            ),
            (
                "marked by an earlier object of the name: adopted again",
                (S, N, Upstream),
                vec![("S/status_gpu", "complete"), ("N/adoptedBy_gpu", "old-uid")],
                vec![],
                Some(edit(&[("N/status_gpu", "complete"), marker], &[], &[], &[])),
            ),
            (
                "nothing of the name under the old prefix",
                (S, N, Handoff),
                vec![
                    ("N/status_gpu", "complete"),
                    ("S/status_other", "complete"),
                    ("S/autoTaint_skyhook.nvidia.com", "true"),
                    ("S/adoptedBy_gpu", "sky-uid"),
                ],
                vec![("S/ignore", "true")],
                None,
            ),
            (
                "only the status label is left: adopted",
                (S, N, Upstream),
                vec![],
                vec![("S/status_gpu", "complete")],
                Some(edit(&[marker], &[], &[("N/status_gpu", "complete")], &[])),
            ),
            (
                "upstream migrated the node already (new version present): only the marker",
                (S, N, Upstream),
                vec![
                    ("S/nodeState_gpu", STATE_INTERRUPT),
                    ("S/status_gpu", "in_progress"),
                    ("S/version_gpu", "v0.13.0"),
                    ("S/cordon_gpu", "true"),
                    ("N/nodeState_gpu", STATE_COMPLETE),
                    ("N/status_gpu", "complete"),
                    ("N/version_gpu", "v0.20.0"),
                ],
                vec![("S/status_gpu", "in_progress"), ("S/ignore", "true")],
                Some(edit(&[marker], &[], &[], &[])),
            ),
            (
                "both prefixes, no new version: the new keys win, missing ones are copied",
                (S, N, Upstream),
                vec![
                    ("S/nodeState_gpu", STATE_INTERRUPT),
                    ("S/status_gpu", "in_progress"),
                    ("S/version_gpu", "v0.13.0"),
                    ("S/cordon_gpu", "true"),
                    ("N/nodeState_gpu", STATE_COMPLETE),
                    ("N/status_gpu", "complete"),
                ],
                vec![
                    ("S/status_gpu", "in_progress"),
                    ("N/status_gpu", "complete"),
                ],
                Some(edit(
                    &[
                        ("N/version_gpu", "v0.13.0"),
                        ("N/cordon_gpu", "true"),
                        marker,
                    ],
                    &[],
                    &[],
                    &[],
                )),
            ),
            (
                "round trip: the stale shadows of the target lose and go",
                (N, S, Handoff),
                vec![
                    // The NodeWright's state, the truth up to the handoff.
                    ("N/nodeState_gpu", STATE_COMPLETE),
                    ("N/status_gpu", "complete"),
                    ("N/version_gpu", "v0.20.0"),
                    ("N/bootId_gpu", "boot-2"),
                    ("N/adoptedBy_gpu", "nw-uid-0"),
                    // The Skyhook's shadows of the first migration.
                    ("S/nodeState_gpu", STATE_INTERRUPT),
                    ("S/status_gpu", "in_progress"),
                    ("S/version_gpu", "v0.20.0"),
                    ("S/cordon_gpu", "true"),
                    ("S/drainStart_gpu", "2026-12-01T10:00:01Z"),
                    ("S/bootId_gpu", "boot-1"),
                ],
                vec![
                    ("N/status_gpu", "complete"),
                    ("S/status_gpu", "in_progress"),
                ],
                Some(edit(
                    &[
                        ("S/nodeState_gpu", STATE_COMPLETE),
                        ("S/status_gpu", "complete"),
                        ("S/bootId_gpu", "boot-2"),
                        ("S/adoptedBy_gpu", "sky-uid-2"),
                    ],
                    &["S/cordon_gpu", "S/drainStart_gpu"],
                    &[("S/status_gpu", "complete")],
                    &[],
                )),
            ),
            (
                "round trip: a target status label the source lacks goes",
                (N, S, Handoff),
                vec![("N/nodeState_gpu", STATE_COMPLETE)],
                vec![("S/status_gpu", "in_progress")],
                Some(edit(
                    &[
                        ("S/nodeState_gpu", STATE_COMPLETE),
                        ("S/adoptedBy_gpu", "sky-uid-2"),
                    ],
                    &[],
                    &[],
                    &["S/status_gpu"],
                )),
            ),
            (
                "another name's keys are untouched",
                (S, N, Handoff),
                vec![
                    ("S/status_gpu", "complete"),
                    ("S/status_gpu2", "in_progress"),
                    ("S/cordon_other", "true"),
                    ("S/nodeState_other-gpu", STATE_INTERRUPT),
                    ("N/status_other", "complete"),
                    ("N/cordon_gpu2", "true"),
                ],
                vec![
                    ("S/status_gpu2", "in_progress"),
                    ("N/status_other", "complete"),
                ],
                Some(edit(&[("N/status_gpu", "complete"), marker], &[], &[], &[])),
            ),
            (
                "autoTaint and ignore are copied where the target lacks them",
                (S, N, Handoff),
                vec![
                    ("S/status_gpu", "complete"),
                    ("S/autoTaint_skyhook.nvidia.com", "true"),
                    ("S/autoTaint_dedicated", "true"),
                    ("N/autoTaint_dedicated", "false"),
                ],
                vec![("S/ignore", "true")],
                Some(edit(
                    &[
                        ("N/status_gpu", "complete"),
                        ("N/autoTaint_skyhook.nvidia.com", "true"),
                        marker,
                    ],
                    &[],
                    &[("N/ignore", "true")],
                    &[],
                )),
            ),
            (
                "a malformed node state is copied verbatim",
                (S, N, Upstream),
                vec![("S/nodeState_gpu", STATE_MALFORMED)],
                vec![],
                Some(edit(
                    &[("N/nodeState_gpu", STATE_MALFORMED), marker],
                    &[],
                    &[],
                    &[],
                )),
            ),
            (
                "one group to itself is no adoption",
                (S, S, Handoff),
                vec![("S/status_gpu", "complete")],
                vec![],
                None,
            ),
        ];
        for (case, (from, to, kind), annotations, labels, expected) in cases {
            let annotations = node(&annotations);
            let labels = node(&labels);
            let uid = if to == Group::Skyhook {
                "sky-uid-2"
            } else {
                UID
            };
            let got = adopt_node(from, to, "gpu", uid, kind, &annotations, &labels);
            assert_eq!(got, expected, "{case}");
            let Some(got) = got else { continue };
            assert!(!got.is_empty(), "{case}");
            assert!(
                got.remove_conditions.is_empty(),
                "{case}: conditions are not copied"
            );
            // The source's keys, and everything of other names, are never touched.
            let from_prefix = format!("{}/", from.name());
            for key in got
                .set_annotations
                .keys()
                .chain(&got.remove_annotations)
                .chain(got.set_labels.keys())
                .chain(&got.remove_labels)
            {
                assert!(!key.starts_with(&from_prefix), "{case}: {key}");
                assert!(
                    to.keys().is_skyhook_node_key(key, "gpu")
                        || key.starts_with(&to.keys().auto_taint_annotation(""))
                        || key == to.keys().ignore_label,
                    "{case}: {key} is not the name's"
                );
            }
            // Once applied, the node is adopted: a second pass has nothing to do.
            let (annotations, labels) = apply(&got, &annotations, &labels);
            assert_eq!(
                adopt_node(from, to, "gpu", uid, kind, &annotations, &labels),
                None,
                "{case}: adopting twice"
            );
        }
    }

    #[test]
    fn a_handed_off_node_ends_with_the_sources_keys_under_both_prefixes() {
        let annotations = node(&[
            ("S/nodeState_gpu", STATE_INTERRUPT),
            ("S/status_gpu", "in_progress"),
            ("S/cordon_gpu", "true"),
            ("N/nodeState_gpu", STATE_COMPLETE),
            ("N/pickedAt_gpu", "2026-01-01T00:00:00Z"),
        ]);
        let labels = node(&[("S/status_gpu", "in_progress")]);
        let edit = adopt_node(
            Group::Skyhook,
            Group::NodeWright,
            "gpu",
            UID,
            AdoptionKind::Handoff,
            &annotations,
            &labels,
        )
        .unwrap();
        let (annotations, labels) = apply(&edit, &annotations, &labels);
        assert_eq!(
            annotations,
            node(&[
                ("S/nodeState_gpu", STATE_INTERRUPT),
                ("S/status_gpu", "in_progress"),
                ("S/cordon_gpu", "true"),
                ("N/nodeState_gpu", STATE_INTERRUPT),
                ("N/status_gpu", "in_progress"),
                ("N/cordon_gpu", "true"),
                ("N/adoptedBy_gpu", UID),
            ])
        );
        assert_eq!(
            labels,
            node(&[
                ("S/status_gpu", "in_progress"),
                ("N/status_gpu", "in_progress")
            ])
        );
    }

    #[test]
    fn prune_node_removes_only_the_names_keys() {
        let mut all: Vec<(String, String)> = Group::Skyhook
            .keys()
            .per_skyhook_node_keys("gpu")
            .into_iter()
            .filter(|key| key.kind != NodeKeyKind::ConditionType)
            .map(|key| (key.key, "x".to_owned()))
            .collect();
        let kept = node(&[
            ("S/status_gpu2", "complete"),
            ("S/cordon_other", "true"),
            ("S/autoTaint_skyhook.nvidia.com", "true"),
            ("S/autoTaint_gpu", "true"),
            ("S/runtimeRequiredCordon", "true"),
            ("S/pause", "true"),
            ("N/status_gpu", "complete"),
            ("N/nodeState_gpu", STATE_COMPLETE),
            ("kubernetes.io/hostname", "node-1"),
        ]);
        all.extend(kept.clone());
        let annotations: BTreeMap<String, String> = all.into_iter().collect();
        let labels = node(&[
            ("S/status_gpu", "complete"),
            ("S/status_gpu2", "complete"),
            ("S/ignore", "true"),
            ("N/status_gpu", "complete"),
        ]);
        let edit = prune_node(Group::Skyhook, "gpu", &annotations, &labels).unwrap();
        assert_eq!(
            edit.remove_annotations,
            set(&[
                "skyhook.nvidia.com/nodeState_gpu",
                "skyhook.nvidia.com/status_gpu",
                "skyhook.nvidia.com/cordon_gpu",
                "skyhook.nvidia.com/version_gpu",
                "skyhook.nvidia.com/cordonedAt_gpu",
                "skyhook.nvidia.com/drainFail_gpu",
                "skyhook.nvidia.com/drainStart_gpu",
                "skyhook.nvidia.com/drainBlocked_gpu",
                "skyhook.nvidia.com/bootId_gpu",
                "skyhook.nvidia.com/pickedAt_gpu",
                "skyhook.nvidia.com/stageTimes_gpu",
                "skyhook.nvidia.com/readyGate_gpu",
                "skyhook.nvidia.com/adoptedBy_gpu",
            ])
        );
        assert_eq!(edit.remove_labels, set(&["skyhook.nvidia.com/status_gpu"]));
        assert_eq!(
            edit.remove_conditions,
            set(&[
                "skyhook.nvidia.com/gpu/NotReady",
                "skyhook.nvidia.com/gpu/Erroring"
            ])
        );
        assert!(edit.set_annotations.is_empty() && edit.set_labels.is_empty());
        let (after, after_labels) = apply(&edit, &annotations, &labels);
        assert_eq!(
            after, kept,
            "autoTaint, other names and the new prefix stay"
        );
        assert_eq!(
            after_labels,
            node(&[
                ("S/status_gpu2", "complete"),
                ("S/ignore", "true"),
                ("N/status_gpu", "complete"),
            ])
        );
        assert_eq!(
            prune_node(Group::Skyhook, "gpu", &after, &after_labels),
            None
        );

        // Only the label left: still pruned. Nothing of the name: nothing to do.
        let only_label = node(&[("N/status_gpu", "complete")]);
        let edit = prune_node(Group::NodeWright, "gpu", &BTreeMap::new(), &only_label).unwrap();
        assert_eq!(
            edit.remove_labels,
            set(&["nodewright.nvidia.com/status_gpu"])
        );
        assert!(edit.remove_annotations.is_empty());
        assert_eq!(
            prune_node(Group::NodeWright, "gpu", &kept, &BTreeMap::new())
                .map(|e| e.remove_annotations),
            Some(set(&[
                "nodewright.nvidia.com/status_gpu",
                "nodewright.nvidia.com/nodeState_gpu"
            ]))
        );
    }

    #[test]
    fn auto_taint_is_copied_but_never_pruned() {
        let annotations = node(&[
            ("S/status_gpu", "complete"),
            ("S/autoTaint_skyhook.nvidia.com", "true"),
        ]);
        let labels = node(&[("S/ignore", "true")]);
        let edit = adopt_node(
            Group::Skyhook,
            Group::NodeWright,
            "gpu",
            UID,
            AdoptionKind::Upstream,
            &annotations,
            &labels,
        )
        .unwrap();
        let (annotations, labels) = apply(&edit, &annotations, &labels);
        assert_eq!(
            annotations.get("nodewright.nvidia.com/autoTaint_skyhook.nvidia.com"),
            Some(&"true".to_owned())
        );
        let prune = prune_node(Group::Skyhook, "gpu", &annotations, &labels).unwrap();
        let (annotations, labels) = apply(&prune, &annotations, &labels);
        assert_eq!(
            annotations,
            node(&[
                ("S/autoTaint_skyhook.nvidia.com", "true"),
                ("N/autoTaint_skyhook.nvidia.com", "true"),
                ("N/status_gpu", "complete"),
                ("N/adoptedBy_gpu", UID),
            ])
        );
        assert_eq!(labels, node(&[("S/ignore", "true"), ("N/ignore", "true")]));
    }

    #[test]
    fn only_a_twin_handing_the_name_over_is_a_handoff() {
        let cases = [
            (
                vec![],
                Group::Skyhook,
                Group::NodeWright,
                AdoptionKind::Upstream,
            ),
            (
                vec![("skyhook.nvidia.com/handoff-to", "nodewright.nvidia.com")],
                Group::Skyhook,
                Group::NodeWright,
                AdoptionKind::Handoff,
            ),
            (
                vec![("nodewright.nvidia.com/handoff-to", "skyhook.nvidia.com")],
                Group::NodeWright,
                Group::Skyhook,
                AdoptionKind::Handoff,
            ),
            (
                vec![("nodewright.nvidia.com/handoff-to", "nodewright.nvidia.com")],
                Group::Skyhook,
                Group::NodeWright,
                AdoptionKind::Upstream,
            ),
        ];
        for (annotations, from, to, expected) in cases {
            let source = map(&annotations);
            assert_eq!(
                adoption_kind(&source, from, to),
                expected,
                "{annotations:?}"
            );
        }
    }

    #[test]
    fn moved_labels_rekey_only_the_source_groups_labels() {
        let labels = map(&[
            ("skyhook.nvidia.com/name", "gpu"),
            ("skyhook.nvidia.com/skyhook-node-meta", "gpu"),
            ("app", "x"),
        ]);
        let edit = moved_labels(&labels, Group::Skyhook, Group::NodeWright).unwrap();
        assert_eq!(
            edit,
            BTreeMap::from([
                ("skyhook.nvidia.com/name".to_owned(), None),
                ("skyhook.nvidia.com/skyhook-node-meta".to_owned(), None),
                (
                    "nodewright.nvidia.com/name".to_owned(),
                    Some("gpu".to_owned())
                ),
                (
                    "nodewright.nvidia.com/skyhook-node-meta".to_owned(),
                    Some("gpu".to_owned())
                ),
            ])
        );
        assert_eq!(
            moved_labels(&labels, Group::NodeWright, Group::Skyhook),
            None
        );
    }

    #[test]
    fn a_fresh_adopter_takes_its_twins_rollout_bookkeeping_once() {
        use crate::v1alpha1::{BatchState, CompartmentStatus, Status};
        let twin = SkyhookStatus {
            status: Some(Status::Paused),
            complete_nodes: "3/10".into(),
            node_order_offset: 4,
            config_updates: BTreeMap::from([("pkg".into(), vec!["a.sh".into()])]),
            compartment_statuses: BTreeMap::from([(
                "gpus".into(),
                CompartmentStatus {
                    batch_state: Some(BatchState {
                        current_batch: 3,
                        ..BatchState::default()
                    }),
                    ..CompartmentStatus::default()
                },
            )]),
            ..SkyhookStatus::default()
        };
        let seeded = seed_status(&twin, None).expect("a fresh adopter is seeded");
        assert_eq!(seeded.compartment_statuses, twin.compartment_statuses);
        assert_eq!(seeded.node_order_offset, 4);
        assert_eq!(seeded.config_updates, twin.config_updates);
        assert_eq!(
            (seeded.status, seeded.complete_nodes),
            (None, SkyhookStatus::default().complete_nodes),
            "its own status and counts are its first pass's"
        );
        let waiting = SkyhookStatus {
            conditions: vec![],
            ..SkyhookStatus::default()
        };
        assert!(
            seed_status(&twin, Some(&waiting)).is_some(),
            "a status without an overall status (a condition only) is no first write"
        );
        let written = SkyhookStatus {
            status: Some(Status::InProgress),
            ..SkyhookStatus::default()
        };
        assert_eq!(
            seed_status(&twin, Some(&written)),
            None,
            "never after its first write"
        );
        assert_eq!(
            seed_status(&SkyhookStatus::default(), None),
            None,
            "nothing to seed from a twin without bookkeeping"
        );
    }

    #[test]
    fn node_edit_emptiness() {
        assert!(NodeEdit::default().is_empty());
        let only_conditions = NodeEdit {
            remove_conditions: set(&["skyhook.nvidia.com/gpu/NotReady"]),
            ..NodeEdit::default()
        };
        assert!(!only_conditions.is_empty());
        assert!(!edit(&[], &[], &[], &["S/status_gpu"]).is_empty());
    }

    // ---- window ---------------------------------------------------------------------------

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn window_table() {
        let now = at("2026-12-02T10:00:00Z");
        let day = SignedDuration::from_hours(24);
        let cases = [
            ("missing stamp: converge", None, day, true, Window::Converge),
            (
                "missing stamp with no delay: converge first all the same",
                None,
                SignedDuration::ZERO,
                true,
                Window::Converge,
            ),
            (
                "inside the window",
                Some("2026-12-01T12:00:00Z"),
                day,
                true,
                Window::Keep {
                    until: at("2026-12-02T12:00:00Z"),
                },
            ),
            (
                "the window closes exactly now",
                Some("2026-12-01T10:00:00Z"),
                day,
                true,
                Window::Prune,
            ),
            (
                "after the window",
                Some("2026-11-01T10:00:00Z"),
                day,
                true,
                Window::Prune,
            ),
            (
                "no delay: prune at once",
                Some("2026-12-02T10:00:00Z"),
                SignedDuration::ZERO,
                true,
                Window::Prune,
            ),
            (
                "a negative delay: prune at once",
                Some("2026-12-02T10:00:00Z"),
                SignedDuration::from_secs(-60),
                true,
                Window::Prune,
            ),
            (
                "an unparseable stamp prunes",
                Some("yesterday"),
                day,
                true,
                Window::Prune,
            ),
            (
                "a stamp with an offset",
                Some("2026-12-02T11:00:00+02:00"),
                SignedDuration::from_hours(2),
                true,
                Window::Keep {
                    until: at("2026-12-02T11:00:00Z"),
                },
            ),
            (
                "nothing left: done",
                Some("2026-12-02T09:00:00Z"),
                day,
                false,
                Window::Done,
            ),
            (
                "nothing left, no stamp: done",
                None,
                day,
                false,
                Window::Done,
            ),
            (
                "nothing left, unparseable stamp: done",
                Some("yesterday"),
                day,
                false,
                Window::Done,
            ),
        ];
        for (case, stamp, delay, legacy_left, expected) in cases {
            assert_eq!(window(stamp, delay, legacy_left, now), expected, "{case}");
        }
        assert_eq!(
            window(Some("2026-12-02T09:00:00Z"), SignedDuration::MAX, true, now),
            Window::Keep {
                until: Timestamp::MAX
            },
            "an overflowing window never closes"
        );
    }

    #[test]
    fn the_stamp_is_rfc3339_in_whole_seconds_and_reads_back() {
        let now = at("2026-12-02T10:00:00.123456789Z");
        let value = migrated_at_value(now);
        assert_eq!(value, "2026-12-02T10:00:00Z");
        assert_eq!(
            window(Some(&value), SignedDuration::from_secs(1), true, now),
            Window::Keep {
                until: at("2026-12-02T10:00:01Z")
            }
        );
    }
}
