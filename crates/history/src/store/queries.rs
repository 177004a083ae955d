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
/// The columns of a run, in the order [`insert_runs`] binds them.
const RUN_COLUMNS: usize = 11;
/// Runs per `INSERT` at most (11 parameters each: 2,816, under both
/// databases' limits), and points per `INSERT` (3 each: 3,072).
const RUN_ROWS: usize = 256;
const POINT_ROWS: usize = 1024;

/// `INSERT` of `rows` runs (a run already there, by its key, is skipped),
/// returning the id and key of each one added.
fn insert_runs(rows: usize) -> String {
    format!(
        "INSERT INTO linkperf_runs \
         (run_key, import_id, label, test, pair, environment_id, started, started_ms, run_no, status, reasons) \
         VALUES {} ON CONFLICT (run_key) DO NOTHING RETURNING id, run_key",
        values(rows, RUN_COLUMNS)
    )
}

/// `INSERT` of `rows` points.
fn insert_points(rows: usize) -> String {
    format!(
        "INSERT INTO linkperf_points (series_id, run_id, value) VALUES {}",
        values(rows, 3)
    )
}

/// `($1, $2), ($3, $4)`: `rows` tuples of `columns` placeholders.
fn values(rows: usize, columns: usize) -> String {
    let mut out = String::with_capacity(rows * columns * 6);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..columns {
            if c > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!("${}", r * columns + c + 1));
        }
        out.push(')');
    }
    out
}

/// How many of `n` rows the next statement takes: the largest power of two
/// up to `max` and `n`, so that a few statement texts serve every count
/// (each is prepared once per connection).
fn chunk(n: usize, max: usize) -> usize {
    if n >= max {
        max
    } else {
        1 << (usize::BITS - 1 - n.leading_zeros())
    }
}

const INSERT_SERIES: &str = "INSERT INTO linkperf_series (label, test, pair, metric, environment_id) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (label, test, pair, metric, environment_id) DO NOTHING";
const SERIES_ID: &str = "SELECT s.id FROM linkperf_series s \
     JOIN linkperf_environments e ON e.id = s.environment_id \
     WHERE s.label = $1 AND s.test = $2 AND s.pair = $3 AND s.metric = $4 AND e.fingerprint = $5";
/// Every series the filter selects with its counts: the points counted per
/// series first (in the points' key order, no sort), then joined to the
/// few series rows that are named and sorted.
const SERIES: &str = "SELECT s.id, s.label, s.test, s.pair, s.metric, e.fingerprint, \
     c.ok, c.suspect, c.last \
     FROM linkperf_series s \
     JOIN linkperf_environments e ON e.id = s.environment_id \
     JOIN (SELECT p.series_id, \
                  SUM(CASE WHEN r.status = 'ok' THEN 1 ELSE 0 END) AS ok, \
                  SUM(CASE WHEN r.status = 'suspect' THEN 1 ELSE 0 END) AS suspect, \
                  MAX(r.started) AS last \
           FROM linkperf_points p JOIN linkperf_runs r ON r.id = p.run_id \
           GROUP BY p.series_id) c ON c.series_id = s.id \
     WHERE ($1 = '' OR s.label = $1) AND ($2 = '' OR s.test = $2) AND ($3 = '' OR s.pair = $3) \
     ORDER BY s.label, s.test, s.pair, s.metric, e.fingerprint";
const POINTS: &str =
    "SELECT r.id, r.started, r.started_ms, r.run_no, r.status, r.reasons, p.value \
     FROM linkperf_points p JOIN linkperf_runs r ON r.id = p.run_id \
     WHERE p.series_id = $1 ORDER BY r.started_ms, r.id";
