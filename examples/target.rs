//! Standalone `sloburn target` for benchmarking before the CLI is wired up:
//! `cargo run --release --example target -- --listen 127.0.0.1:0 --workers 1`.

use clap::Parser;
use sloburn::target::{TargetOptions, run_blocking};

#[derive(Parser)]
#[command(name = "target", about = "sloburn's fault-injecting HTTP test server")]
struct Cli {
    #[command(flatten)]
    opts: TargetOptions,
}

fn main() -> anyhow::Result<()> {
    run_blocking(Cli::parse().opts)
}
