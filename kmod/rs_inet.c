// SPDX-License-Identifier: GPL-2.0
/*
 * The IPPROTO route: socket(AF_INET or AF_INET6, SOCK_STREAM,
 * IPPROTO_RDMASTREAM) gives the protocol of AF_RDMASTREAM to runtimes that
 * only know the IP families (Python, Go, Java...). inet_create() and
 * inet6_create() allocate the socket from the proto registered here and
 * call its init, which makes it ours; from then on the proto_ops are
 * AF_RDMASTREAM's, which check addresses by the socket's family
 * (rs_check_family()) and name IPv4 endpoints v4-mapped on AF_INET6.
 *
 * What inet_create() expects of the object: an inet_sock at its start
 * (struct rs_sock's union) and, for AF_INET6, an ipv6_pinfo at its end
 * (struct rs6_sock; where struct proto has ipv6_pinfo_offset, 6.7 on, it
 * says where).
 */
#include <linux/module.h>
#include <net/protocol.h>
#include <net/ipv6.h>
#include <net/dst.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

int rs_ipproto = IPPROTO_RDMASTREAM;
module_param_named(ipproto, rs_ipproto, int, 0444);
MODULE_PARM_DESC(ipproto, "protocol number of the AF_INET/AF_INET6 route (default "
		 __stringify(IPPROTO_RDMASTREAM) ", 256..262; 0: none)");

/*
 * sock_lock_init() gives every AF_INET (AF_INET6) socket TCP's lock
 * class. Ours nest other locks than TCP's: under lock_sock() of a
 * listener, rdma_listen() can create and lock a TCP socket (siw's
 * listener), which lockdep would take for recursion. A class of our own
 * per family, as sunrpc gives its sockets.
 */
static struct lock_class_key rs_inet_sk_key[2], rs_inet_slock_key[2];

void rs_inet_sock_init(struct sock *sk)
{
	int i = sk->sk_family == AF_INET6;

	if (sk->sk_family != AF_INET && sk->sk_family != AF_INET6)
		return;
	sock_lock_init_class_and_name(sk,
				      i ? "slock-AF_INET6-RDMASTREAM" :
					  "slock-AF_INET-RDMASTREAM",
				      &rs_inet_slock_key[i],
				      i ? "sk_lock-AF_INET6-RDMASTREAM" :
					  "sk_lock-AF_INET-RDMASTREAM",
				      &rs_inet_sk_key[i]);
}

/*
 * What inet_sock_destruct() and inet6_sock_destruct(), which our
 * destructor replaces, free of the inet part: IP options a LSM's netlabel
 * may have set (CIPSO, CALIPSO), IPv6 tx options and a cached route.
 */
void rs_inet_destruct(struct sock *sk)
{
	if (sk->sk_family != AF_INET && sk->sk_family != AF_INET6)
		return;
#if IS_ENABLED(CONFIG_IPV6)
	/* (7.x: inet6_sock_destruct() frees the inet part too) */
	if (sk->sk_family == AF_INET6 && inet_sk(sk)->pinet6 &&
	    rs_inet6_cleanup_sock(sk))
		return;
#endif
	kfree(rcu_dereference_protected(inet_sk(sk)->inet_opt, 1));
	dst_release(rcu_dereference_protected(sk->sk_dst_cache, 1));
}

/* inet_create() calls this once sock_init_data() has run */
static int rs_inet_init(struct sock *sk)
{
	rs_sock_setup(sk, sk->sk_socket);
	return 0;
}

/* sk_common_release() calls it when inet_create() fails after init */
static void rs_inet_unhash(struct sock *sk)
{
}

static struct proto rs_inet_prot = {
	.name		= "RDMASTREAM-IP",
	.owner		= THIS_MODULE,
	.obj_size	= sizeof(struct rs_sock),
	.init		= rs_inet_init,
	.unhash		= rs_inet_unhash,
	.keepalive	= rs_keepalive,
};

static struct inet_protosw rs_inet_sw = {
	.type		= SOCK_STREAM,
	.prot		= &rs_inet_prot,
	.ops		= &rs_inet_ops,
};

