//! Custom properties of a view or an event: `author: Jane`, `plan: pro`.
//!
//! Facts about a page or an event, never about a person (docs/privacy.md):
//! a key or value that looks like an email address (also once
//! percent-decoded, as in a link's query) is not kept. Built only by the
//! parsers here, which hold every hit to Plausible's limits (in bytes, as
//! Plausible counts them) and one more of ours, on the bytes a hit's
//! properties take in all (past it, the later properties are left out),
//! so a journal record and a visit's steps stay bounded. A key holding a
//! colon is left out too: `prop:<key>:<value>` could never name it.

use std::fmt;

/// Most properties one hit keeps (Plausible's limit: the first 30).
pub const MAX_PROPERTIES: usize = 30;
/// Longest key, in bytes (Plausible's).
pub const MAX_KEY_BYTES: usize = 300;
/// Longest value, in bytes (Plausible's).
pub const MAX_VALUE_BYTES: usize = 2_000;
/// Most bytes of one hit's keys and values together: tighter than the
/// peers (30 × 2,300 bytes), so a hit is at most a few KiB in the journal
/// and in its visit's steps.
pub const MAX_TOTAL_BYTES: usize = 4_096;
/// Most levels of a nested object flattened into dotted keys (Umami's
/// `data`); deeper ones are left out.
const MAX_DEPTH: usize = 4;

/// A hit's properties: at most [`MAX_PROPERTIES`] distinct keys, each
/// with one value, sorted by key. Keys and values are non-blank text
/// within their bounds, with no control character.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Properties(Vec<(String, String)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PropertyError {
    #[error("properties are a JSON object of keys to text, numbers or booleans")]
    NotAnObject,
    #[error("property keys have at most {MAX_KEY_BYTES} bytes and values {MAX_VALUE_BYTES} bytes")]
    TooLong,
}

/// How a tracker's own rules treat what does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// Plausible's: a key or value past its bound refuses the hit (400);
    /// nested objects, lists, nulls and blank values are dropped; the
    /// first 30 are kept.
    Strict,
    /// Umami's `data`: nested objects become dotted keys (`user.plan`);
    /// lists, nulls and any property past a bound are dropped, the hit is
    /// counted.
    Lenient,
}

impl Properties {
    /// No property.
    pub const EMPTY: Properties = Properties(Vec::new());

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_str())
    }

    /// Bytes of its keys and values.
    pub fn bytes(&self) -> usize {
        self.0.iter().map(|(k, v)| k.len() + v.len()).sum()
    }

    /// Only the properties `keep` admits (the site's budget).
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        self.0.retain(|(k, v)| keep(k, v));
    }

    /// A JSON value as a tracker sends it: an object, or a string holding
    /// one (Plausible's script has sent both). `null` or an absent field
    /// is no property.
    pub fn parse_json(value: &serde_json::Value, rules: Rules) -> Result<Self, PropertyError> {
        let object = match value {
            serde_json::Value::Null => return Ok(Properties::default()),
            serde_json::Value::Object(o) => std::borrow::Cow::Borrowed(o),
            serde_json::Value::String(s) if rules == Rules::Strict => {
                match serde_json::from_str::<serde_json::Value>(s) {
                    Ok(serde_json::Value::Object(o)) => std::borrow::Cow::Owned(o),
                    _ => return Err(PropertyError::NotAnObject),
                }
            }
            _ if rules == Rules::Lenient => return Ok(Properties::default()),
            _ => return Err(PropertyError::NotAnObject),
        };
        let mut pairs = Vec::new();
        flatten(&object, "", 0, rules, &mut pairs);
        Self::of(pairs, rules)
    }

    /// The pixel's `props` parameter: a JSON object, percent-decoded
    /// already, held to Plausible's rules.
    pub fn parse_query(raw: &str) -> Result<Self, PropertyError> {
        let value: serde_json::Value =
            serde_json::from_str(raw).map_err(|_| PropertyError::NotAnObject)?;
        if !value.is_object() {
            return Err(PropertyError::NotAnObject);
        }
        Self::parse_json(&value, Rules::Strict)
    }

    /// Pairs already taken apart (a journal record, an import row), held
    /// to the same rules as a tracker's.
    pub fn of(pairs: Vec<(String, String)>, rules: Rules) -> Result<Self, PropertyError> {
        let mut kept: Vec<(String, String)> = Vec::new();
        for (k, v) in pairs {
            if kept.len() == MAX_PROPERTIES {
                break;
            }
            if blank(&k) || blank(&v) || has_control(&k) || has_control(&v) || k.contains(':') {
                continue;
            }
            if k.len() > MAX_KEY_BYTES || v.len() > MAX_VALUE_BYTES {
                match rules {
                    Rules::Strict => return Err(PropertyError::TooLong),
                    Rules::Lenient => continue,
                }
            }
            if looks_like_email(&k) || looks_like_email(&v) {
                continue;
            }
            if kept.iter().any(|(seen, _)| *seen == k) {
                continue;
            }
            kept.push((k, v));
        }
        // Past the bytes of a hit, the later properties are left out and
        // the hit counts: Plausible takes them all, so refusing the hit
        // would lose a view it counts.
        let mut used = 0;
        kept.retain(|(k, v)| {
            used += k.len() + v.len();
            used <= MAX_TOTAL_BYTES
        });
        kept.sort();
        Ok(Properties(kept))
    }

    /// Decoded from a journal record: held to its shape only (count,
    /// bounds, keys sorted and distinct), never to the content rules,
    /// which a later build may tighten without making an older record
    /// read as damage. Anything else is damage.
    pub fn from_journal(pairs: Vec<(String, String)>) -> Option<Self> {
        let bounded = |(k, v): &(String, String)| {
            !k.is_empty() && !v.is_empty() && k.len() <= MAX_KEY_BYTES && v.len() <= MAX_VALUE_BYTES
        };
        let shaped = pairs.len() <= MAX_PROPERTIES
            && pairs.iter().all(bounded)
            && pairs.windows(2).all(|w| w[0].0 < w[1].0)
            && pairs.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() <= MAX_TOTAL_BYTES;
        shaped.then_some(Properties(pairs))
    }
}

