//! The controller's own writes that its caches have not shown yet ("read your own writes").
//!
//! Each cache is fed by its own watch, and each watch delivers on its own time. A reconcile that
//! starts before they delivered the previous reconcile's writes plans from a view older than
//! what the controller itself wrote: it creates the same pods again (409), patches nodes on
//! versions it already replaced (409), and, worst, reads one cache ahead of another (a package
//! ConfigMap already changed, the node states that go with the change not yet) and reports a
//! spec rolled out before its config ran. So after each reconcile's writes, the loop waits until
//! every written object shows in its cache at the version the write returned, or is gone, as
//! Kubernetes' own controllers wait for their expectations; a watch that lost an event only
//! delays the next reconcile, by at most the loop's bound.

use either::Either;
use kube::Resource;
use kube::core::Status;
use skyhook_api::generation::Group;

/// The cache an object of the controller's writes lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachedKind {
    /// A Skyhook or a NodeWright, by its group.
    Workload(Group),
    Node,
    /// The controller's pods, in its namespace.
    Pod,
    /// The controller's stage Jobs, in its namespace.
    Job,
    /// The controller's ConfigMaps (package or node metadata), in its namespace.
    ConfigMap,
}

/// What the cache must show for a write to be seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// The object at this `resourceVersion` (the one the write returned) or a later one.
    Version(String),
    /// No object of that name (it was deleted at once).
    Gone,
    /// Being deleted (a pod's graceful deletion, finalizers): the object at this version or a
    /// later one, or no object any more.
    Deleting(String),
}

/// One write the next reconcile must see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnWrite {
    pub kind: CachedKind,
    pub name: String,
    pub shown: Shown,
}

/// Whether a cache holding the object at `cached` (`None`: no such object) shows `write`.
///
/// A version at least the written one shows it. Resource versions are opaque by contract, but
/// every API server backed by etcd issues them as increasing integers; where one is not an
/// integer, only the written version itself counts (a later write then delays the next
/// reconcile by the loop's bound, never lets it read an older view).
pub fn shows(write: &OwnWrite, cached: Option<&str>) -> bool {
    match (&write.shown, cached) {
        (Shown::Gone | Shown::Deleting(_), None) => true,
        (Shown::Gone, Some(_)) | (Shown::Version(_), None) => false,
        (Shown::Version(written) | Shown::Deleting(written), Some(cached)) => {
            at_least(cached, written)
        }
    }
}

fn at_least(cached: &str, written: &str) -> bool {
    cached == written
        || matches!(
            (written.parse::<u64>(), cached.parse::<u64>()),
            (Ok(written), Ok(cached)) if cached > written
        )
}

/// What a write's answer is kept for: where it left the object. Taken from the answer as soon
/// as it arrives, so a plan's thousands of concurrent writes do not hold thousands of answers
/// (a created pod comes back whole, with its managed fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landed(Option<Shown>);

impl Landed {
    /// A create or patch answered with `object`.
    pub fn written<K: Resource>(object: &K) -> Self {
        Landed(object.meta().resource_version.clone().map(Shown::Version))
    }

    /// A delete answered with the object still there at its version (a pod's graceful
    /// deletion, an object with finalizers), or with a status (gone at once).
    pub fn deleted<K: Resource>(answer: &Either<K, Status>) -> Self {
        Landed(match answer {
            Either::Left(object) => object.meta().resource_version.clone().map(Shown::Deleting),
            Either::Right(_) => Some(Shown::Gone),
        })
    }
}

/// The writes of one reconcile, collected as their answers come back.
#[derive(Debug, Default)]
pub struct OwnWrites(Vec<OwnWrite>);

impl OwnWrites {
    /// Notes where a successful write left its object and passes the outcome on. A later write
    /// of the same object replaces the earlier one: what the cache must show is where the last
    /// write left it (a Job deleted and created again under its name is there, not gone).
    pub fn landed(
        &mut self,
        kind: CachedKind,
        name: &str,
        result: Result<Landed, kube::Error>,
    ) -> Result<(), kube::Error> {
        if let Landed(Some(shown)) = result? {
            self.0
                .retain(|write| !(write.kind == kind && write.name == name));
            self.0.push(OwnWrite {
                kind,
                name: name.to_owned(),
                shown,
            });
        }
        Ok(())
    }

    /// The writes noted.
    pub fn into_inner(self) -> Vec<OwnWrite> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_shows_the_written_version_or_a_later_one() {
        let version = |v: &str| OwnWrite {
            kind: CachedKind::Node,
            name: "node-1".to_owned(),
            shown: Shown::Version(v.to_owned()),
        };
        let pod = |shown: Shown| OwnWrite {
            kind: CachedKind::Pod,
            name: "pod-1".to_owned(),
            shown,
        };
        let gone = pod(Shown::Gone);
        let deleting = pod(Shown::Deleting("40".to_owned()));
        // (write, cached version, shown)
        let cases = [
            (version("120"), Some("120"), true),
            (version("120"), Some("121"), true),
            (version("120"), Some("1000"), true),
            (version("120"), Some("119"), false),
            (version("120"), Some("99"), false),
            (version("120"), None, false),
            (version("abc"), Some("abc"), true),
            (version("abc"), Some("abd"), false),
            (version("120"), Some("x121"), false),
            (gone.clone(), None, true),
            (gone, Some("5"), false),
            (deleting.clone(), Some("40"), true),
            (deleting.clone(), Some("41"), true),
            (deleting.clone(), Some("39"), false),
            (deleting, None, true),
        ];
        for (write, cached, expected) in cases {
            assert_eq!(
                shows(&write, cached),
                expected,
                "{write:?} cached {cached:?}"
            );
        }
    }

    #[test]
    fn writes_note_what_the_api_server_returned() {
        let pod = |version: Option<&str>| k8s_openapi::api::core::v1::Pod {
            metadata: kube::api::ObjectMeta {
                resource_version: version.map(str::to_owned),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut writes = OwnWrites::default();
        let written = |version| Ok(Landed::written(&pod(version)));
        assert!(
            writes
                .landed(CachedKind::Pod, "a", written(Some("7")))
                .is_ok()
        );
        assert!(writes.landed(CachedKind::Pod, "b", written(None)).is_ok());
        let refused = kube::Error::Api(Box::new(
            Status::failure("conflict", "Conflict").with_code(409),
        ));
        assert!(writes.landed(CachedKind::Pod, "c", Err(refused)).is_err());
        let deleting = Landed::deleted(&Either::<_, Status>::Left(pod(Some("9"))));
        assert!(writes.landed(CachedKind::Pod, "d", Ok(deleting)).is_ok());
        let gone = Landed::deleted(&Either::<k8s_openapi::api::core::v1::Pod, _>::Right(
            Status::success(),
        ));
        assert!(writes.landed(CachedKind::Pod, "e", Ok(gone)).is_ok());
        let noted: Vec<(String, Shown)> = writes
            .into_inner()
            .into_iter()
            .map(|write| (write.name, write.shown))
            .collect();
        assert_eq!(
            noted,
            [
                ("a".to_owned(), Shown::Version("7".to_owned())),
                ("d".to_owned(), Shown::Deleting("9".to_owned())),
                ("e".to_owned(), Shown::Gone),
            ]
        );
    }
}
