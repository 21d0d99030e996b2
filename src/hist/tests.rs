//! The histogram's contract, read by the summary, `/metrics`, remote write, OTLP and the
//! shard merge.

use std::sync::Arc;
use std::time::Duration;

use super::*;

/// splitmix64: a seeded generator so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// k6's TrendSink.P on exact sorted values.
fn exact_quantile(sorted: &[u64], q: f64) -> f64 {
    let i = q * (sorted.len() - 1) as f64;
    let j = sorted[i.floor() as usize] as f64;
    let k = sorted[i.ceil() as usize] as f64;
    j + (k - j) * (i - i.floor())
}

/// Log-uniform from 1 µs to 100 s: exercises every power of two a run sees.
fn latencies(seed: u64, n: usize) -> Vec<u64> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| (1e3 * 1e8f64.powf(rng.unit())) as u64)
        .collect()
}

fn recorded(values: &[u64]) -> Histogram {
    let h = Histogram::new();
    for &v in values {
        h.record(Duration::from_nanos(v));
    }
    h
}

#[test]
fn quantiles_are_within_a_quarter_percent_of_exact_on_random_data() {
    let mut worst = 0f64;
    for seed in [1, 2, 3, 42] {
        let values = latencies(seed, 20_001);
        let snap = recorded(&values).snapshot();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for q in [0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            let exact = exact_quantile(&sorted, q);
            let got = snap.quantile(q).as_nanos() as f64;
            let error = (got - exact).abs() / exact;
            worst = worst.max(error);
            assert!(
                error <= 0.0027,
                "seed {seed} q {q}: got {got}, exact {exact}"
            );
        }
        assert_eq!(snap.quantile(0.5), snap.median());
    }
    // The HDR layout this replaced was within 0.39 %.
    assert!(worst > 0.0, "{worst}");
}

#[test]
fn min_max_sum_and_mean_are_exact() {
    let values = latencies(7, 5_000);
    let snap = recorded(&values).snapshot();
    let sum: u64 = values.iter().sum();
    assert_eq!(snap.count(), 5_000);
    assert_eq!(snap.min().as_nanos() as u64, *values.iter().min().unwrap());
    assert_eq!(snap.max().as_nanos() as u64, *values.iter().max().unwrap());
    assert_eq!(snap.sum(), Duration::from_nanos(sum));
    assert_eq!(snap.mean(), Duration::from_nanos(sum / 5_000));
    assert_eq!(snap.quantile(0.0), snap.min());
    assert_eq!(snap.quantile(1.0), snap.max());
}

#[test]
fn empty_histogram_reports_zeroes() {
    let snap = Histogram::new().snapshot();
    assert_eq!(snap.count(), 0);
    assert_eq!(snap.min(), Duration::ZERO);
    assert_eq!(snap.max(), Duration::ZERO);
    assert_eq!(snap.mean(), Duration::ZERO);
    assert_eq!(snap.quantile(0.95), Duration::ZERO);
    assert_eq!(snap.buckets_le(&[0.1, 1.0]), vec![0, 0]);
    assert_eq!(
        snap.native(3),
        NativeRead {
            schema: 3,
            ..NativeRead::default()
        }
    );
}

#[test]
fn k6_interpolation_between_ranks() {
    let snap = recorded(&[100, 200]).snapshot();
    assert_eq!(snap.quantile(0.25), Duration::from_nanos(125));
    assert_eq!(snap.quantile(f64::NAN), Duration::from_nanos(100));
    assert_eq!(snap.quantile(7.0), Duration::from_nanos(200));
    // Below 185 ns every whole nanosecond has a bucket of its own: exact.
    let snap = recorded(&[3, 7, 7, 50, 120, 121, 184]).snapshot();
    assert_eq!(snap.quantile(0.5), Duration::from_nanos(50));
    assert_eq!(snap.quantile(1.0 / 6.0), Duration::from_nanos(7));
    assert_eq!(snap.quantile(5.0 / 6.0), Duration::from_nanos(121));
}

#[test]
fn huge_values_land_in_the_top_bucket_without_corrupting_bounds() {
    let h = recorded(&[500_000_000_000_000, 1_000_000_000]);
    let snap = h.snapshot();
    assert_eq!(snap.max(), Duration::from_secs(500_000));
    assert_eq!(snap.quantile(1.0), Duration::from_secs(500_000));
    assert_eq!(
        snap.buckets_le(&[200.0, 500_000.0, f64::INFINITY]),
        vec![1, 2, 2]
    );
    assert_eq!(snap.native(0).buckets, vec![(0, 1), (12, 1)]);
    assert!(snap.check().is_ok());
}

