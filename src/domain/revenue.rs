//! Revenue an event carries: an exact decimal amount and the ISO 4217
//! currency it is in, as Plausible's `revenue: {amount, currency}` and
//! Umami's `revenue`/`currency` event data send it.
//!
//! Amounts are kept as whole ten-thousandths of the currency's unit
//! ([`Amount::SCALE`]): four decimal places hold every currency's minor
//! unit (ISO 4217's largest exponent is 4), so nothing is rounded on the
//! way in and sums are plain integer sums. There is no floating point on
//! the way from a hit to a report (but for a sampled read's estimate,
//! scaled up as it scales every count).

use std::fmt;

/// Ten-thousandths: an amount of `12.5` is stored as `125000`.
const SCALE_DIGITS: u32 = 4;

/// The largest amount one event may carry, in whole units: an amount
/// is at most nine digits before its point. A bucket adds amounts in two
/// parts (`storage::breakdowns::REVENUE_SPLIT`), so no number of events
/// it could take overflows them; a read adds them up in an `i128`.
pub const MAX_AMOUNT_UNITS: i64 = 999_999_999;

/// The ISO 4217 codes of currencies (and funds, metals and special
/// drawing rights) in use or recently withdrawn; `XTS` (testing) and `XXX`
/// (no currency) are left out.
const ISO_4217: &[&str] = &[
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT",
    "BGN", "BHD", "BIF", "BMD", "BND", "BOB", "BOV", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD",
    "CAD", "CDF", "CHE", "CHF", "CHW", "CLF", "CLP", "CNY", "COP", "COU", "CRC", "CUC", "CUP",
    "CVE", "CZK", "DJF", "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP",
    "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD", "HNL", "HRK", "HTG", "HUF", "IDR",
    "ILS", "INR", "IQD", "IRR", "ISK", "JMD", "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW",
    "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD", "LSL", "LYD", "MAD", "MDL", "MGA",
    "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MXV", "MYR", "MZN", "NAD",
    "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG",
    "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE",
    "SLL", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB", "TJS", "TMT", "TND", "TOP",
    "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "USN", "UYI", "UYU", "UYW", "UZS", "VED",
    "VES", "VND", "VUV", "WST", "XAF", "XAG", "XAU", "XBA", "XBB", "XBC", "XBD", "XCD", "XCG",
    "XDR", "XOF", "XPD", "XPF", "XPT", "XSU", "XUA", "YER", "ZAR", "ZMW", "ZWG", "ZWL",
];

/// Currencies whose minor unit is not a hundredth: how many decimals
/// their amounts are shown with (ISO 4217's exponent).
const EXPONENTS: &[(&str, u32)] = &[
    ("BHD", 3),
    ("BIF", 0),
    ("CLF", 4),
    ("CLP", 0),
    ("DJF", 0),
    ("GNF", 0),
    ("IQD", 3),
    ("ISK", 0),
    ("JOD", 3),
    ("JPY", 0),
    ("KMF", 0),
    ("KRW", 0),
    ("KWD", 3),
    ("LYD", 3),
    ("OMR", 3),
    ("PYG", 0),
    ("RWF", 0),
    ("TND", 3),
    ("UGX", 0),
    ("UYI", 0),
    ("UYW", 4),
    ("VND", 0),
    ("VUV", 0),
    ("XAF", 0),
    ("XOF", 0),
    ("XPF", 0),
];

/// An ISO 4217 currency code, upper case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency([u8; 3]);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RevenueError {
    #[error("revenue is an object with an amount and a currency")]
    NotAnObject,
    #[error("a currency is an ISO 4217 code of three letters, such as EUR")]
    Currency,
    #[error("an amount is a decimal number such as 12.50, without an exponent")]
    AmountFormat,
    #[error("an amount has at most four decimal places")]
    AmountPrecision,
    #[error("an amount is at most 999,999,999.9999")]
    AmountTooLarge,
}

impl Currency {
    /// Three letters naming an ISO 4217 currency, in either case.
    pub fn parse(raw: &str) -> Result<Currency, RevenueError> {
        let code = raw.trim().to_ascii_uppercase();
        let bytes: [u8; 3] = code
            .as_bytes()
            .try_into()
            .map_err(|_| RevenueError::Currency)?;
        if ISO_4217.binary_search(&code.as_str()).is_err() {
            return Err(RevenueError::Currency);
        }
        Ok(Currency(bytes))
    }

    /// The three bytes a journal record holds.
    pub fn bytes(self) -> [u8; 3] {
        self.0
    }

    pub fn as_str(&self) -> &str {
        // Only built from an entry of `ISO_4217`: ASCII.
        std::str::from_utf8(&self.0).unwrap_or("XXX")
    }

