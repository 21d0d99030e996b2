//! The pure parts of journeys (multi-step iterations): templates, data files, captures, the
//! weighted mix and think times. No I/O and no clock: the runner passes time and values in.
//! The steps themselves, which hold checks, live in `load::iteration`.

pub mod capture;
pub mod data;
pub mod mix;
pub mod template;

pub use capture::{Capture, Source};
pub use data::{Cursor, DataError, DataSet, MAX_COLUMNS, Order, Row};
pub use mix::Mix;
pub use template::{Escape, Scope, Template, TemplateError, URL_VALUE, Values, k6_name};

use std::time::Duration;

/// A pause after a step: fixed, or uniform in `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Think {
    pub min: Duration,
    pub max: Duration,
}

impl Think {
    /// `200ms` or `200ms..800ms`.
    pub fn parse(text: &str) -> Result<Think, String> {
        let parse = |s: &str| {
            crate::units::parse_duration(s.trim()).map_err(|e| format!("`{}`: {e}", s.trim()))
        };
        let (min, max) = match text.split_once("..") {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => {
                let d = parse(text)?;
                (d, d)
            }
        };
        if min > max {
            return Err(format!("`{text}`: the lower bound is above the upper"));
        }
        if max > Duration::from_secs(3600) {
            return Err(format!("`{text}`: think time is at most 1h"));
        }
        Ok(Think { min, max })
    }

    /// This pause: `min` plus a uniform share of the range (`unit` in `[0, 1)`).
    pub fn pick(&self, unit: f64) -> Duration {
        let span = self.max.saturating_sub(self.min);
        self.min + span.mul_f64(unit.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_times_parse_and_pick_within_the_range() {
        let t = Think::parse("200ms..800ms").unwrap();
        assert_eq!(t.pick(0.0), Duration::from_millis(200));
        assert_eq!(t.pick(0.5), Duration::from_millis(500));
        assert_eq!(
            Think::parse("1s").unwrap().pick(0.9),
            Duration::from_secs(1)
        );
        assert!(Think::parse("800ms..200ms").unwrap_err().contains("above"));
        assert!(Think::parse("2h").unwrap_err().contains("at most"));
        assert!(Think::parse("soon").is_err());
    }
}
