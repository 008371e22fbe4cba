//! Every end-to-end test, in one test executable: each former `tests/<name>.rs` is the module
//! `<name>` here (so `cargo test -p e2e <name>::` runs one suite), and a change to the e2e
//! library or a test links one executable, not one per suite.
//!
//! The tests share this process. The test harness runs two at a time (one per core of the
//! machine the suite was sized for; `--test-threads` or `RUST_TEST_THREADS` as usual), as each
//! of the former executables did, one executable after the other. So a test must not change
//! process-wide state: no `std::env::set_var` or `set_current_dir` (pass environment and working
//! directory to the child process instead, as [`e2e::Kubectl`] and [`e2e::helm`] do), no signal
//! handlers. What the process builds once ([`e2e::build_binaries`]) is behind a `OnceLock`, and
//! every devcluster has its own state directory and ports.

mod budget_invariant;
mod chart_dry_run;
mod chart_install;
mod chart_template;
mod chart_upgrade;
mod cli_krew;
mod cli_lifecycle;
mod cli_migrate;
mod cli_nodes;
mod cli_nodewright;
mod cli_status;
mod cli_support;
mod cli_uninstall;
mod core_changes;
mod core_interrupts;
mod core_ordering;
mod core_packages;
mod core_pods;
mod deletion_failing;
mod deployment_policy;
mod devcluster_install;
mod devcluster_webhook;
mod dockerfiles;
mod drain_budget;
mod drain_config;
mod examples;
mod faults;
mod fleet_budget;
mod generations;
mod health_gate;
mod jobs;
mod kubelet_api;
mod leader_election;
mod maintenance_window;
mod migration;
mod node_state_malformed;
mod observability;
mod operator_agent;
mod pod_slots;
mod pre_pull;
mod readiness_gates;
mod rollout_safety;
mod runtime_required_cordon;
mod seed_quick_start;
mod services;
mod skyhook_reads;
mod takeover_v020;
mod topology_budget;
mod uninstall_flows;
mod webhook_admission;
mod webhook_uninstall;
