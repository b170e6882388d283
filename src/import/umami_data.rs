//! Umami's event data: the `data` its tracker sends with a view or an
//! event (`umami.track('Signup', {plan: 'pro'})`), which Umami keeps in
//! `event_data`, one row per event and key, as `psql \copy (SELECT * FROM
//! event_data …) TO … CSV HEADER` writes it (README, "Switching from
//! Umami"). Joined to `website_event` by the event's id
//! (`website_event_id`; `event_id` in Umami's ClickHouse table).
//!
//! Each row becomes a custom property as the live `POST /api/send` keeps
//! `data` (`web::compat::umami`): Umami has flattened nested objects into
//! dotted keys already; a string or a date is kept as written, a boolean
//! as `true`/`false`, a number as the shortest decimal that is the same
//! (`12.5000` as `12.5`, as a JSON number reads), and a list (type 5) is
//! left out. The pairs of an event are then held to the properties' rules
//! (`Properties::of`, lenient: the first 30 by key, bounds, no email
//! address). An event's `revenue` and `currency` are also its revenue, as
//! the live endpoint and Umami's revenue report read them.
//!
//! The whole file is held while the events are read: at most
//! [`MAX_DATA_BYTES`], counted per row as its key's and value's bytes and
//! [`ROW_BYTES`] more; past it, the file is refused with how to import in
//! parts.

use std::collections::HashMap;
use std::io::Read;

use super::reading::{CsvFile, RowError};
use crate::domain::properties::{Properties, Rules};
use crate::domain::revenue::{Amount, Currency, Revenue};

const EVENT_ID: &str = "website_event_id";
/// The event's id in Umami's ClickHouse `event_data`.
const CLICKHOUSE_EVENT_ID: &str = "event_id";
const DATA_KEY: &str = "data_key";
const STRING_VALUE: &str = "string_value";
const NUMBER_VALUE: &str = "number_value";
const DATE_VALUE: &str = "date_value";
const DATA_TYPE: &str = "data_type";
const REQUIRED: [&str; 4] = [DATA_KEY, STRING_VALUE, NUMBER_VALUE, DATA_TYPE];
const OPTIONAL: [&str; 3] = [EVENT_ID, CLICKHOUSE_EVENT_ID, DATE_VALUE];

/// Most bytes the event data may take in memory while the events are
/// read.
pub const MAX_DATA_BYTES: usize = 256 << 20;
/// What a row costs besides its key's and value's bytes: the strings'
/// headers and the map's entry, rounded up.
pub const ROW_BYTES: usize = 64;

/// What one event carried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFacts {
    pub properties: Properties,
    pub revenue: Option<Revenue>,
}

/// The event data of an export, by event id.
#[derive(Debug, Default)]
pub struct EventData {
    by_event: HashMap<u128, EventFacts>,
    /// Rows read, and of them those left out (lists, or past a bound).
    pub rows: u64,
    pub left_out: u64,
}

impl EventData {
    /// Reads and checks an event data file: a bad row names its line and
    /// column; more than [`MAX_DATA_BYTES`] is refused.
    pub fn load(read: impl Read, file: &str) -> Result<Self, RowError> {
        Self::load_at_most(read, file, MAX_DATA_BYTES)
    }

