//! The pinned `helm` that `scripts/setup.d/20-helm.sh` builds, and rendering the chart with it
//! (the `chart_*` tests).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, bail};

/// The helm release the setup script builds; a test checks the two agree.
pub const HELM_VERSION: &str = "v3.21.4";
/// Overrides the lookup, e.g. to try another helm.
pub const HELM_ENV: &str = "SKYHOOK_HELM";
/// The Kubernetes version `helm template` renders for (the chart needs >= 1.30; helm's offline
/// default is older).
pub const KUBE_VERSION: &str = "1.33.0";

pub fn chart_dir() -> PathBuf {
    crate::workspace().join("chart")
}

/// `$SKYHOOK_HELM`, else the cached build; an error saying how to build it when it is missing
/// (the tests fail rather than skip).
pub fn helm() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(HELM_ENV).filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let cache = devcluster::controlplane::binary::cache_dir()
        .context("no cache directory: set SKYHOOK_CACHE or HOME")?;
    let path = cache.join("helm").join(HELM_VERSION).join("helm");
    if !path.is_file() {
        bail!(
            "helm {HELM_VERSION} is not built ({} is missing); run scripts/setup.sh (or \
             scripts/setup.d/20-helm.sh) to build it, or set {HELM_ENV}",
            path.display()
        );
    }
    Ok(path)
}

/// Runs helm with `args`; the output whatever the exit status.
pub fn run(args: &[&str]) -> anyhow::Result<Output> {
    let helm = helm()?;
    Command::new(&helm)
        .args(args)
        .current_dir(crate::workspace())
        .output()
        .with_context(|| format!("running {} {args:?}", helm.display()))
}

/// Runs helm with `args` against the cluster of `kubeconfig`; its stdout, or an error with both
/// outputs when it fails.
pub fn run_on(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let kubeconfig = kubeconfig.to_string_lossy();
    let mut all = args.to_vec();
    all.extend(["--kubeconfig", kubeconfig.as_ref()]);
    let output = run(&all)?;
    if !output.status.success() {
        bail!(
            "helm {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `helm template <release> chart/ --namespace <namespace>` with `--set`-style `values`
/// (`key=value`, parsed by helm) and `--set-json` values (`key=<json>`).
pub fn template(
    release: &str,
    namespace: &str,
    set: &[&str],
    set_json: &[&str],
) -> anyhow::Result<Output> {
    let chart = chart_dir();
    let chart = chart.to_string_lossy();
    let mut args = vec![
        "template",
        release,
        chart.as_ref(),
        "--namespace",
        namespace,
        "--kube-version",
        KUBE_VERSION,
    ];
    for value in set {
        args.extend(["--set", value]);
    }
    for value in set_json {
        args.extend(["--set-json", value]);
    }
    run(&args)
}

/// [`template`] that must succeed; the rendered manifests as parsed documents.
pub fn render(set: &[&str], set_json: &[&str]) -> anyhow::Result<Vec<serde_json::Value>> {
    let output = template("skyhook-operator", "skyhook", set, set_json)?;
    if !output.status.success() {
        bail!(
            "helm template --set {set:?} --set-json {set_json:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    parse_documents(&String::from_utf8_lossy(&output.stdout))
}

/// Every non-empty YAML document of a multi-document stream.
pub fn parse_documents(text: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    use serde::Deserialize as _;
    let mut documents = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document).context("parsing rendered YAML")?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}
