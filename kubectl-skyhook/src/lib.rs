//! kubectl skyhook: where a Skyhook rollout stands, why a node is stuck, and safe verbs to
//! pause, resume and reset it.
//!
//! Every view ([`views`]) and every mutating verb ([`patches`]) is a pure function of plain
//! data ([`cluster::Cluster`]) rendered by [`output`]; [`run`] is the thin layer that reads
//! the cluster, prompts, and sends merge patches.

pub mod cli;
pub mod cluster;
pub mod entry;
pub mod eta;
pub mod logs;
pub mod migrate;
pub mod namespace;
pub mod operator_version;
pub mod output;
pub mod patches;
pub mod pattern;
pub mod rollout;
pub mod run;
pub mod views;
