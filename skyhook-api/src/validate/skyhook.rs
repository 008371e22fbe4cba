//! Validation of a Skyhook: every rule of the upstream admission webhook, plus dependency
//! cycles, image references with registry ports and digests, and names that fit the node
//! annotation and label keys generated from them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_resources::{QuantityValue, parse_quantity};

use super::topology::check_topology;
use super::violation::{Violation, Violations};
use crate::duration;
use crate::generation::Group;
use crate::glob::Pattern;
use crate::graph::{GraphError, PackageGraph};
use crate::image::{ImageRef, PackageImageError, pull_reference, validate_package_image};
use crate::interrupt::config_key_matches;
use crate::keys::{self, SKYHOOK};
use crate::names;
use crate::readiness::KUBELET_CONDITIONS;
use crate::selector::{
    Selector, validate_dns_label, validate_dns_subdomain, validate_label_key, validate_label_value,
};
use crate::stage_timeout;
use crate::v1alpha1::{Package, PackageResources, ReadinessGate, SkyhookSpec, Stage};
use crate::version::Version;

/// What validation needs beyond the spec.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidationContext<'a> {
    /// `metadata.name` of the Skyhook, when known.
    pub name: Option<&'a str>,
    /// Names of the DeploymentPolicies that exist; `None` when unknown, which skips the
    /// existence check.
    pub known_policies: Option<&'a BTreeSet<String>>,
    /// The group of the object: a NodeWright follows upstream v0.20's stricter rules (an image
    /// with an inline tag or digest is refused, not warned about).
    pub group: Group,
}

/// Validates a Skyhook spec, returning every violation found.
pub fn validate_skyhook(
    spec: &SkyhookSpec,
    context: &ValidationContext<'_>,
) -> Result<(), Violations> {
    let mut out = Vec::new();
    if let Some(name) = context.name {
        check_skyhook_name(name, context.group, &mut out);
    }
    check_budget_and_policy(spec, context, &mut out);
    check_selector(spec.node_selectors.as_ref(), "spec.nodeSelectors", &mut out);
    check_selector(
        spec.pod_non_interrupt_labels.as_ref(),
        "spec.podNonInterruptLabels",
        &mut out,
    );
    check_rollout_safety(spec, &mut out);
    if spec.priority < 1 {
        out.push(Violation::new(
            "spec.priority",
            format!("priority {} is below the minimum of 1", spec.priority),
            "use 1 or more (1-99 infrastructure, 100-199 configuration, 200+ user tuning)",
        ));
    }
    for (key, package) in &spec.packages {
        check_package(key, package, context.group, &mut out);
        check_generated_names(context.name, key, package, &mut out);
    }
    check_dependencies(&spec.packages, &mut out);
    Violations::check(out)
}

fn check_skyhook_name(name: &str, group: Group, out: &mut Vec<Violation>) {
    let keys = group.keys();
    if let Err(problem) = validate_dns_label(name) {
        out.push(Violation::new(
            "metadata.name",
            format!("name {name:?} is not an RFC 1123 label: {problem}"),
            "use lowercase letters, digits and '-', starting and ending with a letter or digit; the name is used in node label and annotation keys",
        ));
    } else if name.len() > keys.max_skyhook_name_len() {
        let max = keys.max_skyhook_name_len();
        out.push(Violation::new(
            "metadata.name",
            format!("name {name:?} has {} characters, more than {max}", name.len()),
            format!("shorten it to at most {max} characters: the controller writes node annotation keys such as {} whose name part may not exceed 63 characters", keys.drain_blocked_annotation("<name>")),
        ));
    }
}

