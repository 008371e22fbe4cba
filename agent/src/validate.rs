//! `skyhook-agent validate <package-dir>`: everything the agent would reject, plus the packaging
//! rules upstream's `validate.py` checks (scripts executable), before a package is published.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::config::{self, PackageConfig};
use crate::problem::{Location, Problem};

/// The result of validating a package directory.
#[derive(Debug)]
pub struct Report {
    pub config: Option<PackageConfig>,
    pub problems: Vec<Problem>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        !self.problems.iter().any(Problem::is_error)
    }

    /// The text printed by the command: every problem, then a summary line.
    pub fn render(&self, dir: &Path) -> String {
        let mut out = String::new();
        for problem in &self.problems {
            out.push_str(&problem.to_string());
            out.push('\n');
        }
        let errors = self.problems.iter().filter(|p| p.is_error()).count();
        let warnings = self.problems.len() - errors;
        let name = self
            .config
            .as_ref()
            .map(|c| format!("{} {}", c.package_name, c.package_version))
            .unwrap_or_else(|| dir.display().to_string());
        let verdict = if errors == 0 { "valid" } else { "invalid" };
        out.push_str(&format!(
            "{name}: {verdict} ({errors} error(s), {warnings} warning(s))\n"
        ));
        if let Some(config) = &self.config
            && !config.expected_config_files.is_empty()
        {
            out.push_str(&format!(
                "the Skyhook resource must provide these configMap keys: {}\n",
                config.expected_config_files.join(", ")
            ));
        }
        out
    }
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o111 != 0)
}

/// Validates the package in `dir` (the directory holding `config.json`, `skyhook_dir/` and
/// optionally `root_dir/`).
pub fn validate(dir: &Path) -> Report {
    let config_path = dir.join("config.json");
    let text = match fs::read_to_string(&config_path) {
        Ok(text) => text,
        Err(err) => {
            return Report {
                config: None,
                problems: vec![Problem::error(
                    Location::File("config.json".into()),
                    format!("cannot read {}: {err}", config_path.display()),
                    "pass the package directory (the one with config.json, skyhook_dir/ and root_dir/)",
                )],
            };
        }
    };
    let loaded = config::parse(&text);
    let mut problems = loaded.problems;
    let steps_dir = dir.join("skyhook_dir");
    if let Some(config) = &loaded.config {
        problems.extend(step_script_problems(config, &steps_dir));
    }
    if steps_dir.is_dir() {
        problems.extend(shell_script_problems(
            dir,
            &steps_dir,
            loaded.config.as_ref(),
        ));
    } else {
        problems.push(Problem::error(
            Location::File("skyhook_dir".into()),
            "the package has no skyhook_dir/ directory",
            "put the step scripts in skyhook_dir/ next to config.json",
        ));
    }
    let root_dir = dir.join("root_dir");
    if root_dir.exists() && !root_dir.is_dir() {
        problems.push(Problem::error(
            Location::File("root_dir".into()),
            "root_dir exists but is not a directory",
            "make root_dir a directory mirroring the host paths it installs, or remove it",
        ));
    }
    Report {
        config: loaded.config,
        problems,
    }
}

/// Every step's script must exist in `steps_dir` as an executable file.
fn step_script_problems(config: &PackageConfig, steps_dir: &Path) -> Vec<Problem> {
    let mut problems = config::missing_scripts(config, |path| steps_dir.join(path).exists());
    for (mode, index, step) in config.all_steps() {
        let script = steps_dir.join(&step.path);
        if script.is_dir() {
            problems.push(Problem::error(
                step.location(mode, index, Some("path")),
                format!("skyhook_dir/{} is a directory, not a script", step.path),
                "point path at the script file",
            ));
        } else if script.exists() && !is_executable(&script) {
            problems.push(Problem::error(
                step.location(mode, index, Some("path")),
                format!("skyhook_dir/{} is not executable", step.path),
                format!(
                    "chmod +x skyhook_dir/{} before building the image",
                    step.path
                ),
            ));
        }
    }
    problems
}

