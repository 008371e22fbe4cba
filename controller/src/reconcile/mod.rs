//! The reconcile pipeline's pure half: [`snapshot`] is the plain data one reconcile reads, and
//! [`plan`] decides, from that data alone, every write the reconcile makes.
pub mod apply;
pub mod plan;
pub mod snapshot;
