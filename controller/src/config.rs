//! The controller's configuration: upstream's environment variables (spec §2.1) with upstream's
//! names and defaults, each also a command-line flag (a flag wins over its variable), plus our
//! additions `DRAIN_TIMEOUT`, `REBOOT_DEADLINE`, `MAX_PODS_PER_NODE` and `FLEET_BUDGET`. The
//! `JOB_*` settings of upstream v0.18 (the Jobs that run stages) are [`JobSettings`];
//! `PACKAGE_PRIORITY_CLASS_NAME` is upstream's, unreleased after v0.20.
//!
//! Contract: [`Args`] holds the raw text exactly as given; [`Config::from_args`] checks every
//! setting at once and either returns typed settings or a [`ConfigError`] listing *every*
//! invalid setting, each naming its variable, its flag, the rejected value and how to fix it.
//! Nothing here reads the environment except clap while parsing [`Args`].
//!
//! Upstream variables this binary does not read, because they belong to the separate webhook
//! binary or have no meaning for a Rust process: `ENABLE_WEBHOOKS`, `WEBHOOK_SECRET_NAME`,
//! `WEBHOOK_SERVICE_NAME` and `LOG_STACK_TRACE_LEVEL` (errors carry their cause chain instead of
//! a stack trace). Setting them is harmless.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Taint;
use skyhook_api::budget::{FleetBudget, FleetBudgetError};
use skyhook_api::image::ImageRef;
use skyhook_api::keys;
use skyhook_api::runtime_required::{parse_taint, runtime_required_taint_key_problem};
use skyhook_api::selector::{validate_dns_label, validate_dns_subdomain};
use skyhook_api::uninstall::UninstallMode;

use crate::duration::{self, DurationError};

/// The smallest `DEFAULT_INTERVAL` upstream accepts.
pub const MIN_DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// Raw settings, from flags or environment variables. See [`Config::from_args`] for the checks.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "skyhook-controller",
    version,
    about = "Rolls Skyhook packages through the cluster's nodes inside their disruption budgets."
)]
pub struct Args {
    /// Namespace of the package pods, ConfigMaps and the leader-election Lease.
    #[arg(long, env = "NAMESPACE", default_value = "skyhook")]
    pub namespace: String,

    /// How often to reconcile when nothing changes (a Go duration, at least 1m).
    #[arg(long, env = "DEFAULT_INTERVAL", default_value = "10m")]
    pub default_interval: String,

    /// Image pull Secret added to every package and interrupt pod; empty for none.
    #[arg(long, env = "IMAGE_PULL_SECRET", default_value = "")]
    pub image_pull_secret: String,

    /// Directory on the host under which package contents are copied (absolute).
    #[arg(long, env = "COPY_DIR_ROOT", default_value = "/var/lib/skyhook")]
    pub copy_dir_root: String,

    /// Re-run every package on a node after it reboots (for read-only or ephemeral OS images).
    #[arg(long, env = "REAPPLY_ON_REBOOT", default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub reapply_on_reboot: String,

    /// Taint removed from a node once every runtimeRequired Skyhook is complete on it, as
    /// key=value:Effect.
    #[arg(
        long,
        env = "RUNTIME_REQUIRED_TAINT",
        default_value = skyhook_api::keys::SKYHOOK.default_runtime_required_taint
    )]
    pub runtime_required_taint: String,

    /// Image of the main container of package and interrupt pods (with a tag).
    #[arg(
        long,
        env = "PAUSE_IMAGE",
        default_value = "registry.k8s.io/pause:3.10"
    )]
    pub pause_image: String,

    /// Image of the agent that runs package stages (with a tag; the tag is the agent version).
    #[arg(
        long,
        env = "AGENT_IMAGE",
        default_value = "ghcr.io/nvidia/skyhook/agent:latest"
    )]
    pub agent_image: String,

    /// Directory on the host where the agent writes its logs (absolute).
    #[arg(long, env = "AGENT_LOG_ROOT", default_value = "/var/log/skyhook")]
    pub agent_log_root: String,

    /// Address of the /metrics endpoint, e.g. :8080; 0 disables it.
    #[arg(long, env = "METRICS_PORT", default_value = ":8080")]
    pub metrics_port: String,

    /// Serve /metrics over HTTPS (in-memory self-signed certificate), each request authorised with
    /// a TokenReview and a SubjectAccessReview, as upstream v0.18+; false serves plain HTTP.
    #[arg(long, env = "METRICS_SECURE", default_value = "true", num_args = 0..=1, default_missing_value = "true")]
    pub metrics_secure: String,

    /// Address of the /healthz and /readyz endpoints, e.g. :8081; 0 disables them.
    #[arg(long, env = "PROBE_PORT", default_value = ":8081")]
    pub probe_port: String,

    /// Hold a Lease so only one replica reconciles at a time.
    #[arg(long, env = "LEADER_ELECTION", default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub leader_election: String,

    /// Log format: json or console.
    #[arg(long, env = "LOG_ENCODER", default_value = "json")]
    pub log_encoder: String,

    /// Log level of the controller's own messages: debug, info, warn or error. RUST_LOG, when
    /// set, replaces it with a full filter.
    #[arg(long, env = "LOG_LEVEL", default_value = "debug")]
    pub log_level: String,

    /// Timestamp format of log lines: rfc3339, rfc3339nano, iso8601, epoch, millis or nanos.
    #[arg(long, env = "LOG_TIME_ENCODER", default_value = "rfc3339")]
    pub log_time_encoder: String,

    /// How long to wait for a node to drain before reporting the pods and PodDisruptionBudgets
    /// that block it (a Go duration). The node stays cordoned and the drain keeps trying.
    #[arg(long, env = "DRAIN_TIMEOUT", default_value = "10m")]
    pub drain_timeout: String,

    /// How long a rebooting node may take to come back with a new boot ID before its interrupt is
    /// reported as failed (a Go duration).
    #[arg(long, env = "REBOOT_DEADLINE", default_value = "30m")]
    pub reboot_deadline: String,

    /// At most this many package pods (of all Skyhooks together) on one node at a time; the
    /// other packages wait for a slot (at least 1).
    #[arg(long, env = "MAX_PODS_PER_NODE", default_value = "4")]
    pub max_pods_per_node: String,

    /// The most nodes all Skyhooks together may have cordoned or interrupting at once: a count
    /// (3) or a percent of all nodes (25%); empty for no fleet-wide limit.
    #[arg(long, env = "FLEET_BUDGET", default_value = "")]
    pub fleet_budget: String,

    /// What removing a package or lowering its version does: `legacy` runs its uninstall
    /// stage; `explicit` (upstream's newest) never does, and only `uninstall.apply` or deleting
    /// the Skyhook uninstalls.
    #[arg(long, env = "UNINSTALL_MODE", default_value = "legacy")]
    pub uninstall_mode: String,

    /// How long a stage's Job is kept after it succeeded, once its outcome is recorded (a Go
    /// duration, at least 1m).
    #[arg(long, env = "JOB_TTL_SUCCEEDED", default_value = "1h")]
    pub job_ttl_succeeded: String,

    /// How long a stage's Job is kept after it failed, once its outcome is recorded (a Go
    /// duration, at least 1m). The failed Job is what keeps the stage from re-running.
    #[arg(long, env = "JOB_TTL_FAILED", default_value = "24h")]
    pub job_ttl_failed: String,

    /// How long one attempt of a package stage (or a whole interrupt) may run when the package
    /// sets no stageTimeout (a Go duration; 0 for no bound).
    #[arg(long, env = "JOB_STAGE_TIMEOUT", default_value = "1h")]
    pub job_stage_timeout: String,

    /// How many times a failed package stage is retried before the node reads erroring (0: a
    /// single attempt).
    #[arg(long, env = "JOB_BACKOFF_LIMIT", default_value = "3")]
    pub job_backoff_limit: String,

    /// Pull each node's package and agent images in a short pod before cordoning it for a
    /// package with an interrupt, for Skyhooks that do not set spec.prePullImages.
    #[arg(long, env = "PRE_PULL_IMAGES", default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub pre_pull_images: String,

    /// Also publish each NodeWright's metrics under the legacy skyhook_* names with
    /// skyhook_name, as upstream does until v0.21 (a Skyhook's own skyhook_* series are
    /// published either way).
    #[arg(long, env = "PUBLISH_LEGACY_METRICS", default_value = "true", num_args = 0..=1, default_missing_value = "true")]
    pub publish_legacy_metrics: String,

    /// How long the other group's node keys of a name stay after its object was taken over
    /// (a migration), so that a rollback still finds them (a Go duration; 0 or less prunes
    /// at once).
    #[arg(
        long,
        env = "LEGACY_CLEANUP_DELAY",
        default_value = "24h",
        allow_hyphen_values = true
    )]
    pub legacy_cleanup_delay: String,

    /// PriorityClass of package and interrupt pods; empty for none. Only system-node-critical
    /// and system-cluster-critical change anything (the kubelet's critical-pod admission).
    #[arg(long, env = "PACKAGE_PRIORITY_CLASS_NAME", default_value = "")]
    pub package_priority_class_name: String,
}

