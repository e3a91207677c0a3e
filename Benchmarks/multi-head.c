/*
 * The floor for mirror's no-op re-check: HEAD of every URL in a file, N at a time, over
 * libcurl's multi interface from C, one connection pool, nothing else (no disk, no state).
 *   cc -O2 -o multi-head multi-head.c -lcurl
 *   multi-head URL-LIST-FILE CONCURRENCY
 * Prints the wall time in seconds and the number of requests that did not end with 2xx.
 */
#include <curl/curl.h>
#include "url-list.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t ignore(char *data, size_t size, size_t count, void *user) {
    (void)data; (void)user;
    return size * count;
}

static void add(CURLM *multi, const char *url) {
    CURL *easy = curl_easy_init();
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, ignore);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)url);
    curl_multi_add_handle(multi, easy);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s URL-LIST-FILE CONCURRENCY\n", argv[0]);
        return 2;
    }
    size_t count;
    char **urls = read_url_list(argv[1], &count);
    if (!urls) return 2;
    long width = atol(argv[2]);
    if (width < 1) width = 1;

    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    size_t next = 0, done = 0, failed = 0;
    int running = 0;
    for (; next < count && next < (size_t)width; next++) add(multi, urls[next]);
    while (done < count) {
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        int left;
        while ((message = curl_multi_info_read(multi, &left))) {
            if (message->msg != CURLMSG_DONE) continue;
            long status = 0;
            curl_easy_getinfo(message->easy_handle, CURLINFO_RESPONSE_CODE, &status);
            if (message->data.result != CURLE_OK || status / 100 != 2) failed++;
            curl_multi_remove_handle(multi, message->easy_handle);
            curl_easy_cleanup(message->easy_handle);
            done++;
            if (next < count) add(multi, urls[next++]);
        }
        if (done < count) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    curl_multi_cleanup(multi);
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("%.3f %zu\n", (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9, failed);
    return failed ? 1 : 0;
}
