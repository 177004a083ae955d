/*
 * rrfloor: the least user-space work a TCP request/response test can do, as a
 * side-by-side reference for linkperf's many-user rows (bench/peers.sh).
 *
 * Each side runs T threads, each with its own epoll set (level-triggered) over
 * its share of the connections; per transaction each side makes one recv and
 * one send, and epoll_wait is shared by every connection that is ready at once.
 * That is the same system-call pattern as linkperf's workers, without any
 * measuring: no histogram, no per-second intervals, no per-flow counters. The
 * client counts completed transactions inside the window and prints their rate.
 *
 *   rrfloor server ADDR PORT THREADS REQ RESP
 *   rrfloor client ADDR PORT THREADS REQ RESP USERS WARMUP_S SECONDS
 *
 * The client prints one line, "transactions_per_s=N", and exits 0, or exits
 * non-zero on any socket error; its loop is bounded by its window. The server
 * runs until it is killed, and drops a connection that closes or fails.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_MSG (64 * 1024)
#define MAX_THREADS 64
#define EVENTS 512

static int g_req, g_resp;
static unsigned *g_have; /* bytes of the current message received, by fd */
static int g_nfd;

struct worker {
	pthread_t tid;
	int ep;
	int nflows;
	int *flows;
	unsigned long count; /* client: transactions completed in the window */
	char pad[64];
};

static void die(const char *what)
{
	fprintf(stderr, "rrfloor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse(const char *s, int lo, int hi, const char *name)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "rrfloor: %s must be a whole number from %d to %d, not '%s'\n", name, lo, hi, s);
		exit(2);
	}
	return (int)v;
}

static void raise_nofile(void)
{
	struct rlimit rl = {.rlim_cur = 1024, .rlim_max = 1024};
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	g_nfd = rl.rlim_cur > 1 << 20 ? 1 << 20 : (int)rl.rlim_cur;
	g_have = calloc((size_t)g_nfd, sizeof *g_have);
	if (!g_have)
		die("calloc");
}

static void nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
		die("TCP_NODELAY");
}

static void send_all(int fd, const char *buf, int len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("send");
		}
		buf += n;
		len -= (int)n;
	}
}

static void add(int ep, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	if (fd >= g_nfd)
		die("descriptor beyond the open-file limit");
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

/* ---- server ------------------------------------------------------------- */

static void *server_worker(void *arg)
{
	struct worker *w = arg;
	static _Thread_local char buf[MAX_MSG];
	static _Thread_local char resp[MAX_MSG];
	struct epoll_event ev[EVENTS];
	for (;;) {
		int n = epoll_wait(w->ep, ev, EVENTS, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			ssize_t r = recv(fd, buf, sizeof buf, 0);
			if (r <= 0) {
				/* the client closed its connection (or it failed): drop it */
				close(fd);
				continue;
			}
			g_have[fd] += (unsigned)r;
			while (g_have[fd] >= (unsigned)g_req) {
				g_have[fd] -= (unsigned)g_req;
				send_all(fd, resp, g_resp);
			}
		}
	}
	return NULL;
}

static int serve(const char *addr, int port, int threads)
{
	struct worker w[MAX_THREADS];
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, ls;
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "rrfloor: not an IPv4 address: %s\n", addr);
		return 2;
	}
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		die("socket");
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("bind");
	if (listen(ls, 4096) < 0)
		die("listen");
	for (int t = 0; t < threads; t++) {
		w[t].ep = epoll_create1(0);
		if (w[t].ep < 0)
			die("epoll_create1");
		if (pthread_create(&w[t].tid, NULL, server_worker, &w[t]) != 0)
			die("pthread_create");
	}
	for (unsigned long k = 0;; k++) {
		int fd = accept(ls, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		if (fd >= g_nfd) {
			close(fd);
			continue;
		}
		nodelay(fd);
		g_have[fd] = 0;
		add(w[k % (unsigned long)threads].ep, fd);
	}
}

/* ---- client ------------------------------------------------------------- */

static double g_start, g_end;

static void *client_worker(void *arg)
{
	struct worker *w = arg;
	static _Thread_local char buf[MAX_MSG];
	static _Thread_local char req[MAX_MSG];
	struct epoll_event ev[EVENTS];
	unsigned long count = 0;
	for (int i = 0; i < w->nflows; i++)
		send_all(w->flows[i], req, g_req);
	for (;;) {
		int n = epoll_wait(w->ep, ev, EVENTS, 100);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		/* one clock read per batch of ready connections, as an event loop does */
		double t = now_s();
		if (t >= g_end)
			break;
		int counting = t >= g_start;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			ssize_t r = recv(fd, buf, sizeof buf, 0);
			if (r == 0) {
				errno = ECONNRESET;
				die("recv: the server closed a connection");
			}
			if (r < 0)
				die("recv");
			g_have[fd] += (unsigned)r;
			if (g_have[fd] >= (unsigned)g_resp) {
				g_have[fd] -= (unsigned)g_resp;
				count += (unsigned long)counting;
				send_all(fd, req, g_req);
			}
		}
	}
	w->count = count;
	return NULL;
}

static int client(const char *addr, int port, int threads, int users, double warmup, double secs)
{
	static struct worker w[MAX_THREADS];
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	unsigned long total = 0;
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "rrfloor: not an IPv4 address: %s\n", addr);
		return 2;
	}
	for (int t = 0; t < threads; t++) {
		w[t].ep = epoll_create1(0);
		w[t].flows = calloc((size_t)users / (size_t)threads + 1, sizeof(int));
		if (w[t].ep < 0 || !w[t].flows)
			die("epoll_create1");
	}
	for (int u = 0; u < users; u++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
			die("connect");
		nodelay(fd);
		struct worker *x = &w[u % threads];
		add(x->ep, fd);
		x->flows[x->nflows++] = fd;
	}
	/* every user is connected: the warm-up starts now, then the window */
	g_start = now_s() + warmup;
	g_end = g_start + secs;
	for (int t = 0; t < threads; t++)
		if (pthread_create(&w[t].tid, NULL, client_worker, &w[t]) != 0)
			die("pthread_create");
	for (int t = 0; t < threads; t++) {
		pthread_join(w[t].tid, NULL);
		total += w[t].count;
	}
	printf("transactions_per_s=%.1f\n", (double)total / secs);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "server") == 0) {
		raise_nofile();
		g_req = parse(argv[5], 1, MAX_MSG, "REQ");
		g_resp = parse(argv[6], 1, MAX_MSG, "RESP");
		return serve(argv[2], parse(argv[3], 1, 65535, "PORT"), parse(argv[4], 1, MAX_THREADS, "THREADS"));
	}
	if (argc == 10 && strcmp(argv[1], "client") == 0) {
		raise_nofile();
		g_req = parse(argv[5], 1, MAX_MSG, "REQ");
		g_resp = parse(argv[6], 1, MAX_MSG, "RESP");
		return client(argv[2], parse(argv[3], 1, 65535, "PORT"), parse(argv[4], 1, MAX_THREADS, "THREADS"),
			      parse(argv[7], 1, 1 << 20, "USERS"), parse(argv[8], 0, 3600, "WARMUP_S"),
			      parse(argv[9], 1, 3600, "SECONDS"));
	}
	fprintf(stderr, "usage: rrfloor server ADDR PORT THREADS REQ RESP\n"
			"       rrfloor client ADDR PORT THREADS REQ RESP USERS WARMUP_S SECONDS\n");
	return 2;
}
