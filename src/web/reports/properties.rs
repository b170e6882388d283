//! Custom properties: their own report page (choose a key; its values
//! with visits, views and events, share and change) and a CSV, read from
//! the visit store with the filters, like the funnels. A share link shows
//! the same page read-only, without the CSV.

use actix_web::web;
use askama::Template;
use serde::Deserialize;
use std::sync::Arc;

use super::shared::{
    behind_header, csv_header, file_stem, slug, CsvAnswer, CsvRequest, FilterChips,
};
use super::*;
use crate::domain::FilterDimension;
use crate::reports::engine::VISIT_STORE;
use crate::reports::filtered::PropertyFigures;
use crate::reports::{csv, filtered_read};
use crate::storage::sites::Site;
use crate::web::error::WebError;
use crate::web::fmt;
use crate::web::pages::{render, Nav};
use crate::web::state::WebState;

/// `key`: the property whose values are shown.
#[derive(Deserialize)]
pub struct KeyChoice {
    key: Option<String>,
}

impl KeyChoice {
    /// The key asked for, if any; one no stored key can be (empty, or
    /// longer than a stored key) is refused.
    fn key(&self) -> Result<Option<&str>, WebError> {
        match self.key.as_deref() {
            None | Some("") => Ok(None),
            Some(k) if k.chars().count() <= crate::domain::properties::MAX_KEY_BYTES => Ok(Some(k)),
            Some(_) => Err(WebError::invalid(
                "A property key has at most 300 characters.",
            )),
        }
    }
}

pub struct KeyLink {
    pub name: String,
    pub visits: i64,
    pub href: String,
    pub chosen: bool,
}

pub struct ValueRow {
    pub value: String,
    pub visits: i64,
    pub views: i64,
    pub events: i64,
    pub share: String,
    pub change: String,
    /// Its visits in the period before.
    pub previous: i64,
    /// The dashboard with this value as one more filter.
    pub href: Option<String>,
}

#[derive(Template)]
#[template(path = "properties.html")]
struct PropertiesPage {
    nav: Option<Nav>,
    shared: bool,
    site: Arc<Site>,
    controls: Controls,
    chips: FilterChips,
    keys: Vec<KeyLink>,
    key: Option<String>,
    rows: Vec<ValueRow>,
    csv: String,
    back_href: String,
    notes: Vec<String>,
    behind: Option<String>,
}

/// `GET /sites/{id}/properties?key=<key>`.
pub async fn properties_page(r: SiteRequest, q: Query, choice: web::Query<KeyChoice>) -> Answer {
    let audience = Audience::signed_in(&r);
    show_properties(&r.state, r.site, audience, &q, &choice).await
}

/// The properties page for `audience`: every key the visits carry over
/// the period with the filters, and the chosen key's values (the most
/// common key's when none is chosen).
pub async fn show_properties(
    state: &WebState,
    site: Arc<Site>,
    audience: Audience,
    q: &Query,
    choice: &KeyChoice,
) -> Answer {
    let filters = q.filters()?;
    let asked = choice.key()?;
    let now = state.clock.now();
    let (period, range_error, _) =
        resolve_or_default(q, now, &state.retention, site.time_zone.tz());
    let base = audience.base.clone();
    let params = q.range_params();
    let here = format!("{base}/properties");
    // No key asked: the most common one's values, from the same read.
    let (figures, before) = state
        .reads()
        .properties(&site, &filters, asked, &period)
        .await?;
    let key = figures.key.clone();
    let with_filters: Vec<String> = filters.iter().map(ToString::to_string).collect();
    let kept = |extra: &[(&str, &str)]| {
        let mut all: Vec<(&str, &str)> = extra.to_vec();
        all.extend(with_filters.iter().map(|f| ("filter", f.as_str())));
        join(&here, &params, &all)
    };
    let keys = figures
        .keys
        .iter()
        .map(|(name, visits)| KeyLink {
            name: name.clone(),
            visits: *visits,
            href: kept(&[("key", name)]),
            chosen: key.as_deref() == Some(name.as_str()),
        })
        .collect();
    let rows = value_rows(&figures, &before, |value| {
        let k = key.as_deref()?;
        q.add_filter_link(&base, FilterDimension::Property, &format!("{k}:{value}"))
    });
    let mut notes = vec![
        "A value's visits are the visits (passing every filter) with a view or an event carrying it in the period; its share is of every such visit with a view or event in the period. Properties are what a page's script sends with its views and events (docs/embedding.md).".to_owned(),
    ];
    notes.extend(filtered_read::sample_words(figures.sampled));
    notes.extend(
        filtered_read::visit_store_imported_note(&state.store, &site, figures.imported).await?,
    );
    let csv = match &key {
        Some(k) => audience.export(kept(&[("key", k)]).replacen(
            &format!("{base}/properties"),
            &format!("{base}/properties.csv"),
            1,
        )),
        None => String::new(),
    };
    let hidden: Vec<(&str, &str)> = key.iter().map(|k| ("key", k.as_str())).collect();
    let behind = lags(state).behind(VISIT_STORE).map(behind_words);
    let page = PropertiesPage {
        nav: audience.nav,
        shared: audience.shared,
        controls: controls(&here, &hidden, q, &period, range_error.as_ref()),
        chips: FilterChips::of(q, &here, &filters),
        keys,
        key,
        rows,
        csv,
        back_href: join(&base, &params, &[]),
        notes,
        behind,
        site,
    };
    timed(state, audience.started);
    Ok(render(status_of(range_error.as_ref()), &page))
}

fn value_rows(
    now: &PropertyFigures,
    before: &PropertyFigures,
    href: impl Fn(&str) -> Option<String>,
) -> Vec<ValueRow> {
    now.rows_with_previous(before)
        .into_iter()
        .map(|(r, previous)| ValueRow {
            value: r.value.clone(),
            visits: r.visits,
            views: r.views,
            events: r.events,
            share: fmt::share(r.visits, now.visits),
            change: fmt::change(r.visits, previous),
            previous,
            href: href(&r.value),
        })
        .collect()
}

/// `GET /sites/{id}/properties.csv?key=<key>`: one key's values, with the
/// range and the filters.
pub async fn properties_csv(
    CsvRequest(r): CsvRequest,
    q: Query,
    choice: web::Query<KeyChoice>,
) -> CsvAnswer {
    let filters = q.filters()?;
    let period = resolve_kept(&q, &r.state, r.site.time_zone.tz())?;
    let key = choice
        .key()?
        .ok_or_else(|| WebError::invalid("Name a property key: key=<key>."))?;
    let (now, before) = r
        .state
        .reads()
        .properties(&r.site, &filters, Some(key), &period)
        .await?;
    let rows = value_rows(&now, &before, |_| None);
    let body = csv::table(
        &[
            "value",
            "visits",
            "views",
            "events",
            "share_percent",
            "previous_visits",
        ],
        rows.iter().map(|row| {
            vec![
                row.value.clone(),
                row.visits.to_string(),
                row.views.to_string(),
                row.events.to_string(),
                fmt::percent(row.visits, now.visits),
                row.previous.to_string(),
            ]
        }),
    );
    timed(&r.state, r.started);
    let mut answer = csv_header(&format!(
        "{}_property_{}.csv",
        file_stem(&r.site, None, period.from, period.to),
        slug(key)
    ));
    behind_header(&mut answer, &r.state, VISIT_STORE);
    Ok(answer.body(body))
}
