//! The heap of a daemon that is idle between runs. glibc's malloc gives threads their own arenas
//! (up to 8 per core) and keeps what a run freed inside them, so without help an idle `serve`
//! holds the peak of its last run: with 1,000 profiles starting on the same minute that was
//! 1.2 GB kept after every run had ended. `serve` caps the arenas when it starts and hands the
//! free pages back to the kernel when its last active run ends. A leaf: it imports nothing from
//! the crate; on other C libraries the malloc calls do nothing. When idle it also unmaps its code
//! pages (they stay in the page cache). glibc's per-thread cache of freed blocks is turned off
//! for `serve` by re-executing the binary once with a `GLIBC_TUNABLES` setting: glibc reads its
//! tunables only at exec, and cached blocks pin pages that `malloc_trim` could otherwise return.

/// Arenas `serve` allows: one per worker of a 2-core machine is enough for a load generator
/// whose hot path does not allocate per request in the common case.
pub const SERVE_ARENAS: i32 = 2;

/// Chunks glibc's per-thread cache keeps per size class in `serve` (glibc's default is 7).
/// A chunk in a thread's cache counts as in use, so `malloc_trim` cannot return its page: with
/// seven per class on each of the runtime's threads, every run left a few more pages pinned, and
/// an idle sidecar's anonymous RSS crept up ~14 KiB a run for its first ~100 runs.
pub const SERVE_TCACHE_COUNT: u32 = 0;

/// The variable glibc reads its tunables from, once, when a program starts.
pub const TUNABLES_VAR: &str = "GLIBC_TUNABLES";

/// The tunable for the size of glibc's per-thread cache.
const TCACHE_TUNABLE: &str = "glibc.malloc.tcache_count";

/// The `GLIBC_TUNABLES` value `serve` runs with: `current` with the thread cache's size set to
/// [`SERVE_TCACHE_COUNT`] added. `None` when `current` already sets it: the user's choice stands
/// (and a process that re-executed itself once does not do it again).
pub fn serve_tunables(current: Option<&str>) -> Option<String> {
    let current = current.unwrap_or("");
    let named = current
        .split(':')
        .any(|t| t.split_once('=').is_some_and(|(k, _)| k == TCACHE_TUNABLE));
    if named {
        return None;
    }
    let ours = format!("{TCACHE_TUNABLE}={SERVE_TCACHE_COUNT}");
    Some(if current.is_empty() {
        ours
    } else {
        format!("{current}:{ours}")
    })
}

/// Set in the environment of the re-executed process: whatever glibc makes of
/// `GLIBC_TUNABLES`, a process that has it never re-executes again.
pub const REEXECUTED_VAR: &str = "SLOBURN_REEXECUTED";

/// glibc reads its tunables only at exec, so `serve` re-executes its own binary (same process id,
/// name, arguments and descriptors) with [`serve_tunables`] set, before any thread exists.
/// Returns only when it did not: not glibc; a secure-execution process (setuid, or file
/// capabilities such as `cap_net_bind_service`), where glibc ignores malloc tunables; already
/// re-executed; the variable already sets the cache; or the exec failed (its error, for a
/// warning: the daemon then runs with glibc's default cache).
pub fn reexec_with_serve_tunables() -> Option<std::io::Error> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: getauxval only reads the auxiliary vector the kernel gave the process.
        let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
        if secure || std::env::var_os(REEXECUTED_VAR).is_some() {
            return None;
        }
        let current = std::env::var_os(TUNABLES_VAR);
        // A value that is not UTF-8 is left alone, not overwritten.
        let current = match &current {
            Some(v) => Some(v.to_str()?),
            None => None,
        };
        let tunables = serve_tunables(current)?;
        let exec = |program: &std::path::Path| {
            let mut args = std::env::args_os();
            let mut cmd = std::process::Command::new(program);
            if let Some(arg0) = args.next() {
                cmd.arg0(arg0);
            }
            cmd.args(args)
                .env(TUNABLES_VAR, &tunables)
                .env(REEXECUTED_VAR, "1")
                .exec()
        };
        // The binary's own path first: the kernel names the process after the file executed
        // (`ps`, `top`, `pgrep sloburn`), and `/proc/self/exe` would make it `exe`. The link is
        // the fallback when the file was replaced or removed since the start.
        if let Ok(path) = std::env::current_exe() {
            let _ = exec(&path);
        }
        Some(exec(std::path::Path::new("/proc/self/exe")))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Caps glibc's malloc arenas; call before the runtime starts its threads.
pub fn cap_arenas(arenas: i32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = arenas;
}

