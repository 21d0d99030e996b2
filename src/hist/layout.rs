//! Where a value is counted: Prometheus' exponential buckets at [`RECORD_SCHEMA`], a value of
//! `n` nanoseconds in bucket `k` when `2^((k-1)/128) < n/1e9 ≤ 2^(k/128)` seconds.
//!
//! The bucket is found as Prometheus' own client finds it: the value's binary exponent, then
//! its fraction compared against Prometheus' table of bounds ([`BOUNDS`], the same `f64`s
//! `client_golang` and the server use), never a `log2` rounded near a bound. A lookup by the
//! fraction's top 8 bits starts the comparison at most one bound below the answer.
//!
//! Slots: 0 is the zero bucket (0 ns only: every positive duration is at least 1 ns, above
//! [`ZERO_THRESHOLD`]); slot `1 + i` is key `LOW_KEY + i`. Keys run over 42 powers of two, from
//! 2^-30 s (about 1 ns) to 2^12 s (4,096 s); a longer value counts in the top bucket, a
//! shorter one in the lowest.

/// The schema values are counted at: 128 buckets per power of two, each 0.54 % wide.
pub const RECORD_SCHEMA: i32 = 7;
/// The coarsest schema a reader may ask for (Prometheus' own lower limit).
pub const MIN_SCHEMA: i32 = -4;
/// Values at or below this many seconds count in the zero bucket (only 0 ns, as durations are
/// whole nanoseconds).
pub const ZERO_THRESHOLD: f64 = 1.0 / (1u64 << 30) as f64;

/// Buckets per power of two at [`RECORD_SCHEMA`].
pub(super) const PER_OCTAVE: usize = 1 << RECORD_SCHEMA;
const LOW_OCTAVE: i32 = -30;
const HIGH_OCTAVE: i32 = 12;
/// Powers of two with buckets of their own.
pub(super) const OCTAVES: usize = (HIGH_OCTAVE - LOW_OCTAVE) as usize;
/// The lowest key: the bucket just above the zero threshold.
const LOW_KEY: i32 = LOW_OCTAVE * PER_OCTAVE as i32 + 1;
/// The highest key, whose bucket also holds every longer value.
const HIGH_KEY: i32 = HIGH_OCTAVE * PER_OCTAVE as i32;
/// Slots: the zero bucket, then one per key.
pub const SLOTS: usize = 1 + OCTAVES * PER_OCTAVE;

