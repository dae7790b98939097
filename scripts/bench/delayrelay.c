// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * delayrelay.c - a TCP relay that holds what passes through it for a fixed time: the stand-in
 * for `tc netem delay` on a kernel without sch_netem. scripts/bench/scaleout.sh --ec slows one
 * member with it (the filesystem is remounted listing the relay's address in place of the
 * member's); built by that script with cc into BUILD/bench/.
 *
 *   delayrelay --listen ADDR:PORT --to ADDR:PORT --delay-us N [--reply-delay-us N]
 *              [--port-file FILE]
 *
 * Each accepted connection gets one connection of its own to --to (TCP_NODELAY on both), and
 * the bytes are forwarded both ways. Every chunk read is queued with its deadline, read time
 * plus the direction's delay: --delay-us for what the accepted side sends (the requests, as
 * netem on the client's end of a link delays them), --reply-delay-us (default 0) for what
 * comes back. A chunk is written once its deadline has passed; nothing waits for an earlier
 * chunk's reply, so many requests in flight on one connection are each delayed by N, not
 * serialised: a pipe with latency, as netem is. A write that would block keeps the rest
 * queued; a direction with RELAY_QUEUE_MAX bytes queued stops reading its side until it
 * drains, which bounds the memory. An end of stream is held like a chunk, then passed on
 * with shutdown(SHUT_WR) once its queue has drained; a connection is closed when both
 * directions have ended, or at once when either socket fails (reset, write error).
 *
 * One thread, level-triggered epoll. The wait's timeout is the earliest deadline, in
 * nanoseconds (epoll_pwait2; the process's timer slack is set to 1 ns), so a chunk leaves
 * within microseconds of its deadline. SIGTERM and SIGINT (through a signalfd) close every
 * connection, print what was relayed and exit 0. The port is printed on a ready line,
 * "delayrelay: listening on tcp ADDR:PORT, ..." (the memserver's shape: scripts/lib/proc.sh's
 * ready_port reads it), and written to --port-file when given (port 0 picks one).
 * Exit status: 0 after a signal, 1 on a setup error, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RELAY_QUEUE_MAX (4u << 20) /* bytes queued in one direction before reading stops */
#define RELAY_READ_MAX (256u << 10) /* one read() */
#define RELAY_IOV_MAX 64 /* due chunks per sendmsg() */
#define RELAY_EVENTS 64
#define RELAY_DELAY_MAX_US 60000000ull /* one minute */

/* bytes read at one time, and when they may leave */
struct relay_chunk {
	struct relay_chunk *next;
	uint64_t due_ns; /* CLOCK_MONOTONIC */
	size_t len;
	size_t off; /* already written */
	char data[];
};

/* one socket of a relayed pair */
enum relay_side { RELAY_CLIENT, RELAY_TARGET };

struct relay_conn;

struct relay_end {
	struct relay_conn *conn;
	int fd;
	uint32_t events; /* what epoll watches for, 0: not in the epoll set */
};

/* one direction: read from end[s], queued, written to end[!s] */
struct relay_dir {
	struct relay_chunk *head, *tail;
	size_t queued; /* bytes in the queue, not yet written */
	uint64_t delay_ns;
	uint64_t eof_due_ns; /* when the end of stream may be passed on */
	uint64_t bytes; /* written, over the connection's life */
	bool eof; /* the reading side sent its end of stream */
	bool shut; /* and it was passed on: shutdown(SHUT_WR) of the writing side */
	bool blocked; /* the last write would block: wait for EPOLLOUT */
};

struct relay_conn {
	struct relay_conn *prev, *next;
	struct relay_end end[2]; /* indexed by enum relay_side */
	struct relay_dir dir[2]; /* dir[s]: from end[s] to end[!s] */
	bool connecting; /* the connect() to the target is under way */
	bool dead; /* a socket failed: closed at the end of this round */
};

struct relay {
	int epfd;
	int listen_fd;
	int signal_fd;
	struct sockaddr_storage to;
	socklen_t to_len;
	uint64_t delay_ns[2]; /* per direction, by the side that sends */
	struct relay_conn *conns;
	unsigned long nconns; /* accepted, over the relay's life */
	uint64_t bytes[2]; /* relayed, per direction, of connections already closed */
	char *buf; /* RELAY_READ_MAX: what one read() brings in */
	char listen_tag, signal_tag; /* epoll data of the two fds that are not ends */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* end e's epoll registration to match what its two directions need now; 0 or -errno */
static int relay_end_watch(struct relay *r, struct relay_end *e, uint32_t want)
{
	struct epoll_event ev = { .events = want, .data.ptr = e };
	int op;

	if (want == e->events)
		return 0;
	op = !e->events ? EPOLL_CTL_ADD : !want ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
	if (epoll_ctl(r->epfd, op, e->fd, &ev) < 0) {
		fprintf(stderr, "delayrelay: epoll_ctl: %s\n", strerror(errno));
		return -errno;
	}
	e->events = want;
	return 0;
}

static void relay_dir_clear(struct relay_dir *d)
{
	struct relay_chunk *c, *next;

	for (c = d->head; c; c = next) {
		next = c->next;
		free(c);
	}
	d->head = d->tail = NULL;
	d->queued = 0;
}

/* close both sockets, free the queues, unlink c; NULL-tolerant */
static void relay_conn_free(struct relay *r, struct relay_conn *c)
{
	int s;

	if (!c)
		return;
	for (s = 0; s < 2; s++) {
		relay_dir_clear(&c->dir[s]);
		r->bytes[s] += c->dir[s].bytes;
		if (c->end[s].fd >= 0 && close(c->end[s].fd) < 0)
			fprintf(stderr, "delayrelay: close: %s\n", strerror(errno));
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		r->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

/* read what end s has into dir[s]'s queue, each read due at its time plus the delay */
static void relay_read(struct relay_conn *c, enum relay_side s, char *buf)
{
	struct relay_dir *d = &c->dir[s];
	struct relay_chunk *ch;
	ssize_t n;

	while (!d->eof && d->queued < RELAY_QUEUE_MAX) {
		n = read(c->end[s].fd, buf, RELAY_READ_MAX);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			if (errno != ECONNRESET)
				fprintf(stderr, "delayrelay: read: %s\n", strerror(errno));
			c->dead = true;
			return;
		}
		if (n == 0) {
			d->eof = true;
			d->eof_due_ns = now_ns() + d->delay_ns;
			return;
		}
		ch = malloc(sizeof(*ch) + (size_t)n);
		if (!ch) {
			fprintf(stderr, "delayrelay: malloc: %s\n", strerror(ENOMEM));
			c->dead = true;
			return;
		}
		ch->next = NULL;
		ch->due_ns = now_ns() + d->delay_ns;
		ch->len = (size_t)n;
		ch->off = 0;
		memcpy(ch->data, buf, (size_t)n);
		if (d->tail)
			d->tail->next = ch;
		else
			d->head = ch;
		d->tail = ch;
		d->queued += (size_t)n;
	}
}

/* write dir[s]'s chunks that are due at now to end[!s], as far as the socket takes them */
static void relay_flush(struct relay_conn *c, enum relay_side s, uint64_t now)
{
	struct relay_dir *d = &c->dir[s];
	struct iovec iov[RELAY_IOV_MAX];
	struct msghdr msg = { .msg_iov = iov };
	struct relay_chunk *ch;
	size_t n, k;
	ssize_t w;

	while (d->head && d->head->due_ns <= now && !d->blocked) {
		k = 0;
		for (ch = d->head; ch && ch->due_ns <= now && k < RELAY_IOV_MAX; ch = ch->next) {
			iov[k].iov_base = ch->data + ch->off;
			iov[k].iov_len = ch->len - ch->off;
			k++;
		}
		msg.msg_iovlen = k;
		w = sendmsg(c->end[!s].fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			d->blocked = true;
			return;
		}
		if (w < 0) {
			if (errno != EPIPE && errno != ECONNRESET)
				fprintf(stderr, "delayrelay: sendmsg: %s\n", strerror(errno));
			c->dead = true;
			return;
		}
		d->queued -= (size_t)w;
		d->bytes += (uint64_t)w;
		for (n = (size_t)w; n;) {
			ch = d->head;
			k = ch->len - ch->off < n ? ch->len - ch->off : n;
			ch->off += k;
			n -= k;
			if (ch->off < ch->len)
				break;
			d->head = ch->next;
			if (!d->head)
				d->tail = NULL;
			free(ch);
		}
	}
}

/*
 * One round for c at now: write what is due, pass on an end of stream whose queue has
 * drained, watch each socket for what its directions need, and lower *next to c's earliest
 * deadline. false: c is finished (both directions ended, or a socket failed).
 */
static bool relay_conn_step(struct relay *r, struct relay_conn *c, uint64_t now, uint64_t *next)
{
	struct relay_dir *d;
	uint32_t want[2] = { 0, 0 };
	int s;

	for (s = 0; s < 2 && !c->dead; s++) {
		d = &c->dir[s];
		if (s == RELAY_CLIENT && c->connecting)
			continue; /* nothing can be written to the target yet */
		relay_flush(c, s, now);
		if (d->eof && !d->shut && !d->head && d->eof_due_ns <= now) {
			if (shutdown(c->end[!s].fd, SHUT_WR) < 0 && errno != ENOTCONN) {
				fprintf(stderr, "delayrelay: shutdown: %s\n", strerror(errno));
				c->dead = true;
			}
			d->shut = true;
		}
	}
	if (c->dead || (c->dir[0].shut && c->dir[1].shut))
		return false;
	for (s = 0; s < 2; s++) {
		d = &c->dir[s];
		if (!d->eof && d->queued < RELAY_QUEUE_MAX && !(s == RELAY_TARGET && c->connecting))
			want[s] |= EPOLLIN;
		if (d->blocked)
			want[!s] |= EPOLLOUT;
		if (d->head && !d->blocked && d->head->due_ns < *next)
			*next = d->head->due_ns;
		if (d->eof && !d->shut && !d->head && d->eof_due_ns < *next)
			*next = d->eof_due_ns;
	}
	if (c->connecting)
		want[RELAY_TARGET] |= EPOLLOUT;
	for (s = 0; s < 2; s++)
		if (relay_end_watch(r, &c->end[s], want[s]) < 0)
			return false;
	return true;
}

static int relay_socket(int family)
{
	int one = 1;
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* a new connection: its own connection to the target, started; 0 or -errno */
static int relay_conn_new(struct relay *r, int cfd)
{
	struct relay_conn *c;
	int one = 1, tfd, s, rc;

	if (setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
		rc = -errno;
		fprintf(stderr, "delayrelay: setsockopt TCP_NODELAY: %s\n", strerror(-rc));
		goto err_cfd;
	}
	tfd = relay_socket(r->to.ss_family);
	if (tfd < 0) {
		rc = tfd;
		fprintf(stderr, "delayrelay: socket to the target: %s\n", strerror(-rc));
		goto err_cfd;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		fprintf(stderr, "delayrelay: calloc: %s\n", strerror(-rc));
		goto err_tfd;
	}
	for (s = 0; s < 2; s++) {
		c->end[s].conn = c;
		c->dir[s].delay_ns = r->delay_ns[s];
	}
	c->end[RELAY_CLIENT].fd = cfd;
	c->end[RELAY_TARGET].fd = tfd;
	if (connect(tfd, (struct sockaddr *)&r->to, r->to_len) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			fprintf(stderr, "delayrelay: connect to the target: %s\n", strerror(-rc));
			goto err_conn;
		}
		c->connecting = true;
	}
	c->next = r->conns;
	if (r->conns)
		r->conns->prev = c;
	r->conns = c;
	r->nconns++;
	return 0;

err_conn:
	free(c);
err_tfd:
	close(tfd);
err_cfd:
	close(cfd);
	return rc;
}

static void relay_accept(struct relay *r)
{
	int fd;

	for (;;) {
		fd = accept4(r->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				fprintf(stderr, "delayrelay: accept4: %s\n", strerror(errno));
			return;
		}
		relay_conn_new(r, fd); /* says why when it fails; the client sees a close */
	}
}

/* the target connection of c finished connecting, or failed */
static void relay_connected(struct relay_conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->end[RELAY_TARGET].fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == EINPROGRESS || err == EALREADY)
		return;
	if (err) {
		fprintf(stderr, "delayrelay: connect to the target: %s\n", strerror(err));
		c->dead = true;
		return;
	}
	c->connecting = false;
}

static void relay_event(struct relay *r, struct relay_end *e, uint32_t ev)
{
	struct relay_conn *c = e->conn;
	enum relay_side s = e == &c->end[RELAY_CLIENT] ? RELAY_CLIENT : RELAY_TARGET;

	if (c->dead)
		return;
	if (s == RELAY_TARGET && c->connecting) {
		relay_connected(c);
		return;
	}
	if (ev & EPOLLERR) {
		c->dead = true;
		return;
	}
	if (ev & EPOLLOUT)
		c->dir[!s].blocked = false;
	if (ev & (EPOLLIN | EPOLLHUP))
		relay_read(c, s, r->buf);
}

/* SIGTERM or SIGINT: true */
static bool relay_signalled(struct relay *r)
{
	struct signalfd_siginfo si;

	if (read(r->signal_fd, &si, sizeof(si)) != sizeof(si))
		return false;
	fprintf(stderr, "delayrelay: %s: exiting\n", strsignal((int)si.ssi_signo));
	return true;
}

/* until a signal; 0 or -errno */
static int relay_loop(struct relay *r)
{
	struct epoll_event evs[RELAY_EVENTS];
	struct relay_conn *c, *next_c;
	struct timespec ts, *timeout;
	uint64_t now, next;
	int n, i;

	for (;;) {
		now = now_ns();
		next = UINT64_MAX;
		for (c = r->conns; c; c = next_c) {
			next_c = c->next;
			if (!relay_conn_step(r, c, now, &next))
				relay_conn_free(r, c);
		}
		timeout = NULL;
		if (next != UINT64_MAX) {
			next = next > now ? next - now : 0;
			ts.tv_sec = (time_t)(next / 1000000000ull);
			ts.tv_nsec = (long)(next % 1000000000ull);
			timeout = &ts;
		}
		n = epoll_pwait2(r->epfd, evs, RELAY_EVENTS, timeout, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "delayrelay: epoll_pwait2: %s\n", strerror(errno));
			return -errno;
		}
		for (i = 0; i < n; i++) {
			if (evs[i].data.ptr == &r->signal_tag && relay_signalled(r))
				return 0;
			if (evs[i].data.ptr == &r->listen_tag)
				relay_accept(r);
			else if (evs[i].data.ptr != &r->signal_tag)
				relay_event(r, evs[i].data.ptr, evs[i].events);
		}
	}
}

/* "HOST:PORT" or "[V6]:PORT" into addr; 0 or -EINVAL (said on stderr) */
static int relay_parse_addr(const char *opt, const char *arg, bool passive,
			    struct sockaddr_storage *addr, socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res;
	char host[256];
	const char *colon = strrchr(arg, ':');
	size_t hlen;
	int rc;

	if (passive)
		hints.ai_flags |= AI_PASSIVE;
	if (!colon || !colon[1] || (size_t)(colon - arg) >= sizeof(host)) {
		fprintf(stderr, "delayrelay: %s %s: want ADDR:PORT\n", opt, arg);
		return -EINVAL;
	}
	hlen = (size_t)(colon - arg);
	memcpy(host, arg, hlen);
	host[hlen] = 0;
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
		memmove(host, host + 1, hlen - 2);
		host[hlen - 2] = 0;
	}
	rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (rc) {
		fprintf(stderr, "delayrelay: %s %s: %s\n", opt, arg, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(addr, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int relay_write_port_file(const char *path, unsigned int port)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%u\n", port);
	if (fclose(f) != 0 || rename(tmp, path) < 0) {
		int rc = -errno;

		unlink(tmp);
		return rc;
	}
	return 0;
}

/* bind and listen on addr, print the ready line, write the port file; 0 or -errno */
static int relay_listen(struct relay *r, const struct sockaddr_storage *addr, socklen_t len,
			const char *to_arg, const char *port_file)
{
	struct sockaddr_storage got;
	socklen_t got_len = sizeof(got);
	char name[INET6_ADDRSTRLEN];
	unsigned int port;
	int one = 1, rc;
	const void *in;

	r->listen_fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->listen_fd < 0) {
		rc = -errno;
		fprintf(stderr, "delayrelay: socket: %s\n", strerror(-rc));
		return rc;
	}
	setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(r->listen_fd, (const struct sockaddr *)addr, len) < 0 ||
	    listen(r->listen_fd, 128) < 0 ||
	    getsockname(r->listen_fd, (struct sockaddr *)&got, &got_len) < 0) {
		rc = -errno;
		fprintf(stderr, "delayrelay: bind/listen: %s\n", strerror(-rc));
		return rc;
	}
	if (got.ss_family == AF_INET6) {
		in = &((struct sockaddr_in6 *)&got)->sin6_addr;
		port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
	} else {
		in = &((struct sockaddr_in *)&got)->sin_addr;
		port = ntohs(((struct sockaddr_in *)&got)->sin_port);
	}
	if (!inet_ntop(got.ss_family, in, name, sizeof(name)))
		snprintf(name, sizeof(name), "?");
	if (port_file) {
		rc = relay_write_port_file(port_file, port);
		if (rc < 0) {
			fprintf(stderr, "delayrelay: --port-file %s: %s\n", port_file, strerror(-rc));
			return rc;
		}
	}
	printf("delayrelay: listening on tcp %s%s%s:%u, to %s, delay %" PRIu64 " us, replies %"
	       PRIu64 " us\n", got.ss_family == AF_INET6 ? "[" : "", name,
	       got.ss_family == AF_INET6 ? "]" : "", port, to_arg, r->delay_ns[0] / 1000,
	       r->delay_ns[1] / 1000);
	fflush(stdout);
	return 0;
}

static const char relay_usage[] =
	"usage: delayrelay --listen ADDR:PORT --to ADDR:PORT --delay-us N [--reply-delay-us N]\n"
	"                  [--port-file FILE]\n"
	"  --listen ADDR:PORT    where to accept connections (port 0: any free port)\n"
	"  --to ADDR:PORT        where each accepted connection is relayed to\n"
	"  --delay-us N          hold what the accepted side sends N us before passing it on\n"
	"  --reply-delay-us N    the same for what comes back (default 0)\n"
	"  --port-file FILE      write the port listened on into FILE\n";

static int relay_parse_us(const char *opt, const char *arg, uint64_t *ns)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v > RELAY_DELAY_MAX_US) {
		fprintf(stderr, "delayrelay: %s %s: want microseconds, 0..%llu\n", opt, arg,
			RELAY_DELAY_MAX_US);
		return -EINVAL;
	}
	*ns = v * 1000;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "to", required_argument, NULL, 't' },
		{ "delay-us", required_argument, NULL, 'd' },
		{ "reply-delay-us", required_argument, NULL, 'r' },
		{ "port-file", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct relay r = { .epfd = -1, .listen_fd = -1, .signal_fd = -1 };
	const char *listen_arg = NULL, *to_arg = NULL, *port_file = NULL;
	struct sockaddr_storage listen_addr;
	socklen_t listen_len = 0;
	struct epoll_event ev;
	bool have_delay = false;
	sigset_t sigs;
	int opt, rc = 1;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			listen_arg = optarg;
			break;
		case 't':
			to_arg = optarg;
			break;
		case 'd':
			if (relay_parse_us("--delay-us", optarg, &r.delay_ns[RELAY_CLIENT]) < 0)
				return 2;
			have_delay = true;
			break;
		case 'r':
			if (relay_parse_us("--reply-delay-us", optarg, &r.delay_ns[RELAY_TARGET]) < 0)
				return 2;
			break;
		case 'p':
			port_file = optarg;
			break;
		case 'h':
			fputs(relay_usage, stdout);
			return 0;
		default:
			fputs(relay_usage, stderr);
			return 2;
		}
	}
	if (optind < argc || !listen_arg || !to_arg || !have_delay) {
		fprintf(stderr, "delayrelay: --listen, --to and --delay-us are needed\n%s",
			relay_usage);
		return 2;
	}
	if (relay_parse_addr("--listen", listen_arg, true, &listen_addr, &listen_len) < 0 ||
	    relay_parse_addr("--to", to_arg, false, &r.to, &r.to_len) < 0)
		return 2;
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* deadlines to the microsecond */

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0) {
		fprintf(stderr, "delayrelay: sigprocmask: %s\n", strerror(errno));
		return 1;
	}
	r.buf = malloc(RELAY_READ_MAX);
	if (!r.buf) {
		fprintf(stderr, "delayrelay: malloc: %s\n", strerror(ENOMEM));
		return 1;
	}
	r.signal_fd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (r.signal_fd < 0) {
		fprintf(stderr, "delayrelay: signalfd: %s\n", strerror(errno));
		goto out_buf;
	}
	r.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r.epfd < 0) {
		fprintf(stderr, "delayrelay: epoll_create1: %s\n", strerror(errno));
		goto out_signal;
	}
	if (relay_listen(&r, &listen_addr, listen_len, to_arg, port_file) < 0)
		goto out_listen;
	ev = (struct epoll_event){ .events = EPOLLIN, .data.ptr = &r.listen_tag };
	if (epoll_ctl(r.epfd, EPOLL_CTL_ADD, r.listen_fd, &ev) < 0) {
		fprintf(stderr, "delayrelay: epoll_ctl: %s\n", strerror(errno));
		goto out_listen;
	}
	ev = (struct epoll_event){ .events = EPOLLIN, .data.ptr = &r.signal_tag };
	if (epoll_ctl(r.epfd, EPOLL_CTL_ADD, r.signal_fd, &ev) < 0) {
		fprintf(stderr, "delayrelay: epoll_ctl: %s\n", strerror(errno));
		goto out_listen;
	}
	if (relay_loop(&r) == 0)
		rc = 0;
	while (r.conns)
		relay_conn_free(&r, r.conns);
	fprintf(stderr, "delayrelay: %lu connections, %" PRIu64 " bytes relayed to the target, %"
		PRIu64 " back\n", r.nconns, r.bytes[RELAY_CLIENT], r.bytes[RELAY_TARGET]);

out_listen:
	if (r.listen_fd >= 0)
		close(r.listen_fd);
	close(r.epfd);
out_signal:
	close(r.signal_fd);
out_buf:
	free(r.buf);
	return rc;
}
