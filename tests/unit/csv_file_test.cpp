// Tests for launcher/data/csv_file.cpp: RFC 4180 quoting, line ends, the byte order mark,
// header detection, the label column and its classes, and the one-line message for each
// kind of bad table.
#include "launcher/data/csv_file.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using test::TempDir;
using Strings = std::vector<std::string>;

// Runs `fn`, which must throw DataError whose message is `expected` exactly.
void ExpectDataError(const std::function<void()>& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no DataError; expected: " << expected;
  } catch (const DataError& e) {
    EXPECT_EQ(e.what(), expected);
  }
}

CsvOptions Options(CsvOptions::Header header = CsvOptions::Header::kAuto,
                   const std::string& label = "", char delimiter = ',') {
  CsvOptions o;
  o.header = header;
  o.label_column = label;
  o.delimiter = delimiter;
  return o;
}

TEST(CsvFile, ReadsHeaderNumbersAndWholeNumberLabels) {
  TempDir dir("csv");
  auto path = dir.Write("data.csv", "a,b,label\n1.5,-2,0\n3e2, 4 ,2\n+0.25,5,1.0\n");
  Strings classes = {"stale"};
  ImportedSplit s = ReadCsv(path, Options(), &classes);
  EXPECT_TRUE(classes.empty());
  EXPECT_EQ(s.shape, (Shape3{1, 1, 2}));
  EXPECT_EQ(s.floats, (std::vector<float>{1.5f, -2, 300, 4, 0.25f, 5}));
  EXPECT_TRUE(s.bytes.empty());
  EXPECT_EQ(s.labels, (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(s.origins, (Strings{"row 2", "row 3", "row 4"}));
}

TEST(CsvFile, NamesBecomeSortedClasses) {
  TempDir dir("csv");
  auto path = dir.Write("iris.csv",
                        "sepal,petal,species\n5.1,1.4,setosa\n7.0,4.7,versicolor\n"
                        "6.3,6.0,virginica\n4.9,1.4,setosa\n5,1,Zebra\n");
  Strings classes;
  ImportedSplit s = ReadCsv(path, Options(), &classes);
  EXPECT_EQ(classes, (Strings{"Zebra", "setosa", "versicolor", "virginica"}));  // byte order
  EXPECT_EQ(s.labels, (std::vector<int64_t>{1, 2, 3, 1, 0}));
  // One name among numbers makes them all names.
  auto mixed = dir.Write("mixed.csv", "x,y\n1,3\n2,cat\n3,10\n");
  s = ReadCsv(mixed, Options(), &classes);
  EXPECT_EQ(classes, (Strings{"10", "3", "cat"}));
  EXPECT_EQ(s.labels, (std::vector<int64_t>{1, 2, 0}));
}

TEST(CsvFile, QuotedFieldsHoldDelimitersQuotesAndNewlines) {
  TempDir dir("csv");
  auto path = dir.Write("q.csv",
                        "\"x, the first\",\"say \"\"hi\"\"\"\n"
                        "\"1\",\"a,b\"\n"
                        "2,\"two\nlines\"\n"
                        "3,\"\"\"quoted\"\"\"\n"
                        "4,plain\n");
  Strings classes;
  ImportedSplit s = ReadCsv(path, Options(), &classes);
  EXPECT_EQ(classes, (Strings{"\"quoted\"", "a,b", "plain", "two\nlines"}));
  EXPECT_EQ(s.labels, (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(s.floats, (std::vector<float>{1, 2, 3, 4}));
  // The record with a line break inside quotes starts on line 3 and ends on line 4.
  EXPECT_EQ(s.origins, (Strings{"row 2", "row 3", "row 5", "row 6"}));
}

TEST(CsvFile, CrlfByteOrderMarkNoFinalNewlineAndBlankLines) {
  TempDir dir("csv");
  auto path = dir.Write("w.csv", "\xEF\xBB\xBFh1,h2,y\r\n1,2,3\r\n\r\n4,5,6\r\n7,8,9");
  Strings classes;
  ImportedSplit s = ReadCsv(path, Options(), &classes);
  EXPECT_EQ(s.floats, (std::vector<float>{1, 2, 4, 5, 7, 8}));
  EXPECT_EQ(s.labels, (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(s.origins, (Strings{"row 2", "row 4", "row 5"}));
  auto trailing = dir.Write("t.csv", "1,2\n3,4\n\n\n\n");
  s = ReadCsv(trailing, Options(), &classes);
  EXPECT_EQ(s.labels, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s.origins, (Strings{"row 1", "row 2"}));
}

TEST(CsvFile, DetectsOrForcesTheHeader) {
  TempDir dir("csv");
  Strings classes;
  // All numbers: no header.
  auto numbers = dir.Write("n.csv", "1,2,0\n3,4,1\n");
  ImportedSplit s = ReadCsv(numbers, Options(), &classes);
  EXPECT_EQ(s.count(), 2);
  EXPECT_EQ(s.origins[0], "row 1");
  // String labels on every row are not a header; a word over a number is.
  auto names = dir.Write("s.csv", "1,2,cat\n3,4,dog\n");
  EXPECT_EQ(ReadCsv(names, Options(), &classes).count(), 2);
  auto header = dir.Write("h.csv", "1,width,label\n3,4,dog\n5,6,cat\n");
  s = ReadCsv(header, Options(), &classes);
  EXPECT_EQ(s.count(), 2);
  EXPECT_EQ(s.floats, (std::vector<float>{3, 4, 5, 6}));
  // Forced: yes drops the first row, no keeps it.
  EXPECT_EQ(ReadCsv(numbers, Options(CsvOptions::Header::kYes), &classes).count(), 1);
  EXPECT_EQ(ReadCsv(names, Options(CsvOptions::Header::kNo), &classes).count(), 2);
  ExpectDataError([&] { ReadCsv(header, Options(CsvOptions::Header::kNo), &classes); },
                  header + ": row 1, column 1: 'width' is not a number");
}

TEST(CsvFile, ChoosesTheLabelColumnByNameOrIndex) {
  TempDir dir("csv");
  auto path = dir.Write("l.csv", "f1,y,f2\n1,7,2\n3,8,4\n");
  Strings classes;
  ImportedSplit by_name = ReadCsv(path, Options(CsvOptions::Header::kAuto, "y"), &classes);
  EXPECT_EQ(by_name.labels, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(by_name.floats, (std::vector<float>{1, 2, 3, 4}));
  ImportedSplit by_index = ReadCsv(path, Options(CsvOptions::Header::kAuto, "0"), &classes);
  EXPECT_EQ(by_index.labels, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(by_index.floats, (std::vector<float>{7, 2, 8, 4}));
  ExpectDataError([&] { ReadCsv(path, Options(CsvOptions::Header::kAuto, "z"), &classes); },
                  path + ": no column named 'z' (the header has: f1, y, f2)");
  ExpectDataError([&] { ReadCsv(path, Options(CsvOptions::Header::kAuto, "3"), &classes); },
                  path + ": label column 3 does not exist (the table has 3 columns, 0..2)");
  auto plain = dir.Write("p.csv", "1,2\n");
  ExpectDataError([&] { ReadCsv(plain, Options(CsvOptions::Header::kAuto, "y"), &classes); },
                  plain + ": no column named 'y' (the table has no header; give a 0-based index)");
}

TEST(CsvFile, OtherDelimiters) {
  TempDir dir("csv");
  Strings classes;
  auto semicolon = dir.Write("s.csv", "a;b\n\"1;5\";x\n");
  ExpectDataError([&] { ReadCsv(semicolon, Options(CsvOptions::Header::kYes, "", ';'), &classes); },
                  semicolon + ": row 2, column 'a': '1;5' is not a number");
  auto tabs = dir.Write("t.tsv", "1.5\t2\tcat\n");
  ImportedSplit s = ReadCsv(tabs, Options(CsvOptions::Header::kNo, "", '\t'), &classes);
  EXPECT_EQ(s.floats, (std::vector<float>{1.5f, 2}));
  EXPECT_EQ(classes, (Strings{"cat"}));
}

TEST(CsvFile, RejectsCellsThatAreNotNumbers) {
  TempDir dir("csv");
  Strings classes;
  for (const std::string cell : {"abc", "", "1.5x", "nan", "inf", "1,5", "0x10", "1e999"}) {
    auto path = dir.Write("data.csv", "a,b,y\n1,2,0\n3,\"" + cell + "\",1\n");
    ExpectDataError([&] { ReadCsv(path, Options(), &classes); },
                    path + ": row 3, column 'b': '" + cell + "' is not a number");
  }
  auto headerless = dir.Write("n.csv", "1,2,0\n3,?,1\n");
  ExpectDataError([&] { ReadCsv(headerless, Options(), &classes); },
                  headerless + ": row 2, column 1: '?' is not a number");
  auto big = dir.Write("big.csv", "a,y\n1e300,1\n");
  ExpectDataError([&] { ReadCsv(big, Options(), &classes); },
                  big + ": row 2, column 'a': '1e300' is too large for a float");
  auto nolabel = dir.Write("e.csv", "a,y\n1,\n");
  ExpectDataError([&] { ReadCsv(nolabel, Options(), &classes); },
                  nolabel + ": row 2, column 'y': the label is empty");
}

TEST(CsvFile, RejectsRaggedRowsAndBadQuoting) {
  TempDir dir("csv");
  Strings classes;
  auto ragged =
      dir.Write("data.csv", "a,b,c,d,y\n1,2,3,4,0\n\"x\ny\",2,3,4,0\n1,2,3,4,0\n1,2,3,0\n");
  // Line 3 starts a record that spans lines 3 and 4; the short record is on line 6.
  ExpectDataError([&] { ReadCsv(ragged, Options(CsvOptions::Header::kYes, "0"), &classes); },
                  ragged + ": row 6 has 4 fields, expected 5 (as the header)");
  auto headerless = dir.Write("n.csv", "1,2,0\n1,2,3,0\n");
  ExpectDataError([&] { ReadCsv(headerless, Options(), &classes); },
                  headerless + ": row 2 has 4 fields, expected 3 (as the first row)");
  auto open = dir.Write("o.csv", "a,y\n1,\"never closed\n2,3\n");
  ExpectDataError([&] { ReadCsv(open, Options(), &classes); },
                  open + ": row 2: a quoted field is not closed before the end of the file");
  auto after = dir.Write("q.csv", "a,y\n1,\"x\"y\n");
  ExpectDataError([&] { ReadCsv(after, Options(), &classes); },
                  after + ": row 2: unexpected text after a quoted field's closing quote");
}

TEST(CsvFile, RejectsEmptyAndHeaderOnlyFiles) {
  TempDir dir("csv");
  Strings classes;
  for (const std::string text : {"", "\n\n", "\xEF\xBB\xBF"}) {
    auto path = dir.Write("empty.csv", text);
    ExpectDataError([&] { ReadCsv(path, Options(), &classes); }, path + ": empty file, no rows");
  }
  auto header_only = dir.Write("h.csv", "a,b,label\n");
  ExpectDataError([&] { ReadCsv(header_only, Options(), &classes); },
                  header_only + ": no data rows, only a header");
  auto one_column = dir.Write("one.csv", "1\n2\n");
  ExpectDataError([&] { ReadCsv(one_column, Options(), &classes); },
                  one_column +
                      ": only one column (is the delimiter not a comma?); a feature column and a "
                      "label column are needed at least");
  ExpectDataError([&] { ReadCsv(dir / "none.csv", Options(), &classes); },
                  dir / "none.csv" + ": cannot open: No such file or directory");
}

}  // namespace
}  // namespace dlh
