//! Which address of a multi-address name a new connection tries first: k6's `dns.select`.
//! Pure: the caller passes the turn (a counter, or a random number), so every order is testable.

use std::net::IpAddr;

/// The policy for names with more than one address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DnsSelect {
    /// In the order the lookup gave (A before AAAA), the next one when a connect fails.
    #[default]
    First,
    /// A random address first, then the rest in order after it.
    Random,
    /// Each new connection starts one address further on (counted per client).
    RoundRobin,
}

impl DnsSelect {
    pub fn parse(s: &str) -> Option<DnsSelect> {
        Some(match s {
            "first" => DnsSelect::First,
            "random" => DnsSelect::Random,
            "round_robin" | "roundRobin" => DnsSelect::RoundRobin,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DnsSelect::First => "first",
            DnsSelect::Random => "random",
            DnsSelect::RoundRobin => "round_robin",
        }
    }
}

/// The addresses in the order to try: rotated to start at `turn % len` unless the policy is
/// `first`. Every address stays in the list, so a refused one still falls through to the rest.
pub fn order(addrs: &mut [IpAddr], policy: DnsSelect, turn: usize) {
    if addrs.len() > 1 && policy != DnsSelect::First {
        let n = addrs.len();
        addrs.rotate_left(turn % n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(n: u8) -> Vec<IpAddr> {
        (1..=n).map(|i| IpAddr::from([10, 0, 0, i])).collect()
    }

    #[test]
    fn first_keeps_the_lookup_order() {
        for turn in 0..5 {
            let mut a = ips(3);
            order(&mut a, DnsSelect::First, turn);
            assert_eq!(a, ips(3));
        }
    }

    #[test]
    fn round_robin_starts_each_turn_one_further_and_keeps_every_address() {
        let firsts: Vec<IpAddr> = (0..6)
            .map(|turn| {
                let mut a = ips(3);
                order(&mut a, DnsSelect::RoundRobin, turn);
                let mut sorted = a.clone();
                sorted.sort();
                assert_eq!(sorted, ips(3), "turn {turn}");
                a[0]
            })
            .collect();
        let all = ips(3);
        assert_eq!(firsts, [all[0], all[1], all[2], all[0], all[1], all[2]]);
        let mut a = ips(3);
        order(&mut a, DnsSelect::RoundRobin, 1);
        assert_eq!(a, [all[1], all[2], all[0]]);
    }

    #[test]
    fn random_spreads_over_every_address() {
        let mut seen = [0u32; 4];
        // The caller's random turns; a fixed sequence here.
        for turn in [7usize, 2, 9, 4, 13, 0, 6, 11] {
            let mut a = ips(4);
            order(&mut a, DnsSelect::Random, turn);
            seen[usize::from(match a[0] {
                IpAddr::V4(v) => v.octets()[3] - 1,
                IpAddr::V6(_) => unreachable!(),
            })] += 1;
        }
        assert!(seen.iter().all(|&n| n == 2), "{seen:?}");
        let mut one = ips(1);
        order(&mut one, DnsSelect::Random, 5);
        assert_eq!(one, ips(1));
    }

    #[test]
    fn names_parse_as_k6_writes_them() {
        for p in [DnsSelect::First, DnsSelect::Random, DnsSelect::RoundRobin] {
            assert_eq!(DnsSelect::parse(p.as_str()), Some(p));
        }
        assert_eq!(DnsSelect::parse("roundRobin"), Some(DnsSelect::RoundRobin));
        assert_eq!(DnsSelect::parse("any"), None);
    }
}
