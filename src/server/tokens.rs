//! Bearer tokens on a server: compared in constant time (`subtle`), and wrong ones limited by
//! the source that sent them.
//!
//! The token is compared first, so a right one is served whatever the limiter holds: a flood
//! of wrong tokens from one source never locks out a right token from another (nor from the
//! same one). Wrong tokens are counted per source in one-second windows; past
//! [`PER_SOURCE_PER_SECOND`] in a window that source's wrong tokens are answered 429 until the
//! window ends, without being checked, counted or logged one by one.
//!
//! A source is an IPv4 address, or an IPv6 address's /64 (one host often holds a whole /64);
//! an IPv4-mapped IPv6 address is its IPv4 one. The map of sources is bounded: at most
//! [`MAX_SOURCES`] (about 100 KB); when it is full, windows that have ended are dropped, and
//! if every one is live, sources not in the map share one window of their own
//! (`overflow`). A right token never reads the map.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::time::Instant;

/// Wrong tokens one source may send per one-second window before it is answered 429.
pub const PER_SOURCE_PER_SECOND: u32 = 20;
/// Sources with a window of their own.
pub const MAX_SOURCES: usize = 4096;

const WINDOW: Duration = Duration::from_secs(1);

/// Whether `given` is one of `tokens`: each compared in constant time for equal lengths (the
/// length of a token is not secret), and every one compared.
pub fn token_matches(given: &str, tokens: &[&str]) -> bool {
    tokens.iter().fold(false, |ok, t| {
        ok | bool::from(given.as_bytes().ct_eq(t.as_bytes()))
    })
}

/// Where a request came from, as the limiter keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    V4([u8; 4]),
    /// The first 64 bits of an IPv6 address.
    V6Prefix([u8; 8]),
    /// Unknown (a request served without a socket: the in-process tests' `oneshot`).
    Unknown,
}

impl Source {
    pub fn of(ip: Option<IpAddr>) -> Source {
        match ip.map(|ip| ip.to_canonical()) {
            Some(IpAddr::V4(v4)) => Source::V4(v4.octets()),
            Some(IpAddr::V6(v6)) => {
                let o = v6.octets();
                let mut prefix = [0u8; 8];
                prefix.copy_from_slice(&o[..8]);
                Source::V6Prefix(prefix)
            }
            None => Source::Unknown,
        }
    }
}

/// Wrong tokens by source, and the throttle of their log line.
#[derive(Default)]
pub struct WrongTokens {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    sources: HashMap<Source, Window>,
    /// The one window of sources the full map has no room for.
    overflow: Window,
    /// When ended windows were last dropped (at most once a window, so a flood from many
    /// sources does not sweep the map on every token).
    last_sweep: Option<Instant>,
    last_log: Option<Instant>,
    unlogged: u64,
}

#[derive(Default, Clone, Copy)]
struct Window {
    start: Option<Instant>,
    count: u32,
}

impl Window {
    fn live(&self, now: Instant) -> bool {
        self.start.is_some_and(|s| now.duration_since(s) < WINDOW)
    }

    fn full(&self, now: Instant) -> bool {
        self.live(now) && self.count >= PER_SOURCE_PER_SECOND
    }

    fn add(&mut self, now: Instant) {
        if self.live(now) {
            self.count += 1;
        } else {
            *self = Window {
                start: Some(now),
                count: 1,
            };
        }
    }
}

impl WrongTokens {
    /// Whether `source` has sent its wrong tokens for the current window: its next wrong one
    /// is answered 429.
    pub fn limited(&self, source: Source, now: Instant) -> bool {
        let Ok(t) = self.inner.lock() else {
            return false;
        };
        t.sources.get(&source).unwrap_or(&t.overflow).full(now)
    }

    /// Counts one wrong token from `source`; returns how many to log now (the first of a quiet
    /// second, with those not yet logged), or `None` while a line was written less than a
    /// second ago.
    pub fn record(&self, source: Source, now: Instant) -> Option<u64> {
        let mut t = self.inner.lock().ok()?;
        if !t.sources.contains_key(&source)
            && t.sources.len() >= MAX_SOURCES
            && t.last_sweep.is_none_or(|s| now.duration_since(s) >= WINDOW)
        {
            t.last_sweep = Some(now);
            t.sources.retain(|_, w| w.live(now));
        }
        if t.sources.contains_key(&source) || t.sources.len() < MAX_SOURCES {
            t.sources.entry(source).or_default().add(now);
        } else {
            t.overflow.add(now);
        }
        t.unlogged += 1;
        t.due(now)
    }

