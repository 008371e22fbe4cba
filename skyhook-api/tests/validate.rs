//! Admission rules for Skyhooks and DeploymentPolicies, as tables of manifests (written as
//! YAML, like users write them) and the fields each must be rejected on.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use skyhook_api::keys::{self, NodeKeyKind};
use skyhook_api::names;
use skyhook_api::selector::{validate_dns_label, validate_label_key, validate_label_value};
use skyhook_api::v1alpha1::{DeploymentPolicy, DeploymentPolicySpec, Skyhook, SkyhookSpec, Stage};
use skyhook_api::validate::{
    PolicyReference, ValidationContext, admission_warnings, default_policy, policy_delete_blockers,
    policy_delete_message, validate_policy, validate_skyhook,
};

fn spec(yaml: &str) -> SkyhookSpec {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}\n{yaml}"))
}

fn policy(yaml: &str) -> DeploymentPolicySpec {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}\n{yaml}"))
}

/// The fields the spec is rejected on (empty when it is valid).
fn skyhook_fields(yaml: &str, context: &ValidationContext<'_>) -> Vec<String> {
    match validate_skyhook(&spec(yaml), context) {
        Ok(()) => vec![],
        Err(violations) => violations
            .as_slice()
            .iter()
            .map(|v| v.field.clone())
            .collect(),
    }
}

fn policy_fields(yaml: &str) -> Vec<String> {
    match validate_policy(&policy(yaml)) {
        Ok(()) => vec![],
        Err(violations) => violations
            .as_slice()
            .iter()
            .map(|v| v.field.clone())
            .collect(),
    }
}

const VALID: &str = r#"
packages:
  dexter:
    version: 1.2.3
    image: ghcr.io/nvidia/skyhook/agentless
    configMap: {game.properties: "a", ui.properties: "b"}
  spencer:
    version: "3.3"
    image: ghcr.io/nvidia/skyhook/agentless
    dependsOn: {dexter: 1.2.3}
"#;

#[test]
fn valid_skyhooks_pass() {
    let cases = [
        VALID,
        "packages: {}",
        r#"
interruptionBudget: {count: 1}
nodeSelectors: {matchLabels: {skyhook.nvidia.com/test-node: demo}}
packages:
  baxter:
    version: 2.3.1-test
    image: localhost:5000/agentless
    containerSHA: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    resources: {cpuRequest: 50m, cpuLimit: 50m, memoryRequest: 32Mi, memoryLimit: 32Mi}
    agentImageOverride: ghcr.io/nvidia/skyhook/agent:v6.4.1
  jackie-chan:
    version: 2024.7.7-test
    image: ghcr.io/nvidia/skyhook/agentless:2024.7.7-test
    configMap: {game.properties: x, ui.properties: y}
    configInterrupts:
      game.properties: {type: service, services: [rsyslog]}
      "*.properties": {type: reboot}
"#,
        r#"
drain:
  timeout: 15m
  gracePeriodSeconds: 30
  deleteEmptyDirData: true
  ignoreDaemonSets: true
  force: false
  podSelector: {matchLabels: {skyhook.nvidia.com/keep: "true"}}
  onTimeout: fail
onFailure: {uncordon: true}
rebootDeadline: 45m
imagePullSecrets: [{name: regcred}]
readinessGates:
  - {conditionType: GpuHealthy, timeout: 30m}
  - {conditionType: example.com/NcclHealthy}
packages: {}
"#,
    ];
    for yaml in cases {
        assert_eq!(
            skyhook_fields(yaml, &ValidationContext::default()),
            Vec::<String>::new(),
            "{yaml}"
        );
    }
}