/// Checked configuration.
/// Where `/metrics` listens, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsEndpoint {
    /// The listen address.
    pub address: SocketAddr,
    /// HTTPS with a self-signed certificate, each request authorised by a TokenReview and a
    /// SubjectAccessReview (`METRICS_SECURE`); plain HTTP to anyone when false.
    pub secure: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Everything the pod and ConfigMap builders need.
    pub pods: PodSettings,
    /// Reconcile period when nothing changes.
    pub default_interval: Duration,
    /// Reset a node's state for every Skyhook when its boot ID changes.
    pub reapply_on_reboot: bool,
    /// Where `/metrics` listens and whether over HTTPS; `None` when disabled.
    pub metrics_addr: Option<MetricsEndpoint>,
    /// Where `/healthz` and `/readyz` listen; `None` when disabled.
    pub probe_addr: Option<SocketAddr>,
    /// Whether to take a Lease before reconciling.
    pub leader_election: bool,
    /// Log output settings.
    pub log: LogSettings,
    /// Drain time after which blockers are reported.
    pub drain_timeout: Duration,
    /// Time a reboot may take before the interrupt counts as failed.
    pub reboot_deadline: Duration,
    /// Most package pods the controller keeps on one node at once, all Skyhooks together.
    pub max_pods_per_node: usize,
    /// Most nodes cordoned or interrupting at once, all Skyhooks together; `None`: no limit.
    pub fleet_budget: Option<FleetBudget>,
    /// What removing or downgrading a package does.
    pub uninstall_mode: UninstallMode,
    /// The knobs of the Jobs that run package stages.
    pub jobs: JobSettings,
    /// Pull images before a cordon, for Skyhooks that do not say (`spec.prePullImages`).
    pub pre_pull_images: bool,
    /// Publish the legacy `skyhook_*` twins of every NodeWright's series.
    pub publish_legacy_metrics: bool,
    /// How long a migration keeps the other group's node keys of a name
    /// (`LEGACY_CLEANUP_DELAY`); zero prunes at once.
    pub legacy_cleanup_delay: Duration,
}

/// The knobs of the `batch/v1` Jobs that run package and interrupt stages (upstream's
/// `JobOperatorOptions`). Each is fixed when a Job is created: a new value applies to Jobs
/// created after the controller restarts with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSettings {
    /// `ttlSecondsAfterFinished` set on a succeeded Job once its outcome is recorded
    /// (`JOB_TTL_SUCCEEDED`, at least 1m).
    pub ttl_succeeded: Duration,
    /// `ttlSecondsAfterFinished` set on a failed Job once its outcome is recorded
    /// (`JOB_TTL_FAILED`, at least 1m).
    pub ttl_failed: Duration,
    /// The stage bound for packages without `stageTimeout` (`JOB_STAGE_TIMEOUT`); zero: none.
    /// See [`skyhook_api::stage_timeout`].
    pub stage_timeout: Duration,
    /// `backoffLimit` of package Jobs, and the restart allowance of non-reboot interrupts
    /// (`JOB_BACKOFF_LIMIT`, 0 or more).
    pub backoff_limit: i32,
}