/// `2^(j/128 - 1)` for `j` in `0..128`, as Prometheus writes them (its schema-7 table, every
/// other entry of its schema-8 one): a fraction in `[0.5, 1)` is in bucket `j` of its power of
/// two when `BOUNDS[j-1] < fraction ≤ BOUNDS[j]`.
static BOUNDS: [f64; PER_OCTAVE] = [
    0.5,
    0.5027149505564014,
    0.5054446430258502,
    0.5081891574554764,
    0.5109485743270583,
    0.5137229745593818,
    0.5165124395106142,
    0.5193170509806894,
    0.5221368912137069,
    0.5249720429003435,
    0.5278225891802786,
    0.5306886136446309,
    0.5335702003384117,
    0.5364674337629877,
    0.5393803988785598,
    0.5423091811066545,
    0.5452538663326288,
    0.5482145409081883,
    0.5511912916539204,
    0.5541842058618393,
    0.5571933712979462,
    0.5602188762048033,
    0.5632608093041209,
    0.5663192597993595,
    0.5693943173783458,
    0.572486072215902,
    0.5755946149764913,
    0.5787200368168754,
    0.5818624293887887,
    0.585021884841625,
    0.5881984958251406,
    0.5913923554921704,
    0.5946035575013605,
    0.5978321960199137,
    0.6010783657263515,
    0.6043421618132907,
    0.6076236799902344,
    0.6109230164863786,
    0.6142402680534349,
    0.6175755319684665,
    0.620928906036742,
    0.6243004885946023,
    0.6276903785123455,
    0.6310986751971253,
    0.6345254785958666,
    0.637970889198196,
    0.6414350080393891,
    0.6449179367033329,
    0.6484197773255048,
    0.6519406325959679,
    0.6554806057623822,
    0.659039800633032,
    0.6626183215798706,
    0.6662162735415805,
    0.6698337620266515,
    0.6734708931164728,
    0.6771277734684463,
    0.6808045103191123,
    0.6845012114872953,
    0.688217985377265,
    0.6919549409819159,
    0.6957121878859629,
    0.6994898362691555,
    0.7032879969095076,
    0.7071067811865475,
    0.7109463010845827,
    0.7148066691959849,
    0.718687998724491,
    0.7225904034885232,
    0.7265139979245261,
    0.7304588970903234,
    0.7344252166684908,
    0.7384130729697496,
    0.7424225829363761,
    0.7464538641456323,
    0.7505070348132126,
    0.7545822137967112,
    0.7586795205991071,
    0.762799075372269,
    0.7669409989204777,
    0.7711054127039704,
    0.7752924388424999,
    0.7795022001189185,
    0.7837348199827764,
    0.7879904225539431,
    0.7922691326262467,
    0.7965710756711334,
    0.8008963778413465,
    0.805245165974627,
    0.8096175675974316,
    0.8140137109286738,
    0.8184337248834821,
    0.8228777390769823,
    0.8273458838280969,
    0.8318382901633681,
    0.8363550898207981,
    0.8408964152537144,
    0.8454623996346523,
    0.8500531768592616,
    0.8546688815502312,
    0.8593096490612387,
    0.8639756154809185,
    0.8686669176368529,
    0.8733836930995842,
    0.8781260801866495,
    0.8828942179666361,
    0.8876882462632604,
    0.8925083056594671,
    0.8973545375015533,
    0.9022270839033115,
    0.9071260877501991,
    0.9120516927035263,
    0.9170040432046711,
    0.9219832844793128,
    0.9269895625416926,
    0.9320230241988943,
    0.9370838170551498,
    0.9421720895161669,
    0.9472879907934827,
    0.9524316709088368,
    0.9576032806985735,
    0.9628029718180622,
    0.9680308967461471,
    0.9732872087896164,
    0.9785720620876999,
    0.9838856116165875,
    0.9892280131939752,
    0.9945994234836328,
];

/// For each value of a fraction's top 8 bits, the first bound at or above the lowest fraction
/// with those bits: where the comparison starts (a bound is wider than 1/256 of the range, so
/// at most one step follows).
static START: [u8; 256] = {
    let mut start = [0u8; 256];
    let mut t = 0;
    let mut j = 0;
    while t < 256 {
        let low = 0.5 + t as f64 / 512.0;
        while j < PER_OCTAVE && BOUNDS[j] < low {
            j += 1;
        }
        start[t] = j as u8;
        t += 1;
    }
    start
};

/// The bucket key of `seconds` (positive, finite) at [`RECORD_SCHEMA`], unclamped.
fn key_of_seconds(seconds: f64) -> i32 {
    let bits = seconds.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1022;
    let mantissa = bits & ((1 << 52) - 1);
    // `seconds = fraction · 2^exp` with the fraction in [0.5, 1).
    let fraction = f64::from_bits(mantissa | (1022 << 52));
    let mut j = START[(mantissa >> 44) as usize] as usize;
    while j < PER_OCTAVE && fraction > BOUNDS[j] {
        j += 1;
    }
    (exp - 1) * PER_OCTAVE as i32 + j as i32
}

/// The slot counting `nanos`.
pub(super) fn slot_of(nanos: u64) -> usize {
    if nanos == 0 {
        return 0;
    }
    let key = key_of_seconds(nanos as f64 / 1e9).clamp(LOW_KEY, HIGH_KEY);
    (key - LOW_KEY) as usize + 1
}

/// The key at [`RECORD_SCHEMA`] of a slot above the zero bucket.
pub(super) fn key_of_slot(slot: usize) -> i32 {
    LOW_KEY + slot as i32 - 1
}

/// The key at `schema` (≤ [`RECORD_SCHEMA`]) of the bucket holding key `fine`: coarse bucket
/// `k` is the union of fine keys `(k-1)·m+1 ..= k·m` with `m = 2^(RECORD_SCHEMA - schema)`.
pub(super) fn coarse_key(fine: i32, schema: i32) -> i32 {
    let m = 1i32 << (RECORD_SCHEMA - schema);
    (fine + m - 1).div_euclid(m)
}

