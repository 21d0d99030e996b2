//! A CSV data file: a header row of column names, then rows of as many fields (RFC 4180 quotes,
//! `\n` or `\r\n` line ends, blank lines skipped, a UTF-8 BOM dropped).
//!
//! `csv-core` (the `csv` crate's own parser, without its I/O and record types) unescapes every
//! field straight into the set's value buffer and gives each field's end: the buffer is the
//! file's size at most (unescaping only removes bytes), allocated once, so a row costs its
//! values and a `u32` per field, never an allocation.

use super::{Builder, DataError, DataSet, MAX_COLUMNS};
use csv_core::ReadRecordResult;
use std::collections::HashSet;

pub(super) fn parse(bytes: &[u8]) -> Result<DataSet, DataError> {
    let mut reader = csv_core::Reader::new();
    let mut b = Builder::new(false);
    // Zeroed lazily by the kernel: pages the values never reach are never touched.
    b.text = vec![0; bytes.len()];
    let mut used = 0;
    let mut input = bytes;
    // Each field's end in its record, as csv-core counts them.
    let mut ends: Vec<usize> = vec![0; 16];
    let mut header = true;
    loop {
        // The record's first line: csv-core counts every `\n`, and skips blank lines before a
        // record as part of reading it.
        let blank = input
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .filter(|b| **b == b'\n')
            .count();
        let line = reader.line() + blank as u64;
        let at = |message: String| DataError {
            line: Some(line),
            column: None,
            message,
        };
        let start = used;
        let mut fields = 0;
        let end = loop {
            let (result, read, wrote, ended) =
                reader.read_record(input, &mut b.text[used..], &mut ends[fields..]);
            input = &input[read..];
            used += wrote;
            fields += ended;
            match result {
                ReadRecordResult::InputEmpty => {}
                ReadRecordResult::OutputEndsFull if ends.len() <= MAX_COLUMNS => {
                    ends.resize((ends.len() * 2).min(MAX_COLUMNS + 1), 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    return Err(at(format!("more than {MAX_COLUMNS} fields in one row")));
                }
                // Cannot happen: values are never longer than the file.
                ReadRecordResult::OutputFull => {
                    return Err(at("the values outgrew the file".into()));
                }
                ReadRecordResult::Record => break false,
                ReadRecordResult::End => break true,
            }
        };
        if end {
            break;
        }
        if fields > MAX_COLUMNS {
            return Err(at(format!("more than {MAX_COLUMNS} fields in one row")));
        }
        let record = &b.text[start..used];
        let Ok(record) = std::str::from_utf8(record) else {
            return Err(at(match header {
                true => "the header row is not valid UTF-8".into(),
                false => format!("row {}: not valid UTF-8", b.rows + 1),
            }));
        };
        let field_ends = &ends[..fields];
        if header {
            header = false;
            b.columns =
                names(record, field_ends).map_err(|m| at(format!("the header row: {m}")))?;
            // The names are kept apart; the buffer holds only values.
            used = start;
            continue;
        }
        if fields != b.columns.len() {
            return Err(at(format!(
                "row {}: {fields} field{} where the header has {}",
                b.rows + 1,
                if fields == 1 { "" } else { "s" },
                b.columns.len()
            )));
        }
        for end in field_ends {
            let end = u32::try_from(start + end).map_err(|_| at(super::TOO_BIG.into()))?;
            b.ends.push(end);
        }
        b.rows += 1;
    }
    b.text.truncate(used);
    if header {
        return Err(DataError::whole("the data file is empty"));
    }
    b.finish()
}

/// The header's names, trimmed: none empty, none twice.
fn names(record: &str, ends: &[usize]) -> Result<Vec<String>, String> {
    let mut names = Vec::with_capacity(ends.len());
    let mut seen = HashSet::with_capacity(ends.len());
    let mut start = 0;
    for (i, &end) in ends.iter().enumerate() {
        let name = record.get(start..end).unwrap_or("").trim();
        start = end;
        if name.is_empty() {
            return Err(format!("column {} has an empty name", i + 1));
        }
        if !seen.insert(name) {
            return Err(format!("column `{name}` appears twice"));
        }
        names.push(name.to_string());
    }
    Ok(names)
}
