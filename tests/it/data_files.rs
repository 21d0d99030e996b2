//! Data files (issue 30, items 2 and 3) through the real binary: memory linear in the file
//! whatever its shape, shown under an address-space limit (`RLIMIT_AS`, a bound on memory, not
//! a timing), the values each row sends, and the limits as positioned errors.

use crate::support::*;
use axum::Router;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The address space each command gets: before issue 30 a 60 MiB file of one-byte rows took
/// 3 GB (CSV) and 5 GB (JSON), and 40,000 distinct JSON keys tens of GB.
const ONE_GIB: u64 = 1 << 30;

/// A server on 127.0.0.1 that counts every path and query it is sent.
fn recorder() -> (ThreadServer, Arc<Mutex<BTreeMap<String, u64>>>) {
    let seen: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let s = seen.clone();
    let app = Router::new().fallback(move |uri: axum::http::Uri| {
        let s = s.clone();
        async move {
            *s.lock().unwrap().entry(uri.to_string()).or_default() += 1;
            "ok"
        }
    });
    (serve_on_thread(app), seen)
}

/// A config whose one journey reads `file` in order and sends `path`; `iterations` walks by
/// one VU. The data entry is on line 7.
fn config(addr: SocketAddr, dir: &Path, file: &str, path: &str, iterations: u32) -> String {
    format!(
        r#"storage: {{ path: "{store}" }}
targets:
  api:
    url: http://{addr}/
journeys:
  j:
    data: {{ file: {file}, order: sequential }}
    target: api
    steps:
      - name: s
        path: {path}
profiles:
  p:
    journey: j
    executor: shared-iterations
    vus: 1
    iterations: {iterations}
    max_duration: 120s
"#,
        store = dir.join("store").display()
    )
}

/// `sloburn ARGS` in `dir` under [`ONE_GIB`] of address space.
fn limited(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = sloburn();
    cmd.current_dir(dir).args(args);
    limit_address_space(&mut cmd, ONE_GIB);
    cmd
}

fn check(dir: &Path) -> std::process::Output {
    limited(dir, &["check", "sloburn.yaml"]).output().unwrap()
}

/// `sloburn serve` under the limit: waits (up to 3 minutes: a debug build parses a 60 MiB file
/// slowly) for it to be ready, asks `/healthz`, stops it with SIGTERM; its exit code.
fn serve_loads(dir: &Path) -> Option<i32> {
    let mut cmd = limited(
        dir,
        &[
            "serve",
            "--log-format",
            "json",
            "--listen",
            "127.0.0.1:0",
            "--config",
            "sloburn.yaml",
        ],
    );
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("sloburn ready") {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                let _ = tx.send(Ok(v["addr"].as_str().unwrap_or_default().to_string()));
            }
            lines.push(line);
        }
        let _ = tx.send(Err(lines));
    });
    let ready = rx.recv_timeout(Duration::from_secs(180));
    let healthy = match &ready {
        Ok(Ok(addr)) => get_blocking(&format!("http://{addr}/healthz")).0 == 200,
        _ => false,
    };
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = eventually(Duration::from_secs(30), || child.try_wait().unwrap());
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let code = status.and_then(|s| s.code());
    assert!(healthy, "serve did not load: {ready:?}, exit {code:?}");
    code
}

