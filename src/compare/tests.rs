//! The statistics on synthetic histograms from seeded draws: the false-alarm rate over many
//! same-distribution pairs, the power on shifted ones, the intervals' coverage. Deterministic:
//! fixed seeds, no clock.

use super::rows::{self, Level, Verdict};
use super::stat;
use super::*;
use crate::hist::{HistSnapshot, Histogram};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::time::Duration;

/// `n` latencies of a fixed-delay server: `hold_ms` plus an exponential jitter of mean 0.4 ms
/// (the loopback and the scheduler), with a 1-in-50 stall of up to 5 ms.
fn draw(rng: &mut SmallRng, n: usize, hold_ms: f64) -> HistSnapshot {
    let h = Histogram::new();
    for _ in 0..n {
        let u: f64 = rng.random::<f64>().max(1e-12);
        let mut ms = hold_ms + -u.ln() * 0.4;
        if rng.random::<f64>() < 0.02 {
            ms += rng.random::<f64>() * 5.0;
        }
        h.record(Duration::from_secs_f64(ms / 1000.0));
    }
    h.snapshot()
}

fn level() -> Level {
    Level {
        confidence: 0.99,
        alpha: 0.01,
        max_regression: 0.05,
    }
}

fn buckets(h: &HistSnapshot) -> Vec<stat::Bucket> {
    h.ranges()
        .map(|(lo, hi, count)| stat::Bucket {
            key: lo,
            value: (lo + hi) as f64 / 2.0,
            count,
        })
        .collect()
}

/// The rank test alone holds its level: over 1,000 pairs from one distribution, p < 0.05 in
/// about 5 % of them (binomial sd 0.7 %), and the row's verdict (rank test and practical
/// threshold) is `regressed` in at most its 1 %.
#[test]
fn the_rank_test_holds_its_false_alarm_rate_on_identical_servers() {
    let mut rng = SmallRng::seed_from_u64(48);
    let (mut below_5, mut regressed) = (0, 0);
    let pairs = 1000;
    for _ in 0..pairs {
        let (a, b) = (draw(&mut rng, 300, 20.0), draw(&mut rng, 300, 20.0));
        if stat::rank_test(&buckets(&a), &buckets(&b)).p < 0.05 {
            below_5 += 1;
        }
        let row = rows::trend("http_req_duration", None, &a, &b, &level());
        regressed += usize::from(row.verdict == Verdict::Regressed);
    }
    let rate = below_5 as f64 / pairs as f64;
    eprintln!("A/A: p<0.05 in {below_5}/{pairs}, regressed {regressed}/{pairs}");
    assert!((0.03..=0.07).contains(&rate), "p < 0.05 in {rate}");
    assert!(regressed <= 10, "{regressed} false alarms in {pairs}");
}

/// Power: 10 % slower (20 ms against 22 ms hold) is `regressed` in every one of 200 pairs of
/// 500 values a side (10 s at 100/s split in two), 10 % faster `improved`; a 2 % shift, real
/// but under --max-regression 5 %, is `unchanged`.
#[test]
fn a_ten_percent_shift_is_found_and_a_two_percent_one_is_not_worth_failing() {
    let mut rng = SmallRng::seed_from_u64(4848);
    let (mut slower, mut faster, mut small) = (0, 0, 0);
    for _ in 0..200 {
        let old = draw(&mut rng, 500, 20.0);
        let row = rows::trend(
            "http_req_duration",
            None,
            &old,
            &draw(&mut rng, 500, 22.0),
            &level(),
        );
        slower += usize::from(row.verdict == Verdict::Regressed);
        let row = rows::trend(
            "http_req_duration",
            None,
            &old,
            &draw(&mut rng, 500, 18.0),
            &level(),
        );
        faster += usize::from(row.verdict == Verdict::Improved);
        let row = rows::trend(
            "http_req_duration",
            None,
            &old,
            &draw(&mut rng, 500, 20.4),
            &level(),
        );
        small += usize::from(row.verdict != Verdict::Unchanged);
    }
    assert_eq!((slower, faster, small), (200, 200, 0));
}