    fn load_at_most(read: impl Read, file: &str, most: usize) -> Result<Self, RowError> {
        let mut csv = CsvFile::open(read, file, &REQUIRED, &OPTIONAL, |_| Ok(()))?;
        let id_column = [EVENT_ID, CLICKHOUSE_EVENT_ID]
            .into_iter()
            .find(|c| csv.has(c))
            .ok_or_else(|| {
                RowError::new(
                    file,
                    1,
                    EVENT_ID,
                    "no website_event_id (or event_id) column: export it with SELECT * \
                     (README, \"Switching from Umami\")",
                )
            })?;
        let mut pairs: HashMap<u128, Vec<(String, String)>> = HashMap::new();
        let (mut bytes, mut rows) = (0usize, 0u64);
        while let Some(next) = csv.next_record() {
            let (line, record) = next?;
            let cell = |name| csv.cell(&record, name);
            let error = |column: &str, message: String| RowError::new(file, line, column, message);
            rows += 1;
            let id = uuid::Uuid::try_parse(cell(id_column))
                .map_err(|_| error(id_column, format!("not a UUID: {:?}", cell(id_column))))?
                .as_u128();
            let key = cell(DATA_KEY);
            let value = match cell(DATA_TYPE) {
                // A string, or a boolean as Umami writes it.
                "1" | "3" => Some(cell(STRING_VALUE)),
                "2" => {
                    let raw = match cell(NUMBER_VALUE) {
                        "" => cell(STRING_VALUE),
                        n => n,
                    };
                    Some(number(raw).map_err(|m| error(NUMBER_VALUE, m))?)
                }
                "4" => Some(match cell(STRING_VALUE) {
                    "" if csv.has(DATE_VALUE) => cell(DATE_VALUE),
                    s => s,
                }),
                // A list: the live endpoint leaves lists out too.
                "5" => None,
                other => {
                    return Err(error(
                        DATA_TYPE,
                        format!(
                            "not an Umami data type (1 text, 2 a number, 3 a boolean, \
                             4 a date, 5 a list): {other:?}"
                        ),
                    ))
                }
            };
            let Some(value) = value else {
                continue;
            };
            bytes += key.len() + value.len() + ROW_BYTES;
            if bytes > most {
                return Err(error(
                    DATA_KEY,
                    format!(
                        "more than {most} bytes of event data in memory: import the events \
                         in parts, each with the event data of its period (README, \
                         \"Switching from Umami\")"
                    ),
                ));
            }
            pairs
                .entry(id)
                .or_default()
                .push((key.to_owned(), value.to_owned()));
        }
        let mut left_out = 0;
        let by_event = pairs
            .into_iter()
            .map(|(id, mut pairs)| {
                // Umami keeps no order among an event's keys: by key, so
                // the first 30 are the same in every run.
                pairs.sort();
                let revenue = revenue_of(&pairs);
                let sent = pairs.len();
                let properties =
                    Properties::of(pairs, Rules::Lenient).expect("lenient rules refuse nothing");
                left_out += (sent - properties.len()) as u64;
                (
                    id,
                    EventFacts {
                        properties,
                        revenue,
                    },
                )
            })
            .collect();
        Ok(Self {
            by_event,
            rows,
            left_out,
        })
    }

    /// What the event `id` carried, if it carried anything.
    pub fn get(&self, id: u128) -> Option<&EventFacts> {
        self.by_event.get(&id)
    }

    pub fn is_empty(&self) -> bool {
        self.by_event.is_empty()
    }

    /// Events that carried data.
    pub fn events(&self) -> usize {
        self.by_event.len()
    }
}

/// A `decimal(19,4)` as psql writes it (`12.5000`), as the shortest
/// decimal that is the same (`12.5`): what the live endpoint keeps of a
/// JSON number. No exponent, no sign but `-`.
fn number(raw: &str) -> Result<&str, String> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    let (whole, fraction) = match digits.split_once('.') {
        Some((_, "")) => ("", ""),
        Some(parts) => parts,
        None => (digits, ""),
    };
    let plain = !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b.is_ascii_digit());
    if !plain {
        return Err(format!(
            "not a decimal as psql writes one (12.5000): {raw:?}"
        ));
    }
    let trimmed = if fraction.is_empty() {
        raw
    } else {
        raw.trim_end_matches('0').trim_end_matches('.')
    };
    Ok(match trimmed {
        "-0" => "0",
        t => t,
    })
}

