//! The text of both exposition formats, classic Prometheus text 0.0.4 and OpenMetrics 1.0:
//! families, escaping and number formats (the writer that uses them is `encoder`). Hand-written because every family here is backed by our own atomics, and because one
//! scrape of a large config is tens of thousands of lines: label sets are escaped once when a
//! series is created and pasted here as ready-made strings, numbers are written without the
//! `fmt` machinery where it matters.
//!
//! The two formats differ only in family metadata: OpenMetrics names a counter family without
//! its `_total` suffix, may carry `# UNIT`, escapes `"` in HELP, wants canonical `le` values
//! (`1.0`, not `1`) and ends with `# EOF`.

use std::fmt::Write as _;

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

/// Writes a family's HELP text, escaped as the format wants it.
pub(super) fn escape_help_into(out: &mut String, help: &str, openmetrics: bool) {
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
}
