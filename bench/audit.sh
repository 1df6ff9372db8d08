#!/usr/bin/env bash
# A `cargo audit` of Cargo.lock against RustSec's advisory database, where
# the database can be had.
#
# The database is a git repository (rustsec/advisory-db) that cargo-audit
# clones at run time; no package registry these machines reach ships it
# (crates.io has the `rustsec` library and `cargo-audit`, PyPI a
# cargo-audit binary, both without the data), and the repository's host is
# not reachable from here or from CI. So this check runs where a copy of
# the database exists, and says so and exits 0 where none does:
#
#   RUSTSEC_DB   a checkout of the advisory database (default
#                ~/.cargo/advisory-db, where cargo-audit keeps its own)
#   CARGO_AUDIT  the cargo-audit binary (default: `cargo audit` if installed)
#
# With both: `cargo audit --db RUSTSEC_DB --no-fetch --stale`, exit code
# as cargo-audit's (non-zero on a vulnerability). Warnings (unmaintained
# crates, e.g. serde_yaml 0.9) are printed, not fatal.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE/.."
DB=${RUSTSEC_DB:-$HOME/.cargo/advisory-db}
if [ -n "${CARGO_AUDIT:-}" ]; then
    AUDIT=("$CARGO_AUDIT" audit)
elif cargo audit --version >/dev/null 2>&1; then
    AUDIT=(cargo audit)
else
    echo "audit: SKIPPED: cargo-audit is not installed (cargo install cargo-audit, where crates.io is reached)"
    exit 0
fi
if [ ! -d "$DB/crates" ]; then
    echo "audit: SKIPPED: no RustSec advisory database at $DB (set RUSTSEC_DB to a checkout of rustsec/advisory-db;"
    echo "       it is fetched from its git host, which this machine cannot reach, and no package registry ships it)"
    exit 0
fi
exec "${AUDIT[@]}" --db "$DB" --no-fetch --stale --file Cargo.lock
