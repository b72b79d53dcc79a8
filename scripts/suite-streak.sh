#!/usr/bin/env bash
# The flakiness check (issue 32): the whole CI run (`.ci/run`: clean install, type-check, lint,
# `npm test`) on fresh clones of one commit, several times in a row; with --load, while a busy
# loop per core (`nproc` plain Node processes at normal priority) keeps every core busy.
# Stops at the first failing run unless --keep-going. One line per run goes to the summary file.
#
#   scripts/suite-streak.sh                      # 5 runs of HEAD on this machine as it is
#   scripts/suite-streak.sh --runs 3 --load      # 3 runs with every core kept busy
#   scripts/suite-streak.sh --commit abc123 --dir /tmp/streak --keep-going
set -uo pipefail
runs=5 load=0 keep=0 commit=HEAD dir=${TMPDIR:-/tmp}/switchyard-streak
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift ;;
    --load) load=1 ;;
    --keep-going) keep=1 ;;
    --commit) commit=$2; shift ;;
    --dir) dir=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse --short "$commit") || exit 2
mkdir -p "$dir"
summary=$dir/summary.txt
failed=0
burners=()
# The busy loops die with the script, however it ends (a `pkill -f 'for (;;)'` does not match
# them: the parentheses are a regular-expression group).
# The run in the background, in a process group of its own, and `wait`ed for: a signal to the
# script is then handled at once, and stops the whole run (npm, vitest, the services it started).
run=
stop() {
  for p in "${burners[@]}"; do kill "$p" 2>/dev/null; done
  # npm outlives a SIGTERM while it builds a native module: KILL after a moment.
  [ -n "$run" ] && kill -- "-$run" 2>/dev/null && sleep 1 && kill -9 -- "-$run" 2>/dev/null
  return 0
}
trap stop EXIT
trap 'exit 130' INT TERM
for i in $(seq 1 "$runs"); do
  label=$commit-$([ $load = 1 ] && echo loaded || echo as-is)-$(date -u +%H%M%S)
  clone=$dir/$label
  git clone -q "$repo" "$clone" && git -C "$clone" checkout -q "$commit" || exit 2
  burners=()
  if [ $load = 1 ]; then
    for _ in $(seq 1 "$(nproc)"); do node -e 'for (;;);' & burners+=($!); done
  fi
  start=$(date +%s)
  setsid bash -c 'cd "$1" && CI=true bash .ci/run' _ "$clone" >"$clone.log" 2>&1 &
  run=$!
  wait "$run"
  rc=$?
  run=
  for p in "${burners[@]}"; do kill "$p" 2>/dev/null; done
  tests=$(sed 's/\x1b\[[0-9;]*m//g' "$clone.log" | grep -E '^ +Tests ' | tail -1 | tr -s ' ')
  took=$(sed 's/\x1b\[[0-9;]*m//g' "$clone.log" | grep -E '^ +Duration ' | tail -1 | awk '{print $2}')
  line="$(date -u +%FT%TZ) run $i/$runs commit $commit load=$load exit=$rc total=$(($(date +%s) - start))s tests:${tests:- none} duration:${took:-?} log:$clone.log"
  echo "$line" | tee -a "$summary"
  if [ $rc != 0 ]; then
    failed=$((failed + 1))
    sed 's/\x1b\[[0-9;]*m//g' "$clone.log" | grep -E '^ FAIL ' | sort -u | tee -a "$summary"
    [ $keep = 1 ] || exit 1
  else
    rm -rf "$clone"
  fi
done
[ $failed = 0 ]
