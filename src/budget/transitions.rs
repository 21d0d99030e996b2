//! Alert tier transitions, logged once each: when an SLO's burn-rate tier starts firing, stops,
//! or is silenced by a maintenance window, the tick logs one line with the SLO, the tier, both
//! windows' burn rates and the new and old state. A tier whose state did not change between
//! two evaluations logs nothing, so a page that fires for an hour is one line, not 3,600.
//!
//! Pure over two reports (the last one evaluated and the new one); the tick calls [`log`].

use crate::metrics::window_label;
use crate::slo::{SloReport, TierStatus};

/// A tier's state as an operator reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TierState {
    /// Below its factor on one window at least (or no traffic).
    Ok,
    /// Both windows burn past its factor.
    Firing,
    /// It would fire, and a maintenance window silences it.
    Silenced,
}

impl TierState {
    fn of(t: &TierStatus) -> TierState {
        if t.active {
            TierState::Firing
        } else if t.silenced {
            TierState::Silenced
        } else {
            TierState::Ok
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            TierState::Ok => "ok",
            TierState::Firing => "firing",
            TierState::Silenced => "silenced",
        }
    }
}

/// One tier whose state changed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Transition<'a> {
    pub tier: &'a TierStatus,
    pub from: TierState,
    pub to: TierState,
}

/// The tiers of `after` whose state differs from `before`'s (matched by name). A tier new to
/// the SLO (its first evaluation, a reload that added it) was `ok` before.
pub(super) fn changes<'a>(before: Option<&SloReport>, after: &'a SloReport) -> Vec<Transition<'a>> {
    after
        .tiers
        .iter()
        .filter_map(|t| {
            let from = before
                .and_then(|b| b.tiers.iter().find(|o| o.name == t.name))
                .map_or(TierState::Ok, TierState::of);
            let to = TierState::of(t);
            (from != to).then_some(Transition { tier: t, from, to })
        })
        .collect()
}

/// Logs each change of `after` over `before`: one line per tier that changed.
pub(super) fn log(before: Option<&SloReport>, after: &SloReport) {
    for c in changes(before, after) {
        let t = c.tier;
        let (state, was) = (c.to.as_str(), c.from.as_str());
        let (long, short) = (window_label(t.long.window), window_label(t.short.window));
        macro_rules! line {
            ($level:ident, $msg:literal) => {
                tracing::$level!(
                    slo = %after.name,
                    tier = %t.name,
                    severity = t.severity.as_str(),
                    state,
                    was,
                    factor = t.factor,
                    long_window = %long,
                    long_burn_rate = t.long.burn_rate,
                    short_window = %short,
                    short_burn_rate = t.short.burn_rate,
                    $msg
                )
            };
        }
        match c.to {
            TierState::Firing => line!(warn, "SLO alert tier firing"),
            TierState::Silenced => {
                line!(info, "SLO alert tier silenced by a maintenance window")
            }
            TierState::Ok => line!(info, "SLO alert tier stopped firing"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::{SloDef, Windows, default_tiers, evaluate, minute_of};
    use std::time::Duration;

    const NOW: i64 = 1_800_000_000;

    /// A 90 % SLO over 30 days with the Workbook's tiers, after `good` and `bad` events in the
    /// current minute (silenced when `covered`).
    fn report(def: &SloDef, w: &mut Windows, good: u64, bad: u64, covered: bool) -> SloReport {
        let m = minute_of(NOW);
        w.advance(m);
        if good + bad > 0 {
            w.record(m, good, bad);
        }
        let mut r = evaluate(def, w, m);
        if covered {
            r.silence();
        }
        r
    }

    fn states(c: &[Transition<'_>]) -> Vec<(String, &'static str, &'static str)> {
        c.iter()
            .map(|c| (c.tier.name.clone(), c.from.as_str(), c.to.as_str()))
            .collect()
    }

    #[test]
    fn each_change_of_a_tier_is_one_transition_and_no_change_is_none() {
        let period = Duration::from_secs(30 * 86400);
        let def = SloDef {
            name: "s".into(),
            service: "api".into(),
            objective: 0.90,
            period,
            calendar: None,
            tiers: default_tiers(period),
            labels: Default::default(),
            description: String::new(),
        };
        let mut w = Windows::new(def.span());
        let quiet = report(&def, &mut w, 10, 0, false);
        assert!(changes(None, &quiet).is_empty(), "a quiet SLO logs nothing");
        // 10 good, 10 bad: 50 % errors over 1h and 5m, 5× the 10 % budget: page-6h (6×)
        // not yet, ticket-1d (3×) and ticket-3d (1×) fire.
        let burning = report(&def, &mut w, 0, 10, false);
        assert_eq!(
            states(&changes(Some(&quiet), &burning)),
            [
                ("ticket-1d".to_string(), "ok", "firing"),
                ("ticket-3d".to_string(), "ok", "firing")
            ]
        );
        let again = report(&def, &mut w, 0, 0, false);
        assert!(changes(Some(&burning), &again).is_empty(), "still firing");
        let silenced = report(&def, &mut w, 0, 0, true);
        assert_eq!(
            states(&changes(Some(&again), &silenced)),
            [
                ("ticket-1d".to_string(), "firing", "silenced"),
                ("ticket-3d".to_string(), "firing", "silenced")
            ]
        );
        // 10 bad in 200: 5 % errors, 0.5×: every tier stops.
        let healed = report(&def, &mut w, 180, 0, false);
        assert_eq!(
            states(&changes(Some(&silenced), &healed)),
            [
                ("ticket-1d".to_string(), "silenced", "ok"),
                ("ticket-3d".to_string(), "silenced", "ok")
            ]
        );
        assert_eq!(
            states(&changes(None, &burning)),
            states(&changes(Some(&quiet), &burning)),
            "a first evaluation starts from ok"
        );
        // The lines themselves: no panic on any of them.
        log(Some(&quiet), &burning);
        log(Some(&again), &silenced);
        log(Some(&silenced), &healed);
    }
}
