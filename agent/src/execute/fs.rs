//! File operations on the host root that must treat the root mount as `/`: symlinks already on
//! the host (`/etc/resolv.conf -> /run/...`) are resolved inside the root, never in the
//! agent's own file system.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use crate::logs::{self, LogFile};

/// Symlink hops allowed while resolving one path (as Linux's MAXSYMLINKS).
const MAX_SYMLINK_HOPS: usize = 40;

fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Resolves `path` (taken relative to `root`, a leading `/` is ignored) following every symlink
/// as if `root` were `/`. Components that do not exist are kept as they are.
pub fn resolve_in_root(root: &Path, path: &Path) -> io::Result<PathBuf> {
    let mut resolved = PathBuf::new();
    let mut pending = components(path);
    let mut hops = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&name);
        let full = root.join(&candidate);
        match fs::symlink_metadata(&full) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(io::Error::other(format!(
                        "too many symlinks resolving {} inside {}",
                        path.display(),
                        root.display()
                    )));
                }
                let target = fs::read_link(&full)?;
                if target.is_absolute() {
                    resolved = PathBuf::new();
                }
                let mut rest = components(&target);
                rest.extend(pending);
                pending = rest;
            }
            _ => resolved = candidate,
        }
    }
    Ok(root.join(resolved))
}

/// Merges the tree `from` into `dest` under `root` (like `cp -a from/. dest/` with the host's
/// symlinks resolved inside the root). Directories are merged, files replaced (mode kept),
/// symlinks recreated as symlinks.
pub fn copy_tree(from: &Path, root: &Path, dest: &Path) -> io::Result<()> {
    let target = resolve_in_root(root, dest)?;
    if !target.is_dir() {
        fs::create_dir_all(&target)?;
        let mode = fs::metadata(from)?.permissions().mode();
        fs::set_permissions(&target, fs::Permissions::from_mode(mode))?;
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let child = dest.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), root, &child)?;
        } else if kind.is_symlink() {
            let link = target.join(entry.file_name());
            match fs::symlink_metadata(&link) {
                Ok(meta) if meta.is_dir() => {
                    return Err(io::Error::other(format!(
                        "cannot replace directory {} with a symlink",
                        link.display()
                    )));
                }
                Ok(_) => fs::remove_file(&link)?,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, &link)?;
        } else {
            copy_file(&entry.path(), root, &child)?;
        }
    }
    Ok(())
}

/// Copies one file to `dest` under `root`, writing through a symlink at `dest` inside the root.
pub fn copy_file(from: &Path, root: &Path, dest: &Path) -> io::Result<()> {
    let target = resolve_in_root(root, dest)?;
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(from, &target).map(|_| ())
}

/// Deletes the logs of step `stem` in `dir` beyond the newest five, with their `.err` files.
pub fn reap_logs(dir: &Path, stem: &str) -> io::Result<()> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if logs::is_step_log(stem, &name) {
            files.push(LogFile {
                name,
                modified: entry.metadata()?.modified()?,
            });
        }
    }
    for name in logs::logs_to_reap(stem, &files) {
        remove_if_present(&dir.join(&name))?;
        remove_if_present(&dir.join(format!("{name}.err")))?;
    }
    Ok(())
}

