//! Reading what the server answers: numbers that may come as int32, int64
//! or double, and the duplicate-key error in its two shapes.

use bson::Bson;

/// Duplicate-key error code.
pub const DUPLICATE_KEY: i32 = 11000;

/// A BSON number as an integer (servers answer counts as int32, int64 or
/// double).
pub fn number(value: Option<&Bson>) -> Option<i64> {
    match value? {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(n) if n.fract() == 0.0 => Some(*n as i64),
        _ => None,
    }
}

/// A count or sum read back: a missing field is 0.
pub fn count(value: Option<&Bson>) -> i64 {
    number(value).unwrap_or(0)
}

/// Whether an insert or update failed on a unique index.
pub fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*e.kind {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == DUPLICATE_KEY,
        ErrorKind::Command(c) => c.code == DUPLICATE_KEY,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_in_three_types() {
        assert_eq!(number(Some(&Bson::Int32(3))), Some(3));
        assert_eq!(number(Some(&Bson::Int64(1 << 40))), Some(1 << 40));
        assert_eq!(number(Some(&Bson::Double(7.0))), Some(7));
        assert_eq!(number(Some(&Bson::Double(7.5))), None);
        assert_eq!(number(Some(&Bson::String("7".into()))), None);
        assert_eq!(number(None), None);
        assert_eq!(count(None), 0);
        assert_eq!(count(Some(&Bson::Int32(2))), 2);
    }
}
