//! Checks the reply of a multi-statement `update` command.
//!
//! Every statement Tickertape sends is an upsert, so each one that did not
//! fail matched or created exactly one bucket: `n` must equal the statements
//! sent. Anything else (a write error, a write-concern error, a short `n`)
//! is a failure, never a partial success: the whole transaction is retried,
//! or, when the server refused statements for what the stored documents
//! hold (see [`REFUSED_CODES`]), retried without them.

use bson::Document;

use super::values::{number, DUPLICATE_KEY};

/// Write error codes that say a statement can never succeed on the
/// document as it is stored, however often it is sent: an `$inc` past
/// the largest NumberLong (`BadValue` on MongoDB and the local server:
/// "Failed to apply $inc operations to current value"), a counter or slot
/// map of the wrong type (`TypeMismatch`, `PathNotViable`), a result out
/// of range (`Overflow`). Only a hand edit or an old import's figures put
/// a bucket in such a state; a conflict or an outage never gives these
/// codes. A collection's validator refusing a write
/// (`DocumentValidationFailure`) is not one: it is the operator's setting
/// for every bucket, and the hits wait in the journal until it is fixed.
pub const REFUSED_CODES: [i64; 4] = [
    2,  // BadValue
    14, // TypeMismatch
    15, // Overflow
    28, // PathNotViable
];

#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    #[error("{failed} statement(s) of an update on {collection} failed: {first}")]
    StatementsFailed {
        collection: String,
        failed: usize,
        first: String,
        /// All failures were duplicate keys (a racing insert of a new
        /// bucket): worth retrying at once.
        duplicates_only: bool,
        /// When every failure is a [`REFUSED_CODES`] one: the indexes (in
        /// the command) of the statements refused, which would be refused
        /// again. Empty otherwise.
        refused: Vec<usize>,
    },
    #[error("unexpected update reply on {collection}: {detail}")]
    BadReply { collection: String, detail: String },
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UpdateOutcome {
    /// Statements that matched or created a bucket.
    pub applied: usize,
    /// Of those, buckets created by the upsert.
    pub upserted: usize,
}

pub fn check_reply(
    collection: &str,
    reply: &Document,
    sent: usize,
) -> Result<UpdateOutcome, ReplyError> {
    let bad = |detail: String| ReplyError::BadReply {
        collection: collection.to_owned(),
        detail,
    };
    if let Ok(wce) = reply.get_document("writeConcernError") {
        return Err(bad(format!("write concern error: {wce}")));
    }
    let n = number(reply.get("n")).ok_or_else(|| bad("no `n`".into()))?;
    let upserted = reply.get_array("upserted").map(Vec::len).unwrap_or(0);
    if let Ok(errors) = reply.get_array("writeErrors") {
        let mut messages = Vec::new();
        let mut duplicates = 0;
        let mut refused = Vec::new();
        for error in errors {
            let error = error
                .as_document()
                .ok_or_else(|| bad("malformed writeErrors".into()))?;
            let index =
                number(error.get("index")).ok_or_else(|| bad("writeError without index".into()))?;
            let index = usize::try_from(index)
                .ok()
                .filter(|&i| i < sent)
                .ok_or_else(|| bad(format!("writeError index {index} of {sent}")))?;
            let code = number(error.get("code"));
            if code == Some(i64::from(DUPLICATE_KEY)) {
                duplicates += 1;
            }
            if code.is_some_and(|c| REFUSED_CODES.contains(&c)) {
                refused.push(index);
            }
            messages.push(
                error
                    .get_str("errmsg")
                    .unwrap_or("unknown error")
                    .to_owned(),
            );
        }
        if let Some(first) = messages.first() {
            if refused.len() != messages.len() {
                refused.clear();
            }
            return Err(ReplyError::StatementsFailed {
                collection: collection.to_owned(),
                failed: messages.len(),
                first: first.clone(),
                duplicates_only: duplicates == messages.len(),
                refused,
            });
        }
    }
    if usize::try_from(n).ok() != Some(sent) {
        return Err(bad(format!("n = {n}, expected {sent}")));
    }
    Ok(UpdateOutcome {
        applied: sent,
        upserted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_clean_reply_counts_applied_and_upserted() {
        let reply =
            doc! {"n": 3, "nModified": 1, "upserted": [{"index": 0}, {"index": 2}], "ok": 1.0};
        let c = check_reply("views_minute", &reply, 3).unwrap();
        assert_eq!((c.applied, c.upserted), (3, 2));
    }

    #[test]
    fn duplicate_keys_fail_and_say_so() {
        let reply = doc! {"n": 1, "writeErrors": [{"index": 1, "code": 11000, "errmsg": "E11000"}], "ok": 1.0};
        assert!(matches!(
            check_reply("views_minute", &reply, 2),
            Err(ReplyError::StatementsFailed {
                duplicates_only: true,
                ..
            })
        ));
    }

    #[test]
    fn other_write_errors_fail_the_update() {
        let reply =
            doc! {"n": 1, "writeErrors": [{"index": 0, "code": 2, "errmsg": "bad"}], "ok": 1.0};
        assert!(matches!(
            check_reply("views_minute", &reply, 2),
            Err(ReplyError::StatementsFailed {
                failed: 1,
                duplicates_only: false,
                ..
            })
        ));
    }

    #[test]
    fn statements_the_stored_document_refuses_are_named() {
        let overflow = doc! {"n": 1, "writeErrors": [
            {"index": 1, "code": 2, "errmsg": "Failed to apply $inc operations to current value ((NumberLong)9223372036854775806)"},
            {"index": 3, "code": 14, "errmsg": "Cannot apply $inc to a value of non-numeric type"},
        ], "ok": 1.0};
        match check_reply("site_views_hour", &overflow, 4) {
            Err(ReplyError::StatementsFailed {
                refused, failed, ..
            }) => {
                assert_eq!((refused, failed), (vec![1, 3], 2));
            }
            other => panic!("{other:?}"),
        }
        // One failure that may pass on a retry: nothing is named, the
        // batch is retried whole.
        let mixed = doc! {"n": 1, "writeErrors": [
            {"index": 0, "code": 2, "errmsg": "overflow"},
            {"index": 2, "code": 11000, "errmsg": "E11000"},
        ], "ok": 1.0};
        assert!(matches!(
            check_reply("c", &mixed, 3),
            Err(ReplyError::StatementsFailed { refused, .. }) if refused.is_empty()
        ));
        let negative = doc! {"n": 0, "writeErrors": [{"index": -1, "code": 2}], "ok": 1.0};
        assert!(matches!(
            check_reply("c", &negative, 1),
            Err(ReplyError::BadReply { .. })
        ));
    }

    #[test]
    fn a_short_n_or_a_write_concern_error_is_not_success() {
        let short = doc! {"n": 1, "ok": 1.0};
        assert!(matches!(
            check_reply("c", &short, 2),
            Err(ReplyError::BadReply { .. })
        ));
        let wce = doc! {"n": 2, "writeConcernError": {"code": 64, "errmsg": "waiting"}, "ok": 1.0};
        assert!(matches!(
            check_reply("c", &wce, 2),
            Err(ReplyError::BadReply { .. })
        ));
        let missing = doc! {"ok": 1.0};
        assert!(check_reply("c", &missing, 1).is_err());
    }
}
