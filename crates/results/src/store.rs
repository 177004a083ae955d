//! Saving a results document atomically and reading one back with errors that
//! say what is wrong with the file.
//!
//! A save never leaves a half-written file behind: the JSON goes to a temporary
//! file in the target's directory, is synced to disk, renamed over the target,
//! and the directory is synced so the rename survives a crash. A reader sees the
//! old document or the new one, never a mix.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde_json::error::Category;
use serde_json::Value;

use crate::{ResultsDocument, ResultsError, SCHEMA, SCHEMA_V1};

/// What every version of the schema string starts with; the major version follows.
const SCHEMA_PREFIX: &str = "linkperf/results/v";

/// The major version this build writes (the number in [`SCHEMA`]); it reads
/// this one and every one before it down to 1.
const SCHEMA_MAJOR: u32 = 2;

/// Ends the name of every temporary file a save writes.
pub(crate) const TEMP_SUFFIX: &str = ".linkperf-tmp";

/// A temporary file this old whose process does not run is left over; a
/// save's own lives for the milliseconds of one write (and a process in
/// another PID namespace, which looks dead from here, is never that slow).
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The file's name as temporary files carry it: whole up to 64 bytes, else
/// its first 40 characters, `~` and a hash of the whole (a temporary file's
/// name must stay within the file system's 255 bytes).
pub(crate) fn temp_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.len() <= 64 {
        return name;
    }
    // FNV-1a: stable across builds and versions, which a std hasher is not.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let head: String = name.chars().take(40).collect();
    format!("{head}~{hash:016x}")
}

/// How the temporary files of process `pid`'s saves to `path` begin:
/// `.NAME.PID.` in `path`'s directory (then random letters and digits and
/// [`TEMP_SUFFIX`]), so each file says whose save it is.
fn temp_prefix(path: &Path, pid: u32) -> String {
    format!(".{}.{pid}.", temp_stem(path))
}

