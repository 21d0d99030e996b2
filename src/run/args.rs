//! `sloburn run`'s flags and `--shard i/N`.

use crate::load::plan::Shard;
use anyhow::anyhow;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// Config file holding the profile to run (or use --url for an ad-hoc run).
    pub file: Option<PathBuf>,
    /// Which profile of the config to run (optional when it has only one).
    #[arg(long)]
    pub profile: Option<String>,
    /// Ad-hoc target URL; `${env:NAME}` and `${file:PATH}` are expanded (also in -H), and
    /// messages show them as written.
    #[arg(long)]
    pub url: Option<String>,
    /// A/B under one load: each iteration goes to --url or to this URL (alternating by the
    /// golden-ratio sequence), and the summary ends with `sloburn compare`'s rows, verdict and
    /// exit code (99 when --url regressed against it).
    #[arg(long, value_name = "URL", requires = "url")]
    pub baseline_url: Option<String>,
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request body (with a grpc:// --url: the message in JSON, an array of them for a
    /// client-streaming method).
    #[arg(long)]
    pub body: Option<String>,
    /// With a grpc:// or grpcs:// --url: the method, `package.Service/Method` (default: the
    /// standard health check, grpc.health.v1.Health/Check). -H adds metadata.
    #[arg(long, value_name = "package.Service/Method")]
    pub grpc_method: Option<String>,
    /// gRPC: a .proto file defining --grpc-method (repeatable); without any, the server's
    /// reflection is asked at the first call.
    #[arg(long = "proto", value_name = "FILE.proto")]
    pub protos: Vec<PathBuf>,
    /// gRPC: a folder --proto's imports are found in (repeatable).
    #[arg(long = "import-path", value_name = "DIR")]
    pub import_paths: Vec<PathBuf>,
    /// Virtual users (closed model), or pre-allocated VUs with --rate (default: a tenth of a
    /// second of arrivals, 1 to 1000, at most --max-vus).
    #[arg(long, env = "K6_VUS")]
    pub vus: Option<u32>,
    /// Open model: iterations per time unit, e.g. `2000/s`.
    #[arg(long)]
    pub rate: Option<String>,
    /// Upper bound on VUs for --rate (default: --rate × --timeout, so a stall as long as the
    /// timeout is measured, not dropped; at least 100 and 100 ms of arrivals, at most 100000).
    /// VUs are made as arrivals need them.
    #[arg(long)]
    pub max_vus: Option<u32>,
    /// With --rate: drop arrivals the generator reaches later than this behind schedule
    /// (default 500ms), counted as dropped iterations and as generator overload.
    #[arg(long)]
    pub max_lateness: Option<String>,
    /// Test duration, e.g. `30s` (default 10s).
    #[arg(long, env = "K6_DURATION")]
    pub duration: Option<String>,
    /// Total iterations shared by the VUs (shared-iterations executor).
    #[arg(long, env = "K6_ITERATIONS")]
    pub iterations: Option<u64>,
    /// Open a new connection for every request (ab without -k).
    #[arg(long, env = "K6_NO_CONNECTION_REUSE", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_keep_alive: bool,
    /// Per-request timeout (default 10s).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Skip TLS certificate verification.
    #[arg(long, env = "K6_INSECURE_SKIP_TLS_VERIFY", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure: bool,
    /// HTTP version, over the target's `http`: `2` (h2c prior knowledge on http://, only h2 in
    /// ALPN on https), `1.1`, or `auto` (ALPN on https).
    #[arg(long, value_name = "2|1.1|auto")]
    pub http: Option<String>,
    /// Threshold `metric=expression` in k6 syntax, e.g. `http_req_duration=p(95)<300` (ms) or
    /// `http_req_duration{status:200}=p(99)<500` (repeatable).
    #[arg(long = "threshold")]
    pub thresholds: Vec<String>,
    /// Stop the run as soon as a --threshold fails.
    #[arg(long)]
    pub abort_on_fail: bool,
    /// Run shard `i/N` of the profile (N replicas together produce the whole profile).
    #[arg(long)]
    pub shard: Option<String>,
    /// With --shard i/N: one of N processes with one verdict (an Indexed Job's pods). Shard 0
    /// collects the others' figures at this URL (http://HOST:PORT, its own address) and alone
    /// prints the whole run's summary, writes its --summary-export and exits 0, 99 or 75 for it.
    #[arg(long, value_name = "URL")]
    pub collect: Option<String>,
    /// Where shard 0 listens for the others (default: every address, the --collect URL's port).
    #[arg(long, value_name = "ADDR")]
    pub collect_listen: Option<std::net::SocketAddr>,
    /// The token every shard and the collector share: the collector refuses a join or a share
    /// without `Authorization: Bearer <token>`. `${env:NAME}` and `${file:PATH}` are read as in
    /// --url; default: the SLOBURN_COLLECT_TOKEN environment variable when set.
    #[arg(long, value_name = "TOKEN")]
    pub collect_token: Option<String>,
    /// How long the shards wait for each other to start (default 5m: pods may be pulling).
    #[arg(long, value_name = "DURATION")]
    pub collect_timeout: Option<String>,
    /// Write k6's summary-export JSON here.
    #[arg(long, env = "K6_SUMMARY_EXPORT")]
    pub summary_export: Option<PathBuf>,
    /// Write the run's record here: every histogram per metric, step and status class, the
    /// counts, checks, plan and start, as versioned JSON that `sloburn compare` reads.
    #[arg(long, value_name = "FILE.json")]
    pub record: Option<PathBuf>,
    /// Write a self-contained HTML report of the run here (charts inlined; opens offline).
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Outputs (repeatable): `json=FILE` writes k6's per-sample NDJSON (Metric and Point
    /// lines); `json-agg=FILE` one aggregate JSON line per second;
    /// `prometheus-rw=URL[?interval=5s&native=true]` pushes to a Prometheus remote write
    /// receiver every interval and at the end; `opentelemetry[=URL]` pushes OTLP/HTTP metrics
    /// (by default to `$OTEL_EXPORTER_OTLP_ENDPOINT`, else http://localhost:4318).
    #[arg(long, env = "K6_OUT")]
    pub out: Vec<String>,
    /// k6's `-e KEY=VALUE` (repeatable): the value `${env:KEY}` reads in the config, --url and
    /// -H, over the process's environment.
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// k6's `--tag NAME=VALUE` (repeatable): a tag on every sample `--out json` writes and a
    /// label on every series `--out prometheus-rw` and `opentelemetry` push.
    #[arg(long = "tag", value_name = "NAME=VALUE")]
    pub tags: Vec<String>,
    /// Accepted as k6 takes it; sloburn's summary is plain text without colours.
    #[arg(long, env = "K6_NO_COLOR", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_color: bool,
    /// k6's `--http-debug`: print each request's and response's head to stderr
    /// (`--http-debug=full`: with the first 2 KiB of each body); secret values are redacted.
    #[arg(long, value_enum, value_name = "full", num_args = 0..=1, require_equals = true,
          default_missing_value = "headers")]
    pub http_debug: Option<HttpDebug>,
    /// A `testid` label on every series `--out prometheus-rw` pushes.
    #[arg(long)]
    pub testid: Option<String>,
    /// Fraction of requests written to `--out json` (0 < f ≤ 1, every k-th request), e.g. 0.1.
    #[arg(long)]
    pub out_sample: Option<f64>,
    /// Runtime worker threads (1 measured fastest per request on small machines).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// No progress line even on a terminal.
    #[arg(long, short)]
    pub quiet: bool,
    /// Run even when the VUs cannot all hold a connection under the open-file limit (the
    /// shortfall then shows as `local_fd_exhausted` errors).
    #[arg(long)]
    pub ignore_fd_limit: bool,
}

/// What `--http-debug` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpDebug {
    /// Request and response heads (`--http-debug`).
    Headers,
    /// Heads and bodies (`--http-debug=full`).
    Full,
}

pub fn parse_shard(s: &str) -> anyhow::Result<Shard> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| anyhow!("--shard `{s}`: write it as i/N, e.g. 0/3"))?;
    let (i, n): (u32, u32) = (
        i.trim()
            .parse()
            .map_err(|_| anyhow!("--shard `{s}`: `{i}` is not a number"))?,
        n.trim()
            .parse()
            .map_err(|_| anyhow!("--shard `{s}`: `{n}` is not a number"))?,
    );
    Shard::new(i, n).map_err(|e| anyhow!("--shard `{s}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_i_of_n_and_bad_ones_say_why() {
        let s = parse_shard(" 1 / 3 ").unwrap();
        assert_eq!((s.index(), s.count()), (1, 3));
        for (bad, why) in [
            ("3", "write it as i/N"),
            ("a/3", "`a` is not a number"),
            ("1/x", "`x` is not a number"),
            ("3/3", "--shard `3/3`"),
            ("0/0", "--shard `0/0`"),
        ] {
            let e = parse_shard(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
