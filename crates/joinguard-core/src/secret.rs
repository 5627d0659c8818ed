//! [`Secret`]: a bootstrap token or a certificate key as it travels from the flags, a
//! JoinConfiguration or monitor.yaml to the code that uses it. Its `Debug` never shows the
//! value, and its memory is zeroed when it is dropped. Foundation: imports nothing from the
//! crate.

use std::fmt;

use zeroize::Zeroizing;

/// A secret string: redacted in `Debug`, zeroed on drop. [`Secret::expose`] is the one way to
/// the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(Zeroizing::new(value.into()))
    }

    /// The value, for the code that uses it (parsing, a header). Never for a message.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret::new(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret::new(s)
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
        // A wrong type is reported by kind ("expected a string"), never with the scalar.
        String::deserialize(d).map(Secret::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("abcdef.0123456789abcdef");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(Secret(<redacted>))");
        assert_eq!(s.expose(), "abcdef.0123456789abcdef");
    }
}
