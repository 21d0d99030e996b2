//! A journey's data file: a CSV with a header row, or a JSON array of objects, parsed once and
//! shared by every VU (rows are handed out by index, never copied), and the order rows are
//! taken in.
//!
//! Rows are stored compactly (issue 30, items 2 and 3): every value of the file back to back in
//! one string, the end of each value as a `u32`, and the column names once per file. A CSV (and
//! a JSON file whose objects all have every key) is dense: row `i`'s values are cells
//! `i × columns ..`. JSON objects with differing keys are sparse: each row is a run of (column,
//! value) cells sorted by column, so a missing key costs nothing and a row with many keys is
//! searched by bisection. Memory is linear in the file: the rows keep at most about 4 bytes per
//! byte of file (a CSV of empty fields: an offset per one-byte `,`), 5 with the file while it
//! is parsed (`bench/data_memory.py`), and the distinct columns are capped at [`MAX_COLUMNS`]
//! (a column name costs a `String`, and a hash-table entry while a JSON file is parsed).

mod from_csv;
mod from_json;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The most distinct columns (CSV header fields, JSON keys over every object) a data file may
/// have.
pub const MAX_COLUMNS: usize = 100_000;

/// How rows are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// One shared cursor that wraps around.
    Sequential,
    /// Any row, each time.
    Random,
    /// Each row at most once; the run ends when they are used up.
    Unique,
}

impl Order {
    pub fn parse(s: &str) -> Option<Order> {
        match s {
            "sequential" => Some(Order::Sequential),
            "random" => Some(Order::Random),
            "unique" => Some(Order::Unique),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Order::Sequential => "sequential",
            Order::Random => "random",
            Order::Unique => "unique",
        }
    }
}

/// Why a data file was refused, and where in it (1-based line and column, when known). The
/// message never quotes a value: values may be credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataError {
    pub line: Option<u64>,
    pub column: Option<u64>,
    pub message: String,
}

impl DataError {
    fn whole(message: impl Into<String>) -> DataError {
        DataError {
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for DataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

/// The parsed rows. `Debug` shows only the shape: the values may be credentials.
pub struct DataSet {
    columns: Vec<String>,
    /// Every value, back to back.
    text: Box<str>,
    /// Where each cell's value ends in `text`; it starts where the cell before it ends.
    ends: Box<[u32]>,
    rows: Rows,
}

enum Rows {
    /// Every row has every column: row `i` is cells `i × columns .. (i + 1) × columns`.
    Dense(usize),
    /// Rows of differing columns: row `i` is cells `ends[i - 1] .. ends[i]` (0 for the first),
    /// sorted by column; `cols` holds each cell's column.
    Sparse { ends: Box<[u32]>, cols: Box<[u32]> },
}

impl std::fmt::Debug for DataSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataSet")
            .field("columns", &self.columns.len())
            .field("rows", &self.len())
            .finish()
    }
}

impl DataSet {
    /// Parses CSV (`json == false`, a header row first) or a JSON array of objects whose
    /// values are strings, numbers, booleans or null (an empty value). Errors never quote a
    /// value.
    pub fn parse(bytes: &[u8], json: bool) -> Result<DataSet, DataError> {
        let set = if json {
            from_json::parse(bytes)?
        } else {
            from_csv::parse(bytes)?
        };
        if set.is_empty() {
            return Err(DataError::whole("the data file has no rows"));
        }
        Ok(set)
    }

    /// The column names, in the order they first appear in the file.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    pub fn len(&self) -> usize {
        match &self.rows {
            Rows::Dense(n) => *n,
            Rows::Sparse { ends, .. } => ends.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn row(&self, i: usize) -> Option<Row<'_>> {
        let (first, last) = match &self.rows {
            Rows::Dense(n) if i < *n => (i * self.columns.len(), (i + 1) * self.columns.len()),
            Rows::Sparse { ends, .. } if i < ends.len() => (
                i.checked_sub(1).map_or(0, |p| ends[p] as usize),
                ends[i] as usize,
            ),
            _ => return None,
        };
        Some(Row {
            set: self,
            first,
            last,
        })
    }

    /// The bytes the rows take on the heap (values, offsets, column names), for tests and
    /// benchmarks that hold memory to a multiple of the file's size.
    pub fn heap_bytes(&self) -> usize {
        let names: usize = self.columns.iter().map(|c| c.capacity() + 24).sum();
        let sparse = match &self.rows {
            Rows::Dense(_) => 0,
            Rows::Sparse { ends, cols } => 4 * (ends.len() + cols.len()),
        };
        self.text.len() + 4 * self.ends.len() + names + sparse
    }

