//! The SQLite connection: a file, opened in WAL mode (readers never wait
//! for the writer, and the writer never waits for readers) with a busy
//! timeout, so that several processes recording into one file at once each
//! wait their turn instead of failing.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params_from_iter, OpenFlags, ToSql};

use super::sql::{sqlite_placeholders, Cell, Connection, Dialect, Param, Row};
use crate::HistoryError;

/// How long a writer waits for another's transaction before it gives up: a
/// whole import of many runs by another process may hold the lock this long.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Statements kept prepared per connection (the history uses fewer).
const STATEMENT_CACHE: usize = 64;

/// The page cache, KiB (SQLite's `cache_size` in its negative form), a
/// ceiling, filled only as pages are used. SQLite's default, 2 MiB, is
/// smaller than the indexes an import of many runs writes into: with it,
/// pages spilled to the log and written again made an import of 100,000
/// runs take 9.0 s instead of 6.3 s (bench/history.sh).
const CACHE_KIB: i64 = 64 * 1024;

/// An open SQLite history file.
pub struct Sqlite {
    conn: rusqlite::Connection,
    name: String,
}

impl Sqlite {
    /// Opens (creating it when absent, unless `read_only`) the file at `path`.
    pub fn open(path: &Path, read_only: bool) -> Result<Sqlite, HistoryError> {
        let name = path.display().to_string();
        let fail = |e: rusqlite::Error| HistoryError::Sqlite {
            db: name.clone(),
            detail: e.to_string(),
        };
        if read_only && !path.exists() {
            return Err(HistoryError::Sqlite {
                db: name.clone(),
                detail: "the file does not exist".into(),
            });
        }
        let flags = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn = rusqlite::Connection::open_with_flags(path, flags).map_err(fail)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // A file that is no database says so here, at its first read.
        let not_a_database = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => HistoryError::Foreign {
                db: name.clone(),
                detail: "the file is not an SQLite database".into(),
            },
            _ => fail(e),
        };
        let tables: Vec<String> = on_busy(|| {
            let mut st = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<_, _>>()
        })
        .map_err(not_a_database)?;
        if !tables.is_empty() && !tables.iter().any(|t| t == super::schema::VERSION_TABLE) {
            let mut some: Vec<&str> = tables.iter().map(String::as_str).take(5).collect();
            some.sort_unstable();
            return Err(HistoryError::Foreign {
                db: name,
                detail: format!("an SQLite database with other tables: {}", some.join(", ")),
            });
        }
        if !read_only {
            // WAL: readers (a metrics scrape, `history show`) and one writer
            // at a time, each waiting its turn under the busy timeout.
            on_busy(|| conn.pragma_update(None, "journal_mode", "WAL")).map_err(fail)?;
        }
        on_busy(|| conn.pragma_update(None, "foreign_keys", "ON")).map_err(fail)?;
        on_busy(|| conn.pragma_update(None, "cache_size", -CACHE_KIB)).map_err(fail)?;
        Ok(Sqlite { conn, name })
    }

    fn fail(&self, sql: &str, e: rusqlite::Error) -> HistoryError {
        HistoryError::Sqlite {
            db: self.name.clone(),
            detail: format!("{e} (in: {})", first_line(sql)),
        }
    }
}

/// How long an opening connection waits before it asks again when the
/// file was busy.
const BUSY_RETRY: Duration = Duration::from_millis(10);

/// `step` of opening the file, asked again while another connection keeps
/// it busy, up to [`BUSY_TIMEOUT`]. SQLite's busy handler does not cover
/// every step of an opening: while another process creates the file or
/// turns it to WAL, reading the schema or setting the journal mode can
/// fail at once with "database is locked" (seen with four processes
/// importing into a new file at once on a busy host).
fn on_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match step() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ) && Instant::now() < deadline =>
            {
                std::thread::sleep(BUSY_RETRY);
            }
            done => return done,
        }
    }
}

/// The statement's first line, for messages.
fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or("")
}

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(v)),
            Param::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(v)),
            Param::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
        })
    }
}

impl Connection for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn batch(&mut self, sql: &str) -> Result<(), HistoryError> {
        self.conn.execute_batch(sql).map_err(|e| self.fail(sql, e))
    }

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, HistoryError> {
        let text = sqlite_placeholders(sql);
        let n = {
            let mut st = self
                .conn
                .prepare_cached(&text)
                .map_err(|e| self.fail(sql, e))?;
            st.execute(params_from_iter(params.iter()))
        };
        n.map(|n| n as u64).map_err(|e| self.fail(sql, e))
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, HistoryError> {
        let text = sqlite_placeholders(sql);
        let rows: rusqlite::Result<Vec<Row>> = (|| {
            let mut st = self.conn.prepare_cached(&text)?;
            let columns = st.column_count();
            let mut rows = st.query(params_from_iter(params.iter()))?;
            let mut out = Vec::new();
            while let Some(r) = rows.next()? {
                let mut row = Vec::with_capacity(columns);
                for i in 0..columns {
                    row.push(match r.get_ref(i)? {
                        ValueRef::Null => Cell::Null,
                        ValueRef::Integer(v) => Cell::Int(v),
                        ValueRef::Real(v) => Cell::Real(v),
                        ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Blob(b) => Cell::Text(String::from_utf8_lossy(b).into_owned()),
                    });
                }
                out.push(row);
            }
            Ok(out)
        })();
        rows.map_err(|e| self.fail(sql, e))
    }
}
