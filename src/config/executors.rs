//! A profile's load shape: the k6-style executor blocks (`constant-vus`, `ramping-arrival-rate`,
//! ...) and the presets, with the fields each one takes.

use super::capacity::CapacitySpec;
use super::presets::Preset;
use super::spec::{Executor, Stage};
use super::walk::{self, Ctx, Fields, count_u32, optional, positive_duration, required};
use super::yaml::Node;
use std::time::Duration;

const EXECUTORS: &[&str] = &[
    "constant-vus",
    "ramping-vus",
    "constant-arrival-rate",
    "ramping-arrival-rate",
    "shared-iterations",
    "per-vu-iterations",
    super::capacity::NAME,
];

/// Fields each executor takes, beyond the common ones.
fn executor_fields(executor: &str) -> &'static [&'static str] {
    match executor {
        "constant-vus" => &["vus", "duration"],
        "ramping-vus" => &["start_vus", "stages", "graceful_ramp_down"],
        "constant-arrival-rate" => &["rate", "duration", "pre_allocated_vus", "max_vus"],
        "ramping-arrival-rate" => &["start_rate", "stages", "pre_allocated_vus", "max_vus"],
        "shared-iterations" | "per-vu-iterations" => &["vus", "iterations", "max_duration"],
        super::capacity::NAME => super::capacity::FIELDS,
        _ => &[],
    }
}

pub const ALL_EXECUTOR_FIELDS: &[&str] = &[
    "vus",
    "duration",
    "start_vus",
    "stages",
    "graceful_ramp_down",
    "rate",
    "start_rate",
    "pre_allocated_vus",
    "max_vus",
    "iterations",
    "max_duration",
    // `executor: capacity`'s own.
    "max_rate",
    "step_duration",
    "precision",
    "cool_down",
    "capacity",
];

/// The executor of a profile written with `executor:` and its own fields; with `executor:
/// capacity`, its search's fields too.
pub fn executor_block(ctx: &mut Ctx, f: &Fields) -> (Option<Executor>, Option<CapacitySpec>) {
    let executor_name = match f.get("executor") {
        Some(n) => {
            let p = f.path_of("executor");
            walk::string(ctx, n, &p).and_then(|e| {
                if EXECUTORS.contains(&e.as_str()) {
                    Some(e)
                } else {
                    let hint = ctx
                        .did_you_mean(&e, EXECUTORS.iter().copied())
                        .map(|s| format!("did you mean `{s}`?"))
                        .unwrap_or_else(|| format!("one of: {}", EXECUTORS.join(", ")));
                    ctx.error(n.pos, &p, format!("unknown executor `{e}` ({hint})"));
                    None
                }
            })
        }
        // Like k6's CLI: a rate means an open model, otherwise closed-loop VUs.
        None if f.has("rate") => Some("constant-arrival-rate".into()),
        None if f.has("iterations") => Some("shared-iterations".into()),
        None => Some("constant-vus".into()),
    };
    if let Some(e) = &executor_name {
        let own = executor_fields(e);
        for field in ALL_EXECUTOR_FIELDS {
            if !own.contains(field)
                && let Some(n) = f.get(field)
            {
                if e == super::capacity::NAME
                    && let Some(why) = super::capacity::vu_field_error(field)
                {
                    ctx.error(n.pos, &f.path_of(field), why);
                    continue;
                }
                ctx.error(
                    n.pos,
                    &f.path_of(field),
                    format!(
                        "`{field}` does not apply to executor `{e}` (it takes {})",
                        own.join(", ")
                    ),
                );
            }
        }
    }
    match executor_name.as_deref() {
        Some(super::capacity::NAME) => match super::capacity::read(ctx, f) {
            Some((e, spec)) => (Some(e), Some(spec)),
            None => (None, None),
        },
        Some(e) => (executor(ctx, f, e), None),
        None => (None, None),
    }
}

/// A load-test type built from stages: `preset`, `peak_vus` or `peak_rate`, optional
/// `duration` (the whole shape, scaled) and `max_vus` (with `peak_rate`).
pub fn preset_executor(ctx: &mut Ctx, f: &Fields, preset: Preset) -> Option<Executor> {
    if let Some(n) = f.get("executor") {
        ctx.error(
            n.pos,
            &f.path_of("executor"),
            "set `executor` or `preset`, not both",
        );
        return None;
    }
    for field in ALL_EXECUTOR_FIELDS {
        if !matches!(*field, "duration" | "max_vus")
            && let Some(n) = f.get(field)
        {
            ctx.error(
                n.pos,
                &f.path_of(field),
                format!("`{field}` does not apply to a preset (it takes peak_vus or peak_rate, duration, max_vus)"),
            );
        }
    }
    let scale = match f.get("duration") {
        Some(n) => Some(positive_duration(ctx, n, &f.path_of("duration"))?),
        None => None,
    };
    let (peak, arrival) = match (f.get("peak_vus"), f.get("peak_rate")) {
        (Some(n), None) => (count_u32(ctx, n, &f.path_of("peak_vus"))? as f64, false),
        (None, Some(n)) => {
            let r = walk::rate(ctx, n, &f.path_of("peak_rate"))?;
            if r <= 0.0 {
                ctx.error(
                    n.pos,
                    &f.path_of("peak_rate"),
                    "the rate must be above zero",
                );
                return None;
            }
            (r, true)
        }
        _ => {
            ctx.error(
                f.node.pos,
                &f.path,
                "a preset needs exactly one of `peak_vus` (closed model) or `peak_rate` (open model)",
            );
            return None;
        }
    };
    let mut executor = preset.executor(peak, arrival, scale);
    if let Some(n) = f.get("max_vus") {
        let p = f.path_of("max_vus");
        if !arrival {
            ctx.error(n.pos, &p, "`max_vus` goes with `peak_rate`");
        } else if let (
            Some(v),
            Executor::RampingArrivalRate {
                max_vus,
                pre_allocated_vus,
                ..
            },
        ) = (count_u32(ctx, n, &p), &mut executor)
        {
            *max_vus = v;
            *pre_allocated_vus = (*pre_allocated_vus).min(v);
        }
    }
    Some(executor)
}

