//! The protobuf exposition (`application/vnd.google.protobuf;
//! proto=io.prometheus.client.MetricFamily; encoding=delimited`): the same families and samples
//! as the text formats, as length-delimited `MetricFamily` messages, with native buckets on
//! every duration histogram (read from [`crate::hist`]).
//!
//! The `encoder::Encoder` carries a [`ProtoOut`] in this format: its `header` starts a
//! family and its `sample` adds a metric, so every family source of `encode.rs` serves all
//! three formats. Messages are written straight to bytes ([`super::wire`]), in buffers reused
//! for every metric: one family's body is held at a time, put after its length when the next
//! starts, and the bytes go out in chunks of about `encoder::CHUNK`, as the text does.

use std::sync::Arc;

use super::exemplar::{self, Slot};
use super::families::HTTP_REQ_DURATION;
use super::profile::ProfileMetrics;
use super::proto::MetricType;
use super::text::{Family, Kind};
use super::wire::{self, Labels};
use crate::config::NativeOptions;
use crate::hist::{Histogram, MIN_SCHEMA, NativeRead, ZERO_THRESHOLD};

/// The protobuf side of an `encoder::Encoder`: the bytes not yet sent, the family in progress written
/// straight into them, and the buffers every metric reuses.
pub(super) struct ProtoOut {
    pub opts: NativeOptions,
    /// Where the body of the family in progress starts in `bytes`, if one is, behind
    /// [`LEN_RESERVED`] bytes kept for its length; and whether it is a counter family.
    family: Option<usize>,
    counter: bool,
    pub bytes: Vec<u8>,
    /// A metric's body, a histogram's and a nested message's, reused for every one.
    metric: Vec<u8>,
    histogram: Vec<u8>,
    nested: Vec<u8>,
    /// An unescaped label value, or an exemplar's id in hex.
    scratch: String,
    /// The encoded pairs every metric carries first (`Encoder::with_constant`).
    pub constant: Vec<u8>,
}

/// The bytes a family's length is given before its body is written: a varint of 3 bytes holds
/// 16 KiB to 2 MiB, the size of the large families at hundreds of profiles. A family of
/// another size is moved once its length is known; a large one (the phase histograms are
/// ~2 MB at 1,000 profiles) is written in place, not copied from a buffer of its own.
const LEN_RESERVED: usize = 3;

impl ProtoOut {
    pub fn new(opts: NativeOptions) -> ProtoOut {
        ProtoOut {
            opts,
            family: None,
            counter: false,
            bytes: Vec::new(),
            metric: Vec::new(),
            histogram: Vec::new(),
            nested: Vec::new(),
            scratch: String::new(),
            constant: Vec::new(),
        }
    }

    /// Ends the family in progress, if any: its length goes before it.
    pub fn end_family(&mut self) {
        let Some(start) = self.family.take() else {
            return;
        };
        let len = self.bytes.len() - start;
        let mut varint = Vec::with_capacity(10);
        prost::encoding::encode_varint(len as u64, &mut varint);
        let at = start - LEN_RESERVED;
        match self.bytes.get_mut(at..start) {
            Some(room) if room.len() == varint.len() => room.copy_from_slice(&varint),
            _ => {
                self.bytes.splice(at..start, varint);
            }
        }
    }

    /// Starts a family after the bytes written (ending the one in progress, if any).
    pub fn start_family(&mut self, f: &Family) {
        self.end_family();
        let kind = match f.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        };
        self.counter = kind == MetricType::Counter;
        let body = &mut self.bytes;
        body.extend_from_slice(&[0; LEN_RESERVED]);
        self.family = Some(body.len());
        wire::bytes(body, 1, f.sample_name().as_bytes());
        wire::bytes(body, 2, f.help.as_bytes());
        wire::varint(body, 3, kind as u64);
    }

    /// A counter or gauge sample of the family in progress.
    pub fn sample(&mut self, labels: &str, extra: Option<(&str, &str)>, v: f64) {
        if self.family.is_none() {
            return;
        }
        let m = &mut self.metric;
        m.clear();
        m.extend_from_slice(&self.constant);
        wire::label_pairs(m, 1, labels, extra, &mut self.scratch);
        // A Gauge (2) or Counter (3) holding one double (field 1): 9 bytes.
        wire::len_prefix(m, if self.counter { 3 } else { 2 }, 9);
        wire::double(m, 1, v);
        wire::bytes(&mut self.bytes, 4, m);
    }

    /// A counter or gauge sample whose label fields were encoded before ([`wire::Labels`],
    /// [`wire::LabelSets`]), then the pairs of `extra`.
    pub fn sample_encoded(&mut self, labels: &[u8], extra: &[(&str, &str)], v: f64) {
        if self.family.is_none() {
            return;
        }
        let family = &mut self.bytes;
        let extra_len: usize = extra.iter().map(|(k, x)| wire::label_pair_len(k, x)).sum();
        // The labels, then a Gauge (2) or Counter (3) of 9 bytes behind its 2-byte key+length.
        let constant = self.constant.len();
        wire::len_prefix(family, 4, constant + labels.len() + extra_len + 11);
        family.extend_from_slice(&self.constant);
        family.extend_from_slice(labels);
        for (k, x) in extra {
            wire::label_pair(family, 1, k, x);
        }
        wire::len_prefix(family, if self.counter { 3 } else { 2 }, 9);
        wire::double(family, 1, v);
    }
}

