//! Which interrupt a package needs, the single interrupt of a dependency wave, and the
//! bookkeeping of changed `configMap` keys.

use std::collections::{BTreeMap, BTreeSet};

use crate::glob::Pattern;
use crate::v1alpha1::{Interrupt, InterruptType, Package, PackageStatus, Stage, State};

/// Whether a `configInterrupts` key applies to a changed `configMap` key: equal, or a glob
/// (Go `filepath.Match`) matching it. A malformed glob matches only itself.
pub fn config_key_matches(pattern: &str, key: &str) -> bool {
    pattern == key || Pattern::new(pattern).is_ok_and(|p| p.matches(key))
}

/// The interrupts a package needs now.
///
/// When `changed_keys` (the package's `status.configUpdates`) is non-empty, they are the
/// `configInterrupts` whose key matches at least one changed key, in key order, and the
/// package-level `interrupt` is ignored, so a config change on a key without a config interrupt
/// needs no interrupt at all. Otherwise it is the package `interrupt`, if any. Duplicates
/// (same type and services) are dropped.
pub fn effective_interrupts(package: &Package, changed_keys: &[String]) -> Vec<Interrupt> {
    let mut out: Vec<Interrupt> = Vec::new();
    if changed_keys.is_empty() {
        out.extend(package.interrupt.clone());
        return out;
    }
    for (pattern, interrupt) in &package.config_interrupts {
        if changed_keys
            .iter()
            .any(|key| config_key_matches(pattern, key))
            && !out.contains(interrupt)
        {
            out.push(interrupt.clone());
        }
    }
    out
}

/// Whether the package has an effective interrupt, which makes `post-interrupt` its terminal
/// stage instead of `config`.
pub fn has_interrupt(package: &Package, changed_keys: &[String]) -> bool {
    !effective_interrupts(package, changed_keys).is_empty()
}

/// The config keys of `package` changed in its current change cycle: its entry of the
/// Skyhook's `status.configUpdates` (`updates`), empty when it has none.
pub fn changed_keys<'u>(updates: &'u BTreeMap<String, Vec<String>>, package: &str) -> &'u [String] {
    updates.get(package).map_or(&[][..], Vec::as_slice)
}

/// The one interrupt a node gets for a wave of packages, and the package that owns it (whose
/// interrupt pod runs it; the others are `skipped` and promoted when it succeeds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedInterrupt {
    /// The package owning the interrupt.
    pub owner: String,
    /// The interrupt to run.
    pub interrupt: Interrupt,
}

/// Merges the effective interrupts of a wave. `wave` maps package name → its effective
/// interrupts. Packages are visited in name order; the highest-priority type wins
/// (reboot > restartAllServices > service > noop, see [`InterruptType::rank`]); service
/// interrupts of the winning priority are merged into one with the sorted union of their
/// services. The owner is the first package, in name order, that contributed the winning type.
/// Returns `None` when no package needs an interrupt.
pub fn merge_interrupts(wave: &BTreeMap<String, Vec<Interrupt>>) -> Option<MergedInterrupt> {
    let mut best: Option<MergedInterrupt> = None;
    for (package, interrupts) in wave {
        for interrupt in interrupts {
            match &mut best {
                Some(current) if interrupt.type_.rank() > current.interrupt.type_.rank() => {}
                Some(current) if interrupt.type_.rank() == current.interrupt.type_.rank() => {
                    if interrupt.type_ == InterruptType::Service {
                        let services: BTreeSet<String> = current
                            .interrupt
                            .services
                            .iter()
                            .chain(&interrupt.services)
                            .cloned()
                            .collect();
                        current.interrupt.services = services.into_iter().collect();
                    }
                }
                _ => {
                    let mut interrupt = interrupt.clone();
                    if interrupt.type_ == InterruptType::Service {
                        interrupt.services.sort();
                        interrupt.services.dedup();
                    }
                    best = Some(MergedInterrupt {
                        owner: package.clone(),
                        interrupt,
                    });
                }
            }
        }
    }
    best
}

