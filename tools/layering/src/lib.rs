//! Which source files of one crate import each other.
//!
//! The project's layering rule: no two files of a crate import each other, directly or through
//! others, so that each file can be read and changed knowing only what it imports. This reads a
//! crate's `src/` as text: each file is a module (`src/a.rs` and `src/a/mod.rs` are `crate::a`),
//! and every path it names (`crate::a::b`, `super::c`, `self::d`, in `use` items and in code
//! alike, with `{}` groups) imports the longest module that path names. Comments and string
//! literals are not read, nor test modules (`tests.rs`, `*_tests.rs`, `tests/` folders), nor
//! `src/bin/` (each file there is a crate of its own). Calling a method defined in another
//! file names no path, and is no import: that is the compiler's business, not the layering's.
//!
//! Contract: [`crate_graph`] and [`circles`] are pure over the files given to them;
//! [`read_crate`] is the only function that touches the disk.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside a crate: `["reconcile", "plan"]` for `crate::reconcile::plan`.
pub type Module = Vec<String>;

/// The module a source file under `src/` is, from its path relative to `src/`; `None` for a
/// file that is no module of the library or binary (a test module, a file under `bin/`).
pub fn module_of(relative: &Path) -> Option<Module> {
    let parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let (file, folders) = parts.split_last()?;
    let stem = file.strip_suffix(".rs")?;
    let is_test =
        stem == "tests" || stem.ends_with("_tests") || folders.iter().any(|f| f == "tests");
    if is_test || folders.first().is_some_and(|f| f == "bin") {
        return None;
    }
    let mut module: Module = folders.to_vec();
    let crate_root = folders.is_empty() && matches!(stem, "lib" | "main");
    if stem != "mod" && !crate_root {
        module.push(stem.to_owned());
    }
    Some(module)
}

/// `source` without comments, string and character literals (each replaced by a space), so
/// that what remains names only the code's own paths.
pub fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        match rest {
            ['/', '/', ..] => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ['/', '*', ..] => {
                let mut depth = 0usize;
                while i < chars.len() {
                    if chars[i..].starts_with(&['/', '*']) {
                        depth += 1;
                        i += 2;
                    } else if chars[i..].starts_with(&['*', '/']) {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                out.push(' ');
            }
            ['r', '#' | '"', ..] if raw_string_start(rest).is_some() => {
                let hashes = raw_string_start(rest).unwrap_or(0);
                i += 2 + hashes;
                let closing: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                while i < chars.len() && !chars[i..].starts_with(&closing) {
                    i += 1;
                }
                i += closing.len();
                out.push(' ');
            }
            ['"', ..] => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push(' ');
            }
            ['\'', '\\', ..] => {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(' ');
            }
            ['\'', _, '\'', ..] => {
                i += 3;
                out.push(' ');
            }
            [c, ..] => {
                out.push(*c);
                i += 1;
            }
            [] => break,
        }
    }
    out
}

