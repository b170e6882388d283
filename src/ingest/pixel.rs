//! A hit's rules, from what its request says to a journaled record: bots
//! and prefetches refused, the site and page found and checked, the caps,
//! the visitor and the breakdowns, and the outcome counted. The HTTP side
//! (the pixel's answer, the peers' endpoints) is in `web::pixel` and
//! `web::compat`; this module hands each hit on to the journal.

use percent_encoding::percent_decode;

use super::bots;
use super::page_cap::Admission;
use super::request::{Headers, HitRequest};
use super::{IngestState, SiteDirectory};
use crate::domain::{
    Dimension, EngagementError, EngagementHit, EventName, EventNameError, Labels, Page, PageError,
    PageRef, Properties, PropertyError, Revenue, RevenueError, SiteId, Source,
};
use crate::journal::{Accepted, AppendError, Record, SubmitError};

/// Every way a pixel request can end, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Counted,
    Bot,
    Prefetch,
    InvalidSite,
    UnknownSite,
    NoSite,
    InvalidPage,
    PageTooLong,
    InvalidUtf8,
    ControlCharacter,
    ForeignHost,
    NoPage,
    QueueFull,
    JournalFull,
    StoreFailed,
    ShuttingDown,
    /// Counted, but under the site's overflow page (new-page cap).
    PageCap,
    /// A custom event, counted.
    Event,
    /// `e` is not an event name.
    InvalidEvent,
    /// The site has as many event names as it may.
    EventCap,
    /// A peer's tracker sent a body that is not its format (`compat`).
    InvalidBody,
    /// `props` is not a JSON object of properties within their bounds.
    InvalidProperties,
    /// `revenue` is not an amount and an ISO 4217 currency.
    InvalidRevenue,
    /// An engagement with a view, counted.
    Engagement,
    /// An engagement with no open view of its page to credit: accepted,
    /// not counted.
    NoView,
    /// An engagement with neither a scroll depth nor a time to read.
    InvalidEngagement,
}

impl Outcome {
    pub const COUNT: usize = 26;
    pub const ALL: [Outcome; Self::COUNT] = [
        Outcome::Counted,
        Outcome::Bot,
        Outcome::Prefetch,
        Outcome::InvalidSite,
        Outcome::UnknownSite,
        Outcome::NoSite,
        Outcome::InvalidPage,
        Outcome::PageTooLong,
        Outcome::InvalidUtf8,
        Outcome::ControlCharacter,
        Outcome::ForeignHost,
        Outcome::NoPage,
        Outcome::QueueFull,
        Outcome::JournalFull,
        Outcome::StoreFailed,
        Outcome::ShuttingDown,
        Outcome::PageCap,
        Outcome::Event,
        Outcome::InvalidEvent,
        Outcome::EventCap,
        Outcome::InvalidBody,
        Outcome::InvalidProperties,
        Outcome::InvalidRevenue,
        Outcome::Engagement,
        Outcome::NoView,
        Outcome::InvalidEngagement,
    ];

