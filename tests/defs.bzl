"""How the test packages declare their tests: one call a program or a test,
with the modes it runs in, so that each BUILD file reads as a table.

  shim_prog_test("fork", size = "medium", tags = ["no_asan"])
  shim_prog_test("cond_exit", ["default", "fixed1"], mode_args = {"fixed1": ["3"]})
  shim_script_test("config_env_test", [":oom_prog"])
  parklot_cc_test("wake_tree", ["default", "fixed1"], deps = ...)

The tests that run a program under the shim are shim_test and their programs
shim_program (//:sanitizers.bzl: built without sanitizers, tagged no_tsan);
`tags` add to that (no_asan, with the reason where the test is declared).
"""

load("//:sanitizers.bzl", "shim_program", "shim_test")

SHIM = "//preload:libparklot_preload.so"

PTHREAD = ["-pthread"]

# run_under_shim.sh's options, by the words a mode is made of.
KNOBS = {
    # The program against plain glibc first: its expectations are glibc's.
    "glibc": "--glibc-too",
    # One bucket: every key collides.
    "fixed1": "--env=PARKLOT_POLICY=fixed:1",
    # Raw futex calls served by the shim.
    "futex": "--env=PARKLOT_SYSCALL_FUTEX=1",
    # Every release a direct handoff.
    "fair": "--env=PARKLOT_FAIR_NS=0",
    "deadlock": "--env=PARKLOT_DEADLOCK=report",
    "stats": "--env=PARKLOT_STATS=1",
}

# The modes by name, with their knobs: "default" is <name>_test, any other
# mode M <name>_M_test.
MODES = {
    "default": "glibc",
    "fixed1": "fixed1",
    "futex": "futex",
    "fair": "fair",
    "fair_fixed1": "fair fixed1",
    "fair_futex": "fair futex",
    "futex_fixed1": "futex fixed1",
    "deadlock_mode": "deadlock",
}

def _sort_key(s):
    # buildifier's order for a list of labels: files, then :local, then
    # //absolute labels; each compared by its parts between ':' and '.'.
    phase = 0
    if s.startswith(":"):
        phase = 1
    elif s.startswith("//"):
        phase = 2
    elif s.startswith("@"):
        phase = 3
    return (phase, s.replace(":", ".").split("."))

def _sorted(labels):
    out = []
    for x in labels:
        if x not in out:
            out.append(x)
    return sorted(out, key = _sort_key)

def _is_label(arg):
    return arg.startswith(":") or arg.startswith("//")

def _locations(args):
    """args with each label (":x", "//p:x") as its $(location); the labels."""
    return (
        ["$(location %s)" % a if _is_label(a) else a for a in args],
        [a for a in args if _is_label(a)],
    )

def script_test(name, args = [], script = None, data = [], **kwargs):
    """sh_test of the script NAME.sh (or `script`) given `args`, in which each
    label stands for its $(location) and is in the test's data."""
    _script_test(native.sh_test, name, args, script, data, [], **kwargs)

def shim_script_test(name, args = [], script = None, data = [], **kwargs):
    """script_test as a shim_test: the shim is in its data (last, unless
    `data` names it)."""
    _script_test(shim_test, name, args, script, data, [SHIM], **kwargs)

def _script_test(rule, name, args, script, data, last, **kwargs):
    expanded, labels = _locations(args)
    if [x for x in last if x in data]:
        # `data` places the shim itself: kept in its order.
        data = _sorted([x for x in labels if x not in data]) + data
    else:
        data = _sorted([x for x in labels + data if x not in last]) + last
    rule(
        name = name,
        srcs = [script or name + ".sh"],
        args = expanded,
        data = data,
        **kwargs
    )

def test_prog(name, srcs = None, hdrs = [], copts = [], linkopts = [], **kwargs):
    """A test program (shim_program, testonly): sources `srcs` (NAME.c and
    shim_test_util.h by default) and `hdrs`, built and linked with -pthread
    and `copts`, `linkopts`."""
    if srcs == None:
        srcs = [name + ".c", "shim_test_util.h"]
    shim_program(
        name = name,
        testonly = True,
        srcs = _sorted(srcs + hdrs),
        copts = PTHREAD + copts,
        linkopts = PTHREAD + linkopts,
        **kwargs
    )

