//! `run FILE --profile P` with load flags: `--duration`, `--vus`, `--rate`, `--iterations`
//! and `--max-vus` set the profile's executor fields of the same meaning, as k6's command-line
//! options override a script's. A flag the executor has no field for is refused with the reason,
//! never dropped without a word.

use crate::config::spec::{Executor, default_vu_pool, stall_pool};
use std::time::Duration;

/// The load flags given on the command line, parsed.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct LoadFlags {
    pub duration: Option<Duration>,
    pub vus: Option<u32>,
    pub rate: Option<f64>,
    pub iterations: Option<u64>,
    pub max_vus: Option<u32>,
}

/// `executor` with `flags` applied, and a line per flag saying what it replaced. `hold` is how
/// long the target may hold an iteration when the profile's VU pool is defaulted: a new
/// `--rate` then sizes the pool for itself, as the config would have. `Err` names the flag, the
/// profile's executor and what to do instead.
pub(super) fn apply(
    profile: &str,
    executor: &mut Executor,
    hold: Option<Duration>,
    flags: LoadFlags,
) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let kind = crate::load::plan::executor_name(executor);
    let mut step = |flag: &str, result: Applied| match result {
        Ok((was, now)) => {
            notes.push(format!("--{flag} {now} over profile `{profile}`'s {was}"));
            Ok(())
        }
        Err(why) => Err(format!(
            "--{flag} does not apply to profile `{profile}` ({kind}): {why}; \
             edit the profile, or run an ad-hoc test with --url"
        )),
    };
    if let Some(d) = flags.duration {
        step("duration", duration(executor, d))?;
    }
    if let Some(r) = flags.rate {
        step("rate", rate(executor, r, hold))?;
    }
    if let Some(n) = flags.vus {
        step("vus", vus(executor, n))?;
    }
    if let Some(n) = flags.iterations {
        step("iterations", iterations(executor, n))?;
    }
    if let Some(n) = flags.max_vus {
        if flags.vus.is_some_and(|v| n < v) {
            return Err(format!(
                "--max-vus ({n}) is below --vus ({}), the pre-allocated VUs",
                flags.vus.unwrap_or(0)
            ));
        }
        step("max-vus", max_vus(executor, n))?;
    }
    Ok(notes)
}

/// What a flag replaced (was, now), or why the executor has no such field.
type Applied = Result<(String, String), &'static str>;

fn duration(executor: &mut Executor, d: Duration) -> Applied {
    let field = match executor {
        Executor::ConstantVus { duration, .. } | Executor::ConstantArrivalRate { duration, .. } => {
            duration
        }
        Executor::SharedIterations { max_duration, .. }
        | Executor::PerVuIterations { max_duration, .. } => max_duration,
        Executor::RampingVus { .. } | Executor::RampingArrivalRate { .. } => {
            return Err("its length is the sum of its stages");
        }
    };
    let was = crate::units::format_duration(*field);
    *field = d;
    Ok((was, crate::units::format_duration(d)))
}

fn rate(executor: &mut Executor, rate: f64, hold: Option<Duration>) -> Applied {
    let Executor::ConstantArrivalRate {
        rate: r,
        pre_allocated_vus,
        max_vus,
        ..
    } = executor
    else {
        return Err("only a constant-arrival-rate profile has one rate");
    };
    let was = format!("{r}/s");
    *r = rate;
    if let Some(hold) = hold {
        // A defaulted pool was sized for the config's rate: size it for this one.
        let (pre, _) = default_vu_pool(rate);
        *pre_allocated_vus = pre;
        *max_vus = stall_pool(rate, hold).max(pre);
    }
    Ok((was, format!("{rate}/s")))
}

/// An arrival-rate executor's VU pool: (pre-allocated, max).
fn pool(executor: &mut Executor) -> Option<(&mut u32, &mut u32)> {
    match executor {
        Executor::ConstantArrivalRate {
            pre_allocated_vus,
            max_vus,
            ..
        }
        | Executor::RampingArrivalRate {
            pre_allocated_vus,
            max_vus,
            ..
        } => Some((pre_allocated_vus, max_vus)),
        _ => None,
    }
}

