//! Indexes, made to match the brief on every start-up and on `tickertape
//! setup` (idempotent). Each module declares its own as [`IndexSpec`]s;
//! sharding (`sharding.rs`) builds on the bucket key.

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::Store;

/// The shard key, and the unique index, of all three bucket collections:
/// one page's buckets are contiguous, and one site's pages are contiguous
/// (seed 004, "Compound shard key").
pub fn bucket_key() -> Document {
    doc! { "page": 1, "timestamp": 1 }
}

#[derive(Debug, Default)]
pub struct SetupReport {
    pub indexes: Vec<String>,
}

/// One index a module needs. Each module declares its own (`indexes()`
/// next to the code that queries them); `crate::indexes` composes them.
#[derive(Debug, Clone)]
pub struct IndexSpec {
    pub collection: &'static str,
    pub name: &'static str,
    pub keys: Document,
    pub unique: bool,
    /// A TTL index: the server removes a document this long after the
    /// indexed date.
    pub expire_after: Option<std::time::Duration>,
}

impl IndexSpec {
    pub fn new(collection: &'static str, name: &'static str, keys: Document) -> Self {
        IndexSpec {
            collection,
            name,
            keys,
            unique: false,
            expire_after: None,
        }
    }

    pub fn unique(mut self) -> Self {
        self.unique = true;
        self
    }

    pub fn expire_after(mut self, after: std::time::Duration) -> Self {
        self.expire_after = Some(after);
        self
    }

    fn describe(&self) -> String {
        let mut line = format!("{}: {} {}", self.collection, self.name, self.keys);
        if self.unique {
            line.push_str(" unique");
        }
        if let Some(after) = self.expire_after {
            line.push_str(&format!(" TTL {} s", after.as_secs()));
        }
        line
    }
}

/// Creates the indexes (idempotent: an index that exists with the same
/// options is left as it is).
pub async fn create_indexes(
    store: &Store,
    specs: &[IndexSpec],
) -> Result<SetupReport, mongodb::error::Error> {
    let mut report = SetupReport::default();
    for spec in specs {
        let options = IndexOptions::builder()
            .name(spec.name.to_owned())
            .unique(spec.unique.then_some(true))
            .expire_after(spec.expire_after)
            .build();
        store
            .db()
            .collection::<Document>(spec.collection)
            .create_index(
                IndexModel::builder()
                    .keys(spec.keys.clone())
                    .options(options)
                    .build(),
            )
            .await?;
        report.indexes.push(spec.describe());
    }
    Ok(report)
}
