//! The history's queries: every statement written once, run on SQLite or
//! PostgreSQL through [`Connection`].

use std::collections::HashMap;
use std::path::Path;

use linkperf_report::Metric;
use linkperf_results::{rfc3339, ResultsDocument};

use super::sql::{Connection, Param, Reader, Row};
use super::{migrate, Postgres, Sqlite, MIGRATIONS};
use crate::records::{records_of, RunRecord};
use crate::series::{Latest, Point, SeriesInfo, SeriesKey};
use crate::HistoryError;

/// The metric whose key is `key` (`throughput.bytes_per_s`).
pub fn metric_of(key: &str) -> Option<Metric> {
    Metric::ALL.iter().copied().find(|m| m.key() == key)
}

/// A history, open.
pub struct History {
    conn: Box<dyn Connection>,
}

/// What an import did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Results documents read.
    pub files: usize,
    /// Runs they hold.
    pub runs: usize,
    /// Runs added (the others were there already).
    pub added: usize,
    /// Points added.
    pub points: usize,
}

/// Which series to list; an empty field matches every value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesFilter {
    /// Only this configuration label.
    pub label: String,
    /// Only this test.
    pub test: String,
    /// Only this mesh pair (`SOURCE->TARGET`).
    pub pair: String,
    /// Only these metrics (all when empty).
    pub metrics: Vec<Metric>,
}

const INSERT_IMPORT: &str = "INSERT INTO linkperf_imports (origin, imported_at, linkperf_version) \
     VALUES ($1, $2, $3) RETURNING id";
const INSERT_ENVIRONMENT: &str = "INSERT INTO linkperf_environments (fingerprint, description) \
     VALUES ($1, $2) ON CONFLICT (fingerprint) DO NOTHING";
const ENVIRONMENT_ID: &str = "SELECT id FROM linkperf_environments WHERE fingerprint = $1";
const INSERT_RUN: &str = "INSERT INTO linkperf_runs \
     (run_key, import_id, label, test, pair, environment_id, started, started_ms, run_no, status, reasons) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (run_key) DO NOTHING RETURNING id";
const INSERT_SERIES: &str = "INSERT INTO linkperf_series (label, test, pair, metric, environment_id) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (label, test, pair, metric, environment_id) DO NOTHING";
const SERIES_ID: &str = "SELECT s.id FROM linkperf_series s \
     JOIN linkperf_environments e ON e.id = s.environment_id \
     WHERE s.label = $1 AND s.test = $2 AND s.pair = $3 AND s.metric = $4 AND e.fingerprint = $5";
const INSERT_POINT: &str =
    "INSERT INTO linkperf_points (series_id, run_id, value) VALUES ($1, $2, $3)";
const SERIES: &str = "SELECT s.id, s.label, s.test, s.pair, s.metric, e.fingerprint, \
     SUM(CASE WHEN r.status = 'ok' THEN 1 ELSE 0 END), \
     SUM(CASE WHEN r.status = 'suspect' THEN 1 ELSE 0 END), MAX(r.started) \
     FROM linkperf_series s \
     JOIN linkperf_environments e ON e.id = s.environment_id \
     JOIN linkperf_points p ON p.series_id = s.id \
     JOIN linkperf_runs r ON r.id = p.run_id \
     WHERE ($1 = '' OR s.label = $1) AND ($2 = '' OR s.test = $2) AND ($3 = '' OR s.pair = $3) \
     GROUP BY s.id, s.label, s.test, s.pair, s.metric, e.fingerprint \
     ORDER BY s.label, s.test, s.pair, s.metric, e.fingerprint";
const POINTS: &str =
    "SELECT r.id, r.started, r.started_ms, r.run_no, r.status, r.reasons, p.value \
     FROM linkperf_points p JOIN linkperf_runs r ON r.id = p.run_id \
     WHERE p.series_id = $1 ORDER BY r.started_ms, r.id";
