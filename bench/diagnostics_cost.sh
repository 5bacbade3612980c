#!/usr/bin/env bash
# The cost of the shim's diagnostics, side by side: bench/many_locks under
# the shim plain, with PARKLOT_STATS, with PARKLOT_DEADLOCK=report and with
# PARKLOT_PROFILE (and under a second shim, e.g. an older build, plain, with
# PARKLOT_STATS and with PARKLOT_PROFILE, if given), every configuration once
# per round, rounds
# interleaved; prints each workload's median ns/op and its ratio to plain.
#
#   diagnostics_cost.sh [--rounds=N] [--quick] [--other=SHIM]
#                       [--profile-rate=N] MANY_LOCKS SHIM
#     --quick   small sizes (the smoke test): every row, no meaningful figure
#     --other   a second shim measured plain ("plain other"), with
#               PARKLOT_STATS ("stats other") and with PARKLOT_PROFILE at
#               its own default rate ("profile other")
#     --profile-rate  PARKLOT_PROFILE_RATE for the "profile" column
#               (default: the shim's)
set -uo pipefail

rounds=5
quick=0
other=""
profile_rate=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds=*) rounds=${1#--rounds=} ;;
    --quick) quick=1; rounds=1 ;;
    --other=*) other=${1#--other=} ;;
    --profile-rate=*) profile_rate=${1#--profile-rate=} ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ $# -eq 2 ] || { echo "usage: diagnostics_cost.sh [options] MANY_LOCKS SHIM" >&2; exit 2; }
prog=$1
shim=$2

if [ "$quick" = 1 ]; then
  workloads=("distinct 20000 4 20000" "contended 4 20000" "nested 4 20000")
else
  workloads=("distinct 2000000 4 1000000" "contended 4 500000" "nested 4 500000")
fi
configs=(plain stats report profile)
[ -n "$other" ] && configs+=("plain_other" "stats_other" "profile_other")
# The profiles go to a scratch folder, removed at the end.
profiles=$(mktemp -d "${TMPDIR:-/tmp}/diagnostics_cost.XXXXXX")
trap 'rm -rf "$profiles"' EXIT

run_one() {  # config, workload words...
  local config=$1 so=$shim
  shift
  local env=()
  case "$config" in
    stats) env=(PARKLOT_STATS=/dev/null) ;;
    report) env=(PARKLOT_DEADLOCK=report) ;;
    profile) env=(PARKLOT_PROFILE="$profiles/profile.%p"
                  ${profile_rate:+PARKLOT_PROFILE_RATE=$profile_rate}) ;;
    plain_other) so=$other ;;
    stats_other) env=(PARKLOT_STATS=1); so=$other ;;
    profile_other) env=(PARKLOT_PROFILE="$profiles/profile.%p"); so=$other ;;
  esac
  # shellcheck disable=SC2068
  env "${env[@]}" LD_PRELOAD="$so" "$prog" $@ 2>/dev/null | awk '/^ns_per_op/ { print $2 }'
}

declare -A results
for ((r = 0; r < rounds; r++)); do
  for w in "${workloads[@]}"; do
    for c in "${configs[@]}"; do
      # shellcheck disable=SC2086
      v=$(run_one "$c" $w)
      [ -n "$v" ] || { echo "FAIL: no figure for $c / $w" >&2; exit 1; }
      results["$w|$c"]+="$v "
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
printf '%-30s' "workload (median ns/op, x plain)"
for c in "${configs[@]}"; do printf '%22s' "$c"; done
echo
for w in "${workloads[@]}"; do
  printf '%-30s' "$w"
  base=$(median <<<"${results["$w|plain"]}")
  for c in "${configs[@]}"; do
    m=$(median <<<"${results["$w|$c"]}")
    printf '%22s' "$(awk -v m="$m" -v b="$base" 'BEGIN { printf "%.1f (%.2fx)", m, m / b }')"
  done
  echo
done
echo "rounds: $rounds, interleaved; $(nproc) CPUs"