impl Default for JobSettings {
    /// Upstream's defaults.
    fn default() -> Self {
        JobSettings {
            ttl_succeeded: Duration::from_secs(3600),
            ttl_failed: Duration::from_secs(24 * 3600),
            stage_timeout: Duration::from_secs(3600),
            backoff_limit: 3,
        }
    }
}

/// The settings that shape the pods and ConfigMaps the controller creates.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSettings {
    /// Namespace of pods and ConfigMaps.
    pub namespace: String,
    /// Pull Secret for package and interrupt pods.
    pub image_pull_secret: Option<String>,
    /// Copy directory root on the host, without a trailing `/`.
    pub copy_dir_root: String,
    /// Agent log directory root on the host, without a trailing `/`.
    pub agent_log_root: String,
    /// Default agent image.
    pub agent_image: String,
    /// The agent image's tag, reported to packages as `agentVersion`.
    pub agent_version: String,
    /// Main container image.
    pub pause_image: String,
    /// The runtime-required taint.
    pub runtime_required_taint: Taint,
    /// `priorityClassName` of package and interrupt pods (`PACKAGE_PRIORITY_CLASS_NAME`).
    pub priority_class_name: Option<String>,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEncoder {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Console,
}

/// Timestamp format of log lines, as upstream's `LOG_TIME_ENCODER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeEncoder {
    /// `2026-05-01T12:00:00Z`.
    Rfc3339,
    /// `2026-05-01T12:00:00.123456789Z`.
    Rfc3339Nano,
    /// `2026-05-01T12:00:00.123Z`.
    Iso8601,
    /// Seconds since the epoch, with a fraction.
    Epoch,
    /// Milliseconds since the epoch.
    Millis,
    /// Nanoseconds since the epoch.
    Nanos,
}

/// Log settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSettings {
    /// Line format.
    pub encoder: LogEncoder,
    /// Level of the controller's own messages.
    pub level: tracing::Level,
    /// Timestamp format.
    pub time_encoder: TimeEncoder,
}

/// One invalid setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable} (--{flag}) {problem}; {fix}")]
pub struct SettingError {
    /// The environment variable.
    pub variable: &'static str,
    /// The flag, without the leading `--`.
    pub flag: &'static str,
    /// What is wrong, including the rejected value.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

/// Every invalid setting found at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError(pub Vec<SettingError>);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration")?;
        for error in &self.0 {
            write!(f, "\n  - {error}")?;
        }
        Ok(())
    }
}

/// Collects setting errors while checking.
struct Checker {
    errors: Vec<SettingError>,
}

impl Checker {
    fn fail(
        &mut self,
        variable: &'static str,
        flag: &'static str,
        problem: String,
        fix: impl Into<String>,
    ) {
        self.errors.push(SettingError {
            variable,
            flag,
            problem,
            fix: fix.into(),
        });
    }

    fn duration(
        &mut self,
        variable: &'static str,
        flag: &'static str,
        raw: &str,
        min: Duration,
        example: &str,
    ) -> Duration {
        match duration::parse(raw) {
            Ok(value) if value >= min => value,
            Ok(_) => {
                self.fail(
                    variable,
                    flag,
                    format!("is {raw:?}, below the minimum of {}", describe(min)),
                    format!("set it to {} or more, e.g. {example}", describe(min)),
                );
                min
            }
            Err(error) => {
                self.fail(
                    variable,
                    flag,
                    format!("is invalid: {error}"),
                    format!("e.g. {example}"),
                );
                min
            }
        }
    }

    /// `LEGACY_CLEANUP_DELAY`: a duration, where a negative one means zero (upstream prunes at
    /// once for any delay of zero or less).
    fn legacy_cleanup_delay(&mut self, raw: &str) -> Duration {
        let (variable, flag) = ("LEGACY_CLEANUP_DELAY", "legacy-cleanup-delay");
        match raw.strip_prefix('-') {
            Some(magnitude) if duration::parse(magnitude).is_ok() => Duration::ZERO,
            _ => self.duration(
                variable,
                flag,
                raw,
                Duration::ZERO,
                "24h (or 0 to prune at once)",
            ),
        }
    }

    fn boolean(&mut self, variable: &'static str, flag: &'static str, raw: &str) -> bool {
        // The spellings Go's strconv.ParseBool accepts, which upstream uses.
        match raw {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
            "0" | "f" | "F" | "false" | "FALSE" | "False" | "" => false,
            other => {
                self.fail(
                    variable,
                    flag,
                    format!("is {other:?}, not a boolean"),
                    "use true or false",
                );
                false
            }
        }
    }

    fn uninstall_mode(&mut self, raw: &str) -> UninstallMode {
        raw.parse().unwrap_or_else(|_| {
            self.fail(
                "UNINSTALL_MODE",
                "uninstall-mode",
                format!("is {raw:?}, not an uninstall mode"),
                "use legacy (the default) or explicit",
            );
            UninstallMode::default()
        })
    }

    fn fleet_budget(&mut self, raw: &str) -> Option<FleetBudget> {
        if raw.trim().is_empty() {
            return None;
        }
        raw.parse()
            .map_err(|error: FleetBudgetError| {
                self.fail(
                    "FLEET_BUDGET",
                    "fleet-budget",
                    format!("is invalid: {error}"),
                    "give a node count (3) or a percent of all nodes (25%), or leave it empty",
                )
            })
            .ok()
    }

    fn positive_count(
        &mut self,
        variable: &'static str,
        flag: &'static str,
        raw: &str,
        example: &str,
    ) -> usize {
        match raw.trim().parse::<usize>() {
            Ok(value) if value >= 1 => value,
            Ok(_) => {
                self.fail(
                    variable,
                    flag,
                    format!("is {raw:?}, below the minimum of 1"),
                    format!("set it to 1 or more, e.g. {example}"),
                );
                1
            }
            Err(_) => {
                self.fail(
                    variable,
                    flag,
                    format!("is {raw:?}, not a whole number"),
                    format!("give a whole number of 1 or more, e.g. {example}"),
                );
                1
            }
        }
    }

    fn absolute_path(&mut self, variable: &'static str, flag: &'static str, raw: &str) -> String {
        if !raw.starts_with('/') {
            self.fail(
                variable,
                flag,
                format!("is {raw:?}, not an absolute path"),
                "give a path starting with '/', e.g. /var/lib/skyhook",
            );
        }
        raw.trim_end_matches('/').to_owned()
    }