/// `code` (already [`code_only`]) without its `#[cfg(test)]` modules, and the names of those
/// declared in files of their own (`#[cfg(test)] mod sim;`): tests import what they test, and
/// an inline `mod tests { use super::*; }` names its own file's items.
pub fn without_test_modules(code: &str) -> (String, Vec<String>) {
    let marker = "#[cfg(test)]";
    let mut kept = String::with_capacity(code.len());
    let mut files = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(marker) {
        kept.push_str(&rest[..at]);
        let after = &rest[at + marker.len()..];
        let item = after.trim_start();
        let item = item.strip_prefix("pub ").unwrap_or(item).trim_start();
        let Some(declared) = item.strip_prefix("mod ") else {
            // Another test-only item: kept (its paths are few and real).
            kept.push_str(marker);
            rest = after;
            continue;
        };
        let declared = declared.trim_start();
        let name: String = declared
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let body = declared[name.len()..].trim_start();
        if let Some(tail) = body.strip_prefix(';') {
            files.push(name);
            rest = tail;
        } else if let Some(inner) = body.strip_prefix('{') {
            let mut depth = 1usize;
            let mut end = inner.len();
            for (index, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = index + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &inner[end..];
        } else {
            rest = after;
        }
    }
    kept.push_str(rest);
    (kept, files)
}

/// The number of `#` of a raw string starting at `rest` (`r"`, `r#"`, ...), if one does.
fn raw_string_start(rest: &[char]) -> Option<usize> {
    let hashes = rest.iter().skip(1).take_while(|c| **c == '#').count();
    (rest.get(1 + hashes) == Some(&'"')).then_some(hashes)
}

/// Every path `code` names from `crate`, `super` or `self`, resolved against `module` (the
/// module `code` is), with `{}` groups expanded.
pub fn named_paths(code: &str, module: &Module, is_folder_module: bool) -> Vec<Module> {
    let tokens = tokenize(code);
    let mut paths = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let previous_is_path = at > 0 && tokens[at - 1] == "::";
        let start = tokens[at].as_str();
        let starts_path = tokens.get(at + 1).is_some_and(|t| t == "::");
        let base = match start {
            _ if previous_is_path || !starts_path => None,
            "crate" => Some((Vec::new(), at + 1)),
            "self" => Some((self_module(module, is_folder_module), at + 1)),
            "super" => parent(&self_module(module, is_folder_module)).map(|p| (p, at + 1)),
            // A bare path names a child module of this one (or something outside the crate,
            // which resolves to this file itself and so imports nothing).
            ident if is_identifier(ident) => Some((self_module(module, is_folder_module), at)),
            _ => None,
        };
        if let Some((base, from)) = base {
            let (mut found, next) = if from == at {
                let mut start_path = base;
                start_path.push(start.to_owned());
                path_tail(&tokens, at + 1, start_path, module, is_folder_module)
            } else {
                path_tail(&tokens, from, base, module, is_folder_module)
            };
            paths.append(&mut found);
            at = next.max(at + 1);
            continue;
        }
        at += 1;
    }
    paths
}

/// The module relative paths start from: a file's own module (for `self::`), whose parent is
/// `super::`. Every module file's children are its own, so both forms of a module (`a.rs` and
/// `a/mod.rs`) resolve alike; the flag is kept for the callers' clarity.
fn self_module(module: &Module, _is_folder_module: bool) -> Module {
    module.clone()
}

fn parent(module: &Module) -> Option<Module> {
    let mut parent = module.clone();
    parent.pop().map(|_| parent)
}

/// Reads `::segment` pairs (and `super` hops, and `{}` groups) from `at`, extending `base`.
fn path_tail(
    tokens: &[String],
    mut at: usize,
    mut base: Module,
    module: &Module,
    folder: bool,
) -> (Vec<Module>, usize) {
    let mut paths = Vec::new();
    while tokens.get(at).is_some_and(|t| t == "::") {
        match tokens.get(at + 1).map(String::as_str) {
            Some("{") => {
                let (mut group, next) = group(tokens, at + 2, &base, module, folder);
                paths.append(&mut group);
                return (paths, next);
            }
            Some("super") => {
                base.pop();
                at += 2;
            }
            Some(segment) if is_identifier(segment) => {
                base.push(segment.to_owned());
                at += 2;
            }
            _ => break,
        }
    }
    paths.push(base);
    (paths, at)
}

/// The paths of a `{...}` group whose opening brace is just before `at`.
fn group(
    tokens: &[String],
    mut at: usize,
    base: &Module,
    module: &Module,
    folder: bool,
) -> (Vec<Module>, usize) {
    let mut paths = Vec::new();
    while let Some(token) = tokens.get(at) {
        match token.as_str() {
            "}" => return (paths, at + 1),
            "," => at += 1,
            "self" => {
                paths.push(base.clone());
                at += 1;
            }
            "{" => {
                let (mut inner, next) = group(tokens, at + 1, base, module, folder);
                paths.append(&mut inner);
                at = next;
            }
            segment if is_identifier(segment) => {
                let mut start = base.clone();
                start.push(segment.to_owned());
                let (mut found, next) = path_tail(tokens, at + 1, start, module, folder);
                paths.append(&mut found);
                at = next;
            }
            _ => at += 1,
        }
    }
    (paths, at)
}

