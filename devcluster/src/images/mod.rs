//! The image map: which local artifact stands for which container image.
//!
//! The defaults live in `devcluster/images.yaml` (embedded at build time, documented there); a
//! user map in the same format is tried first, then the entries a caller registers through
//! [`ImageExtensions`] (with the programs its `played` images name). Resolution is pure;
//! checking that a package directory or a host binary exists happens when the kubelet "pulls"
//! the image.

mod played;
mod reference;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

pub use played::{Played, PlayedProgram};
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
    /// A registered [`PlayedProgram`] (the entry's `program`) the kubelet plays itself; a
    /// container it asks to run as a process runs in a container root on full nodes.
    Played,
    /// A process chrooted into the node's host root.
    NodeShell,
    /// A process in a container root: the machine's `/` plus the package layer.
    Container,
    /// Like `container`, with a binary of the machine (the entry's `host_binary`) mounted in the
    /// container root.
    HostBinary,
}

impl Runtime {
    /// Whether any container of this image can run on a light node (no host root, no process
    /// that could touch the machine).
    pub fn runs_on_light_nodes(self) -> bool {
        matches!(self, Self::Pause | Self::Sleep | Self::Played)
    }
}

/// A binary of the machine mounted (read-only) into container roots: `name` is found in
/// `<NAME>_BIN` (upper case, `-` as `_`) or next to the `devcluster` binary, and appears at
/// `path`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostBinary {
    pub name: String,
    pub path: String,
}

/// A directory of the workspace an image carries: copied to `at` in the container root when a
/// container of the image starts (what the image's own layer would hold).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageContents {
    /// The directory, relative to the workspace root in a map, absolute once resolved.
    pub from: PathBuf,
    /// Where it appears in the container root: an absolute path without `..`.
    pub at: PathBuf,
}

impl ImageContents {
    /// `at` relative to the container root; `None` unless `at` is absolute, has no `..` and is
    /// not the root itself (maps are checked for that when they load).
    pub fn inside_root(&self) -> Option<PathBuf> {
        use std::path::Component;
        let mut parts = self.at.components();
        if parts.next() != Some(Component::RootDir) {
            return None;
        }
        let inside: PathBuf = parts
            .map(|part| match part {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect::<Option<_>>()?;
        (!inside.as_os_str().is_empty()).then_some(inside)
    }
}

impl HostBinary {
    /// The environment variable that overrides where the binary is.
    pub fn env_var(&self) -> String {
        host_binary_env_var(&self.name)
    }
}

/// The environment variable that overrides where the host binary `name` is: `<NAME>_BIN`.
pub fn host_binary_env_var(name: &str) -> String {
    format!("{}_BIN", name.to_uppercase().replace('-', "_"))
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
    contents: Option<ImageContents>,
    #[serde(default)]
    host_binary: Option<HostBinary>,
    #[serde(default)]
    program: Option<String>,
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
    program: Option<Arc<dyn PlayedProgram>>,
}

/// Image-map entries and played programs a caller adds to devcluster's own: how a project's
/// images run on the simulated nodes.
#[derive(Debug, Clone, Default)]
pub struct ImageExtensions {
    /// (origin for messages, map text), tried in order after a user map.
    entries: Vec<(String, String)>,
    programs: BTreeMap<String, Arc<dyn PlayedProgram>>,
}

impl ImageExtensions {
    /// Adds entries (the format of `devcluster/images.yaml`); `origin` names them in errors.
    pub fn with_entries(mut self, origin: &str, yaml: &str) -> Self {
        self.entries.push((origin.to_owned(), yaml.to_owned()));
        self
    }

    /// Registers the program that entries with `runtime: played` and `program: <name>` play.
    pub fn with_program(mut self, name: &str, program: Arc<dyn PlayedProgram>) -> Self {
        self.programs.insert(name.to_owned(), program);
        self
    }
}

/// What an image resolves to.
#[derive(Debug, Clone)]
pub struct ResolvedImage {
    pub runtime: Runtime,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// The directory copied into the container root, with an absolute `from`.
    pub contents: Option<ImageContents>,
    /// For `host-binary`: the binary mounted into the container root.
    pub host_binary: Option<HostBinary>,
    /// For `played`: the program the kubelet plays.
    pub program: Option<Arc<dyn PlayedProgram>>,
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
    #[error("image map {origin}: entry {name:?} with runtime {runtime:?} needs {field}")]
    Missing {
        origin: String,
        name: String,
        runtime: Runtime,
        field: &'static str,
    },
    #[error(
        "image map {origin}: entry {name:?} puts its contents at {at:?}; give `contents.at` as an absolute path inside the container root, without `..`"
    )]
    ContentsTarget {
        origin: String,
        name: String,
        at: PathBuf,
    },
    #[error("image map {origin}: entry {name:?} plays {program:?}, which is not registered")]
    UnknownProgram {
        origin: String,
        name: String,
        program: String,
    },
}

