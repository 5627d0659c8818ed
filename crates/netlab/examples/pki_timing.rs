//! Measures what the lab PKI costs: key generation per profile, and a whole kubeadm PKI for a
//! 3-member lab (3 CAs, sa, per member etcd/server + etcd/peer, apiserver-etcd-client,
//! healthcheck-client, apiserver). `cargo run -p netlab --example pki_timing [ROUNDS]`.

#![allow(clippy::print_stdout)] // A measurement prints its figures.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use netlab::pki::{CertSpec, KeyAlgorithm, KeyProfile, KubeadmPki, TestCa};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let profiles = [
        KeyProfile::RSA_2048,
        KeyProfile::kubeadm(KeyAlgorithm::Rsa(3072)),
        KeyProfile::kubeadm(KeyAlgorithm::Rsa(4096)),
        KeyProfile::ECDSA_P256,
        KeyProfile::PKCS8_P256,
    ];
    println!("profile            leaf key+cert, ms (median of {rounds}; min..max)");
    for p in profiles {
        let ca = TestCa::with_profile("ca", p).expect("CA");
        let mut ms: Vec<f64> = (0..rounds)
            .map(|_| {
                let t = Instant::now();
                ca.issue(&CertSpec::client("c", None)).expect("leaf");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        println!(
            "{:<18} {:>8.1}  ({:.1}..{:.1})",
            p.to_string(),
            ms[ms.len() / 2],
            ms[0],
            ms[ms.len() - 1]
        );
    }
    println!();
    println!("profile            3-member lab PKI, ms (median of {rounds})");
    for p in [KeyProfile::RSA_2048, KeyProfile::ECDSA_P256] {
        let mut ms: Vec<f64> = (0..rounds)
            .map(|_| {
                let t = Instant::now();
                let pki = KubeadmPki::with_profile(p).expect("PKI");
                for i in 0..3u8 {
                    let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2 + i));
                    pki.etcd_server("m", ip).expect("server");
                    pki.etcd_peer("m", ip).expect("peer");
                }
                pki.apiserver_etcd_client().expect("client");
                pki.etcd_healthcheck_client().expect("healthcheck");
                pki.apiserver("api", IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9)), None)
                    .expect("apiserver");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        println!("{:<18} {:>8.0}", p.to_string(), ms[ms.len() / 2]);
    }
}
