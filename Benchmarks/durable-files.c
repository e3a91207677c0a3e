/*
 * The reference for mirror's durable small files: GET every URL in a file, N at a time, over
 * libcurl's multi interface, each body into NAME.part in OUT-DIR, and commit finished files in
 * groups with mirror's promise: each file's bytes durable before its rename, the renames
 * durable before the group's record (a line per file appended to OUT-DIR/records, fdatasync'd).
 * A group is every file finished while the previous group was committed (at most 256), on a
 * thread of its own, as mirror's group commit does, so downloads go on meanwhile.
 *   cc -O2 -pthread -o durable-files durable-files.c -lcurl
 *   durable-files URL-LIST-FILE OUT-DIR CONCURRENCY STRATEGY
 * STRATEGY, how a group's files are made durable before their renames:
 *   fsync      fdatasync each file
 *   writeback  sync_file_range(SYNC_FILE_RANGE_WRITE) on every file first, then fdatasync each
 *              (what mirror does)
 *   syncfs     one syncfs of the file system for the group's data, and one for its renames
 *              (in place of the directory's fsync)
 *   none       no fsync at all (the floor: what curl and wget leave)
 * Each also as held-STRATEGY: a body of at most 64 KiB is kept in memory as it comes, and the
 * committing thread makes its NAME.part and writes it there before the group's sync (a longer
 * body goes to its file as it comes, made once it outgrows the limit), so that the thread that
 * talks to the server makes no file (what mirror does).
 * Prints the wall time in seconds and the number of files that failed.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include "url-list.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum strategy { FSYNC, WRITEBACK, SYNCFS, NONE };

struct file {
    int fd;
    int failed;
    char name[256];
    /* A body held in memory (held-STRATEGY): fd is -1 until it is written. */
    unsigned char *held;
    size_t held_length;
};

#define HOLD_LIMIT (64 * 1024)
static int holding;
static int out_dir;

static int open_part(struct file *file) {
    char part[300];
    snprintf(part, sizeof part, "%s.part", file->name);
    file->fd = openat(out_dir, part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return file->fd >= 0;
}

static int write_all(int fd, const unsigned char *data, size_t length) {
    size_t written = 0;
    while (written < length) {
        ssize_t n = write(fd, data + written, length - written);
        if (n < 0) { if (errno == EINTR) continue; return 0; }
        written += (size_t)n;
    }
    return 1;
}

/* The held body goes to its file, made now. */
static int spill(struct file *file) {
    int ok = open_part(file) && write_all(file->fd, file->held, file->held_length);
    free(file->held);
    file->held = NULL;
    file->held_length = 0;
    return ok;
}

static int out_dir;
static int records;
static enum strategy strategy;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
/* Signalled when a group's files are closed: room to open more. */
static pthread_cond_t room = PTHREAD_COND_INITIALIZER;
static struct file **queue;
static size_t queued, queue_capacity, failures;
/* Files open, downloading or waiting for their group: at most MAX_OPEN_FILES, so that a slow
   way of syncing makes the downloads wait instead of running out of descriptors. */
static size_t open_files;
#define MAX_OPEN_FILES 512
static int downloads_over;

static size_t store(char *data, size_t size, size_t count, void *user) {
    struct file *file = user;
    size_t length = size * count;
    if (file->fd < 0 && !file->failed) {
        if (file->held_length + length <= HOLD_LIMIT) {
            memcpy(file->held + file->held_length, data, length);
            file->held_length += length;
            return length;
        }
        if (!spill(file)) { file->failed = 1; return 0; }
    }
    if (!write_all(file->fd, (const unsigned char *)data, length)) { file->failed = 1; return 0; }
    return length;
}

static void check(int ok, struct file *file) { if (!ok) file->failed = 1; }

/* A step that covers the whole group failed: no file of it may go on. */
static void check_all(int ok, struct file **group, size_t count) {
    if (!ok) for (size_t i = 0; i < count; i++) group[i]->failed = 1;
}

/* One group: durable data, renames, durable renames, then the record of the files that got
   that far (and only those). */
static void commit(struct file **group, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (group[i]->held && !group[i]->failed) check(spill(group[i]), group[i]);
    if (strategy == WRITEBACK)
        for (size_t i = 0; i < count; i++) sync_file_range(group[i]->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    if (strategy == FSYNC || strategy == WRITEBACK)
        for (size_t i = 0; i < count; i++) check(fdatasync(group[i]->fd) == 0, group[i]);
    if (strategy == SYNCFS) check_all(syncfs(out_dir) == 0, group, count);
    char part[300];
    for (size_t i = 0; i < count; i++) {
        if (group[i]->failed) continue;
        snprintf(part, sizeof part, "%s.part", group[i]->name);
        check(renameat(out_dir, part, out_dir, group[i]->name) == 0, group[i]);
    }
    if (strategy == FSYNC || strategy == WRITEBACK) check_all(fsync(out_dir) == 0, group, count);
    if (strategy == SYNCFS) check_all(syncfs(out_dir) == 0, group, count);
    char line[300];
    for (size_t i = 0; i < count; i++) {
        if (group[i]->failed) continue;
        int n = snprintf(line, sizeof line, "%s\n", group[i]->name);
        if (write(records, line, (size_t)n) != n) group[i]->failed = 1;
    }
    if (strategy != NONE) check_all(fdatasync(records) == 0, group, count);
    for (size_t i = 0; i < count; i++) {
        if (!group[i]->failed) continue;
        snprintf(part, sizeof part, "%s.part", group[i]->name);
        unlinkat(out_dir, part, 0);
    }
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count; i++) {
        if (group[i]->fd >= 0) close(group[i]->fd);
        if (group[i]->failed) failures++;
        free(group[i]->held);
        free(group[i]);
    }
    open_files -= count;
    pthread_cond_signal(&room);
    pthread_mutex_unlock(&lock);
}

static void *committer(void *unused) {
    (void)unused;
    struct file *group[256];
    for (;;) {
        pthread_mutex_lock(&lock);
        while (queued == 0 && !downloads_over) pthread_cond_wait(&more, &lock);
        if (queued == 0 && downloads_over) { pthread_mutex_unlock(&lock); return NULL; }
        size_t count = queued < 256 ? queued : 256;
        memcpy(group, queue, count * sizeof *group);
        memmove(queue, queue + count, (queued - count) * sizeof *queue);
        queued -= count;
        pthread_mutex_unlock(&lock);
        commit(group, count);
    }
}

static void finished(struct file *file) {
    pthread_mutex_lock(&lock);
    if (queued == queue_capacity) {
        queue_capacity = queue_capacity ? 2 * queue_capacity : 1024;
        queue = realloc(queue, queue_capacity * sizeof *queue);
    }
    queue[queued++] = file;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&lock);
}