/// Shell scripts under `steps_dir` that no step names must be executable too (upstream's
/// packaging rule); those a step names are reported by [`step_script_problems`].
fn shell_script_problems(
    dir: &Path,
    steps_dir: &Path,
    config: Option<&PackageConfig>,
) -> Vec<Problem> {
    let mut shell_scripts = Vec::new();
    collect_shell_scripts(steps_dir, &mut shell_scripts);
    shell_scripts
        .into_iter()
        .filter(|script| {
            let referenced = config.is_some_and(|config| {
                config
                    .all_steps()
                    .any(|(_, _, step)| steps_dir.join(&step.path) == *script)
            });
            !referenced && !is_executable(script)
        })
        .map(|script| {
            let relative = script
                .strip_prefix(dir)
                .unwrap_or(&script)
                .display()
                .to_string();
            Problem::error(
                Location::File(relative.clone()),
                "shell script is not executable",
                format!("chmod +x {relative}"),
            )
        })
        .collect()
}

fn collect_shell_scripts(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect_shell_scripts(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "sh") {
            found.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write_package(dir: &Path, config: &serde_json::Value, scripts: &[(&str, u32)]) {
        fs::create_dir_all(dir.join("skyhook_dir")).unwrap();
        fs::write(dir.join("config.json"), config.to_string()).unwrap();
        for (name, mode) in scripts {
            let path = dir.join("skyhook_dir").join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "#!/bin/sh\n").unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(*mode)).unwrap();
        }
    }

    fn messages(report: &Report) -> Vec<String> {
        report.problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_clean_package_validates() {
        let tmp = tempfile::tempdir().unwrap();
        write_package(
            tmp.path(),
            &crate::config::fixtures::minimal(),
            &[("install.sh", 0o755), ("install_check.sh", 0o755)],
        );
        let report = validate(tmp.path());
        assert!(report.is_clean(), "{:?}", messages(&report));
        assert!(report.problems.is_empty());
        assert!(
            report
                .render(tmp.path())
                .contains("demo 1.0.0: valid (0 error(s), 0 warning(s))")
        );
    }

    #[test]
    fn every_packaging_problem_is_reported_with_a_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = crate::config::fixtures::minimal();
        config["expected_config_files"] = json!(["settings.conf"]);
        write_package(
            tmp.path(),
            &config,
            &[
                ("install.sh", 0o644),
                ("helpers/lib.sh", 0o644),
                ("data.txt", 0o644),
            ],
        );
        fs::write(tmp.path().join("root_dir"), "").unwrap();
        let report = validate(tmp.path());
        assert!(!report.is_clean());
        let all = messages(&report).join("\n");
        for expected in [
            "error: config.json modes.apply-check[0] (step \"install_check\") field path: script skyhook_dir/install_check.sh does not exist",
            "error: config.json modes.apply[0] (step \"install\") field path: skyhook_dir/install.sh is not executable\n  fix: chmod +x skyhook_dir/install.sh",
            "error: skyhook_dir/helpers/lib.sh: shell script is not executable\n  fix: chmod +x skyhook_dir/helpers/lib.sh",
            "error: root_dir: root_dir exists but is not a directory",
        ] {
            assert!(all.contains(expected), "missing {expected:?} in\n{all}");
        }
        assert!(!all.contains("data.txt"));
        assert_eq!(report.problems.len(), 4, "{all}");
        let rendered = report.render(tmp.path());
        assert!(rendered.contains("invalid (4 error(s), 0 warning(s))"));
        assert!(rendered.contains("configMap keys: settings.conf"));
    }

    #[test]
    fn a_missing_config_or_skyhook_dir_is_explained() {
        let tmp = tempfile::tempdir().unwrap();
        let report = validate(tmp.path());
        assert!(messages(&report)[0].contains("cannot read"));

        fs::write(
            tmp.path().join("config.json"),
            crate::config::fixtures::minimal().to_string(),
        )
        .unwrap();
        let all = messages(&validate(tmp.path())).join("\n");
        assert!(
            all.contains("the package has no skyhook_dir/ directory"),
            "{all}"
        );
    }

    #[test]
    fn schema_errors_stop_before_file_checks() {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = crate::config::fixtures::minimal();
        config["package_version"] = json!("1.0");
        write_package(tmp.path(), &config, &[]);
        let report = validate(tmp.path());
        assert_eq!(report.problems.len(), 1, "{:?}", messages(&report));
        assert!(report.config.is_none());
    }

    #[test]
    fn a_directory_named_like_a_script_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        write_package(
            tmp.path(),
            &crate::config::fixtures::minimal(),
            &[("install_check.sh", 0o755)],
        );
        fs::create_dir_all(tmp.path().join("skyhook_dir/install.sh")).unwrap();
        let all = messages(&validate(tmp.path())).join("\n");
        assert!(
            all.contains("skyhook_dir/install.sh is a directory"),
            "{all}"
        );
    }
}
