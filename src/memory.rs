//! The heap of a daemon that is idle between runs. glibc's malloc gives threads their own arenas
//! (up to 8 per core) and keeps what a run freed inside them, so without help an idle `serve`
//! holds the peak of its last run: with 1,000 profiles starting on the same minute that was
//! 1.2 GB kept after every run had ended. `serve` caps the arenas when it starts and hands the
//! free pages back to the kernel when its last active run ends. A leaf: it imports nothing from
//! the crate; on other C libraries both calls do nothing.

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

#[cfg(test)]
mod tests {
    use super::*;

    fn rss_anon_kib() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
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