fn check_budget_and_policy(
    spec: &SkyhookSpec,
    context: &ValidationContext<'_>,
    out: &mut Vec<Violation>,
) {
    let budget = spec.interruption_budget.as_ref();
    let percent = budget.and_then(|b| b.percent);
    let count = budget.and_then(|b| b.count);
    if percent.is_some() && count.is_some() {
        out.push(Violation::new(
            "spec.interruptionBudget",
            "both percent and count are set",
            "keep only one of percent or count",
        ));
    }
    if let Some(p) = percent.filter(|p| !(0..=100).contains(p)) {
        out.push(Violation::new(
            "spec.interruptionBudget.percent",
            format!("percent {p} is outside 0-100"),
            "use a percentage from 0 to 100",
        ));
    }
    if let Some(c) = count.filter(|c| *c < 0) {
        out.push(Violation::new(
            "spec.interruptionBudget.count",
            format!("count {c} is negative"),
            "use 0 or more",
        ));
    }
    if let Some(topology) = budget.and_then(|b| b.topology.as_ref()) {
        check_topology(topology, "spec.interruptionBudget.topology", out);
    }
    let policy = spec.policy_name();
    if let Some(policy) = policy {
        if percent.is_some() || count.is_some() || budget.is_some_and(|b| b.topology.is_some()) {
            out.push(Violation::new(
                "spec.deploymentPolicy",
                "deploymentPolicy and interruptionBudget are both set",
                "remove interruptionBudget and set the budget in the DeploymentPolicy, or remove deploymentPolicy",
            ));
        }
        if context
            .known_policies
            .is_some_and(|known| !known.contains(policy))
        {
            out.push(Violation::new(
                "spec.deploymentPolicy",
                format!("deploymentPolicy {policy:?} not found"),
                "create the DeploymentPolicy first, or fix the name",
            ));
        }
    }
}

/// `spec.drainConfig` (upstream's messages), `spec.drain`, `spec.rebootDeadline` and
/// `spec.imagePullSecrets`.
fn check_rollout_safety(spec: &SkyhookSpec, out: &mut Vec<Violation>) {
    if let Some(config) = &spec.drain_config {
        if spec.drain.is_some() {
            out.push(Violation::new(
                "spec.drain",
                "spec.drain and spec.drainConfig are both set; spec.drain is the deprecated spelling of spec.drainConfig",
                "move the settings into spec.drainConfig (timeout, gracePeriod as a duration, deleteEmptyDirData, force, ignoreDaemonSets, podSelector, onTimeout) and remove spec.drain",
            ));
        }
        check_drain_duration(config.timeout.as_deref(), "timeout", out);
        check_drain_duration(config.grace_period.as_deref(), "gracePeriod", out);
        check_selector(
            config.pod_selector.as_ref(),
            "spec.drainConfig.podSelector",
            out,
        );
    }
    if let Some(drain) = &spec.drain {
        check_duration(drain.timeout.as_deref(), "spec.drain.timeout", out);
        if let Some(seconds) = drain.grace_period_seconds.filter(|s| *s < 0) {
            out.push(Violation::new(
                "spec.drain.gracePeriodSeconds",
                format!("gracePeriodSeconds {seconds} is negative"),
                "use 0 or more seconds, or leave it out to give each pod its own grace period",
            ));
        }
        check_selector(drain.pod_selector.as_ref(), "spec.drain.podSelector", out);
    }
    check_duration(spec.reboot_deadline.as_deref(), "spec.rebootDeadline", out);
    check_readiness_gates(&spec.readiness_gates, out);
    for (index, secret) in spec.image_pull_secrets.iter().enumerate() {
        if let Err(problem) = validate_dns_subdomain(&secret.name) {
            out.push(Violation::new(
                format!("spec.imagePullSecrets[{index}].name"),
                format!("{:?} is not a Secret name: {problem}", secret.name),
                "name a Secret of type kubernetes.io/dockerconfigjson in the controller's namespace",
            ));
        }
    }
}

