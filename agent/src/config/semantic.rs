//! The rules upstream enforces when it loads a package's steps, plus the path-safety rules a
//! re-implementation needs because names and paths become host file names.

use std::collections::BTreeSet;
use std::path::{Component, Path};

use super::description::PackageConfig;
use crate::mode::Mode;
use crate::problem::{Location, Problem};

/// Checks a structurally valid config. Errors make the package unusable; warnings do not.
pub fn check(config: &PackageConfig) -> Vec<Problem> {
    let mut problems = Vec::new();
    package_identity(config, &mut problems);
    mode_structure(config, &mut problems);
    for (mode, index, step) in config.all_steps() {
        if step.upgrade_step && !mode.is_upgrade() {
            problems.push(Problem::error(
                step.location(mode, index, Some("upgrade_step")),
                format!(
                    "an upgrade step is only allowed in upgrade or upgrade-check, not in {mode}"
                ),
                "move the step to upgrade or upgrade-check, or set \"upgrade_step\": false",
            ));
        }
        if step.upgrade_step && !step.arguments.is_empty() {
            problems.push(Problem::error(
                step.location(mode, index, Some("arguments")),
                "an upgrade step receives [previous_version, current_version] as its arguments and may not declare its own",
                "set \"arguments\": [] and read the versions from $1 and $2 (or $PREVIOUS_VERSION and $CURRENT_VERSION)",
            ));
        }
        if !is_local_path(&step.path) {
            problems.push(Problem::error(
                step.location(mode, index, Some("path")),
                format!("path \"{}\" leaves skyhook_dir", step.path),
                "use a path relative to skyhook_dir without \"..\" or a leading \"/\"",
            ));
        }
        for key in step.env.keys() {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                problems.push(Problem::error(
                    step.location(mode, index, Some("env")),
                    format!("environment variable name {key:?} is not valid"),
                    "use a non-empty name without '=' or NUL, e.g. MY_SETTING",
                ));
            }
        }
        if !step.on_host {
            problems.push(Problem::warning(
                step.location(mode, index, Some("on_host")),
                "on_host is false, but every step runs chrooted on the host (upstream ignores it too)",
                "set \"on_host\": true to say what happens",
            ));
        }
    }
    missing_check_scripts(config, &mut problems);
    problems
}

fn package_identity(config: &PackageConfig, problems: &mut Vec<Problem>) {
    let name = &config.package_name;
    if name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        problems.push(Problem::error(
            Location::Field("package_name".into()),
            format!("package_name {name:?} cannot name a directory: it becomes <flags>/<package_name>/ on the host"),
            "use a plain name such as \"my-package\" (no '/', not \".\" or \"..\")",
        ));
    }
}

fn mode_structure(config: &PackageConfig, problems: &mut Vec<Problem>) {
    if config.modes.values().all(Vec::is_empty) {
        problems.push(Problem::error(
            Location::Field("modes".into()),
            "the package defines no steps",
            "add steps, e.g. an apply step and an apply-check step that verifies it",
        ));
        return;
    }
    // Upstream looks at which keys are present, not whether they hold steps.
    let has_work_mode = config.modes.keys().any(|mode| !mode.is_check());
    if !has_work_mode {
        problems.push(Problem::error(
            Location::Field("modes".into()),
            "only check modes are defined",
            "define at least one of apply, config, post-interrupt, uninstall or upgrade",
        ));
    }
    for mode in Mode::STEP_MODES {
        let Some(check) = mode.check_mode() else {
            continue;
        };
        if !config.steps(mode).is_empty() && config.steps(check).is_empty() {
            problems.push(Problem::error(
                Location::Field(format!("modes.{check}")),
                format!("{mode} has steps but {check} has none"),
                format!("add at least one {check} step that verifies the work of {mode}"),
            ));
        }
    }
}

/// Upstream's warning: for each step path `a/b.sh` of a non-check mode, a check mode should
/// run `a/b_check.sh`.
fn missing_check_scripts(config: &PackageConfig, problems: &mut Vec<Problem>) {
    let check_paths: BTreeSet<&str> = config
        .modes
        .iter()
        .filter(|(mode, _)| mode.is_check())
        .flat_map(|(_, steps)| steps.iter().map(|s| s.path.as_str()))
        .collect();
    let mut wanted = BTreeSet::new();
    for (mode, _, step) in config.all_steps().filter(|(mode, _, _)| !mode.is_check()) {
        let expected = check_script_name(&step.path);
        if !check_paths.contains(expected.as_str()) && wanted.insert(expected.clone()) {
            problems.push(Problem::warning(
                Location::Field(format!("modes.{}", mode.check_mode().unwrap_or(mode))),
                format!(
                    "no check step runs {expected}; a check ensures the work of {} completed",
                    step.path
                ),
                format!("add a check step with \"path\": \"{expected}\" (only a warning: other check scripts may cover it)"),
            ));
        }
    }
}

