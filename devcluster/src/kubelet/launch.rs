//! Preparing one container start: "pull" the image (image map), build the environment and the
//! command, write the volumes, and describe the process (or the virtual program) to run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, ServiceAccount};
use kube::api::{Api, PostParams};

use super::conventions::DEFAULT_PATH;
use super::env::{self, EnvSources};
use super::pod_state::StartErrorKind;
use super::volumes::{self, HostPathKind, VolumeContent, VolumeSources};
use crate::images::{Played, ResolvedImage, Runtime};
use crate::isolation::{BindMount, ContainerSpec, CopyInto, MountSource, RootSpec};
use crate::node::context::{ProcessRuntime, SimContext, SimNode};

/// Why a container cannot start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StartFailure {
    pub kind: StartErrorKind,
    pub message: String,
}

impl StartFailure {
    pub(crate) fn new(kind: StartErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// A program the kubelet plays itself instead of running a process (pause, sleep, a registered
/// played program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VirtualProgram {
    /// Waits until stopped; exits 0 on SIGTERM, as `pause` does.
    Pause,
    /// Waits until stopped; dies of the signal, as `sleep` does.
    Sleep,
    /// Prints a banner, sleeps, exits with the code (dies of a signal before that).
    Played(Played),
}

/// What to run.
#[derive(Debug, Clone)]
pub(crate) enum Launch {
    Virtual(VirtualProgram),
    Process(Box<ContainerSpec>),
}

/// Identifies the container start (for file names).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartIds<'a> {
    pub pod_dir: &'a Path,
    pub container_key: &'a str,
    pub host_ip: &'a str,
    pub pod_ip: &'a str,
    /// The pod's own network namespace, if it has one.
    pub network_namespace: Option<&'a Path>,
}

/// The ConfigMaps and Secrets a container start reads (those that exist), and whether it
/// mounts a service account token.
struct ReferencedObjects {
    config_maps: BTreeMap<String, ConfigMap>,
    secrets: BTreeMap<String, Secret>,
    wants_token: bool,
}

/// Prepares one start of `container`: what to run, or why it cannot start.
pub(crate) async fn prepare(
    ctx: &SimContext,
    node: &SimNode,
    pod: &Pod,
    container: &Container,
    ids: StartIds<'_>,
) -> Result<Launch, StartFailure> {
    if container.restart_policy.as_deref() == Some("Always") {
        // A sidecar never exits; running it as a plain init container would hang the pod.
        return Err(StartFailure::new(
            StartErrorKind::Create,
            "sidecar init containers (restartPolicy: Always) are not supported by devcluster",
        ));
    }
    let image_name = container.image.clone().unwrap_or_default();
    let image = pull_image(ctx, node, &image_name)?;
    let runs_process = runs_process(&image, node.light, container);
    let no_volumes = Vec::new();
    let pod_volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .unwrap_or(&no_volumes);
    let objects = fetch_referenced_objects(ctx, pod, container, pod_volumes, runs_process).await?;

    let hostname = hostname(pod, node);
    let base = base_env(ctx, &image, &hostname);
    let environment = container_env(ctx, pod, container, ids, &objects, &base)?;
    let argv = env::resolve_command(container, &image.entrypoint, &image.cmd, &environment);

    if !runs_process {
        return Ok(Launch::Virtual(virtual_program(
            &image,
            &argv,
            container,
            &environment,
            node.light,
        )));
    }
    let Some(processes) = &ctx.processes else {
        return Err(StartFailure::new(
            StartErrorKind::Create,
            format!("image {image_name:?} needs a full (non-light) node"),
        ));
    };
    let host_binary = check_image_files(&image, &image_name, processes)?;
    let argv = resolve_workspace_binary(argv, &image_name)?;

    let token = mounted_token(ctx, pod, objects.wants_token).await?;
    let volume_sources = VolumeSources {
        pod,
        config_maps: &objects.config_maps,
        secrets: &objects.secrets,
        token: token.as_deref(),
    };
    let mut mounts = volume_mounts(node, container, pod_volumes, &volume_sources, ids.pod_dir)
        .map_err(|m| StartFailure::new(StartErrorKind::VolumeSetup, m))?;
    // First, so that the pod's own volumes are mounted over it as over any file of the image.
    mounts.splice(0..0, host_binary);

    let containers_dir = ids.pod_dir.join("containers");
    Ok(Launch::Process(Box::new(ContainerSpec {
        holder_pid: processes.holder_pid,
        hostname,
        root: container_root(node, &image),
        mounts,
        argv,
        env: environment.into_iter().collect(),
        working_dir: container.working_dir.clone(),
        network_namespace: ids.network_namespace.map(Path::to_path_buf),
        namespace_file: Some(containers_dir.join(format!("{}.ns", ids.container_key))),
        error_file: Some(containers_dir.join(format!("{}.err", ids.container_key))),
    })))
}

