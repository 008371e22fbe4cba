//! Programs the kubelet plays itself for an image instead of running a process: a test image
//! whose behaviour (sleep, print, exit) is cheap to simulate on any node, light ones included.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

/// What a played container does: prints `banner` to its log, sleeps, exits with `exit_code`
/// (dies of a signal when stopped before that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Played {
    pub banner: String,
    pub sleep: Duration,
    pub exit_code: i32,
}

/// An image's behaviour, registered by name through
/// [`ImageExtensions::with_program`](super::ImageExtensions::with_program).
pub trait PlayedProgram: Send + Sync + std::fmt::Debug {
    /// Whether `container` runs as a process in a container root instead of being played (full
    /// nodes only: on a light node it is always played).
    fn runs_process(&self, container: &Container) -> bool;

    /// What `container` does, given its command line `argv` and environment `env`; `light`:
    /// it runs on a light node (where a container that asks for a process is played too).
    fn play(
        &self,
        argv: &[String],
        container: &Container,
        env: &BTreeMap<String, String>,
        light: bool,
    ) -> Played;
}
