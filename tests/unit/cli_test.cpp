// Tests for common/cli.cpp: the subcommand parser of dlh-launch, dlh-data and dlh-estimate.
#include "common/cli.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlh {
namespace {

namespace po = boost::program_options;

// A subcommand like dlh-estimate predict: --help, a required --calibration, an int --batch.
struct Predict {
  Predict() {
    options.add_options()("help,h", "show this help")(
        "calibration", po::value(&calibration)->required(), "calibration file")(
        "batch", po::value(&batch)->default_value(0), "local batch");
    syntax.positional = {{"SPEC", "missing SPEC"}};
    syntax.prefix = "predict: ";
    syntax.suffix = " (see tool predict --help)";
  }
  ParseResult Parse(const std::vector<std::string>& args) {
    vm = po::variables_map();  // a fresh map per command line, as every tool has
    return ParseSubcommand(args, options, syntax, &vm);
  }
  // The UsageError message of parsing `args`, or "" if there is none.
  std::string Error(const std::vector<std::string>& args) {
    try {
      Parse(args);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }
  po::options_description options{"options"};
  SubcommandSyntax syntax;
  po::variables_map vm;
  std::string calibration;
  int batch = -1;
};

TEST(ParseSubcommand, RunsWithOptionsAndPositionalArguments) {
  Predict p;
  EXPECT_EQ(p.Parse({"spec.json", "--calibration", "cal.json", "--batch", "32"}),
            ParseResult::kRun);
  EXPECT_EQ(p.vm["SPEC"].as<std::string>(), "spec.json");
  EXPECT_EQ(p.calibration, "cal.json");
  EXPECT_EQ(p.batch, 32);
}

TEST(ParseSubcommand, DefaultsAreStoredInBoundVariables) {
  Predict p;
  ASSERT_EQ(p.Parse({"--calibration=c.json", "s.json"}), ParseResult::kRun);
  EXPECT_EQ(p.batch, 0);
}

TEST(ParseSubcommand, HelpStopsWithoutCheckingAnything) {
  for (const char* help : {"--help", "-h"}) {
    Predict p;  // neither SPEC nor the required --calibration
    EXPECT_EQ(p.Parse({help}), ParseResult::kStop) << help;
    EXPECT_EQ(p.batch, -1) << "values are not stored when help stops the command";
  }
}

TEST(ParseSubcommand, HelpComesBeforeRequiredOptions) {
  // dlh-estimate predict|validate|recommend --help used to fail with exit 2 while a
  // required option was missing.
  Predict p;
  EXPECT_EQ(p.Parse({"--help"}), ParseResult::kStop);
  Predict q;
  EXPECT_EQ(q.Parse({"--help", "--calibration", "c.json"}), ParseResult::kStop);
}

TEST(ParseSubcommand, UnknownOptionIsAUsageErrorNamingIt) {
  Predict p;
  EXPECT_EQ(p.Error({"s.json", "--calibration", "c", "--bogus"}),
            "predict: unrecognised option '--bogus' (see tool predict --help)");
}

TEST(ParseSubcommand, MalformedValueIsAUsageErrorNamingTheOption) {
  Predict p;
  const std::string msg = p.Error({"s.json", "--calibration", "c", "--batch", "many"});
  EXPECT_EQ(msg.rfind("predict: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("--batch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("many"), std::string::npos) << msg;
}

TEST(ParseSubcommand, MissingValueIsAUsageError) {
  Predict p;
  EXPECT_EQ(p.Error({"s.json", "--calibration"}),
            "predict: the required argument for option '--calibration' is missing "
            "(see tool predict --help)");
}

TEST(ParseSubcommand, MissingRequiredOptionIsAUsageError) {
  Predict p;
  EXPECT_EQ(p.Error({"s.json"}),
            "predict: the option '--calibration' is required but missing "
            "(see tool predict --help)");
}

TEST(ParseSubcommand, MissingPositionalArgumentIsAUsageError) {
  Predict p;
  EXPECT_EQ(p.Error({"--calibration", "c.json"}),
            "predict: missing SPEC (see tool predict --help)");
}

TEST(ParseSubcommand, RequiredOptionsAreReportedBeforePositionalArguments) {
  Predict p;
  EXPECT_EQ(p.Error({}),
            "predict: the option '--calibration' is required but missing "
            "(see tool predict --help)");
}

TEST(ParseSubcommand, OptionalPositionalArgumentMayBeAbsent) {
  Predict p;
  p.syntax.positional = {{"SPEC", ""}};
  EXPECT_EQ(p.Parse({"--calibration", "c.json"}), ParseResult::kRun);
  EXPECT_EQ(p.vm.count("SPEC"), 0u);
}

TEST(ParseSubcommand, TooManyPositionalArgumentsIsAUsageError) {
  Predict p;
  EXPECT_EQ(p.Error({"a.json", "b.json", "--calibration", "c"}),
            "predict: too many positional options have been specified on the command line "
            "(see tool predict --help)");
  Predict none;
  none.syntax.positional.clear();
  EXPECT_NE(none.Error({"a.json", "--calibration", "c"}), "");
}

TEST(ParseSubcommand, ExtraArgumentsIgnoredWhenAsked) {
  Predict p;
  p.syntax.positional.clear();
  p.syntax.ignore_extra_arguments = true;  // dlh-launch bench-*
  EXPECT_EQ(p.Parse({"stray", "--calibration", "c"}), ParseResult::kRun);
  EXPECT_EQ(p.calibration, "c");
}

TEST(ParseSubcommand, PositionalArgumentCanFillAVisibleOption) {
  // dlh-data inspect: FILE is also --file.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"d.h5"}, std::vector<std::string>{"--file", "d.h5"}}) {
    po::options_description options("options");
    std::string file;
    options.add_options()("file", po::value(&file)->required(), "data set");
    SubcommandSyntax syntax;
    syntax.positional = {{"file", ""}};
    po::variables_map vm;
    ASSERT_EQ(ParseSubcommand(args, options, syntax, &vm), ParseResult::kRun);
    EXPECT_EQ(file, "d.h5");
  }
}

TEST(ParseSubcommand, PrecheckRunsAfterHelpAndBeforeRequiredOptions) {
  Predict p;
  int calls = 0;
  p.syntax.precheck = [&](const po::variables_map& vm) {
    ++calls;
    if (!vm.count("calibration")) throw UsageError("give a calibration");
  };
  EXPECT_EQ(p.Parse({"--help"}), ParseResult::kStop);
  EXPECT_EQ(calls, 0);
  // The precheck's own error, unchanged: not Program_options' "required but missing".
  EXPECT_EQ(p.Error({"s.json"}), "give a calibration");
  EXPECT_EQ(calls, 1);
}

TEST(ParseSubcommand, EmptyPrefixAndSuffixLeaveTheBareProblem) {
  Predict p;
  p.syntax.prefix.clear();
  p.syntax.suffix.clear();
  EXPECT_EQ(p.Error({"--bogus"}), "unrecognised option '--bogus'");
}

}  // namespace
}  // namespace dlh
