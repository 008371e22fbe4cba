//! The errors of a command and the hint printed with each.

use std::path::PathBuf;

use kube::config::KubeconfigError;

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
    /// A Skyhook that does not exist.
    #[error("Skyhook {name:?} not found")]
    SkyhookNotFound {
        /// Its name.
        name: String,
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
    /// The manifest for `plan` is not a Skyhook.
    #[error("failed to parse {path} as a Skyhook")]
    ParseManifest {
        /// Its path.
        path: PathBuf,
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
    /// What to try next.
    pub fn hint(&self) -> &'static str {
        match self {
            RunError::Kubeconfig { .. } | RunError::Client { .. } => {
                "check --kubeconfig, --context, --cluster and --user (or $KUBECONFIG)"
            }
            RunError::Read { .. } => {
                "check that the cluster is reachable, the Skyhook CRDs are installed, and you may list these objects"
            }
            RunError::SkyhookNotFound { .. } => "`kubectl skyhook status` lists the Skyhooks",
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
            RunError::Plan(_) => "see `kubectl skyhook <command> --help`",
            RunError::Output(_) | RunError::Terminal { .. } => "try another -o format",
            RunError::Aborted => "pass --confirm (-y) to skip the question",
        }
    }
}

/// An error and its causes on one line: `a: b: c`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
