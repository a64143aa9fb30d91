//! One way to read a file the user names (a shape, the site file, a topology XML): a
//! regular file only, its size checked before a byte is read, at most a stated number of
//! bytes. A FIFO, a device or `/dev/zero` is refused at once with a line saying so, never
//! read until it ends (a FIFO with no writer would block forever, `/dev/zero` never ends).
//! A helper every stage may use; it knows no stage's error type.

use std::io::Read;
use std::path::Path;

/// The largest shape file read: a shape is a few lines of YAML.
pub const MAX_SHAPE_BYTES: usize = 64 * 1024;

/// Why a file could not be read, as the end of a message ("cannot read X: ...").
pub type Why = String;

/// Whether `meta` is a regular file's; `Err` says what it is instead.
fn check_kind(meta: &std::fs::Metadata) -> Result<(), Why> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if meta.is_file() {
        return Ok(());
    }
    Err(if kind.is_dir() {
        "it is a directory; give a file inside it".into()
    } else if kind.is_fifo() {
        "it is a FIFO (a named pipe), not a file; give a regular file".into()
    } else if kind.is_char_device() || kind.is_block_device() {
        "it is a device, not a file; give a regular file".into()
    } else {
        "it is not a regular file".into()
    })
}

/// Whether `path` names a regular file (following links); `Err` says what it is instead.
pub fn regular(path: &Path) -> Result<std::fs::Metadata, Why> {
    let meta = std::fs::metadata(path).map_err(|e| reason(&e))?;
    check_kind(&meta)?;
    Ok(meta)
}

/// The bytes of the regular file `path`, when it has at most `max` of them. The file is
/// opened without blocking and what was opened is checked (not the path, which may be
/// swapped for a FIFO between a look and the `open`), then read.
pub fn read_bounded(path: &Path, max: usize) -> Result<Vec<u8>, Why> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| reason(&e))?;
    let meta = file.metadata().map_err(|e| reason(&e))?;
    check_kind(&meta)?;
    if meta.len() > max as u64 {
        return Err(too_large(max));
    }
    let bytes = read_sized(file, meta.len(), max as u64).map_err(|e| reason(&e))?;
    // It may have grown since the `stat`.
    if bytes.len() > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

/// The bytes of a regular file `size` bytes long when it was `stat`ed, at most `max` and
/// one more (a caller says a file over `max` is too large): one `read` where it still has
/// that size. `read_to_end` asks again for the file's end, a system call more for each of
/// a warm launch's shape, cache entry and shared view; a file that grew or shrank since
/// (or a kernel file, `stat`ed at 0 bytes) is read to its end.
pub fn read_sized(file: impl Read, size: u64, max: u64) -> std::io::Result<Vec<u8>> {
    let mut file = file.take(max.saturating_add(1));
    let first = usize::try_from(size.min(max)).unwrap_or(0);
    let mut bytes = vec![0; first + 1];
    let n = loop {
        match file.read(&mut bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    bytes.truncate(n);
    if n != first {
        file.read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

fn too_large(max: usize) -> Why {
    format!("it is larger than {} KiB", max / 1024)
}

/// An I/O error as the end of a message, saying what to check.
pub fn reason(e: &std::io::Error) -> Why {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file; check the path".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied; check the file's mode".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that counts its `read` calls.
    struct Counted<'a>(&'a [u8], usize);

    impl Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.1 += 1;
            self.0.read(buf)
        }
    }

    #[test]
    fn a_file_of_its_stat_size_is_read_in_one_call() {
        let text = b"resources: []\n";
        let mut one = Counted(text, 0);
        assert_eq!(read_sized(&mut one, 14, 100).unwrap(), text);
        assert_eq!(one.1, 1, "no second read for the end");
        // Grown or shrunk since the stat, or a kernel file of size 0: read to its end.
        for size in [0, 5, 13, 15, 99] {
            assert_eq!(
                read_sized(Counted(text, 0), size, 100).unwrap(),
                text,
                "{size}"
            );
        }
        // At most `max` and one more byte, whatever the stat said.
        assert_eq!(read_sized(Counted(text, 0), 14, 4).unwrap().len(), 5);
        assert_eq!(read_sized(Counted(text, 0), 3, 4).unwrap().len(), 5);
        assert_eq!(read_sized(Counted(b"", 0), 0, 4).unwrap(), b"");
    }

    #[test]
    fn only_regular_files_of_a_bounded_size_are_read() {
        let dir = std::env::temp_dir().join(format!("binder-input-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.yaml");
        std::fs::write(&file, "resources: []\n").unwrap();
        assert_eq!(read_bounded(&file, 100).unwrap(), b"resources: []\n");
        assert!(read_bounded(&file, 4).unwrap_err().contains("larger than"));
        assert!(read_bounded(&dir, 100).unwrap_err().contains("directory"));
        // A FIFO with no writer is refused at once, not waited on.
        let fifo = dir.join("fifo");
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(read_bounded(&fifo, 100).unwrap_err().contains("FIFO"));
        }
        // /dev/zero never ends: refused as a device, before a byte is read.
        assert!(read_bounded(Path::new("/dev/zero"), 100)
            .unwrap_err()
            .contains("device"));
        assert!(read_bounded(&dir.join("none"), 100)
            .unwrap_err()
            .starts_with("no such file"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