/// `spec.readinessGates`: each names a node condition type once, that is not the kubelet's
/// nor a Skyhook's own, with a timeout above zero.
fn check_readiness_gates(gates: &[ReadinessGate], out: &mut Vec<Violation>) {
    let mut seen = BTreeSet::new();
    for (index, gate) in gates.iter().enumerate() {
        let field = format!("spec.readinessGates[{index}]");
        let type_ = gate.condition_type.as_str();
        if let Err(problem) = validate_label_key(type_) {
            out.push(Violation::new(
                format!("{field}.conditionType"),
                format!("{type_:?} is not a node condition type: {problem}"),
                "name the condition your validator writes on the node, e.g. GpuHealthy or example.com/NcclHealthy",
            ));
        } else if KUBELET_CONDITIONS.contains(&type_) {
            out.push(Violation::new(
                format!("{field}.conditionType"),
                format!("{type_} is a kubelet condition, which says nothing about how the interrupt went"),
                "name the condition your GPU or node validator writes after the interrupt, e.g. GpuHealthy",
            ));
        } else if SKYHOOK.is_skyhook_node_condition(type_)
            || keys::NODEWRIGHT.is_skyhook_node_condition(type_)
        {
            out.push(Violation::new(
                format!("{field}.conditionType"),
                format!("{type_} is a condition the operator itself writes"),
                "name the condition your GPU or node validator writes after the interrupt, e.g. GpuHealthy",
            ));
        }
        if !seen.insert(type_) {
            out.push(Violation::new(
                format!("{field}.conditionType"),
                format!("{type_} is gated on more than once"),
                "list each condition type once",
            ));
        }
        match gate.timeout.as_deref().map(duration::parse) {
            Some(Ok(timeout)) if timeout.is_zero() => out.push(Violation::new(
                format!("{field}.timeout"),
                "a timeout of zero fails every node at once",
                "give the validator time to run, e.g. 30m, or leave timeout out for 1h",
            )),
            Some(Err(problem)) => out.push(Violation::new(
                format!("{field}.timeout"),
                problem.to_string(),
                "write a Go duration above zero, e.g. 30m or 1h30m, or leave it out for 1h",
            )),
            _ => {}
        }
    }
}

/// A `drainConfig` duration: upstream refuses a negative one with `drain config:
/// drainConfig.<field> must be greater than or equal to 0`; one that is not a duration at all
/// is refused as for any other duration field.
fn check_drain_duration(text: Option<&str>, field: &str, out: &mut Vec<Violation>) {
    match text.map(duration::parse) {
        Some(Err(duration::DurationError::Negative { .. })) => out.push(Violation::new(
            format!("spec.drainConfig.{field}"),
            format!("drain config: drainConfig.{field} must be greater than or equal to 0"),
            "use a duration of zero or more, e.g. 90s or 15m, or leave it out",
        )),
        Some(Err(problem)) => out.push(Violation::new(
            format!("spec.drainConfig.{field}"),
            problem.to_string(),
            "write a Go duration of zero or more, e.g. 90s, 15m or 1h30m",
        )),
        _ => {}
    }
}

fn check_duration(text: Option<&str>, field: &str, out: &mut Vec<Violation>) {
    if let Some(Err(problem)) = text.map(duration::parse) {
        out.push(Violation::new(
            field,
            problem.to_string(),
            "write a Go duration of zero or more, e.g. 90s, 15m or 1h30m",
        ));
    }
}

fn check_selector(selector: Option<&LabelSelector>, field: &str, out: &mut Vec<Violation>) {
    if let Some(Err(problems)) = selector.map(Selector::parse) {
        out.extend(
            problems
                .into_iter()
                .map(|p| Violation::new(format!("{field}.{}", p.path), p.message, p.hint)),
        );
    }
}

/// `^[a-z][-a-z0-9]{0,41}[a-z]$`
fn valid_package_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (2..=43).contains(&bytes.len())
        && bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.last().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// ConfigMap keys: `[-._a-zA-Z0-9]+`, at most 253 characters.
fn valid_config_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn check_package(key: &str, package: &Package, group: Group, out: &mut Vec<Violation>) {
    let field = format!("spec.packages.{key}");
    if !valid_package_name(key) {
        out.push(Violation::new(
            field.clone(),
            format!("package name {key:?} does not match ^[a-z][-a-z0-9]{{0,41}}[a-z]$"),
            "use 2-43 lowercase letters, digits and '-', starting and ending with a letter",
        ));
    }
    if !package.name.is_empty() && package.name != key {
        out.push(Violation::new(
            format!("{field}.name"),
            format!(
                "name {:?} differs from the package key {key:?}",
                package.name
            ),
            "remove name (it is taken from the key) or make it equal to the key",
        ));
    }
    if let Err(err) = Version::parse(&package.version) {
        out.push(Violation::new(
            format!("{field}.version"),
            err.to_string(),
            "use a semantic version without a leading v, e.g. 1.2.3",
        ));
    }
    check_image((key, &field), package, group, out);
    for pattern in package.config_interrupts.keys() {
        check_config_interrupt(&field, pattern, &package.config_map, out);
    }
    for config_key in package.config_map.keys().filter(|k| !valid_config_key(k)) {
        out.push(Violation::new(
            format!("{field}.configMap.{config_key}"),
            format!("configMap key {config_key:?} is not a valid ConfigMap key"),
            "use letters, digits, '-', '_' and '.' only",
        ));
    }
    if let Some(resources) = &package.resources {
        check_resources(&field, resources, out);
    }
    if let Err(error) = stage_timeout::parse(key, package.stage_timeout.as_deref()) {
        out.push(Violation::new(
            format!("{field}.stageTimeout"),
            error.to_string(),
            "write a Go duration of zero or more, e.g. 30m or 1h30m; 0 removes the time bound",
        ));
    }
    if package.uninstall.is_some_and(|u| u.apply && !u.enabled) {
        out.push(Violation::new(
            format!("{field}.uninstall.apply"),
            format!("package \"{key}\": uninstall.apply requires uninstall.enabled to be true"),
            "set uninstall.enabled: true if the package supports uninstall, or remove uninstall.apply",
        ));
    }
}

