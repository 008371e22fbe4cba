//! The Helm chart without a cluster (upstream's helm-template suite, spec §6.3): `helm lint`, and
//! `helm template` for the default values and many non-default sets, with assertions on the
//! parsed manifests; the render-time errors; values.schema.json refusing wrong types; and the
//! flags and variables the chart passes being ones the binaries read.

use anyhow::{Context, ensure};
use e2e::{helm, rbac};
use serde_json::{Value, json};

fn kind_of(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name_of(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn all<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|doc| kind_of(doc) == kind).collect()
}

fn one<'a>(docs: &'a [Value], kind: &str, name: &str) -> anyhow::Result<&'a Value> {
    docs.iter()
        .find(|doc| kind_of(doc) == kind && name_of(doc) == name)
        .with_context(|| {
            let present: Vec<String> = docs
                .iter()
                .map(|doc| format!("{}/{}", kind_of(doc), name_of(doc)))
                .collect();
            format!("no {kind} {name} among {present:?}")
        })
}

fn names(docs: &[Value], kind: &str) -> Vec<String> {
    all(docs, kind)
        .into_iter()
        .map(|doc| name_of(doc).to_owned())
        .collect()
}

const CONTROLLER: &str = "skyhook-operator-controller-manager";
const WEBHOOK: &str = "skyhook-operator-webhook";
const CLEANUP_SKYHOOKS: &str = "skyhook-operator-cleanup-skyhooks";
const CLEANUP_WEBHOOK: &str = "skyhook-operator-cleanup-webhook";

/// The pod spec of a Deployment or Job.
fn pod_spec(doc: &Value) -> &Value {
    &doc["spec"]["template"]["spec"]
}

/// Every container of a pod spec, init containers first.
fn containers(pod: &Value) -> Vec<&Value> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|key| pod[*key].as_array().into_iter().flatten())
        .collect()
}

fn env_of<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"]
        .as_array()?
        .iter()
        .find(|env| env["name"] == name)
}

fn controller_container(docs: &[Value]) -> anyhow::Result<Value> {
    let deployment = one(docs, "Deployment", CONTROLLER)?;
    Ok(pod_spec(deployment)["containers"][0].clone())
}

#[test]
fn helm_lint_passes_strictly() -> anyhow::Result<()> {
    let chart = helm::chart_dir();
    let output = helm::run(&[
        "lint",
        "--strict",
        &chart.to_string_lossy(),
        "--namespace",
        "skyhook",
        "--kube-version",
        helm::KUBE_VERSION,
    ])?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "helm lint --strict failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(stdout.contains("0 chart(s) failed"), "{stdout}");
    Ok(())
}

#[test]
fn the_setup_script_builds_the_helm_version_the_tests_look_for() -> anyhow::Result<()> {
    let script = std::fs::read_to_string(e2e::workspace().join("scripts/setup.d/20-helm.sh"))?;
    let expected = format!("\nversion={}\n", helm::HELM_VERSION);
    ensure!(
        script.contains(&expected),
        "scripts/setup.d/20-helm.sh does not pin {}",
        helm::HELM_VERSION
    );
    let output = helm::run(&["version", "--short"])?;
    let version = String::from_utf8_lossy(&output.stdout);
    ensure!(
        version.starts_with(helm::HELM_VERSION),
        "helm says {version}"
    );
    Ok(())
}

