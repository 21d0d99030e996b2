//! The protobuf wire format of the `io.prometheus.client` messages, written straight into
//! byte buffers: a scrape of 1,000 profiles writes ~10^5 metrics, and building each as `prost`
//! structs (owned label strings, nested `Vec`s) and encoding them (`prost` sizes every nested
//! message again at each level) cost more than the text format. The bytes are `prost`'s
//! encoding of [`super::proto`] (fields in tag order, every `Some` field written, a proto3
//! scalar left out at zero); a unit test decodes and re-encodes a scrape with `prost` and finds
//! the same bytes.
//!
//! A label set comes as the text format wrote it once per series (`a="x",b="y\"z"`): its pairs
//! are read in place, and a value is unescaped into a scratch buffer only when it has a `\`.

use std::sync::OnceLock;

use prost::encoding::{encode_varint, encoded_len_varint};

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

#[inline]
fn key(out: &mut Vec<u8>, tag: u32, wire: u64) {
    encode_varint((u64::from(tag) << 3) | wire, out);
}

/// A `uint64`, `int64` (as its two's complement) or enum field.
#[inline]
pub fn varint(out: &mut Vec<u8>, tag: u32, v: u64) {
    key(out, tag, VARINT);
    encode_varint(v, out);
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// A `sint32` or `sint64` field.
#[inline]
pub fn sint(out: &mut Vec<u8>, tag: u32, v: i64) {
    varint(out, tag, zigzag(v));
}

#[inline]
pub fn double(out: &mut Vec<u8>, tag: u32, v: f64) {
    key(out, tag, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `string`, `bytes` or message field whose body is `body`.
#[inline]
pub fn bytes(out: &mut Vec<u8>, tag: u32, body: &[u8]) {
    len_prefix(out, tag, body.len());
    out.extend_from_slice(body);
}

/// The key and length of a length-delimited field whose `len` bytes follow.
#[inline]
pub fn len_prefix(out: &mut Vec<u8>, tag: u32, len: usize) {
    key(out, tag, LEN);
    encode_varint(len as u64, out);
}

/// The size of a field with a one-byte key holding `len` bytes.
#[inline]
pub fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// The size of a [`label_pair`] field.
#[inline]
pub fn label_pair_len(name: &str, value: &str) -> usize {
    field_len(field_len(name.len()) + field_len(value.len()))
}

/// A packed `sint64` field.
pub fn packed_sint(out: &mut Vec<u8>, tag: u32, values: &[i64]) {
    if values.is_empty() {
        return;
    }
    let len: usize = values.iter().map(|v| encoded_len_varint(zigzag(*v))).sum();
    len_prefix(out, tag, len);
    for v in values {
        encode_varint(zigzag(*v), out);
    }
}

/// One `LabelPair` (`name` 1, `value` 2) as field `tag`.
#[inline]
pub fn label_pair(out: &mut Vec<u8>, tag: u32, name: &str, value: &str) {
    len_prefix(out, tag, field_len(name.len()) + field_len(value.len()));
    bytes(out, 1, name.as_bytes());
    bytes(out, 2, value.as_bytes());
}

/// The pairs of a label set as `text::label_set` wrote it, unescaped, then `extra`, each a
/// `LabelPair` field `tag`; `scratch` holds an unescaped value.
pub fn label_pairs(
    out: &mut Vec<u8>,
    tag: u32,
    labels: &str,
    extra: Option<(&str, &str)>,
    scratch: &mut String,
) {
    // A label name is `[a-zA-Z_][a-zA-Z0-9_]*`: the first `=` after it starts the value. A
    // set without any `\` (nearly all) is split in place, each value ending at its first `"`.
    // The searches are `memchr`'s SIMD ones: std's `contains` on these short strings was an
    // eighth of the whole scrape, and a byte loop as slow. At a `\` the set is written again,
    // unescaping.
    let written = out.len();
    let bytes = labels.as_bytes();
    let mut at = 0;
    let mut plain = true;
    while let Some(eq) = memchr::memchr(b'=', &bytes[at..]) {
        let name = &labels[at..at + eq];
        let from = (at + eq + 2).min(bytes.len());
        let end = memchr::memchr2(b'"', b'\\', &bytes[from..]).map_or(bytes.len(), |e| from + e);
        if bytes.get(end) == Some(&b'\\') {
            plain = false;
            break;
        }
        // Every index is at an ASCII byte: the slices are on character boundaries.
        label_pair(out, tag, name.trim_start_matches(','), &labels[from..end]);
        at = (end + 1).min(bytes.len());
    }
    if plain {
        if let Some((k, v)) = extra {
            label_pair(out, tag, k, v);
        }
        return;
    }
    out.truncate(written);
    let mut rest = labels;
    while let Some(eq) = rest.find('=') {
        let name = rest[..eq].trim_start_matches(',');
        let after = rest.get(eq + 2..).unwrap_or("");
        scratch.clear();
        let mut end = after.len();
        let mut chars = after.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    end = i;
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => scratch.push('\n'),
                    Some((_, c)) => scratch.push(c),
                    None => {}
                },
                c => scratch.push(c),
            }
        }
        label_pair(out, tag, name, scratch);
        rest = after.get(end + 1..).unwrap_or("");
    }
    if let Some((k, v)) = extra {
        label_pair(out, tag, k, v);
    }
}

