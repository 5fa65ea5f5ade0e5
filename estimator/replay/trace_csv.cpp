// DLH replay — the trace file (see trace.hpp; the format: docs/reference/replay.md).
//
// The columns are sacct's (`sacct -X --parsable2 --delimiter=, --format=JobID,Submit,Start,
// End,Timelimit,ReqTRES,NNodes,State`), in any order, matched by name without regard to
// case; columns the replay does not use are ignored. sacct does not quote its fields, and a
// TRES field ("billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,node=1") holds the delimiter: a
// row with more fields than the header has columns gives the extra ones to its one TRES
// column. Fields in double quotes (as a spreadsheet writes them) are read whole.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/file_text.hpp"
#include "estimator/replay/trace.hpp"

namespace dlh::replay {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

struct Field {
  std::string text;
  bool quoted = false;
};

// Splits one line at commas outside double quotes ("" inside quotes is one quote). Returns
// false for a quote left open.
bool SplitLine(const std::string& line, std::vector<Field>* fields) {
  fields->assign(1, Field{});
  bool in_quotes = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    Field& f = fields->back();
    if (in_quotes) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        f.text += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        f.text += c;
      }
    } else if (c == '"' && Trim(f.text).empty()) {
      in_quotes = true;
      f.quoted = true;
      f.text.clear();
    } else if (c == ',') {
      fields->push_back(Field{});
    } else {
      f.text += c;
    }
  }
  return !in_quotes;
}

// Days since 1970-01-01 of a proleptic Gregorian date (the civil calendar, month 1-12).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t year_of_era = y - era * 400;
  const int64_t day_of_year = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

// sacct's time stamps: YYYY-MM-DDTHH:MM:SS (local time; only differences matter here).
bool ParseTimestamp(const std::string& text, double* seconds) {
  int y, mo, d, h, mi, s;
  char tail;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &tail) != 6)
    return false;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || h < 0 || mi < 0 ||
      s < 0)
    return false;
  *seconds = double(DaysFromCivil(y, mo, d)) * 86400 + h * 3600 + mi * 60 + s;
  return true;
}

std::string Timestamp(double seconds) {
  // From 2025-01-01T00:00:00, in the civil calendar.
  int64_t t = DaysFromCivil(2025, 1, 1) * 86400 + int64_t(std::llround(seconds));
  int64_t days = t / 86400, rest = t % 86400;
  // Civil from days (the inverse of DaysFromCivil).
  days += 719468;
  const int64_t era = days / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int d = int(doy - (153 * mp + 2) / 5 + 1);
  const int m = int(mp < 10 ? mp + 3 : mp - 9);
  const int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02d", (long long)y, m, d,
                int(rest / 3600), int(rest / 60 % 60), int(rest % 60));
  return buf;
}

std::string SlurmLimit(double seconds) {
  if (seconds <= 0) return "UNLIMITED";
  const int64_t t = int64_t(std::ceil(seconds));
  char buf[40];
  if (t >= 86400)
    std::snprintf(buf, sizeof buf, "%lld-%02d:%02d:%02d", (long long)(t / 86400),
                  int(t / 3600 % 24), int(t / 60 % 60), int(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d", int(t / 3600), int(t / 60 % 60), int(t % 60));
  return buf;
}

bool ParseCount(const std::string& text, int64_t max, int64_t* value) {
  if (text.empty() || text.size() > 18) return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  *value = std::stoll(text);
  return *value <= max;
}

// One row's problems are one line: ORIGIN:LINE:COLUMN: NAME: what.
class RowReader {
 public:
  RowReader(const std::string& origin, int line, const std::vector<std::string>& names)
      : origin_(origin), line_(line), names_(names) {}
  [[noreturn]] void Fail(int column, const std::string& what) const {
    throw UsageError(origin_ + ":" + std::to_string(line_) + ":" + std::to_string(column + 1) +
                     ": " + names_[size_t(column)] + ": " + what);
  }

 private:
  const std::string& origin_;
  int line_;
  const std::vector<std::string>& names_;
};

struct Tres {
  int64_t gpus = 0, nodes = 0;
  std::string type;  // the one GPU type named, "" when none or several
};

// "billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1".
Tres ParseTres(const std::string& text, const RowReader& row, int column) {
  Tres t;
  int64_t typed = 0;
  std::set<std::string> types;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    const std::string item =
        Trim(text.substr(start, comma == std::string::npos ? comma : comma - start));
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) row.Fail(column, "'" + item + "' is not KEY=VALUE");
    const std::string key = Lower(item.substr(0, eq)), value = item.substr(eq + 1);
    int64_t n = 0;
    if (key == "gres/gpu" || key.rfind("gres/gpu:", 0) == 0 || key == "node") {
      if (!ParseCount(value, 1000000, &n))
        row.Fail(column, "'" + item + "': the count is not a whole number");
    }
    if (key == "gres/gpu") {
      t.gpus = n;
    } else if (key.rfind("gres/gpu:", 0) == 0) {
      typed += n;
      types.insert(item.substr(9, eq - 9));
    } else if (key == "node") {
      t.nodes = n;
    }
  }
  if (t.gpus == 0) t.gpus = typed;
  if (types.size() == 1) t.type = *types.begin();
  return t;
}

}  // namespace

