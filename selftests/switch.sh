#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The BPF switch of rdmastream-run (preload/rs_switch.c, docs/preload.md)
# with a static Go binary (switch_peer.go) that no LD_PRELOAD reaches.
# run-tests switch, as root, in the single-host VM. Which cases run
# depends on the kernel's version, and the kernel's BTF must agree:
#
# every kernel:
#   hook            update_socket_protocol is in the kernel's BTF exactly
#                   when the kernel is 6.6 or later, and rdmastream-switch
#                   --probe says the switch can be set up exactly then
# before 6.6:
#   old_kernel      rdmastream-run --bpf fails (125) saying the hook is
#                   missing; the default mode runs the static binary
#                   anyway, over TCP, and still converts a dynamic
#                   program's sockets through the preload
# 6.6 and later:
#   static          switch_peer has no program interpreter (static)
#   static_go       under rdmastream-run --bpf: its listening, accepted
#                   and connected sockets are IPPROTO_RDMASTREAM, 4 MiB
#                   go through with the same SHA-256, rxe0 sent a packet
#                   per 4 KiB, kernel TCP opened no connection, and -v
#                   counted the switched sockets
#   preload_misses  under rdmastream-run --preload the same binary's
#                   sockets are TCP: the switch made the difference
#   default         plain rdmastream-run switches the static binary too
#   scope           while a switched program runs (its BPF program is in
#                   /proc/kallsyms, the module's refcnt is held), a
#                   program outside its cgroup gets TCP sockets
#   status          the program's exit status comes back (7; 128 + 9 for
#                   SIGKILL); SIGTERM to rdmastream-run reaches it; a
#                   SIGHUP ignored at the start (nohup) stays ignored
#   descendants     a background child that outlives the program is
#                   switched, and rdmastream-run waits for it
#   not_root        without root, --bpf fails (125) and the default mode
#                   runs the program without the switch
#   cleanup         afterwards no rdmastream-run.* cgroup and no rs_switch
#                   BPF program is left in the kernel
#
# Environment: RS_ADDR (198.18.0.1), RS_RDMADEV (rxe0), RS_REPO.
# Prints TAP in the kselftest shape; exit status 1 if a case failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=${RS_REPO:-}
for r in "$repo" "$here/.." "$here/../.."; do
	if [[ -n $r && -f $r/preload/rs_switch.c ]]; then
		repo=$(cd "$r" && pwd)
		break
	fi
done
run=$repo/build/preload/rdmastream-run
sw=$repo/build/preload/rdmastream-switch
peer=$here/switch_peer
[[ -x $peer ]] || peer=$repo/build/selftests/switch_peer
addr=${RS_ADDR:-198.18.0.1}
rdmadev=${RS_RDMADEV:-rxe0}
work=$(mktemp -d /tmp/rs-switch.XXXXXX)
chmod 755 "$work"
log=$work/log
trap 'rm -rf "$work"' EXIT

# the kernel's version says whether it has the hook (6.6)
IFS=.- read -r major minor _ <<<"$(uname -r)"
if ((major > 6 || (major == 6 && minor >= 6))); then
	new=1
	cases=(hook static static_go preload_misses default scope status
	       descendants not_root cleanup)
else
	new=0
	cases=(hook old_kernel)
fi

bad() { echo "$*" >>"$log"; return 1; }

# expect WHAT WANT GOT
expect() {
	[[ $3 == "$2" ]] || bad "$1: want '$2', got '$3'"
}

counter() { cat "/sys/class/infiniband/$rdmadev/ports/1/hw_counters/sent_pkts"; }

# kernel TCP's active plus passive opens
tcp_opens() {
	awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 }
		       else print $c["ActiveOpens"] + $c["PassiveOpens"] }' \
		/proc/net/snmp
}

# SO_PROTOCOL of a dynamic program's socket (python3)
py_proto() {
	python3 -c 'import socket; s = socket.socket(); print(s.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL))'
}

case_hook() {
	local btf=0 probe=0

	grep -aq update_socket_protocol /sys/kernel/btf/vmlinux && btf=1
	"$sw" --probe 2>>"$log" && probe=1
	expect "hook in BTF on $(uname -r)" "$new" "$btf"
	expect "rdmastream-switch --probe" "$new" "$probe"
}

