//! Plan tests: a small in-memory cluster ([`sim::Sim`]) applies each plan as the I/O layer
//! would, and the tests play the kubelet by settling pods, then assert the exact node states,
//! pods, patches and statuses of spec §6.1's scenarios.

mod abandoned_pods;
mod budget;
mod changes;
mod conditions;
mod drain_config;
mod drain_options;
mod fleet;
mod generations;
mod health_gate;
mod interrupting_changes;
mod job_events;
mod migration;
mod node_metadata;
mod node_order;
mod node_records;
mod node_state_conditions;
mod non_interrupt_hold;
mod pod_slots;
mod policy;
mod pre_pull;
mod readiness_gates;
mod reboots;
mod runtime_required;
mod scenarios;
mod sim;
mod stage_durations;
mod stuck_jobs;
mod targeting;
mod topology;
mod uninstall;
mod windows;
mod writes;
