//! Where a profile runs when several daemons share one config (`--shard i/N`). Pure: no I/O, no
//! clock.
//!
//! - `placement: split` (the default): every shard runs its `1/N` of the profile
//!   ([`super::plan::Shard`]), so the shards together produce the whole profile.
//! - `placement: owned`: the profile runs whole on one shard, its owner, chosen by rendezvous
//!   (highest-random-weight) hashing of the profile's name over the live shard indices. When a
//!   shard joins or leaves, only the profiles it wins or held move (about `1/N` of them).
//!
//! The weight of (name, shard) is SipHash-1-3 with the fixed keys [`KEYS`] over the name's
//! UTF-8 bytes, one `0xFF` byte (no UTF-8 text contains it, so no name plus index can read as
//! another) and the shard index as 4 little-endian bytes. SipHash is a specified algorithm
//! (the `siphasher` crate implements the reference), unlike std's `DefaultHasher`, whose
//! algorithm may change between Rust versions: every daemon, whatever its build or platform,
//! computes the same owner. A test pins some weights so a change cannot go unnoticed.

use super::plan::Shard;
use crate::config::spec::Placement;
use std::hash::Hasher as _;

/// The SipHash keys of the rendezvous weight. Part of the contract: changing them moves
/// profiles between shards.
pub const KEYS: (u64, u64) = (0x736c_6f62_7572_6e00, 0x706c_6163_656d_656e);

/// The rendezvous weight of `name` on `shard`.
pub fn weight(name: &str, shard: u32) -> u64 {
    let mut h = siphasher::sip::SipHasher13::new_with_keys(KEYS.0, KEYS.1);
    h.write(name.as_bytes());
    h.write(&[0xFF]);
    h.write(&shard.to_le_bytes());
    h.finish()
}

/// The owner of `name` among the `live` shard indices: the one of highest weight (on a tie, the
/// lower index). `None` when no shard is live. Linear in the number of shards.
pub fn owner(name: &str, live: impl IntoIterator<Item = u32>) -> Option<u32> {
    live.into_iter()
        .map(|s| (weight(name, s), std::cmp::Reverse(s)))
        .max()
        .map(|(_, std::cmp::Reverse(s))| s)
}

/// What one shard does with one profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment {
    /// A split profile: this shard runs its share.
    Share(Shard),
    /// An owned profile this shard owns: it runs the whole profile.
    Whole,
    /// An owned profile another shard owns: this shard does not run it.
    Elsewhere { owner: u32 },
}

impl Assignment {
    /// The part of the plan to run here, or `None` when the profile runs elsewhere.
    pub fn run_shard(self) -> Option<Shard> {
        match self {
            Assignment::Share(s) => Some(s),
            Assignment::Whole => Some(Shard::WHOLE),
            Assignment::Elsewhere { .. } => None,
        }
    }
}

