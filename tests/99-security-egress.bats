#!/usr/bin/env bats
# Egress seen from the address side (issue 18, item 5): an allowed name is
# as good as the address it resolves to.  A tiny DNS server
# (fixtures/dns/dnsd.py) on a loopback address answers for *.pisb.test;
# the sandbox's controller runs in a mount namespace whose
# /etc/resolv.conf names that server, so its egress proxy resolves
# through it.  Each test is the attack from inside the sandbox; the
# host's loopback services must see nothing.
#   - DNS rebinding: a name that answers an allowed address, then a
#     loopback one: the address checked is the address connected
#   - names resolving to private, link-local, CGNAT, metadata addresses,
#     and IPv6 forms that carry an IPv4 address (::ffff:a.b.c.d, ::a.b.c.d,
#     64:ff9b::/96, 2002::/16): refused, as root and as pisbtest
load helpers
load fixtures/svc/lib

DNS_ADDR=127.0.99.53

setup() {
	svc_setup
	require_root
	require_cmd unshare
	E="$BATS_TEST_TMPDIR"
	printf 'nameserver %s\noptions attempts:5\n' "$DNS_ADDR" >"$E/resolv.conf"
	printf 'hosts: files dns\n' >"$E/nsswitch.conf"
	mkdir -p "$E/allowed" "$E/private"
	echo "allowed service" >"$E/allowed/f.txt"
	echo "HOST-PRIVATE-$RANDOM-$RANDOM" >"$E/private/f.txt"
	HP=$(host_free_port)
	PIDS=()
	# something to bind over (a fresh root may have none; made here, removed after)
	MADE_RESOLV=
	if [ ! -e /etc/resolv.conf ]; then
		[ ! -L /etc/resolv.conf ] || skip "machine lacks: an /etc/resolv.conf to bind over (a dangling symlink)"
		: >/etc/resolv.conf
		MADE_RESOLV=1
	fi
}

teardown() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	svc_teardown
	[ -z "$MADE_RESOLV" ] || rm -f /etc/resolv.conf
	# the ones pisbtest made
	[ -z "${UST:-}" ] || { as_user pisb --state-dir "$UST/s" destroy u --confirm u >/dev/null 2>&1; rm -rf "$UST"; }
}

# dnsd NAME=TYPE:ADDR[/ADDR]...: start the DNS server, wait until it is bound
dnsd() {
	python3 "$TOP/tests/fixtures/dns/dnsd.py" "$DNS_ADDR" "$E/dns.log" "$@" 3>&- &
	PIDS+=($!)
	local i
	for i in $(seq 100); do grep -q ready "$E/dns.log" 2>/dev/null && return 0; sleep 0.1; done
	echo "dnsd did not start" >&2
	return 1
}

# www ADDR DIR: a web server on ADDR:$HP serving DIR, its log in $E/www-ADDR.log
www() {
	python3 -m http.server "$HP" --bind "$1" --directory "$2" >"$E/www-$1.log" 2>&1 3>&- &
	PIDS+=($!)
	local i
	for i in $(seq 100); do curl -s -o /dev/null "http://$1:$HP/" && return 0; sleep 0.1; done
	echo "the web server on $1 did not start" >&2
	return 1
}

# in_dns CMD...: CMD in a mount namespace where the resolver is dnsd (what
# it starts, the controller included, stays there)
in_dns() {
	unshare -m --propagation private sh -c '
		mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/nsswitch.conf && shift 2 && exec "$@"' \
		sh "$E/resolv.conf" "$E/nsswitch.conf" "$@"
}

# a sandbox allowing $1 (a YAML flow list's items), made where dnsd resolves
dns_box() {
	printf 'network:\n  allowedHosts: [%s]\n' "$1" >"$E/box.yaml"
	in_dns pisb create box -f "$E/box.yaml"
}

in_box() {
	pisb exec box -- sh -c "unset NO_PROXY no_proxy; $1"
}

