//! The image map: which local artifact stands for which container image.
//!
//! The defaults live in `devcluster/images.yaml` (embedded at build time, documented there); a user
//! map in the same format is tried first. Resolution is pure; checking that a package directory
//! or the agent binary exists happens when the kubelet "pulls" the image.

mod reference;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use reference::{ImageRef, InvalidImageRef};

/// The built-in map, documented in the file itself.
pub const DEFAULT_IMAGE_MAP: &str = include_str!("../../images.yaml");

/// How containers of an image run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// No process: waits until stopped.
    Pause,
    /// No process: a workload that runs until deleted.
    Sleep,
    /// Sleeps `SLEEP_LEN` seconds and exits `EXIT_CODE`; an explicit command runs in a container
    /// root on full nodes.
    Agentless,
    /// A process chrooted into the node's host root.
    NodeShell,
    /// A process in a container root: the machine's `/` plus the package layer.
    Container,
    /// The built `skyhook-agent` binary in a container root.
    SkyhookAgent,
}

impl Runtime {
    /// Whether any container of this image can run on a light node (no host root, no process
    /// that could touch the machine).
    pub fn runs_on_light_nodes(self) -> bool {
        matches!(self, Self::Pause | Self::Sleep | Self::Agentless)
    }
}

/// One entry of the map file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    runtime: Runtime,
    #[serde(default)]
    entrypoint: Vec<String>,
    #[serde(default)]
    cmd: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    package: Option<PathBuf>,
    #[serde(default)]
    unavailable_tags: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    images: Vec<Entry>,
}

/// A compiled entry.
#[derive(Debug, Clone)]
struct Rule {
    pattern: glob::Pattern,
    entry: Entry,
    unavailable_tags: Vec<glob::Pattern>,
}

/// What an image resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedImage {
    pub runtime: Runtime,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Absolute directory copied to `/skyhook-package` in the container root.
    pub package: Option<PathBuf>,
}

/// Why an image cannot be pulled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    InvalidReference(#[from] InvalidImageRef),
    #[error(
        "image {image:?} is not in devcluster's image map (see devcluster/images.yaml); add it with an image map file"
    )]
    NotMapped { image: String },
    #[error("image {image:?}: tag {tag:?} does not exist (simulated missing tag)")]
    TagUnavailable { image: String, tag: String },
}

/// The image map could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ImageMapError {
    #[error("failed to read image map {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to parse image map {origin}")]
    Parse {
        origin: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("invalid glob {pattern:?} in image map {origin}")]
    Pattern {
        origin: String,
        pattern: String,
        #[source]
        source: glob::PatternError,
    },
}

/// The image map: user entries first, then the built-in ones.
#[derive(Debug, Clone)]
pub struct ImageMap {
    rules: Vec<Rule>,
    workspace_root: PathBuf,
}

impl ImageMap {
    /// The built-in map, with package directories relative to `workspace_root`.
    pub fn builtin(workspace_root: &Path) -> Result<Self, ImageMapError> {
        Ok(Self {
            rules: compile(DEFAULT_IMAGE_MAP, "devcluster/images.yaml (built in)")?,
            workspace_root: workspace_root.to_owned(),
        })
    }

    /// The built-in map with the entries of `file` (same format) tried first.
    pub fn load(workspace_root: &Path, file: Option<&Path>) -> Result<Self, ImageMapError> {
        let mut map = Self::builtin(workspace_root)?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ImageMapError::Read {
                path: path.to_owned(),
                source,
            })?;
            let mut rules = compile(&text, &path.display().to_string())?;
            rules.append(&mut map.rules);
            map.rules = rules;
        }
        Ok(map)
    }

    /// Adds entries (same format as the file) ahead of the existing ones.
    pub fn with_entries(mut self, yaml: &str) -> Result<Self, ImageMapError> {
        let mut rules = compile(yaml, "inline entries")?;
        rules.append(&mut self.rules);
        self.rules = rules;
        Ok(self)
    }

    pub fn resolve(&self, image: &str) -> Result<ResolvedImage, PullError> {
        let parsed = ImageRef::parse(image)?;
        let rule = self
            .rules
            .iter()
            .find(|rule| rule.pattern.matches(&parsed.repository))
            .ok_or_else(|| PullError::NotMapped {
                image: image.to_owned(),
            })?;
        if let Some(tag) = &parsed.tag
            && rule.unavailable_tags.iter().any(|p| p.matches(tag))
        {
            return Err(PullError::TagUnavailable {
                image: image.to_owned(),
                tag: tag.clone(),
            });
        }
        let entry = &rule.entry;
        Ok(ResolvedImage {
            runtime: entry.runtime,
            entrypoint: entry.entrypoint.clone(),
            cmd: entry.cmd.clone(),
            env: entry.env.clone(),
            package: entry.package.as_ref().map(|p| self.workspace_root.join(p)),
        })
    }
}

