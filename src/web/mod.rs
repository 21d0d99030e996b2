//! Pictures of load: the daemon's dashboard page and its embedded assets (uPlot, vendored
//! from npm), a run's recorder (scatter reservoir and one-second sampler), a profile's
//! one-hour series ring, SLO burn-downs, a run's detail view and its failure evidence, and the self-contained HTML
//! report of `sloburn run --report`. Used by both `daemon` and `run`; no server here.

pub mod assets;
pub mod detail;
pub mod evidence;
pub mod recorder;
pub mod recording;
pub mod report;
pub mod scrub;
pub mod series;

pub use detail::RunDetail;
pub use recorder::{LiveFigures, Point, Sample};
pub use recording::Recording;
pub use series::{BurnDown, Ring, burn_down};
