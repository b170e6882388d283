//! Reading a peer's export, bounded whatever the file holds: CSV records
//! capped while streaming ([`MAX_RECORD_BYTES`]), decompression capped by
//! its ratio ([`MAX_RATIO`]), dates held to the days an import takes
//! ([`FIRST_DAY`] to tomorrow), and each format's reading of a record
//! ([`Format`]) into the rows the apply loop (`import::apply`) counts. A
//! row that cannot be read names its file, line and column
//! ([`RowError`]).

use chrono::{NaiveDate, Utc};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use super::Skipped;

/// A row that cannot be read: where, and why.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {}{message}", match column.as_str() {
    "" => String::new(),
    column => format!("column {column:?}: "),
})]
pub struct RowError {
    pub file: String,
    pub line: u64,
    pub column: String,
    pub message: String,
}

impl RowError {
    pub fn new(file: &str, line: u64, column: &str, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line,
            column: column.to_owned(),
            message: message.into(),
        }
    }
}

/// A CSV export with a header row, its columns found by name (in any
/// order; the others are ignored), read record by record.
pub struct CsvFile<R: Read> {
    records: csv::StringRecordsIntoIter<RecordBound<R>>,
    columns: HashMap<&'static str, usize>,
    file: String,
    /// Where a record went over [`MAX_RECORD_BYTES`], once one did.
    overlong: Rc<std::cell::Cell<Option<u64>>>,
    /// The line read up to (where a failed read failed).
    line: Rc<std::cell::Cell<u64>>,
    /// The header's names, by position: what a row short of fields lacks.
    header: Vec<String>,
}

/// The longest record (a row, its line end and any line ends inside its
/// quotes) an import reads: the rows of every peer's export are far
/// shorter, and a longer one is refused as soon as it passes this, so
/// memory stays bounded whatever a file holds.
pub const MAX_RECORD_BYTES: u64 = 64 << 10;

/// Passes a CSV file's bytes through, failing once a record (quotes
/// followed, as `csv` reads them) passes [`MAX_RECORD_BYTES`]; `overlong`
/// learns the line it started on.
pub struct RecordBound<R> {
    inner: R,
    in_quotes: bool,
    /// Bytes of the record so far.
    record: u64,
    /// The line the next byte is on, and the one the record started on.
    line: Rc<std::cell::Cell<u64>>,
    record_line: u64,
    overlong: Rc<std::cell::Cell<Option<u64>>>,
}

impl<R: Read> Read for RecordBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            self.record += 1;
            match b {
                b'"' => self.in_quotes = !self.in_quotes,
                b'\n' => {
                    self.line.set(self.line.get() + 1);
                    if !self.in_quotes {
                        self.record = 0;
                        self.record_line = self.line.get();
                    }
                }
                _ => {}
            }
            if self.record > MAX_RECORD_BYTES {
                self.overlong.set(Some(self.record_line));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a record over the longest an import reads",
                ));
            }
        }
        Ok(n)
    }
}

