#!/usr/bin/env bash
# Regenerates the key fixtures that joinguard must refuse (or, for p384-sec1-no-public, explain),
# with the real openssl (these were made by OpenSSL 3.0.19). Throwaway keys, used only by tests;
# the passphrase of the encrypted ones is "joinguard-test".
set -euo pipefail
cd "$(dirname "$0")"
pass=pass:joinguard-test
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa-2048-pkcs8.pem 2>/dev/null
# BEGIN ENCRYPTED PRIVATE KEY (PKCS#8, PBES2 AES-256-CBC).
openssl pkcs8 -topk8 -v2 aes-256-cbc -in rsa-2048-pkcs8.pem -passout "$pass" -out encrypted-pkcs8.pem
# BEGIN RSA PRIVATE KEY with Proc-Type: 4,ENCRYPTED (OpenSSL's traditional encryption).
openssl rsa -in rsa-2048-pkcs8.pem -traditional -aes256 -passout "$pass" -out legacy-encrypted-rsa.pem 2>/dev/null
# RSA-1024 PKCS#1: too small for ring (and for kubeadm, which writes 2048 or more).
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 2>/dev/null | openssl rsa -traditional -out rsa-1024-pkcs1.pem 2>/dev/null
# P-521 SEC1: Go can make it, ring cannot sign with it.
openssl ecparam -name secp521r1 -genkey -noout -out p521-sec1.pem
# P-384 SEC1 without the public key (openssl ec -no_public).
openssl ecparam -name secp384r1 -genkey -noout | openssl ec -no_public -out p384-sec1-no-public.pem 2>/dev/null
# DSA, traditional and PKCS#8.
openssl genpkey -genparam -algorithm DSA -pkeyopt dsa_paramgen_bits:2048 -out dsa-params.pem 2>/dev/null
openssl genpkey -paramfile dsa-params.pem -out dsa-pkcs8.pem
openssl dsa -in dsa-pkcs8.pem -out dsa-traditional.pem 2>/dev/null
rm dsa-params.pem rsa-2048-pkcs8.pem
