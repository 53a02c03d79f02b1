// SPDX-License-Identifier: GPL-2.0
/*
 * The BPF switch (docs/preload.md): on kernels with the
 * update_socket_protocol() hook (6.6 and later), turn the TCP stream
 * sockets that tasks of one cgroup create with socket(2) into
 * IPPROTO_RDMASTREAM sockets, in the kernel, before the socket exists.
 * It reaches what LD_PRELOAD cannot: static binaries, programs that make
 * the system call themselves, setuid programs.
 *
 * A BPF_MODIFY_RETURN program: returning 0 lets the hook run and keep
 * the caller's protocol (and leaves the decision to any other program
 * attached there); a non-zero return is the protocol socket(2) uses.
 * rdmastream-switch (rs_switch.c) loads it, fills rs_cgroup with the one
 * cgroup whose tasks (and their descendants' cgroups) are switched, and
 * sets rs_ipproto from the module's ipproto parameter before loading.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* the kernel's values; this file sees no libc headers */
#define RS_AF_INET		2
#define RS_AF_INET6		10
#define RS_SOCK_STREAM		1
#define RS_SOCK_TYPE_MASK	0xf	/* type carries SOCK_NONBLOCK... */
#define RS_IPPROTO_TCP		6

/* IPPROTO_RDMASTREAM as the loaded module has it (set by the loader) */
const volatile int rs_ipproto;

/* slot 0: the cgroup whose tasks are switched */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rs_cgroup SEC(".maps");

/* slot 0: sockets switched so far (rdmastream-run -v reports it) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rs_switched SEC(".maps");

static __always_inline int rs_is_tcp(int family, int type, int protocol)
{
	if (family != RS_AF_INET && family != RS_AF_INET6)
		return 0;
	if ((type & RS_SOCK_TYPE_MASK) != RS_SOCK_STREAM)
		return 0;
	return protocol == 0 || protocol == RS_IPPROTO_TCP;
}

SEC("fmod_ret/update_socket_protocol")
int BPF_PROG(rs_switch, int family, int type, int protocol)
{
	__u32 slot = 0;
	__u64 *n;

	if (!rs_ipproto || !rs_is_tcp(family, type, protocol))
		return 0;
	if (bpf_current_task_under_cgroup(&rs_cgroup, 0) != 1)
		return 0;
	n = bpf_map_lookup_elem(&rs_switched, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
	return rs_ipproto;
}

char LICENSE[] SEC("license") = "GPL";