#[test]
fn skyhook_rejection_table() {
    let cases: &[(&str, &[&str])] = &[
        // Budget: percent xor count.
        (
            "interruptionBudget: {percent: 20, count: 1}",
            &["spec.interruptionBudget"],
        ),
        // Policy and budget together.
        (
            "deploymentPolicy: p\ninterruptionBudget: {count: 1}",
            &["spec.deploymentPolicy"],
        ),
        // Selectors parse.
        (
            "nodeSelectors: {matchExpressions: [{key: tier, operator: In, values: []}]}",
            &["spec.nodeSelectors.matchExpressions[0].values"],
        ),
        (
            "nodeSelectors: {matchLabels: {'bad key': x}}",
            &["spec.nodeSelectors.matchLabels[bad key]"],
        ),
        (
            "podNonInterruptLabels: {matchExpressions: [{key: a, operator: Bogus}]}",
            &["spec.podNonInterruptLabels.matchExpressions[0].operator"],
        ),
        ("priority: 0", &["spec.priority"]),
        // Drain options, failure policy and pull secrets (issue #17).
        ("drain: {timeout: -5m}", &["spec.drain.timeout"]),
        ("drain: {timeout: soon}", &["spec.drain.timeout"]),
        ("drain: {timeout: 10 minutes}", &["spec.drain.timeout"]),
        (
            "drain: {gracePeriodSeconds: -1}",
            &["spec.drain.gracePeriodSeconds"],
        ),
        (
            "drain: {podSelector: {matchExpressions: [{key: app, operator: Near}]}}",
            &["spec.drain.podSelector.matchExpressions[0].operator"],
        ),
        // drainConfig (upstream v0.18) and its two extensions.
        ("drainConfig: {timeout: -5m}", &["spec.drainConfig.timeout"]),
        (
            "drainConfig: {timeout: soon}",
            &["spec.drainConfig.timeout"],
        ),
        (
            "drainConfig: {gracePeriod: -1s}",
            &["spec.drainConfig.gracePeriod"],
        ),
        (
            "drainConfig: {podSelector: {matchExpressions: [{key: app, operator: Near}]}}",
            &["spec.drainConfig.podSelector.matchExpressions[0].operator"],
        ),
        ("{drainConfig: {}, drain: {}}", &["spec.drain"]),
        ("rebootDeadline: -1h", &["spec.rebootDeadline"]),
        ("rebootDeadline: 30", &["spec.rebootDeadline"]),
        (
            "readinessGates: [{conditionType: 'Gpu Healthy'}]",
            &["spec.readinessGates[0].conditionType"],
        ),
        (
            "readinessGates: [{conditionType: Ready}]",
            &["spec.readinessGates[0].conditionType"],
        ),
        (
            "readinessGates: [{conditionType: skyhook.nvidia.com/demo/NotReady}]",
            &["spec.readinessGates[0].conditionType"],
        ),
        (
            "readinessGates: [{conditionType: GpuHealthy}, {conditionType: GpuHealthy}]",
            &["spec.readinessGates[1].conditionType"],
        ),
        (
            "readinessGates: [{conditionType: GpuHealthy, timeout: 0s}]",
            &["spec.readinessGates[0].timeout"],
        ),
        (
            "readinessGates: [{conditionType: GpuHealthy, timeout: soon}]",
            &["spec.readinessGates[0].timeout"],
        ),
        (
            "imagePullSecrets: [{name: ''}]",
            &["spec.imagePullSecrets[0].name"],
        ),
        (
            "imagePullSecrets: [{name: ok}, {name: Not_OK}]",
            &["spec.imagePullSecrets[1].name"],
        ),
        // Name equals key.
        (
            "packages: {dexter: {name: spencer, version: '1', image: busybox}}",
            &["spec.packages.dexter.name"],
        ),
        // Name regex.
        (
            "packages: {Dexter: {version: '1', image: busybox}}",
            &["spec.packages.Dexter"],
        ),
        (
            "packages: {d: {version: '1', image: busybox}}",
            &["spec.packages.d"],
        ),
        (
            "packages: {dexter-: {version: '1', image: busybox}}",
            &["spec.packages.dexter-"],
        ),
        (
            "packages: {1dexter: {version: '1', image: busybox}}",
            &["spec.packages.1dexter"],
        ),
        // Semver.
        (
            "packages: {dexter: {version: 2024/07/06, image: busybox}}",
            &["spec.packages.dexter.version"],
        ),
        (
            "packages: {dexter: {version: v1.2.3, image: busybox}}",
            &["spec.packages.dexter.version"],
        ),
        // Image references parse (a tag that differs from the version is only a warning).
        (
            "packages: {dexter: {version: 1.2.3, image: 'Host/UPPER'}}",
            &["spec.packages.dexter.image"],
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: ''}}",
            &["spec.packages.dexter.image"],
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: busybox, containerSHA: 'sha256:xyz'}}",
            &["spec.packages.dexter.containerSHA"],
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: busybox, agentImageOverride: 'ghcr.io/nvidia/skyhook/agent'}}",
            &["spec.packages.dexter.agentImageOverride"],
        ),
        // Config interrupts reference keys or matching globs.
        (
            "packages: {dexter: {version: '1', image: busybox, configMap: {a.conf: x}, configInterrupts: {b.conf: {type: reboot}}}}",
            &["spec.packages.dexter.configInterrupts.b.conf"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, configMap: {a.conf: x}, configInterrupts: {'*.sh': {type: reboot}}}}",
            &["spec.packages.dexter.configInterrupts.*.sh"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, configMap: {a.conf: x}, configInterrupts: {'[a': {type: reboot}}}}",
            &["spec.packages.dexter.configInterrupts.[a"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, configInterrupts: {x: {type: reboot}}}}",
            &["spec.packages.dexter.configInterrupts.x"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, configMap: {'a/b': x}}}",
            &["spec.packages.dexter.configMap.a/b"],
        ),
        // Resource rule.
        (
            "packages: {dexter: {version: '1', image: busybox, resources: {cpuRequest: 50m}}}",
            &["spec.packages.dexter.resources"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, resources: {cpuRequest: 100m, cpuLimit: 50m, memoryRequest: 32Mi, memoryLimit: 32Mi}}}",
            &["spec.packages.dexter.resources.cpuLimit"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, resources: {cpuRequest: 10m, cpuLimit: 50m, memoryRequest: 1Gi, memoryLimit: 1000Mi}}}",
            &["spec.packages.dexter.resources.memoryLimit"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, resources: {cpuRequest: '0', cpuLimit: 50m, memoryRequest: 1Mi, memoryLimit: 1Mi}}}",
            &["spec.packages.dexter.resources.cpuRequest"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, resources: {cpuRequest: lots, cpuLimit: 50m, memoryRequest: 1Mi, memoryLimit: 1Mi}}}",
            &["spec.packages.dexter.resources.cpuRequest"],
        ),
        // dependsOn: missing, ambiguous version, empty version.
        (
            "packages: {bar: {version: '1', image: busybox, dependsOn: {foo: '1'}}}",
            &["spec.packages.bar.dependsOn.foo"],
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: busybox}, spencer: {version: '1', image: busybox, dependsOn: {dexter: 1.2.4}}}",
            &["spec.packages.spencer.dependsOn.dexter"],
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: busybox}, spencer: {version: '1', image: busybox, dependsOn: {dexter: ''}}}",
            &["spec.packages.spencer.dependsOn.dexter"],
        ),
        // Applying an uninstall needs a package that declares one.
        (
            "packages: {dexter: {version: '1', image: busybox, uninstall: {enabled: false, apply: true}}}",
            &["spec.packages.dexter.uninstall.apply"],
        ),
        (
            "packages: {dexter: {version: '1', image: busybox, uninstall: {apply: true}}}",
            &["spec.packages.dexter.uninstall.apply"],
        ),
        // Cycles are rejected.
        (
            "packages: {aa: {version: '1', image: busybox, dependsOn: {bb: '1'}}, bb: {version: '1', image: busybox, dependsOn: {aa: '1'}}}",
            &["spec.packages.aa.dependsOn"],
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(
            skyhook_fields(yaml, &ValidationContext::default()),
            *want,
            "{yaml}"
        );
    }
}

