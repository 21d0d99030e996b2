//! Scrape cost of a large config: 20 targets × 20 profiles (400 series sets with the default 13
//! buckets and 3 checks) plus 20 SLOs, timed through `Metrics::encode` in both text formats and `Metrics::encode_protobuf`, and the
//! cost of one `observe` on the hot path. Run with `cargo run --release --example scrape_cost`.

use std::time::Duration;

use sloburn::config::DEFAULT_BUCKETS;
use sloburn::http::Outcome;
use sloburn::load::event::Observer;
use sloburn::load::stats::RunStats;
use sloburn::metrics::Metrics;

/// Counts the bytes held on the heap, so the example can print the memory a profile's series
/// take (their histograms allocate where values fall).
struct Counting;

static HELD: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only a counter is added.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        HELD.fetch_sub(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn held() -> isize {
    HELD.load(std::sync::atomic::Ordering::Relaxed)
}

#[path = "support/outcome.rs"]
mod support;
use support::outcome;

fn n_daemon() -> u64 {
    2_000_000
}

/// A daemon run's figures over the profile's series (`daemon::runs::execute`).
fn daemon_run_stats(pm: &std::sync::Arc<sloburn::metrics::ProfileMetrics>) -> RunStats {
    RunStats::for_run(&[], &[], "p", "GET").on_series(pm.clone())
}

fn stats(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    format!(
        "min {:.2} ms, median {:.2} ms, mean {:.2} ms, max {:.2} ms",
        ms[0],
        ms[ms.len() / 2],
        mean,
        ms[ms.len() - 1]
    )
}

fn main() {
    let m = Metrics::new(env!("CARGO_PKG_VERSION"));
    let checks: Vec<String> = ["status", "body", "latency"].map(String::from).to_vec();
    let outcomes: Vec<Outcome> = (0..1000).map(outcome).collect();
    let mut handles = Vec::new();
    let before = held();
    for t in 0..20 {
        for p in 0..20 {
            let target = format!("target-{t:02}");
            let profile = format!("profile-{p:02}");
            m.init_profile(&profile);
            m.set_threshold(&profile, "http_req_duration", "p(95)<300ms", true);
            handles.push(m.profile(&target, &profile, DEFAULT_BUCKETS, &checks));
        }
    }
    for h in &handles {
        for (i, o) in outcomes.iter().enumerate() {
            h.observe(o, Duration::ZERO, &[o.status == Some(200), true, i % 3 > 0]);
        }
        h.set_vus(10);
        h.set_vus_max(20);
    }
    // A profile's series: the request table, checks, and ten histograms (duration, corrected,
    // seven phases, lateness), each with the 13 default buckets, after 1,000 requests.
    println!(
        "memory: {} bytes per profile's series after 1,000 requests (400 profiles)",
        (held() - before) / handles.len() as isize
    );
    // The same on kept-alive connections to a steady target: 8-12 ms waiting, no DNS or
    // connect, 50-150 µs receiving.
    let steady = Metrics::new(env!("CARGO_PKG_VERSION"));
    let before = held();
    let kept: Vec<_> = (0..400)
        .map(|p| steady.profile("t", &format!("p{p:03}"), DEFAULT_BUCKETS, &checks))
        .collect();
    for h in &kept {
        for i in 0..1000u64 {
            let mut o = outcome(i);
            o.phases.dns = Duration::ZERO;
            o.phases.connecting = Duration::ZERO;
            o.phases.waiting = Duration::from_micros(8_000 + (i * 7919) % 4_000);
            o.phases.receiving = Duration::from_micros(50 + i % 100);
            h.observe(&o, Duration::ZERO, &[true, true, true]);
        }
    }
    println!(
        "memory: {} bytes per profile's series of a steady target (8-12 ms) after 1,000 requests",
        (held() - before) / kept.len() as isize
    );
    drop(kept);
    // A daemon run: the profile's series and the run's own figures, as `daemon::runs` wires
    // them (the series record each request; the run's stats read them, issue 42).
    let runs = Metrics::new(env!("CARGO_PKG_VERSION"));
    let before = held();
    let daemon: Vec<_> = (0..400)
        .map(|p| {
            let pm = runs.profile("t", &format!("p{p:03}"), DEFAULT_BUCKETS, &checks);
            let stats = daemon_run_stats(&pm);
            (pm, stats)
        })
        .collect();
    for (pm, stats) in &daemon {
        for (i, o) in outcomes.iter().enumerate() {
            let results = [o.status == Some(200), true, i % 3 > 0];
            stats.request_finished(0, o, Duration::ZERO, &results);
            pm.observe(o, Duration::ZERO, &results);
        }
    }
    println!(
        "memory: {} bytes per daemon profile (its series and its run's figures) after 1,000 requests",
        (held() - before) / daemon.len() as isize
    );
    for s in 0..20 {
        let events = std::sync::Arc::new(sloburn::budget::SloEvents::default());
        m.slo(&format!("slo-{s:02}"), 0.999)
            .read_from(events.clone());
        events.event(true);
    }

    for (label, om) in [("classic text 0.0.4", false), ("OpenMetrics 1.0", true)] {
        let bytes = m.encode(om).len();
        let lines = m.encode(om).lines().count();
        let times: Vec<f64> = (0..50)
            .map(|_| {
                let start = sloburn::clock::instant();
                std::hint::black_box(m.encode(om));
                sloburn::clock::elapsed(start).as_secs_f64() * 1e3
            })
            .collect();
        println!(
            "encode {label}: {bytes} bytes, {lines} lines; 50 scrapes: {}",
            stats(times)
        );
    }

    {
        let bytes = m.encode_protobuf().len();
        let times: Vec<f64> = (0..50)
            .map(|_| {
                let start = sloburn::clock::instant();
                std::hint::black_box(m.encode_protobuf());
                sloburn::clock::elapsed(start).as_secs_f64() * 1e3
            })
            .collect();
        println!(
            "encode protobuf (native schema 3 + classic): {bytes} bytes; 50 scrapes: {}",
            stats(times)
        );
    }

    // A daemon request: the run's figures and the profile's series.
    let (pm, stats) = &daemon[0];
    let start = sloburn::clock::instant();
    for i in 0..n_daemon() {
        let o = &outcomes[(i % 1000) as usize];
        stats.request_finished(0, o, Duration::ZERO, &[true, false, true]);
        pm.observe(o, Duration::ZERO, &[true, false, true]);
    }
    let elapsed = sloburn::clock::elapsed(start).as_secs_f64();
    println!(
        "a daemon request (the run's figures and the series), 1 thread: {:.0} ns each",
        elapsed * 1e9 / n_daemon() as f64
    );

    // The hot path: one observe (13-bucket duration, 7 phases, lateness, status table, 3 checks).
    let h = &handles[0];
    let n = 2_000_000u64;
    for threads in [1u64, 2] {
        let start = sloburn::clock::instant();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for i in 0..n {
                        let o = &outcomes[(i % 1000) as usize];
                        h.observe(o, Duration::ZERO, &[true, false, true]);
                    }
                });
            }
        });
        let elapsed = sloburn::clock::elapsed(start).as_secs_f64();
        println!(
            "observe, {threads} thread(s) on one profile: {:.0} ns each, {:.1} M/s in total",
            elapsed * 1e9 / n as f64,
            (threads * n) as f64 / elapsed / 1e6
        );
    }
}
