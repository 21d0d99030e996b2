//! `sloburn run --http-debug[=full]` (issue 46 item 4, k6's flag) against a server of this
//! test on 127.0.0.1 that echoes what it was sent: each request's and response's head is
//! printed to stderr (with `full`, the bodies too), and no value of a `${env:}` reference, nor
//! an `Authorization`, `Cookie` or `Set-Cookie` value, is ever printed, even echoed back.

use crate::support::{serve_on_thread, sloburn};

const SECRETS: [(&str, &str); 3] = [
    ("TOKEN", "t0ken-s3cret"),
    ("TENANT", "tenant-s3cret"),
    ("API_KEY", "apikey-s3cret"),
];

/// `sloburn run` of two POSTs to `url` with the secrets in headers and the URL, `extra` flags
/// after: (stdout, stderr).
fn run(url: &str, extra: &[&str]) -> (String, String) {
    let mut cmd = sloburn();
    cmd.args([
        "run",
        "--url",
        url,
        "--method",
        "POST",
        "--body",
        "hello-body",
    ])
    .args(["-H", "Authorization: Bearer ${env:TOKEN}"])
    .args(["-H", "X-Tenant: ${env:TENANT}"])
    .args(["--vus", "1", "--iterations", "2", "--quiet"])
    .args(extra);
    for (k, v) in SECRETS {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn http_debug_prints_each_head_and_never_a_secret() {
    // Echoes every request header and the body, and sets a cookie.
    let app = axum::Router::new().route(
        "/echo",
        axum::routing::post(|headers: http::HeaderMap, body: String| async move {
            let seen: String = headers
                .iter()
                .map(|(k, v)| format!("{k}={}\n", v.to_str().unwrap_or("?")))
                .collect();
            (
                [("set-cookie", "session=c00kie-value")],
                format!("{seen}{body}"),
            )
        }),
    );
    let server = serve_on_thread(app);
    let url = format!("http://{}/echo?key=${{env:API_KEY}}", server.addr);

    let (_, quiet) = run(&url, &[]);
    assert!(
        !quiet.contains("Request:"),
        "nothing without the flag:\n{quiet}"
    );

    for (flag, full) in [("--http-debug", false), ("--http-debug=full", true)] {
        let (stdout, stderr) = run(&url, &[flag]);
        let head = "Request:\nPOST /echo?key=[redacted] HTTP/1.1\n";
        assert_eq!(
            stderr.matches(head).count(),
            2,
            "{flag}: one per request:\n{stderr}"
        );
        for line in [
            &format!("host: {}\n", server.addr),
            "authorization: [redacted]\n",
            "x-tenant: [redacted]\n",
            "Response:\nHTTP/1.1 200 OK\n",
            "set-cookie: [redacted]\n",
            "content-type: text/plain; charset=utf-8\n",
        ] {
            assert!(stderr.contains(line), "{flag}: {line:?} in\n{stderr}");
        }
        assert_eq!(stderr.contains("\nhello-body\n"), full, "{flag}:\n{stderr}");
        if full {
            // The echo: the header values sloburn sent, scrubbed where the target repeats them.
            for echoed in ["authorization=[redacted]", "x-tenant=[redacted]"] {
                assert!(stderr.contains(echoed), "{echoed} in\n{stderr}");
            }
        }
        for (_, secret) in SECRETS {
            assert!(!stderr.contains(secret), "{flag}: {secret} in\n{stderr}");
            assert!(!stdout.contains(secret), "{flag}: {secret} in\n{stdout}");
        }
        assert!(!stderr.contains("c00kie-value"), "{flag}:\n{stderr}");
    }
}
