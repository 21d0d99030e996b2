//! A JSON data file: an array of objects whose values are strings, numbers, booleans or null,
//! streamed by `serde_json` straight into the set's shared buffer. No `serde_json::Value` is
//! built: keys go through one table of column ids (a hash map, so many distinct keys cost a
//! lookup each, not a scan of every column before them, and the key at each position of an
//! object is first compared with the previous object's there), and a row's values are appended
//! as they come, then sorted by column only when its keys came out of order.
//!
//! Errors keep `serde_json`'s line and column but never its message, which may quote a value;
//! where the error is ours, the message is stashed in the builder before serde sees it.

use super::{Builder, DataError, DataSet, MAX_COLUMNS};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashMap;
use std::fmt;

pub(super) fn parse(bytes: &[u8]) -> Result<DataSet, DataError> {
    let mut p = Parser::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result = Array(&mut p).deserialize(&mut de).and_then(|()| de.end());
    if let Err(e) = result {
        let message = p.fault.take().unwrap_or_else(|| match e.classify() {
            serde_json::error::Category::Data => {
                "the JSON data file must be an array of objects".to_string()
            }
            _ => "not valid JSON".to_string(),
        });
        return Err(DataError {
            line: (e.line() > 0).then_some(e.line() as u64),
            // serde_json says column 0 before the line's first character is consumed.
            column: (e.line() > 0).then_some(e.column().max(1) as u64),
            message,
        });
    }
    p.b.finish()
}

struct Parser {
    b: Builder,
    /// Column id by name, while parsing.
    index: HashMap<Box<str>, u32>,
    /// The last row (counted from 1) each column had a key in: a key twice in one object.
    seen: Vec<u64>,
    /// The previous row's columns in the order its keys came: files repeat one order, so the
    /// key at a position is checked against the column there before it is hashed.
    order: Vec<u32>,
    /// Where this row starts: its first cell, and its first byte of values.
    row_cells: usize,
    row_text: usize,
    /// Scratch for a row whose keys are not in column order: (column, value) to sort.
    scratch: Vec<(u32, String)>,
    fault: Option<String>,
}

impl Parser {
    fn new() -> Parser {
        Parser {
            b: Builder::new(true),
            index: HashMap::new(),
            seen: Vec::new(),
            order: Vec::new(),
            row_cells: 0,
            row_text: 0,
            scratch: Vec::new(),
            fault: None,
        }
    }

    fn fail<E: de::Error>(&mut self, message: String) -> E {
        self.fault = Some(message);
        E::custom("data file")
    }

    fn row(&self) -> u64 {
        self.b.rows as u64 + 1
    }

    /// The column id of the `nth` key of this row, made on first sight.
    fn column<E: de::Error>(&mut self, nth: usize, key: &str) -> Result<u32, E> {
        let hinted = self
            .order
            .get(nth)
            .copied()
            .filter(|&id| self.b.columns[id as usize] == key);
        let id = match hinted.or_else(|| self.index.get(key).copied()) {
            Some(id) => id,
            None => {
                if key.is_empty() {
                    let row = self.row();
                    return Err(self.fail(format!("row {row}: an empty key")));
                }
                if self.b.columns.len() >= MAX_COLUMNS {
                    return Err(self.fail(format!(
                        "more than {MAX_COLUMNS} distinct keys (columns) over the file's objects"
                    )));
                }
                let id = self.b.columns.len() as u32;
                self.b.columns.push(key.to_string());
                self.index.insert(key.into(), id);
                self.seen.push(0);
                id
            }
        };
        let row = self.row();
        if std::mem::replace(&mut self.seen[id as usize], row) == row {
            return Err(self.fail(format!("row {row}: key `{key}` twice in one object")));
        }
        match self.order.get_mut(nth) {
            Some(slot) => *slot = id,
            None => self.order.push(id),
        }
        Ok(id)
    }

    fn value<E: de::Error>(&mut self, col: u32, text: &str) -> Result<(), E> {
        self.b.push(col, text).map_err(E::custom)
    }

    /// Ends the row: its cells are sorted by column, which they already are when the keys
    /// came in the order the columns were first seen (most files).
    fn end_row<E: de::Error>(&mut self) -> Result<(), E> {
        let cols = &self.b.cols[self.row_cells..];
        if !cols.windows(2).all(|w| w[0] < w[1]) {
            self.scratch.clear();
            for k in self.row_cells..self.b.ends.len() {
                let start = k
                    .checked_sub(1)
                    .filter(|p| *p >= self.row_cells)
                    .map_or(self.row_text, |p| self.b.ends[p] as usize);
                let value = &self.b.text[start..self.b.ends[k] as usize];
                let value = String::from_utf8_lossy(value).into_owned();
                self.scratch.push((self.b.cols[k], value));
            }
            self.scratch.sort_unstable_by_key(|c| c.0);
            self.b.text.truncate(self.row_text);
            self.b.ends.truncate(self.row_cells);
            self.b.cols.truncate(self.row_cells);
            for (col, value) in std::mem::take(&mut self.scratch) {
                self.b.push(col, &value).map_err(E::custom)?;
            }
        }
        self.b.end_row().map_err(E::custom)?;
        self.row_cells = self.b.ends.len();
        self.row_text = self.b.text.len();
        Ok(())
    }
}

/// The top level: an array of rows.
struct Array<'p>(&'p mut Parser);

impl<'de> DeserializeSeed<'de> for Array<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Array<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Object(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

/// One row: an object.
struct Object<'p>(&'p mut Parser);

impl<'de> DeserializeSeed<'de> for Object<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Object<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut nth = 0;
        while let Some(col) = map.next_key_seed(Key(&mut *self.0, nth))? {
            map.next_value_seed(Cell(&mut *self.0, col))?;
            nth += 1;
        }
        self.0.end_row()
    }
}

/// The key at position `.1` of its object.
struct Key<'p>(&'p mut Parser, usize);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = u32;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u32, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = u32;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<u32, E> {
        self.0.column(self.1, key)
    }
}

/// A value: kept as text; `null` keeps nothing.
struct Cell<'p>(&'p mut Parser, u32);

impl<'de> DeserializeSeed<'de> for Cell<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Cell<'_> {
    fn nested<E: de::Error>(self) -> Result<(), E> {
        let (row, name) = (self.0.row(), &self.0.b.columns[self.1 as usize]);
        let message =
            format!("row {row}: `{name}` is an array or object; use strings, numbers or booleans");
        Err(self.0.fail(message))
    }
}

impl<'de> Visitor<'de> for Cell<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.value(self.1, v)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.value(self.1, if v { "true" } else { "false" })
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.value(self.1, itoa::Buffer::new().format(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.value(self.1, itoa::Buffer::new().format(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // As `serde_json::Value` writes a float (`1000.0`, `1e300`); JSON has no NaN.
        let text = serde_json::Number::from_f64(v).map(|n| n.to_string());
        self.0.value(self.1, text.as_deref().unwrap_or(""))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.nested()
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.nested()
    }
}