    fn bind_address(
        &mut self,
        variable: &'static str,
        flag: &'static str,
        raw: &str,
    ) -> Option<SocketAddr> {
        match parse_bind_address(raw) {
            Ok(address) => address,
            Err(()) => {
                self.fail(
                    variable,
                    flag,
                    format!("is {raw:?}, not a listen address"),
                    "write :PORT, HOST:PORT with an IP address or localhost as HOST, or 0 to disable",
                );
                None
            }
        }
    }
}

impl Config {
    /// Checks every setting. See the module documentation.
    pub fn from_args(args: &Args) -> Result<Config, ConfigError> {
        let mut check = Checker { errors: Vec::new() };
        // Errors are listed in the order of these checks.
        check.namespace(&args.namespace);
        let default_interval = check.duration(
            "DEFAULT_INTERVAL",
            "default-interval",
            &args.default_interval,
            MIN_DEFAULT_INTERVAL,
            "10m",
        );
        let image_pull_secret = check.image_pull_secret(&args.image_pull_secret);
        let copy_dir_root =
            check.absolute_path("COPY_DIR_ROOT", "copy-dir-root", &args.copy_dir_root);
        let agent_log_root =
            check.absolute_path("AGENT_LOG_ROOT", "agent-log-root", &args.agent_log_root);
        let reapply_on_reboot = check.boolean(
            "REAPPLY_ON_REBOOT",
            "reapply-on-reboot",
            &args.reapply_on_reboot,
        );
        let leader_election =
            check.boolean("LEADER_ELECTION", "leader-election", &args.leader_election);
        let runtime_required_taint = check.runtime_required_taint(&args.runtime_required_taint);
        check.pause_image(&args.pause_image);
        let agent_version = check.agent_version(&args.agent_image);
        let (metrics_addr, probe_addr) = check.endpoints(&args.metrics_port, &args.probe_port);
        let metrics_secure =
            check.boolean("METRICS_SECURE", "metrics-secure", &args.metrics_secure);
        let log = check.log_settings(args);
        let drain_timeout = check.duration(
            "DRAIN_TIMEOUT",
            "drain-timeout",
            &args.drain_timeout,
            Duration::from_secs(1),
            "10m",
        );
        let reboot_deadline = check.duration(
            "REBOOT_DEADLINE",
            "reboot-deadline",
            &args.reboot_deadline,
            Duration::from_secs(1),
            "30m",
        );
        let max_pods_per_node = check.positive_count(
            "MAX_PODS_PER_NODE",
            "max-pods-per-node",
            &args.max_pods_per_node,
            "4",
        );
        let fleet_budget = check.fleet_budget(&args.fleet_budget);
        let uninstall_mode = check.uninstall_mode(&args.uninstall_mode);
        let jobs = check.job_settings(args);
        let priority_class_name = check.priority_class_name(&args.package_priority_class_name);
        let pre_pull_images =
            check.boolean("PRE_PULL_IMAGES", "pre-pull-images", &args.pre_pull_images);
        let publish_legacy_metrics = check.boolean(
            "PUBLISH_LEGACY_METRICS",
            "publish-legacy-metrics",
            &args.publish_legacy_metrics,
        );
        let legacy_cleanup_delay = check.legacy_cleanup_delay(&args.legacy_cleanup_delay);

        match (check.errors.is_empty(), runtime_required_taint) {
            (true, Some(runtime_required_taint)) => Ok(Config {
                pods: PodSettings {
                    namespace: args.namespace.clone(),
                    image_pull_secret,
                    copy_dir_root,
                    agent_log_root,
                    agent_image: args.agent_image.clone(),
                    agent_version,
                    pause_image: args.pause_image.clone(),
                    runtime_required_taint,
                    priority_class_name,
                },
                default_interval,
                reapply_on_reboot,
                metrics_addr: metrics_addr.map(|address| MetricsEndpoint {
                    address,
                    secure: metrics_secure,
                }),
                probe_addr,
                leader_election,
                log,
                drain_timeout,
                reboot_deadline,
                max_pods_per_node,
                fleet_budget,
                uninstall_mode,
                jobs,
                pre_pull_images,
                publish_legacy_metrics,
                legacy_cleanup_delay,
            }),
            _ => Err(ConfigError(check.errors)),
        }
    }
}

/// The checks of single settings that have no general kind.
impl Checker {
    /// The `JOB_*` settings, with upstream's bounds and upstream's words for a value out of
    /// them (`job ttl succeeded must be at least 1 minute`, ...).
    fn job_settings(&mut self, args: &Args) -> JobSettings {
        let defaults = JobSettings::default();
        let ttl_succeeded = self.job_duration(
            "JOB_TTL_SUCCEEDED",
            "job-ttl-succeeded",
            &args.job_ttl_succeeded,
            JobBound::AtLeastOneMinute("job ttl succeeded must be at least 1 minute"),
            "1h",
        );
        let ttl_failed = self.job_duration(
            "JOB_TTL_FAILED",
            "job-ttl-failed",
            &args.job_ttl_failed,
            JobBound::AtLeastOneMinute("job ttl failed must be at least 1 minute"),
            "24h",
        );
        let stage_timeout = self.job_duration(
            "JOB_STAGE_TIMEOUT",
            "job-stage-timeout",
            &args.job_stage_timeout,
            JobBound::NotNegative("job stage timeout must be greater than or equal to 0"),
            "1h (or 0 for no bound)",
        );
        let backoff_limit = self.job_backoff_limit(&args.job_backoff_limit);
        JobSettings {
            ttl_succeeded: ttl_succeeded.unwrap_or(defaults.ttl_succeeded),
            ttl_failed: ttl_failed.unwrap_or(defaults.ttl_failed),
            stage_timeout: stage_timeout.unwrap_or(defaults.stage_timeout),
            backoff_limit: backoff_limit.unwrap_or(defaults.backoff_limit),
        }
    }

