//! What the pixel learns of a view from its request, beside its page: the
//! browser, system and device class from the User-Agent (and the screen
//! width tt.js sends), and the country from the client address. Both are
//! classified here and dropped: only the names reach the journal
//! (`classify` has the rules and the databases).

use std::net::IpAddr;
use std::path::PathBuf;

use crate::classify::{Country, CountryDb, CountryDbState, UserAgentClassifier};
use crate::domain::{Dimension, Labels};

pub struct Classifier {
    user_agents: UserAgentClassifier,
    countries: CountryDbState,
}

impl Classifier {
    /// The User-Agent rules, and the country database at `geoip` (the
    /// installed one by default). A database that cannot be read is logged
    /// and leaves every country "unknown"; the pixel counts on.
    pub fn load(geoip: Option<PathBuf>) -> Self {
        let path = geoip.unwrap_or_else(crate::classify::country::default_db_path);
        // Logs why, when it cannot be read.
        let countries = CountryDbState::load(&path);
        Self {
            user_agents: UserAgentClassifier::new(),
            countries,
        }
    }

    /// Adds the browser, OS, device class and country of a view to
    /// `labels`.
    pub fn label(
        &self,
        labels: &mut Labels,
        user_agent: &str,
        screen_width: Option<u32>,
        client: Option<IpAddr>,
    ) {
        let device = self.user_agents.classify(user_agent, screen_width);
        labels.set(Dimension::Browser, device.browser);
        labels.set(Dimension::Os, device.os);
        labels.set(Dimension::Device, device.class.as_str());
        let country = client.map_or(Country::UNKNOWN, |ip| self.countries.lookup(ip));
        labels.set(Dimension::Country, country.as_str());
    }

    /// The country database in use, or why there is none (the admin system
    /// page shows it).
    pub fn countries(&self) -> &CountryDbState {
        &self.countries
    }

    /// The loaded database, if any.
    pub fn country_db(&self) -> Option<&CountryDb> {
        match &self.countries {
            CountryDbState::Loaded(db) => Some(db),
            CountryDbState::Missing { .. } => None,
        }
    }
}