/// What `shard` does with profile `name` placed by `placement`, with every shard of
/// `shard.count()` live (the static `--shard i/N`).
pub fn assign(name: &str, placement: Placement, shard: Shard) -> Assignment {
    match placement {
        Placement::Split => Assignment::Share(shard),
        Placement::Owned => match owner(name, 0..shard.count()) {
            Some(o) if o != shard.index() => Assignment::Elsewhere { owner: o },
            _ => Assignment::Whole,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("profile-{i:05}")).collect()
    }

    #[test]
    fn ten_thousand_profiles_over_3_then_4_shards_each_owned_once_a_quarter_moves() {
        let names = names(10_000);
        let mut counts3 = [0usize; 3];
        let mut counts4 = [0usize; 4];
        let mut moved = 0usize;
        for n in &names {
            // Owned exactly once: exactly one shard of each count says `Whole`.
            let whole3: Vec<u32> = (0..3)
                .filter(|&i| {
                    assign(n, Placement::Owned, Shard::new(i, 3).unwrap()) == Assignment::Whole
                })
                .collect();
            let whole4: Vec<u32> = (0..4)
                .filter(|&i| {
                    assign(n, Placement::Owned, Shard::new(i, 4).unwrap()) == Assignment::Whole
                })
                .collect();
            assert_eq!(whole3.len(), 1, "{n} over 3 shards: {whole3:?}");
            assert_eq!(whole4.len(), 1, "{n} over 4 shards: {whole4:?}");
            counts3[whole3[0] as usize] += 1;
            counts4[whole4[0] as usize] += 1;
            if whole3[0] != whole4[0] {
                // A profile only ever moves to the new shard.
                assert_eq!(whole4[0], 3, "{n} moved between old shards");
                moved += 1;
            }
        }
        let share = moved as f64 / names.len() as f64;
        eprintln!(
            "3 -> 4 shards: {moved} of 10,000 moved ({share:.4}); owned per shard {counts3:?} -> {counts4:?}"
        );
        assert!((0.20..=0.30).contains(&share), "moved share {share}");
        // Balanced: every shard within 10 % of its fair share.
        for c in counts3 {
            assert!((c as f64 - 10_000.0 / 3.0).abs() < 333.0, "{counts3:?}");
        }
        for c in counts4 {
            assert!((c as f64 - 2_500.0).abs() < 250.0, "{counts4:?}");
        }
    }

    #[test]
    fn removing_a_shard_moves_only_that_shards_profiles() {
        let names = names(10_000);
        let all = [0u32, 1, 2, 3];
        for dead in all {
            let live: Vec<u32> = all.iter().copied().filter(|&s| s != dead).collect();
            let mut moved = 0;
            for n in &names {
                let before = owner(n, all).unwrap();
                let after = owner(n, live.iter().copied()).unwrap();
                if before == dead {
                    assert_ne!(after, dead);
                    moved += 1;
                } else {
                    assert_eq!(before, after, "{n} moved though shard {before} stayed");
                }
            }
            let share = moved as f64 / names.len() as f64;
            assert!((0.20..=0.30).contains(&share), "shard {dead}: {share}");
        }
    }

    #[test]
    fn the_weight_is_pinned_so_owners_never_change_between_builds() {
        // SipHash-1-3 with `KEYS` over "checkout", 0xFF, index LE. If this fails, the owner
        // of every profile in every deployment moves: that is a breaking change.
        let got: Vec<u64> = (0..4).map(|s| weight("checkout", s)).collect();
        let mut h = siphasher::sip::SipHasher13::new_with_keys(KEYS.0, KEYS.1);
        h.write(b"checkout\xFF\x02\x00\x00\x00");
        assert_eq!(got[2], h.finish(), "the input layout changed");
        assert_eq!(got, PINNED, "the weights changed");
        assert_eq!(owner("checkout", 0..4), Some(PINNED_OWNER));
    }

    const PINNED: [u64; 4] = [
        542_253_428_964_396_023,
        8_218_945_891_400_784_538,
        17_176_889_797_854_358_690,
        12_864_970_487_551_729_219,
    ];
    const PINNED_OWNER: u32 = 2;

    #[test]
    fn no_live_shard_no_owner_and_one_shard_owns_all() {
        assert_eq!(owner("a", std::iter::empty()), None);
        assert_eq!(owner("a", [7]), Some(7));
        assert_eq!(
            assign("a", Placement::Owned, Shard::WHOLE),
            Assignment::Whole
        );
        assert_eq!(
            assign("a", Placement::Split, Shard::new(1, 3).unwrap()),
            Assignment::Share(Shard::new(1, 3).unwrap())
        );
        assert_eq!("owned".parse::<Placement>(), Ok(Placement::Owned));
        assert!("whole".parse::<Placement>().unwrap_err().contains("split"));
    }

    #[test]
    fn the_owner_depends_on_the_live_set_not_its_order() {
        for n in names(200) {
            assert_eq!(owner(&n, [0, 1, 2, 5]), owner(&n, [5, 2, 1, 0]));
        }
    }
}
