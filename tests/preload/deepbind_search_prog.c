/* dlopen with RTLD_DEEPBIND keeps glibc's search: $ORIGIN is the calling
 * program's directory; a bare name matches the soname of a library already
 * loaded from another file (so RTLD_NOLOAD finds it and no second copy is
 * loaded); a wrong-class file earlier on LD_LIBRARY_PATH is skipped. The
 * shim used to rebuild the search with access(): $ORIGIN was the shim's
 * directory, the bare name became the path of another file, and the
 * wrong-class file was taken.
 *
 * The program sits beside the libraries (RUNPATH $ORIGIN); it re-executes
 * itself with LD_LIBRARY_PATH naming a directory that holds an ELFCLASS32
 * file called deepbind_lib_lazy.so.
 *
 *   deepbind_search_prog SONAME_A   (a file whose soname is
 *                                    deepbind_soname_b.so, which is also
 *                                    a different file beside it) */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>

static char g_dir[4096];

/* Writes an ELF header of the other class, as a 32-bit library has. */
static void write_elf32(const char* path) {
  unsigned char h[64] = {0x7f, 'E', 'L', 'F', 1 /* ELFCLASS32 */, 1, 1};
  h[16] = 3;  /* ET_DYN */
  h[18] = 3;  /* EM_386 */
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, h, sizeof(h)) != (ssize_t)sizeof(h)) {
    FATAL("cannot write %s", path);
  }
  close(fd);
}

static const char* path_of(void* h) {
  struct link_map* lm = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) return "?";
  return lm->l_name;
}

int main(int argc, char** argv) {
  shim_test_start("deepbind_search", 30);
  if (argc != 2) FATAL("usage: deepbind_search_prog SONAME_A");
  const char* dir = getenv("DEEPBIND_SEARCH_DIR");
  if (dir == NULL) {
    const char* tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/deepbind_search.XXXXXX",
             tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(g_dir) == NULL) FATAL("mkdtemp: %s", strerror(errno));
    char file[4200];
    snprintf(file, sizeof(file), "%s/deepbind_lib_lazy.so", g_dir);
    write_elf32(file);
    setenv("DEEPBIND_SEARCH_DIR", g_dir, 1);
    setenv("LD_LIBRARY_PATH", g_dir, 1);
    alarm(0);
    execv("/proc/self/exe", argv);
    FATAL("execv: %s", strerror(errno));
  }

  /* $ORIGIN: the program's directory. */
  void* h = dlopen("$ORIGIN/deepbind_lib_now.so", RTLD_NOW | RTLD_DEEPBIND);
  if (h == NULL) SHIM_FAIL("dlopen($ORIGIN/deepbind_lib_now.so): %s", dlerror());

  /* The soname of a library loaded by its path. */
  void* a = dlopen(argv[1], RTLD_NOW);
  if (a == NULL) FATAL("dlopen %s: %s", argv[1], dlerror());
  void* b = dlopen("deepbind_soname_b.so", RTLD_NOW | RTLD_DEEPBIND | RTLD_NOLOAD);
  if (b != a) {
    SHIM_FAIL("dlopen(\"deepbind_soname_b.so\", RTLD_NOLOAD | RTLD_DEEPBIND) "
              "gave %p (%s), want the loaded %s", b,
              b != NULL ? path_of(b) : dlerror(), argv[1]);
  }
  void* c = dlopen("deepbind_soname_b.so", RTLD_NOW | RTLD_DEEPBIND);
  if (c != a) {
    SHIM_FAIL("dlopen(\"deepbind_soname_b.so\", RTLD_DEEPBIND) gave %p (%s), "
              "want the loaded %s", c, c != NULL ? path_of(c) : dlerror(),
              argv[1]);
  }

  /* The wrong-class file on LD_LIBRARY_PATH is skipped for the RUNPATH's. */
  void* d = dlopen("deepbind_lib_lazy.so", RTLD_NOW | RTLD_DEEPBIND);
  if (d == NULL) {
    SHIM_FAIL("dlopen(\"deepbind_lib_lazy.so\", RTLD_DEEPBIND) with a 32-bit "
              "file first on LD_LIBRARY_PATH: %s", dlerror());
  } else if (strncmp(path_of(d), dir, strlen(dir)) == 0) {
    SHIM_FAIL("loaded %s", path_of(d));
  }

  char file[4200];
  snprintf(file, sizeof(file), "%s/deepbind_lib_lazy.so", dir);
  unlink(file);
  rmdir(dir);
  return shim_test_finish();
}