/// Upstream's webhook messages for a negative `drainConfig` duration, which tests grep.
#[test]
fn drain_config_violations_carry_upstreams_messages() {
    let text = validate_skyhook(
        &spec("drainConfig: {timeout: -1m, gracePeriod: -1s}"),
        &ValidationContext::default(),
    )
    .unwrap_err()
    .to_string();
    for expected in [
        "drain config: drainConfig.timeout must be greater than or equal to 0",
        "drain config: drainConfig.gracePeriod must be greater than or equal to 0",
    ] {
        assert!(text.contains(expected), "{text}");
    }
    let both = validate_skyhook(
        &spec("{drainConfig: {force: false}, drain: {force: false}}"),
        &ValidationContext::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        both.contains("spec.drain and spec.drainConfig are both set"),
        "{both}"
    );
    assert!(both.contains("remove spec.drain"), "{both}");
    let valid = spec(
        "drainConfig: {disableEviction: true, deleteEmptyDirData: false, force: false, ignoreDaemonSets: false, timeout: 5m, gracePeriod: 30s, podSelector: {matchLabels: {keep: 'yes'}}, onTimeout: wait}",
    );
    assert_eq!(
        validate_skyhook(&valid, &ValidationContext::default()),
        Ok(())
    );
}

#[test]
fn the_deprecated_drain_field_is_warned_about() {
    let warnings = admission_warnings(&spec("drain: {force: false}"));
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("spec.drain is deprecated; use spec.drainConfig")),
        "{warnings:?}"
    );
    assert!(admission_warnings(&spec("drainConfig: {force: false}")).is_empty());
}

#[test]
fn duration_violations_name_the_field_and_the_fix() {
    let violations = validate_skyhook(
        &spec("drain: {timeout: -5m}\nrebootDeadline: soon"),
        &ValidationContext::default(),
    )
    .unwrap_err();
    let text = violations.to_string();
    assert!(text.contains("spec.drain.timeout"), "{text}");
    assert!(text.contains("negative"), "{text}");
    assert!(text.contains("spec.rebootDeadline"), "{text}");
    assert!(text.contains("is not a duration"), "{text}");
    assert!(text.contains("e.g. 90s, 15m or 1h30m"), "{text}");
}

#[test]
fn every_violation_is_reported_at_once() {
    let yaml = r#"
interruptionBudget: {percent: 10, count: 2}
packages:
  dexter:
    name: other
    version: v1
    image: "busybox:2"
    dependsOn: {ghost: "1"}
  spencer:
    version: "1"
    image: busybox
    resources: {cpuRequest: 1}
"#;
    let err = validate_skyhook(&spec(yaml), &ValidationContext::default()).unwrap_err();
    let fields: Vec<&str> = err.as_slice().iter().map(|v| v.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.interruptionBudget",
            "spec.packages.dexter.dependsOn.ghost",
            "spec.packages.dexter.name",
            "spec.packages.dexter.version",
            "spec.packages.spencer.resources",
        ]
    );
    let message = err.to_string();
    assert!(message.starts_with("5 problems found:"), "{message}");
    assert!(
        message.contains("spec.packages.dexter.version: invalid version \"v1\""),
        "{message}"
    );
    assert!(message.contains("(fix: "), "{message}");
    assert!(message.contains("drop the `v`"), "{message}");
}

#[test]
fn uninstall_apply_without_enabled_names_the_package_in_upstream_words() {
    let yaml = "packages: {dexter: {version: '1', image: busybox, uninstall: {enabled: false, apply: true}}}";
    let violations = validate_skyhook(&spec(yaml), &ValidationContext::default()).unwrap_err();
    assert!(
        violations.to_string().contains(
            "spec.packages.dexter.uninstall.apply: package \"dexter\": uninstall.apply requires uninstall.enabled to be true"
        ),
        "{violations}"
    );
    for allowed in [
        "{enabled: true, apply: true}",
        "{enabled: true, apply: false}",
        "{enabled: false, apply: false}",
    ] {
        let yaml =
            format!("packages: {{dexter: {{version: '1', image: busybox, uninstall: {allowed}}}}}");
        assert!(
            validate_skyhook(&spec(&yaml), &ValidationContext::default()).is_ok(),
            "{yaml}"
        );
    }
}

#[test]
fn cycle_is_named_in_the_message() {
    let yaml = "packages: {aa: {version: '1', image: busybox, dependsOn: {cc: '1'}}, bb: {version: '1', image: busybox, dependsOn: {aa: '1'}}, cc: {version: '1', image: busybox, dependsOn: {bb: '1'}}}";
    let err = validate_skyhook(&spec(yaml), &ValidationContext::default()).unwrap_err();
    assert!(err.to_string().contains("aa -> cc -> bb -> aa"), "{err}");
}

#[test]
fn policy_existence_uses_the_context() {
    let known: BTreeSet<String> = ["rollout".to_owned()].into();
    let with = |known| ValidationContext {
        name: None,
        known_policies: known,
        ..ValidationContext::default()
    };
    assert!(skyhook_fields("deploymentPolicy: rollout", &with(Some(&known))).is_empty());
    assert!(
        skyhook_fields("deploymentPolicy: missing", &with(None)).is_empty(),
        "unknown set skips the check"
    );
    let err =
        validate_skyhook(&spec("deploymentPolicy: missing"), &with(Some(&known))).unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"deploymentPolicy "missing" not found"#),
        "{err}"
    );
    assert!(
        skyhook_fields("deploymentPolicy: ''", &with(Some(&known))).is_empty(),
        "empty means none"
    );
}