    fn cell(&self, k: usize) -> &str {
        let start = k.checked_sub(1).map_or(0, |p| self.ends[p] as usize);
        self.text.get(start..self.ends[k] as usize).unwrap_or("")
    }
}

/// One row of a [`DataSet`]: its values by column index.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    set: &'a DataSet,
    first: usize,
    last: usize,
}

impl<'a> Row<'a> {
    /// The value in column `col`; `None` when this row has none (a JSON object without the
    /// key, or with `null`).
    pub fn get(&self, col: usize) -> Option<&'a str> {
        let k = match &self.set.rows {
            Rows::Dense(_) => (col < self.last - self.first).then_some(self.first + col)?,
            Rows::Sparse { cols, .. } => {
                let col = u32::try_from(col).ok()?;
                self.first + cols[self.first..self.last].binary_search(&col).ok()?
            }
        };
        Some(self.set.cell(k))
    }

    /// Every value this row has, in column order.
    pub fn values(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let set = self.set;
        (self.first..self.last).map(move |k| set.cell(k))
    }
}

impl std::fmt::Debug for Row<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Row({} values)", self.last - self.first)
    }
}

/// Collects cells as a parser finds them. Dense builders (CSV) keep only the values and their
/// ends; sparse ones (JSON) also each cell's column and each row's end.
struct Builder {
    columns: Vec<String>,
    text: Vec<u8>,
    ends: Vec<u32>,
    sparse: bool,
    cols: Vec<u32>,
    row_ends: Vec<u32>,
    rows: usize,
}

/// Past `u32` offsets: cannot happen under the file-size limit, but is an error, not a wrap.
const TOO_BIG: &str = "the data file's values are over 4 GiB";

impl Builder {
    fn new(sparse: bool) -> Builder {
        Builder {
            columns: Vec::new(),
            text: Vec::new(),
            ends: Vec::new(),
            sparse,
            cols: Vec::new(),
            row_ends: Vec::new(),
            rows: 0,
        }
    }

    /// Appends a value to the current row, in column order for a sparse builder.
    fn push(&mut self, col: u32, value: &str) -> Result<(), &'static str> {
        self.text.extend_from_slice(value.as_bytes());
        self.ends
            .push(u32::try_from(self.text.len()).map_err(|_| TOO_BIG)?);
        if self.sparse {
            self.cols.push(col);
        }
        Ok(())
    }

    fn end_row(&mut self) -> Result<(), &'static str> {
        self.rows += 1;
        if self.sparse {
            self.row_ends
                .push(u32::try_from(self.ends.len()).map_err(|_| TOO_BIG)?);
        }
        Ok(())
    }

    fn finish(self) -> Result<DataSet, DataError> {
        let full = self.ends.len() == self.rows * self.columns.len();
        // A sparse row holds each column at most once, so as many cells as rows × columns
        // means every row has every column, in order: the file is dense after all.
        let rows = if self.sparse && !full {
            Rows::Sparse {
                ends: self.row_ends.into_boxed_slice(),
                cols: self.cols.into_boxed_slice(),
            }
        } else {
            Rows::Dense(self.rows)
        };
        let mut columns = self.columns;
        columns.shrink_to_fit();
        // The parsers checked each value; this is one more pass, not a way in for bad bytes.
        let text = String::from_utf8(self.text)
            .map_err(|_| DataError::whole("the data file is not valid UTF-8"))?;
        Ok(DataSet {
            columns,
            text: text.into_boxed_str(),
            ends: self.ends.into_boxed_slice(),
            rows,
        })
    }
}

/// Hands out rows in an [`Order`]; one per run, shared by its VUs.
#[derive(Debug)]
pub struct Cursor {
    order: Order,
    len: u64,
    next: AtomicU64,
}

impl Cursor {
    pub fn new(order: Order, len: usize) -> Cursor {
        Cursor {
            order,
            len: len as u64,
            next: AtomicU64::new(0),
        }
    }

    /// The next row's index, or `None` when `unique` rows are used up.
    pub fn take(&self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        match self.order {
            Order::Sequential => Some((self.next.fetch_add(1, Relaxed) % self.len) as usize),
            Order::Random => Some(rand::random_range(0..self.len) as usize),
            Order::Unique => {
                let i = self.next.fetch_add(1, Relaxed);
                // Saturate rather than wrap if callers keep asking after the end.
                if i >= self.len {
                    self.next.store(self.len, Relaxed);
                    None
                } else {
                    Some(i as usize)
                }
            }
        }
    }

