// DLH — reading a CSV table of features and a label for `dlh-data import-csv`: one sample
// per row, numeric feature columns, one label column (whole numbers, or names that become
// classes in sorted order). RFC 4180 quoting; a header row is detected or forced.
#pragma once

#include <string>
#include <vector>

#include "launcher/data/import.hpp"

namespace dlh {

struct CsvOptions {
  std::string label_column;  // header name or 0-based index; empty: the last column
  enum class Header { kAuto, kYes, kNo } header = Header::kAuto;
  char delimiter = ',';
};

// Reads the table into split.floats (rows x features, shape 1 x 1 x features), split.labels
// and split.origins ("row N", 1-based as an editor shows it). When labels are names,
// *class_names receives them sorted and labels index into it; otherwise it is left empty.
// Throws DataError naming the file, the row and the column ("data.csv: row 12, column
// 'petal_len': 'abc' is not a number").
ImportedSplit ReadCsv(const std::string& path, const CsvOptions& options,
                      std::vector<std::string>* class_names);

}  // namespace dlh
