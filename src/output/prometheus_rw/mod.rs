//! `--out prometheus-rw=URL[?interval=5s&native=true]`: the run's figures pushed to a Prometheus
//! remote write 1.0 receiver (snappy-compressed `prometheus.WriteRequest`, see `proto`) every
//! `interval` and once at the end, with the final figures of the summary (`push`).
//!
//! Series (the `/metrics` names, DESIGN.md "Metrics"), per step with the labels `profile`,
//! `target`, `step`, `journey` (journeys only) and `testid` (`--testid`):
//! `sloburn_http_reqs_total`, `sloburn_http_reqs_failed_total` and the classic histogram
//! `sloburn_http_req_duration_seconds` (the target's buckets); with `native=true` the same name
//! also carries a native histogram (schema 3, the histogram's own buckets merged exactly). Per run (`profile`, `target`, `testid`):
//! `sloburn_iterations_total`, `sloburn_dropped_iterations_total`, `sloburn_vus`,
//! `sloburn_data_sent_bytes_total`, `sloburn_data_received_bytes_total`.

mod proto;

use super::push::{Batch, Encoding, Push, PushOptions, RunLabels, Series};
use crate::load::record::RunRecord;
use crate::names;
use prost::Message;
use proto::{Histogram, Label, Sample, TimeSeries, WriteRequest};

/// The `--out` name.
pub const NAME: &str = "prometheus-rw";

/// Remote write 1.0, with or without native histograms.
pub struct RemoteWrite {
    native: bool,
}

/// The output of a `prometheus-rw=` value: `URL[?interval=DURATION&native=true|false]`.
pub fn output(value: &str) -> Result<Push<RemoteWrite>, String> {
    let mut native = false;
    let opts = PushOptions::parse(value, |key, v| match key {
        "native" => {
            native = match v {
                "true" => true,
                "false" => false,
                _ => return Err(format!("native=`{v}`: use true or false")),
            };
            Ok(())
        }
        _ => Err(format!(
            "unknown option `{key}`: use interval=DURATION or native=true|false"
        )),
    })?;
    Ok(Push::new(opts, RemoteWrite { native }))
}

impl Encoding for RemoteWrite {
    fn name(&self) -> &'static str {
        NAME
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("content-encoding", "snappy"),
            ("x-prometheus-remote-write-version", "0.1.0"),
        ]
    }

    fn encode(&self, snap: &RunRecord, run: &Series, now_ms: i64) -> Batch {
        let req = write_request(snap, &run.labels, &run.buckets, self.native, now_ms);
        let samples = req
            .timeseries
            .iter()
            .map(|t| (t.samples.len() + t.histograms.len()) as u64)
            .sum();
        // Snappy's block format, as remote write specifies; compressing cannot fail but for
        // inputs past 4 GiB, which a push is not.
        let body = snap::raw::Encoder::new()
            .compress_vec(&req.encode_to_vec())
            .unwrap_or_default();
        Batch {
            body: body.into(),
            samples,
        }
    }
}

fn labels_of(name: &str, run: &RunLabels, extra: &[(&str, &str)]) -> Vec<Label> {
    let mut labels: Vec<Label> = std::iter::once(("__name__", name))
        .chain(run.pairs(extra))
        .map(|(n, v)| Label {
            name: n.to_string(),
            value: v.to_string(),
        })
        .collect();
    labels.sort();
    labels
}

fn series(name: &str, run: &RunLabels, extra: &[(&str, &str)], value: f64, ts: i64) -> TimeSeries {
    TimeSeries {
        labels: labels_of(name, run, extra),
        samples: vec![Sample {
            value,
            timestamp: ts,
        }],
        histograms: Vec::new(),
    }
}