/// The image map: user entries first, then the registered ones, then the built-in ones.
#[derive(Debug, Clone)]
pub struct ImageMap {
    rules: Vec<Rule>,
    programs: BTreeMap<String, Arc<dyn PlayedProgram>>,
    workspace_root: PathBuf,
}

impl ImageMap {
    /// The built-in map and `extensions`, with package directories relative to `workspace_root`.
    pub fn builtin(
        workspace_root: &Path,
        extensions: &ImageExtensions,
    ) -> Result<Self, ImageMapError> {
        let mut map = Self {
            rules: compile(
                DEFAULT_IMAGE_MAP,
                "devcluster/images.yaml (built in)",
                &extensions.programs,
            )?,
            programs: extensions.programs.clone(),
            workspace_root: workspace_root.to_owned(),
        };
        for (origin, yaml) in extensions.entries.iter().rev() {
            map = map.with_entries_from(yaml, origin)?;
        }
        Ok(map)
    }

    /// The built-in map and `extensions` with the entries of `file` (same format) tried first.
    pub fn load(
        workspace_root: &Path,
        file: Option<&Path>,
        extensions: &ImageExtensions,
    ) -> Result<Self, ImageMapError> {
        let map = Self::builtin(workspace_root, extensions)?;
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ImageMapError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                map.with_entries_from(&text, &path.display().to_string())
            }
            None => Ok(map),
        }
    }

    /// Adds entries (same format as the file) ahead of the existing ones.
    pub fn with_entries(self, yaml: &str) -> Result<Self, ImageMapError> {
        self.with_entries_from(yaml, "inline entries")
    }

    fn with_entries_from(mut self, yaml: &str, origin: &str) -> Result<Self, ImageMapError> {
        let mut rules = compile(yaml, origin, &self.programs)?;
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
            contents: (entry.contents.as_ref()).map(|contents| ImageContents {
                from: self.workspace_root.join(&contents.from),
                at: contents.at.clone(),
            }),
            host_binary: entry.host_binary.clone(),
            program: rule.program.clone(),
        })
    }
}

