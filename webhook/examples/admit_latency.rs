//! How long one admission review takes, body bytes to response bytes, for a typical Skyhook
//! (the Quick Start demo) and for a Skyhook with many violations. Run with
//! `cargo run --release -p webhook --example admit_latency`.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use webhook::endpoint::Endpoint;
use webhook::lookups::ExistingObjects;
use webhook::review::review;

const ROUNDS: usize = 20_000;

fn main() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let lookups = ExistingObjects::default();
    for (name, file) in [
        ("demo (allowed)", "allow/demo-create.json"),
        ("many violations (denied)", "deny/many-violations.json"),
    ] {
        let body = std::fs::read(fixtures.join(file)).unwrap();
        let mut samples: Vec<Duration> = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let started = Instant::now();
            let answer = review(Endpoint::ValidateSkyhook, &body, &lookups).to_json();
            samples.push(started.elapsed());
            std::hint::black_box(answer);
        }
        samples.sort();
        let mean = samples.iter().sum::<Duration>() / ROUNDS as u32;
        let at = |q: f64| samples[((ROUNDS as f64 - 1.0) * q) as usize];
        println!(
            "{name}: mean {mean:?}, p50 {:?}, p99 {:?} over {ROUNDS} reviews of {} bytes",
            at(0.5),
            at(0.99),
            body.len()
        );
    }
}