/// The container's environment over `base`, from its `envFrom` and `env`.
fn container_env(
    ctx: &SimContext,
    pod: &Pod,
    container: &Container,
    ids: StartIds<'_>,
    objects: &ReferencedObjects,
    base: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, StartFailure> {
    let sources = EnvSources {
        pod,
        host_ip: ids.host_ip,
        pod_ip: ids.pod_ip,
        config_maps: &objects.config_maps,
        secrets: &objects.secrets,
        base,
        allocatable_cpu_millis: ctx.allocatable.cpu_millis,
        allocatable_memory: ctx.allocatable.memory,
    };
    env::resolve_env(&sources, container)
        .map_err(|e| StartFailure::new(StartErrorKind::CreateConfig, e.to_string()))
}

/// The pod's service account token, when one of its volumes mounts it.
async fn mounted_token(
    ctx: &SimContext,
    pod: &Pod,
    wanted: bool,
) -> Result<Option<String>, StartFailure> {
    if !wanted {
        return Ok(None);
    }
    request_token(ctx, pod)
        .await
        .map(Some)
        .map_err(|m| StartFailure::new(StartErrorKind::VolumeSetup, m))
}

/// "Pulls" the image: resolves it through the image map, and refuses an image the node
/// cannot run.
fn pull_image(
    ctx: &SimContext,
    node: &SimNode,
    image_name: &str,
) -> Result<ResolvedImage, StartFailure> {
    let image = ctx
        .opts
        .image_map
        .resolve(image_name)
        .map_err(|e| StartFailure::new(StartErrorKind::ImagePull, e.to_string()))?;
    if node.light && !image.runtime.runs_on_light_nodes() {
        return Err(StartFailure::new(
            StartErrorKind::Create,
            format!("image {image_name:?} needs a full (non-light) node"),
        ));
    }
    Ok(image)
}

/// Whether the container runs as a process rather than a program the kubelet plays: a played
/// program may ask for a process, on full nodes only.
fn runs_process(image: &ResolvedImage, light: bool, container: &Container) -> bool {
    match image.runtime {
        Runtime::Pause | Runtime::Sleep => false,
        Runtime::Played => {
            !light
                && image
                    .program
                    .as_ref()
                    .is_some_and(|program| program.runs_process(container))
        }
        Runtime::NodeShell | Runtime::Container | Runtime::HostBinary => true,
    }
}

/// The ConfigMaps and Secrets the environment names and, for a process, those its volumes name.
async fn fetch_referenced_objects(
    ctx: &SimContext,
    pod: &Pod,
    container: &Container,
    pod_volumes: &[k8s_openapi::api::core::v1::Volume],
    runs_process: bool,
) -> Result<ReferencedObjects, StartFailure> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let (mut cm_names, mut secret_names) = env::referenced_objects(container);
    let mut wants_token = false;
    if runs_process {
        let (cms, secrets, token) = volumes::referenced_objects(pod_volumes);
        cm_names.extend(cms);
        secret_names.extend(secrets);
        wants_token = token;
    }
    let config_maps = fetch_config_maps(ctx, &namespace, &cm_names)
        .await
        .map_err(|m| StartFailure::new(StartErrorKind::CreateConfig, m))?;
    let secrets = fetch_secrets(ctx, &namespace, &secret_names)
        .await
        .map_err(|m| StartFailure::new(StartErrorKind::CreateConfig, m))?;
    Ok(ReferencedObjects {
        config_maps,
        secrets,
        wants_token,
    })
}

/// The node's name with host networking, else the pod's.
fn hostname(pod: &Pod, node: &SimNode) -> String {
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    if host_network {
        node.name.clone()
    } else {
        pod.metadata.name.clone().unwrap_or_default()
    }
}

