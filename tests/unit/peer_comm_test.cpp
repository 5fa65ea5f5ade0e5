// peer_comm_test — launcher/comm/peer_comm.hpp with a fake communicator: a clean end destroys
// it, every error path aborts it (an exception unwinding, an asynchronous error, the
// watchdog), and an owner that also waits on the device aborts before it waits, so a rank
// that failed alone reaches MPI_Abort instead of hanging on a stalled peer.
#include "launcher/comm/peer_comm.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace dlh {
namespace {

std::vector<std::string> g_calls;  // what the fake library saw, in order

struct FakeComm {
  std::string name;
  bool failed = false;  // the fake's asynchronous error
};

struct FakeOps {
  using Handle = FakeComm*;
  static bool async_error(FakeComm* c) { return c->failed; }
  static void destroy(FakeComm* c) { g_calls.push_back("destroy " + c->name); }
  static void abort(FakeComm* c) { g_calls.push_back("abort " + c->name); }
};

// Like the GPU gradient sync: two communicators and a device wait in its destructor that
// only ends once queued collectives have (the fake records it).
struct FakeGradientSync {
  PeerComm<FakeOps> flat, local;
  ~FakeGradientSync() {
    if (Unwinding()) {
      flat.abort();
      local.abort();
    }
    g_calls.push_back("synchronize stream");
  }
};

class PeerCommTest : public ::testing::Test {
 protected:
  void SetUp() override { g_calls.clear(); }
  FakeComm a_{"a"}, b_{"b"};
};

TEST_F(PeerCommTest, ACleanEndDestroys) {
  { PeerComm<FakeOps> c(&a_); }
  EXPECT_EQ(g_calls, std::vector<std::string>{"destroy a"});
}

TEST_F(PeerCommTest, AnExceptionUnwindingAborts) {
  try {
    PeerComm<FakeOps> c(&a_);
    throw std::runtime_error("rank 1 failed alone");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(g_calls, std::vector<std::string>{"abort a"});
}

TEST_F(PeerCommTest, AnAsynchronousErrorAborts) {
  a_.failed = true;
  { PeerComm<FakeOps> c(&a_); }
  EXPECT_EQ(g_calls, std::vector<std::string>{"abort a"});
}

TEST_F(PeerCommTest, AnExplicitAbortClosesOnce) {
  {
    PeerComm<FakeOps> c(&a_);
    c.abort();
    EXPECT_FALSE(c);
  }
  EXPECT_EQ(g_calls, std::vector<std::string>{"abort a"});
}

TEST_F(PeerCommTest, MovingHandsOverWithoutClosing) {
  {
    PeerComm<FakeOps> c(&a_);
    PeerComm<FakeOps> d(std::move(c));
    EXPECT_FALSE(c);
    EXPECT_EQ(d.get(), &a_);
    EXPECT_TRUE(g_calls.empty());
  }
  EXPECT_EQ(g_calls, std::vector<std::string>{"destroy a"});
}

TEST_F(PeerCommTest, OnAnErrorPathTheCommunicatorsAreAbortedBeforeTheDeviceWait) {
  try {
    FakeGradientSync sync{PeerComm<FakeOps>(&a_), PeerComm<FakeOps>(&b_)};
    throw std::runtime_error("gradient allreduce did not finish within 300 s");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(g_calls, (std::vector<std::string>{"abort a", "abort b", "synchronize stream"}));
}

TEST_F(PeerCommTest, OnACleanEndTheDeviceWaitComesFirstThenTheDestroys) {
  { FakeGradientSync sync{PeerComm<FakeOps>(&a_), PeerComm<FakeOps>(&b_)}; }
  // Members are destroyed after the destructor's body, in reverse order.
  EXPECT_EQ(g_calls, (std::vector<std::string>{"synchronize stream", "destroy b", "destroy a"}));
}

TEST(ChooseCommClose, AbortUnlessAllIsWell) {
  EXPECT_EQ(ChooseCommClose(0, false), CommClose::Destroy);
  EXPECT_EQ(ChooseCommClose(1, false), CommClose::Abort);
  EXPECT_EQ(ChooseCommClose(0, true), CommClose::Abort);
}

}  // namespace
}  // namespace dlh
