//! Small multi-document transactions for the checks that must hold under
//! concurrency (a host names one site, an instance keeps an admin): a
//! session with a transaction, and which failures mean "run it again".

use mongodb::options::{ReadConcern, TransactionOptions};
use mongodb::ClientSession;

use super::Store;

/// How often a transaction that lost a race is run again before the error
/// is given up to the caller.
pub const MAX_TRIES: usize = 20;

/// A session with a transaction started: majority reads, the store's
/// commit write concern.
pub async fn begin(store: &Store) -> Result<ClientSession, mongodb::error::Error> {
    let mut session = store.client().start_session().await?;
    session
        .start_transaction()
        .with_options(
            TransactionOptions::builder()
                .write_concern(store.commit_write_concern())
                .read_concern(ReadConcern::majority())
                .build(),
        )
        .await?;
    Ok(session)
}

/// Whether a transaction failed only because another one touched the same
/// documents, so that running it again whole is right.
pub fn should_retry(e: &mongodb::error::Error) -> bool {
    e.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR)
}

/// Commits, asking again while the outcome is unknown (a commit is
/// idempotent; running the whole transaction again is not: it would find
/// its own writes).
pub async fn commit(session: &mut ClientSession) -> Result<(), mongodb::error::Error> {
    let mut tries = 0;
    loop {
        match session.commit_transaction().await {
            Err(e)
                if tries < MAX_TRIES
                    && e.contains_label(mongodb::error::UNKNOWN_TRANSACTION_COMMIT_RESULT) =>
            {
                tries += 1;
                pause(tries).await;
            }
            other => return other,
        }
    }
}

/// A short pause before the next try, growing with `tries`, so that racing
/// transactions do not meet again at once.
pub async fn pause(tries: usize) {
    let ms = 5u64 << tries.min(6);
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
}
