//! Prints the Skyhook CRDs as multi-document YAML, or with `--write [WORKSPACE_ROOT]` writes them
//! to `chart/crds/` and the NodeWright CRDs to `chart/templates/nodewright-crds.yaml` (in the
//! workspace this binary was built from by default).

use std::error::Error;
use std::path::PathBuf;

use skyhook_api::crd;

const USAGE: &str = "usage: crdgen [--write [WORKSPACE_ROOT]]";

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        None => {
            let mut out = String::new();
            for generated in crd::crds() {
                out.push_str("---\n");
                out.push_str(&generated.to_yaml()?);
            }
            // Printing the CRDs is this binary's output.
            #[allow(clippy::print_stdout)]
            {
                print!("{out}");
            }
            Ok(())
        }
        Some("--write") => {
            let root = args.next().map_or_else(
                || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."),
                PathBuf::from,
            );
            // Only for readable messages; a root that does not resolve fails on the write below.
            let root = root.canonicalize().unwrap_or(root);
            let dir = root.join("chart").join("crds");
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("failed to create {}: {e}", dir.display()))?;
            for generated in crd::crds() {
                let path = dir.join(generated.file_name);
                std::fs::write(&path, generated.to_yaml()?)
                    .map_err(|e| format!("failed to write {}: {e}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
            let path = root.join(crd::NODEWRIGHT_CRDS_TEMPLATE);
            std::fs::write(&path, crd::nodewright_crds_template()?)
                .map_err(|e| format!("failed to write {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
            Ok(())
        }
        Some(other) => Err(format!("unexpected argument {other:?}; {USAGE}").into()),
    }
}
