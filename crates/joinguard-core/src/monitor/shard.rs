//! Sharding a fleet across monitor replicas without coordination: rendezvous (highest random
//! weight) hashing of target names, as goldpinger does for its peer subsets.
//!
//! Every replica computes, for each target name, a score per replica index and keeps the names
//! whose best score is its own index. The choice depends only on (name, replicas), so replicas
//! agree without talking to each other, a restart keeps the same subset (stable metric series),
//! and going from N to N+1 replicas moves only the ~1/(N+1) of names the new replica wins.
//!
//! The hash is FNV-1a 64 with a splitmix64 finaliser, written out here because std's hasher is
//! not stable across Rust releases, and a replica built by another compiler must agree.

use super::config::Shard;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// splitmix64's finaliser: spreads FNV's weak low bits over the whole word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The score of `replica` for `name`.
fn score(name_hash: u64, replica: u32) -> u64 {
    mix(name_hash ^ mix(u64::from(replica).wrapping_add(0x9e37_79b9_7f4a_7c15)))
}

/// The replica (0..replicas) that probes `name`.
pub(crate) fn owner(name: &str, replicas: u32) -> u32 {
    let h = fnv1a(name.as_bytes());
    (0..replicas.max(1))
        .max_by_key(|&r| (score(h, r), r))
        .unwrap_or(0)
}

impl Shard {
    /// Whether this instance probes `name`.
    pub fn owns(&self, name: &str) -> bool {
        self.replicas <= 1 || owner(name, self.replicas) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("api-server/cluster-{i}.example:6443"))
            .collect()
    }

    #[test]
    fn every_name_has_exactly_one_owner_and_load_is_even() {
        let names = names(10_000);
        for replicas in [1u32, 2, 3, 5, 8] {
            let mut load = vec![0usize; replicas as usize];
            for n in &names {
                let owners: Vec<u32> = (0..replicas)
                    .filter(|&i| Shard { replicas, index: i }.owns(n))
                    .collect();
                assert_eq!(owners.len(), 1, "{n} with {replicas} replicas: {owners:?}");
                load[owners[0] as usize] += 1;
            }
            let mean = names.len() as f64 / f64::from(replicas);
            for l in &load {
                // Binomial spread at 10,000 names: within 10% of the mean by a wide margin.
                assert!(
                    (*l as f64 - mean).abs() < 0.1 * mean,
                    "{replicas}: {load:?}"
                );
            }
        }
    }

    #[test]
    fn stable_and_adding_a_replica_moves_about_one_in_n_plus_one() {
        let names = names(10_000);
        // Stable: the same inputs always give the same owner.
        let first: Vec<u32> = names.iter().map(|n| owner(n, 4)).collect();
        let again: Vec<u32> = names.iter().map(|n| owner(n, 4)).collect();
        assert_eq!(first, again);
        assert_eq!(
            owner("api-server/10.0.0.10:6443", 3),
            owner("api-server/10.0.0.10:6443", 3)
        );
        for n in 1u32..8 {
            let moved = names
                .iter()
                .filter(|name| owner(name, n) != owner(name, n + 1))
                .count();
            // Every move goes to the new replica: nothing reshuffles between the old ones.
            for name in &names {
                let (a, b) = (owner(name, n), owner(name, n + 1));
                assert!(
                    a == b || b == n,
                    "{name}: {a} -> {b} when adding replica {n}"
                );
            }
            let expected = names.len() as f64 / f64::from(n + 1);
            let got = moved as f64;
            assert!(
                (got - expected).abs() < 0.1 * expected,
                "{n} -> {}: moved {moved}, expected ~{expected:.0}",
                n + 1
            );
        }
    }
}
