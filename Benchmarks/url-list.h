/* The URL list the C programs of the benchmark read: one URL a line, blank lines skipped. */
#ifndef MIRROR_BENCH_URL_LIST_H
#define MIRROR_BENCH_URL_LIST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The lines of `path`, `*count` of them; NULL (and a message) when it cannot be read. */
static char **read_url_list(const char *path, size_t *count) {
    FILE *list = fopen(path, "r");
    if (!list) { perror(path); return NULL; }
    size_t capacity = 1024;
    char **urls = malloc(capacity * sizeof *urls);
    char line[4096];
    *count = 0;
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!*line) continue;
        if (*count == capacity) urls = realloc(urls, (capacity *= 2) * sizeof *urls);
        urls[(*count)++] = strdup(line);
    }
    fclose(list);
    return urls;
}

#endif
