//! The sampler: one task that wakes every [`TICK`], measures how late it woke, and reads the
//! cgroup's throttling and every thread's run-queue delay, turning what grew since its last
//! tick into episodes. Files stay open and are read with `pread` (one syscall each); the list
//! of threads is read again every [`THREADS_EVERY`] ticks, at most [`MAX_THREADS`] of them.

use super::cgroup::{Cgroup, Throttling, Version};
use super::{Cause, RUN_QUEUE_SLACK, Sources, Starvation, TICK, TIMER_SLACK};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use tokio_util::sync::CancellationToken;

/// Ticks between two readings of `/proc/self/task` (one second).
const THREADS_EVERY: u32 = 200;
/// Threads whose run-queue delay is read (a runtime's workers, the timer thread, the blocking
/// pool's busiest); beyond it the rest go unread.
const MAX_THREADS: usize = 64;

struct Thread {
    tid: u64,
    file: File,
    /// Run-queue wait so far, ns.
    wait: u64,
}

impl Starvation {
    /// Samples while a run holds the watch ([`Starvation::active`]), until `token` is
    /// cancelled; meanwhile [`Starvation::judge`] counts a sampler overdue as starvation. Spawn
    /// it on the runtime that sends the load.
    pub async fn sample(self: Arc<Self>, token: CancellationToken) {
        let cgroup = Cgroup::find();
        let mut throttled = cgroup.as_ref().ok().and_then(Cgroup::throttling);
        let mut threads = Vec::new();
        refresh(&mut threads);
        let _ = self.sources.set(Sources {
            cgroup: cgroup.as_ref().map(describe).map_err(Clone::clone),
            schedstat: !threads.is_empty(),
        });
        let mut prev = self.now_ns();
        let mut n = 0u32;
        loop {
            if self.runs.load(Relaxed) == 0 {
                // Idle: nothing to judge. What the counters gain meanwhile is nobody's.
                self.last_tick.store(0, Relaxed);
                tokio::select! {
                    () = token.cancelled() => break,
                    () = self.wake.notified() => {}
                }
                throttled = cgroup.as_ref().ok().and_then(Cgroup::throttling);
                refresh(&mut threads);
                for t in &mut threads {
                    t.wait = read_wait(&t.file).unwrap_or(t.wait);
                }
                prev = self.now_ns();
                self.last_tick.store(prev + 1, Relaxed);
            }
            let due = crate::clock::tokio_instant() + TICK;
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep_until(due) => {}
            }
            let now = self.now_ns();
            let due_ns = prev + TICK.as_nanos() as u64;
            if now > due_ns + TIMER_SLACK.as_nanos() as u64 {
                self.starved(Cause::Timer, due_ns, now);
            }
            if let Ok(c) = &cgroup {
                self.throttling(c, &mut throttled, prev, now);
            }
            n += 1;
            if n.is_multiple_of(THREADS_EVERY) {
                refresh(&mut threads);
            }
            self.run_queue(&mut threads, prev, now);
            prev = now;
            self.last_tick.store(now + 1, Relaxed);
        }
        self.last_tick.store(0, Relaxed);
    }

    fn throttling(&self, c: &Cgroup, last: &mut Option<Throttling>, prev: u64, now: u64) {
        let Some(t) = c.throttling() else {
            return;
        };
        if let Some(l) = last.replace(t) {
            let nanos = t.nanos.saturating_sub(l.nanos);
            self.throttled_ns.fetch_add(nanos, Relaxed);
            self.throttled_periods
                .fetch_add(t.periods.saturating_sub(l.periods), Relaxed);
            // The sampler is held with the rest of the cgroup, so the throttling lies inside the
            // time since its last tick; where in it is not known (and v1 sums it over CPUs), so
            // the episode is the whole interval: at most one tick and the wake-up too wide.
            if nanos > 0 {
                self.starved(Cause::Throttled, prev, now);
            }
        }
    }

    fn run_queue(&self, threads: &mut [Thread], prev: u64, now: u64) {
        let mut most = 0;
        for t in threads.iter_mut() {
            if let Some(wait) = read_wait(&t.file) {
                most = most.max(wait.saturating_sub(t.wait));
                t.wait = wait;
            }
        }
        if most > RUN_QUEUE_SLACK.as_nanos() as u64 {
            self.starved(Cause::RunQueue, now.saturating_sub(most).max(prev), now);
        }
    }
}

fn describe(c: &Cgroup) -> String {
    let v = match c.version {
        Version::V1 => "v1",
        Version::V2 => "v2",
    };
    format!("cgroup {v} {}", c.dir.display())
}

/// The second field of a `schedstat` line: ns spent waiting on a run queue.
fn read_wait(f: &File) -> Option<u64> {
    let mut buf = [0u8; 96];
    let n = f.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n])
        .ok()?
        .split_ascii_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Keeps the threads still alive and opens the new ones (their wait so far is the baseline).
fn refresh(threads: &mut Vec<Thread>) {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        threads.clear();
        return;
    };
    let alive: Vec<u64> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    threads.retain(|t| alive.contains(&t.tid));
    for tid in alive {
        if threads.len() >= MAX_THREADS {
            break;
        }
        if threads.iter().any(|t| t.tid == tid) {
            continue;
        }
        if let Ok(file) = File::open(format!("/proc/self/task/{tid}/schedstat")) {
            let wait = read_wait(&file).unwrap_or(0);
            threads.push(Thread { tid, file, wait });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_processs_threads_and_their_waits() {
        let mut threads = Vec::new();
        refresh(&mut threads);
        assert!(
            !threads.is_empty(),
            "a Linux process has a schedstat per thread"
        );
        for t in &threads {
            assert!(read_wait(&t.file).is_some(), "thread {}", t.tid);
        }
    }
}