#[test]
fn concurrent_recording_sums_exactly() {
    let h = Histogram::with_bounds(Arc::new(Bounds::new(&[0.001, 0.002])));
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let h = &h;
            s.spawn(move || {
                for i in 0..25_000u64 {
                    h.record(Duration::from_micros(1 + (i * 7 + t) % 5_000));
                }
            });
        }
    });
    let snap = h.snapshot();
    assert_eq!(snap.count(), 100_000);
    assert_eq!(h.count(), 100_000);
    let expected: u64 = (0..4u64)
        .flat_map(|t| (0..25_000u64).map(move |i| 1_000 * (1 + (i * 7 + t) % 5_000)))
        .sum();
    assert_eq!(snap.sum(), Duration::from_nanos(expected));
    assert_eq!(snap.min(), Duration::from_micros(1));
    assert_eq!(snap.max(), Duration::from_micros(5_000));
    assert_eq!(snap.buckets_le(&[0.001, 0.002]), vec![20_000, 40_000]);
    assert!(snap.check().is_ok());
}

/// Classic counts are exact at every configured bound, inclusive, whatever the exponential
/// buckets: exactly 300 ms is in `le="0.3"`, 1 ns more is not.
#[test]
fn classic_counts_are_exact_at_the_configured_bounds() {
    let bounds = Arc::new(Bounds::new(&[0.005, 0.01, 0.025, 0.1, 0.25, 0.3, 1.0, 2.5]));
    let h = Histogram::with_bounds(Arc::clone(&bounds));
    let mut values = latencies(11, 30_000);
    values.extend([
        300_000_000,
        300_000_001,
        299_999_999,
        5_000_000,
        0,
        2_500_000_000,
    ]);
    for &v in &values {
        h.record(Duration::from_nanos(v));
    }
    let snap = h.snapshot();
    let got = snap.buckets_le(&bounds.seconds);
    let mut cumulative = Vec::new();
    h.classic_into(&mut cumulative);
    for ((b, got), live) in bounds.seconds.iter().zip(&got).zip(&cumulative) {
        let exact = values.iter().filter(|&&v| v <= bound_nanos(*b)).count() as u64;
        assert_eq!((*got, *live), (exact, exact), "le {b}");
    }
    assert_eq!(cumulative.last(), Some(&snap.count()));
    // At 0.3 s exactly: the value 300 ms is in, 300 ms + 1 ns is not.
    let one = |v: u64| {
        let h = Histogram::with_bounds(Arc::clone(&bounds));
        h.record(Duration::from_nanos(v));
        h.snapshot().buckets_le(&[0.25, 0.3])
    };
    assert_eq!(one(300_000_000), vec![0, 1]);
    assert_eq!(one(300_000_001), vec![0, 0]);
    assert_eq!(snap.buckets_le(&[-1.0, f64::NAN]), vec![0, 0]);
}

/// A bound the histogram was not made with is read from the exponential buckets: never too
/// high, short only by values within a bucket (0.54 %) below it.
#[test]
fn other_bounds_never_overcount() {
    let values = latencies(12, 30_000);
    let snap = recorded(&values).snapshot();
    let bounds = [
        0.000_5, 0.005, 0.01, 0.025, 0.1, 0.25, 0.3, 1.0, 2.5, 10.0, 1e9,
    ];
    for (b, got) in bounds.iter().zip(snap.buckets_le(&bounds)) {
        let ns = b * 1e9;
        let exact = values.iter().filter(|&&v| v as f64 <= ns).count() as u64;
        let lower = values
            .iter()
            .filter(|&&v| (v as f64) <= ns * (1.0 - 0.0055))
            .count() as u64;
        assert!(
            got <= exact && got >= lower,
            "le {b}: {got} not in [{lower}, {exact}]"
        );
    }
}

/// The native key of `seconds` at `schema` by the definition: the first `k` with
/// `seconds ≤ 2^(k·2^-schema)`, the bounds taken as Prometheus does (its table for
/// schemas above 0, powers of two below).
fn direct_key(seconds: f64, schema: i32) -> i64 {
    let bound = |k: i64| {
        if schema > 0 {
            let per = 1i64 << schema;
            let (q, r) = (k.div_euclid(per), k.rem_euclid(per));
            // Every coarser table is a strided subset of the schema-7 one.
            let fine = r << (RECORD_SCHEMA - schema);
            crate_bound(fine as usize) * 2f64.powi(q as i32 + 1)
        } else {
            2f64.powi((k << -schema) as i32)
        }
    };
    let per_octave = 2f64.powi(schema);
    let mut k = (seconds.log2() * per_octave).floor() as i64 - 2;
    while seconds > bound(k) {
        k += 1;
    }
    k
}

