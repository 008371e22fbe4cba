//! Where the operator runs when `-n` is not given, and whether the cluster serves the plugin's
//! API group: the decisions, as pure functions of what was read. `run` does the reads.
//!
//! Upstream moved the operator's default namespace from `skyhook` to `nodewright` with the
//! rename, so a cluster may run it in either. Each binary tries its own group's namespace first,
//! then the other's, then every namespace it may list, and falls back to its own.

use skyhook_api::generation::Group;

/// What discovery has read so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probed {
    /// Namespaces looked into, each with whether an operator Deployment runs there.
    pub namespaces: Vec<(String, bool)>,
    /// The cluster-wide sweep, once done.
    pub sweep: Option<Sweep>,
}

/// The result of listing Deployments in every namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sweep {
    /// Not allowed (or failed): discovery goes on as if nothing was found, silently, because a
    /// user without cluster-wide read rights is the common case and not an error.
    Unavailable,
    /// The namespaces with an operator Deployment, in name order.
    Found(Vec<String>),
}

/// What discovery does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Look for an operator Deployment in this namespace.
    Probe(&'static str),
    /// List Deployments in every namespace.
    Sweep,
    /// Use this namespace; print `note` on stderr first, if any.
    Use {
        /// The namespace.
        namespace: String,
        /// Why it is not the binary's default, when that is worth saying.
        note: Option<String>,
    },
}

/// The next step of namespace discovery for the binary of `group`, given an explicit `-n` (used
/// verbatim) and what has been read.
pub fn next_step(group: Group, explicit: Option<&str>, probed: &Probed) -> Step {
    if let Some(namespace) = explicit {
        return Step::Use {
            namespace: namespace.to_owned(),
            note: None,
        };
    }
    let own = group.keys().word;
    let other = group.other().keys().word;
    for candidate in [own, other] {
        match probed.namespaces.iter().find(|(ns, _)| ns == candidate) {
            None => return Step::Probe(candidate),
            Some((_, true)) => {
                return Step::Use {
                    namespace: candidate.to_owned(),
                    note: (candidate != own).then(|| {
                        format!(
                            "note: no operator in namespace {own:?}; using namespace {candidate:?}, where it runs (pass -n to choose)"
                        )
                    }),
                };
            }
            Some((_, false)) => {}
        }
    }
    match &probed.sweep {
        None => Step::Sweep,
        Some(Sweep::Found(namespaces)) if !namespaces.is_empty() => Step::Use {
            namespace: namespaces[0].clone(),
            note: None,
        },
        Some(_) => Step::Use {
            namespace: own.to_owned(),
            note: None,
        },
    }
}

/// Whether the binary of `group` reads the served API groups before a command (see
/// [`preflight`]).
pub const fn checks_served_groups(group: Group) -> bool {
    matches!(group, Group::NodeWright)
}

