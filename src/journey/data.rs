//! A journey's data file: a CSV with a header row, or a JSON array of objects, parsed once and
//! shared by every VU (rows are handed out by index, never copied), and the order rows are
//! taken in.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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

/// The parsed rows. `Debug` shows only the shape: the values may be credentials.
pub struct DataSet {
    pub columns: Vec<String>,
    rows: Vec<Box<[Box<str>]>>,
}

impl std::fmt::Debug for DataSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataSet")
            .field("columns", &self.columns)
            .field("rows", &self.rows.len())
            .finish()
    }
}

impl DataSet {
    /// Parses CSV (`json == false`, a header row first) or a JSON array of objects whose
    /// values are strings, numbers or booleans. Errors never quote a value.
    pub fn parse(bytes: &[u8], json: bool) -> Result<DataSet, String> {
        let set = if json {
            parse_json(bytes)?
        } else {
            parse_csv(bytes)?
        };
        if set.rows.is_empty() {
            return Err("the data file has no rows".into());
        }
        Ok(set)
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn row(&self, i: usize) -> Option<&[Box<str>]> {
        self.rows.get(i).map(|r| &r[..])
    }
}

fn parse_csv(bytes: &[u8]) -> Result<DataSet, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(bytes);
    let columns: Vec<String> = reader
        .headers()
        .map_err(|e| format!("the CSV header row: {}", csv_error(&e)))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    check_columns(&columns)?;
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| format!("CSV row {}: {}", i + 1, csv_error(&e)))?;
        rows.push(record.iter().map(Box::from).collect());
    }
    Ok(DataSet { columns, rows })
}

/// The csv crate's message, without the record's content.
fn csv_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields where the header has {expected_len}"),
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".into(),
        _ => "not valid CSV".into(),
    }
}

fn parse_json(bytes: &[u8]) -> Result<DataSet, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("not valid JSON (line {}, column {})", e.line(), e.column()))?;
    let serde_json::Value::Array(items) = value else {
        return Err("the JSON data file must be an array of objects".into());
    };
    let mut columns: Vec<String> = Vec::new();
    for item in &items {
        let serde_json::Value::Object(map) = item else {
            return Err("the JSON data file must be an array of objects".into());
        };
        for key in map.keys() {
            if !columns.contains(key) {
                columns.push(key.clone());
            }
        }
    }
    check_columns(&columns)?;
    let mut rows = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut row = Vec::with_capacity(columns.len());
        for c in &columns {
            let text = match item.get(c) {
                None | Some(serde_json::Value::Null) => String::new(),
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
                    v.to_string()
                }
                Some(_) => {
                    return Err(format!(
                        "row {}: `{c}` is an array or object; use strings, numbers or booleans",
                        i + 1
                    ));
                }
            };
            row.push(text.into_boxed_str());
        }
        rows.push(row.into_boxed_slice());
    }
    Ok(DataSet { columns, rows })
}

fn check_columns(columns: &[String]) -> Result<(), String> {
    for (i, c) in columns.iter().enumerate() {
        if c.is_empty() {
            return Err(format!("column {} has an empty name", i + 1));
        }
        if columns[..i].contains(c) {
            return Err(format!("column `{c}` appears twice"));
        }
    }
    Ok(())
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

    #[test]
    fn csv_and_json_give_the_same_rows() {
        let csv = DataSet::parse(b"user,password\nann,a1\nbob,\"b,2\"\n", false).unwrap();
        assert_eq!(csv.columns, ["user", "password"]);
        assert_eq!(csv.len(), 2);
        assert_eq!(&*csv.row(1).unwrap()[1], "b,2");
        let json = DataSet::parse(
            br#"[{"user":"ann","password":"a1"},{"user":"bob","n":3}]"#,
            true,
        )
        .unwrap();
        // serde_json's maps are sorted by key: columns come in first-seen, sorted order.
        assert_eq!(json.columns, ["password", "user", "n"]);
        assert_eq!(&*json.row(1).unwrap()[2], "3");
        assert_eq!(&*json.row(1).unwrap()[0], "");
    }

    #[test]
    fn bad_files_are_errors_that_quote_no_value() {
        let e = DataSet::parse(b"user,password\nann,hunter2,extra\n", false).unwrap_err();
        assert!(e.contains("3 fields") && !e.contains("hunter2"), "{e}");
        assert!(
            DataSet::parse(b"user\n", false)
                .unwrap_err()
                .contains("no rows")
        );
        assert!(
            DataSet::parse(b"a,a\n1,2\n", false)
                .unwrap_err()
                .contains("twice")
        );
        let e = DataSet::parse(br#"{"user":"x"}"#, true).unwrap_err();
        assert!(e.contains("array of objects"), "{e}");
        let e = DataSet::parse(br#"[{"user":"secret"#, true).unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(
            format!("{:?}", DataSet::parse(b"p\nhunter2\n", false).unwrap()).contains("rows: 1")
        );
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
