//! A profile with `executor: capacity` (issue 47): the daemon searches the highest arrival
//! rate its target serves within the profile's thresholds and the SLOs on its target, with the
//! fields of `sloburn capacity` (`max_rate`, `start_rate`, `step_duration`, `precision`,
//! `max_duration`, `cool_down`, `max_vus`), and `capacity: {min_rate, max_drop}` for the
//! generated alert. Checked here, each at its position: VU fields (the search is open model
//! only), `max_rate` under the first step, thresholds that cannot fail with the target (a
//! counter or gauge follows the rate it is given), and (`build::cross_check`) a profile with
//! no pass condition at all.

use super::spec::{Executor, default_vu_pool};
use super::walk::{self, Ctx, Fields, count_u32, optional, positive_duration};
use super::yaml::{Node, Value};
use super::{Profile, Slo};
use std::time::Duration;

/// The executor's name.
pub const NAME: &str = "capacity";

/// The fields `executor: capacity` takes.
pub const FIELDS: &[&str] = &[
    "max_rate",
    "start_rate",
    "step_duration",
    "precision",
    "max_duration",
    "cool_down",
    "max_vus",
    "capacity",
];

/// Fields of the closed model (VU executors): never a capacity profile's.
const VU_FIELDS: &[&str] = &[
    "vus",
    "start_vus",
    "stages",
    "iterations",
    "graceful_ramp_down",
];

/// A step when `step_duration` is not given: the search chooses each step's from its rate
/// (`capacity::Plan::step_len`); this is only the executor's placeholder length.
const PLACEHOLDER_STEP: Duration = Duration::from_secs(5);

/// What the daemon searches with, as `sloburn capacity`'s flags.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySpec {
    /// The ceiling: no step runs above it (arrivals a second).
    pub max_rate: f64,
    /// The first step's rate (default `max_rate / 32`).
    pub start_rate: f64,
    /// Each step's length; `None` chooses it from the step's rate and the conditions.
    pub step_duration: Option<Duration>,
    /// The answer's bracket, 0.05 for 5 %.
    pub precision: f64,
    /// The budget for the whole search.
    pub max_duration: Duration,
    /// The pause between steps.
    pub cool_down: Duration,
    /// Every step's VU pool; `None` sizes each step's for its rate.
    pub max_vus: Option<u32>,
    /// `capacity.min_rate`: the generated alert fires below it.
    pub min_rate: Option<f64>,
    /// `capacity.max_drop`: the alert fires when the capacity fell more than this share
    /// (0.2 for 20 %) under its 7-day median.
    pub max_drop: Option<f64>,
}

/// A closed-model field on a capacity profile, said as what to do.
pub fn vu_field_error(field: &str) -> Option<String> {
    VU_FIELDS.contains(&field).then(|| {
        format!(
            "`{field}` is a VU executor's: a capacity search is open model only (arrival \
             rates, never VUs); drop it, the search sets each step's rate from `start_rate` \
             up to `max_rate`"
        )
    })
}

/// The executor a capacity profile runs a step with (the search replaces its rate and length
/// at each step), and the search's fields.
pub fn read(ctx: &mut Ctx, f: &Fields) -> Option<(Executor, CapacitySpec)> {
    let max_rate = walk::required(ctx, f, "max_rate", positive_rate);
    let start_rate = match f.get("start_rate") {
        Some(n) => positive_rate(ctx, n, &f.path_of("start_rate")),
        None => max_rate.map(|m| m / 32.0),
    };
    if let (Some(max), Some(start), Some(n)) = (max_rate, start_rate, f.get("max_rate"))
        && max < start
    {
        ctx.error(
            n.pos,
            &f.path_of("max_rate"),
            format!(
                "max_rate ({}) is under the first step (start_rate {}): raise it or lower \
                 start_rate",
                show_rate(max),
                show_rate(start)
            ),
        );
        return None;
    }
    let step_duration = match f.get("step_duration") {
        Some(n) => Some(positive_duration(ctx, n, &f.path_of("step_duration"))?),
        None => None,
    };
    let precision = optional(ctx, f, "precision", 0.05, precision);
    let max_duration = optional(
        ctx,
        f,
        "max_duration",
        Duration::from_secs(15 * 60),
        positive_duration,
    );
    let cool_down = optional(ctx, f, "cool_down", Duration::from_secs(2), walk::duration);
    let max_vus = match f.get("max_vus") {
        Some(n) => Some(count_u32(ctx, n, &f.path_of("max_vus"))?),
        None => None,
    };
    let (min_rate, max_drop) = match f.get("capacity") {
        Some(n) => alert(ctx, n, &f.path_of("capacity"))?,
        None => (None, None),
    };
    let spec = CapacitySpec {
        max_rate: max_rate?,
        start_rate: start_rate?,
        step_duration,
        precision: precision?,
        max_duration: max_duration?,
        cool_down: cool_down?,
        max_vus,
        min_rate,
        max_drop,
    };
    let (pre, max) = default_vu_pool(spec.max_rate);
    let max = spec.max_vus.unwrap_or(max);
    let executor = Executor::ConstantArrivalRate {
        rate: spec.start_rate,
        duration: step_duration.unwrap_or(PLACEHOLDER_STEP),
        pre_allocated_vus: pre.min(max),
        max_vus: max,
    };
    Some((executor, spec))
}

