//! `plan_bench`: how long one pure plan takes over a 20,000-node snapshot, and how much it
//! allocates. No cluster: the snapshot is built in memory (one Skyhook, one package, a 10%
//! budget by default; nodes complete, in progress, erroring, waiting and untouched), planned
//! once to reach the status and node annotations a previous pass leaves, then planned again
//! `--runs` times. By default the snapshot holds no pods: every plan creates the pods of the
//! in-progress nodes, the most a plan of this cluster does. With `--running-pods` the pods the
//! first plan created stay in the snapshot, running, as in a cluster mid-rollout: each later plan
//! has nothing to start and measures what every reconcile of such a cluster pays to find that
//! out. `--in-progress` sets the share of nodes in progress (5% by default; 50 with
//! `--running-pods` is a cluster with a pod on half its nodes).
//!
//! `cargo run --release -p controller --example plan_bench -- [--nodes 20000] [--runs 5]
//! [--budget 10] [--in-progress 5] [--running-pods]`
//!
//! Prints one line per run and a summary: the median plan time, and the allocations (count and
//! bytes, from a counting global allocator) of the median run, the most it had live at once above
//! the snapshot, what its plan holds, and what the snapshot holds; first, what the cache holds of
//! 1,000 of the realistic nodes devcluster serves (`--node-size realistic`), decoded from their
//! JSON as the watch decodes them, and what decoding one costs. Numbers, never assertions.

// The benchmark's output is its report on stdout.
#![allow(clippy::print_stdout)]

use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser as _;
use controller::cache::CachedNode;
use controller::config::{Args, Config};
use controller::pod_outcome::PodOutcome;
use controller::reconcile::plan::plan;
use controller::reconcile::snapshot::{NodeView, OwnedPod, Snapshot, Workload};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;
use mimalloc::MiMalloc;
use skyhook_api::generation::Group;
use skyhook_api::keys;
use skyhook_api::node_mirror::applied_bytes;
use skyhook_api::string_map::PackedMap;
use skyhook_api::v1alpha1::{InterruptionBudget, Package, Skyhook, SkyhookSpec};

/// Counts every allocation (and reallocation) and the bytes asked for, and the bytes live, then
/// forwards to mimalloc, the controller's allocator.
struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
/// The most bytes live since [`measure`] last reset it.
static PEAK_LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

