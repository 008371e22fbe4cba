//! `devcluster install`: the skyhook CRDs, the `skyhook` namespace with upstream's LimitRange, and
//! `skyhook-controller` running against the cluster as a background process.
//!
//! The pure parts ([`controller_env`], [`limit_range`]) are plain data; the rest talks to the API
//! server and starts the process. The controller's log is `<state>/logs/skyhook-controller.log`
//! and its pid, ports and log path are recorded in `<state>/skyhook-controller.json` so that
//! `devcluster status` and `down` find it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{LimitRange, LimitRangeItem, LimitRangeSpec, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::background::{BackgroundProcess, BackgroundRecord, Launch, spawn, stop_recorded};
use crate::error::InstallError;
use devcluster::state::StateDir;

/// The namespace of the controller's pods, ConfigMaps and Lease, as upstream's chart installs it.
pub const NAMESPACE: &str = "skyhook";
/// The controller's binary name (also what `status` and `down` look for in `/proc/<pid>/cmdline`).
pub const CONTROLLER_BINARY: &str = "skyhook-controller";
/// The agent's binary name, as Skyhook's image map mounts it into agent containers.
const AGENT_BINARY: &str = "skyhook-agent";
/// Field manager of everything `install` applies.
const FIELD_MANAGER: &str = "devcluster-install";

/// What to install.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// Directory of the CRD manifests; `None`: `chart/crds/` of this workspace.
    pub crds_dir: Option<PathBuf>,
    /// The controller binary; `None`: `SKYHOOK_CONTROLLER_BIN`, else `skyhook-controller` next to
    /// the `devcluster` binary.
    pub controller_binary: Option<PathBuf>,
    /// `AGENT_IMAGE`; `None`: the controller's default (which devcluster maps to the built agent).
    pub agent_image: Option<String>,
    /// Further controller environment variables (they override the defaults).
    pub extra_env: BTreeMap<String, String>,
    /// How long the controller may take to answer `/readyz`.
    pub ready_timeout: Duration,
    /// `Some(name)`: a further replica next to the installed controller (leader-election tests):
    /// its log is `<state>/logs/skyhook-controller-<name>.log` and it is not recorded, so
    /// `status` and `down` keep tracking the first one.
    pub replica: Option<String>,
}

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            crds_dir: None,
            controller_binary: None,
            agent_image: None,
            extra_env: BTreeMap::new(),
            ready_timeout: Duration::from_secs(120),
            replica: None,
        }
    }
}

/// Where a running controller is: what `status` shows and `down` stops.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ControllerRecord {
    pub pid: u32,
    pub metrics_port: u16,
    pub probe_port: u16,
    pub log: PathBuf,
}

impl BackgroundRecord for ControllerRecord {
    const BINARY: &'static str = CONTROLLER_BINARY;

    fn pid(&self) -> u32 {
        self.pid
    }

    fn log(&self) -> &Path {
        &self.log
    }
}

/// The controller's environment on a devcluster (later entries win over earlier ones).
pub fn controller_env(
    kubeconfig: &Path,
    metrics_port: u16,
    probe_port: u16,
    agent_image: Option<&str>,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        ("KUBECONFIG".to_string(), kubeconfig.display().to_string()),
        ("NAMESPACE".to_string(), NAMESPACE.to_string()),
        ("LOG_ENCODER".to_string(), "console".to_string()),
        ("LOG_LEVEL".to_string(), "info".to_string()),
        (
            "METRICS_PORT".to_string(),
            format!("127.0.0.1:{metrics_port}"),
        ),
        ("PROBE_PORT".to_string(), format!("127.0.0.1:{probe_port}")),
        // The controller serves HTTPS to authorised readers by default; the harness and the
        // benchmark scrape plain HTTP without a token. A test of the secure endpoint sets it true.
        ("METRICS_SECURE".to_string(), "false".to_string()),
    ]);
    if let Some(image) = agent_image {
        env.insert("AGENT_IMAGE".to_string(), image.to_string());
    }
    env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// The log name of a controller process: `skyhook-controller`, or `skyhook-controller-<replica>`
/// for a further replica, so two replicas never write one file.
pub fn log_name(replica: Option<&str>) -> String {
    match replica {
        Some(replica) => format!("{CONTROLLER_BINARY}-{replica}"),
        None => CONTROLLER_BINARY.to_owned(),
    }
}