#[test]
fn default_values_render_the_whole_operator() -> anyhow::Result<()> {
    let docs = helm::render(&[], &[])?;
    let expected_kinds = [
        ("Deployment", vec![CONTROLLER, WEBHOOK]),
        ("PodDisruptionBudget", vec![CONTROLLER, WEBHOOK]),
        (
            "Service",
            vec![
                "skyhook-operator-controller-manager-metrics-service",
                "skyhook-operator-webhook-service",
            ],
        ),
        (
            "ServiceAccount",
            vec![CONTROLLER, WEBHOOK, "skyhook-operator-cleanup"],
        ),
        (
            "ValidatingWebhookConfiguration",
            vec!["skyhook-operator-validating-webhook"],
        ),
        (
            "MutatingWebhookConfiguration",
            vec!["skyhook-operator-mutating-webhook"],
        ),
        ("LimitRange", vec!["skyhook-operator-limit-range"]),
        ("NetworkPolicy", vec!["skyhook-operator-allow-all"]),
        ("Job", vec![CLEANUP_SKYHOOKS, CLEANUP_WEBHOOK]),
        // The skyhook group's CRDs are in crds/, which `helm template` leaves out; the
        // nodewright group's are templates, so that `helm upgrade` installs them.
        (
            "CustomResourceDefinition",
            vec![
                "nodewrights.nodewright.nvidia.com",
                "deploymentpolicies.nodewright.nvidia.com",
            ],
        ),
    ];
    for (kind, wanted) in expected_kinds {
        let mut found = names(&docs, kind);
        found.sort();
        let mut wanted: Vec<String> = wanted.into_iter().map(str::to_owned).collect();
        wanted.sort();
        ensure!(found == wanted, "{kind}: {found:?}, wanted {wanted:?}");
    }
    for crd in docs
        .iter()
        .filter(|d| kind_of(d) == "CustomResourceDefinition")
    {
        ensure!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep",
            "{} is kept on uninstall, as upstream's",
            name_of(crd)
        );
    }
    // Namespaced objects all land in the release namespace.
    for doc in &docs {
        let namespace = &doc["metadata"]["namespace"];
        ensure!(
            namespace.is_null() || namespace == "skyhook",
            "{}/{} in {namespace}",
            kind_of(doc),
            name_of(doc)
        );
    }

    let controller = one(&docs, "Deployment", CONTROLLER)?;
    ensure!(controller["spec"]["replicas"] == 2);
    let manager = controller_container(&docs)?;
    let env = |name: &str| env_of(&manager, name).and_then(|e| e["value"].as_str());
    ensure!(env("LEADER_ELECTION") == Some("true"));
    ensure!(env("AGENT_IMAGE") == Some("ghcr.io/skyhook-rs/skyhook-agent:0.1.0"));
    ensure!(env("IMAGE_PULL_SECRET") == Some(""));
    // Upstream's defaults for the stage Jobs.
    ensure!(env("JOB_TTL_SUCCEEDED") == Some("1h"));
    ensure!(env("JOB_TTL_FAILED") == Some("24h"));
    ensure!(env("JOB_STAGE_TIMEOUT") == Some("1h"));
    ensure!(env("JOB_BACKOFF_LIMIT") == Some("3"));
    // The chart's default is the controller's and the plugin's: one constant.
    ensure!(
        env("RUNTIME_REQUIRED_TAINT")
            == Some(skyhook_api::keys::SKYHOOK.default_runtime_required_taint),
        "RUNTIME_REQUIRED_TAINT: {:?}",
        env("RUNTIME_REQUIRED_TAINT")
    );
    ensure!(
        env_of(&manager, "NAMESPACE").map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"])
            == Some(&json!("metadata.namespace"))
    );
    ensure!(manager["image"] == "ghcr.io/skyhook-rs/skyhook-controller:0.1.0");
    ensure!(manager["livenessProbe"]["httpGet"] == json!({"path": "/healthz", "port": "probes"}));
    ensure!(manager["readinessProbe"]["httpGet"] == json!({"path": "/readyz", "port": "probes"}));
    ensure!(one(&docs, "PodDisruptionBudget", CONTROLLER)?["spec"]["minAvailable"] == 1);
    ensure!(pod_spec(controller)["hostNetwork"].is_null());
    ensure!(pod_spec(controller)["imagePullSecrets"].is_null());

    let webhook = one(&docs, "Deployment", WEBHOOK)?;
    ensure!(webhook["spec"]["replicas"] == 2);
    let args = &pod_spec(webhook)["containers"][0]["args"];
    ensure!(
        args.as_array()
            .is_some_and(|args| args.contains(&json!("--manage-certs"))),
        "{args}"
    );
    let service = one(&docs, "Service", "skyhook-operator-webhook-service")?;
    ensure!(service["spec"]["ports"][0]["port"] == 443);
    ensure!(service["spec"]["ports"][0]["targetPort"] == "webhook");

    // No opt-in extras by default.
    ensure!(
        !names(&docs, "ClusterRole")
            .iter()
            .any(|name| name.starts_with("skyhook-viewer") || name.starts_with("skyhook-editor"))
    );
    ensure!(
        !names(&docs, "ClusterRoleBinding").contains(&"skyhook-operator-metrics-reader".to_owned())
    );
    Ok(())
}

#[test]
fn webhook_configurations_follow_upstream() -> anyhow::Result<()> {
    let docs = helm::render(&[], &[])?;
    // (configuration kind, webhook, path, operations)
    let expected = [
        (
            "ValidatingWebhookConfiguration",
            "validate-skyhook.nvidia.com",
            "/validate-skyhook-nvidia-com-v1alpha1-skyhook",
            json!(["CREATE", "UPDATE"]),
            "skyhooks",
        ),
        (
            "ValidatingWebhookConfiguration",
            "validate-deploymentpolicy.nvidia.com",
            "/validate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
            json!(["CREATE", "UPDATE", "DELETE"]),
            "deploymentpolicies",
        ),
        (
            "ValidatingWebhookConfiguration",
            "validate-nodewright.nvidia.com",
            "/validate-nodewright-nvidia-com-v1alpha1-nodewright",
            json!(["CREATE", "UPDATE"]),
            "nodewrights",
        ),
        (
            "ValidatingWebhookConfiguration",
            "validate-deploymentpolicy.nodewright.nvidia.com",
            "/validate-nodewright-nvidia-com-v1alpha1-deploymentpolicy",
            json!(["CREATE", "UPDATE", "DELETE"]),
            "deploymentpolicies",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutate-nodewright.nvidia.com",
            "/mutate-nodewright-nvidia-com-v1alpha1-nodewright",
            json!(["CREATE", "UPDATE"]),
            "nodewrights",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutate-skyhook.nvidia.com",
            "/mutate-skyhook-nvidia-com-v1alpha1-skyhook",
            json!(["CREATE", "UPDATE"]),
            "skyhooks",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutate-deploymentpolicy.nvidia.com",
            "/mutate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
            json!(["CREATE", "UPDATE"]),
            "deploymentpolicies",
        ),
    ];
    for (kind, webhook, path, operations, resource) in expected {
        let configuration = all(&docs, kind)
            .into_iter()
            .next()
            .with_context(|| format!("no {kind}"))?;
        let entry = configuration["webhooks"]
            .as_array()
            .and_then(|hooks| hooks.iter().find(|hook| hook["name"] == webhook))
            .with_context(|| format!("no webhook {webhook} in {kind}"))?;
        let client = &entry["clientConfig"]["service"];
        ensure!(client["path"] == path, "{webhook}: {client}");
        ensure!(client["name"] == "skyhook-operator-webhook-service");
        ensure!(client["namespace"] == "skyhook");
        ensure!(entry["clientConfig"]["caBundle"].is_null(), "{webhook}");
        ensure!(entry["failurePolicy"] == "Fail", "{webhook}");
        ensure!(entry["sideEffects"] == "None", "{webhook}");
        ensure!(entry["timeoutSeconds"] == 10, "{webhook}");
        ensure!(entry["rules"][0]["operations"] == operations, "{webhook}");
        ensure!(
            entry["rules"][0]["resources"] == json!([resource]),
            "{webhook}"
        );
    }
    Ok(())
}

