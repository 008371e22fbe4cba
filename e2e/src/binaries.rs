//! The binaries a cluster test runs: `devcluster` (node simulator entry points),
//! `skyhook-controller`, `skyhook-webhook`, `skyhook-agent` and `kubectl-skyhook` (run through
//! `kubectl`).
//! `cargo test -p e2e` builds only this crate's test executables, so the first test of a process
//! builds them with cargo, in the cargo target directory the test executable lives in, where
//! devcluster (and the CLI tests) look for them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, bail};

/// The packages whose binaries the tests run.
const PACKAGES: [&str; 5] = [
    "skyhook-devcluster",
    "controller",
    "webhook",
    "agent",
    "kubectl-skyhook",
];

/// Builds the binaries once per test process (cargo returns at once when they are up to date).
pub fn build_binaries() -> anyhow::Result<()> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build().map_err(|error| format!("{error:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// The repository checkout (the cargo workspace root): where `examples/`, `chart/` and
/// `scripts/` are.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The profile directory of the cargo target directory this test executable lives in
/// (`<target>/debug`), where [`build_binaries`] puts `kubectl-skyhook`, `devcluster` and the rest.
pub fn binary_dir() -> anyhow::Result<PathBuf> {
    let (target_dir, profile) = this_target()?;
    Ok(target_dir.join(profile))
}

/// (`<target>`, `<profile>`) of this test executable.
fn this_target() -> anyhow::Result<(PathBuf, String)> {
    let exe = std::env::current_exe().context("locating the test executable")?;
    target_of(&exe).with_context(|| {
        format!(
            "{} is not in a cargo target directory (<target>/<profile>/deps/); run the tests with cargo",
            exe.display()
        )
    })
}

fn build() -> anyhow::Result<()> {
    let (target_dir, profile) = this_target()?;
    let workspace = workspace();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(&cargo);
    command
        .current_dir(&workspace)
        .env("CARGO_TARGET_DIR", &target_dir)
        .arg("build");
    // Build scripts (ring's) rerun when these change; inherited from this test they would make
    // every `cargo test -p e2e` and every later `cargo build` rebuild half the graph.
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_per_crate_cargo_var) {
            command.env_remove(&name);
        }
    }
    for package in PACKAGES {
        command.args(["-p", package]);
    }
    if profile == "release" {
        command.arg("--release");
    }
    eprintln!(
        "e2e: building {} in {} (first run: a few minutes)",
        PACKAGES.join(", "),
        target_dir.display()
    );
    let status = command
        .status()
        .with_context(|| format!("running {}", Path::new(&cargo).display()))?;
    if !status.success() {
        bail!(
            "`cargo build -p {}` failed ({status}); see its output above",
            PACKAGES.join(" -p ")
        );
    }
    Ok(())
}

/// Whether cargo sets `name` for the one crate it builds or runs (so it describes this test, not
/// the build the test asks for).
fn is_per_crate_cargo_var(name: &str) -> bool {
    const PREFIXES: [&str; 3] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CFG_"];
    const NAMES: [&str; 6] = [
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|prefix| name.starts_with(prefix)) || NAMES.contains(&name)
}

/// `<target>/<profile>/deps/<test>` -> (`<target>`, `<profile>`).
fn target_of(exe: &Path) -> Option<(PathBuf, String)> {
    let deps = exe.parent()?;
    if deps.file_name()? != "deps" {
        return None;
    }
    let profile_dir = deps.parent()?;
    let profile = profile_dir.file_name()?.to_str()?.to_string();
    Some((profile_dir.parent()?.to_path_buf(), profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_crate_cargo_vars_are_recognised() {
        let cases = [
            ("CARGO_PKG_NAME", true),
            ("CARGO_MANIFEST_DIR", true),
            ("CARGO_MANIFEST_PATH", true),
            ("CARGO_CRATE_NAME", true),
            ("CARGO_TARGET_TMPDIR", true),
            ("OUT_DIR", true),
            ("CARGO_HOME", false),
            ("CARGO_TARGET_DIR", false),
            ("CARGO", false),
            ("RUSTUP_TOOLCHAIN", false),
            ("PATH", false),
        ];
        for (name, expected) in cases {
            assert_eq!(is_per_crate_cargo_var(name), expected, "{name}");
        }
    }

    #[test]
    fn target_dir_and_profile_of_a_test_executable() {
        let cases = [
            ("/t/debug/deps/seed-abc", Some(("/t", "debug"))),
            ("/t/release/deps/seed-abc", Some(("/t", "release"))),
            ("/t/debug/seed", None),
            ("seed", None),
        ];
        for (exe, expected) in cases {
            let found = target_of(Path::new(exe));
            let expected = expected.map(|(dir, profile)| (PathBuf::from(dir), profile.to_string()));
            assert_eq!(found, expected, "{exe}");
        }
    }
}
