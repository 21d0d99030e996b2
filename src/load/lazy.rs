//! A heap value made on first use, in one pointer: the slot behind a run's lazily allocated
//! counters (histogram chunks and blocks, status codes, the scatter reservoir).
//!
//! `OnceLock<Box<T>>` would do the same job in 16 bytes (its `Once` state beside the pointer);
//! a run's tables are mostly empty slots, and 1,000 runs at once held 6.5 MB of them
//! (heaptrack, `bench/scale.py`), so the slot is an `AtomicPtr` of 8 bytes instead.

use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// A `Box<T>` made by the first [`LazyBox::get_or_init`] and kept until the slot is dropped.
pub struct LazyBox<T> {
    ptr: AtomicPtr<T>,
    /// Owns a `T`: `Send`/`Sync` follow `T`'s, as they would for `Box<T>`.
    _owns: PhantomData<Box<T>>,
}

impl<T> LazyBox<T> {
    pub const fn new() -> LazyBox<T> {
        LazyBox {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    pub fn get(&self) -> Option<&T> {
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` in `get_or_init` (published with
        // Release, read with Acquire, so the value is initialised) and is freed only by `drop`,
        // which `&self` rules out while the reference lives.
        unsafe { p.as_ref() }
    }

    /// The value, made by `make` if there is none yet. Two threads racing both make one; the
    /// first to publish wins and the other's is dropped unshared.
    pub fn get_or_init(&self, make: impl FnOnce() -> Box<T>) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        let new = Box::into_raw(make());
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: `new` is now owned by the slot (see `get`).
            Ok(_) => unsafe { &*new },
            Err(existing) => {
                // SAFETY: `new` was never published, so this is its only owner.
                drop(unsafe { Box::from_raw(new) });
                // SAFETY: `existing` is the published, non-null pointer (see `get`).
                unsafe { &*existing }
            }
        }
    }
}

impl<T> Default for LazyBox<T> {
    fn default() -> Self {
        LazyBox::new()
    }
}

impl<T> Drop for LazyBox<T> {
    fn drop(&mut self) {
        let p = *self.ptr.get_mut();
        if !p.is_null() {
            // SAFETY: the slot owns `p` (from `Box::into_raw`) and nothing borrows it any more.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for LazyBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.get() {
            Some(v) => f.debug_tuple("LazyBox").field(v).finish(),
            None => f.write_str("LazyBox(empty)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_slot_is_one_pointer_wide() {
        assert_eq!(size_of::<LazyBox<[u64; 32]>>(), size_of::<usize>());
    }

    /// Counts its drops, to show every value made is freed exactly once.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn racing_inits_keep_one_value_and_free_every_other() {
        let drops = Arc::new(AtomicUsize::new(0));
        let made = AtomicUsize::new(0);
        for _ in 0..200 {
            let slot = LazyBox::new();
            let winner = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            let v = slot.get_or_init(|| {
                                made.fetch_add(1, Ordering::Relaxed);
                                Box::new(Counted(drops.clone()))
                            });
                            std::ptr::from_ref(v) as usize
                        })
                    })
                    .collect();
                let seen: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
                assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
                seen[0]
            });
            assert_eq!(std::ptr::from_ref(slot.get().unwrap()) as usize, winner);
        }
        // Every loser was freed at once, every winner with its slot.
        assert_eq!(drops.load(Ordering::Relaxed), made.load(Ordering::Relaxed));
        assert!(LazyBox::<u8>::new().get().is_none());
    }
}
