#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The DKMS and Debian package flows (docs/packaging.md), as a user meets
# them: run-tests pkg, in a VM booted without the module (scripts/check:
# vm-run --no-module; the VM's root is a throw-away overlay, so dpkg -i
# and dkms change nothing on the host). Needs the packages built on the
# host first (make deb: build/deb/*.deb) and the running kernel's headers
# (Debian's 6.1 ones are installed on the host).
#
#   install        dpkg -i rdmastream-dkms and rdmastream-tools succeeds:
#                  DKMS builds the module for the running kernel (a build
#                  failure fails the dpkg run, and make.log is printed;
#                  about 10 minutes under TCG: see docs/packaging.md),
#                  dkms status says installed, the .ko is under
#                  updates/dkms with VERSION's version, nothing loaded yet
#   header         a C program (selftests/pkg_xfer.c) builds against
#                  <linux/rdmastream.h> from /usr/include, no -I
#   autoload_af    socket(AF_RDMASTREAM, SOCK_STREAM, 0) with nothing
#                  loaded succeeds: the kernel loaded the DKMS module
#                  through its net-pf-19 alias (/sys/module, lsmod,
#                  version, modinfo -n under updates/dkms)
#   autoload_inet  after rmmod, socket(AF_INET, SOCK_STREAM, 260) and,
#                  after another rmmod, socket(AF_INET6, ...) load it
#                  (net-pf-2/10-proto-260-type-1)
#   transfer       pkg_xfer: 1 MiB between two AF_RDMASTREAM sockets on
#                  RS_ADDR, checked byte by byte, no TCP fallback
#                  (RDMASTREAM_INFO), rxe0 sent a packet per 4 KiB
#   rsstat         the packaged rsstat lists sockets and counters
#   man            man -w rdmastream finds the packaged page, which renders
#   rdmastream_run /usr/bin/rdmastream-run finds the packaged preload
#                  library by itself and carries an unmodified python3
#                  TCP client and server over RDMA (its -v log, rxe0's
#                  packets, no kernel TCP connection)
#   remove         dpkg -r of both succeeds: dkms status empty, no
#                  rdmastream.ko left under /lib/modules, modprobe no
#                  longer finds it, /usr/src and the tools' files gone,
#                  and socket(AF_RDMASTREAM) is EAFNOSUPPORT again
#
# Environment: RS_ADDR (198.18.0.1), RS_RDMADEV (rxe0), RS_REPO, RS_OUT;
# RS_PKG_DEBS (directory of the .debs, default build/deb of the repo).
# Prints TAP in the kselftest shape; exit status 1 if a case failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${RS_REPO:-}
for r in "$repo" "$here/.." "$here/../.."; do
	if [[ -n $r && -f $r/VERSION && -f $r/selftests/pkg_xfer.c ]]; then
		repo=$(cd "$r" && pwd)
		break
	fi
done
debs=${RS_PKG_DEBS:-$repo/build/deb}
addr=${RS_ADDR:-198.18.0.1}
rdmadev=${RS_RDMADEV:-rxe0}
kver=$(uname -r)
version=$(cat "$repo/VERSION" 2>/dev/null)
work=$(mktemp -d /tmp/rs-pkg.XXXXXX)
log=$work/log
trap 'rm -rf "$work"' EXIT

n=0 failed=0
cases=(install header autoload_af autoload_inet transfer rsstat man
	rdmastream_run remove)

echo "TAP version 13"
echo "1..${#cases[@]}"

# the case's log, as TAP comments
show() { sed 's/^/# /' "$log"; }

# a kernel-side check failed: say what
bad() { echo "$*" >>"$log"; return 1; }

loaded() { [[ -d /sys/module/rdmastream ]]; }

# unload the module (a closed socket can hold it for a moment)
unload() {
	for _ in $(seq 50); do
		loaded || return 0
		rmmod rdmastream 2>/dev/null && ! loaded && return 0
		sleep 0.2
	done
	bad "rmmod rdmastream failed: $(rmmod rdmastream 2>&1)"
}

# rxe's counter of packets sent
sent_pkts() {
	cat "/sys/class/infiniband/$rdmadev/ports/1/hw_counters/sent_pkts" \
		2>/dev/null || echo 0
}

# kernel TCP's connections opened so far (ActiveOpens + PassiveOpens)
tcp_opens() {
	awk '$1 == "Tcp:" && $2 ~ /^[0-9]+$/ { print $6 + $7 }' /proc/net/snmp
}

# python3 opens one socket of family $1, protocol $2 and prints the errno
pysock() {
	python3 - "$1" "$2" <<'EOF' 2>>"$log"
import socket, sys
try:
    socket.socket(int(sys.argv[1]), socket.SOCK_STREAM, int(sys.argv[2])).close()
    print(0)
except OSError as e:
    print(e.errno)
EOF
}