/// Thresholds a capacity profile cannot be judged by: a counter or gauge follows the rate each
/// step is given, whatever the target does (`dropped_iterations` is the target's saturation).
pub fn check_thresholds(ctx: &mut Ctx, f: &Fields) {
    let Some(Value::Map(entries)) = f.get("thresholds").map(|n| &n.value) else {
        return;
    };
    for (key, _) in entries {
        let Ok(m) = crate::thresholds::parse_metric(&key.name) else {
            continue;
        };
        let kind = m.kind;
        let counts = matches!(
            kind,
            crate::thresholds::MetricKind::Counter | crate::thresholds::MetricKind::Gauge
        );
        if counts && m.base != "dropped_iterations" {
            ctx.error(
                key.pos,
                &walk::join(&f.path_of("thresholds"), &key.name),
                format!(
                    "`{}` cannot fail a capacity step: it follows the rate each step is given, \
                     not how the target holds it; use a latency (http_req_duration), \
                     http_req_failed or checks threshold, or an SLO on the target",
                    key.name
                ),
            );
        }
    }
}

/// Why a capacity profile has nothing to judge a step by, if it has not: no threshold, and no
/// SLO on its target that counts its traffic (a journey's SLO is not a step's condition).
pub fn without_condition(p: &Profile, slos: &[&Slo]) -> Option<String> {
    if !p.thresholds.is_empty() || p.capacity.is_none() {
        return None;
    }
    let judged = slos.iter().any(|s| {
        s.target == p.target
            && s.journey.is_none()
            && (s.profiles.is_empty() || s.profiles.contains(&p.name))
    });
    (!judged).then(|| {
        format!(
            "nothing decides a capacity step of `{}`: give it thresholds (e.g. \
             http_req_duration: [\"p(95)<300\"]) or an SLO on target `{}`",
            p.name, p.target
        )
    })
}

fn positive_rate(ctx: &mut Ctx, n: &Node, p: &str) -> Option<f64> {
    let r = walk::rate(ctx, n, p)?;
    if r <= 0.0 || !r.is_finite() {
        ctx.error(n.pos, p, "the rate must be above zero");
        return None;
    }
    Some(r)
}

/// `5%` or `0.05`, above 0 and at most 50 %.
fn precision(ctx: &mut Ctx, n: &Node, p: &str) -> Option<f64> {
    let v = share(ctx, n, p)?;
    if !(v > 0.0 && v <= 0.5) {
        ctx.error(n.pos, p, "precision must be above 0 % and at most 50 %");
        return None;
    }
    Some(v)
}

/// A share written `20%` or `0.2`.
fn share(ctx: &mut Ctx, n: &Node, p: &str) -> Option<f64> {
    let text = walk::string(ctx, n, p)?;
    let t = text.trim();
    let (num, percent) = match t.strip_suffix('%') {
        Some(num) => (num.trim(), true),
        None => (t, false),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() => Some(if percent { v / 100.0 } else { v }),
        _ => {
            ctx.error(n.pos, p, format!("`{text}`: write a share as 20% or 0.2"));
            None
        }
    }
}

/// `capacity: {min_rate, max_drop}`.
fn alert(ctx: &mut Ctx, n: &Node, path: &str) -> Option<(Option<f64>, Option<f64>)> {
    let f = walk::fields(ctx, n, path, &["min_rate", "max_drop"])?;
    let min_rate = match f.get("min_rate") {
        Some(n) => Some(positive_rate(ctx, n, &f.path_of("min_rate"))?),
        None => None,
    };
    let max_drop = match f.get("max_drop") {
        Some(n) => {
            let p = f.path_of("max_drop");
            let v = share(ctx, n, &p)?;
            if !(v > 0.0 && v < 1.0) {
                ctx.error(n.pos, &p, "max_drop must be above 0 % and under 100 %");
                return None;
            }
            Some(v)
        }
        None => None,
    };
    if min_rate.is_none() && max_drop.is_none() {
        ctx.error(n.pos, path, "give `min_rate`, `max_drop` or both");
        return None;
    }
    Some((min_rate, max_drop))
}

fn show_rate(r: f64) -> String {
    if (r - r.round()).abs() < 1e-9 {
        format!("{}/s", r.round())
    } else {
        format!("{r:.2}/s")
    }
}
