//! The per-package stage machine on one node, as pure functions that return explicit edits of
//! the node state (`skyhook.nvidia.com/nodeState_<skyhook>`). The controller applies the edits;
//! tests assert the exact intermediate states.
//!
//! Flow (a stage advances only from `state=complete`):
//! - without an interrupt: `uninstall → apply → config`, `upgrade → config`; `config` is terminal;
//! - with an interrupt: `… config → interrupt → post-interrupt`; `post-interrupt` is terminal.
//!
//! A package without an entry starts at `apply`. Version changes turn into `upgrade` (higher
//! spec version) or `uninstall` of the old version followed by `apply` of the new one (lower),
//! and a package removed from the spec is uninstalled.

use std::collections::{BTreeMap, BTreeSet};

use crate::image::stored_image;
use crate::node_state::{NodeState, PackageKey};
use crate::pod_annotation::PodPackageAnnotation;
use crate::uninstall_rules::{UninstallMode, UninstallRules, in_cycle_stage};
use crate::v1alpha1::{Package, PackageStatus, Stage, State};
use crate::version::Version;

/// One change to a node state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeStateEdit {
    /// Insert or replace the entry keyed by the status's name and version.
    Upsert(PackageStatus),
    /// Delete an entry.
    Remove(PackageKey),
}

/// Applies edits in order.
pub fn apply_edits(state: &mut NodeState, edits: &[NodeStateEdit]) {
    for edit in edits {
        match edit {
            NodeStateEdit::Upsert(status) => {
                state.upsert(status.clone());
            }
            NodeStateEdit::Remove(key) => {
                state.remove(key);
            }
        }
    }
}

/// The terminal stage of a package: `post-interrupt` when it has an effective interrupt
/// (see [`crate::interrupt::has_interrupt`]), otherwise `config`.
pub const fn terminal_stage(has_interrupt: bool) -> Stage {
    if has_interrupt {
        Stage::PostInterrupt
    } else {
        Stage::Config
    }
}

/// The stage after a completed `stage`, or `None` when `stage` is terminal.
///
/// An entry past `config` (`interrupt`, `post-interrupt`) of a package that no longer has an
/// interrupt goes back to `config`, its terminal stage, rather than staying stuck short of it.
pub const fn stage_after(stage: Stage, has_interrupt: bool) -> Option<Stage> {
    match (stage, has_interrupt) {
        // A finished uninstall-interrupt entry is deleted before the next pass looks at the
        // package; if it is ever read, the package installs again.
        (Stage::Uninstall | Stage::UninstallInterrupt, _) => Some(Stage::Apply),
        (Stage::Apply | Stage::Upgrade, _) => Some(Stage::Config),
        (Stage::Config, true) => Some(Stage::Interrupt),
        (Stage::Config, false) => None,
        (Stage::Interrupt, true) => Some(Stage::PostInterrupt),
        (Stage::PostInterrupt, true) => None,
        (Stage::Interrupt | Stage::PostInterrupt, false) => Some(Stage::Config),
    }
}

/// What to do next for one package version on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Start this stage: a package pod, or for [`Stage::Interrupt`] the interrupt (the wave's
    /// owner creates the interrupt pod, the other packages are marked skipped).
    Run(Stage),
    /// A pod is working on it, or it waits for another package's interrupt.
    Wait,
    /// The package is complete on the node.
    Complete,
}

/// The next step for the spec version of a package on a node, from its entry (if any), whether
/// it has an effective interrupt, and whether a pod for this package version exists on the
/// node (including a failing one, which the kubelet retries).
///
/// While a pod exists nothing new starts. An entry that is `in_progress`, `erroring` or
/// `unknown` whose pod disappeared (invalidated, deleted, garbage-collected) restarts: at its
/// own stage for `config`, `upgrade`, `uninstall` and `interrupt` (whose pod is recreated),
/// and at `apply` otherwise, which for an interrupting package means cordon and drain again.
/// A `skipped` entry waits: an uninstall placeholder for the uninstall of the other version,
/// an interrupt for the owner's interrupt pod.
pub fn next_step(entry: Option<&PackageStatus>, has_interrupt: bool, pod_exists: bool) -> NextStep {
    if pod_exists {
        return NextStep::Wait;
    }
    let Some(entry) = entry else {
        return NextStep::Run(Stage::Apply);
    };
    match entry.state {
        State::Complete => match stage_after(entry.stage, has_interrupt) {
            Some(stage) => NextStep::Run(stage),
            None => NextStep::Complete,
        },
        State::Skipped => NextStep::Wait,
        State::InProgress | State::Erroring | State::Unknown => {
            NextStep::Run(restart_stage(entry.stage))
        }
    }
}

