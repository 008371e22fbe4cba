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
    /// `SKYHOOK_AGENT_BUFFER_LIMIT`: the read chunk size for step output, in bytes.
    pub buffer_limit: usize,
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
        "read chunk size for step output, in bytes",
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

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error(
        "SKYHOOK_AGENT_BUFFER_LIMIT={value:?} is not a positive whole number of bytes; unset it or use e.g. 8192"
    )]
    BufferLimit { value: String },
}

impl Settings {
    /// Reads the settings from environment variables, applying upstream's defaults. Booleans
    /// follow upstream: a value is true exactly when it is "true" in any letter case.
    pub fn from_vars(vars: &BTreeMap<String, String>) -> Result<Self, SettingsError> {
        let text = |name: &str, default: &str| {
            vars.get(name)
                .cloned()
                .unwrap_or_else(|| default.to_string())
        };
        let flag = |name: &str, default: &str| text(name, default).to_lowercase() == "true";
        let buffer_text = text("SKYHOOK_AGENT_BUFFER_LIMIT", "8192");
        let buffer_limit = buffer_text
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|limit| *limit > 0)
            .ok_or(SettingsError::BufferLimit {
                value: buffer_text.clone(),
            })?;
        Ok(Settings {
            resource_id: text("SKYHOOK_RESOURCE_ID", ""),
            data_dir: text("SKYHOOK_DATA_DIR", "/skyhook-package"),
            root_dir: text("SKYHOOK_ROOT_DIR", "/etc/skyhook"),
            log_dir: text("SKYHOOK_LOG_DIR", "/var/log/skyhook"),
            write_logs: flag("SKYHOOK_AGENT_WRITE_LOGS", "true"),
            buffer_limit,
            copy_resolv: flag("COPY_RESOLV", "true"),
            always_run_step: flag("OVERLAY_ALWAYS_RUN_STEP", "false"),
        })
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
    "SKYHOOK_RESOURCE_ID={value:?} is not <skyhook>-<uid>-<generation>_<package>_<version> (three parts separated by '_'); the operator sets it on agent pods, set it the same way when running the agent by hand"
)]
pub struct ResourceIdError {
    pub value: String,
}

impl ResourceId {
    pub fn parse(value: &str) -> Result<Self, ResourceIdError> {
        let error = || ResourceIdError {
            value: value.to_string(),
        };
        let parts: Vec<&str> = value.split('_').collect();
        let [skyhook, package, version] = parts.as_slice() else {
            return Err(error());
        };
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
        let settings = Settings::from_vars(&BTreeMap::new()).unwrap();
        assert_eq!(
            settings,
            Settings {
                resource_id: String::new(),
                data_dir: "/skyhook-package".into(),
                root_dir: "/etc/skyhook".into(),
                log_dir: "/var/log/skyhook".into(),
                write_logs: true,
                buffer_limit: 8192,
                copy_resolv: true,
                always_run_step: false,
            }
        );
    }

    #[test]
    fn every_variable_is_read() {
        let settings = Settings::from_vars(&vars(&[
            ("SKYHOOK_RESOURCE_ID", "demo-uid-1_pkg_1.0.0"),
            ("SKYHOOK_DATA_DIR", "/data"),
            ("SKYHOOK_ROOT_DIR", "/var/lib/skyhook/demo"),
            ("SKYHOOK_LOG_DIR", "/var/log/skyhook/demo"),
            ("SKYHOOK_AGENT_WRITE_LOGS", "False"),
            ("SKYHOOK_AGENT_BUFFER_LIMIT", "4096"),
            ("COPY_RESOLV", "false"),
            ("OVERLAY_ALWAYS_RUN_STEP", "TRUE"),
        ]))
        .unwrap();
        assert_eq!(settings.resource_id, "demo-uid-1_pkg_1.0.0");
        assert_eq!(settings.data_dir, "/data");
        assert_eq!(settings.root_dir, "/var/lib/skyhook/demo");
        assert_eq!(settings.log_dir, "/var/log/skyhook/demo");
        assert!(!settings.write_logs);
        assert_eq!(settings.buffer_limit, 4096);
        assert!(!settings.copy_resolv);
        assert!(settings.always_run_step);
    }

    #[test]
    fn booleans_are_true_only_for_true() {
        for (value, expected) in [("true", true), ("True", true), ("1", false), ("yes", false)] {
            let settings =
                Settings::from_vars(&vars(&[("OVERLAY_ALWAYS_RUN_STEP", value)])).unwrap();
            assert_eq!(settings.always_run_step, expected, "{value}");
        }
    }

    #[test]
    fn a_bad_buffer_limit_is_an_error_naming_the_variable() {
        for value in ["", "0", "-1", "lots"] {
            let err =
                Settings::from_vars(&vars(&[("SKYHOOK_AGENT_BUFFER_LIMIT", value)])).unwrap_err();
            assert!(err.to_string().contains("SKYHOOK_AGENT_BUFFER_LIMIT"));
        }
    }

    #[test]
    fn resource_ids_split_into_three_parts() {
        assert_eq!(
            ResourceId::parse("customer-f5a1d42e-74e5-1_tuning_2.0.2").unwrap(),
            ResourceId {
                skyhook: "customer-f5a1d42e-74e5-1".into(),
                package: "tuning".into(),
                version: "2.0.2".into()
            }
        );
        for bad in ["", "a_b", "a_b_c_d", "a__c", "a_b/c_1.0.0", "a_.._1"] {
            assert!(ResourceId::parse(bad).is_err(), "{bad}");
        }
    }
}
