# shellcheck shell=bash
# Sourced by the bench/*_cost.sh scripts that run one program under glibc
# and under each shim given as NAME=SHIM (e.g. an older build beside
# today's), every configuration once per repetition, repetitions
# interleaved, each run's output appended to a file of a scratch folder.

# shim_configs PROG NAME=SHIM...: sets prog, configs (glibc, then each
# NAME=SHIM) and out (the scratch folder, removed at exit).
shim_configs() {
  prog=$1
  shift
  # shellcheck disable=SC2034  # the sourcing script's
  configs=(glibc "$@")
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
}

# run_config CONFIG FILE ARG...: runs $prog ARG... under CONFIG (glibc: an
# empty LD_PRELOAD; NAME=SHIM: LD_PRELOAD=SHIM, absolute), at most 120s,
# appending its output to $out/FILE.
run_config() {
  local c=$1 file=$2 pre=""
  shift 2
  [ "${c%%=*}" = glibc ] || pre=$(readlink -f "${c#*=}")
  LD_PRELOAD="$pre" timeout 120 "$prog" "$@" >>"$out/$file"
}

# configs_from R: the configurations in order from the (R mod count)-th,
# one a line, so that across repetitions each runs in every place of the
# order equally often (in uncontended_cost.sh the first run of a
# repetition measured up to 5% slower than the same build run later).
configs_from() {
  local n=${#configs[@]} i
  for ((i = 0; i < n; i++)); do printf '%s\n' "${configs[($1 + i) % n]}"; done
}