/// The node name standing in for every node in the pod names checked below: node names are
/// DNS subdomains, which `safeName` turns into `[a-z0-9-]`, so the node never makes a pod name
/// invalid and any one stands for all.
const ANY_NODE: &str = "node";

/// The names and label values the controller builds from a package (spec §2.8) must be ones the
/// API server accepts: otherwise every pod or ConfigMap of the package is refused, and the node
/// stays `in_progress` for good, blocking later Skyhooks there. A package name or version that
/// breaks its own rule is reported by [`check_package`] alone. The container names need no check
/// here: the package name rule keeps them valid (tested).
fn check_generated_names(
    skyhook: Option<&str>,
    key: &str,
    package: &Package,
    out: &mut Vec<Violation>,
) {
    let version = package.version.as_str();
    if !valid_package_name(key) || Version::parse(version).is_err() {
        return;
    }
    let mut broken = Vec::new();
    let label = names::package_label(key, version);
    if let Err(problem) = validate_label_value(&label) {
        broken.push(format!(
            "the pod label {}={label:?} is not a valid label value ({problem})",
            keys::SKYHOOK.package_label
        ));
    }
    // Before admission fills in a generated name, check against the longest name allowed.
    let longest_name = "x".repeat(SKYHOOK.max_skyhook_name_len());
    let skyhook = skyhook.unwrap_or(&longest_name);
    if !package.config_map.is_empty() {
        let configmap = names::package_configmap_name(skyhook, key, version);
        if let Err(problem) = validate_dns_subdomain(&configmap) {
            broken.push(format!(
                "the package ConfigMap name {configmap:?} is not a DNS subdomain ({problem})"
            ));
        }
    }
    let pod_name_texts = Stage::ALL.iter().map(|stage| {
        names::safe_name_text(&names::package_pod_name_parts(
            skyhook, key, version, *stage, ANY_NODE,
        ))
    });
    if let Some(text) = pod_name_texts.into_iter().find(|text| {
        !text
            .to_lowercase()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    }) {
        broken.push(format!(
            "the pod names (from {text:?}) may hold only letters, digits, '.' and '-'"
        ));
    }
    if !broken.is_empty() {
        out.push(Violation::new(
            format!("spec.packages.{key}.version"),
            format!(
                "version {version:?} cannot appear in the objects the controller creates for it: {}",
                broken.join("; ")
            ),
            version_hint(key, version),
        ));
    }
}

/// How to fix a version that makes an invalid name or label value.
fn version_hint(key: &str, version: &str) -> String {
    let max = keys::MAX_QUALIFIED_NAME_PART.saturating_sub(key.len() + 1);
    if let Some((release, _)) = version.split_once('+') {
        format!(
            "drop the build metadata (write {release:?}): '+' cannot appear in a label value or an object name, and build metadata does not count in version order anyway"
        )
    } else if version.len() > max {
        format!(
            "shorten the version to at most {max} characters: the pod label <package>-<version> may not exceed 63"
        )
    } else {
        "end the version with a letter or digit, and put a letter or digit on both sides of every '.' (e.g. 1.0.0-rc.1)".to_owned()
    }
}

