//! `group_by` on an SLO: the SLO as written becomes one SLO per value of a label (a journey's
//! steps, a request's HTTP status class, or a column of the journey's data file, such as a
//! tenant or a region), each with its own budget, series, rules and alerts.
//!
//! The values are known when the config loads (the steps, the five status classes, the data
//! file's rows), so each group is an ordinary SLO named `PARENT:VALUE` carrying the label
//! `LABEL="VALUE"`: everything downstream (budget, store, `/metrics`, rules, the dashboard)
//! treats it as any other SLO. `max_groups` bounds how many one SLO may make.

use super::walk::{self, Ctx, Fields, join};
use super::yaml::{Node, Value};
use super::{Slo, Target};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One value of an SLO's `group_by`: the SLO as written became one SLO per value, named
/// `PARENT:VALUE`, each counting only its own value's events.
#[derive(Debug, Clone)]
pub struct SloGroup {
    /// The SLO as written (maintenance windows and the dashboard name it).
    pub parent: String,
    /// The label its rules and alerts carry: the column, `step` or `status_class`.
    pub label: String,
    pub value: String,
    pub filter: GroupFilter,
}

/// What one group of an SLO counts, beyond the SLO's own scope.
#[derive(Debug, Clone)]
pub enum GroupFilter {
    /// One step: the group's SLO names it in its own `step`; nothing more to filter.
    Step,
    /// Requests whose HTTP status is in this class (`1`–`5` for 1xx–5xx); `0`: no response.
    StatusClass(u16),
    /// Iterations whose data row is in group `index`: `rows[row]` is each row's group.
    Rows {
        rows: std::sync::Arc<[u16]>,
        index: u16,
    },
}

impl GroupFilter {
    /// Whether an event of data row `row` (a request with `status`, `None` when no response
    /// came) belongs to this group. A `Rows` group never takes an event of no known row.
    pub fn admits(&self, row: Option<usize>, status: Option<u16>) -> bool {
        match self {
            GroupFilter::Step => true,
            GroupFilter::StatusClass(c) => status_class(status) == *c,
            GroupFilter::Rows { rows, index } => {
                row.and_then(|r| rows.get(r)).is_some_and(|g| g == index)
            }
        }
    }
}

/// `1`–`5` for an HTTP status 100–599, `0` for no response (or a status outside them).
fn status_class(status: Option<u16>) -> u16 {
    match status {
        Some(s @ 100..=599) => s / 100,
        _ => 0,
    }
}

/// Groups one SLO makes unless its `max_groups` says otherwise.
pub const DEFAULT_MAX_GROUPS: u64 = 100;
/// The most `max_groups` may allow: each group is an SLO with its own series and rules.
pub const MAX_GROUPS: u64 = 1000;

/// The status classes a `group_by: status_class` SLO splits into, with their class numbers
/// (`GroupFilter::StatusClass`).
const STATUS_CLASSES: [(&str, u16); 6] = [
    ("1xx", 1),
    ("2xx", 2),
    ("3xx", 3),
    ("4xx", 4),
    ("5xx", 5),
    ("none", 0),
];

enum By {
    Step,
    StatusClass,
    Column { name: String, label: String },
}

/// The SLOs `slo` stands for: itself without `group_by`, one per value with it (none when
/// `group_by` is wrong, with the error recorded at its position).
pub fn expand(
    ctx: &mut Ctx,
    f: &Fields,
    slo: Slo,
    journeys: &super::Journeys,
    targets: &BTreeMap<String, Target>,
) -> Vec<Slo> {
    let Some(node) = f.get("group_by") else {
        if let Some(n) = f.get("max_groups") {
            ctx.error(
                n.pos,
                &f.path_of("max_groups"),
                "`max_groups` goes with `group_by`",
            );
        }
        return vec![slo];
    };
    let path = f.path_of("group_by");
    let Some(max) = max_groups(ctx, f) else {
        return Vec::new();
    };
    let Some(by) = by(ctx, node, &path) else {
        return Vec::new();
    };
    let at = (node, path.as_str());
    let journey = slo.journey.as_ref().and_then(|j| journeys.get(j));
    let groups = match &by {
        By::Step => step_groups(ctx, at, &slo, journey),
        By::StatusClass => status_groups(ctx, at, &slo, targets),
        By::Column { name, label } => column_label(ctx, at, name, label).and_then(|()| {
            let groups = column_groups(ctx, node, &path, journey, name, max)?;
            Some(
                groups
                    .into_iter()
                    .map(|(value, filter)| (label.clone(), value, filter))
                    .collect(),
            )
        }),
    };
    let Some(groups) = groups else {
        return Vec::new();
    };
    if !groups_fit(ctx, at, &slo, &groups, max) {
        return Vec::new();
    }
    groups
        .into_iter()
        .map(|(label, value, filter)| {
            let mut child = slo.clone();
            child.name = format!("{}:{value}", slo.name);
            if matches!(filter, GroupFilter::Step) {
                child.step = Some(value.clone());
            } else {
                child.labels.insert(label.clone(), value.clone());
            }
            child.group = Some(SloGroup {
                parent: slo.name.clone(),
                label,
                value,
                filter,
            });
            child
        })
        .collect()
}

