//! Every collection's indexes, composed from what each module declares
//! next to the queries that need them.

use crate::storage::schema::{create_indexes, IndexSpec, SetupReport};
use crate::storage::Store;

pub fn all() -> Vec<IndexSpec> {
    [
        crate::storage::buckets::indexes(),
        crate::storage::buckets::site_indexes(),
        crate::storage::breakdowns::indexes(),
        crate::storage::page_summaries::indexes(),
        crate::storage::sites::indexes(),
        crate::storage::users::indexes(),
        crate::storage::sessions::indexes(),
        crate::storage::api_tokens::indexes(),
        crate::storage::share_links::indexes(),
        crate::storage::funnels::indexes(),
        crate::storage::visit_log::indexes(),
        crate::storage::visit_days::indexes(),
        crate::storage::imported_properties::indexes(),
        crate::storage::visit_packs::indexes(),
        crate::storage::prealloc::indexes(),
        crate::storage::email::indexes(),
    ]
    .concat()
}

/// Creates every index (idempotent); run at start and by `tickertape setup`.
/// First renames the collections of a database from before their names
/// changed (`storage::renames`), so the indexes go to the collections
/// that hold the documents; then writes the documents that make a site's
/// hosts unique for sites from before them.
pub async fn ensure(store: &Store) -> Result<SetupReport, mongodb::error::Error> {
    crate::storage::renames::rename_former_collections(store).await?;
    let report = create_indexes(store, &all()).await?;
    crate::storage::sites::backfill_hosts(store).await?;
    Ok(report)
}
