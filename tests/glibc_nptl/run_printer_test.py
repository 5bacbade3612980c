"""Runs one of glibc's gdb pretty-printer tests (nptl/test-*-printers.py),
unchanged, with the shim preloaded into the program gdb starts.

    PARKLOT_PRINTER_PRELOAD=LIB python3 run_printer_test.py TEST.py ARGS...

ARGS are the test's own (its C source, its program, the printer files).
With PARKLOT_PRINTER_PRELOAD set, gdb starts the program with LD_PRELOAD=LIB
(gdb itself and this script run without it) and, once at main, the test
fails unless the program has loaded the shim; unset, the test runs on
glibc. glibc's scripts/test_printers_common.py (on PYTHONPATH) drives gdb;
this only adds a step to each of its init_test and go_to_main, which
the test imports from it. Every expectation is glibc's.
"""

import os
import runpy
import sys

import test_printers_common as common

preload = os.environ.get("PARKLOT_PRINTER_PRELOAD", "")
glibc_init_test = common.init_test
glibc_go_to_main = common.go_to_main


def init_test(test_bin, printer_files, printer_names):
    glibc_init_test(test_bin, printer_files, printer_names)
    if preload:
        common.test("set environment LD_PRELOAD {0}".format(preload))


def go_to_main():
    glibc_go_to_main()
    if preload:
        # Times out (the test fails) unless the shim is among the objects.
        common.test("info sharedlibrary", r".*libparklot_preload")


common.init_test = init_test
common.go_to_main = go_to_main

test = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(test, run_name="__main__")
