// peer_watch_test — launcher/watch/peer_watch.hpp: the heartbeat format and the verdict a rank
// gives after waiting too long: a frozen or missing peer, one that ended, one alive and busy
// (more patience), all waiting (the network). The end-to-end case (a SIGSTOPped rank under
// mpirun) is tests/scripts/stall.sh.
#include "launcher/watch/peer_watch.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

constexpr double kNow = 1000000;

Heartbeat Beat(int rank, double age, const std::string& waiting_in = "", int64_t step = 7) {
  Heartbeat h;
  h.rank = rank;
  h.host = "node-" + std::to_string(rank);
  h.pid = 100 + rank;
  h.step = step;
  h.waiting_in = waiting_in;
  h.waiting_s = waiting_in.empty() ? 0 : 6;
  h.time = kNow - age;
  h.run_id = "run";
  h.node = "n" + std::to_string(rank);
  return h;
}

TEST(Heartbeat, RoundTrips) {
  Heartbeat h = Beat(3, 0, "MPI_Allreduce", 42);
  h.finished = true;
  const Heartbeat back = ParseHeartbeat(HeartbeatJson(h));
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.host, "node-3");
  EXPECT_EQ(back.pid, 103);
  EXPECT_EQ(back.step, 42);
  EXPECT_EQ(back.waiting_in, "MPI_Allreduce");
  EXPECT_DOUBLE_EQ(back.waiting_s, 6);
  EXPECT_DOUBLE_EQ(back.time, kNow);
  EXPECT_EQ(back.run_id, "run");
  EXPECT_TRUE(back.finished);
  EXPECT_EQ(back.node, "n3");
  EXPECT_TRUE(ParseHeartbeat(HeartbeatJson(Beat(0, 0))).waiting_in.empty());
  h.idle_s = 12.5;
  EXPECT_DOUBLE_EQ(ParseHeartbeat(HeartbeatJson(h)).idle_s, 12.5);
  EXPECT_EQ(HeartbeatJson(h).find("checkpoint"), std::string::npos);  // none yet: no field
  h.checkpoint = "run/checkpoints/ckpt-000000050.h5";
  EXPECT_EQ(ParseHeartbeat(HeartbeatJson(h)).checkpoint, h.checkpoint);
}

TEST(Heartbeat, OneWithoutNodeOrIdleTimeStillReads) {
  const Heartbeat h = ParseHeartbeat(
      R"({"rank":1,"host":"a","pid":5,"step":2,"run_id":"r","time":1.0,"finished":false})");
  EXPECT_EQ(h.node, "");
  EXPECT_DOUBLE_EQ(h.idle_s, 0);
}

TEST(Heartbeat, RefusesWhatIsNotOne) {
  EXPECT_THROW(ParseHeartbeat(""), Error);
  EXPECT_THROW(ParseHeartbeat("{\"rank\": 1}"), Error);
  EXPECT_THROW(ParseHeartbeat("{\"rank\": 1, \"host\": \"a\""), Error);  // half written
}

TEST(JudgeStall, WaitsUntilTheTimeout) {
  const std::vector<Heartbeat> beats = {Beat(0, 0, "MPI_Allreduce"), Beat(1, 60)};
  EXPECT_FALSE(JudgeStall(beats, 0, 4.9, 5, kNow, 2).abort);
  EXPECT_TRUE(JudgeStall(beats, 0, 5.1, 5, kNow, 2).abort);
}

TEST(JudgeStall, NamesTheFrozenRank) {
  const std::vector<Heartbeat> beats = {Beat(0, 0, "MPI_Allreduce"), Beat(1, 0.5, "MPI_Allreduce"),
                                        Beat(2, 9, "", 41)};
  const StallVerdict v = JudgeStall(beats, 0, 6, 5, kNow, 2);
  EXPECT_TRUE(v.abort);
  EXPECT_EQ(v.culprit, "stopped answering: rank 2 (node-2), pid 102, silent for 9 s");
  EXPECT_EQ(v.culprit_nodes, std::vector<std::string>{"n2"});
}

TEST(JudgeStall, APeerAliveButIdleHangs) {
  // Rank 1 writes heartbeats but has used no CPU and moved no bytes for longer than the
  // timeout: not busy, hung; its node is named for the requeue to leave out.
  Heartbeat hung = Beat(1, 0.2, "", 12);
  hung.idle_s = 5.5;
  const StallVerdict v = JudgeStall({Beat(0, 0, "MPI_Allreduce"), hung}, 0, 6, 5, kNow, 2);
  EXPECT_TRUE(v.abort);
  EXPECT_EQ(v.culprit, "hangs outside MPI: rank 1 (node-1) at step 12, no CPU time or I/O for 6 s");
  EXPECT_EQ(v.culprit_nodes, std::vector<std::string>{"n1"});
  hung.idle_s = 4;  // idle for less than the timeout: busy, as before
  EXPECT_FALSE(JudgeStall({Beat(0, 0, "MPI_Allreduce"), hung}, 0, 6, 5, kNow, 2).abort);
}