/// The upper bound in seconds of key `key` at [`RECORD_SCHEMA`]: `2^(key/128)`.
fn upper_seconds(key: i32) -> f64 {
    let (q, r) = (
        key.div_euclid(PER_OCTAVE as i32),
        key.rem_euclid(PER_OCTAVE as i32),
    );
    BOUNDS[r as usize] * 2f64.powi(q + 1)
}

/// The largest whole nanosecond count whose slot is at most `slot` (`u64::MAX` for the top).
fn last_nanos(slot: usize) -> u64 {
    if slot == 0 {
        return 0;
    }
    if slot >= SLOTS - 1 {
        return u64::MAX;
    }
    // `as` saturates; the estimate is within a nanosecond or two of the answer.
    let mut n = (upper_seconds(key_of_slot(slot)) * 1e9).floor() as u64;
    while n > 0 && slot_of(n) > slot {
        n -= 1;
    }
    while slot_of(n + 1) <= slot {
        n += 1;
    }
    n
}

/// Inclusive range of whole nanoseconds a slot holds (empty, `lo > hi`, for a bucket narrower
/// than a nanosecond between two whole values).
pub(super) fn nanos_of(slot: usize) -> (u64, u64) {
    let lo = if slot == 0 {
        0
    } else {
        last_nanos(slot - 1) + 1
    };
    (lo, last_nanos(slot))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key by the definition: the first bound at or above the value, the bounds being
    /// Prometheus' table scaled by powers of two.
    fn reference_key(seconds: f64) -> i32 {
        let mut k = (seconds.log2() * PER_OCTAVE as f64).floor() as i32 - 2;
        while seconds > upper_seconds(k) {
            k += 1;
        }
        k
    }

    #[test]
    fn keys_follow_prometheus_bounds_exactly_even_next_to_them() {
        for key in [
            LOW_KEY, -3000, -1281, -1280, -1279, -150, -1, 0, 1, 77, 127, 128, 1535,
        ] {
            let bound = upper_seconds(key);
            assert_eq!(key_of_seconds(bound), key, "at the bound of {key}");
            let above = f64::from_bits(bound.to_bits() + 1);
            assert_eq!(key_of_seconds(above), key + 1, "just above {key}");
            let below = f64::from_bits(bound.to_bits() - 1);
            assert_eq!(key_of_seconds(below), reference_key(below), "below {key}");
        }
        // Powers of two are bounds: 1 s is the top of key 0, 0.25 s of key -256.
        assert_eq!(key_of_seconds(1.0), 0);
        assert_eq!(key_of_seconds(0.25), -256);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let nanos = (x >> 20) % 10_000_000_000 + 1;
            let s = nanos as f64 / 1e9;
            assert_eq!(key_of_seconds(s), reference_key(s), "{nanos} ns");
        }
    }

    #[test]
    fn slots_are_contiguous_and_ordered() {
        assert_eq!(SLOTS, 1 + 42 * 128);
        assert_eq!(nanos_of(0), (0, 0));
        assert_eq!(slot_of(1), (key_of_seconds(1e-9) - LOW_KEY) as usize + 1);
        let mut next = 1;
        for slot in 1..SLOTS {
            let (lo, hi) = nanos_of(slot);
            assert_eq!(lo, next, "slot {slot}");
            if lo <= hi {
                assert_eq!((slot_of(lo), slot_of(hi)), (slot, slot));
            }
            if slot < SLOTS - 1 {
                next = hi + 1;
            }
        }
        assert_eq!(nanos_of(SLOTS - 1).1, u64::MAX);
        assert_eq!(slot_of(u64::MAX), SLOTS - 1);
        // 4,096 s is the top bucket's bound; 300 ms falls where 2^(k/128) puts it.
        assert_eq!(slot_of(4_096_000_000_000), SLOTS - 1);
        assert_eq!(slot_of(4_095_000_000_000), SLOTS - 1);
        assert_eq!(slot_of(4_000_000_000_000), SLOTS - 5);
    }
}
