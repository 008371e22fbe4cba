//! The package dependency graph of one Skyhook.
//!
//! Vertices are keyed `name|version`; `dependsOn` maps a package name to the exact version it
//! needs. Building the graph checks every edge and rejects cycles (upstream never did: a cycle
//! just never became runnable). The runnable set is "not complete and every dependency
//! complete", sorted by name; upstream's walk, which returned only incomplete roots while any
//! existed and could starve a root, is deliberately not reproduced.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use crate::v1alpha1::Package;

/// A vertex of the graph, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackageRef<'a> {
    /// Package name (the key in `spec.packages`).
    pub name: &'a str,
    /// Package version.
    pub version: &'a str,
}

impl fmt::Display for PackageRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}", self.name, self.version)
    }
}

/// One problem found while building the graph.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum GraphError {
    /// The same `name|version` was added twice.
    #[error("package {name}|{version} is listed more than once")]
    Duplicate {
        /// Package name.
        name: String,
        /// Package version.
        version: String,
    },
    /// `dependsOn: {dep: ""}`.
    #[error(
        "package {package} depends on {dependency} with an empty version; give the exact version of {dependency}"
    )]
    EmptyDependencyVersion {
        /// The depending package.
        package: String,
        /// The named dependency.
        dependency: String,
    },
    /// `dependsOn` names a package that does not exist.
    #[error(
        "package {package} depends on {dependency} {version}, which is not in the packages; add it or remove the dependency"
    )]
    MissingDependency {
        /// The depending package.
        package: String,
        /// The named dependency.
        dependency: String,
        /// The version asked for.
        version: String,
    },
    /// `dependsOn` names an existing package with another version.
    #[error(
        "package {package} depends on {dependency} {wanted}, but the packages have {dependency} {available} (ambiguous version match); make the versions equal"
    )]
    VersionMismatch {
        /// The depending package.
        package: String,
        /// The named dependency.
        dependency: String,
        /// The version asked for.
        wanted: String,
        /// The versions present, comma-separated.
        available: String,
    },
    /// A dependency cycle, written from its smallest package back to itself.
    #[error("dependency cycle {}; remove one of these dependencies", path.join(" -> "))]
    Cycle {
        /// Package names along the cycle, first and last equal.
        path: Vec<String>,
    },
}

/// Every problem found while building a graph, sorted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct GraphErrors(pub Vec<GraphError>);

/// Collects vertices in any order; edges are resolved by [`GraphBuilder::build`].
#[derive(Debug, Default)]
pub struct GraphBuilder {
    vertices: BTreeMap<(String, String), BTreeMap<String, String>>,
    errors: Vec<GraphError>,
}

impl GraphBuilder {
    /// Adds a package and its `dependsOn` (name → exact version). Dependencies may be added later.
    pub fn add<N, V>(
        &mut self,
        name: &str,
        version: &str,
        depends_on: impl IntoIterator<Item = (N, V)>,
    ) -> &mut Self
    where
        N: Into<String>,
        V: Into<String>,
    {
        match self.vertices.entry((name.to_owned(), version.to_owned())) {
            Entry::Occupied(_) => self.errors.push(GraphError::Duplicate {
                name: name.to_owned(),
                version: version.to_owned(),
            }),
            Entry::Vacant(slot) => {
                slot.insert(
                    depends_on
                        .into_iter()
                        .map(|(n, v)| (n.into(), v.into()))
                        .collect(),
                );
            }
        }
        self
    }

    /// Resolves every edge and checks for cycles. Returns all problems, sorted.
    pub fn build(self) -> Result<PackageGraph, GraphErrors> {
        let GraphBuilder {
            vertices,
            mut errors,
        } = self;
        let keys: Vec<(String, String)> = vertices.keys().cloned().collect();
        let index_of: BTreeMap<(&str, &str), usize> = keys
            .iter()
            .enumerate()
            .map(|(i, (n, v))| ((n.as_str(), v.as_str()), i))
            .collect();
        let mut versions_of: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, version) in &keys {
            versions_of.entry(name).or_default().push(version);
        }