/// One group: its label, its value, and which events it counts.
type Group = (String, String, GroupFilter);

/// `max_groups`: 1 to [`MAX_GROUPS`], [`DEFAULT_MAX_GROUPS`] when absent.
fn max_groups(ctx: &mut Ctx, f: &Fields) -> Option<u64> {
    let Some(n) = f.get("max_groups") else {
        return Some(DEFAULT_MAX_GROUPS);
    };
    let p = f.path_of("max_groups");
    match walk::unsigned(ctx, n, &p)? {
        m if (1..=MAX_GROUPS).contains(&m) => Some(m),
        m => {
            ctx.error(
                n.pos,
                &p,
                format!("`max_groups` is between 1 and {MAX_GROUPS}, found {m}"),
            );
            None
        }
    }
}

/// `group_by: step`: one group per step of the SLO's journey.
fn step_groups(
    ctx: &mut Ctx,
    (node, path): (&Node, &str),
    slo: &Slo,
    journey: Option<&super::JourneySpec>,
) -> Option<Vec<Group>> {
    if slo.step.is_some() {
        ctx.error(
            node.pos,
            path,
            "`group_by: step` makes one SLO per step of the journey: drop `step`",
        );
        return None;
    }
    let Some(j) = journey else {
        ctx.error(node.pos, path, "`group_by: step` needs a `journey`");
        return None;
    };
    Some(
        j.steps
            .iter()
            .map(|s| ("step".to_string(), s.name.clone(), GroupFilter::Step))
            .collect(),
    )
}

/// `group_by: status_class`: one group per class of HTTP status, for requests (a target's, or
/// one journey step's) over HTTP.
fn status_groups(
    ctx: &mut Ctx,
    (node, path): (&Node, &str),
    slo: &Slo,
    targets: &BTreeMap<String, Target>,
) -> Option<Vec<Group>> {
    if slo.journey.is_some() && slo.step.is_none() {
        ctx.error(
            node.pos,
            path,
            "a whole-journey SLO counts iterations, which have no status: give `step`, \
             or group by `step` or a data-file column",
        );
        return None;
    }
    if slo.journey.is_none()
        && let Some(t) = targets.get(&slo.target)
        && !matches!(t.uri.scheme_str(), Some("http" | "https"))
    {
        ctx.error(
            node.pos,
            path,
            format!(
                "`status_class` groups HTTP statuses; target `{}` is not HTTP",
                slo.target
            ),
        );
        return None;
    }
    Some(
        STATUS_CLASSES
            .iter()
            .map(|(v, c)| {
                (
                    "status_class".to_string(),
                    (*v).to_string(),
                    GroupFilter::StatusClass(*c),
                )
            })
            .collect(),
    )
}

/// The label a column's groups set: neither one sloburn sets nor an invalid name.
fn column_label(ctx: &mut Ctx, (node, path): (&Node, &str), name: &str, label: &str) -> Option<()> {
    if super::slos::RESERVED_LABELS.contains(&label) || matches!(label, "journey" | "step") {
        ctx.error(
            node.pos,
            path,
            format!(
                "the label `{label}` is set by sloburn; name another with `{{column: {name}, label: ...}}`"
            ),
        );
        return None;
    }
    if !crate::names::label_name_is_valid(label) {
        ctx.error(
            node.pos,
            path,
            format!(
                "`{label}` is not a Prometheus label name; give one with `{{column: {name}, label: ...}}`"
            ),
        );
        return None;
    }
    Some(())
}

/// Whether the groups fit `max_groups`, and their label is not one of the SLO's `labels`.
fn groups_fit(
    ctx: &mut Ctx,
    (node, path): (&Node, &str),
    slo: &Slo,
    groups: &[Group],
    max: u64,
) -> bool {
    if groups.len() as u64 > max {
        ctx.error(
            node.pos,
            path,
            format!(
                "`group_by` makes {} SLOs, over `max_groups` {max}: raise `max_groups` (at most {MAX_GROUPS})",
                groups.len()
            ),
        );
        return false;
    }
    if let Some((label, _, _)) = groups.first()
        && slo.labels.contains_key(label)
    {
        ctx.error(
            node.pos,
            path,
            format!("`labels` already has `{label}`, which each group sets to its value"),
        );
        return false;
    }
    true
}

