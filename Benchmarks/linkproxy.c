// A link emulator for the benchmark: a TCP proxy on loopback that gives every connection a
// one-way latency and, optionally, a rate cap, as a real link and a capping server would.
//
//   linkproxy --upstream HOST:PORT --delay MS [--rate BYTES_PER_SECOND] [--port-file FILE]
//
// It listens on a random loopback port (written to FILE, else printed) and forwards each
// connection to HOST:PORT. Every chunk read from either side is held DELAY ms before it is
// written to the other, so a request and its answer take one round trip of 2 x DELAY; the
// first bytes a client sends are held as if the TCP handshake had taken that round trip too
// (the proxy itself accepts at once). With --rate, each connection carries at most that many
// bytes per second in each direction (a token bucket with 20 ms of burst), as CDNs and download
// mirrors cap each connection. One thread, epoll; stops on SIGTERM or SIGINT.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536
#define MAX_QUEUED (8 << 20) // per direction; reading stops past it (back-pressure)

typedef struct chunk {
    struct chunk *next;
    int64_t due_ns;
    size_t length, offset;
    char data[];
} chunk;

typedef struct direction {
    int from, to;
    chunk *head, *tail;
    size_t queued;
    int eof;         // `from` ended: shut `to` down once the queue is written
    int shut;        // `to` was shut down for writing
    double tokens;   // bytes that may be written now under the rate cap
    int64_t refilled_ns;
} direction;

typedef struct connection {
    struct connection *next, *prev;
    int client, server;
    int64_t opened_ns;
    int connected;   // the upstream connect finished
    int client_ready, server_ready; // epoll said so since the last sweep
    uint32_t client_armed, server_armed;
    direction up, down;
} connection;

static int64_t delay_ns, rate; // rate 0: uncapped
static volatile sig_atomic_t stopping;
static connection *connections;
static int epoll_fd;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void on_signal(int number) { (void)number; stopping = 1; }

// A socket's epoll data: its connection, with the low bit set for the server side.
static void watch(int fd, uint32_t events, uint64_t owner, int op) {
    struct epoll_event event = {.events = events, .data.u64 = owner};
    epoll_ctl(epoll_fd, op, fd, &event);
}

// What each socket of a connection waits for: reading while its queue has room, writing while
// the other direction has a due chunk it could not write at once.
static void rearm(connection *c) {
    uint32_t client = 0, server = 0;
    if (!c->up.eof && c->up.queued < MAX_QUEUED) client |= EPOLLIN;
    if (c->connected && !c->down.eof && c->down.queued < MAX_QUEUED) server |= EPOLLIN;
    if (!c->connected) server |= EPOLLOUT;
    if (client != c->client_armed) watch(c->client, client, (uint64_t)(uintptr_t)c, EPOLL_CTL_MOD);
    if (server != c->server_armed) watch(c->server, server, (uint64_t)(uintptr_t)c | 1, EPOLL_CTL_MOD);
    c->client_armed = client;
    c->server_armed = server;
}

static void close_connection(connection *c) {
    for (direction *d = &c->up; d; d = d == &c->up ? &c->down : NULL) {
        for (chunk *k = d->head; k;) { chunk *next = k->next; free(k); k = next; }
    }
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->client, NULL);
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->server, NULL);
    close(c->client);
    close(c->server);
    if (c->prev) c->prev->next = c->next; else connections = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
}

// Reads what `d->from` has into timed chunks. Returns -1 when the connection broke.
static int read_into(connection *c, direction *d, int64_t now) {
    static char buffer[CHUNK];
    while (d->queued < MAX_QUEUED && !d->eof) {
        ssize_t n = read(d->from, buffer, CHUNK);
        if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if (n == 0) { d->eof = 1; return 0; }
        chunk *k = malloc(sizeof(chunk) + (size_t)n);
        memcpy(k->data, buffer, (size_t)n);
        int64_t sent = now;
        // A client's first bytes leave only after the handshake's round trip.
        if (d == &c->up && sent < c->opened_ns + 2 * delay_ns) sent = c->opened_ns + 2 * delay_ns;
        *k = (chunk){.next = NULL, .due_ns = sent + delay_ns, .length = (size_t)n, .offset = 0};
        if (d->tail) d->tail->next = k; else d->head = k;
        d->tail = k;
        d->queued += (size_t)n;
    }
    return 0;
}

// Writes the due chunks the rate allows. Returns -1 when the connection broke, else the time
// the direction next has something to do (INT64_MAX: nothing until more is read).
static int64_t write_due(direction *d, int64_t now) {
    if (rate) {
        d->tokens += (double)(now - d->refilled_ns) * (double)rate / 1e9;
        double burst = (double)rate / 50;
        if (burst < 16384) burst = 16384;
        if (d->tokens > burst) d->tokens = burst;
        d->refilled_ns = now;
    }
    while (d->head && d->head->due_ns <= now) {
        chunk *k = d->head;
        size_t want = k->length - k->offset;
        if (rate) {
            if (d->tokens < 1) return now + (int64_t)((1 - d->tokens) * 1e9 / (double)rate) + 1;
            if ((double)want > d->tokens) want = (size_t)d->tokens;
        }
        ssize_t n = write(d->to, k->data + k->offset, want);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return now + 1000000; // retry in 1 ms
            return -1;
        }
        if (rate) d->tokens -= (double)n;
        k->offset += (size_t)n;
        d->queued -= (size_t)n;
        if (k->offset == k->length) {
            d->head = k->next;
            if (!d->head) d->tail = NULL;
            free(k);
        }
    }
    if (!d->head && d->eof && !d->shut) { shutdown(d->to, SHUT_WR); d->shut = 1; }
    return d->head ? d->head->due_ns : INT64_MAX;
}

