//! Where the history is kept: one query layer over SQLite and PostgreSQL.

mod postgres;
mod queries;
mod schema;
mod sql;
mod sqlite;

pub use self::postgres::{redact, Postgres};
pub use queries::{is_postgres, metric_of, Counts, History, ImportSummary, SeriesFilter};
pub use schema::{current_version, migrate, Migration, MIGRATIONS};
pub use sql::{Cell, Connection, Dialect, Param, Row};
pub use sqlite::{Sqlite, BUSY_TIMEOUT};