const LATEST: &str =
    "SELECT s.label, s.test, s.pair, s.metric, e.fingerprint, p.value, r.started_ms \
     FROM linkperf_series s \
     JOIN linkperf_environments e ON e.id = s.environment_id \
     JOIN linkperf_points p ON p.series_id = s.id \
     JOIN linkperf_runs r ON r.id = p.run_id \
     WHERE r.id = (SELECT r2.id FROM linkperf_points p2 JOIN linkperf_runs r2 ON r2.id = p2.run_id \
                   WHERE p2.series_id = s.id AND r2.status = 'ok' \
                   ORDER BY r2.started_ms DESC, r2.id DESC LIMIT 1) \
     ORDER BY s.metric, s.label, s.test, s.pair, r.started_ms, e.fingerprint";
const ENVIRONMENT: &str = "SELECT description FROM linkperf_environments WHERE fingerprint = $1";
const COUNTS: &str = "SELECT \
     (SELECT COUNT(*) FROM linkperf_runs), (SELECT COUNT(*) FROM linkperf_points), \
     (SELECT COUNT(*) FROM linkperf_series), (SELECT COUNT(*) FROM linkperf_environments), \
     (SELECT COUNT(*) FROM linkperf_imports)";

/// How many rows each table holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Runs.
    pub runs: i64,
    /// Points.
    pub points: i64,
    /// Series.
    pub series: i64,
    /// Environments.
    pub environments: i64,
    /// Imports that added runs.
    pub imports: i64,
}

impl History {
    /// Opens the history at `db`: a `postgres://` (or `postgresql://`) URL,
    /// else an SQLite file, created when absent. Brings its schema up to
    /// date.
    pub fn open(db: &str) -> Result<History, HistoryError> {
        let mut conn: Box<dyn Connection> = if is_postgres(db) {
            Box::new(Postgres::connect(db)?)
        } else {
            Box::new(Sqlite::open(Path::new(db), false)?)
        };
        migrate(conn.as_mut(), MIGRATIONS)?;
        Ok(History { conn })
    }

    /// A history over an open connection, its schema brought up to date.
    pub fn with_connection(mut conn: Box<dyn Connection>) -> Result<History, HistoryError> {
        migrate(conn.as_mut(), MIGRATIONS)?;
        Ok(History { conn })
    }

    /// Where it is (a path, or a URL without its password).
    pub fn name(&self) -> &str {
        self.conn.name()
    }

    /// Imports the runs of `docs` (each with where it came from) in one
    /// transaction: all of them, or, on any error, none. A run already in
    /// the history (the same key) is not added again.
    pub fn import(
        &mut self,
        docs: &[(String, ResultsDocument)],
    ) -> Result<ImportSummary, HistoryError> {
        let mut batches = Vec::with_capacity(docs.len());
        for (origin, doc) in docs {
            batches.push((origin.clone(), records_of(doc, origin)?));
        }
        self.import_records(&batches)
    }

