//! Sends one multi-statement `update` command and makes sure every statement
//! lands exactly once.
//!
//! - The command carries an explicit write concern and the session's next
//!   `txnNumber`, so it is a retryable write: when the outcome is unknown
//!   (connection lost, timeout, "not primary"), the *same* command is sent
//!   again and the server applies only the statements it had not applied.
//! - The reply is checked: `ok`, `writeConcernError`, `writeErrors` and `n`.
//! - A duplicate-key error on an upsert (two inserts of one new bucket
//!   racing, e.g. with preallocation) is retried as a new command holding
//!   just those statements; by then the bucket exists and the `$inc` applies.
//!
//! On a standalone server (no sessions with transaction numbers) an unknown
//! outcome cannot be retried without risking a double count, so it fails.

use bson::{doc, Bson, Document};
use mongodb::ClientSession;
use std::time::Duration;
use tokio::time::Instant;

/// Duplicate-key error code.
const DUPLICATE_KEY: i32 = 11000;
/// How many rounds of duplicate-key retries before giving up: each round can
/// only be caused by a concurrent insert of the same bucket, so one is
/// normally enough.
const MAX_DUPLICATE_ROUNDS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error("the database did not confirm the write before the deadline")]
    DeadlineExceeded(#[source] Option<mongodb::error::Error>),
    #[error("the database refused the update")]
    Refused(#[source] mongodb::error::Error),
    #[error("{failed} statement(s) of an update on {collection} failed: {first}")]
    StatementsFailed {
        collection: String,
        failed: usize,
        first: String,
    },
    #[error("unexpected update reply on {collection}: {detail}")]
    BadReply { collection: String, detail: String },
}

/// A session dedicated to one stream of update commands.
pub struct UpdateSession {
    session: ClientSession,
    retryable: bool,
}

impl UpdateSession {
    pub fn new(session: ClientSession, retryable: bool) -> Self {
        Self { session, retryable }
    }
}

/// What one update command must do, and by when.
pub struct UpdateRequest<'a> {
    pub store: &'a crate::storage::Store,
    pub collection: &'a str,
    pub statements: Vec<Document>,
    pub write_concern: &'a Document,
    /// How long one attempt may take before its outcome counts as unknown.
    pub attempt_timeout: Duration,
    pub deadline: Instant,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UpdateOutcome {
    /// Statements that matched or created a bucket.
    pub applied: usize,
    /// Of those, buckets created by the upsert.
    pub upserted: usize,
    /// Rounds spent on duplicate-key retries.
    pub duplicate_retries: usize,
    /// Times a command was re-sent after an unknown outcome.
    pub resent: usize,
}

pub async fn run_update(
    mut request: UpdateRequest<'_>,
    session: &mut UpdateSession,
) -> Result<UpdateOutcome, UpdateError> {
    let mut outcome = UpdateOutcome::default();
    let mut pending = std::mem::take(&mut request.statements);
    for round in 0..=MAX_DUPLICATE_ROUNDS {
        if pending.is_empty() {
            break;
        }
        let txn_number = request.store.next_txn_number();
        let mut command = doc! {
            "update": request.collection,
            "updates": pending.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
            "ordered": false,
            "writeConcern": request.write_concern.clone(),
        };
        if session.retryable {
            command.insert("txnNumber", txn_number);
        }
        let reply = send_until_known(&request, command, session, &mut outcome).await?;
        let checked = check_reply(request.collection, &reply, pending.len())?;
        outcome.applied += checked.applied;
        outcome.upserted += checked.upserted;
        if checked.duplicates.is_empty() {
            return Ok(outcome);
        }
        if round == MAX_DUPLICATE_ROUNDS {
            break;
        }
        outcome.duplicate_retries += 1;
        pending = checked
            .duplicates
            .into_iter()
            .map(|i| pending[i].clone())
            .collect();
    }
    Err(UpdateError::StatementsFailed {
        collection: request.collection.to_owned(),
        failed: pending.len(),
        first: "duplicate key errors kept recurring".into(),
    })
}

/// Sends `command` until the server gives a definite answer or the deadline
/// passes. Each failed attempt waits a little longer, up to 1 s.
async fn send_until_known(
    request: &UpdateRequest<'_>,
    command: Document,
    session: &mut UpdateSession,
    outcome: &mut UpdateOutcome,
) -> Result<Document, UpdateError> {
    let deadline = request.deadline;
    let mut backoff = Duration::from_millis(20);
    let mut last_error = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(UpdateError::DeadlineExceeded(last_error));
        }
        let attempt = request
            .store
            .update_db()
            .run_command(command.clone())
            .session(&mut session.session);
        let limit = request.attempt_timeout.min(deadline - now);
        match tokio::time::timeout(limit, attempt).await {
            // Applied on the primary but not yet confirmed by the write
            // concern: the resend waits for the confirmation again.
            Ok(Ok(reply)) if session.retryable && reply.contains_key("writeConcernError") => {
                tracing::warn!(reply = %reply, "write concern not satisfied; resending");
            }
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(e)) if can_resend(&e, session.retryable) => {
                tracing::warn!(error = %e, "update outcome unknown or server unavailable; resending");
                last_error = Some(e);
            }
            Ok(Err(e)) => return Err(UpdateError::Refused(e)),
            Err(_elapsed) if session.retryable => {
                tracing::warn!(?limit, "no reply to an update in time; resending");
            }
            Err(_elapsed) => return Err(UpdateError::DeadlineExceeded(None)),
        }
        outcome.resent += 1;
        let pause = backoff.min(deadline.saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Whether sending the same command again is safe and useful.
fn can_resend(error: &mongodb::error::Error, retryable: bool) -> bool {
    use mongodb::error::{ErrorKind, RETRYABLE_WRITE_ERROR};
    // Never sent: safe whatever the server supports.
    if matches!(*error.kind, ErrorKind::ServerSelection { .. }) {
        return true;
    }
    // Sent, outcome unknown or refused for a passing reason: safe only when
    // the server can recognise the resend by its transaction number.
    retryable
        && (error.contains_label(RETRYABLE_WRITE_ERROR)
            || matches!(
                *error.kind,
                ErrorKind::Io(_) | ErrorKind::ConnectionPoolCleared { .. }
            ))
}

struct CheckedReply {
    applied: usize,
    upserted: usize,
    /// Indexes (into the statements sent) that hit a duplicate key.
    duplicates: Vec<usize>,
}

fn check_reply(
    collection: &str,
    reply: &Document,
    sent: usize,
) -> Result<CheckedReply, UpdateError> {
    let bad = |detail: String| UpdateError::BadReply {
        collection: collection.to_owned(),
        detail,
    };
    if let Ok(wce) = reply.get_document("writeConcernError") {
        return Err(bad(format!("write concern error: {wce}")));
    }
    let n = number(reply.get("n")).ok_or_else(|| bad("no `n`".into()))?;
    let upserted = reply.get_array("upserted").map(Vec::len).unwrap_or(0);
    let mut duplicates = Vec::new();
    let mut other = Vec::new();
    if let Ok(errors) = reply.get_array("writeErrors") {
        for error in errors {
            let error = error
                .as_document()
                .ok_or_else(|| bad("malformed writeErrors".into()))?;
            let index =
                number(error.get("index")).ok_or_else(|| bad("writeError without index".into()))?;
            if index as usize >= sent {
                return Err(bad(format!("writeError index {index} of {sent}")));
            }
            if number(error.get("code")) == Some(i64::from(DUPLICATE_KEY)) {
                duplicates.push(index as usize);
            } else {
                other.push(
                    error
                        .get_str("errmsg")
                        .unwrap_or("unknown error")
                        .to_owned(),
                );
            }
        }
    }
    if let Some(first) = other.first() {
        return Err(UpdateError::StatementsFailed {
            collection: collection.to_owned(),
            failed: other.len(),
            first: first.clone(),
        });
    }
    // Every statement is an upsert, so each one that did not fail matched or
    // created exactly one bucket.
    let expected = sent - duplicates.len();
    if n as usize != expected {
        return Err(bad(format!("n = {n}, expected {expected}")));
    }
    Ok(CheckedReply {
        applied: expected,
        upserted,
        duplicates,
    })
}

fn number(value: Option<&Bson>) -> Option<i64> {
    match value? {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(n) if n.fract() == 0.0 => Some(*n as i64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_reply_counts_applied_and_upserted() {
        let reply =
            doc! {"n": 3, "nModified": 1, "upserted": [{"index": 0}, {"index": 2}], "ok": 1.0};
        let c = check_reply("views_minute", &reply, 3).unwrap();
        assert_eq!((c.applied, c.upserted, c.duplicates.len()), (3, 2, 0));
    }

    #[test]
    fn duplicate_keys_are_returned_for_retry() {
        let reply = doc! {"n": 1, "writeErrors": [{"index": 1, "code": 11000, "errmsg": "E11000"}], "ok": 1.0};
        let c = check_reply("views_minute", &reply, 2).unwrap();
        assert_eq!(c.duplicates, vec![1]);
        assert_eq!(c.applied, 1);
    }

    #[test]
    fn other_write_errors_fail_the_update() {
        let reply =
            doc! {"n": 1, "writeErrors": [{"index": 0, "code": 2, "errmsg": "bad"}], "ok": 1.0};
        assert!(matches!(
            check_reply("views_minute", &reply, 2),
            Err(UpdateError::StatementsFailed { failed: 1, .. })
        ));
    }

    #[test]
    fn a_short_n_or_a_write_concern_error_is_not_success() {
        let short = doc! {"n": 1, "ok": 1.0};
        assert!(matches!(
            check_reply("c", &short, 2),
            Err(UpdateError::BadReply { .. })
        ));
        let wce = doc! {"n": 2, "writeConcernError": {"code": 64, "errmsg": "waiting"}, "ok": 1.0};
        assert!(matches!(
            check_reply("c", &wce, 2),
            Err(UpdateError::BadReply { .. })
        ));
        let missing = doc! {"ok": 1.0};
        assert!(check_reply("c", &missing, 1).is_err());
    }
}
