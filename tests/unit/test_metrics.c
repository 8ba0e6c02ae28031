/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c - Prometheus rendering: HELP/TYPE per metric, one sample
 * per worker, counters suffixed _total, closes by code with "other", the
 * histograms merged over the workers (cumulative buckets, le bounds in
 * seconds, +Inf equal to _count), and the lines of a process-wide metric.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <stdlib.h>

#include "metrics.h"

static char *render(struct metrics *a, struct metrics *b)
{
    struct metrics *per[2] = {a, b};
    struct buf out = {0};

    metrics_render(&out, per, 2);
    buf_append(&out, "", 1);
    return out.data;
}

static void test_samples_per_worker(void **state)
{
    struct metrics a = {0}, b = {0};
    char *text;

    (void)state;
    METRIC_ADD(&a, http_requests, 3);
    METRIC_ADD(&b, http_requests, 4);
    METRIC_SET(&b, conns_ws, 7);
    text = render(&a, &b);
    assert_non_null(strstr(text, "# TYPE presenced_http_requests_total counter\n"));
    assert_non_null(strstr(text, "presenced_http_requests_total{worker=\"0\"} 3\n"));
    assert_non_null(strstr(text, "presenced_http_requests_total{worker=\"1\"} 4\n"));
    assert_non_null(strstr(text, "# TYPE presenced_conns_ws gauge\n"));
    assert_non_null(strstr(text, "presenced_conns_ws{worker=\"1\"} 7\n"));
    free(text);
}

static void test_closes_by_code(void **state)
{
    struct metrics a = {0}, b = {0};
    char *text;

    (void)state;
    metrics_count_close(&a, 1000);
    metrics_count_close(&a, 1000);
    metrics_count_close(&a, 4008);
    metrics_count_close(&a, 3333);
    text = render(&a, &b);
    assert_non_null(strstr(text, "presenced_ws_closes_total{worker=\"0\",code=\"1000\"} 2\n"));
    assert_non_null(strstr(text, "presenced_ws_closes_total{worker=\"0\",code=\"4008\"} 1\n"));
    assert_non_null(strstr(text, "presenced_ws_closes_total{worker=\"0\",code=\"other\"} 1\n"));
    assert_non_null(strstr(text, "presenced_ws_closes_total{worker=\"1\",code=\"1000\"} 0\n"));
    free(text);
}

static void test_every_line_is_well_formed(void **state)
{
    struct metrics a = {0}, b = {0};
    char *text, *line, *save = NULL;

    (void)state;
    text = render(&a, &b);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            assert_true(strncmp(line, "# HELP presenced_", 17) == 0 ||
                        strncmp(line, "# TYPE presenced_", 17) == 0);
            continue;
        }
        assert_true(strncmp(line, "presenced_", 10) == 0);
        if (strstr(line, "_seconds_"))
            continue; /* histograms are merged: no worker label */
        assert_non_null(strstr(line, "{worker=\""));
        assert_non_null(strchr(line, ' '));
    }
    free(text);
}

/* The value of the first line of text that starts with prefix. */
static uint64_t value_of(const char *text, const char *prefix)
{
    const char *p = strstr(text, prefix);

    assert_non_null(p);
    assert_true(p == text || p[-1] == '\n');
    p = strchr(p, ' ');
    assert_non_null(p);
    return strtoull(p + 1, NULL, 10);
}

/* Observations land in the first bucket whose bound is at or above them
 * (Prometheus's le), the shards of two workers add up, and the buckets
 * are rendered cumulative with the bounds in seconds. */
