// Text without allocation and without Abseil's out-of-line code: reading
// the PARKLOT_* numbers, formatting reports into fixed buffers, and one-line
// messages on stderr. The preload shim loads with libc alone (docs/design.md,
// "The shim's footprint"), and these run where malloc must not (the first
// lock may be inside malloc). Header-only, libc only.
#ifndef PARKLOT_BASE_TEXT_H_
#define PARKLOT_BASE_TEXT_H_

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace parklot::internal {

// --- Parsing, as Abseil's SimpleAtoi/SimpleAtod/SimpleAtob accept --------

inline std::string_view StripAsciiSpace(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// Decimal digits, and nothing else, below 2^64: false on anything else.
inline bool ParseDigits(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    if (__builtin_mul_overflow(n, uint64_t{10}, &n) ||
        __builtin_add_overflow(n, static_cast<uint64_t>(c - '0'), &n)) {
      return false;
    }
  }
  *out = n;
  return true;
}

// A whole number in base 10 up to `max`, surrounded by whitespace at most,
// with an optional '+': false on anything else ('-' included).
inline bool ParseUnsigned(std::string_view s, uint64_t max, uint64_t* out) {
  s = StripAsciiSpace(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  uint64_t n;
  if (!ParseDigits(s, &n) || n > max) return false;
  *out = n;
  return true;
}

// The same, signed, in [min, max], with an optional '+' or '-'.
inline bool ParseSigned(std::string_view s, int64_t min, int64_t max,
                        int64_t* out) {
  s = StripAsciiSpace(s);
  const bool negative = !s.empty() && s.front() == '-';
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) s.remove_prefix(1);
  uint64_t n;
  if (!ParseDigits(s, &n)) return false;
  if (negative ? n > uint64_t{1} << 63 : n > uint64_t{INT64_MAX}) return false;
  const int64_t v = negative ? static_cast<int64_t>(0 - n) : static_cast<int64_t>(n);
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

// A decimal number ("2.5", "-1", "1e3", ".5"; "inf" and "nan" as strtod
// reads them), surrounded by whitespace at most, read the same in every
// locale as Abseil's SimpleAtod (strtod's decimal point is the locale's, and
// the library reads its configuration after the program's setlocale). Exact for up to 19
// significant digits and powers of ten up to 22, where the one rounding of
// m * 10^e or m / 10^e is the correct one; a load factor needs no more.
// Overflow gives infinity; false if it is not a number.
inline bool ParseDouble(std::string_view s, double* out) {
  s = StripAsciiSpace(s);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  auto word = [&s](const char* w) {
    const size_t n = __builtin_strlen(w);
    return s.size() == n && strncasecmp(s.data(), w, n) == 0;
  };
  if (word("inf") || word("infinity")) {
    *out = negative ? -__builtin_inf() : __builtin_inf();
    return true;
  }
  if (word("nan")) {
    *out = __builtin_nan("");
    return true;
  }
  uint64_t mantissa = 0;
  int digits = 0, exponent = 0;
  bool any = false, point = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any = true;
    if (mantissa == 0 && c == '0') {
      if (point) --exponent;
    } else if (digits < 19) {
      mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');
      ++digits;
      if (point) --exponent;
    } else if (!point) {
      ++exponent;  // a digit beyond the 19 kept
    }
  }
  if (!any) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    int64_t e;
    const std::string_view rest(s.data() + i + 1, s.size() - i - 1);
    // Digits with an optional sign; no spaces inside.
    if (StripAsciiSpace(rest) != rest ||
        !ParseSigned(rest, -100000, 100000, &e)) {
      return false;
    }
    exponent += static_cast<int>(e);
    i = s.size();
  }
  if (i != s.size()) return false;
  double v = static_cast<double>(mantissa);
  if (mantissa != 0) {
    static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,
                                        1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                        1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                                        1e18, 1e19, 1e20, 1e21, 1e22};
    for (; exponent > 22 && v < 1e308; exponent -= 22) v *= 1e22;
    for (; exponent < -22 && v > 1e-300; exponent += 22) v /= 1e22;
    if (exponent > 22) {
      v = __builtin_inf();
    } else if (exponent < -22) {
      v = 0;
    } else if (exponent >= 0) {
      v *= kPow10[exponent];
    } else {
      v /= kPow10[-exponent];
    }
  }
  *out = negative ? -v : v;
  return true;
}