    /// Wrong tokens not yet logged once a second has passed since the last line (the
    /// daemon's one-second tick calls this, so the last burst is logged too).
    pub fn take_unlogged(&self, now: Instant) -> Option<u64> {
        self.inner.lock().ok()?.due(now)
    }

    /// Sources with a window of their own (for tests of the bound).
    pub fn sources(&self) -> usize {
        self.inner.lock().map(|t| t.sources.len()).unwrap_or(0)
    }
}

impl Inner {
    fn due(&mut self, now: Instant) -> Option<u64> {
        let quiet = self
            .last_log
            .is_none_or(|l| now.duration_since(l) >= WINDOW);
        if quiet && self.unlogged > 0 {
            self.last_log = Some(now);
            Some(std::mem::take(&mut self.unlogged))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const A: Source = Source::V4([127, 0, 0, 1]);
    const B: Source = Source::V4([127, 0, 0, 2]);

    #[test]
    fn wrong_tokens_are_limited_per_second_and_logged_once_a_second() {
        let f = WrongTokens::default();
        let t0 = crate::clock::tokio_instant();
        assert!(!f.limited(A, t0));
        assert_eq!(f.record(A, t0), Some(1));
        for i in 1..PER_SOURCE_PER_SECOND {
            assert!(!f.limited(A, t0 + Duration::from_millis(i as u64)));
            assert_eq!(f.record(A, t0 + Duration::from_millis(i as u64)), None);
        }
        assert!(f.limited(A, t0 + Duration::from_millis(500)));
        assert_eq!(f.take_unlogged(t0 + Duration::from_millis(500)), None);
        let later = t0 + Duration::from_millis(1001);
        assert!(!f.limited(A, later));
        assert_eq!(
            f.take_unlogged(later),
            Some(PER_SOURCE_PER_SECOND as u64 - 1)
        );
        assert_eq!(f.take_unlogged(later + Duration::from_secs(5)), None);
    }

    #[test]
    fn one_source_limited_leaves_the_others_alone() {
        let f = WrongTokens::default();
        let t0 = crate::clock::tokio_instant();
        for _ in 0..PER_SOURCE_PER_SECOND {
            f.record(A, t0);
        }
        assert!(f.limited(A, t0));
        assert!(!f.limited(B, t0));
        assert!(!f.limited(Source::Unknown, t0));
    }

    #[test]
    fn the_map_of_sources_is_bounded_and_overflow_shares_one_window() {
        let f = WrongTokens::default();
        let t0 = crate::clock::tokio_instant();
        for i in 0..(MAX_SOURCES as u32 + 100) {
            f.record(Source::V4(i.to_be_bytes()), t0);
        }
        assert_eq!(f.sources(), MAX_SOURCES);
        // The sources past the bound share a window: 100 wrong tokens fill it.
        let late = Source::V4((MAX_SOURCES as u32 + 50).to_be_bytes());
        assert!(f.limited(late, t0));
        // A source in the map keeps its own window (one wrong token).
        assert!(!f.limited(Source::V4(7u32.to_be_bytes()), t0));
        // A second later the ended windows make room again.
        let later = t0 + Duration::from_millis(1500);
        f.record(late, later);
        assert_eq!(f.sources(), 1);
        assert!(!f.limited(late, later));
    }

    #[test]
    fn sources_are_v4_addresses_and_v6_prefixes() {
        let v6 = |s: &str| Source::of(Some(IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())));
        assert_eq!(v6("2001:db8:1:2::1"), v6("2001:db8:1:2:ffff::9"));
        assert_ne!(v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1"));
        assert_eq!(
            v6("::ffff:127.0.0.2"),
            Source::of(Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))))
        );
        assert_eq!(Source::of(None), Source::Unknown);
    }

    #[test]
    fn tokens_match_only_whole() {
        assert!(token_matches("s3cret", &["other", "s3cret"]));
        assert!(!token_matches("s3cre", &["s3cret"]));
        assert!(!token_matches("s3cret ", &["s3cret"]));
        assert!(!token_matches("", &[]));
    }
}
