//! The history's schema, versioned: each migration is a list of statements
//! that takes the database from one version to the next, applied in a
//! transaction of its own, once, whichever process opens the database first.
//!
//! Version 1's tables (every name begins with `linkperf_`, so that a shared
//! PostgreSQL database keeps them apart from others'):
//!
//! - `linkperf_schema`: one row, the schema's version.
//! - `linkperf_environments`: each environment fingerprint seen (its hash
//!   and what it was made of, as JSON).
//! - `linkperf_imports`: each file (or command) that added runs: its origin,
//!   when, and the linkperf that imported it.
//! - `linkperf_runs`: every run, keyed by a digest of what it measured (so an
//!   import of the same run again adds nothing): configuration label, test,
//!   mesh pair, environment, start, status and the reasons of a suspect one.
//! - `linkperf_series`: every (label, test, pair, metric, environment).
//! - `linkperf_points`: a run's value in a series.

use super::sql::{Connection, Param};
use crate::HistoryError;

/// The table holding the schema's version.
pub(crate) const VERSION_TABLE: &str = "linkperf_schema";

/// A migration: the statements that make version `to` from the one before.
/// `{id}` marks a generated key, declared as the dialect does.
pub struct Migration {
    /// The version it makes.
    pub to: i64,
    /// Its statements, in order.
    pub statements: &'static [&'static str],
}

/// Every migration, oldest first: the newest `to` is the version this build
/// writes.
pub const MIGRATIONS: &[Migration] = &[Migration {
    to: 1,
    statements: &[
        "CREATE TABLE linkperf_environments (
            id {id},
            fingerprint TEXT NOT NULL UNIQUE,
            description TEXT NOT NULL
        )",
        "CREATE TABLE linkperf_imports (
            id {id},
            origin TEXT NOT NULL,
            imported_at TEXT NOT NULL,
            linkperf_version TEXT NOT NULL
        )",
        "CREATE TABLE linkperf_runs (
            id {id},
            run_key TEXT NOT NULL UNIQUE,
            import_id BIGINT NOT NULL REFERENCES linkperf_imports (id),
            label TEXT NOT NULL,
            test TEXT NOT NULL,
            pair TEXT NOT NULL,
            environment_id BIGINT NOT NULL REFERENCES linkperf_environments (id),
            started TEXT NOT NULL,
            started_ms BIGINT NOT NULL,
            run_no BIGINT NOT NULL,
            status TEXT NOT NULL,
            reasons TEXT NOT NULL
        )",
        "CREATE TABLE linkperf_series (
            id {id},
            label TEXT NOT NULL,
            test TEXT NOT NULL,
            pair TEXT NOT NULL,
            metric TEXT NOT NULL,
            environment_id BIGINT NOT NULL REFERENCES linkperf_environments (id),
            UNIQUE (label, test, pair, metric, environment_id)
        )",
        "CREATE TABLE linkperf_points (
            series_id BIGINT NOT NULL REFERENCES linkperf_series (id),
            run_id BIGINT NOT NULL REFERENCES linkperf_runs (id),
            value DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (series_id, run_id)
        )",
        "CREATE INDEX linkperf_runs_started ON linkperf_runs (started_ms, id)",
        "CREATE INDEX linkperf_points_run ON linkperf_points (run_id)",
    ],
}];

/// The version this build writes.
pub fn current_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.to)
}

/// The database's version (0 when it has no history yet).
fn version(conn: &mut dyn Connection) -> Result<i64, HistoryError> {
    let rows = conn.query("SELECT version FROM linkperf_schema", &[])?;
    let reader = super::sql::Reader { db: conn.name() };
    match rows.first() {
        Some(r) => reader.int(r, 0),
        None => Ok(0),
    }
}

/// Brings the database to the newest of `migrations`, each in its own
/// transaction; refuses a database newer than that.
pub fn migrate(conn: &mut dyn Connection, migrations: &[Migration]) -> Result<(), HistoryError> {
    let known = migrations.last().map_or(0, |m| m.to);
    for m in migrations {
        conn.batch(conn.dialect().begin_write())?;
        let step = (|| {
            if let Some(lock) = conn.dialect().migration_lock() {
                conn.batch(lock)?;
            }
            conn.batch(&format!(
                "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version BIGINT NOT NULL)"
            ))?;
            let now = version(conn)?;
            if now > known {
                return Err(HistoryError::NewerSchema {
                    db: conn.name().to_string(),
                    found: now,
                    known,
                });
            }
            if now >= m.to {
                return Ok(());
            }
            for s in m.statements {
                let s = s.replace("{id}", conn.dialect().id_column());
                conn.batch(&s)?;
            }
            if now == 0 {
                conn.execute(
                    "INSERT INTO linkperf_schema (version) VALUES ($1)",
                    &[Param::Int(m.to)],
                )?;
            } else {
                conn.execute(
                    "UPDATE linkperf_schema SET version = $1",
                    &[Param::Int(m.to)],
                )?;
            }
            Ok(())
        })();
        match step {
            Ok(()) => conn.batch("COMMIT")?,
            Err(e) => {
                let _ = conn.batch("ROLLBACK");
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Sqlite;

    const EXTRA: Migration = Migration {
        to: 2,
        statements: &["CREATE INDEX linkperf_runs_test ON linkperf_runs (test)"],
    };

    #[test]
    fn a_new_database_gets_every_migration_once_and_a_newer_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        let mut db = Sqlite::open(&path, false).unwrap();
        migrate(&mut db, MIGRATIONS).unwrap();
        assert_eq!(version(&mut db).unwrap(), current_version());
        // Again: nothing to do, nothing fails.
        migrate(&mut db, MIGRATIONS).unwrap();
        // A later build's migration is applied on top, once.
        let later = [MIGRATIONS[0].clone_static(), EXTRA];
        migrate(&mut db, &later).unwrap();
        migrate(&mut db, &later).unwrap();
        assert_eq!(version(&mut db).unwrap(), 2);
        // This build opening the later database refuses it.
        let e = migrate(&mut db, MIGRATIONS).unwrap_err();
        assert!(
            matches!(
                e,
                HistoryError::NewerSchema {
                    found: 2,
                    known: 1,
                    ..
                }
            ),
            "{e}"
        );
    }

    impl Migration {
        fn clone_static(&self) -> Migration {
            Migration {
                to: self.to,
                statements: self.statements,
            }
        }
    }
}
