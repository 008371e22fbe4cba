//! kubectl-skyhook installed the way users install it: with krew (built by
//! `scripts/setup.d/30-krew.sh`), from the manifests and archive that `krew/build-archives.sh`
//! renders and builds, then run as `kubectl skyhook` and `kubectl nodewright` by the real kubectl
//! (two krew plugins of one archive: krew links one command per plugin).
//!
//! krew needs no network for this: `install --manifest` skips its plugin index, `--archive` skips
//! the download (the archive's sha256 is still checked against the manifest), and
//! `KREW_NO_UPGRADE_CHECK` skips the release check. Commands that read the index (`list`,
//! `uninstall`) work with an empty local git repository as the default index.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, bail, ensure};
use serde_json::Value;

/// Runs `command`; fails with its output unless it succeeds; returns its stdout.
fn succeed(command: &mut Command) -> anyhow::Result<String> {
    let output: Output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The last line a script printed on stdout (the path it reports).
fn last_line(stdout: &str) -> anyhow::Result<PathBuf> {
    stdout
        .lines()
        .last()
        .map(PathBuf::from)
        .with_context(|| format!("the script printed no path: {stdout:?}"))
}

/// `(os, arch)` of every platform of a manifest.
fn platforms(manifest: &Value) -> BTreeSet<(String, String)> {
    manifest["spec"]["platforms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let labels = &p["selector"]["matchLabels"];
            let field = |name: &str| labels[name].as_str().unwrap_or_default().to_owned();
            (field("os"), field("arch"))
        })
        .collect()
}

