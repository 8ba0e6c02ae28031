/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c - Prometheus rendering: HELP/TYPE per metric, one sample
 * per worker, counters suffixed _total, closes by code with "other", and
 * the lines of a process-wide metric.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
        assert_non_null(strstr(line, "{worker=\""));
        assert_non_null(strchr(line, ' '));
    }
    free(text);
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
        cmocka_unit_test(test_process_wide_metric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
