#!/usr/bin/env bash
# bench/renew.sh [N] - time one `pisb renew` pass over N (default 1000)
# due opensandbox sandboxes against the fake OpenSandbox server answering
# every renewal in 50 ms (delay_ms.renew).  The goal: under 5 s for 1,000.
#
# The sandboxes are made on the fake directly (parallel HTTP); pisb
# connects the first one, and its instance directory is copied for the
# others with their names and ids put in, so the records are pisb's own.
# Prints one line: "renew: N sandboxes, 50 ms per renewal: T s (R renewed)".
# Needs pisb on PATH, python3, jq, curl.  A pass that took 5 s or more, or
# renewed fewer than N, is reported (make bench's summary), not a failure.
set -euo pipefail

N=${1:-1000}
DELAY_MS=${RENEW_DELAY_MS:-50}
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/pisb-bench-renew.XXXXXX")
fake_pid=
cleanup() {
	[ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

for c in pisb python3 jq curl; do
	command -v "$c" >/dev/null || { echo "bench/renew.sh: needs $c on PATH" >&2; exit 2; }
done

key=bench-key-$$
py=$(python3 -c 'import sys; print(sys.executable)')
"$py" "$top/tests/fakes/opensandbox_server.py" --port 0 --api-key "$key" \
	--port-file "$work/port" --state-dir "$work/fake" --pending-ms 0 --stream-grace-ms 0 \
	--min-timeout 1 >/dev/null 2>"$work/fake.err" &
fake_pid=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")
url=http://127.0.0.1:$port

# N sandboxes on the fake, created in parallel
"$py" - "$url" "$key" "$N" >"$work/ids" <<'PY'
import json, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
url, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = json.dumps({"image": {"uri": "bench"}, "entrypoint": ["tail"],
                   "resourceLimits": {"cpu": "1"}, "timeout": 3600}).encode()
def mk(_):
    req = urllib.request.Request(url + "/v1/sandboxes", data=body, method="POST",
                                 headers={"OPEN-SANDBOX-API-KEY": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)["id"]
with ThreadPoolExecutor(32) as ex:
    for i in ex.map(mk, range(n)):
        print(i)
PY

export PI_SANDBOX_HOME=$work/state OPEN_SANDBOX_API_KEY=$key
first=$(head -n1 "$work/ids")
cat >"$work/c.yaml" <<EOF
version: 1
driver: opensandbox
opensandbox:
  domain: 127.0.0.1:$port
  sandboxId: $first
  timeoutSeconds: 3600
EOF
pisb connect sb00000 -f "$work/c.yaml" -q
inst=$PI_SANDBOX_HOME/instances
# the other N-1 from the first one's files; all due (renewedAt 0)
"$py" - "$inst" "$work/ids" <<'PY'
import json, os, shutil, sys
inst, ids = sys.argv[1], [l.strip() for l in open(sys.argv[2]) if l.strip()]
src = os.path.join(inst, "sb00000")
rec = json.load(open(os.path.join(src, "record.json")))
st = json.load(open(os.path.join(src, "status.json")))
for i, sid in enumerate(ids):
    name = "sb%05d" % i
    d = os.path.join(inst, name)
    os.makedirs(d, mode=0o700, exist_ok=True)
    rec["name"] = name
    rec["remote"]["sandboxId"] = sid
    st["extra"]["sandboxId"] = sid
    st["extra"]["renewedAt"] = 0
    for f, doc in (("record.json", rec), ("status.json", st)):
        p = os.path.join(d, f)
        with open(p, "w") as fh:
            json.dump(doc, fh)
        os.chmod(p, 0o600)
PY

curl -fsS -X POST -d "{\"delay_ms\":{\"renew\":$DELAY_MS}}" "$url/_fake/faults" >/dev/null
curl -fsS -X DELETE "$url/_fake/stats" >/dev/null
t0=$(date +%s.%N)
pisb renew --json >"$work/report.json" || true
t1=$(date +%s.%N)
renewed=$(jq '.renewed | length' "$work/report.json")
failed=$(jq '.failed | length' "$work/report.json")
peak=$(curl -fsS "$url/_fake/stats" | jq .inflight_max)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
echo "renew: $N sandboxes, $DELAY_MS ms per renewal: $secs s ($renewed renewed, $failed failed, $peak requests at once)"
result "renew: $N due sandboxes, ${DELAY_MS} ms per renewal" "$(awk -v s="$secs" 'BEGIN { print s * 1000 }')" - "" ms "<5000"
result "renew: $N due sandboxes, not renewed" "$(( N - renewed ))" - "" count "<1"