    fn job_duration(
        &mut self,
        variable: &'static str,
        flag: &'static str,
        raw: &str,
        bound: JobBound,
        example: &str,
    ) -> Option<Duration> {
        let (minimum, upstream, fix) = match bound {
            JobBound::AtLeastOneMinute(upstream) => (
                Duration::from_secs(60),
                upstream,
                format!("set it to 1m or more, e.g. {example}"),
            ),
            JobBound::NotNegative(upstream) => {
                (Duration::ZERO, upstream, format!("e.g. {example}"))
            }
        };
        match duration::parse(raw.trim()) {
            Ok(value) if value >= minimum => Some(value),
            // Go parses a negative duration; upstream then refuses it by its bound.
            Ok(_) | Err(DurationError::Negative { .. }) => {
                self.fail(variable, flag, format!("is {raw:?}: {upstream}"), fix);
                None
            }
            Err(error) => {
                self.fail(
                    variable,
                    flag,
                    format!("is invalid: {error}"),
                    format!("e.g. {example}"),
                );
                None
            }
        }
    }

    fn job_backoff_limit(&mut self, raw: &str) -> Option<i32> {
        match raw.trim().parse::<i32>() {
            Ok(value) if value >= 0 => Some(value),
            Ok(_) => {
                self.fail(
                    "JOB_BACKOFF_LIMIT",
                    "job-backoff-limit",
                    format!(
                        "is {raw:?}: job backoff limit must be greater than or equal to 0"
                    ),
                    "set the number of retries after a failed attempt, e.g. 3 (0: a single attempt)",
                );
                None
            }
            Err(_) => {
                self.fail(
                    "JOB_BACKOFF_LIMIT",
                    "job-backoff-limit",
                    format!("is {raw:?}, not a whole number"),
                    "give a whole number of 0 or more, e.g. 3",
                );
                None
            }
        }
    }

    fn namespace(&mut self, raw: &str) {
        if let Err(problem) = validate_dns_label(raw) {
            self.fail(
                "NAMESPACE",
                "namespace",
                format!("is {raw:?}, not a namespace name ({problem})"),
                "use lowercase letters, digits and '-' (at most 63), e.g. skyhook",
            );
        }
    }

    fn priority_class_name(&mut self, raw: &str) -> Option<String> {
        if raw.is_empty() {
            return None;
        }
        match validate_dns_subdomain(raw) {
            Ok(()) => Some(raw.to_owned()),
            Err(problem) => {
                self.fail(
                    "PACKAGE_PRIORITY_CLASS_NAME",
                    "package-priority-class-name",
                    format!("is {raw:?}, not a PriorityClass name ({problem})"),
                    "use system-cluster-critical (recommended), system-node-critical, or leave it empty",
                );
                None
            }
        }
    }

    fn image_pull_secret(&mut self, raw: &str) -> Option<String> {
        if raw.is_empty() {
            return None;
        }
        match validate_dns_subdomain(raw) {
            Ok(()) => Some(raw.to_owned()),
            Err(problem) => {
                self.fail(
                    "IMAGE_PULL_SECRET",
                    "image-pull-secret",
                    format!("is {raw:?}, not a Secret name ({problem})"),
                    "use the name of a Secret in NAMESPACE (lowercase letters, digits, '-' and '.'), or leave it empty",
                );
                None
            }
        }
    }

    /// The runtime-required taint; refused, as upstream refuses to start, when its key cannot
    /// name the node annotation `autoTaint_<key>`.
    fn runtime_required_taint(&mut self, raw: &str) -> Option<Taint> {
        match parse_taint(raw) {
            Ok(taint) => match runtime_required_taint_key_problem(&taint.key) {
                None => Some(taint),
                Some(problem) => {
                    self.fail(
                        "RUNTIME_REQUIRED_TAINT",
                        "runtime-required-taint",
                        format!("is {raw:?}: {problem}"),
                        format!(
                            "or unset it for the default {}",
                            keys::SKYHOOK.default_runtime_required_taint
                        ),
                    );
                    None
                }
            },
            Err(error) => {
                self.fail(
                    "RUNTIME_REQUIRED_TAINT",
                    "runtime-required-taint",
                    format!("is rejected: {error}"),
                    "or unset it for the default",
                );
                None
            }
        }
    }

    fn pause_image(&mut self, raw: &str) {
        match ImageRef::parse(raw) {
            Ok(image) if image.tag.is_some() || image.digest.is_some() => {}
            Ok(_) => self.fail(
                "PAUSE_IMAGE",
                "pause-image",
                format!("is {raw:?}, which has no tag"),
                "add a tag, e.g. registry.k8s.io/pause:3.10",
            ),
            Err(error) => self.fail(
                "PAUSE_IMAGE",
                "pause-image",
                format!("is {raw:?}, not an image reference: {error}"),
                "e.g. registry.k8s.io/pause:3.10",
            ),
        }
    }

    /// The agent version: the tag of `AGENT_IMAGE`.
    fn agent_version(&mut self, raw: &str) -> String {
        match ImageRef::parse(raw) {
            Ok(ImageRef { tag: Some(tag), .. }) => tag,
            Ok(_) => {
                self.fail(
                    "AGENT_IMAGE",
                    "agent-image",
                    format!("is {raw:?}, which has no tag"),
                    "add the agent version as the tag, e.g. ghcr.io/nvidia/skyhook/agent:6.4.1",
                );
                String::new()
            }
            Err(error) => {
                self.fail(
                    "AGENT_IMAGE",
                    "agent-image",
                    format!("is {raw:?}, not an image reference: {error}"),
                    "e.g. ghcr.io/nvidia/skyhook/agent:6.4.1",
                );
                String::new()
            }
        }
    }

    /// The metrics and probe addresses, which cannot share a port.
    fn endpoints(
        &mut self,
        metrics_raw: &str,
        probe_raw: &str,
    ) -> (Option<SocketAddr>, Option<SocketAddr>) {
        let metrics = self.bind_address("METRICS_PORT", "metrics-port", metrics_raw);
        let probe = self.bind_address("PROBE_PORT", "probe-port", probe_raw);
        if let (Some(metrics), Some(probe)) = (metrics, probe)
            && metrics.port() == probe.port()
        {
            self.fail(
                "PROBE_PORT",
                "probe-port",
                format!("uses port {} like METRICS_PORT", probe.port()),
                "give the two endpoints different ports, e.g. :8080 and :8081",
            );
        }
        (metrics, probe)
    }

