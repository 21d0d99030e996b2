//! The config as a whole: reads the top-level sections in order (server, storage, targets,
//! journeys, SLOs and the OpenSLO files of `slos_from`, profiles, maintenance) and runs the
//! checks that need more than one of them. Each section's own reader lives in its file.

use super::walk::{self, Ctx, Fields, Names, node_at};
use super::yaml::Node;
use super::{
    Config, Env, Profile, Slo, journeys, maintenance, profiles, server, slo_groups, slos, storage,
    targets, telemetry,
};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

const SECTIONS: &[&str] = &[
    "server",
    "storage",
    "targets",
    "journeys",
    "profiles",
    "slos",
    "slos_from",
    "telemetry",
    "maintenance",
];

pub fn config(ctx: &mut Ctx, root: &Node, base: &Path, env: &Env) -> Option<Config> {
    if root.is_null() {
        ctx.error(root.pos, "", "the config is empty; see config/example.yaml");
        return None;
    }
    let top = walk::fields(ctx, root, "", SECTIONS)?;
    let server = server::server(ctx, top.get("server"), base, env);
    let storage = storage::storage(ctx, top.get("storage"), base, env);
    warn_restore_with_peers(ctx, root, server.as_ref(), storage.as_ref());
    let telemetry = telemetry::telemetry(ctx, top.get("telemetry"), base, env);
    let (targets, target_names) = read_targets(ctx, root, &top, base, env);
    let journeys = match top.get("journeys") {
        Some(node) => journeys::journeys(ctx, node, base, env, &targets, &target_names),
        None => BTreeMap::new(),
    };
    let journey_names = top.get("journeys").map(Names::of).unwrap_or_default();
    let refs = Refs {
        targets: &targets,
        target_names: &target_names,
        journeys: &journeys,
        journey_names: &journey_names,
    };
    let mut slos = read_slos(ctx, &top, base, &refs);
    let mut profiles = BTreeMap::new();
    if let Some(node) = top.get("profiles") {
        for (name, _, node) in walk::named(ctx, node, "profiles") {
            if let Some(p) =
                profiles::profile(ctx, &name, node, &target_names, &journeys, &journey_names)
            {
                profiles.insert(name, p);
            }
        }
    }
    let maintenance = read_maintenance(ctx, &top);
    cross_check(ctx, &top, &profiles, &slos);
    super::locations::check(ctx, top.get("slos"), server.as_ref(), &profiles, &mut slos);
    size_default_pools(&mut profiles, &targets, &journeys, &slos);
    Some(Config {
        maintenance,
        server: server?,
        storage: storage?,
        targets,
        profiles,
        slos,
        journeys,
        telemetry,
        secrets: secrets_of(ctx),
    })
}

/// The values the config's references resolved to, each once, longest first.
fn secrets_of(ctx: &Ctx) -> Vec<super::Secret> {
    let mut all: Vec<&String> = ctx.secrets.iter().filter(|s| !s.is_empty()).collect();
    all.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    all.dedup();
    all.into_iter()
        .map(|s| super::Secret::new(s.clone()))
        .collect()
}

/// What the SLOs and profiles may name: the targets and journeys read, and every name given
/// (a target or journey with an error is still a known name).
struct Refs<'a> {
    targets: &'a BTreeMap<String, super::Target>,
    target_names: &'a Names,
    journeys: &'a super::Journeys,
    journey_names: &'a Names,
}

/// Prometheus sums every shard's series: a restored shard holds the whole SLO's past, and its
/// peers' own figures would count those minutes again.
fn warn_restore_with_peers(
    ctx: &mut Ctx,
    root: &Node,
    server: Option<&super::Server>,
    storage: Option<&super::Storage>,
) {
    if let (Some(srv), Some(st)) = (server, storage)
        && !srv.peers.is_empty()
        && st.restore.is_some()
    {
        ctx.warn(
            walk::node_at(Some(root), &["storage", "restore"]),
            "storage.restore",
            "with server.peers, a restore from Prometheus seeds each shard with every shard's past \
             events, which the peers' answers then add again: keep each shard's own store (a PVC) \
             instead, or leave server.peers out",
        );
    }
}

