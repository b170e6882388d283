//! One visit as the filtered reports and funnels read it: its visit-level
//! dimensions, its pages and events in order, its visitor's sketch
//! register (never the visitor), its views and duration. Read from the
//! visit documents or from the day packs (`storage::visit_packs`), which
//! give the same values; `reports::filtered` computes over them.
//!
//! Names are `Arc<str>`: a pack holds each name once per chunk, and its
//! visits share them rather than each allocating its own copy.

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Dimension, Revenue};

/// One step of a visit, at its offset in seconds from the visit's start.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    View { offset: u32, path: Arc<str> },
    Event { offset: u32, name: Arc<str> },
}

impl Step {
    pub fn offset(&self) -> u32 {
        match self {
            Step::View { offset, .. } | Step::Event { offset, .. } => *offset,
        }
    }

    /// The page of a view; `None` for an event.
    pub fn path(&self) -> Option<&str> {
        match self {
            Step::View { path, .. } => Some(path),
            Step::Event { .. } => None,
        }
    }

    /// The name of an event; `None` for a view.
    pub fn event(&self) -> Option<&str> {
        match self {
            Step::Event { name, .. } => Some(name),
            Step::View { .. } => None,
        }
    }
}

/// What the read side needs of one stored visit.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct VisitRecord {
    pub start: DateTime<Utc>,
    /// Its visit-level dimensions (source, medium, campaign, browser, os,
    /// device, country), where known.
    pub labels: BTreeMap<Dimension, Arc<str>>,
    /// In the order they happened ([`VisitRecord::new`] takes them so: hits
    /// of one visit may be written by different lanes).
    pub steps: Vec<Step>,
    /// The visitor's register in the visitors sketch, never the visitor.
    pub register: Option<(u16, u8)>,
    /// Its views and duration as stored: they count every view, also past
    /// the steps a visit keeps.
    pub views: i64,
    pub duration: i64,
    /// The custom properties of its steps: `(index in steps, key, value)`,
    /// in the order of the steps, each step's sorted by key.
    pub props: Vec<(u32, Arc<str>, Arc<str>)>,
    /// The revenue its events carried: `(index in steps, revenue)`, in
    /// the order of the steps.
    pub revenue: Vec<(u32, Revenue)>,
}

impl VisitRecord {
    /// A visit of these steps (in the order they happened), its views
    /// and duration counted from them.
    pub fn new(
        start: DateTime<Utc>,
        labels: BTreeMap<Dimension, Arc<str>>,
        steps: Vec<Step>,
        register: Option<(u16, u8)>,
    ) -> Self {
        let views = steps.iter().filter(|s| s.path().is_some()).count() as i64;
        let duration = steps
            .iter()
            .filter(|s| s.path().is_some())
            .map(|s| i64::from(s.offset()))
            .max()
            .unwrap_or(0);
        VisitRecord {
            start,
            labels,
            steps,
            register,
            views,
            duration,
            props: Vec::new(),
            revenue: Vec::new(),
        }
    }

    /// The same visit, its events carrying this revenue.
    pub fn with_revenue(mut self, revenue: Vec<(u32, Revenue)>) -> Self {
        self.revenue = revenue;
        self
    }

    /// The revenue of the step at `index`, if it carried any.
    pub fn revenue_at(&self, index: usize) -> Option<Revenue> {
        self.revenue
            .iter()
            .find(|(i, _)| *i as usize == index)
            .map(|(_, r)| *r)
    }

    /// The same visit, its steps carrying these properties.
    pub fn with_props(mut self, props: Vec<(u32, Arc<str>, Arc<str>)>) -> Self {
        self.props = props;
        self
    }

    /// The steps that carry `key` with a value `matches` takes, as
    /// `(step, value)`.
    pub fn property<'a>(&'a self, key: &'a str) -> impl Iterator<Item = (&'a Step, &'a str)> + 'a {
        self.props.iter().filter_map(move |(i, k, v)| {
            (&**k == key)
                .then(|| self.steps.get(*i as usize).map(|s| (s, &**v)))
                .flatten()
        })
    }

    /// Every property key its steps carry (with repeats).
    pub fn property_keys(&self) -> impl Iterator<Item = &str> {
        self.props.iter().map(|(_, k, _)| &**k)
    }

    pub fn views(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().filter_map(Step::path)
    }

    pub fn entry(&self) -> Option<&str> {
        self.views().next()
    }

    pub fn exit(&self) -> Option<&str> {
        self.views().last()
    }

    /// A visit of one view (events do not undo a bounce, as in the
    /// unfiltered figures).
    pub fn bounced(&self) -> bool {
        self.views == 1
    }
}
