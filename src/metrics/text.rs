//! The text encoder for both exposition formats: classic Prometheus text 0.0.4 and OpenMetrics
//! 1.0. Hand-written because every family here is backed by our own atomics, and because one
//! scrape of a large config is tens of thousands of lines: label sets are escaped once when a
//! series is created and pasted here as ready-made strings, numbers are written without the
//! `fmt` machinery where it matters.
//!
//! The two formats differ only in family metadata: OpenMetrics names a counter family without
//! its `_total` suffix, may carry `# UNIT`, escapes `"` in HELP, wants canonical `le` values
//! (`1.0`, not `1`) and ends with `# EOF`.

use std::fmt::Write as _;

use super::protobuf::ProtoOut;
use super::wire::Labels;
use crate::config::NativeOptions;

/// What a family is; decides the TYPE line and the sample suffixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family: the single place its name, type, unit and help are written down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The family name as OpenMetrics spells it: counters without `_total`.
    pub name: &'static str,
    pub kind: Kind,
    /// The unit suffix the name ends with (`seconds`, `bytes`, `ratio`), for `# UNIT`.
    pub unit: Option<&'static str>,
    pub help: &'static str,
}

impl Family {
    /// The name of the family's plain samples: counters get `_total`, the others are the name.
    pub fn sample_name(&self) -> String {
        match self.kind {
            Kind::Counter => format!("{}_total", self.name),
            _ => self.name.to_string(),
        }
    }
}

/// Appends `value` escaped for a label value (both formats): backslash, quote, newline.
/// Runs without any of the three are copied whole: label values rarely hold one.
pub fn escape_label_into(out: &mut String, value: &str) {
    let mut rest = value;
    while let Some(i) = rest.find(['\\', '"', '\n']) {
        let (plain, special) = rest.split_at(i);
        out.push_str(plain);
        let mut chars = special.chars();
        out.push_str(match chars.next() {
            Some('\\') => "\\\\",
            Some('"') => "\\\"",
            _ => "\\n",
        });
        rest = chars.as_str();
    }
    out.push_str(rest);
}

/// `name="value",name="value"`: a label set escaped once, to be pasted into many lines.
pub fn label_set(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        escape_label_into(&mut out, value);
        out.push('"');
    }
    out
}

/// A float as both formats accept it: `NaN`, `+Inf`, `-Inf`, or Go-parsable decimal.
pub fn write_f64(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        // Whole numbers (counts, flags, timestamps, most SLIs) as Display writes them, `-0`
        // included, without its digit generation: a large scrape writes tens of thousands.
        if v.is_sign_negative() {
            out.push('-');
        }
        write_u64(out, v.abs() as u64);
    } else if (1e-5..1e15).contains(&v.abs()) {
        // Display is the shortest representation that round-trips, never an exponent. (Ryu
        // would be faster, but picks other digits for some values, 0x42ea8090bb0f6d84 for one:
        // the text would change.)
        let _ = write!(out, "{v}");
    } else {
        // Display would print hundreds of digits for 1e300 or 1e-300: use an exponent.
        let _ = write!(out, "{v:e}");
    }
}

/// A bucket bound as the `le` value. OpenMetrics wants canonical numbers, which means an
/// integral bound carries `.0`; the classic format (and client_golang) writes `1`.
pub fn le_value(bound: f64, openmetrics: bool) -> String {
    let mut s = String::new();
    write_f64(&mut s, bound);
    if openmetrics && bound.is_finite() && !s.contains(['.', 'e', 'N', 'I']) {
        s.push_str(".0");
    }
    s
}

