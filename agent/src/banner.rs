//! The start banner, line for line as upstream prints it (tools and people grep for it).

use crate::layout::Layout;
use crate::mode::Mode;
use crate::settings::{ResourceId, Settings};

/// What the banner reports about the invocation.
#[derive(Debug)]
pub struct BannerInput<'a> {
    pub mode: Mode,
    pub root_mount: &'a str,
    pub copy_dir: &'a str,
    pub interrupt_data: Option<&'a str>,
    pub settings: &'a Settings,
}

fn python_bool(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

pub fn render(input: &BannerInput<'_>) -> String {
    let settings = input.settings;
    let mut lines = vec![
        "-".repeat(20),
        "--CLI CONFIGURATION-".to_string(),
        format!("mode: {}", input.mode),
        format!("root_mount: {}", input.root_mount),
        format!("copy_dir: {}", input.copy_dir),
        format!("interrupt_data: {}", input.interrupt_data.unwrap_or("None")),
        format!("always_run_step: {}", python_bool(settings.always_run_step)),
        "--ENV CONFIGURATION-".to_string(),
        format!("COPY_RESOLV: {}", python_bool(settings.copy_resolv)),
        format!(
            "OVERLAY_ALWAYS_RUN_STEP: {}",
            python_bool(settings.always_run_step)
        ),
        format!("SKYHOOK_RESOURCE_ID: {}", settings.resource_id),
        format!("SKYHOOK_DATA_DIR: {}", settings.data_dir),
        format!("SKYHOOK_ROOT_DIR: {}", settings.root_dir),
        format!("SKYHOOK_LOG_DIR: {}", settings.log_dir),
        format!("SKYHOOK_AGENT_BUFFER_LIMIT: {}", settings.buffer_limit),
        format!(
            "SKYHOOK_AGENT_WRITE_LOGS: {}",
            python_bool(settings.write_logs)
        ),
        "Directory CONFIGURATION".to_string(),
    ];
    // Paths as seen on the host (no root mount), named after SKYHOOK_RESOURCE_ID like upstream.
    let layout = Layout::new("/", &settings.root_dir, &settings.log_dir);
    match ResourceId::parse(&settings.resource_id) {
        Ok(id) => {
            lines.push(format!(
                "flag_dir: {}",
                layout.package_flag_dir(&id.package, &id.version).display()
            ));
            lines.push(format!(
                "log_dir: {}",
                layout.package_log_dir(&id.package, &id.version).display()
            ));
            lines.push(format!(
                "history_file: {}",
                layout.history_file(&id.package).display()
            ));
        }
        Err(_) => lines.push(
            "flag_dir, log_dir, history_file: named after config.json (SKYHOOK_RESOURCE_ID is not set)"
                .to_string(),
        ),
    }
    lines.push("-".repeat(20));
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn banner_matches_upstream_layout() {
        let vars: BTreeMap<String, String> = [
            ("SKYHOOK_RESOURCE_ID", "resource_package_1.0.0"),
            ("SKYHOOK_DATA_DIR", "/data"),
            ("SKYHOOK_ROOT_DIR", "/state"),
            ("SKYHOOK_LOG_DIR", "/logs"),
            ("SKYHOOK_AGENT_BUFFER_LIMIT", "4096"),
            ("SKYHOOK_AGENT_WRITE_LOGS", "false"),
            ("COPY_RESOLV", "false"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let settings = Settings::from_vars(&vars).0;
        let text = render(&BannerInput {
            mode: Mode::Config,
            root_mount: "/host",
            copy_dir: "/package",
            interrupt_data: None,
            settings: &settings,
        });
        assert_eq!(
            text,
            "--------------------\n\
             --CLI CONFIGURATION-\n\
             mode: config\n\
             root_mount: /host\n\
             copy_dir: /package\n\
             interrupt_data: None\n\
             always_run_step: False\n\
             --ENV CONFIGURATION-\n\
             COPY_RESOLV: False\n\
             OVERLAY_ALWAYS_RUN_STEP: False\n\
             SKYHOOK_RESOURCE_ID: resource_package_1.0.0\n\
             SKYHOOK_DATA_DIR: /data\n\
             SKYHOOK_ROOT_DIR: /state\n\
             SKYHOOK_LOG_DIR: /logs\n\
             SKYHOOK_AGENT_BUFFER_LIMIT: 4096\n\
             SKYHOOK_AGENT_WRITE_LOGS: False\n\
             Directory CONFIGURATION\n\
             flag_dir: /state/flags/package/1.0.0\n\
             log_dir: /logs/package/1.0.0\n\
             history_file: /state/history/package.json\n\
             --------------------\n"
        );
    }

    #[test]
    fn banner_survives_a_missing_resource_id() {
        let settings = Settings::from_vars(&BTreeMap::new()).0;
        let text = render(&BannerInput {
            mode: Mode::Apply,
            root_mount: "/root",
            copy_dir: "/c",
            interrupt_data: None,
            settings: &settings,
        });
        assert!(text.contains("SKYHOOK_RESOURCE_ID is not set"));
    }
}