/// Prometheus' schema-7 bound `j` (`2^(j/128 - 1)`), read back through a recording: the
/// largest fraction counted in bucket `j` of the power of two [0.5, 1).
fn crate_bound(j: usize) -> f64 {
    // 2^(j/128 - 1) to within an ulp; the comparison in `direct_key` decides only values
    // that close to it, which the random values below never are.
    (j as f64 / 128.0 - 1.0).exp2()
}

#[test]
fn native_buckets_at_every_schema_equal_recording_at_that_schema() {
    let mut values = latencies(21, 20_000);
    values.extend([
        0,
        0,
        1,
        2,
        999,
        1_000_000,
        250_000_000,
        500_000_000,
        1_000_000_000,
    ]);
    let h = recorded(&values);
    let snap = h.snapshot();
    let mut live = NativeRead::default();
    for schema in MIN_SCHEMA..=RECORD_SCHEMA {
        let mut direct: Vec<(i64, u64)> = Vec::new();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for &v in sorted.iter().filter(|v| **v > 0) {
            let key = direct_key(v as f64 / 1e9, schema);
            match direct.last_mut() {
                Some((k, n)) if *k == key => *n += 1,
                _ => direct.push((key, 1)),
            }
        }
        let read = snap.native(schema);
        assert_eq!(read.schema, schema);
        assert_eq!(read.zero, 2, "schema {schema}");
        assert_eq!(read.buckets, direct, "schema {schema}");
        assert_eq!(read.total(), values.len() as u64);
        h.native_into(schema, &mut live);
        assert_eq!(live, read, "the live read at schema {schema}");
    }
    // Out of range asks are clamped.
    assert_eq!(snap.native(9).schema, RECORD_SCHEMA);
    assert_eq!(snap.native(-9).schema, MIN_SCHEMA);
}

#[test]
fn otlp_view_is_the_native_buckets_shifted_by_one() {
    let h = recorded(&[0, 1_000_000, 1_000_000, 3_000_000, 250_000_000]);
    let snap = h.snapshot();
    let view = snap.otlp(3);
    let native = snap.native(3);
    assert_eq!((view.scale, view.zero_count), (3, 1));
    // 1 ms: 2^-9.97 s, key ceil(-9.97·8) = -79, OTLP index -80.
    assert_eq!(native.buckets.first(), Some(&(-79, 2)));
    assert_eq!(view.offset, -80);
    assert_eq!(view.counts.iter().sum::<u64>(), 4);
    assert_eq!(view.counts.first(), Some(&2));
    assert_eq!(
        view.counts.len() as i64,
        native.buckets.last().unwrap().0 - (-79) + 1
    );
    for &(key, n) in &native.buckets {
        assert_eq!(view.counts[(key - 1 - i64::from(view.offset)) as usize], n);
    }
}

#[test]
fn merge_equals_recording_everything_in_one() {
    let bounds = Arc::new(Bounds::new(&[0.001, 0.01, 0.1]));
    let made = || Histogram::with_bounds(Arc::clone(&bounds));
    let (a, b, all) = (made(), made(), made());
    for (i, v) in latencies(9, 4_000).into_iter().enumerate() {
        let d = Duration::from_nanos(v);
        if i % 3 == 0 { &a } else { &b }.record(d);
        all.record(d);
    }
    let mut merged = a.snapshot();
    merged.merge(&b.snapshot());
    assert_eq!(merged, all.snapshot());
    assert_eq!(
        HistSnapshot::merged([&a.snapshot(), &b.snapshot()].into_iter()),
        merged
    );
    let mut empty = HistSnapshot::default();
    empty.merge(&merged);
    assert_eq!(empty, merged);
    // `since` undoes a merge, classic counts included; the extremes become bucket bounds.
    let later = merged.since(&a.snapshot());
    assert_eq!(later.count(), b.snapshot().count());
    assert_eq!(later.sum(), b.snapshot().sum());
    assert_eq!(
        later.buckets_le(&bounds.seconds),
        b.snapshot().buckets_le(&bounds.seconds)
    );
    assert_eq!(later.native(2), b.snapshot().native(2));
    assert!(later.min() <= b.snapshot().min() && later.max() >= b.snapshot().max());
    assert!(later.check().is_ok());
    // Histograms of other bounds merge their buckets and drop the classic counts.
    let other = Histogram::with_bounds(Arc::new(Bounds::new(&[0.5])));
    other.record(Duration::from_millis(3));
    let mut mixed = a.snapshot();
    mixed.merge(&other.snapshot());
    assert_eq!(mixed.count(), a.snapshot().count() + 1);
    assert!(mixed.check().is_ok());
}

