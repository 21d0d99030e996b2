//! `--report FILE.html`: the run's self-contained HTML report. It records the run as it goes
//! (the scatter of every request and the last failing responses, `web::Recording`) and, when the
//! run is over, renders the page (`web::report`) and writes it.

use super::sink::{Last, Output, RunInfo};
use crate::load::event::Observer;
use crate::web::Recording;
use anyhow::Context;
use std::path::PathBuf;
use std::sync::Arc;

pub struct Report {
    path: PathBuf,
    /// The recorder (its sampler task is its own) and the run's names, once started.
    capture: Option<(Recording, String, String)>,
    setup: Option<crate::web::detail::RunSetup>,
}

impl Report {
    pub fn new(path: PathBuf) -> Report {
        Report {
            path,
            capture: None,
            setup: None,
        }
    }
}

#[async_trait::async_trait]
impl Output for Report {
    fn name(&self) -> &'static str {
        "report"
    }

    fn start(&mut self, run: &RunInfo<'_>) -> anyhow::Result<Vec<Arc<dyn Observer>>> {
        let evidence = crate::web::evidence::Evidence::for_work(
            run.stats.clone(),
            run.work,
            run.headers,
            run.secrets,
        );
        let capture = Recording::start(run.stats.clone(), None).with_evidence(evidence);
        let observers = capture.observers();
        self.capture = Some((capture, run.profile.to_string(), run.target.to_string()));
        self.setup = Some(run.setup.clone());
        Ok(observers)
    }

    async fn stop(&mut self, last: &Last<'_>) -> anyhow::Result<Vec<String>> {
        let Some((capture, profile, target)) = self.capture.take() else {
            return Ok(Vec::new());
        };
        let (mut detail, _) = capture.finish(last.report);
        detail.profile = profile;
        detail.target = target;
        detail.setup = self.setup.take();
        crate::web::report::write(&self.path, &detail)
            .with_context(|| format!("cannot write --report `{}`", self.path.display()))?;
        Ok(vec![format!("report written to {}", self.path.display())])
    }
}
