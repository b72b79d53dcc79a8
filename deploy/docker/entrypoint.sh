#!/bin/sh
# Container entrypoint: `switchyard serve $SWITCHYARD_CONFIG`, plus the deployment's settings
# that the shipped configs leave to the command line:
#   SWITCHYARD_HOSTS_ALLOW  comma-separated names clients use (compose service, k8s Service):
#                           the Host check refuses names nobody listed (docs/configuration.md).
#   AUDIT_DATABASE_URL      the audit chain (resource `audit`) on PostgreSQL instead of SQLite,
#                           so that every replica appends to one chain. URL-encode the password.
#   SWITCHYARD_TRUST_PROXY  true behind your own load balancer: the client address (rate-limit
#                           key, logs) comes from X-Forwarded-For instead of the balancer's address.
# Extra arguments (e.g. `--set limits.max_concurrent=256`) are passed on.
set -eu
main="${SWITCHYARD_MAIN:-bin/switchyard.js}"
config="${SWITCHYARD_CONFIG:-configs/typed-proxy.yaml}"
set -- serve "$config" "$@"
if [ -n "${SWITCHYARD_HOSTS_ALLOW:-}" ]; then
  set -- "$@" --set "hosts.allow=[${SWITCHYARD_HOSTS_ALLOW}]"
fi
if [ -n "${AUDIT_DATABASE_URL:-}" ]; then
  set -- "$@" --set resources.audit.backend=postgres --set "resources.audit.url=${AUDIT_DATABASE_URL}"
fi
if [ "${SWITCHYARD_TRUST_PROXY:-false}" = true ]; then
  set -- "$@" --set trust_proxy=true
fi
if [ -n "${SWITCHYARD_DRY_RUN:-}" ]; then
  # For tests: print the command instead of running it.
  printf '%s\n' node "$main" "$@"
  exit 0
fi
exec node "$main" "$@"
