//! Raw packets and the sockets that carry them: ICMP echo, UDP and TCP SYN probes built by hand
//! with the RFC 1071 checksum (`packet`), and raw sockets with kernel receive timestamps, the
//! route's source address and reserved ports (`socket`). Both the tracer and the probes (ICMP
//! echo, the path MTU) stand on it.

pub(crate) mod packet;
pub(crate) mod socket;