    /// How many rows were handed out (at most the row count for `unique`).
    pub fn taken(&self) -> u64 {
        self.next.load(Relaxed)
    }

    pub fn order(&self) -> Order {
        self.order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(set: &DataSet, i: usize) -> Vec<Option<&str>> {
        let row = set.row(i).unwrap();
        (0..set.columns().len()).map(|c| row.get(c)).collect()
    }

    #[test]
    fn csv_and_json_give_the_same_rows() {
        let csv = DataSet::parse(b"user,password\nann,a1\nbob,\"b,2\"\n", false).unwrap();
        assert_eq!(csv.columns(), ["user", "password"]);
        assert_eq!(csv.len(), 2);
        assert_eq!(values(&csv, 1), [Some("bob"), Some("b,2")]);
        assert!(csv.row(2).is_none());
        let json = DataSet::parse(
            br#"[{"user":"ann","password":"a1"},{"user":"bob","n":3,"f":1.5,"b":true,"z":null}]"#,
            true,
        )
        .unwrap();
        // Columns in the order they first appear; a missing key or null is no value.
        assert_eq!(json.columns(), ["user", "password", "n", "f", "b", "z"]);
        assert_eq!(
            values(&json, 0),
            [Some("ann"), Some("a1"), None, None, None, None]
        );
        assert_eq!(
            values(&json, 1),
            [
                Some("bob"),
                None,
                Some("3"),
                Some("1.5"),
                Some("true"),
                None
            ]
        );
        // Keys in another order in each object: the same columns.
        let dense = DataSet::parse(br#"[{"a":"1","b":"2"},{"b":"4","a":"3"}]"#, true).unwrap();
        assert!(matches!(dense.rows, Rows::Dense(2)));
        assert_eq!(values(&dense, 1), [Some("3"), Some("4")]);
    }

    #[test]
    fn csv_line_ends_blank_lines_and_a_bom() {
        let csv = DataSet::parse(b"\xef\xbb\xbfa,b\r\n1,\"x\r\ny\"\r\n\r\n\n3,4", false).unwrap();
        assert_eq!(csv.columns(), ["a", "b"]);
        assert_eq!(csv.len(), 2);
        assert_eq!(values(&csv, 0), [Some("1"), Some("x\r\ny")]);
        assert_eq!(values(&csv, 1), [Some("3"), Some("4")]);
        // A row after blank lines and a quoted line end is still found by its line.
        let e = DataSet::parse(b"a,b\n1,\"2\n\"\n\n3\n", false).unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.starts_with("row 2: 1 field where"), "{e}");
    }

    #[test]
    fn keys_out_of_order_are_sorted_within_their_row() {
        let json = DataSet::parse(
            br#"[{"c":"1","a":"2"},{"b":"3","c":"4","a":"5"},{"a":"6"},{}]"#,
            true,
        )
        .unwrap();
        assert_eq!(json.columns(), ["c", "a", "b"]);
        assert!(matches!(json.rows, Rows::Sparse { .. }));
        assert_eq!(values(&json, 0), [Some("1"), Some("2"), None]);
        assert_eq!(values(&json, 1), [Some("4"), Some("5"), Some("3")]);
        assert_eq!(values(&json, 2), [None, Some("6"), None]);
        assert_eq!(values(&json, 3), [None, None, None]);
    }

    #[test]
    fn numbers_read_as_serde_json_writes_them() {
        let json = DataSet::parse(
            br#"[{"a":-7,"b":18446744073709551615,"c":1e3,"d":0.1,"e":"\u00e9\n"}]"#,
            true,
        )
        .unwrap();
        assert_eq!(
            values(&json, 0),
            [
                Some("-7"),
                Some("18446744073709551615"),
                Some("1000.0"),
                Some("0.1"),
                Some("é\n")
            ]
        );
    }

    #[test]
    fn bad_files_are_positioned_errors_that_quote_no_value() {
        let e = DataSet::parse(b"user,password\nann,a1\nbob,hunter2,extra\n", false).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.message.contains("3 fields") && !e.to_string().contains("hunter2"),
            "{e}"
        );
        assert!(
            DataSet::parse(b"user\n", false)
                .unwrap_err()
                .message
                .contains("no rows")
        );
        let e = DataSet::parse(b"a,b,a\n1,2,3\n", false).unwrap_err();
        assert!(e.message.contains("`a` appears twice"), "{e}");
        assert_eq!(e.line, Some(1));
        let e = DataSet::parse(b"a,\n1,2\n", false).unwrap_err();
        assert!(e.message.contains("column 2 has an empty name"), "{e}");
        let e = DataSet::parse(b"a\n\xff\n", false).unwrap_err();
        assert!(e.message.contains("UTF-8") && e.line == Some(2), "{e}");
        for (input, line, col, wanted) in [
            (&br#"{"user":"hunter2"}"#[..], 1, 1, "array of objects"),
            (br#"["hunter2"]"#, 1, 10, "array of objects"),
            (br#"[{"user":"hunter2"#, 1, 17, "not valid JSON"),
            (
                b"[{\"a\":1},\n {\"a\":[\"hunter2\"]}]",
                2,
                7,
                "row 2: `a` is an array",
            ),
            (
                b"[{\"a\":1},\n {\"b\":{\"x\":1}}]",
                2,
                7,
                "row 2: `b` is an array",
            ),
            (
                b"[{\"a\":1},\n {\"a\":2,\"a\":\"hunter2\"}]",
                2,
                11,
                "row 2: key `a` twice",
            ),
            (
                b"[{\"a\":1},\n {\"\":\"hunter2\"}]",
                2,
                4,
                "row 2: an empty key",
            ),
            (br#"[{"a":1}] "hunter2""#, 1, 11, "not valid JSON"),
            (b"[]", 0, 0, "no rows"),
        ] {
            let e = DataSet::parse(input, true).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(wanted), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
            if line > 0 {
                assert_eq!((e.line, e.column), (Some(line), Some(col)), "{text}");
            }
        }
        assert!(
            format!("{:?}", DataSet::parse(b"p\nhunter2\n", false).unwrap()).contains("rows: 1")
        );
    }

    #[test]
    fn distinct_columns_are_capped_with_the_line_of_the_first_one_past() {
        let mut json = String::from("[");
        for i in 0..=MAX_COLUMNS {
            json.push_str(&format!("{{\"k{i}\":1}},\n"));
        }
        json.push_str("{}]");
        let e = DataSet::parse(json.as_bytes(), true).unwrap_err();
        assert_eq!(e.line, Some(MAX_COLUMNS as u64 + 1), "{e}");
        assert!(e.message.contains("more than 100000 distinct"), "{e}");
        let header: Vec<String> = (0..=MAX_COLUMNS).map(|i| format!("c{i}")).collect();
        let csv = format!("{}\n", header.join(","));
        let e = DataSet::parse(csv.as_bytes(), false).unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("more than 100000"), "{e}");
    }

    #[test]
    fn memory_is_a_small_multiple_of_the_file() {
        // One one-byte value per row: the shape where per-row overhead shows most.
        let mut csv = String::from("v\n");
        let mut json = String::from("[");
        let mut keys = String::from("[");
        for i in 0..20_000 {
            csv.push_str("x\n");
            json.push_str(if i == 0 { "{\"v\":1}" } else { ",{\"v\":1}" });
            keys.push_str(&format!("{}{{\"k{i}\":1}}", if i == 0 { "" } else { "," }));
        }
        json.push(']');
        keys.push(']');
        for (text, is_json) in [(&csv, false), (&json, true)] {
            let set = DataSet::parse(text.as_bytes(), is_json).unwrap();
            assert!(set.heap_bytes() <= 3 * text.len(), "{}", set.heap_bytes());
        }
        // Every row a new key: linear in the keys, not rows × keys.
        let set = DataSet::parse(keys.as_bytes(), true).unwrap();
        assert_eq!(set.columns().len(), 20_000);
        assert!(matches!(set.rows, Rows::Sparse { .. }));
        assert!(set.heap_bytes() <= 8 * keys.len(), "{}", set.heap_bytes());
        assert_eq!(set.row(19_999).unwrap().get(19_999), Some("1"));
        assert_eq!(set.row(19_999).unwrap().get(0), None);
    }

    #[test]
    fn cursors_wrap_cover_and_run_out() {
        let seq = Cursor::new(Order::Sequential, 3);
        let taken: Vec<_> = (0..7).map(|_| seq.take().unwrap()).collect();
        assert_eq!(taken, [0, 1, 2, 0, 1, 2, 0]);
        let unique = Cursor::new(Order::Unique, 2);
        assert_eq!(
            (0..4).map(|_| unique.take()).collect::<Vec<_>>(),
            [Some(0), Some(1), None, None]
        );
        assert_eq!(unique.taken(), 2);
        let random = Cursor::new(Order::Random, 5);
        let mut seen = [false; 5];
        for _ in 0..500 {
            seen[random.take().unwrap()] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
