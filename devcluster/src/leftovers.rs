//! Cleaning up after a cluster whose owner died without stopping it (a killed daemon or test):
//! processes still running inside the state directory, and mounts left under it.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, umount2};

/// Mount points listed in a `/proc/<pid>/mountinfo` text (field 5, with the kernel's octal
/// escapes for space, tab, newline and backslash undone).
pub fn parse_mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|escaped| PathBuf::from(unescape_octal(escaped)))
        .collect()
}

fn unescape_octal(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let digits = bytes.get(index + 1..index + 4);
        let value = digits
            .filter(|digits| {
                bytes[index] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d))
            })
            .map(|digits| {
                digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'))
            });
        match value.and_then(|value| u8::try_from(value).ok()) {
            Some(byte) => {
                out.push(byte);
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount points at or under `root`, deepest first (the order they must be unmounted in).
pub fn mounts_under(mount_points: &[PathBuf], root: &Path) -> Vec<PathBuf> {
    let mut under: Vec<PathBuf> = mount_points
        .iter()
        .filter(|mount| mount.starts_with(root))
        .cloned()
        .collect();
    under.sort_by_key(|mount| std::cmp::Reverse(mount.components().count()));
    under.dedup();
    under
}

/// Detaches every mount under `root` in this mount namespace; returns what was unmounted.
pub fn unmount_all_under(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let root = root.canonicalize()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut unmounted = Vec::new();
    for mount in mounts_under(&parse_mount_points(&mountinfo), &root) {
        // Stacked mounts on one point each need their own unmount; detach keeps busy ones from
        // blocking the rest.
        while umount2(&mount, MntFlags::MNT_DETACH).is_ok() {
            unmounted.push(mount.clone());
        }
    }
    Ok(unmounted)
}

/// Processes started for the cluster in `root` that may outlive their owner: those chrooted under
/// it (pods of simulated nodes) and those whose command line names a path inside it (namespace
/// holders, container entry and namespace keeper processes), other than this process. A shell
/// that merely `cd`s there is spared.
pub fn processes_under(root: &Path) -> Vec<u32> {
    let Ok(root) = root.canonicalize() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let root_text = root.display().to_string();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let chrooted = std::fs::read_link(format!("/proc/{pid}/root"))
                .is_ok_and(|target| target != Path::new("/") && target.starts_with(&root));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let names_root = cmdline
                .split(|byte| *byte == 0)
                .any(|arg| Path::new(&*String::from_utf8_lossy(arg)).starts_with(&root_text));
            chrooted || names_root
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_unescaped_mount_points() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
40 22 0:35 / /s/nodes/node-1/root rw shared:20 - overlay overlay rw,lowerdir=/
41 22 0:36 / /s/with\\040space rw - tmpfs tmpfs rw
42 22 0:37 / /s/back\\134slash rw - tmpfs tmpfs rw
";
        let cases = [
            "/",
            "/s/nodes/node-1/root",
            "/s/with space",
            "/s/back\\slash",
        ];
        let parsed = parse_mount_points(text);
        assert_eq!(parsed, cases.iter().map(PathBuf::from).collect::<Vec<_>>());
    }

    #[test]
    fn unescaping_leaves_other_backslashes_alone() {
        let cases = [
            ("plain", "plain"),
            ("a\\040b", "a b"),
            ("a\\011b", "a\tb"),
            ("trailing\\", "trailing\\"),
            ("short\\04", "short\\04"),
            ("not\\089octal", "not\\089octal"),
        ];
        for (escaped, expected) in cases {
            assert_eq!(unescape_octal(escaped), expected, "{escaped}");
        }
    }

    #[test]
    fn mounts_under_a_root_deepest_first() {
        let all: Vec<PathBuf> = [
            "/",
            "/s",
            "/s/nodes/a/root",
            "/s/nodes/a/root/proc",
            "/sx",
            "/other",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let under = mounts_under(&all, Path::new("/s"));
        let expected: Vec<PathBuf> = ["/s/nodes/a/root/proc", "/s/nodes/a/root", "/s"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(under, expected);
    }

    #[test]
    fn a_process_naming_the_directory_is_found_but_not_one_merely_inside_it()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let spec = dir.path().canonicalize()?.join("spec.json");
        std::fs::write(&spec, "{}")?;
        let mut named = std::process::Command::new("tail")
            .arg("-f")
            .arg(&spec)
            .stdout(std::process::Stdio::null())
            .spawn()?;
        let mut inside = std::process::Command::new("sleep")
            .arg("600")
            .current_dir(dir.path())
            .spawn()?;
        // Until a child has exec'd, /proc shows the test binary's command line: wait for both
        // programs to be in place, or the scan races the fork under load.
        for (child, program) in [(&named, "tail"), (&inside, "sleep")] {
            let cmdline = format!("/proc/{}/cmdline", child.id());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while !std::fs::read(&cmdline)?.starts_with(program.as_bytes()) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{program} never started"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let found = processes_under(dir.path());
        for child in [&mut named, &mut inside] {
            child.kill()?;
            child.wait()?;
        }
        assert_eq!(found, vec![named.id()]);
        Ok(())
    }
}
