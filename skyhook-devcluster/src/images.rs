//! Skyhook's images on a devcluster's nodes.

use std::sync::Arc;

use devcluster::images::ImageExtensions;

use crate::agentless::Agentless;

/// Skyhook's image-map entries, documented in the file itself.
pub const SKYHOOK_IMAGE_MAP: &str = include_str!("../images.yaml");

/// Skyhook's entries and the agentless program, for [`devcluster::DevClusterOptions::images`].
pub fn images() -> ImageExtensions {
    ImageExtensions::default()
        .with_entries(
            "skyhook-devcluster/images.yaml (built in)",
            SKYHOOK_IMAGE_MAP,
        )
        .with_program("agentless", Arc::new(Agentless))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use devcluster::images::{ImageMap, PullError, Runtime};

    use super::*;

    fn map() -> ImageMap {
        ImageMap::builtin(Path::new("/ws"), &images()).unwrap()
    }

    #[test]
    fn resolves_skyhook_images() {
        let cases: &[(&str, Runtime, Option<&str>)] = &[
            (
                "ghcr.io/nvidia/skyhook/agent:6.3.0",
                Runtime::HostBinary,
                None,
            ),
            ("nvcr.io/nvidia/skyhook/agent:v1", Runtime::HostBinary, None),
            (
                "ghcr.io/nvidia/nodewright/agent:v7.0.0@sha256:0123",
                Runtime::HostBinary,
                None,
            ),
            ("devcluster.local/skyhook-agent", Runtime::HostBinary, None),
            (
                "ghcr.io/nvidia/skyhook/agentless:6.2.0",
                Runtime::Played,
                Some("/ws/examples/packages/agentless"),
            ),
            (
                "ghcr.io/nvidia/skyhook-packages/shellscript:1.1.1",
                Runtime::Container,
                Some("/ws/examples/packages/shellscript"),
            ),
            (
                "ghcr.io/nvidia/skyhook-packages/tuning@sha256:0123",
                Runtime::Container,
                Some("/ws/examples/packages/tuning"),
            ),
            (
                "ghcr.io/nvidia/skyhook-packages/tuned:1.2.0",
                Runtime::Container,
                Some("/ws/examples/packages/tuned"),
            ),
            // The Helm chart's images.
            (
                "ghcr.io/skyhook-rs/skyhook-controller:0.1.0",
                Runtime::Container,
                None,
            ),
            (
                "ghcr.io/skyhook-rs/skyhook-webhook:0.1.0",
                Runtime::Container,
                None,
            ),
            (
                "ghcr.io/skyhook-rs/skyhook-agent:0.1.0",
                Runtime::HostBinary,
                None,
            ),
            // devcluster's own entries are still there.
            ("registry.k8s.io/pause:3.10", Runtime::Pause, None),
        ];
        for (image, runtime, package) in cases {
            let resolved = map().resolve(image).unwrap();
            assert_eq!(resolved.runtime, *runtime, "{image}");
            let contents = resolved.contents.as_ref();
            assert_eq!(
                contents.map(|c| c.from.as_path()),
                package.map(Path::new),
                "{image}"
            );
            // Upstream's package images carry their files at /skyhook-package.
            if let Some(contents) = contents {
                assert_eq!(contents.at, Path::new("/skyhook-package"), "{image}");
            }
        }
    }

    #[test]
    fn the_agent_is_mounted_where_upstream_s_image_has_it() {
        let agent = map().resolve("ghcr.io/nvidia/skyhook/agent:6.3.0").unwrap();
        let binary = agent.host_binary.unwrap();
        assert_eq!(binary.name, "skyhook-agent");
        assert_eq!(binary.path, "/usr/local/bin/skyhook-agent");
        assert_eq!(binary.env_var(), "SKYHOOK_AGENT_BIN");
    }

    #[test]
    fn bogus_tags_do_not_exist() {
        assert!(matches!(
            map().resolve("ghcr.io/nvidia/skyhook/agentless:3.2.3-bogus"),
            Err(PullError::TagUnavailable { .. })
        ));
    }
}
