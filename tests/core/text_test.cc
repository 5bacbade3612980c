// base/text.h: the parsers read what Abseil's SimpleAtoi/SimpleAtod/
// SimpleAtob read (the PARKLOT_* knobs' syntax), and TextBuffer cuts and
// counts as snprintf does.
#include "base/text.h"

#include <clocale>
#include <cmath>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace parklot::internal {
namespace {

TEST(ParseUnsigned, DigitsWithSpaceAndPlus) {
  uint64_t n = 7;
  EXPECT_TRUE(ParseUnsigned("42", UINT64_MAX, &n));
  EXPECT_EQ(n, 42u);
  EXPECT_TRUE(ParseUnsigned(" +9\t", UINT64_MAX, &n));
  EXPECT_EQ(n, 9u);
  EXPECT_TRUE(ParseUnsigned("18446744073709551615", UINT64_MAX, &n));
  EXPECT_EQ(n, UINT64_MAX);
  for (const char* bad : {"", " ", "-1", "-0", "1 2", "0x10", "18446744073709551616",
                          "12abc", "+", "1e3"}) {
    SCOPED_TRACE(bad);
    n = 7;
    EXPECT_FALSE(ParseUnsigned(bad, UINT64_MAX, &n));
    EXPECT_EQ(n, 7u);
  }
  EXPECT_FALSE(ParseUnsigned("11", 10, &n));
}

TEST(ParseSigned, BothEnds) {
  int64_t v = 0;
  EXPECT_TRUE(ParseSigned("-9223372036854775808", INT64_MIN, INT64_MAX, &v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_TRUE(ParseSigned("9223372036854775807", INT64_MIN, INT64_MAX, &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_TRUE(ParseSigned("-0", INT64_MIN, INT64_MAX, &v));
  EXPECT_EQ(v, 0);
  EXPECT_FALSE(ParseSigned("9223372036854775808", INT64_MIN, INT64_MAX, &v));
  EXPECT_FALSE(ParseSigned("-9223372036854775809", INT64_MIN, INT64_MAX, &v));
  EXPECT_FALSE(ParseSigned("2147483648", INT32_MIN, INT32_MAX, &v));
  EXPECT_FALSE(ParseSigned("--1", INT64_MIN, INT64_MAX, &v));
}

TEST(ParseDouble, ExactWhereTheTestsCompare) {
  double d = 0;
  const struct {
    const char* text;
    double want;
  } cases[] = {{"2.5", 2.5},     {"1", 1.0},       {"1024", 1024.0},
               {"0.001", 0.001}, {" +4 ", 4.0},    {"-1", -1.0},
               {".5", 0.5},      {"5.", 5.0},      {"1e3", 1000.0},
               {"1E-2", 0.01},   {"0.1", 0.1},     {"123.456", 123.456},
               {"00012", 12.0},  {"1e+2", 100.0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    ASSERT_TRUE(ParseDouble(c.text, &d));
    EXPECT_EQ(d, c.want);
  }
  ASSERT_TRUE(ParseDouble("1e999", &d));
  EXPECT_TRUE(std::isinf(d));
  ASSERT_TRUE(ParseDouble("1e-999", &d));
  EXPECT_EQ(d, 0.0);
  ASSERT_TRUE(ParseDouble("-nan", &d));
  EXPECT_TRUE(std::isnan(d));
  ASSERT_TRUE(ParseDouble("Infinity", &d));
  EXPECT_TRUE(std::isinf(d));
  for (const char* bad : {"", "x", ".", "1.2.3", "1e", "1e 3", "1 e3", "0x10",
                          "2,5", "--1", "1f"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseDouble(bad, &d));
  }
}

// strtod would read "2.5" as 2 in a locale whose decimal point is a comma.
TEST(ParseDouble, TheSameInEveryLocale) {
  const char* comma = nullptr;
  for (const char* name : {"de_DE.UTF-8", "fr_FR.UTF-8", "de_DE", "fr_FR"}) {
    if (setlocale(LC_NUMERIC, name) != nullptr) {
      comma = name;
      break;
    }
  }
  double d = 0;
  EXPECT_TRUE(ParseDouble("2.5", &d));
  EXPECT_EQ(d, 2.5);
  setlocale(LC_NUMERIC, "C");
  if (comma == nullptr) GTEST_SKIP() << "no comma locale installed";
}

TEST(ParseBool, AbseilsWords) {
  bool b = false;
  for (const char* yes : {"1", "true", "TRUE", "t", "yes", "Y"}) {
    b = false;
    EXPECT_TRUE(ParseBool(yes, &b)) << yes;
    EXPECT_TRUE(b) << yes;
  }
  for (const char* no : {"0", "false", "F", "no", "n"}) {
    b = true;
    EXPECT_TRUE(ParseBool(no, &b)) << no;
    EXPECT_FALSE(b) << no;
  }
  for (const char* bad : {"", "2", "on", " 1", "yess"}) {
    EXPECT_FALSE(ParseBool(bad, &b)) << bad;
  }
}

TEST(TextBuffer, CutsAndCountsAsSnprintf) {
  char buf[8];
  TextBuffer t(buf, sizeof(buf));
  t.Add("%s", "abc");
  t.Add("%d", 12345);
  EXPECT_EQ(std::string(t.view()), "abc1234");
  EXPECT_STREQ(buf, "abc1234");
  t.Add("more");
  EXPECT_EQ(t.wanted(), 12u);
  EXPECT_EQ(std::string(t.view()), "abc1234");

  TextBuffer count(nullptr, 0);
  count.Add("%s=%lu", "x", 10lu);
  EXPECT_EQ(count.wanted(), 4u);
  EXPECT_TRUE(count.view().empty());
}

}  // namespace
}  // namespace parklot::internal