    /// Decimals its amounts are shown with.
    pub fn exponent(self) -> u32 {
        EXPONENTS
            .iter()
            .find(|(code, _)| *code == self.as_str())
            .map_or(2, |(_, e)| *e)
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An amount in ten-thousandths of its currency's unit, within
/// ±[`MAX_AMOUNT_UNITS`]. Negative amounts are refunds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Amount(i64);

impl Amount {
    /// Ten-thousandths per unit.
    pub const SCALE: i64 = 10_i64.pow(SCALE_DIGITS);

    /// A plain decimal: an optional minus, digits, and an optional point
    /// with digits. No exponent, no sign but `-`, no separators: what
    /// is exact is taken exactly, and anything else is refused rather than
    /// guessed at.
    pub fn parse(raw: &str) -> Result<Amount, RevenueError> {
        let raw = raw.trim();
        let (negative, digits) = match raw.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let plain = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !plain(whole) || !plain(fraction) || digits.ends_with('.') {
            return Err(RevenueError::AmountFormat);
        }
        let fraction = fraction.trim_end_matches('0');
        if fraction.len() > SCALE_DIGITS as usize {
            return Err(RevenueError::AmountPrecision);
        }
        let whole = whole.trim_start_matches('0');
        if whole.len() > 9 {
            return Err(RevenueError::AmountTooLarge);
        }
        let units: i64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| RevenueError::AmountFormat)?
        };
        let mut part: i64 = if fraction.is_empty() {
            0
        } else {
            fraction.parse().map_err(|_| RevenueError::AmountFormat)?
        };
        for _ in fraction.len()..SCALE_DIGITS as usize {
            part *= 10;
        }
        let scaled = units * Self::SCALE + part;
        Ok(Amount(if negative { -scaled } else { scaled }))
    }

    /// A JSON number or a string holding a decimal. A number is read as
    /// the shortest decimal that is the same binary number (what the
    /// sender wrote, for any amount of up to 15 digits): `9.99` is 9.99,
    /// and `1e-7`, which has more decimals than an amount may, is refused.
    pub fn from_json(value: &serde_json::Value) -> Result<Amount, RevenueError> {
        match value {
            serde_json::Value::String(s) => Amount::parse(s),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Amount::parse(&i.to_string())
                } else if let Some(u) = n.as_u64() {
                    Amount::parse(&u.to_string())
                } else {
                    let f = n.as_f64().ok_or(RevenueError::AmountFormat)?;
                    if !f.is_finite() {
                        return Err(RevenueError::AmountFormat);
                    }
                    // `Display` of an f64 never uses an exponent.
                    Amount::parse(&f.to_string())
                }
            }
            _ => Err(RevenueError::AmountFormat),
        }
    }

    /// An amount as a journal record holds it, if within the bound.
    pub fn from_scaled(scaled: i64) -> Option<Amount> {
        (scaled.unsigned_abs() <= (MAX_AMOUNT_UNITS * Self::SCALE + Self::SCALE - 1) as u64)
            .then_some(Amount(scaled))
    }

    /// Ten-thousandths of the unit.
    pub fn scaled(self) -> i64 {
        self.0
    }
}

/// An event's revenue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Revenue {
    pub currency: Currency,
    pub amount: Amount,
}

impl Revenue {
    /// `{"amount": …, "currency": …}`, or a string holding that object
    /// (Plausible's trackers send either). Other keys are ignored.
    pub fn parse_json(value: &serde_json::Value) -> Result<Revenue, RevenueError> {
        let decoded;
        let object = match value {
            serde_json::Value::Object(o) => o,
            serde_json::Value::String(s) => {
                decoded = serde_json::from_str::<serde_json::Value>(s)
                    .map_err(|_| RevenueError::NotAnObject)?;
                decoded.as_object().ok_or(RevenueError::NotAnObject)?
            }
            _ => return Err(RevenueError::NotAnObject),
        };
        let currency = match object.get("currency") {
            Some(serde_json::Value::String(c)) => Currency::parse(c)?,
            _ => return Err(RevenueError::Currency),
        };
        let amount = Amount::from_json(object.get("amount").ok_or(RevenueError::AmountFormat)?)?;
        Ok(Revenue { currency, amount })
    }

    /// The pixel's `revenue` parameter: a JSON object as above.
    pub fn parse_query(raw: &str) -> Result<Revenue, RevenueError> {
        let value: serde_json::Value =
            serde_json::from_str(raw).map_err(|_| RevenueError::NotAnObject)?;
        if !value.is_object() {
            return Err(RevenueError::NotAnObject);
        }
        Revenue::parse_json(&value)
    }
}