/// A histogram family (its header written): per series, the classic buckets (unless configured off, and without the
/// implicit `+Inf`), the native buckets, and on the request-duration family the sampled
/// requests' exemplars.
pub(super) fn histograms(
    out: &mut ProtoOut,
    f: &Family,
    profiles: &[Arc<ProfileMetrics>],
    series: for<'p> fn(&'p ProfileMetrics, &mut Vec<(&'p Labels, &'p Histogram)>),
) {
    let with_exemplars = f.name == HTTP_REQ_DURATION.name;
    let mut list = Vec::new();
    let mut reads = Reads::default();
    for p in profiles {
        list.clear();
        series(p, &mut list);
        for (j, &(labels, hist)) in list.iter().enumerate() {
            let exemplars = p
                .steps
                .get(j)
                .filter(|_| with_exemplars)
                .and_then(|s| s.exemplars())
                .unwrap_or_default();
            reads.read(hist, out.opts);
            out.histogram(labels, p.bounds.seconds(), &reads, exemplars);
        }
    }
}

/// One series' histogram as read for a scrape, in buffers every series reuses.
#[derive(Default)]
struct Reads {
    /// Cumulative classic counts (empty when classic buckets are not written).
    cumulative: Vec<u64>,
    native: NativeRead,
    spans: Vec<(i32, u32)>,
    deltas: Vec<i64>,
    count: u64,
    sum_seconds: f64,
}

impl Reads {
    /// Reads `hist` in place. Without classic buckets they are not read (they are cache lines
    /// of their own): the count is the native buckets' total, as Prometheus wants it at least.
    fn read(&mut self, hist: &Histogram, opts: NativeOptions) {
        if opts.classic_buckets {
            hist.classic_into(&mut self.cumulative);
        } else {
            self.cumulative.clear();
        }
        self.sum_seconds = hist.sum_seconds();
        hist.native_into(
            opts.schema.clamp(MIN_SCHEMA, NativeOptions::MAX_SCHEMA),
            &mut self.native,
        );
        let classic_total = self.cumulative.last().copied().unwrap_or(0);
        // Both counter sets are read while requests are recorded: the larger total keeps each
        // set within the count (a request is in one set and not yet in the other for a moment
        // at most).
        self.count = classic_total.max(self.native.total());
        self.native
            .spans_and_deltas_into(&mut self.spans, &mut self.deltas);
        if self.spans.is_empty() && self.native.zero == 0 {
            // An empty native histogram is told from a classic one by a span of no buckets.
            self.spans.push((0, 0));
        }
    }
}

impl ProtoOut {
    /// One histogram metric of the family in progress: its labels (encoded once per series)
    /// and the `Histogram` message (field 7) of `reads`.
    fn histogram(&mut self, labels: &Labels, les: &[f64], reads: &Reads, exemplars: &[Slot]) {
        let ProtoOut {
            family: Some(_),
            bytes: family,
            histogram: h,
            nested,
            scratch,
            constant,
            ..
        } = self
        else {
            return;
        };
        let exemplar_at = |i: usize| exemplars.get(i).and_then(Slot::read);
        h.clear();
        wire::varint(h, 1, reads.count);
        wire::double(h, 2, reads.sum_seconds);
        for (i, (&le, &n)) in les.iter().zip(&reads.cumulative).enumerate() {
            nested.clear();
            wire::varint(nested, 1, n);
            wire::double(nested, 2, le);
            if let Some(x) = exemplar_at(i) {
                let at = nested.len();
                write_exemplar(nested, x, scratch);
                let body = nested.split_off(at);
                wire::bytes(nested, 3, &body);
            }
            wire::bytes(h, 3, nested);
        }
        write_native(h, nested, reads);
        // Without classic buckets, the exemplars go in the histogram's own list.
        if reads.cumulative.is_empty() {
            for x in (0..exemplars.len()).filter_map(exemplar_at) {
                nested.clear();
                write_exemplar(nested, x, scratch);
                wire::bytes(h, 16, nested);
            }
        }
        let labels = labels.proto();
        wire::len_prefix(
            family,
            4,
            constant.len() + labels.len() + wire::field_len(h.len()),
        );
        family.extend_from_slice(constant);
        family.extend_from_slice(labels);
        wire::bytes(family, 7, h);
    }
}

