//! Fixed-memory latency histogram (in progress).
