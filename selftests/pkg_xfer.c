// SPDX-License-Identifier: GPL-2.0
/*
 * pkg_xfer: a user's first rdmastream program, built by selftests/pkg.sh
 * inside the test VM against the <linux/rdmastream.h> that the
 * rdmastream-tools package installed (no -I: only /usr/include).
 *
 *	pkg_xfer ADDR [BYTES]
 *
 * Listens on an AF_RDMASTREAM socket at ADDR (port 0), connects a second
 * AF_RDMASTREAM socket to it, sends BYTES (default 1 MiB) of a pattern
 * one way while a child process checks every byte on the accepted side,
 * then reads RDMASTREAM_INFO on both ends: neither may have fallen back to
 * TCP, and the sender's RDMA WRITE count must have moved. Prints one line of
 * figures; exit status 0 when everything held, 1 otherwise (with why on
 * stderr).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/rdmastream.h>

static int fail(const char *what)
{
	fprintf(stderr, "pkg_xfer: %s: %s\n", what, strerror(errno));
	return 1;
}

static int info(int fd, struct rdmastream_info *ri)
{
	socklen_t len = sizeof(*ri);

	memset(ri, 0, sizeof(*ri));
	return getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, ri, &len);
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 12));
}

static int send_all(int fd, size_t total)
{
	unsigned char buf[16384];
	size_t off = 0, n, i;
	ssize_t r;

	while (off < total) {
		n = total - off < sizeof(buf) ? total - off : sizeof(buf);
		for (i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		r = send(fd, buf, n, 0);
		if (r <= 0)
			return -1;
		off += (size_t)r;
	}
	return 0;
}

static int recv_check(int fd, size_t total)
{
	unsigned char buf[16384];
	size_t off = 0, i;
	ssize_t r;

	while (off < total) {
		r = recv(fd, buf, sizeof(buf), 0);
		if (r <= 0)
			return -1;
		for (i = 0; i < (size_t)r; i++) {
			if (buf[i] != pattern(off + i)) {
				fprintf(stderr, "pkg_xfer: byte %zu differs\n",
					off + i);
				return -1;
			}
		}
		off += (size_t)r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t total = argc > 2 ? strtoul(argv[2], NULL, 0) : 1 << 20;
	struct rdmastream_info si, ri;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int lfd, cfd, afd, status;
	pid_t child;

	if (argc < 2) {
		fprintf(stderr, "usage: pkg_xfer ADDR [BYTES]\n");
		return 2;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1) {
		fprintf(stderr, "pkg_xfer: bad address %s\n", argv[1]);
		return 2;
	}
	lfd = socket(AF_RDMASTREAM, SOCK_STREAM, 0);
	if (lfd < 0)
		return fail("socket(AF_RDMASTREAM)");
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sin, &len))
		return fail("bind/listen");
	cfd = socket(AF_RDMASTREAM, SOCK_STREAM, 0);
	if (cfd < 0)
		return fail("socket(AF_RDMASTREAM)");
	if (connect(cfd, (struct sockaddr *)&sin, sizeof(sin)))
		return fail("connect");
	afd = accept(lfd, NULL, NULL);
	if (afd < 0)
		return fail("accept");
	child = fork();
	if (child < 0)
		return fail("fork");
	if (child == 0) {
		close(cfd);
		if (recv_check(afd, total))
			_exit(fail("receive"));
		if (info(afd, &ri))
			_exit(fail("getsockopt(RDMASTREAM_INFO)"));
		printf("pkg_xfer: receiver got %llu bytes%s\n",
		       (unsigned long long)ri.rsi_bytes_received,
		       ri.rsi_flags & RDMASTREAM_INFO_F_FALLBACK ?
		       ", over TCP" : "");
		_exit(ri.rsi_flags & RDMASTREAM_INFO_F_FALLBACK ||
		      ri.rsi_bytes_received < total);
	}
	close(afd);
	if (send_all(cfd, total))
		return fail("send");
	if (waitpid(child, &status, 0) != child)
		return fail("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "pkg_xfer: the receiver failed\n");
		return 1;
	}
	if (info(cfd, &si))
		return fail("getsockopt(RDMASTREAM_INFO)");
	printf("pkg_xfer: %zu bytes to port %u, sender %llu bytes in %llu RDMA writes\n",
	       total, ntohs(sin.sin_port),
	       (unsigned long long)si.rsi_bytes_sent,
	       (unsigned long long)si.rsi_writes);
	if (si.rsi_flags & RDMASTREAM_INFO_F_FALLBACK) {
		fprintf(stderr, "pkg_xfer: the connection fell back to TCP\n");
		return 1;
	}
	if (si.rsi_writes == 0) {
		fprintf(stderr, "pkg_xfer: no RDMA writes\n");
		return 1;
	}
	close(cfd);
	close(lfd);
	return 0;
}
