//! Sub-millisecond sleeps for pacing arrivals and injecting latency.
//!
//! tokio's timer wheel ticks once per millisecond and rounds deadlines up, so a 10 ms sleep
//! takes 10–12 ms and an arrival scheduled for t starts up to ~1.5 ms late. A load generator
//! that measures from intended start times cannot afford that. Here the coarse part of a wait
//! still uses tokio (no thread involvement), and the last [`FINE_WINDOW`] is handed to one
//! shared timer thread that sleeps on a condition variable with nanosecond deadlines
//! (≈50–100 µs precision on Linux) and wakes the futures when they are due.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Waits shorter than this go to the precise thread; longer ones sleep on tokio first.
pub const FINE_WINDOW: Duration = Duration::from_millis(2);

/// Sleeps until `deadline` with sub-millisecond precision.
pub async fn sleep_until(deadline: tokio::time::Instant) {
    let deadline = deadline.into_std();
    if let Some(coarse) = deadline.checked_sub(FINE_WINDOW)
        && coarse > crate::clock::instant()
    {
        tokio::time::sleep_until(coarse.into()).await;
    }
    Fine {
        deadline,
        registered: false,
    }
    .await
}

/// Sleeps for `d` with sub-millisecond precision.
pub async fn sleep(d: Duration) {
    sleep_until(crate::clock::tokio_instant() + d).await
}

struct Fine {
    deadline: Instant,
    registered: bool,
}

impl Future for Fine {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if crate::clock::instant() >= self.deadline {
            return Poll::Ready(());
        }
        // One registration per future: the timer thread wakes it once the deadline passed.
        // A spurious poll before that (select!, runtime) keeps the original registration, whose
        // waker stays valid for tasks spawned on tokio.
        if !self.registered {
            self.registered = true;
            wheel().add(self.deadline, cx.waker().clone());
        }
        Poll::Pending
    }
}

struct Entry {
    deadline: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

struct Wheel {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    cv: Condvar,
}

impl Wheel {
    fn add(&self, deadline: Instant, waker: Waker) {
        let Ok(mut guard) = self.heap.lock() else {
            // A poisoned lock means the timer thread died; wake now rather than hang.
            waker.wake();
            return;
        };
        let (heap, seq) = &mut *guard;
        *seq += 1;
        let earliest = heap.peek().is_none_or(|Reverse(e)| deadline < e.deadline);
        heap.push(Reverse(Entry {
            deadline,
            seq: *seq,
            waker,
        }));
        drop(guard);
        if earliest {
            self.cv.notify_one();
        }
    }

    fn run(&self) {
        let Ok(mut guard) = self.heap.lock() else {
            return;
        };
        loop {
            let now = crate::clock::instant();
            while let Some(Reverse(e)) = guard.0.peek() {
                if e.deadline > now {
                    break;
                }
                if let Some(Reverse(e)) = guard.0.pop() {
                    e.waker.wake();
                }
            }
            let wait = guard
                .0
                .peek()
                .map(|Reverse(e)| e.deadline.saturating_duration_since(now))
                .unwrap_or(Duration::from_secs(3600));
            guard = match self.cv.wait_timeout(guard, wait) {
                Ok((g, _)) => g,
                Err(_) => return,
            };
        }
    }
}

fn wheel() -> &'static Wheel {
    static WHEEL: OnceLock<&'static Wheel> = OnceLock::new();
    WHEEL.get_or_init(|| {
        let wheel: &'static Wheel = Box::leak(Box::new(Wheel {
            heap: Mutex::new((BinaryHeap::new(), 0)),
            cv: Condvar::new(),
        }));
        // If the thread cannot start, sleeps degrade to tokio's precision instead of hanging.
        if std::thread::Builder::new()
            .name("sloburn-timer".into())
            .spawn(move || wheel.run())
            .is_err()
        {
            tracing::warn!("cannot start the precise timer thread; pacing falls back to 1 ms");
        }
        wheel
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tokio's 1 ms wheel rounds every deadline up to its next tick: on its own it overshoots by
    /// 0.6–1.6 ms at the median for each of these durations, the precise thread by about 0.1 ms.
    /// The bound sits between the two, and it is on the median of all the sleeps so that a few
    /// descheduled ones on a busy machine do not decide.
    #[tokio::test(flavor = "current_thread")]
    async fn sleeps_end_after_the_deadline_and_close_to_it() {
        let mut overshoots = Vec::new();
        for _ in 0..25 {
            for micros in [300u64, 1_500, 2_500, 10_000] {
                let d = Duration::from_micros(micros);
                let start = crate::clock::instant();
                sleep(d).await;
                let took = crate::clock::elapsed(start);
                assert!(took >= d, "{took:?} < {d:?}");
                overshoots.push(took - d);
            }
        }
        overshoots.sort_unstable();
        let median = overshoots[overshoots.len() / 2];
        assert!(
            median < Duration::from_micros(500),
            "median overshoot {median:?} (tokio's wheel alone gives about 1 ms)"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_concurrent_sleeps_all_finish() {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..500u64 {
            set.spawn(async move {
                let d = Duration::from_micros(100 + (i * 37) % 3000);
                let start = crate::clock::instant();
                sleep(d).await;
                crate::clock::elapsed(start) >= d
            });
        }
        while let Some(ok) = set.join_next().await {
            assert!(ok.unwrap());
        }
    }
}
