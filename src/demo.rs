//! `sloburn demo`: the daemon with a built-in config against an in-process `sloburn target`,
//! so a new user sees load metrics, one SLO burning and one healthy within seconds.

use crate::daemon::{self, Options, Source, Startup};
use crate::load::plan::Shard;
use crate::target::{self, TargetOptions};
use std::net::SocketAddr;
use tokio_util::sync::CancellationToken;

/// The demo's config; `{TARGET}` is the in-process target's address, `{DATA}` the store dir.
/// checkout fails 0.7% of requests against a 99.9% objective (burn ≈ 7); search is healthy.
/// The shoppers walk a journey, browse then checkout, whose checkout step fails 2% of the time
/// against a 99.5% objective (burn ≈ 4), while the browse step's SLO stays whole.
pub const CONFIG: &str = r#"
server:
  listen: "127.0.0.1:9090"
  admin_token: "${env:SLOBURN_DEMO_TOKEN}"
  grace_period: 5s
storage:
  path: "{DATA}"
  flush_interval: 5s
targets:
  checkout:
    url: "http://{TARGET}/checkout?latency=25ms&jitter=10ms&distribution=lognormal&error_ratio=0.007&error_status=503"
    timeout: 2s
    checks:
      - status: 200
      - json: { path: "$.status", equals: up }
  search:
    url: "http://{TARGET}/search?latency=8ms&jitter=4ms&distribution=normal"
    timeout: 2s
    checks:
      - status: 200
      - duration_under: 250ms
  shop:
    url: "http://{TARGET}/"
    timeout: 2s
    headers: { User-Agent: sloburn-demo }
journeys:
  browse-then-checkout:
    target: shop
    steps:
      - name: browse
        path: /browse?latency=8ms&jitter=4ms&distribution=normal
        checks: [ { status: 200 } ]
        think: 20ms..80ms
      - name: checkout
        method: POST
        path: /checkout?latency=20ms&jitter=8ms&error_ratio=0.02&error_status=503
        json: { item: "sku-${random_int(1,500)}", shopper: "${vu}" }
        checks: [ { status: 200 } ]
profiles:
  shoppers:
    journey: browse-then-checkout
    every: 1m
    run_on_start: true
    executor: constant-arrival-rate
    rate: 40/s
    duration: 58s
    max_vus: 50
  checkout-canary:
    target: checkout
    every: 1m
    run_on_start: true
    executor: constant-arrival-rate
    rate: 50/s
    duration: 58s
    max_vus: 50
    thresholds:
      http_req_corrected_duration: ["p(95)<200"]
      # No looser than checkout-availability's budget (99.9 %): a run fails when the SLO burns.
      http_req_failed: ["rate<0.001"]
  checkout-spike:
    target: checkout
    executor: constant-arrival-rate
    rate: 100/s
    duration: 10s
    max_vus: 50
  search-steady:
    target: search
    every: 30s
    run_on_start: true
    executor: constant-vus
    vus: 2
    duration: 29s
slos:
  checkout-availability:
    target: checkout
    sli: availability
    objective: 99.9
    period: 30d
    description: The checkout canary gets a correct answer.
  search-latency:
    target: search
    sli: { latency: { under: 100ms } }
    objective: 99
    period: 30d
  shop-browse:
    journey: browse-then-checkout
    step: browse
    sli: availability
    objective: 99.5
    period: 30d
    description: Shoppers can browse.
  shop-checkout:
    journey: browse-then-checkout
    step: checkout
    sli: availability
    objective: 99.5
    period: 30d
    description: Shoppers who browsed can check out.
"#;

/// Builds the demo config for a target address, a data directory and the admin token. The
/// token reaches the config as `${env:SLOBURN_DEMO_TOKEN}` from an environment of its own, so
/// it is handled as a secret and the process environment is never written.
pub fn config(
    target: SocketAddr,
    data: &std::path::Path,
    token: &str,
) -> anyhow::Result<crate::config::Config> {
    let text = CONFIG
        .replace("{TARGET}", &target.to_string())
        .replace("{DATA}", &data.display().to_string());
    let env = crate::config::Env::from_map(
        [("SLOBURN_DEMO_TOKEN".to_string(), token.to_string())].into(),
        crate::http::system_ndots(),
    );
    crate::config::from_str(&text, "<demo>", data, &env)
        .map(|l| l.config)
        .map_err(|e| anyhow::anyhow!("the built-in demo config is invalid:\n{e}"))
}

