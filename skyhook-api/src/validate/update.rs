//! Rules for changing a Skyhook that already exists (admission UPDATE only). They guard the
//! explicit uninstall: a package that declares `uninstall.enabled` may leave the spec, or go to
//! a lower version, only once its uninstall has finished, because afterwards the configuration
//! the uninstall needs is gone. Whether it has finished is read from the old object's
//! `status.nodeState`, so a status that lags the nodes can only make these rules stricter.

use std::cmp::Ordering;

use super::violation::Violation;
use crate::v1alpha1::{Package, Skyhook};
use crate::version::compare_precedence;

/// How many nodes a message names before it only counts the rest.
const LISTED_NODES: usize = 5;

/// What an update breaks (it must be refused) and what it should warn about (it goes through).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateVerdict {
    /// Reasons to refuse the update.
    pub violations: Vec<Violation>,
    /// Consequences the user should know about, for the admission response's warnings.
    pub warnings: Vec<String>,
}

/// Checks the change from `old` to `new`. The rules of [`super::validate_skyhook`] still apply to
/// `new` on their own. An object being deleted passes: the updates that remove its finalizers
/// must go through.
pub fn skyhook_update(old: &Skyhook, new: &Skyhook) -> UpdateVerdict {
    let mut verdict = UpdateVerdict::default();
    if old.metadata.deletion_timestamp.is_some() || new.metadata.deletion_timestamp.is_some() {
        return verdict;
    }
    for (key, old_package) in &old.spec.packages {
        let holders = nodes_holding(old, key, &old_package.version);
        match new.spec.packages.get(key) {
            None => check_removal(key, old_package, &holders, &mut verdict),
            Some(new_package) => {
                check_downgrade(key, old_package, new_package, &holders, &mut verdict);
                warn_on_cancel(key, old_package, new_package, &mut verdict);
            }
        }
    }
    verdict
}

/// The nodes whose state in `skyhook`'s status still holds `<package>|<version>`, sorted. None
/// at all (including no tracked nodes) means the package is fully uninstalled.
fn nodes_holding<'a>(skyhook: &'a Skyhook, package: &str, version: &str) -> Vec<&'a str> {
    skyhook
        .status
        .iter()
        .flat_map(|status| &status.node_state)
        .filter(|(_, state)| state.get_version(package, version).is_some())
        .map(|(node, _)| node.as_str())
        .collect()
}

/// `a, b, c` or `a, b, c, d, e and 3 more`.
fn node_list(nodes: &[&str]) -> String {
    let listed = nodes[..nodes.len().min(LISTED_NODES)].join(", ");
    match nodes.len().saturating_sub(LISTED_NODES) {
        0 => listed,
        more => format!("{listed} and {more} more"),
    }
}

fn check_removal(key: &str, old: &Package, holders: &[&str], verdict: &mut UpdateVerdict) {
    if !old.uninstall_enabled() || holders.is_empty() {
        return;
    }
    verdict.violations.push(Violation::new(
        format!("spec.packages.{key}"),
        format!(
            "package \"{key}\" has uninstall.enabled=true; set uninstall.apply=true and wait for completion before removing from spec"
        ),
        format!(
            "{key}|{} is still on {}; to remove the package without uninstalling it, set uninstall.enabled=false in one update and remove the package in the next",
            old.version,
            node_list(holders)
        ),
    ));
}

fn check_downgrade(
    key: &str,
    old: &Package,
    new: &Package,
    holders: &[&str],
    verdict: &mut UpdateVerdict,
) {
    let downgrade = compare_precedence(&new.version, &old.version) == Ok(Ordering::Less);
    if !downgrade || !old.uninstall_enabled() {
        return;
    }
    let field = format!("spec.packages.{key}.version");
    if !old.uninstall_requested(false) {
        verdict.violations.push(Violation::new(
            field,
            format!(
                "package \"{key}\": downgrade not allowed — set uninstall.apply=true first, wait for uninstall to complete, then change version"
            ),
            format!(
                "keep version {} in this update; to downgrade without uninstalling, set uninstall.enabled=false first",
                old.version
            ),
        ));
    } else if !holders.is_empty() {
        verdict.violations.push(Violation::new(
            field,
            format!(
                "package \"{key}\": downgrade not allowed — uninstall has not yet completed on all nodes. Wait for the uninstall to finish, then change version"
            ),
            format!(
                "{key}|{} is still on {}",
                old.version,
                node_list(holders)
            ),
        ));
    }
}