impl fmt::Display for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k}: {v}")?;
        }
        Ok(())
    }
}

fn flatten(
    object: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    depth: usize,
    rules: Rules,
    out: &mut Vec<(String, String)>,
) {
    for (k, v) in object {
        // Bounded before building a key, so a body of a million keys costs
        // no more than the first few.
        if out.len() > MAX_PROPERTIES * 4 {
            return;
        }
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            serde_json::Value::String(s) => out.push((key, s.clone())),
            serde_json::Value::Number(n) => out.push((key, n.to_string())),
            serde_json::Value::Bool(b) => out.push((key, b.to_string())),
            serde_json::Value::Object(inner) if rules == Rules::Lenient && depth < MAX_DEPTH => {
                flatten(inner, &key, depth + 1, rules, out)
            }
            _ => {}
        }
    }
}

/// The property that says what one of Plausible's script extensions'
/// events was about: the link's or the file's `url` of an outbound link
/// or a download, the missing page's `path` of a 404.
pub fn extension_key(event: &str) -> Option<&'static str> {
    match event {
        "Outbound Link: Click" | "Cloaked Link: Click" | "File Download" => Some("url"),
        "404" => Some("path"),
        _ => None,
    }
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// Whether a value looks like an email address (`x@y.z`, with nothing
/// around it but spaces or, in a link's query, `=`, `&`, `?` and `/`), as
/// sent or percent-decoded: a fact about a person, never kept.
pub fn looks_like_email(value: &str) -> bool {
    let decoded = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
    has_email(value) || has_email(&decoded)
}

