// The libc functions the shim calls, as an X-macro list: own_libc.c
// defines each as a hidden forwarder to glibc's own definition, and
// //tests/preload:interposed_imports_test defines each in a program, as
// an interposer that holds a pthread mutex around the real function. A
// function the shim comes to call is added here (shim_imports_test fails
// until it is, or until shim_imports.txt says why it stays an import).
//
// OWN(ret, name, params, args): a function with a value.
// OWN_VOID(name, params, args): without one.
// OWN_MEM(ret, name, params, args, fallback): one the compiler emits for
//   copies and zeroing (own_libc.c: a plain loop while it is resolved).
// OWN_NORETURN(name): void (void), never returns.
// Variadic functions (open, snprintf, sprintf) are written out by each user.
// No include guard: included once per definition of the macros.

// Memory.
OWN_MEM(void*, memcpy, (void* d, const void* s, size_t n), (d, s, n), CopyBytes)
OWN_MEM(void*, memmove, (void* d, const void* s, size_t n), (d, s, n), CopyBytes)
OWN_MEM(void*, memset, (void* d, int c, size_t n), (d, c, n), SetBytes)
OWN_MEM(int, memcmp, (const void* a, const void* b, size_t n), (a, b, n),
        CompareBytes)

// Strings.
OWN(size_t, strlen, (const char* s), (s))
OWN(char*, strchr, (const char* s, int c), (s, c))
OWN(char*, strrchr, (const char* s, int c), (s, c))
OWN(char*, strstr, (const char* h, const char* n), (h, n))
OWN(char*, strcat, (char* d, const char* s), (d, s))
OWN(int, strcmp, (const char* a, const char* b), (a, b))
OWN(int, strncmp, (const char* a, const char* b, size_t n), (a, b, n))
OWN(int, strncasecmp, (const char* a, const char* b, size_t n), (a, b, n))
OWN(const char*, strerrorname_np, (int e), (e))

// Formatting and stdio (reports; stdio's own lock is glibc's internal one).
OWN(int, vsnprintf, (char* s, size_t n, const char* f, va_list ap),
    (s, n, f, ap))
OWN(int, vsprintf, (char* s, const char* f, va_list ap), (s, f, ap))
OWN(size_t, fwrite, (const void* p, size_t size, size_t n, FILE* f),
    (p, size, n, f))
OWN(int, fputs, (const char* s, FILE* f), (s, f))
OWN(int, fputc, (int c, FILE* f), (c, f))

// The environment: glibc's getenv reads the process's own environ.
OWN(char*, getenv, (const char* name), (name))

// Files and memory.
OWN(int, close, (int fd), (fd))
OWN(ssize_t, read, (int fd, void* buf, size_t n), (fd, buf, n))
OWN(ssize_t, write, (int fd, const void* buf, size_t n), (fd, buf, n))
OWN(int, fstat, (int fd, struct stat* st), (fd, st))
OWN(int, lstat, (const char* path, struct stat* st), (path, st))
OWN(ssize_t, readlink, (const char* path, char* buf, size_t n), (path, buf, n))
OWN(char*, realpath, (const char* path, char* resolved), (path, resolved))
OWN(void*, mmap, (void* a, size_t n, int prot, int flags, int fd, off_t off),
    (a, n, prot, flags, fd, off))
OWN(int, munmap, (void* a, size_t n), (a, n))
OWN(int, mprotect, (void* a, size_t n, int prot), (a, n, prot))
OWN(int, madvise, (void* a, size_t n, int advice), (a, n, advice))

// The process, time and CPUs.
OWN(int*, __errno_location, (void), ())
OWN(pid_t, getpid, (void), ())
OWN(pid_t, gettid, (void), ())
OWN(int, getpagesize, (void), ())
OWN(long, sysconf, (int name), (name))
OWN(unsigned long, getauxval, (unsigned long type), (type))
OWN(int, clock_gettime, (clockid_t c, struct timespec* ts), (c, ts))
OWN(int, sched_getaffinity, (pid_t pid, size_t n, cpu_set_t* set),
    (pid, n, set))
OWN(int, __sched_cpucount, (size_t n, const cpu_set_t* set), (n, set))
OWN(int, sched_yield, (void), ())
OWN_NORETURN(abort)
OWN_NORETURN(__stack_chk_fail)
OWN(int, __cxa_atexit, (void (*fn)(void*), void* arg, void* dso),
    (fn, arg, dso))
OWN(int, __register_atfork,
    (void (*prepare)(void), void (*parent)(void), void (*child)(void),
     void* dso),
    (prepare, parent, child, dso))

// Signals.
OWN(int, sigemptyset, (sigset_t * set), (set))
OWN(int, sigaddset, (sigset_t * set, int sig), (set, sig))
OWN(int, sigismember, (const sigset_t* set, int sig), (set, sig))
OWN(int, sigpending, (sigset_t * set), (set))
OWN(int, sigprocmask, (int how, const sigset_t* set, sigset_t* old),
    (how, set, old))
OWN(int, pthread_sigmask, (int how, const sigset_t* set, sigset_t* old),
    (how, set, old))
OWN(int, sigtimedwait,
    (const sigset_t* set, siginfo_t* info, const struct timespec* timeout),
    (set, info, timeout))

// Threads: glibc's own, for objects and state glibc keeps.
OWN(pthread_t, pthread_self, (void), ())
OWN(int, pthread_setcanceltype, (int type, int* old), (type, old))
OWN_VOID(pthread_testcancel, (void), ())
OWN(int, pthread_key_create, (pthread_key_t * key, void (*dtor)(void*)),
    (key, dtor))
OWN(int, pthread_setspecific, (pthread_key_t key, const void* value),
    (key, value))
OWN(int, pthread_mutexattr_init, (pthread_mutexattr_t * a), (a))
OWN(int, pthread_mutexattr_destroy, (pthread_mutexattr_t * a), (a))
OWN(int, pthread_mutexattr_settype, (pthread_mutexattr_t * a, int kind),
    (a, kind))
OWN(int, pthread_barrierattr_getpshared,
    (const pthread_barrierattr_t* a, int* pshared), (a, pshared))
OWN_VOID(_pthread_cleanup_push,
         (struct _pthread_cleanup_buffer * b, void (*routine)(void*),
          void* arg),
         (b, routine, arg))
OWN_VOID(_pthread_cleanup_pop, (struct _pthread_cleanup_buffer * b, int run),
         (b, run))

// The loader's interfaces in libc (the shim's own dlopen, dlsym and dlvsym
// are its exported entry points, which reach glibc's through RealGlibc()
// and lookup.cc).
OWN(int, dladdr, (const void* addr, Dl_info* info), (addr, info))
OWN(int, dladdr1, (const void* addr, Dl_info* info, void** extra, int flags),
    (addr, info, extra, flags))
OWN(int, dlclose, (void* handle), (handle))
OWN(char*, dlerror, (void), ())
OWN(int, dl_iterate_phdr,
    (int (*cb)(struct dl_phdr_info*, size_t, void*), void* data), (cb, data))