/// The newest ok point of every series: each series' points numbered
/// newest first in one pass (a window function, which both databases have),
/// not a search of the series per point.
const LATEST: &str =
    "SELECT s.label, s.test, s.pair, s.metric, e.fingerprint, l.value, l.started_ms \
     FROM (SELECT p.series_id, p.value, r.started_ms, \
                  ROW_NUMBER() OVER (PARTITION BY p.series_id ORDER BY r.started_ms DESC, r.id DESC) AS newest \
           FROM linkperf_points p JOIN linkperf_runs r ON r.id = p.run_id \
           WHERE r.status = 'ok') l \
     JOIN linkperf_series s ON s.id = l.series_id \
     JOIN linkperf_environments e ON e.id = s.environment_id \
     WHERE l.newest = 1 \
     ORDER BY s.metric, s.label, s.test, s.pair, l.started_ms, e.fingerprint";
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
                if s.added > 0 {
                    if let Some(analyze) = self.conn.dialect().after_import() {
                        // Only the plans of later queries depend on it: the
                        // runs are in, whatever it says.
                        let _ = self.conn.batch(analyze);
                    }
                }
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
        // Points waiting for their INSERT: (series, run, value).
        let mut points: Vec<(i64, i64, f64)> = Vec::with_capacity(POINT_ROWS);
        for (origin, records) in batches {
            if records.is_empty() {
                continue;
            }
            summary.runs += records.len();
            let rows = conn.query(
                INSERT_IMPORT,
                &[
                    Param::Text(origin),
                    Param::Text(&now),
                    Param::Text(env!("CARGO_PKG_VERSION")),
                ],
            )?;
            let import = reader.int(first(&rows, &reader)?, 0)?;
            let mut hashes = Vec::with_capacity(records.len());
            let mut env_ids = Vec::with_capacity(records.len());
            for r in records {
                let hash = r.environment.hash();
                let id = match environments.get(&hash) {
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
                hashes.push(hash);
                env_ids.push(id);
            }
            let reasons: Vec<String> = records
                .iter()
                .map(|r| serde_json::to_string(&r.reasons).unwrap_or_else(|_| "[]".into()))
                .collect();
            let mut at = 0;
            while at < records.len() {
                let n = chunk(records.len() - at, RUN_ROWS);
                let range = at..at + n;
                at += n;
                let mut params: Vec<Param<'_>> = Vec::with_capacity(n * RUN_COLUMNS);
                for i in range.clone() {
                    let r = &records[i];
                    params.extend([
                        Param::Text(&r.key),
                        Param::Int(import),
                        Param::Text(&r.label),
                        Param::Text(&r.test),
                        Param::Text(&r.pair),
                        Param::Int(env_ids[i]),
                        Param::Text(&r.started),
                        Param::Int(r.started_ms),
                        Param::Int(i64::from(r.run)),
                        Param::Text(r.status.word()),
                        Param::Text(&reasons[i]),
                    ]);
                }
                let rows = conn.query(&insert_runs(n), &params)?;
                // The runs added (a run there already, or twice in these, is not).
                let mut added: HashMap<String, i64> = HashMap::with_capacity(rows.len());
                for row in &rows {
                    added.insert(reader.text(row, 1)?, reader.int(row, 0)?);
                }
                summary.added += added.len();
                for i in range {
                    let r = &records[i];
                    let Some(run_id) = added.remove(&r.key) else {
                        continue;
                    };
                    for (metric, value) in &r.values {
                        let k = (
                            r.label.clone(),
                            r.test.clone(),
                            r.pair.clone(),
                            *metric,
                            env_ids[i],
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
                                insert.push(Param::Int(env_ids[i]));
                                conn.execute(INSERT_SERIES, &insert)?;
                                let mut find = params.to_vec();
                                find.push(Param::Text(&hashes[i]));
                                let rows = conn.query(SERIES_ID, &find)?;
                                let id = reader.int(first(&rows, &reader)?, 0)?;
                                series.insert(k, id);
                                id
                            }
                        };
                        points.push((series_id, run_id, *value));
                        summary.points += 1;
                        if points.len() == POINT_ROWS {
                            flush_points(conn, &mut points)?;
                        }
                    }
                }
            }
        }
        flush_points(conn, &mut points)?;
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

/// Inserts `points`, in as few statements as [`chunk`] allows, and empties it.
fn flush_points(
    conn: &mut dyn Connection,
    points: &mut Vec<(i64, i64, f64)>,
) -> Result<(), HistoryError> {
    let mut at = 0;
    while at < points.len() {
        let n = chunk(points.len() - at, POINT_ROWS);
        let params: Vec<Param<'_>> = points[at..at + n]
            .iter()
            .flat_map(|&(s, r, v)| [Param::Int(s), Param::Int(r), Param::Real(v)])
            .collect();
        conn.execute(&insert_points(n), &params)?;
        at += n;
    }
    points.clear();
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_go_in_power_of_two_statements() {
        let mut sizes = Vec::new();
        let mut left = 1000 + 3;
        while left > 0 {
            let n = chunk(left, 256);
            sizes.push(n);
            left -= n;
        }
        assert_eq!(sizes, [256, 256, 256, 128, 64, 32, 8, 2, 1]);
        assert_eq!(values(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert!(insert_points(1).ends_with("VALUES ($1, $2, $3)"));
    }
}
