//! A JSON data file: an array of objects whose values are strings, numbers, booleans or null,
//! streamed by `serde_json` straight into the set's shared buffer. No `serde_json::Value` is
//! built: keys go through one table of column ids (a hash map, so many distinct keys cost a
//! lookup each, not a scan of every column before them), and a row's values are sorted by
//! column in a reused scratch buffer before they are appended.
//!
//! Errors keep `serde_json`'s line and column but never its message, which may quote a value;
//! where the error is ours, the message is stashed in the builder before serde sees it.

use super::{Builder, DataError, DataSet, MAX_COLUMNS};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashMap;
use std::fmt;
use std::fmt::Write as _;

pub(super) fn parse(bytes: &[u8]) -> Result<DataSet, DataError> {
    let mut p = Parser {
        b: Builder::new(true),
        index: HashMap::new(),
        seen: Vec::new(),
        scratch: Vec::new(),
        scratch_text: String::new(),
        fault: None,
    };
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
    Ok(p.b.finish())
}

struct Parser {
    b: Builder,
    /// Column id by name, while parsing.
    index: HashMap<Box<str>, u32>,
    /// The last row (counted from 1) each column had a key in: a key twice in one object.
    seen: Vec<u64>,
    /// This row's cells, (column, start, end in `scratch_text`), sorted before they are kept.
    scratch: Vec<(u32, usize, usize)>,
    scratch_text: String,
    fault: Option<String>,
}

impl Parser {
    fn fail<E: de::Error>(&mut self, message: String) -> E {
        self.fault = Some(message);
        E::custom("data file")
    }

    fn row(&self) -> u64 {
        self.b.rows as u64 + 1
    }

    /// The column id of `key`, made on first sight.
    fn column<E: de::Error>(&mut self, key: &str) -> Result<u32, E> {
        let id = match self.index.get(key) {
            Some(id) => *id,
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
        Ok(id)
    }

    fn value(&mut self, col: u32, text: impl fmt::Display) {
        let start = self.scratch_text.len();
        let _ = write!(self.scratch_text, "{text}");
        self.scratch.push((col, start, self.scratch_text.len()));
    }

    /// Moves the row from the scratch buffers into the set, sorted by column.
    fn end_row<E: de::Error>(&mut self) -> Result<(), E> {
        self.scratch.sort_unstable_by_key(|c| c.0);
        for &(col, start, end) in &self.scratch {
            let text = self.scratch_text.get(start..end).unwrap_or("");
            self.b.push(col, text).map_err(E::custom)?;
        }
        self.scratch.clear();
        self.scratch_text.clear();
        self.b.end_row().map_err(E::custom)
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
        while let Some(col) = map.next_key_seed(Key(&mut *self.0))? {
            map.next_value_seed(Cell(&mut *self.0, col))?;
        }
        self.0.end_row()
    }
}

struct Key<'p>(&'p mut Parser);

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
        self.0.column(key)
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
        self.0.value(self.1, v);
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.value(self.1, v);
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.value(self.1, v);
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.value(self.1, v);
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // As `serde_json::Value` writes a float (`1000.0`, `1e300`); JSON has no NaN.
        match serde_json::Number::from_f64(v) {
            Some(n) => self.0.value(self.1, n),
            None => self.0.value(self.1, ""),
        }
        Ok(())
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
