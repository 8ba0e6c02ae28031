/* SPDX-License-Identifier: MIT */
/*
 * test_static.c - the static directory's path safety and validators:
 * static_resolve (pure), static_open against a scratch directory tree with
 * symlinks leading out of the root, content types and ETags.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "static.h"
#include "util.h"

/* ---- static_resolve ---- */

static void assert_resolves(const char *path, const char *want)
{
    char out[STATIC_MAX_PATH];
    int n = static_resolve(path, strlen(path), out, sizeof(out));

    if (n < 0)
        fail_msg("%s: refused, want %s", path, want);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void assert_refused(const char *path, size_t len)
{
    char out[STATIC_MAX_PATH];

    if (static_resolve(path, len, out, sizeof(out)) != -1)
        fail_msg("%.*s: accepted as %s", (int)len, path, out);
}

#define REFUSED(s) assert_refused(s, sizeof(s) - 1)

static void test_resolve_ok(void **state)
{
    (void)state;
    assert_resolves("/", "index.html");
    assert_resolves("/app.css", "app.css");
    assert_resolves("/sub/", "sub/index.html");
    assert_resolves("/sub", "sub");
    assert_resolves("/sub/page.txt", "sub/page.txt");
    assert_resolves("//a//b", "a/b");
    assert_resolves("///", "index.html");
    assert_resolves("/a%20b.txt", "a b.txt");
    assert_resolves("/caf%C3%A9.html", "caf\xc3\xa9.html");
    assert_resolves("/a..b", "a..b"); /* dots inside a name are no traversal */
    assert_resolves("/a+b", "a+b");   /* '+' is not a space in paths */
    assert_resolves("/v1.2/x.js", "v1.2/x.js");
}

static void test_resolve_traversal(void **state)
{
    (void)state;
    REFUSED("/..");
    REFUSED("/../etc/passwd");
    REFUSED("/a/../../etc/passwd");
    REFUSED("/a/..");
    REFUSED("/a/../b");
    REFUSED("/%2e%2e/etc/passwd");
    REFUSED("/%2E%2E/etc/passwd");
    REFUSED("/.%2e/x");
    REFUSED("/%2e");
    REFUSED("/.");
    REFUSED("/./index.html");
    REFUSED("/a/...");
    /* encoded separators, decoded or not */
    REFUSED("/..%2fetc%2fpasswd");
    REFUSED("/a%2Fb");
    REFUSED("/a%2f");
    REFUSED("/..%5c..%5cwindows");
    REFUSED("/a%5Cb");
    REFUSED("/a\\b");
    REFUSED("/..\\x");
    /* hidden files */
    REFUSED("/.git/config");
    REFUSED("/.env");
    REFUSED("/sub/.htpasswd");
}

static void test_resolve_bad_input(void **state)
{
    (void)state;
    REFUSED("");
    REFUSED("index.html");
    REFUSED("*");
    REFUSED("http://host/x");
    REFUSED("/a%00.html");
    REFUSED("/a\0b");
    REFUSED("/a%zz");
    REFUSED("/a%");
    REFUSED("/a%4");
    REFUSED("/a\x01"
            "b");
    REFUSED("/a%0d%0aSet-Cookie:x");
    REFUSED("/a%7f");
}

static void test_resolve_lengths(void **state)
{
    char path[STATIC_MAX_PATH + 16], out[STATIC_MAX_PATH], small[11];

    (void)state;
    /* The decoded path, '/' included, must fit with its NUL: 1023 bytes. */
    path[0] = '/';
    memset(path + 1, 'a', sizeof(path) - 1);
    assert_int_equal(static_resolve(path, STATIC_MAX_PATH - 1, out, sizeof(out)),
                     STATIC_MAX_PATH - 2);
    assert_int_equal(static_resolve(path, STATIC_MAX_PATH, out, sizeof(out)), -1);
    /* escapes count decoded: 3 bytes of input, 1 of output */
    memcpy(path + 1, "%61%61%61", 9);
    assert_int_equal(static_resolve(path, STATIC_MAX_PATH + 5, out, sizeof(out)),
                     STATIC_MAX_PATH - 2);
    assert_int_equal(static_resolve(path, sizeof(path), out, sizeof(out)), -1);
    /* "index.html" needs 11 bytes */
    assert_int_equal(static_resolve("/", 1, small, sizeof(small)), 10);
    assert_int_equal(static_resolve("/", 1, small, sizeof(small) - 1), -1);
    assert_int_equal(static_resolve("/d/", 3, small, sizeof(small)), -1);
    assert_int_equal(static_resolve("/", 1, out, 0), -1);
}

/* ---- static_open on a scratch tree ---- */

struct tree {
    char base[64]; /* mkdtemp directory holding root/ and the escapes */
    char root[96];
};

static void put(const struct tree *t, const char *rel, const char *text)
{
    char p[256];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", t->base, rel);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void mk(const struct tree *t, const char *rel)
{
    char p[256];

    snprintf(p, sizeof(p), "%s/%s", t->base, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static void ln(const struct tree *t, const char *target, const char *rel)
{
    char p[256];

    snprintf(p, sizeof(p), "%s/%s", t->base, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int tree_setup(void **state)
{
    struct tree *t = xcalloc(1, sizeof(*t));
    char p[256];

    snprintf(t->base, sizeof(t->base), "/tmp/presenced-static-XXXXXX");
    if (!mkdtemp(t->base))
        return -1;
    snprintf(t->root, sizeof(t->root), "%s/root", t->base);
    mk(t, "root");
    mk(t, "root/sub");
    mk(t, "root/empty");
    mk(t, "root/trap");
    mk(t, "root2");
    put(t, "root/index.html", "<h1>hi</h1>\n");
    put(t, "root/app.css", "body{}\n");
    put(t, "root/sub/index.html", "sub\n");
    put(t, "root/sub/page.txt", "page\n");
    put(t, "root2/secret", "sibling secret\n");
    put(t, "secret.txt", "outside secret\n");
    ln(t, "sub/page.txt", "root/in_link");
    ln(t, "sub", "root/in_dir");
    ln(t, "../secret.txt", "root/out_link");
    ln(t, "..", "root/out_dir");
    ln(t, "/etc/passwd", "root/abs_link");
    ln(t, "../root2/secret", "root/evil");
    ln(t, "../../secret.txt", "root/trap/index.html");
    ln(t, "loop", "root/loop");
    ln(t, "root", "rootlink");
    snprintf(p, sizeof(p), "%s/root/fifo", t->base);
    assert_int_equal(mkfifo(p, 0644), 0);
    *state = t;
    return 0;
}

static int tree_teardown(void **state)
{
    struct tree *t = *state;
    static const char *const files[] = {
        "root/fifo",         "rootlink",
        "root/loop",         "root/trap/index.html",
        "root/evil",         "root/abs_link",
        "root/out_dir",      "root/out_link",
        "root/in_dir",       "root/in_link",
        "secret.txt",        "root2/secret",
        "root/sub/page.txt", "root/sub/index.html",
        "root/app.css",      "root/index.html",
    };
    static const char *const dirs[] = {"root2", "root/trap", "root/empty", "root/sub", "root"};
    char p[256];

    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        snprintf(p, sizeof(p), "%s/%s", t->base, files[i]);
        unlink(p);
    }
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        snprintf(p, sizeof(p), "%s/%s", t->base, dirs[i]);
        rmdir(p);
    }
    rmdir(t->base);
    free(t);
    return 0;
}

/* Opens rel under root; on success checks the file content and closes. */
static int open_rel(const char *root, const char *rel, const char *want_content, char *final)
{
    char buf[STATIC_MAX_PATH], got[64];
    struct stat st;
    int fd;

    snprintf(buf, sizeof(buf), "%s", rel);
    fd = static_open(root, buf, sizeof(buf), &st);
    if (fd < 0)
        return fd;
    assert_true(S_ISREG(st.st_mode));
    if (want_content) {
        ssize_t n = read(fd, got, sizeof(got) - 1);

        assert_true(n >= 0);
        got[n] = '\0';
        assert_string_equal(got, want_content);
        assert_int_equal(st.st_size, n);
    }
    if (final)
        strcpy(final, buf);
    close(fd);
    return 0;
}

static void test_open_inside(void **state)
{
    const struct tree *t = *state;
    char final[STATIC_MAX_PATH], link_root[128], slash_root[128];

    assert_int_equal(open_rel(t->root, "index.html", "<h1>hi</h1>\n", final), 0);
    assert_string_equal(final, "index.html");
    assert_int_equal(open_rel(t->root, "app.css", "body{}\n", NULL), 0);
    assert_int_equal(open_rel(t->root, "sub/page.txt", "page\n", NULL), 0);
    /* a directory serves its index.html, and says so */
    assert_int_equal(open_rel(t->root, "sub", "sub\n", final), 0);
    assert_string_equal(final, "sub/index.html");
    /* symlinks that stay inside are fine */
    assert_int_equal(open_rel(t->root, "in_link", "page\n", NULL), 0);
    assert_int_equal(open_rel(t->root, "in_dir", "sub\n", NULL), 0);
    /* a root given through a symlink, or with a trailing slash */
    snprintf(link_root, sizeof(link_root), "%s/rootlink", t->base);
    assert_int_equal(open_rel(link_root, "index.html", "<h1>hi</h1>\n", NULL), 0);
    snprintf(slash_root, sizeof(slash_root), "%s/", t->root);
    assert_int_equal(open_rel(slash_root, "sub/page.txt", "page\n", NULL), 0);
}

static void test_open_refused(void **state)
{
    const struct tree *t = *state;
    char missing_root[128], small[8] = "sub";
    struct stat st;

    assert_int_equal(open_rel(t->root, "missing.html", NULL, NULL), -ENOENT);
    assert_int_equal(open_rel(t->root, "sub/missing/x", NULL, NULL), -ENOENT);
    assert_int_equal(open_rel(t->root, "index.html/x", NULL, NULL), -ENOENT); /* ENOTDIR */
    assert_int_equal(open_rel(t->root, "empty", NULL, NULL), -ENOENT);        /* no index.html */
    /* symlinks out of the root, however they get there */
    assert_int_equal(open_rel(t->root, "out_link", NULL, NULL), -ENOENT);
    assert_int_equal(open_rel(t->root, "out_dir/secret.txt", NULL, NULL), -ENOENT);
    /* what counts is where the path ends: out and back in is inside */
    assert_int_equal(open_rel(t->root, "out_dir/root/index.html", "<h1>hi</h1>\n", NULL), 0);
    assert_int_equal(open_rel(t->root, "abs_link", NULL, NULL), -ENOENT);
    assert_int_equal(open_rel(t->root, "evil", NULL, NULL), -ENOENT); /* root2 shares a prefix */
    assert_int_equal(open_rel(t->root, "trap", NULL, NULL), -ENOENT); /* index.html escapes */
    assert_int_equal(open_rel(t->root, "loop", NULL, NULL), -ENOENT);
    /* not a regular file: a FIFO must not block the open */
    assert_int_equal(open_rel(t->root, "fifo", NULL, NULL), -ENOENT);
    /* a missing root */
    snprintf(missing_root, sizeof(missing_root), "%s/nope", t->base);
    assert_int_equal(open_rel(missing_root, "index.html", NULL, NULL), -ENOENT);
    /* no room to append "/index.html" */
    assert_int_equal(static_open(t->root, small, sizeof(small), &st), -ENOENT);
}

static void test_resolve_then_open(void **state)
{
    const struct tree *t = *state;
    static const char *const refused[] = {
        "/../secret.txt", "/%2e%2e/secret.txt",  "/..%2fsecret.txt", "/out_link",
        "/evil",          "/out_dir/secret.txt", "/trap/",           "/.%2e/root2/secret"};
    char rel[STATIC_MAX_PATH];
    struct stat st;
    int fd;

    assert_int_equal(static_resolve("/", 1, rel, sizeof(rel)), 10);
    fd = static_open(t->root, rel, sizeof(rel), &st);
    assert_true(fd >= 0);
    close(fd);
    for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
        const char *p = refused[i];

        if (static_resolve(p, strlen(p), rel, sizeof(rel)) < 0)
            continue;
        fd = static_open(t->root, rel, sizeof(rel), &st);
        if (fd >= 0) {
            close(fd);
            fail_msg("%s was served", p);
        }
        assert_int_equal(fd, -ENOENT);
    }
}

/* ---- Content types and validators ---- */

static void test_content_type(void **state)
{
    static const struct {
        const char *name;
        const char *type;
    } cases[] = {
        {"index.html", "text/html; charset=utf-8"},
        {"sub/INDEX.HTM", "text/html; charset=utf-8"},
        {"a.css", "text/css; charset=utf-8"},
        {"a.js", "text/javascript; charset=utf-8"},
        {"a.mjs", "text/javascript; charset=utf-8"},
        {"a.json", "application/json"},
        {"a.js.map", "application/json"},
        {"a.svg", "image/svg+xml"},
        {"a.png", "image/png"},
        {"a.jpg", "image/jpeg"},
        {"a.JPEG", "image/jpeg"},
        {"favicon.ico", "image/x-icon"},
        {"a.txt", "text/plain; charset=utf-8"},
        {"a.wasm", "application/wasm"},
        {"README", "application/octet-stream"},
        {"a.exe", "application/octet-stream"},
        {"a.", "application/octet-stream"},
        {"v1.2/README", "application/octet-stream"},
        {"a.htmlx", "application/octet-stream"},
        {"a.jss", "application/octet-stream"},
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        assert_string_equal(static_content_type(cases[i].name), cases[i].type);
}

static void test_etag(void **state)
{
    struct stat st, other;
    char etag[STATIC_ETAG_MAX];

    (void)state;
    memset(&st, 0, sizeof(st));
    st.st_size = 0x10;
    st.st_mtim.tv_sec = 1;
    st.st_mtim.tv_nsec = 5;
    st.st_ino = 0x2a;
    assert_int_equal(static_etag(&st, etag, sizeof(etag)), 16);
    assert_string_equal(etag, "\"10-3b9aca05-2a\"");
    assert_int_equal(static_etag(&st, etag, 16), 0);
    assert_string_equal(etag, "");
    /* Any of size, mtime (to the nanosecond) or inode changes the tag. */
    other = st;
    other.st_mtim.tv_nsec = 6;
    static_etag(&other, etag, sizeof(etag));
    assert_string_not_equal(etag, "\"10-3b9aca05-2a\"");
}

static void test_etag_matches(void **state)
{
    static const char tag[] = "\"10-3b9aca05-2a\"";
    static const struct {
        const char *value;
        bool want;
    } cases[] = {
        {"\"10-3b9aca05-2a\"", true},
        {"  \"10-3b9aca05-2a\"  ", true},
        {"W/\"10-3b9aca05-2a\"", true},
        {"\"x\", \"10-3b9aca05-2a\"", true},
        {"\"x\",W/\"10-3b9aca05-2a\",\"y\"", true},
        {"\"a,b\", \"10-3b9aca05-2a\"", true},
        {"*", true},
        {" * ", true},
        {"\"10-3b9aca05-2b\"", false},
        {"\"x\", \"y\"", false},
        {"10-3b9aca05-2a", false},
        {"\"10-3b9aca05-2a", false},
        {"\"*\"", false},
        {"**", false},
        {"", false},
        {",,", false},
        {"W/", false},
        {"w/\"10-3b9aca05-2a\"", false},
        {"bad, \"10-3b9aca05-2a\"", false},
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        bool got = static_etag_matches(cases[i].value, strlen(cases[i].value), tag);

        if (got != cases[i].want)
            fail_msg("If-None-Match %s: got %d", cases[i].value, got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve_ok),
        cmocka_unit_test(test_resolve_traversal),
        cmocka_unit_test(test_resolve_bad_input),
        cmocka_unit_test(test_resolve_lengths),
        cmocka_unit_test_setup_teardown(test_open_inside, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_open_refused, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_resolve_then_open, tree_setup, tree_teardown),
        cmocka_unit_test(test_content_type),
        cmocka_unit_test(test_etag),
        cmocka_unit_test(test_etag_matches),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