/// Appends a u64 in decimal without going through `fmt` (the scrape writes ~10^5 of them).
pub fn write_u64(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// A sample value: counts are written as integers, everything else as floats.
pub trait Value: Copy {
    fn write(self, out: &mut String);
    /// The value as the protobuf format carries it.
    fn as_f64(self) -> f64;
}

impl Value for f64 {
    fn write(self, out: &mut String) {
        write_f64(out, self);
    }
    fn as_f64(self) -> f64 {
        self
    }
}

impl Value for u64 {
    fn write(self, out: &mut String) {
        write_u64(out, self);
    }
    fn as_f64(self) -> f64 {
        self as f64
    }
}

/// How much text a streamed exposition hands over at a time: a scrape then holds a few
/// chunks instead of the whole text (21 MB for 1,000 profiles, at the daemon's peak).
pub const CHUNK: usize = 256 * 1024;

/// Takes each full chunk of a streamed exposition; false when nobody reads any more.
pub type Sink = Box<dyn FnMut(Vec<u8>) -> bool + Send>;

/// Writes families in order into one String, or in chunks of about [`CHUNK`] bytes, each
/// ending at a line's end, to a [`Sink`].
pub struct Encoder {
    pub out: String,
    pub openmetrics: bool,
    sink: Option<Sink>,
    /// The sink's reader went away: the rest is written and dropped chunk by chunk.
    discard: bool,
    /// Set for the protobuf format: families and samples go there, not to `out`.
    pub(super) proto: Option<Box<ProtoOut>>,
}

impl Encoder {
    pub fn new(openmetrics: bool, capacity: usize) -> Encoder {
        Encoder {
            out: String::with_capacity(capacity),
            openmetrics,
            sink: None,
            discard: false,
            proto: None,
        }
    }

    pub fn streamed(openmetrics: bool, sink: Sink) -> Encoder {
        Encoder {
            out: String::with_capacity(CHUNK + CHUNK / 8),
            openmetrics,
            sink: Some(sink),
            discard: false,
            proto: None,
        }
    }

    /// An encoder of the protobuf format, whole (`sink` `None`) or streamed.
    pub(super) fn protobuf(opts: NativeOptions, sink: Option<Sink>) -> Encoder {
        Encoder {
            out: String::new(),
            openmetrics: false,
            sink,
            discard: false,
            proto: Some(Box::new(ProtoOut::new(opts))),
        }
    }

    /// Hands the protobuf bytes over once a chunk is full (streamed only); called between
    /// families.
    fn flush_proto(&mut self) {
        let Some(p) = self.proto.as_mut() else {
            return;
        };
        if p.bytes.len() < CHUNK {
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            let chunk = std::mem::replace(&mut p.bytes, Vec::with_capacity(CHUNK + CHUNK / 8));
            if !sink(chunk) {
                self.sink = None;
                self.discard = true;
            }
        } else if self.discard {
            p.bytes.clear();
        }
    }

    /// The whole protobuf exposition (empty when streamed: the last chunk goes to the sink).
    pub(super) fn finish_protobuf(mut self) -> Vec<u8> {
        let Some(mut p) = self.proto.take() else {
            return Vec::new();
        };
        p.end_family();
        match self.sink.as_mut() {
            Some(sink) => {
                sink(std::mem::take(&mut p.bytes));
                Vec::new()
            }
            None if self.discard => Vec::new(),
            None => p.bytes,
        }
    }

    /// Hands the text over once a chunk is full (streamed only); called at a line's end.
    fn flush_full(&mut self) {
        if self.out.len() < CHUNK {
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            let chunk = std::mem::replace(&mut self.out, String::with_capacity(CHUNK + CHUNK / 8));
            if !sink(chunk.into_bytes()) {
                self.sink = None;
                self.discard = true;
            }
        } else if self.discard {
            self.out.clear();
        }
    }

    /// The HELP/TYPE (and UNIT) block. Callers skip it for families with no samples, so no
    /// family is announced without a series.
    pub fn header(&mut self, f: &Family) {
        if let Some(p) = self.proto.as_mut() {
            // The bytes so far go out before the family starts in them: a chunk ends at a
            // family's end.
            p.end_family();
            self.flush_proto();
            if let Some(p) = self.proto.as_mut() {
                p.start_family(f);
            }
            return;
        }
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let out = &mut self.out;
        if self.openmetrics {
            let _ = writeln!(out, "# TYPE {} {kind}", f.name);
            if let Some(unit) = f.unit {
                let _ = writeln!(out, "# UNIT {} {unit}", f.name);
            }
            let _ = write!(out, "# HELP {} ", f.name);
            escape_help_into(out, f.help, true);
        } else {
            let name = f.sample_name();
            let _ = write!(out, "# HELP {name} ");
            escape_help_into(out, f.help, false);
            let _ = writeln!(out, "\n# TYPE {name} {kind}");
            return;
        }
        out.push('\n');
    }

    /// Starts a sample line up to the space before the value: `name{labels,extra="v"}`.
    /// `labels` is a pre-escaped label set (may be empty); `extra` is an unescaped pair.
    pub fn start(&mut self, name: &str, suffix: &str, labels: &str, extra: Option<(&str, &str)>) {
        let out = &mut self.out;
        out.push_str(name);
        out.push_str(suffix);
        if labels.is_empty() && extra.is_none() {
            out.push(' ');
            return;
        }
        out.push('{');
        out.push_str(labels);
        if let Some((k, v)) = extra {
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_label_into(out, v);
            out.push('"');
        }
        out.push_str("} ");
    }

    /// One whole sample line: `name+suffix{labels,extra} value`.
    pub fn sample(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &str,
        extra: Option<(&str, &str)>,
        v: impl Value,
    ) {
        if let Some(p) = self.proto.as_mut() {
            p.sample(labels, extra, v.as_f64());
            return;
        }
        self.start(name, suffix, labels, extra);
        v.write(&mut self.out);
        self.out.push('\n');
        self.flush_full();
    }

    /// [`Encoder::sample`] of a series whose protobuf label fields are at hand (`encoded`): the
    /// protobuf format copies them instead of reading `labels`.
    pub fn sample_encoded(&mut self, name: &str, labels: &str, encoded: Option<&[u8]>, v: f64) {
        match (self.proto.as_mut(), encoded) {
            (Some(p), Some(bytes)) => p.sample_encoded(bytes, &[], v),
            _ => self.sample(name, "", labels, None, v),
        }
    }

    /// [`Encoder::sample`] of a series' kept [`Labels`]: the protobuf format copies their
    /// encoded fields (then `extra`) instead of reading the text.
    pub fn sample_labels(
        &mut self,
        name: &str,
        labels: &Labels,
        extra: Option<(&str, &str)>,
        v: impl Value,
    ) {
        match self.proto.as_mut() {
            Some(p) => p.sample_encoded(labels.proto(), extra.as_slice(), v.as_f64()),
            None => self.sample(name, "", labels, extra, v),
        }
    }

    /// The whole text; streamed, the last chunk goes to the sink and the text returned is empty.
    pub fn finish(mut self) -> String {
        if self.openmetrics {
            self.out.push_str("# EOF\n");
        }
        match self.sink.as_mut() {
            Some(sink) => {
                sink(std::mem::take(&mut self.out).into_bytes());
                String::new()
            }
            None if self.discard => String::new(),
            None => self.out,
        }
    }
}

fn escape_help_into(out: &mut String, help: &str, openmetrics: bool) {
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            // Only OpenMetrics escapes quotes in HELP; the classic parser would keep the `\`.
            '"' if openmetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            label_set(&[("a", "x\\y\"z\nw"), ("b", "")]),
            r#"a="x\\y\"z\nw",b="""#
        );
    }

    #[test]
    fn floats_are_written_as_both_parsers_read_them() {
        let cases = [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (0.0, "0"),
            (1.0, "1"),
            (0.005, "0.005"),
            (-2.5, "-2.5"),
            (1e-7, "1e-7"),
            (1e300, "1e300"),
            (-0.0, "-0"),
            (1700000300.0, "1700000300"),
            (-3.0, "-3"),
            (999_999_999_999_999.0, "999999999999999"),
            (1e15, "1e15"),
        ];
        for (v, want) in cases {
            let mut s = String::new();
            write_f64(&mut s, v);
            assert_eq!(s, want, "{v}");
        }
    }

    #[test]
    fn whole_floats_are_written_as_display_writes_them() {
        let mut v = 0.5f64;
        while v < 1e15 {
            for x in [v.floor(), -v.floor(), v.ceil(), (v * 3.0).round()] {
                let mut s = String::new();
                write_f64(&mut s, x);
                let want = if x.abs() < 1e15 {
                    format!("{x}")
                } else {
                    format!("{x:e}")
                };
                assert_eq!(s, want);
            }
            v *= 1.37;
        }
    }

    #[test]
    fn escaping_copies_runs_between_special_characters() {
        for (raw, want) in [
            ("", ""),
            ("plain", "plain"),
            ("\\", "\\\\"),
            ("a\"b\nc\\d", "a\\\"b\\nc\\\\d"),
            ("\"\"", "\\\"\\\""),
            ("é\nü", "é\\nü"),
        ] {
            let mut s = String::new();
            escape_label_into(&mut s, raw);
            assert_eq!(s, want, "{raw:?}");
        }
    }

    #[test]
    fn le_is_canonical_in_openmetrics_only() {
        assert_eq!(le_value(1.0, false), "1");
        assert_eq!(le_value(1.0, true), "1.0");
        assert_eq!(le_value(0.25, true), "0.25");
        assert_eq!(le_value(f64::INFINITY, true), "+Inf");
    }

    #[test]
    fn u64_digits() {
        for v in [0, 7, 10, 1234567890, u64::MAX] {
            let mut s = String::new();
            write_u64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
    }

    #[test]
    fn help_quotes_are_escaped_only_in_openmetrics() {
        let f = Family {
            name: "x_total_things",
            kind: Kind::Counter,
            unit: None,
            help: "say \"hi\"\\",
        };
        let mut e = Encoder::new(false, 0);
        e.header(&f);
        assert_eq!(
            e.out,
            "# HELP x_total_things_total say \"hi\"\\\\\n# TYPE x_total_things_total counter\n"
        );
        let mut e = Encoder::new(true, 0);
        e.header(&f);
        assert_eq!(
            e.out,
            "# TYPE x_total_things counter\n# HELP x_total_things say \\\"hi\\\"\\\\\n"
        );
    }
}
