//! The agent's environment variables (upstream's names and defaults).

use std::collections::BTreeMap;

/// Everything the agent reads from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `SKYHOOK_RESOURCE_ID`: `<skyhook>-<uid>-<generation>_<package>_<version>`.
    pub resource_id: String,
    /// `SKYHOOK_DATA_DIR`: the package content inside the agent's container (legacy mode).
    pub data_dir: String,
    /// `SKYHOOK_ROOT_DIR`: where flags, history and interrupt flags go on the host.
    pub root_dir: String,
    /// `SKYHOOK_LOG_DIR`: where step logs go on the host.
    pub log_dir: String,
    /// `SKYHOOK_AGENT_WRITE_LOGS`: false streams output without keeping log files.
    pub write_logs: bool,
    /// `SKYHOOK_AGENT_BUFFER_LIMIT` as given (or its old default): printed in the banner for
    /// tools that read it, otherwise ignored, as upstream's Go agent does: output is streamed.
    pub buffer_limit: String,
    /// `COPY_RESOLV`: copy the container's `/etc/resolv.conf` onto the host.
    pub copy_resolv: bool,
    /// `OVERLAY_ALWAYS_RUN_STEP`: run steps even when their completion flag exists.
    pub always_run_step: bool,
}

/// Each variable, its default and meaning, for `--help` and the docs.
pub const VARIABLES: &[(&str, &str, &str)] = &[
    (
        "SKYHOOK_RESOURCE_ID",
        "\"\"",
        "<skyhook>-<uid>-<generation>_<package>_<version>; interrupts run once per value",
    ),
    (
        "SKYHOOK_DATA_DIR",
        "/skyhook-package",
        "package content in the container, copied to the host in legacy mode",
    ),
    (
        "SKYHOOK_ROOT_DIR",
        "/etc/skyhook",
        "host directory for flags, history and interrupt flags",
    ),
    (
        "SKYHOOK_LOG_DIR",
        "/var/log/skyhook",
        "host directory for step logs",
    ),
    (
        "SKYHOOK_AGENT_WRITE_LOGS",
        "true",
        "false: stream step output without writing log files",
    ),
    (
        "SKYHOOK_AGENT_BUFFER_LIMIT",
        "8192",
        "printed in the banner, otherwise ignored (output is streamed)",
    ),
    (
        "COPY_RESOLV",
        "true",
        "copy the container's /etc/resolv.conf to the host",
    ),
    (
        "OVERLAY_ALWAYS_RUN_STEP",
        "false",
        "run steps even when their completion flag exists",
    ),
];

/// A variable the agent read past: the value it could not use and what it did instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingWarning {
    pub name: &'static str,
    pub value: String,
}

impl std::fmt::Display for SettingWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid boolean environment variable {}={:?}; treating it as false (use true or false)",
            self.name, self.value
        )
    }
}

/// A boolean variable, as upstream's Go agent reads it: unset gives `default`, `true` and
/// `false` in any letter case are themselves, anything else (even with spaces) is false and
/// warned about.
fn read_bool(
    name: &'static str,
    value: Option<&String>,
    default: bool,
) -> (bool, Option<SettingWarning>) {
    match value {
        None => (default, None),
        Some(value) if value.eq_ignore_ascii_case("true") => (true, None),
        Some(value) if value.eq_ignore_ascii_case("false") => (false, None),
        Some(value) => (
            false,
            Some(SettingWarning {
                name,
                value: value.clone(),
            }),
        ),
    }
}

impl Settings {
    /// Reads the settings from environment variables with upstream's defaults; an empty path
    /// variable counts as unset. Returns the warnings to log for values it could not use.
    pub fn from_vars(vars: &BTreeMap<String, String>) -> (Self, Vec<SettingWarning>) {
        let path = |name: &str, default: &str| {
            vars.get(name)
                .filter(|value| !value.is_empty())
                .cloned()
                .unwrap_or_else(|| default.to_string())
        };
        let mut warnings = Vec::new();
        let mut flag = |name: &'static str, default: bool| {
            let (value, warning) = read_bool(name, vars.get(name), default);
            warnings.extend(warning);
            value
        };
        let write_logs = flag("SKYHOOK_AGENT_WRITE_LOGS", true);
        let copy_resolv = flag("COPY_RESOLV", true);
        let always_run_step = flag("OVERLAY_ALWAYS_RUN_STEP", false);
        let settings = Settings {
            resource_id: vars.get("SKYHOOK_RESOURCE_ID").cloned().unwrap_or_default(),
            data_dir: path("SKYHOOK_DATA_DIR", "/skyhook-package"),
            root_dir: path("SKYHOOK_ROOT_DIR", "/etc/skyhook"),
            log_dir: path("SKYHOOK_LOG_DIR", "/var/log/skyhook"),
            write_logs,
            buffer_limit: path("SKYHOOK_AGENT_BUFFER_LIMIT", "8192"),
            copy_resolv,
            always_run_step,
        };
        (settings, warnings)
    }
}

/// `SKYHOOK_RESOURCE_ID` split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceId {
    pub skyhook: String,
    pub package: String,
    pub version: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "SKYHOOK_RESOURCE_ID={value:?} is not <skyhook>-<uid>-<generation>_<package>_<version> (its first and last '_' separate three non-empty parts); the operator sets it on agent pods, set it the same way when running the agent by hand"
)]
pub struct ResourceIdError {
    pub value: String,
}

