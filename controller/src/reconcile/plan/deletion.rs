//! A Skyhook being deleted (upstream §2.8): its finalizer holds the object while the packages
//! with `uninstall.enabled` are uninstalled from its nodes, reports why it waits
//! (`DeletionBlocked`), then removes every trace of the Skyhook from the nodes and lets go.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use skyhook_api::conditions::{malformed_message, set_condition};
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{Skyhook, State};

use super::status::set_uninstall_conditions;
use super::taints::matched_nodes;
use super::{EventTarget, Planner};

/// What a deleted Skyhook's nodes say, for [`deletion_step`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeletionInput {
    /// Some package has `uninstall.enabled`.
    pub any_enabled: bool,
    /// Nodes whose `nodeState_<skyhook>` does not parse, sorted.
    pub malformed: Vec<String>,
    /// Nodes where the spec version of an enabled package still has an entry, sorted.
    pub pending: Vec<String>,
    /// Where such an entry is `erroring`, as `<node> (<package>, <stage>)`, sorted.
    pub erroring: Vec<String>,
    pub paused: bool,
    pub disabled: bool,
}

/// What a deleted Skyhook does this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionStep {
    /// The uninstalls run: the Skyhook's pass goes on, with every enabled package requested.
    Uninstall,
    /// Deletion waits for the user: `DeletionBlocked` with this reason and message.
    Blocked {
        reason: &'static str,
        message: String,
    },
    /// Nothing is pending: clean the nodes and remove the finalizer.
    CleanUp,
}

/// The checks of upstream §2.8, in its order: unreadable node state (only when some package
/// is enabled, since only then is there anything to uninstall), paused or disabled with
/// uninstalls pending, pending, or clean up.
pub fn deletion_step(input: &DeletionInput) -> DeletionStep {
    let nodes = |list: &[String]| format!("{} node(s): {}", list.len(), list.join(", "));
    if input.any_enabled && !input.malformed.is_empty() {
        return DeletionStep::Blocked {
            reason: keys::DELETION_BLOCKED_MALFORMED_REASON,
            message: format!(
                "{}; fix or delete the annotation so the uninstalls can run",
                malformed_message(input.malformed.clone())
            ),
        };
    }
    if input.pending.is_empty() {
        return DeletionStep::CleanUp;
    }
    if input.paused {
        return DeletionStep::Blocked {
            reason: keys::DELETION_BLOCKED_PAUSED_REASON,
            message: format!(
                "the Skyhook is paused with uninstalls pending on {}; resume it so they can run",
                nodes(&input.pending)
            ),
        };
    }
    if input.disabled {
        return DeletionStep::Blocked {
            reason: keys::DELETION_BLOCKED_DISABLED_REASON,
            message: format!(
                "the Skyhook is disabled with uninstalls pending on {}; enable it so they can run",
                nodes(&input.pending)
            ),
        };
    }
    DeletionStep::Uninstall
}

/// The most erroring entries [`erroring_block`] names.
const MAX_ERRORING_LISTED: usize = 10;

/// Why a deletion whose uninstalls run waits all the same: some of them are `erroring` (an
/// install the uninstall needs finished first, or the uninstall itself). Reason and message of
/// `DeletionBlocked`; `None` while nothing errs.
pub fn erroring_block(input: &DeletionInput) -> Option<(&'static str, String)> {
    if input.erroring.is_empty() {
        return None;
    }
    let listed: Vec<&str> = (input.erroring.iter())
        .take(MAX_ERRORING_LISTED)
        .map(String::as_str)
        .collect();
    let more = input.erroring.len().saturating_sub(MAX_ERRORING_LISTED);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let message = format!(
        "the deletion waits for uninstalls that cannot finish: erroring on {}{more}; fix the \
         package (a spec edit replaces its pods), or set its uninstall.enabled to false to \
         delete the Skyhook without uninstalling it",
        listed.join(", ")
    );
    Some((keys::DELETION_BLOCKED_ERRORING_REASON, message))
}