#if IS_ENABLED(CONFIG_IPV6)
static struct proto rs_inet6_prot = {
	.name		= "RDMASTREAM-IPv6",
	.owner		= THIS_MODULE,
	.obj_size	= sizeof(struct rs6_sock),
#ifdef RS_HAVE_IPV6_PINFO_OFFSET
	.ipv6_pinfo_offset = offsetof(struct rs6_sock, inet6),
#endif
	.init		= rs_inet_init,
	.unhash		= rs_inet_unhash,
	.keepalive	= rs_keepalive,
};

static struct inet_protosw rs_inet6_sw = {
	.type		= SOCK_STREAM,
	.prot		= &rs_inet6_prot,
	.ops		= &rs_inet6_ops,
};

static int rs_inet6_register(void)
{
	int err;

	/* inet6_sk_generic() of 6.1: the ipv6_pinfo ends the object */
	BUILD_BUG_ON(offsetof(struct rs6_sock, inet6) +
		     sizeof(struct ipv6_pinfo) != sizeof(struct rs6_sock));
	err = proto_register(&rs_inet6_prot, 1);
	if (err)
		return err;
	rs_inet6_sw.protocol = rs_ipproto;
	err = inet6_register_protosw(&rs_inet6_sw);
	if (err)
		proto_unregister(&rs_inet6_prot);
	return err;
}

static void rs_inet6_unregister(void)
{
	inet6_unregister_protosw(&rs_inet6_sw);
	proto_unregister(&rs_inet6_prot);
}
#else
static int rs_inet6_register(void)
{
	return 0;
}

static void rs_inet6_unregister(void)
{
}
#endif

/*
 * Numbers in the private range that kernels use or have been offered:
 * inet_register_protosw() would let us shadow them without a word.
 */
static bool rs_ipproto_taken(int proto)
{
	static const int taken[] = {
		256,	/* IPPROTO_SMC, 6.11 */
		257,	/* IPPROTO_SMBDIRECT, proposed */
		261,	/* IPPROTO_QUIC */
		262,	/* IPPROTO_MPTCP, 5.6 */
	};
	int i;

	for (i = 0; i < ARRAY_SIZE(taken); i++)
		if (taken[i] == proto)
			return true;
	return false;
}

/* The ipproto parameter, checked before anything is registered. */
int rs_inet_check(void)
{
	if (!rs_ipproto)
		return 0;
	if (rs_ipproto <= IPPROTO_RAW || rs_ipproto >= IPPROTO_MAX ||
	    rs_ipproto_taken(rs_ipproto)) {
		pr_err("rdmastream: ipproto %d is not a free number in %d..%d (0: no IPPROTO route)\n",
		       rs_ipproto, IPPROTO_RAW + 1, IPPROTO_MAX - 1);
		return -EINVAL;
	}
	return 0;
}

/*
 * After sock_register(), the last step of loading: with the number
 * checked, neither protosw registration can fail (they refuse only a
 * bad type or a permanent protocol's number), so no socket of the route
 * can exist when loading fails.
 */
int rs_inet_register(void)
{
	int err;

	if (!rs_ipproto)
		return 0;
	err = proto_register(&rs_inet_prot, 1);
	if (err)
		return err;
	rs_inet_sw.protocol = rs_ipproto;
	inet_register_protosw(&rs_inet_sw);
	err = rs_inet6_register();
	if (err) {
		inet_unregister_protosw(&rs_inet_sw);
		proto_unregister(&rs_inet_prot);
		return err;
	}
	pr_info("rdmastream: IPPROTO route %d registered for AF_INET and AF_INET6\n",
		rs_ipproto);
	return 0;
}

void rs_inet_unregister(void)
{
	if (!rs_ipproto)
		return;
	rs_inet6_unregister();
	inet_unregister_protosw(&rs_inet_sw);
	proto_unregister(&rs_inet_prot);
}

/* the first socket() of the route loads the module (SOCK_STREAM is 1) */
MODULE_ALIAS_NET_PF_PROTO_TYPE(PF_INET, IPPROTO_RDMASTREAM, 1);
MODULE_ALIAS_NET_PF_PROTO_TYPE(PF_INET6, IPPROTO_RDMASTREAM, 1);
