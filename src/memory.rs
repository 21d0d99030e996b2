//! The heap of a daemon that is idle between runs. glibc's malloc gives threads their own arenas
//! (up to 8 per core) and keeps what a run freed inside them, so without help an idle `serve`
//! holds the peak of its last run: with 1,000 profiles starting on the same minute that was
//! 1.2 GB kept after every run had ended. `serve` caps the arenas when it starts and hands the
//! free pages back to the kernel when its last active run ends. A leaf: it imports nothing from
//! the crate; on other C libraries the malloc calls do nothing. When idle it also unmaps its code
//! pages (they stay in the page cache).

/// Arenas `serve` allows: one per worker of a 2-core machine is enough for a load generator
/// whose hot path does not allocate per request in the common case.
pub const SERVE_ARENAS: i32 = 2;

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
/// may drop: private, read-only (`r-xp`, `r--p`), backed by a file, no anonymous page.
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
