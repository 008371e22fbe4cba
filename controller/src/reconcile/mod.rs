//! The reconcile pipeline's pure half: [`snapshot`] is the plain data one reconcile reads, and
//! [`plan`] decides, from that data alone, every write the reconcile makes; [`event_budget`]
//! thins its Events across reconciles as client-go's recorder would.
pub mod apply;
pub mod event_budget;
pub mod plan;
pub mod snapshot;
