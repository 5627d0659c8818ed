//! Test PKI (placeholder; being built).
