//! The joinguard binary's own pieces, as a library so the integration tests and the fuzz targets
//! can reach them: the flag definitions and the generated documentation. All logic is in
//! [`joinguard_core`].

pub use joinguard_core::cli;
pub mod manual;