/// Removes what an interrupted save to `path` left behind (a process killed
/// between writing its temporary file and renaming it): the temporary files
/// of saves to this same path (`.NAME.PID.RANDOM` and `.linkperf-tmp`,
/// exactly) by processes that no longer run, once a minute old. A save
/// in progress (another live process's, or this one's) is left alone.
/// Returns how many were removed.
pub fn remove_stale_temp_files(path: &Path) -> usize {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return 0;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let head = format!(".{}.", temp_stem(path));
    let mut removed = 0;
    for e in entries.flatten() {
        let file = e.file_name();
        let file = file.to_string_lossy();
        let Some(rest) = file
            .strip_prefix(&head)
            .and_then(|r| r.strip_suffix(TEMP_SUFFIX))
        else {
            continue;
        };
        // PID.RANDOM, nothing else: `.out.7.PID.RANDOM` belongs to `out.7`.
        let Some((pid, random)) = rest.split_once('.') else {
            continue;
        };
        if random.is_empty() || !random.bytes().all(|b| b.is_ascii_alphanumeric()) {
            continue;
        }
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let running = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= STALE_AFTER);
        if !running && old && fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl ResultsDocument {
    /// Writes the document to `path` as pretty-printed JSON, atomically: `path`
    /// holds either its old content or the complete new document. The directory
    /// must exist. An existing file keeps its permissions.
    pub fn save(&self, path: &Path) -> Result<(), ResultsError> {
        let mut json = serde_json::to_vec_pretty(self).map_err(ResultsError::Encode)?;
        json.push(b'\n');

        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.exists() {
            return Err(ResultsError::MissingDirectory {
                path: path.to_path_buf(),
                dir: dir.to_path_buf(),
            });
        }
        let failed = |step: String| {
            let path = path.to_path_buf();
            move |error: io::Error| ResultsError::Write { path, step, error }
        };

        let prefix = temp_prefix(path, std::process::id());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(TEMP_SUFFIX);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // Keep the permissions of the file being replaced; a new file gets
            // the usual 0666 less the umask, not the temporary file's 0600.
            let permissions = fs::metadata(path)
                .map(|m| m.permissions())
                .unwrap_or_else(|_| fs::Permissions::from_mode(0o666));
            builder.permissions(permissions);
        }
        let mut tmp = builder.tempfile_in(dir).map_err(failed(format!(
            "create a temporary file in {}",
            dir.display()
        )))?;
        tmp.write_all(&json)
            .map_err(failed(format!("write {}", tmp.path().display())))?;
        tmp.flush()
            .map_err(failed(format!("write {}", tmp.path().display())))?;
        tmp.as_file()
            .sync_all()
            .map_err(failed(format!("sync {} to disk", tmp.path().display())))?;
        let tmp_path = tmp.path().to_path_buf();
        tmp.persist(path)
            .map_err(|e| failed(format!("rename {} over it", tmp_path.display()))(e.error))?;
        sync_dir(dir).map_err(failed(format!(
            "sync the directory {} to disk",
            dir.display()
        )))?;
        Ok(())
    }

    /// Reads the document at `path`. The error names the file and what is
    /// wrong: missing, unreadable, empty, truncated, not JSON, not a linkperf
    /// results file, written by a newer linkperf, or a field of the wrong shape.
    pub fn load(path: &Path) -> Result<Self, ResultsError> {
        let origin = path.display().to_string();
        let bytes = fs::read(path).map_err(|error| match error.kind() {
            io::ErrorKind::NotFound => ResultsError::NotFound {
                origin: origin.clone(),
            },
            _ => ResultsError::Read {
                origin: origin.clone(),
                error,
            },
        })?;
        let text = String::from_utf8(bytes).map_err(|e| ResultsError::NotJson {
            origin: origin.clone(),
            detail: format!(
                "it is not UTF-8 text: invalid byte at offset {}",
                e.utf8_error().valid_up_to()
            ),
        })?;
        Self::from_json(&text, &origin)
    }

    /// Reads a document from JSON text; `origin` names where the text came from
    /// (a file name, `<stdin>`) for the error messages.
    ///
    /// The `schema` field is checked before anything else, so a file from a
    /// newer linkperf, or not from linkperf at all, is refused as such rather
    /// than with a complaint about some field.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, ResultsError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if text.trim().is_empty() {
            return Err(ResultsError::Empty {
                origin: origin.to_string(),
            });
        }
        // Only the top level's `schema` is kept (the rest is skipped, not
        // built: a history import reads hundreds of megabytes of these).
        let head: Value = if text.trim_start().starts_with('{') {
            let head: Head = serde_json::from_str(text).map_err(|e| parse_error(e, origin))?;
            let mut top = serde_json::Map::new();
            if let Some(schema) = head.schema {
                top.insert("schema".into(), schema);
            }
            Value::Object(top)
        } else {
            serde_json::from_str(text).map_err(|e| parse_error(e, origin))?
        };
        check_schema(&head, origin)?;
        // Parsed again from the text, so that a shape error carries its line
        // and column.
        serde_json::from_str(text).map_err(|e| parse_error(e, origin))
    }
}

/// A document's top level as far as its schema is concerned: every other
/// field is skipped without being built.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default, deserialize_with = "present")]
    schema: Option<Value>,
}

/// A field that is there, `null` included (which `Option` would read as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// Sorts a serde_json error into truncated, not JSON, or wrong shape.
fn parse_error(e: serde_json::Error, origin: &str) -> ResultsError {
    let origin = origin.to_string();
    match e.classify() {
        Category::Eof => ResultsError::Truncated {
            origin,
            line: e.line(),
            column: e.column(),
        },
        Category::Data => ResultsError::Shape {
            origin,
            detail: e.to_string(),
        },
        Category::Syntax | Category::Io => ResultsError::NotJson {
            origin,
            detail: e.to_string(),
        },
    }
}

