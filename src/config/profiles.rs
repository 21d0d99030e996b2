//! One entry of the `profiles` section: the target, the load (by executor or preset, read in
//! [`super::executors`]), the schedule, thresholds and the SLO guard.

use super::executors::{ALL_EXECUTOR_FIELDS, executor_block, preset_executor};
use super::presets::Preset;
use super::spec::{DEFAULT_MAX_LATENESS, Executor, Placement};
use super::thresholds::thresholds;
use super::walk::{
    self, Ctx, Fields, join, opt_bool, opt_duration, optional, positive_duration, reference,
    required,
};
use super::yaml::Node;
use super::{Guard, Overlap, Profile, Schedule, ThresholdSpec};
use std::time::Duration;

const PROFILE_COMMON: &[&str] = &[
    "target",
    "journey",
    "mix",
    "executor",
    "preset",
    "peak_vus",
    "peak_rate",
    "schedule",
    "every",
    "timezone",
    "jitter",
    "overlap",
    "run_on_start",
    "thresholds",
    "abort_on_fail",
    "graceful_stop",
    "start_time",
    "max_lateness",
    "guard",
    "description",
    "placement",
];

pub fn profile(
    ctx: &mut Ctx,
    name: &str,
    node: &Node,
    targets: &walk::Names,
    journeys: &super::Journeys,
    journey_names: &walk::Names,
) -> Option<Profile> {
    let path = join("profiles", name);
    let mut allowed: Vec<&str> = PROFILE_COMMON.to_vec();
    allowed.extend_from_slice(ALL_EXECUTOR_FIELDS);
    let f = walk::fields(ctx, node, &path, &allowed)?;

    let mix = mix(ctx, &f, &path, journey_names);
    let target = target(ctx, &f, mix.as_deref(), targets, (journeys, journey_names));
    let mix = mix.unwrap_or_default();
    let (preset, executor, capacity) = load(ctx, &f);
    if capacity.is_some() {
        super::capacity::check_thresholds(ctx, &f);
    }
    let schedule = schedule(ctx, &f);
    let jitter = opt_duration(ctx, &f, "jitter", Duration::ZERO, false);
    let overlap = overlap(ctx, &f);
    let run_on_start = opt_bool(ctx, &f, "run_on_start", false);
    let thresholds = profile_thresholds(ctx, &f, preset);
    let graceful_stop = opt_duration(ctx, &f, "graceful_stop", Duration::from_secs(30), false);
    let start_time = opt_duration(ctx, &f, "start_time", Duration::ZERO, false);
    let max_lateness = opt_duration(ctx, &f, "max_lateness", DEFAULT_MAX_LATENESS, true);
    let placement = placement(ctx, &f, capacity.is_some());
    let guard = f
        .get("guard")
        .and_then(|n| guard(ctx, n, &f.path_of("guard")));
    // Without `max_vus`, an arrival-rate profile's pool is sized once every section is read
    // (`build::size_default_pools`): it needs the target's timeout and the journeys' walks.
    let vu_hold = executor
        .as_ref()
        .filter(|e| e.is_arrival_rate())
        .filter(|_| !f.has("max_vus"))
        .map(|_| Duration::ZERO);
    Some(Profile {
        name: name.to_string(),
        target: target?,
        mix,
        executor: executor?,
        schedule,
        jitter,
        overlap,
        run_on_start,
        thresholds,
        graceful_stop,
        start_time,
        max_lateness,
        guard,
        vu_hold,
        placement: placement?,
        capacity,
    })
}

/// The target a profile sends to: its `target`, or its journeys' one target (`journey`,
/// `mix`), never both.
fn target(
    ctx: &mut Ctx,
    f: &Fields,
    mix: Option<&[(String, u32)]>,
    targets: &walk::Names,
    (journeys, journey_names): (&super::Journeys, &walk::Names),
) -> Option<String> {
    match (f.get("target"), mix) {
        (Some(n), Some(m)) if !m.is_empty() => {
            ctx.error(
                n.pos,
                &f.path_of("target"),
                "a journey profile sends to its journeys' target: drop `target`",
            );
            None
        }
        (Some(n), _) => reference(ctx, n, &f.path_of("target"), "target", targets),
        (None, Some(m)) if !m.is_empty() => mix_target(ctx, f, m, journeys, journey_names),
        // Neither `journey` nor `mix` (a broken one answers `None` after its own error).
        (None, Some(_)) | (None, None) => {
            ctx.error(
                f.node.pos,
                &f.path,
                "missing `target` (or `journey`, or `mix`)",
            );
            None
        }
    }
}

