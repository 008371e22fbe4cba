//! The webhook's endpoints: which HTTP path admits which kind, as upstream serves them, so
//! that upstream's webhook configurations work unchanged. Below both the admission decision and
//! the server that routes to it.

/// The four webhook endpoints, with upstream's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// Validates Skyhook creates and updates.
    ValidateSkyhook,
    /// Mutates Skyhooks: nothing to change, kept so upstream's configuration works unchanged.
    MutateSkyhook,
    /// Validates DeploymentPolicy creates and updates, and protects referenced ones from delete.
    ValidatePolicy,
    /// Fills in the DeploymentPolicy strategy defaults.
    MutatePolicy,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: [Endpoint; 4] = [
        Endpoint::ValidateSkyhook,
        Endpoint::MutateSkyhook,
        Endpoint::ValidatePolicy,
        Endpoint::MutatePolicy,
    ];

    /// The HTTP path the API server calls.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::ValidateSkyhook => "/validate-skyhook-nvidia-com-v1alpha1-skyhook",
            Endpoint::MutateSkyhook => "/mutate-skyhook-nvidia-com-v1alpha1-skyhook",
            Endpoint::ValidatePolicy => "/validate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
            Endpoint::MutatePolicy => "/mutate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
        }
    }

    /// The endpoint served at `path`.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.path() == path)
    }

    /// The kind this endpoint admits.
    pub fn kind(self) -> &'static str {
        match self {
            Endpoint::ValidateSkyhook | Endpoint::MutateSkyhook => "Skyhook",
            Endpoint::ValidatePolicy | Endpoint::MutatePolicy => "DeploymentPolicy",
        }
    }
}