TEST(CommTimeoutFromArguments, ReadsTheOptionBeforeItIsParsed) {
  auto of = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return CommTimeoutFromArguments(int(argv.size()), argv.data());
  };
  EXPECT_DOUBLE_EQ(of({"dlh-launch", "train", "s.json"}), kDefaultCommTimeoutS);
  EXPECT_DOUBLE_EQ(of({"dlh-launch", "train", "--comm-timeout", "5", "s.json"}), 5);
  EXPECT_DOUBLE_EQ(of({"dlh-launch", "train", "--comm-timeout=2.5"}), 2.5);
  // Not a positive number: the default here, the option parser says what is wrong.
  EXPECT_DOUBLE_EQ(of({"dlh-launch", "train", "--comm-timeout", "x"}), kDefaultCommTimeoutS);
  EXPECT_DOUBLE_EQ(of({"dlh-launch", "train", "--comm-timeout", "-1"}), kDefaultCommTimeoutS);
  EXPECT_DOUBLE_EQ(of({"dlh-launch", "train", "--comm-timeout"}), kDefaultCommTimeoutS);
  // A program's own option after `--` is not this one.
  EXPECT_DOUBLE_EQ(of({"dlh-launch", "run", "--", "prog", "--comm-timeout", "5"}),
                   kDefaultCommTimeoutS);
}

TEST(JudgeStall, ARankWithoutHeartbeatStoppedAnswering) {
  std::vector<Heartbeat> beats = {Beat(0, 0, "MPI_Allreduce"), Heartbeat{}};
  const StallVerdict v = JudgeStall(beats, 0, 6, 5, kNow, 2);
  EXPECT_TRUE(v.abort);
  EXPECT_EQ(v.culprit, "stopped answering: rank 1 (no heartbeat from it)");
}

TEST(JudgeStall, ABusyPeerGetsFourTimeouts) {
  // Rank 1 is alive and not in an MPI call: computing or writing a checkpoint.
  const std::vector<Heartbeat> beats = {Beat(0, 0, "MPI_Bcast"), Beat(1, 0.2)};
  EXPECT_FALSE(JudgeStall(beats, 0, 6, 5, kNow, 2).abort);
  EXPECT_FALSE(JudgeStall(beats, 0, 19, 5, kNow, 2).abort);
  const StallVerdict v = JudgeStall(beats, 0, 21, 5, kNow, 2);
  EXPECT_TRUE(v.abort);
  EXPECT_EQ(v.culprit, "alive but not reaching the call for 21 s: rank 1 (node-1) at step 7");
}

TEST(JudgeStall, EveryoneWaitingMeansTheNetwork) {
  const std::vector<Heartbeat> beats = {Beat(0, 0, "MPI_Allreduce"), Beat(1, 0.3, "MPI_Allreduce")};
  const StallVerdict v = JudgeStall(beats, 0, 6, 5, kNow, 2);
  EXPECT_TRUE(v.abort);
  EXPECT_NE(v.culprit.find("every rank is alive and waiting (rank 1 (node-1) in MPI_Allreduce"),
            std::string::npos)
      << v.culprit;
  EXPECT_NE(v.culprit.find("network"), std::string::npos);
}

TEST(JudgeStall, APeerThatEndedItsRun) {
  Heartbeat done = Beat(1, 30);
  done.finished = true;  // old, but finished is not frozen
  const StallVerdict v = JudgeStall({Beat(0, 0, "MPI_Allreduce"), done}, 0, 6, 5, kNow, 2);
  EXPECT_TRUE(v.abort);
  EXPECT_EQ(v.culprit, "a peer ended its run while this one waits: rank 1 (node-1) at step 7");
}

TEST(JudgeStall, WithoutHeartbeatsOnlyTheTimeout) {
  const StallVerdict v = JudgeStall({}, 0, 6, 5, kNow, 2);
  EXPECT_TRUE(v.abort);
  EXPECT_EQ(v.culprit, "a peer stopped answering (no heartbeats say which)");
}

// The CUDA backend's copy of this module forwards its waits to the launcher's (the test
// binary has one copy, so the "launcher" here is a pair of recording functions).
std::vector<std::string> g_forwarded;
void RecordEnter(const char* call) { g_forwarded.push_back(std::string("enter ") + call); }
void RecordLeave() { g_forwarded.push_back("leave"); }

TEST(PeerWaitForwarding, ABackendsWaitsReachTheLaunchersWatch) {
  g_forwarded.clear();
  PeerWaitHooks hooks;
  hooks.enter = &RecordEnter;
  hooks.leave = &RecordLeave;
  ForwardPeerWaits(hooks);
  { PeerWait wait("MPI_Bcast(&id, ...)"); }
  ForwardPeerWaits(PeerWaitHooks{});  // back to this module's own (unstarted) watch
  peer_watch_detail::active.store(false);
  { PeerWait wait("MPI_Barrier(comm)"); }
  EXPECT_EQ(g_forwarded, (std::vector<std::string>{"enter MPI_Bcast(&id, ...)", "leave"}));
}

TEST(PeerWaitForwarding, TheHooksOfThisModuleAreItsEnterAndLeave) {
  const PeerWaitHooks hooks = PeerWaitHooksOfThisModule();
  EXPECT_EQ(hooks.enter, &peer_watch_detail::Enter);
  EXPECT_EQ(hooks.leave, &peer_watch_detail::Leave);
}

}  // namespace
}  // namespace dlh
