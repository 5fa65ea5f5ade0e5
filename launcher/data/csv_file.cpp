// DLH — CSV reader (see csv_file.hpp). The whole file is read into memory and split into
// records by an RFC 4180 scanner; numbers are parsed with std::from_chars, which ignores the
// locale (a German locale must not turn "5.1" into an error).
#include "launcher/data/csv_file.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

#include "common/error.hpp"

namespace dlh {
namespace {

// One record: its fields and the line it starts on (1-based, as an editor numbers lines).
struct Record {
  std::vector<std::string> fields;
  int64_t line = 0;
};

// Splits the text into records. Quoted fields may hold the delimiter, doubled quotes and
// line breaks; lines end in LF or CRLF; empty lines are skipped (pandas does the same).
class CsvScanner {
 public:
  CsvScanner(const std::string& text, char delimiter, const std::string& path)
      : s_(text), delimiter_(delimiter), path_(path) {
    if (s_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;  // a UTF-8 byte order mark
  }

  // Reads the next non-empty record into *r; false at the end of the text.
  bool Next(Record* r) {
    while (pos_ < s_.size() && AtLineEnd()) SkipLineEnd();
    if (pos_ >= s_.size()) return false;
    r->fields.clear();
    r->line = line_;
    while (true) {
      r->fields.push_back(ReadField(r->line));
      if (pos_ < s_.size() && s_[pos_] == delimiter_) {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size()) SkipLineEnd();
      return true;
    }
  }

 private:
  bool AtLineEnd() const {
    return s_[pos_] == '\n' || (s_[pos_] == '\r' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n');
  }
  void SkipLineEnd() {
    pos_ += s_[pos_] == '\r' ? 2 : 1;
    ++line_;
  }

  // Reads one field, leaving pos_ at the delimiter or line end after it (or the text's end).
  std::string ReadField(int64_t record_line) {
    if (pos_ < s_.size() && s_[pos_] == '"') return ReadQuoted(record_line);
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != delimiter_ && !AtLineEnd()) ++pos_;
    return s_.substr(start, pos_ - start);
  }

  std::string ReadQuoted(int64_t record_line) {
    std::string out;
    ++pos_;  // the opening quote
    while (true) {
      if (pos_ >= s_.size())
        throw DataError(path_ + ": row " + std::to_string(record_line) +
                        ": a quoted field is not closed before the end of the file");
      char c = s_[pos_++];
      if (c == '"') {
        if (pos_ < s_.size() && s_[pos_] == '"') {
          out += '"';
          ++pos_;
          continue;
        }
        break;
      }
      if (c == '\n') ++line_;
      out += c;
    }
    if (pos_ < s_.size() && s_[pos_] != delimiter_ && !AtLineEnd())
      throw DataError(path_ + ": row " + std::to_string(record_line) +
                      ": unexpected text after a quoted field's closing quote");
    return out;
  }

  const std::string& s_;
  char delimiter_;
  const std::string& path_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw DataError(path + ": read error: " + std::strerror(errno));
  return text.str();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The cell as a finite number, if all of it (spaces around aside) is one. from_chars takes
// no leading '+', which spreadsheets write now and then.
bool ParseNumber(std::string_view cell, double* out) {
  cell = Trim(cell);
  if (cell.size() > 1 && cell[0] == '+' && cell[1] != '-') cell.remove_prefix(1);
  if (cell.empty()) return false;
  auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), *out);
  return ec == std::errc() && end == cell.data() + cell.size() && std::isfinite(*out);
}

// A cell for a message: quoted, and cut short when long.
std::string Shown(const std::string& cell) {
  std::string s = cell.size() > 40 ? cell.substr(0, 37) + "..." : cell;
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';  // the message stays one line
  return "'" + s + "'";
}

// Whether the first record is a header: one of its cells is not a number while the same
// cell of the second record is.
bool LooksLikeHeader(const std::vector<Record>& first_two) {
  if (first_two.empty()) return false;
  const auto& a = first_two[0].fields;
  double v;
  if (first_two.size() == 1)  // nothing to compare with: any word makes it a header
    return std::any_of(a.begin(), a.end(),
                       [&](const std::string& c) { return !ParseNumber(c, &v); });
  const auto& b = first_two[1].fields;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (!ParseNumber(a[i], &v) && ParseNumber(b[i], &v)) return true;
  return false;
}

// The label column's index: a header name, else a 0-based index, else the last column.
size_t LabelColumn(const std::string& wanted, const std::vector<std::string>& header,
                   size_t columns, const std::string& path) {
  if (wanted.empty()) return columns - 1;
  auto named = std::find(header.begin(), header.end(), wanted);
  if (named != header.end()) return size_t(named - header.begin());
  size_t index = 0;
  auto [end, ec] = std::from_chars(wanted.data(), wanted.data() + wanted.size(), index);
  bool is_index = ec == std::errc() && end == wanted.data() + wanted.size();
  if (is_index && index < columns) return index;
  if (is_index)
    throw DataError(path + ": label column " + wanted + " does not exist (the table has " +
                    std::to_string(columns) + " columns, 0.." + std::to_string(columns - 1) + ")");
  std::string names;
  for (const auto& h : header) names += (names.empty() ? "" : ", ") + h;
  throw DataError(path + ": no column named '" + wanted + "'" +
                  (header.empty() ? " (the table has no header; give a 0-based index)"
                                  : " (the header has: " + names + ")"));
}

// Turns the label cells into labels: whole numbers as they are, otherwise names that become
// classes in byte order.
std::vector<int64_t> MakeLabels(const std::vector<std::string>& cells,
                                std::vector<std::string>* class_names) {
  std::vector<int64_t> labels;
  labels.reserve(cells.size());
  for (const auto& c : cells) {
    double v;
    // Beyond 2^53 a double cannot tell neighbouring integers apart; no class index is there.
    if (!ParseNumber(c, &v) || v != std::trunc(v) || std::fabs(v) > 9007199254740992.0) break;
    labels.push_back(int64_t(v));
  }
  class_names->clear();
  if (labels.size() == cells.size()) return labels;

  std::map<std::string, int64_t> index;
  for (const auto& c : cells) index.emplace(std::string(Trim(c)), 0);
  for (auto& [name, i] : index) {
    i = int64_t(class_names->size());
    class_names->push_back(name);
  }
  labels.clear();
  for (const auto& c : cells) labels.push_back(index.at(std::string(Trim(c))));
  return labels;
}

}  // namespace

ImportedSplit ReadCsv(const std::string& path, const CsvOptions& options,
                      std::vector<std::string>* class_names) {
  const std::string text = ReadWholeFile(path);
  CsvScanner scanner(text, options.delimiter, path);

  // The first two records decide whether there is a header.
  std::vector<Record> pending(2);
  size_t have = 0;
  while (have < 2 && scanner.Next(&pending[have])) ++have;
  pending.resize(have);
  if (pending.empty()) throw DataError(path + ": empty file, no rows");
  bool has_header = options.header == CsvOptions::Header::kYes ||
                    (options.header == CsvOptions::Header::kAuto && LooksLikeHeader(pending));
  std::vector<std::string> header;
  if (has_header) {
    header = pending[0].fields;
    for (auto& h : header) h = std::string(Trim(h));
    pending.erase(pending.begin());
    if (pending.empty()) throw DataError(path + ": no data rows, only a header");
  }

  const size_t columns = has_header ? header.size() : pending[0].fields.size();
  if (columns < 2)
    throw DataError(path + ": only one column" +
                    (options.delimiter == ',' ? " (is the delimiter not a comma?)" : "") +
                    "; a feature column and a label column are needed at least");
  const size_t label = LabelColumn(options.label_column, header, columns, path);
  auto column_name = [&](size_t i) {
    return has_header ? "column '" + header[i] + "'" : "column " + std::to_string(i);
  };

  ImportedSplit split;
  split.shape = Shape3{1, 1, int(columns - 1)};
  std::vector<std::string> label_cells;
  Record r;
  auto take = [&](const Record& rec) {
    const std::string row = "row " + std::to_string(rec.line);
    if (rec.fields.size() != columns)
      throw DataError(path + ": " + row + " has " + std::to_string(rec.fields.size()) +
                      " fields, expected " + std::to_string(columns) +
                      (has_header ? " (as the header)" : " (as the first row)"));
    for (size_t i = 0; i < columns; ++i) {
      if (i == label) continue;
      double v;
      if (!ParseNumber(rec.fields[i], &v))
        throw DataError(path + ": " + row + ", " + column_name(i) + ": " + Shown(rec.fields[i]) +
                        " is not a number");
      if (std::fabs(v) > std::numeric_limits<float>::max())
        throw DataError(path + ": " + row + ", " + column_name(i) + ": " + Shown(rec.fields[i]) +
                        " is too large for a float");
      split.floats.push_back(float(v));
    }
    if (Trim(rec.fields[label]).empty())
      throw DataError(path + ": " + row + ", " + column_name(label) + ": the label is empty");
    label_cells.push_back(rec.fields[label]);
    split.origins.push_back(row);
  };
  for (const auto& rec : pending) take(rec);
  while (scanner.Next(&r)) take(r);

  split.labels = MakeLabels(label_cells, class_names);
  return split;
}

}  // namespace dlh
