//! The namespace and mount work of the hidden entry points. Each runs in a fresh,
//! single-threaded process.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;
use nix::sched::CloneFlags;

use super::args::keep_namespace_args;
use super::error::IsolationError;
use super::fs::{copy_tree, create_mount_point, resolve_in_root, write_shim_files};
use super::mounts::{bind, detach, is_mount_point, make_private_recursive, mount_fs};
use super::spec::{ContainerSpec, CopyInto, MountSource, NamespaceRecord, NodeRootSpec, RootSpec};
use crate::PathIoError;
use crate::node::command_shims::{CONTROL_MOUNT, REAL_SYSCTL_PATH, node_root_files, shim_files};

/// `__hold-ns`: a private mount namespace that lives until stdin closes.
pub fn hold_namespace() -> Result<(), IsolationError> {
    die_with_parent()?;
    nix::sched::unshare(CloneFlags::CLONE_NEWNS).map_err(|source| IsolationError::Sys {
        action: "unshare the mount namespace of",
        path: PathBuf::from("/proc/self"),
        source,
    })?;
    make_private_recursive()?;
    report_ready()?;
    // EOF on stdin means the simulator is gone; the namespace (and every node root in it) then
    // disappears with this process.
    wait_for_stdin_eof();
    Ok(())
}

/// `__hold-netns`: a fresh network namespace (loopback only until the kubelet links it to the
/// node's bridge) that lives until stdin closes.
pub fn hold_network_namespace() -> Result<(), IsolationError> {
    die_with_parent()?;
    nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(|source| IsolationError::Sys {
        action: "unshare the network namespace of",
        path: PathBuf::from("/proc/self"),
        source,
    })?;
    report_ready()?;
    wait_for_stdin_eof();
    Ok(())
}

fn report_ready() -> Result<(), IsolationError> {
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready")
        .and_then(|()| stdout.flush())
        .map_err(PathIoError::of(
            "report readiness on",
            PathBuf::from("stdout"),
        ))?;
    Ok(())
}

/// Returns once stdin is closed (or fails).
pub fn wait_for_stdin_eof() {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while stdin.read(&mut sink).is_ok_and(|n| n > 0) {}
}

/// `__node-root`: (re)mounts a node's root in the holder's namespace. Remounting empties the
/// node's tmpfs mounts (`/tmp`, `/run`), as a reboot does; the upper directory persists.
pub fn mount_node_root(spec: &NodeRootSpec) -> Result<(), IsolationError> {
    enter_namespace(spec.holder_pid)?;
    if is_mount_point(&spec.merged)? {
        detach(&spec.merged)?;
    }
    for dir in [&spec.upper, &spec.work, &spec.merged] {
        create_mount_point(dir, true)?;
    }
    mount_overlay(&spec.merged, &spec.upper, &spec.work)?;
    system_mounts(&spec.merged, &spec.control_dir, &spec.boot_id_file, None)
}

/// `__container`: builds the container's root and execs its command. Returns only on failure.
pub fn run_container(spec: &ContainerSpec, spec_path: &Path) -> IsolationError {
    match prepare_container(spec, spec_path) {
        Ok(()) => {}
        Err(e) => return e,
    }
    let Some((program, args)) = spec.argv.split_first() else {
        return IsolationError::NoCommand;
    };
    let source = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .exec();
    IsolationError::Exec {
        program: program.clone(),
        source,
    }
}