/// Where a package whose pod disappeared mid-stage starts again.
pub const fn restart_stage(stage: Stage) -> Stage {
    match stage {
        Stage::Config
        | Stage::Upgrade
        | Stage::Uninstall
        | Stage::Interrupt
        | Stage::UninstallInterrupt => stage,
        Stage::Apply | Stage::PostInterrupt => Stage::Apply,
    }
}

/// The entry recording `package` at `stage` in `state`, with the image stored without tag.
pub fn entry_for(package: &Package, stage: Stage, state: State) -> PackageStatus {
    PackageStatus {
        name: package.name.clone(),
        version: package.version.clone(),
        image: stored_image(&package.image),
        container_sha: package.container_sha.clone().unwrap_or_default(),
        stage,
        state,
        restarts: 0,
    }
}

/// The package completion rule: the spec version's entry exists, is `complete`, and is at the
/// terminal stage.
pub fn package_complete(entry: Option<&PackageStatus>, has_interrupt: bool) -> bool {
    entry.is_some_and(|e| e.state == State::Complete && e.stage == terminal_stage(has_interrupt))
}

/// The node completion rule: every spec package is complete (so every spec version is
/// present), except a package whose uninstall is requested and done (its spec version has no
/// entry); and in [`UninstallMode::Legacy`] no entry, of any package, is in stage `uninstall`.
/// Extra entries are tolerated: in [`UninstallMode::Explicit`] they are markers of removed or
/// downgraded packages. `has_interrupt` tells, per package name, whether it has an effective
/// interrupt.
pub fn node_complete(
    state: &NodeState,
    packages: &BTreeMap<String, Package>,
    rules: UninstallRules,
    has_interrupt: impl Fn(&str) -> bool,
) -> bool {
    packages.iter().all(|(name, package)| {
        let entry = state.get_version(name, &package.version);
        (entry.is_none() && package.uninstall_requested(rules.deleting))
            || package_complete(entry, has_interrupt(name))
    }) && (rules.mode == UninstallMode::Explicit
        || state
            .iter()
            .all(|(_, entry)| entry.stage != Stage::Uninstall))
}

/// The result of comparing a node state with the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionChanges {
    /// Edits to apply to the node state.
    pub edits: Vec<NodeStateEdit>,
    /// Packages whose version changed (or that were removed): clear their
    /// `status.configUpdates`, set the node `in_progress`, and reset batch state if enabled.
    pub changed_packages: BTreeSet<String>,
}

