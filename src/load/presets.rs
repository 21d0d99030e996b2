//! Load-test type presets (in progress).