fn read_yaml(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

#[test]
fn the_templates_cover_linux_and_darwin_on_amd64_and_arm64() -> anyhow::Result<()> {
    for plugin in ["skyhook", "nodewright"] {
        the_template_covers_every_platform(plugin)?;
    }
    Ok(())
}

/// The template of krew plugin `plugin`: every platform, the shared archives, and its own binary.
fn the_template_covers_every_platform(plugin: &str) -> anyhow::Result<()> {
    let template = read_yaml(&e2e::workspace().join(format!("krew/{plugin}.yaml")))?;
    assert_eq!(
        template["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(template["kind"], "Plugin");
    assert_eq!(template["metadata"]["name"], plugin);
    let expected: BTreeSet<(String, String)> = [
        ("darwin", "amd64"),
        ("darwin", "arm64"),
        ("linux", "amd64"),
        ("linux", "arm64"),
    ]
    .into_iter()
    .map(|(os, arch)| (os.to_owned(), arch.to_owned()))
    .collect();
    assert_eq!(platforms(&template), expected);
    for platform in template["spec"]["platforms"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let os = platform["selector"]["matchLabels"]["os"]
            .as_str()
            .unwrap_or_default();
        let arch = platform["selector"]["matchLabels"]["arch"]
            .as_str()
            .unwrap_or_default();
        let archive = format!("kubectl-skyhook_v{{{{VERSION}}}}_{os}_{arch}.tar.gz");
        assert_eq!(
            platform["uri"],
            format!(
                "https://github.com/skyhook-rs/skyhook/releases/download/v{{{{VERSION}}}}/{archive}"
            ),
            "{platform}"
        );
        assert_eq!(
            platform["sha256"],
            format!("{{{{SHA256_{os}_{arch}}}}}"),
            "{platform}"
        );
        let binary = format!("kubectl-{plugin}");
        assert_eq!(platform["bin"], binary.as_str(), "{platform}");
        assert_eq!(platform["files"][0]["from"], binary.as_str(), "{platform}");
    }
    Ok(())
}

#[test]
fn krew_installs_the_plugin_and_kubectl_runs_it() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let repository = e2e::workspace();
    let plugin = e2e::binary_dir()?.join("kubectl-skyhook");
    let work = tempfile::tempdir()?;

    let krew = last_line(&succeed(
        Command::new("bash").arg(repository.join("scripts/setup.d/30-krew.sh")),
    )?)?;

    // Packaging the same binary twice gives the same archive, so the checksum is stable.
    let mut manifests = Vec::new();
    for out in ["first", "second"] {
        let out = work.path().join(out);
        let manifest = last_line(&succeed(
            Command::new("bash")
                .arg(repository.join("krew/build-archives.sh"))
                .arg("--binary")
                .arg(&plugin)
                .arg("--out")
                .arg(&out),
        )?)?;
        manifests.push(manifest);
    }
    let rendered = read_yaml(&manifests[0])?;
    assert_eq!(rendered, read_yaml(&manifests[1])?, "the archives differ");
    // The nodewright manifest sits beside it and names the same archive, checksum and all.
    let nodewright_manifest = manifests[0].with_file_name("nodewright.yaml");
    let nodewright = read_yaml(&nodewright_manifest)?;
    assert_eq!(
        nodewright["spec"]["platforms"][0]["sha256"],
        rendered["spec"]["platforms"][0]["sha256"]
    );
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(rendered["spec"]["version"], version.as_str());
    // This machine builds the host platform only (no other Rust target is installed).
    assert_eq!(
        platforms(&rendered),
        BTreeSet::from([("linux".to_owned(), "amd64".to_owned())]),
        "{rendered}"
    );
    let manifest = &manifests[0];
    let archive = manifest.with_file_name(format!("kubectl-skyhook_{version}_linux_amd64.tar.gz"));
    ensure!(archive.is_file(), "{} was not built", archive.display());

    // krew's own validator: structure, checksum format, platform selectors.
    for manifest in [manifest, &nodewright_manifest] {
        succeed(
            Command::new(krew.join("validate-krew-manifest"))
                .arg("-manifest")
                .arg(manifest)
                .arg("-skip-install"),
        )?;
    }

    // A fresh krew root, krew and then its bin directory on PATH, and not the cargo target
    // directory: the plugin kubectl runs is krew's.
    let krew_root = work.path().join("krew-root");
    let mut path = vec![krew_root.join("bin"), krew.clone()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(path)?;
    let kubectl = |args: &[&str]| {
        let mut command = Command::new("kubectl");
        command
            .args(args)
            .env("KREW_ROOT", &krew_root)
            .env("KREW_NO_UPGRADE_CHECK", "1")
            .env("PATH", &path)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null());
        command
    };

    let manifest_flag = format!("--manifest={}", manifest.display());
    let archive_flag = format!("--archive={}", archive.display());
    succeed(&mut kubectl(&[
        "krew",
        "install",
        &manifest_flag,
        &archive_flag,
    ]))?;
    let installed = krew_root.join("bin/kubectl-skyhook");
    ensure!(
        installed.exists(),
        "krew did not link {}",
        installed.display()
    );

    let plugins = succeed(&mut kubectl(&["plugin", "list", "--name-only"]))?;
    ensure!(
        plugins.lines().any(|line| line == "kubectl-skyhook"),
        "kubectl does not see the plugin:\n{plugins}"
    );
    let found = succeed(&mut kubectl(&["plugin", "list"]))?;
    let first = found
        .lines()
        .find(|line| line.ends_with("/kubectl-skyhook"))
        .with_context(|| format!("kubectl lists no kubectl-skyhook:\n{found}"))?;
    assert_eq!(Path::new(first), installed, "{found}");

    let printed = succeed(&mut kubectl(&["skyhook", "version", "--client-only"]))?;
    assert_eq!(
        printed,
        format!("Skyhook plugin:\t{}\n", env!("CARGO_PKG_VERSION"))
    );

    // The second plugin of the same archive: the same binary under its NodeWright name.
    let nodewright_flag = format!("--manifest={}", nodewright_manifest.display());
    succeed(&mut kubectl(&[
        "krew",
        "install",
        &nodewright_flag,
        &archive_flag,
    ]))?;
    let nodewright_installed = krew_root.join("bin/kubectl-nodewright");
    ensure!(
        nodewright_installed.exists(),
        "krew did not link {}",
        nodewright_installed.display()
    );
    let printed = succeed(&mut kubectl(&["nodewright", "version", "--client-only"]))?;
    assert_eq!(
        printed,
        format!("NodeWright plugin:\t{}\n", env!("CARGO_PKG_VERSION"))
    );

    // list and uninstall read the index; an empty local one will do.
    succeed(
        Command::new("git")
            .args(["init", "-q"])
            .arg(krew_root.join("index/default")),
    )?;
    let listed = succeed(&mut kubectl(&["krew", "list"]))?;
    for plugin in ["detached/skyhook", "detached/nodewright"] {
        ensure!(listed.lines().any(|line| line == plugin), "{listed}");
    }
    succeed(&mut kubectl(&[
        "krew",
        "uninstall",
        "skyhook",
        "nodewright",
    ]))?;
    ensure!(!installed.exists(), "krew left {}", installed.display());
    ensure!(
        !nodewright_installed.exists(),
        "krew left {}",
        nodewright_installed.display()
    );
    Ok(())
}