impl<R: Read> CsvFile<R> {
    /// Reads the header: every `required` column must be there,
    /// `optional` ones are read when they are. `check` sees the header
    /// first (a format's own mark).
    pub fn open(
        read: R,
        file: &str,
        required: &[&'static str],
        optional: &[&'static str],
        check: impl FnOnce(&csv::StringRecord) -> Result<(), RowError>,
    ) -> Result<Self, RowError> {
        let overlong = Rc::new(std::cell::Cell::new(None));
        let line = Rc::new(std::cell::Cell::new(1));
        let bounded = RecordBound {
            inner: read,
            in_quotes: false,
            record: 0,
            line: line.clone(),
            record_line: 1,
            overlong: overlong.clone(),
        };
        let mut reader = csv::ReaderBuilder::new()
            .flexible(false)
            .from_reader(bounded);
        let header = reader.headers().map_err(|e| match overlong.get() {
            Some(line) => overlong_error(file, line),
            None => RowError::new(file, 1, "", not_csv(&e)),
        })?;
        check(header)?;
        let names = header.iter().map(|h| h.trim().to_owned()).collect();
        let mut columns = HashMap::new();
        for &name in required.iter().chain(optional) {
            match header.iter().position(|h| h.trim() == name) {
                Some(i) => {
                    columns.insert(name, i);
                }
                None if optional.contains(&name) => {}
                None => {
                    return Err(RowError::new(
                        file,
                        1,
                        name,
                        "this required column is missing",
                    ))
                }
            }
        }
        Ok(Self {
            records: reader.into_records(),
            columns,
            file: file.to_owned(),
            overlong,
            line,
            header: names,
        })
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn has(&self, column: &str) -> bool {
        self.columns.contains_key(column)
    }

    /// A record's cell of `column`, trimmed; empty when the column is not
    /// in the file.
    pub fn cell<'r>(&self, record: &'r csv::StringRecord, column: &str) -> &'r str {
        self.columns
            .get(column)
            .and_then(|&i| record.get(i))
            .unwrap_or_default()
            .trim()
    }

    /// The next record and its line, or where the file stops being CSV.
    pub fn next_record(&mut self) -> Option<Result<(u64, csv::StringRecord), RowError>> {
        Some(match self.records.next()? {
            Ok(record) => Ok((record.position().map_or(0, |p| p.line()), record)),
            Err(_) if self.overlong.get().is_some() => Err(overlong_error(
                &self.file,
                self.overlong.get().unwrap_or_default(),
            )),
            Err(e) => {
                let line = e.position().map_or(self.line.get(), |p| p.line());
                Err(match e.kind() {
                    // Named by the first field it lacks (or has beyond
                    // the header, by its number).
                    &csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => {
                        let column = match self.header.get(len as usize) {
                            Some(name) if len < expected_len => name.clone(),
                            _ => format!("{}", expected_len + 1),
                        };
                        RowError::new(
                            &self.file,
                            line,
                            &column,
                            format!(
                                "not CSV as its header says: the row has {len} fields, \
                                 the header {expected_len}"
                            ),
                        )
                    }
                    _ => RowError::new(&self.file, line, "", not_csv(&e)),
                })
            }
        })
    }
}

/// Why a file stops being read: it is not CSV, or its bytes cannot be
/// read (a decompression bomb, a broken zip entry).
fn not_csv(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => format!("cannot be read: {io}"),
        _ => format!("not CSV: {e}"),
    }
}

fn overlong_error(file: &str, line: u64) -> RowError {
    RowError::new(
        file,
        line,
        "",
        format!(
            "a row over {} KiB (the longest an import reads; is it an export at all?)",
            MAX_RECORD_BYTES >> 10
        ),
    )
}

/// The first day an import takes: earlier dates are typing errors (or
/// worse), and far-out ones would overflow the date arithmetic of the
/// tasks that read the buckets.
pub const FIRST_DAY: NaiveDate = match NaiveDate::from_ymd_opt(1990, 1, 1) {
    Some(day) => day,
    None => panic!("1990-01-01 is a date"),
};

/// Checks that `day` (a row's date; for a time, its UTC date) is within
/// [`FIRST_DAY`] to tomorrow (UTC), the days an import takes.
pub fn day_in_window(day: NaiveDate) -> Result<(), String> {
    let tomorrow = Utc::now().date_naive() + chrono::Days::new(1);
    if day < FIRST_DAY || day > tomorrow {
        return Err(format!(
            "{day} is outside the days an import takes ({FIRST_DAY} to tomorrow, {tomorrow}, UTC)"
        ));
    }
    Ok(())
}

/// Whether `raw` starts with a date written `YYYY-MM-DD`, four digits of
/// year and two each of month and day, and then ends or goes on with a
/// time (`T` or a space): chrono alone also takes `+262142-12-31` and
/// `2026-1-5`.
pub fn starts_with_plain_date(raw: &str) -> bool {
    let b = raw.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() >= 10
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b.get(10), None | Some(b'T' | b't' | b' '))
}

