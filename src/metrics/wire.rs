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

use prost::encoding::{encode_varint, encoded_len_varint};

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

fn key(out: &mut Vec<u8>, tag: u32, wire: u64) {
    encode_varint((u64::from(tag) << 3) | wire, out);
}

/// A `uint64`, `int64` (as its two's complement) or enum field.
pub fn varint(out: &mut Vec<u8>, tag: u32, v: u64) {
    key(out, tag, VARINT);
    encode_varint(v, out);
}

pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// A `sint32` or `sint64` field.
pub fn sint(out: &mut Vec<u8>, tag: u32, v: i64) {
    varint(out, tag, zigzag(v));
}

pub fn double(out: &mut Vec<u8>, tag: u32, v: f64) {
    key(out, tag, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `string`, `bytes` or message field whose body is `body`.
pub fn bytes(out: &mut Vec<u8>, tag: u32, body: &[u8]) {
    len_prefix(out, tag, body.len());
    out.extend_from_slice(body);
}

/// The key and length of a length-delimited field whose `len` bytes follow.
pub fn len_prefix(out: &mut Vec<u8>, tag: u32, len: usize) {
    key(out, tag, LEN);
    encode_varint(len as u64, out);
}

/// The size of a field with a one-byte key holding `len` bytes.
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// A packed `sint64` field.
pub fn packed_sint(out: &mut Vec<u8>, tag: u32, values: &[i64]) {
    if values.is_empty() {
        return;
    }
    let len: usize = values
        .iter()
        .map(|v| encoded_len_varint(zigzag(*v)))
        .sum();
    len_prefix(out, tag, len);
    for v in values {
        encode_varint(zigzag(*v), out);
    }
}

/// One `LabelPair` (`name` 1, `value` 2) as field `tag`.
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
    let mut rest = labels;
    while let Some((name, after)) = rest.split_once("=\"") {
        let name = name.trim_start_matches(',');
        // The value ends at the first `"` that no `\` escapes.
        let bytes = after.as_bytes();
        let mut end = bytes.len();
        let mut escaped = false;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => {
                    escaped = true;
                    i += 1;
                }
                b'"' => {
                    end = i;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let raw = &after[..end.min(after.len())];
        if escaped {
            scratch.clear();
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some('n') => scratch.push('\n'),
                        Some(c) => scratch.push(c),
                        None => {}
                    },
                    c => scratch.push(c),
                }
            }
            label_pair(out, tag, name, scratch);
        } else {
            label_pair(out, tag, name, raw);
        }
        rest = after.get(end + 1..).unwrap_or("");
    }
    if let Some((k, v)) = extra {
        label_pair(out, tag, k, v);
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
