//! The sources by the kind their imports record: the one place that names
//! every source, above them and the workflow, so neither knows the other.

use std::path::Path;

use super::workflow::{self, Deleted, Watch};
use super::{goatcounter, plausible, umami};
use crate::storage::Store;

/// Takes the import `key` back, exactly, and forgets it, through the
/// source its recorded kind names (see [`workflow::delete_as`]).
pub async fn delete(
    store: &Store,
    key: &str,
    file: Option<&Path>,
    moved: workflow::Moved<'_>,
    watch: &mut impl Watch,
) -> anyhow::Result<Deleted> {
    let record = workflow::recorded(store, key).await?;
    // The source is found by the kind the import recorded, once; the rest
    // goes through its `Importer`.
    match record.kind.as_str() {
        goatcounter::KIND => {
            workflow::delete_as::<goatcounter::Export>(store, record, file, moved, watch).await
        }
        umami::KIND => {
            workflow::delete_as::<umami::Export>(store, record, file, moved, watch).await
        }
        plausible::KIND => {
            workflow::delete_as::<plausible::Export>(store, record, file, moved, watch).await
        }
        other => anyhow::bail!("import {} is of an unknown kind {other:?}", record.key),
    }
}
