//! The process's open-file limit. Every VU holds one connection, so a profile whose VUs cannot
//! all get a file descriptor would fail on sloburn's side, not the target's. At start-up the
//! soft limit is raised to the hard one; a profile that still cannot fit is refused (`check`,
//! `run`) or warned about (`serve`). A leaf: it imports nothing from the crate.

/// Descriptors sloburn needs besides its connections: stdio, the listener and its accepted
/// scrapes, the SLO store and its journal, the runtime's epoll and wakers, DNS sockets, the
/// config file, and slack.
pub const RESERVED_FDS: u64 = 64;

/// `RLIMIT_NOFILE` as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    pub soft: u64,
    pub hard: u64,
}

fn get() -> std::io::Result<libc::rlimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rl)
}

/// A limit as a count: `rlim_t` is unsigned on Linux and macOS, signed on the BSDs (whose
/// `RLIM_INFINITY` is `i64::MAX`); a negative one, which no kernel gives, counts as none.
#[allow(clippy::useless_conversion, clippy::unnecessary_fallible_conversions)]
fn count(v: libc::rlim_t) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The limit now.
pub fn nofile() -> std::io::Result<FdLimit> {
    let rl = get()?;
    Ok(FdLimit {
        soft: count(rl.rlim_cur),
        hard: count(rl.rlim_max),
    })
}

/// Raises the soft limit to the hard limit (what any unprivileged process may do) and returns
/// the limit in force afterwards.
pub fn raise_nofile() -> std::io::Result<FdLimit> {
    let mut rl = get()?;
    if rl.rlim_cur < rl.rlim_max {
        rl.rlim_cur = rl.rlim_max;
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    nofile()
}

/// Whether `connections` at once fit under `limit` with [`RESERVED_FDS`] to spare; the error
/// says what to change.
pub fn fits(connections: u64, limit: FdLimit) -> Result<(), String> {
    if connections.saturating_add(RESERVED_FDS) <= limit.soft {
        return Ok(());
    }
    Err(format!(
        "up to {connections} VUs need {connections} connections, but the open-file limit is {} \
         (hard limit {}; sloburn keeps {RESERVED_FDS} for itself): raise `ulimit -n` (or the \
         container's nofile limit) or lower the VUs",
        limit.soft, limit.hard
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_keeps_room_for_sloburn_itself() {
        let l = FdLimit {
            soft: 1024,
            hard: 4096,
        };
        assert!(fits(960, l).is_ok());
        let e = fits(961, l).unwrap_err();
        assert!(
            e.contains("961 connections") && e.contains("limit is 1024"),
            "{e}"
        );
        assert!(fits(u64::MAX, l).is_err(), "no overflow");
    }

    #[test]
    fn raising_never_lowers_and_reaches_the_hard_limit() {
        let before = nofile().unwrap();
        let after = raise_nofile().unwrap();
        assert_eq!(after.hard, before.hard);
        assert_eq!(after.soft, after.hard);
    }
}