# expect the module to get loaded by socket($1, SOCK_STREAM, $2)
autoload() {
	local fam=$1 proto=$2 err
	unload || return 1
	loaded && { bad "rdmastream is loaded before socket($fam)"; return 1; }
	err=$(pysock "$fam" "$proto")
	[[ $err == 0 ]] ||
		bad "socket($fam, SOCK_STREAM, $proto): errno $err" || return 1
	loaded || bad "socket($fam, ...) worked but rdmastream is not loaded" ||
		return 1
	echo "socket($fam, SOCK_STREAM, $proto) loaded rdmastream" >>"$log"
}

t_install() {
	local start secs status ko

	# no index update of man-db in the throw-away VM (it would scan every
	# manual page under TCG for a minute: the trigger checks this file)
	rm -f /var/lib/man-db/auto-update
	loaded && { bad "rdmastream is loaded already (use vm-run --no-module)"; return 1; }
	ls "$debs"/rdmastream-dkms_*_all.deb "$debs"/rdmastream-tools_*.deb \
		>>"$log" 2>&1 || bad "no packages in $debs (make deb)" || return 1
	start=$(date +%s.%N)
	# (dpkg's output as it comes: under TCG the DKMS build takes minutes)
	DEBIAN_FRONTEND=noninteractive dpkg -i \
		"$debs"/rdmastream-dkms_*_all.deb \
		"$debs"/rdmastream-tools_*.deb 2>&1 | sed -u 's/^/# /'
	if ((PIPESTATUS[0])); then
		cat /var/lib/dkms/rdmastream/*/build/make.log >>"$log" 2>&1
		bad "dpkg -i failed"
		return 1
	fi
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" \
		'BEGIN { printf "%.0f", e - s }')
	echo "dpkg -i of both packages (dkms build + install) took ${secs}s" \
		>>"$log"
	echo "$secs" >"${RS_OUT:-$work}/pkg-install-seconds"
	status=$(dkms status rdmastream 2>&1)
	echo "dkms status: $status" >>"$log"
	[[ $status == *"rdmastream/$version, $kver, "*": installed"* ]] ||
		bad "dkms status does not say installed for $kver" || return 1
	ko=$(find "/lib/modules/$kver/updates/dkms" -name 'rdmastream.ko*' \
		2>/dev/null | head -n1)
	[[ -n $ko ]] || bad "no rdmastream.ko under updates/dkms" || return 1
	[[ $(modinfo -F version "$ko") == "$version" ]] ||
		bad "$ko: version $(modinfo -F version "$ko"), not $version" ||
		return 1
	modinfo -F alias "$ko" | grep -qx net-pf-19 ||
		bad "$ko has no net-pf-19 alias" || return 1
	! loaded || bad "dpkg -i loaded the module (it should load on demand)"
}

t_header() {
	gcc -Wall -Wextra -Werror -o "$work/pkg_xfer" \
		"$repo/selftests/pkg_xfer.c" >>"$log" 2>&1 ||
		bad "pkg_xfer.c does not build against /usr/include" || return 1
	gcc -M "$repo/selftests/pkg_xfer.c" 2>>"$log" |
		grep -q '/usr/include/linux/rdmastream\.h' ||
		bad "the header did not come from /usr/include/linux"
}

t_autoload_af() {
	local path
	autoload 19 0 || return 1
	lsmod | grep -q '^rdmastream ' || bad "lsmod does not list it" ||
		return 1
	[[ $(cat /sys/module/rdmastream/version 2>/dev/null) == "$version" ]] ||
		bad "loaded version is not $version" || return 1
	path=$(modinfo -n rdmastream 2>>"$log")
	echo "modprobe's rdmastream: $path" >>"$log"
	[[ $path == /lib/modules/$kver/updates/dkms/* ]] ||
		bad "modprobe would load $path, not DKMS's"
}

t_autoload_inet() {
	autoload 2 260 && autoload 10 260
}

t_transfer() {
	local before after
	[[ -x $work/pkg_xfer ]] || bad "pkg_xfer was not built" || return 1
	loaded || autoload 19 0 || return 1
	before=$(sent_pkts)
	timeout 300 "$work/pkg_xfer" "$addr" 1048576 >>"$log" 2>&1 ||
		bad "pkg_xfer failed" || return 1
	after=$(sent_pkts)
	echo "$rdmadev sent $((after - before)) packets" >>"$log"
	((after - before >= 256)) ||
		bad "fewer than 256 packets for 1 MiB: not over RDMA?"
}

t_rsstat() {
	[[ $(command -v rsstat) == /usr/bin/rsstat ]] ||
		bad "rsstat is not /usr/bin/rsstat" || return 1
	rsstat -a >>"$log" 2>&1 || bad "rsstat -a failed" || return 1
	rsstat -s >"$work/stat" 2>>"$log" || bad "rsstat -s failed" || return 1
	cat "$work/stat" >>"$log"
	[[ -s $work/stat ]] || bad "rsstat -s printed nothing"
}

t_man() {
	local page
	page=$(man -w rdmastream 2>>"$log")
	echo "man -w rdmastream: $page" >>"$log"
	[[ $page == /usr/share/man/man7/rdmastream.7.gz ]] ||
		bad "not the packaged page" || return 1
	MANWIDTH=80 man -P cat 7 rdmastream 2>>"$log" |
		grep -q AF_RDMASTREAM || bad "the page does not render"
}

t_rdmastream_run() {
	local before after opens
	[[ $(command -v rdmastream-run) == /usr/bin/rdmastream-run ]] ||
		bad "rdmastream-run is not /usr/bin/rdmastream-run" || return 1
	loaded || autoload 19 0 || return 1
	before=$(sent_pkts)
	opens=$(tcp_opens)
	env -u RDMASTREAM_PRELOAD timeout 300 \
		rdmastream-run -v python3 - "$addr" \
		>>"$log" 2>"$work/run.err" <<'EOF'
import hashlib, socket, sys, threading
data = bytes(range(256)) * 4096
srv = socket.create_server((sys.argv[1], 0))
def serve():
    c, _ = srv.accept()
    got = b""
    while len(got) < len(data):
        b = c.recv(65536)
        if not b:
            break
        got += b
    c.sendall(hashlib.sha256(got).digest())
    c.close()
t = threading.Thread(target=serve)
t.start()
c = socket.create_connection(srv.getsockname())
c.sendall(data)
digest = c.recv(32)
t.join()
assert digest == hashlib.sha256(data).digest(), "digest differs"
print("rdmastream-run: 1 MiB through python3, digest checked")
EOF
	local rc=$?
	cat "$work/run.err" >>"$log"
	((rc == 0)) || bad "python3 under rdmastream-run: exit $rc" || return 1
	grep -q 'stream socket over rdmastream' "$work/run.err" ||
		bad "no socket was converted (preload library not found?)" ||
		return 1
	after=$(sent_pkts)
	echo "$rdmadev sent $((after - before)) packets" >>"$log"
	((after - before >= 256)) || bad "not over RDMA" || return 1
	(($(tcp_opens) == opens)) || bad "kernel TCP opened a connection"
}

t_remove() {
	local left p
	unload || return 1
	DEBIAN_FRONTEND=noninteractive dpkg -r rdmastream-tools \
		rdmastream-dkms >>"$log" 2>&1 ||
		bad "dpkg -r failed" || return 1
	for p in rdmastream-tools rdmastream-dkms; do
		[[ $(dpkg-query -W -f='${db:Status-Status}' $p 2>/dev/null) \
			!= installed ]] || bad "$p still installed" || return 1
	done
	[[ -z $(dkms status rdmastream 2>/dev/null) ]] ||
		bad "dkms status: $(dkms status rdmastream)" || return 1
	left=$(find /lib/modules -name 'rdmastream.ko*' 2>/dev/null)
	[[ -z $left ]] || bad "left behind: $left" || return 1
	! modprobe -n rdmastream 2>/dev/null ||
		bad "modprobe still finds rdmastream" || return 1
	for p in /usr/src/rdmastream-"$version" /var/lib/dkms/rdmastream \
		 /usr/include/linux/rdmastream.h /usr/bin/rsstat \
		 /usr/bin/rdmastream-run /usr/share/man/man7/rdmastream.7.gz; do
		[[ ! -e $p ]] || bad "$p is still there" || return 1
	done
	[[ $(pysock 19 0) == 97 ]] ||
		bad "socket(AF_RDMASTREAM) is not EAFNOSUPPORT after removal" ||
		return 1
	! loaded || bad "rdmastream got loaded after removal"
}

for c in "${cases[@]}"; do
	n=$((n + 1))
	: >"$log"
	echo "#  RUN pkg.$c ..."
	if "t_$c"; then
		show
		echo "#            OK  pkg.$c"
		echo "ok $n pkg.$c"
	else
		show
		echo "#          FAIL  pkg.$c"
		echo "not ok $n pkg.$c"
		failed=$((failed + 1))
	fi
done
echo "# pkg: $((n - failed)) passed, $failed failed"
((failed == 0))