case_old_kernel() {
	local out rc

	out=$("$run" --bpf "$peer" proto 2>"$work/err")
	rc=$?
	expect "--bpf exit status" 125 "$rc" || return 1
	grep -q 'no update_socket_protocol hook' "$work/err" ||
		bad "--bpf said: $(cat "$work/err")" || return 1
	out=$("$run" "$peer" proto 2>>"$log") || bad "default mode failed" ||
		return 1
	expect "static binary's protocol" "proto 6" "$out" || return 1
	out=$("$run" -v python3 -c 'import socket; socket.socket()' 2>&1)
	grep -q 'stream socket over rdmastream' <<<"$out" ||
		bad "the preload did not convert python3's socket: $out"
}

case_static() {
	readelf -lW "$peer" >"$work/elf" 2>>"$log" || bad "readelf failed" ||
		return 1
	! grep -q INTERP "$work/elf" || bad "$peer is dynamically linked"
}

case_static_go() {
	local p0 t0 p1 t1 out n

	p0=$(counter) t0=$(tcp_opens)
	out=$("$run" --bpf -v "$peer" xfer "$addr" 4 2>"$work/err") ||
		bad "switch_peer failed: $(cat "$work/err")" || return 1
	p1=$(counter) t1=$(tcp_opens)
	cat "$work/err" >>"$log"
	expect "protocols" "listen 260 accept 260 dial 260" \
		"$(grep '^listen' <<<"$out")" || return 1
	expect "transfer" "xfer ok 4194304" "$(grep '^xfer' <<<"$out")" ||
		return 1
	((p1 - p0 >= 1024)) ||
		bad "$rdmadev sent $((p1 - p0)) packets for 4 MiB" || return 1
	expect "kernel TCP opens" "$t0" "$t1" || return 1
	n=$(sed -n 's/.* \([0-9]*\) sockets switched$/\1/p' "$work/err")
	((${n:-0} >= 2)) || bad "switched count '${n}', want >= 2"
}

case_preload_misses() {
	local out

	out=$("$run" --preload "$peer" xfer "$addr" 1 2>>"$log") ||
		bad "switch_peer failed" || return 1
	expect "protocols" "listen 6 accept 6 dial 6" \
		"$(grep '^listen' <<<"$out")"
}

case_default() {
	local out

	out=$("$run" -v "$peer" proto 2>"$work/err") ||
		bad "switch_peer failed: $(cat "$work/err")" || return 1
	cat "$work/err" >>"$log"
	expect "static binary's protocol" "proto 260" "$out" || return 1
	grep -q 'switching TCP sockets of cgroup' "$work/err" ||
		bad "no switch reported"
}

# wait_for FILE: up to 60 s for FILE to exist (slow emulation)
wait_for() {
	for _ in $(seq 600); do
		[[ -e $1 ]] && return 0
		sleep 0.1
	done
	bad "$1 did not appear in 60 s"
}

# reap PID: wait for a background rdmastream-run, at most 60 s (then it
# is killed and the case fails); its exit status
reap() {
	for _ in $(seq 600); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		bad "rdmastream-run $1 still running after 60 s: killed"
		kill -KILL "$1"
	fi
	wait "$1"
}

# no rs_switch BPF program in the kernel (one just freed leaves kallsyms
# after an RCU grace period)
no_program() {
	for _ in $(seq 100); do
		grep -q '_rs_switch' /proc/kallsyms || return 0
		sleep 0.1
	done
	bad "a BPF program rs_switch is loaded: $(grep _rs_switch /proc/kallsyms)"
}