/// A format's reading of one record of its file.
pub trait Format {
    /// What a valid row counts.
    type Counted;
    fn row<R: Read>(
        &mut self,
        csv: &CsvFile<R>,
        line: u64,
        record: &csv::StringRecord,
    ) -> Result<Result<Self::Counted, Skipped>, RowError>;
}

/// A file's rows in order, each checked by its format.
pub struct Rows<F, R: Read> {
    csv: CsvFile<R>,
    format: F,
}

impl<F: Format, R: Read> Rows<F, R> {
    pub fn new(csv: CsvFile<R>, format: F) -> Self {
        Self { csv, format }
    }
}

impl<F: Format, R: Read> Iterator for Rows<F, R> {
    type Item = Result<Result<F::Counted, Skipped>, RowError>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.csv.next_record()? {
            Ok((line, record)) => self.format.row(&self.csv, line, &record),
            Err(e) => Err(e),
        })
    }
}

/// Opens `path`, gunzipping it when it starts with gzip's magic bytes
/// (within [`MAX_RATIO`]).
pub fn open(path: &Path) -> std::io::Result<Box<dyn Read>> {
    let read = Counting::new(std::fs::File::open(path)?);
    let compressed = read.count.clone();
    let mut file = BufReader::new(read);
    let gzipped = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gzipped {
        Box::new(RatioBound::new(
            flate2::read::MultiGzDecoder::new(file),
            compressed,
        ))
    } else {
        Box::new(file)
    })
}

/// The most a compressed file (gzip, or a zip's entry) may expand, once
/// past [`RATIO_FREE_BYTES`]: the peers' exports compress 5 to 50 times
/// (dates, ids and times differ from row to row), while a decompression
/// bomb of repeated bytes expands about 1,000 times; refused before it
/// costs much.
pub const MAX_RATIO: u64 = 500;
/// What a compressed file may expand to before [`MAX_RATIO`] is checked
/// (a small file's ratio says little).
pub const RATIO_FREE_BYTES: u64 = 16 << 20;

/// Counts the bytes read through it (shared, to be read by a
/// [`RatioBound`] above a decompressor).
pub struct Counting<R> {
    inner: R,
    pub count: Rc<std::cell::Cell<u64>>,
}

impl<R> Counting<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            count: Rc::new(std::cell::Cell::new(0)),
        }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// A decompressor's output, failing once it passes [`RATIO_FREE_BYTES`]
/// and [`MAX_RATIO`] times the compressed bytes read so far.
pub struct RatioBound<R> {
    inner: R,
    compressed: Rc<std::cell::Cell<u64>>,
    out: u64,
    /// [`RATIO_FREE_BYTES`] (less in tests).
    free: u64,
}

impl<R> RatioBound<R> {
    pub fn new(inner: R, compressed: Rc<std::cell::Cell<u64>>) -> Self {
        Self {
            inner,
            compressed,
            out: 0,
            free: RATIO_FREE_BYTES,
        }
    }
}

impl<R: Read> Read for RatioBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out += n as u64;
        if self.out > self.free && self.out > self.compressed.get().saturating_mul(MAX_RATIO) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "it expands over {MAX_RATIO} times ({} bytes from {}): \
                     refused as a decompression bomb",
                    self.out,
                    self.compressed.get()
                ),
            ));
        }
        Ok(n)
    }
}

/// A row's page as a path of `site`: a path, or a full address on one of
/// its hosts (as the pixel takes a page named with the site's id).
pub fn site_path(
    site: &crate::storage::sites::Site,
    raw: &str,
) -> Result<crate::domain::PagePath, String> {
    use crate::domain::PageRef;
    match PageRef::parse(raw).map_err(|e| e.to_string())? {
        PageRef::Path(path) => Ok(path),
        PageRef::Url { host, path } if site.owns_host(&host) => Ok(path),
        PageRef::Url { host, .. } => Err(format!("{host} is not a host of {}", site.domain)),
    }
}