fn count(bytes: usize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    ALLOCATED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

fn live(change: i64) {
    let now = LIVE_BYTES.fetch_add(change, Ordering::Relaxed) + change;
    PEAK_LIVE_BYTES.fetch_max(now, Ordering::Relaxed);
}

fn signed(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

// A global allocator is an unsafe trait; this one only counts and forwards to mimalloc.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        live(signed(layout.size()));
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { MiMalloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        live(-signed(layout.size()));
        // SAFETY: `ptr` was allocated by `MiMalloc` with `layout` (every path above forwards).
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        live(signed(layout.size()));
        // SAFETY: as for `alloc`.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        live(signed(new_size) - signed(layout.size()));
        // SAFETY: as for `dealloc`; the caller guarantees `new_size` is valid for `layout`.
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const SKYHOOK: &str = "bench";
const TARGET_LABEL: &str = "skyhook.nvidia.com/bench-node";
const IMAGE: &str = "ghcr.io/nvidia/skyhook/agentless";
const AGENT_IMAGE: &str = "ghcr.io/nvidia/skyhook/agentless:6.2.0";

/// The controller's defaults as its own flag parser makes them (the environment's settings
/// apply, as for the controller), with upstream's e2e agent image.
fn config() -> anyhow::Result<Config> {
    let args = Args::try_parse_from(["plan_bench", "--agent-image", AGENT_IMAGE])
        .context("the controller's default arguments")?;
    Config::from_args(&args).map_err(|error| anyhow::anyhow!("the controller's defaults: {error}"))
}

fn skyhook(budget_percent: i32) -> Skyhook {
    let package = Package {
        name: "pkg".into(),
        version: "1.0.0".into(),
        image: IMAGE.into(),
        ..Package::default()
    };
    Skyhook {
        metadata: ObjectMeta {
            name: Some(SKYHOOK.into()),
            uid: Some("uid-bench".into()),
            generation: Some(1),
            finalizers: Some(vec![keys::SKYHOOK.finalizer.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: SkyhookSpec {
            node_selectors: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(TARGET_LABEL.into(), "yes".into())])),
                match_expressions: None,
            }),
            packages: BTreeMap::from([("pkg".to_owned(), package)]),
            interruption_budget: Some(InterruptionBudget {
                count: None,
                percent: Some(budget_percent),
                topology: None,
            }),
            ..SkyhookSpec::default()
        },
        status: None,
    }
}

/// Where node `index` stands, out of every 100: 40 complete, `in_progress` in progress
/// (picked), 1 erroring, 5 waiting, the rest untouched.
fn node_annotations(index: usize, in_progress: usize, now: Timestamp) -> BTreeMap<String, String> {
    let entry = |stage: &str, state: &str| {
        format!(
            r#"{{"pkg|1.0.0":{{"name":"pkg","version":"1.0.0","image":"{IMAGE}","stage":"{stage}","state":"{state}"}}}}"#
        )
    };
    let bucket = index % 100;
    let (state, status) = match bucket.checked_sub(40) {
        None => (Some(entry("config", "complete")), "complete"),
        Some(past) if past < in_progress => (Some(entry("apply", "in_progress")), "in_progress"),
        Some(past) if past == in_progress => (Some(entry("apply", "erroring")), "erroring"),
        Some(past) if past <= in_progress + 5 => (None, "waiting"),
        Some(_) => return BTreeMap::new(),
    };
    let mut annotations = BTreeMap::from([
        (keys::SKYHOOK.node_status_key(SKYHOOK), status.to_owned()),
        (
            keys::SKYHOOK.node_boot_id_annotation(SKYHOOK),
            format!("boot-{index}"),
        ),
    ]);
    if let Some(state) = state {
        annotations.insert(keys::SKYHOOK.node_state_annotation(SKYHOOK), state);
    }
    if status == "in_progress" {
        annotations.insert(
            keys::SKYHOOK.node_picked_annotation(SKYHOOK),
            now.to_string(),
        );
    }
    annotations
}

fn snapshot(nodes: usize, budget_percent: i32, in_progress: usize, now: Timestamp) -> Snapshot {
    let nodes = (0..nodes)
        .map(|index| NodeView {
            name: format!("node-{index:05}"),
            labels: PackedMap::from_iter([(TARGET_LABEL, "yes")]),
            annotations: node_annotations(index, in_progress, now).into(),
            created: Some(now - jiff::SignedDuration::from_secs(86_400 + index as i64)),
            boot_id: Some(format!("boot-{index}")),
            ready: true,
            ..NodeView::default()
        })
        .map(std::sync::Arc::new)
        .collect();
    Snapshot {
        skyhooks: vec![Workload::new(Group::Skyhook, skyhook(budget_percent))],
        nodes,
        ..Snapshot::default()
    }
}

/// One plan: its wall time, the allocations made meanwhile, the most it had live at once (above
/// what was live before it started: the controller's peak memory is a plan's), and how much the
/// plan it returns holds (the bytes still live when it returns, more than before it started).
struct Run {
    time: Duration,
    allocations: u64,
    bytes: u64,
    peak: i64,
    held: i64,
}

fn measure(
    snapshot: &Snapshot,
    config: &Config,
    now: Timestamp,
) -> (Run, controller::reconcile::plan::Plan) {
    let (count_before, bytes_before, live_before) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        ALLOCATED_BYTES.load(Ordering::Relaxed),
        LIVE_BYTES.load(Ordering::Relaxed),
    );
    PEAK_LIVE_BYTES.store(live_before, Ordering::Relaxed);
    let started = Instant::now();
    let planned = plan(snapshot, config, now);
    let time = started.elapsed();
    let run = Run {
        time,
        allocations: ALLOCATIONS.load(Ordering::Relaxed) - count_before,
        bytes: ALLOCATED_BYTES.load(Ordering::Relaxed) - bytes_before,
        peak: PEAK_LIVE_BYTES.load(Ordering::Relaxed) - live_before,
        held: LIVE_BYTES.load(Ordering::Relaxed) - live_before,
    };
    (run, planned)
}

/// What the cache pays for devcluster's realistic nodes, decoded from their JSON as the watch
/// decodes every event of theirs (a status report at idle among them).
struct RealisticNodes {
    /// Bytes the decoded nodes hold, not counting the vector holding them.
    held: i64,
    /// Bytes of their JSON.
    json: usize,
    /// Time to decode them all, the fastest of [`DECODE_PASSES`] passes.
    decode: Duration,
    /// Allocations of one pass.
    allocations: u64,
}