fn prepare_container(spec: &ContainerSpec, spec_path: &Path) -> Result<(), IsolationError> {
    die_with_parent()?;
    if let Some(network) = &spec.network_namespace {
        enter_network_namespace(network)?;
    }
    enter_namespace(spec.holder_pid)?;
    nix::sched::unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS).map_err(|source| {
        IsolationError::Sys {
            action: "unshare the namespaces of",
            path: PathBuf::from("/proc/self"),
            source,
        }
    })?;
    make_private_recursive()?;
    nix::unistd::sethostname(&spec.hostname).map_err(|source| IsolationError::Sys {
        action: "set the hostname of",
        path: PathBuf::from("/proc/self"),
        source,
    })?;
    let root = match &spec.root {
        RootSpec::Node { path } => path.clone(),
        RootSpec::Container {
            scratch,
            node_root,
            control_dir,
            boot_id_file,
            contents,
        } => container_root(
            scratch,
            node_root,
            control_dir,
            boot_id_file,
            contents.as_ref(),
        )?,
    };
    for m in &spec.mounts {
        let target = resolve_in_root(&root, &m.target);
        let source = match &m.source {
            MountSource::Machine(path) => path.clone(),
            MountSource::Node {
                node_root,
                path,
                directory,
            } => {
                let source = resolve_in_root(node_root, path);
                if !source.exists() {
                    create_mount_point(&source, *directory)?;
                }
                source
            }
        };
        create_mount_point(&target, source.is_dir())?;
        bind(&source, &target, m.read_only)?;
    }
    if let Some(path) = &spec.namespace_file {
        record_namespace(path, spec_path)?;
    }
    // Nothing in a node may reboot the machine, even through the syscall.
    caps::drop(None, caps::CapSet::Bounding, caps::Capability::CAP_SYS_BOOT)
        .map_err(IsolationError::Capabilities)?;
    nix::unistd::chroot(&root).map_err(|source| IsolationError::Sys {
        action: "chroot into",
        path: root.clone(),
        source,
    })?;
    let cwd = spec
        .working_dir
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or("/");
    if std::fs::metadata(cwd).is_err() {
        create_mount_point(Path::new(cwd), true)?;
    }
    nix::unistd::chdir(cwd).map_err(|source| IsolationError::Sys {
        action: "change directory to",
        path: PathBuf::from(cwd),
        source,
    })
}

/// An overlay of the machine's `/` on a private tmpfs, with the node's system mounts, the command
/// shims and the image's contents.
fn container_root(
    scratch: &Path,
    node_root: &Path,
    control_dir: &Path,
    boot_id_file: &Path,
    contents: Option<&CopyInto>,
) -> Result<PathBuf, IsolationError> {
    create_mount_point(scratch, true)?;
    mount_fs("tmpfs", scratch, MsFlags::empty(), Some("mode=755"))?;
    let (upper, work, root) = (
        scratch.join("upper"),
        scratch.join("work"),
        scratch.join("root"),
    );
    for dir in [&upper, &work, &root] {
        create_mount_point(dir, true)?;
    }
    mount_overlay(&root, &upper, &work)?;
    keep_real_sysctl(&root)?;
    write_shim_files(&root, &shim_files())?;
    system_mounts(
        &root,
        control_dir,
        boot_id_file,
        Some(&node_root.join("dev")),
    )?;
    if let Some(contents) = contents {
        copy_tree(&contents.from, &root.join(&contents.inside))?;
    }
    Ok(root)
}

/// Writes the command shims, the journal link and a copy of the machine's `sysctl` into a node's
/// overlay upper directory (before it is mounted).
pub fn prepare_node_upper(upper: &Path) -> Result<(), IsolationError> {
    create_mount_point(upper, true)?;
    copy_real_sysctl(Path::new("/usr/sbin/sysctl"), upper)?;
    let mut files = shim_files();
    files.extend(node_root_files());
    write_shim_files(upper, &files)
}

/// Copies the machine's `sysctl` aside before the shim shadows it, so reads still work.
fn keep_real_sysctl(root: &Path) -> Result<(), IsolationError> {
    copy_real_sysctl(&root.join("usr/sbin/sysctl"), root)
}

