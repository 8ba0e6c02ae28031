#!/bin/sh
# man-options.sh - the SETTINGS section of presenced(8), in roff, from the
# settings table that `presenced --help` prints (src/base/config.c), so the
# man page lists exactly the keys, defaults and ranges of the binary it
# ships with.
#
#   packaging/man-options.sh BINARY > settings.roff
#
# Reads the lines after "settings:": "  --KEY ARG  (default ...)" opens an
# entry, the more deeply indented lines after it are its description, and
# the first line that is not indented ends the table; each entry is the
# flag, its description, and its default and range. Backslashes, the
# hyphens of flags and options, and lines starting with '.' or "'" are
# escaped for roff.
set -eu
"$1" --help | awk '
function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}
# In prose only a hyphen that starts a word is a minus sign (-n, --flag).
function escd(s) {
    gsub(/\\/, "\\e", s)
    while (match(s, /(^|[ (\/])-/))
        s = substr(s, 1, RSTART + RLENGTH - 2) "\\-" substr(s, RSTART + RLENGTH)
    while (match(s, /\\--/))
        s = substr(s, 1, RSTART + 1) "\\-" substr(s, RSTART + 3)
    return s
}
function flush() {
    if (desc != "") {
        if (desc ~ /^[.'"'"']/) desc = "\\&" desc
        print desc
        print ".br"
        print meta
    }
    desc = ""
}
/^settings:/ { on = 1; next }
!on { next }
/^[^ ]/ { flush(); exit }
/^  --/ {
    flush()
    line = $0
    sub(/^  --/, "", line)
    key = line; sub(/ .*/, "", key)
    rest = line; sub(/^[^ ]* /, "", rest)
    arg = rest; sub(/  .*/, "", arg)
    meta = rest; sub(/^[^ ]*  /, "", meta)
    print ".TP"
    printf ".BI \\-\\-%s \" %s\"\n", esc(key), esc(arg)
    meta = escd(meta)
    desc = ""
    next
}
/^      / {
    t = $0; sub(/^ +/, "", t)
    desc = desc (desc == "" ? "" : " ") escd(t)
    next
}
'
