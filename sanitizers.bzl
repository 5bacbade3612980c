# How tests that run programs under the preload shim are declared, so that
# each sanitizer configuration (.bazelrc: --config=asan, --config=tsan)
# runs what it can check and leaves out, by tag, what it cannot.
#
#   shim_program(name = "x_prog", srcs = [...], ...)   # cc_binary arguments
#   shim_test(name = "x_test", srcs = ["run_under_shim.sh"],
#             args = ["$(location :x_prog)"], data = [":x_prog", SHIM])
#
# The test packages declare them through tests/defs.bzl: a program and the
# modes it runs in, one call (shim_prog_test).
#
# shim_program: the program is built without sanitizers in every
# configuration, as the unmodified binaries the shim is for. Under
# --config=asan the shim is built with ASan and the tests preload ASan's
# runtime ahead of it (tests/preload/shim_preload.sh), so ASan checks the
# shim's code; an instrumented program would add its own frames to check,
# and ASan cannot follow glibc's cancellation unwinding through them
# (google/sanitizers#1399: the unwound frames stay poisoned).
#
# shim_test: a test that preloads the shim into another program, with
# tests/preload/shim_preload.sh in its data to compose LD_PRELOAD. Tagged
# no_tsan, so --config=tsan does not build or run it at all (.bazelrc
# filters the tag): a TSan-built shim cannot be preloaded into another
# program. Even with TSan's runtime preloaded first the process dies at
# start (TSan initializes on its first intercepted call and installs its
# signal handlers through sigaction, which the shim wraps: the shim's
# instrumented code runs before TSan has set up the thread, and faults).
# And TSan in a program it did not instrument sees only the calls it
# intercepts: it reports the glibc behaviour these tests check (a normal
# mutex unlocked by another thread) as errors. Extra `tags` add to no_tsan
# (e.g. no_asan, with the reason stated where the test is declared).

SHIM_TEST_TAGS = ["no_tsan"]

def _is_sanitizer_flag(flag):
    return flag.startswith("-fsanitize") or flag.startswith("-fno-sanitize")

def _without_sanitizers_impl(settings, attr):
    return {
        "//command_line_option:copt": [f for f in settings["//command_line_option:copt"] if not _is_sanitizer_flag(f)],
        "//command_line_option:linkopt": [f for f in settings["//command_line_option:linkopt"] if not _is_sanitizer_flag(f)],
    }

_without_sanitizers = transition(
    implementation = _without_sanitizers_impl,
    inputs = ["//command_line_option:copt", "//command_line_option:linkopt"],
    outputs = ["//command_line_option:copt", "//command_line_option:linkopt"],
)

def _plain_binary_impl(ctx):
    binary = ctx.attr.binary
    if type(binary) == "list":
        binary = binary[0]
    src = binary[DefaultInfo].files_to_run.executable
    out = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.run_shell(
        inputs = [src],
        outputs = [out],
        command = "cp -f \"$1\" \"$2\"",
        arguments = [src.path, out.path],
        mnemonic = "CopyPlainBinary",
    )
    return [DefaultInfo(executable = out, files = depset([out]))]

# `binary`, with its dependencies, built without the configuration's
# sanitizer flags.
_plain_binary = rule(
    implementation = _plain_binary_impl,
    attrs = {
        "binary": attr.label(
            cfg = _without_sanitizers,
            executable = True,
            mandatory = True,
        ),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
    executable = True,
)

def shim_program(name, tags = [], **kwargs):
    native.cc_binary(
        name = name + "_cc",
        tags = ["manual"],
        **kwargs
    )
    _plain_binary(
        name = name,
        binary = ":" + name + "_cc",
        testonly = kwargs.get("testonly", False),
        tags = SHIM_TEST_TAGS + tags,
    )

def shim_test(name, tags = [], data = [], **kwargs):
    native.sh_test(
        name = name,
        tags = SHIM_TEST_TAGS + tags,
        data = data + ["//tests/preload:shim_preload.sh"],
        **kwargs
    )
