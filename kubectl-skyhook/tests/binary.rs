//! The built binary: version output, exit codes, errors on stderr with a hint, completion.

use std::process::{Command, Output};

/// Runs the built `binary` with `args`, away from any kubeconfig.
#[allow(clippy::unwrap_used)] // A binary that cannot start must fail the test.
fn run_binary(binary: &str, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent-home-for-kubectl-skyhook-tests")
        .output()
        .unwrap()
}

fn run(args: &[&str]) -> Output {
    run_binary(env!("CARGO_BIN_EXE_kubectl-skyhook"), args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn version_flag_and_client_only_version() {
    let version = env!("CARGO_PKG_VERSION");
    let flag = run(&["--version"]);
    assert!(flag.status.success());
    assert_eq!(text(&flag.stdout), format!("Skyhook plugin: {version}\n"));

    let client = run(&["version", "--client-only"]);
    assert!(client.status.success());
    assert_eq!(
        text(&client.stdout),
        format!("Skyhook plugin:\t{version}\n")
    );
}

#[test]
fn usage_errors_exit_1_on_stderr() {
    for args in [
        &["status", "-o", "bogus"][..],
        &["frobnicate"],
        &["node", "ignore"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(text(&out.stderr).contains("error"), "{args:?}");
    }
}

#[test]
fn cluster_errors_exit_1_with_a_hint() {
    let out = run(&["status", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("Error: failed to load the kubeconfig"),
        "{stderr}"
    );
    assert!(stderr.contains("/nonexistent/kubeconfig"), "{stderr}");
    assert!(stderr.contains("Hint: check --kubeconfig"), "{stderr}");
}

#[test]
fn completion_scripts_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kubectl-skyhook"),
        ("fish", "complete -c kubectl-skyhook"),
    ] {
        let out = run(&["completion", shell]);
        assert!(out.status.success(), "{shell}");
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("deployment-policy"), "{shell}");
    }
}

#[test]
fn help_shows_examples() {
    let out = run(&["node", "list", "--help"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("kubectl skyhook node list --skyhook demo"));
}

fn run_nodewright(args: &[&str]) -> Output {
    run_binary(env!("CARGO_BIN_EXE_kubectl-nodewright"), args)
}

#[test]
fn the_nodewright_binary_speaks_of_nodewrights() {
    let version = env!("CARGO_PKG_VERSION");
    let flag = run_nodewright(&["--version"]);
    assert_eq!(
        text(&flag.stdout),
        format!("NodeWright plugin: {version}\n")
    );
    let help = run_nodewright(&["node", "list", "--help"]);
    assert!(help.status.success());
    assert!(text(&help.stdout).contains("kubectl nodewright node list --nodewright demo"));

    // The deprecated flag still works, with upstream's note, before the command runs.
    let old = run_nodewright(&[
        "node",
        "list",
        "--skyhook",
        "demo",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert_eq!(old.status.code(), Some(1));
    let stderr = text(&old.stderr);
    assert!(
        stderr.starts_with("Flag --skyhook has been deprecated, use --nodewright instead\n"),
        "{stderr}"
    );
    let both = run_nodewright(&["node", "list", "--skyhook", "a", "--nodewright", "b"]);
    assert_eq!(both.status.code(), Some(1));
    assert!(text(&both.stderr).contains("cannot be used together"));

    let script = text(&run_nodewright(&["completion", "zsh"]).stdout);
    assert!(script.contains("#compdef kubectl-nodewright"), "{script}");
}

/// A hard link, not a copy: a copy is a file this process writes, and a child another test
/// forks meanwhile inherits it open for writing until its exec, so running the copy fails now
/// and then with ETXTBSY ("Text file busy"). A link writes nothing, and in the binary's own
/// directory it is on the binary's filesystem.
#[test]
fn a_copy_named_kubectl_nodewright_is_the_nodewright_plugin() {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-skyhook"));
    let dir =
        (binary.parent().unwrap()).join(format!("kubectl-nodewright-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("kubectl-nodewright");
    std::fs::hard_link(binary, &copy).unwrap();
    let out = Command::new(&copy).arg("--version").output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(text(&out.stdout).starts_with("NodeWright plugin: "));
}
