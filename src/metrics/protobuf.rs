//! The protobuf exposition (`application/vnd.google.protobuf;
//! proto=io.prometheus.client.MetricFamily; encoding=delimited`): the same families and samples
//! as the text formats, as length-delimited [`MetricFamily`] messages, with native buckets on
//! every duration histogram (see [`super::native`]).
//!
//! The [`super::text::Encoder`] carries a [`ProtoOut`] in this format: its `header` starts a
//! family and its `sample` adds a metric, so every family source of `encode.rs` serves all
//! three formats. One family's messages are held at a time; each is encoded when the next
//! starts and the bytes go out in chunks of about [`super::text::CHUNK`], as the text does.

use std::sync::Arc;

use prost::Message;

use super::exemplar;
use super::families::HTTP_REQ_DURATION;
use super::native::{self, NativeRead};
use super::profile::{Hist, ProfileMetrics};
use super::proto::{self, LabelPair, Metric, MetricFamily, MetricType};
use super::text::{Encoder, Family, Kind};

/// How histograms are written in the protobuf format (`server.native_histograms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeOptions {
    /// The native buckets' schema: each bucket is `2^(2^-schema)` times as wide as the last.
    pub schema: i32,
    /// Whether the classic (`le`) buckets are written beside the native ones.
    pub classic_buckets: bool,
}

impl Default for NativeOptions {
    fn default() -> NativeOptions {
        NativeOptions {
            schema: native::DEFAULT_SCHEMA,
            classic_buckets: true,
        }
    }
}

/// The protobuf side of an [`Encoder`]: the family being filled and the bytes not yet sent.
pub(super) struct ProtoOut {
    pub opts: NativeOptions,
    family: Option<MetricFamily>,
    pub bytes: Vec<u8>,
}

impl ProtoOut {
    pub fn new(opts: NativeOptions) -> ProtoOut {
        ProtoOut {
            opts,
            family: None,
            bytes: Vec::new(),
        }
    }

    /// Encodes the family in progress, if any, after the bytes already written.
    pub fn end_family(&mut self) {
        if let Some(f) = self.family.take() {
            // A Vec grows as needed: encoding into it cannot fail.
            let _ = f.encode_length_delimited(&mut self.bytes);
        }
    }

    pub fn start_family(&mut self, f: &Family) {
        self.end_family();
        let kind = match f.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        };
        self.family = Some(MetricFamily {
            name: Some(f.sample_name()),
            help: Some(f.help.to_string()),
            r#type: Some(kind as i32),
            metric: Vec::new(),
        });
    }

    /// A counter or gauge sample of the family in progress.
    pub fn sample(&mut self, labels: &str, extra: Option<(&str, &str)>, v: f64) {
        let Some(family) = self.family.as_mut() else {
            return;
        };
        let counter = family.r#type == Some(MetricType::Counter as i32);
        family.metric.push(Metric {
            label: label_pairs(labels, extra),
            counter: counter.then_some(proto::Counter { value: Some(v) }),
            gauge: (!counter).then_some(proto::Gauge { value: Some(v) }),
            histogram: None,
        });
    }
}

/// The pairs of a label set as `text::label_set` wrote it (`a="x",b="y\"z"`), unescaped, and
/// `extra` after them.
pub(super) fn label_pairs(labels: &str, extra: Option<(&str, &str)>) -> Vec<LabelPair> {
    let mut out = Vec::new();
    let mut rest = labels;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    end = i + 1;
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => {}
                },
                c => value.push(c),
            }
        }
        out.push(LabelPair {
            name: Some(name.trim_start_matches(',').to_string()),
            value: Some(value),
        });
        rest = &after[end..];
    }
    if let Some((k, v)) = extra {
        out.push(LabelPair {
            name: Some(k.to_string()),
            value: Some(v.to_string()),
        });
    }
    out
}