impl Planner<'_> {
    /// The deletion of `skyhook`: true when its pass goes on to run the uninstalls.
    pub(super) fn deletion(&mut self, skyhook: &Skyhook, name: &str) -> bool {
        let input = self.deletion_input(skyhook, name);
        match deletion_step(&input) {
            DeletionStep::Uninstall => true,
            DeletionStep::CleanUp => {
                let mut forgotten = false;
                for work in self.nodes.values_mut() {
                    forgotten |= work.forget_skyhook(name);
                }
                // The finalizer goes once the nodes read clean, not with the patches that clean
                // them: a refused patch (409) would leave the Skyhook's keys on a node for good.
                if !forgotten {
                    self.plan.finalizers.insert(name.to_owned(), false);
                }
                false
            }
            DeletionStep::Blocked { reason, message } => {
                self.deletion_blocked(skyhook, name, reason, message);
                if reason == keys::DELETION_BLOCKED_MALFORMED_REASON {
                    self.requeue(MALFORMED_RETRY);
                }
                false
            }
        }
    }

    pub(super) fn deletion_input(&mut self, skyhook: &Skyhook, name: &str) -> DeletionInput {
        let packages = &skyhook.spec.packages;
        let key = keys::node_state_annotation(name);
        let mut input = DeletionInput {
            any_enabled: packages.values().any(|p| p.uninstall_enabled()),
            paused: skyhook.is_paused(),
            disabled: skyhook.is_disabled(),
            ..DeletionInput::default()
        };
        for (node, work) in &self.nodes {
            let Some(text) = work.annotations().get(&key) else {
                continue;
            };
            let Ok(state) = NodeState::parse(text) else {
                input.malformed.push((*node).to_owned());
                continue;
            };
            let mut pending = false;
            for package in packages.values().filter(|p| p.uninstall_enabled()) {
                let Some(entry) = state.get_version(&package.name, &package.version) else {
                    continue;
                };
                pending = true;
                if entry.state == State::Erroring {
                    let at = format!("{node} ({}, {})", package.name, entry.stage);
                    input.erroring.push(at);
                }
            }
            if pending {
                input.pending.push((*node).to_owned());
            }
        }
        input
    }

    /// The Warning Event of a deletion newly blocked for `reason` (none when its
    /// `DeletionBlocked` condition already says so).
    pub(super) fn deletion_blocked_event(
        &mut self,
        skyhook: &Skyhook,
        name: &str,
        reason: &'static str,
        message: &str,
    ) {
        let previous_reason = (skyhook.status.iter())
            .flat_map(|status| &status.conditions)
            .find(|c| c.type_ == keys::CONDITION_DELETION_BLOCKED)
            .map(|c| c.reason.as_str());
        if previous_reason != Some(reason) {
            let target = EventTarget::Skyhook(name.to_owned());
            let event_reason = keys::CONDITION_DELETION_BLOCKED;
            self.event(target, true, event_reason, message.to_owned());
        }
    }

    /// Sets `DeletionBlocked` (and refreshes the uninstall conditions) and, when it is new or
    /// its reason changed, says so in a Warning Event.
    fn deletion_blocked(
        &mut self,
        skyhook: &Skyhook,
        name: &str,
        reason: &'static str,
        message: String,
    ) {
        self.deletion_blocked_event(skyhook, name, reason, &message);
        let old = skyhook.status.clone().unwrap_or_default();
        let mut status = old.clone();
        // Upstream refreshes these on every reconcile, a blocked deletion included.
        let matched = matched_nodes(skyhook, &self.snapshot.nodes);
        let (parsed, malformed) = self.split_malformed(name, matched);
        let config_updates = &old.config_updates;
        let uninstall =
            self.uninstall_conditions_of(skyhook, (&parsed, &malformed), config_updates);
        set_uninstall_conditions(skyhook, &mut status.conditions, &uninstall, self.now);
        let blocked = Condition {
            type_: keys::CONDITION_DELETION_BLOCKED.to_owned(),
            status: "True".to_owned(),
            reason: reason.to_owned(),
            message,
            observed_generation: skyhook.metadata.generation,
            last_transition_time: Time(self.now),
        };
        set_condition(&mut status.conditions, blocked);
        if status == old {
            return;
        }
        self.plan.statuses.insert(name.to_owned(), status);
    }
}