/// Upstream chart's LimitRange for the controller's namespace: package pods without resources get
/// these requests and limits.
pub fn limit_range() -> LimitRange {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(memory.to_string())),
        ])
    };
    LimitRange {
        metadata: ObjectMeta {
            name: Some("skyhook-limit-range".to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(LimitRangeSpec {
            limits: vec![LimitRangeItem {
                type_: "Container".to_string(),
                default: Some(quantities("500m", "512Mi")),
                default_request: Some(quantities("250m", "256Mi")),
                ..LimitRangeItem::default()
            }],
        }),
    }
}

/// The workspace's `chart/crds/`.
pub fn default_crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../chart/crds")
}

/// `SKYHOOK_CONTROLLER_BIN`, else `skyhook-controller` next to the devcluster binary.
pub fn controller_binary() -> Result<PathBuf, InstallError> {
    match std::env::var_os("SKYHOOK_CONTROLLER_BIN") {
        Some(path) => Ok(PathBuf::from(path)),
        None => Ok(devcluster::isolation::devcluster_binary()?.with_file_name(CONTROLLER_BINARY)),
    }
}

/// Applies the CRDs (server-side) and waits until each is Established.
pub async fn apply_crds(client: &kube::Client, dir: &Path) -> Result<Vec<String>, InstallError> {
    let io = |action, path: &Path, source| InstallError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| io("reading", dir, source))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(InstallError::NoCrds(dir.to_path_buf()));
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|source| io("reading", file, source))?;
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&text).map_err(|source| InstallError::Manifest {
                path: file.clone(),
                source,
            })?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|source| InstallError::Apply {
                what: format!("CRD {name} from {}", file.display()),
                source,
            })?;
        names.push(name);
    }
    let waited = Duration::from_secs(60);
    for name in &names {
        let established = await_condition(crds.clone(), name, conditions::is_crd_established());
        let done = tokio::time::timeout(waited, established).await;
        if !matches!(done, Ok(Ok(Some(_)))) {
            return Err(InstallError::CrdNotEstablished {
                name: name.clone(),
                waited,
            });
        }
    }
    Ok(names)
}

/// Applies the `skyhook` namespace and its LimitRange (server-side).
pub async fn apply_namespace(client: &kube::Client) -> Result<(), InstallError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .patch(NAMESPACE, &params, &Patch::Apply(&namespace))
        .await
        .map_err(|source| InstallError::Apply {
            what: format!("namespace {NAMESPACE}"),
            source,
        })?;
    let range = limit_range();
    let name = range.metadata.name.clone().unwrap_or_default();
    Api::<LimitRange>::namespaced(client.clone(), NAMESPACE)
        .patch(&name, &params, &Patch::Apply(&range))
        .await
        .map_err(|source| InstallError::Apply {
            what: format!("LimitRange {NAMESPACE}/{name}"),
            source,
        })?;
    Ok(())
}

/// A `skyhook-controller` process started by [`start_controller`]. Dropping it stops the
/// controller unless [`BackgroundProcess::detach`] was called.
pub type ControllerProcess = BackgroundProcess<ControllerRecord>;

/// Stops the controller recorded in `state` (if it runs) and removes the record; returns its pid.
pub fn stop_recorded_controller(state: &StateDir, grace: Duration) -> Option<u32> {
    stop_recorded::<ControllerRecord>(state, grace)
}

/// How many times a process is started when its port was taken before it could bind it.
const PORT_ATTEMPTS: usize = 3;

/// Whether the process exited because another one bound its port first. [`free_port`] can only
/// pick a port that is free now: between that and the process binding it, any outgoing
/// connection on this machine may take it (a pod's ports would be its own, so this race exists
/// only here). Such a start is retried with new ports; any other exit is the process's own
/// failure and is reported as it is.
pub(crate) fn lost_port_race(error: &InstallError) -> bool {
    matches!(error, InstallError::Exited { tail, .. } if tail.contains("Address already in use"))
}

