"""tree_test: a shell test of the installed tree (//dist:tree).

Each test is NAME.sh, run with the tree's tar as its first argument and the
locations of `extra` (labels, expanded with $(locations ...)) after it.
Tagged no_asan and no_tsan: what is installed is the plain build (a
sanitizer build of the shim and library needs its runtime preloaded into
every program, which an install does not do).
"""

def tree_test(name, size = "small", extra = []):
    native.sh_test(
        name = name,
        size = size,
        srcs = [name + ".sh"],
        args = ["$(location //dist:tree)"] + ["$(locations %s)" % x for x in extra],
        data = ["//dist:tree", "launcher_setup.sh"] + extra,
        tags = [
            "no_asan",
            "no_tsan",
        ],
    )
