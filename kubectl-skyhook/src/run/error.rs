//! The errors of a command and the hint printed with each.

use std::path::PathBuf;

use kube::config::KubeconfigError;
use skyhook_api::generation::Group;

use crate::migrate::MigrateError;
use crate::output::OutputError;
use crate::patches::PlanError;
use crate::pattern::PatternError;

/// A failed command. `hint` says what to try.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The kubeconfig could not be loaded.
    #[error("failed to load the kubeconfig")]
    Kubeconfig {
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The client could not be built.
    #[error("failed to create a Kubernetes client")]
    Client {
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Listing or reading objects failed.
    #[error("failed to {action}")]
    Read {
        /// What was read, e.g. `list Skyhooks`.
        action: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A container log could not be read.
    #[error("failed to read the log of {container}")]
    Log {
        /// `<namespace>/<pod> container <name>`.
        container: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A Skyhook (or NodeWright) that does not exist.
    #[error("{} {name:?} not found", group.kind())]
    SkyhookNotFound {
        /// Its name.
        name: String,
        /// Its API group.
        group: Group,
    },
    /// The cluster does not serve the binary's API group.
    #[error("{message}")]
    Preflight {
        /// What the cluster serves and what to do.
        message: String,
    },
    /// A patch failed.
    #[error("failed to {description}")]
    Patch {
        /// What the patch does.
        description: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The manifest for `plan` could not be read.
    #[error("failed to read {path}")]
    ReadManifest {
        /// Its path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The manifest for `plan` is not a Skyhook (or NodeWright).
    #[error("failed to parse {path} as a {}", group.kind())]
    ParseManifest {
        /// Its path.
        path: PathBuf,
        /// The API group the manifest should be of.
        group: Group,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// A node pattern is not a regex.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// A planner refused its arguments.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A migration between the API groups did not go on.
    #[error(transparent)]
    Migrate(#[from] MigrateError),
    /// Creating or deleting an object failed.
    #[error("failed to {action}")]
    Write {
        /// What was written, e.g. `create NodeWright "gpu"`.
        action: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The output could not be rendered.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Writing the output or reading the answer to a prompt failed.
    #[error("failed to write the output or read the answer")]
    Terminal {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The user did not confirm.
    #[error("aborted: nothing was changed")]
    Aborted,
}

impl RunError {
    /// What to try next, in the words of the binary of `group`: the hints are written for
    /// `kubectl skyhook` and hold no user input, so the nodewright binary's are the same text
    /// with the group's words swapped.
    pub fn hint_for(&self, group: Group) -> String {
        match group {
            Group::Skyhook => self.hint().to_owned(),
            Group::NodeWright => crate::cli::nodewright_text(self.hint()),
        }
    }

    /// What to try next.
    pub fn hint(&self) -> &'static str {
        match self {
            RunError::Kubeconfig { .. } | RunError::Client { .. } => {
                "check --kubeconfig, --context, --cluster and --user (or $KUBECONFIG)"
            }
            RunError::Read { .. } => {
                "check that the cluster is reachable, the Skyhook CRDs are installed, and you may list these objects"
            }
            RunError::Log { .. } => {
                "the API server fetches logs from the node's kubelet, as for `kubectl logs`: check that it can reach the node and that the pod still exists"
            }
            RunError::SkyhookNotFound { .. } => "`kubectl skyhook status` lists the Skyhooks",
            RunError::Preflight { .. } => {
                "`kubectl get crds | grep nvidia.com` shows which API groups are installed"
            }
            RunError::Patch { .. } => {
                "check that you may patch the object; `--dry-run` shows the intended change"
            }
            RunError::ReadManifest { .. } | RunError::ParseManifest { .. } => {
                "pass a Skyhook manifest (apiVersion skyhook.nvidia.com/v1alpha1, kind Skyhook) with -f"
            }
            RunError::Pattern(_) => {
                "a pattern with regex meta characters is an anchored regex; plain names match exactly"
            }
            RunError::Plan(PlanError::OperatorTooOld { .. }) => {
                "upgrade the Skyhook operator; older operators pause through spec.pause"
            }
            RunError::Plan(PlanError::UninstallNotEnabled { .. }) => {
                "set it in the Skyhook's spec (`kubectl edit skyhook <name>`), then run `package uninstall` again"
            }
            RunError::Plan(PlanError::CancelWhileDeleting { .. }) => {
                "the uninstall finishes with the deletion; create the Skyhook again to reinstall the package"
            }
            RunError::Plan(_) => "see `kubectl skyhook <command> --help`",
            RunError::Migrate(MigrateError::Timeout { .. }) => {
                "`kubectl skyhook status` and the operator's log show where the takeover stands"
            }
            RunError::Migrate(_) => "see `kubectl skyhook migrate --help` and docs/migration.md",
            RunError::Write { .. } => {
                "check that you may create and delete these objects; `--dry-run` shows the object to create"
            }
            RunError::Output(_) | RunError::Terminal { .. } => "try another -o format",
            RunError::Aborted => "pass --confirm (-y) to skip the question",
        }
    }
}

/// An error and its causes on one line: `a: b: c`. An API server's refusal reads as its
/// code and message (kube's own text repeats the message and dumps the whole Status), and a
/// cause whose text is already on the line is not repeated.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(error);
    while let Some(cause) = next {
        let (part, source) = match cause.downcast_ref::<kube::Error>() {
            // The Status is both the message and the source: say it once.
            Some(kube::Error::Api(status)) => (api_status_text(status), None),
            _ => (cause.to_string(), cause.source()),
        };
        if !part.is_empty() && !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        next = source;
    }
    text
}

/// `the API server answered 404 (NotFound): skyhooks "x" not found`.
fn api_status_text(status: &kube::core::Status) -> String {
    let mut text = format!("the API server answered {}", status.code);
    if !status.reason.is_empty() {
        text.push_str(&format!(" ({})", status.reason));
    }
    if !status.message.is_empty() {
        text.push_str(": ");
        text.push_str(&status.message);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: reason.to_owned(),
            message: message.to_owned(),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn error_chains_read_as_one_line() {
        let log_failure = RunError::Log {
            container: "skyhook/p container c".to_owned(),
            source: api_error(
                500,
                "",
                "Get \"https://node-3:10250/containerLogs\": no such host",
            ),
        };
        let not_found = RunError::Read {
            action: "get Skyhook \"x\"".to_owned(),
            source: api_error(
                404,
                "NotFound",
                "skyhooks.skyhook.nvidia.com \"x\" not found",
            ),
        };
        let io = RunError::ReadManifest {
            path: PathBuf::from("/x.yaml"),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
        };
        let repeated = RunError::Terminal {
            source: std::io::Error::other("failed to write the output or read the answer"),
        };
        let cases: [(&RunError, &str); 4] = [
            (
                &log_failure,
                "failed to read the log of skyhook/p container c: the API server answered 500: Get \"https://node-3:10250/containerLogs\": no such host",
            ),
            (
                &not_found,
                "failed to get Skyhook \"x\": the API server answered 404 (NotFound): skyhooks.skyhook.nvidia.com \"x\" not found",
            ),
            (&io, "failed to read /x.yaml: No such file or directory"),
            (&repeated, "failed to write the output or read the answer"),
        ];
        for (error, expected) in cases {
            assert_eq!(error_chain(error), expected, "{error:?}");
        }
    }

    #[test]
    fn hints_speak_the_binarys_words() {
        let missing = RunError::SkyhookNotFound {
            name: "x".to_owned(),
            group: Group::NodeWright,
        };
        assert_eq!(
            missing.hint_for(Group::NodeWright),
            "`kubectl nodewright status` lists the NodeWrights"
        );
        assert_eq!(
            missing.hint_for(Group::Skyhook),
            "`kubectl skyhook status` lists the Skyhooks"
        );
        let preflight = RunError::Preflight {
            message: String::new(),
        };
        assert_eq!(
            preflight.hint_for(Group::NodeWright),
            preflight.hint(),
            "a hint without group words is the same"
        );
    }
}
