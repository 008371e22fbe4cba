//! Reboots: requested by the command shims inside a node (through the node's request FIFO) or by a
//! [`super::NodeHandle`]. The node goes NotReady, its kubelet kills every container, the boot ID
//! changes, the root is remounted (emptying `/tmp` and `/run`), and after the reboot delay the node
//! is Ready again and its kubelet re-runs the pods bound to it.
//!
//! `down`/`up` are a dead machine and its boot: no shutdown, no status, just silence until it
//! boots again, as kube-controller-manager sees a machine that lost power.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;

use super::boot::{mount_root, new_boot_id};
use super::command_shims::REQUESTS_FIFO;
use super::context::{Power, SimContext, SimNode};
use super::heartbeat::{post_status, renew_lease};

/// How long `down` waits for the killed containers to be collected.
const DOWN_KILL_BOUND: Duration = Duration::from_secs(15);

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

/// Reboots the node; a request while it is already rebooting, or while it is held down, is
/// ignored. A [`down`] during the reboot keeps the node down when the reboot ends.
pub(crate) async fn reboot(ctx: Arc<SimContext>, node: Arc<SimNode>) {
    if node.held_down.load(Ordering::SeqCst) || node.rebooting.swap(true, Ordering::SeqCst) {
        return;
    }
    let _transition = node.power_lock.lock().await;
    if node.held_down.load(Ordering::SeqCst) {
        node.rebooting.store(false, Ordering::SeqCst);
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
    new_boot(&ctx, &node).await;
    tokio::time::sleep(ctx.opts.reboot_delay).await;
    if node.held_down.load(Ordering::SeqCst) {
        node.rebooting.store(false, Ordering::SeqCst);
        tracing::info!(node = %node.name, "node held down; the reboot does not bring it back");
        return;
    }
    power_on(&ctx, &node).await;
    node.rebooting.store(false, Ordering::SeqCst);
}

/// The machine dies: every container is killed at once (SIGKILL), nothing is reported, the Lease
/// is no longer renewed, and it stays down (also when it was rebooting) until [`up`]. Returns
/// once its containers are gone and a reboot in flight has ended.
pub(crate) async fn down(node: &SimNode) {
    node.held_down.store(true, Ordering::SeqCst);
    node.power.send_replace(Power::Off);
    tracing::info!(node = %node.name, "node down (dead machine)");
    // A reboot in flight holds the lock until it has seen `held_down`.
    let _transition = node.power_lock.lock().await;
    node.power.send_replace(Power::Off);
    let mut live = node.live_containers.subscribe();
    // The kubelet's workers kill with SIGKILL and collect the exits; this bounds a stuck one.
    if tokio::time::timeout(DOWN_KILL_BOUND, live.wait_for(|n| *n == 0))
        .await
        .is_err()
    {
        tracing::warn!(node = %node.name, "containers still running after the node went down");
    }
}

/// The machine boots after [`down`]: a new boot ID, a fresh root (`/tmp` and `/run` emptied),
/// its status posted and its Lease renewed at once, and its kubelet re-runs the pods bound to it.
/// A node that is not held down is left alone.
pub(crate) async fn up(ctx: &SimContext, node: &SimNode) {
    let _transition = node.power_lock.lock().await;
    if !node.held_down.swap(false, Ordering::SeqCst) {
        return;
    }
    new_boot(ctx, node).await;
    power_on(ctx, node).await;
}

/// A new boot ID and a freshly mounted root, as a boot gives the machine.
async fn new_boot(ctx: &SimContext, node: &SimNode) {
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
        && let Err(error) = mount_root(processes, node).await
    {
        tracing::error!(node = %node.name, error = %crate::isolation::error_chain(&error),
            "failed to remount the node root after reboot");
    }
}

/// The kubelet is up again: pods re-run, status and Lease posted at once.
async fn power_on(ctx: &SimContext, node: &SimNode) {
    node.power.send_replace(Power::Up);
    post_status(ctx, node, true, true).await;
    renew_lease(ctx, node).await;
    tracing::info!(node = %node.name, boot_id = %node.boot_id(), "node booted");
}