fn executor(ctx: &mut Ctx, f: &Fields, name: &str) -> Option<Executor> {
    match name {
        "constant-vus" => {
            let vus = optional(ctx, f, "vus", 1, count_u32);
            let duration = required(ctx, f, "duration", positive_duration);
            Some(Executor::ConstantVus {
                vus: vus?,
                duration: duration?,
            })
        }
        "ramping-vus" => {
            let start_vus = optional(ctx, f, "start_vus", 1, |c, n, p| {
                walk::unsigned(c, n, p).map(|v| v.min(1_000_000) as u32)
            });
            let stages = required(ctx, f, "stages", |c, n, p| stages(c, n, p, false));
            let graceful = optional(
                ctx,
                f,
                "graceful_ramp_down",
                Duration::from_secs(30),
                walk::duration,
            );
            Some(Executor::RampingVus {
                start_vus: start_vus?,
                stages: stages?,
                graceful_ramp_down: graceful?,
            })
        }
        "constant-arrival-rate" => {
            let rate = required(ctx, f, "rate", |c, n, p| {
                let r = walk::rate(c, n, p)?;
                if r <= 0.0 {
                    c.error(n.pos, p, "the rate must be above zero");
                    return None;
                }
                Some(r)
            });
            let duration = required(ctx, f, "duration", positive_duration);
            let (pre, max) = vu_pool(ctx, f, rate.unwrap_or(1.0));
            Some(Executor::ConstantArrivalRate {
                rate: rate?,
                duration: duration?,
                pre_allocated_vus: pre?,
                max_vus: max?,
            })
        }
        "ramping-arrival-rate" => {
            let start_rate = optional(ctx, f, "start_rate", 0.0, walk::rate);
            let stages = required(ctx, f, "stages", |c, n, p| stages(c, n, p, true));
            let peak = stages
                .as_ref()
                .map(|s| s.iter().map(|s| s.target).fold(0.0, f64::max))
                .unwrap_or(1.0);
            let (pre, max) = vu_pool(ctx, f, peak);
            Some(Executor::RampingArrivalRate {
                start_rate: start_rate?,
                stages: stages?,
                pre_allocated_vus: pre?,
                max_vus: max?,
            })
        }
        _ => {
            let vus = optional(ctx, f, "vus", 1, count_u32);
            let iterations = required(ctx, f, "iterations", |c, n, p| {
                let v = walk::unsigned(c, n, p)?;
                if v == 0 {
                    c.error(n.pos, p, "must be at least 1");
                    return None;
                }
                Some(v)
            });
            let max_duration = optional(
                ctx,
                f,
                "max_duration",
                Duration::from_secs(600),
                positive_duration,
            );
            if name == "shared-iterations" {
                Some(Executor::SharedIterations {
                    vus: vus?,
                    iterations: iterations?,
                    max_duration: max_duration?,
                })
            } else {
                Some(Executor::PerVuIterations {
                    vus: vus?,
                    iterations: iterations?,
                    max_duration: max_duration?,
                })
            }
        }
    }
}

/// `pre_allocated_vus` and `max_vus`, defaulting from the rate so a plain profile works
/// (`spec::default_vu_pool`: `max_vus` sized for a 50 ms target with 2× headroom).
fn vu_pool(ctx: &mut Ctx, f: &Fields, peak_rate: f64) -> (Option<u32>, Option<u32>) {
    let (guess, sized) = super::spec::default_vu_pool(peak_rate);
    let pre = optional(ctx, f, "pre_allocated_vus", guess, count_u32);
    let max = optional(
        ctx,
        f,
        "max_vus",
        pre.unwrap_or(guess).max(sized),
        count_u32,
    );
    if let (Some(p), Some(m), Some(n)) = (pre, max, f.get("max_vus"))
        && m < p
    {
        ctx.error(
            n.pos,
            &f.path_of("max_vus"),
            format!("max_vus ({m}) is below pre_allocated_vus ({p})"),
        );
        return (pre, None);
    }
    (pre, max)
}

fn stages(ctx: &mut Ctx, node: &Node, path: &str, rates: bool) -> Option<Vec<Stage>> {
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in walk::seq(ctx, node, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(f) = walk::fields(ctx, item, &p, &["duration", "target"]) else {
            ok = false;
            continue;
        };
        let duration = required(ctx, &f, "duration", walk::duration);
        let target = required(ctx, &f, "target", |c, n, p| {
            if rates {
                walk::rate(c, n, p)
            } else {
                walk::unsigned(c, n, p).map(|v| v as f64)
            }
        });
        match (duration, target) {
            (Some(duration), Some(target)) => out.push(Stage { duration, target }),
            _ => ok = false,
        }
    }
    if out.is_empty() && ok {
        ctx.error(node.pos, path, "give at least one stage");
        return None;
    }
    ok.then_some(out)
}