/// Item 2: keys that differ from row to row used to cost rows × keys (dense rows with an empty
/// value for every key a row lacks) and a scan of every key for each one: 40,000 rows of a key
/// each (1.2 MB) asked for tens of GB. Now each row holds only its own keys: `check` and a run
/// fit in 1 GiB of address space, and each row sends its own values and nothing else.
#[test]
fn json_keys_that_differ_per_row_load_in_linear_memory_and_send_their_own_values() {
    const ROWS: usize = 40_000;
    let (server, seen) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let mut json = String::from("[\n");
    for i in 0..ROWS {
        let sep = if i + 1 < ROWS { "," } else { "" };
        json.push_str(&format!("{{\"id\":{i},\"k{i:05}\":\"v{i}\"}}{sep}\n"));
    }
    json.push(']');
    std::fs::write(dir.path().join("keys.json"), &json).unwrap();
    let path = "/r/${data.id}/${data.k00000}/${data.k00150}/${data.k39999}";
    write_config(
        dir.path(),
        &config(server.addr, dir.path(), "keys.json", path, 300),
    );

    let out = check(dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sloburn.yaml: ok"),
        "{}",
        all_output(&out)
    );

    let out = limited(dir.path(), &["run", "sloburn.yaml", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let seen = seen.lock().unwrap();
    let wanted: BTreeMap<String, u64> = (0..300)
        .map(|i| {
            let own = |k: usize| {
                if i == k {
                    format!("v{k}")
                } else {
                    String::new()
                }
            };
            (format!("/r/{i}/{}/{}/", own(0), own(150)), 1)
        })
        .collect();
    assert_eq!(*seen, wanted);
}

/// Item 3: a 60 MiB data file of one-byte rows, the worst case for per-row overhead, took
/// 50 to 80 bytes of memory a byte (3 GB for the CSV, 5 GB for the JSON) and `check`, `run` and
/// `serve` aborted (exit 134) under 1 GiB of address space. Now they load it: the CSV through
/// `check` and a run that sends its rows to a server here, the JSON through `check` and a
/// ready `serve`. The four commands run side by side (a debug build takes seconds per file).
#[test]
fn sixty_mib_data_files_of_one_byte_rows_load_under_one_gib_of_address_space() {
    const SIZE: usize = 60 << 20;
    let (server, seen) = recorder();
    let csv_dir = tempfile::tempdir().unwrap();
    let json_dir = tempfile::tempdir().unwrap();
    let mut csv = b"v\n".to_vec();
    csv.extend_from_slice(&b"x\n".repeat((SIZE - 2) / 2 - 1));
    csv.extend_from_slice(b"y\n");
    std::fs::write(csv_dir.path().join("rows.csv"), &csv).unwrap();
    let rows = (SIZE - 12) / 10;
    let mut json = b"[".to_vec();
    json.extend_from_slice(&br#"{"v":"x"},"#.repeat(rows));
    json.extend_from_slice(br#"{"v":"y"}]"#);
    std::fs::write(json_dir.path().join("rows.json"), &json).unwrap();
    assert!(csv.len() >= SIZE - 4 && json.len() >= SIZE - 12);
    drop((csv, json));
    for (dir, file) in [(&csv_dir, "rows.csv"), (&json_dir, "rows.json")] {
        let text = config(server.addr, dir.path(), file, "/v/${data.v}", 20);
        write_config(dir.path(), &text);
    }

    let (c, j) = (csv_dir.path().to_path_buf(), json_dir.path().to_path_buf());
    let (c2, j2) = (c.clone(), j.clone());
    let checks = [
        std::thread::spawn(move || check(&c)),
        std::thread::spawn(move || check(&j)),
    ];
    let run = std::thread::spawn(move || {
        limited(&c2, &["run", "sloburn.yaml", "--quiet"])
            .output()
            .unwrap()
    });
    let serve = std::thread::spawn(move || serve_loads(&j2));
    for (out, file) in checks
        .map(|t| t.join().unwrap())
        .iter()
        .zip(["csv", "json"])
    {
        assert_eq!(out.status.code(), Some(0), "{file}: {}", all_output(out));
    }
    let out = run.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "run: {}", all_output(&out));
    assert_eq!(
        *seen.lock().unwrap(),
        BTreeMap::from([("/v/x".to_string(), 20)])
    );
    assert_eq!(serve.join().unwrap(), Some(0));
}

/// Where the config names the data file: `file:`'s value on line 7.
fn data_entry(file: &str) -> String {
    format!("sloburn.yaml:7:19: journeys.j.data.file: `{file}`")
}

/// The limits: more distinct keys than `MAX_COLUMNS`, a file over 64 MiB, and a bad row are each
/// an error at the config's `data` entry that names the data file's line (and column, for
/// JSON), and never quotes a value; `check` exits 78 with that one error.
#[test]
fn data_files_over_the_limits_are_errors_at_the_data_entry_and_the_files_line() {
    let (server, _) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let first_line = |file: &str| {
        write_config(
            dir.path(),
            &config(server.addr, dir.path(), file, "/v/${data.user}", 1),
        );
        let out = check(dir.path());
        assert_eq!(out.status.code(), Some(78), "{}", all_output(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!text.contains("hunter2"), "{text}");
        // One error: `${data.user}` is not reported again as a journey without a data file.
        assert!(text.contains("sloburn.yaml: 1 error(s)"), "{text}");
        text.lines().next().unwrap_or_default().to_string()
    };

    let max = sloburn::journey::MAX_COLUMNS;
    let mut json = String::from("[\n");
    for i in 0..=max {
        json.push_str(&format!("{{\"k{i}\":\"hunter2\"}},\n"));
    }
    json.push_str("{}]");
    std::fs::write(dir.path().join("keys.json"), &json).unwrap();
    assert_eq!(
        first_line("keys.json"),
        format!(
            "{} line {}, column {}: more than {max} distinct keys (columns) over the file's \
             objects",
            data_entry("keys.json"),
            max + 2,
            format!("k{max}").len() + 3
        )
    );

    // Sparse: the size is there, the bytes are not; refused before it is read.
    let big = std::fs::File::create(dir.path().join("big.csv")).unwrap();
    big.set_len(sloburn::config::MAX_DATA_FILE_BYTES + 1)
        .unwrap();
    let line = first_line("big.csv");
    assert!(
        line.starts_with("sloburn.yaml:7:19: journeys.j.data.file: cannot read `big.csv`: ")
            && line.ends_with("over the limit of 64 MiB"),
        "{line}"
    );

    std::fs::write(
        dir.path().join("users.csv"),
        "user,password\nann,a1\nbob,b2,hunter2\n",
    )
    .unwrap();
    assert_eq!(
        first_line("users.csv"),
        format!(
            "{} line 3: row 2: 3 fields where the header has 2",
            data_entry("users.csv")
        )
    );
    std::fs::write(
        dir.path().join("users.json"),
        "[{\"user\":\"ann\"},\n {\"user\":\"bob\",\"user\":\"hunter2\"}]",
    )
    .unwrap();
    assert_eq!(
        first_line("users.json"),
        format!(
            "{} line 2, column 21: row 2: key `user` twice in one object",
            data_entry("users.json")
        )
    );
}

/// Journeys that name the same file (however the path is spelled) share one copy of its rows,
/// each with its own order; another file is its own copy.
#[test]
fn journeys_naming_one_data_file_share_one_copy_of_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.csv"), "user\nann\nbob\n").unwrap();
    std::fs::write(dir.path().join("other.csv"), "user\ncid\n").unwrap();
    let journey = |name: &str, file: &str, order: &str| {
        format!(
            "  {name}:\n    target: api\n    data: {{ file: {file}, order: {order} }}\n    steps: [ {{ name: s, path: \"/${{data.user}}\" }} ]\n"
        )
    };
    let text = format!(
        "targets:\n  api:\n    url: http://127.0.0.1:1/\njourneys:\n{}{}{}",
        journey("a", "users.csv", "sequential"),
        journey("b", "./users.csv", "unique"),
        journey("c", "other.csv", "random"),
    );
    let cfg = sloburn::config::from_str(&text, "t.yaml", dir.path(), &test_env())
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    let data = |j: &str| cfg.journeys[j].data.clone().unwrap();
    let (a, b, c) = (data("a"), data("b"), data("c"));
    assert!(Arc::ptr_eq(&a.0, &b.0));
    assert!(!Arc::ptr_eq(&a.0, &c.0));
    assert_eq!((a.0.len(), c.0.len()), (2, 1));
    assert_eq!(
        (a.1, b.1, c.1),
        (
            sloburn::journey::Order::Sequential,
            sloburn::journey::Order::Unique,
            sloburn::journey::Order::Random
        )
    );
}