/// Checks that the files an image maps to exist: its package directory and its host binary
/// (returned as the mount that shows it in the container root).
fn check_image_files(
    image: &ResolvedImage,
    image_name: &str,
    processes: &ProcessRuntime,
) -> Result<Option<BindMount>, StartFailure> {
    if let Some(contents) = &image.contents
        && !contents.from.is_dir()
    {
        return Err(StartFailure::new(
            StartErrorKind::ImagePull,
            format!(
                "image {image_name:?} maps to contents directory {} which does not exist",
                contents.from.display()
            ),
        ));
    }
    let Some(binary) = image
        .host_binary
        .as_ref()
        .filter(|_| image.runtime == Runtime::HostBinary)
    else {
        return Ok(None);
    };
    let source = crate::isolation::host_binary(&processes.devcluster_bin, &binary.name);
    if !source.is_file() {
        return Err(StartFailure::new(
            StartErrorKind::ImagePull,
            format!(
                "image {image_name:?} runs the {name} binary, not found at {}; build it with cargo (same CARGO_TARGET_DIR as devcluster) or set {var}",
                source.display(),
                name = binary.name,
                var = binary.env_var(),
            ),
        ));
    }
    Ok(Some(BindMount {
        source: MountSource::Machine(source),
        target: binary.path.clone(),
        read_only: true,
    }))
}

/// The node's own root for the node shell; otherwise a container root over it.
fn container_root(node: &SimNode, image: &ResolvedImage) -> RootSpec {
    match image.runtime {
        Runtime::NodeShell => RootSpec::Node {
            path: node.paths.root.clone(),
        },
        _ => RootSpec::Container {
            scratch: node.paths.scratch.clone(),
            node_root: node.paths.root.clone(),
            control_dir: node.paths.control.clone(),
            boot_id_file: node.paths.boot_id.clone(),
            contents: (image.contents.as_ref()).and_then(|contents| {
                Some(CopyInto {
                    from: contents.from.clone(),
                    inside: contents.inside_root()?,
                })
            }),
        },
    }
}

/// PATH, HOSTNAME, the API server's service variables, then the image's ENV.
fn base_env(ctx: &SimContext, image: &ResolvedImage, hostname: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        ("PATH".to_owned(), DEFAULT_PATH.to_owned()),
        ("HOSTNAME".to_owned(), hostname.to_owned()),
    ]);
    if let Some((host, port)) = ctx.opts.apiserver_url.as_deref().and_then(host_and_port) {
        env.insert("KUBERNETES_SERVICE_HOST".to_owned(), host.clone());
        env.insert("KUBERNETES_SERVICE_PORT".to_owned(), port.clone());
        env.insert("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), port.clone());
        env.insert("KUBERNETES_PORT".to_owned(), format!("tcp://{host}:{port}"));
    }
    env.extend(image.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// `https://127.0.0.1:6443/` → (`127.0.0.1`, `6443`).
fn host_and_port(url: &str) -> Option<(String, String)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    Some((host.trim_matches(['[', ']']).to_owned(), port.to_owned()))
}

/// What the kubelet plays for a container that runs no process.
fn virtual_program(
    image: &ResolvedImage,
    argv: &[String],
    container: &Container,
    env: &BTreeMap<String, String>,
    light: bool,
) -> VirtualProgram {
    match (image.runtime, &image.program) {
        (Runtime::Pause, _) => VirtualProgram::Pause,
        (Runtime::Played, Some(program)) => {
            VirtualProgram::Played(program.play(argv, container, env, light))
        }
        _ => VirtualProgram::Sleep,
    }
}

async fn fetch_config_maps(
    ctx: &SimContext,
    namespace: &str,
    names: &BTreeSet<String>,
) -> Result<BTreeMap<String, ConfigMap>, String> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let mut found = BTreeMap::new();
    for name in names {
        match api.get_opt(name).await {
            Ok(Some(cm)) => {
                found.insert(name.clone(), cm);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("failed to get configmap {namespace}/{name}: {e}")),
        }
    }
    Ok(found)
}