        let mut deps = vec![Vec::new(); keys.len()];
        for (i, ((name, _), wanted)) in vertices.iter().enumerate() {
            for (dependency, version) in wanted {
                let problem = if version.is_empty() {
                    GraphError::EmptyDependencyVersion {
                        package: name.clone(),
                        dependency: dependency.clone(),
                    }
                } else if let Some(&j) = index_of.get(&(dependency.as_str(), version.as_str())) {
                    deps[i].push(j);
                    continue;
                } else if let Some(available) = versions_of.get(dependency.as_str()) {
                    GraphError::VersionMismatch {
                        package: name.clone(),
                        dependency: dependency.clone(),
                        wanted: version.clone(),
                        available: available.join(", "),
                    }
                } else {
                    GraphError::MissingDependency {
                        package: name.clone(),
                        dependency: dependency.clone(),
                        version: version.clone(),
                    }
                };
                errors.push(problem);
            }
        }
        for d in &mut deps {
            d.sort_unstable();
            d.dedup();
        }
        let graph = PackageGraph { keys, deps };
        errors.extend(
            graph
                .cycles()
                .into_iter()
                .map(|path| GraphError::Cycle { path }),
        );
        if errors.is_empty() {
            Ok(graph)
        } else {
            errors.sort();
            errors.dedup();
            Err(GraphErrors(errors))
        }
    }
}

/// A valid (acyclic, fully resolved) dependency graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageGraph {
    /// `(name, version)`, sorted; a vertex is its index here.
    keys: Vec<(String, String)>,
    /// For each vertex, the sorted indices of the vertices it depends on.
    deps: Vec<Vec<usize>>,
}

impl PackageGraph {
    /// Starts a graph.
    pub fn builder() -> GraphBuilder {
        GraphBuilder::default()
    }