// 1/0, true/false, yes/no, t/f, y/n, in any case.
inline bool ParseBool(std::string_view s, bool* out) {
  for (const char* w : {"1", "true", "t", "yes", "y"}) {
    if (s.size() == __builtin_strlen(w) && strncasecmp(s.data(), w, s.size()) == 0) {
      *out = true;
      return true;
    }
  }
  for (const char* w : {"0", "false", "f", "no", "n"}) {
    if (s.size() == __builtin_strlen(w) && strncasecmp(s.data(), w, s.size()) == 0) {
      *out = false;
      return true;
    }
  }
  return false;
}

// --- Formatting --------------------------------------------------------------

// Text appended with printf formats into a caller's buffer (size 0: only
// counted), NUL-terminated, cut where it does not fit.
class TextBuffer {
 public:
  TextBuffer(char* buf, size_t size) : buf_(buf), size_(size) {
    if (size_ != 0) buf_[0] = '\0';
  }
  __attribute__((format(printf, 2, 3))) void Add(const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    const size_t at = wanted_ < size_ ? wanted_ : size_;
    const int n = vsnprintf(buf_ == nullptr ? nullptr : buf_ + at,
                            size_ - at, format, ap);
    va_end(ap);
    if (n > 0) wanted_ += static_cast<size_t>(n);
  }
  // What was kept, and the whole length asked for (as snprintf returns).
  std::string_view view() const {
    return {buf_, size_ == 0 ? 0 : (wanted_ < size_ ? wanted_ : size_ - 1)};
  }
  size_t wanted() const { return wanted_; }

 private:
  char* buf_;
  size_t size_;
  size_t wanted_ = 0;
};

// Writes all of [p, p + n) to `fd` (retrying EINTR and short writes) as
// the parking lot's own output (warnings, reports): without the SIGPIPE
// that a pipe or socket whose reader has gone raises, which would kill a
// program that wrote nothing there itself (glibc writes nothing there).
// SIGPIPE is blocked in the calling thread for the writes (two
// rt_sigprocmask); on EPIPE the SIGPIPE the write raised is taken back
// (rt_sigtimedwait, zero timeout) unless the program blocks SIGPIPE and one
// was pending before (then it stays, and so may ours: the two are one
// pending signal). Returns false if a write failed, with errno set.
// Async-signal-safe.
inline bool WriteAllNoSigpipe(int fd, const char* p, size_t n) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  const bool masked = pthread_sigmask(SIG_BLOCK, &pipe_only, &old) == 0;
  bool pending_before = false;
  if (masked && sigismember(&old, SIGPIPE) == 1) {
    sigset_t pending;
    pending_before = sigpending(&pending) == 0 &&
                     sigismember(&pending, SIGPIPE) == 1;
  }
  bool ok = true;
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  if (masked) {
    const int err = errno;
    if (!ok && err == EPIPE && !pending_before) {
      const struct timespec zero = {0, 0};
      sigtimedwait(&pipe_only, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = err;
  }
  return ok;
}

// One line on stderr (descriptor 2 as it is now), "\n" added: one write(2)
// (WriteAllNoSigpipe), no stdio, errno kept. For the runtime's warnings.
__attribute__((format(printf, 1, 2))) inline void SayLine(const char* format, ...) {
  char line[512];
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(line, sizeof(line) - 1, format, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) > sizeof(line) - 2) n = sizeof(line) - 2;
  line[n++] = '\n';
  const int saved_errno = errno;
  WriteAllNoSigpipe(STDERR_FILENO, line, static_cast<size_t>(n));
  errno = saved_errno;
}

}  // namespace parklot::internal

#endif  // PARKLOT_BASE_TEXT_H_