/// A series' label set as the text formats paste it (`a="x",b="y"`), escaped once when the
/// series is made, with its protobuf `LabelPair` fields (field 1 of a `Metric`) made at the
/// first protobuf scrape that reads them. A series' labels never change (a reload that renames
/// a profile or changes its steps makes new series), so neither form can go stale; a daemon no
/// protobuf scraper reads keeps no encoded form.
#[derive(Debug, Default)]
pub struct Labels {
    text: String,
    proto: OnceLock<Box<[u8]>>,
}

impl Labels {
    pub fn new(text: String) -> Labels {
        Labels {
            text,
            proto: OnceLock::new(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The `LabelPair` fields, made at the first call.
    pub fn proto(&self) -> &[u8] {
        self.proto.get_or_init(|| {
            let mut out = Vec::new();
            label_pairs(&mut out, 1, &self.text, None, &mut String::new());
            out.into_boxed_slice()
        })
    }
}

impl std::ops::Deref for Labels {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

/// Label sets encoded once as `LabelPair` fields 1 of a `Metric`, one after the other, for
/// series whose label sets outlive many scrapes (an SLO report's window and alert gauges): a
/// scrape copies each instead of reading its text again.
#[derive(Debug, Default, Clone)]
pub struct LabelSets {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl LabelSets {
    pub fn of<'a>(sets: impl Iterator<Item = &'a str>) -> LabelSets {
        let mut out = LabelSets::default();
        let mut scratch = String::new();
        for set in sets {
            label_pairs(&mut out.bytes, 1, set, None, &mut scratch);
            out.ends.push(out.bytes.len());
        }
        out
    }

    /// The `i`th set's fields.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let start = i
            .checked_sub(1)
            .map_or(Some(0), |p| self.ends.get(p).copied())?;
        self.bytes.get(start..*self.ends.get(i)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::proto::Metric;
    use crate::metrics::text::label_set;
    use prost::Message;

    #[test]
    fn label_sets_read_back_to_their_pairs() {
        let pairs = [
            ("target", "a\"b"),
            ("profile", "c\\d\ne,f=\"g"),
            ("step", ""),
            ("x", "\\"),
        ];
        let mut out = Vec::new();
        let mut scratch = String::new();
        label_pairs(
            &mut out,
            1,
            &label_set(&pairs),
            Some(("status", "200")),
            &mut scratch,
        );
        let m = Metric::decode(&out[..]).unwrap();
        let got: Vec<_> = m.label.iter().map(|l| (l.name(), l.value())).collect();
        let mut want = pairs.to_vec();
        want.push(("status", "200"));
        assert_eq!(got, want);
        out.clear();
        label_pairs(&mut out, 1, "", None, &mut scratch);
        assert!(out.is_empty());
    }

    #[test]
    fn kept_labels_are_the_pairs_read_in_place() {
        for set in [
            label_set(&[("target", "t"), ("profile", "p")]),
            label_set(&[("profile", "a\"b\\c\nd"), ("step", "")]),
            String::new(),
        ] {
            let kept = Labels::new(set.clone());
            assert_eq!(&*kept, set.as_str());
            let mut read = Vec::new();
            label_pairs(&mut read, 1, &set, None, &mut String::new());
            assert_eq!(kept.proto(), &read[..]);
            // Made once: the second call gives the same bytes, in the same place.
            assert!(std::ptr::eq(kept.proto(), kept.proto()));
            let mut extra = kept.proto().to_vec();
            label_pair(&mut extra, 1, "status", "200");
            assert_eq!(
                extra.len(),
                kept.proto().len() + label_pair_len("status", "200")
            );
        }
    }

    #[test]
    fn fields_are_prosts_encoding() {
        use crate::metrics::proto::{BucketSpan, Histogram};
        let h = Histogram {
            sample_count: Some(300),
            sample_sum: Some(1.5),
            schema: Some(-3),
            positive_span: vec![BucketSpan {
                offset: Some(-70),
                length: Some(2),
            }],
            positive_delta: vec![5, -3, i64::MIN, i64::MAX],
            ..Histogram::default()
        };
        let mut out = Vec::new();
        varint(&mut out, 1, 300);
        double(&mut out, 2, 1.5);
        sint(&mut out, 5, -3);
        let mut span = Vec::new();
        sint(&mut span, 1, -70);
        varint(&mut span, 2, 2);
        bytes(&mut out, 12, &span);
        packed_sint(&mut out, 13, &[5, -3, i64::MIN, i64::MAX]);
        assert_eq!(out, h.encode_to_vec());
    }
}
