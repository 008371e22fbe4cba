//! Command shims: commands that would act on the real machine (`reboot`, `systemctl`,
//! `service`, `sysctl` writes, ...) are shadowed in every node root and container root by a shell
//! script that talks to the node simulator instead, through the node's control directory mounted
//! at `/run/devcluster` (a request FIFO and the journal). Pure: this module only says which files
//! to write; `crate::isolation` writes them.

/// Where the control directory appears inside node and container roots.
pub const CONTROL_MOUNT: &str = "/run/devcluster";
/// The request FIFO inside the control directory.
pub const REQUESTS_FIFO: &str = "requests";
/// The journal inside the control directory.
pub const JOURNAL_FILE: &str = "journal";
/// Where the journal also appears in a node root (a symlink into the control directory).
pub const NODE_JOURNAL_PATH: &str = "var/log/devcluster-journal";
/// The dispatcher every shadowed command links to.
pub const SHIM_PATH: &str = "usr/lib/devcluster/node-shim";
/// The machine's `sysctl`, kept for reads.
pub const REAL_SYSCTL_PATH: &str = "usr/lib/devcluster/sysctl.real";

/// Commands that power the machine off or reboot it.
const POWER_COMMANDS: &[&str] = &["reboot", "halt", "poweroff", "shutdown", "telinit", "init"];
/// Every shadowed command.
const SHADOWED: &[&str] = &[
    "reboot",
    "halt",
    "poweroff",
    "shutdown",
    "telinit",
    "init",
    "systemctl",
    "service",
    "sysctl",
];
/// Directories searched by PATH, shadowed in all of them so no earlier one can win.
const BIN_DIRS: &[&str] = &["usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin"];

/// A file to create in a root, relative to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShimFile {
    File {
        path: String,
        content: String,
        mode: u32,
    },
    Symlink {
        path: String,
        target: String,
    },
}

/// The files that shadow host-affecting commands in a root.
pub fn shim_files() -> Vec<ShimFile> {
    let mut files = vec![ShimFile::File {
        path: SHIM_PATH.to_owned(),
        content: script(),
        mode: 0o755,
    }];
    for dir in BIN_DIRS {
        for name in SHADOWED {
            files.push(ShimFile::Symlink {
                path: format!("{dir}/{name}"),
                target: format!("/{SHIM_PATH}"),
            });
        }
    }
    files
}

/// Files only a node root gets: the journal at its conventional place. The link is relative so
/// it also resolves when the root is read from the machine (through `/proc/<pid>/root`).
pub fn node_root_files() -> Vec<ShimFile> {
    let depth = NODE_JOURNAL_PATH.matches('/').count();
    let up = "../".repeat(depth);
    vec![ShimFile::Symlink {
        path: NODE_JOURNAL_PATH.to_owned(),
        target: format!(
            "{up}{}/{JOURNAL_FILE}",
            CONTROL_MOUNT.trim_start_matches('/')
        ),
    }]
}

fn script() -> String {
    format!("{}{}", script_functions(), script_dispatch())
}

/// The shim's header and its two actions: record a command in the journal, and ask the node
/// simulator for a reboot.
fn script_functions() -> String {
    format!(
        r#"#!/bin/sh
# devcluster node shim. This command would act on the real machine; on a simulated node it is
# recorded in the node's journal ({CONTROL_MOUNT}/{JOURNAL_FILE}, also /{NODE_JOURNAL_PATH}) and
# power requests go to the node simulator through {CONTROL_MOUNT}/{REQUESTS_FIFO}.
control={CONTROL_MOUNT}

journal() {{
    printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >> "$control/{JOURNAL_FILE}"
}}

power() {{
    journal "$@"
    boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
    printf 'reboot %s\n' "$*" > "$control/{REQUESTS_FIFO}"
    # A reboot does not return: the shutdown kills this process. Run outside a pod, return once
    # the node has booted again.
    while [ "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" = "$boot" ]; do sleep 1; done
    exit 0
}}

"#
    )
}

/// What the shim does for each command name it stands in for.
fn script_dispatch() -> String {
    let power = POWER_COMMANDS.join("|");
    format!(
        r#"name=${{0##*/}}
case "$name" in
    {power})
        case " $* " in
            *" -c "*|*" --help "*) journal "$name" "$@"; exit 0 ;;
        esac
        power "$name" "$@"
        ;;
    systemctl)
        verb=
        for arg in "$@"; do
            case "$arg" in -*) ;; *) verb=$arg; break ;; esac
        done
        case "$verb" in
            reboot|poweroff|halt|kexec|soft-reboot) power systemctl "$@" ;;
        esac
        journal systemctl "$@"
        units=$(for arg in "$@"; do case "$arg" in -*|"$verb") ;; *) echo "$arg" ;; esac; done)
        case "$verb" in
            is-active)
                for unit in ${{units:-unit}}; do echo active; done ;;
            is-enabled)
                for unit in ${{units:-unit}}; do echo enabled; done ;;
            is-failed)
                for unit in ${{units:-unit}}; do echo active; done
                exit 1 ;;
            status)
                for unit in $units; do
                    echo "* $unit - simulated by devcluster"
                    echo "     Loaded: loaded"
                    echo "     Active: active (running)"
                done ;;
            show)
                echo "LoadState=loaded"
                echo "ActiveState=active"
                echo "SubState=running"
                echo "UnitFileState=enabled" ;;
        esac
        exit 0
        ;;
    service)
        journal service "$@"
        case "$2" in
            status) echo "$1 is running" ;;
        esac
        exit 0
        ;;
    sysctl)
        for arg in "$@"; do
            case "$arg" in
                -p*|--load*|--system|-w|--write|*=*) journal sysctl "$@"; exit 0 ;;
            esac
        done
        if [ -x /{REAL_SYSCTL_PATH} ]; then exec /{REAL_SYSCTL_PATH} "$@"; fi
        exit 0
        ;;
esac
echo "devcluster node shim: unexpected command name $name" >&2
exit 127
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadows_every_host_command_in_every_bin_dir() {
        let files = shim_files();
        for dir in BIN_DIRS {
            for name in [
                "reboot",
                "shutdown",
                "halt",
                "poweroff",
                "systemctl",
                "service",
            ] {
                let path = format!("{dir}/{name}");
                assert!(
                    files
                        .iter()
                        .any(|f| matches!(f, ShimFile::Symlink { path: p, target }
                        if *p == path && target == "/usr/lib/devcluster/node-shim")),
                    "{path} is not shadowed"
                );
            }
        }
    }

    #[test]
    fn journal_link_is_relative() {
        assert_eq!(
            node_root_files(),
            vec![ShimFile::Symlink {
                path: "var/log/devcluster-journal".into(),
                target: "../../run/devcluster/journal".into(),
            }]
        );
    }

    #[test]
    fn dispatcher_handles_every_shadowed_name() {
        let ShimFile::File { content, mode, .. } = &shim_files()[0] else {
            panic!("the dispatcher comes first");
        };
        assert_eq!(*mode, 0o755);
        assert!(content.starts_with("#!/bin/sh\n"));
        for name in SHADOWED {
            assert!(content.contains(name), "{name} not handled");
        }
    }
}