fn vus(executor: &mut Executor, n: u32) -> Applied {
    if let Executor::ConstantVus { vus, .. }
    | Executor::SharedIterations { vus, .. }
    | Executor::PerVuIterations { vus, .. } = executor
    {
        let was = vus.to_string();
        *vus = n.max(1);
        return Ok((was, n.to_string()));
    }
    let (pre, max) = pool(executor).ok_or("its VUs follow its stages")?;
    let was = format!("{pre} pre-allocated VUs");
    *pre = n;
    *max = (*max).max(n);
    Ok((was, n.to_string()))
}

fn iterations(executor: &mut Executor, n: u64) -> Applied {
    match executor {
        Executor::SharedIterations { iterations, .. }
        | Executor::PerVuIterations { iterations, .. } => {
            let was = iterations.to_string();
            *iterations = n;
            Ok((was, n.to_string()))
        }
        _ => Err("only shared-iterations and per-vu-iterations profiles count iterations"),
    }
}

fn max_vus(executor: &mut Executor, n: u32) -> Applied {
    let (pre, max) = pool(executor).ok_or("only arrival-rate profiles have a VU pool")?;
    let was = format!("max_vus {max}");
    *max = n.max(1);
    *pre = (*pre).min(*max);
    Ok((was, n.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate_profile() -> Executor {
        Executor::ConstantArrivalRate {
            rate: 50.0,
            duration: Duration::from_secs(50),
            pre_allocated_vus: 5,
            max_vus: 100,
        }
    }

    #[test]
    fn flags_set_the_fields_of_the_same_meaning() {
        let mut e = rate_profile();
        let flags = LoadFlags {
            duration: Some(Duration::from_secs(5)),
            rate: Some(2000.0),
            max_vus: Some(150),
            ..LoadFlags::default()
        };
        let notes = apply("steady", &mut e, None, flags).unwrap();
        let Executor::ConstantArrivalRate {
            rate,
            duration,
            pre_allocated_vus,
            max_vus,
        } = e
        else {
            panic!("{e:?}")
        };
        assert_eq!(
            (rate, duration, pre_allocated_vus, max_vus),
            (2000.0, Duration::from_secs(5), 5, 150)
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].contains("--duration 5s over profile `steady`'s 50s"),
            "{notes:?}"
        );

        let mut closed = Executor::ConstantVus {
            vus: 10,
            duration: Duration::from_secs(60),
        };
        let flags = LoadFlags {
            duration: Some(Duration::from_secs(5)),
            vus: Some(3),
            ..LoadFlags::default()
        };
        apply("p", &mut closed, None, flags).unwrap();
        assert!(matches!(
            closed,
            Executor::ConstantVus { vus: 3, duration } if duration == Duration::from_secs(5)
        ));
    }

    #[test]
    fn a_new_rate_resizes_a_defaulted_pool() {
        let mut e = rate_profile();
        let flags = LoadFlags {
            rate: Some(2000.0),
            ..LoadFlags::default()
        };
        apply("p", &mut e, Some(Duration::from_secs(1)), flags).unwrap();
        let Executor::ConstantArrivalRate {
            pre_allocated_vus,
            max_vus,
            ..
        } = e
        else {
            panic!("{e:?}")
        };
        assert_eq!((pre_allocated_vus, max_vus), (200, 2000));
    }

    #[test]
    fn a_flag_without_a_field_is_refused_with_the_reason() {
        let mut ramp = Executor::RampingVus {
            start_vus: 0,
            stages: Vec::new(),
            graceful_ramp_down: Duration::ZERO,
        };
        let flags = LoadFlags {
            duration: Some(Duration::from_secs(5)),
            ..LoadFlags::default()
        };
        let err = apply("ramp", &mut ramp, None, flags).unwrap_err();
        assert!(
            err.contains("--duration does not apply to profile `ramp` (ramping-vus)")
                && err.contains("sum of its stages"),
            "{err}"
        );
        let mut closed = Executor::ConstantVus {
            vus: 1,
            duration: Duration::from_secs(1),
        };
        let flags = LoadFlags {
            rate: Some(10.0),
            ..LoadFlags::default()
        };
        let err = apply("c", &mut closed, None, flags).unwrap_err();
        assert!(err.contains("--rate does not apply"), "{err}");
        let flags = LoadFlags {
            iterations: Some(10),
            ..LoadFlags::default()
        };
        assert!(apply("c", &mut closed, None, flags).is_err());
        let flags = LoadFlags {
            max_vus: Some(10),
            ..LoadFlags::default()
        };
        assert!(apply("c", &mut closed, None, flags).is_err());
    }
}