async fn fetch_secrets(
    ctx: &SimContext,
    namespace: &str,
    names: &BTreeSet<String>,
) -> Result<BTreeMap<String, Secret>, String> {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let mut found = BTreeMap::new();
    for name in names {
        match api.get_opt(name).await {
            Ok(Some(secret)) => {
                found.insert(name.clone(), secret);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("failed to get secret {namespace}/{name}: {e}")),
        }
    }
    Ok(found)
}

/// Image-map entrypoints may name a built workspace binary as `@bin/<name>`: the file `<name>`
/// next to the devcluster binary. That is how the Helm chart's controller and webhook images run
/// on a devcluster: container roots overlay the machine's `/`, so the binary is visible at its
/// own path.
const WORKSPACE_BINARY_PREFIX: &str = "@bin/";

fn resolve_workspace_binary(
    mut argv: Vec<String>,
    image_name: &str,
) -> Result<Vec<String>, StartFailure> {
    let Some(name) = argv
        .first()
        .and_then(|program| program.strip_prefix(WORKSPACE_BINARY_PREFIX))
    else {
        return Ok(argv);
    };
    let path = crate::isolation::devcluster_binary()
        .map_err(|e| StartFailure::new(StartErrorKind::ImagePull, e.to_string()))?
        .with_file_name(name);
    if !path.is_file() {
        return Err(StartFailure::new(
            StartErrorKind::ImagePull,
            format!(
                "image {image_name:?} runs the workspace binary {name}, not found at {}; build it with cargo (same CARGO_TARGET_DIR as devcluster)",
                path.display()
            ),
        ));
    }
    argv[0] = path.display().to_string();
    Ok(argv)
}

/// A token for the pod's service account, bound to the pod, as the kubelet requests it.
async fn request_token(ctx: &SimContext, pod: &Pod) -> Result<String, String> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".to_owned());
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3607),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..TokenRequest::default()
    };
    let response = api
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .map_err(|e| {
            format!("MountVolume.SetUp failed: failed to fetch token for service account {namespace}/{account}: {e}")
        })?;
    Ok(response.status.map(|s| s.token).unwrap_or_default())
}

/// Writes the volumes `container` mounts and returns the bind mounts into its root.
fn volume_mounts(
    node: &SimNode,
    container: &Container,
    pod_volumes: &[k8s_openapi::api::core::v1::Volume],
    sources: &VolumeSources<'_>,
    pod_dir: &Path,
) -> Result<Vec<BindMount>, String> {
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let volume = pod_volumes
            .iter()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| format!("volume {:?} is mounted but not declared", mount.name))?;
        let content = volumes::content(volume, sources).map_err(|e| e.to_string())?;
        let sub_path = mount.sub_path.as_deref().filter(|s| !s.is_empty());
        let mut read_only = mount.read_only.unwrap_or(false);
        let source = match content {
            VolumeContent::HostPath { path, kind } => {
                let path = match sub_path {
                    Some(sub) => format!("{}/{sub}", path.trim_end_matches('/')),
                    None => path,
                };
                MountSource::Node {
                    node_root: node.paths.root.clone(),
                    path,
                    directory: kind == HostPathKind::Directory || sub_path.is_some(),
                }
            }
            VolumeContent::EmptyDir => {
                let dir = pod_dir.join("volumes").join(&volume.name);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("failed to create {}: {e}", dir.display()))?;
                MountSource::Machine(with_sub_path(dir, sub_path))
            }
            VolumeContent::Files(files) => {
                let dir = pod_dir.join("volumes").join(&volume.name);
                write_files(&dir, &files)?;
                // ConfigMap, Secret, downward API and projected volumes are always read-only.
                read_only = true;
                MountSource::Machine(with_sub_path(dir, sub_path))
            }
        };
        mounts.push(BindMount {
            source,
            target: mount.mount_path.clone(),
            read_only,
        });
    }
    Ok(mounts)
}

fn with_sub_path(dir: PathBuf, sub_path: Option<&str>) -> PathBuf {
    match sub_path {
        Some(sub) => dir.join(sub.trim_start_matches('/')),
        None => dir,
    }
}