/// Why the plugin cannot work against a cluster serving `served` (API group names), or `None`
/// when it can. Only the nodewright binary checks: it drives only `nodewright.nvidia.com`, and
/// against an operator that serves only the legacy group every command would fail later with a
/// bare 404. The skyhook binary keeps working as it always has.
pub fn preflight<'a>(group: Group, served: impl IntoIterator<Item = &'a str>) -> Option<String> {
    if !checks_served_groups(group) {
        return None;
    }
    let served: Vec<&str> = served.into_iter().collect();
    let has = |g: Group| served.contains(&g.name());
    if has(Group::NodeWright) {
        return None;
    }
    let (nodewright, skyhook) = (Group::NodeWright.name(), Group::Skyhook.name());
    Some(if has(Group::Skyhook) {
        format!(
            "the cluster serves {skyhook} but not {nodewright}: its operator predates NodeWright; use `kubectl skyhook` for its Skyhooks, or upgrade the operator"
        )
    } else {
        format!(
            "the cluster serves neither {nodewright} nor {skyhook}: no operator's CRDs are installed"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probed(namespaces: &[(&str, bool)], sweep: Option<Sweep>) -> Probed {
        Probed {
            namespaces: namespaces
                .iter()
                .map(|(ns, found)| ((*ns).to_owned(), *found))
                .collect(),
            sweep,
        }
    }

    fn use_(namespace: &str) -> Step {
        Step::Use {
            namespace: namespace.to_owned(),
            note: None,
        }
    }

    #[test]
    fn discovery_tries_the_own_namespace_then_the_other_then_sweeps_then_falls_back() {
        let nw = Group::NodeWright;
        let sh = Group::Skyhook;
        let found =
            |list: &[&str]| Some(Sweep::Found(list.iter().map(|s| s.to_string()).collect()));
        let noted = |own: &str, used: &str| Step::Use {
            namespace: used.to_owned(),
            note: Some(format!(
                "note: no operator in namespace {own:?}; using namespace {used:?}, where it runs (pass -n to choose)"
            )),
        };
        let cases: Vec<(&str, Group, Option<&str>, Probed, Step)> = vec![
            (
                "explicit -n, verbatim",
                nw,
                Some("ops"),
                probed(&[], None),
                use_("ops"),
            ),
            (
                "explicit -n, even the other default",
                sh,
                Some("nodewright"),
                probed(&[], None),
                use_("nodewright"),
            ),
            (
                "nodewright first",
                nw,
                None,
                probed(&[], None),
                Step::Probe("nodewright"),
            ),
            (
                "skyhook first",
                sh,
                None,
                probed(&[], None),
                Step::Probe("skyhook"),
            ),
            (
                "found in the own namespace",
                nw,
                None,
                probed(&[("nodewright", true)], None),
                use_("nodewright"),
            ),
            (
                "then the other",
                nw,
                None,
                probed(&[("nodewright", false)], None),
                Step::Probe("skyhook"),
            ),
            (
                "the other, mirrored",
                sh,
                None,
                probed(&[("skyhook", false)], None),
                Step::Probe("nodewright"),
            ),
            (
                "found in the other, with a note",
                nw,
                None,
                probed(&[("nodewright", false), ("skyhook", true)], None),
                noted("nodewright", "skyhook"),
            ),
            (
                "mirrored note",
                sh,
                None,
                probed(&[("skyhook", false), ("nodewright", true)], None),
                noted("skyhook", "nodewright"),
            ),
            (
                "then the sweep",
                nw,
                None,
                probed(&[("nodewright", false), ("skyhook", false)], None),
                Step::Sweep,
            ),
            (
                "the sweep's first namespace",
                nw,
                None,
                probed(
                    &[("nodewright", false), ("skyhook", false)],
                    found(&["a-ops", "z-ops"]),
                ),
                use_("a-ops"),
            ),
            (
                "a forbidden sweep falls back to the own namespace",
                nw,
                None,
                probed(
                    &[("nodewright", false), ("skyhook", false)],
                    Some(Sweep::Unavailable),
                ),
                use_("nodewright"),
            ),
            (
                "an empty sweep falls back",
                sh,
                None,
                probed(&[("skyhook", false), ("nodewright", false)], found(&[])),
                use_("skyhook"),
            ),
        ];
        for (case, group, explicit, probed, expected) in cases {
            assert_eq!(next_step(group, explicit, &probed), expected, "{case}");
        }
    }

    #[test]
    fn only_the_nodewright_binary_needs_its_group_served() {
        let both = ["apps", "skyhook.nvidia.com", "nodewright.nvidia.com"];
        let legacy = ["apps", "skyhook.nvidia.com"];
        let none = ["apps"];
        assert_eq!(preflight(Group::Skyhook, none), None);
        assert_eq!(preflight(Group::Skyhook, legacy), None);
        assert_eq!(preflight(Group::NodeWright, both), None);
        for served in [&legacy[..], &none[..]] {
            let message = preflight(Group::NodeWright, served.iter().copied()).unwrap();
            assert!(
                message.contains("nodewright.nvidia.com") && message.contains("skyhook.nvidia.com"),
                "{message}"
            );
        }
        assert!(
            preflight(Group::NodeWright, legacy)
                .unwrap()
                .contains("use `kubectl skyhook`")
        );
    }
}