fn check_image(
    (key, field): (&str, &str),
    package: &Package,
    group: Group,
    out: &mut Vec<Violation>,
) {
    if group == Group::NodeWright
        && let Some(problem) = inline_reference(key, &package.image)
    {
        out.push(Violation::new(
            format!("{field}.image"),
            problem,
            "write the image without a tag or digest: the version is the tag, containerSHA pins the digest",
        ));
        return;
    }
    match validate_package_image(
        &package.image,
        &package.version,
        package.container_sha.as_deref(),
    ) {
        // Upstream ignores a written tag (it pulls `image:version`), so manifests with a stale
        // tag keep working here too; `admission_warnings` tells the user instead of rejecting.
        Ok(_) | Err(PackageImageError::TagMismatch { .. }) => {}
        Err(PackageImageError::ContainerSha(err)) => {
            out.push(Violation::new(
                format!("{field}.containerSHA"),
                err.to_string(),
                "write sha256: followed by the 64 hex digits of the image digest",
            ));
        }
        Err(err) => {
            out.push(Violation::new(format!("{field}.image"), err.to_string(), "use registry[:port]/path without a tag, e.g. ghcr.io/nvidia/skyhook-packages/shellscript"));
        }
    }
    if let Some(agent) = package
        .agent_image_override
        .as_deref()
        .filter(|a| !a.is_empty())
    {
        let problem = match ImageRef::parse(agent) {
            Err(err) => Some(err.to_string()),
            Ok(parsed) if parsed.tag.is_none() && parsed.digest.is_none() => Some(format!(
                "agent image {agent:?} has neither a tag nor a digest"
            )),
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            out.push(Violation::new(
                format!("{field}.agentImageOverride"),
                problem,
                "give a full image reference with a tag, e.g. ghcr.io/nvidia/skyhook/agent:v6.4.1",
            ));
        }
    }
}

/// Upstream v0.20's refusal of a NodeWright package image carrying its own tag or digest, in
/// upstream's words; `None` for a bare reference (or one that does not parse, reported apart).
fn inline_reference(key: &str, image: &str) -> Option<String> {
    let parsed = ImageRef::parse(image).ok()?;
    if parsed.digest.is_some() {
        return Some(format!(
            "error package {key}'s image '{image}' contains an inline digest. Do not embed a digest in the image; pin the image bytes using the package's containerSHA field instead"
        ));
    }
    let tag = parsed.tag?;
    Some(format!(
        "error package {key}'s image '{image}' contains an inline tag '{tag}'. Do not embed a tag in the image; the package version supplies the tag"
    ))
}

fn check_config_interrupt(
    field: &str,
    pattern: &str,
    config_map: &BTreeMap<String, String>,
    out: &mut Vec<Violation>,
) {
    let field = format!("{field}.configInterrupts.{pattern}");
    if config_map.contains_key(pattern) {
        return;
    }
    if let Err(err) = Pattern::new(pattern) {
        out.push(Violation::new(
            field,
            err.to_string(),
            "escape special characters with '\\' or use a plain configMap key",
        ));
        return;
    }
    if !config_map
        .keys()
        .any(|key| config_key_matches(pattern, key))
    {
        let keys: Vec<&str> = config_map.keys().map(String::as_str).collect();
        out.push(Violation::new(
            field,
            format!(
                "{pattern:?} matches no configMap key (keys: {})",
                if keys.is_empty() {
                    "none".to_owned()
                } else {
                    keys.join(", ")
                }
            ),
            "use an existing configMap key, or a glob such as *.conf that matches at least one",
        ));
    }
}

fn check_resources(field: &str, resources: &PackageResources, out: &mut Vec<Violation>) {
    if !resources.any_set() {
        return;
    }
    let entries: [(&str, Option<&Quantity>); 4] = [
        ("cpuRequest", resources.cpu_request.as_ref()),
        ("cpuLimit", resources.cpu_limit.as_ref()),
        ("memoryRequest", resources.memory_request.as_ref()),
        ("memoryLimit", resources.memory_limit.as_ref()),
    ];
    let missing: Vec<&str> = entries
        .iter()
        .filter(|(_, q)| q.is_none())
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        out.push(Violation::new(
            format!("{field}.resources"),
            format!("{} not set while other resources are", missing.join(", ")),
            "set all four of cpuRequest, cpuLimit, memoryRequest and memoryLimit, or none",
        ));
    }
    let mut values: BTreeMap<&str, QuantityValue> = BTreeMap::new();
    for (name, quantity) in entries {
        let Some(quantity) = quantity else { continue };
        match parse_quantity(&quantity.0) {
            Ok(value) if value.is_positive() => {
                values.insert(name, value);
            }
            Ok(_) => out.push(Violation::new(
                format!("{field}.resources.{name}"),
                format!("{name} {:?} is not greater than zero", quantity.0),
                "use a positive quantity",
            )),
            Err(err) => out.push(Violation::new(
                format!("{field}.resources.{name}"),
                err.to_string(),
                "use a Kubernetes quantity",
            )),
        }
    }
    for (request, limit) in [("cpuRequest", "cpuLimit"), ("memoryRequest", "memoryLimit")] {
        if let (Some(r), Some(l)) = (values.get(request), values.get(limit))
            && l < r
        {
            out.push(Violation::new(
                format!("{field}.resources.{limit}"),
                format!("{limit} is below {request}"),
                format!("raise {limit} to at least {request}, or lower {request}"),
            ));
        }
    }
}