/// The load: a `preset` (with `peak_vus` or `peak_rate`) or an executor block.
fn load(
    ctx: &mut Ctx,
    f: &Fields,
) -> (
    Option<Preset>,
    Option<Executor>,
    Option<super::capacity::CapacitySpec>,
) {
    let preset = f.get("preset").and_then(|n| {
        let p = f.path_of("preset");
        walk::string(ctx, n, &p).and_then(|name| match name.parse::<Preset>() {
            Ok(preset) => Some(preset),
            Err(e) => {
                ctx.error(n.pos, &p, e);
                None
            }
        })
    });
    let (executor, capacity) = if f.has("preset") {
        (
            preset.and_then(|preset| preset_executor(ctx, f, preset)),
            None,
        )
    } else {
        for key in ["peak_vus", "peak_rate"] {
            if let Some(n) = f.get(key) {
                ctx.error(
                    n.pos,
                    &f.path_of(key),
                    format!("`{key}` goes with `preset`"),
                );
            }
        }
        executor_block(ctx, f)
    };
    (preset, executor, capacity)
}

/// `schedule` (cron, with `timezone`) or `every`, not both; `None` without either.
fn schedule(ctx: &mut Ctx, f: &Fields) -> Option<Schedule> {
    let schedule = match (f.get("schedule"), f.get("every")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("schedule"),
                "set `schedule` or `every`, not both",
            );
            None
        }
        (Some(n), None) => cron(ctx, f, n),
        (None, Some(n)) => {
            let p = f.path_of("every");
            walk::duration(ctx, n, &p).and_then(|d| match Schedule::every(d) {
                Ok(s) => Some(s),
                Err(e) => {
                    ctx.error(n.pos, &p, e.to_string());
                    None
                }
            })
        }
        (None, None) => None,
    };
    if !f.has("schedule")
        && let Some(n) = f.get("timezone")
    {
        ctx.error(
            n.pos,
            &f.path_of("timezone"),
            "`timezone` needs a `schedule`",
        );
    }
    schedule
}

/// `schedule` at `n`, a crontab line in `timezone` (an unknown zone is an error there).
fn cron(ctx: &mut Ctx, f: &Fields, n: &Node) -> Option<Schedule> {
    let p = f.path_of("schedule");
    let tz = f
        .get("timezone")
        .and_then(|t| walk::string(ctx, t, &f.path_of("timezone")).map(|s| (t.pos, s)));
    let expr = walk::string(ctx, n, &p)?;
    match Schedule::parse(&expr, tz.as_ref().map(|(_, s)| s.as_str())) {
        Ok(s) => Some(s),
        Err(e @ crate::schedule::ScheduleError::UnknownTimeZone { .. }) => {
            let (pos, _) = tz.unwrap_or((n.pos, String::new()));
            ctx.error(pos, &f.path_of("timezone"), e.to_string());
            None
        }
        Err(e) => {
            ctx.error(n.pos, &p, e.to_string());
            None
        }
    }
}

/// `overlap`: `skip` (the default) or `queue`.
fn overlap(ctx: &mut Ctx, f: &Fields) -> Overlap {
    let Some(n) = f.get("overlap") else {
        return Overlap::Skip;
    };
    let p = f.path_of("overlap");
    match walk::string(ctx, n, &p).as_deref() {
        Some("skip") => Overlap::Skip,
        Some("queue") => Overlap::Queue,
        Some(other) => {
            ctx.error(
                n.pos,
                &p,
                format!("`{other}` is not an overlap policy: use `skip` or `queue`"),
            );
            Overlap::Skip
        }
        None => Overlap::Skip,
    }
}

/// `thresholds`, aborting with `abort_on_fail`. A breakpoint run ramps until a threshold
/// fails, then stops: every threshold aborts, and one without thresholds is warned about.
fn profile_thresholds(ctx: &mut Ctx, f: &Fields, preset: Option<Preset>) -> Vec<ThresholdSpec> {
    let abort_on_fail = opt_bool(ctx, f, "abort_on_fail", false);
    let breakpoint = preset == Some(Preset::Breakpoint);
    let thresholds = f
        .get("thresholds")
        .map(|n| {
            thresholds(
                ctx,
                n,
                &f.path_of("thresholds"),
                abort_on_fail || breakpoint,
            )
        })
        .unwrap_or_default();
    if breakpoint
        && thresholds.is_empty()
        && let Some(n) = f.get("preset")
    {
        ctx.warn(
            n.pos,
            &f.path_of("preset"),
            "a breakpoint run without thresholds ramps to its end; add one that marks the break (e.g. http_req_failed: [\"rate<0.01\"])",
        );
    }
    thresholds
}