fn copy_real_sysctl(real: &Path, root: &Path) -> Result<(), IsolationError> {
    if std::fs::symlink_metadata(real).is_ok_and(|m| m.is_file()) {
        let kept = root.join(REAL_SYSCTL_PATH);
        create_mount_point(&kept, false)?;
        std::fs::copy(real, &kept).map_err(PathIoError::of("copy sysctl to", kept))?;
    }
    Ok(())
}

fn mount_overlay(merged: &Path, upper: &Path, work: &Path) -> Result<(), IsolationError> {
    for path in [merged, upper, work] {
        if path.to_string_lossy().contains([',', ':']) {
            return Err(IsolationError::OverlayPath {
                path: path.to_owned(),
            });
        }
    }
    let options = format!(
        "lowerdir=/,upperdir={},workdir={}",
        upper.display(),
        work.display()
    );
    mount_fs("overlay", merged, MsFlags::empty(), Some(&options))
}

/// `/proc` (with `/proc/sys` read-only and the node's boot id), read-only `/sys`, a minimal
/// `/dev` (or the node's), private `/tmp` and `/run`, and the control directory.
fn system_mounts(
    root: &Path,
    control_dir: &Path,
    boot_id_file: &Path,
    node_dev: Option<&Path>,
) -> Result<(), IsolationError> {
    let nosuid_nodev_noexec = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let proc = root.join("proc");
    mount_fs_on_new_dir("proc", &proc, nosuid_nodev_noexec, None)?;
    for protected in ["sys", "sysrq-trigger"] {
        let path = proc.join(protected);
        if path.exists() {
            bind(&path, &path, true)?;
        }
    }
    bind(boot_id_file, &proc.join("sys/kernel/random/boot_id"), true)?;

    mount_fs_on_new_dir(
        "sysfs",
        &root.join("sys"),
        nosuid_nodev_noexec | MsFlags::MS_RDONLY,
        None,
    )?;

    let dev = root.join("dev");
    create_mount_point(&dev, true)?;
    match node_dev {
        Some(node_dev) => bind(node_dev, &dev, false)?,
        None => minimal_dev(&dev)?,
    }

    private_tmpfs(&root.join("tmp"), "mode=1777")?;
    private_tmpfs(&root.join("run"), "mode=755")?;
    let control = root.join(CONTROL_MOUNT.trim_start_matches('/'));
    create_mount_point(&control, true)?;
    bind(control_dir, &control, false)
}

/// Creates the directory `dir` and mounts a new `fstype` on it.
fn mount_fs_on_new_dir(
    fstype: &'static str,
    dir: &Path,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), IsolationError> {
    create_mount_point(dir, true)?;
    mount_fs(fstype, dir, flags, data)
}

/// A tmpfs of the container's own at `dir` (`/tmp`, `/run`, `/dev/shm`).
fn private_tmpfs(dir: &Path, mode: &str) -> Result<(), IsolationError> {
    mount_fs_on_new_dir(
        "tmpfs",
        dir,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(mode),
    )
}