fn compile(
    yaml: &str,
    origin: &str,
    programs: &BTreeMap<String, Arc<dyn PlayedProgram>>,
) -> Result<Vec<Rule>, ImageMapError> {
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
    let missing = |entry: &Entry, field| ImageMapError::Missing {
        origin: origin.to_owned(),
        name: entry.name.clone(),
        runtime: entry.runtime,
        field,
    };
    file.images
        .into_iter()
        .map(|entry| {
            if entry.runtime == Runtime::HostBinary && entry.host_binary.is_none() {
                return Err(missing(&entry, "host_binary"));
            }
            if let Some(contents) = &entry.contents
                && contents.inside_root().is_none()
            {
                return Err(ImageMapError::ContentsTarget {
                    origin: origin.to_owned(),
                    name: entry.name.clone(),
                    at: contents.at.clone(),
                });
            }
            let program = match (entry.runtime, &entry.program) {
                (Runtime::Played, None) => return Err(missing(&entry, "program")),
                (Runtime::Played, Some(name)) => {
                    Some(programs.get(name).cloned().ok_or_else(|| {
                        ImageMapError::UnknownProgram {
                            origin: origin.to_owned(),
                            name: entry.name.clone(),
                            program: name.clone(),
                        }
                    })?)
                }
                _ => None,
            };
            Ok(Rule {
                pattern: pattern(&entry.name)?,
                unavailable_tags: entry
                    .unavailable_tags
                    .iter()
                    .map(|t| pattern(t))
                    .collect::<Result<_, _>>()?,
                program,
                entry,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> ImageMap {
        ImageMap::builtin(Path::new("/ws"), &ImageExtensions::default()).unwrap()
    }

    #[test]
    fn resolves_builtin_images() {
        let cases: &[(&str, Runtime)] = &[
            ("devcluster.local/shell", Runtime::NodeShell),
            ("devcluster.local/shell:latest", Runtime::NodeShell),
            ("devcluster.local/sleep", Runtime::Sleep),
            ("registry.k8s.io/pause:3.10", Runtime::Pause),
            ("k8s.gcr.io/pause:3.2", Runtime::Pause),
            ("pause", Runtime::Pause),
            ("registry.k8s.io/kubectl:v1.33.0", Runtime::Container),
        ];
        for (image, runtime) in cases {
            let resolved = map().resolve(image).unwrap();
            assert_eq!(resolved.runtime, *runtime, "{image}");
            assert_eq!(resolved.contents, None, "{image}");
        }
    }

    #[test]
    fn rejects_unmapped_and_unavailable_images() {
        let map = map()
            .with_entries(
                "images:\n  - name: example.com/pkg\n    runtime: container\n    contents: {from: pkgs/x, at: /opt/pkg}\n    unavailable_tags: [\"*bogus*\"]\n",
            )
            .unwrap();
        assert!(matches!(
            map.resolve("docker.io/library/nginx:1"),
            Err(PullError::NotMapped { .. })
        ));
        assert!(matches!(
            map.resolve("example.com/pkg:3.2.3-bogus"),
            Err(PullError::TagUnavailable { .. })
        ));
        let contents = map.resolve("example.com/pkg:1").unwrap().contents.unwrap();
        assert_eq!(contents.from, Path::new("/ws/pkgs/x"));
        assert_eq!(contents.inside_root(), Some(PathBuf::from("opt/pkg")));
        assert!(matches!(
            map.resolve("bad image"),
            Err(PullError::InvalidReference(_))
        ));
    }

    #[test]
    fn contents_go_to_an_absolute_path_inside_the_root() {
        for at in ["opt/pkg", "/", "/opt/../etc", ""] {
            let yaml = format!(
                "images:\n  - name: example.com/pkg\n    runtime: container\n    contents: {{from: pkgs/x, at: {at:?}}}\n"
            );
            let error = map().with_entries(&yaml).unwrap_err();
            assert!(
                matches!(error, ImageMapError::ContentsTarget { .. }),
                "{at:?}: {error}"
            );
        }
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

    #[derive(Debug)]
    struct Nap;

    impl PlayedProgram for Nap {
        fn runs_process(&self, _container: &k8s_openapi::api::core::v1::Container) -> bool {
            false
        }

        fn play(
            &self,
            _argv: &[String],
            _container: &k8s_openapi::api::core::v1::Container,
            _env: &BTreeMap<String, String>,
            _light: bool,
        ) -> Played {
            Played {
                banner: "nap".to_owned(),
                sleep: std::time::Duration::from_secs(1),
                exit_code: 3,
            }
        }
    }

    #[test]
    fn registered_entries_come_after_the_user_map_and_before_the_builtin_ones() {
        let extensions = ImageExtensions::default()
            .with_entries(
                "test",
                "images:\n  - name: registry.k8s.io/pause\n    runtime: played\n    program: nap\n  - name: example.com/tool\n    runtime: host-binary\n    host_binary: {name: my-tool, path: /usr/bin/my-tool}\n",
            )
            .with_program("nap", Arc::new(Nap));
        let map = ImageMap::builtin(Path::new("/ws"), &extensions).unwrap();
        let pause = map.resolve("registry.k8s.io/pause").unwrap();
        assert_eq!(pause.runtime, Runtime::Played);
        assert!(pause.program.is_some());
        let tool = map.resolve("example.com/tool").unwrap();
        assert_eq!(
            tool.host_binary
                .as_ref()
                .map(HostBinary::env_var)
                .as_deref(),
            Some("MY_TOOL_BIN")
        );
        let map = map
            .with_entries("images:\n  - name: registry.k8s.io/pause\n    runtime: sleep\n")
            .unwrap();
        assert_eq!(
            map.resolve("registry.k8s.io/pause").unwrap().runtime,
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
        assert!(matches!(
            map().with_entries("images:\n  - name: x\n    runtime: played\n    program: nap\n"),
            Err(ImageMapError::UnknownProgram { .. })
        ));
        assert!(matches!(
            map().with_entries("images:\n  - name: x\n    runtime: host-binary\n"),
            Err(ImageMapError::Missing { .. })
        ));
    }

    #[test]
    fn only_harmless_runtimes_run_on_light_nodes() {
        for (runtime, light) in [
            (Runtime::Pause, true),
            (Runtime::Sleep, true),
            (Runtime::Played, true),
            (Runtime::NodeShell, false),
            (Runtime::Container, false),
            (Runtime::HostBinary, false),
        ] {
            assert_eq!(runtime.runs_on_light_nodes(), light, "{runtime:?}");
        }
    }
}