#[test]
fn skyhook_names() {
    let long = "a".repeat(keys::SKYHOOK.max_skyhook_name_len());
    let too_long = "a".repeat(keys::SKYHOOK.max_skyhook_name_len() + 1);
    let cases = [
        ("simple-skyhook", true),
        ("interrupt-grouping", true),
        (long.as_str(), true),
        (too_long.as_str(), false),
        ("Demo", false),
        ("demo.example", false),
        ("-demo", false),
    ];
    for (name, ok) in cases {
        let context = ValidationContext {
            name: Some(name),
            known_policies: None,
            ..ValidationContext::default()
        };
        let fields = skyhook_fields("packages: {}", &context);
        assert_eq!(fields.is_empty(), ok, "{name}: {fields:?}");
    }
}

/// The name limit derived here from the real key builders, independently of
/// `max_skyhook_name_len`: a name of exactly the limit writes only valid keys and label values,
/// one more is rejected on `metadata.name` with the limit and the fix, and at least one key
/// would indeed be invalid with it (the limit is tight).
#[test]
fn the_name_limit_follows_from_the_keys_the_controller_writes() {
    let metadata_keys = |name: &str| -> Vec<String> {
        keys::SKYHOOK
            .per_skyhook_node_keys(name)
            .into_iter()
            .filter(|k| k.kind != NodeKeyKind::ConditionType)
            .map(|k| k.key)
            .collect()
    };
    let longest_name_part = metadata_keys("")
        .iter()
        .map(|k| k.rsplit_once('/').unwrap().1.len())
        .max()
        .unwrap();
    let max = (63 - longest_name_part).min(63);
    assert_eq!(keys::SKYHOOK.max_skyhook_name_len(), max);

    let fits = "a".repeat(max);
    let context = ValidationContext {
        name: Some(&fits),
        known_policies: None,
        ..ValidationContext::default()
    };
    assert_eq!(validate_skyhook(&spec(VALID), &context), Ok(()));
    for key in metadata_keys(&fits) {
        assert_eq!(validate_label_key(&key), Ok(()), "{key}");
    }
    assert_eq!(validate_label_value(&fits), Ok(()), "the name label value");

    let too_long = "a".repeat(max + 1);
    assert!(
        metadata_keys(&too_long)
            .iter()
            .any(|k| validate_label_key(k).is_err()),
        "a longer name breaks some key"
    );
    let context = ValidationContext {
        name: Some(&too_long),
        known_policies: None,
        ..ValidationContext::default()
    };
    let err = validate_skyhook(&spec(VALID), &context).unwrap_err();
    assert!(err.has_field("metadata.name"), "{err}");
    let message = err.to_string();
    for fragment in [
        "metadata.name".to_owned(),
        format!("more than {max}"),
        format!("shorten it to at most {max} characters"),
    ] {
        assert!(message.contains(&fragment), "{fragment:?} in {message}");
    }
}

/// Versions against the names and label values the controller builds from them: the pod label
/// `<package>-<version>`, the package ConfigMap `<skyhook>-<package>-<version>` and the pod
/// names. `(package, version, has configMap, rejected, message fragments)`.
#[test]
fn versions_must_fit_the_names_built_from_them() {
    let long_package = "p".repeat(43);
    let cases: &[(&str, &str, bool, bool, &[&str])] = &[
        ("dexter", "1.2.3", true, false, &[]),
        ("dexter", "2.3.1-TEST", true, false, &[]),
        ("dexter", "1.0.0-rc.1", true, false, &[]),
        ("dexter", "2024.05.10", true, false, &[]),
        // 43 + 1 + 19 = 63 characters: the longest label.
        (&long_package, "1.0.0-abcdefghijklm", false, false, &[]),
        (
            "dexter",
            "1.0.0-rc.1+build.5",
            false,
            true,
            &[
                "\"dexter-1.0.0-rc.1+build.5\" is not a valid label value",
                "drop the build metadata (write \"1.0.0-rc.1\")",
                "'+' cannot appear in a label value",
            ],
        ),
        (
            "dexter",
            "1.0.0+build",
            true,
            true,
            &["package ConfigMap name", "pod names"],
        ),
        (
            &long_package,
            "1.0.0-abcdefghijklmn",
            false,
            true,
            &[
                "64 characters, at most 63 allowed",
                "shorten the version to at most 19 characters",
            ],
        ),
        (
            "dexter",
            "1.0.0-averyveryverylongprereleasethatnolabelcanhold.1234567",
            false,
            true,
            &["shorten the version to at most 56 characters"],
        ),
        // A valid label value, but `.-` breaks the ConfigMap name (a DNS subdomain), which
        // exists only when the package has a configMap.
        ("dexter", "1.0.0-rc.-1", false, false, &[]),
        (
            "dexter",
            "1.0.0-rc.-1",
            true,
            true,
            &["\"demo-dexter-1.0.0-rc.-1\" is not a DNS subdomain"],
        ),
        (
            "dexter",
            "1.0.0-rc-",
            false,
            true,
            &["not a valid label value"],
        ),
    ];
    for (package, version, config_map, rejected, fragments) in cases {
        let config = if *config_map {
            ", configMap: {a.conf: x}"
        } else {
            ""
        };
        let yaml = format!(
            "packages: {{{package}: {{version: '{version}', image: ghcr.io/nvidia/skyhook/agentless{config}}}}}"
        );
        let context = ValidationContext {
            name: Some("demo"),
            known_policies: None,
            ..ValidationContext::default()
        };
        let result = validate_skyhook(&spec(&yaml), &context);
        assert_eq!(
            result.is_err(),
            *rejected,
            "{package} {version}: {result:?}"
        );
        if let Err(err) = result {
            let field = format!("spec.packages.{package}.version");
            assert_eq!(
                err.as_slice()
                    .iter()
                    .map(|v| v.field.as_str())
                    .collect::<Vec<_>>(),
                [field.as_str()],
                "{err}"
            );
            let message = err.to_string();
            for fragment in *fragments {
                assert!(message.contains(fragment), "{fragment:?} in {message}");
            }
        }
    }
}

