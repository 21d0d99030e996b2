//! The standard `process_*` metrics, read from `/proc/self` on Linux at scrape time, with the
//! meanings client_golang gives them. Elsewhere (or when `/proc` is unreadable) they are absent
//! rather than zero: a zero would be a made-up value.

/// One scrape's process figures; each is `None` when it could not be read.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_memory_bytes: Option<f64>,
    pub virtual_memory_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub start_time_seconds: Option<f64>,
}

#[cfg(target_os = "linux")]
pub fn read() -> ProcessStats {
    let (ticks, page) = linux::units();
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let fields = stat.as_deref().and_then(linux::stat_fields);
    let field = |i: usize| -> Option<f64> { fields.as_ref()?.get(i)?.parse::<f64>().ok() };
    let cpu_seconds = match (field(linux::UTIME), field(linux::STIME), ticks) {
        (Some(u), Some(s), Some(t)) => Some((u + s) / t),
        _ => None,
    };
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| linux::boot_time(&s));
    let start_time_seconds = match (field(linux::STARTTIME), ticks, boot) {
        (Some(start), Some(t), Some(boot)) => Some(boot + start / t),
        _ => None,
    };
    ProcessStats {
        cpu_seconds,
        resident_memory_bytes: field(linux::RSS).zip(page).map(|(r, p)| r * p),
        virtual_memory_bytes: field(linux::VSIZE),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as f64),
        max_fds: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|s| linux::max_open_files(&s)),
        start_time_seconds,
    }
}

#[cfg(not(target_os = "linux"))]
pub fn read() -> ProcessStats {
    ProcessStats::default()
}

#[cfg(target_os = "linux")]
mod linux {
    //! Parsers for the `/proc` files, kept pure so they are tested on fixed text.

    /// Indices into the fields after the `(comm)` of `/proc/self/stat` (proc(5) numbers − 3).
    pub const UTIME: usize = 11;
    pub const STIME: usize = 12;
    pub const STARTTIME: usize = 19;
    pub const VSIZE: usize = 20;
    pub const RSS: usize = 21;

    /// The fields after the command name, which may itself contain spaces and parentheses,
    /// hence the split at the last `)`.
    pub fn stat_fields(stat: &str) -> Option<Vec<&str>> {
        let rest = &stat[stat.rfind(')')? + 1..];
        Some(rest.split_whitespace().collect())
    }

    pub fn boot_time(proc_stat: &str) -> Option<f64> {
        proc_stat
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The soft limit of "Max open files"; `None` when unlimited.
    pub fn max_open_files(limits: &str) -> Option<f64> {
        limits
            .lines()
            .find_map(|l| l.strip_prefix("Max open files"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    }

    /// Clock ticks per second and the page size, as the kernel reports them.
    pub fn units() -> (Option<f64>, Option<f64>) {
        // SAFETY: sysconf only reads a configuration value; it has no memory preconditions.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let positive = |v: libc::c_long| (v > 0).then_some(v as f64);
        (positive(ticks), positive(page))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn stat_fields_survive_spaces_and_parens_in_the_command() {
            let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 \
                        1000 123456789 512 18446744073709551615";
            let f = stat_fields(stat).unwrap();
            assert_eq!(f[0], "S");
            assert_eq!(f[UTIME], "250");
            assert_eq!(f[STIME], "50");
            assert_eq!(f[STARTTIME], "1000");
            assert_eq!(f[VSIZE], "123456789");
            assert_eq!(f[RSS], "512");
            assert_eq!(stat_fields("no parens"), None);
        }

        #[test]
        fn limits_and_boot_time() {
            let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                          Max open files            1024                 1048576              files\n";
            assert_eq!(max_open_files(limits), Some(1024.0));
            assert_eq!(
                max_open_files("Max open files  unlimited  unlimited  files"),
                None
            );
            assert_eq!(boot_time("cpu 1 2\nbtime 1700000000\n"), Some(1.7e9));
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn this_process_is_readable() {
        let p = super::read();
        assert!(p.cpu_seconds.is_some_and(|v| v >= 0.0), "{p:?}");
        assert!(p.resident_memory_bytes.is_some_and(|v| v > 0.0), "{p:?}");
        assert!(p.virtual_memory_bytes.is_some_and(|v| v > 0.0), "{p:?}");
        assert!(p.open_fds.is_some_and(|v| v >= 3.0), "{p:?}");
        assert!(p.max_fds.is_some_and(|v| v >= 1.0), "{p:?}");
        // Started after 2020 and not in the future.
        let now = crate::clock::system_time()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            p.start_time_seconds
                .is_some_and(|v| v > 1.577e9 && v <= now + 1.0),
            "{p:?}"
        );
    }
}
