//! The views: pure functions from [`crate::cluster::Cluster`] (and arguments) to data that
//! renders as a table and serialises as the documented JSON/YAML structure.

mod detail;
mod nodes;
mod overview;
mod packages;
mod plan;
mod uninstall;

pub use detail::{
    BlockedNodeRow, CompartmentRow, ErroringPackage, NodeRow, SkyhookDetail, skyhook_detail,
};
pub use nodes::{
    NodeList, NodeListEntry, NodePackageRow, NodeStatusEntry, NodeStatusView, node_list,
    node_status,
};
pub use overview::{SkyhookOverview, SkyhookRow, overview};
pub use packages::{PackageRow, PackageStatusView, package_status};
pub use plan::{PlanView, PlannedNode, PlannedPackage, plan};
pub use uninstall::{UninstallRow, uninstall_progress, uninstall_table};