/// The package name rule (at most 43 characters) is what keeps every container name
/// `<package>-<stage>check` a DNS label, so admission need not check them one by one.
#[test]
fn container_names_of_the_longest_package_name_are_dns_labels() {
    let longest = format!("a{}z", "-".repeat(41));
    assert_eq!(
        skyhook_fields(
            &format!("packages: {{{longest}: {{version: '1', image: busybox}}}}"),
            &ValidationContext::default()
        ),
        Vec::<String>::new()
    );
    for stage in Stage::ALL {
        for container in [
            names::copy_container_name(&longest),
            names::stage_container_name(&longest, *stage),
            names::check_container_name(&longest, *stage),
        ] {
            assert_eq!(validate_dns_label(&container), Ok(()), "{container}");
        }
    }
}

/// Before a generated name is known, the ConfigMap name is checked with the longest name.
#[test]
fn versions_are_checked_without_a_skyhook_name() {
    let yaml = "packages: {dexter: {version: '1.0.0-rc.-1', image: busybox, configMap: {a: b}}}";
    assert_eq!(
        skyhook_fields(yaml, &ValidationContext::default()),
        ["spec.packages.dexter.version"]
    );
}

#[test]
fn warnings() {
    assert!(admission_warnings(&spec("packages: {}")).is_empty());
    // A written tag that differs from the version is ignored, as upstream does, with a warning
    // that says what is pulled instead; a registry port is not mistaken for a tag.
    for (manifest, warned) in [
        (
            "packages: {dexter: {version: 1.2.3, image: 'ghcr.io/nvidia/skyhook/agentless:bogus'}}",
            true,
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: 'host:5000/x:1.2.4'}}",
            true,
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: 'host:5000/x:1.2.3'}}",
            false,
        ),
        (
            "packages: {dexter: {version: 1.2.3, image: 'host:5000/x'}}",
            false,
        ),
    ] {
        let parsed = spec(manifest);
        assert!(
            validate_skyhook(&parsed, &ValidationContext::default()).is_ok(),
            "{manifest}"
        );
        let warnings = admission_warnings(&parsed);
        assert_eq!(!warnings.is_empty(), warned, "{manifest}: {warnings:?}");
        if warned {
            assert!(
                warnings[0].starts_with("spec.packages.dexter.image: the tag"),
                "{warnings:?}"
            );
            assert!(
                warnings[0].contains(":1.2.3"),
                "names the pulled reference: {warnings:?}"
            );
        }
    }
    let w = admission_warnings(&spec("pause: true"));
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("skyhook.nvidia.com/pause"), "{w:?}");
    assert_eq!(
        admission_warnings(&spec("autoTaintNewNodes: true")).len(),
        1
    );
    assert!(admission_warnings(&spec("autoTaintNewNodes: true\nruntimeRequired: true")).is_empty());
    let w = admission_warnings(&spec("runtimeRequiredCordonAfter: true"));
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("spec.runtimeRequiredCordonAfter"), "{w:?}");
    assert!(
        admission_warnings(&spec(
            "runtimeRequiredCordonAfter: true\nruntimeRequired: true"
        ))
        .is_empty()
    );
    // prePullImages only acts before a cordon: on a Skyhook that never cordons it says so.
    let plain = "packages: {p: {version: 1.0.0, image: ghcr.io/x/p}}";
    let w = admission_warnings(&spec(&format!("prePullImages: true\n{plain}")));
    assert_eq!(w.len(), 1);
    assert!(
        w[0].starts_with("spec.prePullImages has no effect"),
        "{w:?}"
    );
    let interrupting = [
        "packages: {p: {version: 1.0.0, image: ghcr.io/x/p, interrupt: {type: reboot}}}",
        "packages: {p: {version: 1.0.0, image: ghcr.io/x/p, configInterrupts: {k: {type: reboot}}}}",
    ];
    for packages in interrupting {
        let yaml = format!("prePullImages: true\n{packages}");
        assert!(admission_warnings(&spec(&yaml)).is_empty(), "{yaml}");
    }
    assert!(admission_warnings(&spec(&format!("prePullImages: false\n{plain}"))).is_empty());
}

const POLICY: &str = r#"
default:
  budget: {percent: 100}
  strategy: {fixed: {}}
compartments:
  - name: critical
    selector: {matchLabels: {tier: critical}}
    budget: {count: 2}
    strategy: {exponential: {initialBatch: 1, growthFactor: 2, failureThreshold: 1}}
  - name: standard
    selector: {matchLabels: {tier: standard}}
    budget: {percent: 33}
"#;

#[test]
fn valid_policy_passes() {
    assert_eq!(policy_fields(POLICY), Vec::<String>::new());
}