static int connect_upstream(const struct sockaddr_in *upstream) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)upstream, sizeof *upstream) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv) {
    const char *upstream_text = NULL, *port_file = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--upstream")) upstream_text = argv[i + 1];
        else if (!strcmp(argv[i], "--delay")) delay_ns = atoll(argv[i + 1]) * 1000000;
        else if (!strcmp(argv[i], "--rate")) rate = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--port-file")) port_file = argv[i + 1];
        else { fprintf(stderr, "linkproxy: unknown option %s\n", argv[i]); return 2; }
    }
    const char *colon = upstream_text ? strrchr(upstream_text, ':') : NULL;
    if (!colon) {
        fprintf(stderr, "usage: linkproxy --upstream HOST:PORT --delay MS [--rate B/S] [--port-file F]\n");
        return 2;
    }
    struct sockaddr_in upstream = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    char host[256];
    snprintf(host, sizeof host, "%.*s", (int)(colon - upstream_text), upstream_text);
    if (inet_pton(AF_INET, host, &upstream.sin_addr) != 1) {
        fprintf(stderr, "linkproxy: the upstream must be an IPv4 address: %s\n", host);
        return 2;
    }

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0 || listen(listener, 1024) < 0 ||
        getsockname(listener, (struct sockaddr *)&address, &length) < 0) {
        perror("linkproxy: listen");
        return 1;
    }
    if (port_file) {
        FILE *file = fopen(port_file, "w");
        fprintf(file, "%d\n", ntohs(address.sin_port));
        fclose(file);
    } else {
        printf("%d\n", ntohs(address.sin_port));
        fflush(stdout);
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    // Timers fire when due, not up to 50 us later (the default slack).
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    watch(listener, EPOLLIN, 0, EPOLL_CTL_ADD);
    int64_t next_due = INT64_MAX;
    while (!stopping) {
        int64_t now = now_ns();
        // Woken at the next chunk's due time to the microsecond: a timeout in whole milliseconds
        // (epoll_wait's) held each chunk up to 1 ms past its time, and chunks of different
        // connections due within that millisecond left together, every round trip.
        struct timespec wait_for = {0, 0}, *timeout = NULL;
        if (next_due != INT64_MAX) {
            int64_t left = next_due <= now ? 0 : next_due - now;
            wait_for = (struct timespec){.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
            timeout = &wait_for;
        }
        struct epoll_event events[256];
        int count = epoll_pwait2(epoll_fd, events, 256, timeout, NULL);
        if (count < 0 && errno != EINTR) { perror("linkproxy: epoll_pwait2"); return 1; }
        now = now_ns();
        for (int i = 0; i < count; i++) {
            uint64_t owner = events[i].data.u64;
            connection *c = (connection *)(uintptr_t)(owner & ~(uint64_t)1);
            if (!c) { // the listener
                for (;;) {
                    int client = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (client < 0) break;
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    int server = connect_upstream(&upstream);
                    if (server < 0) { close(client); continue; }
                    c = calloc(1, sizeof *c);
                    *c = (connection){.client = client, .server = server, .opened_ns = now, .next = connections};
                    c->up = (direction){.from = client, .to = server, .refilled_ns = now};
                    c->down = (direction){.from = server, .to = client, .refilled_ns = now};
                    if (connections) connections->prev = c;
                    connections = c;
                    c->client_armed = EPOLLIN;
                    c->server_armed = EPOLLOUT;
                    watch(client, EPOLLIN, (uint64_t)(uintptr_t)c, EPOLL_CTL_ADD);
                    watch(server, EPOLLOUT, (uint64_t)(uintptr_t)c | 1, EPOLL_CTL_ADD);
                }
                continue;
            }
            if (!(owner & 1)) { c->client_ready = 1; continue; }
            c->server_ready = 1;
            if (!c->connected && (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                int error = 0;
                socklen_t size = sizeof error;
                getsockopt(c->server, SOL_SOCKET, SO_ERROR, &error, &size);
                if (error) { c->up.eof = c->down.eof = 1; c->connected = -1; }
                else c->connected = 1;
            }
        }
        // One sweep over every connection: read what is there, write what is due.
        next_due = INT64_MAX;
        for (connection *c = connections, *next; c; c = next) {
            next = c->next;
            if (c->connected < 0) { close_connection(c); continue; }
            int broke = (c->client_ready && read_into(c, &c->up, now) < 0) ||
                        (c->server_ready && c->connected && read_into(c, &c->down, now) < 0);
            c->client_ready = c->server_ready = 0;
            if (broke) { close_connection(c); continue; }
            int64_t up = c->connected ? write_due(&c->up, now) : c->up.head ? c->up.head->due_ns : INT64_MAX;
            int64_t down = write_due(&c->down, now);
            if (up < 0 || down < 0) { close_connection(c); continue; }
            if (c->up.shut && c->down.shut) { close_connection(c); continue; }
            if (!c->connected && up < now) up = now + 1000000;
            if (up < next_due) next_due = up;
            if (down < next_due) next_due = down;
            rearm(c);
        }
    }
    while (connections) close_connection(connections);
    return 0;
}
