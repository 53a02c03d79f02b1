// SPDX-License-Identifier: GPL-2.0
/*
 * What a socket over TCP (docs/fallback.md) passes on to its TCP socket:
 * the options and ioctls that programs written for TCP rely on and that
 * are safe on a socket the module holds on the caller's behalf. Anything
 * else is refused with the errno TCP gives when it cannot honour the
 * request, so that no user can attach a ULP (TLS, MPTCP: their callbacks
 * and ops would then outlive our hooks), put the connection in repair
 * mode, change its family (IPV6_ADDRFORM) or reach code that trusts a
 * socket the kernel made for itself. docs/security.md lists the
 * guarantee. SOL_SOCKET options never come here: the core sets them on
 * our socket, and rs_fallback.c copies the ones TCP must obey.
 *
 * The checks that remain TCP's are made in the caller's context against
 * the caller's privileges (TCP_CONGESTION's CAP_NET_ADMIN for restricted
 * algorithms and module autoloading, IP_TOS's ECN bits...), exactly as
 * on the TCP socket the program would have had.
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/net.h>
#include <linux/tcp.h>
#include <asm/ioctls.h>
#include <linux/sockios.h>
#include <net/sock.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

/* SOL_TCP options set on the TCP socket as the caller gave them. */
static bool rs_fbopt_tcp_set(int optname)
{
	switch (optname) {
	case TCP_NODELAY:
	case TCP_CORK:
	case TCP_KEEPIDLE:
	case TCP_KEEPINTVL:
	case TCP_KEEPCNT:
	case TCP_USER_TIMEOUT:
	case TCP_CONGESTION:
	case TCP_QUICKACK:
	case TCP_MAXSEG:
	case TCP_NOTSENT_LOWAT:
	case TCP_SYNCNT:
	case TCP_LINGER2:
	case TCP_WINDOW_CLAMP:
		return true;
	default:
		return false;
	}
}

static bool rs_fbopt_ip_set(int level, int optname)
{
	if (level == SOL_IP)
		return optname == IP_TOS || optname == IP_TTL ||
		       optname == IP_MTU_DISCOVER || optname == IP_RECVERR ||
		       optname == IP_FREEBIND ||
		       optname == IP_BIND_ADDRESS_NO_PORT;
	if (level == SOL_IPV6)
		return optname == IPV6_TCLASS || optname == IPV6_UNICAST_HOPS ||
		       optname == IPV6_MTU_DISCOVER ||
		       optname == IPV6_RECVERR || optname == IPV6_V6ONLY;
	return false;
}

/*
 * The errno of a refused option: TCP's for a ULP it does not have, for
 * repair mode without CAP_NET_ADMIN, and for an option it does not know.
 */
static int rs_fbopt_refused(int level, int optname)
{
	if (level != SOL_TCP)
		return -ENOPROTOOPT;
	switch (optname) {
	case TCP_ULP:
		return -ENOENT;
	case TCP_REPAIR:
	case TCP_REPAIR_QUEUE:
	case TCP_QUEUE_SEQ:
	case TCP_REPAIR_OPTIONS:
	case TCP_REPAIR_WINDOW:
		return -EPERM;
	default:
		return -ENOPROTOOPT;
	}
}

/* 0 when setsockopt(level, optname) may reach the TCP socket. */
int rs_fbopt_set_ok(int level, int optname)
{
	if (level == SOL_TCP && rs_fbopt_tcp_set(optname))
		return 0;
	if (rs_fbopt_ip_set(level, optname))
		return 0;
	return rs_fbopt_refused(level, optname);
}

/* 0 when getsockopt(level, optname) may read the TCP socket. */
int rs_fbopt_get_ok(int level, int optname)
{
	if (level == SOL_TCP &&
	    (optname == TCP_INFO || optname == TCP_CC_INFO))
		return 0;
	if ((level == SOL_IP && optname == IP_MTU) ||
	    (level == SOL_IPV6 && optname == IPV6_MTU))
		return 0;
	if (level == SOL_TCP && rs_fbopt_tcp_set(optname))
		return 0;
	if (rs_fbopt_ip_set(level, optname))
		return 0;
	return -ENOPROTOOPT;
}

/*
 * The ioctls of a TCP connection's queues; the rest (routes, interfaces)
 * go on to the core's device ioctls, in the caller's context, as for any
 * socket that does not know them.
 */
bool rs_fbopt_ioctl_ok(unsigned int cmd)
{
	return cmd == SIOCINQ || cmd == SIOCOUTQ || cmd == SIOCOUTQNSD ||
	       cmd == SIOCATMARK;
}

/* SOL_RDMASTREAM stays ours; the allowed rest goes to TCP once over it. */
int rs_fb_set(struct socket *sock, int level, int optname,
	      sockptr_t optval, unsigned int optlen)
{
	struct socket *fb = rs_fbc(rs_sk(sock->sk));
	int err;

	if (!fb || level == SOL_RDMASTREAM)
		return rs_setsockopt(sock, level, optname, optval, optlen);
	err = rs_fbopt_set_ok(level, optname);
	if (err)
		return err;
	return fb->ops->setsockopt(fb, level, optname, optval, optlen);
}

int rs_fb_get(struct socket *sock, int level, int optname,
	      char __user *optval, int __user *optlen)
{
	struct socket *fb = rs_fbc(rs_sk(sock->sk));
	int err;

	if (!fb || level == SOL_RDMASTREAM)
		return rs_getsockopt(sock, level, optname, optval, optlen);
	err = rs_fbopt_get_ok(level, optname);
	if (err)
		return err;
	return fb->ops->getsockopt(fb, level, optname, optval, optlen);
}
