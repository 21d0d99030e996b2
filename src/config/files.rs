//! Bounded reads of the files a config names: the config file itself, `${file:PATH}` secrets
//! and `body_file`. Each has a size limit that is checked before the file is read and again
//! while reading (a file may grow in between), so a huge or endless file is refused instead of
//! filling memory. Secrets and bodies must be regular files: a FIFO would block `check`
//! forever and a device such as `/dev/zero` never ends.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest config file read.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// The largest file a `${file:PATH}` reference reads.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 << 10;
/// The largest `body_file` read.
pub const MAX_BODY_FILE_BYTES: u64 = 64 << 20;

/// `4 MiB`, `64 KiB`: how limits are named in messages.
pub fn show_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// Reads the config file, at most [`MAX_CONFIG_BYTES`]. Pipes are allowed (`check <(…)`),
/// but they too are read only up to the limit.
pub fn read_config(path: &Path) -> Result<String, String> {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.is_file()
        && meta.len() > MAX_CONFIG_BYTES
    {
        return Err(too_large("the config file", meta.len(), MAX_CONFIG_BYTES));
    }
    let file = File::open(path).map_err(|e| e.to_string())?;
    let bytes = read_at_most(file, "the config file", MAX_CONFIG_BYTES)?;
    String::from_utf8(bytes).map_err(|_| "the config file is not UTF-8 text".to_string())
}

/// Reads a regular file of at most `limit` bytes; `what` names it in messages. Anything that
/// is not a regular file is refused before it is read, and opened without blocking, so a FIFO
/// swapped in after the check cannot hang the caller either.
pub fn read_regular(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    regular(&meta, what, limit)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    regular(&file.metadata().map_err(|e| e.to_string())?, what, limit)?;
    read_at_most(file, what, limit)
}

fn regular(meta: &Metadata, what: &str, limit: u64) -> Result<(), String> {
    let t = meta.file_type();
    let kind = if t.is_file() {
        if meta.len() > limit {
            return Err(too_large(what, meta.len(), limit));
        }
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(format!("{what} must be a regular file, and this is {kind}"))
}

fn read_at_most(file: File, what: &str, limit: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{what} is larger than the limit of {}",
            show_bytes(limit)
        ));
    }
    Ok(bytes)
}

fn too_large(what: &str, len: u64, limit: u64) -> String {
    format!(
        "{what} is {len} bytes, over the limit of {}",
        show_bytes(limit)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_named_in_binary_units() {
        assert_eq!(show_bytes(MAX_CONFIG_BYTES), "4 MiB");
        assert_eq!(show_bytes(MAX_SECRET_FILE_BYTES), "64 KiB");
        assert_eq!(show_bytes(1000), "1000 bytes");
    }

    #[test]
    fn a_file_that_grows_past_the_limit_is_cut_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [b'x'; 11]).unwrap();
        let file = File::open(&path).unwrap();
        let err = read_at_most(file, "`f`", 10).unwrap_err();
        assert_eq!(err, "`f` is larger than the limit of 10 bytes");
        assert_eq!(read_regular(&path, "`f`", 11).unwrap().len(), 11);
    }
}