/// `targets`: each one read, and every name given; at least one is needed.
fn read_targets(
    ctx: &mut Ctx,
    root: &Node,
    top: &Fields,
    base: &Path,
    env: &Env,
) -> (BTreeMap<String, super::Target>, Names) {
    let mut targets = BTreeMap::new();
    if let Some(node) = top.get("targets") {
        for (name, _, node) in walk::named(ctx, node, "targets") {
            if let Some(t) = targets::target(ctx, &name, node, base, env) {
                targets.insert(name, t);
            }
        }
    }
    let target_names = top.get("targets").map(Names::of).unwrap_or_default();
    if target_names.is_empty() {
        ctx.error(
            top.get("targets").map_or(root.pos, |n| n.pos),
            "targets",
            "define at least one target",
        );
    }
    (targets, target_names)
}

/// `slos` (each entry, and its groups with `group_by`), then the OpenSLO files of `slos_from`,
/// relative to the config's directory.
fn read_slos(ctx: &mut Ctx, top: &Fields, base: &Path, refs: &Refs<'_>) -> BTreeMap<String, Slo> {
    let mut slos = BTreeMap::new();
    if let Some(node) = top.get("slos") {
        for (name, _, node) in walk::named(ctx, node, "slos") {
            let path = walk::join("slos", &name);
            let Some(f) = walk::fields(ctx, node, &path, slos::FIELDS) else {
                continue;
            };
            let Some(slo) = slos::slo(
                ctx,
                &name,
                &f,
                refs.target_names,
                refs.journeys,
                refs.journey_names,
            ) else {
                continue;
            };
            for s in slo_groups::expand(ctx, &f, slo, refs.journeys, refs.targets) {
                slos.insert(s.name.clone(), s);
            }
        }
    }
    if let Some(node) = top.get("slos_from") {
        for (i, item) in walk::seq(ctx, node, "slos_from").iter().enumerate() {
            let path = format!("slos_from[{i}]");
            if let Some(rel) = walk::string(ctx, item, &path) {
                let file = base.join(rel);
                let names = refs.target_names;
                super::openslo::load_into(ctx, item, &path, &file, names, &mut slos);
            }
        }
    }
    slos
}

/// The top-level `maintenance` windows, then each SLO's own.
fn read_maintenance(ctx: &mut Ctx, top: &Fields) -> Vec<super::Maintenance> {
    let slo_names = top.get("slos").map(Names::of).unwrap_or_default();
    let mut maintenance = Vec::new();
    if let Some(node) = top.get("maintenance") {
        maintenance::windows(ctx, node, "maintenance", None, &slo_names, &mut maintenance);
    }
    if let Some(node) = top.get("slos") {
        for (name, _, node) in walk::named(ctx, node, "slos") {
            if let Some(m) = node_field(node, "maintenance") {
                let path = format!("{}.maintenance", walk::join("slos", &name));
                maintenance::windows(ctx, m, &path, Some(&name), &slo_names, &mut maintenance);
            }
        }
    }
    maintenance
}

/// Sizes the VU pool of every arrival-rate profile without `max_vus`, so that a stall is
/// measured rather than dropped: an arrival finds a VU free as long as the target holds each
/// iteration no longer than it may (`Profile::vu_hold`): the target's timeout, or the largest
/// latency bound of an SLO on it when that is larger; for journeys, the longest walk of the
/// mix (its steps' timeouts and its think times).
fn size_default_pools(
    profiles: &mut BTreeMap<String, Profile>,
    targets: &BTreeMap<String, super::Target>,
    journeys: &super::Journeys,
    slos: &BTreeMap<String, Slo>,
) {
    for p in profiles.values_mut() {
        let Some(hold) = p.vu_hold.as_mut() else {
            continue;
        };
        let slo_bound = slos
            .values()
            .filter(|s| s.target == p.target)
            .filter_map(|s| match s.sli {
                super::Sli::Latency { under, .. } => Some(under),
                super::Sli::Availability => None,
            })
            .max()
            .unwrap_or_default();
        *hold = longest_iteration(&p.target, &p.mix, targets, journeys).max(slo_bound);
        let pool = super::spec::stall_pool(p.executor.peak_rate(), *hold);
        p.executor.widen_default_pool(pool);
    }
}

