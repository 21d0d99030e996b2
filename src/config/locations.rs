//! Locations (issue 49): `server.location` (this daemon's name, a `location` label on every
//! series), `server.locations` (every location's API, this one included; `dns+http://` entries
//! name a DNS name whose A/AAAA records are the daemons), `server.resolver`, and an SLO's
//! `quorum: K` with its `quorum_bucket`; then the checks that need both sections.

use super::walk::{self, Ctx, node_at};
use super::yaml::Node;
use super::{Executor, Profile, Server, Slo};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// At most this many `server.locations` (each is asked at every quorum answer).
pub const MAX_LOCATIONS: usize = 64;

/// The bucket lengths a quorum may use: whole minutes that divide an hour, so buckets line
/// up with the hours the SLO windows keep beyond their minute ring.
pub const BUCKETS_MINUTES: [u64; 12] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60];

/// `server.location`, `server.locations` and `server.resolver`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Locations {
    /// `server.location`: this daemon's location, a `location` label on every series.
    pub me: Option<String>,
    /// `server.locations`: every location's API, this daemon's own included.
    pub list: Vec<Location>,
    /// `server.resolver`: the DNS server `dns+http://` entries are looked up at (else the
    /// machine's).
    pub resolver: Option<SocketAddr>,
}

/// One entry of `server.locations`.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    pub name: String,
    /// A base URL: `http://host:port`, or `dns+http://name:port` (every A/AAAA record of
    /// `name` is a daemon of this location, looked up again at every answer).
    pub url: String,
}

/// An SLO's `quorum`: its bucket is bad only when at least `k` locations were bad in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quorum {
    pub k: u32,
    /// The bucket length (`quorum_bucket`, or derived from the profiles' rate).
    pub bucket: Duration,
    /// Whether `bucket` was written (else derived by [`check`]).
    pub bucket_set: bool,
}

/// Whether `s` may be a location's name (it becomes a label value and a URL-free word).
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `location`, `locations` and `resolver` of the `server` section.
pub fn read_server(ctx: &mut Ctx, f: &walk::Fields, server: &mut Server) {
    if let Some(n) = f.get("location") {
        let p = f.path_of("location");
        match walk::string(ctx, n, &p) {
            Some(s) if valid_name(&s) => server.locations.me = Some(s),
            Some(s) => ctx.error(
                n.pos,
                &p,
                format!("`{s}` is not a location name: letters, digits, `-`, `_`, `.`, at most 63"),
            ),
            None => {}
        }
    }
    if let Some(n) = f.get("locations") {
        server.locations.list = locations(ctx, n, &f.path_of("locations"));
        let p = f.path_of("locations");
        match &server.locations.me {
            None if !f.has("location") => ctx.error(
                n.pos,
                &p,
                "`server.locations` needs `server.location`: this daemon's own name among them",
            ),
            Some(me) if !server.locations.list.iter().any(|l| &l.name == me) => {
                let names: Vec<&str> = server
                    .locations
                    .list
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect();
                ctx.error(
                    n.pos,
                    &p,
                    format!(
                        "this daemon's location `{me}` is not listed (locations: {}): list every \
                         location, this one included",
                        names.join(", ")
                    ),
                );
            }
            _ => {}
        }
    }
    if let Some(n) = f.get("resolver") {
        let p = f.path_of("resolver");
        if let Some(s) = walk::string(ctx, n, &p) {
            match s.trim().parse::<SocketAddr>() {
                Ok(a) => server.locations.resolver = Some(a),
                Err(_) => ctx.error(
                    n.pos,
                    &p,
                    format!("`{s}` is not a DNS server address like `10.96.0.10:53`"),
                ),
            }
        }
    }
}