#[test]
fn serde_round_trip_and_check_refuses_what_no_histogram_makes() {
    let h = Histogram::with_bounds(Arc::new(Bounds::new(&[0.01, 0.3])));
    for v in latencies(5, 500) {
        h.record(Duration::from_nanos(v));
    }
    h.record(Duration::ZERO);
    let snap = h.snapshot();
    let wire = serde_json::to_string(&snap).unwrap();
    let back: HistSnapshot = serde_json::from_str(&wire).unwrap();
    assert_eq!(back, snap);
    assert!(back.check().is_ok());
    // Without bounds the classic field is left out; an older share without it reads.
    let plain = recorded(&[5, 1_000]).snapshot();
    let wire = serde_json::to_value(&plain).unwrap();
    assert!(wire.get("classic").is_none(), "{wire}");
    let back: HistSnapshot = serde_json::from_value(wire).unwrap();
    assert_eq!(back, plain);
    let broken = |v: serde_json::Value| serde_json::from_value::<HistSnapshot>(v).unwrap().check();
    let bad = [
        serde_json::json!({"buckets": [[5, 1]], "count": 7, "sum_ns": 5, "min_ns": 5, "max_ns": 5}),
        serde_json::json!({"buckets": [[9_999_999, 1]], "count": 1, "sum_ns": 5, "min_ns": 5, "max_ns": 5}),
        serde_json::json!({"buckets": [[900, 1], [800, 1]], "count": 2, "sum_ns": 5, "min_ns": 5, "max_ns": 5}),
        serde_json::json!({"buckets": [[0, 1]], "count": 1, "sum_ns": 5, "min_ns": 5, "max_ns": 5}),
        serde_json::json!({"buckets": [[0, 1]], "count": 1, "sum_ns": 0, "min_ns": 0, "max_ns": 0,
            "classic": {"bounds_ns": [10], "counts": [0, 2]}}),
    ];
    for v in bad {
        assert!(broken(v.clone()).is_err(), "{v}");
    }
}

/// Memory follows the spread of the values, not the layout: nothing before the first value,
/// nothing for 0 ns values, a few hundred bytes for a cluster, 27 KB at most (blocks of 16
/// 32-bit counters and a pointer to their carries: 72 bytes, where 16 `u64` were 128).
#[test]
fn memory_follows_the_spread_of_the_values_and_is_bounded() {
    let h = Histogram::new();
    assert_eq!(h.allocated_bytes(), 0);
    h.record(Duration::ZERO);
    assert_eq!(h.allocated_bytes(), 0);
    // A cluster: the table of powers of two, one power's table of blocks, one block.
    for ns in 600_000..600_100 {
        h.record(Duration::from_nanos(ns));
    }
    assert_eq!(h.allocated_bytes(), 42 * 8 + 8 * 8 + (16 * 4 + 8));
    let bounded = Histogram::with_bounds(Arc::new(Bounds::new(&[0.1, 0.2])));
    assert_eq!(bounded.allocated_bytes(), 3 * 8);
    // Every bucket: the bound.
    let full = Histogram::new();
    for slot_nanos in (0..44).map(|e| 1u64 << e) {
        for step in 0..256u64 {
            full.record(Duration::from_nanos(slot_nanos + slot_nanos * step / 256));
        }
    }
    assert!(full.allocated_bytes() <= 42 * 8 + 42 * (8 * 8 + 8 * (16 * 4 + 8)));
    assert!(
        full.allocated_bytes() > 18 * 1024,
        "{}",
        full.allocated_bytes()
    );
    assert!(size_of::<Histogram>() <= 80, "{}", size_of::<Histogram>());
    let snap = h.snapshot();
    assert_eq!(snap.count(), 101);
    assert!(snap.buckets_held() <= 2, "{}", snap.buckets_held());
}

/// The readings the HDR layout's memory test made, on the same values.
#[test]
fn a_spread_run_reads_as_before() {
    let h = Histogram::new();
    for ns in 600_000..600_100 {
        h.record(Duration::from_nanos(ns));
    }
    // 1.0 ms to 1.9 ms: two powers of two, so at most two tables of blocks and their blocks.
    for us in 1000..1900 {
        h.record(Duration::from_micros(us));
    }
    assert!(
        h.allocated_bytes() <= 42 * 8 + 3 * (8 * 8 + 8 * 16 * 8),
        "{}",
        h.allocated_bytes()
    );
    h.record(Duration::from_secs(3600));
    h.record(Duration::from_nanos(3));
    let snap = h.snapshot();
    assert_eq!(snap.count(), 1002);
    let mut merged = HistSnapshot::default();
    merged.merge(&snap);
    merged.merge(&snap);
    assert_eq!(merged.since(&snap), snap.since(&HistSnapshot::default()));
    assert_eq!(merged.count(), 2 * 1002);
    assert_eq!(
        snap.buckets_le(&[0.000_001, 0.002, f64::INFINITY]),
        vec![1, 1001, 1002]
    );
}