/// How soon a deletion blocked by an unreadable node state looks again (upstream returns an
/// error, which backs off).
const MALFORMED_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn input(enabled: bool, malformed: &[&str], pending: &[&str]) -> DeletionInput {
        DeletionInput {
            any_enabled: enabled,
            malformed: malformed.iter().map(|s| (*s).to_owned()).collect(),
            pending: pending.iter().map(|s| (*s).to_owned()).collect(),
            ..DeletionInput::default()
        }
    }

    #[test]
    fn erroring_uninstalls_block_the_deletion_and_say_where() {
        assert_eq!(erroring_block(&input(true, &[], &["n1"])), None);
        let erroring = DeletionInput {
            erroring: vec!["n1 (bb, apply)".into(), "n2 (bb, uninstall)".into()],
            ..input(true, &[], &["n1", "n2"])
        };
        assert_eq!(
            erroring_block(&erroring),
            Some((
                keys::DELETION_BLOCKED_ERRORING_REASON,
                "the deletion waits for uninstalls that cannot finish: erroring on \
                 n1 (bb, apply), n2 (bb, uninstall); fix the package (a spec edit replaces its \
                 pods), or set its uninstall.enabled to false to delete the Skyhook without \
                 uninstalling it"
                    .to_owned()
            ))
        );
        let many = DeletionInput {
            erroring: (0..12).map(|i| format!("n{i:02} (bb, apply)")).collect(),
            ..input(true, &[], &["n1"])
        };
        let (_, message) = erroring_block(&many).unwrap();
        assert!(message.contains("n09 (bb, apply) and 2 more;"), "{message}");
        assert!(!message.contains("n10"), "{message}");
    }

    fn reason(step: &DeletionStep) -> Option<&'static str> {
        match step {
            DeletionStep::Blocked { reason, .. } => Some(reason),
            _ => None,
        }
    }

    #[test]
    fn the_checks_run_in_upstreams_order() {
        let paused = DeletionInput {
            paused: true,
            ..input(true, &[], &["n1"])
        };
        let disabled = DeletionInput {
            disabled: true,
            ..input(true, &[], &["n1"])
        };
        let paused_and_malformed = DeletionInput {
            paused: true,
            ..input(true, &["n2"], &["n1"])
        };
        let paused_nothing_pending = DeletionInput {
            paused: true,
            ..input(true, &[], &[])
        };
        let cases = [
            (input(false, &[], &[]), DeletionStep::CleanUp),
            (input(true, &[], &[]), DeletionStep::CleanUp),
            // Nothing to uninstall: an unreadable state does not hold the deletion.
            (input(false, &["n1"], &[]), DeletionStep::CleanUp),
            (input(true, &[], &["n1"]), DeletionStep::Uninstall),
            (paused_nothing_pending, DeletionStep::CleanUp),
        ];
        for (given, expected) in cases {
            assert_eq!(deletion_step(&given), expected, "{given:?}");
        }
        let blocked = [
            (
                input(true, &["n1"], &[]),
                keys::DELETION_BLOCKED_MALFORMED_REASON,
            ),
            (
                paused_and_malformed,
                keys::DELETION_BLOCKED_MALFORMED_REASON,
            ),
            (paused, keys::DELETION_BLOCKED_PAUSED_REASON),
            (disabled, keys::DELETION_BLOCKED_DISABLED_REASON),
        ];
        for (given, expected) in blocked {
            assert_eq!(reason(&deletion_step(&given)), Some(expected), "{given:?}");
        }
    }

    #[test]
    fn messages_name_the_nodes_and_the_fix() {
        let paused = DeletionInput {
            paused: true,
            ..input(true, &[], &["n1", "n2"])
        };
        let DeletionStep::Blocked { message, .. } = deletion_step(&paused) else {
            panic!("not blocked");
        };
        assert_eq!(
            message,
            "the Skyhook is paused with uninstalls pending on 2 node(s): n1, n2; resume it so they can run"
        );
    }
}