/// Version-change bookkeeping for one node (upstream's `HandleVersionChange`). In
/// [`UninstallMode::Explicit`] removals and downgrades change nothing (the old entries stay as
/// markers) and only upgrades are recorded; in [`UninstallMode::Legacy`]:
/// - an entry of a package no longer in the spec becomes `(in_progress, uninstall)`, unless it
///   already is in stage uninstall; an uninstall placeholder or an already uninstalled entry
///   (`skipped`/`complete` at uninstall) of a removed package is simply deleted, as nothing is
///   installed;
/// - a spec version higher than an entry: the spec version is added as `(in_progress, upgrade)`
///   and the old entry is kept until the upgrade succeeds;
/// - a spec version lower than an entry: the old entry becomes `(in_progress, uninstall)` and
///   the spec version gets the placeholder `(skipped, uninstall)`.
///
/// Versions that compare equal but are written differently (`1.2` vs `1.2.0`), or that do not
/// parse, are treated as an upgrade, so the old entry is replaced rather than left behind.
pub fn version_changes(
    state: &NodeState,
    packages: &BTreeMap<String, Package>,
    mode: UninstallMode,
) -> VersionChanges {
    let mut changes = VersionChanges::default();
    let mut placed: BTreeSet<PackageKey> = BTreeSet::new();
    let legacy = mode == UninstallMode::Legacy;
    for (key, entry) in state {
        let Some(package) = packages.get(key.name()) else {
            if !legacy {
                continue;
            }
            match (entry.stage, entry.state) {
                (Stage::Uninstall, State::InProgress | State::Erroring | State::Unknown) => {}
                (Stage::Uninstall, State::Skipped | State::Complete) => {
                    changes.edits.push(NodeStateEdit::Remove(key.clone()));
                    changes.changed_packages.insert(key.name().to_owned());
                }
                _ => {
                    changes.edits.push(NodeStateEdit::Upsert(PackageStatus {
                        stage: Stage::Uninstall,
                        state: State::InProgress,
                        ..entry.clone()
                    }));
                    changes.changed_packages.insert(key.name().to_owned());
                }
            }
            continue;
        };
        if key.version() == package.version {
            continue;
        }
        let spec_key = PackageKey::new(&package.name, &package.version);
        let spec_entry_exists = state.get(&spec_key).is_some() || placed.contains(&spec_key);
        if is_downgrade(&package.version, key.version()) {
            if !legacy {
                continue;
            }
            if entry.stage != Stage::Uninstall {
                changes.edits.push(NodeStateEdit::Upsert(PackageStatus {
                    stage: Stage::Uninstall,
                    state: State::InProgress,
                    ..entry.clone()
                }));
                changes.changed_packages.insert(package.name.clone());
            }
            if !spec_entry_exists {
                changes.edits.push(NodeStateEdit::Upsert(entry_for(
                    package,
                    Stage::Uninstall,
                    State::Skipped,
                )));
                changes.changed_packages.insert(package.name.clone());
                placed.insert(spec_key);
            }
        } else if !spec_entry_exists && !in_cycle_stage(entry.stage) {
            changes.edits.push(NodeStateEdit::Upsert(entry_for(
                package,
                Stage::Upgrade,
                State::InProgress,
            )));
            changes.changed_packages.insert(package.name.clone());
            placed.insert(spec_key);
        }
    }
    changes
}

fn is_downgrade(spec_version: &str, entry_version: &str) -> bool {
    match (Version::parse(spec_version), Version::parse(entry_version)) {
        (Ok(spec), Ok(entry)) => spec.cmp_precedence(&entry).is_lt(),
        _ => false,
    }
}

/// The legacy uninstalls to run on the node: entries of removed packages or old versions at
/// stage `uninstall`, not a placeholder (`skipped`) and not finished. They run before the
/// package's normal wave. None in [`UninstallMode::Explicit`], where removal and downgrade do
/// not uninstall; the spec version's own uninstall is an explicit one
/// ([`crate::uninstall::node_uninstalls`]).
pub fn pending_uninstalls<'a>(
    state: &'a NodeState,
    packages: &BTreeMap<String, Package>,
    mode: UninstallMode,
) -> Vec<&'a PackageStatus> {
    if mode == UninstallMode::Explicit {
        return Vec::new();
    }
    state
        .iter()
        .filter(|(key, _)| {
            packages
                .get(key.name())
                .is_none_or(|p| p.version != key.version())
        })
        .map(|(_, entry)| entry)
        .filter(|e| {
            e.stage == Stage::Uninstall
                && matches!(
                    e.state,
                    State::InProgress | State::Erroring | State::Unknown
                )
        })
        .collect()
}

/// The minimal package an uninstall pod runs from, synthesised from a node-state entry of a
/// package that left the spec: name, version and image only (no configMap, env, resources or
/// agent override).
pub fn uninstall_package(entry: &PackageStatus) -> Package {
    Package {
        name: entry.name.clone(),
        version: entry.version.clone(),
        image: entry.image.clone(),
        container_sha: Some(entry.container_sha.clone()).filter(|sha| !sha.is_empty()),
        ..Package::default()
    }
}