/// One push of `snap`'s figures at `ts` (ms since the epoch).
pub fn write_request(
    snap: &RunRecord,
    run: &RunLabels,
    buckets: &[f64],
    native: bool,
    ts: i64,
) -> WriteRequest {
    let mut out = Vec::new();
    for (name, value) in [
        (names::ITERATIONS_TOTAL, snap.iterations as f64),
        (names::DROPPED_ITERATIONS_TOTAL, snap.dropped as f64),
        (names::VUS, f64::from(snap.vus)),
        (names::DATA_SENT_TOTAL, snap.data_sent as f64),
        (names::DATA_RECEIVED_TOTAL, snap.data_received as f64),
    ] {
        out.push(series(name, run, &[], value, ts));
    }
    for step in &snap.steps {
        let at = [
            ("journey", step.journey.as_deref().unwrap_or("")),
            ("step", step.name.as_str()),
        ];
        out.push(series(
            names::HTTP_REQS_TOTAL,
            run,
            &at,
            step.requests as f64,
            ts,
        ));
        out.push(series(
            names::HTTP_REQS_FAILED_TOTAL,
            run,
            &at,
            step.failed as f64,
            ts,
        ));
        classic(&mut out, &step.duration, run, &at, buckets, ts);
        if native {
            out.push(native_series(&step.duration, run, &at, ts));
        }
    }
    WriteRequest { timeseries: out }
}

/// A step's duration as a classic histogram: `_bucket` per bound and `+Inf`, `_count`, `_sum`.
fn classic(
    out: &mut Vec<TimeSeries>,
    h: &crate::hist::HistSnapshot,
    run: &RunLabels,
    at: &[(&str, &str); 2],
    buckets: &[f64],
    ts: i64,
) {
    const DURATION: &str = names::HTTP_REQ_DURATION;
    for (le, n) in buckets.iter().zip(h.buckets_le(buckets)) {
        let le = crate::metrics::le_value(*le, false);
        let with_le = [at[0], at[1], ("le", le.as_str())];
        out.push(series(
            &format!("{DURATION}_bucket"),
            run,
            &with_le,
            n as f64,
            ts,
        ));
    }
    let inf = [at[0], at[1], ("le", "+Inf")];
    out.push(series(
        &format!("{DURATION}_bucket"),
        run,
        &inf,
        h.count() as f64,
        ts,
    ));
    out.push(series(
        &format!("{DURATION}_count"),
        run,
        at,
        h.count() as f64,
        ts,
    ));
    let sum = h.sum().as_secs_f64();
    out.push(series(&format!("{DURATION}_sum"), run, at, sum, ts));
}

