#!/usr/bin/env bash
# The Pi extension's per-call overhead above the pisb call itself
# (extensions/pi/bench.mjs; needs Pi installed by the test setup).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
section "pi extension (target: < 2 ms median overhead per tool call)"
top=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -f "$top/extensions/pi/bench.mjs" ]; then line "pi" "extensions/pi/bench.mjs missing"; exit 0; fi
if [ ! -e "$top/tests/pi/node_modules/jiti" ]; then
	cannot_run pi "tests/pi's npm modules are not installed (make deps installs them)"
	exit 0
fi
node "$top/extensions/pi/bench.mjs" 2>&1 | sed 's/^/  /'