/// What a period's events carried in one currency: their amounts added
/// up, and how many events carried one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevenueTotal {
    pub currency: Currency,
    /// Ten-thousandths of the unit; an `i128` never overflows a sum of
    /// stored `i64`s.
    pub scaled: i128,
    pub conversions: i64,
}

impl RevenueTotal {
    /// The sum, as a plain decimal: at least the currency's decimals,
    /// more where the sum has them (`12.50`, `1500`, `0.0125`).
    pub fn amount(&self) -> String {
        decimal(self.scaled, self.currency.exponent())
    }

    /// The sum as pages show it: thousands separated, with its code
    /// (`1,234.50 EUR`).
    pub fn shown(&self) -> String {
        format!("{} {}", grouped(&self.amount()), self.currency)
    }

    /// The average as pages show it (`—` without any event).
    pub fn average_shown(&self) -> String {
        self.average().map_or_else(
            || "—".to_owned(),
            |a| format!("{} {}", grouped(&a), self.currency),
        )
    }

    /// The average per event that carried revenue, rounded half to even
    /// at the fourth decimal (`None` without any).
    pub fn average(&self) -> Option<String> {
        let n = i128::from(self.conversions);
        (n > 0).then(|| decimal(divide_half_even(self.scaled, n), self.currency.exponent()))
    }
}

/// Totals per currency, most-used currency first (by events, then code).
pub fn totals(sums: impl IntoIterator<Item = (Currency, i128, i64)>) -> Vec<RevenueTotal> {
    let mut by: std::collections::BTreeMap<Currency, (i128, i64)> = Default::default();
    for (currency, scaled, n) in sums {
        let entry = by.entry(currency).or_default();
        entry.0 += scaled;
        entry.1 += n;
    }
    let mut out: Vec<RevenueTotal> = by
        .into_iter()
        .filter(|(_, (_, n))| *n != 0)
        .map(|(currency, (scaled, conversions))| RevenueTotal {
            currency,
            scaled,
            conversions,
        })
        .collect();
    out.sort_by(|a, b| {
        b.conversions
            .cmp(&a.conversions)
            .then(a.currency.cmp(&b.currency))
    });
    out
}

/// A plain decimal with its whole part's thousands separated.
fn grouped(decimal: &str) -> String {
    let (sign, rest) = match decimal.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", decimal),
    };
    let (whole, fraction) = match rest.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (rest, None),
    };
    let whole = whole
        .parse::<i64>()
        .map_or_else(|_| whole.to_owned(), |n| super::numbers::thousands(&n));
    match fraction {
        Some(f) => format!("{sign}{whole}.{f}"),
        None => format!("{sign}{whole}"),
    }
}

fn divide_half_even(a: i128, n: i128) -> i128 {
    let (q, r) = (a.div_euclid(n), a.rem_euclid(n));
    match (2 * r).cmp(&n) {
        std::cmp::Ordering::Less => q,
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal => q + (q & 1),
    }
}