static void test_histogram_merges_workers(void **state)
{
    struct metrics *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    char *text;

    (void)state;
    metrics_observe(a, MH_FANOUT, 50);      /* on the first bound: le 0.00005 */
    metrics_observe(a, MH_FANOUT, 51);      /* just above it: le 0.0001 */
    metrics_observe(b, MH_FANOUT, 2000);    /* le 0.0025 */
    metrics_observe(b, MH_FANOUT, 9000000); /* above every bound: only +Inf */
    metrics_observe(a, MH_HANDSHAKE_PUSHER, 3000);
    text = render(a, b);
    assert_non_null(strstr(text, "# TYPE presenced_fanout_seconds histogram\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_bucket{le=\"0.00005\"} 1\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_bucket{le=\"0.0001\"} 2\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_bucket{le=\"0.001\"} 2\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_bucket{le=\"0.0025\"} 3\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_bucket{le=\"2.5\"} 3\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_bucket{le=\"+Inf\"} 4\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_sum 9.002101\n"));
    assert_non_null(strstr(text, "presenced_fanout_seconds_count 4\n"));
    /* One head for a name with several label sets, each label set whole. */
    assert_non_null(strstr(text, "# TYPE presenced_handshake_seconds histogram\n"));
    assert_null(strstr(strstr(text, "# TYPE presenced_handshake_seconds") + 1,
                       "# TYPE presenced_handshake_seconds"));
    assert_non_null(
        strstr(text, "presenced_handshake_seconds_bucket{proto=\"pusher\",le=\"0.0025\"} 0\n"));
    assert_non_null(
        strstr(text, "presenced_handshake_seconds_bucket{proto=\"pusher\",le=\"0.005\"} 1\n"));
    assert_non_null(strstr(text, "presenced_handshake_seconds_sum{proto=\"pusher\"} 0.003\n"));
    assert_non_null(strstr(text, "presenced_handshake_seconds_count{proto=\"pusher\"} 1\n"));
    assert_non_null(strstr(text, "presenced_handshake_seconds_count{proto=\"native\"} 0\n"));
    assert_non_null(strstr(text, "presenced_store_seconds_count{op=\"set_privacy\"} 0\n"));
    assert_non_null(strstr(text, "presenced_redis_seconds_sum 0\n"));
    free(text);
    free(a);
    free(b);
}

/* Every histogram, whatever was observed: buckets never decrease, and
 * +Inf is _count. */
static void test_histogram_buckets_are_cumulative(void **state)
{
    struct metrics *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    char *text, *orig, *line, *save = NULL;
    char series[256] = "";
    uint64_t last = 0, histograms = 0;

    (void)state;
    for (unsigned id = 0; id < MH_COUNT; id++)
        for (uint64_t us = 1; us < 40000000; us = us * 3 + id)
            metrics_observe(id % 2 ? a : b, (enum metrics_hist_id)id, us);
    text = render(a, b);
    orig = strdup(text); /* strtok_r cuts text */
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *le = strstr(line, "le=\""), *sp = strrchr(line, ' ');
        uint64_t v = strtoull(sp + 1, NULL, 10);
        char key[256];

        if (line[0] == '#' || !strstr(line, "_seconds_bucket{"))
            continue;
        /* the series without its le label */
        snprintf(key, sizeof(key), "%.*s", (int)(le - line), line);
        if (strcmp(key, series) != 0) {
            snprintf(series, sizeof(series), "%s", key);
            last = 0;
        }
        assert_true(v >= last);
        last = v;
        if (strstr(le, "le=\"+Inf\"")) {
            char count[300];
            const char *lbl = strchr(key, '{');
            size_t nlen = (size_t)(strstr(key, "_bucket{") - key);

            histograms++;
            assert_true(v > 0);
            if (strcmp(lbl, "{") == 0)
                snprintf(count, sizeof(count), "\n%.*s_count ", (int)nlen, key);
            else
                snprintf(count, sizeof(count), "\n%.*s_count%.*s} ", (int)nlen, key,
                         (int)strlen(lbl) - 1, lbl);
            assert_non_null(strstr(orig, count));
            assert_int_equal(value_of(strstr(orig, count) + 1, count + 1), v);
        }
    }
    assert_int_equal(histograms, MH_COUNT);
    free(orig);
    free(text);
    free(a);
    free(b);
}

/* A process-wide metric: its head once, then unlabelled or labelled samples. */
static void test_process_wide_metric(void **state)
{
    struct buf out = {0};

    (void)state;
    metrics_render_head(&out, "presenced_dependency_up", "gauge", "Up or not.");
    metrics_render_sample(&out, "presenced_dependency_up", "dependency=\"redis\"", 0);
    metrics_render_sample(&out, "presenced_dependency_up", "dependency=\"store\"", 1);
    metrics_render_sample(&out, "presenced_cluster_nodes_live", NULL, 3);
    buf_append(&out, "", 1);
    assert_string_equal(out.data, "# HELP presenced_dependency_up Up or not.\n"
                                  "# TYPE presenced_dependency_up gauge\n"
                                  "presenced_dependency_up{dependency=\"redis\"} 0\n"
                                  "presenced_dependency_up{dependency=\"store\"} 1\n"
                                  "presenced_cluster_nodes_live 3\n");
    buf_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_per_worker),
        cmocka_unit_test(test_closes_by_code),
        cmocka_unit_test(test_every_line_is_well_formed),
        cmocka_unit_test(test_histogram_merges_workers),
        cmocka_unit_test(test_histogram_buckets_are_cumulative),
        cmocka_unit_test(test_process_wide_metric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