fn warn_on_cancel(key: &str, old: &Package, new: &Package, verdict: &mut UpdateVerdict) {
    if old.uninstall_requested(false) && !new.uninstall_requested(false) {
        verdict.warnings.push(format!(
            "spec.packages.{key}.uninstall.apply: package \"{key}\": uninstall cancelled — nodes where uninstall completed will need to re-install"
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::node_state::NodeState;
    use crate::v1alpha1::{SkyhookSpec, SkyhookStatus, Uninstall};

    const REMOVE_BLOCKED: &str = "package \"tuning\" has uninstall.enabled=true; set uninstall.apply=true and wait for completion before removing from spec";
    const DOWNGRADE_NEEDS_APPLY: &str = "package \"tuning\": downgrade not allowed — set uninstall.apply=true first, wait for uninstall to complete, then change version";
    const DOWNGRADE_NOT_DONE: &str = "package \"tuning\": downgrade not allowed — uninstall has not yet completed on all nodes. Wait for the uninstall to finish, then change version";
    const CANCELLED: &str = "package \"tuning\": uninstall cancelled — nodes where uninstall completed will need to re-install";

    /// A package `tuning` at `version`; `uninstall` is `None`, or `Some((enabled, apply))`.
    fn tuning(version: &str, uninstall: Option<(bool, bool)>) -> Package {
        Package {
            name: "tuning".to_owned(),
            version: version.to_owned(),
            image: "ghcr.io/nvidia/skyhook-packages/shellscript".to_owned(),
            uninstall: uninstall.map(|(enabled, apply)| Uninstall { enabled, apply }),
            ..Package::default()
        }
    }

    /// A Skyhook holding `packages`, whose status tracks each of `state` (node, entries held).
    fn skyhook(packages: Vec<Package>, state: &[(&str, &[&str])]) -> Skyhook {
        let spec = SkyhookSpec {
            packages: packages.into_iter().map(|p| (p.name.clone(), p)).collect(),
            ..SkyhookSpec::default()
        };
        let mut skyhook = Skyhook::new("demo", spec);
        let node_state: BTreeMap<String, NodeState> = state
            .iter()
            .map(|(node, keys)| {
                let annotation = keys
                    .iter()
                    .map(|key| {
                        let (name, version) = key.split_once('|').unwrap_or((key, ""));
                        format!(r#""{key}":{{"name":"{name}","version":"{version}","image":"i","stage":"apply","state":"complete"}}"#)
                    })
                    .collect::<Vec<_>>()
                    .join(",");
                (node.to_string(), NodeState::parse(&format!("{{{annotation}}}")).unwrap())
            })
            .collect();
        skyhook.status = Some(SkyhookStatus {
            node_state,
            ..SkyhookStatus::default()
        });
        skyhook
    }

    /// (case, old packages, old node state, new packages, violation messages, warnings)
    type Case = (
        &'static str,
        Vec<Package>,
        &'static [(&'static str, &'static [&'static str])],
        Vec<Package>,
        &'static [&'static str],
        &'static [&'static str],
    );

    #[test]
    fn update_rules() {
        let enabled = Some((true, false));
        let requested = Some((true, true));
        let disabled = Some((false, false));
        let held: &[(&str, &[&str])] = &[("node-a", &["tuning|2.0.0"]), ("node-b", &[])];
        let gone: &[(&str, &[&str])] = &[("node-a", &["other|1.0.0", "tuning|1.0.0"])];
        let untracked: &[(&str, &[&str])] = &[];
        let cases: Vec<Case> = vec![
            (
                "removing an enabled package still on a node",
                vec![tuning("2.0.0", enabled)],
                held,
                vec![],
                &[REMOVE_BLOCKED],
                &[],
            ),
            (
                "removing a requested package still on a node",
                vec![tuning("2.0.0", requested)],
                held,
                vec![],
                &[REMOVE_BLOCKED],
                &[],
            ),
            (
                "removing an enabled package once uninstalled",
                vec![tuning("2.0.0", requested)],
                gone,
                vec![],
                &[],
                &[],
            ),
            (
                "removing an enabled package no node tracks",
                vec![tuning("2.0.0", enabled)],
                untracked,
                vec![],
                &[],
                &[],
            ),
            (
                "removing a disabled package",
                vec![tuning("2.0.0", disabled)],
                held,
                vec![],
                &[],
                &[],
            ),
            (
                "removing a package without the block",
                vec![tuning("2.0.0", None)],
                held,
                vec![],
                &[],
                &[],
            ),
            (
                "downgrade of an enabled package without apply",
                vec![tuning("2.0.0", enabled)],
                gone,
                vec![tuning("1.0.0", enabled)],
                &[DOWNGRADE_NEEDS_APPLY],
                &[],
            ),
            (
                "downgrade that also sets apply is judged on the old apply",
                vec![tuning("2.0.0", enabled)],
                gone,
                vec![tuning("1.0.0", requested)],
                &[DOWNGRADE_NEEDS_APPLY],
                &[],
            ),
            (
                "downgrade while the uninstall runs",
                vec![tuning("2.0.0", requested)],
                held,
                vec![tuning("1.0.0", requested)],
                &[DOWNGRADE_NOT_DONE],
                &[],
            ),
            (
                "downgrade once uninstalled",
                vec![tuning("2.0.0", requested)],
                gone,
                vec![tuning("1.0.0", requested)],
                &[],
                &[],
            ),
            (
                "downgrade with no tracked nodes",
                vec![tuning("2.0.0", requested)],
                untracked,
                vec![tuning("1.0.0", requested)],
                &[],
                &[],
            ),
            (
                "downgrade of a disabled package",
                vec![tuning("2.0.0", disabled)],
                held,
                vec![tuning("1.0.0", disabled)],
                &[],
                &[],
            ),
            (
                "downgrade of a package without the block",
                vec![tuning("2.0.0", None)],
                held,
                vec![tuning("1.0.0", None)],
                &[],
                &[],
            ),
            (
                "downgrade is by precedence, not text",
                vec![tuning("1.10.0", enabled)],
                held,
                vec![tuning("1.9.0", enabled)],
                &[DOWNGRADE_NEEDS_APPLY],
                &[],
            ),
            (
                "a prerelease is below its release",
                vec![tuning("2.0.0", enabled)],
                held,
                vec![tuning("2.0.0-rc.1", enabled)],
                &[DOWNGRADE_NEEDS_APPLY],
                &[],
            ),
            (
                "upgrade of an enabled package",
                vec![tuning("2.0.0", enabled)],
                held,
                vec![tuning("2.1.0", enabled)],
                &[],
                &[],
            ),
            (
                "same precedence is no downgrade",
                vec![tuning("2.0", enabled)],
                held,
                vec![tuning("2.0.0", enabled)],
                &[],
                &[],
            ),
            (
                "an invalid old version is never a downgrade",
                vec![tuning("bogus", enabled)],
                held,
                vec![tuning("1.0.0", enabled)],
                &[],
                &[],
            ),
            (
                "an invalid new version is left to the base rules",
                vec![tuning("2.0.0", enabled)],
                held,
                vec![tuning("bogus", enabled)],
                &[],
                &[],
            ),
            (
                "cancelling a requested uninstall warns",
                vec![tuning("2.0.0", requested)],
                held,
                vec![tuning("2.0.0", enabled)],
                &[],
                &[CANCELLED],
            ),
            (
                "disabling a requested uninstall warns",
                vec![tuning("2.0.0", requested)],
                held,
                vec![tuning("2.0.0", disabled)],
                &[],
                &[CANCELLED],
            ),
            (
                "dropping the block of a requested uninstall warns",
                vec![tuning("2.0.0", requested)],
                gone,
                vec![tuning("2.0.0", None)],
                &[],
                &[CANCELLED],
            ),
            (
                "removing a requested package does not warn",
                vec![tuning("2.0.0", requested)],
                gone,
                vec![],
                &[],
                &[],
            ),
            (
                "requesting an uninstall",
                vec![tuning("2.0.0", enabled)],
                held,
                vec![tuning("2.0.0", requested)],
                &[],
                &[],
            ),
            (
                "a requested uninstall that stays requested",
                vec![tuning("2.0.0", requested)],
                held,
                vec![tuning("2.0.0", requested)],
                &[],
                &[],
            ),
            (
                "adding a package",
                vec![],
                untracked,
                vec![tuning("1.0.0", requested)],
                &[],
                &[],
            ),
        ];
        let mut failures = Vec::new();
        for (name, old_packages, state, new_packages, violations, warnings) in cases {
            let old = skyhook(old_packages, state);
            let new = skyhook(new_packages, state);
            let verdict = skyhook_update(&old, &new);
            let messages: Vec<&str> = verdict
                .violations
                .iter()
                .map(|v| v.message.as_str())
                .collect();
            let warned: Vec<String> = warnings
                .iter()
                .map(|w| format!("spec.packages.tuning.uninstall.apply: {w}"))
                .collect();
            if messages != violations || verdict.warnings != warned {
                failures.push(format!("{name}: {verdict:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn violations_name_the_field_and_the_nodes_left() {
        let nodes: Vec<String> = (0..7).map(|i| format!("node-{i}")).collect();
        let state: Vec<(&str, &[&str])> = nodes
            .iter()
            .map(|n| (n.as_str(), &["tuning|2.0.0"][..]))
            .collect();
        let old = skyhook(vec![tuning("2.0.0", Some((true, true)))], &state);
        let removed = skyhook_update(&old, &skyhook(vec![], &state));
        assert_eq!(removed.violations.len(), 1);
        assert_eq!(removed.violations[0].field, "spec.packages.tuning");
        assert!(
            removed.violations[0].hint.contains(
                "tuning|2.0.0 is still on node-0, node-1, node-2, node-3, node-4 and 2 more"
            ),
            "{:?}",
            removed.violations[0]
        );
        let downgraded = skyhook_update(
            &old,
            &skyhook(vec![tuning("1.0.0", Some((true, true)))], &state),
        );
        assert_eq!(
            downgraded.violations[0].field,
            "spec.packages.tuning.version"
        );
    }

    #[test]
    fn deleting_objects_pass() {
        let held: &[(&str, &[&str])] = &[("node-a", &["tuning|2.0.0"])];
        let old = skyhook(vec![tuning("2.0.0", Some((true, false)))], held);
        let mut new = skyhook(vec![], held);
        assert_eq!(skyhook_update(&old, &new).violations.len(), 1);
        new.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        assert_eq!(skyhook_update(&old, &new), UpdateVerdict::default());
    }
}