static void add(CURLM *multi, const char *url) {
    pthread_mutex_lock(&lock);
    open_files++;
    pthread_mutex_unlock(&lock);
    struct file *file = calloc(1, sizeof *file);
    const char *slash = strrchr(url, '/');
    snprintf(file->name, sizeof file->name, "%s", slash ? slash + 1 : url);
    file->fd = -1;
    if (holding) {
        file->held = malloc(HOLD_LIMIT);
        if (!file->held) file->failed = 1;
    } else if (!open_part(file)) {
        file->failed = 1;
    }
    CURL *easy = curl_easy_init();
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, store);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, file);
    curl_easy_setopt(easy, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, file);
    curl_multi_add_handle(multi, easy);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s URL-LIST-FILE OUT-DIR CONCURRENCY [held-]fsync|writeback|syncfs|none\n", argv[0]);
        return 2;
    }
    const char *names[] = {"fsync", "writeback", "syncfs", "none"};
    const char *name = argv[4];
    if (strncmp(name, "held-", 5) == 0) { holding = 1; name += 5; }
    strategy = (enum strategy)-1;
    for (int i = 0; i < 4; i++) if (strcmp(name, names[i]) == 0) strategy = (enum strategy)i;
    if ((int)strategy < 0) { fprintf(stderr, "unknown strategy %s\n", argv[4]); return 2; }
    size_t count;
    char **urls = read_url_list(argv[1], &count);
    if (!urls) return 2;
    out_dir = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (out_dir < 0) { perror(argv[2]); return 2; }
    records = openat(out_dir, "records", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (records < 0) { perror("records"); return 2; }
    long width = atol(argv[3]);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_t thread;
    pthread_create(&thread, NULL, committer, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    size_t next = 0;
    long in_flight = 0;
    while (next < count || in_flight > 0) {
        pthread_mutex_lock(&lock);
        /* Nothing in flight and no room to open a file: wait for a group to close its files. */
        while (in_flight == 0 && open_files >= MAX_OPEN_FILES) pthread_cond_wait(&room, &lock);
        size_t open_now = open_files;
        pthread_mutex_unlock(&lock);
        for (; next < count && in_flight < width && open_now < MAX_OPEN_FILES; next++, in_flight++, open_now++)
            add(multi, urls[next]);
        int running;
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        int left, ended = 0;
        while ((message = curl_multi_info_read(multi, &left))) {
            if (message->msg != CURLMSG_DONE) continue;
            struct file *file;
            curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&file);
            if (message->data.result != CURLE_OK) file->failed = 1;
            curl_multi_remove_handle(multi, message->easy_handle);
            curl_easy_cleanup(message->easy_handle);
            in_flight--;
            ended++;
            finished(file);
        }
        /* A transfer that ended makes way for the next at once; otherwise wait for the sockets. */
        if (ended == 0 && in_flight > 0) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    pthread_mutex_lock(&lock);
    downloads_over = 1;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("%.3f %zu\n", (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9, failures);
    curl_multi_cleanup(multi);
    return failures ? 1 : 0;
}