/// The longest one iteration of a profile may take when the target holds each request as long
/// as it may: its target's timeout for a single request; for journeys, the longest walk of the
/// mix (every step's timeout and the longest of each think time). What a run's last iterations
/// may add past its planned duration (bounded by the graceful stop).
pub fn longest_iteration(
    target: &str,
    mix: &[(String, u32)],
    targets: &BTreeMap<String, super::Target>,
    journeys: &super::Journeys,
) -> Duration {
    let timeout_of = |t: &str| {
        targets
            .get(t)
            .map_or(Duration::from_secs(10), |t| t.timeout)
    };
    if mix.is_empty() {
        return timeout_of(target);
    }
    mix.iter()
        .filter_map(|(j, _)| journeys.get(j))
        .map(|j| {
            let think: Duration = j
                .steps
                .iter()
                .filter_map(|st| st.think)
                .map(|t| t.max)
                .sum();
            timeout_of(&j.target)
                .saturating_mul(u32::try_from(j.steps.len()).unwrap_or(u32::MAX))
                .saturating_add(think)
        })
        .max()
        .unwrap_or_else(|| timeout_of(target))
}

/// Checks that need every section: guards name real SLOs watching the profile's target, and
/// SLO profile lists name real profiles on the SLO's target.
fn cross_check(
    ctx: &mut Ctx,
    top: &Fields,
    profiles: &BTreeMap<String, Profile>,
    slos: &BTreeMap<String, Slo>,
) {
    let profile_nodes = top.get("profiles").map(Names::of).unwrap_or_default();
    let slo_nodes = top.get("slos").map(Names::of).unwrap_or_default();
    // Each entry's node by name, so finding 10,000 positions is 10,000 lookups.
    let profile_at = entries(top.get("profiles"));
    let slo_at = entries(top.get("slos"));
    for p in profiles.values() {
        let Some(g) = &p.guard else { continue };
        let gpos = node_at(profile_at.get(p.name.as_str()).copied(), &["guard", "slo"]);
        match slos.get(&g.slo) {
            Some(s) if s.target != p.target => ctx.error(
                gpos,
                &format!("profiles.{}.guard.slo", p.name),
                format!(
                    "SLO `{}` watches target `{}`, but this profile sends to `{}`",
                    g.slo, s.target, p.target
                ),
            ),
            Some(_) => {}
            None if slo_nodes.contains(&g.slo) => {
                // A grouped SLO is its groups: a guard watches one of them.
                let groups: Vec<&str> = slos
                    .values()
                    .filter(|s| s.group.as_ref().is_some_and(|gr| gr.parent == g.slo))
                    .map(|s| s.name.as_str())
                    .take(3)
                    .collect();
                if !groups.is_empty() {
                    ctx.error(
                        gpos,
                        &format!("profiles.{}.guard.slo", p.name),
                        format!(
                            "SLO `{}` is grouped (`group_by`): guard one of its groups, like `{}`",
                            g.slo,
                            groups.join("`, `")
                        ),
                    );
                }
            }
            None => {
                let hint = ctx.hint(&g.slo, slo_nodes.iter());
                ctx.error(
                    gpos,
                    &format!("profiles.{}.guard.slo", p.name),
                    format!("unknown SLO `{}`{hint}", g.slo),
                );
            }
        }
    }
    let all: Vec<&Slo> = slos.values().collect();
    for p in profiles.values() {
        if let Some(why) = super::capacity::without_condition(p, &all) {
            let pos = node_at(profile_at.get(p.name.as_str()).copied(), &["executor"]);
            ctx.error(pos, &format!("profiles.{}.executor", p.name), why);
        }
    }
    for s in slos.values() {
        for (i, name) in s.profiles.iter().enumerate() {
            let pos = node_at(slo_at.get(s.name.as_str()).copied(), &["profiles"]);
            let path = format!("slos.{}.profiles[{i}]", s.name);
            match profiles.get(name) {
                Some(p) if p.target != s.target => ctx.error(
                    pos,
                    &path,
                    format!(
                        "profile `{name}` sends to `{}`, not to this SLO's target `{}`",
                        p.target, s.target
                    ),
                ),
                Some(_) => {}
                None if profile_nodes.contains(name) => {}
                None => {
                    let hint = ctx.hint(name, profile_nodes.iter());
                    ctx.error(pos, &path, format!("unknown profile `{name}`{hint}"));
                }
            }
        }
    }
}

/// A section's entries by name (`profiles`, `slos`).
fn entries(node: Option<&Node>) -> HashMap<&str, &Node> {
    match node.map(|n| &n.value) {
        Some(super::yaml::Value::Map(entries)) => {
            entries.iter().map(|(k, v)| (k.name.as_str(), v)).collect()
        }
        _ => HashMap::new(),
    }
}

/// The value of `key` in a mapping node.
fn node_field<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.value {
        super::yaml::Value::Map(entries) => {
            entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v)
        }
        _ => None,
    }
}
