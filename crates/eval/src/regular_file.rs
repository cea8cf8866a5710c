//! Reading a file `eval` did not write — a haystack's, an external arm's answer —
//! as `--context` files are read: only a regular file (a device such as `/dev/zero`
//! never ends, a FIFO may never get a writer), opened with `O_NONBLOCK` so that not
//! even the open waits, optionally refusing a symbolic link (`O_NOFOLLOW`), checked on
//! the open descriptor (so a file swapped after a check is caught), and read at most
//! one byte past its bound.

use std::fs::{FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read; each reads after the file's name ("… is a FIFO").
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// It is a symbolic link, and links were refused.
    #[error("is a symbolic link")]
    Link,
    /// It is a device, a FIFO or a socket.
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    /// It holds more than the bound.
    #[error("is over {0} bytes")]
    TooLarge(u64),
    /// It could not be opened or read (`NotFound` included).
    #[error("could not be read: {0}")]
    Io(#[from] io::Error),
}

/// The bytes of the regular file `path`, at most `max_bytes` of them; a symbolic link
/// is followed only when `follow_links`.
pub fn read_regular_file(
    path: &Path,
    follow_links: bool,
    max_bytes: u64,
) -> Result<Vec<u8>, Refused> {
    let mut flags = libc::O_NONBLOCK;
    if !follow_links {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(file) => file,
        Err(error) if !follow_links && error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Refused::Link)
        }
        Err(error) => return Err(Refused::Io(error)),
    };
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(Refused::NotRegular(kind_of(kind)));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(Refused::TooLarge(max_bytes));
    }
    Ok(bytes)
}

/// What a file that is not a regular file is, for messages (`a FIFO`, …).
pub fn kind_of(kind: FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_bound_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_regular_file(&file, false, 10).unwrap(), b"0123456789");
        assert!(matches!(
            read_regular_file(&file, false, 9),
            Err(Refused::TooLarge(9))
        ));
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read_regular_file(&link, false, 10),
            Err(Refused::Link)
        ));
        let followed = read_regular_file(&link, true, 10).unwrap_err();
        assert_eq!(
            followed.to_string(),
            "is a character device, not a regular file"
        );
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Opened without waiting for a writer, and refused.
        assert!(matches!(
            read_regular_file(&fifo, false, 10),
            Err(Refused::NotRegular("a FIFO"))
        ));
        let missing = read_regular_file(&dir.path().join("nope"), false, 10).unwrap_err();
        assert!(matches!(missing, Refused::Io(ref e) if e.kind() == io::ErrorKind::NotFound));
    }
}
