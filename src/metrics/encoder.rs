//! The writer of every exposition format: classic text and OpenMetrics (`text`'s escaping and
//! number formats) or protobuf (a [`ProtoOut`] it carries), whole or streamed in chunks of
//! about [`CHUNK`] bytes. Every family source of `encode.rs` writes through it, so each serves
//! all three formats.

use std::fmt::Write as _;

use super::protobuf::ProtoOut;
use super::text::{Family, Kind, Value, escape_help_into, escape_label_into};
use super::wire::Labels;
use crate::config::NativeOptions;

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
    /// Pairs every sample carries first (`location="eu"`), escaped once per scrape.
    constant: String,
}

impl Encoder {
    pub fn new(openmetrics: bool, capacity: usize) -> Encoder {
        Encoder {
            out: String::with_capacity(capacity),
            openmetrics,
            sink: None,
            discard: false,
            proto: None,
            constant: String::new(),
        }
    }

    pub fn streamed(openmetrics: bool, sink: Sink) -> Encoder {
        Encoder {
            out: String::with_capacity(CHUNK + CHUNK / 8),
            openmetrics,
            sink: Some(sink),
            discard: false,
            proto: None,
            constant: String::new(),
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
            constant: String::new(),
        }
    }

    /// The pairs every sample carries first (empty without a location).
    pub(super) fn constant(&self) -> &str {
        &self.constant
    }

    /// Every sample written from now on carries `labels` (a `text::label_set`) first: the
    /// daemon's `location`, set once here rather than in each family's label sets.
    pub(super) fn with_constant(mut self, labels: &str) -> Encoder {
        self.constant = labels.to_string();
        if let Some(p) = self.proto.as_mut() {
            p.constant.clear();
            let mut scratch = String::new();
            if !labels.is_empty() {
                super::wire::label_pairs(&mut p.constant, 1, labels, None, &mut scratch);
            }
        }
        self
    }

    /// The sink's reader went away: nothing more needs encoding (a streamed exposition stops
    /// at the next family).
    pub(super) fn abandoned(&self) -> bool {
        self.discard
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
        if labels.is_empty() && extra.is_none() && self.constant.is_empty() {
            out.push(' ');
            return;
        }
        out.push('{');
        out.push_str(&self.constant);
        if !self.constant.is_empty() && !labels.is_empty() {
            out.push(',');
        }
        out.push_str(labels);
        if let Some((k, v)) = extra {
            if !labels.is_empty() || !self.constant.is_empty() {
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

#[cfg(test)]
mod tests {
    use super::*;

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
