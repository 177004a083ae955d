//! `serve --metrics ADDR`: the history's latest figures over HTTP, for
//! Prometheus to scrape (`GET /metrics`). A small responder, bounded
//! against any client: at most [`MAX_CLIENTS`] at once (more are closed
//! at once), a request head of at most [`MAX_HEAD`] bytes read within
//! [`IO_TIMEOUT`], one request per connection, and only GET and HEAD.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linkperf_history::openmetrics::{CONTENT_TYPE, CONTENT_TYPE_PROMETHEUS};
use linkperf_history::History;

use crate::UsageError;

/// Connections served at once; more are closed as they come.
pub const MAX_CLIENTS: usize = 8;
/// Largest request head (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a client has to send its request, and to take the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The history the responder reads, reopened after an error (a restarted
/// PostgreSQL server).
struct Source {
    db: String,
    history: Mutex<Option<History>>,
}

impl Source {
    fn exposition(&self) -> Result<String, String> {
        let mut guard = self.history.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(History::open(&self.db).map_err(|e| format!("failed to {e}"))?);
        }
        let h = guard.as_mut().expect("opened above");
        match super::exposition(h) {
            Ok(t) => Ok(t),
            Err(e) => {
                *guard = None;
                Err(format!("failed to {e}"))
            }
        }
    }
}

/// Binds `addr`, opens the history `db` and serves its metrics on a thread
/// of its own; returns the address bound.
pub fn spawn(addr: SocketAddr, db: &str) -> anyhow::Result<SocketAddr> {
    let history =
        History::open(db).map_err(|e| UsageError(format!("--history {db}: failed to {e}")))?;
    let listener = TcpListener::bind(addr)
        .map_err(|e| UsageError(format!("--metrics {addr}: failed to listen: {e}")))?;
    let bound = listener.local_addr()?;
    let source = Arc::new(Source {
        db: db.to_string(),
        history: Mutex::new(Some(history)),
    });
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("linkperf-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else {
                    // Out of descriptors, say: a moment, then go on.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                if active.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                    active.fetch_sub(1, Ordering::AcqRel);
                    drop(stream);
                    continue;
                }
                let (source, mine) = (source.clone(), active.clone());
                let spawned = std::thread::Builder::new()
                    .name("linkperf-metrics-client".into())
                    .spawn(move || {
                        serve_one(stream, &source);
                        mine.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    active.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })?;
    Ok(bound)
}

/// Reads the request head: `None` when the client sent no complete head
/// within the bounds.
fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, u16> {
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(head);
        }
        if head.len() >= MAX_HEAD {
            return Err(431);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(408);
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err(400),
            Ok(n) => head.extend_from_slice(&buf[..n.min(MAX_HEAD + 4 - head.len())]),
            Err(_) => return Err(408),
        }
    }
}

/// What the client asked for: its method, path and whether it takes
/// OpenMetrics.
fn parse(head: &[u8]) -> Result<(String, String, bool), u16> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(400),
    }
    let method = req.method.unwrap_or("").to_string();
    let path = req.path.unwrap_or("").to_string();
    let openmetrics = req.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("accept")
            && String::from_utf8_lossy(h.value).contains("application/openmetrics-text")
    });
    Ok((method, path, openmetrics))
}

fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    }
}

fn respond(stream: &mut TcpStream, code: u16, content_type: &str, body: &str, head_only: bool) {
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let mut out = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        status_text(code),
        body.len()
    );
    if code == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(body);
    }
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.flush();
}

fn serve_one(mut stream: TcpStream, source: &Source) {
    let text = "text/plain; charset=utf-8";
    let head = match read_head(&mut stream) {
        Ok(h) => h,
        Err(code) => {
            respond(&mut stream, code, text, status_text(code), false);
            return;
        }
    };
    let (method, path, openmetrics) = match parse(&head) {
        Ok(r) => r,
        Err(code) => {
            respond(&mut stream, code, text, "bad request\n", false);
            return;
        }
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        respond(&mut stream, 405, text, "only GET and HEAD\n", false);
        return;
    }
    let path = path.split('?').next().unwrap_or("");
    if path != "/metrics" && path != "/" {
        respond(
            &mut stream,
            404,
            text,
            "the metrics are at /metrics\n",
            head_only,
        );
        return;
    }
    match source.exposition() {
        Ok(body) => {
            let ct = if openmetrics {
                CONTENT_TYPE
            } else {
                CONTENT_TYPE_PROMETHEUS
            };
            respond(&mut stream, 200, ct, &body, head_only);
        }
        Err(e) => respond(&mut stream, 503, text, &format!("{e}\n"), head_only),
    }
}
