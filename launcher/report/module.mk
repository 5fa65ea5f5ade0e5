# launcher/report/: dlh-report, the run report (HTML, live, served). It reads what
# dlh-launch writes and links neither MPI nor HDF5: libdlh_report.a and common only (the
# unit tests link the library too).
REPORT_MAIN := launcher/report/main_report.cpp
REPORT_SRCS := $(filter-out $(REPORT_MAIN),$(wildcard launcher/report/*.cpp))
REPORT_LIB := $(LIBDIR)/libdlh_report.a
$(REPORT_LIB): $(REPORT_SRCS:%.cpp=$(OBJDIR)/%.o)

$(BINDIR)/dlh-report: $(OBJDIR)/launcher/report/main_report.o $(REPORT_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ -lboost_program_options -pthread -o $@

INSTALL_BINS += $(BINDIR)/dlh-report
all: $(REPORT_LIB) $(BINDIR)/dlh-report
launcher: $(BINDIR)/dlh-report