/// The quantile intervals (exact bootstrap over the buckets) cover the true change of zero
/// in about `confidence` of pairs from one distribution.
#[test]
fn the_quantile_intervals_cover_no_change_at_their_confidence() {
    let mut rng = SmallRng::seed_from_u64(7);
    let l = Level {
        confidence: 0.95,
        alpha: 0.05,
        max_regression: 0.05,
    };
    let mut covered = [0usize; 4];
    let pairs = 300;
    for _ in 0..pairs {
        let row = rows::trend(
            "x",
            None,
            &draw(&mut rng, 400, 20.0),
            &draw(&mut rng, 400, 20.0),
            &l,
        );
        let rows::Figures::Trend { quantiles, .. } = row.figures else {
            panic!("a trend row");
        };
        for (i, q) in quantiles.iter().enumerate() {
            covered[i] += usize::from(q.low <= 0.0 && 0.0 <= q.high);
        }
    }
    for (i, c) in covered.iter().enumerate() {
        let share = *c as f64 / pairs as f64;
        assert!(
            share >= 0.9,
            "p{}: covered in {share}",
            rows::QUANTILES[i] * 100.0
        );
    }
}

/// A side that fails 2 % more of 1,000 requests is `regressed` on its error rate; equal rates
/// are not, in all but a few of 500 seeded pairs at 1 %.
#[test]
fn two_percent_more_failures_regress_and_equal_rates_do_not() {
    let row = rows::rate("http_req_failed", None, (0, 1000), (20, 1000), &level());
    assert_eq!(row.verdict, Verdict::Regressed, "{row:?}");
    let row = rows::rate("http_req_failed", None, (20, 1000), (0, 1000), &level());
    assert_eq!(row.verdict, Verdict::Improved);
    let mut rng = SmallRng::seed_from_u64(11);
    let mut alarms = 0;
    for _ in 0..500 {
        let fails =
            |rng: &mut SmallRng| (0..1000).filter(|_| rng.random::<f64>() < 0.01).count() as u64;
        let (a, b) = (fails(&mut rng), fails(&mut rng));
        alarms += usize::from(
            rows::rate("f", None, (a, 1000), (b, 1000), &level()).verdict != Verdict::Unchanged,
        );
    }
    assert!(alarms <= 10, "{alarms} alarms in 500");
}

/// Too few values: `unchanged`, saying why, however far apart.
#[test]
fn too_few_values_are_not_judged() {
    let mut rng = SmallRng::seed_from_u64(1);
    let row = rows::trend(
        "d",
        None,
        &draw(&mut rng, 10, 20.0),
        &draw(&mut rng, 10, 40.0),
        &level(),
    );
    assert_eq!(row.verdict, Verdict::Unchanged);
    assert!(row.note.unwrap().contains("too few"));
}

fn fixture() -> RunRecord {
    let path =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden/record-v2.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Records of other steps are refused with what differs; bad options say what to give.
#[test]
fn unlike_records_and_bad_options_are_refused_with_a_reason() {
    let a = fixture();
    let mut b = a.clone();
    b.steps[1].name = "basket".into();
    let e = compare(&a, &b, &Options::default()).unwrap_err();
    assert!(e.contains("buy/cart") && e.contains("buy/basket"), "{e}");
    let bad = |o: Options| compare(&a, &a, &o).unwrap_err();
    let e = bad(Options {
        confidence: 1.5,
        ..Options::default()
    });
    assert!(e.contains("--confidence"), "{e}");
    let e = bad(Options {
        metrics: vec!["latency".into()],
        ..Options::default()
    });
    assert!(e.contains("--metric `latency`"), "{e}");
    assert_eq!(parse_share("5%"), Ok(0.05));
    assert_eq!(parse_share("0.1"), Ok(0.1));
    assert!(parse_share("five").is_err());
}

/// A record against itself: every row `unchanged`; the rows of a journey run are per step,
/// and `--metric` keeps only its own, each tested at (1 − confidence) / rows.
#[test]
fn a_record_against_itself_is_unchanged_row_by_row() {
    let a = fixture();
    let c = compare(&a, &a, &Options::default()).unwrap();
    let names: Vec<String> = c.rows.iter().map(|r| r.name()).collect();
    assert_eq!(names.len(), 1 + 3 + 1 + 1 + 3 + 1, "{names:?}");
    assert!(names.contains(&"http_req_duration{step:buy/login}".to_string()));
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::Unchanged));
    assert!(c.regressions().is_none());
    assert!(
        c.text("a", "b").ends_with("no regression"),
        "{}",
        c.text("a", "b")
    );
    let only = Options {
        metrics: vec!["http_req_failed".into()],
        ..Options::default()
    };
    let c = compare(&a, &a, &only).unwrap();
    assert_eq!(c.rows.len(), 4);
    assert!((c.alpha_per_row - 0.01 / 4.0).abs() < 1e-12);
}