/// `step`, `status_class`, a column's name, or `{column: NAME, label: LABEL}`.
fn by(ctx: &mut Ctx, node: &Node, path: &str) -> Option<By> {
    match &node.value {
        Value::Scalar { text, .. } => Some(match text.as_str() {
            "step" => By::Step,
            "status_class" => By::StatusClass,
            "" => {
                ctx.error(
                    node.pos,
                    path,
                    "expected `step`, `status_class` or a data-file column",
                );
                return None;
            }
            // `data.tenant`, as a template names the column, is the column `tenant`.
            column => {
                let column = column.strip_prefix("data.").unwrap_or(column);
                By::Column {
                    name: column.to_string(),
                    label: column.to_string(),
                }
            }
        }),
        Value::Map(_) => {
            let f = walk::fields(ctx, node, path, &["column", "label"])?;
            let name = walk::required(ctx, &f, "column", walk::string)?;
            let name = name
                .strip_prefix("data.")
                .map_or(name.clone(), str::to_string);
            let label = match f.get("label") {
                Some(n) => walk::string(ctx, n, &join(path, "label"))?,
                None => name.clone(),
            };
            Some(By::Column { name, label })
        }
        _ => {
            ctx.error(
                node.pos,
                path,
                format!(
                    "expected `step`, `status_class`, a data-file column or `{{column: NAME, label: LABEL}}`, found {}",
                    node.kind()
                ),
            );
            None
        }
    }
}

/// Each distinct value of `column` in the journey's data file (sorted) with the rows that
/// have it. Every row needs a value that can name an SLO; more distinct values than `max`
/// stop the scan.
fn column_groups(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    journey: Option<&super::JourneySpec>,
    column: &str,
    max: u64,
) -> Option<Vec<(String, GroupFilter)>> {
    let (j, data, col) = data_column(ctx, (node, path), journey, column)?;
    // Values in order of first appearance while scanning, then sorted: a row's group index is
    // its value's place in the sorted list.
    let mut seen: BTreeMap<&str, u16> = BTreeMap::new();
    let mut first: Vec<u16> = Vec::with_capacity(data.len());
    for i in 0..data.len() {
        let value = data.row(i).and_then(|r| r.get(col)).unwrap_or("");
        if !walk::is_label_safe(value) {
            // The value itself is never quoted: a data file may hold secrets.
            ctx.error(
                node.pos,
                path,
                format!(
                    "row {} of journey `{}`'s data file: its `{column}` {}",
                    i + 1,
                    j.name,
                    if value.is_empty() {
                        "is empty, and every row needs a value to be grouped by"
                    } else {
                        "cannot name an SLO (a group's value has letters, digits, `-`, `_` and `.`, at most 64)"
                    },
                ),
            );
            return None;
        }
        let next = seen.len();
        let g = match seen.get(value) {
            Some(g) => *g,
            None => {
                if next as u64 >= max {
                    ctx.error(
                        node.pos,
                        path,
                        format!(
                            "`{column}` has more than {max} distinct values in journey `{}`'s data file (`max_groups`): group by a coarser column, or raise `max_groups` (at most {MAX_GROUPS})",
                            j.name
                        ),
                    );
                    return None;
                }
                let g = u16::try_from(next).ok()?;
                seen.insert(value, g);
                g
            }
        };
        first.push(g);
    }
    sorted_groups(&seen, first)
}

/// The journey, its data file and the index of `column` in it; an error when one is missing.
fn data_column<'a>(
    ctx: &mut Ctx,
    (node, path): (&Node, &str),
    journey: Option<&'a super::JourneySpec>,
    column: &str,
) -> Option<(&'a super::JourneySpec, &'a crate::journey::DataSet, usize)> {
    let Some(j) = journey else {
        ctx.error(
            node.pos,
            path,
            "a data-file column groups a journey's iterations: give the SLO a `journey` (or group by `status_class`)",
        );
        return None;
    };
    let Some((data, _)) = &j.data else {
        ctx.error(
            node.pos,
            path,
            format!(
                "journey `{}` has no data file to take `{column}` from (or group by `step` or `status_class`)",
                j.name
            ),
        );
        return None;
    };
    let Some(col) = data.columns().iter().position(|c| c == column) else {
        let hint = ctx.hint(column, data.columns().iter().map(String::as_str));
        ctx.error(
            node.pos,
            path,
            format!(
                "journey `{}`'s data file has no column `{column}`{hint} (columns: {})",
                j.name,
                data.columns().join(", ")
            ),
        );
        return None;
    };
    Some((j, data, col))
}

/// The groups of the values `seen` (each with its number in order of first appearance), each
/// row's group (`first`) renumbered by sorted value (the map iterates sorted).
fn sorted_groups(
    seen: &BTreeMap<&str, u16>,
    first: Vec<u16>,
) -> Option<Vec<(String, GroupFilter)>> {
    let mut renumber = vec![0u16; seen.len()];
    for (sorted, (_, g)) in seen.iter().enumerate() {
        renumber[usize::from(*g)] = u16::try_from(sorted).ok()?;
    }
    let rows: Arc<[u16]> = first
        .into_iter()
        .map(|g| renumber[usize::from(g)])
        .collect();
    Some(
        seen.keys()
            .enumerate()
            .filter_map(|(i, v)| {
                Some((
                    (*v).to_string(),
                    GroupFilter::Rows {
                        rows: rows.clone(),
                        index: u16::try_from(i).ok()?,
                    },
                ))
            })
            .collect(),
    )
}