/// Node-state edits when a package or interrupt pod succeeds (its last init container exited 0).
///
/// - interrupt pod: the owner's entry and every `(skipped, interrupt)` entry become
///   `(complete, interrupt)`, so each moves on to `post-interrupt`;
/// - `upgrade`: the version becomes `(complete, upgrade)` and every other version of the
///   package is deleted;
/// - `uninstall` of the spec version (an explicit uninstall): a package with a package-level
///   `interrupt` goes on to `(in_progress, uninstall-interrupt)`; otherwise the entry is deleted;
/// - `uninstall` of another version, or of a removed package (a legacy uninstall): the entry
///   is deleted, and a spec version waiting on it as the `(skipped, uninstall)` placeholder
///   becomes `(complete, uninstall)`, whose next stage is `apply`;
/// - `uninstall-interrupt`: `(complete, uninstall-interrupt)`, promoting `(skipped, interrupt)`
///   entries as an interrupt does; the next pass deletes the entry
///   ([`crate::uninstall::node_uninstalls`]);
/// - any other stage: `(complete, stage)` with the container's restart count.
pub fn on_pod_succeeded(
    state: &NodeState,
    pod: &PodPackageAnnotation,
    restarts: i32,
    packages: &BTreeMap<String, Package>,
) -> Vec<NodeStateEdit> {
    let key = PackageKey::new(&pod.name, &pod.version);
    let finished = |stage| pod_entry(pod, stage, State::Complete, restarts);
    match pod.stage {
        Stage::Interrupt | Stage::UninstallInterrupt => {
            let mut edits = vec![NodeStateEdit::Upsert(finished(pod.stage))];
            edits.extend(
                state
                    .iter()
                    .filter(|(k, e)| {
                        **k != key && e.stage == Stage::Interrupt && e.state == State::Skipped
                    })
                    .map(|(_, e)| {
                        NodeStateEdit::Upsert(PackageStatus {
                            state: State::Complete,
                            ..e.clone()
                        })
                    }),
            );
            edits
        }
        Stage::Upgrade => {
            let mut edits = vec![NodeStateEdit::Upsert(finished(Stage::Upgrade))];
            edits.extend(
                state
                    .entries_of(&pod.name)
                    .filter(|(k, _)| **k != key)
                    .map(|(k, _)| NodeStateEdit::Remove(k.clone())),
            );
            edits
        }
        Stage::Uninstall => uninstall_succeeded(state, pod, packages),
        stage => vec![NodeStateEdit::Upsert(finished(stage))],
    }
}

/// [`on_pod_succeeded`] for an uninstall pod.
fn uninstall_succeeded(
    state: &NodeState,
    pod: &PodPackageAnnotation,
    packages: &BTreeMap<String, Package>,
) -> Vec<NodeStateEdit> {
    let key = PackageKey::new(&pod.name, &pod.version);
    let Some(package) = packages.get(&pod.name) else {
        return vec![NodeStateEdit::Remove(key)];
    };
    if package.version == pod.version {
        if package.interrupt.is_none() {
            return vec![NodeStateEdit::Remove(key)];
        }
        let interrupt = pod_entry(pod, Stage::UninstallInterrupt, State::InProgress, 0);
        return vec![NodeStateEdit::Upsert(interrupt)];
    }
    let mut edits = vec![NodeStateEdit::Remove(key)];
    let placeholder = state
        .get_version(&package.name, &package.version)
        .is_some_and(|e| e.stage == Stage::Uninstall && e.state == State::Skipped);
    if placeholder {
        edits.push(NodeStateEdit::Upsert(entry_for(
            package,
            Stage::Uninstall,
            State::Complete,
        )));
    }
    edits
}

/// Node-state edit when a pod fails (a container exited non-zero or is in CrashLoopBackOff):
/// `(erroring, stage, restarts)`. The pod is left for the kubelet to retry, and the node
/// status becomes `erroring`.
pub fn on_pod_failed(pod: &PodPackageAnnotation, restarts: i32) -> NodeStateEdit {
    NodeStateEdit::Upsert(pod_entry(pod, pod.stage, State::Erroring, restarts))
}

