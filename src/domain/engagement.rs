//! What a tracker says of a view it engaged with: the view's greatest
//! scroll depth so far and the engaged time since its last engagement,
//! read by Plausible's rules whoever sent them (its tracker's `sd` and
//! `e`, `tt.js`'s `sd` and `et`), so a peer's tracker gets Plausible's
//! answer and nothing out of range is kept.

/// Plausible's bound on one engagement's time: anything from 30 days on
/// is an old tracker's mistake and read as no time.
const TOO_LONG_MS: i64 = 30 * 24 * 3_600 * 1_000;

/// An engagement as sent: at least one of the two was readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngagementHit {
    /// The view's greatest scroll depth so far, in percent: more than 100
    /// reads as 100; `None` when not said (or not an integer from 0).
    pub depth: Option<u8>,
    /// Engaged milliseconds since the view's last engagement; 0 when not
    /// said (or not an integer from 0 under 30 days).
    pub engaged_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EngagementError {
    #[error("an engagement needs an integer scroll depth (sd) or engaged time")]
    Blank,
}

impl EngagementHit {
    /// Reads the two values as their text (a query's, or a JSON number or
    /// string): integers only, `+` allowed, as Plausible reads them; an
    /// engagement with neither is refused, as Plausible refuses it.
    pub fn parse(depth: Option<&str>, engaged_ms: Option<&str>) -> Result<Self, EngagementError> {
        let int = |s: Option<&str>| s.and_then(|s| s.parse::<i64>().ok());
        let depth = int(depth).filter(|d| *d >= 0).map(|d| d.min(100) as u8);
        let engaged_ms = int(engaged_ms)
            .filter(|ms| (0..TOO_LONG_MS).contains(ms))
            .map(|ms| ms as u64);
        if depth.is_none() && engaged_ms.is_none() {
            return Err(EngagementError::Blank);
        }
        Ok(EngagementHit {
            depth,
            engaged_ms: engaged_ms.unwrap_or(0),
        })
    }

    /// [`Self::parse`] of two JSON values (Plausible's body): an integer
    /// number or a string; anything else is not said.
    pub fn parse_json(
        depth: &serde_json::Value,
        engaged_ms: &serde_json::Value,
    ) -> Result<Self, EngagementError> {
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
            _ => None,
        };
        Self::parse(text(depth).as_deref(), text(engaged_ms).as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hit(
        sd: serde_json::Value,
        e: serde_json::Value,
    ) -> Result<(Option<u8>, u64), EngagementError> {
        EngagementHit::parse_json(&sd, &e).map(|h| (h.depth, h.engaged_ms))
    }

    #[test]
    fn values_are_read_by_plausibles_rules() {
        assert_eq!(hit(json!(40), json!(1200)), Ok((Some(40), 1200)));
        assert_eq!(hit(json!("40"), json!("+1200")), Ok((Some(40), 1200)));
        // Past 100 is 100; below 0, a fraction, a word: not said.
        assert_eq!(hit(json!(250), json!(null)), Ok((Some(100), 0)));
        assert_eq!(hit(json!(-1), json!(5)), Ok((None, 5)));
        assert_eq!(hit(json!(40.5), json!(5)), Ok((None, 5)));
        assert_eq!(hit(json!("4x"), json!(5)), Ok((None, 5)));
        assert_eq!(hit(json!(true), json!(5)), Ok((None, 5)));
        // Time: from 0 and under 30 days, else none.
        assert_eq!(hit(json!(0), json!(-5)), Ok((Some(0), 0)));
        assert_eq!(hit(json!(0), json!(TOO_LONG_MS)), Ok((Some(0), 0)));
        assert_eq!(
            hit(json!(0), json!(TOO_LONG_MS - 1)).unwrap().1,
            (TOO_LONG_MS - 1) as u64
        );
        assert_eq!(hit(json!(0), json!(1e300)), Ok((Some(0), 0)));
        assert_eq!(
            hit(json!(0), json!("99999999999999999999999")),
            Ok((Some(0), 0))
        );
        // Neither: refused.
        assert_eq!(hit(json!(null), json!(null)), Err(EngagementError::Blank));
        assert_eq!(hit(json!(-3), json!(-3)), Err(EngagementError::Blank));
        assert_eq!(
            EngagementHit::parse(None, Some("12")).map(|h| h.engaged_ms),
            Ok(12)
        );
    }
}