/// The demo's config as `demo --print-config` shows it: for a `sloburn target` on
/// 127.0.0.1:8080 (the target's default address), with its store in `./sloburn-demo`.
pub fn printable_config() -> String {
    let text = CONFIG
        .replace("{TARGET}", "127.0.0.1:8080")
        .replace("{DATA}", "./sloburn-demo");
    format!(
        "# The config `sloburn demo` runs. To run it yourself:\n\
         #   sloburn target &\n\
         #   SLOBURN_DEMO_TOKEN=$(openssl rand -hex 16) sloburn serve --config demo.yaml\n{}",
        text.trim_start()
    )
}

/// `sloburn-demo-<pid>` under the system temp dir: one store per demo process.
fn default_data_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sloburn-demo-{}", std::process::id()))
}

pub fn command(listen: Option<SocketAddr>, print_config: bool) -> i32 {
    if print_config {
        print!("{}", printable_config());
        return crate::exit::OK;
    }
    // Each demo has a store of its own, so two demos, or a demo after another, never show each
    // other's figures; it goes when the demo stops.
    let data = default_data_dir();
    let code = daemon::with_signals(|mut signals| {
        let data = data.clone();
        async move {
            match start(listen, Some(data)).await {
                Ok((d, target_stop)) => {
                    let code =
                        daemon::run_until_signal(d, &mut signals, daemon::OnHangup::Stop).await;
                    target_stop.cancel();
                    code
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    crate::exit::ERROR
                }
            }
        }
    });
    let _ = std::fs::remove_dir_all(&data);
    code
}

/// Starts the target and the daemon; prints the URLs. `data` is the SLO store directory
/// (default: `sloburn-demo-<pid>` under the system temp dir).
pub async fn start(
    listen: Option<SocketAddr>,
    data: Option<std::path::PathBuf>,
) -> anyhow::Result<(daemon::Daemon, CancellationToken)> {
    let stop = CancellationToken::new();
    let t = target::spawn(
        TargetOptions {
            listen: "127.0.0.1:0".parse()?,
            ..TargetOptions::default()
        },
        stop.clone(),
    )
    .await?;
    let data = data.unwrap_or_else(default_data_dir);
    // A token the user can try the write API with; only this process knows it.
    let token = format!("{:032x}", rand::random::<u128>());
    let cfg = config(t.addr, &data, &token)?;
    let wanted = listen.unwrap_or(cfg.server.listen);
    let mut opts = Options {
        source: Source::Fixed(Box::new(cfg)),
        listen: Some(wanted),
        shard: Shard::WHOLE,
        watch: false,
    };
    let daemon = match daemon::start(opts.clone()).await {
        Ok(d) => d,
        // The default port is taken (another demo, a Prometheus): take any free port.
        Err(Startup::Bind(_)) if listen.is_none() => {
            opts.listen = Some("127.0.0.1:0".parse()?);
            daemon::start(opts)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?
        }
        Err(e) => anyhow::bail!("{e}"),
    };
    let base = format!("http://{}", daemon.addr);
    println!("sloburn demo is running (Ctrl-C, or closing the terminal, stops it)");
    println!("  status page   {base}/");
    println!("  metrics       {base}/metrics");
    println!("  SLOs (JSON)   {base}/api/slos");
    println!("  runs (JSON)   {base}/api/runs");
    println!("  demo target   http://{}/  (stats: /stats)", t.addr);
    println!("  run the on-demand spike now:");
    println!(
        "    curl -X POST -H 'Authorization: Bearer {token}' {base}/api/profiles/checkout-spike/run"
    );
    println!("  SLO state is kept in {}", data.display());
    Ok((daemon, stop))
}