/// Passes a reader's bytes through while hashing them; the hash is
/// shared so it can be read once the reader has been consumed.
pub struct Hashing {
    inner: Box<dyn Read>,
    hasher: Rc<RefCell<blake3::Hasher>>,
}

impl Hashing {
    pub fn new(inner: Box<dyn Read>) -> (Self, Rc<RefCell<blake3::Hasher>>) {
        let hasher = Rc::new(RefCell::new(blake3::Hasher::new()));
        let reader = Self {
            inner,
            hasher: hasher.clone(),
        };
        (reader, hasher)
    }
}

impl Read for Hashing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.borrow_mut().update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &[u8]) -> Result<Vec<u64>, RowError> {
        let mut csv = CsvFile::open(text, "t.csv", &["a"], &[], |_| Ok(()))?;
        let mut lines = Vec::new();
        while let Some(next) = csv.next_record() {
            lines.push(next?.0);
        }
        Ok(lines)
    }

    #[test]
    fn a_record_over_the_bound_is_refused_on_the_line_it_starts_even_across_quoted_line_ends() {
        let long = "x".repeat(MAX_RECORD_BYTES as usize);
        let ok = format!("a,b\n1,{}\n2,3\n", &long[..long.len() - 10]);
        assert_eq!(records(ok.as_bytes()).unwrap(), vec![2, 3]);
        let over = format!("a,b\n1,2\n3,{long}\n4,5\n");
        let e = records(over.as_bytes()).unwrap_err();
        assert_eq!((e.line, e.column.as_str()), (3, ""), "{e}");
        assert!(
            e.to_string().starts_with("t.csv:3: a row over 64 KiB"),
            "{e}"
        );
        // Line ends inside quotes do not end the record.
        let quoted = format!("a,b\n1,\"{}\"\n", "y\n".repeat(MAX_RECORD_BYTES as usize));
        let e = records(quoted.as_bytes()).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    /// `data` gzipped, read back through a [`RatioBound`] that checks
    /// from 1 MiB on: what it read, or why it stopped.
    fn expand(data: &[u8]) -> std::io::Result<u64> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(data).unwrap();
        let packed = gz.finish().unwrap();
        let compressed = Counting::new(&packed[..]);
        let count = compressed.count.clone();
        let mut read = RatioBound::new(flate2::read::GzDecoder::new(compressed), count);
        read.free = 1 << 20;
        std::io::copy(&mut read, &mut std::io::sink())
    }

    #[test]
    fn a_stream_expanding_past_the_ratio_is_refused_and_a_plain_one_is_not() {
        let e = expand(&vec![b'\n'; 8 << 20]).unwrap_err();
        assert!(e.to_string().contains("decompression bomb"), "{e}");
        // Text that differs from line to line passes.
        let text: String = (0..200_000u64)
            .map(|i| format!("{i},{}\n", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect();
        assert_eq!(expand(text.as_bytes()).unwrap(), text.len() as u64);
    }

    #[test]
    fn dates_are_plain_and_within_the_window() {
        for good in [
            "2026-11-25",
            "2026-11-25T10:00:00Z",
            "2026-11-25 10:00:00+00",
        ] {
            assert!(starts_with_plain_date(good), "{good}");
        }
        for bad in [
            "+262142-12-31",
            "-0001-01-01",
            "-0044-03-15 10:00:00+00",
            "2026-1-5",
            "2026-01-5",
            "26-01-05",
            "2026-01-05x",
            "",
        ] {
            assert!(!starts_with_plain_date(bad), "{bad}");
        }
        let day = |s: &str| s.parse::<NaiveDate>().unwrap();
        assert!(day_in_window(day("1990-01-01")).is_ok());
        assert!(day_in_window(Utc::now().date_naive() + chrono::Days::new(1)).is_ok());
        assert!(day_in_window(day("1989-12-31")).is_err());
        assert!(day_in_window(day("0000-01-01")).is_err());
        assert!(day_in_window(Utc::now().date_naive() + chrono::Days::new(2)).is_err());
    }
}
