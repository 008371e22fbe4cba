//! A package (one value of `spec.packages`) and its interrupt.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::lifecycle::wire_enum;

/// Package dependencies: package name to the exact version required.
pub type DependsOn = BTreeMap<String, String>;

/// A container image carrying lifecycle scripts for the host, plus how and when to run them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Name of the package. Optional: it is taken from the key of `spec.packages` when omitted,
    /// and must equal that key when given. 2 to 43 characters of lowercase letters, digits and
    /// `-`, starting and ending with a letter.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 43), regex(pattern = r"^[a-z][-a-z0-9]{0,41}[a-z]$"))]
    pub name: String,

    /// Version of the package, in semantic-version form (`1`, `1.2`, `1.2.3`, with an optional
    /// `-prerelease`; no `+build`, which cannot appear in the pod label `<name>-<version>`). It
    /// is also the tag of `image`. Required.
    pub version: String,

    /// Image of the package, normally without a tag (the tag is `version`). If a tag is given it
    /// must equal `version`. Registry ports and `@sha256:` digests are allowed. Required.
    pub image: String,

    /// Digest of the package image (`sha256:...`). When set, the image is pulled by digest
    /// (`image@containerSHA`) instead of by the `version` tag.
    #[serde(
        rename = "containerSHA",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub container_sha: Option<String>,

    /// Full agent image reference, with tag, used for this package instead of the operator's
    /// default agent image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_image_override: Option<String>,

    /// Interrupt the node needs after this package is applied or upgraded (service restart,
    /// restart of all services, reboot, or none). Omit when the package needs no interrupt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt: Option<Interrupt>,

    /// Packages of this Skyhook that must be complete on a node before this one starts, as
    /// package name to exact version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub depends_on: DependsOn,

    /// Interrupts to run when specific `configMap` keys change, keyed by a `configMap` key or a
    /// glob (`*`) matching at least one key. When config keys change, only the interrupts whose
    /// key matches a changed key run and the package-level `interrupt` is ignored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config_interrupts: BTreeMap<String, Interrupt>,

    /// Files given to the package's lifecycle scripts, as file name to content. They appear
    /// under `/skyhook-package/configmaps/<key>` in the agent containers. Keys consist of
    /// alphanumeric characters, `-`, `_` or `.`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config_map: BTreeMap<String, String>,

    /// Environment variables for the agent stage containers (not the image copy container).
    /// `valueFrom` references such as `secretKeyRef` are the way to pass secrets to a package.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,

    /// Requests and limits for every container of the package pods. Either all four are set
    /// (each > 0, each limit >= its request) or none, in which case the namespace LimitRange
    /// applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<PackageResources>,

    /// Grace period for the package pods when they are deleted, as a Go duration (`30s`,
    /// `5m`). Becomes the pod's `terminationGracePeriodSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown: Option<String>,

    /// How long one stage of the package may run, as a Go duration (`30m`, `1h30m`). For the
    /// package's own stages (apply, config, upgrade, uninstall, post-interrupt) it bounds each
    /// attempt: an attempt past it is killed and counts as a failure, so the whole stage may
    /// take about `stageTimeout` × (`JOB_BACKOFF_LIMIT` + 1). For an interrupt it bounds the
    /// whole interrupt. Unset: the controller's `JOB_STAGE_TIMEOUT` (default 1h). `0` removes
    /// the bound. Must be zero or more. Fixed when a stage's Job is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_timeout: Option<String>,

    /// Explicit uninstall: whether the package supports it (`enabled`) and whether it is
    /// requested now (`apply`). An uninstall runs the package's `uninstall` stage with its full
    /// configuration, then its `interrupt` if it has one; deleting the Skyhook uninstalls every
    /// package with `enabled: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall: Option<Uninstall>,
}

