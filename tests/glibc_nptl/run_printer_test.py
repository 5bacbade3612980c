"""Runs one of glibc's gdb pretty-printer tests (nptl/test-*-printers.py),
unchanged, with the shim preloaded into the program gdb starts.

    PARKLOT_PRINTER_PRELOAD=LIB python3 run_printer_test.py TEST.py ARGS...

ARGS are the test's own (its C source, its program, the printer files).
With PARKLOT_PRINTER_PRELOAD set, gdb starts the program with LD_PRELOAD=LIB
(gdb itself and this script run without it) and, once at main, the test
fails unless the program has loaded the shim; unset, the test runs on
glibc. glibc's scripts/test_printers_common.py (on PYTHONPATH) drives gdb;
this only adds the two steps around its init_test and go_to_main, which
the test imports from it, and, under the shim, expects the one thing the
shim makes the printers say differently (docs/compatibility.md, "glibc's
pretty printers"): a held mutex the shim runs reads "possibly with
waiters" whether or not a thread waits, its lock word holding the owner's
registry slot besides the locked bit. Every other expectation is glibc's.
"""

import os
import runpy
import sys

import test_printers_common as common

preload = os.environ.get("PARKLOT_PRINTER_PRELOAD", "")
glibc_init_test = common.init_test
glibc_go_to_main = common.go_to_main
glibc_test_printer = common.test_printer
NO_WAITERS = "Acquired, possibly with no waiters"
SHIM_NO_WAITERS = "Acquired, possibly with waiters"


def init_test(test_bin, printer_files, printer_names):
    glibc_init_test(test_bin, printer_files, printer_names)
    if preload:
        common.test("set environment LD_PRELOAD {0}".format(preload))


def go_to_main():
    glibc_go_to_main()
    if preload:
        # Times out (the test fails) unless the shim is among the objects.
        common.test("info sharedlibrary", r".*libparklot_preload")


def test_printer(var, to_string, children=None, is_ptr=True):
    if (preload and to_string == "pthread_mutex_t" and children
            and children.get("Status") == NO_WAITERS):
        children = dict(children, Status=SHIM_NO_WAITERS)
        print("parklot: expecting the shim's mutex status: " + SHIM_NO_WAITERS)
    glibc_test_printer(var, to_string, children, is_ptr)


common.init_test = init_test
common.go_to_main = go_to_main
common.test_printer = test_printer

test = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(test, run_name="__main__")
