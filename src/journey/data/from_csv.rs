//! A CSV data file: a header row of column names, then rows of as many fields, read one record
//! at a time into the set's shared buffer (one reused record, never a value per allocation).

use super::{Builder, DataError, DataSet, MAX_COLUMNS};
use std::collections::HashSet;

pub(super) fn parse(bytes: &[u8]) -> Result<DataSet, DataError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(false)
        .from_reader(bytes);
    let mut record = csv::StringRecord::new();
    let mut b = Builder::new(false);
    let header = |message: String| DataError {
        line: Some(1),
        column: None,
        message: format!("the header row: {message}"),
    };
    match reader.read_record(&mut record) {
        Ok(true) => {}
        Ok(false) => return Err(DataError::whole("the data file is empty")),
        Err(e) => return Err(header(csv_error(&e))),
    }
    if record.len() > MAX_COLUMNS {
        return Err(header(format!(
            "{} columns, more than {MAX_COLUMNS}",
            record.len()
        )));
    }
    let mut names = HashSet::with_capacity(record.len());
    for (i, name) in record.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() {
            return Err(header(format!("column {} has an empty name", i + 1)));
        }
        if !names.insert(name) {
            return Err(header(format!("column `{name}` appears twice")));
        }
        b.columns.push(name.to_string());
    }
    drop(names);
    let start_line = |e: &csv::Error| e.position().map(csv::Position::line);
    let mut row = 0u64;
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                return Err(DataError {
                    line: start_line(&e),
                    column: None,
                    message: format!("row {}: {}", row + 1, csv_error(&e)),
                });
            }
        }
        row += 1;
        for field in record.iter() {
            b.push(0, field).map_err(DataError::whole)?;
        }
        b.end_row().map_err(DataError::whole)?;
    }
    Ok(b.finish())
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