fn compile(yaml: &str, origin: &str) -> Result<Vec<Rule>, ImageMapError> {
    let file: MapFile = serde_yaml::from_str(yaml).map_err(|source| ImageMapError::Parse {
        origin: origin.to_owned(),
        source,
    })?;
    let pattern = |text: &str| {
        glob::Pattern::new(text).map_err(|source| ImageMapError::Pattern {
            origin: origin.to_owned(),
            pattern: text.to_owned(),
            source,
        })
    };
    file.images
        .into_iter()
        .map(|entry| {
            Ok(Rule {
                pattern: pattern(&entry.name)?,
                unavailable_tags: entry
                    .unavailable_tags
                    .iter()
                    .map(|t| pattern(t))
                    .collect::<Result<_, _>>()?,
                entry,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> ImageMap {
        ImageMap::builtin(Path::new("/ws")).unwrap()
    }

    #[test]
    fn resolves_builtin_images() {
        let cases: &[(&str, Runtime, Option<&str>)] = &[
            ("devcluster.local/shell", Runtime::NodeShell, None),
            ("devcluster.local/shell:latest", Runtime::NodeShell, None),
            ("devcluster.local/sleep", Runtime::Sleep, None),
            ("registry.k8s.io/pause:3.10", Runtime::Pause, None),
            ("k8s.gcr.io/pause:3.2", Runtime::Pause, None),
            ("pause", Runtime::Pause, None),
            (
                "ghcr.io/nvidia/skyhook/agent:6.3.0",
                Runtime::SkyhookAgent,
                None,
            ),
            (
                "nvcr.io/nvidia/skyhook/agent:v1",
                Runtime::SkyhookAgent,
                None,
            ),
            (
                "devcluster.local/skyhook-agent",
                Runtime::SkyhookAgent,
                None,
            ),
            (
                "ghcr.io/nvidia/skyhook/agentless:6.2.0",
                Runtime::Agentless,
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
                Runtime::SkyhookAgent,
                None,
            ),
            ("registry.k8s.io/kubectl:v1.33.0", Runtime::Container, None),
        ];
        for (image, runtime, package) in cases {
            let resolved = map().resolve(image).unwrap();
            assert_eq!(resolved.runtime, *runtime, "{image}");
            assert_eq!(
                resolved.package.as_deref(),
                package.map(Path::new),
                "{image}"
            );
        }
    }

    #[test]
    fn rejects_unmapped_and_unavailable_images() {
        assert!(matches!(
            map().resolve("docker.io/library/nginx:1"),
            Err(PullError::NotMapped { .. })
        ));
        assert!(matches!(
            map().resolve("ghcr.io/nvidia/skyhook/agentless:3.2.3-bogus"),
            Err(PullError::TagUnavailable { .. })
        ));
        assert!(matches!(
            map().resolve("bad image"),
            Err(PullError::InvalidReference(_))
        ));
    }

    #[test]
    fn user_entries_win() {
        let map = map()
            .with_entries("images:\n  - name: devcluster.local/shell\n    runtime: sleep\n")
            .unwrap();
        assert_eq!(
            map.resolve("devcluster.local/shell").unwrap().runtime,
            Runtime::Sleep
        );
    }

    #[test]
    fn reports_bad_map_files() {
        assert!(matches!(
            map().with_entries("images:\n  - name: x\n    runtime: teleport\n"),
            Err(ImageMapError::Parse { .. })
        ));
        assert!(matches!(
            map().with_entries("images:\n  - name: \"[\"\n    runtime: pause\n"),
            Err(ImageMapError::Pattern { .. })
        ));
    }

    #[test]
    fn only_harmless_runtimes_run_on_light_nodes() {
        for (runtime, light) in [
            (Runtime::Pause, true),
            (Runtime::Sleep, true),
            (Runtime::Agentless, true),
            (Runtime::NodeShell, false),
            (Runtime::Container, false),
            (Runtime::SkyhookAgent, false),
        ] {
            assert_eq!(runtime.runs_on_light_nodes(), light, "{runtime:?}");
        }
    }
}