fn has_email(value: &str) -> bool {
    value
        .split(|c: char| c.is_whitespace() || matches!(c, '=' | '&' | '?' | '/'))
        .any(|word| {
            let word = word.trim_matches(|c: char| matches!(c, '<' | '>' | '"' | '\'' | ',' | ';'));
            let Some((local, domain)) = word.rsplit_once('@') else {
                return false;
            };
            !local.is_empty()
                && domain
                    .split_once('.')
                    .is_some_and(|(host, tld)| !host.is_empty() && !tld.is_empty())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strict(v: serde_json::Value) -> Result<Properties, PropertyError> {
        Properties::parse_json(&v, Rules::Strict)
    }

    fn pairs(p: &Properties) -> Vec<(&str, &str)> {
        p.iter().collect()
    }

    #[test]
    fn scalars_are_kept_as_text_sorted_by_key() {
        let p = strict(json!({"plan": "pro", "logged_in": true, "n": 3, "price": 9.5})).unwrap();
        assert_eq!(
            pairs(&p),
            [
                ("logged_in", "true"),
                ("n", "3"),
                ("plan", "pro"),
                ("price", "9.5")
            ]
        );
        assert_eq!(p.get("plan"), Some("pro"));
        assert_eq!(p.get("nope"), None);
    }

    #[test]
    fn a_string_holding_an_object_is_read_as_plausible_does() {
        let p = strict(json!("{\"author\":\"Jane\"}")).unwrap();
        assert_eq!(pairs(&p), [("author", "Jane")]);
        assert_eq!(
            strict(json!("author=Jane")),
            Err(PropertyError::NotAnObject)
        );
        assert_eq!(strict(json!([1, 2])), Err(PropertyError::NotAnObject));
        assert_eq!(strict(json!(null)), Ok(Properties::default()));
    }

    #[test]
    fn nested_values_nulls_and_blanks_are_dropped() {
        let p =
            strict(json!({"a": {"b": 1}, "l": [1], "z": null, "blank": "  ", "": "x", "ok": "y"}))
                .unwrap();
        assert_eq!(pairs(&p), [("ok", "y")]);
    }

    #[test]
    fn umami_data_is_flattened_into_dotted_keys() {
        let p = Properties::parse_json(
            &json!({"user": {"plan": "pro", "deep": {"a": {"b": {"c": {"d": 1}}}}}, "l": [1]}),
            Rules::Lenient,
        )
        .unwrap();
        assert_eq!(pairs(&p), [("user.plan", "pro")]);
        assert_eq!(
            Properties::parse_json(&json!("text"), Rules::Lenient),
            Ok(Properties::default())
        );
    }

    #[test]
    fn the_first_thirty_are_kept() {
        let many: serde_json::Map<_, _> =
            (0..100).map(|i| (format!("k{i:03}"), json!("v"))).collect();
        let p = strict(serde_json::Value::Object(many)).unwrap();
        assert_eq!(p.len(), MAX_PROPERTIES);
        assert_eq!(p.iter().last().unwrap().0, "k029");
    }

    #[test]
    fn a_key_or_value_past_its_bound_refuses_a_strict_hit_and_is_dropped_from_a_lenient_one() {
        let long_key = "k".repeat(MAX_KEY_BYTES + 1);
        let long_value = "v".repeat(MAX_VALUE_BYTES + 1);
        assert_eq!(
            strict(json!({ long_key.clone(): "v" })),
            Err(PropertyError::TooLong)
        );
        assert_eq!(
            strict(json!({"k": long_value.clone()})),
            Err(PropertyError::TooLong)
        );
        assert!(strict(json!({"k": "v".repeat(MAX_VALUE_BYTES)})).is_ok());
        let lenient =
            Properties::parse_json(&json!({"k": long_value, "ok": "y"}), Rules::Lenient).unwrap();
        assert_eq!(pairs(&lenient), [("ok", "y")]);
    }

    #[test]
    fn past_a_hits_bytes_the_later_properties_are_left_out() {
        let big: serde_json::Map<_, _> = (0..3)
            .map(|i| (format!("k{i}"), json!("v".repeat(1_500))))
            .collect();
        for rules in [Rules::Strict, Rules::Lenient] {
            let p = Properties::parse_json(&serde_json::Value::Object(big.clone()), rules).unwrap();
            assert_eq!(p.len(), 2);
            assert!(p.bytes() <= MAX_TOTAL_BYTES);
        }
    }

    #[test]
    fn a_key_holding_a_colon_is_left_out() {
        let p = strict(json!({"a:b": "x", "ok": "y"})).unwrap();
        assert_eq!(pairs(&p), [("ok", "y")]);
    }

    #[test]
    fn values_that_look_like_an_email_address_are_not_kept() {
        let p = strict(json!({"user": "jane@example.com", "who": "Mail <a.b@c.org>", "at": "@handle", "plan": "pro"}))
            .unwrap();
        assert_eq!(pairs(&p), [("at", "@handle"), ("plan", "pro")]);
        // Nor keys, nor a link's query holding one, encoded or not.
        let p = strict(json!({
            "jane@example.com": "1",
            "url": "https://x.test/a?email=jane%40example.com",
            "link": "https://x.test/a?to=jane@example.com&x=1",
            "ok": "https://x.test/a?b=1"
        }))
        .unwrap();
        assert_eq!(pairs(&p), [("ok", "https://x.test/a?b=1")]);
        assert!(!looks_like_email("a@b"));
        assert!(!looks_like_email("price@home"));
    }

    #[test]
    fn plausibles_extension_events_name_the_property_they_carry() {
        assert_eq!(extension_key("Outbound Link: Click"), Some("url"));
        assert_eq!(extension_key("File Download"), Some("url"));
        assert_eq!(extension_key("404"), Some("path"));
        assert_eq!(extension_key("Signup"), None);
    }

    #[test]
    fn control_characters_are_not_kept() {
        let p = strict(json!({"a\nb": "x", "c": "y\u{0}", "d": "ok"})).unwrap();
        assert_eq!(pairs(&p), [("d", "ok")]);
    }

    #[test]
    fn the_pixel_parameter_is_a_json_object() {
        assert_eq!(
            pairs(&Properties::parse_query(r#"{"plan":"pro"}"#).unwrap()),
            [("plan", "pro")]
        );
        assert_eq!(
            Properties::parse_query("plan=pro"),
            Err(PropertyError::NotAnObject)
        );
        assert_eq!(
            Properties::parse_query("\"{}\""),
            Err(PropertyError::NotAnObject)
        );
    }

    #[test]
    fn a_journal_record_out_of_shape_is_damage_and_content_rules_are_not_applied_again() {
        assert!(Properties::from_journal(vec![("a".into(), "b".into())]).is_some());
        assert!(Properties::from_journal(vec![("a".into(), String::new())]).is_none());
        assert!(
            Properties::from_journal(vec![("a".into(), "x".repeat(MAX_VALUE_BYTES + 1))]).is_none()
        );
        assert!(
            Properties::from_journal(vec![("b".into(), "1".into()), ("a".into(), "2".into())])
                .is_none(),
            "out of order"
        );
        // A value a later build might no longer take still reads back.
        assert!(Properties::from_journal(vec![("a".into(), " ".into())]).is_some());
    }
}