/// Returns the free pages of every arena to the kernel (`malloc_trim(0)`); true when some
/// memory was released. It walks the arenas under their locks: call it off the runtime's
/// workers, and not per request.
pub fn release_free_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's own locks and touches no Rust-owned memory.
    unsafe {
        libc::malloc_trim(0) != 0
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Unmaps the resident pages of the process's read-only file mappings (its own code and
/// constants, and the shared libraries'), which stay in the page cache: the next run faults them
/// back in from memory (minor faults, no disk read). An idle daemon that has once run a load
/// keeps most of its 10 MB of code mapped otherwise, while it needs a few pages of it to wait.
///
/// Only private mappings that are `r-xp` or `r--p`, backed by a file, and hold no anonymous
/// (copy-on-write) page are touched: dropping pages there cannot lose a byte, because no page
/// of them differs from the file (the relocated `RELRO` segments hold anonymous pages and are
/// skipped). Returns the kilobytes unmapped.
pub fn release_idle_code() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let mut released = 0;
        for (range, rss_kib) in clean_file_mappings(&smaps) {
            // SAFETY: the range is a whole mapping of this process that no code writes to
            // (read-only, file-backed, no copy-on-write page); MADV_DONTNEED on it only drops
            // page-table entries, and the next access reads the same bytes from the page cache.
            let rc = unsafe {
                libc::madvise(
                    range.0 as *mut libc::c_void,
                    range.1 - range.0,
                    libc::MADV_DONTNEED,
                )
            };
            if rc == 0 {
                released += rss_kib;
            }
        }
        released
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// `((start, end), resident KiB)` of the mappings in `smaps` text that [`release_idle_code`]
/// may drop: private, read-only (`r-xp`, `r--p`), backed by a file, no anonymous page. Only
/// Linux has `/proc/self/smaps`; the parser is tested everywhere.
#[cfg(any(target_os = "linux", test))]
fn clean_file_mappings(smaps: &str) -> Vec<((usize, usize), u64)> {
    let mut out = Vec::new();
    let mut current: Option<((usize, usize), u64, bool)> = None;
    let flush = |c: Option<((usize, usize), u64, bool)>, out: &mut Vec<_>| {
        if let Some((range, rss, true)) = c
            && rss > 0
        {
            out.push((range, rss));
        }
    };
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            flush(current.take(), &mut out);
            let perms = fields.next().unwrap_or("");
            let path = fields.nth(3).unwrap_or("");
            let eligible = (perms == "r-xp" || perms == "r--p") && path.starts_with('/');
            current = Some(((start, end), 0, eligible));
            continue;
        }
        let mut value = || {
            fields
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        if let Some(c) = current.as_mut() {
            match first {
                "Rss:" => c.1 = value(),
                "Anonymous:" if value() > 0 => c.2 = false,
                _ => {}
            }
        }
    }
    flush(current, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rss_anon_kib() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    fn rss_file_kib() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("RssFile:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    #[test]
    fn serve_adds_the_thread_cache_size_and_keeps_every_other_tunable() {
        let ours = format!("glibc.malloc.tcache_count={SERVE_TCACHE_COUNT}");
        assert_eq!(serve_tunables(None), Some(ours.clone()));
        assert_eq!(serve_tunables(Some("")), Some(ours.clone()));
        assert_eq!(
            serve_tunables(Some("glibc.malloc.arena_max=1:glibc.malloc.mxfast=0")),
            Some(format!(
                "glibc.malloc.arena_max=1:glibc.malloc.mxfast=0:{ours}"
            ))
        );
        // A value the user (or the first exec) set is kept: no second exec.
        assert_eq!(serve_tunables(Some("glibc.malloc.tcache_count=7")), None);
        assert_eq!(
            serve_tunables(Some("glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0")),
            None
        );
        // A different tunable whose name only ends the same is not it.
        assert_eq!(
            serve_tunables(Some("x.glibc.malloc.tcache_count=3")),
            Some(format!("x.glibc.malloc.tcache_count=3:{ours}"))
        );
    }

    #[test]
    fn only_clean_read_only_file_mappings_are_dropped() {
        let smaps = "\
1000-3000 r-xp 00000000 fe:00 42 /usr/bin/sloburn
Rss:                   8 kB
Anonymous:             0 kB
3000-4000 r--p 00002000 fe:00 42 /usr/bin/sloburn
Rss:                   4 kB
Anonymous:             4 kB
4000-5000 rw-p 00003000 fe:00 42 /usr/bin/sloburn
Rss:                   4 kB
Anonymous:             0 kB
5000-6000 r--p 00000000 00:00 0
Rss:                   4 kB
Anonymous:             4 kB
6000-7000 r--p 00000000 fe:00 43 /usr/lib/libc.so.6
Rss:                   4 kB
Anonymous:             0 kB
7000-8000 r-xp 00000000 00:00 0 [vdso]
Rss:                   4 kB
Anonymous:             0 kB
";
        assert_eq!(
            clean_file_mappings(smaps),
            vec![((0x1000, 0x3000), 8), ((0x6000, 0x7000), 4)]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn idle_code_pages_are_unmapped_and_come_back_on_use() {
        let before = rss_file_kib().unwrap();
        let released = release_idle_code();
        let after = rss_file_kib().unwrap();
        assert!(
            released > 0 && after < before,
            "RssFile {before} KiB -> {after} KiB"
        );
        // The code still runs: the pages come back from the page cache.
        assert_eq!(format!("{:?}", clean_file_mappings("")), "[]");
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn free_pages_inside_the_heap_go_back_to_the_kernel() {
        // 96 MB in 4 KiB blocks, every 64th kept: the freed pages sit between live blocks,
        // where free() alone never returns them.
        let mut blocks: Vec<Vec<u8>> = (0..24_576).map(|i| vec![i as u8; 4096]).collect();
        let kept: Vec<Vec<u8>> = blocks.iter_mut().step_by(64).map(std::mem::take).collect();
        drop(blocks);
        let before = rss_anon_kib().unwrap();
        assert!(release_free_heap());
        let after = rss_anon_kib().unwrap();
        assert!(
            before.saturating_sub(after) > 48 * 1024,
            "RssAnon {before} KiB before, {after} KiB after"
        );
        assert_eq!(kept.len(), 384);
    }
}