@test "DNS rebinding: the address checked is the address connected, one lookup a request" {
	dnsd "rebind.pisb.test=A:127.0.0.2/127.0.0.1"
	www 127.0.0.2 "$E/allowed"
	www 127.0.0.1 "$E/private"
	# 127.0.0.2 stands for a service the user allowed by its address
	run -0 dns_box "\"rebind.pisb.test:$HP\", 127.0.0.2"
	local n ok=0 denied=0
	for n in 1 2 3 4 5 6; do
		run -0 in_box "curl -sS -w ' %{http_code}' http://rebind.pisb.test:$HP/f.txt"
		[[ $output != *HOST-PRIVATE* ]]
		if [[ $output == *" 200" ]]; then
			[[ $output == "allowed service"* ]]
			ok=$((ok + 1))
		else
			[[ $output == *"egress to 'rebind.pisb.test' is denied: it resolves to 127.0.0.1, a loopback address"*" 403" ]]
			denied=$((denied + 1))
		fi
	done
	# the name answered both ways, and each answer was used as checked
	[ "$ok" -ge 1 ]
	[ "$denied" -ge 1 ]
	[ "$(grep -c '^rebind.pisb.test A ' "$E/dns.log")" -ge 6 ]
	# CONNECT the same
	for n in 1 2; do
		run in_box "curl -sS -p http://rebind.pisb.test:$HP/f.txt"
		[[ $output != *HOST-PRIVATE* ]]
	done
	# the host's loopback service saw none of it
	run ! grep -q 'GET /f.txt' "$E/www-127.0.0.1.log"
	grep -q 'GET /f.txt' "$E/www-127.0.0.2.log"
	# host:port opens that port only
	run -0 in_box "curl -sS -w ' %{http_code}' http://rebind.pisb.test:$((HP + 1))/f.txt"
	[[ $output == *"egress to 'rebind.pisb.test' is denied: the host is not in network.allowedHosts"*" 403" ]]
}

# name, address and the class the proxy names
bad_names=(
	"ten A 10.1.2.3 a private address"
	"sixteen A 172.16.9.9 a private address"
	"home A 192.168.1.1 a private address"
	"cgnat A 100.64.0.1 a shared (CGNAT) address"
	"linklocal A 169.254.1.1 a link-local address"
	"meta A 169.254.169.254 the cloud metadata address"
	"zero A 0.0.0.0 the unspecified network"
	"loop6 AAAA ::1 a loopback address"
	"ula AAAA fd00::1 a private (unique local) address"
	"ll6 AAAA fe80::1 a link-local address"
	"mapped AAAA ::ffff:10.1.2.3 a private address"
	"mappedmeta AAAA ::ffff:169.254.169.254 the cloud metadata address"
	"compat AAAA ::7f00:1 a loopback address"
	"nat64 AAAA 64:ff9b::a9fe:a9fe the cloud metadata address"
	"nat64loop AAAA 64:ff9b::7f00:1 a loopback address"
	"sixtofour AAAA 2002:7f00:1:: a loopback address"
	"sixtofour10 AAAA 2002:a01:203::1 a private address"
)

bad_zone() {
	local b f
	for b in "${bad_names[@]}"; do
		read -ra f <<<"$b"
		printf '%s.pisb.test=%s:%s\n' "${f[0]}" "${f[1]}" "${f[2]}"
	done
}

# check_bad PREFIX...: each bad name through the proxy (PREFIX runs pisb)
check_bad() {
	local b f cls
	for b in "${bad_names[@]}"; do
		read -ra f <<<"$b"
		cls="${f[*]:3}"
		run -0 "$@" -- sh -c "unset NO_PROXY no_proxy; curl -sS -w ' %{http_code}' http://${f[0]}.pisb.test/"
		[[ $output == *"egress to '${f[0]}.pisb.test' is denied: it resolves to "*", $cls"*" 403" ]] ||
			{ echo "${f[0]}: $output" >&2; return 1; }
	done
}

@test "an allowed name resolving to private, link-local, metadata or IPv4-in-IPv6 addresses is refused" {
	mapfile -t zone < <(bad_zone)
	dnsd "${zone[@]}"
	run -0 dns_box '"*.pisb.test"'
	check_bad pisb exec box
	# each was looked up: the refusal is the address's, not the name's
	[ "$(grep -c 'pisb.test A\{1,4\} [0-9a-f:.]*$' "$E/dns.log")" -ge "${#bad_names[@]}" ]
	grep -q 'egress: denied meta.pisb.test:80 (resolves to 169.254.169.254, the cloud metadata address)' \
		"$PI_SANDBOX_HOME/instances/box/controller.log"
}

@test "an unprivileged user: the same names are refused" {
	UST=$(mktemp -d /tmp/pisb-user99.XXXXXX); chown pisbtest "$UST" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	chmod 755 "$UST"
	chmod 755 "$E"
	chmod 644 "$E/resolv.conf" "$E/nsswitch.conf"
	mapfile -t zone < <(bad_zone)
	dnsd "${zone[@]}"
	printf 'network:\n  allowedHosts: ["*.pisb.test"]\n' >"$UST/box.yaml"
	chmod 644 "$UST/box.yaml"
	run -0 in_dns runuser -u pisbtest -- env PATH="$PATH" PISB_EXEC_PATH="$PISB_EXEC_PATH" HOME=/tmp \
		pisb --state-dir "$UST/s" create u -f "$UST/box.yaml"
	check_bad as_user pisb --state-dir "$UST/s" exec u
}
