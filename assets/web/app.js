/* sloburn's dashboard (served by the daemon at /) and run report (sloburn run --report).
 * Charts are uPlot; every chart also has its numbers in a table, its unit in its title, and says
 * "no data" instead of drawing a flat line at zero. Colours are Okabe-Ito (colour-blind safe).
 * The dashboard polls the JSON API every 2 s; with server.protect_reads the token is asked once,
 * kept in sessionStorage and sent as a bearer header, never put in a URL. */
"use strict";
(function () {
  const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"];
  const TOKEN_KEY = "sloburn.token";
  const POLL_MS = 2000;
  const TABLE_ROWS = 400;
  const charts = {};
  window.__sloburn = { charts: charts };

  // ---- small helpers ----
  function el(tag, attrs, kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const kid of kids || []) if (kid !== null && kid !== undefined) e.append(kid);
    return e;
  }
  const has = (v) => v !== null && v !== undefined && Number.isFinite(v);
  function num(v, digits) {
    if (!has(v)) return "no data";
    return v.toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 2 : digits, minimumFractionDigits: 0 });
  }
  function pct(v, digits) { return has(v) ? (v * 100).toFixed(digits === undefined ? 3 : digits) + "%" : "no data"; }
  function ms(v) {
    if (!has(v)) return "no data";
    if (v >= 1000) return (v / 1000).toFixed(2) + " s";
    if (v >= 10) return v.toFixed(1) + " ms";
    return v.toFixed(2) + " ms";
  }
  function clock(t) {
    if (!has(t)) return "–";
    const d = new Date(t * 1000);
    return d.toLocaleString("en-GB", { hour12: false });
  }
  function hms(t) { return has(t) ? new Date(t * 1000).toLocaleTimeString("en-GB", { hour12: false }) : "–"; }
  function span(seconds) {
    if (!has(seconds)) return "–";
    const s = Math.round(seconds);
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    if (s < 172800) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }
  function bytes(n) {
    if (!has(n)) return "no data";
    if (n < 1e3) return n + " B";
    if (n < 1e6) return (n / 1e3).toFixed(1) + " kB";
    if (n < 1e9) return (n / 1e6).toFixed(1) + " MB";
    return (n / 1e9).toFixed(1) + " GB";
  }
  function field(name, text, value) {
    return el("span", { "data-field": name, "data-value": has(value) ? String(value) : null, text: text });
  }
  function figures(pairs) {
    const dl = el("dl", { class: "figures" });
    for (const [k, v] of pairs) dl.append(el("dt", { text: k }), el("dd", {}, [v]));
    return dl;
  }
  function table(head, rows, numeric) {
    const t = el("table");
    t.append(el("thead", {}, [el("tr", {}, head.map((h, i) => el("th", { class: numeric && numeric[i] ? "num" : null, text: h })))]));
    const body = el("tbody");
    for (const r of rows) {
      body.append(el("tr", {}, r.map((c, i) => {
        const td = el("td", { class: numeric && numeric[i] ? "num" : null });
        if (c instanceof Node) td.append(c); else td.textContent = c;
        return td;
      })));
    }
    t.append(body);
    return t;
  }
  function verdict(passed) {
    return el("span", { class: "verdict " + (passed ? "good" : "bad"), text: passed ? "✓ pass" : "✗ FAIL" });
  }

  // ---- charts ----
  /* spec: { title, unit, x: [..], time: bool, xLabel, series: [{label, values, points}], scatter,
   *         fmt: value formatter for the table, height } */
  function chart(container, id, spec) {
    let fig = container.querySelector(`figure[data-chart="${id}"]`);
    if (!fig) {
      fig = el("figure", { class: "chart", "data-chart": id }, [
        el("h4", { text: `${spec.title} (${spec.unit})` }),
        el("div", { class: "plot", role: "img", "aria-label": `${spec.title}, in ${spec.unit}; the numbers are in the table below` }),
        el("p", { class: "nodata", text: "no data", hidden: "" }),
        el("details", {}, [el("summary", { text: "numbers" }), el("div", { class: "numbers" })]),
      ]);
      container.append(fig);
    }
    const plot = fig.querySelector(".plot");
    const nodata = fig.querySelector("p.nodata");
    const any = spec.series.some((s) => s.values.some(has));
    fig.setAttribute("data-points", String(spec.series.reduce((n, s) => n + s.values.filter(has).length, 0)));
    if (!any) {
      if (charts[id]) { charts[id].destroy(); delete charts[id]; }
      plot.hidden = true;
      nodata.hidden = false;
      fig.querySelector(".numbers").replaceChildren(el("p", { class: "nodata", text: "no data" }));
      return;
    }
    plot.hidden = false;
    nodata.hidden = true;
    const data = [spec.x].concat(spec.series.map((s) => s.values));
    const key = spec.series.map((s) => s.label).join("|");
    let u = charts[id];
    if (u && u._sbKey === key) {
      u.setData(data);
    } else {
      if (u) u.destroy();
      const width = Math.max(260, Math.min(Math.floor(fig.getBoundingClientRect().width) || 560, 1100));
      const fmt = spec.fmt || ((v) => num(v));
      const opts = {
        width: width,
        height: spec.height || 180,
        legend: { show: true },
        scales: { x: { time: !!spec.time } },
        axes: [
          { label: spec.xLabel || (spec.time ? "time" : ""), size: 54 },
          { label: spec.unit, size: 60, values: (self, ticks) => ticks.map((v) => num(v, 3)) },
        ],
        series: [{ label: spec.xLabel || "time", value: spec.time ? (self, v) => hms(v) : (self, v) => (has(v) ? num(v, 3) : "–") }].concat(
          spec.series.map((s, i) => {
            const color = s.color || PALETTE[i % PALETTE.length];
            const out = { label: s.label, stroke: color, width: 1.5, spanGaps: !!s.spanGaps, value: (self, v) => (has(v) ? fmt(v) : "–") };
            if (s.points) {
              out.paths = () => null;
              out.points = { show: true, size: 4, space: 0, fill: color, stroke: color };
            } else {
              // A sparse series (a run or two in the hour, a new SLO) would be invisible as a
              // line between isolated points: draw its points.
              out.points = { show: s.values.filter(has).length < 40, size: 5, fill: color, stroke: color };
            }
            if (s.dash) out.dash = s.dash;
            return out;
          })
        ),
      };
      u = new uPlot(opts, data, plot);
      u._sbKey = key;
      charts[id] = u;
    }
    fig.querySelector(".numbers").replaceChildren(numbers(spec));
  }

  function numbers(spec) {
    const fmt = spec.fmt || ((v) => num(v));
    let rows = [];
    for (let i = 0; i < spec.x.length; i++) {
      const vals = spec.series.map((s) => s.values[i]);
      if (!vals.some(has)) continue;
      rows.push([spec.time ? hms(spec.x[i]) : num(spec.x[i], 3)].concat(vals.map((v) => (has(v) ? fmt(v) : "no data"))));
    }
    let note = null;
    if (spec.scatter) {
      const slow = [];
      for (let i = 0; i < spec.x.length; i++) {
        for (const s of spec.series) if (s.points && has(s.values[i])) slow.push([spec.x[i], s.values[i], s.label]);
      }
      slow.sort((a, b) => b[1] - a[1]);
      note = el("p", { text: `${slow.length} sampled requests; the slowest ${Math.min(slow.length, 50)} are listed (the percentile lines are in the next chart's table).` });
      const head = [spec.xLabel, `latency (${spec.unit})`, "outcome"];
      return el("div", {}, [note, table(head, slow.slice(0, 50).map((r) => [num(r[0], 3), fmt(r[1]), r[2]]), [true, true, false])]);
    }
    if (rows.length > TABLE_ROWS) {
      note = el("p", { text: `the last ${TABLE_ROWS} of ${rows.length} rows` });
      rows = rows.slice(rows.length - TABLE_ROWS);
    }
    const head = [spec.xLabel || "time"].concat(spec.series.map((s) => `${s.label} (${spec.unit})`));
    return el("div", {}, [note, table(head, rows, head.map((_, i) => i > 0))]);
  }

  // ---- API ----
  async function api(path) {
    const headers = {};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    const r = await fetch(path, { headers: headers, cache: "no-store" });
    if (r.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      askToken();
      throw new Error("the API needs the admin token");
    }
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  }

  function askToken() {
    const form = document.getElementById("login");
    if (!form || !form.hidden) return;
    form.hidden = false;
    form.onsubmit = (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
      document.getElementById("token").value = "";
      form.hidden = true;
      refresh();
    };
  }

  // ---- dashboard: SLO cards ----
  function burnBar(burn, tiers, scaleMax, labels) {
    const bar = el("div", { class: "bar", role: "img", "aria-label": `burn rate ${num(burn)}×` });
    const w = has(burn) ? Math.min(100, (burn / scaleMax) * 100) : 0;
    bar.append(el("div", { class: "fill", style: `width:${w}%` }));
    const seen = new Set();
    for (const t of tiers) {
      if (seen.has(t.factor)) continue;
      seen.add(t.factor);
      bar.append(el("div", { class: "mark", style: `left:${Math.min(100, (t.factor / scaleMax) * 100)}%`, title: `${t.name}: ${t.factor}×` }, [labels ? el("span", { text: `${t.factor}×` }) : null]));
    }
    return bar;
  }

  function sloCard(s) {
    const card = el("article", { class: "card slo-card", "data-slo": s.name });
    const active = s.tiers.filter((t) => t.active);
    const remaining = s.budget_remaining;
    const budgetBar = el("div", { class: "bar" + (has(remaining) && remaining < 0 ? " negative" : ""), role: "img", "aria-label": `budget remaining ${pct(remaining)}` }, [
      el("div", { class: "fill", style: `width:${has(remaining) ? Math.max(0, Math.min(100, remaining * 100)) : 0}%` }),
    ]);
    card.append(el("h3", { text: s.name }));
    if (s.group) card.append(el("p", { class: "group", "data-field": "group", text: `${s.group.label} = ${s.group.value}, one group of ${s.group.slo}` }));
    card.append(
      figures([
        ["objective", field("objective", pct(s.objective), s.objective)],
        ["SLI, period (" + s.period.window + ")", field("sli", pct(s.period.sli), s.period.sli)],
        ["budget remaining", el("span", {}, [field("budget_remaining", pct(remaining, 2), remaining), budgetBar])],
        ["time to exhaustion", field("time_to_exhaustion", has(remaining) && remaining <= 0 ? "exhausted" : has(s.time_to_exhaustion_seconds) ? span(s.time_to_exhaustion_seconds) : "not burning", s.time_to_exhaustion_seconds)],
        ["active alerts", field("alerts", active.length ? active.map((t) => `${t.name} (${t.severity})`).join(", ") : "none", active.length)],
      ])
    );
    const max = Math.max(1, ...s.tiers.map((t) => t.factor), ...s.windows.map((w) => (has(w.burn_rate) ? w.burn_rate : 0))) * 1.1;
    card.append(
      el("h4", { text: "burn rate by window (× the budget rate; marks: alert tier factors)" }),
      table(
        ["window", "burn rate", "SLI", "events", ""],
        s.windows.map((w, i) => [
          w.window,
          el("span", { "data-field": "burn_rate", "data-window": w.window, text: has(w.burn_rate) ? num(w.burn_rate, 2) + "×" : "no data" }),
          pct(w.sli),
          num(w.good + w.bad, 0),
          burnBar(w.burn_rate, s.tiers, max, i === s.windows.length - 1),
        ]),
        [false, true, true, true, false]
      )
    );
    card.append(el("h4", { text: "alerts (multiwindow, multi-burn-rate; as `sloburn rules` writes them)" }), alertsTable(s));
    card.append(el("div", { class: "burn-down" }));
    return card;
  }

  // `30d` → seconds (calendar periods such as `month` have no fixed length: null).
  function secondsOf(text) {
    const units = { d: 86400, h: 3600, m: 60, s: 1 };
    let total = 0;
    const parts = String(text).match(/(\d+)([dhms])/g);
    if (!parts || parts.join("") !== String(text)) return null;
    for (const p of parts) total += parseInt(p, 10) * units[p.slice(-1)];
    return total;
  }

  // The tiers as a table of eight narrow columns that wraps within the card (the card may be
  // 620 px wide), and their PromQL below it, where a long expression has the card's width.
  function alertsTable(s) {
    const period = secondsOf(s.period.window);
    const burn = (w) => (has(w.burn_rate) ? num(w.burn_rate, 2) + "×" : "no data") + " over " + w.window;
    const withRules = s.tiers.filter((t) => t.expr);
    return el("div", { class: "alerts" }, [table(
      ["tier", "severity", "state", "long window", "short window", "threshold", "for", "budget gone in"],
      s.tiers.map((t) => [
        el("span", { class: "tier", text: t.name }),
        t.severity,
        el("span", { class: t.active ? "bad" : "good", "data-field": "tier-state", "data-tier": t.name, text: s.maintenance ? "silenced (maintenance)" : t.active ? "firing" : "ok" }),
        burn(t.long),
        burn(t.short),
        num(t.factor, 1) + "×",
        t.for || "0s",
        // A budget already spent has no time left to lose it in.
        has(s.budget_remaining) && s.budget_remaining <= 0 ? "spent"
          : period && has(t.long.burn_rate) && t.long.burn_rate > 0 ? span(period / t.long.burn_rate) : "—",
      ]),
      [false, false, false, true, true, true, true, true]
    ), withRules.length ? el("details", { class: "rules" }, [
      el("summary", { text: "PromQL of each tier" }),
      ...withRules.map((t) => el("div", { "data-tier": t.name }, [el("h5", { text: t.name }), el("pre", { class: "promql", text: t.expr })])),
    ]) : null]);
  }

  function renderSlos(slos, series) {
    const box = document.getElementById("slo-cards");
    const byName = {};
    for (const s of series.slos || []) byName[s.name] = s;
    if (!slos.slos.length) {
      box.replaceChildren(el("p", { class: "nodata", text: "no SLOs configured" }));
      return;
    }
    // Cards are rebuilt (their numbers change); their charts move into the new ones.
    const grid = el("div", { class: "cards" });
    for (const s of slos.slos) {
      const old = box.querySelector(`article[data-slo="${CSS.escape(s.name)}"] figure.chart`);
      const card = sloCard(s);
      if (old) card.querySelector(".burn-down").append(old);
      grid.append(card);
    }
    box.replaceChildren(grid);
    for (const s of slos.slos) {
      const card = grid.querySelector(`article[data-slo="${CSS.escape(s.name)}"]`);
      chart(card.querySelector(".burn-down"), "slo-" + s.name, chartSpecOfSlo(s, byName[s.name]));
    }
  }
  function chartSpecOfSlo(s, burn) {
    const bd = burn && burn.burn_down;
    return {
      title: `error budget remaining over the period (${s.period.window})`,
      unit: "% of budget",
      time: true,
      x: bd ? bd.t : [],
      series: [{ label: "budget remaining", values: bd ? bd.budget_remaining.map((v) => (has(v) ? v * 100 : null)) : [] }],
      fmt: (v) => v.toFixed(2) + "%",
    };
  }

  // ---- dashboard: profiles ----
  function profileSpecs(p) {
    const c = p.points;
    const classes = Object.keys(c.error_ratio || {});
    const errSeries = [{ label: "failed (any)", values: c.failed_ratio.map((v) => (has(v) ? v * 100 : null)) }].concat(
      classes.map((k) => ({ label: k, values: c.error_ratio[k].map((v) => (has(v) ? v * 100 : null)) }))
    );
    return [
      ["rate", { title: "request rate", unit: "req/s", time: true, x: c.t, series: [{ label: "rate", values: c.rate }] }],
      ["latency", {
        title: "latency percentiles", unit: "ms", time: true, x: c.t, fmt: ms,
        series: [
          { label: "p50", values: c.p50_ms }, { label: "p90", values: c.p90_ms },
          { label: "p95", values: c.p95_ms }, { label: "p99", values: c.p99_ms },
        ],
      }],
      ["errors", { title: "error ratio by class", unit: "% of requests", time: true, x: c.t, series: errSeries, fmt: (v) => v.toFixed(3) + "%" }],
      ["vus", {
        title: "VUs and dropped iterations", unit: "count", time: true, x: c.t,
        series: [{ label: "busy VUs", values: c.vus }, { label: "VUs allocated", values: c.vus_max }, { label: "dropped / 10 s", values: c.dropped }],
      }],
    ];
  }

  // A capacity profile's searches over time (`executor: capacity`): each decided search's
  // capacity (the highest rate that passed, twice) and the lowest rate that failed, from the
  // runs kept (the store keeps them across restarts).
  function capacitySpecs(p, runs) {
    const done = ((runs && runs.runs) || [])
      .filter((r) => r.profile === p.name && r.capacity && has(r.finished_at))
      .sort((a, b) => a.finished_at - b.finished_at);
    if (!done.length) return [];
    const at = (k) => done.map((r) => (has(r.capacity[k]) ? r.capacity[k] : null));
    const low = done.map((r) => (r.capacity.outcome === "below_lowest" ? 0 : has(r.capacity.low) ? r.capacity.low : null));
    return [["capacity", {
      title: "capacity at the SLO, per search", unit: "req/s", time: true, x: done.map((r) => r.finished_at),
      series: [{ label: "capacity (passed twice)", values: low }, { label: "lowest rate failed", values: at("high"), dash: [4, 4] }],
    }]];
  }

  function profileCard(p, box, runs) {
    let card = box.querySelector(`article[data-profile="${CSS.escape(p.name)}"]`);
    if (!card) {
      card = el("article", { class: "card profile-card", "data-profile": p.name }, [
        el("h3"), el("div", { class: "state" }), el("div", { class: "live-box" }), el("div", { class: "charts" }),
      ]);
      // In the page before its charts are drawn, so they take the width they are given.
      box.append(card);
    }
    card.querySelector("h3").textContent = `${p.name} → ${p.target}`;
    const state = p.running ? "running" : p.paused ? "paused" : "idle";
    const last = p.last_run;
    card.querySelector(".state").replaceChildren(figures([
      ["state", field("state", state)],
      ["schedule", document.createTextNode(p.schedule || "on demand")],
      ["next run", field("next_run", has(p.next_run) ? clock(p.next_run) : "none scheduled", p.next_run)],
      ["last run", last ? el("span", {}, [el("a", { href: `#run/${last.id}`, text: `#${last.id}` }), ` ${last.result}` + (has(last.finished_at) ? `, ${clock(last.finished_at)}` : "")]) : el("span", { class: "nodata", text: "none yet" })],
    ]));
    const live = p.live;
    const liveBox = card.querySelector(".live-box");
    if (live) {
      liveBox.replaceChildren(el("div", { class: "live", "data-live": String(live.run) }, [
        el("h4", { text: `run #${live.run} in progress, ${span(live.elapsed_seconds)}` }),
        figures([
          ["requests so far", field("live_requests", num(live.requests, 0), live.requests)],
          ["current rate", field("live_rate", num(live.rate, 1) + " req/s", live.rate)],
          ["p95 so far", field("live_p95", ms(live.p95_ms), live.p95_ms)],
          ["failed", field("live_failed", num(live.failed, 0), live.failed)],
        ]),
      ]));
    } else {
      liveBox.replaceChildren(el("p", { class: "nodata", text: "no run in progress" }));
    }
    const grid = card.querySelector(".charts");
    for (const [kind, spec] of profileSpecs(p).concat(capacitySpecs(p, runs))) chart(grid, `profile-${p.name}-${kind}`, spec);
    return card;
  }

  function renderProfiles(series, runs) {
    const box = document.getElementById("profile-cards");
    if (!series.profiles.length) {
      box.replaceChildren(el("p", { class: "nodata", text: "no profiles configured" }));
      return;
    }
    let grid = box.querySelector(".cards");
    if (!grid) {
      grid = el("div", { class: "cards" });
      box.replaceChildren(grid);
    }
    const keep = new Set();
    for (const p of series.profiles) {
      keep.add(profileCard(p, grid, runs));
    }
    for (const c of Array.from(grid.children)) if (!keep.has(c)) c.remove();
  }

  // ---- dashboard: runs ----
  function renderRuns(runs) {
    const box = document.getElementById("run-list");
    if (!runs.runs.length) {
      box.replaceChildren(el("p", { class: "nodata", text: "no runs yet" }));
      return;
    }
    const rows = runs.runs.slice(0, 200).map((r) => [
      el("a", { href: `#run/${r.id}`, text: `#${r.id}` }),
      r.profile,
      el("span", { class: r.result === "passed" ? "good" : r.result === "running" ? "" : "bad", text: r.result + (r.reason ? `: ${r.reason}` : "") }),
      clock(r.started_at),
      has(r.finished_at) ? span(r.finished_at - r.started_at) : "running",
      num(r.requests, 0),
      num(r.rate, 1),
      pct(r.failed_ratio, 2),
      r.result === "running" ? "–" : ms(r.p95_ms),
      r.result === "running" ? "–" : ms(r.p99_ms),
    ]);
    box.replaceChildren(table(["run", "profile", "result", "started", "took", "requests", "req/s", "failed", "p95", "p99"], rows,
      [false, false, false, false, true, true, true, true, true, true]));
  }

  // ---- one run's detail (dashboard and report) ----
  function renderRun(root, d) {
    root.replaceChildren();
    const s = d.summary;
    root.append(
      el("h2", {}, [`${d.profile}${d.target ? " → " + d.target : ""}${d.id ? ` · run #${d.id}` : ""} · `, el("span", { "data-field": "result", class: d.result === "passed" ? "good" : "bad", text: d.result })]),
      d.reason ? el("p", { class: "bad", text: d.reason }) : "",
      d.setup ? el("dl", { class: "setup", "data-field": "setup" }, [
        el("dt", { text: "URL" + (d.setup.urls.length > 1 ? "s" : "") }), el("dd", { text: d.setup.urls.join(", ") }),
        el("dt", { text: "load" }), el("dd", { text: d.setup.load }),
        el("dt", { text: "command" }), el("dd", {}, [el("code", { text: d.setup.command })]),
      ]) : "",
      figures([
        ["started", document.createTextNode(`${clock(d.started_at)} (took ${span(d.finished_at - d.started_at)})`)],
        ["requests", field("requests", num(s.requests, 0), s.requests)],
        ["rate", field("rate", num(s.rate, 1) + " req/s", s.rate)],
        ["failed", field("failed", `${num(s.failed, 0)} (${pct(s.requests ? s.failed / s.requests : null, 2)})`, s.failed)],
        ["latency p50 / p90 / p95 / p99 / max", document.createTextNode([s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms, s.max_ms].map(ms).join(" / "))],
        ["dropped iterations", field("dropped", num(s.dropped, 0), s.dropped)],
        ["VUs allocated", document.createTextNode(num(s.vus_max, 0))],
        ["data sent / received", document.createTextNode(`${bytes(s.data_sent_bytes)} / ${bytes(s.data_received_bytes)}`)],
      ])
    );
    root.append(el("h3", { text: "thresholds" }));
    root.append(d.thresholds.length
      ? table(["metric", "threshold", "observed", "verdict"], d.thresholds.map((t) => [t.metric, t.threshold, `${t.observed_text}${t.unit === "ms" || t.observed === null ? "" : " (" + t.unit + ")"}`, verdict(t.passed)]))
      : el("p", { class: "nodata", text: "no thresholds" }));

    const grid = el("div", { class: "charts run-charts" });
    root.append(el("h3", { text: "over time" }), grid);
    const sc = d.scatter;
    const tl = d.timeline;
    // One x axis for the samples and the per-second percentile lines (uPlot's layout): the
    // samples' start offsets and the ends of the timeline's intervals, merged in order.
    const lineX = tl.map((p) => p.t + p.seconds - d.started_at);
    const sx = [], ok = [], bad = [], p50 = [], p95 = [], p99 = [];
    for (let i = 0, j = 0; i < sc.t.length || j < lineX.length;) {
      if (j >= lineX.length || (i < sc.t.length && sc.t[i] <= lineX[j])) {
        sx.push(sc.t[i]);
        ok.push(sc.failed[i] ? null : sc.ms[i]);
        bad.push(sc.failed[i] ? sc.ms[i] : null);
        p50.push(null); p95.push(null); p99.push(null);
        i++;
      } else {
        sx.push(lineX[j]);
        ok.push(null); bad.push(null);
        p50.push(tl[j].p50_ms); p95.push(tl[j].p95_ms); p99.push(tl[j].p99_ms);
        j++;
      }
    }
    const scatterBox = el("div", { class: "wide" });
    grid.before(scatterBox);
    chart(scatterBox, "scatter", {
      title: `latency of each request by start time (${sc.t.length} of ${sc.seen} sampled); lines: percentiles of the requests that ended in each second`, unit: "ms", xLabel: "seconds since start",
      x: sx, scatter: true, fmt: ms, height: 280,
      series: [
        { label: "ok", values: ok, color: PALETTE[0], points: true },
        { label: "failed", values: bad, color: PALETTE[3], points: true },
        { label: "p50", values: p50, color: PALETTE[2], spanGaps: true },
        { label: "p95", values: p95, color: PALETTE[1], spanGaps: true },
        { label: "p99", values: p99, color: PALETTE[4], spanGaps: true },
      ],
    });
    const x = tl.map((p) => p.t + p.seconds);
    chart(grid, "percentiles", {
      title: "latency percentiles per interval", unit: "ms", time: true, x: x, fmt: ms,
      series: ["p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms"].map((k) => ({ label: k.replace("_ms", ""), values: tl.map((p) => p[k]) })),
    });
    chart(grid, "rate", { title: "request rate", unit: "req/s", time: true, x: x, series: [{ label: "rate", values: tl.map((p) => (p.seconds > 0 ? p.requests / p.seconds : null)) }] });
    const classes = Array.from(new Set(tl.flatMap((p) => Object.keys(p.errors))));
    chart(grid, "errors", {
      title: "errors by class", unit: "% of requests", time: true, x: x, fmt: (v) => v.toFixed(3) + "%",
      series: [{ label: "failed (any)", values: tl.map((p) => (p.requests ? (100 * p.failed) / p.requests : null)) }].concat(
        classes.map((k) => ({ label: k, values: tl.map((p) => (p.requests ? (100 * (p.errors[k] || 0)) / p.requests : null)) }))),
    });
    chart(grid, "vus", {
      title: "VUs and dropped iterations", unit: "count", time: true, x: x,
      series: [{ label: "busy VUs", values: tl.map((p) => p.vus) }, { label: "VUs allocated", values: tl.map((p) => p.vus_max) }, { label: "dropped", values: tl.map((p) => p.dropped) }],
    });

    const maxAvg = Math.max(0, ...d.phases.map((p) => (has(p.avg_ms) ? p.avg_ms : 0)));
    root.append(el("h3", { text: "phases (ms)" }), table(["phase", "avg", "p95", "max", "share of the slowest avg"], d.phases.map((p) => [
      p.phase, ms(p.avg_ms), ms(p.p95_ms), ms(p.max_ms),
      has(p.avg_ms) && maxAvg > 0 ? el("div", { class: "bar", role: "img", "aria-label": ms(p.avg_ms) }, [el("div", { class: "fill", style: `width:${(100 * p.avg_ms) / maxAvg}%` })]) : el("span", { class: "nodata", text: "no data" }),
    ]), [false, true, true, true, false]));
    const total = s.requests || 0;
    root.append(el("h3", { text: "status codes" }), d.statuses.length || d.no_response
      ? table(["status", "requests", "share"], d.statuses.map(([c, n]) => [c === 0 && d.no_response == null ? "0 (no response)" : String(c), num(n, 0), pct(total ? n / total : null, 2)]).concat(d.no_response ? [["no response", num(d.no_response, 0), pct(total ? d.no_response / total : null, 2)]] : []), [false, true, true])
      : el("p", { class: "nodata", text: "no data" }));
    root.append(el("h3", { text: "error classes" }), d.errors.length
      ? table(["class", "requests", "share"], d.errors.map(([c, n]) => [c, num(n, 0), pct(total ? n / total : null, 2)]), [false, true, true])
      : el("p", { text: "no transport errors" }));
    root.append(el("h3", { text: "checks" }), d.checks.length
      ? table(["check", "passes", "fails", "pass rate"], d.checks.map((c) => [c.name, num(c.passes, 0), num(c.fails, 0), pct(c.passes + c.fails ? c.passes / (c.passes + c.fails) : null, 2)]), [false, true, true, true])
      : el("p", { class: "nodata", text: "no checks" }));
    const ev = d.evidence || [];
    root.append(el("h3", { text: "failure evidence" }), ev.length
      ? el("div", { class: "evidence" }, ev.map((f) => {
          const what = [f.status !== null && f.status !== undefined ? "status " + f.status : null, f.error ? "error " + f.error : null,
            f.failed_checks.length ? "failed: " + f.failed_checks.join(", ") : null].filter((x) => x).join(" · ");
          return el("details", { class: "failure" }, [
            el("summary", { text: f.step + " at " + num(f.at, 1) + " s — " + what }),
            f.headers.length ? table(["header", "value"], f.headers.map(([k, v]) => [k, v]), [false, false]) : null,
            el("pre", { class: "body", text: f.body + (f.body_truncated ? "\n…" : "") }),
          ]);
        }))
      : el("p", { class: "nodata", text: d.evidence_withheld || "no failing response" }));
  }

  // ---- routing and polling ----
  let timer = null;
  function protectedReads() {
    const m = document.querySelector('meta[name="sloburn-protect-reads"]');
    return !!m && m.content === "true";
  }
  async function refresh() {
    clearTimeout(timer);
    if (protectedReads() && !sessionStorage.getItem(TOKEN_KEY)) {
      askToken();
      return;
    }
    const problem = document.getElementById("problem");
    try {
      const m = location.hash.match(/^#run\/(\d+)$/);
      document.getElementById("app").hidden = !!m;
      document.getElementById("run").hidden = !m;
      if (m) {
        const r = await api(`/api/runs/${m[1]}`);
        const root = document.getElementById("run");
        const back = el("p", {}, [el("a", { href: "#", text: "← dashboard" })]);
        if (!r.detail && r.run.capacity) {
          const c = r.run.capacity;
          const rows = (c.steps || []).map((st) => [String(st.step), num(st.rate, 2), st.purpose, st.verdict,
            st.why || (st.deciding ? `${st.deciding.condition}: ${num(st.deciding.observed, 2)}` : "–"), num(st.requests, 0)]);
          root.replaceChildren(back, el("h2", { text: `capacity search #${r.run.id} of ${r.run.profile}: ${r.run.result}` }),
            el("p", { class: "capacity-answer", text: c.summary }),
            table(["step", "rate/s", "purpose", "verdict", "deciding figure", "requests"], rows, [true, true, false, false, false, true]));
        } else if (r.detail) {
          const box = el("div");
          root.replaceChildren(back, box);
          renderRun(box, r.detail);
        } else {
          root.replaceChildren(back, el("h2", { text: `run #${r.run.id} of ${r.run.profile}: ${r.run.result}` }),
            el("p", { class: "nodata", text: r.run.result === "running" ? "in progress: its detail appears when it ends (live figures are on the dashboard)" : "no detail was kept for this run" }));
          timer = setTimeout(refresh, POLL_MS);
        }
      } else {
        const [slos, series, runs] = await Promise.all([api("/api/slos"), api("/api/series"), api("/api/runs")]);
        renderSlos(slos, series);
        renderProfiles(series, runs);
        renderRuns(runs);
        // What the page shows was drawn from these (tests compare the two).
        window.__sloburn.last = { slos: slos, series: series, runs: runs };
        timer = setTimeout(refresh, POLL_MS);
      }
      problem.hidden = true;
      document.getElementById("updated").textContent = "updated " + hms(Date.now() / 1000);
      document.body.setAttribute("data-rendered", String(Date.now()));
    } catch (e) {
      problem.textContent = String(e.message || e);
      problem.hidden = false;
      if (sessionStorage.getItem(TOKEN_KEY) || document.getElementById("login").hidden) timer = setTimeout(refresh, POLL_MS * 2);
    }
  }

  // Charts follow their place in the page when the window changes size.
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => {
      for (const u of Object.values(charts)) {
        const fig = u.root.closest("figure.chart");
        const w = fig ? Math.floor(fig.getBoundingClientRect().width) : 0;
        if (w > 0) u.setSize({ width: Math.max(260, Math.min(w, 1100)), height: u.height });
      }
    }, 150);
  });

  window.SB = {
    dashboard: function () {
      window.addEventListener("hashchange", refresh);
      refresh();
    },
    report: function (d) {
      renderRun(document.getElementById("run"), d);
      document.body.setAttribute("data-rendered", String(Date.now()));
    },
  };
})();