/// `server.locations`: a list of `{name, url}`, names unique.
fn locations(ctx: &mut Ctx, node: &Node, path: &str) -> Vec<Location> {
    let items = walk::seq(ctx, node, path);
    if items.len() > MAX_LOCATIONS {
        ctx.error(
            node.pos,
            path,
            format!("{} locations: at most {MAX_LOCATIONS}", items.len()),
        );
        return Vec::new();
    }
    let mut out: Vec<Location> = Vec::new();
    for (i, n) in items.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(f) = walk::fields(ctx, n, &p, &["name", "url"]) else {
            continue;
        };
        let name = walk::required(ctx, &f, "name", |c, n, p| {
            let s = walk::string(c, n, p)?;
            if !valid_name(&s) {
                c.error(
                    n.pos,
                    p,
                    format!("`{s}` is not a location name: letters, digits, `-`, `_`, `.`"),
                );
                return None;
            }
            Some(s)
        });
        let url = walk::required(ctx, &f, "url", base_url);
        let (Some(name), Some(url)) = (name, url) else {
            continue;
        };
        if out.iter().any(|l| l.name == name) {
            let pos = f.get("name").map_or(n.pos, |n| n.pos);
            ctx.error(
                pos,
                &f.path_of("name"),
                format!("location `{name}` is listed twice"),
            );
            continue;
        }
        out.push(Location { name, url });
    }
    out
}

/// A location's or peer's base URL: `http://host:port` or `dns+http://name:port`, no query.
pub fn base_url(ctx: &mut Ctx, n: &Node, p: &str) -> Option<String> {
    let s = walk::string(ctx, n, p)?;
    let s = s.trim();
    let plain = s.strip_prefix("dns+").unwrap_or(s);
    match plain.parse::<http::Uri>() {
        Ok(u)
            if u.scheme_str() == Some("http") && u.authority().is_some() && u.query().is_none() =>
        {
            if s.starts_with("dns+") && u.port_u16().is_none() {
                ctx.error(
                    n.pos,
                    p,
                    format!("`{s}`: a `dns+http://` entry needs its port (`dns+http://name:9090`)"),
                );
                return None;
            }
            Some(s.trim_end_matches('/').to_string())
        }
        _ => {
            ctx.error(
                n.pos,
                p,
                format!(
                    "`{s}` is not an API address like `http://10.0.0.7:9090` or \
                     `dns+http://sloburn.eu.svc:9090`"
                ),
            );
            None
        }
    }
}

/// An SLO's `quorum` and `quorum_bucket` (the bucket's default comes later, from [`check`]).
pub fn read_slo(ctx: &mut Ctx, f: &walk::Fields) -> Option<Quorum> {
    let bucket = f.get("quorum_bucket").and_then(|n| {
        let p = f.path_of("quorum_bucket");
        let d = walk::duration(ctx, n, &p)?;
        let ok = d.subsec_nanos() == 0
            && d.as_secs() % 60 == 0
            && BUCKETS_MINUTES.contains(&(d.as_secs() / 60));
        if !ok {
            ctx.error(
                n.pos,
                &p,
                "a quorum bucket is whole minutes that divide an hour: 1m, 2m, 3m, 4m, 5m, 6m, \
                 10m, 12m, 15m, 20m, 30m or 1h",
            );
            return None;
        }
        Some(d)
    });
    let Some(n) = f.get("quorum") else {
        if let (Some(_), Some(n)) = (bucket, f.get("quorum_bucket")) {
            ctx.error(
                n.pos,
                &f.path_of("quorum_bucket"),
                "`quorum_bucket` goes with `quorum`",
            );
        }
        return None;
    };
    let p = f.path_of("quorum");
    let k = match walk::unsigned(ctx, n, &p)? {
        k @ 1..=64 => k as u32,
        _ => {
            ctx.error(n.pos, &p, "a quorum is from 1 to the number of locations");
            return None;
        }
    };
    Some(Quorum {
        k,
        bucket: bucket.unwrap_or(Duration::from_secs(60)),
        bucket_set: bucket.is_some(),
    })
}

