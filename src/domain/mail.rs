//! What an email subscription names: the address a report goes to, and
//! which reports it receives.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Most characters of an address (RFC 5321's path limit less the brackets).
pub const MAX_RECIPIENT_CHARS: usize = 254;

/// The address a report or an alert is sent to: `local@domain`, trimmed and
/// lower-cased (one subscription per person and schedule, whatever the
/// case typed). Narrower than RFC 5322 on purpose: a dot-atom local part of
/// letters, digits and `_ % + -`, and a domain of at least two DNS labels,
/// so every address the API accepts is one SMTP servers take as it is, and
/// the API document can state the rule as one pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Recipient(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecipientError {
    #[error("an address is 3 to {MAX_RECIPIENT_CHARS} characters")]
    Length,
    #[error("an address looks like name@example.com: letters, digits, dots and _ % + - before the @, a domain name after it")]
    Shape,
}

/// The same rule as [`Recipient::parse`], as the API document's `pattern`.
pub const RECIPIENT_PATTERN: &str = r"^[A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+)*@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$";

impl Recipient {
    pub fn parse(raw: &str) -> Result<Self, RecipientError> {
        let address = raw.trim().to_ascii_lowercase();
        if !(3..=MAX_RECIPIENT_CHARS).contains(&address.chars().count()) {
            return Err(RecipientError::Length);
        }
        let (local, domain) = address.split_once('@').ok_or(RecipientError::Shape)?;
        let atom = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_%+-".contains(&b))
        };
        let label = |s: &str| {
            (1..=63).contains(&s.len())
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        let labels: Vec<&str> = domain.split('.').collect();
        if !local.split('.').all(atom) || labels.len() < 2 || !labels.iter().all(|l| label(l)) {
            return Err(RecipientError::Shape);
        }
        Ok(Self(address))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Recipient {
    type Error = RecipientError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<Recipient> for String {
    fn from(value: Recipient) -> Self {
        value.0
    }
}

/// Which emails a subscription receives: a report at the start of each
/// local day, week (Monday) or month of the site's zone, or the site's
/// traffic alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Daily,
    Weekly,
    Monthly,
    Alerts,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the schedule is one of daily, weekly, monthly or alerts")]
pub struct ScheduleError;

impl Schedule {
    pub const ALL: [Schedule; 4] = [
        Schedule::Daily,
        Schedule::Weekly,
        Schedule::Monthly,
        Schedule::Alerts,
    ];

    pub fn parse(raw: &str) -> Result<Self, ScheduleError> {
        Self::ALL
            .into_iter()
            .find(|s| s.key() == raw)
            .ok_or(ScheduleError)
    }

    pub fn key(self) -> &'static str {
        match self {
            Schedule::Daily => "daily",
            Schedule::Weekly => "weekly",
            Schedule::Monthly => "monthly",
            Schedule::Alerts => "alerts",
        }
    }

    /// How the settings page names it.
    pub fn label(self) -> &'static str {
        match self {
            Schedule::Daily => "Daily report",
            Schedule::Weekly => "Weekly report (Mondays)",
            Schedule::Monthly => "Monthly report",
            Schedule::Alerts => "Traffic alerts",
        }
    }

    /// Whether it is a periodic report (not the alerts).
    pub fn is_report(self) -> bool {
        self != Schedule::Alerts
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// A site's traffic alert rules; each may be off (`None`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertRules {
    /// A spike: more views than this in the last hour.
    pub spike_views: Option<u32>,
    /// A spike: more than this many times the views of the same hour on
    /// an ordinary day (the average of the same hour over the 7 days
    /// before), when that hour has any.
    pub spike_factor: Option<f64>,
    /// A drop: no view for this many hours on a site that usually has
    /// some in such a stretch.
    pub drop_hours: Option<u32>,
}

pub const MAX_SPIKE_VIEWS: u32 = 100_000_000;
pub const SPIKE_FACTORS: std::ops::RangeInclusive<f64> = 1.5..=1000.0;
pub const MAX_DROP_HOURS: u32 = 168;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AlertRulesError {
    #[error("the views are a whole number from 1 to {MAX_SPIKE_VIEWS}, or empty for none")]
    SpikeViews,
    #[error("the factor is a number from 1.5 to 1000 (e.g. 3 or 2.5), or empty for none")]
    SpikeFactor,
    #[error("the hours are a whole number from 1 to {MAX_DROP_HOURS}, or empty for none")]
    DropHours,
}

impl AlertRulesError {
    /// The form field (and API property) it is about.
    pub fn field(&self) -> &'static str {
        match self {
            AlertRulesError::SpikeViews => "spikeViews",
            AlertRulesError::SpikeFactor => "spikeFactor",
            AlertRulesError::DropHours => "dropHours",
        }
    }
}

impl AlertRules {
    /// The rules as typed in a form: each field a number or empty.
    pub fn parse(
        spike_views: &str,
        spike_factor: &str,
        drop_hours: &str,
    ) -> Result<Self, AlertRulesError> {
        let whole = |raw: &str, max: u32, e: AlertRulesError| match raw.trim() {
            "" => Ok(None),
            t => t
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .map(Some)
                .ok_or(e),
        };
        let factor = match spike_factor.trim() {
            "" => None,
            t => Some(
                t.parse::<f64>()
                    .ok()
                    .filter(|f| SPIKE_FACTORS.contains(f))
                    .ok_or(AlertRulesError::SpikeFactor)?,
            ),
        };
        Ok(AlertRules {
            spike_views: whole(spike_views, MAX_SPIKE_VIEWS, AlertRulesError::SpikeViews)?,
            spike_factor: factor,
            drop_hours: whole(drop_hours, MAX_DROP_HOURS, AlertRulesError::DropHours)?,
        })
    }