    fn log_settings(&mut self, args: &Args) -> LogSettings {
        LogSettings {
            encoder: self.log_encoder(&args.log_encoder),
            level: self.log_level(&args.log_level),
            time_encoder: self.log_time_encoder(&args.log_time_encoder),
        }
    }

    fn log_encoder(&mut self, raw: &str) -> LogEncoder {
        match raw.to_ascii_lowercase().as_str() {
            "json" => LogEncoder::Json,
            "console" => LogEncoder::Console,
            other => {
                self.fail(
                    "LOG_ENCODER",
                    "log-encoder",
                    format!("is {other:?}"),
                    "use json or console",
                );
                LogEncoder::Json
            }
        }
    }

    fn log_level(&mut self, raw: &str) -> tracing::Level {
        match raw.to_ascii_lowercase().as_str() {
            "trace" => tracing::Level::TRACE,
            "debug" => tracing::Level::DEBUG,
            "info" => tracing::Level::INFO,
            "warn" => tracing::Level::WARN,
            // zap's levels above error all mean "errors only" here.
            "error" | "dpanic" | "panic" | "fatal" => tracing::Level::ERROR,
            other => {
                self.fail(
                    "LOG_LEVEL",
                    "log-level",
                    format!("is {other:?}"),
                    "use debug, info, warn or error",
                );
                tracing::Level::INFO
            }
        }
    }

    fn log_time_encoder(&mut self, raw: &str) -> TimeEncoder {
        match raw {
            "rfc3339" | "RFC3339" => TimeEncoder::Rfc3339,
            "rfc3339nano" | "RFC3339Nano" => TimeEncoder::Rfc3339Nano,
            "iso8601" | "ISO8601" => TimeEncoder::Iso8601,
            "epoch" => TimeEncoder::Epoch,
            "millis" => TimeEncoder::Millis,
            "nano" | "nanos" => TimeEncoder::Nanos,
            other => {
                self.fail(
                    "LOG_TIME_ENCODER",
                    "log-time-encoder",
                    format!("is {other:?}"),
                    "use rfc3339, rfc3339nano, iso8601, epoch, millis or nanos",
                );
                TimeEncoder::Rfc3339
            }
        }
    }
}