/// Runs `start` (which picks its ports afresh each time) until it does not lose a port race,
/// at most [`PORT_ATTEMPTS`] times.
pub(crate) async fn start_with_fresh_ports<T, E, F, Fut>(
    binary: &str,
    lost_race: fn(&E) -> bool,
    mut start: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut attempt = 1;
    loop {
        match start().await {
            Err(error) if attempt < PORT_ATTEMPTS && lost_race(&error) => {
                tracing::warn!(binary, attempt, %error, "another process took a port first; starting again on new ports");
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

pub(crate) fn free_port(endpoint: &'static str) -> Result<u16, InstallError> {
    std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|error| InstallError::Port(endpoint, error))
}

/// Starts the controller against the cluster of `state` (in its own process group, output in
/// `<state>/logs/skyhook-controller.log`) and waits until its `/readyz` answers 200.
pub async fn start_controller(
    state: &StateDir,
    options: &InstallOptions,
) -> Result<ControllerProcess, InstallError> {
    let binary = match &options.controller_binary {
        Some(binary) => binary.clone(),
        None => controller_binary()?,
    };
    if !binary.is_file() {
        return Err(InstallError::ControllerMissing(binary));
    }
    let agent = devcluster::isolation::host_binary(
        &devcluster::isolation::devcluster_binary()?,
        AGENT_BINARY,
    );
    if !agent.is_file() {
        return Err(InstallError::AgentMissing(agent));
    }
    start_with_fresh_ports(CONTROLLER_BINARY, lost_port_race, || {
        start_controller_on_free_ports(state, options, &binary)
    })
    .await
}

async fn start_controller_on_free_ports(
    state: &StateDir,
    options: &InstallOptions,
    binary: &Path,
) -> Result<ControllerProcess, InstallError> {
    let metrics_port = free_port("metrics")?;
    // The OS may hand out again the port it just released: the endpoints need one each.
    let probe_port = loop {
        let port = free_port("probe")?;
        if port != metrics_port {
            break port;
        }
    };
    let env = controller_env(
        &state.kubeconfig(),
        metrics_port,
        probe_port,
        options.agent_image.as_deref(),
        &options.extra_env,
    );
    let log_name = log_name(options.replica.as_deref());
    let launch = Launch {
        binary,
        args: Vec::new(),
        env,
        log_name: &log_name,
    };
    let mut process = spawn(state, launch, |pid, log| ControllerRecord {
        pid,
        metrics_port,
        probe_port,
        log,
    })?;
    if options.replica.is_none() {
        process.write_record(state)?;
    }
    let ready = || async {
        if readyz(probe_port).await {
            Ok(())
        } else {
            Err("/readyz is not 200 yet".to_string())
        }
    };
    process.wait_ready(options.ready_timeout, ready).await?;
    Ok(process)
}

/// Whether `GET /readyz` on the probe port answers 200.
pub(crate) async fn readyz(port: u16) -> bool {
    let ask = async {
        let mut stream =
            tokio::net::TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port)).await?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await?;
        Ok::<_, std::io::Error>(head)
    };
    match tokio::time::timeout(Duration::from_secs(2), ask).await {
        Ok(Ok(head)) => is_ok_status_line(&head),
        _ => false,
    }
}

/// Whether the first bytes of an HTTP response are a 200 status line.
fn is_ok_status_line(head: &[u8]) -> bool {
    head.starts_with(b"HTTP/1.") && head.get(8..12) == Some(b" 200".as_slice())
}

/// Everything `install` does: CRDs, namespace and LimitRange, then the controller (ready).
pub async fn install(
    client: &kube::Client,
    state: &StateDir,
    options: &InstallOptions,
) -> Result<ControllerProcess, InstallError> {
    let crds_dir = options.crds_dir.clone().unwrap_or_else(default_crds_dir);
    let names = apply_crds(client, &crds_dir).await?;
    tracing::info!(crds = ?names, "CRDs established");
    apply_namespace(client).await?;
    start_controller(state, options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_env_has_the_devcluster_defaults_and_extras_win() {
        type Pairs = &'static [(&'static str, &'static str)];
        let cases: [(Option<&str>, Pairs, Pairs); 3] = [
            (
                None,
                &[],
                &[
                    ("KUBECONFIG", "/state/kubeconfig"),
                    ("NAMESPACE", "skyhook"),
                    ("LOG_ENCODER", "console"),
                    ("LOG_LEVEL", "info"),
                    ("METRICS_PORT", "127.0.0.1:1001"),
                    ("PROBE_PORT", "127.0.0.1:1002"),
                    ("METRICS_SECURE", "false"),
                ],
            ),
            (
                Some("example.com/agent:1.0"),
                &[],
                &[("AGENT_IMAGE", "example.com/agent:1.0")],
            ),
            (
                None,
                &[("LOG_LEVEL", "debug"), ("DRAIN_TIMEOUT", "1m")],
                &[("LOG_LEVEL", "debug"), ("DRAIN_TIMEOUT", "1m")],
            ),
        ];
        for (agent_image, extra, expected) in cases {
            let extra = extra
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect();
            let env = controller_env(
                Path::new("/state/kubeconfig"),
                1001,
                1002,
                agent_image,
                &extra,
            );
            for (key, value) in expected {
                assert_eq!(
                    env.get(*key).map(String::as_str),
                    Some(*value),
                    "{key} in {env:?}"
                );
            }
            assert_eq!(
                env.contains_key("AGENT_IMAGE"),
                agent_image.is_some(),
                "{env:?}"
            );
        }
    }

    #[test]
    fn each_replica_logs_to_its_own_file() {
        let cases = [
            (None, "skyhook-controller"),
            (Some("standby"), "skyhook-controller-standby"),
        ];
        for (replica, expected) in cases {
            assert_eq!(log_name(replica), expected, "{replica:?}");
        }
    }

    #[test]
    fn limit_range_matches_upstream_defaults() {
        let range = limit_range();
        let item = &range
            .spec
            .as_ref()
            .map(|spec| spec.limits.clone())
            .unwrap_or_default()[0];
        let get = |map: &Option<BTreeMap<String, Quantity>>, key: &str| {
            map.as_ref().and_then(|m| m.get(key)).map(|q| q.0.clone())
        };
        assert_eq!(item.type_, "Container");
        assert_eq!(get(&item.default, "cpu").as_deref(), Some("500m"));
        assert_eq!(get(&item.default, "memory").as_deref(), Some("512Mi"));
        assert_eq!(get(&item.default_request, "cpu").as_deref(), Some("250m"));
        assert_eq!(
            get(&item.default_request, "memory").as_deref(),
            Some("256Mi")
        );
        assert_eq!(range.metadata.namespace.as_deref(), Some(NAMESPACE));
    }

    #[test]
    fn only_a_bind_refused_for_a_taken_port_is_a_lost_race() {
        use std::os::unix::process::ExitStatusExt;
        let exited = |tail: &str| InstallError::Exited {
            binary: CONTROLLER_BINARY,
            status: std::process::ExitStatus::from_raw(256),
            log: PathBuf::from("c.log"),
            tail: tail.to_owned(),
        };
        let cases = [
            (
                exited("Error: binding 0.0.0.0:4321: Address already in use (os error 98)"),
                true,
            ),
            (exited("Error: the Skyhook CRD is not installed"), false),
            (
                InstallError::NotReady {
                    binary: CONTROLLER_BINARY,
                    pid: 1,
                    waited: Duration::from_secs(1),
                    last: "Address already in use".to_owned(),
                    log: PathBuf::from("c.log"),
                    tail: "Address already in use".to_owned(),
                },
                false,
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(lost_port_race(&error), expected, "{error}");
        }
    }

    #[test]
    fn status_line_check() {
        let cases: [(&[u8], bool); 5] = [
            (b"HTTP/1.1 200 ", true),
            (b"HTTP/1.0 200 ", true),
            (b"HTTP/1.1 503 ", false),
            (b"HTTP/1.1 20", false),
            (b"SSH-2.0-Open", false),
        ];
        for (head, ok) in cases {
            assert_eq!(
                is_ok_status_line(head),
                ok,
                "{:?}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[test]
    fn bundled_crds_parse() -> Result<(), Box<dyn std::error::Error>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(default_crds_dir())? {
            let path = entry?.path();
            let crd: CustomResourceDefinition =
                serde_yaml::from_str(&std::fs::read_to_string(&path)?)?;
            names.push(crd.metadata.name.unwrap_or_default());
        }
        names.sort();
        assert_eq!(
            names,
            [
                "deploymentpolicies.skyhook.nvidia.com",
                "skyhooks.skyhook.nvidia.com"
            ]
        );
        Ok(())
    }
}