/// A tmpfs `/dev` with the harmless devices bound in from the machine, a private devpts and shm.
fn minimal_dev(dev: &Path) -> Result<(), IsolationError> {
    mount_fs("tmpfs", dev, MsFlags::MS_NOSUID, Some("mode=755"))?;
    for device in ["null", "zero", "full", "random", "urandom", "tty"] {
        let target = dev.join(device);
        create_mount_point(&target, false)?;
        bind(&Path::new("/dev").join(device), &target, false)?;
    }
    mount_fs_on_new_dir(
        "devpts",
        &dev.join("pts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    )?;
    private_tmpfs(&dev.join("shm"), "mode=1777")?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let path = dev.join(link);
        std::os::unix::fs::symlink(target, &path).map_err(|source| {
            IsolationError::Io(PathIoError {
                action: "create symlink",
                path,
                source,
            })
        })?;
    }
    Ok(())
}

fn enter_namespace(holder_pid: i32) -> Result<(), IsolationError> {
    let path = PathBuf::from(format!("/proc/{holder_pid}/ns/mnt"));
    let file = std::fs::File::open(&path)
        .map_err(PathIoError::of("open the node namespace", path.clone()))?;
    nix::sched::setns(file, CloneFlags::CLONE_NEWNS).map_err(|source| IsolationError::Sys {
        action: "enter the mount namespace",
        path,
        source,
    })
}

fn enter_network_namespace(path: &Path) -> Result<(), IsolationError> {
    let file = std::fs::File::open(path).map_err(PathIoError::of(
        "open the pod's network namespace",
        path.to_owned(),
    ))?;
    nix::sched::setns(file, CloneFlags::CLONE_NEWNET).map_err(|source| IsolationError::Sys {
        action: "enter the network namespace",
        path: path.to_owned(),
        source,
    })
}

/// Starts the keeper of this process's mount namespace on our stdin (the kubelet's pipe), gives
/// the container `/dev/null` as stdin instead, and records the namespace with the keeper's pid.
fn record_namespace(path: &Path, spec_path: &Path) -> Result<(), IsolationError> {
    let namespace = mount_namespace_id("self").map_err(PathIoError::of(
        "read the mount namespace of",
        PathBuf::from("/proc/self/ns/mnt"),
    ))?;
    let exe = PathBuf::from("/proc/self/exe");
    let launched = std::process::Command::new(&exe)
        .args(keep_namespace_args(spec_path, false))
        .stdin(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(PathIoError::of("start the namespace keeper", exe.clone()))?;
    let printed = String::from_utf8_lossy(&launched.stdout);
    let keeper_pid = printed
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|_| launched.status.success())
        .ok_or_else(|| {
            IsolationError::Io(PathIoError {
                action: "start the namespace keeper",
                path: exe,
                source: std::io::Error::other(format!(
                    "it exited with {} and printed {:?} instead of its pid",
                    launched.status,
                    printed.trim()
                )),
            })
        })?;
    let null = PathBuf::from("/dev/null");
    let dev_null = std::fs::File::open(&null).map_err(PathIoError::of("open", null.clone()))?;
    nix::unistd::dup2_stdin(&dev_null).map_err(|source| IsolationError::Sys {
        action: "redirect stdin to",
        path: null,
        source,
    })?;
    let record = NamespaceRecord {
        namespace,
        keeper_pid,
    };
    let json = serde_json::to_vec(&record).map_err(|e| {
        IsolationError::Io(PathIoError {
            action: "encode the namespace record for",
            path: path.to_owned(),
            source: std::io::Error::other(e),
        })
    })?;
    std::fs::write(path, json).map_err(|source| {
        IsolationError::Io(PathIoError {
            action: "write",
            path: path.to_owned(),
            source,
        })
    })
}

/// `__keep-ns`: starts the detached keeper (which inherits our stdin) and prints its pid.
pub fn start_detached_keeper(spec_path: &Path) -> Result<(), IsolationError> {
    let exe = PathBuf::from("/proc/self/exe");
    let keeper = std::process::Command::new(&exe)
        .args(keep_namespace_args(spec_path, true))
        .stdin(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(PathIoError::of("start the detached namespace keeper", exe))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", keeper.id())
        .and_then(|()| stdout.flush())
        .map_err(|source| {
            IsolationError::Io(PathIoError {
                action: "report the keeper pid on",
                path: PathBuf::from("stdout"),
                source,
            })
        })
}

/// Dies with the process that started it, so containers never outlive the simulator.
fn die_with_parent() -> Result<(), IsolationError> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(|source| {
        IsolationError::Sys {
            action: "set the parent-death signal of",
            path: PathBuf::from("/proc/self"),
            source,
        }
    })
}

/// The mount namespace id (`mnt:[4026531841]`) of a process (`"self"` or a pid).
pub fn mount_namespace_id(pid: &str) -> std::io::Result<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/mnt")).map(|p| p.to_string_lossy().into_owned())
}