/// Ten-thousandths as a decimal with at least `min_decimals` decimals.
pub fn decimal(scaled: i128, min_decimals: u32) -> String {
    let scale = i128::from(Amount::SCALE);
    let sign = if scaled < 0 { "-" } else { "" };
    let abs = scaled.unsigned_abs();
    let (whole, part) = (abs / scale as u128, abs % scale as u128);
    let mut fraction = format!("{part:0width$}", width = SCALE_DIGITS as usize);
    while fraction.len() > min_decimals as usize && fraction.ends_with('0') {
        fraction.pop();
    }
    if fraction.is_empty() {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_currency_list_is_sorted_for_its_search() {
        assert!(ISO_4217.windows(2).all(|w| w[0] < w[1]));
        assert!(EXPONENTS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn a_currency_is_an_iso_4217_code_in_either_case() {
        assert_eq!(Currency::parse("EUR").unwrap().as_str(), "EUR");
        assert_eq!(Currency::parse(" usd ").unwrap().as_str(), "USD");
        for bad in ["", "EU", "EURO", "ABC", "XXX", "€", "E U"] {
            assert_eq!(Currency::parse(bad), Err(RevenueError::Currency), "{bad}");
        }
    }

    #[test]
    fn a_currency_says_its_decimals() {
        assert_eq!(Currency::parse("EUR").unwrap().exponent(), 2);
        assert_eq!(Currency::parse("JPY").unwrap().exponent(), 0);
        assert_eq!(Currency::parse("KWD").unwrap().exponent(), 3);
    }

    #[test]
    fn an_amount_is_a_plain_decimal_taken_exactly() {
        assert_eq!(Amount::parse("12.5").unwrap().scaled(), 125_000);
        assert_eq!(Amount::parse("0.0001").unwrap().scaled(), 1);
        assert_eq!(Amount::parse("-3").unwrap().scaled(), -30_000);
        assert_eq!(Amount::parse("007.10000").unwrap().scaled(), 71_000);
        assert_eq!(
            Amount::parse("999999999.9999").unwrap().scaled(),
            9_999_999_999_999
        );
    }

    #[test]
    fn an_amount_has_no_exponent_separator_or_stray_sign() {
        for bad in [
            "", "1e3", "1E3", "+1", "1,5", "1 000", ".5", "5.", "--1", "0x10", "NaN", "inf",
        ] {
            assert_eq!(Amount::parse(bad), Err(RevenueError::AmountFormat), "{bad}");
        }
    }

    #[test]
    fn an_amount_has_at_most_four_decimals_and_nine_digits() {
        assert_eq!(Amount::parse("0.00001"), Err(RevenueError::AmountPrecision));
        assert_eq!(
            Amount::parse("1000000000"),
            Err(RevenueError::AmountTooLarge)
        );
        assert_eq!(
            Amount::parse("99999999999999999999999999"),
            Err(RevenueError::AmountTooLarge)
        );
    }

    #[test]
    fn a_json_number_is_the_decimal_the_sender_wrote() {
        let amount = |v| Amount::from_json(&v).map(Amount::scaled);
        assert_eq!(amount(json!(9.99)), Ok(99_900));
        assert_eq!(amount(json!(0.1)), Ok(1_000));
        assert_eq!(amount(json!(42)), Ok(420_000));
        assert_eq!(amount(json!(1e-7)), Err(RevenueError::AmountPrecision));
        assert_eq!(amount(json!(1e300)), Err(RevenueError::AmountTooLarge));
        assert_eq!(amount(json!("1e3")), Err(RevenueError::AmountFormat));
        assert_eq!(amount(json!(true)), Err(RevenueError::AmountFormat));
    }

    #[test]
    fn revenue_is_an_object_or_a_string_holding_one() {
        let r = Revenue::parse_json(&json!({"amount": "9.99", "currency": "EUR"})).unwrap();
        assert_eq!((r.currency.as_str(), r.amount.scaled()), ("EUR", 99_900));
        let s = Revenue::parse_json(&json!(r#"{"amount":9.99,"currency":"EUR"}"#)).unwrap();
        assert_eq!(r, s);
        assert_eq!(
            Revenue::parse_json(&json!([1])),
            Err(RevenueError::NotAnObject)
        );
        assert_eq!(
            Revenue::parse_json(&json!({"amount": 1})),
            Err(RevenueError::Currency)
        );
        assert_eq!(
            Revenue::parse_json(&json!({"currency": "EUR"})),
            Err(RevenueError::AmountFormat)
        );
        assert_eq!(Revenue::parse_query("[]"), Err(RevenueError::NotAnObject));
    }

    #[test]
    fn a_stored_amount_is_held_to_the_bound() {
        assert!(Amount::from_scaled(9_999_999_999_999).is_some());
        assert!(Amount::from_scaled(-9_999_999_999_999).is_some());
        assert!(Amount::from_scaled(10_000_000_000_000).is_none());
        assert!(Amount::from_scaled(i64::MIN).is_none());
    }

    #[test]
    fn totals_show_the_currency_decimals_and_more_where_there_are() {
        let eur = Currency::parse("EUR").unwrap();
        let jpy = Currency::parse("JPY").unwrap();
        let t = totals([(eur, 125_000, 1), (eur, 1, 1), (jpy, 15_000_000, 2)]);
        assert_eq!(t[0].currency, eur);
        assert_eq!(t[0].amount(), "12.5001");
        assert_eq!(t[1].amount(), "1500");
        assert_eq!(t[1].average().as_deref(), Some("750"));
        let refund = totals([(eur, -50_000, 1)]);
        assert_eq!(refund[0].amount(), "-5.00");
        let big = totals([(eur, 12_345_675_000, 2)]);
        assert_eq!(big[0].shown(), "1,234,567.50 EUR");
        assert_eq!(big[0].average_shown(), "617,283.75 EUR");
        assert_eq!(refund[0].shown(), "-5.00 EUR");
    }

    #[test]
    fn an_average_rounds_half_to_even_at_the_fourth_decimal() {
        assert_eq!(divide_half_even(10, 4), 2);
        assert_eq!(divide_half_even(14, 4), 4);
        assert_eq!(divide_half_even(-10, 4), -2);
        assert_eq!(divide_half_even(7, 3), 2);
        let eur = Currency::parse("EUR").unwrap();
        let t = totals([(eur, 100_000, 3)]);
        assert_eq!(t[0].average().as_deref(), Some("3.3333"));
    }
}