Trace ParseTraceCsv(const std::string& text, const std::string& origin,
                    const std::string& base_dir) {
  Trace trace;
  trace.origin = origin;
  std::vector<std::string> names;
  std::map<std::string, int> column;  // lower-case name -> index
  int tres_column = -1;               // the TRES column read: ReqTRES, else AllocTRES
  bool merge_extra = true;            // extra fields go to it (false: two TRES columns, ambiguous)
  std::set<std::string> specs_checked;
  double first_submit = 0;
  bool any = false;
  auto note = [&](const std::string& why) {
    ++trace.skipped;
    if (trace.notes.size() < 5) trace.notes.push_back(why);
  };
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (Trim(line).empty() || Trim(line)[0] == '#') continue;
    std::vector<Field> fields;
    if (!SplitLine(line, &fields))
      throw UsageError(origin + ":" + std::to_string(line_no) + ": a double quote is not closed");
    if (names.empty()) {  // the header
      for (size_t i = 0; i < fields.size(); ++i) {
        const std::string name = Trim(fields[i].text);
        if (!column.emplace(Lower(name), int(i)).second)
          throw UsageError(origin + ":" + std::to_string(line_no) + ":" + std::to_string(i + 1) +
                           ": column " + name + " appears twice");
        names.push_back(name);
      }
      for (const char* required : {"jobid", "submit"})
        if (!column.count(required))
          throw UsageError(origin + ":" + std::to_string(line_no) + ": the header has no " +
                           (std::string(required) == "jobid" ? "JobID" : "Submit") +
                           " column (sacct -X --parsable2 --delimiter=, --format=JobID,Submit,"
                           "Start,End,Timelimit,ReqTRES,NNodes,State)");
      for (const char* tres : {"reqtres", "alloctres"})
        if (column.count(tres) && tres_column < 0) tres_column = column[tres];
      if (tres_column < 0)
        throw UsageError(origin + ":" + std::to_string(line_no) +
                         ": the header has no ReqTRES or AllocTRES column (the GPUs asked for)");
      int tres_like = 0;
      for (const std::string& n : names) tres_like += Lower(n).find("tres") != std::string::npos;
      merge_extra = tres_like == 1;
      trace.tres_column = tres_column + 1;
      trace.tres_name = names[size_t(tres_column)];
      if (column.count("network")) trace.network_column = column["network"] + 1;
      if (column.count("spec")) trace.spec_column = column["spec"] + 1;
      continue;
    }
    // sacct's unquoted TRES: the extra fields belong to it.
    if (fields.size() > names.size() && merge_extra && !fields[size_t(tres_column)].quoted) {
      const size_t extra = fields.size() - names.size();
      for (size_t k = 1; k <= extra; ++k)
        fields[size_t(tres_column)].text += "," + fields[size_t(tres_column) + k].text;
      fields.erase(fields.begin() + tres_column + 1,
                   fields.begin() + tres_column + 1 + long(extra));
    }
    if (fields.size() != names.size())
      throw UsageError(origin + ":" + std::to_string(line_no) + ": " +
                       std::to_string(fields.size()) + " fields, the header has " +
                       std::to_string(names.size()) + " columns" +
                       (merge_extra ? "" : " (with two TRES columns, quote them)"));
    const RowReader row(origin, line_no, names);
    auto get = [&](const char* name) -> std::string {
      auto it = column.find(name);
      return it == column.end() ? std::string() : Trim(fields[size_t(it->second)].text);
    };
    auto col = [&](const char* name) { return column.at(name); };

    TraceJob job;
    job.line = line_no;
    job.id = get("jobid");
    if (job.id.empty()) row.Fail(col("jobid"), "empty");
    if (job.id.find('.') != std::string::npos) {
      note("line " + std::to_string(line_no) + ": " + job.id + " is a job step");
      continue;
    }
    if (!ParseTimestamp(get("submit"), &job.submit_s))
      row.Fail(col("submit"), "expected YYYY-MM-DDTHH:MM:SS, got '" + get("submit") + "'");
    double start = 0, finish = 0;
    const bool started = column.count("start") && ParseTimestamp(get("start"), &start);
    const bool ended = column.count("end") && ParseTimestamp(get("end"), &finish);
    for (const char* name : {"start", "end"}) {
      const std::string v = get(name);
      double ignored;
      if (!v.empty() && v != "Unknown" && v != "None" && !ParseTimestamp(v, &ignored))
        row.Fail(col(name), "expected YYYY-MM-DDTHH:MM:SS, Unknown or None, got '" + v + "'");
    }
    if (started && ended && finish >= start) job.elapsed_s = finish - start;
    const std::string limit = get("timelimit");
    if (!limit.empty() && limit != "UNLIMITED" && limit != "Partition_Limit") {
      try {
        job.limit_s = ParseDuration(limit, "limit");
      } catch (const UsageError&) {
        row.Fail(col("timelimit"), "expected [D-]HH:MM:SS or UNLIMITED, got '" + limit + "'");
      }
    }
    const Tres tres = ParseTres(Trim(fields[size_t(tres_column)].text), row, tres_column);
    job.units = int(tres.gpus);
    job.device_type = tres.type;
    job.nodes = int(tres.nodes);
    if (column.count("nnodes") && !get("nnodes").empty()) {
      int64_t n = 0;
      if (!ParseCount(get("nnodes"), 1000000, &n) || n < 1)
        row.Fail(col("nnodes"), "expected a node count, got '" + get("nnodes") + "'");
      job.nodes = int(n);
    }
    if (job.units <= 0) {
      note("line " + std::to_string(line_no) + ": " + job.id + " asks for no GPU");
      continue;
    }

    // The DLH columns.
    const std::string network = get("network"), spec = get("spec");
    if (!network.empty() && !spec.empty()) row.Fail(col("spec"), "give Network or Spec, not both");
    if (!network.empty()) {
      std::string why;
      if (!KnownNetwork(network, &why)) row.Fail(col("network"), why);
      job.network = network;
    }
    if (!spec.empty()) {
      job.spec = spec[0] == '/' || base_dir.empty() ? spec : base_dir + "/" + spec;
      if (specs_checked.insert(job.spec).second) {
        try {
          LoadSpec(job.spec);
        } catch (const Error& e) {
          row.Fail(col("spec"), e.what());
        }
      }
    }
    int64_t n = 0;
    if (!get("samples").empty()) {
      if (!ParseCount(get("samples"), int64_t(1) << 40, &n) || n < 1)
        row.Fail(col("samples"), "expected a positive whole number, got '" + get("samples") + "'");
      job.samples = n;
    }
    if (!get("epochs").empty()) {
      if (!ParseCount(get("epochs"), 100000, &n) || n < 1)
        row.Fail(col("epochs"), "expected 1 to 100000, got '" + get("epochs") + "'");
      job.epochs = int(n);
    }
    const std::string deadline = get("deadline");
    if (!deadline.empty() && Lower(deadline) != "none") {
      try {
        job.deadline_s = ParseDuration(deadline, "deadline");
      } catch (const UsageError&) {
        row.Fail(
            col("deadline"),
            "expected a duration (5400, 90m, 2h30m, 1-12:00:00) or none, got '" + deadline + "'");
      }
    }
    const bool trains = !job.network.empty() || !job.spec.empty();
    if (trains && job.epochs == 0)
      row.Fail(col(job.network.empty() ? "spec" : "network"), "needs Epochs in the same row");
    if (!job.spec.empty() && job.samples == 0)
      row.Fail(col("spec"), "needs Samples in the same row (a spec does not say its data's size)");
    if (!trains && job.elapsed_s <= 0) {
      note("line " + std::to_string(line_no) + ": " + job.id +
           " never ran and names no Network or Spec: nothing to replay");
      continue;
    }
    if (!any || job.submit_s < first_submit) first_submit = job.submit_s;
    any = true;
    trace.jobs.push_back(std::move(job));
  }
  if (names.empty()) throw UsageError(origin + ": no header line (an empty trace)");
  for (TraceJob& j : trace.jobs) j.submit_s -= first_submit;
  return trace;
}