/// Checks that need `server` and `slos` both: a quorum needs `server.location` and at most as
/// many locations as listed; an unwritten bucket is derived from the profiles' rate.
pub fn check(
    ctx: &mut Ctx,
    slos_node: Option<&Node>,
    server: Option<&Server>,
    profiles: &BTreeMap<String, Profile>,
    slos: &mut BTreeMap<String, Slo>,
) {
    let at = |name: &str| {
        let entry = match slos_node.map(|n| &n.value) {
            Some(super::yaml::Value::Map(entries)) => {
                entries.iter().find(|(k, _)| k.name == name).map(|(_, v)| v)
            }
            _ => None,
        };
        node_at(entry, &["quorum"])
    };
    for s in slos.values_mut() {
        let Some(mut q) = s.quorum else { continue };
        let name = s
            .group
            .as_ref()
            .map_or(s.name.as_str(), |g| g.parent.as_str());
        let (pos, path) = (at(name), format!("slos.{name}.quorum"));
        let Some(server) = server else { continue };
        if server.locations.me.is_none() {
            ctx.error(
                pos,
                &path,
                "`quorum` needs `server.location` (this daemon's name) and `server.locations`",
            );
            continue;
        }
        let n = server.locations.list.len().max(1);
        if q.k as usize > n {
            let names: Vec<&str> = server
                .locations
                .list
                .iter()
                .map(|l| l.name.as_str())
                .collect();
            ctx.error(
                pos,
                &path,
                format!(
                    "quorum {} of {n} location(s) ({}): at most {n}",
                    q.k,
                    if names.is_empty() {
                        server.locations.me.clone().unwrap_or_default()
                    } else {
                        names.join(", ")
                    }
                ),
            );
        }
        if !q.bucket_set {
            q.bucket = default_bucket(feeding_rate(s, profiles), s.objective / 100.0);
            s.quorum = Some(q);
        }
    }
}

/// Iterations a second the profiles feeding `slo` send while they run (a VU profile: one a
/// second a VU, a low guess so the bucket errs long).
fn feeding_rate(slo: &Slo, profiles: &BTreeMap<String, Profile>) -> f64 {
    profiles
        .values()
        .filter(|p| {
            p.target == slo.target && (slo.profiles.is_empty() || slo.profiles.contains(&p.name))
        })
        .map(|p| match &p.executor {
            Executor::ConstantArrivalRate { rate, .. } => *rate,
            Executor::RampingArrivalRate {
                start_rate, stages, ..
            } => {
                let all: Vec<f64> = std::iter::once(*start_rate)
                    .chain(stages.iter().map(|s| s.target))
                    .collect();
                all.iter().sum::<f64>() / all.len() as f64
            }
            Executor::ConstantVus { vus, .. }
            | Executor::SharedIterations { vus, .. }
            | Executor::PerVuIterations { vus, .. } => f64::from(*vus),
            Executor::RampingVus { start_vus, .. } => f64::from((*start_vus).max(1)),
        })
        .sum()
}

/// The shortest bucket in which `rate` brings at least `1 / (1 − objective)` events, so one
/// bad request alone never makes a location bad; an hour when none does.
pub fn default_bucket(rate: f64, objective: f64) -> Duration {
    let need = (1.0 / (1.0 - objective)).ceil();
    BUCKETS_MINUTES
        .iter()
        .find(|m| rate * 60.0 * **m as f64 >= need)
        .map_or(Duration::from_secs(3600), |m| Duration::from_secs(m * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_bucket_holds_enough_events_for_one_bad_to_stay_in_budget() {
        // 99 %: 100 events; 10/s brings 600 a minute.
        assert_eq!(default_bucket(10.0, 0.99), Duration::from_secs(60));
        // 99.9 %: 1,000 events; 5/s brings 300 a minute, 1,200 in 4.
        assert_eq!(default_bucket(5.0, 0.999), Duration::from_secs(240));
        // 99.99 % at 1/s: 10,000 events need almost three hours: an hour.
        assert_eq!(default_bucket(1.0, 0.9999), Duration::from_secs(3600));
        assert_eq!(default_bucket(0.0, 0.99), Duration::from_secs(3600));
    }

    #[test]
    fn names() {
        assert!(valid_name("eu-west-1"));
        assert!(valid_name("a"));
        assert!(!valid_name(""));
        assert!(!valid_name("-a"));
        assert!(!valid_name("a b"));
        assert!(!valid_name("a\"b"));
    }
}
