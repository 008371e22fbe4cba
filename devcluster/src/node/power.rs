//! Reboots: requested by the shims inside a node (through the node's request FIFO) or by a
//! [`super::NodeHandle`]. The node goes NotReady, its kubelet kills every container, the boot ID
//! changes, the root is remounted (emptying `/tmp` and `/run`), and after the reboot delay the node
//! is Ready again and its kubelet re-runs the pods bound to it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;

use super::heartbeat::{post_status, renew_lease};
use super::shims::REQUESTS_FIFO;
use super::sim::{Power, SimContext, SimNode, mount_root, new_boot_id};

/// Reads power requests from the node's FIFO for as long as the simulator runs.
pub(crate) async fn serve_requests(ctx: Arc<SimContext>, node: Arc<SimNode>) {
    let path = node.paths.control.join(REQUESTS_FIFO);
    // Opened read-write so the FIFO never reports EOF when a writer goes away.
    let receiver = match pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&path)
    {
        Ok(receiver) => receiver,
        Err(error) => {
            tracing::error!(node = %node.name, path = %path.display(), %error,
                "failed to open the node's request FIFO; reboots from inside the node will hang");
            return;
        }
    };
    let mut lines = BufReader::new(receiver).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                tracing::info!(node = %node.name, request = %line.trim(), "power request");
                if line.starts_with("reboot") {
                    tokio::spawn(reboot(ctx.clone(), node.clone()));
                }
            }
            Ok(None) => return,
            Err(error) => {
                tracing::error!(node = %node.name, %error, "failed to read the node's request FIFO");
                return;
            }
        }
    }
}

/// Reboots the node; a request while it is already rebooting is ignored.
pub(crate) async fn reboot(ctx: Arc<SimContext>, node: Arc<SimNode>) {
    if node.rebooting.swap(true, Ordering::SeqCst) {
        return;
    }
    tracing::info!(node = %node.name, "node shutting down");
    node.power.send_replace(Power::Down);
    post_status(&ctx, &node, false, true).await;

    // The kubelet's pod workers see Down and kill their containers (SIGTERM, then SIGKILL).
    let mut live = node.live_containers.subscribe();
    let deadline = ctx.opts.shutdown_grace + Duration::from_secs(10);
    if tokio::time::timeout(deadline, live.wait_for(|n| *n == 0))
        .await
        .is_err()
    {
        tracing::warn!(node = %node.name, "containers still running after the shutdown grace period");
    }

    match new_boot_id() {
        Ok(boot_id) => {
            // Written in place: the file is bind-mounted as the node's boot_id.
            if let Err(error) = std::fs::write(&node.paths.boot_id, &boot_id) {
                tracing::error!(node = %node.name, %error, "failed to write the new boot ID");
            }
            if let Ok(mut current) = node.boot_id.lock() {
                *current = boot_id;
            }
        }
        Err(error) => tracing::error!(node = %node.name, %error, "failed to make a new boot ID"),
    }
    if let Some(processes) = &ctx.processes
        && let Err(error) = mount_root(processes, &node).await
    {
        tracing::error!(node = %node.name, error = %crate::shim::error_chain(&error),
            "failed to remount the node root after reboot");
    }
    tokio::time::sleep(ctx.opts.reboot_delay).await;

    node.power.send_replace(Power::Up);
    post_status(&ctx, &node, true, true).await;
    renew_lease(&ctx, &node).await;
    node.rebooting.store(false, Ordering::SeqCst);
    tracing::info!(node = %node.name, boot_id = %node.boot_id(), "node booted");
}
