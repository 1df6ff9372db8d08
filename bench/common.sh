# Sourced by the bench scripts: where things are, and the setup they share.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Warns (does not stop) when not root: $1 says what will fail.
warn_unless_root() {
    [[ $(id -u) -eq 0 ]] || echo "warning: not root: $1" >&2
}

# Installs Debian package $2 when command $1 is missing.
need_command() {
    command -v "$1" >/dev/null 2>&1 && return
    echo "== installing $2 ($1)"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "$2"
}

# Builds rtscope (release) and sets RTSCOPE to the binary; with RTSCOPE
# already set to an executable, uses that one (a long run from a copy of a
# build, while the tree changes).
build_rtscope() {
    if [[ -n ${RTSCOPE:-} && -x $RTSCOPE ]]; then
        echo "== rtscope: $RTSCOPE ($("$RTSCOPE" --version))"
        return
    fi
    echo "== building rtscope (release)"
    (cd "$ROOT" && cargo build --release --locked -q)
    RTSCOPE=${CARGO_TARGET_DIR:-$ROOT/target}/release/rtscope
    [[ -x $RTSCOPE ]] || { echo "no $RTSCOPE after the build" >&2; exit 1; }
}

# A scratch directory named after $1, removed on exit; sets TMP.
scratch_dir() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtscope-$1.XXXXXX")
    trap 'rm -rf "$TMP"' EXIT
}

# Builds the synthesiser of wake-up runs (crates/rtscope-model/examples/
# synth_run.rs, release) and sets SYNTH; with SYNTH already set, uses that one.
build_synth() {
    [[ -n ${SYNTH:-} ]] && return
    echo "== building the run synthesiser (release)"
    (cd "$ROOT" && cargo build --release --locked -q -p rtscope-model --example synth_run)
    SYNTH=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/synth_run
}

# Sets TMP to $WORK (made if missing, kept) when set, else to a scratch
# directory named after $1.
work_dir() {
    if [[ -n ${WORK:-} ]]; then
        mkdir -p "$WORK"
        TMP=$WORK
    else
        scratch_dir "$1"
    fi
}