def shim_prog_test(
        name,
        modes = ["default"],
        prog = None,
        args = [],
        mode_args = {},
        run_timeout = None,
        data = [],
        srcs = None,
        hdrs = [],
        copts = [],
        linkopts = [],
        deps = [],
        **kwargs):
    """A program run under the shim by run_under_shim.sh, in each of `modes`.

    Declares the program <name>_prog (test_prog: `srcs`, `hdrs`, `copts`,
    `linkopts`, `deps`), or uses `prog`, a program declared elsewhere. Each
    mode is a test: <name>_test for "default", <name>_<mode>_test for another.
    A mode is a name in MODES, or "MODE=KNOBS" with its knobs spelled out:
    words of KNOBS, or run_under_shim.sh options ("--jemalloc=first"); none
    after the "=", the shim alone. The test's arguments are the knobs,
    --timeout=<run_timeout>, the program, then `args` (mode_args[mode]
    instead where given); labels among them are passed as their locations and
    are in the data. The other arguments (size, timeout, tags, env) go to
    every test.
    """
    if prog == None:
        prog = ":%s_prog" % name
        test_prog(
            name = name + "_prog",
            srcs = srcs,
            hdrs = hdrs,
            copts = copts,
            linkopts = linkopts,
            deps = deps,
        )
    for suffix in mode_args:
        if not [m for m in modes if m.partition("=")[0] == suffix]:
            fail("%s: mode_args names %r, not one of the modes" % (name, suffix))
    for mode in modes:
        suffix, eq, knobs = mode.partition("=")
        if not eq:
            if suffix not in MODES:
                fail("%s: no mode %r in MODES (or spell its knobs out: \"%s=KNOBS\")" % (name, suffix, suffix))
            knobs = MODES[suffix]
        options = []
        for k in knobs.split(" "):
            if k and k not in KNOBS and not k.startswith("--"):
                fail("%s: no knob %r in KNOBS" % (name, k))
            if k:
                options.append(KNOBS.get(k, k))
        if run_timeout:
            options.append("--timeout=%d" % run_timeout)
        shim_script_test(
            name = name + ("_test" if suffix == "default" else "_%s_test" % suffix),
            args = options + [prog] + mode_args.get(suffix, args),
            script = "run_under_shim.sh",
            data = data,
            **kwargs
        )

def parklot_cc_test(name, modes = ["default"], **kwargs):
    """cc_test <name>_test of <name>_test.cc, and for the mode "fixed1" the
    same source as <name>_fixed1_test run with PARKLOT_POLICY=fixed:1, built
    with PARKLOT_TEST_FIXED1 (the test asserts that the policy took)."""
    for mode in modes:
        if mode == "default":
            native.cc_test(name = name + "_test", srcs = [name + "_test.cc"], **kwargs)
        elif mode == "fixed1":
            native.cc_test(
                name = name + "_fixed1_test",
                srcs = [name + "_test.cc"],
                copts = ["-DPARKLOT_TEST_FIXED1"],
                env = {"PARKLOT_POLICY": "fixed:1"},
                **kwargs
            )
        else:
            fail("parklot_cc_test: no mode %r" % mode)

FUTEX_TEST_DEPS = [
    "//tests/util:watchdog",
    "//third_party:absl",
    "//third_party:gtest_main",
]

def futex_table_test(name, shim_args = [], **kwargs):
    """<name>_test.cc twice: as <name>_test, kernel against the served
    operations linked in (PARKLOT_FUTEX_LIBRARY), and as <name>_shim_test,
    kernel against syscall() under the shim (run_under_futex_shim.sh with
    `shim_args`, the program <name>_prog). size and timeout go to both."""
    native.cc_test(
        name = name + "_test",
        srcs = [name + "_test.cc"],
        local_defines = ["PARKLOT_FUTEX_LIBRARY"],
        deps = [":futex_test_util", "//preload:futex_ops"] + FUTEX_TEST_DEPS,
        **kwargs
    )
    shim_program(
        name = name + "_prog",
        testonly = True,
        srcs = [name + "_test.cc"],
        deps = [":futex_test_util"] + FUTEX_TEST_DEPS,
    )
    shim_script_test(
        name = name + "_shim_test",
        args = shim_args + [":%s_prog" % name],
        script = "run_under_futex_shim.sh",
        **kwargs
    )
