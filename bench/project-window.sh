#!/usr/bin/env bash
# bench/project-window.sh [RUNS] - how long a secret made on the host shows
# inside a sandbox with a bound project (project.mode bind, issue 13)
# before pisb-watch covers it: pisb.yaml(5) quotes these numbers.
# Per round a program inside opens the name as fast as it can while the
# host makes the file (created with its content, then by an editor's
# temporary file renamed onto the name); it reports when what it opens
# became the cover (another mount than the directory's), the host when it
# made the file (the same CLOCK_MONOTONIC: no time namespace), and how many
# of its opens read the secret.  RUNS rounds of each (default 20).
# Not part of bench/run: a measurement of a window, not a comparison.
set -uo pipefail
RUNS=${1:-20}
top=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$top/bin:$PATH
tmp=$(mktemp -d /tmp/pisb-window.XXXXXX)
chmod 755 "$tmp"
export PI_SANDBOX_HOME=$tmp/state
trap 'pisb destroy win --confirm win >/dev/null 2>&1; rm -rf "$tmp"' EXIT

cat >"$tmp/race.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static unsigned long long mnt(int fd) { struct statx s; statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &s); return s.stx_mnt_id; }
int main(int argc, char **argv)
{
	long long cover = 0, end = now() + 10000000000LL;
	long seen = 0;
	char b[64];
	unsigned long long here = mnt(open(".", O_RDONLY | O_DIRECTORY));
	while (argc > 1 && now() < end) {
		int fd = open(argv[1], O_RDONLY);
		if (fd < 0)
			continue;
		if (mnt(fd) != here) { cover = now(); close(fd); break; }
		if (read(fd, b, sizeof(b)) > 0)
			seen++;
		close(fd);
	}
	printf("%lld %ld\n", cover, seen);
	return 0;
}
EOF
cat >"$tmp/mk.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
/* mk NAME [TMP]: NAME made with a secret in it, or TMP written and renamed onto NAME */
int main(int argc, char **argv)
{
	long long t = now();
	int fd = open(argc > 2 ? argv[2] : argv[1], O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0 || write(fd, "TOKEN=x\n", 8) != 8)
		return 1;
	close(fd);
	if (argc > 2) { t = now(); if (rename(argv[2], argv[1]) < 0) return 1; }
	printf("%lld\n", t);
	return 0;
}
EOF
cc -O2 -static -o "$tmp/race" "$tmp/race.c" && cc -O2 -o "$tmp/mk" "$tmp/mk.c" || { echo "project-window: cannot build its helpers"; exit 1; }
mkdir "$tmp/p"
cp "$tmp/race" "$tmp/p/.race"
# as root, bind takes a user's project only (pisb.yaml(5))
[ "$(id -u)" != 0 ] || chown -R 4242:4242 "$tmp/p"
printf 'project:\n  mode: bind\n' >"$tmp/m.yaml"
pisb create win -f "$tmp/m.yaml" --project "$tmp/p" >/dev/null 2>&1 || { echo "project-window: create failed"; exit 1; }
for mode in create rename; do
	for i in $(seq "$RUNS"); do
		pisb exec win -- ./.race ".env.$mode$i" >"$tmp/out" &
		sleep 0.3
		if [ $mode = rename ]; then t=$("$tmp/mk" "$tmp/p/.env.$mode$i" "$tmp/p/tmp.$i"); else t=$("$tmp/mk" "$tmp/p/.env.$mode$i"); fi
		wait
		read -r cover seen <"$tmp/out"
		if [ "$cover" = 0 ]; then echo "-1 $seen"; else echo "$(( (cover - t) / 1000 )) $seen"; fi
	done | sort -n | awk -v m=$mode '$1 < 0 { lost++; next } { a[++n] = $1 } $2 > 0 { k++; s += $2 }
		END { printf "%s: covered after (us) min %d median %d max %d; not covered in 10 s: %d; rounds an open inside read the secret: %d of %d (%d opens)\n",
			m, a[1], a[int((n + 1) / 2)], a[n], lost, k, n + lost, s }'
done
