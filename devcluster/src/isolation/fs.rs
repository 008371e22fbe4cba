//! File helpers for building roots: copying a package, resolving paths inside a root without
//! escaping it through symlinks, writing the command shims.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

use super::error::IsolationError;
use crate::PathIoError;
use crate::node::command_shims::ShimFile;

/// Copies a directory tree, keeping modes and symlinks (the image "pull").
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), IsolationError> {
    let meta = std::fs::symlink_metadata(from).map_err(PathIoError::of("read", from))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(from).map_err(PathIoError::of("read link", from))?;
        symlink(&target, to).map_err(PathIoError::of("create symlink", to))?;
    } else if kind.is_dir() {
        std::fs::create_dir_all(to).map_err(PathIoError::of("create directory", to))?;
        for entry in std::fs::read_dir(from).map_err(PathIoError::of("list", from))? {
            let entry = entry.map_err(PathIoError::of("list", from))?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::set_permissions(to, meta.permissions()).map_err(PathIoError::of("chmod", to))?;
    } else {
        std::fs::copy(from, to).map_err(PathIoError::of("copy to", to))?;
    }
    Ok(())
}

/// Resolves `path` as if `root` were `/`: symlinks are followed, but absolute targets and `..`
/// stay inside `root`. Components that do not exist yet are appended as they are.
pub fn resolve_in_root(root: &Path, path: &str) -> PathBuf {
    let mut resolved = PathBuf::new();
    let mut pending: Vec<std::ffi::OsString> = Path::new(path)
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut links_followed = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        let on_disk = root.join(&candidate);
        match std::fs::read_link(&on_disk) {
            Ok(target) if links_followed < 40 => {
                links_followed += 1;
                if target.is_absolute() {
                    resolved = PathBuf::new();
                }
                pending.extend(target.components().rev().filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_owned()),
                    Component::ParentDir => Some("..".into()),
                    _ => None,
                }));
            }
            _ => resolved = candidate,
        }
    }
    root.join(resolved)
}

/// Creates an empty directory or file to mount on, with parents.
pub fn create_mount_point(path: &Path, directory: bool) -> Result<(), IsolationError> {
    if directory {
        std::fs::create_dir_all(path).map_err(PathIoError::of("create directory", path))?;
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(PathIoError::of("create directory", parent))?;
    }
    if !path.exists() {
        std::fs::write(path, b"").map_err(PathIoError::of("create file", path))?;
    }
    Ok(())
}

/// Writes shim files into `root`, replacing whatever is at their paths.
pub fn write_shim_files(root: &Path, files: &[ShimFile]) -> Result<(), IsolationError> {
    for file in files {
        let (ShimFile::File { path, .. } | ShimFile::Symlink { path, .. }) = file;
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(PathIoError::of("create directory", parent))?;
        }
        if std::fs::symlink_metadata(&path).is_ok() {
            std::fs::remove_file(&path).map_err(PathIoError::of("replace", &path))?;
        }
        match file {
            ShimFile::File { content, mode, .. } => {
                std::fs::write(&path, content).map_err(PathIoError::of("write", &path))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
                    .map_err(PathIoError::of("chmod", &path))?;
            }
            ShimFile::Symlink { target, .. } => {
                symlink(target, &path).map_err(PathIoError::of("create symlink", &path))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_symlinks_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("run")).unwrap();
        std::fs::create_dir_all(root.join("var")).unwrap();
        symlink("/run", root.join("var/run")).unwrap();
        symlink("../../etc", root.join("var/up")).unwrap();
        let cases = [
            ("/var/run/x", root.join("run/x")),
            ("/var/up/passwd", root.join("etc/passwd")),
            ("/../../etc", root.join("etc")),
            ("/", root.to_owned()),
            ("/new/dir", root.join("new/dir")),
        ];
        for (path, expected) in cases {
            assert_eq!(resolve_in_root(root, path), expected, "{path}");
        }
    }

    #[test]
    fn copies_trees_with_modes_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("package_dir")).unwrap();
        std::fs::write(from.join("package_dir/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            from.join("package_dir/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        symlink("package_dir/run.sh", from.join("link")).unwrap();
        let to = dir.path().join("to");
        copy_tree(&from, &to).unwrap();
        let mode = std::fs::metadata(to.join("package_dir/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            std::fs::read_link(to.join("link")).unwrap(),
            PathBuf::from("package_dir/run.sh")
        );
    }

    #[test]
    fn writes_shims_over_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("usr/sbin")).unwrap();
        std::fs::write(root.join("usr/sbin/reboot"), "real").unwrap();
        let files = vec![
            ShimFile::File {
                path: "usr/lib/devcluster/node-shim".into(),
                content: "#!/bin/sh\n".into(),
                mode: 0o755,
            },
            ShimFile::Symlink {
                path: "usr/sbin/reboot".into(),
                target: "/usr/lib/devcluster/node-shim".into(),
            },
        ];
        write_shim_files(root, &files).unwrap();
        write_shim_files(root, &files).unwrap();
        assert_eq!(
            std::fs::read_link(root.join("usr/sbin/reboot")).unwrap(),
            PathBuf::from("/usr/lib/devcluster/node-shim")
        );
    }
}
