//! The size limits of every read joinguard does that is not bounded elsewhere, in one place.
//!
//! Response bodies have their own limits next to the code that reads them
//! ([`crate::kube::MAX_BODY`], [`crate::probe::http::MAX_BODY`]); this module holds the ones that
//! several readers share (local files, HTTP/1.1 response heads) and the bounded file read. Every
//! limit and why it has its value is listed in `docs/hardening.md`. Timeouts are not here: every
//! network read runs under the per-sample timeout or the retry policy's per-attempt timeout.

use std::io::{self, Read};
use std::path::Path;

/// Largest local file read: a kubeconfig, a JoinConfiguration, a PEM bundle or a token file.
/// kubeadm's admin.conf is about 5.6 KiB and the Debian CA bundle about 220 KiB; a path that points
/// at `/dev/zero` or a multi-gigabyte file must end in an error, not in an OOM.
pub const MAX_FILE: u64 = 1024 * 1024;

/// Most HTTP/1.1 response header fields (hyper's default, set explicitly). kube-apiserver sends
/// about ten.
pub const MAX_RESPONSE_HEADERS: usize = 100;

/// Largest HTTP/1.1 response head (status line and headers). hyper's default is its whole read
/// buffer (~400 KiB); a real answer's head is well under 2 KiB.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Reads a whole local file, refusing one larger than [`MAX_FILE`] (or that never ends, such as
/// `/dev/zero`) with an `InvalidData` error that says so.
pub(crate) fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > MAX_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "larger than {} KiB, which no kubeconfig, kubeadm config or PEM file is; check \
                 the path",
                MAX_FILE / 1024
            ),
        ));
    }
    Ok(out)
}

/// A hyper HTTP/1.1 client builder with the head limits above.
pub(crate) fn http1_client() -> hyper::client::conn::http1::Builder {
    let mut b = hyper::client::conn::http1::Builder::new();
    b.max_headers(MAX_RESPONSE_HEADERS)
        .max_header_size(MAX_RESPONSE_HEAD);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_oversized_files_are_refused() {
        let e = read_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 1024 KiB"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, b"apiVersion: v1\n").unwrap();
        assert_eq!(read_file(&small).unwrap(), b"apiVersion: v1\n");
    }
}
