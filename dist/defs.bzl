"""Rules that assemble the installable parklot (dist/BUILD)."""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

# The release is the file VERSION at the top of the workspace (the one
# place that names it: the launcher, pkg-config, CMake, the man page and the
# .deb read it). The SONAME's number (libparklot.so.N) changes when the ABI
# does.
PARKLOT_SOVERSION = "0"

# The public headers: sync/NAME.h is installed as <parklot/NAME.h> (the
# source tree's include/parklot/NAME.h forwards to it for Bazel users);
# every other header of the workspace the public ones reach is an internal
# one, installed under include/parklot/internal/ with its path.
PUBLIC_HEADERS = ["barrier", "condvar", "latch", "mutex", "once", "scheduling", "semaphore", "shared_mutex"]

def _ours(label):
    # Targets of this workspace (not Debian's system libraries, which reach
    # the link as -l flags and are declared dependencies instead).
    return label.workspace_name == ""

def _static_library_impl(ctx):
    archives = []
    for dep in ctx.attr.deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            if not _ours(linker_input.owner):
                continue
            for lib in linker_input.libraries:
                archive = lib.pic_static_library or lib.static_library
                if archive and archive not in archives:
                    archives.append(archive)
    out = ctx.actions.declare_file(ctx.label.name)
    toolchain = find_cpp_toolchain(ctx)

    # GNU ar's MRI script merges archives member by member (objects with the
    # same base name in different libraries stay distinct).
    script = ctx.actions.declare_file(ctx.label.name + ".mri")
    ctx.actions.write(
        script,
        "CREATE {}\n{}SAVE\nEND\n".format(
            out.path,
            "".join(["ADDLIB {}\n".format(a.path) for a in archives]),
        ),
    )
    ctx.actions.run_shell(
        inputs = archives + [script],
        outputs = [out],
        tools = toolchain.all_files,
        command = "\"$1\" -M < \"$2\"",
        arguments = [toolchain.ar_executable, script.path],
        mnemonic = "ParklotArchive",
        progress_message = "Archiving " + out.short_path,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

# One static archive with the objects of every library of this workspace
# that `deps` link (not their system dependencies).
parklot_static_library = rule(
    implementation = _static_library_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "_cc_toolchain": attr.label(
            default = "@bazel_tools//tools/cpp:current_cc_toolchain",
        ),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)

# Abseil's pkg-config modules (Debian's libabsl-dev) parklot needs: public,
# those whose headers parklot's headers include; private, the rest of what
# libparklot's objects call (static linking only): none since the runtime's
# text and time need libc alone (base/text.h, runtime/deadline.h).
ABSL_PUBLIC = ["absl_base", "absl_core_headers", "absl_function_ref", "absl_strings", "absl_time"]
ABSL_PRIVATE = []

def _single_file(target):
    files = target[DefaultInfo].files.to_list()
    if len(files) != 1:
        fail("{} must be one file, has {}".format(target.label, len(files)))
    return files[0]

def _tree_impl(ctx):
    entries = []  # (File, destination, mode)
    for target, dest in ctx.attr.files.items():
        f = _single_file(target)
        mode = "0755" if dest.startswith("bin/") or dest.startswith("lib/parklot/") else "0644"
        entries.append((f, dest, mode))

    # The headers: ours among everything the library's headers reach.
    for h in ctx.attr.headers[CcInfo].compilation_context.headers.to_list():
        if not h.is_source or not _ours(h.owner):
            continue
        path = h.short_path
        name = path.rpartition("/")[2][:-2] if path.endswith(".h") else ""
        if path.startswith("include/parklot/"):
            if name in PUBLIC_HEADERS:
                continue  # a forwarder: the sync header itself goes there
            dest = path
        elif path.startswith("sync/") and name in PUBLIC_HEADERS:
            dest = "include/parklot/" + name + ".h"
        else:
            dest = "include/parklot/internal/" + path
        entries.append((h, dest, "0644"))

    manifest = ctx.actions.declare_file(ctx.label.name + ".manifest")
    ctx.actions.write(manifest, "".join([
        "{}\t{}\t{}\n".format(f.path, dest, mode)
        for f, dest, mode in entries
    ]))
    out = ctx.actions.declare_file(ctx.label.name + ".tar")
    ctx.actions.run(
        executable = ctx.executable._make_tree,
        arguments = [
            out.path,
            manifest.path,
            ctx.file.readme.path,
            ctx.file.version.path,
            PARKLOT_SOVERSION,
            " ".join(ABSL_PUBLIC),
            " ".join(ABSL_PRIVATE),
            " ".join(PUBLIC_HEADERS),
        ],
        inputs = [f for f, _, _ in entries] + [manifest, ctx.file.readme, ctx.file.version],
        outputs = [out],
        mnemonic = "ParklotTree",
        progress_message = "Assembling the install tree " + out.short_path,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

# The install tree, prefix-relative, as a tar: `files` maps a target (one
# file) to its destination (a ".in" destination is a template), `headers` a
# cc_library whose headers of this workspace go under include/parklot/.
parklot_tree = rule(
    implementation = _tree_impl,
    attrs = {
        "files": attr.label_keyed_string_dict(allow_files = True),
        "headers": attr.label(providers = [CcInfo]),
        "readme": attr.label(allow_single_file = True),
        "version": attr.label(allow_single_file = True),
        "_make_tree": attr.label(
            default = ":make_tree.sh",
            executable = True,
            cfg = "exec",
            allow_single_file = True,
        ),
    },
)