#[test]
fn policy_rejection_table() {
    let budget = "budget: {count: 1}";
    let cases: Vec<(String, &[&str])> = vec![
        (
            "default: {budget: {percent: 10, count: 1}, strategy: {fixed: {}}}".into(),
            &["spec.default.budget"],
        ),
        ("default: {budget: {}, strategy: {fixed: {}}}".into(), &["spec.default.budget"]),
        ("default: {strategy: {fixed: {}}}".into(), &["spec.default.budget"]),
        ("default: {budget: {percent: 0}, strategy: {fixed: {}}}".into(), &["spec.default.budget.percent"]),
        ("default: {budget: {count: 0}, strategy: {fixed: {}}}".into(), &["spec.default.budget.count"]),
        ("default: {budget: {count: 1}, strategy: {}}".into(), &["spec.default.strategy"]),
        (
            "default: {budget: {count: 1}, strategy: {fixed: {}, linear: {}}}".into(),
            &["spec.default.strategy"],
        ),
        (
            "default: {budget: {count: 1}, strategy: {linear: {delta: 0, batchThreshold: 101}}}".into(),
            &["spec.default.strategy.linear.batchThreshold", "spec.default.strategy.linear.delta"],
        ),
        (
            "default: {budget: {count: 1}, strategy: {exponential: {growthFactor: 1, safetyLimit: 0, failureThreshold: 0, initialBatch: 0}}}".into(),
            &[
                "spec.default.strategy.exponential.failureThreshold",
                "spec.default.strategy.exponential.growthFactor",
                "spec.default.strategy.exponential.initialBatch",
                "spec.default.strategy.exponential.safetyLimit",
            ],
        ),
        (
            format!("default: {{{budget}, strategy: {{fixed: {{}}}}}}\ncompartments: [{{name: a, selector: {{matchLabels: {{x: '1'}}}}, {budget}}}, {{name: a, selector: {{matchLabels: {{x: '2'}}}}, {budget}}}]"),
            &["spec.compartments[1].name"],
        ),
        (
            format!("default: {{{budget}, strategy: {{fixed: {{}}}}}}\ncompartments: [{{name: __default__, selector: {{matchLabels: {{x: '1'}}}}, {budget}}}]"),
            &["spec.compartments[0].name"],
        ),
        (
            format!("default: {{{budget}, strategy: {{fixed: {{}}}}}}\ncompartments: [{{name: '', selector: {{matchLabels: {{x: '1'}}}}, {budget}}}]"),
            &["spec.compartments[0].name"],
        ),
        (
            format!("default: {{{budget}, strategy: {{fixed: {{}}}}}}\ncompartments: [{{name: a, selector: {{matchLabels: {{x: '1'}}}}, {budget}}}, {{name: b, selector: {{matchLabels: {{x: '1'}}}}, {budget}}}]"),
            &["spec.compartments[1].selector"],
        ),
        (
            format!("default: {{{budget}, strategy: {{fixed: {{}}}}}}\ncompartments: [{{name: a, selector: {{matchExpressions: [{{key: x, operator: In, values: ['1', '2']}}]}}, {budget}}}, {{name: b, selector: {{matchExpressions: [{{key: x, operator: In, values: ['2', '1']}}]}}, {budget}}}]"),
            &["spec.compartments[1].selector"],
        ),
        (
            format!("default: {{{budget}, strategy: {{fixed: {{}}}}}}\ncompartments: [{{name: a, selector: {{matchExpressions: [{{key: x, operator: Exists, values: ['1']}}]}}, {budget}}}]"),
            &["spec.compartments[0].selector.matchExpressions[0].values"],
        ),
        (
            format!("default: {{{budget}, strategy: {{fixed: {{}}}}}}\ncompartments: [{{name: a, selector: {{}}, budget: {{percent: 5, count: 1}}, strategy: {{}}}}]"),
            &["spec.compartments[0].budget", "spec.compartments[0].strategy"],
        ),
    ];
    for (yaml, want) in &cases {
        assert_eq!(policy_fields(yaml), *want, "{yaml}");
    }
}

#[test]
fn maintenance_windows_are_validated_field_by_field() {
    let head = "default: {budget: {count: 1}, strategy: {fixed: {}}}\nmaintenanceWindows:";
    #[rustfmt::skip]
    let cases: [(&str, &[&str], &str); 10] = [
        ("[{schedule: '0 2 * * 6', duration: 4h, timeZone: Europe/Berlin}, {schedule: '@daily', duration: 30m}]", &[], ""),
        ("[{schedule: '0 2 * * 6', duration: 4h, budget: {count: 1}}, {schedule: '@daily', duration: 30m, budget: {percent: 25}}]", &[], ""),
        ("[{schedule: '0 2 * * 6', duration: 4h, budget: {}}]", &["spec.maintenanceWindows[0].budget"], "neither percent nor count"),
        ("[{schedule: '0 2 * * 6', duration: 4h}, {schedule: '0 2 * * 6', duration: 4h, budget: {percent: 25, count: 1}}]", &["spec.maintenanceWindows[1].budget"], "keep only one"),
        ("[{schedule: '0 2 * * 6', duration: 4h, budget: {percent: 0}}]", &["spec.maintenanceWindows[0].budget.percent"], "outside 1-100"),
        ("[{schedule: '0 2 * *', duration: 4h}]", &["spec.maintenanceWindows[0].schedule"], "five fields"),
        ("[{schedule: '0 2 * * *', duration: 4h}, {schedule: '0 2 * * *', duration: -1h}]", &["spec.maintenanceWindows[1].duration"], "negative"),
        ("[{schedule: '0 2 * * *', duration: 0s}]", &["spec.maintenanceWindows[0].duration"], "zero"),
        ("[{schedule: '0 2 * * *', duration: 1h, timeZone: Moon/Tranquility}]", &["spec.maintenanceWindows[0].timeZone"], "IANA"),
        ("[{schedule: x, duration: y, timeZone: z}]", &["spec.maintenanceWindows[0].duration", "spec.maintenanceWindows[0].schedule", "spec.maintenanceWindows[0].timeZone"], "Go duration"),
    ];
    for (windows, fields, fragment) in cases {
        let yaml = format!("{head} {windows}");
        assert_eq!(policy_fields(&yaml), *fields, "{yaml}");
        if let Err(violations) = validate_policy(&policy(&yaml)) {
            let message = violations.to_string();
            assert!(message.contains(fragment), "{message}");
        }
    }
}