/// Moved from `metrics::native`: a value's native bucket at every schema holds it.
#[test]
fn values_fall_in_the_bucket_whose_bounds_hold_them() {
    for nanos in [
        1u64,
        7,
        999,
        1_000_000,
        12_345_678,
        250_000_000,
        3_000_000_000,
    ] {
        let snap = recorded(&[nanos]).snapshot();
        let v = nanos as f64 / 1e9;
        for schema in MIN_SCHEMA..=RECORD_SCHEMA {
            let r = snap.native(schema);
            assert_eq!(r.buckets.len(), 1, "{nanos} at {schema}");
            let (k, n) = r.buckets[0];
            assert_eq!(n, 1);
            let base = 2f64.powf(2f64.powi(-schema));
            let (lo, hi) = (base.powf(k as f64 - 1.0), base.powf(k as f64));
            assert!(
                lo < v * 1.000_001 && v <= hi * 1.000_001,
                "{v} in ({lo}, {hi}]"
            );
        }
    }
}

/// Moved from `metrics::native`: every count is kept at every schema, past 4,096 s values
/// share the top bucket.
#[test]
fn merging_keeps_every_count_and_extremes_are_bounded() {
    let values = [
        0u64,
        1,
        2,
        500,
        1_000_000,
        1_000_001,
        7_000_000_000_000,
        u64::MAX,
    ];
    let h = recorded(&values);
    let mut r = NativeRead::default();
    for schema in MIN_SCHEMA..=RECORD_SCHEMA {
        h.native_into(schema, &mut r);
        assert_eq!(r.zero, 1);
        assert_eq!(r.total(), values.len() as u64, "schema {schema}");
        assert!(r.buckets.windows(2).all(|w| w[0].0 < w[1].0));
    }
    h.native_into(RECORD_SCHEMA, &mut r);
    assert_eq!(r.buckets.last().copied(), Some((12 * 128, 2)));
}

/// Moved from `metrics::native`: a counter first counted after a read, in a power of two
/// already made, is in the next read.
#[test]
fn counters_first_counted_between_reads_are_read() {
    let h = recorded(&[1_000_000]);
    let mut first = NativeRead::default();
    h.native_into(RECORD_SCHEMA, &mut first);
    assert_eq!(first.buckets.len(), 1);
    // The same power of two (1 ms to 2 ms), other buckets, and the first one again.
    for nanos in [1_500_000, 1_900_000, 1_000_000, 1_500_000] {
        h.record(Duration::from_nanos(nanos));
    }
    let mut r = NativeRead::default();
    h.native_into(RECORD_SCHEMA, &mut r);
    let counts: Vec<u64> = r.buckets.iter().map(|b| b.1).collect();
    assert_eq!(counts, [2, 2, 1]);
    assert_eq!(r.buckets[0].0, first.buckets[0].0);
}

/// A restarted histogram's interval: exact counts, sum and extremes of what came after, while
/// the cumulative figures (what a scrape reads) keep everything.
#[test]
fn an_interval_since_a_restart_has_its_own_exact_extremes() {
    let h = Histogram::with_bounds(std::sync::Arc::new(Bounds::new(&[0.01])));
    for ms in [1, 50, 400] {
        h.record(Duration::from_millis(ms));
    }
    let base = h.restart();
    assert_eq!(base.count(), 3);
    for us in [2_500, 7_300, 9_100] {
        h.record(Duration::from_micros(us));
    }
    let run = h.since(&base);
    assert_eq!(run.count(), 3);
    assert_eq!(run.min(), Duration::from_micros(2_500));
    assert_eq!(run.max(), Duration::from_micros(9_100));
    assert_eq!(run.sum(), Duration::from_micros(18_900));
    assert_eq!(run.check(), Ok(()));
    assert_eq!(
        run.buckets_le(&[0.01]),
        [3],
        "no classic counts, exact all the same"
    );
    assert_eq!(h.count(), 6);
    let mut cumulative = Vec::new();
    h.classic_into(&mut cumulative);
    assert_eq!(
        cumulative,
        [4, 6],
        "a scrape's classic counts keep every value"
    );
    assert_eq!(h.since(&h.restart()).count(), 0);
}
