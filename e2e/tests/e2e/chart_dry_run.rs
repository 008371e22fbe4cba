//! The rendered chart against a real API server: `helm template` output for several value sets
//! goes through `kubectl apply --dry-run=server --validate=strict` on a devcluster, so the real
//! kube-apiserver checks every object (schema, field validation with unknown and duplicate fields
//! refused, defaulting, admission) without creating it. This replaces kubeconform, whose schemas
//! would have to come from GitHub.

// Shared with chart_template.rs, which uses all of it; this test needs only part.
use anyhow::{Context, bail, ensure};
use devcluster::{DevCluster, DevClusterOptions};
use e2e::helm;

/// `kubectl apply --dry-run=server --validate=strict -f -` of `manifests`; kubectl's output.
async fn dry_run(kubectl: &e2e::Kubectl, manifests: &str) -> anyhow::Result<(bool, String)> {
    let output = kubectl
        .run_with_input(
            &[
                "apply",
                "--dry-run=server",
                "--validate=strict",
                "--server-side",
                "--field-manager=chart-dry-run",
                "-f",
                "-",
            ],
            manifests.as_bytes(),
        )
        .await?;
    Ok((
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    ))
}

#[tokio::test]
async fn rendered_manifests_pass_the_api_servers_own_validation() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let cluster = DevCluster::start(DevClusterOptions {
        images: skyhook_devcluster::images(),
        ..DevClusterOptions::default()
    })
    .await
    .context("starting the devcluster")?;
    let kubectl = e2e::Kubectl::new(cluster.kubeconfig_path());
    kubectl
        .succeed(&["create", "namespace", "skyhook"])
        .await
        .context("creating the namespace")?;

    // (case, --set values, --set-json values); cert-manager's kinds do not exist on a devcluster,
    // so that mode is covered by chart_template.rs only.
    let cases: [(&str, &[&str], &[&str]); 6] = [
        ("defaults", &[], &[]),
        (
            "every opt-in",
            &[
                "rbac.createSkyhookViewerRole=true",
                "rbac.createSkyhookEditorRole=true",
                "metrics.addServiceAccountBinding=true",
                "imagePullSecret=regcred",
                "useHostNetwork=true",
                "estimatedNodeCount=400",
                "estimatedPackageCount=5",
            ],
            &[],
        ),
        (
            "placement",
            &[],
            &[
                r#"controllerManager.tolerations=[{"key":"dedicated","operator":"Equal","value":"system-cpu","effect":"NoSchedule"}]"#,
                r#"controllerManager.nodeAffinity.matchExpressions=[{"key":"pool","operator":"In","values":["system"]}]"#,
            ],
        ),
        (
            "no webhook, no cleanup, no LimitRange",
            &["webhook.enable=false", "cleanup.enabled=false"],
            &["limitRange=null"],
        ),
        (
            "an existing Secret",
            &[
                "webhook.certificates.mode=secret",
                "webhook.certificates.caBundle=Q0EK",
            ],
            &[],
        ),
        (
            "one replica without leader election",
            &[
                "controllerManager.replicas=1",
                "controllerManager.manager.env.leaderElection=false",
                "controllerManager.podDisruptionBudget.minAvailable=null",
                "webhook.replicas=1",
                "webhook.podDisruptionBudget.minAvailable=null",
            ],
            &[],
        ),
    ];
    let mut default_manifests = String::new();
    for (case, set, set_json) in cases {
        let output = helm::template("skyhook-operator", "skyhook", set, set_json)?;
        ensure!(
            output.status.success(),
            "{case}: helm template failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let manifests = String::from_utf8_lossy(&output.stdout).into_owned();
        let objects = helm::parse_documents(&manifests)?.len();
        let (ok, said) = dry_run(&kubectl, &manifests).await?;
        ensure!(ok, "{case}: the API server refused the chart:\n{said}");
        let accepted = said
            .lines()
            .filter(|line| line.contains("(server dry run)"))
            .count();
        ensure!(
            accepted == objects,
            "{case}: {accepted} of {objects} objects accepted:\n{said}"
        );
        if case == "defaults" {
            default_manifests = manifests;
        }
    }

    // The check can fail: a misspelt field is refused by strict field validation.
    let broken = default_manifests.replacen("  replicas: 2", "  replica: 2", 1);
    if broken == default_manifests {
        bail!("the default render has no `replicas: 2` to break");
    }
    let (ok, said) = dry_run(&kubectl, &broken).await?;
    ensure!(!ok, "a misspelt field was accepted:\n{said}");
    // Server-side apply names the field the schema does not declare.
    ensure!(
        said.contains(".spec.replica: field not declared in schema"),
        "{said}"
    );
    Ok(())
}