impl ResourceId {
    /// Splits at the first and the last `_`, as upstream does: the Skyhook part and the version
    /// have no `_`, so a package name may contain them.
    pub fn parse(value: &str) -> Result<Self, ResourceIdError> {
        let error = || ResourceIdError {
            value: value.to_string(),
        };
        let (skyhook, rest) = value.split_once('_').ok_or_else(error)?;
        let (package, version) = rest.rsplit_once('_').ok_or_else(error)?;
        let is_name = |part: &str| !part.is_empty() && !part.contains('/') && part != "..";
        if !(is_name(skyhook) && is_name(package) && is_name(version)) {
            return Err(error());
        }
        Ok(ResourceId {
            skyhook: skyhook.to_string(),
            package: package.to_string(),
            version: version.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_match_upstream() {
        let (settings, warnings) = Settings::from_vars(&BTreeMap::new());
        assert!(warnings.is_empty());
        assert_eq!(
            settings,
            Settings {
                resource_id: String::new(),
                data_dir: "/skyhook-package".into(),
                root_dir: "/etc/skyhook".into(),
                log_dir: "/var/log/skyhook".into(),
                write_logs: true,
                buffer_limit: "8192".into(),
                copy_resolv: true,
                always_run_step: false,
            }
        );
        let (empty, _) = Settings::from_vars(&vars(&[
            ("SKYHOOK_DATA_DIR", ""),
            ("SKYHOOK_ROOT_DIR", ""),
            ("SKYHOOK_LOG_DIR", ""),
        ]));
        assert_eq!(empty, settings, "an empty path variable reads as unset");
    }

    #[test]
    fn every_variable_is_read() {
        let (settings, warnings) = Settings::from_vars(&vars(&[
            ("SKYHOOK_RESOURCE_ID", "demo-uid-1_pkg_1.0.0"),
            ("SKYHOOK_DATA_DIR", "/data"),
            ("SKYHOOK_ROOT_DIR", "/var/lib/skyhook/demo"),
            ("SKYHOOK_LOG_DIR", "/var/log/skyhook/demo"),
            ("SKYHOOK_AGENT_WRITE_LOGS", "False"),
            ("SKYHOOK_AGENT_BUFFER_LIMIT", "4096"),
            ("COPY_RESOLV", "false"),
            ("OVERLAY_ALWAYS_RUN_STEP", "TRUE"),
        ]));
        assert!(warnings.is_empty());
        assert_eq!(settings.resource_id, "demo-uid-1_pkg_1.0.0");
        assert_eq!(settings.data_dir, "/data");
        assert_eq!(settings.root_dir, "/var/lib/skyhook/demo");
        assert_eq!(settings.log_dir, "/var/log/skyhook/demo");
        assert!(!settings.write_logs);
        assert_eq!(settings.buffer_limit, "4096");
        assert!(!settings.copy_resolv);
        assert!(settings.always_run_step);
    }

    #[test]
    fn booleans_are_true_or_false_in_any_case_and_anything_else_warns() {
        // (value, read as, warned)
        let cases = [
            ("true", true, false),
            ("True", true, false),
            ("TRUE", true, false),
            ("false", false, false),
            ("FaLsE", false, false),
            ("1", false, true),
            ("yes", false, true),
            (" true ", false, true),
            ("", false, true),
        ];
        for (value, expected, warned) in cases {
            let (settings, warnings) = Settings::from_vars(&vars(&[("COPY_RESOLV", value)]));
            assert_eq!(settings.copy_resolv, expected, "{value:?}");
            assert_eq!(
                warnings,
                if warned {
                    vec![SettingWarning {
                        name: "COPY_RESOLV",
                        value: value.into(),
                    }]
                } else {
                    vec![]
                },
                "{value:?}"
            );
        }
        let warning = SettingWarning {
            name: "COPY_RESOLV",
            value: "yes".into(),
        };
        assert!(
            warning
                .to_string()
                .contains("COPY_RESOLV=\"yes\"; treating it as false")
        );
    }

    #[test]
    fn the_buffer_limit_is_printed_but_never_rejected() {
        for value in ["0", "-1", "lots", "4096"] {
            let (settings, warnings) =
                Settings::from_vars(&vars(&[("SKYHOOK_AGENT_BUFFER_LIMIT", value)]));
            assert_eq!(settings.buffer_limit, value);
            assert!(warnings.is_empty());
        }
    }

    #[test]
    fn resource_ids_split_at_the_first_and_last_underscore() {
        let id = |skyhook: &str, package: &str, version: &str| ResourceId {
            skyhook: skyhook.into(),
            package: package.into(),
            version: version.into(),
        };
        assert_eq!(
            ResourceId::parse("customer-f5a1d42e-74e5-1_tuning_2.0.2").unwrap(),
            id("customer-f5a1d42e-74e5-1", "tuning", "2.0.2")
        );
        assert_eq!(
            ResourceId::parse("nodewright-uid-1_package_with_underscores_1.2.3").unwrap(),
            id("nodewright-uid-1", "package_with_underscores", "1.2.3")
        );
        for bad in ["", "a_b", "a__c", "_b_c", "a_b_", "a_b/c_1.0.0", "a_.._1"] {
            assert!(ResourceId::parse(bad).is_err(), "{bad}");
        }
    }
}
