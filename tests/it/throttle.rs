//! A throttled sidecar is never a slow target (issue 43). Here: a request is timed where the
//! kernel took its bytes (transmit stamps, `http/tx.rs`), and the summary says on how many.

use crate::support::{BackgroundTarget, sloburn};
use sloburn::target::TargetOptions;

/// A plain HTTP/1.1 run against a loopback target: on Linux every answered request's sending
/// is the kernel's (its transmit stamps), and the summary says so with the run's own count.
#[test]
fn a_plain_run_is_timed_by_the_kernels_transmit_stamps() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let out = sloburn()
        .args(["run", "--url", &format!("http://{}/", target.addr)])
        .args(["--rate", "50/s", "--duration", "1s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("timing: kernel TX stamps on"))
        .unwrap_or_else(|| panic!("no timing line:\n{text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let (n, m): (u64, u64) = (words[5].parse().unwrap(), words[7].parse().unwrap());
    assert!(m > 0, "{line}");
    if cfg!(target_os = "linux") {
        assert_eq!(n, m, "every plain request stamped: {line}");
        assert!(!line.contains("the other"), "{line}");
    } else {
        assert_eq!(n, 0, "{line}");
    }
}
