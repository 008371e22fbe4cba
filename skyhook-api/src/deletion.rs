//! Deleting a Skyhook (upstream §2.8): whether its uninstalls run, what blocks it, or whether
//! its nodes are cleaned; the pure rule the controller's deletion step follows.

use crate::conditions::malformed_message;
use crate::keys;

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
