//! The `skyhook.nvidia.com/v1alpha1` API: the `Skyhook` and `DeploymentPolicy` custom resources.
//!
//! Both kinds are cluster-scoped. Short names: `sky` for Skyhook, `dp` for DeploymentPolicy.
//! Field names, defaults and schema validation match upstream NVIDIA Skyhook, so existing
//! manifests apply unchanged; the rules the schema cannot express live in the validation module.

mod lifecycle;
mod package;
mod policy;
mod skyhook;
mod status;
mod topology;

pub(crate) use lifecycle::wire_enum;
pub use lifecycle::{PackageStatus, ParseEnumError, Stage, State, Status};
pub use package::{DependsOn, Interrupt, InterruptType, Package, PackageResources, Uninstall};
pub use policy::{
    Compartment, DEFAULT_BATCH_THRESHOLD, DEFAULT_DELTA, DEFAULT_GROWTH_FACTOR,
    DEFAULT_INITIAL_BATCH, DEFAULT_SAFETY_LIMIT, DeploymentPolicy, DeploymentPolicySpec,
    DeploymentStrategy, ExponentialStrategy, FixedStrategy, HealthGate, LinearStrategy,
    MaintenanceWindow, PolicyBudget, PolicyDefault, StrategyKind,
};
pub use skyhook::{
    DEFAULT_PRIORITY, DeploymentPolicyOptions, DrainConfig, DrainSpec, DrainTimeoutAction,
    InterruptionBudget, OnFailure, ReadinessGate, Sequencing, Skyhook, SkyhookSpec,
};
pub use status::{BatchState, CompartmentStatus, SkyhookStatus};
pub use topology::TopologyBudget;
