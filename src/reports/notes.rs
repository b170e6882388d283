//! What a report says about its own figures beside them.

use super::{Period, Resolution};
use crate::storage::sites::Site;
use crate::storage::Store;

/// The note for a report finer than a day over days an import brought as
/// daily figures (Plausible's): they sit at each day's first instant,
/// which is not when they happened.
pub async fn daily_only_note(
    store: &Store,
    site: &Site,
    period: &Period,
) -> Result<Option<String>, mongodb::error::Error> {
    if period.resolution == Resolution::Day {
        return Ok(None);
    }
    let found =
        crate::storage::imports::daily_between(store, &site.id.to_string(), period.from, period.to)
            .await?;
    Ok(found.map(|(from, to)| {
        format!(
            "imported: daily figures only. The days from {} to {} came from an import \
             that keeps days, not hours: each day's figures show at its first {}.",
            from.with_timezone(&period.zone).format("%Y-%m-%d"),
            (to - chrono::TimeDelta::seconds(1))
                .with_timezone(&period.zone)
                .format("%Y-%m-%d"),
            period.resolution.as_str(),
        )
    }))
}
