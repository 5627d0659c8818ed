//! Real etcd clusters inside lab hosts (placeholder; being built).