case_scope() {
	local pid out ref0 ref1

	no_program || return 1
	ref0=$(cat /sys/module/rdmastream/refcnt)
	"$run" --bpf sh -c "'$peer' proto >'$work/in1'; touch '$work/ready'
			   while [ ! -e '$work/go' ]; do sleep 0.1; done
			   '$peer' proto >'$work/in2'" 2>>"$log" &
	pid=$!
	if wait_for "$work/ready"; then
		grep -q '_rs_switch' /proc/kallsyms ||
			bad "no rs_switch BPF program in /proc/kallsyms while it runs"
		ref1=$(cat /sys/module/rdmastream/refcnt)
		((ref1 > ref0)) ||
			bad "module refcnt $ref0 -> $ref1: not held by the switch"
		out=$("$peer" proto)
		expect "outside, during" "proto 6" "$out"
		expect "python3 outside" 6 "$(py_proto)"
	fi
	touch "$work/go"
	reap "$pid" || bad "the switched program failed"
	[[ ! -s $log ]] || return 1
	expect "inside, first" "proto 260" "$(cat "$work/in1")" || return 1
	expect "inside, after" "proto 260" "$(cat "$work/in2")"
}

case_status() {
	local rc pid

	"$run" --bpf sh -c 'exit 7' 2>>"$log"
	rc=$?
	expect "exit 7" 7 "$rc" || return 1
	"$run" --bpf sh -c 'kill -KILL $$' 2>>"$log"
	rc=$?
	expect "SIGKILL" 137 "$rc" || return 1
	"$run" --bpf sh -c "trap 'echo got >\"$work/term\"; exit 3' TERM
			   touch '$work/trapped'
			   while :; do sleep 0.1; done" 2>>"$log" &
	pid=$!
	wait_for "$work/trapped" || { kill -KILL "$pid"; wait "$pid"; return 1; }
	kill -TERM "$pid"
	reap "$pid"
	rc=$?
	expect "SIGTERM passed on" 3 "$rc" || return 1
	expect "the program's trap" got "$(cat "$work/term" 2>/dev/null)" ||
		return 1
	# a hangup ignored when it started stays ignored (nohup)
	(trap '' HUP
	 exec "$run" --bpf sh -c "touch '$work/hup'
				 while [ ! -e '$work/hup_go' ]; do sleep 0.1; done
				 exit 5") 2>>"$log" &
	pid=$!
	wait_for "$work/hup" || { kill -KILL "$pid"; wait "$pid"; return 1; }
	kill -HUP "$pid"
	sleep 0.5
	touch "$work/hup_go"
	reap "$pid"
	rc=$?
	expect "SIGHUP ignored (nohup)" 5 "$rc"
}

case_descendants() {
	local start secs

	start=$SECONDS
	"$run" --bpf sh -c "(sleep 2; '$peer' proto >'$work/bg') &
			   exit 0" 2>>"$log" || bad "rdmastream-run failed" ||
		return 1
	secs=$((SECONDS - start))
	expect "the background child's protocol" "proto 260" \
		"$(cat "$work/bg" 2>/dev/null)" || return 1
	((secs >= 2)) || bad "returned after ${secs}s, before the child ended"
}

case_not_root() {
	local out rc
	local -a nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)

	out=$("${nobody[@]}" "$run" --bpf "$peer" proto 2>"$work/err")
	rc=$?
	expect "--bpf as nobody" 125 "$rc" || return 1
	grep -q 'no BPF switch' "$work/err" ||
		bad "--bpf said: $(cat "$work/err")" || return 1
	out=$("${nobody[@]}" "$run" "$peer" proto 2>>"$log") ||
		bad "default mode as nobody failed" || return 1
	expect "static binary as nobody" "proto 6" "$out"
}

case_cleanup() {
	local left

	left=$(find /sys/fs/cgroup -name 'rdmastream-run.*' 2>/dev/null)
	[[ -z $left ]] || bad "cgroups left: $left" || return 1
	no_program
}

n=0 failed=0
echo "TAP version 13"
echo "1..${#cases[@]}"
echo "# switch: $(uname -r), hook expected: $new"
for c in "${cases[@]}"; do
	n=$((n + 1))
	: >"$log"
	echo "#  RUN           switch.$c ..."
	if "case_$c"; then
		sed 's/^/# /' "$log"
		echo "#            OK  switch.$c"
		echo "ok $n switch.$c"
	else
		sed 's/^/# /' "$log"
		echo "#          FAIL  switch.$c"
		echo "not ok $n switch.$c"
		failed=$((failed + 1))
	fi
done
echo "# Totals: pass:$((n - failed)) fail:$failed xfail:0 xpass:0 skip:0 error:0"
((failed == 0))