pub fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::time::{Duration, SystemTime};

    #[test]
    fn symlinks_resolve_inside_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("run/systemd/resolve")).unwrap();
        fs::create_dir_all(root.join("etc")).unwrap();
        fs::create_dir_all(root.join("usr/lib")).unwrap();
        symlink(
            "/run/systemd/resolve/stub-resolv.conf",
            root.join("etc/resolv.conf"),
        )
        .unwrap();
        symlink("usr/lib", root.join("lib")).unwrap();
        symlink("../../../../../../etc", root.join("usr/lib/escape")).unwrap();
        symlink("loop", root.join("loop")).unwrap();

        assert_eq!(
            resolve_in_root(root, Path::new("/etc/resolv.conf")).unwrap(),
            root.join("run/systemd/resolve/stub-resolv.conf")
        );
        assert_eq!(
            resolve_in_root(root, Path::new("/lib/x.so")).unwrap(),
            root.join("usr/lib/x.so")
        );
        assert_eq!(
            resolve_in_root(root, Path::new("lib/escape/hosts")).unwrap(),
            root.join("etc/hosts"),
            "'..' never climbs above the root"
        );
        assert_eq!(
            resolve_in_root(root, Path::new("/new/dir/file")).unwrap(),
            root.join("new/dir/file")
        );
        assert!(resolve_in_root(root, Path::new("/loop/x")).is_err());
    }

    #[test]
    fn copy_tree_merges_into_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("root_dir");
        let root = tmp.path().join("host");
        fs::create_dir_all(source.join("etc/demo")).unwrap();
        fs::create_dir_all(source.join("lib")).unwrap();
        fs::write(source.join("etc/demo/a.conf"), "new").unwrap();
        fs::write(source.join("lib/tool"), "bin").unwrap();
        fs::set_permissions(source.join("lib/tool"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("/etc/demo/a.conf", source.join("etc/demo/link.conf")).unwrap();

        fs::create_dir_all(root.join("etc/demo")).unwrap();
        fs::create_dir_all(root.join("usr/lib")).unwrap();
        fs::write(root.join("etc/demo/a.conf"), "old").unwrap();
        fs::write(root.join("etc/demo/keep.conf"), "keep").unwrap();
        symlink("usr/lib", root.join("lib")).unwrap();

        copy_tree(&source, &root, Path::new("/")).unwrap();

        assert_eq!(
            fs::read_to_string(root.join("etc/demo/a.conf")).unwrap(),
            "new"
        );
        assert_eq!(
            fs::read_to_string(root.join("etc/demo/keep.conf")).unwrap(),
            "keep"
        );
        assert_eq!(
            fs::read_to_string(root.join("usr/lib/tool")).unwrap(),
            "bin"
        );
        let mode = fs::metadata(root.join("usr/lib/tool"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            fs::read_link(root.join("etc/demo/link.conf")).unwrap(),
            PathBuf::from("/etc/demo/a.conf")
        );
        assert!(
            fs::symlink_metadata(root.join("lib"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn copy_file_writes_through_a_host_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("host");
        fs::create_dir_all(root.join("etc")).unwrap();
        symlink("/run/resolv.conf", root.join("etc/resolv.conf")).unwrap();
        let source = tmp.path().join("resolv.conf");
        fs::write(&source, "nameserver 1.1.1.1\n").unwrap();
        copy_file(&source, &root, Path::new("/etc/resolv.conf")).unwrap();
        assert_eq!(
            fs::read_to_string(root.join("run/resolv.conf")).unwrap(),
            "nameserver 1.1.1.1\n"
        );
    }

    #[test]
    fn reaping_keeps_the_newest_five_logs_and_their_err_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for i in 0..7u64 {
            let log = dir.join(format!("run.sh-2025-06-01-12000{i}.log"));
            fs::write(&log, "").unwrap();
            fs::write(dir.join(format!("run.sh-2025-06-01-12000{i}.log.err")), "").unwrap();
            fs::File::options()
                .write(true)
                .open(&log)
                .unwrap()
                .set_modified(base + Duration::from_secs(i))
                .unwrap();
        }
        fs::write(dir.join("other.sh-2025-06-01-120000.log"), "").unwrap();
        reap_logs(dir, "run.sh").unwrap();
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let logs: Vec<&String> = names
            .iter()
            .filter(|n| n.starts_with("run.sh") && n.ends_with(".log"))
            .collect();
        assert_eq!(logs.len(), 5);
        assert!(!names.contains(&"run.sh-2025-06-01-120000.log".to_string()));
        assert!(!names.contains(&"run.sh-2025-06-01-120001.log.err".to_string()));
        assert!(names.contains(&"run.sh-2025-06-01-120002.log.err".to_string()));
        assert!(names.contains(&"other.sh-2025-06-01-120000.log".to_string()));
    }
}
