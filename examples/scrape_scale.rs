//! Scrape cost at the shape of `bench/scale.py` (issue 17): N targets, N profiles and two SLOs
//! per target (availability and latency), built through the real config path (`config::from_str`,
//! `Budget::configure`, `Budget::tick`) and fed a run's worth of requests, then
//! the streamed `/metrics` encoding timed in the text formats and in protobuf with and without
//! classic buckets beside the native ones.
//!
//!     cargo run --release --example scrape_scale -- [PROFILES] [ROUNDS] [--dump DIR]
//!
//! `--dump DIR` writes both expositions (fixed process figures, no task count) to `DIR`, so the
//! output of two builds can be compared byte for byte; only the lines that read the clock differ
//! between runs (`sloburn_last_run_timestamp_seconds`,
//! `sloburn_config_last_reload_success_timestamp_seconds`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sloburn::budget::Budget;
use sloburn::config::NativeOptions;
use sloburn::config::{self, Env};
use sloburn::http::Outcome;
use sloburn::metrics::{Format, Metrics, ProcessStats};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[path = "support/outcome.rs"]
mod support;
use support::outcome;

/// The YAML `bench/scale.py` writes, with the same names, so the series and their labels match.
fn scale_config(n: usize, data: &Path) -> String {
    let mut out = format!(
        "server: {{ listen: \"127.0.0.1:9\" }}\nstorage: {{ path: \"{}\", flush_interval: 10s }}\ntargets:\n",
        data.display()
    );
    for i in 0..n {
        out += &format!(
            "  t{i:04}:\n    url: http://127.0.0.1:9/p{i}\n    timeout: 2s\n    checks:\n      - status: 200\n"
        );
    }
    out += "profiles:\n";
    for i in 0..n {
        out += &format!(
            "  p{i:04}:\n    target: t{i:04}\n    schedule: \"* * * * *\"\n    run_on_start: true\n    overlap: skip\n    executor: constant-arrival-rate\n    rate: 1/s\n    duration: 5s\n    max_vus: 4\n"
        );
    }
    out += "slos:\n";
    for i in 0..n {
        out += &format!(
            "  t{i:04}-availability: {{ target: t{i:04}, sli: availability, objective: 99 }}\n  t{i:04}-latency: {{ target: t{i:04}, sli: {{ latency: {{ under: 100ms }} }}, objective: 95 }}\n"
        );
    }
    out
}

fn median(mut ms: Vec<f64>) -> (f64, f64, f64) {
    ms.sort_by(f64::total_cmp);
    (ms[0], ms[ms.len() / 2], ms[ms.len() - 1])
}

/// This thread's CPU time in ms: on a machine shared with other work, wall time measures the
/// neighbours as much as the encoder.
fn thread_cpu_ms() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec for the call's duration.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dump: Option<PathBuf> = args
        .iter()
        .position(|a| a == "--dump")
        .map(|i| PathBuf::from(args.remove(i + 1)))
        .inspect(|_| {
            args.retain(|a| a != "--dump");
        });
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);

    let data = tempfile::tempdir().expect("a temporary directory");
    let text = scale_config(n, data.path());
    let env = Env::from_map(BTreeMap::new(), 1);
    let cfg = config::from_str(&text, "scale.yaml", data.path(), &env)
        .expect("the scale config is valid")
        .config;

    let metrics = Metrics::new(env!("CARGO_PKG_VERSION"));
    let budget = Budget::open(data.path(), metrics.clone());
    // A fixed clock: the SLO gauges (and so the dump) do not depend on when this runs.
    let t0: i64 = 1_700_000_000;
    budget.configure(&cfg, t0);
    metrics.reload(true);

    let outcomes: Vec<Outcome> = (0..200).map(outcome).collect();
    for (k, p) in cfg.profiles.values().enumerate() {
        let target = &cfg.targets[&p.target];
        let checks: Vec<String> = target.checks.iter().map(|c| c.name.clone()).collect();
        metrics.init_profile(&p.name);
        let pm = metrics.profile(&target.name, &p.name, &target.buckets, &checks);
        let watchers = budget.watchers(&target.name, &p.name);
        // One five-second run at 1/s, as the bench's profiles do, offset per profile so the
        // counts differ from one series to the next.
        for i in 0..5 {
            let o = &outcomes[(k * 5 + i) % outcomes.len()];
            let results = [o.status == Some(200)];
            pm.observe(o, Duration::from_micros(300), &results);
            for w in &watchers {
                w.observe(o, None, &target.checks, &results);
            }
        }
        pm.set_vus(0);
        pm.set_vus_max(4);
        metrics.run_started(&p.name);
        metrics.run_finished(&p.name, "passed");
        metrics.set_next_run(&p.name, Some((t0 + 60) as f64));
    }
    budget.tick(t0 + 1);

    let process = ProcessStats {
        cpu_seconds: Some(12.5),
        open_fds: Some(40.0),
        max_fds: Some(1_048_576.0),
        resident_memory_bytes: Some(104_857_600.0),
        virtual_memory_bytes: Some(1_073_741_824.0),
        start_time_seconds: Some(t0 as f64),
    };
    if let Some(dir) = &dump {
        std::fs::create_dir_all(dir).expect("the dump directory");
        for (file, om) in [("classic.txt", false), ("openmetrics.txt", true)] {
            std::fs::write(dir.join(file), metrics.encode_with(om, &process))
                .expect("the dump written");
        }
    }

    println!(
        "{n} profiles, {} SLOs, {rounds} scrapes per format",
        cfg.slos.len()
    );
    // Streamed, as `/metrics` sends them: chunks of about 256 KiB handed to a sink that drops
    // them after counting their bytes.
    let formats = [
        ("classic text 0.0.4", Format::Text, true),
        ("OpenMetrics 1.0", Format::OpenMetrics, true),
        ("protobuf, native + classic buckets", Format::Protobuf, true),
        ("protobuf, native buckets only", Format::Protobuf, false),
    ];
    // `SCRAPE_ONLY=native` times only the formats whose label holds it (for a profiler).
    let only = std::env::var("SCRAPE_ONLY").unwrap_or_default();
    for (label, format, classic_buckets) in formats {
        if !label.contains(only.as_str()) {
            continue;
        }
        metrics.set_native_options(NativeOptions {
            schema: NativeOptions::DEFAULT_SCHEMA,
            classic_buckets,
        });
        let encode = || {
            let bytes = Arc::new(AtomicUsize::new(0));
            let counted = bytes.clone();
            metrics.encode_format_streamed(
                format,
                Box::new(move |chunk| {
                    counted.fetch_add(chunk.len(), Relaxed);
                    true
                }),
            );
            bytes.load(Relaxed)
        };
        let bytes = encode();
        let (wall, cpu): (Vec<f64>, Vec<f64>) = (0..rounds)
            .map(|_| {
                let (start, cpu) = (sloburn::clock::instant(), thread_cpu_ms());
                std::hint::black_box(encode());
                (
                    sloburn::clock::elapsed(start).as_secs_f64() * 1e3,
                    thread_cpu_ms() - cpu,
                )
            })
            .unzip();
        let (min, med, max) = median(wall);
        let (cpu_min, cpu_med, _) = median(cpu);
        println!(
            "encode {label}: {bytes} bytes: wall min {min:.2} ms, median {med:.2} ms, max {max:.2} ms; CPU min {cpu_min:.2} ms, median {cpu_med:.2} ms"
        );
    }
    budget.close();
}