/// Accepts a document whose `schema` is [`SCHEMA`]; refuses anything else
/// with the reason.
fn check_schema(value: &Value, origin: &str) -> Result<(), ResultsError> {
    let not_results = |detail: String| ResultsError::NotResults {
        origin: origin.to_string(),
        detail,
    };
    let Some(object) = value.as_object() else {
        return Err(not_results("the top level is not a JSON object".into()));
    };
    let found = match object.get("schema") {
        None => {
            return Err(not_results(format!(
                "it has no \"schema\" field; expected \"schema\": \"{SCHEMA}\""
            )))
        }
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(not_results(format!(
                "its \"schema\" field is {other}, not a string"
            )))
        }
    };
    // A v1 file reads as v2: its throughput's `counted_at` (absent there)
    // then says that its uploads were counted at the sender.
    if found == SCHEMA || found == SCHEMA_V1 {
        return Ok(());
    }
    let Some(major) = found.strip_prefix(SCHEMA_PREFIX) else {
        return Err(not_results(format!(
            "its schema is \"{found}\"; expected \"{SCHEMA}\""
        )));
    };
    match major.parse::<u32>() {
        Ok(n) if n > SCHEMA_MAJOR => Err(ResultsError::NewerSchema {
            origin: origin.to_string(),
            found: found.clone(),
            expected: SCHEMA,
        }),
        _ => Err(ResultsError::UnsupportedSchema {
            origin: origin.to_string(),
            found: found.clone(),
            expected: SCHEMA,
        }),
    }
}