    pub fn any(&self) -> bool {
        self.spike_views.is_some() || self.spike_factor.is_some() || self.drop_hours.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_lower_cases() {
        assert_eq!(
            Recipient::parse(" Ada.Lovelace+news@Mail.Example.COM ")
                .unwrap()
                .as_str(),
            "ada.lovelace+news@mail.example.com"
        );
    }

    #[test]
    fn refuses_wrong_lengths() {
        assert_eq!(Recipient::parse("a@"), Err(RecipientError::Length));
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(Recipient::parse(&long), Err(RecipientError::Length));
    }

    #[test]
    fn refuses_what_is_not_local_at_domain() {
        for bad in [
            "no-at-sign.example.com",
            "two@at@example.com",
            "@example.com",
            "ada@localhost",
            ".ada@example.com",
            "ada.@example.com",
            "a..da@example.com",
            "ada@-example.com",
            "ada@example-.com",
            "ada@example..com",
            "ada lovelace@example.com",
            "ada\"@example.com",
            "ada@exa_mple.com",
            "adä@example.com",
            &format!("ada@{}.com", "x".repeat(64)),
        ] {
            assert_eq!(Recipient::parse(bad), Err(RecipientError::Shape), "{bad}");
        }
    }

    #[test]
    fn schedules_parse_by_key_only() {
        for s in Schedule::ALL {
            assert_eq!(Schedule::parse(s.key()), Ok(s));
        }
        assert_eq!(Schedule::parse("Weekly"), Err(ScheduleError));
        assert_eq!(Schedule::parse("yearly"), Err(ScheduleError));
        assert!(!Schedule::Alerts.is_report());
    }
    #[test]
    fn alert_rules_take_numbers_or_nothing() {
        assert_eq!(
            AlertRules::parse("", "", "").unwrap(),
            AlertRules::default()
        );
        assert!(!AlertRules::default().any());
        let r = AlertRules::parse(" 500 ", "2.5", "6").unwrap();
        assert_eq!(
            r,
            AlertRules {
                spike_views: Some(500),
                spike_factor: Some(2.5),
                drop_hours: Some(6)
            }
        );
        assert!(r.any());
    }

    #[test]
    fn alert_rules_refuse_each_field_out_of_range() {
        for views in ["0", "-1", "1.5", "x", "100000001"] {
            assert_eq!(
                AlertRules::parse(views, "", ""),
                Err(AlertRulesError::SpikeViews),
                "{views}"
            );
        }
        for factor in ["1", "1.4", "1001", "NaN", "inf", "two"] {
            assert_eq!(
                AlertRules::parse("", factor, ""),
                Err(AlertRulesError::SpikeFactor),
                "{factor}"
            );
        }
        for hours in ["0", "169", "2.5"] {
            assert_eq!(
                AlertRules::parse("", "", hours),
                Err(AlertRulesError::DropHours),
                "{hours}"
            );
        }
        assert_eq!(AlertRulesError::DropHours.field(), "dropHours");
    }
}
