//! The webhook's endpoints: which HTTP path admits which kind of which API group, as upstream
//! serves them, so that upstream's webhook configurations work unchanged. Below both the
//! admission decision and the server that routes to it.

use skyhook_api::generation::Group;

/// The webhook endpoints, with upstream's paths: four for `skyhook.nvidia.com` and, as upstream
/// v0.18 added them, four for `nodewright.nvidia.com`.
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
    /// Validates NodeWright creates and updates, by upstream v0.20's stricter rules.
    ValidateNodeWright,
    /// Mutates NodeWrights: nothing to change (upstream's defaulter does nothing either).
    MutateNodeWright,
    /// [`Endpoint::ValidatePolicy`] for the nodewright group's DeploymentPolicies.
    ValidateNodeWrightPolicy,
    /// [`Endpoint::MutatePolicy`] for the nodewright group's DeploymentPolicies.
    MutateNodeWrightPolicy,
}

/// What an endpoint does, whatever its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Validates the group's workload kind (Skyhook, NodeWright).
    ValidateWorkload,
    /// Mutates the group's workload kind (nothing to change).
    MutateWorkload,
    /// Validates DeploymentPolicies and protects referenced ones from delete.
    ValidatePolicy,
    /// Fills in DeploymentPolicy defaults.
    MutatePolicy,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: [Endpoint; 8] = [
        Endpoint::ValidateSkyhook,
        Endpoint::MutateSkyhook,
        Endpoint::ValidatePolicy,
        Endpoint::MutatePolicy,
        Endpoint::ValidateNodeWright,
        Endpoint::MutateNodeWright,
        Endpoint::ValidateNodeWrightPolicy,
        Endpoint::MutateNodeWrightPolicy,
    ];

    /// The HTTP path the API server calls.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::ValidateSkyhook => "/validate-skyhook-nvidia-com-v1alpha1-skyhook",
            Endpoint::MutateSkyhook => "/mutate-skyhook-nvidia-com-v1alpha1-skyhook",
            Endpoint::ValidatePolicy => "/validate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
            Endpoint::MutatePolicy => "/mutate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
            Endpoint::ValidateNodeWright => "/validate-nodewright-nvidia-com-v1alpha1-nodewright",
            Endpoint::MutateNodeWright => "/mutate-nodewright-nvidia-com-v1alpha1-nodewright",
            Endpoint::ValidateNodeWrightPolicy => {
                "/validate-nodewright-nvidia-com-v1alpha1-deploymentpolicy"
            }
            Endpoint::MutateNodeWrightPolicy => {
                "/mutate-nodewright-nvidia-com-v1alpha1-deploymentpolicy"
            }
        }
    }

    /// The endpoint served at `path`.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.path() == path)
    }

    /// The API group whose objects it admits.
    pub fn group(self) -> Group {
        match self {
            Endpoint::ValidateSkyhook
            | Endpoint::MutateSkyhook
            | Endpoint::ValidatePolicy
            | Endpoint::MutatePolicy => Group::Skyhook,
            Endpoint::ValidateNodeWright
            | Endpoint::MutateNodeWright
            | Endpoint::ValidateNodeWrightPolicy
            | Endpoint::MutateNodeWrightPolicy => Group::NodeWright,
        }
    }

    /// What it does.
    pub fn role(self) -> Role {
        match self {
            Endpoint::ValidateSkyhook | Endpoint::ValidateNodeWright => Role::ValidateWorkload,
            Endpoint::MutateSkyhook | Endpoint::MutateNodeWright => Role::MutateWorkload,
            Endpoint::ValidatePolicy | Endpoint::ValidateNodeWrightPolicy => Role::ValidatePolicy,
            Endpoint::MutatePolicy | Endpoint::MutateNodeWrightPolicy => Role::MutatePolicy,
        }
    }

    /// The kind this endpoint admits.
    pub fn kind(self) -> &'static str {
        match self.role() {
            Role::ValidateWorkload | Role::MutateWorkload => self.group().keys().kind,
            Role::ValidatePolicy | Role::MutatePolicy => "DeploymentPolicy",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_routes_to_its_endpoint_group_and_kind() {
        let cases = [
            (
                "/validate-skyhook-nvidia-com-v1alpha1-skyhook",
                Group::Skyhook,
                "Skyhook",
            ),
            (
                "/mutate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
                Group::Skyhook,
                "DeploymentPolicy",
            ),
            (
                "/validate-nodewright-nvidia-com-v1alpha1-nodewright",
                Group::NodeWright,
                "NodeWright",
            ),
            (
                "/mutate-nodewright-nvidia-com-v1alpha1-nodewright",
                Group::NodeWright,
                "NodeWright",
            ),
            (
                "/validate-nodewright-nvidia-com-v1alpha1-deploymentpolicy",
                Group::NodeWright,
                "DeploymentPolicy",
            ),
        ];
        for (path, group, kind) in cases {
            let endpoint = Endpoint::from_path(path).unwrap_or_else(|| panic!("{path}"));
            assert_eq!((endpoint.group(), endpoint.kind()), (group, kind), "{path}");
            assert_eq!(endpoint.path(), path);
        }
        assert_eq!(Endpoint::from_path("/validate-nodewright"), None);
    }
}