/// Makes a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Directories cannot be opened for syncing here; the rename is as durable as
/// the platform makes it.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use linkperf_measured::{
        BusyMethod, Environment, Interval, LatencySummary, ProcStatBreakdown, ProcessMethod,
        SideCpu, SideReport, TcpInfoSummary, Totals,
    };
    use linkperf_workload::{Placement, Protocol, TestSpec};

    use super::*;

    /// `derive_run` for a 1-user request/response test.
    fn rr_run(n: u32, started: String, client: SideReport, server: Option<SideReport>) -> Run {
        let spec = linkperf_workload::TestSpec::new(
            "rr:200x1000".parse().unwrap(),
            linkperf_workload::Protocol::Tcp,
            1,
            std::time::Duration::from_secs(2),
        );
        crate::derive_run(n, started, &spec, client, server)
    }
    use crate::{failed_run, Run, RunStatus, TestConfig};

    #[test]
    fn only_dead_processes_temp_files_of_the_same_path_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("osa.json");
        // A pid above the kernel's largest (4194304) never runs.
        let dead = 4_194_305;
        let files = [
            format!(".osa.json.{dead}.abc{TEMP_SUFFIX}"),
            format!(".osa.json.{}.abc{TEMP_SUFFIX}", std::process::id()),
            format!(".osa.json.1.abc{TEMP_SUFFIX}"), // init: alive
            format!(".hs.json.{dead}.abc{TEMP_SUFFIX}"),
            format!(".osa.json.{dead}.abc.other"),
            // A save to `osa.json.7`, not to `osa.json` by process 7.
            format!(".osa.json.7.{dead}.abc{TEMP_SUFFIX}"),
        ];
        let two_minutes_ago = std::time::SystemTime::now() - Duration::from_secs(120);
        for f in &files {
            let p = dir.path().join(f);
            fs::write(&p, b"{").unwrap();
            fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(two_minutes_ago)
                .unwrap();
        }
        // A dead process's file of a moment ago may be a live save in another
        // PID namespace: it stays until it is a minute old.
        let fresh = format!(".osa.json.{dead}.xyz{TEMP_SUFFIX}");
        fs::write(dir.path().join(&fresh), b"{").unwrap();
        assert_eq!(remove_stale_temp_files(&out), 1);
        let left: Vec<bool> = files.iter().map(|f| dir.path().join(f).exists()).collect();
        assert_eq!(left, [false, true, true, true, true, true]);
        assert!(dir.path().join(&fresh).exists());
        fs::remove_file(dir.path().join(&fresh)).unwrap();
        // A save's own temporary file is of this form, and goes by the rename.
        let doc = ResultsDocument::new("x".into(), vec![]);
        doc.save(&out).unwrap();
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 6, "{names:?}");
    }

    #[test]
    fn a_long_file_name_still_saves() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(format!("{}.json", "n".repeat(240)));
        ResultsDocument::new("x".into(), vec![]).save(&out).unwrap();
        assert!(out.exists());
        let stem = temp_stem(&out);
        assert!(stem.len() < 64 && stem.contains('~'), "{stem}");
        assert_eq!(stem, temp_stem(&out), "the same file, the same stem");
    }

    fn side_cpu(process_s: f64, busy_s: f64) -> SideCpu {
        SideCpu {
            process_s,
            process_user_s: process_s * 0.4,
            process_system_s: process_s * 0.6,
            process_method: ProcessMethod::RusageSelf,
            system_busy_s: busy_s,
            system_busy_method: BusyMethod::ProcStat,
            softirq_s: 0.125,
            proc_stat: ProcStatBreakdown {
                user_s: 0.5,
                system_s: 0.25,
                irq_s: 0.0,
                softirq_s: 0.125,
                steal_s: 0.0,
                idle_s: 7.0,
            },
            cpus: 4,
            window_s: 2.0,
            opened_late_s: None,
            closed_late_s: None,
        }
    }

    fn report(process_s: f64, latency: bool) -> SideReport {
        SideReport {
            window_s: 2.0,
            tx_bytes: 2000,
            rx_bytes: 10_000,
            transactions: 10,
            errors: 0,
            totals: Totals {
                tx_bytes: 2200,
                rx_bytes: 11_000,
                transactions: 11,
            },
            latency: latency.then_some(LatencySummary {
                count: 10,
                mean: 150.5,
                p50: 140.0,
                p90: 180.0,
                p99: 210.0,
                p999: 220.0,
                min: 120.0,
                max: 230.0,
            }),
            intervals: vec![Interval {
                start_s: 0.0,
                length_s: 2.0,
                tx_bytes: 2000,
                rx_bytes: 10_000,
                transactions: 10,
                ..Default::default()
            }],
            cpu: side_cpu(process_s, 1.5),
            tcp_info: Some(TcpInfoSummary {
                flows: 1,
                retransmits: 0,
                rtt_us_mean: 50.0,
                rtt_us_max: 50.0,
                rttvar_us_mean: 10.0,
                snd_cwnd_mean: 10.0,
                snd_mss_mean: 1448.0,
            }),
            workers: Vec::new(),
            busy_poll: false,
            connections: 1,
            error_samples: Vec::new(),
            profile: None,
            latency_histogram: None,
            flows: Default::default(),
            udp: None,
            links: Vec::new(),
            pinned_cpus: Vec::new(),
            open_loop: None,
        }
    }

    /// A small document: one test with an ok run and a failed run.
    fn sample() -> ResultsDocument {
        let mut doc = ResultsDocument::new(
            "osa".into(),
            vec![
                "linkperf".into(),
                "run".into(),
                "--label".into(),
                "osa".into(),
            ],
        );
        doc.environment.client = Some(Environment {
            hostname: "lpar1".into(),
            cpu_count: 4,
            ..Environment::default()
        });
        let spec = TestSpec::new(
            "rr1c-200x1000".parse().unwrap(),
            Protocol::Tcp,
            1,
            Duration::from_secs(2),
        );
        let config = TestConfig::from_spec(
            &spec,
            "embedded".into(),
            Placement::with_threads(1),
            Placement::with_threads(1),
        );
        let ok = rr_run(
            1,
            "2024-05-01T10:00:00Z".into(),
            report(0.5, true),
            Some(report(0.25, false)),
        );
        doc.push_run(&spec, config.clone(), ok);
        let failed = failed_run(
            2,
            "2024-05-01T10:00:05Z".into(),
            RunStatus::Failed,
            "connect: refused".into(),
        );
        doc.push_run(&spec, config, failed);
        doc
    }

    fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, content).unwrap();
        path
    }

    fn load_err(path: &Path) -> String {
        ResultsDocument::load(path).unwrap_err().to_string()
    }

    #[test]
    fn save_then_load_gives_the_same_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("osa.json");
        let doc = sample();
        doc.save(&path).unwrap();
        assert_eq!(ResultsDocument::load(&path).unwrap(), doc);
        assert!(fs::read_to_string(&path).unwrap().ends_with("}\n"));
    }

    #[test]
    fn save_replaces_the_file_whole_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("osa.json");
        let mut doc = sample();
        doc.save(&path).unwrap();
        let first = fs::read_to_string(&path).unwrap();
        doc.label = "hipersockets".into();
        doc.tests.clear();
        doc.save(&path).unwrap();
        let second = fs::read_to_string(&path).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            ResultsDocument::from_json(&second, "osa.json").unwrap(),
            doc
        );
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("osa.json")],
            "no temporary file is left behind"
        );
    }

    #[cfg(unix)]
    #[test]
    fn save_keeps_the_permissions_of_the_file_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "osa.json", b"{}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        sample().save(&path).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    #[test]
    fn save_into_a_missing_directory_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope").join("osa.json");
        let err = sample().save(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn load_names_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.json");
        let err = load_err(&path);
        assert!(
            err.contains("missing.json") && err.contains("does not exist"),
            "{err}"
        );
    }

    #[test]
    fn load_names_an_unreadable_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_err(dir.path());
        assert!(
            err.starts_with("read results file ")
                && err.contains(&dir.path().display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn load_names_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        for content in [&b""[..], b"  \n"] {
            let err = load_err(&write(dir.path(), "empty.json", content));
            assert!(
                err.contains("empty.json") && err.contains("the file is empty"),
                "{err}"
            );
        }
    }

    #[test]
    fn load_names_a_truncated_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.json");
        sample().save(&path).unwrap();
        let full = fs::read(&path).unwrap();
        fs::write(&path, &full[..full.len() / 2]).unwrap();
        let err = load_err(&path);
        assert!(
            err.contains("cut.json") && err.contains("the file is truncated"),
            "{err}"
        );
    }

    #[test]
    fn load_names_a_file_that_is_not_json() {
        let dir = tempfile::tempdir().unwrap();
        for content in [
            &b"<html>hello</html>"[..],
            b"schema: linkperf/results/v1",
            b"\xff\xfe\x00garbage",
        ] {
            let err = load_err(&write(dir.path(), "garbage.json", content));
            assert!(
                err.contains("garbage.json") && err.contains("not JSON"),
                "{err}"
            );
        }
    }

    #[test]
    fn load_refuses_a_newer_schema_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_err(&write(
            dir.path(),
            "new.json",
            br#"{"schema": "linkperf/results/v3", "whatever": []}"#,
        ));
        assert!(err.contains("new.json"), "{err}");
        assert!(
            err.contains("was written by a newer linkperf (schema linkperf/results/v3); this build reads linkperf/results/v2"),
            "{err}"
        );
    }

    #[test]
    fn a_v1_file_loads_and_says_its_uploads_were_counted_at_the_sender() {
        let mut value = serde_json::to_value(sample()).unwrap();
        value["schema"] = "linkperf/results/v1".into();
        // v1 had no counted_at, payload, checks or flows.
        for run in value["tests"][0]["runs"].as_array_mut().unwrap() {
            let run = run.as_object_mut().unwrap();
            for gone in ["payload", "checks", "flows", "status_reasons"] {
                run.remove(gone);
            }
            if let Some(t) = run.get_mut("throughput").and_then(|t| t.as_object_mut()) {
                t.remove("counted_at");
            }
        }
        let doc = ResultsDocument::from_json(&value.to_string(), "v1.json").unwrap();
        assert_eq!(doc.schema, crate::SCHEMA_V1);
        let t = doc.tests[0].runs[0].throughput.unwrap();
        assert_eq!(t.counted_at, crate::CountedAt::v1());
        assert_eq!(t.counted_at.client_to_server, crate::Counter::Sender);
        assert_eq!(t.counted_at.server_to_client, crate::Counter::Receiver);
    }

    #[test]
    fn load_refuses_other_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_err(&write(
            dir.path(),
            "v0.json",
            br#"{"schema": "linkperf/results/v0"}"#,
        ));
        assert!(
            err.contains("v0.json") && err.contains("unsupported schema linkperf/results/v0"),
            "{err}"
        );
        let err = load_err(&write(
            dir.path(),
            "other.json",
            br#"{"schema": "uperf/profile"}"#,
        ));
        assert!(
            err.contains("other.json") && err.contains("not a linkperf results file"),
            "{err}"
        );
        assert!(err.contains("uperf/profile"), "{err}");
    }

    #[test]
    fn load_refuses_json_without_a_schema() {
        let dir = tempfile::tempdir().unwrap();
        // iperf3's JSON output, for instance.
        let err = load_err(&write(
            dir.path(),
            "iperf3.json",
            br#"{"start": {}, "intervals": [], "end": {}}"#,
        ));
        assert!(
            err.contains("iperf3.json") && err.contains("not a linkperf results file"),
            "{err}"
        );
        assert!(err.contains("no \"schema\" field"), "{err}");
        for (content, says) in [
            (&b"[1, 2]"[..], "not a JSON object"),
            (br#"{"schema": 1}"#, "not a string"),
        ] {
            let err = load_err(&write(dir.path(), "odd.json", content));
            assert!(err.contains("odd.json") && err.contains(says), "{err}");
        }
    }

    #[test]
    fn load_names_a_field_of_the_wrong_type_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let mut value = serde_json::to_value(sample()).unwrap();
        value["tests"][0]["workload"]["users"] = Value::String("many".into());
        let text = serde_json::to_string_pretty(&value).unwrap();
        let err = load_err(&write(dir.path(), "shape.json", text.as_bytes()));
        assert!(
            err.contains("shape.json") && err.contains("does not have the expected shape"),
            "{err}"
        );
        assert!(
            err.contains("\"many\"") && err.contains("line") && err.contains("column"),
            "{err}"
        );
    }

    #[test]
    fn load_names_a_missing_required_field() {
        let mut value = serde_json::to_value(sample()).unwrap();
        value.as_object_mut().unwrap().remove("tests");
        let err = ResultsDocument::from_json(&value.to_string(), "<stdin>")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("<stdin>") && err.contains("missing field `tests`"),
            "{err}"
        );
    }

    #[test]
    fn a_newer_v1_writer_with_extra_fields_still_loads() {
        // Old reader × new writer: unknown fields are ignored at every level.
        let mut value = serde_json::to_value(sample()).unwrap();
        value["added_later"] = serde_json::json!({"x": 1});
        value["tests"][0]["runs"][0]["throughput"]["bits_per_s"] = serde_json::json!(24000.0);
        value["tests"][0]["runs"][0]["efficiency"]["new_metric"] = serde_json::json!(null);
        let doc = ResultsDocument::from_json(&value.to_string(), "new-writer.json").unwrap();
        assert_eq!(doc, sample_with_created(&doc.created));
    }

    #[test]
    fn optional_fields_may_be_absent() {
        // A writer that omits every optional field (as an older v1 writer would
        // omit a field added after it) still produces a readable document.
        let mut value = serde_json::to_value(sample()).unwrap();
        value["environment"] = serde_json::json!({});
        let run = value["tests"][0]["runs"][0].as_object_mut().unwrap();
        for key in ["transaction_time_us", "tcp_info", "server"] {
            run.remove(key);
        }
        let eff = run["efficiency"].as_object_mut().unwrap();
        eff.retain(|k, _| k == "client_bytes_per_cpu_s");
        let doc = ResultsDocument::from_json(&value.to_string(), "old-writer.json").unwrap();
        let r = &doc.tests[0].runs[0];
        assert_eq!(
            (r.transaction_time_us, r.tcp_info, r.server.is_none()),
            (None, None, true)
        );
        assert_eq!(r.efficiency.unwrap().server_cpu_us_per_txn, None);
        assert!(r.efficiency.unwrap().client_bytes_per_cpu_s.is_some());
        assert_eq!(doc.environment.client, None);
    }

    fn sample_with_created(created: &str) -> ResultsDocument {
        let mut doc = sample();
        doc.created = created.to_string();
        doc
    }

    /// The field names are the contract: this checks every one a reader relies on.
    #[test]
    fn golden_field_names() {
        let value = serde_json::to_value(sample()).unwrap();
        let has = |pointer: &str| {
            assert!(
                value.pointer(pointer).is_some(),
                "missing {pointer} in {value:#}"
            );
        };
        for top in [
            "schema",
            "label",
            "created",
            "linkperf_version",
            "command_line",
            "environment",
            "tests",
        ] {
            has(&format!("/{top}"));
        }
        has("/environment/client/hostname");
        has("/environment/server");
        assert_eq!(value["schema"], "linkperf/results/v2");

        let test = "/tests/0";
        for f in ["name", "workload", "config", "spec", "runs"] {
            has(&format!("{test}/{f}"));
        }
        assert_eq!(value.pointer("/tests/0/name").unwrap(), "rr1c-200x1000--1");
        for f in [
            "kind",
            "name",
            "request_bytes",
            "response_bytes",
            "message_bytes",
            "direction",
            "protocol",
            "users",
            "duration_s",
            "warmup_s",
        ] {
            has(&format!("{test}/workload/{f}"));
        }
        assert_eq!(value.pointer("/tests/0/workload/kind").unwrap(), "rr");
        assert_eq!(
            value.pointer("/tests/0/workload/direction").unwrap(),
            "round_trip"
        );
        assert_eq!(value.pointer("/tests/0/workload/protocol").unwrap(), "tcp");
        for f in [
            "server",
            "client_placement",
            "server_placement",
            "nodelay",
            "sndbuf",
            "rcvbuf",
            "cc",
            "mss",
            "udp_timeout_s",
        ] {
            has(&format!("{test}/config/{f}"));
        }

        let run = "/tests/0/runs/0";
        for f in [
            "run",
            "started",
            "status",
            "throughput/bytes_per_s",
            "throughput/tx_bytes_per_s",
            "throughput/rx_bytes_per_s",
            "throughput/transactions_per_s",
            "throughput/counted_at/client_to_server",
            "throughput/counted_at/server_to_client",
            "payload/client_to_server/sent",
            "payload/client_to_server/received",
            "payload/client_to_server/in_flight",
            "payload/server_to_client/sent",
            "transaction_time_us/mean",
            "transaction_time_us/p50",
            "transaction_time_us/p90",
            "transaction_time_us/p99",
            "transaction_time_us/p999",
            "transaction_time_us/max",
            "cpu/client/process_s",
            "cpu/client/system_busy_s",
            "cpu/client/softirq_s",
            "cpu/client/process_method",
            "cpu/client/system_busy_method",
            "cpu/server/process_s",
            "efficiency/client_bytes_per_cpu_s",
            "efficiency/server_bytes_per_cpu_s",
            "efficiency/client_cpu_us_per_txn",
            "efficiency/server_cpu_us_per_txn",
            "efficiency/client_bytes_per_system_cpu_s",
            "efficiency/server_bytes_per_system_cpu_s",
            "efficiency/client_system_cpu_us_per_txn",
            "efficiency/server_system_cpu_us_per_txn",
            "intervals/0/start_s",
            "intervals/0/length_s",
            "intervals/0/tx_bytes",
            "intervals/0/rx_bytes",
            "intervals/0/transactions",
            "intervals/0/bytes_per_s",
            "intervals/0/transactions_per_s",
            "errors",
            "tcp_info/retransmits",
            "client/window_s",
            "server/window_s",
        ] {
            has(&format!("{run}/{f}"));
        }
        assert_eq!(value.pointer("/tests/0/runs/0/status").unwrap(), "ok");
        assert_eq!(
            value
                .pointer("/tests/0/runs/0/cpu/client/system_busy_method")
                .unwrap(),
            "proc_stat"
        );
        assert_eq!(value.pointer("/tests/0/runs/1/status").unwrap(), "failed");
        assert_eq!(
            value.pointer("/tests/0/runs/1/error").unwrap(),
            "connect: refused"
        );
    }
}
