// prctl(PR_FUTEX_HASH, ...): the kernel's per-process futex hash controls
// (Linux 6.16+, include/uapi/linux/prctl.h), for the benchmarks that compare
// against the kernel's configurations. Older headers lack them; on older
// kernels the prctl fails with EINVAL and the benchmarks say so.
#ifndef PARKLOT_BENCH_FUTEX_PRCTL_H_
#define PARKLOT_BENCH_FUTEX_PRCTL_H_

#include <sys/prctl.h>

#ifndef PR_FUTEX_HASH
#define PR_FUTEX_HASH 78
#endif
#ifndef PR_FUTEX_HASH_SET_SLOTS
#define PR_FUTEX_HASH_SET_SLOTS 1
#endif
#ifndef PR_FUTEX_HASH_GET_SLOTS
#define PR_FUTEX_HASH_GET_SLOTS 2
#endif

#endif  // PARKLOT_BENCH_FUTEX_PRCTL_H_