Trace ReadTraceCsv(const std::string& path) {
  std::string text, why;
  if (!ReadFileText(path, size_t(1) << 30, &text, &why))
    throw UsageError(path + ": cannot read: " + why);
  const size_t slash = path.rfind('/');
  return ParseTraceCsv(text, path, slash == std::string::npos ? "." : path.substr(0, slash));
}

std::string TraceCsv(const Trace& trace) {
  bool specs = false;
  for (const TraceJob& j : trace.jobs) specs = specs || !j.spec.empty();
  std::string out = "JobID,Submit,Start,End,Timelimit,ReqTRES,NNodes,State,Network,";
  out += specs ? "Spec,Samples,Epochs,Deadline\n" : "Samples,Epochs,Deadline\n";
  char buf[160];
  for (const TraceJob& j : trace.jobs) {
    std::string tres = "billing=" + std::to_string(j.units) + ",";
    if (!j.device_type.empty())
      tres += "gres/gpu:" + j.device_type + "=" + std::to_string(j.units) + ",";
    tres += "gres/gpu=" + std::to_string(j.units);
    if (j.nodes > 0) tres += ",node=" + std::to_string(j.nodes);
    out += j.id + "," + Timestamp(j.submit_s) + ",Unknown,Unknown," + SlurmLimit(j.limit_s) + "," +
           tres + "," + (j.nodes > 0 ? std::to_string(j.nodes) : "") + ",PENDING," + j.network +
           ",";
    if (specs) out += j.spec + ",";
    std::snprintf(buf, sizeof buf, "%lld,%d,%s\n", (long long)j.samples, j.epochs,
                  j.deadline_s > 0 ? std::to_string(std::llround(j.deadline_s)).c_str() : "");
    out += buf;
  }
  return out;
}

}  // namespace dlh::replay
