//! The joinguard binary's own pieces, as a library so the integration tests and the fuzz targets
//! can reach them: the flag definitions (`cli`), the generated documentation (`manual`) and
//! `version`. All logic is in [`joinguard_core`].

pub mod cli;
pub mod commands;
pub mod etcd;
pub mod logging;
pub mod manual;
pub mod output;
pub mod progress;
pub mod version;