    /// Imports runs already made into records (each batch with its origin),
    /// in one transaction.
    pub fn import_records(
        &mut self,
        batches: &[(String, Vec<RunRecord>)],
    ) -> Result<ImportSummary, HistoryError> {
        let begin = self.conn.dialect().begin_write();
        self.conn.batch(begin)?;
        match self.import_in_transaction(batches) {
            Ok(s) => {
                self.conn.batch("COMMIT")?;
                Ok(s)
            }
            Err(e) => {
                let _ = self.conn.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn import_in_transaction(
        &mut self,
        batches: &[(String, Vec<RunRecord>)],
    ) -> Result<ImportSummary, HistoryError> {
        let conn = self.conn.as_mut();
        let db = conn.name().to_string();
        let reader = Reader { db: &db };
        let mut environments: HashMap<String, i64> = HashMap::new();
        let mut series: HashMap<(String, String, String, Metric, i64), i64> = HashMap::new();
        let mut summary = ImportSummary {
            files: batches.len(),
            ..ImportSummary::default()
        };
        let now = rfc3339(std::time::SystemTime::now());
        for (origin, records) in batches {
            let mut import_id: Option<i64> = None;
            for r in records {
                summary.runs += 1;
                let hash = r.environment.hash();
                let env_id = match environments.get(&hash) {
                    Some(id) => *id,
                    None => {
                        let description = r.environment.json();
                        conn.execute(
                            INSERT_ENVIRONMENT,
                            &[Param::Text(&hash), Param::Text(&description)],
                        )?;
                        let rows = conn.query(ENVIRONMENT_ID, &[Param::Text(&hash)])?;
                        let id = reader.int(first(&rows, &reader)?, 0)?;
                        environments.insert(hash.clone(), id);
                        id
                    }
                };
                let import = match import_id {
                    Some(id) => id,
                    None => {
                        let rows = conn.query(
                            INSERT_IMPORT,
                            &[
                                Param::Text(origin),
                                Param::Text(&now),
                                Param::Text(env!("CARGO_PKG_VERSION")),
                            ],
                        )?;
                        let id = reader.int(first(&rows, &reader)?, 0)?;
                        import_id = Some(id);
                        id
                    }
                };
                let reasons = serde_json::to_string(&r.reasons).unwrap_or_else(|_| "[]".into());
                let rows = conn.query(
                    INSERT_RUN,
                    &[
                        Param::Text(&r.key),
                        Param::Int(import),
                        Param::Text(&r.label),
                        Param::Text(&r.test),
                        Param::Text(&r.pair),
                        Param::Int(env_id),
                        Param::Text(&r.started),
                        Param::Int(r.started_ms),
                        Param::Int(i64::from(r.run)),
                        Param::Text(r.status.word()),
                        Param::Text(&reasons),
                    ],
                )?;
                let Some(row) = rows.first() else {
                    continue; // there already
                };
                let run_id = reader.int(row, 0)?;
                summary.added += 1;
                for (metric, value) in &r.values {
                    let k = (
                        r.label.clone(),
                        r.test.clone(),
                        r.pair.clone(),
                        *metric,
                        env_id,
                    );
                    let series_id = match series.get(&k) {
                        Some(id) => *id,
                        None => {
                            let params = [
                                Param::Text(&r.label),
                                Param::Text(&r.test),
                                Param::Text(&r.pair),
                                Param::Text(metric.key()),
                            ];
                            let mut insert = params.to_vec();
                            insert.push(Param::Int(env_id));
                            conn.execute(INSERT_SERIES, &insert)?;
                            let mut find = params.to_vec();
                            find.push(Param::Text(&hash));
                            let rows = conn.query(SERIES_ID, &find)?;
                            let id = reader.int(first(&rows, &reader)?, 0)?;
                            series.insert(k, id);
                            id
                        }
                    };
                    conn.execute(
                        INSERT_POINT,
                        &[
                            Param::Int(series_id),
                            Param::Int(run_id),
                            Param::Real(*value),
                        ],
                    )?;
                    summary.points += 1;
                }
            }
        }
        Ok(summary)
    }

    /// The series that `filter` selects, each with its point counts, in
    /// order of label, test, pair, metric and environment.
    pub fn series(&mut self, filter: &SeriesFilter) -> Result<Vec<SeriesInfo>, HistoryError> {
        let rows = self.conn.query(
            SERIES,
            &[
                Param::Text(&filter.label),
                Param::Text(&filter.test),
                Param::Text(&filter.pair),
            ],
        )?;
        let db = self.conn.name().to_string();
        let reader = Reader { db: &db };
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let metric_key = reader.text(row, 4)?;
            let Some(metric) = metric_of(&metric_key) else {
                continue; // a metric a newer linkperf knows
            };
            if !filter.metrics.is_empty() && !filter.metrics.contains(&metric) {
                continue;
            }
            out.push(SeriesInfo {
                id: reader.int(row, 0)?,
                key: SeriesKey {
                    label: reader.text(row, 1)?,
                    test: reader.text(row, 2)?,
                    pair: reader.text(row, 3)?,
                    metric,
                    environment: reader.text(row, 5)?,
                },
                ok: reader.int(row, 6)?.max(0) as u64,
                suspect: reader.int(row, 7)?.max(0) as u64,
                last: reader.text(row, 8)?,
            });
        }
        Ok(out)
    }

    /// The id of the series `key`, if the history has it.
    pub fn find_series(&mut self, key: &SeriesKey) -> Result<Option<i64>, HistoryError> {
        let rows = self.conn.query(
            SERIES_ID,
            &[
                Param::Text(&key.label),
                Param::Text(&key.test),
                Param::Text(&key.pair),
                Param::Text(key.metric.key()),
                Param::Text(&key.environment),
            ],
        )?;
        let db = self.conn.name().to_string();
        let reader = Reader { db: &db };
        rows.first().map(|r| reader.int(r, 0)).transpose()
    }

    /// The points of series `id` in time order (runs that started in the
    /// same millisecond in the order they were stored); suspect runs' only
    /// with `include_suspect`.
    pub fn points(&mut self, id: i64, include_suspect: bool) -> Result<Vec<Point>, HistoryError> {
        let rows = self.conn.query(POINTS, &[Param::Int(id)])?;
        let db = self.conn.name().to_string();
        let reader = Reader { db: &db };
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let ok = reader.text(row, 4)? == "ok";
            if !ok && !include_suspect {
                continue;
            }
            out.push(point(&reader, row, ok)?);
        }
        Ok(out)
    }

    /// The latest `ok` figure of every label, test, pair and metric (of
    /// whichever environment measured last).
    pub fn latest(&mut self) -> Result<Vec<Latest>, HistoryError> {
        let rows = self.conn.query(LATEST, &[])?;
        let db = self.conn.name().to_string();
        let reader = Reader { db: &db };
        let mut newest: Vec<Latest> = Vec::new();
        let mut at: HashMap<(String, String, String, Metric), usize> = HashMap::new();
        for row in &rows {
            let Some(metric) = metric_of(&reader.text(row, 3)?) else {
                continue;
            };
            let l = Latest {
                key: SeriesKey {
                    label: reader.text(row, 0)?,
                    test: reader.text(row, 1)?,
                    pair: reader.text(row, 2)?,
                    metric,
                    environment: reader.text(row, 4)?,
                },
                value: reader.real(row, 5)?,
                started_ms: reader.int(row, 6)?,
            };
            let k = (
                l.key.label.clone(),
                l.key.test.clone(),
                l.key.pair.clone(),
                metric,
            );
            match at.get(&k) {
                Some(&i) if newest[i].started_ms >= l.started_ms => {}
                Some(&i) => newest[i] = l,
                None => {
                    at.insert(k, newest.len());
                    newest.push(l);
                }
            }
        }
        Ok(newest)
    }

    /// What environment `fingerprint` was, as JSON.
    pub fn environment(&mut self, fingerprint: &str) -> Result<Option<String>, HistoryError> {
        let rows = self.conn.query(ENVIRONMENT, &[Param::Text(fingerprint)])?;
        let db = self.conn.name().to_string();
        let reader = Reader { db: &db };
        rows.first().map(|r| reader.text(r, 0)).transpose()
    }

    /// How many rows each table holds.
    pub fn counts(&mut self) -> Result<Counts, HistoryError> {
        let rows = self.conn.query(COUNTS, &[])?;
        let db = self.conn.name().to_string();
        let reader = Reader { db: &db };
        let r = first(&rows, &reader)?;
        Ok(Counts {
            runs: reader.int(r, 0)?,
            points: reader.int(r, 1)?,
            series: reader.int(r, 2)?,
            environments: reader.int(r, 3)?,
            imports: reader.int(r, 4)?,
        })
    }
}

/// Whether `db` names a PostgreSQL server rather than an SQLite file.
pub fn is_postgres(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

fn first<'a>(rows: &'a [Row], reader: &Reader<'_>) -> Result<&'a Row, HistoryError> {
    rows.first().ok_or_else(|| HistoryError::Corrupt {
        db: reader.db.to_string(),
        detail: "a row just written cannot be read back".into(),
    })
}

fn point(reader: &Reader<'_>, row: &Row, ok: bool) -> Result<Point, HistoryError> {
    let reasons: Vec<String> = serde_json::from_str(&reader.text(row, 5)?).unwrap_or_default();
    Ok(Point {
        run_id: reader.int(row, 0)?,
        started: reader.text(row, 1)?,
        started_ms: reader.int(row, 2)?,
        run: u32::try_from(reader.int(row, 3)?).unwrap_or(0),
        ok,
        reasons,
        value: reader.real(row, 6)?,
    })
}
