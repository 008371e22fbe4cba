//! The images cannot be built here (no registry), so their Dockerfiles are checked for shape: a
//! build stage that compiles exactly the binary the final stage copies, a distroless final stage,
//! the user each image must run as, and an entrypoint at the copied path.

use anyhow::{Context, ensure};

#[test]
fn each_dockerfile_builds_and_runs_its_own_binary() -> anyhow::Result<()> {
    let workspace = e2e::workspace();
    // (crate directory, binary, user of the final stage)
    let images = [
        ("controller", "skyhook-controller", "10001:10001"),
        ("webhook", "skyhook-webhook", "10001:10001"),
        // The agent chroots into the host and runs package steps as root, as upstream's does.
        ("agent", "skyhook-agent", "0:0"),
    ];
    for (dir, binary, user) in images {
        let path = workspace.join(dir).join("Dockerfile");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let instructions: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        let froms: Vec<&&str> = instructions
            .iter()
            .filter(|line| line.starts_with("FROM "))
            .collect();
        ensure!(froms.len() == 2, "{dir}: {froms:?}");
        ensure!(
            froms[0].starts_with("FROM rust:1.95-alpine AS build"),
            "{dir}: {}",
            froms[0]
        );
        ensure!(
            froms[1].starts_with("FROM gcr.io/distroless/static-debian12"),
            "{dir}: {}",
            froms[1]
        );
        ensure!(
            text.contains(&format!(
                "cargo build --release --locked -p {dir} --bin {binary}"
            )),
            "{dir}: does not build {binary}"
        );
        let manifest = std::fs::read_to_string(workspace.join(dir).join("Cargo.toml"))?;
        ensure!(
            manifest.contains(&format!("name = \"{binary}\"")),
            "{dir}/Cargo.toml has no binary {binary}"
        );
        let installed = format!("/usr/local/bin/{binary}");
        ensure!(
            instructions.contains(&format!("COPY --from=build /out/{binary} {installed}").as_str()),
            "{dir}: the final stage does not copy {binary}"
        );
        let last = |prefix: &str| {
            instructions
                .iter()
                .rev()
                .find(|line| line.starts_with(prefix))
        };
        ensure!(
            last("USER ") == Some(&format!("USER {user}").as_str()),
            "{dir}: {:?}",
            last("USER ")
        );
        ensure!(
            last("ENTRYPOINT ") == Some(&format!("ENTRYPOINT [\"{installed}\"]").as_str()),
            "{dir}: {:?}",
            last("ENTRYPOINT ")
        );
    }
    Ok(())
}
