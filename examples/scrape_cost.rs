//! Scrape cost of a large config: 20 targets × 20 profiles (400 series sets with the default 13
//! buckets and 3 checks) plus 20 SLOs, timed through `Metrics::encode` in both text formats and `Metrics::encode_protobuf`, and the
//! cost of one `observe` on the hot path. Run with `cargo run --release --example scrape_cost`.

use std::time::Duration;

use sloburn::config::DEFAULT_BUCKETS;
use sloburn::http::Outcome;
use sloburn::metrics::Metrics;

#[path = "support/outcome.rs"]
mod support;
use support::outcome;

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
    for s in 0..20 {
        let slo = m.slo(&format!("slo-{s:02}"), 0.999);
        slo.event(true);
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
