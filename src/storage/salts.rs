//! The daily salts of visitor ids: one random 32-byte key per UTC day in
//! `salts` (`{_id: "2026-11-25", salt: BinData, createdAt}`), shared by
//! every instance so that one visitor has one id whichever instance counts
//! them, and deleted two days after their day (`delete_before`): from then
//! on nobody, not even the operator, can tell which address and browser an
//! id was made from.

use bson::{doc, spec::BinarySubtype, Binary, Document};
use chrono::NaiveDate;
use mongodb::options::UpdateOptions;

use super::Store;

pub const COLLECTION: &str = "salts";

pub type Salt = [u8; 32];

fn key(day: NaiveDate) -> String {
    day.format("%Y-%m-%d").to_string()
}

/// The salt of `day`: the one stored, or `candidate` when none is yet (the
/// first instance to ask wins; the others read the winner's).
pub async fn ensure(
    store: &Store,
    day: NaiveDate,
    candidate: &Salt,
) -> Result<Salt, mongodb::error::Error> {
    let salts = store.db().collection::<Document>(COLLECTION);
    let binary = Binary {
        subtype: BinarySubtype::Generic,
        bytes: candidate.to_vec(),
    };
    salts
        .update_one(
            doc! {"_id": key(day)},
            doc! {"$setOnInsert": {"salt": binary, "createdAt": bson::DateTime::now()}},
        )
        .with_options(
            UpdateOptions::builder()
                .upsert(true)
                .write_concern(store.commit_write_concern())
                .build(),
        )
        .await?;
    let found = salts.find_one(doc! {"_id": key(day)}).await?;
    found
        .as_ref()
        .and_then(|d| d.get_binary_generic("salt").ok())
        .and_then(|b| Salt::try_from(b.as_slice()).ok())
        .ok_or_else(|| {
            mongodb::error::Error::custom(format!("the salt of {} is missing or damaged", key(day)))
        })
}

/// Deletes the salts of the days before `day`; returns how many.
pub async fn delete_before(store: &Store, day: NaiveDate) -> Result<u64, mongodb::error::Error> {
    let salts = store.db().collection::<Document>(COLLECTION);
    let deleted = salts
        .delete_many(doc! {"_id": {"$lt": key(day)}})
        .with_options(
            mongodb::options::DeleteOptions::builder()
                .write_concern(store.commit_write_concern())
                .build(),
        )
        .await?;
    Ok(deleted.deleted_count)
}

/// The days that have a salt stored, oldest first.
pub async fn days(store: &Store) -> Result<Vec<String>, mongodb::error::Error> {
    use futures::TryStreamExt;
    let salts = store.db().collection::<Document>(COLLECTION);
    let mut cursor = salts
        .find(doc! {})
        .projection(doc! {"_id": 1})
        .sort(doc! {"_id": 1})
        .await?;
    let mut out = Vec::new();
    while let Some(d) = cursor.try_next().await? {
        if let Ok(day) = d.get_str("_id") {
            out.push(day.to_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_keyed_so_that_they_sort_in_time() {
        let a = key(NaiveDate::from_ymd_opt(2026, 9, 30).unwrap());
        let b = key(NaiveDate::from_ymd_opt(2026, 10, 1).unwrap());
        assert_eq!(a, "2026-09-30");
        assert!(a < b);
    }
}
