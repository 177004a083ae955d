//! The PostgreSQL connection: the synchronous client, without TLS (a unix
//! socket, or a network the operator trusts; docs/history.md), each
//! statement prepared once per connection.

use std::collections::HashMap;

use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls, Statement};

use super::sql::{Cell, Connection, Dialect, Param, Row};
use crate::HistoryError;

/// An open PostgreSQL history.
pub struct Postgres {
    client: Client,
    name: String,
    prepared: HashMap<String, Statement>,
}

/// `url` with its password, if any, replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some(parts) => parts,
        None => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

/// What the server or the client said, the server's own message first.
fn detail(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

impl Postgres {
    /// Connects to the server at `url` (`postgres://user@host:port/db`).
    pub fn connect(url: &str) -> Result<Postgres, HistoryError> {
        let name = redact(url);
        let mut client = Client::connect(url, NoTls).map_err(|e| HistoryError::Postgres {
            db: name.clone(),
            detail: format!("cannot connect: {}", detail(&e)),
        })?;
        // The history's tables are small and read again and again, so they
        // are in memory: a random read costs about what a sequential one
        // does. At the default (4) the planner joined a series' points to
        // its runs by reading every run, 46 ms a series of 1,000 points
        // among 100,000 runs, against 4 ms through the runs' key
        // (bench/history.sh). This connection only.
        client
            .batch_execute("SET random_page_cost = 1.1")
            .map_err(|e| HistoryError::Postgres {
                db: name.clone(),
                detail: format!("cannot set up the session: {}", detail(&e)),
            })?;
        Ok(Postgres {
            client,
            name,
            prepared: HashMap::new(),
        })
    }

    fn fail(&self, sql: &str, e: &postgres::Error) -> HistoryError {
        HistoryError::Postgres {
            db: self.name.clone(),
            detail: format!(
                "{} (in: {})",
                detail(e),
                sql.trim().lines().next().unwrap_or("")
            ),
        }
    }

    fn statement(&mut self, sql: &str) -> Result<Statement, HistoryError> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).map_err(|e| self.fail(sql, &e))?;
        self.prepared.insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

/// The parameters as the client binds them.
fn bind<'a>(params: &'a [Param<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| match p {
            Param::Int(v) => v as &(dyn ToSql + Sync),
            Param::Real(v) => v as &(dyn ToSql + Sync),
            Param::Text(v) => v as &(dyn ToSql + Sync),
        })
        .collect()
}

/// Column `i` of `row` as a [`Cell`], by its type.
fn cell(row: &postgres::Row, i: usize) -> Result<Cell, postgres::Error> {
    let ty = row.columns()[i].type_().clone();
    Ok(if ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?
            .map_or(Cell::Null, Cell::Int)
    } else if ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?
            .map_or(Cell::Null, |v| Cell::Int(v.into()))
    } else if ty == Type::INT2 {
        row.try_get::<_, Option<i16>>(i)?
            .map_or(Cell::Null, |v| Cell::Int(v.into()))
    } else if ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?
            .map_or(Cell::Null, Cell::Real)
    } else if ty == Type::FLOAT4 {
        row.try_get::<_, Option<f32>>(i)?
            .map_or(Cell::Null, |v| Cell::Real(v.into()))
    } else if ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?
            .map_or(Cell::Null, |v| Cell::Int(v.into()))
    } else {
        row.try_get::<_, Option<String>>(i)?
            .map_or(Cell::Null, Cell::Text)
    })
}

impl Connection for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn batch(&mut self, sql: &str) -> Result<(), HistoryError> {
        self.client
            .batch_execute(sql)
            .map_err(|e| self.fail(sql, &e))
    }

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, HistoryError> {
        let st = self.statement(sql)?;
        self.client
            .execute(&st, &bind(params))
            .map_err(|e| self.fail(sql, &e))
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, HistoryError> {
        let st = self.statement(sql)?;
        let rows = self
            .client
            .query(&st, &bind(params))
            .map_err(|e| self.fail(sql, &e))?;
        rows.iter()
            .map(|r| (0..r.len()).map(|i| cell(r, i)).collect())
            .collect::<Result<Vec<Row>, _>>()
            .map_err(|e| self.fail(sql, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            redact("postgres://lp:s3cret@db.example:5432/h"),
            "postgres://lp:***@db.example:5432/h"
        );
        assert_eq!(redact("postgres://lp@db/h"), "postgres://lp@db/h");
        assert_eq!(redact("postgresql://db/h"), "postgresql://db/h");
    }
}