/// `placement`: `split` (the default) or `owned`. A capacity search is one process's
/// decision: it runs whole on its owner shard (`owned`, its default), never split.
fn placement(ctx: &mut Ctx, f: &Fields, search: bool) -> Option<Placement> {
    let Some(n) = f.get("placement") else {
        return Some(if search {
            Placement::Owned
        } else {
            Placement::Split
        });
    };
    let p = f.path_of("placement");
    walk::string(ctx, n, &p).and_then(|s| match s.parse::<Placement>() {
        Ok(Placement::Split) if search => {
            ctx.error(
                n.pos,
                &p,
                "a capacity search runs whole in one daemon, never split across shards: \
                 remove `placement` (capacity profiles are `owned`)",
            );
            None
        }
        Ok(placement) => Some(placement),
        Err(e) => {
            ctx.error(n.pos, &p, e);
            None
        }
    })
}

fn guard(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Guard> {
    let f = walk::fields(ctx, node, path, &["slo", "max_burn_rate", "window"])?;
    let slo = required(ctx, &f, "slo", walk::string);
    let max_burn_rate = optional(ctx, &f, "max_burn_rate", 14.4, |c, n, p| {
        let v = walk::number(c, n, p)?;
        if v <= 0.0 {
            c.error(n.pos, p, "must be above zero");
            return None;
        }
        Some(v)
    });
    let window = optional(
        ctx,
        &f,
        "window",
        Duration::from_secs(300),
        positive_duration,
    );
    Some(Guard {
        slo: slo?,
        max_burn_rate: max_burn_rate?,
        window: window?,
    })
}

/// `journey: NAME` or `mix: [{journey, weight}]`: `Some(empty)` when neither is set, `None`
/// when what is set is wrong (the errors are recorded).
fn mix(
    ctx: &mut Ctx,
    f: &walk::Fields,
    path: &str,
    journey_names: &walk::Names,
) -> Option<Vec<(String, u32)>> {
    match (f.get("journey"), f.get("mix")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("journey"),
                "set `journey` or `mix`, not both",
            );
            None
        }
        (Some(n), None) => {
            reference(ctx, n, &f.path_of("journey"), "journey", journey_names).map(|j| vec![(j, 1)])
        }
        (None, Some(n)) => {
            let mp = f.path_of("mix");
            let items = walk::seq(ctx, n, &mp);
            if items.is_empty() {
                ctx.error(n.pos, &mp, "a mix needs at least one journey");
                return None;
            }
            let mut out = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                let p = format!("{mp}[{i}]");
                let Some(e) = walk::fields(ctx, item, &p, &["journey", "weight"]) else {
                    ok = false;
                    continue;
                };
                let j = required(ctx, &e, "journey", |c, n, p| {
                    reference(c, n, p, "journey", journey_names)
                });
                let w = optional(ctx, &e, "weight", 1, |c, n, p| {
                    let v = walk::count_u32(c, n, p)?;
                    if v == 0 {
                        c.error(n.pos, p, "a weight is at least 1");
                        return None;
                    }
                    Some(v)
                });
                match (j, w) {
                    (Some(j), Some(w)) if !seen.insert(j.clone()) => {
                        ctx.error(item.pos, &p, format!("journey `{j}` is in the mix twice"));
                        ok = false;
                        let _ = w;
                    }
                    (Some(j), Some(w)) => out.push((j, w)),
                    _ => ok = false,
                }
            }
            let _ = path;
            ok.then_some(out)
        }
        (None, None) => Some(Vec::new()),
    }
}

/// The one target a mix's journeys share.
fn mix_target(
    ctx: &mut Ctx,
    f: &walk::Fields,
    mix: &[(String, u32)],
    journeys: &super::Journeys,
    journey_names: &walk::Names,
) -> Option<String> {
    let mut target: Option<&str> = None;
    for (j, _) in mix {
        let Some(journey) = journeys.get(j) else {
            // Named but broken: its own errors are reported; nothing more to say here.
            let _ = journey_names;
            return None;
        };
        match target {
            None => target = Some(&journey.target),
            Some(t) if t == journey.target => {}
            Some(t) => {
                let n = f.get("mix").or(f.get("journey"));
                ctx.error(
                    n.map_or(crate::config::Pos { line: 1, col: 1 }, |n| n.pos),
                    &f.path_of("mix"),
                    format!(
                        "a mix's journeys share one target: `{}` sends to `{}`, another to `{t}`",
                        j, journey.target
                    ),
                );
                return None;
            }
        }
    }
    target.map(str::to_string)
}