/// The native fields of a `Histogram`: schema, zero bucket, spans and deltas.
fn write_native(h: &mut Vec<u8>, nested: &mut Vec<u8>, reads: &Reads) {
    wire::sint(h, 5, i64::from(reads.native.schema));
    wire::double(h, 6, ZERO_THRESHOLD);
    wire::varint(h, 7, reads.native.zero);
    for &(offset, length) in &reads.spans {
        nested.clear();
        wire::sint(nested, 1, i64::from(offset));
        wire::varint(nested, 2, u64::from(length));
        wire::bytes(h, 12, nested);
    }
    wire::packed_sint(h, 13, &reads.deltas);
}

/// An `Exemplar`'s body: the trace and span ids, the value in seconds, its time.
fn write_exemplar(out: &mut Vec<u8>, x: exemplar::Exemplar, scratch: &mut String) {
    use std::fmt::Write as _;
    scratch.clear();
    let _ = write!(scratch, "{:032x}", x.trace_id);
    wire::label_pair(out, 1, "trace_id", scratch);
    scratch.clear();
    let _ = write!(scratch, "{:016x}", x.span_id);
    wire::label_pair(out, 1, "span_id", scratch);
    wire::double(out, 2, x.value_nanos as f64 / 1e9);
    let millis = x.unix_millis;
    let seconds = (millis / 1000) as i64;
    let nanos = ((millis % 1000) * 1_000_000) as i64;
    // A Timestamp's fields are proto3 scalars: left out at zero.
    let len: usize = [seconds, nanos]
        .iter()
        .filter(|v| **v != 0)
        .map(|v| 1 + prost::encoding::encoded_len_varint(*v as u64))
        .sum();
    wire::len_prefix(out, 3, len);
    if seconds != 0 {
        wire::varint(out, 1, seconds as u64);
    }
    if nanos != 0 {
        wire::varint(out, 2, nanos as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{Outcome, Phases};
    use crate::metrics::Metrics;
    use crate::metrics::proto::MetricFamily;
    use opentelemetry::trace::{SpanId, TraceId};
    use prost::Message;
    use std::time::Duration;

    /// The hand-written bytes are `prost`'s: every family decodes, and encodes back to the
    /// same bytes (fields in tag order, the same fields present), with escaped label values,
    /// exemplars, empty and spread native histograms, with and without classic buckets.
    #[test]
    fn a_scrape_is_prosts_encoding_of_its_own_decoding() {
        let m = Metrics::new("1.0");
        let p = m.profile("t\"1", "p\\2\nx", &[0.01, 0.1, 1.0], &["status".into()]);
        m.init_profile("p\\2\nx");
        let _idle = m.profile("t", "idle", &[0.5], &[]);
        for (i, micros) in [0u64, 90, 4_000, 50_000, 700_000, 3_000_000]
            .iter()
            .enumerate()
        {
            let o = Outcome {
                phases: Phases {
                    waiting: Duration::from_micros(*micros),
                    ..Phases::default()
                },
                status: Some(if i % 2 == 0 { 200 } else { 503 }),
                ..Outcome::default()
            };
            p.observe(&o, Duration::from_micros(*micros / 3), &[i % 2 == 0]);
        }
        p.exemplar(
            0,
            0.05,
            TraceId::from_bytes([0xab; 16]),
            SpanId::from_bytes([0xcd; 8]),
        );
        // An SLO report: its window and alert gauges go out through the labels it keeps
        // encoded.
        let period = Duration::from_secs(2 * 86400);
        let def = crate::slo::SloDef {
            name: "a\"b".into(),
            service: "t".into(),
            objective: 0.99,
            period,
            calendar: None,
            tiers: crate::slo::default_tiers(period),
            labels: Default::default(),
            description: String::new(),
        };
        let mut windows = crate::slo::Windows::new(period);
        windows.record(10, 90, 10);
        let report = crate::slo::evaluate(&def, &windows, 10);
        m.slo("a\"b", 0.99).set_report(&report);
        for classic_buckets in [true, false] {
            m.set_native_options(NativeOptions {
                schema: 2,
                classic_buckets,
            });
            let bytes = m.encode_protobuf();
            let mut rest = &bytes[..];
            let mut again = Vec::new();
            let mut histograms = 0;
            while !rest.is_empty() {
                let f = MetricFamily::decode_length_delimited(&mut rest).expect("a family");
                histograms += f.metric.iter().filter(|x| x.histogram.is_some()).count();
                f.encode_length_delimited(&mut again).unwrap();
            }
            assert!(histograms >= 10, "{histograms}");
            let mut rest = &bytes[..];
            let mut burn = None;
            while !rest.is_empty() {
                let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
                if f.name() == "sloburn_slo_burn_rate" {
                    burn = Some(f);
                }
            }
            let burn = burn.expect("the burn-rate family");
            let mut rest = &bytes[..];
            let mut exemplars = 0;
            while !rest.is_empty() {
                let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
                let hists = f.metric.iter().filter_map(|x| x.histogram.as_ref());
                exemplars += hists
                    .map(|h| {
                        h.exemplars.len() + h.bucket.iter().filter(|b| b.exemplar.is_some()).count()
                    })
                    .sum::<usize>();
            }
            assert_eq!(exemplars, 1, "classic buckets {classic_buckets}");
            assert_eq!(burn.metric.len(), report.windows.len() + 1);
            let labels: Vec<_> = burn.metric[0]
                .label
                .iter()
                .map(|l| (l.name(), l.value()))
                .collect();
            assert_eq!(labels, [("slo", "a\"b"), ("window", "1d")]);
            assert!(burn.metric.iter().all(|x| x.gauge.is_some()));
            assert_eq!(again, bytes, "classic buckets {classic_buckets}");
        }
    }

    /// Each series' labels as `(name, value)` pairs.
    type SeriesLabels = Vec<Vec<(String, String)>>;

    /// The labels of every series of a scrape, by family.
    fn labels_by_family(m: &Metrics) -> Vec<(String, SeriesLabels)> {
        let bytes = m.encode_protobuf();
        let mut rest = &bytes[..];
        let mut out = Vec::new();
        while !rest.is_empty() {
            let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
            let series = f.metric.iter().map(|x| {
                let pairs = x.label.iter();
                pairs
                    .map(|l| (l.name().to_string(), l.value().to_string()))
                    .collect()
            });
            out.push((f.name().to_string(), series.collect()));
        }
        out
    }

    /// The protobuf label fields a series keeps (made at the first protobuf scrape) are those
    /// of the series' own labels: a profile renamed by a reload, or whose steps changed, is
    /// served under its new labels, never the ones encoded for the series it replaced.
    #[test]
    fn kept_label_fields_follow_reloads_and_renames() {
        use crate::metrics::StepLayout;
        let m = Metrics::new("1.0");
        m.set_native_options(NativeOptions {
            schema: 3,
            classic_buckets: false,
        });
        let step = |name: &str| StepLayout {
            journey: Some("j".into()),
            step: name.into(),
            checks: vec!["ok".into()],
        };
        let observe = |p: &ProfileMetrics| {
            let o = Outcome {
                status: Some(200),
                ..Outcome::default()
            };
            p.observe_step(0, &o, Duration::from_millis(1), &[true]);
        };
        let p = m.profile_steps("t", "old", &[0.1], &[step("a")], &["j".into()]);
        observe(&p);
        let names = |m: &Metrics, family: &str, label: &str| -> Vec<String> {
            let families = labels_by_family(m);
            let (_, series) = families.iter().find(|(f, _)| f == family).expect(family);
            let values = series.iter().flatten().filter(|(k, _)| k == label);
            values.map(|(_, v)| v.clone()).collect()
        };
        let duration = "sloburn_http_req_duration_seconds";
        assert_eq!(names(&m, duration, "profile"), ["old"]);
        assert_eq!(names(&m, duration, "step"), ["a"]);
        // The same labels at the next scrape, from the kept fields (the process figures
        // change between two scrapes, so the bytes are not compared).
        assert_eq!(labels_by_family(&m), labels_by_family(&m));
        // Renamed: the old series go, the new ones carry the new name.
        let renamed = m.profile_steps("t", "new", &[0.1], &[step("a")], &["j".into()]);
        m.retain_profiles(&[("t".into(), "new".into())]);
        observe(&renamed);
        for family in [duration, "sloburn_iterations_total", "sloburn_checks_total"] {
            assert!(
                names(&m, family, "profile").iter().all(|p| p == "new"),
                "{family}"
            );
        }
        assert_eq!(names(&m, "sloburn_http_reqs_total", "profile"), ["new"]);
        // A step renamed by a reload: new series under the same profile name.
        let relaid = m.profile_steps("t", "new", &[0.1], &[step("b")], &["j".into()]);
        assert!(!Arc::ptr_eq(&renamed, &relaid));
        observe(&relaid);
        assert_eq!(names(&m, duration, "step"), ["b"]);
        assert_eq!(
            names(&m, "sloburn_http_req_phase_seconds", "step"),
            ["b"; 7]
        );
        assert_eq!(names(&m, "sloburn_http_reqs_total", "step"), ["b"]);
        assert_eq!(names(&m, "sloburn_checks_total", "step"), ["b", "b"]);
        assert_eq!(
            names(&m, "sloburn_journey_step_failures_total", "step"),
            ["b"; 3]
        );
    }

    /// Native-only histograms: the count is the native buckets' total, the classic buckets
    /// are not read, and a request-duration series has no exemplar until one is sampled.
    #[test]
    fn native_only_counts_are_the_native_total() {
        let m = Metrics::new("1.0");
        m.set_native_options(NativeOptions {
            schema: 0,
            classic_buckets: false,
        });
        let p = m.profile("t", "p", &[0.1], &[]);
        for micros in [0u64, 1, 30, 30, 7_000, 2_000_000] {
            let o = Outcome {
                phases: Phases {
                    waiting: Duration::from_micros(micros),
                    ..Phases::default()
                },
                status: Some(200),
                ..Outcome::default()
            };
            p.observe(&o, Duration::ZERO, &[]);
        }
        let duration = |m: &Metrics| {
            let bytes = m.encode_protobuf();
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
                if f.name() == HTTP_REQ_DURATION.name {
                    return f.metric[0].histogram.clone().unwrap();
                }
            }
            panic!("no duration family");
        };
        let h = duration(&m);
        assert_eq!(h.sample_count(), 6);
        assert_eq!(h.zero_count(), 1);
        assert!(h.bucket.is_empty() && h.exemplars.is_empty());
        let in_buckets: i64 = h
            .positive_delta
            .iter()
            .scan(0i64, |n, d| {
                *n += d;
                Some(*n)
            })
            .sum();
        assert_eq!(in_buckets, 5);
        p.exemplar(
            0,
            0.03,
            TraceId::from_bytes([1; 16]),
            SpanId::from_bytes([2; 8]),
        );
        assert_eq!(duration(&m).exemplars.len(), 1);
    }

    /// A family is written in place behind room for a 3-byte length: one whose length takes
    /// 1, 2, 3 or 4 bytes decodes whole, followed by the next.
    #[test]
    fn families_written_in_place_take_any_length() {
        use crate::metrics::families::{DATA_SENT, VUS};
        let mut out = ProtoOut::new(NativeOptions::default());
        let labels = wire::Labels::new("target=\"t\",profile=\"p\"".into());
        let sizes = [0usize, 1, 600, 150_000, 10];
        for (i, &n) in sizes.iter().enumerate() {
            out.start_family(if i % 2 == 0 { &VUS } else { &DATA_SENT });
            for k in 0..n {
                out.sample_encoded(labels.proto(), &[], k as f64);
            }
        }
        out.end_family();
        let mut rest = &out.bytes[..];
        let mut lengths = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let len = rest.len();
            let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
            lengths.push(len - rest.len());
            assert_eq!(f.metric.len(), n);
            let counter = i % 2 == 1;
            assert!(f.metric.iter().all(|m| m.counter.is_some() == counter));
            assert_eq!(f.metric.last().map(|m| m.label.len()), (n > 0).then_some(2));
        }
        assert!(rest.is_empty());
        // Lengths of 1, 2, 3 and 4 bytes were written.
        assert!(lengths[0] < 128 && (128..16_384).contains(&lengths[4]));
        assert!(lengths[2] > 16_384 && lengths[3] > 2 << 20);
    }
}
