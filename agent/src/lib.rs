//! skyhook-agent: runs one lifecycle stage of a Skyhook package on the host.
//!
//! The agent is a drop-in replacement for upstream's Python agent: same command line and
//! environment, same `config.json` (schema v1), and the same on-host flags, history and logs,
//! so a node moved from the upstream agent keeps its state.
//!
//! Decisions are pure ([`decide`], [`interrupt`], [`history`], [`logs`], [`layout`]); the host
//! is reached through the small [`host::Host`] trait, implemented for real in [`execute`].

pub mod banner;
pub mod cli;
pub mod config;
pub mod decide;
pub mod execute;
pub mod exit;
pub mod history;
pub mod host;
pub mod interrupt;
pub mod layout;
pub mod logs;
pub mod mode;
pub mod problem;
pub mod pyrepr;
pub mod run;
pub mod settings;
pub mod timefmt;
pub mod validate;

#[cfg(test)]
mod fake;