/// `dir/name.ext` -> `dir/name_check.ext`; `name` -> `name_check` (split at the last dot, as
/// upstream does).
pub fn check_script_name(path: &str) -> String {
    match path.rsplit_once('.') {
        Some((stem, extension)) => format!("{stem}_check.{extension}"),
        None => format!("{path}_check"),
    }
}

fn is_local_path(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|component| matches!(component, Component::Normal(_) | Component::CurDir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{fixtures::minimal, parse};
    use serde_json::{Value, json};

    fn step(name: &str, path: &str) -> Value {
        json!({
            "name": name, "path": path, "arguments": [], "returncodes": [0],
            "on_host": true, "idempotence": false, "upgrade_step": false
        })
    }

    fn problems_for(mutate: impl FnOnce(&mut Value)) -> Vec<Problem> {
        let mut doc = minimal();
        mutate(&mut doc);
        parse(&doc.to_string()).problems
    }

    /// One row per semantic rule: the mutation, whether it is an error, and text it must show.
    #[test]
    fn every_semantic_rule_reports_location_and_fix() {
        type Mutation = fn(&mut Value);
        let cases: &[(&str, Mutation, bool, &[&str])] = &[
            (
                "no steps at all",
                |d| d["modes"] = json!({"apply": [], "apply-check": []}),
                true,
                &["config.json modes: the package defines no steps"],
            ),
            (
                "only check modes",
                |d| d["modes"] = json!({"apply-check": [step("c", "c.sh")]}),
                true,
                &[
                    "only check modes are defined",
                    "define at least one of apply",
                ],
            ),
            (
                "work mode without its check",
                |d| d["modes"]["config"] = json!([step("cfg", "install.sh")]),
                true,
                &["config.json modes.config-check: config has steps but config-check has none"],
            ),
            (
                "upgrade step outside upgrade",
                |d| d["modes"]["apply"][0]["upgrade_step"] = true.into(),
                true,
                &[
                    "modes.apply[0] (step \"install\") field upgrade_step: an upgrade step is only allowed in upgrade or upgrade-check, not in apply",
                ],
            ),
            (
                "upgrade step with arguments",
                |d| {
                    let mut s = step("up", "up.sh");
                    s["upgrade_step"] = true.into();
                    s["arguments"] = json!(["x"]);
                    d["modes"]["upgrade"] = json!([s]);
                    d["modes"]["upgrade-check"] = json!([step("up_check", "up_check.sh")]);
                },
                true,
                &[
                    "modes.upgrade[0] (step \"up\") field arguments: an upgrade step receives [previous_version, current_version]",
                ],
            ),
            (
                "absolute path",
                |d| d["modes"]["apply"][0]["path"] = "/bin/true".into(),
                true,
                &["field path: path \"/bin/true\" leaves skyhook_dir"],
            ),
            (
                "parent path",
                |d| d["modes"]["apply"][0]["path"] = "../x.sh".into(),
                true,
                &["path \"../x.sh\" leaves skyhook_dir"],
            ),
            (
                "bad env name",
                |d| d["modes"]["apply"][0]["env"] = json!({"A=B": "1"}),
                true,
                &["field env: environment variable name \"A=B\" is not valid"],
            ),
            (
                "package name with slash",
                |d| d["package_name"] = "a/b".into(),
                true,
                &["config.json package_name: package_name \"a/b\" cannot name a directory"],
            ),
            (
                "on_host false",
                |d| d["modes"]["apply"][0]["on_host"] = false.into(),
                false,
                &["warning: config.json modes.apply[0] (step \"install\") field on_host"],
            ),
            (
                "missing check script",
                |d| d["modes"]["apply-check"][0]["path"] = "verify.sh".into(),
                false,
                &["warning: config.json modes.apply-check: no check step runs install_check.sh"],
            ),
        ];
        for (label, mutate, is_error, expected) in cases {
            let problems = problems_for(*mutate);
            let relevant: Vec<_> = problems
                .iter()
                .filter(|p| p.is_error() == *is_error)
                .collect();
            assert_eq!(relevant.len(), 1, "{label}: {problems:#?}");
            if !is_error {
                assert!(
                    problems.iter().all(|p| !p.is_error()),
                    "{label}: {problems:#?}"
                );
            }
            let text = relevant[0].to_string();
            for fragment in *expected {
                assert!(
                    text.contains(fragment),
                    "{label}: {text:?} lacks {fragment:?}"
                );
            }
        }
    }

    #[test]
    fn an_empty_work_mode_key_counts_as_present_like_upstream() {
        let problems = problems_for(|d| {
            d["modes"] = json!({"apply": [], "apply-check": [step("c", "c.sh")]});
        });
        assert!(problems.iter().all(|p| !p.is_error()), "{problems:#?}");
    }

    #[test]
    fn check_script_names_split_at_the_last_dot() {
        assert_eq!(check_script_name("install.sh"), "install_check.sh");
        assert_eq!(check_script_name("a.b/run.py"), "a.b/run_check.py");
        assert_eq!(check_script_name("run"), "run_check");
    }
}