#[test]
fn every_pod_is_hardened_and_tokens_come_through_a_projected_volume() -> anyhow::Result<()> {
    let docs = helm::render(&[], &[])?;
    let workloads: Vec<&Value> = docs
        .iter()
        .filter(|doc| matches!(kind_of(doc), "Deployment" | "Job"))
        .collect();
    ensure!(workloads.len() == 4, "{} workloads", workloads.len());
    for workload in workloads {
        let what = format!("{}/{}", kind_of(workload), name_of(workload));
        let pod = pod_spec(workload);
        ensure!(
            pod["securityContext"]["runAsNonRoot"] == true
                && pod["securityContext"]["runAsUser"] == 10001
                && pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault",
            "{what}: {}",
            pod["securityContext"]
        );
        ensure!(pod["automountServiceAccountToken"] == false, "{what}");
        ensure!(
            pod["volumes"]
                .as_array()
                .is_some_and(
                    |volumes| volumes.iter().any(
                        |volume| volume["projected"]["sources"][0]["serviceAccountToken"]["path"]
                            == "token"
                    )
                ),
            "{what}: no projected token"
        );
        for container in containers(pod) {
            let security = &container["securityContext"];
            ensure!(
                security["readOnlyRootFilesystem"] == true
                    && security["allowPrivilegeEscalation"] == false
                    && security["capabilities"]["drop"] == json!(["ALL"])
                    && security["runAsNonRoot"] == true,
                "{what}/{}: {security}",
                container["name"]
            );
            ensure!(
                container["resources"]["limits"].is_object()
                    && container["resources"]["requests"].is_object(),
                "{what}/{}: no resources",
                container["name"]
            );
        }
    }
    Ok(())
}

#[test]
fn limit_range_has_upstream_defaults_and_can_be_turned_off() -> anyhow::Result<()> {
    let docs = helm::render(&[], &[])?;
    let range = one(&docs, "LimitRange", "skyhook-operator-limit-range")?;
    ensure!(
        range["spec"]["limits"][0]
            == json!({
                "type": "Container",
                "default": {"cpu": "500m", "memory": "512Mi"},
                "defaultRequest": {"cpu": "250m", "memory": "256Mi"},
            }),
        "{range}"
    );
    for off in ["limitRange=null", "limitRange=false"] {
        let docs = helm::render(&[], &[off])?;
        ensure!(all(&docs, "LimitRange").is_empty(), "{off}");
    }
    Ok(())
}

#[test]
fn cleanup_job_resources_follow_the_limit_range_or_fall_back() -> anyhow::Result<()> {
    let limit_range = json!({
        "limits": {"cpu": "500m", "memory": "512Mi"},
        "requests": {"cpu": "250m", "memory": "256Mi"},
    });
    let fallback = json!({
        "limits": {"cpu": "200m", "memory": "128Mi"},
        "requests": {"cpu": "100m", "memory": "64Mi"},
    });
    // (case, --set-json values, expected resources of every cleanup container)
    let cases = [
        ("default LimitRange", vec![], limit_range),
        ("limitRange null", vec!["limitRange=null"], fallback.clone()),
        ("limitRange false", vec!["limitRange=false"], fallback),
        (
            "custom LimitRange",
            vec![
                r#"limitRange={"default":{"cpu":"1","memory":"1Gi"},"defaultRequest":{"cpu":"100m","memory":"128Mi"}}"#,
            ],
            json!({
                "limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "100m", "memory": "128Mi"},
            }),
        ),
        (
            "explicit cleanup resources",
            vec![
                r#"cleanup.resources={"limits":{"cpu":"300m","memory":"300Mi"},"requests":{"cpu":"30m","memory":"30Mi"}}"#,
            ],
            json!({
                "limits": {"cpu": "300m", "memory": "300Mi"},
                "requests": {"cpu": "30m", "memory": "30Mi"},
            }),
        ),
    ];
    for (case, set_json, expected) in cases {
        let docs = helm::render(&[], &set_json)?;
        let jobs = all(&docs, "Job");
        ensure!(jobs.len() == 2, "{case}: {} jobs", jobs.len());
        for job in jobs {
            for container in containers(pod_spec(job)) {
                ensure!(
                    container["resources"] == expected,
                    "{case}: {}/{}: {}",
                    name_of(job),
                    container["name"],
                    container["resources"]
                );
            }
        }
    }
    Ok(())
}

