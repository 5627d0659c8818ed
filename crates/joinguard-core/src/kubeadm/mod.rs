//! What kubeadm itself accepts, recorded as data with its source: the flags of `kubeadm join`
//! per version ([`flags`]), the names of its preflight checks ([`checks`]) and the json field
//! names of its configuration documents ([`schema`]).
//!
//! Every name joinguard accepts on kubeadm's behalf comes from these tables, and each table
//! says where in kubeadm's code (repository, path, commit) it was read. This module holds facts
//! and pure functions over them: it must not read files, print, or decide what joinguard does
//! with a flag beyond saying whether kubeadm has it (the command modules decide that).

pub mod checks;
pub mod flags;
pub(crate) mod schema;

/// The kubeadm minor versions whose `join` command line and config files joinguard takes.
pub const SUPPORTED_VERSIONS: [KubeadmVersion; 8] = [
    KubeadmVersion(28),
    KubeadmVersion(29),
    KubeadmVersion(30),
    KubeadmVersion(31),
    KubeadmVersion(32),
    KubeadmVersion(33),
    KubeadmVersion(34),
    KubeadmVersion(35),
];

/// A kubeadm release, by its minor version (`1.MINOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeadmVersion(pub u8);

impl std::fmt::Display for KubeadmVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

/// Levenshtein distance (insertions, deletions, substitutions), for "did you mean" hints on
/// unknown field and check names.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// The candidate nearest to `name` by edit distance (ties: the first), compared
/// case-insensitively so that `unsafeSkipCaVerification` finds `unsafeSkipCAVerification`.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_ascii_lowercase()), c))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_and_nearest() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(
            nearest(
                "unsafeSkipCaVerification",
                ["token", "caCertHashes", "unsafeSkipCAVerification"]
            ),
            Some("unsafeSkipCAVerification")
        );
        assert_eq!(
            nearest("caCertHash", ["token", "caCertHashes"]),
            Some("caCertHashes")
        );
        assert_eq!(nearest("x", std::iter::empty()), None);
    }
}
