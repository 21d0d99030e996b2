//! SIGTERM, SIGINT and SIGHUP as one stream, installed up front so a signal that arrives
//! early is not lost. Every command decides what each means: `serve` reloads on SIGHUP,
//! `run` and `target` ignore it. A leaf: it imports nothing from the crate.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// A signal that arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caught {
    /// SIGTERM or SIGINT, by name.
    Stop(&'static str),
    Hangup,
}

pub struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Installs the three handlers; needs a tokio runtime.
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal; `None` once no more can arrive.
    pub async fn next(&mut self) -> Option<Caught> {
        tokio::select! {
            Some(()) = self.term.recv() => Some(Caught::Stop("SIGTERM")),
            Some(()) = self.int.recv() => Some(Caught::Stop("SIGINT")),
            Some(()) = self.hup.recv() => Some(Caught::Hangup),
            else => None,
        }
    }
}