/// The entry of the package version a pod ran, with its image and digest as the pod recorded
/// them.
fn pod_entry(
    pod: &PodPackageAnnotation,
    stage: Stage,
    state: State,
    restarts: i32,
) -> PackageStatus {
    PackageStatus {
        name: pod.name.clone(),
        version: pod.version.clone(),
        image: pod.image.clone(),
        container_sha: pod.container_sha.clone(),
        stage,
        state,
        restarts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(name: &str, version: &str) -> Package {
        Package {
            name: name.into(),
            version: version.into(),
            image: format!("ghcr.io/nvidia/skyhook/agentless:{version}"),
            ..Package::default()
        }
    }

    fn entry(name: &str, version: &str, stage: Stage, state: State) -> PackageStatus {
        PackageStatus {
            name: name.into(),
            version: version.into(),
            image: "ghcr.io/nvidia/skyhook/agentless".into(),
            container_sha: String::new(),
            stage,
            state,
            restarts: 0,
        }
    }

    fn spec(packages: &[Package]) -> BTreeMap<String, Package> {
        packages
            .iter()
            .map(|p| (p.name.clone(), p.clone()))
            .collect()
    }

    fn pod(name: &str, version: &str, stage: Stage) -> PodPackageAnnotation {
        PodPackageAnnotation {
            name: name.into(),
            version: version.into(),
            skyhook: "demo".into(),
            stage,
            image: "ghcr.io/nvidia/skyhook/agentless".into(),
            container_sha: String::new(),
            invalid: false,
        }
    }

    /// `(key, stage, state)` of every entry, in key order.
    fn summary(state: &NodeState) -> Vec<(String, Stage, State)> {
        state
            .iter()
            .map(|(k, e)| (k.to_string(), e.stage, e.state))
            .collect()
    }

    use Stage::*;
    use State::*;

    #[test]
    fn flow_without_interrupt() {
        let cases = [
            (None, NextStep::Run(Apply)),
            (
                Some(entry("a", "1", Uninstall, Complete)),
                NextStep::Run(Apply),
            ),
            (
                Some(entry("a", "1", Apply, Complete)),
                NextStep::Run(Config),
            ),
            (
                Some(entry("a", "1", Upgrade, Complete)),
                NextStep::Run(Config),
            ),
            (Some(entry("a", "1", Config, Complete)), NextStep::Complete),
            (
                Some(entry("a", "1", PostInterrupt, Complete)),
                NextStep::Run(Config),
            ),
            (
                Some(entry("a", "1", Interrupt, Complete)),
                NextStep::Run(Config),
            ),
        ];
        for (e, want) in cases {
            assert_eq!(next_step(e.as_ref(), false, false), want, "{e:?}");
        }
    }

    #[test]
    fn flow_with_interrupt() {
        let cases = [
            (None, NextStep::Run(Apply)),
            (
                Some(entry("a", "1", Uninstall, Complete)),
                NextStep::Run(Apply),
            ),
            (
                Some(entry("a", "1", Apply, Complete)),
                NextStep::Run(Config),
            ),
            (
                Some(entry("a", "1", Upgrade, Complete)),
                NextStep::Run(Config),
            ),
            (
                Some(entry("a", "1", Config, Complete)),
                NextStep::Run(Interrupt),
            ),
            (
                Some(entry("a", "1", Interrupt, Complete)),
                NextStep::Run(PostInterrupt),
            ),
            (
                Some(entry("a", "1", PostInterrupt, Complete)),
                NextStep::Complete,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(next_step(e.as_ref(), true, false), want, "{e:?}");
        }
    }

    #[test]
    fn nothing_starts_while_a_pod_exists() {
        for e in [
            None,
            Some(entry("a", "1", Apply, Complete)),
            Some(entry("a", "1", Config, Erroring)),
        ] {
            assert_eq!(next_step(e.as_ref(), true, true), NextStep::Wait);
        }
    }

    #[test]
    fn restart_when_the_pod_disappeared() {
        let cases = [
            (Apply, InProgress, Apply),
            (Apply, Erroring, Apply),
            (Config, InProgress, Config),
            (Config, Erroring, Config),
            (Upgrade, InProgress, Upgrade),
            (Uninstall, Erroring, Uninstall),
            (Interrupt, InProgress, Interrupt),
            (PostInterrupt, InProgress, Apply),
            (PostInterrupt, Unknown, Apply),
        ];
        for (stage, state, want) in cases {
            let e = entry("a", "1", stage, state);
            assert_eq!(
                next_step(Some(&e), true, false),
                NextStep::Run(want),
                "{stage} {state}"
            );
        }
        for stage in [Interrupt, Uninstall] {
            assert_eq!(
                next_step(Some(&entry("a", "1", stage, Skipped)), true, false),
                NextStep::Wait
            );
        }
    }

    #[test]
    fn completion_rules() {
        let with = |stage, state| entry("a", "1", stage, state);
        assert!(package_complete(Some(&with(Config, Complete)), false));
        assert!(!package_complete(Some(&with(Config, Complete)), true));
        assert!(package_complete(Some(&with(PostInterrupt, Complete)), true));
        assert!(!package_complete(
            Some(&with(PostInterrupt, Erroring)),
            true
        ));
        assert!(!package_complete(Some(&with(Apply, Complete)), false));
        assert!(!package_complete(None, false));

        let packages = spec(&[package("a", "1"), package("b", "2")]);
        let interrupts = |name: &str| name == "b";
        let mut state: NodeState = [
            with(Config, Complete),
            entry("b", "2", PostInterrupt, Complete),
        ]
        .into_iter()
        .collect();
        assert!(node_complete(
            &state,
            &packages,
            UninstallRules::default(),
            interrupts
        ));
        // Extra entries are tolerated…
        state.upsert(entry("zombie", "9", Config, Complete));
        assert!(node_complete(
            &state,
            &packages,
            UninstallRules::default(),
            interrupts
        ));
        // …but not one being uninstalled, even of another package.
        state.upsert(entry("zombie", "9", Uninstall, InProgress));
        assert!(!node_complete(
            &state,
            &packages,
            UninstallRules::default(),
            interrupts
        ));
        // A missing spec version is incomplete.
        let state: NodeState = [with(Config, Complete)].into_iter().collect();
        assert!(!node_complete(
            &state,
            &packages,
            UninstallRules::default(),
            interrupts
        ));
        assert!(node_complete(
            &NodeState::new(),
            &BTreeMap::new(),
            UninstallRules::default(),
            interrupts
        ));
    }

    /// The uninstall-upgrade-skyhook e2e (spec §6.1 item 8), step by step.
    #[test]
    fn uninstall_upgrade_scenario_exact_states() {
        let before = spec(&[
            package("dogs", "1.2.6"),
            package("nullptr", "2.0.0"),
            package("cats", "6.2.0"),
        ]);
        let mut state: NodeState = [
            entry("dogs", "1.2.6", PostInterrupt, Complete),
            entry("nullptr", "2.0.0", PostInterrupt, Complete),
            entry("cats", "6.2.0", Config, Complete),
        ]
        .into_iter()
        .collect();
        assert!(
            version_changes(&state, &before, UninstallMode::Legacy)
                .edits
                .is_empty()
        );

        let after = spec(&[package("dogs", "1.2.5"), package("nullptr", "2.0.1")]);
        let changes = version_changes(&state, &after, UninstallMode::Legacy);
        assert_eq!(
            changes.changed_packages,
            BTreeSet::from(["cats".into(), "dogs".into(), "nullptr".into()])
        );
        apply_edits(&mut state, &changes.edits);
        assert_eq!(
            summary(&state),
            [
                ("cats|6.2.0".into(), Uninstall, InProgress),
                ("dogs|1.2.5".into(), Uninstall, Skipped),
                ("dogs|1.2.6".into(), Uninstall, InProgress),
                ("nullptr|2.0.0".into(), PostInterrupt, Complete),
                ("nullptr|2.0.1".into(), Upgrade, InProgress),
            ]
        );
        // Idempotent: a second reconcile changes nothing.
        assert!(
            version_changes(&state, &after, UninstallMode::Legacy)
                .edits
                .is_empty()
        );
        let pending: Vec<_> = pending_uninstalls(&state, &BTreeMap::new(), UninstallMode::Legacy)
            .iter()
            .map(|e| e.key().to_string())
            .collect();
        assert_eq!(pending, ["cats|6.2.0", "dogs|1.2.6"]);
        assert_eq!(
            next_step(state.get_version("dogs", "1.2.5"), true, false),
            NextStep::Wait
        );

        // The pods succeed.
        for (name, version, stage) in [
            ("cats", "6.2.0", Uninstall),
            ("dogs", "1.2.6", Uninstall),
            ("nullptr", "2.0.1", Upgrade),
        ] {
            let edits = on_pod_succeeded(&state, &pod(name, version, stage), 0, &after);
            apply_edits(&mut state, &edits);
        }
        assert_eq!(
            summary(&state),
            [
                ("dogs|1.2.5".into(), Uninstall, Complete),
                ("nullptr|2.0.1".into(), Upgrade, Complete)
            ]
        );
        assert_eq!(
            next_step(state.get_version("dogs", "1.2.5"), true, false),
            NextStep::Run(Apply)
        );
        assert_eq!(
            next_step(state.get_version("nullptr", "2.0.1"), true, false),
            NextStep::Run(Config)
        );
        assert!(!node_complete(
            &state,
            &after,
            UninstallRules::default(),
            |_| true
        ));

        // Then everything is removed from the spec.
        let state: NodeState = [
            entry("dogs", "1.2.5", PostInterrupt, Complete),
            entry("nullptr", "2.0.1", PostInterrupt, Complete),
        ]
        .into_iter()
        .collect();
        let mut state = state;
        let edits = version_changes(&state, &BTreeMap::new(), UninstallMode::Legacy).edits;
        apply_edits(&mut state, &edits);
        assert_eq!(
            summary(&state),
            [
                ("dogs|1.2.5".into(), Uninstall, InProgress),
                ("nullptr|2.0.1".into(), Uninstall, InProgress)
            ]
        );
        for (name, version) in [("dogs", "1.2.5"), ("nullptr", "2.0.1")] {
            let edits =
                on_pod_succeeded(&state, &pod(name, version, Uninstall), 0, &BTreeMap::new());
            apply_edits(&mut state, &edits);
        }
        assert!(state.is_empty());
    }

    #[test]
    fn removed_package_placeholders_are_dropped() {
        let state: NodeState = [
            entry("a", "1", Uninstall, Skipped),
            entry("b", "1", Uninstall, Complete),
            entry("c", "1", Uninstall, Erroring),
        ]
        .into_iter()
        .collect();
        let changes = version_changes(&state, &BTreeMap::new(), UninstallMode::Legacy);
        assert_eq!(
            changes.edits,
            [
                NodeStateEdit::Remove(PackageKey::new("a", "1")),
                NodeStateEdit::Remove(PackageKey::new("b", "1"))
            ]
        );
    }

    #[test]
    fn equal_precedence_or_unparsable_versions_upgrade() {
        for (old, new) in [("1.2.0", "1.2"), ("bogus", "1.0.0")] {
            let state: NodeState = [entry("a", old, Config, Complete)].into_iter().collect();
            let changes =
                version_changes(&state, &spec(&[package("a", new)]), UninstallMode::Legacy);
            assert_eq!(changes.edits.len(), 1);
            assert!(
                matches!(&changes.edits[0], NodeStateEdit::Upsert(e) if e.version == new && e.stage == Upgrade)
            );
        }
    }

    #[test]
    fn pod_outcomes() {
        let packages = spec(&[
            package("a", "1.0.0"),
            package("b", "1.0.0"),
            package("c", "1.0.0"),
        ]);
        let mut state: NodeState = [
            entry("a", "1.0.0", Interrupt, InProgress),
            entry("b", "1.0.0", Interrupt, Skipped),
            entry("c", "1.0.0", Config, Complete),
        ]
        .into_iter()
        .collect();
        let edits = on_pod_succeeded(&state, &pod("a", "1.0.0", Interrupt), 0, &packages);
        apply_edits(&mut state, &edits);
        assert_eq!(
            summary(&state),
            [
                ("a|1.0.0".into(), Interrupt, Complete),
                ("b|1.0.0".into(), Interrupt, Complete),
                ("c|1.0.0".into(), Config, Complete),
            ]
        );

        let edits = on_pod_succeeded(&state, &pod("c", "1.0.0", Config), 3, &packages);
        assert!(
            matches!(&edits[..], [NodeStateEdit::Upsert(e)] if e.restarts == 3 && e.state == Complete)
        );

        let NodeStateEdit::Upsert(failed) = on_pod_failed(&pod("c", "1.0.0", Apply), 2) else {
            panic!()
        };
        assert_eq!(
            (failed.stage, failed.state, failed.restarts),
            (Apply, Erroring, 2)
        );
    }

    #[test]
    fn uninstall_pod_outcomes() {
        let rebooting = Package {
            interrupt: Some(crate::v1alpha1::Interrupt {
                type_: crate::v1alpha1::InterruptType::Reboot,
                services: Vec::new(),
            }),
            ..package("r", "1.0.0")
        };
        let packages = spec(&[package("a", "1.0.0"), rebooting, package("d", "1.0.0")]);
        let after = |state: &[PackageStatus], pod: PodPackageAnnotation| {
            let state: NodeState = state.iter().cloned().collect();
            let mut after = state.clone();
            apply_edits(&mut after, &on_pod_succeeded(&state, &pod, 0, &packages));
            summary(&after)
        };
        // An explicit uninstall of the spec version: forgotten, or on to its own interrupt.
        assert_eq!(
            after(
                &[entry("a", "1.0.0", Uninstall, InProgress)],
                pod("a", "1.0.0", Uninstall)
            ),
            []
        );
        assert_eq!(
            after(
                &[entry("r", "1.0.0", Uninstall, Erroring)],
                pod("r", "1.0.0", Uninstall)
            ),
            [("r|1.0.0".into(), UninstallInterrupt, InProgress)]
        );
        assert_eq!(
            after(
                &[
                    entry("r", "1.0.0", UninstallInterrupt, InProgress),
                    entry("a", "1.0.0", Interrupt, Skipped)
                ],
                pod("r", "1.0.0", UninstallInterrupt)
            ),
            [
                ("a|1.0.0".into(), Interrupt, Complete),
                ("r|1.0.0".into(), UninstallInterrupt, Complete)
            ]
        );
        // A legacy downgrade: the old version goes and its placeholder may install.
        assert_eq!(
            after(
                &[
                    entry("d", "2.0.0", Uninstall, InProgress),
                    entry("d", "1.0.0", Uninstall, Skipped)
                ],
                pod("d", "2.0.0", Uninstall)
            ),
            [("d|1.0.0".into(), Uninstall, Complete)]
        );
        // Without a placeholder (explicit mode's downgrade), the new version is left alone.
        assert_eq!(
            after(
                &[
                    entry("d", "2.0.0", Uninstall, InProgress),
                    entry("d", "1.0.0", Apply, InProgress)
                ],
                pod("d", "2.0.0", Uninstall)
            ),
            [("d|1.0.0".into(), Apply, InProgress)]
        );
        // A removed package's uninstall deletes its entry.
        assert_eq!(
            after(
                &[entry("gone", "1.0.0", Uninstall, InProgress)],
                pod("gone", "1.0.0", Uninstall)
            ),
            []
        );
    }

    #[test]
    fn stage_after_covers_every_stage() {
        for stage in Stage::ALL {
            for has_interrupt in [false, true] {
                if let Some(next) = stage_after(*stage, has_interrupt) {
                    assert_ne!(next, *stage);
                }
            }
        }
        assert_eq!(terminal_stage(true), PostInterrupt);
        assert_eq!(terminal_stage(false), Config);
        assert_eq!(stage_after(terminal_stage(true), true), None);
        assert_eq!(stage_after(terminal_stage(false), false), None);
    }

    #[test]
    fn entries_store_the_image_without_tag() {
        let mut p = package("foobar", "1.2.3");
        p.container_sha = Some("sha256:abc".into());
        let e = entry_for(&p, Apply, InProgress);
        assert_eq!(e.image, "ghcr.io/nvidia/skyhook/agentless");
        assert_eq!(e.container_sha, "sha256:abc");
        let synthesised = uninstall_package(&entry("gone", "1", Config, Complete));
        assert_eq!(
            (synthesised.name.as_str(), synthesised.version.as_str()),
            ("gone", "1")
        );
        assert!(synthesised.config_map.is_empty() && synthesised.container_sha.is_none());
    }
}