/// A histogram family: per series, the classic buckets (unless configured off, and without the
/// implicit `+Inf`), the native buckets, and on the request-duration family the sampled
/// requests' exemplars.
pub(super) fn histograms(
    e: &mut Encoder,
    f: &Family,
    profiles: &[Arc<ProfileMetrics>],
    series: for<'p> fn(&'p ProfileMetrics, &mut Vec<(&'p str, &'p Hist)>),
) {
    if profiles.is_empty() {
        return;
    }
    e.header(f);
    let Some(p_out) = e.proto.as_mut() else {
        return;
    };
    let opts = p_out.opts;
    let Some(family) = p_out.family.as_mut() else {
        return;
    };
    let with_exemplars = f.name == HTTP_REQ_DURATION.name;
    let mut list = Vec::new();
    let mut cumulative = Vec::new();
    let mut native = NativeRead::default();
    for p in profiles {
        list.clear();
        series(p, &mut list);
        for (j, &(labels, hist)) in list.iter().enumerate() {
            let sum_seconds = hist.read_into(&mut cumulative);
            hist.native.read_into(opts.schema, &mut native);
            let classic_total = cumulative.last().copied().unwrap_or(0);
            // Both counter sets are read while requests are recorded: the larger total keeps
            // each set within the count (a request is in one set and not yet in the other for
            // a moment at most).
            let count = classic_total.max(native.total());
            let exemplars: Vec<Option<exemplar::Exemplar>> = p
                .steps
                .get(j)
                .filter(|_| with_exemplars)
                .map(|s| s.duration_exemplars.iter().map(|x| x.read()).collect())
                .unwrap_or_default();
            let exemplar_at = |i: usize| exemplars.get(i).copied().flatten().map(to_exemplar);
            let bucket = if opts.classic_buckets {
                p.bounds
                    .seconds
                    .iter()
                    .zip(&cumulative)
                    .enumerate()
                    .map(|(i, (&le, &n))| proto::Bucket {
                        cumulative_count: Some(n),
                        upper_bound: Some(le),
                        exemplar: exemplar_at(i),
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let (mut positive_span, positive_delta) = native.spans_and_deltas();
            if positive_span.is_empty() && native.zero == 0 {
                // An empty native histogram is told from a classic one by a span of no buckets.
                positive_span.push(proto::BucketSpan {
                    offset: Some(0),
                    length: Some(0),
                });
            }
            let native_exemplars = if opts.classic_buckets {
                Vec::new()
            } else {
                (0..exemplars.len()).filter_map(exemplar_at).collect()
            };
            family.metric.push(Metric {
                label: label_pairs(labels, None),
                counter: None,
                gauge: None,
                histogram: Some(proto::Histogram {
                    sample_count: Some(count),
                    sample_sum: Some(sum_seconds),
                    bucket,
                    schema: Some(opts.schema.clamp(native::MIN_SCHEMA, native::RECORD_SCHEMA)),
                    zero_threshold: Some(native::ZERO_THRESHOLD),
                    zero_count: Some(native.zero),
                    positive_span,
                    positive_delta,
                    exemplars: native_exemplars,
                }),
            });
        }
    }
}

fn to_exemplar(x: exemplar::Exemplar) -> proto::Exemplar {
    let millis = x.unix_millis;
    proto::Exemplar {
        label: vec![
            LabelPair {
                name: Some("trace_id".into()),
                value: Some(format!("{:032x}", x.trace_id)),
            },
            LabelPair {
                name: Some("span_id".into()),
                value: Some(format!("{:016x}", x.span_id)),
            },
        ],
        value: Some(x.value_nanos as f64 / 1e9),
        timestamp: Some(proto::Timestamp {
            seconds: (millis / 1000) as i64,
            nanos: ((millis % 1000) * 1_000_000) as i32,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::text::label_set;

    #[test]
    fn label_sets_parse_back_to_their_pairs() {
        let pairs = [("target", "a\"b"), ("profile", "c\\d\ne,f=\"g")];
        let parsed = label_pairs(&label_set(&pairs), Some(("status", "200")));
        let got: Vec<_> = parsed.iter().map(|l| (l.name(), l.value())).collect();
        assert_eq!(
            got,
            vec![
                ("target", "a\"b"),
                ("profile", "c\\d\ne,f=\"g"),
                ("status", "200")
            ]
        );
        assert!(label_pairs("", None).is_empty());
    }
}