fn is_identifier(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && token.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Identifiers, `::` and single punctuation characters, in order.
fn tokenize(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_owned());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}

/// A crate's source files: path relative to `src/`, and their text.
pub type Sources = BTreeMap<PathBuf, String>;

/// Reads every `.rs` file under `crate_dir/src`.
pub fn read_crate(crate_dir: &Path) -> std::io::Result<Sources> {
    let root = crate_dir.join("src");
    let mut sources = Sources::new();
    let mut folders = vec![root.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)?;
                let relative = path.strip_prefix(&root).unwrap_or(&path).to_path_buf();
                sources.insert(relative, text);
            }
        }
    }
    Ok(sources)
}

/// The library's modules, by module path, with their code (see [`code_only`] and
/// [`without_test_modules`]): a crate with both `lib.rs` and `main.rs` is two crates, and
/// `main.rs` (the binary, which reaches the library by its name) is left out, as are the
/// modules declared `#[cfg(test)]`.
fn library_modules(sources: &Sources) -> BTreeMap<Module, (&PathBuf, String)> {
    let has_lib = sources.contains_key(Path::new("lib.rs"));
    let mut modules = BTreeMap::new();
    let mut test_modules = BTreeSet::new();
    for (path, text) in sources {
        if has_lib && path == Path::new("main.rs") {
            continue;
        }
        let Some(module) = module_of(path) else {
            continue;
        };
        let (code, tests) = without_test_modules(&code_only(text));
        for name in tests {
            let mut test = module.clone();
            test.push(name);
            test_modules.insert(test);
        }
        modules.insert(module, (path, code));
    }
    modules.retain(|module, _| !test_modules.iter().any(|test| module.starts_with(test)));
    modules
}

/// Per module, the names it re-exports (`pub use a::b::{C, D}`) and the path each stands for:
/// a path through a re-export imports the module the name comes from, not the one that hands
/// it on (a facade's `pub use` is an import of its own, counted for the facade).
fn re_exports(
    modules: &BTreeMap<Module, (&PathBuf, String)>,
) -> BTreeMap<Module, BTreeMap<String, Module>> {
    let mut all = BTreeMap::new();
    for (module, (path, code)) in modules {
        let folder = path.file_name().is_some_and(|f| f == "mod.rs");
        let mut names = BTreeMap::new();
        for item in code.split(';') {
            let Some(rest) = item.trim_start().strip_prefix("pub") else {
                continue;
            };
            let rest = rest.trim_start();
            let rest = match rest.strip_prefix('(') {
                Some(scoped) => scoped.split_once(')').map_or("", |(_, after)| after),
                None => rest,
            };
            let Some(tree) = rest.trim_start().strip_prefix("use ") else {
                continue;
            };
            for target in named_paths(tree, module, folder) {
                if let Some(name) = target.last() {
                    names.insert(name.clone(), target.clone());
                }
            }
        }
        if !names.is_empty() {
            all.insert(module.clone(), names);
        }
    }
    all
}

/// The file a named path imports: the longest module it names (`crate::a::b::Item` imports
/// `a::b` when there is such a file, otherwise `a`), through re-exports.
fn resolve<'s>(
    named: &[String],
    modules: &BTreeMap<Module, (&'s PathBuf, String)>,
    exports: &BTreeMap<Module, BTreeMap<String, Module>>,
    hops: usize,
) -> Option<&'s PathBuf> {
    let (len, file) = (0..=named.len())
        .rev()
        .find_map(|len| Some((len, modules.get(&named[..len])?.0)))?;
    let through = named
        .get(len)
        .and_then(|name| exports.get(&named[..len])?.get(name));
    match through {
        Some(target) if hops < 8 && target.as_slice() != named => {
            let mut onward = target.clone();
            onward.extend(named[len + 1..].iter().cloned());
            resolve(&onward, modules, exports, hops + 1).or(Some(file))
        }
        _ => Some(file),
    }
}