/// Passes over the realistic nodes' JSON, of which the fastest is reported.
const DECODE_PASSES: usize = 5;

fn realistic_nodes(count: usize, now: Timestamp) -> anyhow::Result<RealisticNodes> {
    use devcluster::node::object::{NodeFacts, build_node, node_labels};
    use devcluster::node::size::{dress, extra_labels};
    let facts = NodeFacts {
        kubelet_version: "v1.33.0".into(),
        kernel_version: "6.1.0".into(),
        os_image: "Ubuntu 24.04 LTS".into(),
        architecture: "amd64".into(),
        cpu: "96".into(),
        memory: "1152Gi".into(),
        pods: "110".into(),
        kubelet_port: 10250,
    };
    let texts = (0..count)
        .map(|index| {
            let name = format!("node-{index:05}");
            let labels = node_labels(&name, &facts, &extra_labels(index));
            let mut node = build_node(&name, index, labels, &facts, "boot-1", now);
            dress(&mut node, index, now);
            serde_json::to_vec(&node)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut held = 0;
    let mut decode = Duration::MAX;
    let mut allocations = 0;
    for _ in 0..DECODE_PASSES {
        let mut cached: Vec<CachedNode> = Vec::with_capacity(count);
        let before = LIVE_BYTES.load(Ordering::Relaxed);
        let allocations_before = ALLOCATIONS.load(Ordering::Relaxed);
        let started = Instant::now();
        for text in &texts {
            cached.push(serde_json::from_slice(text)?);
        }
        decode = decode.min(started.elapsed());
        allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations_before;
        held = LIVE_BYTES.load(Ordering::Relaxed) - before;
    }
    Ok(RealisticNodes {
        held,
        json: texts.iter().map(Vec::len).sum(),
        decode,
        allocations,
    })
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

/// The nodes as the first plan's patches leave them (annotations, labels, conditions), so later
/// plans see what a reconcile after it would: only the nodes that still change are patched.
fn apply_node_patches(snapshot: &mut Snapshot, planned: &controller::reconcile::plan::Plan) {
    for node in &mut snapshot.nodes {
        let Some(patch) = planned.nodes.get(&node.name) else {
            continue;
        };
        let node = std::sync::Arc::make_mut(node);
        for (map, changes) in [
            (&mut node.annotations, &patch.annotations),
            (&mut node.labels, &patch.labels),
        ] {
            for (key, value) in changes {
                match value {
                    Some(value) => map.insert(key, value),
                    None => {
                        map.remove(key);
                    }
                }
            }
        }
        for condition in &patch.conditions {
            node.conditions.retain(|c| c.type_ != condition.type_);
            node.conditions.push(condition.clone());
        }
        if let Some(unschedulable) = patch.unschedulable {
            node.unschedulable = unschedulable;
        }
    }
}

/// The command line.
struct Arguments {
    nodes: usize,
    runs: usize,
    budget_percent: i32,
    /// Percent of the nodes in progress (at most 54: 40 are complete, 6 erroring or waiting).
    in_progress: usize,
    running_pods: bool,
}

fn arguments() -> anyhow::Result<Arguments> {
    let mut parsed = Arguments {
        nodes: 20_000,
        runs: 5,
        budget_percent: 10,
        in_progress: 5,
        running_pods: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--running-pods" {
            parsed.running_pods = true;
            continue;
        }
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        let number: usize = value
            .parse()
            .with_context(|| format!("{flag} {value}: not a whole number"))?;
        match flag.as_str() {
            "--nodes" => parsed.nodes = number,
            "--runs" => parsed.runs = number.max(1),
            "--budget" if (1..=100).contains(&number) => {
                parsed.budget_percent = i32::try_from(number)?;
            }
            "--budget" => bail!("--budget {number}: a percentage from 1 to 100"),
            "--in-progress" if number <= 54 => parsed.in_progress = number,
            "--in-progress" => bail!(
                "--in-progress {number}: at most 54 (percent; 40 of every 100 nodes are complete, 6 erroring or waiting)"
            ),
            _ => bail!(
                "unknown flag {flag}; use --nodes N, --runs N, --budget PERCENT, --in-progress PERCENT and --running-pods"
            ),
        }
    }
    Ok(parsed)
}

fn main() -> anyhow::Result<()> {
    let Arguments {
        nodes,
        runs,
        budget_percent,
        in_progress,
        running_pods,
    } = arguments()?;
    let config = config()?;
    let now: Timestamp = "2026-01-01T00:00:00Z".parse()?;
    let realistic = 1_000;
    let nodes_of = |total: f64| total / realistic as f64;
    let RealisticNodes {
        held,
        json,
        decode,
        allocations,
    } = realistic_nodes(realistic, now)?;
    println!(
        "{realistic} realistic nodes ({:.0} bytes of JSON each), as the cache holds them: {:.2} MiB ({:.0} bytes per node); decoding one: {:.1} µs, {:.0} allocations",
        nodes_of(json as f64),
        mib(held as f64),
        nodes_of(held as f64),
        nodes_of(decode.as_secs_f64() * 1e6),
        nodes_of(allocations as f64),
    );
    let before_snapshot = LIVE_BYTES.load(Ordering::Relaxed);
    let mut snapshot = snapshot(nodes, budget_percent, in_progress, now);
    let snapshot_bytes = LIVE_BYTES.load(Ordering::Relaxed) - before_snapshot;
    // The first plan writes the status a previous pass would have left; plans after it are
    // the steady state a reconcile of this cluster sees.
    let (first, planned) = measure(&snapshot, &config, now);
    let status = planned.statuses.get(SKYHOOK).cloned();
    println!(
        "first plan: {:.1} ms, {} allocations, {} bytes, {:.1} MiB live at most; {} node patches, {} pods",
        first.time.as_secs_f64() * 1e3,
        first.allocations,
        first.bytes,
        mib(first.peak as f64),
        planned.nodes.len(),
        planned.create_pods.len()
    );
    if let Some(status) = &status {
        println!(
            "status written: {} bytes with managedFields (per-node maps kept: {})",
            applied_bytes(status),
            !status.node_status.is_empty()
        );
    }
    std::sync::Arc::make_mut(&mut snapshot.skyhooks[0].object).status = status;
    apply_node_patches(&mut snapshot, &planned);
    if running_pods {
        // The batch picked after the first status is written starts in the next plan; plan
        // until nothing more starts, keeping every pod started.
        let mut started = planned.create_pods;
        while !started.is_empty() {
            snapshot.pods.extend(
                started
                    .into_iter()
                    .filter_map(|planned| planned.pod().ok())
                    .filter_map(|pod| OwnedPod::new(Arc::new(pod.into()), PodOutcome::Running)),
            );
            let (_, planned) = measure(&snapshot, &config, now);
            if let Some(status) = planned.statuses.get(SKYHOOK) {
                std::sync::Arc::make_mut(&mut snapshot.skyhooks[0].object).status =
                    Some(status.clone());
            }
            apply_node_patches(&mut snapshot, &planned);
            started = planned.create_pods;
        }
        // What the cache holds of them: a deep copy allocates what the pods do.
        let before = LIVE_BYTES.load(Ordering::Relaxed);
        let copies: Vec<_> = snapshot
            .pods
            .iter()
            .map(|owned| (*owned.pod).clone())
            .collect();
        let held = LIVE_BYTES.load(Ordering::Relaxed) - before;
        println!(
            "{} running pods, as the cache holds them: {:.2} MiB ({} bytes per pod)",
            copies.len(),
            mib(held as f64),
            held / i64::try_from(copies.len().max(1)).unwrap_or(1)
        );
    }
    let mut measured: Vec<Run> = (1..=runs)
        .map(|run| {
            let (measured, planned) = measure(&snapshot, &config, now);
            println!(
                "run {run}: {:.1} ms, {} allocations, {} bytes; {} node patches, {} pods",
                measured.time.as_secs_f64() * 1e3,
                measured.allocations,
                measured.bytes,
                planned.nodes.len(),
                planned.create_pods.len()
            );
            measured
        })
        .collect();
    measured.sort_by_key(|r| r.time);
    let median = &measured[measured.len() / 2];
    println!(
        "{nodes} nodes, {budget_percent}% budget, {} running pods, median of {runs}: plan {:.1} ms, {} allocations, {:.1} MiB allocated, {:.1} MiB live at most, the plan holds {:.1} MiB; the snapshot as built holds {:.1} MiB",
        snapshot.pods.len(),
        median.time.as_secs_f64() * 1e3,
        median.allocations,
        mib(median.bytes as f64),
        mib(median.peak as f64),
        mib(median.held as f64),
        mib(snapshot_bytes as f64)
    );
    Ok(())
}
