//! The names and label values the controller builds from a Skyhook's name and its package names
//! and versions (spec §2.8), computed exactly as upstream computes them. They live here rather
//! than in the controller so that admission checks the very names the controller will write: a
//! package version that cannot appear in one of them is rejected up front instead of leaving a
//! node `in_progress` for good.

use crate::v1alpha1::Stage;

/// Value of the pod label `skyhook.nvidia.com/package`: `<package>-<version>`.
pub fn package_label(package: &str, version: &str) -> String {
    format!("{package}-{version}")
}

/// Name of the ConfigMap holding a package's `configMap`: `<skyhook>-<package>-<version>`,
/// lowercased.
pub fn package_configmap_name(skyhook: &str, package: &str, version: &str) -> String {
    format!("{skyhook}-{package}-{version}").to_lowercase()
}

/// The text upstream's `generateSafeName` shortens and hashes: the parts joined with `-` and
/// every `.` turned into `-`. The name keeps a lowercased prefix of it, so the name is valid
/// exactly when this text, lowercased, holds only `[a-z0-9-]` and starts with one of `[a-z0-9]`.
pub fn safe_name_text(parts: &[&str]) -> String {
    parts.join("-").replace('.', "-")
}

/// The parts of the name of the pod running `stage` of a package on a node, in
/// `safeName` order.
pub fn package_pod_name_parts<'a>(
    skyhook: &'a str,
    package: &'a str,
    version: &'a str,
    stage: Stage,
    node: &'a str,
) -> [&'a str; 5] {
    [skyhook, package, version, stage.as_str(), node]
}

/// Name of a package's init containers: the package name, cut to 43 characters as upstream
/// does, then `-init`, `-<stage>` or `-<stage>check` (no dash before `check`).
fn container_prefix(package: &str) -> &str {
    match package.char_indices().nth(43) {
        Some((at, _)) => &package[..at],
        None => package,
    }
}

/// Name of the init container copying the package onto the host.
pub fn copy_container_name(package: &str) -> String {
    format!("{}-init", container_prefix(package))
}

/// Name of the init container running `stage`.
pub fn stage_container_name(package: &str, stage: Stage) -> String {
    format!("{}-{}", container_prefix(package), container_word(stage))
}

/// The stage as container names spell it: an uninstall's interrupt runs the same interrupt
/// container as any other (and `-uninstall-interruptcheck` would not fit a DNS label).
const fn container_word(stage: Stage) -> &'static str {
    match stage {
        Stage::UninstallInterrupt => Stage::Interrupt.as_str(),
        other => other.as_str(),
    }
}

/// Name of the init container running the check of `stage`.
pub fn check_container_name(package: &str, stage: Stage) -> String {
    format!(
        "{}-{}check",
        container_prefix(package),
        container_word(stage)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_names() {
        assert_eq!(copy_container_name("spencer"), "spencer-init");
        assert_eq!(
            stage_container_name("spencer", Stage::Apply),
            "spencer-apply"
        );
        assert_eq!(
            check_container_name("spencer", Stage::Apply),
            "spencer-applycheck"
        );
        assert_eq!(
            check_container_name("dax", Stage::PostInterrupt),
            "dax-post-interruptcheck"
        );
        let long = "a".repeat(50);
        assert_eq!(
            copy_container_name(&long),
            format!("{}-init", "a".repeat(43))
        );
    }

    #[test]
    fn configmap_label_and_safe_name_texts() {
        assert_eq!(
            package_configmap_name("simple-skyhook", "dexter", "1.2.3"),
            "simple-skyhook-dexter-1.2.3"
        );
        assert_eq!(
            package_configmap_name("Sky", "baxter", "2.3.1-TEST"),
            "sky-baxter-2.3.1-test"
        );
        assert_eq!(package_label("dexter", "1.2.3"), "dexter-1.2.3");
        assert_eq!(
            safe_name_text(&package_pod_name_parts(
                "sky",
                "dax",
                "1.2.3",
                Stage::PostInterrupt,
                "ip-10.ec2"
            )),
            "sky-dax-1-2-3-post-interrupt-ip-10-ec2"
        );
    }
}