#[test]
fn cleanup_jobs_delete_skyhooks_then_policies_and_the_webhook_secret() -> anyhow::Result<()> {
    let docs = helm::render(&[], &[])?;
    let skyhooks = one(&docs, "Job", CLEANUP_SKYHOOKS)?;
    ensure!(skyhooks["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete");
    let steps: Vec<&Value> = containers(pod_spec(skyhooks))
        .into_iter()
        .map(|container| &container["args"][1])
        .collect();
    ensure!(
        steps
            == [
                &json!("skyhooks.skyhook.nvidia.com"),
                &json!("deploymentpolicies.skyhook.nvidia.com")
            ],
        "{steps:?}"
    );
    let webhook = one(&docs, "Job", CLEANUP_WEBHOOK)?;
    ensure!(
        pod_spec(webhook)["containers"][0]["args"]
            .as_array()
            .is_some_and(|args| args.starts_with(&[
                json!("delete"),
                json!("secret"),
                json!("webhook-cert")
            ])),
        "{}",
        pod_spec(webhook)["containers"][0]["args"]
    );
    Ok(())
}

#[test]
fn webhook_and_cleanup_are_gated_by_their_flags() -> anyhow::Result<()> {
    // (case, --set values, jobs, webhook objects present)
    let cases: [(&str, &[&str], &[&str], bool); 5] = [
        ("defaults", &[], &[CLEANUP_SKYHOOKS, CLEANUP_WEBHOOK], true),
        (
            "webhook off",
            &["webhook.enable=false"],
            &[CLEANUP_SKYHOOKS],
            false,
        ),
        (
            "cleanup off",
            &["cleanup.enabled=false"],
            &[CLEANUP_WEBHOOK],
            true,
        ),
        (
            "both off",
            &["webhook.enable=false", "cleanup.enabled=false"],
            &[],
            false,
        ),
        (
            "cert-manager certificates (no Secret of the webhook's own to clean)",
            &["webhook.certificates.mode=cert-manager"],
            &[CLEANUP_SKYHOOKS],
            true,
        ),
    ];
    for (case, set, jobs, webhook) in cases {
        let docs = helm::render(set, &[])?;
        let mut found = names(&docs, "Job");
        found.sort();
        ensure!(found == jobs, "{case}: jobs {found:?}");
        for kind in [
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ] {
            ensure!(
                all(&docs, kind).len() == usize::from(webhook),
                "{case}: {kind}"
            );
        }
        ensure!(
            names(&docs, "Deployment").contains(&WEBHOOK.to_owned()) == webhook,
            "{case}: webhook Deployment"
        );
        ensure!(
            names(&docs, "ServiceAccount").contains(&"skyhook-operator-cleanup".to_owned())
                != jobs.is_empty(),
            "{case}: cleanup ServiceAccount"
        );
    }
    Ok(())
}

/// (case, namespace, --set values, --set-json values, expected message part)
type RenderErrorCase<'a> = (&'a str, &'a str, &'a [&'a str], &'a [&'a str], &'a str);

#[test]
fn invalid_combinations_fail_to_render_with_a_fix() -> anyhow::Result<()> {
    // (case, namespace, --set values, --set-json values, expected message part)
    let cases: [RenderErrorCase<'_>; 6] = [
        (
            "default namespace",
            "default",
            &[],
            &[],
            "must not be installed into the \"default\" namespace",
        ),
        (
            "selectors with node affinity",
            "skyhook",
            &["controllerManager.selectors.pool=system"],
            &[
                r#"controllerManager.nodeAffinity.matchExpressions=[{"key":"pool","operator":"In","values":["system"]}]"#,
            ],
            "controllerManager.selectors and controllerManager.nodeAffinity.matchExpressions cannot both be set",
        ),
        (
            "controller PDB as large as the replicas",
            "skyhook",
            &["controllerManager.podDisruptionBudget.minAvailable=2"],
            &[],
            "controllerManager.podDisruptionBudget.minAvailable (2) must be below controllerManager.replicas (2)",
        ),
        (
            "webhook PDB larger than the replicas",
            "skyhook",
            &["webhook.replicas=1"],
            &[],
            "webhook.podDisruptionBudget.minAvailable (1) must be below webhook.replicas (1)",
        ),
        (
            "existing Secret without its CA",
            "skyhook",
            &["webhook.certificates.mode=secret"],
            &[],
            "webhook.certificates.mode \"secret\" needs webhook.certificates.caBundle",
        ),
        (
            "replicas without leader election",
            "skyhook",
            &["controllerManager.manager.env.leaderElection=false"],
            &[],
            "enable leader election or set replicas to 1",
        ),
    ];
    for (case, namespace, set, set_json, message) in cases {
        let output = helm::template("skyhook-operator", namespace, set, set_json)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(!output.status.success(), "{case}: rendered");
        ensure!(stderr.contains(message), "{case}: {stderr}");
    }
    // The fixes render.
    let fixed: [&[&str]; 3] = [
        &[
            "controllerManager.podDisruptionBudget.minAvailable=1",
            "controllerManager.replicas=3",
        ],
        &[
            "webhook.replicas=1",
            "webhook.podDisruptionBudget.minAvailable=null",
        ],
        &[
            "controllerManager.replicas=1",
            "controllerManager.podDisruptionBudget.minAvailable=0",
            "controllerManager.manager.env.leaderElection=false",
        ],
    ];
    for set in fixed {
        helm::render(set, &[])?;
    }
    Ok(())
}

#[test]
fn the_schema_refuses_values_of_the_wrong_type() -> anyhow::Result<()> {
    // (--set-json value, the path helm's schema error names)
    let cases = [
        ("estimatedNodeCount=\"many\"", "/estimatedNodeCount"),
        ("estimatedNodeCount=0", "/estimatedNodeCount"),
        ("estimatedPackageCount=1.5", "/estimatedPackageCount"),
        (
            "controllerManager.replicas=\"2\"",
            "/controllerManager/replicas",
        ),
        ("useHostNetwork=\"yes\"", "/useHostNetwork"),
        ("imagePullSecret=[\"a\"]", "/imagePullSecret"),
        ("webhook.enable=1", "/webhook/enable"),
        (
            "webhook.certificates.mode=\"vault\"",
            "/webhook/certificates/mode",
        ),
        ("webhook.timeoutSeconds=60", "/webhook/timeoutSeconds"),
        (
            "controllerManager.tolerations={}",
            "/controllerManager/tolerations",
        ),
        (
            "controllerManager.manager.env.logLevel=\"verbose\"",
            "/controllerManager/manager/env/logLevel",
        ),
        (
            "controllerManager.manager.env.copyDirRoot=\"var/lib\"",
            "/controllerManager/manager/env/copyDirRoot",
        ),
        (
            "controllerManager.manager.image.digest=\"latest\"",
            "/controllerManager/manager/image/digest",
        ),
        (
            "controllerManager.manager.env.jobTtlFailed=\"1 day\"",
            "/controllerManager/manager/env/jobTtlFailed",
        ),
        (
            "controllerManager.manager.env.jobStageTimeout=\"-5m\"",
            "/controllerManager/manager/env/jobStageTimeout",
        ),
        (
            "controllerManager.manager.env.jobBackoffLimit=-1",
            "/controllerManager/manager/env/jobBackoffLimit",
        ),
        ("limitRange=true", "/limitRange"),
        (
            "limitRange={\"default\":{\"cpu\":\"lots\"},\"defaultRequest\":{}}",
            "/limitRange",
        ),
        (
            "cleanup.jobTimeoutSeconds=\"2m\"",
            "/cleanup/jobTimeoutSeconds",
        ),
        (
            "rbac.createSkyhookViewerRole=\"true\"",
            "/rbac/createSkyhookViewerRole",
        ),
        ("webhok={\"enable\":false}", "webhok"),
    ];
    for (value, path) in cases {
        let output = helm::template("skyhook-operator", "skyhook", &[], &[value])?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(!output.status.success(), "{value}: rendered");
        ensure!(stderr.contains(path), "{value}: {stderr}");
    }
    Ok(())
}

#[test]
fn viewer_and_editor_roles_are_opt_in() -> anyhow::Result<()> {
    let docs = helm::render(
        &[
            "rbac.createSkyhookViewerRole=true",
            "rbac.createSkyhookEditorRole=true",
        ],
        &[],
    )?;
    let viewer = one(&docs, "ClusterRole", "skyhook-viewer-role")?;
    ensure!(viewer["rules"][0]["verbs"] == json!(["get", "list", "watch"]));
    let editor = one(&docs, "ClusterRole", "skyhook-editor-role")?;
    ensure!(
        editor["rules"][0]["verbs"]
            .as_array()
            .is_some_and(|verbs| verbs.contains(&json!("delete")))
    );
    Ok(())
}

#[test]
fn chart_rbac_is_what_the_components_do() -> anyhow::Result<()> {
    let docs = helm::render(&[], &[])?;
    for (account, sends, must_not) in [
        (
            CONTROLLER,
            rbac::CONTROLLER_SENDS,
            rbac::CONTROLLER_MUST_NOT,
        ),
        (WEBHOOK, rbac::WEBHOOK_SENDS, rbac::WEBHOOK_MUST_NOT),
    ] {
        let cluster_rules = &one(&docs, "ClusterRole", account)?["rules"];
        let namespaced_rules = &one(&docs, "Role", account)?["rules"];
        let allowed = |request: &rbac::Request| {
            rbac::allowed_by(cluster_rules, false, request)
                || rbac::allowed_by(namespaced_rules, true, request)
        };
        for (requests, expected) in [(sends, true), (must_not, false)] {
            let wrong: Vec<&rbac::Request> =
                requests.iter().filter(|r| allowed(r) != expected).collect();
            ensure!(
                wrong.is_empty(),
                "{account} should {}be allowed: {wrong:#?}",
                if expected { "" } else { "not " }
            );
        }
    }
    Ok(())
}

#[test]
fn stage_job_settings_reach_the_controller() -> anyhow::Result<()> {
    // The example values file, passed value by value.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/chart-values/stage-jobs.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let values: Value = serde_yaml::from_str(&text)?;
    let example = values["controllerManager"]["manager"]["env"]
        .as_object()
        .context("the example sets controllerManager.manager.env")?;
    let set_json: Vec<String> = example
        .iter()
        .map(|(key, value)| format!("controllerManager.manager.env.{key}={value}"))
        .collect();
    let set_json: Vec<&str> = set_json.iter().map(String::as_str).collect();
    let manager = controller_container(&helm::render(&[], &set_json)?)?;
    let env =
        |name: &str| env_of(&manager, name).and_then(|e| e["value"].as_str().map(str::to_owned));
    for (variable, key) in [
        ("JOB_STAGE_TIMEOUT", "jobStageTimeout"),
        ("JOB_BACKOFF_LIMIT", "jobBackoffLimit"),
        ("JOB_TTL_SUCCEEDED", "jobTtlSucceeded"),
        ("JOB_TTL_FAILED", "jobTtlFailed"),
        ("PACKAGE_PRIORITY_CLASS_NAME", "packagePriorityClassName"),
    ] {
        ensure!(
            env(variable).as_deref() == example[key].as_str(),
            "{variable}: {:?}",
            env(variable)
        );
    }
    // Zero is a value, not "unset": no timeout and a single attempt, also written as numbers.
    let manager = controller_container(&helm::render(
        &[],
        &[
            "controllerManager.manager.env.jobStageTimeout=0",
            "controllerManager.manager.env.jobBackoffLimit=0",
        ],
    )?)?;
    let env =
        |name: &str| env_of(&manager, name).and_then(|e| e["value"].as_str().map(str::to_owned));
    ensure!(env("JOB_STAGE_TIMEOUT").as_deref() == Some("0"));
    ensure!(env("JOB_BACKOFF_LIMIT").as_deref() == Some("0"));
    Ok(())
}

#[test]
fn image_pull_secret_reaches_every_pod_and_the_package_pods() -> anyhow::Result<()> {
    let docs = helm::render(&["imagePullSecret=regcred"], &[])?;
    for workload in docs
        .iter()
        .filter(|doc| matches!(kind_of(doc), "Deployment" | "Job"))
    {
        ensure!(
            pod_spec(workload)["imagePullSecrets"] == json!([{"name": "regcred"}]),
            "{}",
            name_of(workload)
        );
    }
    let manager = controller_container(&docs)?;
    ensure!(env_of(&manager, "IMAGE_PULL_SECRET").map(|e| &e["value"]) == Some(&json!("regcred")));
    Ok(())
}

#[test]
fn host_network_toggle() -> anyhow::Result<()> {
    let docs = helm::render(&["useHostNetwork=true"], &[])?;
    let pod = pod_spec(one(&docs, "Deployment", CONTROLLER)?);
    ensure!(pod["hostNetwork"] == true);
    ensure!(pod["dnsPolicy"] == "ClusterFirstWithHostNet");
    ensure!(pod_spec(one(&docs, "Deployment", WEBHOOK)?)["hostNetwork"].is_null());
    Ok(())
}

#[test]
fn metrics_binding_is_opt_in_and_names_the_service_account() -> anyhow::Result<()> {
    let docs = helm::render(
        &[
            "metrics.addServiceAccountBinding=true",
            "metrics.serviceAccountName=prom",
            "metrics.serviceAccountNamespace=observability",
        ],
        &[],
    )?;
    let binding = one(
        &docs,
        "ClusterRoleBinding",
        "skyhook-operator-metrics-reader",
    )?;
    ensure!(
        binding["subjects"]
            == json!([{"kind": "ServiceAccount", "name": "prom", "namespace": "observability"}])
    );
    ensure!(binding["roleRef"]["name"] == "skyhook-operator-metrics-reader");
    let service = one(
        &docs,
        "Service",
        "skyhook-operator-controller-manager-metrics-service",
    )?;
    // Secure by default, as upstream v0.18+: HTTPS on 8443, no plain-HTTP scrape annotations.
    ensure!(service["spec"]["ports"][0]["port"] == 8443);
    ensure!(service["spec"]["ports"][0]["name"] == "https");
    ensure!(service["metadata"]["annotations"]["prometheus.io/scrape"].is_null());
    let manager = controller_container(&docs)?;
    let env = |name: &str| env_of(&manager, name).and_then(|e| e["value"].as_str());
    ensure!(env("METRICS_SECURE") == Some("true"));
    ensure!(env("METRICS_PORT") == Some(":8443"));
    ensure!(manager["ports"][0]["containerPort"] == 8443);

    let plain = helm::render(&["metrics.secure=false"], &[])?;
    let service = one(
        &plain,
        "Service",
        "skyhook-operator-controller-manager-metrics-service",
    )?;
    ensure!(service["spec"]["ports"][0]["port"] == 8080);
    ensure!(service["spec"]["ports"][0]["name"] == "metrics");
    ensure!(service["metadata"]["annotations"]["prometheus.io/scrape"] == "true");
    ensure!(service["metadata"]["annotations"]["prometheus.io/port"] == "8080");
    let manager = controller_container(&plain)?;
    let env = |name: &str| env_of(&manager, name).and_then(|e| e["value"].as_str());
    ensure!(env("METRICS_SECURE") == Some("false"));
    ensure!(env("METRICS_PORT") == Some(":8080"));

    // Explicit ports win over the defaults either way.
    let explicit = helm::render(
        &[
            "controllerManager.manager.env.metricsPort=:9443",
            "metricsService.port=443",
        ],
        &[],
    )?;
    let manager = controller_container(&explicit)?;
    ensure!(env_of(&manager, "METRICS_PORT").and_then(|e| e["value"].as_str()) == Some(":9443"));
    ensure!(manager["ports"][0]["containerPort"] == 9443);
    let service = one(
        &explicit,
        "Service",
        "skyhook-operator-controller-manager-metrics-service",
    )?;
    ensure!(service["spec"]["ports"][0]["port"] == 443);
    Ok(())
}

#[test]
fn placement_is_copied_to_both_cleanup_jobs() -> anyhow::Result<()> {
    let tolerations = json!([{"key": "dedicated", "operator": "Equal", "value": "system-cpu", "effect": "NoSchedule"}]);
    let expression = json!({"key": "pool", "operator": "In", "values": ["system"]});
    let with_affinity = helm::render(
        &[],
        &[
            &format!("controllerManager.tolerations={tolerations}"),
            &format!("controllerManager.nodeAffinity.matchExpressions=[{expression}]"),
        ],
    )?;
    let with_selectors = helm::render(&["controllerManager.selectors.pool=system"], &[])?;
    for (case, docs) in [("affinity", &with_affinity), ("selectors", &with_selectors)] {
        let controller = pod_spec(one(docs, "Deployment", CONTROLLER)?).clone();
        for job in [CLEANUP_SKYHOOKS, CLEANUP_WEBHOOK] {
            let pod = pod_spec(one(docs, "Job", job)?);
            for key in ["tolerations", "nodeSelector", "affinity"] {
                ensure!(
                    pod[key] == controller[key],
                    "{case}: {job}.{key}: {}",
                    pod[key]
                );
            }
        }
        let terms = &controller["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"];
        let expressions = terms.as_array().map_or(0, Vec::len);
        // arch and os always, plus the given expression.
        let wanted = if case == "affinity" { 3 } else { 2 };
        ensure!(expressions == wanted, "{case}: {terms}");
    }
    let affinity_pod = pod_spec(one(&with_affinity, "Deployment", CONTROLLER)?);
    ensure!(affinity_pod["tolerations"] == tolerations);
    ensure!(
        pod_spec(one(&with_selectors, "Deployment", CONTROLLER)?)["nodeSelector"]
            == json!({"pool": "system"})
    );
    Ok(())
}

#[test]
fn controller_resources_are_sized_from_nodes_and_packages() -> anyhow::Result<()> {
    // (nodes, packages, cpu limit, cpu request, memory limit, memory request)
    let cases = [
        (1, 1, "1000m", "500m", "512Mi", "256Mi"),
        (400, 5, "1280m", "640m", "640Mi", "256Mi"),
        (1000, 1, "1600m", "800m", "800Mi", "400Mi"),
        (1000, 10, "6400m", "3200m", "3200Mi", "400Mi"),
        (100, 20, "1280m", "640m", "640Mi", "256Mi"),
    ];
    for (nodes, packages, cpu_limit, cpu_request, memory_limit, memory_request) in cases {
        let docs = helm::render(
            &[
                &format!("estimatedNodeCount={nodes}"),
                &format!("estimatedPackageCount={packages}"),
            ],
            &[],
        )?;
        let resources = &controller_container(&docs)?["resources"];
        ensure!(
            *resources
                == json!({
                    "limits": {"cpu": cpu_limit, "memory": memory_limit},
                    "requests": {"cpu": cpu_request, "memory": memory_request},
                }),
            "N={nodes} P={packages}: {resources}"
        );
    }
    Ok(())
}

#[test]
fn an_explicit_resources_override_wins_over_sizing() -> anyhow::Result<()> {
    let resources =
        json!({"limits": {"cpu": "3", "memory": "2Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}});
    let docs = helm::render(
        &["estimatedNodeCount=400", "estimatedPackageCount=5"],
        &[&format!("controllerManager.manager.resources={resources}")],
    )?;
    ensure!(controller_container(&docs)?["resources"] == resources);
    Ok(())
}

#[test]
fn images_take_a_digest_and_default_their_tag_to_the_app_version() -> anyhow::Result<()> {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let docs = helm::render(
        &[
            "controllerManager.manager.image.tag=v9",
            &format!("controllerManager.manager.image.digest={digest}"),
            &format!("controllerManager.manager.agent.digest={digest}"),
        ],
        &[],
    )?;
    let manager = controller_container(&docs)?;
    ensure!(manager["image"] == format!("ghcr.io/skyhook-rs/skyhook-controller:v9@{digest}"));
    ensure!(
        env_of(&manager, "AGENT_IMAGE").map(|e| &e["value"])
            == Some(&json!(format!(
                "ghcr.io/skyhook-rs/skyhook-agent:0.1.0@{digest}"
            )))
    );
    Ok(())
}

#[test]
fn certificate_modes_wire_the_webhook_differently() -> anyhow::Result<()> {
    let mode = |docs: &[Value]| -> anyhow::Result<(Value, Value, Value)> {
        let pod = pod_spec(one(docs, "Deployment", WEBHOOK)?).clone();
        let certs = pod["volumes"]
            .as_array()
            .and_then(|volumes| volumes.iter().find(|volume| volume["name"] == "certs"))
            .cloned()
            .context("no certs volume")?;
        let validating = all(docs, "ValidatingWebhookConfiguration")
            .first()
            .map(|doc| (*doc).clone())
            .context("no ValidatingWebhookConfiguration")?;
        Ok((pod["containers"][0]["args"].clone(), certs, validating))
    };

    let self_managed = helm::render(&[], &[])?;
    let (args, certs, _) = mode(&self_managed)?;
    ensure!(
        args.as_array()
            .is_some_and(|a| a.contains(&json!("--manage-certs")))
    );
    ensure!(certs["emptyDir"].is_object(), "{certs}");

    let cert_manager = helm::render(&["webhook.certificates.mode=cert-manager"], &[])?;
    let (args, certs, validating) = mode(&cert_manager)?;
    ensure!(
        !args
            .as_array()
            .is_some_and(|a| a.contains(&json!("--manage-certs")))
    );
    ensure!(certs["secret"]["secretName"] == "webhook-cert", "{certs}");
    ensure!(
        validating["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            == "skyhook/skyhook-operator-webhook"
    );
    let certificate = one(&cert_manager, "Certificate", WEBHOOK)?;
    ensure!(
        certificate["spec"]["dnsNames"]
            == json!([
                "skyhook-operator-webhook-service.skyhook.svc",
                "skyhook-operator-webhook-service.skyhook.svc.cluster.local"
            ])
    );
    ensure!(certificate["spec"]["secretName"] == "webhook-cert");
    ensure!(
        all(&cert_manager, "Issuer").len() == 2,
        "self-signed root and CA issuers"
    );
    ensure!(
        all(&cert_manager, "Role").len() == 1,
        "no Secret rights for the webhook"
    );
    let external = helm::render(
        &[
            "webhook.certificates.mode=cert-manager",
            "webhook.certificates.certManager.issuerName=corp-ca",
            "webhook.certificates.certManager.issuerKind=ClusterIssuer",
        ],
        &[],
    )?;
    ensure!(all(&external, "Issuer").is_empty());
    ensure!(
        one(&external, "Certificate", WEBHOOK)?["spec"]["issuerRef"]
            == json!({"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"})
    );

    let secret = helm::render(
        &[
            "webhook.certificates.mode=secret",
            "webhook.certificates.caBundle=Q0EK",
            "webhook.secretName=my-tls",
        ],
        &[],
    )?;
    let (args, certs, validating) = mode(&secret)?;
    ensure!(
        !args
            .as_array()
            .is_some_and(|a| a.contains(&json!("--manage-certs")))
    );
    ensure!(certs["secret"]["secretName"] == "my-tls");
    for webhook in validating["webhooks"].as_array().into_iter().flatten() {
        ensure!(webhook["clientConfig"]["caBundle"] == "Q0EK", "{webhook}");
    }
    Ok(())
}

/// The variables the chart gives the controller and the flags it gives the webhook must be ones
/// the binaries read: each is looked up in the binary's own `--help`.
#[test]
fn the_chart_passes_only_settings_the_binaries_read() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let docs = helm::render(&[], &[])?;
    let bin_dir = devcluster::isolation::devcluster_binary()?
        .parent()
        .context("the devcluster binary has no directory")?
        .to_path_buf();
    let help = |binary: &str| -> anyhow::Result<String> {
        let path = bin_dir.join(binary);
        let output = std::process::Command::new(&path)
            .arg("--help")
            .output()
            .with_context(|| format!("running {} --help", path.display()))?;
        // clap wraps long lines; one space between words makes `[env: NAME=` findable.
        Ok(String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "))
    };

    let controller_help = help("skyhook-controller")?;
    let manager = controller_container(&docs)?;
    // POD_NAME is read for the leader-election identity, not through a flag.
    for env in manager["env"].as_array().into_iter().flatten() {
        let name = env["name"].as_str().unwrap_or_default();
        ensure!(
            name == "POD_NAME" || controller_help.contains(&format!("[env: {name}=")),
            "the controller has no setting for {name}"
        );
    }

    let webhook_help = help("skyhook-webhook")?;
    let webhook = pod_spec(one(&docs, "Deployment", WEBHOOK)?)["containers"][0].clone();
    for arg in webhook["args"].as_array().into_iter().flatten() {
        let flag = arg
            .as_str()
            .unwrap_or_default()
            .split('=')
            .next()
            .unwrap_or_default();
        ensure!(
            webhook_help.contains(&format!("{flag} ")),
            "the webhook has no flag {flag}"
        );
    }
    for env in webhook["env"].as_array().into_iter().flatten() {
        let name = env["name"].as_str().unwrap_or_default();
        ensure!(
            webhook_help.contains(&format!("[env: {name}=")),
            "the webhook has no setting for {name}"
        );
    }
    Ok(())
}

#[test]
fn dashboard_and_alerts_are_opt_in_and_follow_their_values() -> anyhow::Result<()> {
    let docs = helm::render(&[], &[])?;
    ensure!(all(&docs, "PrometheusRule").is_empty());
    ensure!(!names(&docs, "ConfigMap").contains(&"skyhook-operator-dashboard".to_owned()));

    let docs = helm::render(
        &[
            "metrics.dashboard.enabled=true",
            "metrics.dashboard.label=dashboards",
            "metrics.dashboard.labelValue=skyhook",
            "metrics.dashboard.namespace=grafana",
            "metrics.prometheusRule.enabled=true",
            "metrics.prometheusRule.labels.release=kube-prometheus",
            "metrics.prometheusRule.severity=critical",
            "metrics.prometheusRule.noProgress.window=2h",
            "metrics.prometheusRule.noProgress.for=20m",
            "metrics.prometheusRule.erroringNodes.for=45m",
            "metrics.prometheusRule.drainBlocked.for=1m",
        ],
        &[],
    )?;
    let configmap = one(&docs, "ConfigMap", "skyhook-operator-dashboard")?;
    ensure!(configmap["metadata"]["labels"]["dashboards"] == "skyhook");
    ensure!(configmap["metadata"]["namespace"] == "grafana");
    let text = configmap["data"]["skyhook-rollouts.json"]
        .as_str()
        .context("no dashboard JSON")?;
    let dashboard: Value = serde_json::from_str(text)?;
    let titles: Vec<&str> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|panel| panel["title"].as_str())
        .collect();
    for wanted in [
        "Rollout progress",
        "Stage duration (p50, p95)",
        "Blocked drains",
        "Erroring nodes",
    ] {
        ensure!(titles.contains(&wanted), "{wanted} not among {titles:?}");
    }

    let rule = one(&docs, "PrometheusRule", "skyhook-operator-alerts")?;
    ensure!(rule["metadata"]["labels"]["release"] == "kube-prometheus");
    let rules = &rule["spec"]["groups"][0]["rules"];
    let alert = |name: &str| {
        rules
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["alert"] == name)
            .with_context(|| format!("no alert {name} in {rules}"))
    };
    let stalled = alert("SkyhookRolloutStalled")?;
    ensure!(stalled["for"] == "20m");
    ensure!(
        stalled["expr"]
            .as_str()
            .unwrap_or_default()
            .contains("[2h]")
    );
    ensure!(alert("SkyhookNodesErroring")?["for"] == "45m");
    let drain = alert("SkyhookDrainBlocked")?;
    ensure!(drain["for"] == "1m");
    ensure!(drain["labels"]["severity"] == "critical");
    ensure!(
        drain["annotations"]["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("{{ $labels.skyhook_name }}"),
        "Prometheus templates reach the rule unexpanded: {drain}"
    );

    let metrics = e2e::promql::chart_metric_names()?;
    for expected in [
        "skyhook_package_stage_duration_seconds_bucket",
        "skyhook_package_stage_duration_seconds_count",
        "skyhook_drain_blocked",
        "skyhook_node_status_count",
        "skyhook_rollout_progress_percent",
    ] {
        ensure!(
            metrics.contains_key(expected),
            "{expected} not in {metrics:?}"
        );
    }
    Ok(())
}