#[test]
fn budget_topologies_are_validated_wherever_a_budget_is() {
    #[rustfmt::skip]
    let policies: [(&str, &[&str], &str); 6] = [
        ("default: {budget: {count: 2, topology: {key: nvidia.com/gpu.clique, maxDomains: 1, maxPerDomain: 2}}, strategy: {fixed: {}}}", &[], ""),
        ("default: {budget: {count: 2, topology: {key: 'not a key', maxDomains: 1}}, strategy: {fixed: {}}}", &["spec.default.budget.topology.key"], "not a node label key"),
        ("default: {budget: {count: 2, topology: {key: rack}}, strategy: {fixed: {}}}", &["spec.default.budget.topology"], "limits nothing"),
        ("default: {budget: {count: 2, topology: {key: rack, maxPerDomain: 0}}, strategy: {fixed: {}}}", &["spec.default.budget.topology.maxPerDomain"], "below 1"),
        ("default: {budget: {count: 1}, strategy: {fixed: {}}}\ncompartments: [{name: gpu, selector: {matchLabels: {a: b}}, budget: {count: 1, topology: {key: rack, maxDomains: 0}}}]", &["spec.compartments[0].budget.topology.maxDomains"], "below 1"),
        ("default: {budget: {count: 1}, strategy: {fixed: {}}}\nmaintenanceWindows: [{schedule: '@daily', duration: 1h, budget: {count: 1, topology: {key: rack, maxDomains: 1}}}]", &["spec.maintenanceWindows[0].budget.topology"], "compartment's own topology"),
    ];
    for (yaml, fields, fragment) in policies {
        assert_eq!(policy_fields(yaml), *fields, "{yaml}");
        if let Err(violations) = validate_policy(&policy(yaml)) {
            let message = violations.to_string();
            assert!(message.contains(fragment), "{message}");
        }
    }
    #[rustfmt::skip]
    let skyhooks: [(&str, &[&str]); 4] = [
        ("interruptionBudget: {count: 2, topology: {key: rack, maxDomains: 1, allowUnlabelled: true}}", &[]),
        ("interruptionBudget: {count: 2, topology: {key: rack}}", &["spec.interruptionBudget.topology"]),
        ("interruptionBudget: {topology: {key: '', maxDomains: -1}}", &["spec.interruptionBudget.topology.key", "spec.interruptionBudget.topology.maxDomains"]),
        ("{deploymentPolicy: p, interruptionBudget: {topology: {key: rack, maxDomains: 1}}}", &["spec.deploymentPolicy"]),
    ];
    for (yaml, fields) in skyhooks {
        assert_eq!(
            skyhook_fields(yaml, &ValidationContext::default()),
            *fields,
            "{yaml}"
        );
    }
}

#[test]
fn the_health_gate_settle_is_a_go_duration_of_zero_or_more() {
    let head = "default: {budget: {count: 1}, strategy: {fixed: {}}}\nhealthGate:";
    #[rustfmt::skip]
    let cases: [(&str, &[&str], &str); 5] = [
        ("{settle: 5m}", &[], ""),
        ("{settle: 0s}", &[], ""),
        ("{settle: -5m}", &["spec.healthGate.settle"], "negative"),
        ("{settle: soon}", &["spec.healthGate.settle"], "not a duration"),
        ("{settle: 5 minutes}", &["spec.healthGate.settle"], "Go duration"),
    ];
    for (gate, fields, fragment) in cases {
        let yaml = format!("{head} {gate}");
        assert_eq!(policy_fields(&yaml), *fields, "{yaml}");
        if let Err(violations) = validate_policy(&policy(&yaml)) {
            let message = violations.to_string();
            assert!(message.contains(fragment), "{message}");
        }
    }
}

#[test]
fn policy_defaults() {
    let defaulted = default_policy(&policy(POLICY));
    let fixed = defaulted.default.strategy.fixed.as_ref().unwrap();
    assert_eq!(
        (
            fixed.initial_batch,
            fixed.batch_threshold,
            fixed.safety_limit
        ),
        (Some(1), Some(100), Some(50))
    );
    assert_eq!(
        fixed.failure_threshold, None,
        "failureThreshold stays unset"
    );
    let exponential = defaulted.compartments[0]
        .strategy
        .as_ref()
        .unwrap()
        .exponential
        .as_ref()
        .unwrap();
    assert_eq!(exponential.growth_factor, Some(2));
    assert_eq!(
        exponential.failure_threshold,
        Some(1),
        "explicit values are kept"
    );
    assert!(
        defaulted.compartments[1].strategy.is_none(),
        "absent strategies stay absent"
    );
    let linear = default_policy(&policy(
        "default: {budget: {count: 1}, strategy: {linear: {initialBatch: 3}}}",
    ));
    let linear = linear.default.strategy.linear.unwrap();
    assert_eq!(
        (linear.initial_batch, linear.delta, linear.batch_threshold),
        (Some(3), Some(1), Some(100))
    );
    // Defaulting is idempotent and keeps the policy valid.
    assert_eq!(default_policy(&defaulted), defaulted);
    assert!(validate_policy(&defaulted).is_ok());
}

