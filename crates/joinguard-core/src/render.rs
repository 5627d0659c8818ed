//! How every command's result reaches its user: [`Render`], one signature for preflight's
//! report, update-status's, a trace and `etcd promote|cleanup` (in the binary). The binary
//! renders into a buffer and writes it to stdout whole; stdout carries the result alone.

use std::io::{self, Write};

use crate::spec::Output;

/// A command's result as its user reads it.
pub trait Render {
    /// Writes the result as `output` asks: kubeadm-style lines for a person, or one JSON
    /// document (its schema in docs/schema/) for a program.
    fn render(&self, output: Output, w: &mut dyn Write) -> io::Result<()>;
}