/// `packages.<name>.uninstall`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = both_required)]
pub struct Uninstall {
    /// The package supports uninstall: set `apply` to run it, and deleting the Skyhook runs it.
    #[serde(default)]
    pub enabled: bool,
    /// Run the uninstall now on every node where the package is installed. Requires `enabled`.
    /// Setting it back to false cancels an uninstall that has not reached its interrupt.
    #[serde(default)]
    pub apply: bool,
}

/// Upstream's CRD lists both fields as required inside the block, with `false` defaults that
/// the API server fills in, so a stored object always carries both.
fn both_required(schema: &mut schemars::Schema) {
    schema.insert(
        "required".to_owned(),
        serde_json::json!(["apply", "enabled"]),
    );
}

impl Package {
    /// Whether the package declares that it can be uninstalled (`uninstall.enabled`).
    pub fn uninstall_enabled(&self) -> bool {
        self.uninstall.is_some_and(|u| u.enabled)
    }

    /// Whether an uninstall of the package is requested: `enabled && apply`, or the Skyhook is
    /// being deleted and the package is `enabled`.
    pub fn uninstall_requested(&self, skyhook_deleting: bool) -> bool {
        self.uninstall
            .is_some_and(|u| u.enabled && (u.apply || skyhook_deleting))
    }
}

/// CPU and memory for the containers of a package pod. Set all four or none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageResources {
    /// CPU request, e.g. `500m`. Must be > 0 and at most `cpuLimit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<Quantity>,
    /// CPU limit, e.g. `1`. Must be > 0 and at least `cpuRequest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<Quantity>,
    /// Memory request, e.g. `64Mi`. Must be > 0 and at most `memoryLimit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<Quantity>,
    /// Memory limit, e.g. `256Mi`. Must be > 0 and at least `memoryRequest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<Quantity>,
}

impl PackageResources {
    /// Whether any of the four quantities is set.
    pub fn any_set(&self) -> bool {
        self.cpu_request.is_some()
            || self.cpu_limit.is_some()
            || self.memory_request.is_some()
            || self.memory_limit.is_some()
    }
}

/// An interruption of the node: restarting services or rebooting.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// Kind of interrupt: `service` (restart the units in `services`), `restartAllServices`,
    /// `reboot`, or `noop`. Required.
    #[serde(rename = "type")]
    pub type_: InterruptType,
    /// systemd units to restart, for `type: service`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
}

/// The kind of an [`Interrupt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum InterruptType {
    /// Restart the systemd units listed in `services`.
    #[serde(rename = "service")]
    Service,
    /// Reboot the node.
    #[serde(rename = "reboot")]
    Reboot,
    /// Run the interrupt stage without interrupting anything.
    #[serde(rename = "noop")]
    Noop,
    /// Restart every systemd service.
    #[serde(rename = "restartAllServices")]
    RestartAllServices,
}

wire_enum!(InterruptType, "interrupt type", {
    Service => "service",
    Reboot => "reboot",
    Noop => "noop",
    RestartAllServices => "restartAllServices",
});

impl InterruptType {
    /// Precedence when several packages interrupt a node in the same wave: the lowest rank wins
    /// (a reboot covers every service restart, which covers a restart of named services).
    pub const fn rank(self) -> u8 {
        match self {
            InterruptType::Reboot => 0,
            InterruptType::RestartAllServices => 1,
            InterruptType::Service => 2,
            InterruptType::Noop => 3,
        }
    }
}

/// Deserialises `spec.packages`, filling each package's `name` from its key when it is absent.
/// A `name` that is present is kept as written, even when it differs from the key, so that
/// validation can report the mismatch.
pub(crate) fn deserialize_packages<'de, D>(
    deserializer: D,
) -> Result<BTreeMap<String, Package>, D::Error>
where
    D: Deserializer<'de>,
{
    let mut packages = BTreeMap::<String, Package>::deserialize(deserializer)?;
    for (key, package) in &mut packages {
        if package.name.is_empty() {
            package.name.clone_from(key);
        }
    }
    Ok(packages)
}