    /// The value of `X-Tickertape-Reason` (and the metrics label).
    pub fn reason(self) -> &'static str {
        match self {
            Outcome::Counted => "counted",
            Outcome::Bot => "bot",
            Outcome::Prefetch => "prefetch",
            Outcome::InvalidSite => "invalid-site",
            Outcome::UnknownSite => "unknown-site",
            Outcome::NoSite => "no-site",
            Outcome::InvalidPage => "invalid-page",
            Outcome::PageTooLong => "page-too-long",
            Outcome::InvalidUtf8 => "invalid-utf8",
            Outcome::ControlCharacter => "control-character",
            Outcome::ForeignHost => "foreign-host",
            Outcome::NoPage => "no-page",
            Outcome::QueueFull => "queue-full",
            Outcome::JournalFull => "journal-full",
            Outcome::StoreFailed => "store-failed",
            Outcome::ShuttingDown => "shutting-down",
            Outcome::PageCap => "page-cap",
            Outcome::Event => "event",
            Outcome::InvalidEvent => "invalid-event",
            Outcome::EventCap => "event-cap",
            Outcome::InvalidBody => "invalid-body",
            Outcome::InvalidProperties => "invalid-props",
            Outcome::InvalidRevenue => "invalid-revenue",
            Outcome::Engagement => "engagement",
            Outcome::NoView => "no-view",
            Outcome::InvalidEngagement => "invalid-engagement",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PixelError {
    #[error("the User-Agent is missing or belongs to a bot")]
    Bot,
    #[error("prefetch and prerender requests are not views")]
    Prefetch,
    #[error("`site` is not a site id (a UUID)")]
    InvalidSite,
    #[error("no site has this id, or the Referer host")]
    UnknownSite,
    #[error("no `site` parameter and no Referer to find the site by")]
    NoSite,
    #[error("invalid page: {0}")]
    Page(#[from] PageError),
    #[error("the page's host does not belong to the site")]
    ForeignHost,
    /// No `site`, and the Referer (or the page) names no confirmed host of
    /// a site: not counted, but answered like a counted view, so that
    /// nobody learns which hosts the instance tracks.
    #[error("no site was found by the Referer's host")]
    NotTracked,
    #[error("no `page` parameter and no Referer to take the page from")]
    NoPage,
    #[error("too many hits are waiting for the journal")]
    QueueFull,
    #[error("the journal is at its disk budget")]
    JournalFull,
    #[error("the hit could not be written to the journal")]
    StoreFailed,
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("invalid event name: {0}")]
    Event(#[from] EventNameError),
    #[error("the site has as many event names as it may")]
    EventCap,
    #[error("invalid properties: {0}")]
    Properties(#[from] PropertyError),
    #[error("invalid revenue: {0}")]
    Revenue(#[from] RevenueError),
    #[error("invalid engagement: {0}")]
    Engagement(#[from] EngagementError),
}

impl PixelError {
    pub fn outcome(&self) -> Outcome {
        match self {
            PixelError::Bot => Outcome::Bot,
            PixelError::Prefetch => Outcome::Prefetch,
            PixelError::InvalidSite => Outcome::InvalidSite,
            PixelError::UnknownSite => Outcome::UnknownSite,
            PixelError::NoSite => Outcome::NoSite,
            PixelError::Page(PageError::NotAPathOrUrl | PageError::InvisibleCharacter) => {
                Outcome::InvalidPage
            }
            PixelError::Page(PageError::TooLong) => Outcome::PageTooLong,
            PixelError::Page(PageError::InvalidUtf8) => Outcome::InvalidUtf8,
            PixelError::Page(PageError::ControlCharacter) => Outcome::ControlCharacter,
            PixelError::ForeignHost => Outcome::ForeignHost,
            PixelError::NotTracked => Outcome::UnknownSite,
            PixelError::NoPage => Outcome::NoPage,
            PixelError::QueueFull => Outcome::QueueFull,
            PixelError::JournalFull => Outcome::JournalFull,
            PixelError::StoreFailed => Outcome::StoreFailed,
            PixelError::ShuttingDown => Outcome::ShuttingDown,
            PixelError::Event(_) => Outcome::InvalidEvent,
            PixelError::EventCap => Outcome::EventCap,
            PixelError::Properties(_) => Outcome::InvalidProperties,
            PixelError::Revenue(_) => Outcome::InvalidRevenue,
            PixelError::Engagement(_) => Outcome::InvalidEngagement,
        }
    }
}

/// Counts one hit, from the pixel or a peer's tracker (`compat`): the
/// same rules and the same journal whatever it came through, and its
/// outcome in the stats. `Ok` is a counted outcome: `Counted`, `PageCap`
/// (counted under the site's overflow page) or `Event`.
pub async fn take(
    req: &HitRequest<'_>,
    state: &IngestState,
    params: HitParams,
) -> Result<Outcome, PixelError> {
    let result = count(req, state, params).await;
    if matches!(result, Err(PixelError::NotTracked)) {
        // Answered like a count: in a count's time too.
        state.wait_like_a_count().await;
    }
    let outcome = match &result {
        Ok(Counted::Event) => Outcome::Event,
        Ok(Counted::Engagement) => Outcome::Engagement,
        Ok(Counted::NoView) => Outcome::NoView,
        Ok(Counted::Overflowed) => Outcome::PageCap,
        Ok(Counted::View) => Outcome::Counted,
        Err(e) => e.outcome(),
    };
    state.stats.record(outcome);
    result.map(|_| outcome)
}

/// What a counted hit was.
enum Counted {
    View,
    /// A view counted under the site's overflow page (new-page cap).
    Overflowed,
    Event,
    /// An engagement journaled, or with nothing new to journal.
    Engagement,
    NoView,
}

async fn count(
    req: &HitRequest<'_>,
    state: &IngestState,
    params: HitParams,
) -> Result<Counted, PixelError> {
    let at = state.clock.now();
    let mut params = params;
    // A bad engagement is refused before any lookup, like a bad event.
    let engagement = params.engagement.take().transpose()?;
    let view = classify_view(req.headers, params, &state.directory)?;
    if let Some(engagement) = engagement {
        return engage(req, state, view.page, engagement, at).await;
    }
    // The site's own cap setting (the page's domain is its canonical host).
    let site = state.directory.by_host(view.page.domain());
    let setting = site.as_ref().map(|site| site.page_cap).unwrap_or_default();
    if let Some(event) = &view.event {
        let goals: Vec<&str> = site
            .iter()
            .flat_map(|site| site.goals.iter())
            .filter_map(crate::domain::Goal::event)
            .collect();
        let client = state.visitors.client_key(req);
        if let Err(refusal) =
            state
                .event_cap
                .admit(view.page.domain(), event.as_str(), &goals, &client, at)
        {
            tracing::debug!(?refusal, "an event name over the cap");
            return Err(PixelError::EventCap);
        }
    }
    let (page, overflowed) = match state.page_cap.admit(view.page, at, setting) {
        Admission::Page(page) => (page, false),
        Admission::Overflow(other) => (other, true),
    };
    let visitor = state.visitors.id_of(req, at, page.domain());
    if let Some(event) = view.event {
        // An event is not a view: it leaves the visit as it is, and is
        // counted with its visitor for the goals' converting visitors.
        let props = admitted_props(state, req, page.domain(), view.props, at);
        let place = state.visitors.open.event(
            visitor,
            page.as_str(),
            event.as_str(),
            &props,
            view.revenue,
            at,
        );
        let record = Record {
            page: page.into_string(),
            at,
            source: None,
            visit: Some(crate::journal::Visit {
                visitor,
                place,
                ..Default::default()
            }),
            labels: Labels::default().with(Dimension::Event, event.into_string()),
            props,
            revenue: view.revenue,
            engagement: None,
        };
        return journal(state, record).await.map(|()| Counted::Event);
    }
    let props = admitted_props(state, req, page.domain(), view.props, at);
    let (visit, touch) = state.visitors.open.hit(visitor, page.as_str(), &props, at);
    let (source, labels) = if state.breakdowns {
        let mut labels = view.campaign;
        let client = state
            .visitors
            .proxies
            .client_ip(req.peer, super::visitor::forwarded_for(req.headers));
        let user_agent = req.headers.first("user-agent").unwrap_or_default();
        state
            .classifier
            .label(&mut labels, user_agent, view.screen_width, client);
        (view.source.map(Source::into_string), labels)
    } else {
        (None, Labels::default())
    };
    let record = Record {
        page: page.into_string(),
        at,
        source,
        visit: Some(visit),
        labels,
        props,
        revenue: None,
        engagement: None,
    };
    let counted = journal(state, record).await;
    if counted.is_err() {
        state.visitors.open.forget(touch);
    }
    counted.map(|()| {
        if overflowed {
            Counted::Overflowed
        } else {
            Counted::View
        }
    })
}

/// An engagement with the view of `page` (the pixel's `sd`/`et`,
/// Plausible's `engagement`): what it adds to the view, worked out by the
/// open visit (`visits::OpenVisits::engage`), journaled as one record.
/// It makes no page (no page cap: its view was counted, or it counts
/// nothing) and changes nothing of the visit.
async fn engage(
    req: &HitRequest<'_>,
    state: &IngestState,
    page: Page,
    hit: EngagementHit,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<Counted, PixelError> {
    let visitor = state.visitors.id_of(req, at, page.domain());
    let Some(engagement) =
        state
            .visitors
            .open
            .engage(visitor, page.as_str(), hit.depth, hit.engaged_ms, at)
    else {
        return Ok(Counted::NoView);
    };
    // Nothing new (a depth already sent, no time): nothing to journal.
    if !engagement.first && engagement.depth_added == 0 && engagement.engaged_ms == 0 {
        return Ok(Counted::Engagement);
    }
    let page = page.into_string();
    let record = Record {
        engagement: Some(engagement),
        ..Record::view(page.clone(), at)
    };
    let journaled = journal(state, record).await;
    if journaled.is_err() {
        // Not counted: the view's next engagement sends it again.
        state.visitors.open.disengage(visitor, &page, &engagement);
    }
    journaled.map(|()| Counted::Engagement)
}

/// A hit's properties that fit its site's day (`event_cap`): the others
/// are left out, the hit still counts.
fn admitted_props(
    state: &IngestState,
    req: &HitRequest<'_>,
    site: &str,
    mut props: Properties,
    at: chrono::DateTime<chrono::Utc>,
) -> Properties {
    if props.is_empty() {
        return props;
    }
    let client = state.visitors.client_key(req);
    // The pairs the site's goals name are always kept.
    let goals: Vec<String> = state
        .directory
        .by_host(site)
        .map(|s| {
            s.goals
                .iter()
                .filter_map(crate::domain::Goal::property)
                .map(|(k, v)| super::event_cap::EventCap::goal_pair(k, v))
                .collect()
        })
        .unwrap_or_default();
    let goals: Vec<&str> = goals.iter().map(String::as_str).collect();
    props.retain(|k, v| {
        let admitted = state
            .property_cap
            .admit_property(site, (k, v), &goals, &client, at)
            .is_ok();
        if !admitted {
            tracing::debug!("a property over the site's budget left out");
        }
        admitted
    });
    props
}

async fn journal(state: &IngestState, record: Record) -> Result<(), PixelError> {
    let submitted = std::time::Instant::now();
    match state.journal.submit(record) {
        Ok(Accepted::Queued) => Ok(()),
        Ok(Accepted::Pending(synced)) => match synced.await {
            Ok(Ok(())) => {
                state.pacing.record(submitted.elapsed());
                Ok(())
            }
            Ok(Err(AppendError::Full)) => Err(PixelError::JournalFull),
            Ok(Err(AppendError::Io)) => Err(PixelError::StoreFailed),
            Err(_) => Err(PixelError::ShuttingDown),
        },
        Err(SubmitError::QueueFull) => Err(PixelError::QueueFull),
        Err(SubmitError::JournalFull) => Err(PixelError::JournalFull),
        Err(SubmitError::Closed) => Err(PixelError::ShuttingDown),
    }
}

/// Decides whether a request is a view, and of which page. Pure apart from
/// the directory lookup, so every rule is testable without a server.
pub fn classify(
    headers: &dyn Headers,
    query: &str,
    directory: &SiteDirectory,
) -> Result<Page, PixelError> {
    classify_view(headers, HitParams::parse(query), directory).map(|view| view.page)
}

/// A request the pixel counts, and what it says besides its page.
#[derive(Debug)]
pub struct View {
    pub page: Page,
    pub source: Option<Source>,
    /// `utm_medium` and `utm_campaign` of the page address, when valid.
    pub campaign: Labels,
    /// `w`, the screen width tt.js sends.
    pub screen_width: Option<u32>,
    /// `e`: the hit is this custom event, not a view.
    pub event: Option<EventName>,
    /// `props`: its custom properties.
    pub props: Properties,
    /// `revenue`: an event's revenue (a view's is not kept).
    pub revenue: Option<Revenue>,
}

/// [`classify`], plus the view's source when it can be known: with `ref`
/// (sent by tt.js, even empty) or a `utm_source` in the page URL. A pixel
/// alone cannot know the referrer of the page it is on: `None`. The source
/// never decides whether the view counts (bad `ref` is ignored).
pub fn classify_view(
    headers: &dyn Headers,
    params: HitParams,
    directory: &SiteDirectory,
) -> Result<View, PixelError> {
    let header_str = |name: &str| headers.first(name);
    // Refuse bots and prefetches before looking anything up, so they learn
    // nothing about which sites exist.
    if bots::is_bot(header_str("user-agent")) {
        return Err(PixelError::Bot);
    }
    if bots::is_prefetch(|name| header_str(name).map(str::to_owned)) {
        return Err(PixelError::Prefetch);
    }
    // A bad event name is refused before any lookup, like a bad page.
    let event = params
        .event
        .map(|raw| EventName::parse(&raw?))
        .transpose()?;
    let props = params.props.transpose()?.unwrap_or_default();
    let revenue = params.revenue.transpose()?;
    // A Referer is always an absolute URL; anything else is unusable.
    let referer = header_str("referer").map(|r| match PageRef::parse(r) {
        Ok(PageRef::Url { host, path }) => Ok((host, path)),
        Ok(PageRef::Path(_)) => Err(PageError::NotAPathOrUrl),
        Err(e) => Err(e),
    });
    // A site named by its id is found (or refused) first, as it always
    // was: its id tells nothing about other sites.
    let by_id = match params.site {
        Some(raw) => {
            let raw = raw.map_err(|_| PixelError::InvalidSite)?;
            let id = SiteId::parse(&raw).map_err(|_| PixelError::InvalidSite)?;
            Some(directory.by_id(&id).ok_or(PixelError::UnknownSite)?)
        }
        None => None,
    };
    let referer_host = match (&by_id, &referer) {
        (None, Some(Ok((host, _)))) => Some(host.clone()),
        (None, _) => return Err(PixelError::NoSite),
        (Some(_), _) => None,
    };
    // Without an id, the page is read before the Referer's host is looked
    // up, so that a bad page gets the same answer whether or not that host
    // is tracked.
    let (page, address) = match params.page {
        Some(raw) => {
            let raw = raw?;
            (PageRef::parse(&raw)?, raw)
        }
        None => match &referer {
            Some(Ok((host, path))) => (
                PageRef::Url {
                    host: host.clone(),
                    path: path.clone(),
                },
                header_str("referer").unwrap_or_default().to_owned(),
            ),
            Some(Err(e)) => return Err((*e).into()),
            None => return Err(PixelError::NoPage),
        },
    };
    // Found by its id, a site may refuse a host plainly (the id is known
    // to its owners anyway); found by the Referer alone, every miss is
    // answered like a count (`NotTracked`).
    let (site, by_referer) = match (by_id, referer_host) {
        (Some(site), _) => (site, false),
        (None, Some(host)) => (
            directory.by_host(&host).ok_or(PixelError::NotTracked)?,
            true,
        ),
        (None, None) => return Err(PixelError::NoSite),
    };
    let path = match page {
        PageRef::Path(path) => path,
        PageRef::Url { host, path } if site.owns_host(&host) => path,
        PageRef::Url { .. } if by_referer => return Err(PixelError::NotTracked),
        PageRef::Url { .. } => return Err(PixelError::ForeignHost),
    };
    let utm = |key| utm_value(&address, key);
    let mut campaign = Labels::default();
    for (key, dimension) in [
        ("utm_medium", Dimension::Medium),
        ("utm_campaign", Dimension::Campaign),
    ] {
        // The same rules as `utm_source` (`Source::from_utm`).
        if let Some(value) = utm(key).as_deref().and_then(Source::from_utm) {
            campaign.set(dimension, value.into_string());
        }
    }
    let source = match (
        utm("utm_source").as_deref().and_then(Source::from_utm),
        params.referrer,
    ) {
        (Some(campaign), _) => Some(campaign),
        (None, Some(referrer)) => Some(
            referrer
                .ok()
                .and_then(|r| Source::from_referrer(&r, |h| site.owns_host(h)))
                .unwrap_or_else(Source::direct),
        ),
        (None, None) => None,
    };
    Ok(View {
        page: Page::new(&site.domain, &path),
        source,
        campaign,
        screen_width: params.screen_width,
        revenue: revenue.filter(|_| event.is_some()),
        event,
        props,
    })
}

/// The first `key` (`utm_source`, `utm_medium`, `utm_campaign`) of a page
/// URL's query string, percent-decoded (invalid UTF-8: none). The rest of
/// the query is never looked at.
pub fn utm_value(page: &str, wanted: &str) -> Option<String> {
    let without_fragment = page.split('#').next()?;
    let (_, query) = without_fragment.split_once('?')?;
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == wanted).then(|| decode(value).ok()).flatten()
    })
}

#[cfg(test)]
fn utm_source(page: &str) -> Option<String> {
    utm_value(page, "utm_source")
}

/// What a hit says, as sent: the pixel's parameters, or what a peer's
/// tracker sent mapped onto them (`compat`). Nothing here is trusted yet:
/// [`classify_view`] applies every rule.
#[derive(Debug, Default, PartialEq)]
pub struct HitParams {
    /// `Err` when the value is not valid UTF-8 once percent-decoded.
    pub site: Option<Result<String, PageError>>,
    /// A path or an absolute URL; `Err` as for `site`.
    pub page: Option<Result<String, PageError>>,
    /// `ref`, the referrer tt.js sends: present even when empty (no
    /// referrer: a direct visit); `Err` when it cannot be decoded.
    pub referrer: Option<Result<String, PageError>>,
    /// `w`: the screen width; ignored unless a plain number in range.
    pub screen_width: Option<u32>,
    /// `e`: a custom event's name, decoded.
    pub event: Option<Result<String, EventNameError>>,
    /// `props`: a JSON object of custom properties, or a peer's
    /// properties, parsed by its rules.
    pub props: Option<Result<Properties, PropertyError>>,
    /// `revenue`: a JSON object of an amount and a currency.
    pub revenue: Option<Result<Revenue, RevenueError>>,
    /// `sd` and `et`: the hit is an engagement with the view of its page
    /// (its greatest scroll depth, its engaged milliseconds since the last).
    pub engagement: Option<Result<EngagementHit, EngagementError>>,
}

impl HitParams {
    /// The pixel's query string. The first occurrence of each parameter
    /// wins; empty values count as absent; other parameters (cache
    /// busters) are ignored.
    pub fn parse(query: &str) -> Self {
        let mut params = HitParams::default();
        let (mut depth, mut engaged_ms): (Option<String>, Option<String>) = (None, None);
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key == "ref" && params.referrer.is_none() {
                params.referrer = Some(decode(value));
                continue;
            }
            if value.is_empty() {
                continue;
            }
            match key {
                "site" if params.site.is_none() => params.site = Some(decode(value)),
                "page" if params.page.is_none() => params.page = Some(decode(value)),
                "w" if params.screen_width.is_none() => {
                    params.screen_width = crate::classify::parse_screen_width(value);
                }
                "e" if params.event.is_none() => {
                    params.event = Some(decode(value).map_err(|_| EventNameError::BadCharacter));
                }
                "revenue" if params.revenue.is_none() => {
                    params.revenue = Some(
                        decode(value)
                            .map_err(|_| RevenueError::NotAnObject)
                            .and_then(|raw| Revenue::parse_query(&raw)),
                    );
                }
                "sd" if depth.is_none() => depth = Some(decode(value).unwrap_or_default()),
                "et" if engaged_ms.is_none() => {
                    engaged_ms = Some(decode(value).unwrap_or_default());
                }
                "props" if params.props.is_none() => {
                    params.props = Some(
                        decode(value)
                            .map_err(|_| PropertyError::NotAnObject)
                            .and_then(|raw| Properties::parse_query(&raw)),
                    );
                }
                _ => {}
            }
        }
        if depth.is_some() || engaged_ms.is_some() {
            params.engagement = Some(EngagementHit::parse(
                depth.as_deref(),
                engaged_ms.as_deref(),
            ));
        }
        params
    }
}

/// `application/x-www-form-urlencoded` decoding that, unlike the lossy
/// decoders, reports invalid UTF-8 instead of replacing it.
pub fn decode(value: &str) -> Result<String, PageError> {
    let plus_as_space = value.replace('+', " ");
    percent_decode(plus_as_space.as_bytes())
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| PageError::InvalidUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_take_the_first_non_empty_value_and_decode_once() {
        let p = HitParams::parse("page=&site=abc&page=%2Fa%2Bb+c&site=zzz&v=1");
        assert_eq!(p.site, Some(Ok("abc".to_owned())));
        assert_eq!(p.page, Some(Ok("/a+b c".to_owned())));
    }

    #[test]
    fn ref_counts_even_empty_and_utm_source_is_read_from_the_page() {
        let p = HitParams::parse("site=a&page=%2Fx&ref=");
        assert_eq!(p.referrer, Some(Ok(String::new())));
        let p = HitParams::parse("site=a&page=%2Fx");
        assert_eq!(p.referrer, None);
        let p = HitParams::parse("ref=https%3A%2F%2Fgoogle.com%2F&ref=x");
        assert_eq!(p.referrer, Some(Ok("https://google.com/".into())));
        assert_eq!(
            utm_source("/a?x=1&utm_source=News%20Letter&utm_source=b#f"),
            Some("News Letter".into())
        );
        assert_eq!(utm_source("/a#?utm_source=x"), None);
        assert_eq!(utm_source("/a?utm_sourcex=1"), None);
        assert_eq!(utm_source("/a?utm_source=%FF"), None);
    }

    #[test]
    fn props_are_a_json_object_in_the_query() {
        let p = HitParams::parse("props=%7B%22plan%22%3A%22pro%22%7D&props=x");
        let props = p.props.unwrap().unwrap();
        assert_eq!(props.get("plan"), Some("pro"));
        assert_eq!(
            HitParams::parse("props=plan").props,
            Some(Err(PropertyError::NotAnObject))
        );
        assert_eq!(
            HitParams::parse("props=%FF").props,
            Some(Err(PropertyError::NotAnObject))
        );
        assert_eq!(HitParams::parse("props=").props, None);
    }

    #[test]
    fn params_report_invalid_utf8() {
        let p = HitParams::parse("page=%2F%FF");
        assert_eq!(p.page, Some(Err(PageError::InvalidUtf8)));
        assert_eq!(
            HitParams::parse("site=%FF").site,
            Some(Err(PageError::InvalidUtf8))
        );
    }

    #[test]
    fn every_outcome_has_a_distinct_reason() {
        let mut reasons: Vec<_> = Outcome::ALL.iter().map(|o| o.reason()).collect();
        reasons.sort();
        reasons.dedup();
        assert_eq!(reasons.len(), Outcome::COUNT);
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
    }
}