#[test]
fn delete_protection() {
    let skyhook = |name: &str, policy: Option<&str>| {
        let mut s = Skyhook::new(name, SkyhookSpec::default());
        s.spec.deployment_policy = policy.map(Into::into);
        PolicyReference::from(&s)
    };
    let skyhooks = [
        skyhook("b", Some("rollout")),
        skyhook("c", None),
        skyhook("a", Some("rollout")),
        skyhook("d", Some("other")),
    ];
    let blockers = policy_delete_blockers("rollout", &skyhooks);
    assert_eq!(blockers, ["a", "b"]);
    assert!(policy_delete_message("rollout", &blockers).contains("still referenced by"));
    assert!(policy_delete_blockers("unused", &skyhooks).is_empty());
}

/// Every Skyhook and DeploymentPolicy shipped under `examples/` passes validation (the policies
/// after defaulting, as the mutating webhook would apply it first), with the policies they
/// reference known.
#[test]
fn examples_pass_validation() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut documents = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let value = Value::deserialize(doc).unwrap();
                if !value.is_null() {
                    documents.push((path.display().to_string(), value));
                }
            }
        }
    }
    let policies: Vec<DeploymentPolicy> = documents
        .iter()
        .filter(|(_, v)| v["kind"] == "DeploymentPolicy")
        .map(|(_, v)| serde_json::from_value(v.clone()).unwrap())
        .collect();
    let known: BTreeSet<String> = policies
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    for p in &policies {
        validate_policy(&default_policy(&p.spec))
            .unwrap_or_else(|e| panic!("{:?}: {e}", p.metadata.name));
    }
    let mut skyhooks = 0;
    for (path, value) in documents.iter().filter(|(_, v)| v["kind"] == "Skyhook") {
        let skyhook: Skyhook = serde_json::from_value(value.clone()).unwrap();
        let context = ValidationContext {
            name: skyhook.metadata.name.as_deref(),
            known_policies: Some(&known),
            ..ValidationContext::default()
        };
        validate_skyhook(&skyhook.spec, &context).unwrap_or_else(|e| panic!("{path}: {e}"));
        skyhooks += 1;
    }
    assert!(skyhooks >= 2, "the seed examples are present");
}

#[test]
fn stage_timeout_must_be_zero_or_more_in_upstream_words() {
    let cases: &[(&str, Option<&str>)] = &[
        ("30m", None),
        ("1h30m", None),
        ("0", None),
        ("0s", None),
        (
            "-5m",
            Some(
                "spec.packages.dexter.stageTimeout: package \"dexter\": stageTimeout must be greater than or equal to 0",
            ),
        ),
        (
            "ten minutes",
            Some(
                "spec.packages.dexter.stageTimeout: package \"dexter\": stageTimeout \"ten minutes\" is not a duration",
            ),
        ),
    ];
    for (timeout, want) in cases {
        let yaml = format!(
            "packages: {{dexter: {{version: '1', image: busybox, stageTimeout: '{timeout}'}}}}"
        );
        let got = validate_skyhook(&spec(&yaml), &ValidationContext::default());
        match (got, want) {
            (Ok(()), None) => {}
            (Err(violations), Some(want)) => {
                assert!(
                    violations.to_string().contains(want),
                    "{timeout}: {violations}"
                );
            }
            (got, want) => panic!("{timeout}: got {got:?}, want {want:?}"),
        }
    }
}

/// A NodeWright follows upstream v0.20: an image with its own tag or digest is refused (in
/// upstream's words), where the seeds' Skyhook keeps it with a warning.
#[test]
fn a_nodewright_image_carries_no_tag_or_digest() {
    use skyhook_api::generation::Group;
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let cases = [
        ("ghcr.io/x/p", None),
        ("registry.local:5000/x/p", None),
        (
            "ghcr.io/x/p:1.0.0",
            Some(
                "contains an inline tag '1.0.0'. Do not embed a tag in the image; the package version supplies the tag",
            ),
        ),
        (
            "registry.local:5000/x/p:2.0",
            Some("contains an inline tag '2.0'"),
        ),
        (
            &*format!("ghcr.io/x/p@{digest}"),
            Some(
                "contains an inline digest. Do not embed a digest in the image; pin the image bytes using the package's containerSHA field instead",
            ),
        ),
    ];
    for (image, refused) in cases {
        let yaml = format!("packages: {{pkg: {{version: 1.0.0, image: \"{image}\"}}}}");
        let nodewright = ValidationContext {
            group: Group::NodeWright,
            ..ValidationContext::default()
        };
        let result = validate_skyhook(&spec(&yaml), &nodewright);
        match refused {
            None => assert_eq!(result, Ok(()), "{image}"),
            Some(words) => {
                let violations = result.expect_err(image);
                let [violation] = violations.as_slice() else {
                    panic!("{image}: {violations}");
                };
                assert_eq!(violation.field, "spec.packages.pkg.image");
                assert!(
                    violation
                        .message
                        .starts_with(&format!("error package pkg's image '{image}' "))
                        && violation.message.contains(words),
                    "{image}: {}",
                    violation.message
                );
            }
        }
        let tagged_is_fine_on_a_skyhook = !image.contains('@');
        if tagged_is_fine_on_a_skyhook {
            assert_eq!(
                validate_skyhook(&spec(&yaml), &ValidationContext::default()),
                Ok(()),
                "{image}"
            );
        }
    }
    let tagged = spec("packages: {pkg: {version: 1.0.0, image: ghcr.io/x/p:0.9.0}}");
    assert!(skyhook_api::validate::group_admission_warnings(Group::NodeWright, &tagged).is_empty());
    assert_eq!(
        skyhook_api::validate::group_admission_warnings(Group::Skyhook, &tagged).len(),
        1
    );
}