/// Per file (relative to `src/`), the other files of the crate it imports.
pub fn crate_graph(sources: &Sources) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let modules = library_modules(sources);
    let exports = re_exports(&modules);
    let mut graph = BTreeMap::new();
    for (module, (path, code)) in &modules {
        let folder = path.file_name().is_some_and(|f| f == "mod.rs");
        let mut imported = BTreeSet::new();
        for named in named_paths(code, module, folder) {
            if let Some(target) = resolve(&named, &modules, &exports, 0)
                && target != *path
            {
                imported.insert(target.clone());
            }
        }
        graph.insert((*path).clone(), imported);
    }
    graph
}

/// The circles of `graph`: every set of two or more files that import each other, directly or
/// through others (its strongly connected components), each sorted, sorted.
pub fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Tarjan's algorithm, iteratively over the sorted graph so that results are stable.
    struct State<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'g>(state: &mut State<'g>, node: &'g PathBuf) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        for target in state.graph.get(node).into_iter().flatten() {
            let Some((target, _)) = state.graph.get_key_value(target) else {
                continue;
            };
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.clone());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found.sort();
    state.found
}

/// The member folders of a workspace, from the `members = [...]` array of its root `Cargo.toml`
/// (`manifest`, its text), in order: the one list of crates, so that a new crate is checked
/// without being named a second time. Empty when the manifest has no such array.
pub fn workspace_members(manifest: &str) -> Vec<String> {
    let code: Vec<&str> = manifest
        .lines()
        .map(|line| line.split_once('#').map_or(line, |(code, _)| code))
        .collect();
    let Some(start) = code.iter().position(|line| {
        line.trim_start()
            .strip_prefix("members")
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    }) else {
        return Vec::new();
    };
    let rest = code[start..].join("\n");
    let Some((_, after_open)) = rest.split_once('[') else {
        return Vec::new();
    };
    let inside = after_open
        .split_once(']')
        .map_or(after_open, |(inside, _)| inside);
    inside
        .split(',')
        .map(|entry| entry.trim().trim_matches('"').to_owned())
        .filter(|entry| !entry.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(path: &str) -> Option<Vec<&str>> {
        let found = module_of(Path::new(path))?;
        Some(found.iter().map(|s| leak(s)).collect())
    }

    fn leak(s: &str) -> &'static str {
        Box::leak(s.to_owned().into_boxed_str())
    }

    #[test]
    fn files_are_modules() {
        let cases: [(&str, Option<Vec<&str>>); 9] = [
            ("lib.rs", Some(vec![])),
            ("main.rs", Some(vec![])),
            ("cache.rs", Some(vec!["cache"])),
            ("cache/pod.rs", Some(vec!["cache", "pod"])),
            ("kubelet/mod.rs", Some(vec!["kubelet"])),
            ("kubelet/lib.rs", Some(vec!["kubelet", "lib"])),
            ("reconcile/plan/tests/sim.rs", None),
            ("conditions_tests.rs", None),
            ("bin/crdgen.rs", None),
        ];
        for (path, expected) in cases {
            assert_eq!(module(path), expected, "{path}");
        }
    }

    #[test]
    fn comments_and_literals_name_nothing() {
        let code = code_only(
            "use crate::a; // crate::b\n/* crate::c /* nested */ crate::d */ let s = \"crate::e\"; let r = r#\"crate::f\"#; let c = '\"'; fn g<'a>() {}",
        );
        assert!(code.contains("crate::a"));
        for hidden in ["crate::b", "crate::c", "crate::d", "crate::e", "crate::f"] {
            assert!(!code.contains(hidden), "{hidden} in {code}");
        }
        assert!(code.contains("fn g<"), "a lifetime is no literal: {code}");
    }

    fn paths(code: &str, module: &[&str], folder: bool) -> Vec<String> {
        let module: Module = module.iter().map(|s| (*s).to_owned()).collect();
        named_paths(code, &module, folder)
            .into_iter()
            .map(|p| p.join("::"))
            .collect()
    }

    #[test]
    fn paths_are_resolved_from_the_crate_or_the_module() {
        let code = "use crate::reconcile::snapshot::{NodeView, OwnedPod};\n\
                    use super::{sim::Sim, node};\n\
                    use self::inner::X;\n\
                    fn f() { crate::pods::interrupt_pod(); super::super::names::of(); x::crate_thing(); }";
        assert_eq!(
            paths(code, &["reconcile", "plan", "tests"], false),
            [
                "reconcile::snapshot::NodeView",
                "reconcile::snapshot::OwnedPod",
                "reconcile::plan::sim::Sim",
                "reconcile::plan::node",
                "reconcile::plan::tests::inner::X",
                "pods::interrupt_pod",
                "reconcile::names::of",
                "reconcile::plan::tests::x::crate_thing",
            ]
        );
    }

    fn sources(files: &[(&str, &str)]) -> Sources {
        files
            .iter()
            .map(|(path, text)| (PathBuf::from(path), (*text).to_owned()))
            .collect()
    }

    #[test]
    fn files_importing_each_other_form_a_circle() {
        let crate_files = sources(&[
            ("lib.rs", "mod a; mod b; mod c; mod d; pub use a::A;"),
            ("a.rs", "use crate::b::B; pub struct A;"),
            ("b.rs", "use super::c::C; pub struct B;"),
            ("c.rs", "pub struct C(crate::a::A);"),
            (
                "d.rs",
                "use crate::a::A; // crate::d::x\n#[cfg(test)]\nmod tests { use super::*; use crate::b::B; }",
            ),
            ("d/tests.rs", "use super::super::d::*; use crate::d;"),
        ]);
        let graph = crate_graph(&crate_files);
        let circles = circles(&graph);
        let names: Vec<Vec<&str>> = circles
            .iter()
            .map(|c| c.iter().map(|p| leak(&p.to_string_lossy())).collect())
            .collect();
        assert_eq!(names, [vec!["a.rs", "b.rs", "c.rs"]]);
    }

    #[test]
    fn a_path_through_a_re_export_imports_where_the_name_comes_from() {
        let crate_files = sources(&[
            (
                "lib.rs",
                "pub mod cache; pub mod pods; #[cfg(test)] mod support;",
            ),
            (
                "support.rs",
                "use crate::pods::build; use crate::cache::CachedPod;",
            ),
            (
                "cache.rs",
                "mod pod; pub use pod::CachedPod; use crate::pods::build;",
            ),
            ("cache/pod.rs", "pub struct CachedPod;"),
            ("pods.rs", "use crate::cache::CachedPod; pub fn build() {}"),
            ("main.rs", "use mycrate::cache; fn main() {}"),
        ]);
        let graph = crate_graph(&crate_files);
        assert!(circles(&graph).is_empty(), "{graph:?}");
        assert_eq!(
            graph[Path::new("pods.rs")],
            BTreeSet::from([PathBuf::from("cache/pod.rs")])
        );
        assert!(
            !graph.contains_key(Path::new("main.rs")),
            "the binary is another crate"
        );
    }

    #[test]
    fn a_parent_and_a_child_that_use_each_other_are_a_circle() {
        let crate_files = sources(&[
            ("lib.rs", "mod kubelet;"),
            (
                "kubelet/mod.rs",
                "mod worker; use worker::run; pub struct Kubelet;",
            ),
            ("kubelet/worker.rs", "use super::Kubelet; pub fn run() {}"),
        ]);
        let graph = crate_graph(&crate_files);
        assert_eq!(
            circles(&graph),
            [vec![
                PathBuf::from("kubelet/mod.rs"),
                PathBuf::from("kubelet/worker.rs")
            ]]
        );
    }

    #[test]
    fn workspace_members_come_from_the_members_array() {
        let one_line =
            "[workspace]\nresolver = \"3\"\nmembers = [\"skyhook-api\", \"tools/layering\"]\n";
        assert_eq!(
            workspace_members(one_line),
            ["skyhook-api", "tools/layering"]
        );
        let several_lines = "[workspace]\nmembers = [\n  \"agent\", # the node agent\n  \"e2e\",\n]\n[workspace.dependencies]\nx = [\"y\"]\n";
        assert_eq!(workspace_members(several_lines), ["agent", "e2e"]);
        assert!(workspace_members("[package]\nname = \"a\"\n").is_empty());
    }
}
