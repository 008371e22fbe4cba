//! Thin wrappers over mount(2) and friends with errors that name the path.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

use super::error::IsolationError;
use crate::PathIoError;

fn sys_error(action: &'static str, path: &Path) -> impl FnOnce(nix::Error) -> IsolationError {
    let path = path.to_owned();
    move |source| IsolationError::Sys {
        action,
        path,
        source,
    }
}

/// Mounts a filesystem (`proc`, `sysfs`, `tmpfs`, `overlay`, `devpts`).
pub fn mount_fs(
    fstype: &'static str,
    target: &Path,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), IsolationError> {
    mount(Some(fstype), target, Some(fstype), flags, data)
        .map_err(sys_error(fstype_action(fstype), target))
}

fn fstype_action(fstype: &str) -> &'static str {
    match fstype {
        "proc" => "mount proc at",
        "sysfs" => "mount sysfs at",
        "tmpfs" => "mount tmpfs at",
        "overlay" => "mount overlay at",
        "devpts" => "mount devpts at",
        _ => "mount a filesystem at",
    }
}

/// Bind-mounts `source` on `target` (recursively), optionally read-only.
pub fn bind(source: &Path, target: &Path, read_only: bool) -> Result<(), IsolationError> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(sys_error("bind-mount onto", target))?;
    if read_only {
        remount_read_only(target)?;
    }
    Ok(())
}

/// Makes the bind mount at `target` read-only, keeping its other flags.
pub fn remount_read_only(target: &Path) -> Result<(), IsolationError> {
    let keep = existing_flags(target);
    mount(
        None::<&str>,
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | keep,
        None::<&str>,
    )
    .map_err(sys_error("remount read-only", target))
}

/// The nosuid/nodev/noexec flags of the mount at `target` (a read-only remount must keep them).
fn existing_flags(target: &Path) -> MsFlags {
    let mut flags = MsFlags::empty();
    if let Ok(stat) = nix::sys::statvfs::statvfs(target) {
        use nix::sys::statvfs::FsFlags;
        let f = stat.flags();
        if f.contains(FsFlags::ST_NOSUID) {
            flags |= MsFlags::MS_NOSUID;
        }
        if f.contains(FsFlags::ST_NODEV) {
            flags |= MsFlags::MS_NODEV;
        }
        if f.contains(FsFlags::ST_NOEXEC) {
            flags |= MsFlags::MS_NOEXEC;
        }
    }
    flags
}

/// Stops mount events from propagating between this namespace and the one it was copied from.
pub fn make_private_recursive() -> Result<(), IsolationError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(sys_error("make mounts private under", Path::new("/")))
}

/// Detaches the mount at `target` and everything under it.
pub fn detach(target: &Path) -> Result<(), IsolationError> {
    umount2(target, MntFlags::MNT_DETACH).map_err(sys_error("unmount", target))
}

/// Whether `path` is a mount point in this namespace.
pub fn is_mount_point(path: &Path) -> Result<bool, IsolationError> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(PathIoError::of(
        "read",
        PathBuf::from("/proc/self/mountinfo"),
    ))?;
    Ok(mount_points(&info).any(|p| p == path))
}

/// Mount points listed in a mountinfo file (field 5, with octal escapes decoded).
fn mount_points(mountinfo: &str) -> impl Iterator<Item = PathBuf> + '_ {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
}

fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mount_points() {
        let info = "22 1 8:1 / / rw - ext4 /dev/vda rw\n\
                    40 22 0:5 / /tmp/my\\040dir rw - tmpfs tmpfs rw\n";
        let points: Vec<PathBuf> = mount_points(info).collect();
        assert_eq!(
            points,
            vec![PathBuf::from("/"), PathBuf::from("/tmp/my dir")]
        );
    }
}
