//! `skyhook-controller`: parses and checks the configuration, sets up logging and TLS, then runs
//! the controller (see the `controller` library).

use std::cell::Cell;
use std::future::{self, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser as _;
use controller::config::{Args, Config};
use tracing::info;

/// Every reconcile builds and drops a view of each node, and every watch event is decoded into
/// fresh allocations: at 5,000 nodes glibc's malloc took a third of the controller's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` and `mi_option_page_full_retain` of the mimalloc (v3) the allocator
/// is built from, by their place in its `mi_option_t`: `libmimalloc-sys` names neither. A test
/// reads their documented defaults through them, so a mimalloc that renumbers them fails it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_PAGE_FULL_RETAIN: libmimalloc_sys::mi_option_t = 36;

/// Has mimalloc give memory back as soon as it is free, unless `MIMALLOC_PURGE_DELAY` or
/// `MIMALLOC_PAGE_FULL_RETAIN` say otherwise. By default it keeps two empty pages per size class
/// and thread, and hands freed pages back a second later, at its next call: a controller that
/// goes idle after a rollout makes no next call, and kept them all (three 1,000-node rollouts
/// then idle: 61-62 MiB resident with the defaults, 53 MiB with both at 0).
fn give_memory_back_at_once() {
    // SAFETY: setting an option has no preconditions; `set_default` leaves one the environment
    // set alone.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, 0);
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PAGE_FULL_RETAIN, 0);
    }
}

/// How often, at most, a thread gives back the memory other threads freed.
const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// Called when a worker thread runs out of work, and on the main thread a while after it worked
/// ([`collecting_after_work`]): at most every [`COLLECT_EVERY`] per thread, has the allocator
/// take back the blocks of this thread's pages that other threads freed, and give empty pages
/// back. mimalloc does that only when the owning thread allocates again, and an idle thread
/// does not: the watches decode objects on the workers, the reconcile (on the main thread)
/// drops them, and at idle those pages stayed resident. A call takes 3-40 µs.
fn collect_freed_memory() {
    thread_local! {
        static COLLECTED: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    let due = COLLECTED
        .get()
        .is_none_or(|last| now.duration_since(last) >= COLLECT_EVERY);
    if due {
        COLLECTED.set(Some(now));
        // SAFETY: `mi_collect` has no preconditions: it only walks the calling thread's heap,
        // which the global allocator above owns.
        #[allow(unsafe_code)]
        unsafe {
            libmimalloc_sys::mi_collect(false);
        }
    }
}

fn main() -> anyhow::Result<()> {
    give_memory_back_at_once();
    let args = Args::parse();
    let config = Config::from_args(&args)?;
    controller::telemetry::init(config.log)
        .map_err(|error| anyhow::anyhow!(error).context("failed to set up logging"))?;
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("another TLS provider was installed before ours"))?;
    info!(
        version = env!("CARGO_PKG_VERSION"),
        namespace = %config.pods.namespace,
        agent_image = %config.pods.agent_image,
        leader_election = config.leader_election,
        "starting skyhook-controller"
    );
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(collect_freed_memory)
        .build()
        .context("failed to start the async runtime")?
        .block_on(collecting_after_work(
            controller::run::run(config),
            collect_freed_memory,
        ))
}

/// Runs `work` on this thread (the reconcile runs here, not on a worker), and calls `collect_now`
/// [`COLLECT_EVERY`] after work was woken, once per such wake-up or run of them. A timer ticking
/// for as long as the controller runs would wake an idle controller every second for nothing.
async fn collecting_after_work<T>(
    work: impl Future<Output = T>,
    mut collect_now: impl FnMut(),
) -> T {
    let mut work = pin!(work);
    let mut collect = pin!(tokio::time::sleep(Duration::ZERO));
    let mut armed = false;
    future::poll_fn(|context| {
        if let Poll::Ready(output) = work.as_mut().poll(context) {
            return Poll::Ready(output);
        }
        if !armed {
            // Woken for `work`: it ran on this thread.
            collect
                .as_mut()
                .reset(tokio::time::Instant::now() + COLLECT_EVERY);
            armed = true;
        }
        if collect.as_mut().poll(context).is_ready() {
            collect_now();
            armed = false;
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two options as mimalloc reads them now.
    fn options() -> (std::ffi::c_long, std::ffi::c_long) {
        // SAFETY: reading an option has no preconditions.
        #[allow(unsafe_code)]
        unsafe {
            (
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
                libmimalloc_sys::mi_option_get(MI_OPTION_PAGE_FULL_RETAIN),
            )
        }
    }

    /// How often `collecting_after_work` collects while `work` is woken every `wake_every` for
    /// `busy`, then left alone for `quiet`.
    async fn collections(wake_every: Duration, busy: Duration, quiet: Duration) -> usize {
        let collected = Cell::new(0);
        let work = async {
            let mut woken = Duration::ZERO;
            while woken < busy {
                tokio::time::sleep(wake_every).await;
                woken += wake_every;
            }
            tokio::time::sleep(quiet).await;
        };
        collecting_after_work(work, || collected.set(collected.get() + 1)).await;
        collected.get()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_main_thread_is_not_woken_to_collect() {
        // One collection after the start, none in the hour the work then waits.
        assert_eq!(
            collections(
                Duration::from_secs(1),
                Duration::ZERO,
                Duration::from_secs(3600)
            )
            .await,
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn busy_work_is_collected_after_once_a_second_at_most() {
        // Woken every 100 ms for 10 s: a collection a second, then one after the last wake-up.
        let busy = collections(
            Duration::from_millis(100),
            Duration::from_secs(10),
            Duration::from_secs(3600),
        )
        .await;
        assert!((10..=11).contains(&busy), "{busy} collections");
        // Woken every 5 s for a minute: one collection per wake-up.
        let sparse = collections(
            Duration::from_secs(5),
            Duration::from_secs(60),
            Duration::from_secs(3600),
        )
        .await;
        assert_eq!(sparse, 13);
    }

    #[test]
    fn the_allocator_options_are_the_ones_meant() {
        // mimalloc v3's defaults (src/options.c): 1,000 ms and two pages; no other option of it
        // defaults to this pair.
        assert_eq!(options(), (1000, 2));
        give_memory_back_at_once();
        assert_eq!(options(), (0, 0));
    }
}