/// The keys of a package `configMap` that are new or whose value changed. Removed keys do not
/// count. Sorted.
pub fn changed_config_keys(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<String> {
    new.iter()
        .filter(|(key, value)| old.get(*key) != Some(value))
        .map(|(key, _)| key.clone())
        .collect()
}

/// The new `status.configUpdates[pkg]` after a config change: the previous keys (dropped
/// first when every node had completed the package, which ends the previous change cycle),
/// then the changed keys appended without duplicates.
pub fn record_config_updates(
    previous: &[String],
    changed: &[String],
    every_node_complete: bool,
) -> Vec<String> {
    let mut keys: Vec<String> = if every_node_complete {
        Vec::new()
    } else {
        previous.to_vec()
    };
    for key in changed {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// One node's view of a package whose `configMap` changed.
#[derive(Debug, Clone, Copy)]
pub struct ConfigChangeNode<'a> {
    /// The node-state entry of the package's spec version, if any.
    pub entry: Option<&'a PackageStatus>,
    /// Whether a pod for the package is on the node.
    pub pod_running: bool,
    /// Whether the package is complete on the node (see [`crate::stage::package_complete`]).
    pub complete: bool,
}

/// What to do with a changed package `configMap`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChangeDecision {
    /// Apply the change now: update the ConfigMap, record the changed keys, and send every
    /// node back to `(in_progress, config)`. `every_node_complete` says whether the previous
    /// change cycle ended (see [`record_config_updates`]); `delete_pods_on` lists the nodes whose
    /// erroring pods must be deleted so they are recreated with the new data.
    Apply {
        /// Every node had completed the package with no pod running.
        every_node_complete: bool,
        /// Nodes whose pod is erroring in `config`, `interrupt` or `post-interrupt`.
        delete_pods_on: Vec<usize>,
    },
    /// The package is still running somewhere: keep the change queued (the ConfigMap is not
    /// updated yet).
    Queue,
}

/// Whether a `configMap` change can be applied: when every node has the package complete
/// with no pod running, or when some node has it `erroring` in `config`, `interrupt` or
/// `post-interrupt` (a fix for a failing config should not wait). `nodes` are indexed as the
/// caller's node list.
pub fn config_change_decision(nodes: &[ConfigChangeNode<'_>]) -> ConfigChangeDecision {
    let every_node_complete = nodes.iter().all(|n| n.complete && !n.pod_running);
    let delete_pods_on: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.entry.is_some_and(|e| {
                e.state == State::Erroring
                    && matches!(
                        e.stage,
                        Stage::Config | Stage::Interrupt | Stage::PostInterrupt
                    )
            })
        })
        .map(|(i, _)| i)
        .collect();
    if every_node_complete || !delete_pods_on.is_empty() {
        ConfigChangeDecision::Apply {
            every_node_complete,
            delete_pods_on,
        }
    } else {
        ConfigChangeDecision::Queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(services: &[&str]) -> Interrupt {
        Interrupt {
            type_: InterruptType::Service,
            services: services.iter().map(|s| (*s).into()).collect(),
        }
    }

    fn of(type_: InterruptType) -> Interrupt {
        Interrupt {
            type_,
            services: vec![],
        }
    }

    fn package(interrupt: Option<Interrupt>, config_interrupts: &[(&str, Interrupt)]) -> Package {
        Package {
            name: "p".into(),
            version: "1.0.0".into(),
            image: "busybox".into(),
            interrupt,
            config_interrupts: config_interrupts
                .iter()
                .map(|(k, i)| ((*k).into(), i.clone()))
                .collect(),
            ..Package::default()
        }
    }

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| (*s).into()).collect()
    }

    #[test]
    fn without_config_updates_the_package_interrupt_applies() {
        let p = package(
            Some(of(InterruptType::Reboot)),
            &[("game.properties", service(&["rsyslog"]))],
        );
        assert_eq!(effective_interrupts(&p, &[]), [of(InterruptType::Reboot)]);
        assert!(has_interrupt(&p, &[]));
        assert!(!has_interrupt(&package(None, &[]), &[]));
    }

    #[test]
    fn config_updates_select_matching_config_interrupts_only() {
        // config-skyhook e2e: dexter reboots, with game.properties → service rsyslog.
        let dexter = package(
            Some(of(InterruptType::Reboot)),
            &[("game.properties", service(&["rsyslog"]))],
        );
        assert_eq!(
            effective_interrupts(&dexter, &keys(&["game.properties"])),
            [service(&["rsyslog"])]
        );
        // Phase 4: only ui.properties changed → no interrupt, even with a package interrupt.
        assert!(effective_interrupts(&dexter, &keys(&["ui.properties"])).is_empty());
        assert!(!has_interrupt(&dexter, &keys(&["ui.properties"])));
        // Phase 5: a glob.
        let glob = package(None, &[("*.properties", service(&["cron"]))]);
        assert_eq!(
            effective_interrupts(&glob, &keys(&["ui.properties"])),
            [service(&["cron"])]
        );
        assert!(effective_interrupts(&glob, &keys(&["ui.conf"])).is_empty());
    }

    #[test]
    fn config_interrupts_are_deduplicated() {
        let p = package(
            None,
            &[
                ("a.conf", service(&["x"])),
                ("b.conf", service(&["x"])),
                ("*.conf", of(InterruptType::Reboot)),
                ("c.conf", service(&["y"])),
            ],
        );
        let got = effective_interrupts(&p, &keys(&["a.conf", "b.conf", "c.conf"]));
        assert_eq!(
            got,
            [of(InterruptType::Reboot), service(&["x"]), service(&["y"])]
        );
    }

    #[test]
    fn key_matching() {
        assert!(config_key_matches("game.properties", "game.properties"));
        assert!(config_key_matches("*.properties", "game.properties"));
        assert!(!config_key_matches("*.properties", "game.conf"));
        assert!(
            config_key_matches("[", "["),
            "a malformed glob still matches itself"
        );
        assert!(!config_key_matches("[", "x"));
    }

    fn wave(entries: &[(&str, Vec<Interrupt>)]) -> BTreeMap<String, Vec<Interrupt>> {
        entries
            .iter()
            .map(|(p, i)| ((*p).into(), i.clone()))
            .collect()
    }

    #[test]
    fn merge_services_across_packages() {
        // interrupt-grouping e2e.
        let merged = merge_interrupts(&wave(&[
            ("zeb", vec![service(&["cron"])]),
            ("dax", vec![service(&["containerd", "foobar"])]),
        ]))
        .unwrap();
        assert_eq!(merged.owner, "dax");
        assert_eq!(merged.interrupt, service(&["containerd", "cron", "foobar"]));
    }

    #[test]
    fn merge_priority_table() {
        use InterruptType::*;
        type Case<'a> = (Vec<(&'a str, Vec<Interrupt>)>, &'a str, Interrupt);
        let cases: Vec<Case<'_>> = vec![
            (
                vec![("a", vec![of(Noop)]), ("b", vec![service(&["x"])])],
                "b",
                service(&["x"]),
            ),
            (
                vec![
                    ("a", vec![service(&["x"])]),
                    ("b", vec![of(RestartAllServices)]),
                ],
                "b",
                of(RestartAllServices),
            ),
            (
                vec![
                    ("a", vec![of(RestartAllServices)]),
                    ("b", vec![of(Reboot)]),
                    ("c", vec![of(Reboot)]),
                ],
                "b",
                of(Reboot),
            ),
            (
                vec![("a", vec![of(Noop)]), ("b", vec![of(Noop)])],
                "a",
                of(Noop),
            ),
            (
                vec![("a", vec![]), ("b", vec![service(&["y", "x", "y"])])],
                "b",
                service(&["x", "y"]),
            ),
            (
                vec![
                    ("a", vec![service(&["b"])]),
                    ("b", vec![of(Noop), service(&["a"])]),
                ],
                "a",
                service(&["a", "b"]),
            ),
        ];
        for (entries, owner, interrupt) in cases {
            let merged = merge_interrupts(&wave(&entries)).unwrap();
            assert_eq!(
                (merged.owner.as_str(), &merged.interrupt),
                (owner, &interrupt),
                "{entries:?}"
            );
        }
        assert_eq!(
            merge_interrupts(&wave(&[("a", vec![]), ("b", vec![])])),
            None
        );
        assert_eq!(merge_interrupts(&BTreeMap::new()), None);
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn config_diff() {
        let old = map(&[
            ("game.properties", "a"),
            ("ui.properties", "b"),
            ("gone", "x"),
        ]);
        let new = map(&[
            ("game.properties", "a2"),
            ("ui.properties", "b"),
            ("added", "y"),
        ]);
        assert_eq!(
            changed_config_keys(&old, &new),
            ["added", "game.properties"]
        );
        assert!(changed_config_keys(&new, &new).is_empty());
        assert!(
            changed_config_keys(&old, &BTreeMap::new()).is_empty(),
            "removals do not count"
        );
    }

    fn status(stage: Stage, state: State) -> PackageStatus {
        PackageStatus {
            name: "p".into(),
            version: "1".into(),
            image: "x".into(),
            container_sha: String::new(),
            stage,
            state,
            restarts: 0,
        }
    }

    #[test]
    fn config_change_applies_when_idle_or_fixing_a_failure() {
        let done = status(Stage::Config, State::Complete);
        let running = status(Stage::Apply, State::InProgress);
        let failing_config = status(Stage::Config, State::Erroring);
        let failing_apply = status(Stage::Apply, State::Erroring);
        let node = |entry, pod_running, complete| ConfigChangeNode {
            entry: Some(entry),
            pod_running,
            complete,
        };
        assert_eq!(
            config_change_decision(&[node(&done, false, true), node(&done, false, true)]),
            ConfigChangeDecision::Apply {
                every_node_complete: true,
                delete_pods_on: vec![]
            }
        );
        assert_eq!(
            config_change_decision(&[node(&done, false, true), node(&running, true, false)]),
            ConfigChangeDecision::Queue
        );
        assert_eq!(
            config_change_decision(&[node(&done, true, true)]),
            ConfigChangeDecision::Queue,
            "a pod still running counts as busy"
        );
        assert_eq!(
            config_change_decision(&[
                node(&running, true, false),
                node(&failing_config, true, false)
            ]),
            ConfigChangeDecision::Apply {
                every_node_complete: false,
                delete_pods_on: vec![1]
            }
        );
        assert_eq!(
            config_change_decision(&[node(&failing_apply, true, false)]),
            ConfigChangeDecision::Queue,
            "a failing apply is not fixed by new config"
        );
        assert_eq!(
            config_change_decision(&[]),
            ConfigChangeDecision::Apply {
                every_node_complete: true,
                delete_pods_on: vec![]
            }
        );
    }

    #[test]
    fn config_updates_accumulate_until_a_cycle_ends() {
        let previous = keys(&["game.properties"]);
        assert_eq!(
            record_config_updates(
                &previous,
                &keys(&["ui.properties", "game.properties"]),
                false
            ),
            keys(&["game.properties", "ui.properties"])
        );
        assert_eq!(
            record_config_updates(&previous, &keys(&["ui.properties"]), true),
            keys(&["ui.properties"])
        );
        assert_eq!(record_config_updates(&[], &[], true), Vec::<String>::new());
    }
}
