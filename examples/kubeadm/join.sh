#!/usr/bin/env bash
# A control-plane join with joinguard around kubeadm (examples/kubeadm/runbook.md):
#   1. preflight: stop before anything is written if this node's network cannot carry the join;
#   2. kubeadm join, without the phase that dies on one transient API error;
#   3. that phase's writes, with per-call retries, idempotently.
# Usage: join.sh [JOIN-CONFIG]   (default /etc/kubernetes/kubeadm-join-config.yaml)
set -euo pipefail
config=${1:-/etc/kubernetes/kubeadm-join-config.yaml}

# Exit codes: 0 fit, 1 not fit (after waiting up to 3m), 2 invalid input, 3 trust failure.
joinguard preflight --config "$config" --wait 3m

# kubeadm >= 1.22: the Node label/taint is the last status write. kubeadm < 1.22: use
# control-plane-join/update-status instead (the ClusterStatus entry).
kubeadm join --config "$config" --skip-phases control-plane-join/mark-control-plane

joinguard update-status --kubeconfig /etc/kubernetes/admin.conf --config "$config"