/// A step's duration as a native histogram (schema 3) under the histogram's own name.
fn native_series(
    h: &crate::hist::HistSnapshot,
    run: &RunLabels,
    at: &[(&str, &str); 2],
    ts: i64,
) -> TimeSeries {
    let read = h.native(crate::config::NativeOptions::DEFAULT_SCHEMA);
    let (mut spans, mut positive_deltas) = (Vec::new(), Vec::new());
    read.spans_and_deltas_into(&mut spans, &mut positive_deltas);
    let positive_spans = spans
        .into_iter()
        .map(|(offset, length)| crate::metrics::proto::BucketSpan {
            offset: Some(offset),
            length: Some(length),
        })
        .collect();
    TimeSeries {
        labels: labels_of(names::HTTP_REQ_DURATION, run, at),
        samples: Vec::new(),
        histograms: vec![Histogram {
            count_int: Some(h.count()),
            sum: h.sum().as_secs_f64(),
            schema: crate::config::NativeOptions::DEFAULT_SCHEMA,
            zero_threshold: crate::metrics::ZERO_THRESHOLD,
            zero_count_int: Some(read.zero),
            positive_spans,
            positive_deltas,
            timestamp: ts,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stats::RunStats;
    use std::time::Duration;

    #[test]
    fn options_default_to_5s_classic_and_bad_ones_say_why() {
        let o = output("http://127.0.0.1:9090/api/v1/write").unwrap();
        assert_eq!(
            (o.options().interval, o.encoding().native),
            (super::super::push::DEFAULT_INTERVAL, false)
        );
        assert_eq!(o.options().url.path(), "/api/v1/write");
        let o = output("https://m/push?interval=2s&native=true").unwrap();
        assert_eq!(
            (
                o.options().interval,
                o.encoding().native,
                o.options().url.query()
            ),
            (Duration::from_secs(2), true, None)
        );
        for (bad, why) in [
            ("", "give an http:// or https:// URL"),
            ("/api/v1/write", "give an http:// or https:// URL"),
            ("http://m/?interval=2h", "from 100ms to 1h"),
            ("http://m/?native=1", "use true or false"),
            ("http://m/?x", "unknown option `x`"),
        ] {
            let e = output(bad).err().unwrap();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn native_buckets_hold_every_value_within_a_bucket_of_its_own() {
        let h = crate::hist::Histogram::new();
        let values_ns = [
            0u64,
            1_000,
            1_999_000,
            2_000_000,
            2_100_000,
            7_000_000,
            3_000_000_000,
        ];
        for ns in values_ns {
            h.record(Duration::from_nanos(ns));
        }
        let read = h.snapshot().native(3);
        assert_eq!(read.zero, 1);
        assert_eq!(read.total(), values_ns.len() as u64);
        // Keys ascend, and each value's count sits in a key at most one off its exact one.
        assert!(read.buckets.windows(2).all(|w| w[0].0 < w[1].0));
        for ns in values_ns.into_iter().filter(|&n| n > 0) {
            let exact = ((ns as f64 / 1e9).log2() * 8.0).ceil() as i64;
            assert!(
                read.buckets.iter().any(|(k, _)| (k - exact).abs() <= 1),
                "{ns} ns: {read:?}"
            );
        }
    }

    #[test]
    fn a_push_has_sorted_labels_the_run_labels_and_cumulative_buckets() {
        let stats = RunStats::new(&[]);
        for ms in [1u64, 3, 30] {
            stats.duration.record(Duration::from_millis(ms));
        }
        let mut snap = stats.snapshot(Duration::from_secs(1));
        snap.steps[0].duration = snap.duration.clone();
        snap.steps[0].requests = 3;
        let run = RunLabels {
            profile: "p".into(),
            target: "t".into(),
            testid: Some("id".into()),
            tags: vec![("team".into(), "payments".into())],
        };
        let req = write_request(&snap, &run, &[0.002, 0.01], true, 7);
        for t in &req.timeseries {
            let mut sorted = t.labels.clone();
            sorted.sort();
            assert_eq!(t.labels, sorted);
            assert!(t.labels.iter().all(|l| !l.value.is_empty()));
            assert!(t.labels.contains(&Label {
                name: "testid".into(),
                value: "id".into()
            }));
            assert!(t.labels.contains(&Label {
                name: "team".into(),
                value: "payments".into()
            }));
        }
        let value = |name: &str, le: Option<&str>| {
            req.timeseries
                .iter()
                .find(|t| {
                    t.labels
                        .iter()
                        .any(|l| l.name == "__name__" && l.value == name)
                        && le.is_none_or(|le| {
                            t.labels.iter().any(|l| l.name == "le" && l.value == le)
                        })
                })
                .map(|t| t.samples[0].value)
        };
        assert_eq!(value("sloburn_http_reqs_total", None), Some(3.0));
        let bucket = "sloburn_http_req_duration_seconds_bucket";
        assert_eq!(value(bucket, Some("0.002")), Some(1.0));
        assert_eq!(value(bucket, Some("0.01")), Some(2.0));
        assert_eq!(value(bucket, Some("+Inf")), Some(3.0));
        let native: Vec<&Histogram> = req.timeseries.iter().flat_map(|t| &t.histograms).collect();
        assert_eq!(native.len(), 1);
        assert_eq!(
            (native[0].count_int, native[0].schema, native[0].timestamp),
            (Some(3), 3, 7)
        );
    }
}