fn check_dependencies(packages: &BTreeMap<String, Package>, out: &mut Vec<Violation>) {
    let Err(errors) = PackageGraph::from_packages(packages) else {
        return;
    };
    for error in errors.0 {
        let (field, hint) = match &error {
            GraphError::Duplicate { name, .. } => (format!("spec.packages.{name}"), "list each package once".to_owned()),
            GraphError::EmptyDependencyVersion { package, dependency }
            | GraphError::MissingDependency { package, dependency, .. } => (
                format!("spec.packages.{package}.dependsOn.{dependency}"),
                format!("name a package of this Skyhook with its exact version, or remove {dependency} from dependsOn"),
            ),
            GraphError::VersionMismatch { package, dependency, available, .. } => (
                format!("spec.packages.{package}.dependsOn.{dependency}"),
                format!("depend on {dependency} {available}, the version in this Skyhook"),
            ),
            GraphError::Cycle { path } => (
                format!("spec.packages.{}.dependsOn", path.first().map_or("", String::as_str)),
                "packages cannot depend on each other in a loop; remove one dependency of the cycle".to_owned(),
            ),
        };
        out.push(Violation::new(field, error.to_string(), hint));
    }
}

/// Warnings (not errors) about deprecated, ignored or ineffective settings, for admission
/// responses.
pub fn admission_warnings(spec: &SkyhookSpec) -> Vec<String> {
    group_admission_warnings(Group::Skyhook, spec)
}

/// [`admission_warnings`] for an object of `group`: a NodeWright's inline tag is refused, so
/// it is not warned about.
pub fn group_admission_warnings(group: Group, spec: &SkyhookSpec) -> Vec<String> {
    let mut warnings = Vec::new();
    let packages = spec.packages.iter().filter(|_| group == Group::Skyhook);
    for (key, package) in packages {
        if let Ok(image) = ImageRef::parse(&package.image)
            && let Some(tag) = image.tag.as_deref()
            && tag != package.version
        {
            warnings.push(format!(
                "spec.packages.{key}.image: the tag {tag:?} is ignored and {} is pulled; remove the tag (the version is the tag)",
                pull_reference(&package.image, &package.version, package.container_sha.as_deref())
            ));
        }
    }
    if spec.pause {
        warnings.push(format!(
            "spec.pause is deprecated and ignored; pause with the annotation {}: \"true\"",
            SKYHOOK.pause_annotation
        ));
    }
    if spec.drain.is_some() {
        warnings.push(
            "spec.drain is deprecated; use spec.drainConfig (upstream's field: timeout, gracePeriod, deleteEmptyDirData, force, ignoreDaemonSets, disableEviction, plus podSelector and onTimeout). Note that spec.drainConfig has no timeout unless set, and a drain past it turns the node erroring".to_owned(),
        );
    }
    if spec.auto_taint_new_nodes && !spec.runtime_required {
        warnings.push(
            "spec.autoTaintNewNodes has no effect without spec.runtimeRequired: true".to_owned(),
        );
    }
    let interrupts = (spec.packages.values())
        .any(|package| package.interrupt.is_some() || !package.config_interrupts.is_empty());
    if spec.pre_pull_images == Some(true) && !interrupts {
        warnings.push(
            "spec.prePullImages has no effect: no package has an interrupt or configInterrupts, so no node is cordoned and nothing is pulled ahead".to_owned(),
        );
    }
    if spec.runtime_required_cordon_after && !spec.runtime_required {
        warnings.push(
            "spec.runtimeRequiredCordonAfter has no effect without spec.runtimeRequired: true"
                .to_owned(),
        );
    }
    warnings
}
