//! The process's CPU cgroup: where its `cpu.stat` is (cgroup v1's `cpu` controller or v2's
//! unified tree, found from `/proc/self/cgroup`), its throttling counters, and the CPU quota
//! (`cpu.cfs_quota_us`/`cpu.cfs_period_us` or `cpu.max`, the lowest of the cgroup and its
//! ancestors: Kubernetes sets one on the pod and one on the container).
//!
//! Files are opened once and read again with `pread` at offset 0, one syscall a sample.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy the counters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// The process's CPU cgroup, its `cpu.stat` open.
pub struct Cgroup {
    pub version: Version,
    pub dir: PathBuf,
    stat: File,
}

/// Throttling counters as the kernel keeps them since the cgroup was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttling {
    /// Periods in which the cgroup ran out of quota.
    pub periods: u64,
    /// Time its tasks were held off the CPU for it, in nanoseconds (v1 sums it over CPUs).
    pub nanos: u64,
}

/// A CFS quota: `quota` of CPU time per `period`, both in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    pub quota_us: u64,
    pub period_us: u64,
}

impl Quota {
    /// CPUs' worth of time the quota allows (`limits.cpu` in cores).
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }
}

/// Mount points tried for the v1 `cpu` controller.
const V1_MOUNTS: [&str; 3] = [
    "/sys/fs/cgroup/cpu",
    "/sys/fs/cgroup/cpu,cpuacct",
    "/sys/fs/cgroup/cpuacct,cpu",
];
const V2_MOUNTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

impl Cgroup {
    /// The process's CPU cgroup, or why none can be read.
    pub fn find() -> Result<Cgroup, String> {
        let text = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let (v1, v2) = paths(&text);
        if let Some(rel) = v1 {
            for mount in V1_MOUNTS {
                if let Some(c) = open(Version::V1, mount, &rel) {
                    return Ok(c);
                }
            }
        }
        if let Some(rel) = v2 {
            for mount in V2_MOUNTS {
                if let Some(c) = open(Version::V2, mount, &rel) {
                    return Ok(c);
                }
            }
        }
        Err(
            "no cpu.stat for this process's cgroup (no cgroup v1 `cpu` controller or v2 \
             `cpu` controller mounted)"
                .into(),
        )
    }

    /// The throttling counters now.
    pub fn throttling(&self) -> Option<Throttling> {
        let mut buf = [0u8; 512];
        let n = self.stat.read_at(&mut buf, 0).ok()?;
        parse_stat(std::str::from_utf8(&buf[..n]).ok()?, self.version)
    }

    /// The lowest quota of the cgroup and its ancestors up to the mount (`None`: unlimited).
    pub fn quota(&self) -> Option<Quota> {
        let mut lowest: Option<Quota> = None;
        let mut dir = Some(self.dir.as_path());
        while let Some(d) = dir {
            if let Some(q) = read_quota(d, self.version)
                && lowest.is_none_or(|l| q.cpus() < l.cpus())
            {
                lowest = Some(q);
            }
            dir = d.parent().filter(|p| p.join("cpu.stat").exists());
        }
        lowest
    }
}

/// The v1 `cpu` controller's path and the v2 path from `/proc/self/cgroup`'s lines
/// (`1:cpu,cpuacct:/kubepods/…`, `0::/…`).
fn paths(text: &str) -> (Option<String>, Option<String>) {
    let (mut v1, mut v2) = (None, None);
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if ctrl.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrl.split(',').any(|c| c == "cpu") {
            v1 = Some(path.to_string());
        }
    }
    (v1, v2)
}

/// The cgroup's directory under `mount`: its own path, else the mount itself (in a container's
/// cgroup namespace the process's cgroup is the mount's root).
fn open(version: Version, mount: &str, rel: &str) -> Option<Cgroup> {
    let own = Path::new(mount).join(rel.trim_start_matches('/'));
    for dir in [own, PathBuf::from(mount)] {
        if let Ok(stat) = File::open(dir.join("cpu.stat")) {
            let c = Cgroup { version, dir, stat };
            if c.throttling().is_some() {
                return Some(c);
            }
        }
    }
    None
}

/// `nr_throttled` and `throttled_time` (v1, ns) or `throttled_usec` (v2).
pub fn parse_stat(text: &str, version: Version) -> Option<Throttling> {
    let (mut periods, mut nanos) = (None, None);
    for line in text.lines() {
        let mut kv = line.split_ascii_whitespace();
        let (Some(k), Some(v)) = (kv.next(), kv.next()) else {
            continue;
        };
        let v: u64 = v.parse().ok()?;
        match (k, version) {
            ("nr_throttled", _) => periods = Some(v),
            ("throttled_time", Version::V1) => nanos = Some(v),
            ("throttled_usec", Version::V2) => nanos = Some(v.saturating_mul(1000)),
            _ => {}
        }
    }
    Some(Throttling {
        periods: periods?,
        nanos: nanos?,
    })
}

fn read_quota(dir: &Path, version: Version) -> Option<Quota> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    match version {
        Version::V1 => {
            let quota: i64 = read("cpu.cfs_quota_us")?.trim().parse().ok()?;
            let period: u64 = read("cpu.cfs_period_us")?.trim().parse().ok()?;
            (quota > 0).then_some(Quota {
                quota_us: quota as u64,
                period_us: period,
            })
        }
        Version::V2 => parse_max(&read("cpu.max")?),
    }
}

/// v2's `cpu.max`: `max 100000` (unlimited) or `8000 100000`.
pub fn parse_max(text: &str) -> Option<Quota> {
    let mut it = text.split_ascii_whitespace();
    let quota = it.next()?.parse().ok()?;
    let period = it.next().map_or(Some(100_000), |p| p.parse().ok())?;
    Some(Quota {
        quota_us: quota,
        period_us: period,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_versions_counters_and_quotas() {
        let v1 = "nr_periods 30\nnr_throttled 29\nthrottled_time 2558521080\nnr_bursts 0\n";
        assert_eq!(
            parse_stat(v1, Version::V1),
            Some(Throttling {
                periods: 29,
                nanos: 2_558_521_080
            })
        );
        let v2 = "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 4\nnr_throttled 3\n\
                  throttled_usec 250000\n";
        assert_eq!(
            parse_stat(v2, Version::V2),
            Some(Throttling {
                periods: 3,
                nanos: 250_000_000
            })
        );
        // v2 without the cpu controller has no throttling lines: not a cgroup to read.
        assert_eq!(parse_stat("usage_usec 10\n", Version::V2), None);
        assert_eq!(parse_max("max 100000\n"), None);
        assert_eq!(parse_max("8000 100000\n").map(|q| q.cpus()), Some(0.08));
    }

    #[test]
    fn finds_the_cpu_controllers_path_in_either_hierarchy() {
        let text = "12:memory:/x\n3:cpu,cpuacct:/kubepods/pod1/c1\n0::/system.slice/a\n";
        assert_eq!(
            paths(text),
            (
                Some("/kubepods/pod1/c1".into()),
                Some("/system.slice/a".into())
            )
        );
        assert_eq!(paths("0::/\n"), (None, Some("/".into())));
    }
}