/// The lower bound of a `JOB_*` duration, with upstream's message for a value below it.
#[derive(Debug, Clone, Copy)]
enum JobBound {
    /// At least one minute (the two TTLs).
    AtLeastOneMinute(&'static str),
    /// Zero or more (the stage timeout).
    NotNegative(&'static str),
}

/// `:PORT`, `PORT`, `HOST:PORT` (IPv4, `[IPv6]` or `localhost`), or `0` for disabled.
fn parse_bind_address(raw: &str) -> Result<Option<SocketAddr>, ()> {
    if raw == "0" {
        return Ok(None);
    }
    let (host, port) = match raw.rsplit_once(':') {
        Some((host, port)) => (host, port),
        None => ("", raw),
    };
    let port: u16 = port.parse().map_err(|_| ())?;
    let ip = match host {
        "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        bracketed if bracketed.starts_with('[') && bracketed.ends_with(']') => {
            bracketed[1..bracketed.len() - 1].parse().map_err(|_| ())?
        }
        literal => literal.parse().map_err(|_| ())?,
    };
    Ok(Some(SocketAddr::new(ip, port)))
}

/// A duration the way a person writes it in these settings (`1m`, `1s`).
fn describe(value: Duration) -> String {
    let secs = value.as_secs();
    if secs.is_multiple_of(60) && secs > 0 {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;

    /// Parses flags with every environment lookup switched off, so the tests do not depend on
    /// the environment they run in.
    fn args(flags: &[&str]) -> Args {
        let command = Args::command().mut_args(|arg| arg.env(None));
        let matches = command
            .try_get_matches_from(
                std::iter::once("skyhook-controller").chain(flags.iter().copied()),
            )
            .unwrap();
        Args::from_arg_matches(&matches).unwrap()
    }

    #[test]
    fn every_setting_has_its_upstream_variable() {
        let want = [
            ("namespace", "NAMESPACE"),
            ("default_interval", "DEFAULT_INTERVAL"),
            ("image_pull_secret", "IMAGE_PULL_SECRET"),
            ("copy_dir_root", "COPY_DIR_ROOT"),
            ("reapply_on_reboot", "REAPPLY_ON_REBOOT"),
            ("runtime_required_taint", "RUNTIME_REQUIRED_TAINT"),
            ("pause_image", "PAUSE_IMAGE"),
            ("agent_image", "AGENT_IMAGE"),
            ("agent_log_root", "AGENT_LOG_ROOT"),
            ("metrics_port", "METRICS_PORT"),
            ("metrics_secure", "METRICS_SECURE"),
            ("probe_port", "PROBE_PORT"),
            ("leader_election", "LEADER_ELECTION"),
            ("log_encoder", "LOG_ENCODER"),
            ("log_level", "LOG_LEVEL"),
            ("log_time_encoder", "LOG_TIME_ENCODER"),
            ("drain_timeout", "DRAIN_TIMEOUT"),
            ("reboot_deadline", "REBOOT_DEADLINE"),
            ("max_pods_per_node", "MAX_PODS_PER_NODE"),
            ("fleet_budget", "FLEET_BUDGET"),
            ("uninstall_mode", "UNINSTALL_MODE"),
            ("job_ttl_succeeded", "JOB_TTL_SUCCEEDED"),
            ("job_ttl_failed", "JOB_TTL_FAILED"),
            ("job_stage_timeout", "JOB_STAGE_TIMEOUT"),
            ("job_backoff_limit", "JOB_BACKOFF_LIMIT"),
            ("pre_pull_images", "PRE_PULL_IMAGES"),
            ("publish_legacy_metrics", "PUBLISH_LEGACY_METRICS"),
            ("legacy_cleanup_delay", "LEGACY_CLEANUP_DELAY"),
            ("package_priority_class_name", "PACKAGE_PRIORITY_CLASS_NAME"),
        ];
        let command = Args::command();
        let got: Vec<(String, String)> = command
            .get_arguments()
            .filter_map(|arg| {
                let env = arg.get_env()?.to_str()?.to_owned();
                Some((arg.get_id().to_string(), env))
            })
            .collect();
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(id, env)| ((*id).to_owned(), (*env).to_owned()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn defaults_are_upstreams() {
        let config = Config::from_args(&args(&[])).unwrap();
        assert_eq!(
            config,
            Config {
                pods: PodSettings {
                    namespace: "skyhook".into(),
                    image_pull_secret: None,
                    copy_dir_root: "/var/lib/skyhook".into(),
                    agent_log_root: "/var/log/skyhook".into(),
                    agent_image: "ghcr.io/nvidia/skyhook/agent:latest".into(),
                    agent_version: "latest".into(),
                    pause_image: "registry.k8s.io/pause:3.10".into(),
                    runtime_required_taint: Taint {
                        key: "skyhook.nvidia.com".into(),
                        value: Some("runtime-required".into()),
                        effect: "NoSchedule".into(),
                        time_added: None,
                    },
                    priority_class_name: None,
                },
                default_interval: Duration::from_secs(600),
                reapply_on_reboot: false,
                metrics_addr: Some(MetricsEndpoint {
                    address: "0.0.0.0:8080".parse().unwrap(),
                    secure: true,
                }),
                probe_addr: Some("0.0.0.0:8081".parse().unwrap()),
                leader_election: false,
                log: LogSettings {
                    encoder: LogEncoder::Json,
                    level: tracing::Level::DEBUG,
                    time_encoder: TimeEncoder::Rfc3339,
                },
                drain_timeout: Duration::from_secs(600),
                reboot_deadline: Duration::from_secs(1800),
                max_pods_per_node: 4,
                fleet_budget: None,
                uninstall_mode: UninstallMode::Legacy,
                jobs: JobSettings {
                    ttl_succeeded: Duration::from_secs(3600),
                    ttl_failed: Duration::from_secs(86_400),
                    stage_timeout: Duration::from_secs(3600),
                    backoff_limit: 3,
                },
                pre_pull_images: false,
                publish_legacy_metrics: true,
                legacy_cleanup_delay: Duration::from_secs(86_400),
            }
        );
    }

    #[test]
    fn flags_set_values() {
        let config = Config::from_args(&args(&[
            "--namespace=ops",
            "--default-interval=1h",
            "--image-pull-secret=node-init-secret",
            "--copy-dir-root=/opt/skyhook/",
            "--reapply-on-reboot",
            "--pre-pull-images",
            "--runtime-required-taint=ready:NoExecute",
            "--pause-image=localhost:5000/pause:3.9",
            "--agent-image=ghcr.io/nvidia/skyhook/agent:6.4.1",
            "--agent-log-root=/var/log/sky",
            "--metrics-port=127.0.0.1:9090",
            "--metrics-secure=false",
            "--probe-port=0",
            "--leader-election=TRUE",
            "--log-encoder=Console",
            "--log-level=warn",
            "--log-time-encoder=millis",
            "--drain-timeout=90s",
            "--reboot-deadline=1h",
            "--max-pods-per-node=12",
            "--fleet-budget=25%",
            "--job-ttl-succeeded=1m",
            "--job-ttl-failed=48h",
            "--job-stage-timeout=0",
            "--job-backoff-limit=0",
            "--package-priority-class-name=system-cluster-critical",
            "--publish-legacy-metrics=false",
            "--legacy-cleanup-delay=-5m",
        ]))
        .unwrap();
        assert_eq!(config.pods.namespace, "ops");
        assert_eq!(config.default_interval, Duration::from_secs(3600));
        assert_eq!(
            config.pods.image_pull_secret.as_deref(),
            Some("node-init-secret")
        );
        assert_eq!(config.pods.copy_dir_root, "/opt/skyhook");
        assert!(config.reapply_on_reboot);
        assert!(config.pre_pull_images);
        assert!(!config.publish_legacy_metrics);
        assert_eq!(
            config.legacy_cleanup_delay,
            Duration::ZERO,
            "below zero prunes at once"
        );
        assert_eq!(
            config.pods.runtime_required_taint,
            Taint {
                key: "ready".into(),
                value: None,
                effect: "NoExecute".into(),
                time_added: None,
            }
        );
        assert_eq!(config.pods.agent_version, "6.4.1");
        assert_eq!(
            config.metrics_addr,
            Some(MetricsEndpoint {
                address: "127.0.0.1:9090".parse().unwrap(),
                secure: false,
            })
        );
        assert_eq!(config.probe_addr, None);
        assert!(config.leader_election);
        assert_eq!(config.log.encoder, LogEncoder::Console);
        assert_eq!(config.log.level, tracing::Level::WARN);
        assert_eq!(config.log.time_encoder, TimeEncoder::Millis);
        assert_eq!(config.drain_timeout, Duration::from_secs(90));
        assert_eq!(config.reboot_deadline, Duration::from_secs(3600));
        assert_eq!(config.max_pods_per_node, 12);
        assert_eq!(config.fleet_budget, Some(FleetBudget::Percent(25)));
        assert_eq!(
            config.pods.priority_class_name.as_deref(),
            Some("system-cluster-critical")
        );
        assert_eq!(
            config.jobs,
            JobSettings {
                ttl_succeeded: Duration::from_secs(60),
                ttl_failed: Duration::from_secs(48 * 3600),
                stage_timeout: Duration::ZERO,
                backoff_limit: 0,
            }
        );
    }

    #[test]
    fn each_invalid_setting_is_named_with_its_fix() {
        // flag, variable, a fragment the message must contain
        let cases = [
            ("--namespace=Skyhook", "NAMESPACE", "e.g. skyhook"),
            (
                "--default-interval=30s",
                "DEFAULT_INTERVAL",
                "below the minimum of 1m",
            ),
            (
                "--default-interval=10",
                "DEFAULT_INTERVAL",
                "not a duration",
            ),
            (
                "--image-pull-secret=Bad_Name",
                "IMAGE_PULL_SECRET",
                "not a Secret name",
            ),
            (
                "--copy-dir-root=var/lib/skyhook",
                "COPY_DIR_ROOT",
                "not an absolute path",
            ),
            (
                "--agent-log-root=logs",
                "AGENT_LOG_ROOT",
                "not an absolute path",
            ),
            (
                "--reapply-on-reboot=yes",
                "REAPPLY_ON_REBOOT",
                "use true or false",
            ),
            (
                "--runtime-required-taint=skyhook.nvidia.com-",
                "RUNTIME_REQUIRED_TAINT",
                "removal",
            ),
            (
                "--runtime-required-taint=a=b",
                "RUNTIME_REQUIRED_TAINT",
                "Effect' part is missing",
            ),
            (
                "--runtime-required-taint=example.com/gpu=x:NoSchedule",
                "RUNTIME_REQUIRED_TAINT",
                "DNS prefix",
            ),
            (
                "--runtime-required-taint=kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk=x:NoSchedule",
                "RUNTIME_REQUIRED_TAINT",
                "more than 53",
            ),
            (
                "--pause-image=registry.k8s.io/pause",
                "PAUSE_IMAGE",
                "add a tag",
            ),
            (
                "--agent-image=ghcr.io/nvidia/skyhook/agent",
                "AGENT_IMAGE",
                "has no tag",
            ),
            (
                "--agent-image=Agent:1",
                "AGENT_IMAGE",
                "not an image reference",
            ),
            (
                "--metrics-port=eighty",
                "METRICS_PORT",
                "not a listen address",
            ),
            ("--metrics-port=:8081", "PROBE_PORT", "different ports"),
            ("--metrics-secure=maybe", "METRICS_SECURE", "true or false"),
            (
                "--leader-election=maybe",
                "LEADER_ELECTION",
                "true or false",
            ),
            ("--log-encoder=logfmt", "LOG_ENCODER", "json or console"),
            (
                "--log-level=verbose",
                "LOG_LEVEL",
                "debug, info, warn or error",
            ),
            ("--log-time-encoder=unix", "LOG_TIME_ENCODER", "rfc3339"),
            ("--drain-timeout=0s", "DRAIN_TIMEOUT", "below the minimum"),
            (
                "--legacy-cleanup-delay=a-day",
                "LEGACY_CLEANUP_DELAY",
                "is invalid",
            ),
            (
                "--reboot-deadline=soon",
                "REBOOT_DEADLINE",
                "not a duration",
            ),
            (
                "--max-pods-per-node=0",
                "MAX_PODS_PER_NODE",
                "below the minimum of 1",
            ),
            (
                "--max-pods-per-node=four",
                "MAX_PODS_PER_NODE",
                "not a whole number",
            ),
            (
                "--max-pods-per-node=-2",
                "MAX_PODS_PER_NODE",
                "not a whole number",
            ),
            ("--fleet-budget=0", "FLEET_BUDGET", "allows no node"),
            ("--fleet-budget=150%", "FLEET_BUDGET", "from 1% to 100%"),
            ("--fleet-budget=one", "FLEET_BUDGET", "e.g. 3 or 25%"),
            (
                "--job-ttl-succeeded=59s",
                "JOB_TTL_SUCCEEDED",
                "job ttl succeeded must be at least 1 minute",
            ),
            (
                "--job-ttl-succeeded=-1h",
                "JOB_TTL_SUCCEEDED",
                "job ttl succeeded must be at least 1 minute",
            ),
            (
                "--job-ttl-failed=0",
                "JOB_TTL_FAILED",
                "job ttl failed must be at least 1 minute",
            ),
            ("--job-ttl-failed=1 day", "JOB_TTL_FAILED", "e.g. 24h"),
            (
                "--job-stage-timeout=-1m",
                "JOB_STAGE_TIMEOUT",
                "job stage timeout must be greater than or equal to 0",
            ),
            (
                "--job-stage-timeout=60",
                "JOB_STAGE_TIMEOUT",
                "not a duration",
            ),
            (
                "--job-backoff-limit=-1",
                "JOB_BACKOFF_LIMIT",
                "job backoff limit must be greater than or equal to 0",
            ),
            (
                "--job-backoff-limit=three",
                "JOB_BACKOFF_LIMIT",
                "not a whole number",
            ),
            (
                "--job-backoff-limit=3000000000",
                "JOB_BACKOFF_LIMIT",
                "not a whole number",
            ),
            (
                "--package-priority-class-name=System_Critical",
                "PACKAGE_PRIORITY_CLASS_NAME",
                "not a PriorityClass name",
            ),
        ];
        for (flag, variable, fragment) in cases {
            let error = Config::from_args(&args(&[flag])).unwrap_err();
            assert_eq!(error.0.len(), 1, "{flag}: {error}");
            assert_eq!(error.0[0].variable, variable, "{flag}");
            let message = error.to_string();
            assert!(message.contains(variable), "{message}");
            assert!(message.contains(fragment), "{flag}: {message}");
        }
    }

    #[test]
    fn reports_all_errors_at_once() {
        let error = Config::from_args(&args(&[
            "--default-interval=5s",
            "--copy-dir-root=relative",
            "--log-encoder=xml",
        ]))
        .unwrap_err();
        let variables: Vec<_> = error.0.iter().map(|e| e.variable).collect();
        assert_eq!(
            variables,
            ["DEFAULT_INTERVAL", "COPY_DIR_ROOT", "LOG_ENCODER"]
        );
    }

    #[test]
    fn bind_addresses() {
        let cases: &[(&str, Option<Option<&str>>)] = &[
            (":8080", Some(Some("0.0.0.0:8080"))),
            ("8080", Some(Some("0.0.0.0:8080"))),
            ("0.0.0.0:9000", Some(Some("0.0.0.0:9000"))),
            ("localhost:9000", Some(Some("127.0.0.1:9000"))),
            ("[::1]:9000", Some(Some("[::1]:9000"))),
            ("0", Some(None)),
            ("", None),
            (":", None),
            (":99999", None),
            ("example.com:80", None),
        ];
        for (raw, want) in cases {
            let got = parse_bind_address(raw).ok();
            let want = want.map(|inner| inner.map(|s| s.parse::<SocketAddr>().unwrap()));
            assert_eq!(got, want, "{raw:?}");
        }
    }
}