fn write_files(dir: &Path, files: &[volumes::VolumeFile]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(|e| format!("failed to create {}: {e}", dir.display()))?;
    for file in files {
        let relative = Path::new(&file.path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(format!(
                "volume file path {:?} must be relative, without '..'",
                file.path
            ));
        }
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("failed to create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, &file.data)
            .map_err(|e| format!("failed to write {}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))
            .map_err(|e| format!("failed to chmod {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn workspace_binaries_resolve_next_to_devcluster_or_fail_as_a_pull() {
        let argv = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        // Not a workspace binary: unchanged.
        let plain = resolve_workspace_binary(argv(&["kubectl", "get"]), "k").unwrap();
        assert_eq!(plain, argv(&["kubectl", "get"]));
        // A binary that is not built: ImagePull, naming what is missing.
        let missing =
            resolve_workspace_binary(argv(&["@bin/no-such-binary", "-v"]), "img").unwrap_err();
        assert_eq!(missing.kind, StartErrorKind::ImagePull);
        assert!(
            missing.message.contains("no-such-binary"),
            "{}",
            missing.message
        );
    }

    #[test]
    fn splits_api_server_urls() {
        let cases = [
            ("https://127.0.0.1:6443", Some(("127.0.0.1", "6443"))),
            ("https://127.0.0.1:6443/", Some(("127.0.0.1", "6443"))),
            ("https://[::1]:443", Some(("::1", "443"))),
            ("https://example", None),
        ];
        for (url, expected) in cases {
            let got = host_and_port(url);
            assert_eq!(
                got.as_ref().map(|(h, p)| (h.as_str(), p.as_str())),
                expected,
                "{url}"
            );
        }
    }

    fn image(runtime: Runtime) -> ResolvedImage {
        ResolvedImage {
            runtime,
            entrypoint: Vec::new(),
            cmd: Vec::new(),
            env: BTreeMap::new(),
            contents: None,
            host_binary: None,
            program: None,
        }
    }

    /// Asks for a process when the container has a command, and plays a one-second nap.
    #[derive(Debug)]
    struct CommandOrNap;

    impl crate::images::PlayedProgram for CommandOrNap {
        fn runs_process(&self, container: &Container) -> bool {
            container.command.as_ref().is_some_and(|c| !c.is_empty())
        }

        fn play(
            &self,
            argv: &[String],
            _container: &Container,
            _env: &BTreeMap<String, String>,
            light: bool,
        ) -> Played {
            Played {
                banner: format!("{argv:?} light={light}"),
                sleep: Duration::from_secs(1),
                exit_code: 4,
            }
        }
    }

    fn played() -> ResolvedImage {
        ResolvedImage {
            program: Some(std::sync::Arc::new(CommandOrNap)),
            ..image(Runtime::Played)
        }
    }

    #[test]
    fn pause_sleep_and_played_programs_are_virtual() {
        let container: Container =
            serde_json::from_value(serde_json::json!({"name": "c"})).unwrap();
        let env = BTreeMap::new();
        assert_eq!(
            virtual_program(&image(Runtime::Pause), &[], &container, &env, true),
            VirtualProgram::Pause
        );
        assert_eq!(
            virtual_program(&image(Runtime::Sleep), &[], &container, &env, true),
            VirtualProgram::Sleep
        );
        assert_eq!(
            virtual_program(&played(), &["a".to_owned()], &container, &env, true),
            VirtualProgram::Played(Played {
                banner: "[\"a\"] light=true".to_owned(),
                sleep: Duration::from_secs(1),
                exit_code: 4,
            })
        );
    }

    #[test]
    fn only_real_work_runs_as_a_process() {
        let container = |command: serde_json::Value| -> Container {
            serde_json::from_value(serde_json::json!({"name": "c", "command": command})).unwrap()
        };
        let copy = container(serde_json::json!(["cp", "-r", "/opt/files", "/root"]));
        let no_command = container(serde_json::Value::Null);
        let cases = [
            // image, light node, container, runs a process
            (image(Runtime::Pause), false, &copy, false),
            (image(Runtime::Sleep), false, &copy, false),
            (played(), false, &copy, true),
            (played(), true, &copy, false),
            (played(), false, &no_command, false),
            (image(Runtime::NodeShell), false, &no_command, true),
            (image(Runtime::Container), false, &no_command, true),
            (image(Runtime::HostBinary), false, &no_command, true),
        ];
        for (image, light, container, expected) in cases {
            assert_eq!(
                runs_process(&image, light, container),
                expected,
                "{:?} light={light} command={:?}",
                image.runtime,
                container.command
            );
        }
    }
}