    /// The graph of a Skyhook's `spec.packages`, each named by its map key.
    pub fn from_packages(packages: &BTreeMap<String, Package>) -> Result<Self, GraphErrors> {
        let mut builder = GraphBuilder::default();
        for (name, package) in packages {
            builder.add(
                name,
                &package.version,
                package
                    .depends_on
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str())),
            );
        }
        builder.build()
    }

    fn vertex(&self, i: usize) -> PackageRef<'_> {
        let (name, version) = &self.keys[i];
        PackageRef { name, version }
    }

    /// Every package, sorted by name then version.
    pub fn packages(&self) -> impl Iterator<Item = PackageRef<'_>> {
        (0..self.keys.len()).map(|i| self.vertex(i))
    }

    /// The packages `name|version` depends on directly, sorted; empty when it is unknown.
    pub fn dependencies(&self, name: &str, version: &str) -> Vec<PackageRef<'_>> {
        self.index(name, version)
            .map(|i| self.deps[i].iter().map(|&j| self.vertex(j)).collect())
            .unwrap_or_default()
    }

    fn index(&self, name: &str, version: &str) -> Option<usize> {
        self.keys
            .binary_search_by(|(n, v)| (n.as_str(), v.as_str()).cmp(&(name, version)))
            .ok()
    }

    /// Dependencies before dependents; among packages whose dependencies are all placed, the
    /// smallest name comes first, so the order is deterministic.
    pub fn topological_order(&self) -> Vec<PackageRef<'_>> {
        let mut missing: Vec<usize> = self.deps.iter().map(Vec::len).collect();
        let mut dependents = vec![Vec::new(); self.keys.len()];
        for (i, deps) in self.deps.iter().enumerate() {
            for &j in deps {
                dependents[j].push(i);
            }
        }
        let mut ready: BTreeSet<usize> =
            (0..self.keys.len()).filter(|&i| missing[i] == 0).collect();
        let mut order = Vec::with_capacity(self.keys.len());
        while let Some(i) = ready.pop_first() {
            order.push(self.vertex(i));
            for &dependent in &dependents[i] {
                missing[dependent] -= 1;
                if missing[dependent] == 0 {
                    ready.insert(dependent);
                }
            }
        }
        order
    }

    /// The packages that can run now: not complete, and every dependency complete. Sorted by
    /// name then version.
    pub fn runnable(&self, is_complete: impl Fn(PackageRef<'_>) -> bool) -> Vec<PackageRef<'_>> {
        let complete: Vec<bool> = (0..self.keys.len())
            .map(|i| is_complete(self.vertex(i)))
            .collect();
        (0..self.keys.len())
            .filter(|&i| !complete[i] && self.deps[i].iter().all(|&j| complete[j]))
            .map(|i| self.vertex(i))
            .collect()
    }

    /// One cycle per strongly connected component that has one, each written as names from
    /// its smallest vertex back to it (the shortest such cycle).
    fn cycles(&self) -> Vec<Vec<String>> {
        strongly_connected_components(&self.deps)
            .into_iter()
            .filter_map(|component| {
                let start = *component.iter().min()?;
                let members: BTreeSet<usize> = component.into_iter().collect();
                if members.len() == 1 && !self.deps[start].contains(&start) {
                    return None;
                }
                self.shortest_cycle(start, &members)
            })
            .collect()
    }

    fn shortest_cycle(&self, start: usize, members: &BTreeSet<usize>) -> Option<Vec<String>> {
        let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(at) = queue.pop_front() {
            for &next in self.deps[at].iter().filter(|n| members.contains(n)) {
                if next == start {
                    let mut path = vec![at];
                    while let Some(&prev) = path.last().and_then(|p| came_from.get(p)) {
                        path.push(prev);
                    }
                    path.reverse();
                    path.push(start);
                    return Some(path.into_iter().map(|i| self.keys[i].0.clone()).collect());
                }
                if next != start && !came_from.contains_key(&next) {
                    came_from.insert(next, at);
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

/// Tarjan's algorithm, iterative so that deep chains cannot overflow the stack.
fn strongly_connected_components(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNVISITED: usize = usize::MAX;
    let n = edges.len();
    let mut index = vec![UNVISITED; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next_index = 0;
    for root in 0..n {
        if index[root] != UNVISITED {
            continue;
        }
        // (vertex, position of the next edge to explore)
        let mut work = vec![(root, 0)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if let Some(&w) = edges[v].get(*edge) {
                *edge += 1;
                if index[w] == UNVISITED {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;

    type Spec<'a> = &'a [(&'a str, &'a [&'a str])];

    /// Builds a graph of version-1 packages from `(name, deps)`.
    fn graph(spec: Spec<'_>) -> Result<PackageGraph, GraphErrors> {
        let mut builder = PackageGraph::builder();
        for (name, deps) in spec {
            builder.add(name, "1", deps.iter().map(|d| (*d, "1")));
        }
        builder.build()
    }

    fn names(refs: &[PackageRef<'_>]) -> Vec<String> {
        refs.iter().map(|r| r.name.to_owned()).collect()
    }

    /// Walks the graph as the controller does: complete everything runnable, repeat.
    fn walk(g: &PackageGraph) -> Vec<Vec<String>> {
        let mut complete: BTreeSet<String> = BTreeSet::new();
        let mut steps = Vec::new();
        loop {
            let step = names(&g.runnable(|p| complete.contains(p.name)));
            if step.is_empty() {
                return steps;
            }
            complete.extend(step.iter().cloned());
            steps.push(step);
        }
    }

    #[test]
    fn built_in_broken_order() {
        let g = graph(&[
            ("A", &[]),
            ("C", &["B"]),
            ("B", &["A"]),
            ("D", &["A", "B"]),
            ("E", &[]),
        ])
        .unwrap();
        assert_eq!(walk(&g), [vec!["A", "E"], vec!["B"], vec!["C", "D"]]);
    }

    #[test]
    fn duplicate_vertex_is_an_error() {
        let mut b = PackageGraph::builder();
        b.add("A", "1", Vec::<(String, String)>::new());
        b.add("A", "1", Vec::<(String, String)>::new());
        assert_eq!(
            b.build().unwrap_err().0,
            [GraphError::Duplicate {
                name: "A".into(),
                version: "1".into()
            }]
        );
        // Another version of the same name is a different vertex.
        let mut b = PackageGraph::builder();
        b.add("A", "1", Vec::<(String, String)>::new());
        b.add("A", "2", Vec::<(String, String)>::new());
        assert_eq!(b.build().unwrap().packages().count(), 2);
    }

    #[test]
    fn complex_walk_in_every_insertion_order() {
        let spec: Vec<(&str, &[&str])> = vec![
            ("F", &["E", "B"]),
            ("G", &["C"]),
            ("Z", &[]),
            ("D", &["B", "A"]),
            ("E", &["C"]),
            ("C", &["B"]),
            ("B", &["A"]),
            ("A", &[]),
        ];
        let expected = [
            vec!["A", "Z"],
            vec!["B"],
            vec!["C", "D"],
            vec!["E", "G"],
            vec!["F"],
        ];
        // Rotations and reversals cover many insertion orders deterministically.
        for rotation in 0..spec.len() {
            let mut order = spec.clone();
            order.rotate_left(rotation);
            assert_eq!(walk(&graph(&order).unwrap()), expected);
            order.reverse();
            assert_eq!(walk(&graph(&order).unwrap()), expected);
        }
    }

    #[test]
    fn partial_steps_do_not_starve_roots() {
        let g = graph(&[("A", &[]), ("Z", &[]), ("B", &["A"]), ("C", &["B"])]).unwrap();
        // Only A finished from the first wave: Z is still runnable next to B.
        let complete = ["A"];
        assert_eq!(
            names(&g.runnable(|p| complete.contains(&p.name))),
            ["B", "Z"]
        );
        // Completing packages out of dependency order never makes a blocked package runnable.
        let complete = ["C"];
        assert_eq!(
            names(&g.runnable(|p| complete.contains(&p.name))),
            ["A", "Z"]
        );
        // Upstream starvation case: more packages complete than there are roots.
        let complete = ["A", "B", "C"];
        assert_eq!(names(&g.runnable(|p| complete.contains(&p.name))), ["Z"]);
        let all = ["A", "B", "C", "Z"];
        assert!(g.runnable(|p| all.contains(&p.name)).is_empty());
    }

    #[test]
    fn broken_graphs() {
        let err = graph(&[("bar", &["foo"])]).unwrap_err();
        assert_eq!(
            err.0,
            [GraphError::MissingDependency {
                package: "bar".into(),
                dependency: "foo".into(),
                version: "1".into()
            }]
        );

        let mut b = PackageGraph::builder();
        b.add("dexter", "1.2.3", Vec::<(String, String)>::new());
        b.add("spencer", "1.0", [("dexter", "1.2.4")]);
        b.add("foobar", "1.0", [("dexter", "")]);
        let err = b.build().unwrap_err();
        assert_eq!(
            err.0,
            [
                GraphError::EmptyDependencyVersion {
                    package: "foobar".into(),
                    dependency: "dexter".into()
                },
                GraphError::VersionMismatch {
                    package: "spencer".into(),
                    dependency: "dexter".into(),
                    wanted: "1.2.4".into(),
                    available: "1.2.3".into()
                },
            ]
        );
        assert!(err.to_string().contains("ambiguous version match"), "{err}");
    }

    #[test]
    fn cycles_are_named() {
        let cases: &[(Spec<'_>, &[&str])] = &[
            (&[("a", &["a"])], &["a -> a"]),
            (&[("a", &["b"]), ("b", &["a"])], &["a -> b -> a"]),
            (
                &[("c", &["a"]), ("b", &["c"]), ("a", &["b"])],
                &["a -> b -> c -> a"],
            ),
            // Two independent cycles, plus a healthy package depending on one of them.
            (
                &[
                    ("a", &["b"]),
                    ("b", &["a"]),
                    ("x", &["y"]),
                    ("y", &["x"]),
                    ("z", &["a"]),
                ],
                &["a -> b -> a", "x -> y -> x"],
            ),
            // The shortest cycle through the smallest member is reported.
            (
                &[
                    ("a", &["b", "d"]),
                    ("b", &["c"]),
                    ("c", &["a"]),
                    ("d", &["a"]),
                ],
                &["a -> d -> a"],
            ),
        ];
        for (spec, want) in cases {
            let err = graph(spec).unwrap_err();
            let got: Vec<String> = err
                .0
                .iter()
                .map(|e| match e {
                    GraphError::Cycle { path } => path.join(" -> "),
                    other => panic!("unexpected {other}"),
                })
                .collect();
            assert_eq!(got, *want);
        }
        let msg = graph(&[("a", &["b"]), ("b", &["a"])])
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "dependency cycle a -> b -> a; remove one of these dependencies"
        );
    }

    #[test]
    fn topological_order_is_deterministic() {
        let g = graph(&[
            ("cc-last", &["aa-fast", "bb-slow"]),
            ("bb-slow", &[]),
            ("aa-fast", &[]),
        ])
        .unwrap();
        assert_eq!(
            names(&g.topological_order()),
            ["aa-fast", "bb-slow", "cc-last"]
        );
        let g = graph(&[("z", &[]), ("b", &["z"]), ("a", &["b"]), ("m", &[])]).unwrap();
        assert_eq!(names(&g.topological_order()), ["m", "z", "b", "a"]);
        assert_eq!(names(&g.dependencies("a", "1")), ["b"]);
        assert!(g.dependencies("nope", "1").is_empty());
    }

    #[test]
    fn long_chain_does_not_overflow() {
        let mut b = PackageGraph::builder();
        let n = 20_000;
        for i in 0..n {
            let deps = if i == 0 {
                vec![]
            } else {
                vec![(format!("p{:05}", i - 1), "1")]
            };
            b.add(&format!("p{i:05}"), "1", deps);
        }
        let g = b.build().unwrap();
        assert_eq!(g.topological_order().len(), n);
        assert_eq!(names(&g.runnable(|_| false)), ["p00000"]);
    }
}