/// The revenue of an event's pairs (sorted by key): its `revenue` amount
/// in its `currency`, when both are valid, as the live endpoint reads
/// them; otherwise none, and the event still counts.
fn revenue_of(pairs: &[(String, String)]) -> Option<Revenue> {
    let get = |key: &str| {
        pairs
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| pairs[i].1.as_str())
    };
    Some(Revenue {
        amount: Amount::parse(get("revenue")?).ok()?,
        currency: Currency::parse(get("currency")?).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "event_data_id,website_id,website_event_id,data_key,string_value,number_value,date_value,data_type,created_at";
    const EVENT: &str = "33333333-3333-4333-8333-333333333333";

    fn row(key: &str, string: &str, number: &str, date: &str, kind: u8) -> String {
        format!(
            "{},94db1cb1-74f4-4a40-ad6c-962362670409,{EVENT},{key},{string},{number},{date},{kind},2026-10-01 10:00:00+00",
            uuid::Uuid::new_v4()
        )
    }

    fn load(rows: &[String]) -> Result<EventData, RowError> {
        let text = format!("{HEADER}\n{}\n", rows.join("\n"));
        EventData::load(text.as_bytes(), "event_data.csv")
    }

    fn pairs(data: &EventData) -> Vec<(String, String)> {
        let id = uuid::Uuid::parse_str(EVENT).unwrap().as_u128();
        data.get(id)
            .unwrap()
            .properties
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn each_type_is_kept_as_the_live_endpoint_keeps_it() {
        let data = load(&[
            row("plan", "pro", "", "", 1),
            row("seats", "3.0000", "3.0000", "", 2),
            row("price", "12.5000", "12.5000", "", 2),
            row("debt", "-0.0000", "-0.0000", "", 2),
            row("trial", "false", "", "", 3),
            row(
                "renews",
                "2026-12-01T00:00:00.000Z",
                "",
                "2026-12-01 00:00:00+00",
                4,
            ),
            row("tags", "\"[\"\"a\"\",\"\"b\"\"]\"", "", "", 5),
            row("user.team", "blue", "", "", 1),
        ])
        .unwrap();
        let got = pairs(&data);
        let want: Vec<(String, String)> = [
            ("debt", "0"),
            ("plan", "pro"),
            ("price", "12.5"),
            ("renews", "2026-12-01T00:00:00.000Z"),
            ("seats", "3"),
            ("trial", "false"),
            ("user.team", "blue"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        assert_eq!(data.rows, 8);
    }

    #[test]
    fn a_date_without_its_text_is_read_from_its_own_column() {
        let data = load(&[row("renews", "", "", "2026-12-01 00:00:00+00", 4)]).unwrap();
        assert_eq!(
            pairs(&data),
            vec![("renews".into(), "2026-12-01 00:00:00+00".into())]
        );
    }

    #[test]
    fn revenue_and_currency_are_the_events_revenue_and_stay_properties() {
        let data = load(&[
            row("revenue", "19.9900", "19.9900", "", 2),
            row("currency", "eur", "", "", 1),
        ])
        .unwrap();
        let id = uuid::Uuid::parse_str(EVENT).unwrap().as_u128();
        let facts = data.get(id).unwrap();
        let revenue = facts.revenue.unwrap();
        assert_eq!(revenue.currency.as_str(), "EUR");
        assert_eq!(revenue.amount.scaled(), 199_900);
        assert_eq!(facts.properties.get("revenue"), Some("19.99"));
    }

    #[test]
    fn a_bad_currency_or_an_amount_past_its_bound_gives_no_revenue_and_keeps_the_event() {
        for (amount, currency) in [("19.9900", "EURO"), ("1000000000.0000", "EUR")] {
            let data = load(&[
                row("revenue", amount, amount, "", 2),
                row("currency", currency, "", "", 1),
            ])
            .unwrap();
            let id = uuid::Uuid::parse_str(EVENT).unwrap().as_u128();
            assert_eq!(data.get(id).unwrap().revenue, None, "{amount} {currency}");
        }
    }

    #[test]
    fn emails_values_past_their_bound_and_keys_past_thirty_are_left_out() {
        let mut rows = vec![
            row("contact", "jane@example.com", "", "", 1),
            row("essay", &"x".repeat(2_001), "", "", 1),
        ];
        rows.extend((0..35).map(|i| row(&format!("k{i:02}"), "v", "", "", 1)));
        let data = load(&rows).unwrap();
        let got = pairs(&data);
        assert_eq!(got.len(), 30);
        assert!(got.iter().all(|(k, _)| k.starts_with('k')), "{got:?}");
        assert_eq!(data.left_out, 7);
    }

    #[test]
    fn a_number_with_an_exponent_or_a_plus_names_its_line_and_column() {
        for bad in ["1e5", "+3", "3.", ".5", "NaN", "0x10"] {
            let e = load(&[row("n", bad, bad, "", 2)]).unwrap_err();
            assert_eq!((e.line, e.column.as_str()), (2, NUMBER_VALUE), "{bad}: {e}");
        }
    }

    #[test]
    fn an_unknown_type_or_event_id_names_its_line_and_column() {
        let e = load(&[row("plan", "pro", "", "", 9)]).unwrap_err();
        assert_eq!((e.line, e.column.as_str()), (2, DATA_TYPE), "{e}");
        let text = format!("{HEADER}\nx,w,not-a-uuid,plan,pro,,,1,\n");
        let e = EventData::load(text.as_bytes(), "f").unwrap_err();
        assert_eq!((e.line, e.column.as_str()), (2, EVENT_ID), "{e}");
    }

    #[test]
    fn clickhouses_event_id_column_is_read_too() {
        let text = format!(
            "website_id,session_id,event_id,url_path,event_name,data_key,string_value,number_value,date_value,data_type,created_at\n\
             w,s,{EVENT},/,Signup,plan,pro,,,1,2026-10-01 10:00:00\n"
        );
        let data = EventData::load(text.as_bytes(), "f").unwrap();
        assert_eq!(pairs(&data), vec![("plan".into(), "pro".into())]);
    }

    #[test]
    fn a_file_without_an_event_id_column_is_refused_at_its_header() {
        let text = "data_key,string_value,number_value,data_type\nplan,pro,,1\n";
        let e = EventData::load(text.as_bytes(), "f").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
    }

    #[test]
    fn more_than_the_bound_in_memory_is_refused() {
        let rows: Vec<String> = (0..10)
            .map(|i| row(&format!("k{i}"), "v", "", "", 1))
            .collect();
        let text = format!("{HEADER}\n{}\n", rows.join("\n"));
        let e = EventData::load_at_most(text.as_bytes(), "f", 5 * (ROW_BYTES + 3)).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        assert!(e.message.contains("in parts"), "{e}");
    }
}
